// lmsim/io/csv.hpp — a strict CSV reader (RFC 4180 quoting, UTF-8 BOM and CRLF tolerated).
//
// Owns: tokenizing a file record by record (CsvReader: bounded memory whatever the file's size, every record
// checked as it is read), the whole-table form built on it (CsvTable), and typed field access (CsvRow) that
// reports file, line and column on every failure. Duplicate or missing columns, ragged rows, fields longer than
// 1 MiB, NUL bytes, non-numeric, NaN/inf and out-of-range values are errors.
#pragma once

#include <cstdint>
#include <fstream>
#include <istream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lmsim::io {

// One record with typed, checked access.
class CsvRow {
 public:
  CsvRow(const std::string& path, const std::vector<std::string>& header, const std::vector<std::string>& fields,
         long line)
      : path_(path), header_(header), fields_(fields), line_(line) {}
  long line() const { return line_; }
  const std::string& path() const { return path_; }
  std::size_t col(std::string_view name) const;  // throws InputError when absent
  const std::string& at(std::size_t col) const { return fields_[col]; }
  const std::string& raw(std::string_view column) const { return fields_[col(column)]; }  // may be empty
  const std::string& text(std::string_view column) const;                                 // non-empty
  // Finite number; `min` is inclusive, `positive` excludes zero.
  double number(std::string_view column, double min = -1e300, double max = 1e300) const;
  double positive(std::string_view column, double max = 1e300) const;
  std::int64_t integer(std::string_view column, std::int64_t min, std::int64_t max) const;
  [[noreturn]] void fail(std::string_view column, const std::string& why) const;

 private:
  const std::string& path_;
  const std::vector<std::string>& header_;
  const std::vector<std::string>& fields_;
  long line_;
};

// The record tokenizer (RFC 4180) over any stream; one record at a time.
class CsvTokenizer {
 public:
  CsvTokenizer(std::istream& in, std::string path) : in_(in), path_(std::move(path)) {}
  // The next non-blank record and the line it starts on; false at the end.
  bool next(std::vector<std::string>& record, long& start_line);

 private:
  int get();
  int peek();
  std::istream& in_;
  std::string path_;
  std::string buf_;
  std::size_t pos_ = 0;
  long line_ = 1;
  bool first_ = true;
};

// Streams a CSV file: the header is read and checked on construction, then one row at a time.
class CsvReader {
 public:
  explicit CsvReader(const std::string& path, const std::vector<std::string>& required = {});
  const std::vector<std::string>& header() const { return header_; }
  const std::string& path() const { return path_; }
  bool has(std::string_view name) const;
  bool next();  // advances to the next row (false at the end of the file)
  CsvRow row() const { return CsvRow(path_, header_, fields_, line_); }

 private:
  std::string path_;
  std::ifstream file_;
  std::unique_ptr<CsvTokenizer> tok_;
  std::vector<std::string> header_, fields_;
  long line_ = 0, header_line_ = 1;
};

struct CsvTable {
  std::string path;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<long> lines;  // 1-based file line of each row

  // Column index; throws InputError when absent.
  std::size_t col(std::string_view name) const;
  bool has(std::string_view name) const;
  const std::string& at(std::size_t row, std::size_t col) const { return rows[row][col]; }
  const std::string& text(std::size_t row, std::string_view column) const;
  // Finite number; `min` is inclusive, `positive` excludes zero.
  double number(std::size_t row, std::string_view column, double min = -1e300, double max = 1e300) const;
  double positive(std::size_t row, std::string_view column, double max = 1e300) const;
  std::int64_t integer(std::size_t row, std::string_view column, std::int64_t min, std::int64_t max) const;
  [[noreturn]] void fail(std::size_t row, std::string_view column, const std::string& why) const;
  CsvRow row(std::size_t r) const { return CsvRow(path, header, rows[r], lines[r]); }
};

CsvTable parse_csv(const std::string& text, const std::string& path, const std::vector<std::string>& required = {});
CsvTable read_csv(const std::string& path, const std::vector<std::string>& required = {});

// A strict number: the whole string must be a finite decimal number.
bool parse_number(std::string_view s, double& out);

// Reads a whole file; every path read is remembered as an input of this process (see check_output).
std::string read_file(const std::string& path);
void note_input(const std::string& path);
// Library data read eagerly (the presets' shipped θ) is not an input of the run; a command that reads the same
// file again registers it again.
void forget_input(const std::string& path);

// Output safety, the one rule every writer follows: an output may not resolve to a file this process read as
// input, nor to an existing folder, FIFO or socket; a character device (/dev/null, /dev/stdout) is written
// through, never replaced; anything else is replaced atomically (temporary file in the same folder, renamed).
enum class OutputMode { replace, write_through };
OutputMode check_output(const std::string& path);
// check_output's rule and, for a file to replace, a folder that exists (never created behind the user's back):
// what every writer checks, and what a command checks before its work (a fit, a sweep) rather than after it.
// `field`: the option that named the path.
OutputMode check_output_ahead(const std::string& path, const std::string& field);

// Writes `text` to `path` under check_output's rule.
void write_file_atomic(const std::string& path, const std::string& text);

}  // namespace lmsim::io
