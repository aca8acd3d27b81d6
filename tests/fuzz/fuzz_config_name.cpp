// libFuzzer target: configuration names parse or are rejected with a message; what parses round-trips.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "simulator/strategy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string name(reinterpret_cast<const char*>(data), size);
  const lmsim::ParseResult r = lmsim::parse_config_name(name);
  if (r.strategy) {
    const std::string back = lmsim::config_name(*r.strategy);
    if (back != name) std::abort();  // accepted names are canonical
    const lmsim::ParseResult again = lmsim::parse_config_name(back);
    if (!again.strategy || !(*again.strategy == *r.strategy)) std::abort();
  } else if (r.error.empty()) {
    std::abort();
  }
  return 0;
}
