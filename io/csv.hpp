// lmsim/io/csv.hpp — a strict CSV reader (RFC 4180 quoting, UTF-8 BOM and CRLF tolerated).
//
// Owns: turning a file into a header and rows with their line numbers, and typed field access that reports
// file, line and column on every failure. Duplicate or missing columns, ragged rows, non-numeric, NaN/inf and
// out-of-range values are errors.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lmsim::io {

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

// Writes `text` to `path` under check_output's rule.
void write_file_atomic(const std::string& path, const std::string& text);

}  // namespace lmsim::io
