// lmsim/io/megatron_log.hpp — measured runs from Megatron-LM and Megatron-Bridge training logs, for calibrating to
// your own cluster.
//
// Owns: reading one log (Megatron-LM: the `arguments` block Megatron prints at start-up; Megatron-Bridge: the
// configuration it prints, see read_megatron_bridge_log; the `iteration … | elapsed time per
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

// A kernel-fusion switch as a log sets it: its name in that framework, on or off, and its line (0: not logged, the
// framework's default).
struct FusionSwitch {
  std::string name;
  bool on = true;
  long line = 0;
};

struct MegatronRun {
  std::string log;
  Strategy strategy;
  TrainingSettings settings;
  std::int64_t devices = 0;
  int num_layers = 0;
  double iteration_time_s = 0;
  int intervals_used = 0;                   // logged intervals in the median
  std::map<int, double> peak_memory_bytes;  // per reporting rank
  // The fusion switches behind settings.fused_kernels and fused_norm, which of them count being the model's
  // (resolve_kernel_fusions): SwiGLU's and GELU's bias-activation fusion, the bias-dropout-add's, RoPE's, and
  // MindSpeed's opt-in fused RMSNorm (name empty: not logged).
  FusionSwitch swiglu_fusion, gelu_fusion, bias_dropout_fusion, rope_fusion, rmsnorm_fusion;
  // Megatron-LM's --position-embedding-type as logged (empty: not logged), checked against the model on import.
  std::string position_embedding_type;
  long position_embedding_line = 0;
};

MegatronRun read_megatron_log(const std::string& path, MemoryReport memory = MemoryReport::max_reserved);

// A Megatron-Bridge run. Its settings come from the configuration the log prints: the "Configuration Summary
// (Non-Default Values vs Megatron Core)" block (Bridge since February 2026, b273cd37: a field absent from it has
// Megatron-core's default) or the whole YAML of its "------- Task Configuration -------" block (before), read under
// Megatron-LM's argument names. The iteration lines are training_log's, as above; the peaks report_memory's
// `[Rank r] (after N iterations) memory (GB) | … | mem-max-reserved-gigabytes: x | …` (GB: 10^9 bytes). Bridge logs
// the world size only with its HyperCommGrid (`> initialized HyperCommGrid with tp=…, pp=…, cp=…, dp=…`);
// `devices` gives it otherwise (0: the log must say it; both: they must agree).
MegatronRun read_megatron_bridge_log(const std::string& path, MemoryReport memory = MemoryReport::max_reserved,
                                     std::int64_t devices = 0);

// Sets run.settings.fused_kernels from the switches the model runs: the bias-activation fusion of a gated MLP
// (SwiGLU's or GeGLU's; an ungated activation moves the same bytes either way), the bias-dropout-add's, and RoPE's for
// a rotary model. lmsim models them as one setting: fused when at least half of them are on. fused_norm follows
// MindSpeed's --use-fused-rmsnorm where the log has it and the model's norm is RMSNorm. Returns what the user should
// be told: a mix of fused and unfused switches, and how it was read.
std::vector<std::string> resolve_kernel_fusions(MegatronRun& run, const Model& m);

}  // namespace lmsim::io
