#include "io/csv.hpp"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include "io/error.hpp"

namespace lmsim::io {

namespace {
std::mutex& inputs_mutex() {
  static std::mutex m;
  return m;
}
std::set<std::string>& inputs() {
  static std::set<std::string> s;
  return s;
}
std::string canonical_or_same(const std::string& path) {
  std::error_code ec;
  const auto c = std::filesystem::weakly_canonical(path, ec);
  return ec ? path : c.string();
}
}  // namespace

void note_input(const std::string& path) {
  const std::string c = canonical_or_same(path);
  std::lock_guard<std::mutex> lock(inputs_mutex());
  inputs().insert(c);
}

void forget_input(const std::string& path) {
  const std::string c = canonical_or_same(path);
  std::lock_guard<std::mutex> lock(inputs_mutex());
  inputs().erase(c);
}

OutputMode check_output(const std::string& path) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) return OutputMode::replace;  // nothing there to protect
  {
    std::lock_guard<std::mutex> lock(inputs_mutex());
    if (inputs().count(canonical_or_same(path)))
      throw InputError(path, 0, "", "is also an input of this run: refusing to overwrite it");
  }
  if (std::filesystem::is_character_file(st)) return OutputMode::write_through;
  if (!std::filesystem::is_regular_file(st))
    throw InputError(path, 0, "", "exists and is not a regular file (a folder, FIFO or socket): not replaced");
  return OutputMode::replace;
}

std::string read_file(const std::string& path) {
  note_input(path);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw InputError(path, 0, "", "file does not exist");
  if (std::filesystem::is_directory(path, ec)) throw InputError(path, 0, "", "is a directory, expected a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, 0, "", "cannot be opened for reading");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file_atomic(const std::string& path, const std::string& text) {
  if (check_output(path) == OutputMode::write_through) {
    std::ofstream out(path, std::ios::binary);
    out << text;
    out.flush();
    if (!out) throw InputError(path, 0, "", "write failed");
    return;
  }
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError(path, 0, "", "cannot be written (check the folder exists and is writable)");
    out << text;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw InputError(path, 0, "", "write failed");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw InputError(path, 0, "", "cannot be renamed into place: " + ec.message());
  }
}

bool parse_number(std::string_view s, double& out) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  if (s.empty() || s.size() > 64) return false;
  for (char ch : s)
    if (!(std::isdigit(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == '+' || ch == 'e' ||
          ch == 'E'))
      return false;  // rejects nan, inf, hex, thousands separators, units
  std::string buf(s);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(buf.c_str(), &end);
  if (end != buf.c_str() + buf.size() || errno == ERANGE || !std::isfinite(v)) return false;
  out = v;
  return true;
}

CsvTable parse_csv(const std::string& text_in, const std::string& path, const std::vector<std::string>& required) {
  CsvTable t;
  t.path = path;
  std::string_view text(text_in);
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // UTF-8 byte-order mark
  if (text.find('\0') != std::string_view::npos) throw InputError(path, 0, "", "contains NUL bytes: not a CSV file");
  std::vector<std::vector<std::string>> records;
  std::vector<long> starts;
  std::vector<std::string> rec;
  std::string field;
  bool in_quotes = false, field_started = false, record_has_content = false;
  long line = 1, record_line = 1;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_quotes) {
      if (ch == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          in_quotes = false;
        }
      } else {
        if (ch == '\n') ++line;
        field += ch;
      }
      continue;
    }
    if (ch == '"') {
      if (field_started && !field.empty()) throw InputError(path, line, "", "quote inside an unquoted field");
      in_quotes = true;
      field_started = record_has_content = true;
    } else if (ch == ',') {
      rec.push_back(std::move(field));
      field.clear();
      field_started = false;
      record_has_content = true;
    } else if (ch == '\n' || ch == '\r') {
      if (ch == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      if (record_has_content || !field.empty()) {
        rec.push_back(std::move(field));
        records.push_back(std::move(rec));
        starts.push_back(record_line);
      }
      rec.clear();
      field.clear();
      field_started = record_has_content = false;
      ++line;
      record_line = line;
    } else {
      field += ch;
      field_started = record_has_content = true;
    }
  }
  if (in_quotes) throw InputError(path, record_line, "", "unterminated quoted field (truncated file?)");
  if (record_has_content || !field.empty()) {
    rec.push_back(std::move(field));
    records.push_back(std::move(rec));
    starts.push_back(record_line);
  }
  if (records.empty()) throw InputError(path, 1, "", "empty file: expected a header line");
  t.header = std::move(records[0]);
  std::set<std::string> seen;
  for (auto& h : t.header) {
    while (!h.empty() && (h.back() == ' ')) h.pop_back();
    while (!h.empty() && (h.front() == ' ')) h.erase(h.begin());
    if (h.empty()) throw InputError(path, starts[0], "", "empty column name in header");
    if (!seen.insert(h).second) throw InputError(path, starts[0], h, "duplicate column in header");
  }
  if (t.header.size() == 1 &&
      (t.header[0].find(';') != std::string::npos || t.header[0].find('\t') != std::string::npos))
    throw InputError(path, starts[0], "",
                     "header has one column containing ';' or tabs: wrong delimiter (expected ',')");
  for (const auto& r : required)
    if (!seen.count(r)) throw InputError(path, starts[0], r, "required column is missing");
  for (std::size_t i = 1; i < records.size(); ++i) {
    if (records[i].size() != t.header.size())
      throw InputError(
          path, starts[i], "",
          "has " + std::to_string(records[i].size()) + " fields, header has " + std::to_string(t.header.size()));
    t.rows.push_back(std::move(records[i]));
    t.lines.push_back(starts[i]);
  }
  return t;
}

CsvTable read_csv(const std::string& path, const std::vector<std::string>& required) {
  return parse_csv(read_file(path), path, required);
}

bool CsvTable::has(std::string_view name) const {
  for (const auto& h : header)
    if (h == name) return true;
  return false;
}

std::size_t CsvTable::col(std::string_view name) const {
  for (std::size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return i;
  throw InputError(path, 1, std::string(name), "required column is missing");
}

void CsvTable::fail(std::size_t row, std::string_view column, const std::string& why) const {
  throw InputError(path, row < lines.size() ? lines[row] : 0, std::string(column), why);
}

const std::string& CsvTable::text(std::size_t row, std::string_view column) const {
  const std::string& v = rows[row][col(column)];
  if (v.empty()) fail(row, column, "is empty");
  return v;
}

double CsvTable::number(std::size_t row, std::string_view column, double min, double max) const {
  const std::string& v = rows[row][col(column)];
  double out = 0;
  if (!parse_number(v, out)) fail(row, column, "'" + v + "' is not a finite number");
  if (out < min || out > max)
    fail(row, column, "value " + v + " is outside [" + std::to_string(min) + ", " + std::to_string(max) + "]");
  return out;
}

double CsvTable::positive(std::size_t row, std::string_view column, double max) const {
  const double v = number(row, column, -1e300, max);
  if (!(v > 0)) fail(row, column, "must be positive, got " + rows[row][col(column)]);
  return v;
}

std::int64_t CsvTable::integer(std::size_t row, std::string_view column, std::int64_t min, std::int64_t max) const {
  const double v = number(row, column, static_cast<double>(min), static_cast<double>(max));
  if (v != std::floor(v)) fail(row, column, "'" + rows[row][col(column)] + "' is not an integer");
  return static_cast<std::int64_t>(v);
}

}  // namespace lmsim::io
