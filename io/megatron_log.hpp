// lmsim/io/megatron_log.hpp — measured runs from Megatron-LM training logs, for calibrating to your own cluster.
//
// Owns: reading one log (the `arguments` block Megatron prints at start-up, the `iteration … | elapsed time per
// iteration (ms): …` lines of training_log, and report_memory's `[Rank r] (after N iterations) memory (MB) | …
// max allocated: … | max reserved: …` lines) into a strategy, training settings, an iteration time (the median
// of the logged intervals after the first, which includes start-up) and per-rank peak memory. Every value is
// checked; errors name the log, line and argument.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "simulator/simulator.hpp"

namespace lmsim::io {

enum class MemoryReport { max_reserved, max_allocated };

struct MegatronRun {
  std::string log;
  Strategy strategy;
  TrainingSettings settings;
  std::int64_t devices = 0;
  int num_layers = 0;
  double iteration_time_s = 0;
  int intervals_used = 0;                   // logged intervals in the median
  std::map<int, double> peak_memory_bytes;  // per reporting rank
};

MegatronRun read_megatron_log(const std::string& path, MemoryReport memory = MemoryReport::max_reserved);

}  // namespace lmsim::io
