// libFuzzer target: the strict CSV reader and typed field access must reject or accept, never crash.
#include <cstdint>
#include <string>

#include "io/csv.hpp"
#include "io/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const lmsim::io::CsvTable t = lmsim::io::parse_csv(text, "fuzz.csv");
    for (std::size_t r = 0; r < t.rows.size(); ++r)
      for (const auto& h : t.header) {
        try {
          (void)t.number(r, h);
          (void)t.integer(r, h, 0, 1 << 20);
          (void)t.positive(r, h);
        } catch (const lmsim::io::InputError&) {
        }
      }
  } catch (const lmsim::io::InputError&) {
  }
  return 0;
}
