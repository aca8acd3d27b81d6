#include <gtest/gtest.h>

#include <cmath>

#include "io/specs.hpp"
#include "simulator/simulator.hpp"
#include "tests/helpers.hpp"

using namespace lmsim;
using lmsim::test::strat;

namespace {
// GPT-style layer: a·d = h, MHA, f = 4h, GELU, LayerNorm; vocabulary a multiple of 1024 (no padding).
Model gpt(std::int64_t h = 1024, std::int64_t layers = 8, std::int64_t heads = 16) {
  Model m;
  m.name = "gpt-test";
  m.hidden_size = h;
  m.num_layers = layers;
  m.num_attention_heads = heads;
  m.num_kv_heads = heads;
  m.head_dim = h / heads;
  m.ffn_hidden_size = 4 * h;
  m.vocab_size = 32768;
  m.activation = Activation::gelu;
  m.norm = Norm::layernorm;
  return m;
}
TrainingSettings settings(bool flash = false) {
  TrainingSettings t;
  t.seq_length = 2048;
  t.global_batch_size = 16;
  t.micro_batch_size = 1;
  t.flash_attention = flash;
  t.hidden_dropout = t.attention_dropout = true;
  return t;
}
const System& sys() { return io::presets().find_system("a100_sxm_80g")->system; }
PlatformParams korthikanti() {
  PlatformParams p;
  p.attention_score_bytes = 5;
  return p;
}
}  // namespace

TEST(Simulator, ForwardGemmFlopsPerLayerMatchNarayanan) {
  // Narayanan et al. 2021: forward FLOPs of one GPT layer = 24·b·s·h² + 4·b·s²·h.
  const Model m = gpt();
  const TrainingSettings t = settings();
  const double s = 2048, h = 1024;
  double flops = 0;
  const auto gemms = gemm_diagnostics(m, strat(1, 1, 1), sys(), t, PlatformParams{});
  ASSERT_FALSE(gemms.empty());
  const double mb = 16, passes = 3;  // forward + two backward GEMMs
  for (const auto& g : gemms)
    if (g.name != "lm_head") flops += 2.0 * g.batch * g.m * g.n * g.k * g.count / (passes * mb * m.num_layers);
  EXPECT_NEAR(flops, 24 * s * h * h + 4 * s * s * h, 1e-6 * flops);
}

TEST(Simulator, BytesPerParameterWithAndWithoutDistributedOptimizer) {
  const Model m = gpt();
  TrainingSettings t = settings();
  const double params = count_params(m).total;
  PlatformParams p;  // mixed-precision Adam: fp32 master + moments m, v = 12 bytes per owned parameter
  t.distributed_optimizer = false;
  Prediction pr = simulate(m, strat(4, 1, 1), sys(), t, p);
  ASSERT_TRUE(pr.ok());
  const StageResult& a = pr.stages[0];
  EXPECT_NEAR((a.weight_bytes + a.gradient_bytes + a.optimizer_bytes) / params, 18.0, 1e-9);
  t.distributed_optimizer = true;
  pr = simulate(m, strat(4, 1, 1), sys(), t, p);
  const StageResult& b = pr.stages[0];
  EXPECT_NEAR((b.weight_bytes + b.gradient_bytes + b.optimizer_bytes) / params, 6.0 + 12.0 / 4, 1e-9);
  // Before Adam's first applied step only the fp32 master copy exists: 4 bytes per owned parameter.
  const double steady_peak = b.peak_bytes;
  t.optimizer_moments_allocated = false;
  pr = simulate(m, strat(4, 1, 1), sys(), t, p);
  EXPECT_NEAR(pr.stages[0].optimizer_bytes / params, 4.0 / 4, 1e-9);
  EXPECT_LT(pr.max_peak_memory_bytes, steady_peak);
  // MindSpeed --reuse-fp32-param keeps the bf16 parameters inside the fp32 master copy: 2 bytes less per owned one.
  t.optimizer_moments_allocated = true;
  t.reuse_fp32_param = true;
  pr = simulate(m, strat(4, 1, 1), sys(), t, p);
  EXPECT_NEAR(pr.stages[0].optimizer_bytes / params, 10.0 / 4, 1e-9);
  t.precision = Precision::fp8;  // the parameters stay bf16 under FP8: remainders still apply
  EXPECT_TRUE(validate(t).empty()) << validate(t);
  t.precision = Precision::fp16;
  EXPECT_FALSE(validate(t).empty());  // fp16 parameters are not the top half of an fp32 number
  // A 16-bit optimizer state (Apex DistributedFusedAdam dtype bf16): two bf16 moments, no master copy.
  t.precision = Precision::bf16;
  t.bf16_optimizer_state = true;
  EXPECT_FALSE(validate(t).empty());  // no master copy to keep remainders in
  t.reuse_fp32_param = false;
  pr = simulate(m, strat(4, 1, 1), sys(), t, p);
  ASSERT_TRUE(pr.ok());
  EXPECT_NEAR(pr.stages[0].optimizer_bytes / params, 4.0 / 4, 1e-9);
  // Megatron-core's precision-aware optimizer with bf16 moments: the fp32 master copy and two bf16 moments (8), its
  // remainders as above (6); not beside a 16-bit state, which has no master copy.
  t.bf16_adam_moments = true;
  EXPECT_FALSE(validate(t).empty());
  t.bf16_optimizer_state = false;
  pr = simulate(m, strat(4, 1, 1), sys(), t, p);
  EXPECT_NEAR(pr.stages[0].optimizer_bytes / params, 8.0 / 4, 1e-9);
  t.reuse_fp32_param = true;
  pr = simulate(m, strat(4, 1, 1), sys(), t, p);
  EXPECT_NEAR(pr.stages[0].optimizer_bytes / params, 6.0 / 4, 1e-9);
  t.optimizer_moments_allocated = false;
  pr = simulate(m, strat(4, 1, 1), sys(), t, p);
  EXPECT_NEAR(pr.stages[0].optimizer_bytes / params, 2.0 / 4, 1e-9);
}

TEST(Simulator, ActivationMemoryMatchesKorthikantiLimitingCases) {
  const Model m = gpt();
  const TrainingSettings t = settings();
  const double s = 2048, b = 1, h = 1024, a = 16;
  const double paper = 34 * s * b * h + 5 * a * s * s * b;  // per layer, t = 1
  EXPECT_NEAR(layer_activation(m, strat(1, 1, 1), t, korthikanti(), false).stored_bytes, paper, 1e-9 * paper);
  for (int tp : {2, 4, 8}) {
    const double no_sp = s * b * h * (10 + 24.0 / tp) + 5 * a * s * s * b / tp;
    EXPECT_NEAR(layer_activation(m, strat(1, tp, 1), t, korthikanti(), false).stored_bytes, no_sp, 1e-9 * no_sp);
    Strategy sp = strat(1, tp, 1);
    sp.sequence_parallel = true;
    EXPECT_NEAR(layer_activation(m, sp, t, korthikanti(), false).stored_bytes, paper / tp, 1e-9 * paper);
    sp.recompute = Recompute::selective;  // selective recompute drops the s² term (Korthikanti Eq. 5)
    EXPECT_NEAR(layer_activation(m, sp, t, korthikanti(), false).stored_bytes, 34 * s * b * h / tp, 1e-6 * paper);
  }
  // Flash attention stores no scores.
  const double flash = layer_activation(m, strat(1, 1, 1), settings(true), korthikanti(), false).stored_bytes;
  EXPECT_LT(flash, 35 * s * b * h);
  // Full recompute keeps only the layer input, and one layer is live in backward.
  const auto full = layer_activation(m, strat(1, 1, 1, 1, Recompute::full), t, korthikanti(), false);
  EXPECT_DOUBLE_EQ(full.stored_bytes, 2 * s * b * h);
  EXPECT_NEAR(full.live_bytes, paper, 1e-9 * paper);
}

TEST(Simulator, RecomputeLowersMemoryAndRaisesTime) {
  const Model m = io::presets().find_model("Qwen3-1.7B")->model;
  const TrainingSettings t = settings();
  for (auto base : {strat(8, 1, 1), strat(2, 2, 2), strat(1, 4, 2)}) {
    Strategy rc = base;
    rc.recompute = Recompute::full;
    Strategy sel = base;
    sel.recompute = Recompute::selective;
    const Prediction a = simulate(m, base, sys(), t, PlatformParams{});
    const Prediction b = simulate(m, rc, sys(), t, PlatformParams{});
    const Prediction c = simulate(m, sel, sys(), t, PlatformParams{});
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
    EXPECT_LT(b.max_peak_memory_bytes, a.max_peak_memory_bytes) << config_name(base);
    EXPECT_GT(b.iteration_time_s, a.iteration_time_s) << config_name(base);
    EXPECT_LT(c.max_peak_memory_bytes, a.max_peak_memory_bytes);
    EXPECT_LT(c.iteration_time_s, b.iteration_time_s);
  }
}

TEST(Simulator, BlockRecomputeReplaysTheFirstLayersOfEveryChunkAndKeepsTheRest) {
  // Megatron-core's --recompute-method block --recompute-num-layers N: per chunk of n layers, N replayed (their
  // inputs kept), n - N run plainly: time and activations interpolate layer by layer between none and full.
  const Model m = gpt(1024, 8);
  const TrainingSettings t = settings();
  for (int vpp : {1, 2}) {
    Strategy none = strat(1, 1, 2);
    none.virtual_pipeline = vpp;
    Strategy full = none;
    full.recompute = Recompute::full;
    const Prediction a = simulate(m, none, sys(), t, PlatformParams{});
    const Prediction f = simulate(m, full, sys(), t, PlatformParams{});
    ASSERT_TRUE(a.ok() && f.ok());
    const int chunk = 8 / (2 * vpp);
    for (int n = 1; n <= chunk + 1; ++n) {
      Strategy b = full;
      b.recompute_method = RecomputeMethod::block;
      b.recompute_num_layers = n;
      const Prediction p = simulate(m, b, sys(), t, PlatformParams{});
      ASSERT_TRUE(p.ok()) << config_name(b);
      const double share = std::min(1.0, static_cast<double>(n) / chunk);
      const StageResult &s0 = p.stages[0], &a0 = a.stages[0], &f0 = f.stages[0];
      EXPECT_NEAR(s0.recompute_s, share * f0.recompute_s, 1e-12) << config_name(b);
      EXPECT_NEAR(s0.activation_bytes, share * f0.activation_bytes + (1 - share) * a0.activation_bytes,
                  1e-6 * a0.activation_bytes)
          << config_name(b);
      EXPECT_DOUBLE_EQ(s0.transient_bytes, f0.transient_bytes) << config_name(b);  // one layer re-materialised
      if (n < chunk) {
        EXPECT_LT(p.iteration_time_s, f.iteration_time_s) << config_name(b);
        EXPECT_GT(p.max_peak_memory_bytes, f.max_peak_memory_bytes) << config_name(b);
      } else {  // every layer of every chunk: full recompute
        EXPECT_DOUBLE_EQ(p.iteration_time_s, f.iteration_time_s) << config_name(b);
        EXPECT_DOUBLE_EQ(p.max_peak_memory_bytes, f.max_peak_memory_bytes) << config_name(b);
      }
    }
  }
}

TEST(Simulator, DistributedCheckpointsKeepATensorParallelShareAndGatherItBeforeTheReplay) {
  // Megatron --distribute-saved-activations: full recompute's checkpoints split over the t TP ranks (1/t kept),
  // each all-gathered before its replay in backward; only with full recompute, TP > 1 and no SP.
  const Model m = gpt(1024, 8);
  TrainingSettings t = settings();
  t.sequence_parallel = false;
  t.pipeline_scatter_gather = false;  // its TP all-gather of received slices would be a second tp all_gather
  TrainingSettings d = t;
  d.distribute_saved_activations = true;
  Strategy full = strat(1, 4, 2);
  full.recompute = Recompute::full;
  const Prediction a = simulate(m, full, sys(), t, PlatformParams{});
  const Prediction b = simulate(m, full, sys(), d, PlatformParams{});
  ASSERT_TRUE(a.ok() && b.ok());
  double gather_ms = 0, calls = 0;
  for (const CollectiveRecord& r : collective_diagnostics(m, full, sys(), d, PlatformParams{}))
    if (r.stage == 0 && r.group == "tp" && r.primitive == "all_gather") {
      gather_ms = r.predicted_ms;
      calls = r.count;
      EXPECT_DOUBLE_EQ(r.bytes, 2.0 * 2048 * 1024);  // the whole layer input, gathered
    }
  EXPECT_DOUBLE_EQ(calls, 4.0 * static_cast<double>(a.num_micro_batches));  // 4 layers' checkpoints per stage
  ASSERT_GT(gather_ms, 0);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_NEAR(b.stages[i].activation_bytes, a.stages[i].activation_bytes / 4, 1e-6 * a.stages[i].activation_bytes);
    EXPECT_NEAR(b.stages[i].tp_comm_s - a.stages[i].tp_comm_s, 4 * gather_ms * 1e-3, 1e-12);
    EXPECT_DOUBLE_EQ(b.stages[i].transient_bytes, a.stages[i].transient_bytes);  // the replay is whole again
  }
  EXPECT_GT(b.iteration_time_s, a.iteration_time_s);
  EXPECT_LT(b.max_peak_memory_bytes, a.max_peak_memory_bytes);
  EXPECT_NEAR(b.layer.backward_s - a.layer.backward_s, gather_ms * 1e-3, 1e-12);
  // Block recompute of 2 of a chunk's 4 layers: two checkpoints distributed, two layers kept whole.
  Strategy block = full;
  block.recompute_method = RecomputeMethod::block;
  block.recompute_num_layers = 2;
  const Prediction ba = simulate(m, block, sys(), t, PlatformParams{});
  const Prediction bb = simulate(m, block, sys(), d, PlatformParams{});
  const double per_checkpoint = a.stages[0].activation_bytes / 4;  // four checkpoints kept whole
  EXPECT_NEAR(ba.stages[0].activation_bytes - bb.stages[0].activation_bytes, 2 * per_checkpoint * 3 / 4,
              1e-6 * per_checkpoint);
  EXPECT_NEAR(bb.stages[0].tp_comm_s - ba.stages[0].tp_comm_s, 2 * gather_ms * 1e-3, 1e-12);
  // Where Megatron refuses it the setting changes nothing: SP, selective recompute, no recompute, TP 1.
  Strategy sp = full;
  sp.sequence_parallel = true;
  Strategy sel = full;
  sel.recompute = Recompute::selective;
  Strategy none = full;
  none.recompute = Recompute::none;
  Strategy tp1 = strat(4, 1, 2);
  tp1.recompute = Recompute::full;
  for (const Strategy& s : {sp, sel, none, tp1}) {
    const Prediction x = simulate(m, s, sys(), t, PlatformParams{}), y = simulate(m, s, sys(), d, PlatformParams{});
    ASSERT_TRUE(x.ok() && y.ok()) << config_name(s);
    EXPECT_EQ(x.iteration_time_s, y.iteration_time_s) << config_name(s);
    EXPECT_EQ(x.max_peak_memory_bytes, y.max_peak_memory_bytes) << config_name(s);
    EXPECT_FALSE(resolve(s, d).distribute_saved_activations) << config_name(s);
  }
  EXPECT_TRUE(resolve(full, d).distribute_saved_activations);
}

TEST(Simulator, WithoutAsyncAllReduceEveryTensorParallelCollectiveIsExposed) {
  // Megatron-LM before September 2021 (the SC21 runs): without SP the input gradient's all-reduce follows the
  // linear's backward instead of running under its weight gradient, so every TP collective is on the critical path:
  // the stage's TP time per micro-batch is the diagnostics' whole TP traffic.
  const Model m = gpt(2048, 4);
  TrainingSettings on = settings();
  on.sequence_parallel = false;
  on.global_batch_size = 8;
  TrainingSettings off = on;
  off.async_tensor_model_parallel_allreduce = false;
  const Strategy s = strat(1, 4, 1);
  const Prediction a = simulate(m, s, sys(), on, PlatformParams{});
  const Prediction b = simulate(m, s, sys(), off, PlatformParams{});
  ASSERT_TRUE(a.ok() && b.ok());
  double all_tp_s = 0, backward_ar_s = 0;
  for (const CollectiveRecord& r : collective_diagnostics(m, s, sys(), off, PlatformParams{}))
    if (r.group == "tp") all_tp_s += r.count * r.predicted_ms * 1e-3 / static_cast<double>(b.num_micro_batches);
  for (const CollectiveRecord& r : collective_diagnostics(m, s, sys(), on, PlatformParams{}))
    if (r.group == "tp" && r.primitive == "all_reduce" && r.bytes == 2.0 * 2048 * 2048)
      backward_ar_s = r.predicted_ms * 1e-3;  // one layer block's all-reduce (forward and backward alike)
  ASSERT_GT(backward_ar_s, 0);
  EXPECT_NEAR(b.stages[0].tp_comm_s, all_tp_s, 1e-9 * all_tp_s);
  EXPECT_GT(b.stages[0].tp_comm_s, a.stages[0].tp_comm_s);
  // At most the 4 layers x 2 blocks backward all-reduces were hidden before; one layer's backward shows two.
  EXPECT_LE(b.stages[0].tp_comm_s - a.stages[0].tp_comm_s, 8 * backward_ar_s * (1 + 1e-9));
  EXPECT_GT(b.layer.backward_s, a.layer.backward_s);
  EXPECT_LE(b.layer.backward_s - a.layer.backward_s, 2 * backward_ar_s * (1 + 1e-9));
  EXPECT_EQ(b.layer.forward_s, a.layer.forward_s);
  EXPECT_GT(b.iteration_time_s, a.iteration_time_s);
  // With SP there is no such all-reduce (its backward reduce-scatter always overlaps): no change; nor at TP 1.
  Strategy sp = s;
  sp.sequence_parallel = true;
  for (const Strategy& x : {sp, strat(4, 1, 1)}) {
    EXPECT_EQ(simulate(m, x, sys(), on, PlatformParams{}).iteration_time_s,
              simulate(m, x, sys(), off, PlatformParams{}).iteration_time_s)
        << config_name(x);
    EXPECT_FALSE(resolve(x, off).synchronous_tp_allreduce) << config_name(x);
  }
  EXPECT_TRUE(resolve(s, off).synchronous_tp_allreduce);
  EXPECT_FALSE(resolve(s, on).synchronous_tp_allreduce);
}

TEST(Simulator, BlockRecomputeCountsTheKindOfEachReplayedLayer) {
  // An MoE model whose first two layers are dense: block 2 replays only those, block 3 one MoE layer more, and full
  // recompute all of them.
  Model m = io::presets().find_model("Qwen3-30B-A3B")->model;
  m.first_dense_layers = 2;
  m.ffn_hidden_size = 6144;
  const TrainingSettings t = settings(true);
  Strategy full = strat(8, 1, 1);
  full.expert_parallel = 8;
  full.recompute = Recompute::full;
  auto replay = [&](int n) {
    Strategy b = full;
    b.recompute_method = RecomputeMethod::block;
    b.recompute_num_layers = n;
    const Prediction p = simulate(m, n > 0 ? b : full, sys(), t, PlatformParams{});
    EXPECT_TRUE(p.ok());
    return p.stages[0].recompute_s;
  };
  const double dense2 = replay(2), one_moe = replay(3) - dense2;
  EXPECT_NEAR(replay(1), dense2 / 2, 1e-12);
  EXPECT_GT(one_moe, 0.0);
  EXPECT_NEAR(replay(0), dense2 + static_cast<double>(m.num_layers - 2) * one_moe, 1e-9);
}

TEST(Simulator, UniformRecomputeGroupsKeepFewerCheckpointsAndReplayAGroupAtOnce) {
  // --recompute-method uniform --recompute-num-layers N: ceil(n / N) checkpoints per chunk, N layers alive at once
  // while a group is replayed, the same replay time as one layer per group.
  const Model m = gpt(1024, 8);
  const TrainingSettings t = settings();
  Strategy full = strat(1, 1, 2);
  full.recompute = Recompute::full;
  const Prediction f = simulate(m, full, sys(), t, PlatformParams{});
  ASSERT_TRUE(f.ok());
  for (int n : {2, 3, 4, 8}) {  // 4 layers a stage
    Strategy u = full;
    u.recompute_num_layers = n;
    const Prediction p = simulate(m, u, sys(), t, PlatformParams{});
    ASSERT_TRUE(p.ok()) << n;
    const double checkpoints = std::ceil(4.0 / n);
    EXPECT_NEAR(p.stages[0].activation_bytes, f.stages[0].activation_bytes * checkpoints / 4,
                1e-9 * f.stages[0].activation_bytes)
        << n;
    EXPECT_DOUBLE_EQ(p.stages[0].transient_bytes, f.stages[0].transient_bytes * std::min(n, 4)) << n;
    EXPECT_DOUBLE_EQ(p.stages[0].recompute_s, f.stages[0].recompute_s) << n;
  }
}

TEST(Simulator, MoreTensorParallelLowersWeightsPerRank) {
  const Model m = io::presets().find_model("Llama-3-8B")->model;
  double last = 1e300;
  for (int tp : {1, 2, 4, 8}) {
    const Prediction p = simulate(m, strat(8 / tp, tp, 1), sys(), settings(true), PlatformParams{});
    ASSERT_TRUE(p.ok());
    EXPECT_LT(p.stages[0].weight_bytes, last);
    last = p.stages[0].weight_bytes;
  }
}

TEST(Simulator, PipelineStagesOnlyLastCarriesLogitsFirstHoldsMostActivations) {
  const Model m = io::presets().find_model("Qwen3-0.6B")->model;
  const Prediction p = simulate(m, strat(1, 2, 4), sys(), settings(), PlatformParams{});
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p.num_stages, 4);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(p.stages[static_cast<std::size_t>(i)].transient_bytes, 0.0) << i;
  EXPECT_GT(p.stages[3].transient_bytes, 0.0);
  for (int i = 1; i < 4; ++i)
    EXPECT_GT(p.stages[0].activation_bytes, p.stages[static_cast<std::size_t>(i)].activation_bytes);
  EXPECT_DOUBLE_EQ(p.stages[0].inflight_microbatches, 4.0);
  EXPECT_DOUBLE_EQ(p.stages[3].inflight_microbatches, 1.0);
  // Every rank's memory is reported, by Megatron rank order (tp fastest, pp slowest).
  const auto mem = per_rank_peak_memory(p, strat(1, 2, 4));
  ASSERT_EQ(mem.size(), 8u);
  EXPECT_DOUBLE_EQ(mem[0], p.stages[0].peak_bytes);
  EXPECT_DOUBLE_EQ(mem[1], p.stages[0].peak_bytes);
  EXPECT_DOUBLE_EQ(mem[7], p.stages[3].peak_bytes);
}

TEST(Simulator, MiddleStagesCostWhatTheirOwnLayersCost) {
  // Every other layer MoE and three layers a stage: the middle stages alternate between one and two MoE layers, so
  // each costs and holds what the stage two before it does and not what its neighbour does; each keeps its own
  // place (first layer, in-flight micro-batches).
  Model m = io::presets().find_model("Qwen3-30B-A3B")->model;
  m.num_layers = 24;
  m.moe_layer_frequency = 2;
  const Prediction p = simulate(m, strat(1, 1, 8), sys(), settings(true), PlatformParams{});
  ASSERT_TRUE(p.ok());
  for (std::size_t i = 1; i < 7; ++i) {
    const StageResult &st = p.stages[i], &prev = p.stages[i - 1];
    EXPECT_EQ(st.first_layer, 3 * static_cast<int>(i)) << i;
    EXPECT_DOUBLE_EQ(st.inflight_microbatches, 8.0 - static_cast<double>(i)) << i;
    if (i == 1) continue;  // stage 0 also holds the embedding
    EXPECT_NE(st.weight_bytes, prev.weight_bytes) << i;
    EXPECT_NE(st.forward_compute_s, prev.forward_compute_s) << i;
    if (i < 3) continue;
    EXPECT_EQ(st.weight_bytes, p.stages[i - 2].weight_bytes) << i;
    EXPECT_EQ(st.per_microbatch_s, p.stages[i - 2].per_microbatch_s) << i;
  }
}

TEST(Simulator, AnAllMoeModelIgnoresTheDenseMlpWidthItNeverUses) {
  // Every layer of Qwen3-30B-A3B is MoE: its ffn_hidden_size describes no layer, so no time or byte may follow it.
  const Model m = io::presets().find_model("Qwen3-30B-A3B")->model;
  Model wide = m;
  wide.ffn_hidden_size = 16 * m.ffn_hidden_size;
  for (Recompute rc : {Recompute::none, Recompute::selective, Recompute::full}) {
    Strategy s = strat(2, 2, 2);
    s.expert_parallel = 2;
    s.recompute = rc;
    const Prediction a = simulate(m, s, sys(), settings(true), PlatformParams{});
    const Prediction b = simulate(wide, s, sys(), settings(true), PlatformParams{});
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a.iteration_time_s, b.iteration_time_s);
    for (std::size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(a.stages[i].transient_bytes, b.stages[i].transient_bytes) << i;
      EXPECT_EQ(a.stages[i].peak_bytes, b.stages[i].peak_bytes) << i;
    }
  }
}

TEST(Simulator, TheLayerReportIsDenseWhereTheModelHasDenseLayersElseMoe) {
  Model m = io::presets().find_model("Qwen3-30B-A3B")->model;
  Strategy s = strat(2, 2, 2);
  s.expert_parallel = 2;
  EXPECT_FALSE(m.has_dense_layers());
  const Prediction all_moe = simulate(m, s, sys(), settings(true), PlatformParams{});
  ASSERT_TRUE(all_moe.ok());
  EXPECT_TRUE(all_moe.layer.moe);
  EXPECT_GT(all_moe.layer.forward_s, 0.0);
  // Every other layer dense: the report is the dense layer.
  m.moe_layer_frequency = 2;
  EXPECT_TRUE(m.has_dense_layers());
  const Prediction mixed = simulate(m, s, sys(), settings(true), PlatformParams{});
  ASSERT_TRUE(mixed.ok());
  EXPECT_FALSE(mixed.layer.moe);
  EXPECT_NE(mixed.layer.forward_s, all_moe.layer.forward_s);
  // Those dense layers need their MLP width; the all-MoE model does not.
  m.ffn_hidden_size = 0;
  EXPECT_NE(validate(m).find("ffn_hidden_size"), std::string::npos);
  m.moe_layer_frequency = 1;
  EXPECT_EQ(validate(m), "");
  m.first_dense_layers = 1;
  EXPECT_NE(validate(m).find("ffn_hidden_size"), std::string::npos);
}

TEST(Simulator, InterleavingShrinksTheBubbleAndAddsActivations) {
  const Model m = io::presets().find_model("Llama-3-8B")->model;
  TrainingSettings t = settings(true);
  t.global_batch_size = 64;
  Strategy a = strat(2, 1, 4);
  Strategy b = a;
  b.virtual_pipeline = 2;
  const Prediction pa = simulate(m, a, sys(), t, PlatformParams{});
  const Prediction pb = simulate(m, b, sys(), t, PlatformParams{});
  ASSERT_TRUE(pa.ok() && pb.ok());
  EXPECT_LT(pb.breakdown.bubble_s, pa.breakdown.bubble_s);
  EXPECT_GT(pb.stages[0].activation_bytes, pa.stages[0].activation_bytes);
}

TEST(Simulator, ContextParallelDividesActivationMemory) {
  const Model m = io::presets().find_model("Llama-3-8B")->model;
  TrainingSettings t = settings(true);
  t.seq_length = 16384;
  const auto a1 = layer_activation(m, strat(8, 1, 1, 1), t, PlatformParams{}, false).stored_bytes;
  const auto a4 = layer_activation(m, strat(2, 1, 1, 4), t, PlatformParams{}, false).stored_bytes;
  EXPECT_NEAR(a4, a1 / 4, 1e-3 * a1);
  const Prediction p = simulate(m, strat(2, 1, 1, 4), sys(), t, PlatformParams{});
  ASSERT_TRUE(p.ok());
  EXPECT_GT(p.breakdown.cp_comm_exposed_s + p.breakdown.cp_comm_overlapped_s, 0.0);
}

TEST(Simulator, MoeActiveParametersMatchTheCard) {
  const auto* mp = io::presets().find_model("Qwen3-30B-A3B");
  ASSERT_NE(mp, nullptr);
  const ParamCount c = count_params(mp->model);
  EXPECT_NEAR(c.total / 1e9, 30.5, 0.305);
  EXPECT_NEAR(c.active_per_token / 1e9, 3.3, 0.1);
  Strategy s = strat(4, 2, 2);
  s.expert_parallel = 4;
  TrainingSettings t = settings(true);
  t.global_batch_size = 32;
  const Prediction p = simulate(mp->model, s, sys(), t, PlatformParams{});
  ASSERT_TRUE(p.ok());
  EXPECT_GT(p.breakdown.ep_comm_s, 0.0);
  Strategy s1 = s;
  s1.expert_parallel = 1;
  const Prediction p1 = simulate(mp->model, s1, sys(), t, PlatformParams{});
  EXPECT_LT(p.stages[0].weight_bytes, p1.stages[0].weight_bytes);  // EP shards the experts
}

TEST(Simulator, PresetParameterCountsMatchTheirCards) {
  for (const auto& mp : io::presets().models) {
    ASSERT_GT(mp.card_total_params, 0) << mp.model.name;
    const double total = count_params(mp.model).total;
    // within 1 %, or within the rounding of a card that publishes two significant digits (e.g. "1.7B")
    const double digits = std::pow(10.0, std::floor(std::log10(mp.card_total_params)) - 1);
    const double tol = std::max(0.01 * mp.card_total_params, 0.5 * digits);
    EXPECT_NEAR(total, mp.card_total_params, tol) << mp.model.name;
    if (mp.card_active_params > 0) {
      EXPECT_NEAR(count_params(mp.model).active_per_token, mp.card_active_params, 0.05 * mp.card_active_params)
          << mp.model.name;
    }
  }
}

// A published table's GPT3-175B (read from its row) is the GPT-3-175B preset; a padded vocabulary is the same
// network, another hidden size or an extra expert is not.
TEST(Simulator, SameArchitectureIgnoresNamesAndVocabularyPadding) {
  const Model gpt3 = io::presets().find_model("GPT-3-175B")->model;
  Model row = gpt3;
  row.name = "GPT3-175B";
  EXPECT_TRUE(same_architecture(gpt3, row));
  row.vocab_size = 51200;  // Megatron's padding of GPT-2's 50,257 entries for tp 8
  EXPECT_TRUE(same_architecture(gpt3, row));
  row.vocab_size = 128256;
  EXPECT_FALSE(same_architecture(gpt3, row));
  row = gpt3;
  row.hidden_size += 128;
  EXPECT_FALSE(same_architecture(gpt3, row));
  const Model moe = io::presets().find_model("Qwen3-30B-A3B")->model;
  Model more = moe;
  more.num_experts += 1;
  EXPECT_TRUE(same_architecture(moe, moe));
  EXPECT_FALSE(same_architecture(moe, more));
}

TEST(Simulator, RejectsAPrecisionTheSystemCannotRun) {
  const Model m = io::presets().find_model("Qwen3-0.6B")->model;
  TrainingSettings t = settings();
  t.precision = Precision::bf16;  // V100 has no bf16 throughput: never a division by zero
  const Prediction p =
      simulate(m, strat(8, 1, 1), io::presets().find_system("v100_sxm2_32g")->system, t, PlatformParams{});
  EXPECT_EQ(p.rejection, Rejection::precision_unsupported);
}

TEST(Simulator, RejectsInvalidStrategiesWithAReason) {
  const Model m = io::presets().find_model("Qwen3-0.6B")->model;
  const Prediction p = simulate(m, strat(1, 1, 8), sys(), settings(), PlatformParams{});
  EXPECT_FALSE(p.ok());
  EXPECT_EQ(p.rejection, Rejection::layers_not_divisible_by_pp_vpp);
  EXPECT_TRUE(per_rank_peak_memory(p, strat(1, 1, 8)).empty());
}

TEST(Simulator, FeasibilityFollowsCapacityAndMargin) {
  const Model m = io::presets().find_model("Llama-3-70B")->model;
  const Prediction small = simulate(m, strat(8, 1, 1), sys(), settings(true), PlatformParams{});
  ASSERT_TRUE(small.ok());
  EXPECT_FALSE(small.feasible);  // 70B on one A100 per replica cannot fit
  const Prediction big = simulate(m, strat(1, 8, 8), sys(), settings(true), PlatformParams{});
  ASSERT_TRUE(big.ok());
  EXPECT_TRUE(big.feasible);
  SimOptions o;
  o.memory_margin_bytes = big.capacity_bytes - big.max_peak_memory_bytes + 1;
  EXPECT_FALSE(simulate(m, strat(1, 8, 8), sys(), settings(true), PlatformParams{}, o).feasible);
}

TEST(Simulator, LargeClusterConfigurationRuns) {
  const Model m = io::presets().find_model("Llama-3-70B")->model;
  TrainingSettings t = settings(true);
  t.seq_length = 8192;
  t.global_batch_size = 1024;
  t.sequence_parallel = true;
  Strategy s = strat(8, 8, 8, 2);
  s.virtual_pipeline = 5;
  const System& h100 = io::presets().find_system("h100_sxm_80g")->system;
  const Prediction p = simulate(m, s, h100, t, io::presets().find_system("h100_sxm_80g")->default_params);
  ASSERT_TRUE(p.ok()) << describe(p.rejection);
  EXPECT_EQ(s.devices(), 1024);
  EXPECT_TRUE(std::isfinite(p.iteration_time_s));
  EXPECT_GT(p.iteration_time_s, 0.0);
  EXPECT_EQ(per_rank_peak_memory(p, s).size(), 1024u);
  // Cross-node groups use the slower link: DP traffic exists and costs time.
  EXPECT_GT(p.breakdown.dp_comm_exposed_s + p.breakdown.dp_comm_overlapped_s, 0.0);
}
