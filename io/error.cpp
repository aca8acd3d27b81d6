#include "io/error.hpp"

namespace lmsim::io {

std::string InputError::format(const std::string& file, long line, const std::string& field, const std::string& why) {
  std::string s;
  s.append(file);
  if (line > 0) s.append(":").append(std::to_string(line));
  if (!field.empty()) s.append(": field '").append(field).append("'");
  s.append(": ").append(why);
  return s;
}

}  // namespace lmsim::io
