// `--emit megatron|mindspeed|nemo|megatron-bridge`: a strategy and its training settings as the framework's own
// flags.
#pragma once

#include <string>
#include <vector>

#include "io/specs.hpp"
#include "simulator/simulator.hpp"

namespace lmsim::app {

struct EmittedFlags {
  std::string flags;                // one line, to paste or pipe
  std::vector<std::string> unsaid;  // settings lmsim simulated that these flags cannot set, each named
};

// The flags (Megatron-LM / MindSpeed-LLM command-line flags, NeMo 2 recipe overrides, or Megatron-Bridge
// ConfigContainer overrides) that run `s` as lmsim simulated it. Throws io::InputError for an unknown framework.
// The system decides only what is said of settings that matter on it alone (NCCL's NVLS).
EmittedFlags emit_flags(const std::string& framework, const Model& m, const System& sys, const Strategy& s,
                        const TrainingSettings& t, bool allow_uneven_layers);

// Logs a warning for each setting the flags cannot set (so that what is pasted is not taken for the whole run).
void warn_unsaid(const std::string& framework, const EmittedFlags& e);

// {"framework", "flags", "unsaid": [...]} for the JSON outputs.
io::Json emit_json(const std::string& framework, const EmittedFlags& e);

// The frameworks emit_flags() knows, for the CLI's checks and help.
inline const std::vector<std::string>& emit_frameworks() {
  static const std::vector<std::string> names{"megatron", "mindspeed", "nemo", "megatron-bridge"};
  return names;
}

}  // namespace lmsim::app
