// Speed of one simulate() call (Google Benchmark): an 8-device dense configuration, the paper's Qwen3 runs, a
// 1,024-device Llama-3-70B configuration, DeepSeek-V3's 1,024-device publication layout and GPT-1T's 64-stage
// pipeline on 3,072 devices. Target: <= 1 µs median on one core (for an 8-device dense configuration).
#include <benchmark/benchmark.h>

#include "io/specs.hpp"
#include "simulator/simulator.hpp"

using namespace lmsim;

namespace {
void run(benchmark::State& state, const char* model, const char* system, const char* config, TrainingSettings t) {
  const Model m = io::presets().find_model(model)->model;
  const io::SystemPreset& sp = *io::presets().find_system(system);
  const Strategy s = *parse_config_name(config).strategy;
  for (auto _ : state) {
    Prediction p = simulate(m, s, sp.system, t, sp.default_params);
    benchmark::DoNotOptimize(p.iteration_time_s);
    benchmark::DoNotOptimize(p.max_peak_memory_bytes);
  }
  state.SetItemsProcessed(state.iterations());
}
TrainingSettings qwen_gpu() {
  TrainingSettings t;
  t.precision = Precision::fp16;
  t.flash_attention = false;
  t.fused_kernels = false;
  return t;
}
TrainingSettings sized(std::int64_t seq, std::int64_t global_batch, Precision precision) {
  TrainingSettings t;
  t.seq_length = seq;
  t.global_batch_size = global_batch;
  t.precision = precision;
  return t;
}
// DeepSeek-V3 as Megatron-Bridge published it on 1,024 H100s: MoE with dense first layers, MTP, an embedding/loss
// split, selective recompute of the MLA up-projections and the MLPs, flex dispatch.
TrainingSettings deepseek() {
  TrainingSettings t = sized(4096, 8192, Precision::fp8);
  t.sequence_parallel = true;
  t.moe_token_dispatcher_type = MoeDispatcher::flex;
  t.recompute_modules = module_bit(RecomputeModule::mla_up_proj) | module_bit(RecomputeModule::mlp);
  return t;
}
TrainingSettings large() {
  TrainingSettings t = sized(8192, 1024, Precision::bf16);
  t.sequence_parallel = true;
  return t;
}
}  // namespace

BENCHMARK_CAPTURE(run, qwen3_0_6b_8dev_dp2_tp2_pp2, "Qwen3-0.6B", "v100_sxm2_32g", "dp2-tp2-pp2-cp1-RC", qwen_gpu());
BENCHMARK_CAPTURE(run, qwen3_1_7b_8dev_dp8, "Qwen3-1.7B", "v100_sxm2_32g", "dp8-tp1-pp1-cp1-noRC", qwen_gpu());
BENCHMARK_CAPTURE(run, llama3_8b_8dev_tp2_pp4, "Llama-3-8B", "h100_sxm_80g", "dp1-tp2-pp4-cp1-selRC",
                  TrainingSettings{});
BENCHMARK_CAPTURE(run, llama3_70b_1024dev_tp8_pp8_cp2_vpp5, "Llama-3-70B", "h100_sxm_80g", "dp8-tp8-pp8-cp2-RC-vpp5",
                  large());
BENCHMARK_CAPTURE(run, deepseek_v3_1024dev_tp2_pp8_ep64_vpp4, "DeepSeek-V3", "h100_sxm_80g",
                  "dp64-tp2-pp8-cp1-ep64-etp1-selRC-mbs1-vpp4", deepseek());
// Narayanan et al.'s 1T model on 3,072 A100s: 64 pipeline stages, the deepest published pipeline, where the per-stage
// loop is most of the call.
BENCHMARK_CAPTURE(run, gpt_1t_3072dev_tp8_pp64, "GPT-1T", "a100_sxm_80g", "dp6-tp8-pp64-cp1-RC",
                  sized(2048, 3072, Precision::fp16));
BENCHMARK_CAPTURE(run, qwen3_30b_a3b_16dev_ep4, "Qwen3-30B-A3B", "ascend_910b3_64g", "dp4-tp2-pp2-cp1-ep4-RC",
                  TrainingSettings{});

BENCHMARK_MAIN();
