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

OutputMode check_output_ahead(const std::string& path, const std::string& field) {
  const OutputMode mode = check_output(path);
  const auto parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (mode == OutputMode::replace && !parent.empty() && !std::filesystem::is_directory(parent, ec))
    throw InputError(path, 0, field, "output folder does not exist");
  return mode;
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
  if (check_output_ahead(path, "") == OutputMode::write_through) {
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

namespace {
constexpr std::size_t kMaxField = 1 << 20;  // 1 MiB: no field of any lmsim input comes near it
constexpr std::size_t kBlock = 1 << 16;

// Header checks shared by the reader and the table: trimmed, non-empty, unique names, the right delimiter and
// every required column.
void check_header(std::vector<std::string>& header, const std::string& path, long line,
                  const std::vector<std::string>& required) {
  std::set<std::string> seen;
  for (auto& h : header) {
    while (!h.empty() && (h.back() == ' ')) h.pop_back();
    while (!h.empty() && (h.front() == ' ')) h.erase(h.begin());
    if (h.empty()) throw InputError(path, line, "", "empty column name in header");
    if (!seen.insert(h).second) throw InputError(path, line, h, "duplicate column in header");
  }
  if (header.size() == 1 && (header[0].find(';') != std::string::npos || header[0].find('\t') != std::string::npos))
    throw InputError(path, line, "", "header has one column containing ';' or tabs: wrong delimiter (expected ',')");
  for (const auto& r : required)
    if (!seen.count(r)) throw InputError(path, line, r, "required column is missing");
}

void check_width(const std::vector<std::string>& rec, std::size_t width, const std::string& path, long line) {
  if (rec.size() != width)
    throw InputError(path, line, "",
                     "has " + std::to_string(rec.size()) + " fields, header has " + std::to_string(width));
}
}  // namespace

int CsvTokenizer::peek() {
  if (pos_ == buf_.size()) {
    buf_.resize(kBlock);
    in_.read(buf_.data(), static_cast<std::streamsize>(kBlock));
    buf_.resize(static_cast<std::size_t>(in_.gcount()));
    pos_ = 0;
    if (buf_.empty()) return -1;
    if (first_) {  // UTF-8 byte-order mark
      first_ = false;
      if (buf_.compare(0, 3, "\xEF\xBB\xBF") == 0) pos_ = 3;
      if (pos_ == buf_.size()) return peek();
    }
  }
  return static_cast<unsigned char>(buf_[pos_]);
}

int CsvTokenizer::get() {
  const int c = peek();
  if (c >= 0) ++pos_;
  if (c == 0) throw InputError(path_, line_, "", "contains NUL bytes: not a CSV file");
  return c;
}

bool CsvTokenizer::next(std::vector<std::string>& rec, long& start_line) {
  rec.clear();
  std::string field;
  bool in_quotes = false, field_started = false, has_content = false;
  start_line = line_;
  auto push = [&] {
    rec.push_back(std::move(field));
    field.clear();
  };
  auto add = [&](char ch) {
    if (field.size() >= kMaxField) throw InputError(path_, start_line, "", "a field is longer than 1 MiB");
    field += ch;
  };
  for (;;) {
    const int c = get();
    if (c < 0) break;
    const char ch = static_cast<char>(c);
    if (in_quotes) {
      if (ch == '"') {
        if (peek() == '"') {
          get();
          add('"');
        } else {
          in_quotes = false;
        }
      } else {
        if (ch == '\n') ++line_;
        add(ch);
      }
      continue;
    }
    if (ch == '"') {
      if (field_started && !field.empty()) throw InputError(path_, line_, "", "quote inside an unquoted field");
      in_quotes = true;
      field_started = has_content = true;
    } else if (ch == ',') {
      push();
      field_started = false;
      has_content = true;
    } else if (ch == '\n' || ch == '\r') {
      if (ch == '\r' && peek() == '\n') get();
      ++line_;
      if (has_content || !field.empty()) {
        push();
        return true;
      }
      field_started = has_content = false;
      start_line = line_;  // a blank line: the record starts later
    } else {
      add(ch);
      field_started = has_content = true;
    }
  }
  if (in_quotes) throw InputError(path_, start_line, "", "unterminated quoted field (truncated file?)");
  if (has_content || !field.empty()) {
    push();
    return true;
  }
  return false;
}

CsvReader::CsvReader(const std::string& path, const std::vector<std::string>& required) : path_(path) {
  note_input(path);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw InputError(path, 0, "", "file does not exist");
  if (std::filesystem::is_directory(path, ec)) throw InputError(path, 0, "", "is a directory, expected a file");
  file_.open(path, std::ios::binary);
  if (!file_) throw InputError(path, 0, "", "cannot be opened for reading");
  tok_ = std::make_unique<CsvTokenizer>(file_, path);
  if (!tok_->next(header_, header_line_)) throw InputError(path, 1, "", "empty file: expected a header line");
  check_header(header_, path, header_line_, required);
}

bool CsvReader::has(std::string_view name) const {
  for (const auto& h : header_)
    if (h == name) return true;
  return false;
}

bool CsvReader::next() {
  if (!tok_->next(fields_, line_)) return false;
  check_width(fields_, header_.size(), path_, line_);
  return true;
}

CsvTable parse_csv(const std::string& text, const std::string& path, const std::vector<std::string>& required) {
  std::istringstream in(text);
  CsvTokenizer tok(in, path);
  CsvTable t;
  t.path = path;
  long line = 1;
  if (!tok.next(t.header, line)) throw InputError(path, 1, "", "empty file: expected a header line");
  check_header(t.header, path, line, required);
  std::vector<std::string> rec;
  while (tok.next(rec, line)) {
    check_width(rec, t.header.size(), path, line);
    t.rows.push_back(rec);
    t.lines.push_back(line);
  }
  return t;
}

CsvTable read_csv(const std::string& path, const std::vector<std::string>& required) {
  CsvReader r(path, required);
  CsvTable t;
  t.path = path;
  t.header = r.header();
  while (r.next()) {
    const CsvRow row = r.row();
    std::vector<std::string> rec(t.header.size());
    for (std::size_t i = 0; i < rec.size(); ++i) rec[i] = row.at(i);
    t.rows.push_back(std::move(rec));
    t.lines.push_back(row.line());
  }
  return t;
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

void CsvTable::fail(std::size_t r, std::string_view column, const std::string& why) const {
  throw InputError(path, r < lines.size() ? lines[r] : 0, std::string(column), why);
}
const std::string& CsvTable::text(std::size_t r, std::string_view column) const { return row(r).text(column); }
double CsvTable::number(std::size_t r, std::string_view column, double min, double max) const {
  return row(r).number(column, min, max);
}
double CsvTable::positive(std::size_t r, std::string_view column, double max) const {
  return row(r).positive(column, max);
}
std::int64_t CsvTable::integer(std::size_t r, std::string_view column, std::int64_t min, std::int64_t max) const {
  return row(r).integer(column, min, max);
}

std::size_t CsvRow::col(std::string_view name) const {
  for (std::size_t i = 0; i < header_.size(); ++i)
    if (header_[i] == name) return i;
  throw InputError(path_, 1, std::string(name), "required column is missing");
}

void CsvRow::fail(std::string_view column, const std::string& why) const {
  throw InputError(path_, line_, std::string(column), why);
}

const std::string& CsvRow::text(std::string_view column) const {
  const std::string& v = fields_[col(column)];
  if (v.empty()) fail(column, "is empty");
  return v;
}

double CsvRow::number(std::string_view column, double min, double max) const {
  const std::string& v = fields_[col(column)];
  double out = 0;
  if (!parse_number(v, out)) fail(column, "'" + v + "' is not a finite number");
  if (out < min || out > max)
    fail(column, "value " + v + " is outside [" + std::to_string(min) + ", " + std::to_string(max) + "]");
  return out;
}

double CsvRow::positive(std::string_view column, double max) const {
  const double v = number(column, -1e300, max);
  if (!(v > 0)) fail(column, "must be positive, got " + fields_[col(column)]);
  return v;
}

std::int64_t CsvRow::integer(std::string_view column, std::int64_t min, std::int64_t max) const {
  const double v = number(column, static_cast<double>(min), static_cast<double>(max));
  if (v != std::floor(v)) fail(column, "'" + fields_[col(column)] + "' is not an integer");
  return static_cast<std::int64_t>(v);
}

}  // namespace lmsim::io
