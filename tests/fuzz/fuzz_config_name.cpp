// libFuzzer target: configuration names parse or are rejected with a message; what parses round-trips, except
// the dataset's ep1 field, which is read and written without it.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "simulator/strategy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string name(reinterpret_cast<const char*>(data), size);
  const lmsim::ParseResult r = lmsim::parse_config_name(name);
  if (r.strategy) {
    const std::string back = lmsim::config_name(*r.strategy);
    std::string canonical = name;  // the dataset writes ep1 as the fifth field; the canonical name omits it
    std::size_t field = 0, at = 0;
    for (int dashes = 0; dashes < 4 && (at = canonical.find('-', field)) != std::string::npos; ++dashes) field = at + 1;
    if (r.strategy->expert_parallel == 1 && canonical.compare(field, 4, "ep1-") == 0) canonical.erase(field, 4);
    if (back != canonical) std::abort();  // accepted names are canonical
    const lmsim::ParseResult again = lmsim::parse_config_name(back);
    if (!again.strategy || !(*again.strategy == *r.strategy)) std::abort();
  } else if (r.error.empty()) {
    std::abort();
  }
  return 0;
}
