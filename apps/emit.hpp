// `--emit megatron|nemo|mindspeed`: a strategy and its training settings as the framework's own flags.
#pragma once

#include <string>

#include "simulator/simulator.hpp"

namespace lmsim::app {

// One line of flags (Megatron-LM / MindSpeed-LLM command-line flags, or NeMo 2 / Megatron-Bridge recipe overrides)
// that runs `s` as lmsim simulated it. Throws io::InputError for an unknown framework.
std::string emit_flags(const std::string& framework, const Model& m, const Strategy& s, const TrainingSettings& t,
                       bool allow_uneven_layers);

}  // namespace lmsim::app
