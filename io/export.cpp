#include "io/export.hpp"

#include <hdf5.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "io/csv.hpp"
#include "io/error.hpp"
#include "io/hdf5.hpp"

namespace fs = std::filesystem;

namespace lmsim::io {

namespace {

constexpr hsize_t kSlab = 1 << 20;

// One column: a 1-D dataset read slab by slab into text cells.
class Column {
 public:
  Column(hid_t file, std::string path, std::string name) : path_(std::move(path)), name_(std::move(name)) {
    ds_ = H5Dopen2(file, path_.c_str(), H5P_DEFAULT);
    type_ = H5Dget_type(ds_);
    cls_ = H5Tget_class(type_);
    hid_t sp = H5Dget_space(ds_);
    H5Sget_simple_extent_dims(sp, &n_, nullptr);
    H5Sclose(sp);
  }
  ~Column() {
    H5Tclose(type_);
    H5Dclose(ds_);
  }
  Column(const Column&) = delete;
  Column& operator=(const Column&) = delete;
  hsize_t size() const { return n_; }
  const std::string& name() const { return name_; }
  // Cells [lo, lo + count) as text.
  void read(hsize_t lo, hsize_t count, std::vector<std::string>& cells) const {
    cells.assign(count, "");
    hid_t fs_ = H5Dget_space(ds_);
    H5Sselect_hyperslab(fs_, H5S_SELECT_SET, &lo, nullptr, &count, nullptr);
    hid_t ms = H5Screate_simple(1, &count, nullptr);
    if (cls_ == H5T_FLOAT) {
      std::vector<double> v(count);
      H5Dread(ds_, H5T_NATIVE_DOUBLE, ms, fs_, H5P_DEFAULT, v.data());
      char buf[32];
      for (hsize_t i = 0; i < count; ++i) {
        std::snprintf(buf, sizeof buf, "%.17g", v[i]);
        cells[i] = buf;
      }
    } else if (cls_ == H5T_INTEGER) {
      std::vector<long long> v(count);
      H5Dread(ds_, H5T_NATIVE_LLONG, ms, fs_, H5P_DEFAULT, v.data());
      for (hsize_t i = 0; i < count; ++i) cells[i] = std::to_string(v[i]);
    } else if (cls_ == H5T_ENUM) {  // booleans and enumerations: their names
      hid_t mt = H5Tget_native_type(type_, H5T_DIR_ASCEND);
      std::vector<std::int8_t> v(count);
      H5Dread(ds_, mt, ms, fs_, H5P_DEFAULT, v.data());
      char name[128];
      for (hsize_t i = 0; i < count; ++i) {
        if (H5Tenum_nameof(mt, &v[i], name, sizeof name) < 0) name[0] = 0;
        cells[i] = name;
      }
      H5Tclose(mt);
    } else if (cls_ == H5T_STRING) {
      hid_t mt = H5Tcopy(H5T_C_S1);
      H5Tset_size(mt, H5T_VARIABLE);
      H5Tset_cset(mt, H5T_CSET_UTF8);
      std::vector<char*> v(count, nullptr);
      H5Dread(ds_, mt, ms, fs_, H5P_DEFAULT, v.data());
      for (hsize_t i = 0; i < count; ++i) {
        cells[i] = v[i] ? v[i] : "";
        H5free_memory(v[i]);
      }
      H5Tclose(mt);
    }
    H5Sclose(ms);
    H5Sclose(fs_);
  }

 private:
  std::string path_, name_;
  hid_t ds_ = -1, type_ = -1;
  H5T_class_t cls_;
  hsize_t n_ = 0;
};

std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

struct Table {
  std::vector<std::pair<std::string, std::string>> columns;  // (dataset path, column name)
};

// Tables: for each group, its 1-D datasets and those of nested groups (as prefix/name), in creation order.
herr_t visit(hid_t obj, const char* name, const H5O_info_t* info, void* data) {
  if (info->type != H5O_TYPE_DATASET) return 0;
  auto& tables = *static_cast<std::map<std::string, Table>*>(data);
  const std::string path = std::string("/") + name;
  hid_t ds = H5Dopen2(obj, path.c_str(), H5P_DEFAULT);
  hid_t sp = H5Dget_space(ds);
  const int rank = H5Sget_simple_extent_ndims(sp);
  H5Sclose(sp);
  H5Dclose(ds);
  if (rank != 1) return 0;
  // The table is the top-level group; deeper groups become column prefixes.
  const auto first = path.find('/', 1);
  const std::string table = first == std::string::npos ? "/" : path.substr(0, first);
  const std::string column = first == std::string::npos ? path.substr(1) : path.substr(first + 1);
  tables[table].columns.emplace_back(path, column);
  return 0;
}

}  // namespace

std::vector<std::string> export_csv(const std::string& h5_file, const std::string& out_dir) {
  hdf5_init();
  std::error_code ec;
  if (!fs::is_regular_file(h5_file, ec)) throw InputError(h5_file, 0, "", "no such HDF5 file");
  note_input(h5_file);
  hid_t f = H5Fopen(h5_file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) throw InputError(h5_file, 0, "", "not an HDF5 file");
  std::unique_ptr<void, void (*)(void*)> closer(reinterpret_cast<void*>(static_cast<std::intptr_t>(f)), [](void* p) {
    H5Fclose(static_cast<hid_t>(reinterpret_cast<std::intptr_t>(p)));
  });
  std::map<std::string, Table> tables;
  H5Ovisit2(f, H5_INDEX_CRT_ORDER, H5_ITER_NATIVE, visit, &tables, H5O_INFO_BASIC);
  if (tables.empty()) {  // files written without creation-order tracking: name order
    H5Ovisit2(f, H5_INDEX_NAME, H5_ITER_NATIVE, visit, &tables, H5O_INFO_BASIC);
  }
  fs::create_directories(out_dir, ec);
  if (!fs::is_directory(out_dir, ec)) throw InputError(out_dir, 0, "", "cannot create the output folder");
  std::vector<std::string> written;
  for (const auto& [name, t] : tables) {
    // Columns of the table's most common length (a table's datasets share it).
    std::vector<std::unique_ptr<Column>> cols;
    std::map<hsize_t, int> lengths;
    for (const auto& [path, col] : t.columns) {
      cols.push_back(std::make_unique<Column>(f, path, col));
      ++lengths[cols.back()->size()];
    }
    hsize_t n = 0;
    int best = -1;
    for (const auto& [len, count] : lengths)
      if (count > best) {
        best = count;
        n = len;
      }
    std::erase_if(cols, [n](const std::unique_ptr<Column>& c) { return c->size() != n; });
    std::string file = name == "/" ? "root" : name.substr(1);
    for (auto& ch : file)
      if (ch == '/') ch = '_';
    const std::string out = (fs::path(out_dir) / (file + ".csv")).string();
    check_output(out);
    const std::string tmp = out + ".tmp";
    {
      std::ofstream o(tmp, std::ios::binary | std::ios::trunc);
      for (std::size_t c = 0; c < cols.size(); ++c) o << (c ? "," : "") << csv_cell(cols[c]->name());
      o << "\n";
      std::vector<std::vector<std::string>> cells(cols.size());
      for (hsize_t lo = 0; lo < n; lo += kSlab) {
        const hsize_t count = std::min(kSlab, n - lo);
        for (std::size_t c = 0; c < cols.size(); ++c) cols[c]->read(lo, count, cells[c]);
        for (hsize_t i = 0; i < count; ++i) {
          for (std::size_t c = 0; c < cols.size(); ++c) o << (c ? "," : "") << csv_cell(cells[c][i]);
          o << "\n";
        }
      }
      o.flush();
      if (!o) {
        o.close();
        fs::remove(tmp, ec);
        throw InputError(out, 0, "", "write failed (disk full?)");
      }
    }
    fs::rename(tmp, out, ec);
    if (ec) throw InputError(out, 0, "", "cannot rename into place: " + ec.message());
    written.push_back(out);
  }
  return written;
}

}  // namespace lmsim::io
