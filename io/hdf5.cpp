#include "io/hdf5.hpp"

#include <hdf5.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>

#include "io/csv.hpp"
#include "io/error.hpp"

namespace lmsim::io {

// Before HDF5's first call: no library shutdown at exit. Every handle is closed by its owner; a file whose close
// failed (a full disk) stays registered, and HDF5 1.10's exit-time shutdown would crash closing it again.
void hdf5_init() {
  static const bool once = [] {
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // errors are reported through InputError
    return true;
  }();
  (void)once;
}

namespace {

void check(herr_t rc, const std::string& file, const std::string& what) {
  if (rc < 0) throw InputError(file, 0, what, "HDF5 write failed (disk full or not writable?)");
}

hid_t string_type() {
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  return t;
}

void ensure_parents(hid_t file, const std::string& path) {
  std::size_t pos = 1;
  while ((pos = path.find('/', pos)) != std::string::npos) {
    const std::string sub = path.substr(0, pos);
    if (H5Lexists(file, sub.c_str(), H5P_DEFAULT) <= 0) {
      hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE);  // columns keep the order they were written in (lmsim export)
      H5Pset_link_creation_order(gcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
      hid_t g = H5Gcreate2(file, sub.c_str(), H5P_DEFAULT, gcpl, H5P_DEFAULT);
      H5Pclose(gcpl);
      H5Gclose(g);
    }
    ++pos;
  }
}

// The unit of a dataset, from its name (the project's names carry their units: `_s`, `_bytes`, `_pct`, ...).
std::string units_of(const std::string& path) {
  std::string name = path.substr(path.rfind('/') + 1);
  static const std::regex percentile(R"(_p[0-9][0-9]$)");
  name = std::regex_replace(name, percentile, "");
  static const std::pair<const char*, const char*> exact[] = {{"mfu", "1 (model FLOP/s over peak)"},
                                                              {"model_tflops_per_device", "TFLOP/s"},
                                                              {"tokens_per_s_per_device", "tokens/s"},
                                                              {"p_fits", "1 (probability)"},
                                                              {"p_within_5pct_of_best", "1 (probability)"}};
  for (const auto& [n, u] : exact)
    if (name == n) return u;
  static const std::pair<const char*, const char*> suffix[] = {{"_ms", "ms"},       {"_us", "us"},   {"_s", "s"},
                                                               {"_bytes", "bytes"}, {"_gib", "GiB"}, {"_pct", "%"}};
  for (const auto& [x, u] : suffix) {
    const std::string sx = x;
    if (name.size() > sx.size() && name.compare(name.size() - sx.size(), sx.size(), sx) == 0) return u;
  }
  return "";
}

void set_units(hid_t ds, const std::string& path) {
  const std::string u = units_of(path);
  if (u.empty()) return;
  hid_t t = string_type();
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(ds, "units", t, space, H5P_DEFAULT, H5P_DEFAULT);
  const char* p = u.c_str();
  if (a >= 0) {
    H5Awrite(a, t, &p);
    H5Aclose(a);
  }
  H5Sclose(space);
  H5Tclose(t);
}

template <class Fn>
void write_1d(hid_t file, const std::string& fname, const std::string& path, hid_t type, std::size_t n, Fn&& data) {
  ensure_parents(file, path);
  hsize_t dims[1] = {static_cast<hsize_t>(n)};
  hid_t space = H5Screate_simple(1, dims, nullptr);
  hid_t ds = H5Dcreate2(file, path.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (ds < 0) {
    H5Sclose(space);
    throw InputError(fname, 0, path, "cannot create dataset");
  }
  herr_t rc = n ? H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data()) : 0;
  if (H5Tget_class(type) != H5T_STRING && H5Tget_class(type) != H5T_ENUM) set_units(ds, path);
  H5Dclose(ds);
  H5Sclose(space);
  check(rc, fname, path);
}

template <class Fn>
void write_attr(hid_t file, const std::string& fname, const std::string& object, const std::string& name, hid_t type,
                Fn&& data) {
  hid_t obj = H5Oopen(file, object.c_str(), H5P_DEFAULT);
  if (obj < 0) throw InputError(fname, 0, object, "no such object for attribute " + name);
  hid_t space = H5Screate(H5S_SCALAR);
  if (H5Aexists(obj, name.c_str()) > 0) H5Adelete(obj, name.c_str());
  hid_t a = H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT);
  herr_t rc = H5Awrite(a, type, data());
  H5Aclose(a);
  H5Sclose(space);
  H5Oclose(obj);
  check(rc, fname, object + "@" + name);
}

struct ReadFile {
  hid_t id;
  explicit ReadFile(const std::string& f) {
    hdf5_init();
    if (!std::filesystem::exists(f)) throw InputError(f, 0, "", "HDF5 file does not exist");
    note_input(f);
    id = H5Fopen(f.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (id < 0) throw InputError(f, 0, "", "not an HDF5 file");
  }
  ~ReadFile() { H5Fclose(id); }
};

hid_t open_ds(hid_t f, const std::string& file, const std::string& path, std::size_t& n) {
  if (H5Lexists(f, path.c_str(), H5P_DEFAULT) <= 0) throw InputError(file, 0, path, "no such dataset");
  hid_t ds = H5Dopen2(f, path.c_str(), H5P_DEFAULT);
  hid_t sp = H5Dget_space(ds);
  hsize_t dims[1] = {0};
  H5Sget_simple_extent_dims(sp, dims, nullptr);
  H5Sclose(sp);
  n = static_cast<std::size_t>(dims[0]);
  return ds;
}

}  // namespace

H5Writer::H5Writer(std::string final_path) : final_(std::move(final_path)) {
  hdf5_init();
  write_through_ = check_output_ahead(final_, "") == OutputMode::write_through;
  tmp_ = write_through_
             ? (std::filesystem::temp_directory_path() / ("lmsim." + std::to_string(::getpid()) + ".h5")).string()
             : final_ + ".tmp." + std::to_string(::getpid());
  hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
  H5Pset_link_creation_order(fcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
  file_ = H5Fcreate(tmp_.c_str(), H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
  H5Pclose(fcpl);
  if (file_ < 0) throw InputError(final_, 0, "", "cannot create HDF5 file");
}

static hid_t bool_type() {
  hid_t t = H5Tenum_create(H5T_NATIVE_INT8);
  for (std::int8_t v : {0, 1}) H5Tenum_insert(t, v ? "TRUE" : "FALSE", &v);
  return t;
}

void H5Writer::close_columns() {
  for (auto& c : columns_) {
    H5Dclose(c.dataset);
    H5Tclose(c.type);
  }
  columns_.clear();
}

H5Writer::~H5Writer() {
  close_columns();
  if (file_ >= 0) H5Fclose(file_);
  if (!committed_) std::remove(tmp_.c_str());
}

void H5Writer::group(const std::string& path) { ensure_parents(file_, path + "/"); }

void H5Writer::write(const std::string& path, const std::vector<double>& v) {
  write_1d(file_, final_, path, H5T_NATIVE_DOUBLE, v.size(), [&] { return v.data(); });
}
void H5Writer::write(const std::string& path, const std::vector<std::int64_t>& v) {
  write_1d(file_, final_, path, H5T_NATIVE_INT64, v.size(), [&] { return v.data(); });
}
void H5Writer::write(const std::string& path, const std::vector<std::string>& v) {
  std::vector<const char*> p;
  p.reserve(v.size());
  for (const auto& s : v) p.push_back(s.c_str());
  hid_t t = string_type();
  write_1d(file_, final_, path, t, v.size(), [&] { return p.data(); });
  H5Tclose(t);
}
void H5Writer::write_bools(const std::string& path, const std::vector<bool>& v) {
  std::vector<std::int8_t> b(v.begin(), v.end());
  hid_t t = bool_type();
  write_1d(file_, final_, path, t, b.size(), [&] { return b.data(); });
  H5Tclose(t);
}

H5Writer::ColumnId H5Writer::column(const std::string& path, H5Type type, std::size_t n) {
  const hid_t native = type == H5Type::f64   ? H5T_NATIVE_DOUBLE
                       : type == H5Type::i64 ? H5T_NATIVE_INT64
                                             : H5T_NATIVE_INT32;
  return add_column(path, H5Tcopy(native), n, true);
}

H5Writer::ColumnId H5Writer::enum_column(const std::string& path, const std::vector<std::string>& names,
                                         std::size_t n) {
  hid_t t = H5Tenum_create(H5T_NATIVE_INT8);
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto v = static_cast<std::int8_t>(i);
    H5Tenum_insert(t, names[i].c_str(), &v);
  }
  return add_column(path, t, n, false);
}

H5Writer::ColumnId H5Writer::add_column(const std::string& path, std::int64_t type, std::size_t n, bool units) {
  ensure_parents(file_, path);
  hsize_t dims[1] = {static_cast<hsize_t>(n)};
  hid_t space = H5Screate_simple(1, dims, nullptr);
  hid_t ds = H5Dcreate2(file_, path.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Sclose(space);
  if (ds < 0) {
    H5Tclose(type);
    throw InputError(final_, 0, path, "cannot create dataset");
  }
  if (units) set_units(ds, path);
  columns_.push_back({ds, type, path});
  return columns_.size() - 1;
}

void H5Writer::write_at(ColumnId c, std::size_t offset, const void* data, std::size_t count) {
  if (count == 0) return;
  const Column& col = columns_.at(c);
  hid_t fspace = H5Dget_space(col.dataset);
  hsize_t start[1] = {static_cast<hsize_t>(offset)}, cnt[1] = {static_cast<hsize_t>(count)};
  herr_t rc = H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, nullptr, cnt, nullptr);
  hid_t mspace = H5Screate_simple(1, cnt, nullptr);
  if (rc >= 0) rc = H5Dwrite(col.dataset, col.type, mspace, fspace, H5P_DEFAULT, data);
  H5Sclose(mspace);
  H5Sclose(fspace);
  check(rc, final_, col.path);
}

void H5Writer::attr(const std::string& object, const std::string& name, const std::string& value) {
  hid_t t = string_type();
  const char* p = value.c_str();
  write_attr(file_, final_, object, name, t, [&] { return &p; });
  H5Tclose(t);
}
void H5Writer::attr(const std::string& object, const std::string& name, double value) {
  write_attr(file_, final_, object, name, H5T_NATIVE_DOUBLE, [&] { return &value; });
}
void H5Writer::attr(const std::string& object, const std::string& name, std::int64_t value) {
  write_attr(file_, final_, object, name, H5T_NATIVE_INT64, [&] { return &value; });
}

void H5Writer::commit() {
  close_columns();
  if (H5Fflush(file_, H5F_SCOPE_GLOBAL) < 0)
    throw InputError(final_, 0, "", "writing the HDF5 file failed (disk full or not writable?)");
  if (H5Fclose(file_) < 0) {
    file_ = -1;
    throw InputError(final_, 0, "", "closing the HDF5 file failed (disk full or not writable?)");
  }
  file_ = -1;
  if (write_through_) {  // a device: stream the finished file into it, never replace it
    std::ifstream in(tmp_, std::ios::binary);
    std::ofstream out(final_, std::ios::binary);
    out << in.rdbuf();
    if (!out) throw InputError(final_, 0, "", "write failed");
    return;  // the destructor removes the temporary file
  }
  std::error_code ec;
  std::filesystem::rename(tmp_, final_, ec);
  if (ec) throw InputError(final_, 0, "", "cannot rename the finished file into place: " + ec.message());
  committed_ = true;
}

std::vector<double> h5_read_doubles(const std::string& file, const std::string& path) {
  ReadFile f(file);
  std::size_t n = 0;
  hid_t ds = open_ds(f.id, file, path, n);
  std::vector<double> v(n);
  if (n) H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
  H5Dclose(ds);
  return v;
}
std::vector<std::int64_t> h5_read_ints(const std::string& file, const std::string& path) {
  ReadFile f(file);
  std::size_t n = 0;
  hid_t ds = open_ds(f.id, file, path, n);
  std::vector<std::int64_t> v(n);
  hid_t t = H5Dget_type(ds);
  if (H5Tget_class(t) == H5T_ENUM) {  // booleans and enumerations: read the int8 codes
    std::vector<std::int8_t> codes(n);
    hid_t mt = H5Tget_native_type(t, H5T_DIR_ASCEND);
    if (n) H5Dread(ds, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, codes.data());
    H5Tclose(mt);
    v.assign(codes.begin(), codes.end());
  } else if (n) {
    H5Dread(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
  }
  H5Tclose(t);
  H5Dclose(ds);
  return v;
}
std::vector<std::string> h5_read_strings(const std::string& file, const std::string& path) {
  ReadFile f(file);
  std::size_t n = 0;
  hid_t ds = open_ds(f.id, file, path, n);
  std::vector<char*> p(n, nullptr);
  hid_t t = string_type();
  if (n) H5Dread(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, p.data());
  std::vector<std::string> v;
  for (char* s : p) {
    v.emplace_back(s ? s : "");
    H5free_memory(s);
  }
  H5Tclose(t);
  H5Dclose(ds);
  return v;
}
std::string h5_read_string_attr(const std::string& file, const std::string& object, const std::string& name) {
  ReadFile f(file);
  hid_t a = H5Aopen_by_name(f.id, object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT);
  if (a < 0) throw InputError(file, 0, object + "@" + name, "no such attribute");
  hid_t t = string_type();
  char* p = nullptr;
  H5Aread(a, t, &p);
  std::string s = p ? p : "";
  H5free_memory(p);
  H5Tclose(t);
  H5Aclose(a);
  return s;
}
double h5_read_double_attr(const std::string& file, const std::string& object, const std::string& name) {
  ReadFile f(file);
  hid_t a = H5Aopen_by_name(f.id, object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT);
  if (a < 0) throw InputError(file, 0, object + "@" + name, "no such attribute");
  double v = 0;
  H5Aread(a, H5T_NATIVE_DOUBLE, &v);
  H5Aclose(a);
  return v;
}
bool h5_exists(const std::string& file, const std::string& path) {
  ReadFile f(file);
  return H5Lexists(f.id, path.c_str(), H5P_DEFAULT) > 0;
}

}  // namespace lmsim::io
