// lmsim/io/hdf5.hpp — small, columnar HDF5 output (and read-back for tests and tools).
//
// Owns: writing groups, 1-D datasets (double, int64, int32, booleans and enumerations as HDF5 enums that h5py
// reads as numpy bool / int8, variable-length UTF-8 strings) and scalar attributes, so every result is readable
// with h5py and h5dump; columns written in slabs (memory O(slab) for tables of any length); atomic commit (a
// temporary file renamed at the end: an interrupted or failed run never leaves a file at the final path).
// Every handle is owned and closed in order (datasets before the file), also when a write fails. Numeric datasets
// carry a `units` attribute read off their names (`_s` s, `_bytes` bytes, `_pct` %, `mfu` 1, ...).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lmsim::io {

enum class H5Type { f64, i64, i32 };

// Call before any HDF5 function (every lmsim entry point does).
void hdf5_init();

class H5Writer {
 public:
  using ColumnId = std::size_t;
  explicit H5Writer(std::string final_path);
  ~H5Writer();  // without commit(): closes and deletes the temporary file
  H5Writer(const H5Writer&) = delete;
  H5Writer& operator=(const H5Writer&) = delete;

  void group(const std::string& path);  // creates intermediate groups
  void write(const std::string& path, const std::vector<double>& v);
  void write(const std::string& path, const std::vector<std::int64_t>& v);
  void write(const std::string& path, const std::vector<std::string>& v);
  void write_bools(const std::string& path, const std::vector<bool>& v);  // HDF5 enum {FALSE, TRUE}
  // A column of n values written later in slabs with write_at (values in the column's native type: double,
  // int64_t, int32_t; enum columns take int8_t codes into `names`).
  ColumnId column(const std::string& path, H5Type type, std::size_t n);
  ColumnId enum_column(const std::string& path, const std::vector<std::string>& names, std::size_t n);
  void write_at(ColumnId c, std::size_t offset, const void* data, std::size_t count);
  void attr(const std::string& object, const std::string& name, const std::string& value);
  void attr(const std::string& object, const std::string& name, double value);
  void attr(const std::string& object, const std::string& name, std::int64_t value);
  void commit();
  const std::string& temp_path() const { return tmp_; }

 private:
  std::string final_, tmp_;
  void close_columns();
  ColumnId add_column(const std::string& path, std::int64_t type, std::size_t n, bool units);  // owns `type`
  std::int64_t file_ = -1;
  struct Column {
    std::int64_t dataset, type;
    std::string path;
  };
  std::vector<Column> columns_;
  bool committed_ = false;
  bool write_through_ = false;  // the target is a character device: build in the temp folder, then stream
};

// Read-back helpers (tests, tools). Throw InputError on a missing object.
std::vector<double> h5_read_doubles(const std::string& file, const std::string& path);
std::vector<std::int64_t> h5_read_ints(const std::string& file, const std::string& path);  // also bools, enums
std::vector<std::string> h5_read_strings(const std::string& file, const std::string& path);
std::string h5_read_string_attr(const std::string& file, const std::string& object, const std::string& name);
double h5_read_double_attr(const std::string& file, const std::string& object, const std::string& name);
bool h5_exists(const std::string& file, const std::string& path);

}  // namespace lmsim::io
