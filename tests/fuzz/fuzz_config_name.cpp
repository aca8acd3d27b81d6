// libFuzzer target: configuration names parse or are rejected with a message; what parses round-trips, except
// the dataset's ep1 field, which is read and written without it. The command line's spelling (parse_strategy_spec)
// likewise: it accepts every name the strict parser does, as the same strategy, and what it accepts is a name's.
// A parsed strategy the validity rules refuse is explained without fault.
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
    // A strategy the rules refuse is explained with its figures, the rule's description first.
    lmsim::Model m;
    m.name = "fuzz";
    m.num_layers = 28;
    m.num_attention_heads = 16;
    m.num_kv_heads = 8;
    m.num_experts = 8;
    lmsim::TrainingSettings t;
    const lmsim::ValidityOptions o;
    const lmsim::Rejection why = lmsim::check(m, *r.strategy, t, o);
    if (why != lmsim::Rejection::ok && lmsim::explain(why, m, *r.strategy, t, o).rfind(lmsim::describe(why), 0) != 0)
      std::abort();
  } else if (r.error.empty()) {
    std::abort();
  }
  for (const std::int64_t devices : {std::int64_t{0}, std::int64_t{1} << 12}) {
    const lmsim::ParseResult typed = lmsim::parse_strategy_spec(name, devices);
    if (r.strategy && (!typed.strategy || !(*typed.strategy == *r.strategy))) std::abort();
    if (!typed.strategy && typed.error.empty()) std::abort();
    if (typed.strategy) {
      const lmsim::ParseResult named = lmsim::parse_config_name(lmsim::config_name(*typed.strategy));
      if (!named.strategy || !(*named.strategy == *typed.strategy)) std::abort();
    }
  }
  return 0;
}
