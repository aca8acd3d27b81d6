// lmsim/io/hdf5.hpp — small, columnar HDF5 output (and read-back for tests and tools).
//
// Owns: writing groups, 1-D datasets (double, int64, variable-length UTF-8 strings) and scalar attributes, so
// every result is readable with h5py and h5dump; atomic commit (a temporary file renamed at the end: an
// interrupted or failed run never leaves a file at the final path).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lmsim::io {

class H5Writer {
 public:
  explicit H5Writer(std::string final_path);
  ~H5Writer();  // without commit(): closes and deletes the temporary file
  H5Writer(const H5Writer&) = delete;
  H5Writer& operator=(const H5Writer&) = delete;

  void group(const std::string& path);  // creates intermediate groups
  void write(const std::string& path, const std::vector<double>& v);
  void write(const std::string& path, const std::vector<std::int64_t>& v);
  void write(const std::string& path, const std::vector<std::string>& v);
  void attr(const std::string& object, const std::string& name, const std::string& value);
  void attr(const std::string& object, const std::string& name, double value);
  void attr(const std::string& object, const std::string& name, std::int64_t value);
  void commit();
  const std::string& temp_path() const { return tmp_; }

 private:
  std::string final_, tmp_;
  std::int64_t file_ = -1;
  bool committed_ = false;
  bool write_through_ = false;  // the target is a character device: build in the temp folder, then stream
};

// Read-back helpers (tests, tools). Throw InputError on a missing object.
std::vector<double> h5_read_doubles(const std::string& file, const std::string& path);
std::vector<std::int64_t> h5_read_ints(const std::string& file, const std::string& path);
std::vector<std::string> h5_read_strings(const std::string& file, const std::string& path);
std::string h5_read_string_attr(const std::string& file, const std::string& object, const std::string& name);
double h5_read_double_attr(const std::string& file, const std::string& object, const std::string& name);
bool h5_exists(const std::string& file, const std::string& path);

}  // namespace lmsim::io
