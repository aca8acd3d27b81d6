// lmsim/io/error.hpp — the one error type for bad input.
//
// Every reader throws InputError naming the file, the line (0 when the format has none, e.g. a JSON value, whose
// path is given as the field instead) and the field. The CLI turns it into one message and exit code 2.
#pragma once

#include <stdexcept>
#include <string>

namespace lmsim::io {

class InputError : public std::runtime_error {
 public:
  InputError(std::string file, long line, std::string field, const std::string& why)
      : std::runtime_error(format(file, line, field, why)),
        file_(std::move(file)),
        line_(line),
        field_(std::move(field)),
        why_(why) {}
  const std::string& file() const { return file_; }
  long line() const { return line_; }
  const std::string& field() const { return field_; }
  const std::string& why() const { return why_; }  // the message without file, line and field

 private:
  static std::string format(const std::string& file, long line, const std::string& field, const std::string& why);
  std::string file_;
  long line_;
  std::string field_;
  std::string why_;
};

}  // namespace lmsim::io
