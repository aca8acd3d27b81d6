// Megatron / NeMo execution effects: each test pins one formula or rule of simulator/ (issue: predictions at scale).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "calibration/calibrate.hpp"
#include "helpers.hpp"
#include "io/io.hpp"

using namespace lmsim;
using lmsim::test::strat;

namespace {

const System& h100() { return io::presets().find_system("h100_sxm_80g")->system; }
const System& a100() { return io::presets().find_system("a100_sxm_80g")->system; }
const Model& preset(const char* n) { return io::presets().find_model(n)->model; }

// The 22B GPT of Korthikanti et al. 2022 (Table 4's layer): h 6144, 64 heads, 48 layers.
Model gpt22b() {
  Model m;
  m.name = "GPT-22B";
  m.hidden_size = 6144;
  m.num_layers = 48;
  m.num_attention_heads = m.num_kv_heads = 64;
  m.head_dim = 96;
  m.ffn_hidden_size = 4 * 6144;
  m.vocab_size = 51200;
  m.tied_embeddings = true;
  m.activation = Activation::gelu;
  m.norm = Norm::layernorm;
  m.qkv_bias = true;
  return m;
}
TrainingSettings megatron2022() {
  TrainingSettings t;
  t.seq_length = 2048;
  t.global_batch_size = 4;
  t.micro_batch_size = 4;
  t.precision = Precision::fp16;
  t.flash_attention = false;
  t.hidden_dropout = t.attention_dropout = true;
  t.distributed_optimizer = false;
  return t;
}
Strategy with(Strategy s, Recompute rc, bool sp) {
  s.recompute = rc;
  s.sequence_parallel = sp;
  return s;
}
// Settings of a modern run: sequence, global batch, precision; flash attention on.
TrainingSettings run_settings(std::int64_t seq, std::int64_t global_batch, Precision precision = Precision::bf16) {
  TrainingSettings t;
  t.seq_length = seq;
  t.global_batch_size = global_batch;
  t.precision = precision;
  t.flash_attention = true;
  return t;
}
double bytes_of(const std::vector<CollectiveRecord>& v, const char* prim, const char* group) {
  for (const auto& c : v)
    if (c.primitive == prim && c.group == group) return c.bytes;
  return 0;
}

// Simulations where only HBM traffic costs time: GEMMs at no cost, no launches (what a memory-bound op moves, in
// seconds at the θ's share of the H100's bandwidth).
System gemms_free() {
  System fast = h100();
  fast.peak_flops_bf16 *= 1e9;
  fast.peak_flops_fp16 *= 1e9;
  return fast;
}
PlatformParams no_launch() {
  PlatformParams p;
  p.kernel_launch_us = 0;
  return p;
}
// Where only launches cost time: GEMMs and HBM traffic at no cost.
System launch_bound() {
  System fast = gemms_free();
  fast.hbm_bandwidth_bytes_per_s *= 1e9;
  return fast;
}
double hbm_s(double bytes) {
  return bytes / (h100().hbm_bandwidth_bytes_per_s * no_launch().vector_bandwidth_efficiency);
}

}  // namespace

TEST(Fidelity, SequenceParallelSavesOnlyTheWorkOutsideTheTensorParallelRegion) {
  // Korthikanti et al. 2022 §4.2.2 / Table 4: SP divides the norm, dropout and residual work by t and adds two
  // exposed all-gathers to backward, so it saves a little forward time and almost nothing in backward.
  const Model m = gpt22b();
  const TrainingSettings t = megatron2022();
  const PlatformParams p;
  const Prediction base = simulate(m, with(strat(1, 8, 1), Recompute::none, false), a100(), t, p);
  const Prediction sp = simulate(m, with(strat(1, 8, 1), Recompute::none, true), a100(), t, p);
  ASSERT_TRUE(base.ok() && sp.ok());
  EXPECT_LT(sp.layer.forward_s, base.layer.forward_s);
  const double saving = base.layer.forward_s + base.layer.backward_s - sp.layer.forward_s - sp.layer.backward_s;
  EXPECT_LT(saving, 0.1 * (base.layer.forward_s + base.layer.backward_s));  // a few percent, not 15 %
  EXPECT_GT(sp.layer.tp_comm_exposed_s, base.layer.tp_comm_exposed_s);      // the backward all-gathers
  EXPECT_NEAR(sp.layer.backward_s, base.layer.backward_s, 0.05 * base.layer.backward_s);
}

TEST(Fidelity, SelectiveRecomputeReplaysTheAttentionCoreOnly) {
  const Model m = gpt22b();
  const TrainingSettings t = megatron2022();
  const PlatformParams p;
  const Prediction none = simulate(m, with(strat(1, 8, 1), Recompute::none, false), a100(), t, p);
  const Prediction sel = simulate(m, with(strat(1, 8, 1), Recompute::selective, false), a100(), t, p);
  const Prediction full = simulate(m, with(strat(1, 8, 1), Recompute::full, false), a100(), t, p);
  const Prediction sel_sp = simulate(m, with(strat(1, 8, 1), Recompute::selective, true), a100(), t, p);
  ASSERT_TRUE(none.ok() && sel.ok() && full.ok() && sel_sp.ok());
  EXPECT_DOUBLE_EQ(none.layer.recompute_s, 0);
  EXPECT_GT(sel.layer.recompute_s, 0);
  EXPECT_LT(sel.layer.recompute_s, 0.25 * full.layer.recompute_s);
  EXPECT_NEAR(full.layer.recompute_s, full.layer.forward_s, 1e-12);  // full recompute replays the forward
  // The published ordering: selective recompute + SP costs more than neither.
  EXPECT_GT(sel_sp.layer.forward_s + sel_sp.layer.backward_s, none.layer.forward_s + none.layer.backward_s);
}

TEST(Fidelity, PipelineScatterGatherSendsSlicesAndGathersOnNvlink) {
  // Narayanan et al. 2021 §4.1: without SP each TP rank sends 2·S·h/t bytes; the receiver all-gathers: the default,
  // as in the published A100 runs. Megatron-core (since March 2023) sends the whole tensor from every TP rank, as
  // both bundled stacks do.
  const Model m = preset("GPT-3-175B");
  TrainingSettings t;
  t.seq_length = 2048;
  t.global_batch_size = 64;
  const Strategy s = with(strat(1, 8, 8), Recompute::full, false);
  const double act = 2048.0 * 12288 * 2;
  EXPECT_TRUE(t.pipeline_scatter_gather);
  const auto on = collective_diagnostics(m, s, a100(), t, PlatformParams{});
  const Prediction a = simulate(m, s, a100(), t, PlatformParams{});
  t.pipeline_scatter_gather = false;
  const auto off = collective_diagnostics(m, s, a100(), t, PlatformParams{});
  const Prediction b = simulate(m, s, a100(), t, PlatformParams{});
  EXPECT_DOUBLE_EQ(bytes_of(on, "send_recv", "pp"), act / 8);
  EXPECT_DOUBLE_EQ(bytes_of(off, "send_recv", "pp"), act);
  // The receiver gathers the whole activation from the 8 slices over its node's TP group.
  auto node_gathers = [&](const std::vector<CollectiveRecord>& v) {
    return std::count_if(v.begin(), v.end(), [&](const CollectiveRecord& k) {
      return k.primitive == "all_gather" && k.group == "tp" && k.bytes == act && k.nodes == 1 && k.group_size == 8;
    });
  };
  EXPECT_GT(node_gathers(on), 0);
  EXPECT_EQ(node_gathers(off), 0);
  EXPECT_LT(a.breakdown.pp_comm_s, 0.5 * b.breakdown.pp_comm_s);
}

TEST(Fidelity, Fp8RunsOnlyTheLinearLayersInFp8) {
  const Model m = preset("Llama-3-8B");
  TrainingSettings t;
  t.seq_length = 8192;
  t.global_batch_size = 128;
  t.precision = Precision::fp8;
  const auto gemms = gemm_diagnostics(m, strat(8, 1, 1), h100(), t, PlatformParams{});
  ASSERT_FALSE(gemms.empty());
  for (const auto& g : gemms) {
    const bool linear = g.name == "qkv" || g.name == "out" || g.name == "fc1" || g.name == "fc2";
    EXPECT_EQ(g.dtype, linear ? Precision::fp8 : Precision::bf16) << g.name;
  }
  TrainingSettings bf = t;
  bf.precision = Precision::bf16;
  const double t8 = simulate(m, strat(8, 1, 1), h100(), t, PlatformParams{}).iteration_time_s;
  const double t16 = simulate(m, strat(8, 1, 1), h100(), bf, PlatformParams{}).iteration_time_s;
  EXPECT_LT(t8, t16);
  EXPECT_GT(t8, 0.5 * t16);  // attention, norms, casts and the LM head keep FP8 well short of 2x
}

// Flash attention's efficiency rises with the sequence length of one kernel call, L / (L + half-length): at 2K
// tokens against 16K with a 1K half-length, (2048 + 1024) / 2048 over (16384 + 1024) / 16384 in time per FLOP.
// Under context parallelism (TE's P2P ring, causal): 16K over CP 8 is 2K per rank; its first step (1/8 of the
// FLOPs) runs the 2K diagonal, the other seven a block with one side of 1K: (3072/2048 + 7 · 2048/1024) / 8.
TEST(Fidelity, FlashAttentionEfficiencyFollowsTheSequencePerCall) {
  const Model m = preset("Llama-3-8B");
  auto us_per_flop = [&](std::int64_t seq, int cp, double half) {
    PlatformParams p;
    p.flash_attention_half_seq = half;
    p.kernel_launch_us = 0;  // the kernel alone
    Strategy s = strat(8 / cp, 1, 1);
    s.context_parallel = cp;
    for (const auto& g : gemm_diagnostics(m, s, h100(), run_settings(seq, 64), p))
      if (g.name == "scores") return g.predicted_us / (2.0 * g.batch * g.m * g.n * g.k);
    ADD_FAILURE() << "no scores GEMM";
    return 0.0;
  };
  EXPECT_NEAR(us_per_flop(2048, 1, 1024) / us_per_flop(16384, 1, 1024), 1.5 / (17408.0 / 16384), 1e-9);
  EXPECT_NEAR(us_per_flop(2048, 1, 0) / us_per_flop(16384, 1, 0), 1.0, 1e-12);
  EXPECT_NEAR(us_per_flop(16384, 8, 1024) / us_per_flop(2048, 1, 1024), (1.5 + 7 * 2.0) / 8 / 1.5, 1e-9);
  EXPECT_NEAR(us_per_flop(16384, 8, 0) / us_per_flop(2048, 1, 0), 1.0, 1e-12);  // no half-length: no shape effect
}

// Attention dropout inside the flash kernel draws its random numbers in the kernel, forward and again backward:
// each pass runs at the measured fraction of the dropout-free throughput. Stored-score attention drops out in its
// own memory-bound kernel instead, so its score GEMM is unchanged.
TEST(Fidelity, DropoutInsideFlashAttentionSlowsEachPassAsMeasured) {
  const Model m = preset("Llama-3-8B");
  auto scores_us = [&](bool flash, bool dropout) {
    TrainingSettings t = run_settings(8192, 64);
    t.flash_attention = flash;
    t.attention_dropout = dropout;
    t.hidden_dropout = true;  // the residual's dropout does not touch the attention kernel
    std::vector<double> us;   // one record per pass, in visit order
    for (const auto& g : gemm_diagnostics(m, strat(8, 1, 1), h100(), t, PlatformParams{}))
      if (g.name == "scores") us.push_back(g.predicted_us);
    return us;
  };
  const auto plain = scores_us(true, false), dropped = scores_us(true, true);
  ASSERT_EQ(plain.size(), 2u);  // the forward call and the fused backward
  ASSERT_EQ(dropped.size(), 2u);
  EXPECT_NEAR(dropped[0] / plain[0], 1 / 0.80, 1e-9);
  EXPECT_NEAR(dropped[1] / plain[1], 1 / 0.65, 1e-9);
  EXPECT_EQ(scores_us(false, true), scores_us(false, false));
  TrainingSettings t = run_settings(8192, 64);
  const double without = simulate(m, strat(8, 1, 1), h100(), t, PlatformParams{}).iteration_time_s;
  t.attention_dropout = true;
  EXPECT_GT(simulate(m, strat(8, 1, 1), h100(), t, PlatformParams{}).iteration_time_s, without);
}

// FP8 current (tensorwise) scaling: each cast first reads its input for the amax and runs a scale kernel, three
// kernels and 6 bytes an element where delayed scaling (and MXFP8's in-kernel block scales) take one and 4. With
// HBM time taken away, a dense layer's forward (the input and weight casts of its four linear layers) grows by
// 4 x 2 x 2 launches, its backward (the output-gradient casts) by 4 x 1 x 2; BF16 ignores the recipe.
TEST(Fidelity, Fp8CurrentScalingCastsReadTheirInputForTheAmaxFirst) {
  const Model m = preset("Llama-3-8B");
  System fast = h100();
  fast.hbm_bandwidth_bytes_per_s = 1e30;  // launches alone
  fast.mxfp8 = true;                      // to compare the MX recipe on the same device
  PlatformParams p;
  p.kernel_launch_us = 10;
  auto layer = [&](Precision prec, Fp8Recipe r, const System& sys) {
    TrainingSettings t = run_settings(8192, 64);
    t.precision = prec;
    t.fp8_recipe = r;
    const Prediction q = simulate(m, strat(8, 1, 1), sys, t, p);
    EXPECT_TRUE(q.ok());
    return std::pair{q.layer.forward_s, q.layer.backward_s};
  };
  const auto delayed = layer(Precision::fp8, Fp8Recipe::delayed, fast);
  const auto current = layer(Precision::fp8, Fp8Recipe::tensorwise, fast);
  EXPECT_NEAR(current.first - delayed.first, 4 * 2 * 2 * 10e-6, 1e-12);
  EXPECT_NEAR(current.second - delayed.second, 4 * 1 * 2 * 10e-6, 1e-12);
  EXPECT_EQ(layer(Precision::fp8, Fp8Recipe::mxfp8, fast), delayed);
  fast.fp8_block_scaled_gemm_throughput = 1;  // block scaling's casts alone: delayed's
  EXPECT_EQ(layer(Precision::fp8, Fp8Recipe::blockwise, fast), delayed);
  EXPECT_EQ(layer(Precision::bf16, Fp8Recipe::tensorwise, fast), layer(Precision::bf16, Fp8Recipe::delayed, fast));
  // On the real HBM the amax read adds bytes too: more than the launches alone.
  const auto d = layer(Precision::fp8, Fp8Recipe::delayed, h100()),
             c = layer(Precision::fp8, Fp8Recipe::tensorwise, h100());
  EXPECT_GT(c.first - d.first, 4 * 2 * 2 * 10e-6);
}

// Token dropping (Megatron-core --moe-expert-capacity-factor c): the busiest expert keeps at most c x the mean of
// what is routed to it, so a capacity factor of 1 under a 1.5x imbalance runs as balanced dropless routing; padded
// to capacity (--moe-pad-expert-input-to-capacity) every expert takes exactly c x the mean, the all-to-all carries
// the padding, and the static splits need no exchange of per-expert counts.
TEST(Fidelity, TokenDroppingCapsTheBusiestExpertAndPaddingFillsEvery) {
  const Model m = preset("Qwen3-30B-A3B");
  Strategy s = strat(8, 1, 1);
  s.expert_parallel = 8;
  PlatformParams p;
  auto settings = [](double imbalance, double cf, bool pad) {
    TrainingSettings t = run_settings(4096, 64);
    t.moe_load_imbalance = imbalance;
    t.moe_expert_capacity_factor = cf;
    t.moe_pad_expert_input_to_capacity = pad;
    EXPECT_EQ(validate(t), "");
    return t;
  };
  const Prediction balanced = simulate(m, s, h100(), settings(1.0, 0, false), p);
  const Prediction dropped = simulate(m, s, h100(), settings(1.5, 1.0, false), p);
  const Prediction skewed = simulate(m, s, h100(), settings(1.5, 0, false), p);
  ASSERT_TRUE(balanced.ok() && dropped.ok() && skewed.ok());
  EXPECT_DOUBLE_EQ(dropped.iteration_time_s, balanced.iteration_time_s);
  EXPECT_DOUBLE_EQ(dropped.max_peak_memory_bytes, balanced.max_peak_memory_bytes);
  EXPECT_GT(skewed.iteration_time_s, balanced.iteration_time_s);
  // Padded at 1.25: expert GEMM rows and all-to-all bytes 1.25x the balanced ones; no counts all-gather.
  auto expert_rows = [&](const TrainingSettings& t) {
    for (const auto& g : gemm_diagnostics(m, s, h100(), t, p))
      if (g.name == "expert_fc1") return static_cast<double>(g.m);
    return 0.0;
  };
  auto ep_bytes = [&](const TrainingSettings& t, const char* prim) {
    double b = 0;
    for (const auto& k : collective_diagnostics(m, s, h100(), t, p))
      if (k.group == "ep" && k.primitive == prim) b += k.bytes;
    return b;
  };
  const TrainingSettings plain = settings(1.0, 0, false), padded = settings(1.5, 1.25, true);
  EXPECT_NEAR(expert_rows(padded), 1.25 * expert_rows(plain), 1.0);
  EXPECT_NEAR(ep_bytes(padded, "all_to_all"), 1.25 * ep_bytes(plain, "all_to_all"), 1.0);
  EXPECT_GT(ep_bytes(plain, "all_gather"), 0.0);
  EXPECT_EQ(ep_bytes(padded, "all_gather"), 0.0);
  EXPECT_GT(simulate(m, s, h100(), padded, p).iteration_time_s, balanced.iteration_time_s);
  // Padding needs a capacity; the flex dispatcher's token dropping is not modelled.
  TrainingSettings t = settings(1.0, 0, false);
  t.moe_pad_expert_input_to_capacity = true;
  EXPECT_NE(validate(t).find("needs a moe_expert_capacity_factor"), std::string::npos);
  t = settings(1.0, 1.0, false);
  t.moe_token_dispatcher_type = MoeDispatcher::flex;
  EXPECT_NE(validate(t).find("not flex"), std::string::npos);
  t.moe_token_dispatcher_type = MoeDispatcher::alltoall;
  t.moe_expert_capacity_factor = -1;
  EXPECT_NE(validate(t), "");
}

// MX block scaling (fp8_recipe mxfp8, Transformer Engine's MXFP8BlockScaling) needs MXFP8 tensor cores: the B200
// and GB200 presets have them; on H100 the pair is rejected, and `precision_unsupported` says why, as it does for
// a precision the device has no throughput in. Per-tensor FP8 recipes run on both.
TEST(Fidelity, Mxfp8RunsOnlyWhereTheTensorCoresHaveMxFormats) {
  const Model m = preset("Llama-3-8B");
  TrainingSettings t = run_settings(8192, 64);
  t.precision = Precision::fp8;
  const System& b200 = io::presets().find_system("b200_sxm_180g")->system;
  const System& gb200 = io::presets().find_system("gb200_nvl72")->system;
  EXPECT_TRUE(b200.mxfp8);
  EXPECT_TRUE(gb200.mxfp8);
  for (const Fp8Recipe r : {Fp8Recipe::delayed, Fp8Recipe::tensorwise, Fp8Recipe::mxfp8}) {
    t.fp8_recipe = r;
    const bool mx = r == Fp8Recipe::mxfp8;
    EXPECT_TRUE(simulate(m, strat(8, 1, 1), b200, t, PlatformParams{}).ok()) << to_string(r);
    EXPECT_EQ(simulate(m, strat(8, 1, 1), h100(), t, PlatformParams{}).rejection,
              mx ? Rejection::precision_unsupported : Rejection::ok)
        << to_string(r);
    EXPECT_EQ(precision_unsupported(h100(), t).find("no MXFP8 tensor cores") != std::string::npos, mx);
    EXPECT_EQ(precision_unsupported(b200, t), "");
  }
  EXPECT_EQ(precision_unsupported(a100(), t).find("has no fp8 throughput"), 0u);
  t.precision = Precision::bf16;  // the recipe applies under FP8 only
  EXPECT_TRUE(simulate(m, strat(8, 1, 1), h100(), t, PlatformParams{}).ok());
}

// FlashAttention-2 (attention_backend flash; NeMo's 2024 launcher ran it, NVTE_FUSED_ATTN=0) runs each pass of the
// attention core at the device's measured fraction of the fused (cuDNN) kernel's throughput: 0.62 on H100 and H200
// (FlashAttention-3 paper, Figs. 5-6). No other op changes; a device without a measured ratio runs both alike.
TEST(Fidelity, FlashAttention2RunsAtItsMeasuredShareOfTheFusedKernel) {
  const Model m = preset("Llama-3-8B");
  auto us = [&](const System& sys, AttentionBackend b) {
    TrainingSettings t = run_settings(16384, 64);
    t.attention_backend = b;
    PlatformParams p;
    p.kernel_launch_us = 0;  // the kernels alone
    std::vector<std::pair<std::string, double>> out;
    for (const auto& g : gemm_diagnostics(m, strat(8, 1, 1), sys, t, p)) out.emplace_back(g.name, g.predicted_us);
    return out;
  };
  const System& h200 = io::presets().find_system("h200_sxm_141g")->system;
  const System& b200 = io::presets().find_system("b200_sxm_180g")->system;
  for (const System* sys : {&h100(), &h200}) {
    ASSERT_DOUBLE_EQ(sys->flash_attention_2_throughput, 0.62) << sys->name;
    const auto fused = us(*sys, AttentionBackend::fused), fa2 = us(*sys, AttentionBackend::flash);
    ASSERT_EQ(fused.size(), fa2.size());
    int cores = 0;
    for (std::size_t i = 0; i < fused.size(); ++i) {
      if (fused[i].first == "scores" || fused[i].first == "pv") {
        ++cores;
        EXPECT_NEAR(fa2[i].second / fused[i].second, 1 / 0.62, 1e-9) << sys->name << " " << fused[i].first;
      } else {
        EXPECT_DOUBLE_EQ(fa2[i].second, fused[i].second) << sys->name << " " << fused[i].first;
      }
    }
    EXPECT_GE(cores, 2) << sys->name;
  }
  EXPECT_EQ(us(b200, AttentionBackend::flash), us(b200, AttentionBackend::fused));
}

// FP8 block scaling (fp8_recipe blockwise): Hopper applies the 1x128 / 128x128 scales outside its tensor cores, so its
// linear GEMMs run at the device's measured share of the per-tensor kernels' throughput (0.81 on H100 and H200, from
// Transformer Engine's GEMM profiling example); Blackwell runs them as MXFP8 GEMMs, at 1. The attention core, the LM
// head and BF16 runs do not change.
TEST(Fidelity, Fp8BlockScalingRunsItsGemmsAtTheDevicesBlockScaledRate) {
  const Model m = preset("Llama-3-8B");
  auto us = [&](const System& sys, Precision prec, Fp8Recipe r) {
    TrainingSettings t = run_settings(8192, 64, prec);
    t.fp8_recipe = r;
    PlatformParams p;
    p.kernel_launch_us = 0;  // the kernels alone
    std::map<std::string, double> out;
    for (const auto& g : gemm_diagnostics(m, strat(8, 1, 1), sys, t, p)) out[g.name] = g.predicted_us;
    return out;
  };
  const System& h200 = io::presets().find_system("h200_sxm_141g")->system;
  const System& b200 = io::presets().find_system("b200_sxm_180g")->system;
  for (const System* sys : {&h100(), &h200, &b200}) {
    const double share = sys->mxfp8 ? 1.0 : 0.81;
    ASSERT_DOUBLE_EQ(sys->fp8_block_scaled_gemm_throughput, share) << sys->name;
    const auto block = us(*sys, Precision::fp8, Fp8Recipe::blockwise);
    const auto tensor = us(*sys, Precision::fp8, Fp8Recipe::tensorwise);
    ASSERT_EQ(block.size(), tensor.size());
    int linear = 0;
    for (const auto& [name, t] : tensor) {
      const bool bf16 = name == "scores" || name == "pv" || name == "lm_head";  // FP8 runs the linear layers only
      linear += bf16 ? 0 : 1;
      EXPECT_NEAR(block.at(name) / t, bf16 ? 1.0 : 1 / share, 1e-9) << sys->name << " " << name;
    }
    EXPECT_GE(linear, 4) << sys->name;
    EXPECT_EQ(us(*sys, Precision::bf16, Fp8Recipe::blockwise), us(*sys, Precision::bf16, Fp8Recipe::tensorwise));
  }
}

// NVFP4 (precision fp4: Transformer Engine's NVFP4BlockScaling, Megatron-core --fp4-format e2m1): the linear layers'
// GEMMs at the device's FP4 peak times its NVFP4 GEMM share; casts with current scaling's structure (amax pass, TP
// amax all-reduce under SP) at the measured NVFP4 / current-scaling cost ratio; half a byte and one E4M3 scale per
// 16 elements wherever a quantized tensor is kept or gathered (block-scaled: an output gradient crosses in both its
// copies); FP4 parameters gathered as their packed 4-bit data. Refused where the device has no FP4 units.
TEST(Fidelity, Nvfp4RunsTheLinearLayersInFourBitsWhereTheDeviceHasFp4) {
  const Model& m = preset("Llama-3-8B");
  const System& b200 = io::presets().find_system("b200_sxm_180g")->system;
  ASSERT_DOUBLE_EQ(b200.peak_flops_fp4, 9e15);
  ASSERT_DOUBLE_EQ(b200.fp4_gemm_throughput, 0.905);
  const double fp4_bytes = 0.5 + 1.0 / 16;
  // FP8 runs under current scaling; FP4 ones keep the default fp8_recipe (delayed), which NVFP4 does not read.
  auto settings = [](Precision prec) {
    TrainingSettings t = run_settings(8192, 64, prec);
    t.fp8_recipe = prec == Precision::fp8 ? Fp8Recipe::tensorwise : Fp8Recipe::delayed;
    return t;
  };
  // GEMM kernels: linear ones at 4500 / (9000 x 0.905) of per-tensor FP8's time, the 16-bit ones unchanged.
  PlatformParams kernels_only;
  kernels_only.kernel_launch_us = 0;
  auto us = [&](Precision prec) {
    std::map<std::string, double> out;
    for (const auto& g : gemm_diagnostics(m, strat(8, 1, 1), b200, settings(prec), kernels_only)) {
      out[g.name] = g.predicted_us;
      EXPECT_EQ(g.dtype, (g.name == "scores" || g.name == "pv" || g.name == "lm_head") ? Precision::bf16 : prec);
    }
    return out;
  };
  const auto fp4 = us(Precision::fp4), fp8 = us(Precision::fp8);
  ASSERT_EQ(fp4.size(), fp8.size());
  for (const auto& [name, t] : fp8) {
    const bool bf16 = name == "scores" || name == "pv" || name == "lm_head";
    EXPECT_NEAR(fp4.at(name) / t, bf16 ? 1.0 : 4500.0 / (9000 * 0.905), 1e-9) << name;
  }
  // Casts: on a device whose FP4 GEMMs match its FP8 ones and whose HBM is free, current scaling's three launches
  // a cast (two casts a GEMM forward, one backward) times 2.689 / 2.335.
  System fast = b200;
  fast.hbm_bandwidth_bytes_per_s = 1e30;
  fast.peak_flops_fp4 = fast.peak_flops_fp8;
  fast.fp4_gemm_throughput = 1;
  PlatformParams p;
  p.kernel_launch_us = 10;
  auto layer = [&](Precision prec) {
    const Prediction q = simulate(m, strat(8, 1, 1), fast, settings(prec), p);
    EXPECT_TRUE(q.ok()) << describe(q.rejection);
    return std::pair{q.layer.forward_s, q.layer.backward_s};
  };
  const auto current = layer(Precision::fp8), nvfp4 = layer(Precision::fp4);
  const double extra = 2.689 / 2.335 - 1;
  EXPECT_NEAR(nvfp4.first - current.first, extra * 4 * 3 * 2 * 10e-6, 1e-12);
  EXPECT_NEAR(nvfp4.second - current.second, extra * 4 * 3 * 1 * 10e-6, 1e-12);
  // Sequence-parallel gathers and the TP amax all-reduces, as current scaling's but at NVFP4's bytes.
  const Strategy sp = *parse_config_name("dp2-tp4-pp1-cp1-noRC-sp").strategy;
  std::map<double, double> gathers;
  double amax = 0, amax_current = 0;
  for (const auto& c : collective_diagnostics(m, sp, b200, settings(Precision::fp4), PlatformParams{})) {
    if (c.group == "tp" && c.primitive == "all_gather") gathers[c.bytes] += c.count;
    if (c.group == "tp" && c.primitive == "all_reduce" && c.bytes == 4) amax += c.count;
  }
  for (const auto& c : collective_diagnostics(m, sp, b200, settings(Precision::fp8), PlatformParams{}))
    if (c.group == "tp" && c.primitive == "all_reduce" && c.bytes == 4) amax_current += c.count;
  const double tokens = 8192, h = 4096, layers = 32, mb = 64.0 / 2;
  EXPECT_EQ(gathers.at(tokens * h * fp4_bytes), mb * layers * 2 * 2);  // the inputs, forward and for wgrad
  EXPECT_EQ(gathers.at(2 * tokens * h * fp4_bytes), mb * layers * 2);  // the output gradients, both copies
  EXPECT_GT(amax_current, 0);
  EXPECT_EQ(amax, amax_current);
  // Kept activations: the QKV, FC1, FC2 and out-projection inputs at NVFP4's bytes, not FP8's one.
  const double S = 8192, f = 14336, ad = 32 * 128;
  const double kept8 = layer_activation(m, strat(8, 1, 1), settings(Precision::fp8), p, false).stored_bytes;
  const double kept4 = layer_activation(m, strat(8, 1, 1), settings(Precision::fp4), p, false).stored_bytes;
  EXPECT_NEAR(kept8 - kept4, S * (2 * h + f + ad) * (1 - fp4_bytes), 1e-9 * kept8);
  // Parameters: bf16 plus an NVFP4 workspace, or (FP4 parameters) the NVFP4 data and its columnwise copy, gathered
  // as the packed 4-bit data.
  const Strategy dp8 = strat(8, 1, 1);
  TrainingSettings t = settings(Precision::bf16);
  const Prediction w16 = simulate(m, dp8, b200, t, PlatformParams{});
  const double gather16 = bytes_of(collective_diagnostics(m, dp8, b200, t, PlatformParams{}), "all_gather", "dp");
  t = settings(Precision::fp4);
  const Prediction workspace = simulate(m, dp8, b200, t, PlatformParams{});
  t.fp8_param_gather = true;
  EXPECT_EQ(validate(t), "");
  const Prediction params = simulate(m, dp8, b200, t, PlatformParams{});
  ASSERT_TRUE(w16.ok() && workspace.ok() && params.ok());
  EXPECT_NEAR(workspace.stages[0].weight_bytes / w16.stages[0].weight_bytes, (2 + fp4_bytes) / 2, 1e-12);
  EXPECT_NEAR(params.stages[0].weight_bytes / w16.stages[0].weight_bytes, 2 * fp4_bytes / 2, 1e-12);
  EXPECT_DOUBLE_EQ(bytes_of(collective_diagnostics(m, dp8, b200, t, PlatformParams{}), "all_gather", "dp"),
                   gather16 / 4);
  EXPECT_EQ(io::settings_from_json(io::to_json(t), "settings.json").precision, Precision::fp4);
  // No FP4 units on H100: refused, naming the precision.
  EXPECT_EQ(simulate(m, dp8, h100(), t, PlatformParams{}).rejection, Rejection::precision_unsupported);
  const auto problem = precision_problem(h100(), t);
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->field, "precision");
  EXPECT_NE(problem->why.find("no fp4 throughput"), std::string::npos);
}

// Megatron-core's --first-last-layers-bf16 runs the model's first num_layers_at_start_in_bf16 and last
// num_layers_at_end_in_bf16 layers outside the FP8 autocast, by global layer number: only the stages holding them
// change, each such layer costing what a layer of a BF16 run does. Refused under delayed scaling and above
// num_layers / pipeline_parallel; ignored without FP8.
TEST(Fidelity, FirstAndLastLayersInBf16RunAsBf16LayersOnTheirStages) {
  const Model m = preset("Llama-3-8B");  // 32 layers
  const PlatformParams p;
  Strategy s = strat(2, 2, 4);
  s.sequence_parallel = true;
  s.virtual_pipeline = 2;  // 8 chunks of 4 layers: stage i holds chunks i and i + 4
  auto run = [&](Precision prec, int start, int end, bool recompute_mlp = false) {
    TrainingSettings t = run_settings(4096, 64, prec);
    t.fp8_recipe = Fp8Recipe::tensorwise;
    if (recompute_mlp) t.recompute_modules = module_bit(RecomputeModule::mlp);
    s.recompute = recompute_mlp ? Recompute::selective : Recompute::none;
    t.first_last_layers_bf16 = start + end > 0;
    t.num_layers_at_start_in_bf16 = start;
    t.num_layers_at_end_in_bf16 = end;
    const Prediction q = simulate(m, s, h100(), t, p);
    EXPECT_TRUE(q.ok()) << describe(q.rejection);
    return q;
  };
  const Prediction fp8 = run(Precision::fp8, 0, 0), bf16 = run(Precision::bf16, 0, 0);
  // One layer's BF16 - FP8 cost, from a stage of the two uniform runs (8 layers a stage, ends alike in both).
  const auto per_layer = [&](double StageResult::*f) { return (bf16.stages[1].*f - fp8.stages[1].*f) / 8; };
  const Prediction ends = run(Precision::fp8, 5, 2);  // stage 0: layers 0-3 (chunk 0); stage 1: layer 4 (chunk 1)
  const int bf16_layers[4] = {4, 1, 0, 2};
  for (int i = 0; i < 4; ++i)
    for (double StageResult::*f : {&StageResult::forward_compute_s, &StageResult::backward_compute_s,
                                   &StageResult::tp_comm_s, &StageResult::tp_comm_overlapped_s})
      EXPECT_NEAR(ends.stages[i].*f - fp8.stages[i].*f, bf16_layers[i] * per_layer(f), 1e-12) << "stage " << i;
  EXPECT_GT(per_layer(&StageResult::forward_compute_s), 0);
  // Selective recompute of the MLP replays the BF16 layers' GEMMs in BF16.
  {
    const Prediction f = run(Precision::fp8, 0, 0, true), b = run(Precision::bf16, 0, 0, true),
                     e = run(Precision::fp8, 5, 2, true);
    const double layer = (b.stages[1].recompute_s - f.stages[1].recompute_s) / 8;
    EXPECT_GT(layer, 0);
    for (int i = 0; i < 4; ++i)
      EXPECT_NEAR(e.stages[i].recompute_s - f.stages[i].recompute_s, bf16_layers[i] * layer, 1e-12) << "stage " << i;
    s.recompute = Recompute::none;
  }
  EXPECT_GT(ends.stages[0].activation_bytes, fp8.stages[0].activation_bytes);  // 16-bit linear inputs kept
  EXPECT_EQ(ends.stages[2].activation_bytes, fp8.stages[2].activation_bytes);
  EXPECT_GT(ends.iteration_time_s, fp8.iteration_time_s);
  // The GEMM table: stage 0's QKV forward runs 4 of its 8 layers in BF16.
  TrainingSettings t = run_settings(4096, 64, Precision::fp8);
  t.fp8_recipe = Fp8Recipe::tensorwise;
  t.first_last_layers_bf16 = true;
  t.num_layers_at_start_in_bf16 = 5;
  t.num_layers_at_end_in_bf16 = 2;
  std::map<Precision, double> qkv;
  for (const auto& g : gemm_diagnostics(m, s, h100(), t, p))
    if (g.stage == 0 && g.name == "qkv") qkv[g.dtype] += g.count;
  EXPECT_EQ(qkv[Precision::bf16], qkv[Precision::fp8]);  // 4 BF16 and 4 FP8 layers, their passes alike
  EXPECT_GT(qkv[Precision::bf16], 0);
  // Current scaling's TP amax all-reduces run in the FP8 layers only.
  double amax = 0;
  for (const auto& c : collective_diagnostics(m, s, h100(), t, p))
    if (c.stage == 0 && c.primitive == "all_reduce" && c.group == "tp" && c.bytes == 4) amax += c.count;
  EXPECT_EQ(amax, 32.0 * 4 * 4);  // 32 micro-batches x 4 FP8 layers x four a layer
  // Ignored without FP8; refused under delayed scaling and beyond a stage's share of the layers.
  EXPECT_EQ(run(Precision::bf16, 5, 2).iteration_time_s, bf16.iteration_time_s);
  t.fp8_recipe = Fp8Recipe::delayed;
  ASSERT_TRUE(settings_problem(t));
  EXPECT_EQ(settings_problem(t)->field, "first_last_layers_bf16");
  t.fp8_recipe = Fp8Recipe::tensorwise;
  t.num_layers_at_start_in_bf16 = 9;
  EXPECT_EQ(check(m, s, t, ValidityOptions{}), Rejection::bf16_layers_exceed_stage);
  t.num_layers_at_start_in_bf16 = 8;
  EXPECT_EQ(check(m, s, t, ValidityOptions{}), Rejection::ok);
}

// Hidden and attention dropout are set apart (Megatron's --hidden-dropout, --attention-dropout): each costs its own
// work. Hidden: a 1-byte mask kept per element of each residual branch (2 s·h per layer, with or without flash);
// attention: its own kernel's traffic over stored scores (what it keeps there is θ's attention_score_bytes, fitted
// for the stack), Philox draws inside the flash kernel, which keeps nothing.
TEST(Fidelity, HiddenAndAttentionDropoutEachKeepTheirOwnTensors) {
  const Model m = preset("Llama-3-8B");
  const double S = 4096, h = static_cast<double>(m.hidden_size);
  for (bool flash : {true, false}) {
    auto run = [&](bool hidden, bool attention) {
      TrainingSettings t = run_settings(4096, 64);
      t.flash_attention = flash;
      t.hidden_dropout = hidden;
      t.attention_dropout = attention;
      return std::pair{layer_activation(m, strat(8, 1, 1), t, PlatformParams{}, false).stored_bytes,
                       simulate(m, strat(8, 1, 1), h100(), t, PlatformParams{}).iteration_time_s};
    };
    const auto none = run(false, false), hidden = run(true, false), attention = run(false, true),
               both = run(true, true);
    EXPECT_NEAR(hidden.first - none.first, 2 * S * h, 1) << flash;
    EXPECT_EQ(attention.first, none.first) << flash;
    EXPECT_NEAR(both.first - none.first, (hidden.first - none.first) + (attention.first - none.first), 1) << flash;
    EXPECT_GT(hidden.second, none.second) << flash;
    EXPECT_GT(attention.second, none.second) << flash;
  }
}

// On a device whose matrix units need their own tiled layout (Ascend), every GEMM call passes its operands and
// output through a layout conversion, but the fused flash-attention kernel does not: it never writes the s x s
// scores. Stored-score attention keeps its conversions.
TEST(Fidelity, FlashAttentionPassesNoScoresThroughALayoutConversion) {
  const Model m = preset("Llama-3-8B");
  System tiled = h100();
  tiled.gemm_layout_conversion = true;
  auto call_us = [&](const System& sys, bool flash, const char* name) {
    TrainingSettings t = run_settings(16384, 64);
    t.flash_attention = flash;
    for (const auto& g : gemm_diagnostics(m, strat(8, 1, 1), sys, t, PlatformParams{}))
      if (g.name == name) return g.predicted_us;
    ADD_FAILURE() << "no " << name << " GEMM";
    return 0.0;
  };
  EXPECT_DOUBLE_EQ(call_us(tiled, true, "scores"), call_us(h100(), true, "scores"));
  EXPECT_DOUBLE_EQ(call_us(tiled, true, "pv"), call_us(h100(), true, "pv"));
  EXPECT_GT(call_us(tiled, false, "scores"), call_us(h100(), false, "scores"));
  EXPECT_GT(call_us(tiled, true, "fc1"), call_us(h100(), true, "fc1"));
}

// Sliding-window attention: a windowed layer pairs each query with at most w keys, w·s − w²/2 pairs against a
// causal s²/2. Mistral-7B v0.1 windows every layer (4096 of 32K: 2/8 − 1/64 of the causal work); Gemma-2
// alternates windowed and full layers (4096 of 8K: 3/4 on 21 of 42 layers). Flash attention does only those
// pairs; stored scores are computed whole and masked.
TEST(Fidelity, SlidingWindowAttentionPairsEachQueryWithTheWindowOnly) {
  const Model& mistral = preset("Mistral-7B");
  const Model& gemma = preset("Gemma-2-9B");
  EXPECT_EQ(mistral.sliding_window, 4096);
  EXPECT_EQ(gemma.window_attn_skip_freq, 2);
  EXPECT_DOUBLE_EQ(mistral.attention_window_fraction(32768), 2.0 / 8 - 1.0 / 64);
  EXPECT_DOUBLE_EQ(mistral.attention_window_fraction(4096), 1.0);
  EXPECT_DOUBLE_EQ(gemma.attention_window_fraction(8192), (21 + 21 * 0.75) / 42);
  EXPECT_DOUBLE_EQ(preset("Llama-3-8B").attention_window_fraction(1 << 20), 1.0);
  Model full = mistral;
  full.sliding_window = 0;
  auto scores = [&](const Model& m, bool flash) {
    TrainingSettings t = run_settings(32768, 64);
    t.flash_attention = flash;
    for (const auto& g : gemm_diagnostics(m, strat(8, 1, 1), h100(), t, PlatformParams{}))
      if (g.name == std::string("scores")) return g;
    ADD_FAILURE() << "no scores GEMM";
    return GemmRecord{};
  };
  EXPECT_DOUBLE_EQ(scores(mistral, true).n, scores(full, true).n * (2.0 / 8 - 1.0 / 64));
  EXPECT_DOUBLE_EQ(scores(mistral, false).n, scores(full, false).n);
  TrainingSettings t = run_settings(32768, 64);
  const Prediction a = simulate(mistral, strat(8, 1, 1), h100(), t, PlatformParams{});
  const Prediction b = simulate(full, strat(8, 1, 1), h100(), t, PlatformParams{});
  EXPECT_LT(a.iteration_time_s, b.iteration_time_s);
  EXPECT_DOUBLE_EQ(a.max_peak_memory_bytes, b.max_peak_memory_bytes);
}

// Packed sequences (document_tokens): attention stays inside each document, so a sequence of s tokens in documents
// of L computes floor(s/L) squares of L² and the remainder's, each causal half and windowed as the model windows,
// where one document would compute s²; the flash kernel runs at the efficiency of a call over L tokens. A document
// as long as the sequence (or 0) is the sequence. Packing needs flash attention (the fused kernel's THD form).
TEST(Fidelity, PackedDocumentsAttendWithinEachDocument) {
  auto scores = [&](const Model& m, std::int64_t seq, std::int64_t doc, double half = 0) {
    PlatformParams p;
    p.flash_attention_half_seq = half;
    p.kernel_launch_us = 0;
    TrainingSettings t = run_settings(seq, 64);
    t.document_tokens = doc;
    EXPECT_EQ(validate(t), "");
    for (const auto& g : gemm_diagnostics(m, strat(8, 1, 1), h100(), t, p))
      if (g.name == std::string("scores")) return g;
    ADD_FAILURE() << "no scores GEMM";
    return GemmRecord{};
  };
  const Model& llama = preset("Llama-3-8B");
  EXPECT_EQ(scores(llama, 4096, 0).n, 2048);  // the causal half of the sequence's square
  EXPECT_EQ(scores(llama, 4096, 4096).n, 2048);
  EXPECT_EQ(scores(llama, 4096, 8192).n, 2048);
  EXPECT_EQ(scores(llama, 4096, 1024).n, 512);  // four squares of 1024², a quarter of it
  EXPECT_NEAR(static_cast<double>(scores(llama, 4096, 1000).n),
              4096 * 0.5 * (4 * 1000.0 * 1000 + 96.0 * 96) / (4096.0 * 4096), 1.0);  // four and a 96-token rest
  // Mistral's 4096-token window inside 8192-token documents of a 32K sequence: 4 squares, each 3/4 windowed.
  EXPECT_EQ(scores(preset("Mistral-7B"), 32768, 8192).n, static_cast<std::int64_t>(32768 * 0.5 * 4 * 0.75 / 16));
  // The kernel's efficiency at the document's 1024 tokens, not the sequence's 4096 (half-length 1024).
  auto us_per_flop = [&](std::int64_t doc) {
    const GemmRecord g = scores(llama, 4096, doc, 1024);
    return g.predicted_us / (2.0 * g.batch * g.m * g.n * g.k);
  };
  EXPECT_NEAR(us_per_flop(1024) / us_per_flop(0), (2048.0 / 1024) / (5120.0 / 4096), 1e-9);
  // Less attention, less time; no effect on memory (flash keeps no scores).
  TrainingSettings t = run_settings(8192, 64);
  const Prediction whole = simulate(llama, strat(8, 1, 1), h100(), t, PlatformParams{});
  t.document_tokens = 512;
  const Prediction packed = simulate(llama, strat(8, 1, 1), h100(), t, PlatformParams{});
  ASSERT_TRUE(whole.ok() && packed.ok());
  EXPECT_LT(packed.iteration_time_s, whole.iteration_time_s);
  EXPECT_DOUBLE_EQ(packed.max_peak_memory_bytes, whole.max_peak_memory_bytes);
  EXPECT_EQ(io::settings_from_json(io::to_json(t), "settings.json").document_tokens, 512);
  t.flash_attention = false;
  EXPECT_NE(validate(t).find("need flash attention"), std::string::npos);
  t.flash_attention = true;
  t.document_tokens = -1;
  EXPECT_FALSE(validate(t).empty());
}

// LoRA (lora_rank r, Megatron-Bridge's peft LoRA): the base model is frozen, so its GEMMs run forward and input
// gradient only, it keeps no input for a weight gradient, and only the adapters (A: in x r, B: r x out on each
// targeted linear layer) have gradients, optimizer state and data-parallel traffic. An adapter runs two 16-bit
// GEMMs each pass and keeps its 16-bit input and A's output.
TEST(Fidelity, LoraFreezesTheBaseModelAndTrainsOnlyItsAdapters) {
  const Model& m = preset("Llama-3-8B");  // h 4096, 32 heads, 8 KV heads of 128, f 14336, 32 layers
  const Strategy s = strat(4, 1, 1);
  const PlatformParams p;
  TrainingSettings full = run_settings(4096, 64);
  TrainingSettings lora = full;
  lora.lora_rank = 16;
  lora.lora_target_modules = lora_bit(LoraTarget::linear_qkv);
  ASSERT_EQ(validate(lora), "");
  const Prediction a = simulate(m, s, h100(), full, p), b = simulate(m, s, h100(), lora, p);
  ASSERT_TRUE(a.ok() && b.ok());
  const double h = 4096, f = 14336, r = 16, layers = 32, S = 4096;
  const double adapters = layers * (h * r + r * (32 + 2 * 8) * 128);
  const double base = a.stages[0].weight_bytes / 2;  // bf16 weights
  EXPECT_NEAR(b.stages[0].weight_bytes, a.stages[0].weight_bytes + 2 * adapters, 1e-6 * base);
  EXPECT_NEAR(b.stages[0].gradient_bytes, a.stages[0].gradient_bytes / base * adapters, 1e-6 * adapters);
  EXPECT_NEAR(b.stages[0].optimizer_bytes, a.stages[0].optimizer_bytes / base * adapters, 1e-6 * adapters);
  auto dp_bytes = [&](const TrainingSettings& t) {
    return bytes_of(collective_diagnostics(m, s, h100(), t, p), "reduce_scatter", "dp");
  };
  EXPECT_NEAR(dp_bytes(lora), dp_bytes(full) / base * adapters, 1e-6 * dp_bytes(full));
  // Calls per iteration: a base GEMM twice a micro-batch where it ran three times; each adapter GEMM three times.
  auto calls = [&](const TrainingSettings& t) {
    std::map<std::string, double> n;
    for (const auto& g : gemm_diagnostics(m, s, h100(), t, p)) {
      n[g.name] += g.count;
      if (g.name == "lora_a" || g.name == "lora_b") {
        EXPECT_EQ(g.dtype, Precision::bf16);
      }
    }
    return n;
  };
  const auto ca = calls(full), cb = calls(lora);
  for (const char* name : {"qkv", "out", "fc1", "fc2", "lm_head"})
    EXPECT_NEAR(cb.at(name), ca.at(name) * 2 / 3, 1e-9) << name;
  EXPECT_NEAR(cb.at("lora_a"), ca.at("qkv"), 1e-9);
  EXPECT_NEAR(cb.at("lora_b"), ca.at("qkv"), 1e-9);
  EXPECT_EQ(ca.count("lora_a"), 0u);
  // Under FP8 the base linear layers run in FP8, the adapters (Megatron's own linear layers) in 16 bits.
  TrainingSettings fp8 = lora;
  fp8.precision = Precision::fp8;
  for (const auto& g : gemm_diagnostics(m, s, h100(), fp8, p)) {
    if (g.name == "qkv") {
      EXPECT_EQ(g.dtype, Precision::fp8);
    }
    if (g.name == "lora_a" || g.name == "lora_b") {
      EXPECT_EQ(g.dtype, Precision::bf16);
    }
  }
  // Kept per layer: no QKV, FC1 or FC2 input for a weight gradient (the out-projection's is flash attention's
  // output, kept anyway); the QKV adapter keeps its input and A's output.
  const double kept_full = layer_activation(m, s, full, p, false).stored_bytes;
  const double kept_lora = layer_activation(m, s, lora, p, false).stored_bytes;
  EXPECT_NEAR(kept_full - kept_lora, (2 * S * h + 2 * S * h + 2 * S * f) - (2 * S * h + 2 * S * r), 1e-9 * kept_full);
  EXPECT_LT(b.iteration_time_s, a.iteration_time_s);
  // Model FLOPs: a frozen GEMM's forward and input gradient, 2/3 of a trained one's (attention's cores unchanged).
  EXPECT_LT(b.model_flops_per_device / a.model_flops_per_device, 0.8);
  EXPECT_GT(b.model_flops_per_device / a.model_flops_per_device, 2.0 / 3);
  // Every target: four adapters a layer, more adapter work than one.
  lora.lora_target_modules = kAllLoraTargets;
  EXPECT_GT(simulate(m, s, h100(), lora, p).iteration_time_s, b.iteration_time_s);
  const TrainingSettings back = io::settings_from_json(io::to_json(lora), "settings.json");
  EXPECT_EQ(back.lora_rank, 16);
  EXPECT_EQ(back.lora_target_modules, kAllLoraTargets);
  // A tied embedding split over the pipeline all-reduces its gradient between the two ends; frozen, it has none.
  const Model& tied = preset("Qwen3-0.6B");
  ASSERT_TRUE(tied.tied_embeddings);
  auto embedding_calls = [&](const TrainingSettings& t) {
    double n = 0;
    for (const auto& k : collective_diagnostics(tied, strat(2, 1, 2), h100(), t, p)) n += k.group == "embedding";
    return n;
  };
  EXPECT_GT(embedding_calls(full), 0);
  EXPECT_EQ(embedding_calls(lora), 0);
  // Refused: no target, a negative rank, FSDP.
  lora.lora_target_modules = 0;
  EXPECT_NE(validate(lora).find("lora_target_modules"), std::string::npos);
  lora.lora_target_modules = kAllLoraTargets;
  lora.fsdp = true;
  EXPECT_FALSE(validate(lora).empty());
  lora.fsdp = false;
  lora.lora_rank = -1;
  EXPECT_FALSE(validate(lora).empty());
}

// Flash attention keeps per head and token what its backward needs: an fp32 log-sum-exp on NVIDIA, npu_fusion_
// attention's softmax max and sum ([b, n, s, 8] fp32 each) on Ascend, 60 bytes more per head and token.
TEST(Fidelity, FlashAttentionKeepsTheDevicesSoftmaxStatistics) {
  const Model m = preset("Llama-3-8B");
  System ascend_like = h100();
  ascend_like.flash_softmax_stats_bytes = 64;
  const TrainingSettings t = run_settings(32768, 8);
  const Strategy s = strat(8, 1, 1);
  const Prediction a = simulate(m, s, h100(), t, PlatformParams{}),
                   b = simulate(m, s, ascend_like, t, PlatformParams{});
  ASSERT_TRUE(a.ok() && b.ok());
  // 60 bytes per head and token of every layer's stored activations (32 layers, 32 heads, 32768 tokens).
  EXPECT_DOUBLE_EQ(b.stages[0].activation_bytes - a.stages[0].activation_bytes, 60.0 * 32 * 32768 * 32);
  EXPECT_GT(b.max_peak_memory_bytes, a.max_peak_memory_bytes);
}

TEST(Fidelity, DataParallelOverlapParameterHasAnEffect) {
  const Model m = preset("Llama-3-70B");
  TrainingSettings t;
  t.seq_length = 8192;
  t.global_batch_size = 64;
  t.overlap_param_gather = true;
  PlatformParams lo, hi;
  lo.dp_overlap = 0;
  hi.dp_overlap = 1;
  const Strategy s = strat(8, 8, 4);
  const Prediction a = simulate(m, s, h100(), t, lo), b = simulate(m, s, h100(), t, hi);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_GT(a.breakdown.dp_comm_exposed_s, b.breakdown.dp_comm_exposed_s);
  EXPECT_GT(a.iteration_time_s, b.iteration_time_s);
  t.overlap_grad_reduce = t.overlap_param_gather = false;
  const Prediction c = simulate(m, s, h100(), t, hi);
  EXPECT_DOUBLE_EQ(c.breakdown.dp_comm_overlapped_s, 0);
}

// Overlapped data-parallel traffic is not free: each second of it beside compute slows that compute by
// 1 - dp_overlap seconds (NCCL's kernels take SMs and HBM bandwidth), by the published SM share of NCCL's
// user-buffer algorithms with nccl_ub (Megatron-core's DistributedDataParallelConfig: 5 of an H100's 132 SMs for a
// reduce-scatter inside the node).
TEST(Fidelity, OverlappedDataParallelTrafficSlowsTheComputeBesideIt) {
  const Model& m = preset("Llama-3-8B");
  TrainingSettings t = run_settings(8192, 64);
  t.distributed_optimizer = false;  // one gradient all-reduce, shorter than a micro-batch's backward
  t.overlap_grad_reduce = true;
  const Strategy s = strat(8, 1, 1);
  PlatformParams p;
  auto run = [&](double overlap) {
    p.dp_overlap = overlap;
    const Prediction r = simulate(m, s, h100(), t, p);
    EXPECT_TRUE(r.ok());
    return r.breakdown;
  };
  const Breakdown quarter = run(0.25), most = run(0.75), all = run(1.0);
  const double traffic = quarter.dp_comm_exposed_s + quarter.dp_comm_overlapped_s;
  ASSERT_GT(traffic, 0.01);
  EXPECT_NEAR(quarter.dp_comm_exposed_s, 0.75 * traffic, 1e-9);
  EXPECT_NEAR(most.dp_comm_exposed_s, 0.25 * traffic, 1e-9);
  EXPECT_NEAR(all.dp_comm_exposed_s, 0.0, 1e-12);
  ASSERT_EQ(h100().sm_count, 132);
  t.nccl_ub = true;
  const Breakdown ub = run(0.25);
  EXPECT_NEAR(ub.dp_comm_exposed_s, 5.0 / 132 * traffic, 1e-9);
  // Not overlapped, all of it is exposed, user buffers or not.
  t.overlap_grad_reduce = false;
  EXPECT_NEAR(run(0.25).dp_comm_exposed_s, traffic, 1e-9);
}

// Megatron-core's interleaved schedule reduces each model chunk's gradients as a whole once its last micro-batch's
// backward is done (grad_sync_func), the chunks finishing `group` chunk-backwards apart from the last to the first:
// the first chunk's share (1/v) has nothing left to hide under on the first stage, however short. Without
// interleaving the reduction is bucketed inside the last backward and hides under it. When the chunks' reductions
// queue up, the span from the first chunk's end to the stage's end (v - 1 spacings) is what they hide under.
TEST(Fidelity, InterleavedGradientReductionGoesChunkByChunk) {
  const Model& m = preset("Llama-3-8B");
  TrainingSettings t = run_settings(8192, 64);
  t.distributed_optimizer = false;  // one gradient all-reduce, no parameter gather
  PlatformParams p;
  p.dp_overlap = 1;  // no contention: what is hidden is free
  auto stage0 = [&](int vpp, bool overlap, std::int64_t group = 0) {
    Strategy s = strat(8, 1, 4);
    s.virtual_pipeline = vpp;
    t.overlap_grad_reduce = overlap;
    t.microbatch_group_size_per_vp_stage = group;
    const Prediction r = simulate(m, s, h100(), t, p);
    EXPECT_TRUE(r.ok());
    return r.stages[0];
  };
  const StageResult whole = stage0(1, false);
  const double reduce = whole.dp_comm_exposed_s;  // the stage's gradient all-reduce, all exposed
  const double backward = whole.backward_compute_s;
  ASSERT_GT(reduce, 0.0);
  ASSERT_LT(reduce, backward);  // short enough to hide under one micro-batch's backward
  EXPECT_NEAR(stage0(1, true).dp_comm_exposed_s, 0.0, 1e-12);
  for (const int vpp : {2, 4}) {
    const StageResult r = stage0(vpp, true);
    EXPECT_NEAR(r.dp_comm_exposed_s, reduce / vpp, 1e-9 * reduce) << vpp;
    EXPECT_NEAR(r.dp_comm_overlapped_s, reduce - reduce / vpp, 1e-9 * reduce) << vpp;
  }
  // Groups of pp = 4 micro-batches: the chunks finish 4 chunk-backwards apart, less than a chunk's reduction over
  // slow links.
  System slow = h100();
  slow.intra_node.bandwidth_bytes_per_s /= 100;  // the data-parallel ranks share a node
  Strategy s = strat(8, 1, 4);
  s.virtual_pipeline = 4;
  t.overlap_grad_reduce = true;
  t.microbatch_group_size_per_vp_stage = 0;
  const Prediction r = simulate(m, s, slow, t, p);
  ASSERT_TRUE(r.ok());
  const StageResult& st = r.stages[0];
  const double total = st.dp_comm_exposed_s + st.dp_comm_overlapped_s, chunk_bwd = st.backward_compute_s / 4;
  ASSERT_GT(total / 4, 4 * chunk_bwd);
  EXPECT_NEAR(st.dp_comm_overlapped_s, 3 * 4 * chunk_bwd, 1e-9 * total);
}

// The distributed optimizer's parameter all-gather (--overlap-param-gather), interleaved: the first chunk's gather is
// bucketed inside that chunk's own first forward, every other chunk's launched `group` chunk-forwards ahead of it
// (param_sync_func). Over slow links stage 0 (no warm-up slack) hides one chunk-forward plus (v - 1)·group.
TEST(Fidelity, InterleavedParameterGatherHidesTheFirstChunkInItsOwnForward) {
  TrainingSettings t = run_settings(8192, 64);
  t.distributed_optimizer = true;
  t.overlap_param_gather = true;
  t.overlap_grad_reduce = false;  // the gradients' reduce-scatter all exposed: only the gather is hidden
  PlatformParams p;
  p.dp_overlap = 1;  // no contention: what is hidden is free
  System slow = h100();
  slow.intra_node.bandwidth_bytes_per_s /= 100;
  Strategy s = strat(8, 1, 4);
  s.virtual_pipeline = 4;
  const Prediction r = simulate(preset("Llama-3-8B"), s, slow, t, p);
  ASSERT_TRUE(r.ok());
  const StageResult& st = r.stages[0];
  const double chunk_fwd = st.forward_compute_s / 4;
  ASSERT_GT(st.dp_comm_exposed_s, 4 * (1 + 3 * 4) * chunk_fwd);  // far more traffic than the windows hold
  EXPECT_NEAR(st.dp_comm_overlapped_s, (1 + 3 * 4) * chunk_fwd, 1e-9 * st.dp_comm_overlapped_s);
}

// The interleaved schedule's overlapped pipeline sends and context parallelism's ring under the attention core are
// NCCL kernels too: each second they hide costs 1 - dp_overlap seconds, as data-parallel traffic does.
TEST(Fidelity, OverlappedPipelineAndRingTrafficCostTheirContention) {
  const Model& m = preset("Llama-3-70B");
  TrainingSettings t = run_settings(16384, 64);
  t.overlap_p2p_comm = true;
  Strategy s = strat(2, 8, 4);
  s.context_parallel = 2;
  s.virtual_pipeline = 5;
  s.sequence_parallel = true;
  PlatformParams free_overlap, half;
  free_overlap.dp_overlap = 1;
  half.dp_overlap = 0.5;
  const Prediction a = simulate(m, s, h100(), t, free_overlap), b = simulate(m, s, h100(), t, half);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_GT(a.breakdown.pp_comm_overlapped_s, 0);
  ASSERT_GT(a.breakdown.cp_comm_overlapped_s, 0);
  EXPECT_NEAR(b.breakdown.pp_comm_s - a.breakdown.pp_comm_s, 0.5 * a.breakdown.pp_comm_overlapped_s, 1e-9);
  EXPECT_NEAR(b.breakdown.cp_comm_exposed_s - a.breakdown.cp_comm_exposed_s, 0.5 * a.breakdown.cp_comm_overlapped_s,
              1e-9);
  // What is charged as contention is no longer counted hidden.
  EXPECT_NEAR(b.breakdown.cp_comm_overlapped_s, 0.5 * a.breakdown.cp_comm_overlapped_s, 1e-9);
}

// Without gradient-accumulation fusion a weight gradient is added into its buffer (read, add, write) under
// Megatron's DDP, copied into the bucket its reduce-scatter sends under Megatron-FSDP (written only).
TEST(Fidelity, UnfusedGradientAccumulationCopiesUnderFsdp) {
  const Model& m = preset("Llama-3-8B");
  TrainingSettings t = run_settings(8192, 64);
  const Strategy s = strat(8, 1, 1);
  PlatformParams p;
  p.kernel_launch_us = 0;  // bytes alone
  auto backward_cost = [&](bool fsdp) {
    t.fsdp = fsdp;
    t.gradient_accumulation_fusion = true;
    const Prediction fused = simulate(m, s, h100(), t, p);
    t.gradient_accumulation_fusion = false;
    const Prediction unfused = simulate(m, s, h100(), t, p);
    EXPECT_TRUE(fused.ok() && unfused.ok());
    return unfused.stages[0].backward_compute_s - fused.stages[0].backward_compute_s;
  };
  const double ddp = backward_cost(false), fsdp = backward_cost(true);
  ASSERT_GT(ddp, 0);
  ASSERT_TRUE(t.fp32_gradients);
  EXPECT_NEAR(fsdp / ddp, (2.0 + 4) / (2.0 + 2 * 4), 1e-9);  // into fp32 buffers: 6 bytes against 10
}

TEST(Fidelity, TensorParallelCommOverlapHidesTheSequenceParallelCollectives) {
  const Model m = preset("Llama-3-70B");
  TrainingSettings t;
  t.seq_length = 8192;
  t.global_batch_size = 32;
  t.sequence_parallel = true;
  const Strategy s = strat(4, 8, 2);
  const Prediction plain = simulate(m, s, h100(), t, PlatformParams{});
  t.tp_comm_overlap = true;
  const Prediction ub = simulate(m, s, h100(), t, PlatformParams{});
  EXPECT_LT(ub.breakdown.tp_comm_s, 0.5 * plain.breakdown.tp_comm_s);
  EXPECT_LT(ub.iteration_time_s, plain.iteration_time_s);
}

// Userbuffers run each overlapped GEMM in splits along its rows: tp ring-exchange splits for the column-parallel
// forwards and the row-parallel input gradients; the row-parallel forwards tp splits in FP8 (ring exchange) and
// TE's 4 pipelined splits beside 16 reduce-scatter SMs in BF16; the column-parallel backward (bulk overlap) and the
// weight gradients run whole.
TEST(Fidelity, TensorParallelCommOverlapSplitsTheOverlappedGemmsAlongTheRows) {
  const Model& m = preset("Llama-3-70B");
  TrainingSettings t;
  t.seq_length = 4096;
  t.global_batch_size = 32;
  t.sequence_parallel = true;
  const Strategy s = strat(2, 8, 2);
  System sys = h100();
  sys.sm_count = 0;  // no SM margin: splits alone
  auto compute = [&](bool overlap, const PlatformParams& p) {
    t.tp_comm_overlap = overlap;
    const Prediction r = simulate(m, s, sys, t, p);
    EXPECT_TRUE(r.ok()) << describe(r.rejection);
    return std::pair{r.stages[0].forward_compute_s, r.stages[0].backward_compute_s};
  };
  PlatformParams flat;  // size-independent efficiency: only launches and SM margins differ
  flat.matmul_half_dim = 0;
  flat.kernel_launch_us = 0;
  const auto [f0, b0] = compute(false, flat);
  const auto [f1, b1] = compute(true, flat);
  EXPECT_NEAR(f1, f0, 1e-12 * f0);
  EXPECT_NEAR(b1, b0, 1e-12 * b0);
  const double layers = 40, tp = 8, launch_s = 10e-6;  // 80 layers over 2 stages
  auto extra_launches = [&](Precision precision) {
    t.precision = precision;
    flat.kernel_launch_us = 10;
    const auto [fa, ba] = compute(false, flat);
    const auto [fb, bb] = compute(true, flat);
    flat.kernel_launch_us = 0;
    return std::pair{(fb - fa) / (layers * launch_s), (bb - ba) / (layers * launch_s)};
  };
  const auto [bf16_fwd, bf16_bwd] = extra_launches(Precision::bf16);
  EXPECT_NEAR(bf16_fwd, 2 * (tp - 1) + 2 * (4 - 1), 1e-6);
  EXPECT_NEAR(bf16_bwd, 2 * (tp - 1), 1e-6);
  const auto [fp8_fwd, fp8_bwd] = extra_launches(Precision::fp8);
  EXPECT_NEAR(fp8_fwd, 4 * (tp - 1), 1e-6);
  EXPECT_NEAR(fp8_bwd, 2 * (tp - 1), 1e-6);

  // BF16's pipelined reduce-scatter leaves its GEMMs 132 - 16 of H100's SMs: proj and fc2 forward 132/116 as long;
  // FP8's ring exchange runs its reduction kernel on one SM: 132/131.
  sys.sm_count = 132;
  for (const auto& [precision, sms_left] : {std::pair{Precision::bf16, 116.0}, std::pair{Precision::fp8, 131.0}}) {
    t.precision = precision;
    const double margin = compute(true, flat).first - compute(false, flat).first;
    double row_parallel_s = 0;
    for (const auto& g : gemm_diagnostics(m, s, sys, t, flat))
      if (g.stage == 0 && (g.name == "out" || g.name == "fc2")) row_parallel_s += g.predicted_us * 1e-6;
    EXPECT_NEAR(margin, layers * row_parallel_s * (132.0 / sms_left - 1), 1e-9) << to_string(precision);
  }
  t.precision = Precision::bf16;

  // Thinner GEMMs run at a lower efficiency: the split forward is slower, by less at twice the rows.
  PlatformParams sized;
  sized.kernel_launch_us = 0;
  const double slow1 = compute(true, sized).first / compute(false, sized).first;
  t.micro_batch_size = 2;
  const double slow2 = compute(true, sized).first / compute(false, sized).first;
  EXPECT_GT(slow1, slow2);
  EXPECT_GT(slow2, 1.0);
}

// The GEMM diagnostics list the calls as userbuffers run them: Llama-3-70B in FP8 over TP 8 runs qkv's and fc1's
// forward as 8 calls of 1/8 of the rows (their backward whole), out's and fc2's forward and input gradient as 8
// slices (their weight gradient whole). The rows and, with a size-independent efficiency and no launch cost, the
// time of each GEMM add up to the unsplit run's.
TEST(Fidelity, GemmDiagnosticsListTheUserbuffersSplitsAsTheirKernelsRun) {
  const Model& m = preset("Llama-3-70B");
  TrainingSettings t = run_settings(4096, 32, Precision::fp8);
  t.sequence_parallel = true;
  const Strategy s = strat(2, 8, 2);
  System sys = h100();
  sys.sm_count = 0;
  PlatformParams flat;
  flat.matmul_half_dim = 0;
  flat.kernel_launch_us = 0;
  const auto whole = gemm_diagnostics(m, s, sys, t, flat);
  t.tp_comm_overlap = true;
  const auto split = gemm_diagnostics(m, s, sys, t, flat);
  // Calls of `name` on stage 0 with `rows` rows (0: any), and their rows and time in all.
  struct Sum {
    double calls = 0, rows = 0, us = 0;
  };
  auto sum = [](const std::vector<GemmRecord>& v, const std::string& name, std::int64_t rows) {
    Sum out;
    for (const auto& g : v)
      if (g.stage == 0 && g.name == name && (rows == 0 || g.m == rows)) {
        out.calls += g.count;
        out.rows += g.count * static_cast<double>(g.m);
        out.us += g.count * g.predicted_us;
      }
    return out;
  };
  for (const char* name : {"qkv", "out", "fc1", "fc2"}) {
    const Sum a = sum(whole, name, 0), b = sum(split, name, 0);
    ASSERT_GT(a.calls, 0) << name;
    EXPECT_DOUBLE_EQ(b.rows, a.rows) << name;
    EXPECT_NEAR(b.us, a.us, 1e-9 * a.us) << name;
    std::int64_t rows = 0;
    for (const auto& g : whole)
      if (g.name == name) rows = g.m;
    const bool row_parallel = std::string(name) == "out" || std::string(name) == "fc2";
    const double sliced_passes = row_parallel ? 2 : 1;
    EXPECT_DOUBLE_EQ(sum(split, name, rows / 8).calls, 8 * sliced_passes * a.calls / 3) << name;
    EXPECT_DOUBLE_EQ(sum(split, name, rows).calls, (3 - sliced_passes) * a.calls / 3) << name;
  }
  EXPECT_EQ(sum(split, "lm_head", 0).calls, sum(whole, "lm_head", 0).calls);
}

TEST(Fidelity, PublishedLayoutsWithUnevenEndStagesPredict) {
  TrainingSettings t;
  t.seq_length = 8192;
  t.global_batch_size = 512;
  t.sequence_parallel = true;
  ParseResult r = parse_config_name("dp8-tp8-pp8-cp2-noRC-vpp8");
  const Prediction p = simulate(preset("Llama-3.1-405B"), *r.strategy, h100(), t, PlatformParams{});
  ASSERT_TRUE(p.ok()) << describe(p.rejection);
  EXPECT_EQ(p.pipeline_split, SplitKind::embedding_loss);  // (126 + 2) / 64 chunks
  EXPECT_EQ(p.stages[0].num_layers, 15);                   // its first chunk holds the embedding
  EXPECT_EQ(p.stages[1].num_layers, 16);

  const Model& ds = preset("DeepSeek-V3");
  t.seq_length = 4096;
  t.global_batch_size = 2048;
  Strategy s = *parse_config_name("dp16-tp1-pp16-cp1-ep8-noRC").strategy;
  const Prediction d = simulate(ds, s, io::presets().find_system("b200_sxm_180g")->system, t, PlatformParams{});
  ASSERT_TRUE(d.ok()) << describe(d.rejection);
  EXPECT_EQ(d.stages[15].mtp_layers, 1);  // (61 layers + MTP + embedding + loss) / 16
  EXPECT_EQ(d.stages[15].num_layers, 2);

  // Explicit first/last stage sizes, as Megatron's --decoder-first/last-pipeline-num-layers, round-trip by name.
  r = parse_config_name("dp8-tp8-pp8-cp2-noRC-first15-last15");
  ASSERT_TRUE(r.strategy);
  EXPECT_EQ(config_name(*r.strategy), "dp8-tp8-pp8-cp2-noRC-first15-last15");
  const Prediction e = simulate(preset("Llama-3.1-405B"), *r.strategy, h100(), t, PlatformParams{});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e.pipeline_split, SplitKind::explicit_layers);
  EXPECT_EQ(e.stages[0].num_layers, 15);
  EXPECT_EQ(e.stages[3].num_layers, 16);                         // (126 - 30) / 6
  r = parse_config_name("dp8-tp8-pp8-cp2-noRC-first14-last14");  // 98 layers do not split over 6 stages
  EXPECT_EQ(simulate(preset("Llama-3.1-405B"), *r.strategy, h100(), t, PlatformParams{}).rejection,
            Rejection::layers_not_divisible_by_pp_vpp);
}

TEST(Fidelity, CollectivesAcrossNodesAreHierarchical) {
  const Model m = preset("Llama-3-8B");
  TrainingSettings t;
  t.seq_length = 8192;
  t.global_batch_size = 256;
  // dp 128 with tp 1: 8 ranks per node over 16 nodes; with tp 8 the same dp spans 128 nodes, one rank each.
  const auto hier = collective_diagnostics(m, strat(128, 1, 1), h100(), t, PlatformParams{});
  const auto flat = collective_diagnostics(m, strat(128, 8, 1), h100(), t, PlatformParams{});
  auto find = [](const std::vector<CollectiveRecord>& v) {
    for (const auto& c : v)
      if (c.group == "dp" && c.primitive == "reduce_scatter") return c;
    return CollectiveRecord{};
  };
  const CollectiveRecord a = find(hier), b = find(flat);
  EXPECT_EQ(a.nodes, 16);
  EXPECT_EQ(b.nodes, 128);
  // Per byte, the hierarchical reduce-scatter moves only 1/8 of the buffer over the rails.
  EXPECT_LT(a.predicted_ms / a.bytes, 0.3 * b.predicted_ms / b.bytes);
}

TEST(Fidelity, ExpertDispatchIsShardedBySequenceParallelism) {
  const Model& m = preset("Qwen3-30B-A3B");
  TrainingSettings t = run_settings(4096, 64);
  Strategy one = strat(8, 1, 1), two = strat(8, 2, 1);
  one.expert_parallel = two.expert_parallel = 8;
  two.sequence_parallel = true;
  const double b1 = bytes_of(collective_diagnostics(m, one, h100(), t, PlatformParams{}), "all_to_all", "ep");
  const double b2 = bytes_of(collective_diagnostics(m, two, h100(), t, PlatformParams{}), "all_to_all", "ep");
  EXPECT_GT(b1, 0);
  EXPECT_DOUBLE_EQ(b2, b1 / 2);
}

// Transformer Engine's GroupedLinear launches one GEMM per local expert; a platform with a grouped-matmul kernel
// (Ascend's GroupedMatmul) launches one per call: Qwen3-30B-A3B at EP 8 has 16 local experts, 15 launches fewer.
TEST(Fidelity, AGroupedMatmulKernelLaunchesOncePerCall) {
  const Model& m = preset("Qwen3-30B-A3B");
  TrainingSettings t = run_settings(4096, 64);
  Strategy s = strat(8, 1, 1);
  s.expert_parallel = 8;
  PlatformParams p;
  p.kernel_launch_us = 40;
  System grouped = h100();
  grouped.grouped_gemm_kernel = true;
  auto call_us = [&](const System& sys, const char* name) {
    for (const auto& g : gemm_diagnostics(m, s, sys, t, p))
      if (g.name == name) return g.predicted_us;
    ADD_FAILURE() << "no " << name << " GEMM";
    return 0.0;
  };
  for (const char* name : {"expert_fc1", "expert_fc2"})
    EXPECT_NEAR(call_us(h100(), name) - call_us(grouped, name), 15 * p.kernel_launch_us, 1e-6) << name;
  EXPECT_DOUBLE_EQ(call_us(h100(), "qkv"), call_us(grouped, "qkv"));
}

TEST(Fidelity, TheAllGatherDispatcherGathersTheExpertGroupsTokensInsteadOfAllToAlls) {
  // Phi-3.5-MoE (16 experts, top 2) on 16 devices, dp2-tp2-pp4-ep2 with SP: the expert-TP x EP group is 4 ranks.
  const Model& m = preset("Phi-3.5-MoE-instruct");
  TrainingSettings a2a = run_settings(4096, 32);
  a2a.sequence_parallel = true;
  TrainingSettings ag = a2a;
  ag.moe_token_dispatcher_type = MoeDispatcher::allgather;
  const Strategy s = *parse_config_name("dp2-tp2-pp4-cp1-ep2-RC").strategy;
  const auto ca = collective_diagnostics(m, s, h100(), a2a, PlatformParams{});
  const auto cg = collective_diagnostics(m, s, h100(), ag, PlatformParams{});
  const double own = 4096.0 / 2 * static_cast<double>(m.hidden_size) * 2;  // the rank's SP-sharded hidden states
  EXPECT_DOUBLE_EQ(bytes_of(cg, "all_gather", "tp_ep"), 4 * own);
  EXPECT_DOUBLE_EQ(bytes_of(cg, "reduce_scatter", "tp_ep"), 4 * own);
  EXPECT_EQ(bytes_of(cg, "all_to_all", "ep"), 0);
  EXPECT_EQ(bytes_of(cg, "all_gather", "etp"), 0);
  EXPECT_EQ(bytes_of(ca, "all_gather", "tp_ep"), 0);
  EXPECT_GT(bytes_of(ca, "all_to_all", "ep"), 0);
  // The experts see the same rows either way: each local expert gets its share of the group's routed tokens.
  auto expert_rows = [&](const TrainingSettings& t) {
    for (const auto& g : gemm_diagnostics(m, s, h100(), t, PlatformParams{}))
      if (g.name == "expert_fc1") return g.m;
    ADD_FAILURE() << "no expert_fc1";
    return std::int64_t{0};
  };
  EXPECT_EQ(expert_rows(ag), expert_rows(a2a));
  const Prediction pa = simulate(m, s, h100(), a2a, PlatformParams{}),
                   pg = simulate(m, s, h100(), ag, PlatformParams{});
  ASSERT_TRUE(pa.ok() && pg.ok());
  EXPECT_NE(pg.breakdown.ep_comm_s, pa.breakdown.ep_comm_s);
  // Written and read back by name; MindSpeed-LLM's alltoall_seq is the all-to-all exchange.
  EXPECT_EQ(io::settings_from_json(io::to_json(ag), "t", "").moe_token_dispatcher_type, MoeDispatcher::allgather);
  EXPECT_EQ(io::settings_from_json(io::Json{{"moe_token_dispatcher_type", "alltoall_seq"}}, "t", "")
                .moe_token_dispatcher_type,
            MoeDispatcher::alltoall);
}

namespace {
// The H100 preset with latency-free links and θ without launch or collective latency: a collective's predicted
// time is then its bandwidth term alone.
System latency_free_h100() {
  System sys = h100();
  sys.intra_node.latency_s = 0;
  sys.inter_node.latency_s = 0;
  return sys;
}
PlatformParams latency_free_theta() {
  PlatformParams p;
  p.kernel_launch_us = 0;
  p.collective_latency_us = 0;
  return p;
}
// P(a bin of `in_bin` of `pool` experts gets none of `draws` drawn without replacement).
double misses(double pool, double in_bin, int draws) {
  double q = 1;
  for (int i = 0; i < draws; ++i) q *= (pool - in_bin - i) / (pool - i);
  return q;
}
const CollectiveRecord* find_collective(const std::vector<CollectiveRecord>& v, const char* prim, const char* group) {
  for (const auto& c : v)
    if (c.primitive == prim && c.group == group) return &c;
  return nullptr;
}
}  // namespace

TEST(Fidelity, TheFlexDispatcherSendsEachTokenOncePerRankInsideANode) {
  // Qwen3-30B-A3B (128 experts, top 8) on one 8-GPU node, EP 8: 16 experts a rank. The all-to-all dispatcher sends
  // 8 rows a token, 7 of them off the rank; DeepEP one a token and rank holding one of its experts.
  const Model& m = preset("Qwen3-30B-A3B");
  TrainingSettings a2a = run_settings(4096, 64);
  TrainingSettings flex = a2a;
  flex.moe_token_dispatcher_type = MoeDispatcher::flex;
  const Strategy s = *parse_config_name("dp8-tp1-pp1-cp1-ep8-noRC").strategy;
  const System sys = latency_free_h100();
  const PlatformParams p = latency_free_theta();
  const auto ca = collective_diagnostics(m, s, sys, a2a, p), cf = collective_diagnostics(m, s, sys, flex, p);
  const CollectiveRecord* fused = find_collective(cf, "fused_all_to_all", "tp_ep");
  const CollectiveRecord* all_to_all = find_collective(ca, "all_to_all", "ep");
  ASSERT_TRUE(fused && all_to_all);
  const double own = 4096.0 * static_cast<double>(m.hidden_size) * 2;  // the rank's tokens, 16-bit
  EXPECT_DOUBLE_EQ(fused->bytes, own);
  EXPECT_DOUBLE_EQ(all_to_all->bytes, 8 * own);
  EXPECT_EQ(fused->group_size, 8);
  EXPECT_EQ(fused->count, all_to_all->count);  // dispatch and combine, forward and backward
  // No token-count all-gather and no all-to-all beside the fused kernels.
  EXPECT_EQ(bytes_of(cf, "all_to_all", "ep"), 0);
  EXPECT_EQ(bytes_of(cf, "all_gather", "ep"), 0);
  EXPECT_GT(bytes_of(ca, "all_gather", "ep"), 0);
  // NVLink carries 7·r rows a token (r: the share of ranks a token reaches) against the all-to-all's 7.
  const double reach = 1 - misses(128, 16, 8);
  EXPECT_NEAR(fused->predicted_ms / all_to_all->predicted_ms, reach, 1e-9);
  // The experts see the same rows; the dispatcher changes only the traffic.
  auto expert_rows = [&](const TrainingSettings& t) {
    for (const auto& g : gemm_diagnostics(m, s, sys, t, p))
      if (g.name == "expert_fc1") return g.m;
    return std::int64_t{0};
  };
  EXPECT_EQ(expert_rows(flex), expert_rows(a2a));
  EXPECT_EQ(io::settings_from_json(io::to_json(flex), "t", "").moe_token_dispatcher_type, MoeDispatcher::flex);
}

TEST(Fidelity, TheFlexDispatcherCrossesTheNetworkOncePerNodeAndGroupLimitedRoutingBoundsThoseNodes) {
  // DeepSeek-V3 as Megatron-Bridge ran it on 1024 H100s (flex with DeepEP): EP 64 over 8 nodes, 32 experts a node,
  // one routing group a node, 4 of the 8 groups chosen. A token crosses the network to 7·(1 - C(7,4)/C(8,4)) = 3.5
  // other nodes; without the group limit to 7·(1 - P(no expert of 8 among a node's 32)).
  Model m = preset("DeepSeek-V3");
  ASSERT_EQ(m.moe_router_num_groups, 8);
  ASSERT_EQ(m.moe_router_group_topk, 4);
  TrainingSettings t = run_settings(4096, 8192, Precision::fp8);
  t.sequence_parallel = true;
  t.moe_token_dispatcher_type = MoeDispatcher::flex;
  const Strategy s = *parse_config_name("dp64-tp2-pp8-cp1-ep64-etp1-selRC-mbs1-vpp4").strategy;
  const System sys = latency_free_h100();
  const PlatformParams p = latency_free_theta();
  const auto grouped = collective_diagnostics(m, s, sys, t, p);
  m.moe_router_num_groups = m.moe_router_group_topk = 0;
  const auto uniform = collective_diagnostics(m, s, sys, t, p);
  const CollectiveRecord* g = find_collective(grouped, "fused_all_to_all", "tp_ep");
  const CollectiveRecord* u = find_collective(uniform, "fused_all_to_all", "tp_ep");
  ASSERT_TRUE(g && u);
  EXPECT_EQ(g->nodes, 8);
  EXPECT_DOUBLE_EQ(g->bytes, 4096.0 / 2 * 7168 * 2);  // SP-sharded tokens
  // The network leg is the slower one (3.5 rows over 50 GB/s against ~6.7 over NVLink): its rows set the ratio.
  const double rows_grouped = 7 * (1 - 35.0 / 70.0), rows_uniform = 7 * (1 - misses(256, 32, 8));
  EXPECT_NEAR(u->predicted_ms / g->predicted_ms, rows_uniform / rows_grouped, 1e-9);
  // The all-to-all dispatcher sends 7 of each token's 8 copies off the node.
  TrainingSettings a2a = t;
  a2a.moe_token_dispatcher_type = MoeDispatcher::alltoall;
  const auto exchanged = collective_diagnostics(m, s, sys, a2a, p);
  const CollectiveRecord* a = find_collective(exchanged, "all_to_all", "ep");
  ASSERT_TRUE(a);
  EXPECT_GT(a->predicted_ms, 1.5 * g->predicted_ms);
}

TEST(Fidelity, TheFlexDispatcherNeedsAnExpertGroupAndAnNvidiaGpu) {
  const Model& m = preset("Qwen3-30B-A3B");
  TrainingSettings t = run_settings(4096, 64);
  t.moe_token_dispatcher_type = MoeDispatcher::flex;
  const Strategy no_ep = *parse_config_name("dp8-tp1-pp1-cp1-noRC").strategy;
  EXPECT_EQ(simulate(m, no_ep, h100(), t, PlatformParams{}).rejection, Rejection::flex_dispatcher_unsupported);
  const Strategy ep8 = *parse_config_name("dp8-tp1-pp1-cp1-ep8-noRC").strategy;
  EXPECT_TRUE(simulate(m, ep8, h100(), t, PlatformParams{}).ok());
  const System& npu = io::presets().find_system("ascend_910b3_64g")->system;
  EXPECT_EQ(simulate(m, ep8, npu, t, PlatformParams{}).rejection, Rejection::flex_dispatcher_unsupported);
  t.moe_token_dispatcher_type = MoeDispatcher::alltoall;
  EXPECT_TRUE(simulate(m, ep8, npu, t, PlatformParams{}).ok());
}

TEST(Fidelity, OverlappedExpertExchangesSlowTheComputeTheyHideUnder) {
  // Batch-level overlap hides the dispatch / combine under the other micro-batch's compute; what stays is the share
  // of the GPU they take while they run: DeepEP's 20 SMs of 132, or NCCL's 1 - dp_overlap. With pp 1 and 8
  // micro-batches a replica one in 8 has no partner (the first forward, the last backward) and stays exposed.
  const Model& m = preset("Qwen3-30B-A3B");
  const Strategy s = *parse_config_name("dp8-tp1-pp1-cp1-ep8-noRC").strategy;
  const PlatformParams p;
  for (const MoeDispatcher d : {MoeDispatcher::flex, MoeDispatcher::alltoall}) {
    TrainingSettings t = run_settings(4096, 64);
    t.moe_token_dispatcher_type = d;
    const Prediction alone = simulate(m, s, h100(), t, p);
    t.overlap_moe_expert_parallel_comm = true;
    const Prediction overlapped = simulate(m, s, h100(), t, p);
    ASSERT_TRUE(alone.ok() && overlapped.ok());
    const double share = d == MoeDispatcher::flex ? 20.0 / 132 : 1 - p.dp_overlap, unpaired = 1.0 / 8;
    ASSERT_EQ(overlapped.num_micro_batches, 8);
    EXPECT_NEAR(overlapped.breakdown.ep_comm_s / alone.breakdown.ep_comm_s, unpaired + (1 - unpaired) * share, 1e-9)
        << to_string(d);
  }
}

TEST(Fidelity, GroupLimitedRoutingIsCheckedAndReadFromAHuggingFaceConfig) {
  Model m = preset("DeepSeek-V3");
  EXPECT_EQ(validate(m), "");
  m.moe_router_num_groups = 7;  // does not divide 256 experts
  EXPECT_NE(validate(m), "");
  m.moe_router_num_groups = 8;
  m.moe_router_group_topk = 3;  // does not divide top-8
  EXPECT_NE(validate(m), "");
  m.moe_router_num_groups = 0;
  EXPECT_NE(validate(m), "");  // a group top-k without groups
  const Model round = io::model_from_json(io::to_json(preset("DeepSeek-V3")), "t", "");
  EXPECT_EQ(round.moe_router_num_groups, 8);
  EXPECT_EQ(round.moe_router_group_topk, 4);
  // DeepSeek-V3's config.json: n_group 8, topk_group 4 (one group is no limit).
  io::Json hf = io::parse_json_file(std::string(LMSIM_TEST_FIXTURES) + "/hf/deepseek_v3/config.json");
  EXPECT_TRUE(same_architecture(io::model_from_hf_config(hf, "config.json"), preset("DeepSeek-V3")));
  EXPECT_EQ(io::model_from_hf_config(hf, "config.json").moe_router_group_topk, 4);
  hf["n_group"] = 1;
  EXPECT_EQ(io::model_from_hf_config(hf, "config.json").moe_router_num_groups, 0);
}

TEST(Fidelity, MoeParallelFoldingShardsExpertsOverEpTimesEtp) {
  // Qwen3-235B-A22B on 256 H100s, tp2 pp8 dp16: EP 32 spans the TP ranks only when expert TP is set apart.
  const Model& m = preset("Qwen3-235B-A22B");
  TrainingSettings t = run_settings(4096, 2048);
  t.sequence_parallel = true;
  Strategy folded = *parse_config_name("dp16-tp2-pp8-cp1-ep32-etp1-noRC-mbs1").strategy;
  Strategy plain = *parse_config_name("dp16-tp2-pp8-cp1-ep32-noRC-mbs1").strategy;
  const ValidityOptions o{8, false, false, false};
  EXPECT_EQ(check(m, plain, t, o), Rejection::ep_not_dividing_dp_cp);  // ep·tp = 64 does not divide 32
  ASSERT_EQ(check(m, folded, t, o), Rejection::ok);
  // Same EP, expert TP 1 against 2: each rank holds whole experts, twice the expert weights.
  Strategy ep16 = *parse_config_name("dp16-tp2-pp8-cp1-ep16-noRC-mbs1").strategy;
  Strategy ep16_etp1 = ep16;
  ep16_etp1.expert_tensor_parallel = 1;
  const Prediction a = simulate(m, ep16, h100(), t, PlatformParams{});
  const Prediction b = simulate(m, ep16_etp1, h100(), t, PlatformParams{});
  ASSERT_TRUE(a.ok() && b.ok());
  const double h = static_cast<double>(m.hidden_size), fm = static_cast<double>(m.moe_ffn_hidden_size);
  const double expert_params = 3 * h * fm * static_cast<double>(m.num_experts) / 16;  // per layer, per EP rank
  const double layers = a.stages[1].num_layers;
  EXPECT_NEAR(b.stages[1].weight_bytes - a.stages[1].weight_bytes, 2.0 * layers * expert_params / 2, 1.0);
  // With SP, expert TP 2 gathers the dispatched tokens over its pair and reduce-scatters the output; expert TP 1
  // sends the rank's own tokens only and has no expert-TP collectives.
  const auto ca = collective_diagnostics(m, ep16, h100(), t, PlatformParams{});
  const auto cb = collective_diagnostics(m, ep16_etp1, h100(), t, PlatformParams{});
  EXPECT_GT(bytes_of(ca, "all_gather", "etp"), 0);
  EXPECT_GT(bytes_of(ca, "reduce_scatter", "etp"), 0);
  EXPECT_EQ(bytes_of(cb, "all_gather", "etp"), 0);
  EXPECT_DOUBLE_EQ(bytes_of(cb, "all_to_all", "ep"), bytes_of(ca, "all_to_all", "ep"));
  // The folded EP group of 32 runs over 4 nodes; with etp = tp it strides over the data-parallel ranks.
  for (const auto& r : collective_diagnostics(m, folded, h100(), t, PlatformParams{}))
    if (std::string(r.group) == "ep") {
      EXPECT_EQ(r.group_size, 32);
      EXPECT_EQ(r.nodes, 4);
    }
}

TEST(Fidelity, BreakdownTermsAddUpToTheIterationTime) {
  // Every non-hidden term of the one term table is on the critical path; together they are the iteration.
  TrainingSettings t;
  t.seq_length = 4096;
  t.global_batch_size = 128;
  t.overlap_param_gather = true;
  for (const char* name : {"dp8-tp1-pp1-cp1-noRC", "dp2-tp4-pp4-cp1-RC-vpp2", "dp4-tp2-pp4-cp2-selRC-sp"}) {
    const Prediction p = simulate(preset("Llama-3-8B"), *parse_config_name(name).strategy, h100(), t, PlatformParams{});
    ASSERT_TRUE(p.ok()) << name;
    double sum = 0;
    for (const auto& term : breakdown_terms())
      if (term.kind != TermKind::hidden) sum += p.breakdown.*(term.field);
    EXPECT_NEAR(sum, p.iteration_time_s, 1e-9 * p.iteration_time_s) << name;
  }
  // Each field appears once.
  for (std::size_t i = 0; i < kNumBreakdownTerms; ++i)
    for (std::size_t j = i + 1; j < kNumBreakdownTerms; ++j)
      EXPECT_NE(breakdown_terms()[i].field, breakdown_terms()[j].field);
}

TEST(Fidelity, DeviceCountIsSixtyFourBit) {
  Strategy s;
  s.data_parallel = 1048576;
  s.tensor_parallel = 1048576;
  EXPECT_EQ(s.devices(), std::int64_t{1} << 40);
  EXPECT_EQ(check(preset("Llama-3-8B"), s, TrainingSettings{}, ValidityOptions{}), Rejection::degree_out_of_range);
}

TEST(Fidelity, DirectLinkTopologyBoundsEachGroupByItsLeastLinkedMember) {
  // DGX-1 (V100) hybrid cube-mesh: six NVLinks per GPU; quads 0-3 and 4-7 fully connected, i-(i+4) across.
  const System& v100 = io::presets().find_system("v100_sxm2_32g")->system;
  EXPECT_DOUBLE_EQ(ring_bandwidth_share(v100, 8, 1), 1.0);      // three edge-disjoint rings over all six links
  EXPECT_DOUBLE_EQ(ring_bandwidth_share(v100, 4, 1), 4.0 / 6);  // inside a quad: four links per GPU
  EXPECT_DOUBLE_EQ(ring_bandwidth_share(v100, 2, 1), 1.0 / 6);  // TP pairs: 0-1 and 4-5 are single NVLinks
  EXPECT_DOUBLE_EQ(ring_bandwidth_share(v100, 4, 2), 2.0 / 6);  // {0,2,4,6}: one ring 0-2-6-4
  EXPECT_DOUBLE_EQ(ring_bandwidth_share(v100, 2, 4), 1.0 / 6);  // {2,6}, {3,7}: one NVLink each
  const double host = v100.intra_node_host_bandwidth_bytes_per_s / v100.intra_node.bandwidth_bytes_per_s;
  EXPECT_DOUBLE_EQ(ring_bandwidth_share(v100, 2, 2, true), host);  // stage pair 2 -> 4: no NVLink, through the host
  EXPECT_DOUBLE_EQ(ring_bandwidth_share(v100, 2, 2), 1.0 / 6);     // groups {0,2}, {1,3}, {4,6}, {5,7}: linked
  EXPECT_DOUBLE_EQ(ring_bandwidth_share(h100(), 2, 1), 1.0);       // a switch: every group gets the whole port
  // Members a whole job apart share no node, however far (a stride times members beyond an int's range).
  EXPECT_DOUBLE_EQ(ring_bandwidth_share(v100, 8, 1 << 30), 1.0);
  EXPECT_DOUBLE_EQ(ring_neighbour_share(v100, 8, 1 << 30), 1.0);
  // A point-to-point ring in rank order (a context-parallel ring's K/V blocks): each hop on its pair's links.
  EXPECT_DOUBLE_EQ(ring_neighbour_share(v100, 4, 1), 1.0 / 6);  // 0 -> 1 on one NVLink; 3 -> 0 closes on two
  EXPECT_DOUBLE_EQ(ring_neighbour_share(v100, 4, 2), host);     // 0 -> 2 -> 4: GPUs 2 and 4 have no NVLink
  EXPECT_DOUBLE_EQ(ring_neighbour_share(h100(), 8, 1), 1.0);
  // The 910B3 server's full mesh, one HCCS link per pair: a group gets its members' links among themselves.
  System npu = io::presets().find_system("ascend_910b3_64g")->system;
  EXPECT_DOUBLE_EQ(ring_bandwidth_share(npu, 2, 1), 1.0 / 7);
  EXPECT_DOUBLE_EQ(ring_bandwidth_share(npu, 4, 1), 3.0 / 7);
  EXPECT_DOUBLE_EQ(ring_bandwidth_share(npu, 8, 1), 1.0);
  EXPECT_DOUBLE_EQ(ring_neighbour_share(npu, 4, 2), 1.0 / 7);
  // A second link between devices 0 and 1 makes it no mesh: the pairs {2, 3}, {4, 5}, {6, 7} keep one link of the
  // best-linked device's eight.
  std::vector<int> doubled(npu.intra_node_links.begin(), npu.intra_node_links.end());
  doubled[1] = doubled[8] = 2;
  npu.intra_node_links = NodeLinks(doubled);
  EXPECT_DOUBLE_EQ(ring_bandwidth_share(npu, 2, 1), 1.0 / 8);
  EXPECT_DOUBLE_EQ(ring_neighbour_share(npu, 8, 1), 1.0 / 8);

  // In the simulator: a TP pair's all-reduce on the cube-mesh takes 6x the switch's bandwidth term.
  System mesh_sys = v100;
  mesh_sys.intra_node.latency_s = 0;  // bandwidth terms only
  System sw = mesh_sys;
  sw.intra_node_links = NodeLinks();
  TrainingSettings t = megatron2022();
  t.micro_batch_size = 1;
  t.global_batch_size = 16;
  Strategy s;
  s.tensor_parallel = 2;
  s.data_parallel = 4;
  s.recompute = Recompute::none;
  s.sequence_parallel = false;
  PlatformParams p;
  p.collective_latency_us = 0;
  p.kernel_launch_us = 0;
  auto tp_all_reduce_ms = [&](const System& sys) {
    for (const auto& r : collective_diagnostics(gpt22b(), s, sys, t, p))
      if (r.group == "tp" && r.primitive == "all_reduce") return r.predicted_ms;
    return -1.0;
  };
  const double mesh = tp_all_reduce_ms(mesh_sys), flat = tp_all_reduce_ms(sw);
  ASSERT_GT(flat, 0);
  EXPECT_NEAR(mesh / flat, 6.0, 1e-9);
  const Prediction a = simulate(gpt22b(), s, mesh_sys, t, p), b = simulate(gpt22b(), s, sw, t, p);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_GT(a.breakdown.tp_comm_s, 5.0 * b.breakdown.tp_comm_s);
}

// The shares against their definition, on irregular nodes: every group of Megatron's rank order (members `stride`
// apart, groups tiling blocks of stride·members ranks; every offset for the stage-pair chain) is enumerated, and the
// least-linked member (the host path for none) bounds the shape. A 12-device node's shares come from the table
// NodeLinks makes with its matrix, a 36-device one's (beyond kTabledDevices) are worked out per query.
static void expect_link_shares_by_definition(int n, int shapes) {
  System sys = h100();
  sys.devices_per_node = n;
  sys.intra_node_host_bandwidth_bytes_per_s = 0.05 * sys.intra_node.bandwidth_bytes_per_s;
  std::vector<int> matrix(n * n, 0);
  unsigned state = 7;
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j) {
      state = state * 1103515245u + 12345u;
      const int l = static_cast<int>((state >> 16) % 4);  // 0-3 links, a quarter of the pairs unlinked
      matrix[static_cast<std::size_t>(i * n + j)] = l;
      matrix[static_cast<std::size_t>(j * n + i)] = l;
    }
  sys.intra_node_links = NodeLinks(matrix);
  auto link = [&](int a, int b) { return sys.intra_node_links[static_cast<std::size_t>(a * n + b)]; };
  int max_degree = 0;
  for (int i = 0; i < n; ++i) {
    int d = 0;
    for (int j = 0; j < n; ++j) d += link(i, j);
    max_degree = std::max(max_degree, d);
  }
  ASSERT_TRUE(validate(sys).empty()) << validate(sys);
  const double host = 0.05;
  auto share = [&](int links) { return links == 0 ? host : static_cast<double>(links) / max_degree; };
  int checked = 0;
  for (int members = 2; members <= n; ++members)
    for (int stride = 1; (members - 1) * stride < n; ++stride) {
      double ring = 1, neighbour = 1, chain = 1;
      for (int base = 0; base + (members - 1) * stride < n; ++base) {
        std::vector<int> ranks;
        for (int i = 0; i < members; ++i) ranks.push_back(base + i * stride);
        for (int i = 0; i < members; ++i) {
          int degree = 0;
          for (int r : ranks) degree += link(ranks[static_cast<std::size_t>(i)], r);
          const int next = link(ranks[static_cast<std::size_t>(i)], ranks[static_cast<std::size_t>((i + 1) % members)]);
          chain = std::min(chain, share(degree));
          if (base % (stride * members) < stride) {
            ring = std::min(ring, share(degree));
            neighbour = std::min(neighbour, share(next));
          }
        }
      }
      EXPECT_DOUBLE_EQ(ring_bandwidth_share(sys, members, stride), ring) << members << " " << stride;
      EXPECT_DOUBLE_EQ(ring_neighbour_share(sys, members, stride), neighbour) << members << " " << stride;
      if (members == 2) {
        EXPECT_DOUBLE_EQ(ring_bandwidth_share(sys, 2, stride, true), chain) << stride;
      }
      ++checked;
    }
  EXPECT_EQ(checked, shapes);  // every shape of 2-n members that fits the node
}
TEST(Fidelity, LinkSharesAreTheWorstGroupOfTheirShape) {
  static_assert(NodeLinks::kTabledDevices >= 12 && NodeLinks::kTabledDevices < 36);
  expect_link_shares_by_definition(12, 29);
  expect_link_shares_by_definition(36, 131);
}

// The Ascend 910B server's eight NPUs are a full HCCS mesh: a group of n gets n - 1 of a device's seven links
// (HCCL's Mesh algorithm), and a point-to-point transfer, such as a context-parallel ring's K/V block, gets the one
// link between its pair however many ranks the ring has.
TEST(Fidelity, AFullMeshGivesAGroupItsMembersLinksAndAPointToPointPairOneLink) {
  const System& npu = io::presets().find_system("ascend_910b3_64g")->system;
  for (int n : {2, 4, 8})
    for (int stride : {1, 2, 4})
      if ((n - 1) * stride < 8) {
        EXPECT_DOUBLE_EQ(ring_bandwidth_share(npu, n, stride), (n - 1) / 7.0) << n << " " << stride;
        EXPECT_DOUBLE_EQ(ring_neighbour_share(npu, n, stride), 1.0 / 7) << n << " " << stride;
      }
  EXPECT_DOUBLE_EQ(ring_bandwidth_share(npu, 2, 4, true), 1.0 / 7);
  TrainingSettings t = run_settings(32768, 8);
  t.flash_attention = true;
  Strategy s;
  s.context_parallel = 8;
  s.data_parallel = 1;
  int ring_records = 0;
  for (const auto& r : collective_diagnostics(preset("Qwen2.5-7B"), s, npu, t, PlatformParams{}))
    if (r.group == "cp") {
      ++ring_records;
      EXPECT_EQ(r.primitive, "send_recv");
      EXPECT_DOUBLE_EQ(r.link_share, 1.0 / 7);  // the ring of eight on one link a hop, not the group's seven
    }
  EXPECT_GT(ring_records, 0);
}

// Per-rank parameters are a fold over the layer's ops: what TP shards is divided by t, what it duplicates is not.
// So 2·P(tp 2) − P(tp 1) is the duplicated part: norms (and q/k norms), MLA's down-projections with their latent
// norms, plus the vocabulary padding to 128·t.
TEST(Fidelity, ParametersFollowEachOpsShardingClass) {
  const TrainingSettings t = run_settings(4096, 8);
  auto per_rank = [&](const Model& m, int tp) {
    Strategy s;
    s.tensor_parallel = tp;
    s.data_parallel = 1;
    const Prediction p = simulate(m, s, h100(), t, PlatformParams{});
    EXPECT_TRUE(p.ok()) << m.name << " tp" << tp;
    return p.stages[0].weight_bytes / 2;  // bf16 weights
  };
  auto padded = [](const Model& m, int tp) { return std::ceil(m.vocab_size / (128.0 * tp)) * 128.0 * tp; };
  const Model qwen = preset("Qwen3-0.6B");
  ASSERT_TRUE(qwen.qk_norm && qwen.tied_embeddings);
  const double h = static_cast<double>(qwen.hidden_size), d = static_cast<double>(qwen.head_dim);
  const double qwen_duplicated = qwen.num_layers * (2 * h + 2 * d) + h + (padded(qwen, 2) - padded(qwen, 1)) * h;
  EXPECT_NEAR(2 * per_rank(qwen, 2) - per_rank(qwen, 1), qwen_duplicated, 1e-6 * qwen_duplicated);

  Model mla = preset("DeepSeek-V3");  // its attention on a dense 4-layer model
  mla.num_experts = mla.experts_per_token = mla.moe_ffn_hidden_size = mla.num_shared_experts = 0;
  mla.first_dense_layers = 0;
  mla.mtp_layers = 0;
  mla.num_layers = 4;
  const double H = static_cast<double>(mla.hidden_size), ql = static_cast<double>(mla.q_lora_rank),
               kvl = static_cast<double>(mla.kv_lora_rank), rope = static_cast<double>(mla.qk_rope_head_dim);
  const double down = H * ql + ql + H * (kvl + rope) + kvl;  // duplicated across TP (TE parallel_mode 'duplicated')
  const double mla_duplicated = mla.num_layers * (2 * H + down) + H + (padded(mla, 2) - padded(mla, 1)) * H;
  EXPECT_NEAR(2 * per_rank(mla, 2) - per_rank(mla, 1), mla_duplicated, 1e-6 * mla_duplicated);
  // And the model's count is the same fold on one unsharded rank.
  EXPECT_NEAR(count_params(mla).total + (padded(mla, 1) - mla.vocab_size) * H * (mla.tied_embeddings ? 1 : 2),
              per_rank(mla, 1), 1e-9 * per_rank(mla, 1));
}

TEST(Fidelity, BlackwellPresetsFollowTheirSpecSheets) {
  const auto* b200 = io::presets().find_system("b200_sxm_180g");
  const auto* nvl72 = io::presets().find_system("gb200_nvl72");
  const auto* h200 = io::presets().find_system("h200_sxm_141g");
  ASSERT_TRUE(b200 && nvl72 && h200);
  EXPECT_DOUBLE_EQ(b200->system.peak_flops_fp8, 4.5e15);
  EXPECT_DOUBLE_EQ(b200->system.peak_flops_bf16, 2.25e15);
  EXPECT_EQ(nvl72->system.devices_per_node, 72);  // the NVLink domain
  EXPECT_EQ(b200->system.sm_count, 148);
  EXPECT_EQ(nvl72->system.sm_count, 148);
  EXPECT_EQ(h200->system.sm_count, 132);
  EXPECT_NEAR(h200->system.hbm_capacity_bytes, 141e9, 0.5e9);
  EXPECT_DOUBLE_EQ(h200->system.hbm_bandwidth_bytes_per_s, 4.8e12);
}

// A stack (`--stack`) is what the published runs it describes ran with: every setting their readings give agrees
// with it, except those its `varies` names (set per recipe) and TP communication overlap where SP is off (moot).
TEST(Published, EachStackIsWhatTheReadingsOfItsRunsSay) {
  const io::PublishedSet ps = io::read_published(io::data_dir() + "/public");
  std::size_t checked = 0;
  for (const io::StackPreset& st : io::presets().stacks) {
    if (st.describes.empty()) continue;
    auto varies = [&](const char* n) { return std::find(st.varies.begin(), st.varies.end(), n) != st.varies.end(); };
    for (const auto& r : ps.runs) {
      if (r.file != st.describes) continue;
      ++checked;
      const std::string at = st.name + " against " + r.label + " " + config_name(r.strategy);
      if (!varies("precision")) {
        EXPECT_EQ(r.settings.precision, st.settings.precision) << at;
      }
      const bool sp = resolve(r.strategy, r.settings).sequence_parallel;
      EXPECT_EQ(sp, resolve(r.strategy, st.settings).sequence_parallel) << at;
      for (const SettingFlag& f : kSettingFlags) {
        if (varies(f.name) || f.member == &TrainingSettings::sequence_parallel) continue;
        if (f.member == &TrainingSettings::tp_comm_overlap && !sp) continue;
        EXPECT_EQ(r.settings.*f.member, st.settings.*f.member) << at << ": " << f.name;
      }
      if (!varies("attention_backend")) {
        EXPECT_EQ(r.settings.attention_backend, st.settings.attention_backend) << at;
      }
    }
  }
  EXPECT_GE(checked, 30u);  // the A100, NeMo 24.07 and Megatron-Bridge rows
  // Each run knows its stack (the long-sequence page's recipe is none of them), and so does a fit's sample; the
  // bundled collections' settings are the gpu and npu stacks exactly.
  for (const auto& r : ps.runs)
    EXPECT_EQ(r.stack, r.source == "nemo2407_h100"               ? "nemo-24.07"
                       : r.source == "megatron_bridge_h100_b200" ? "megatron-bridge"
                       : r.source == "narayanan2021_table1_a100" ? "megatron-lm-2021"
                                                                 : "")
        << r.label;
  EXPECT_EQ(calib::make_problem(ps, "a100_sxm_80g").samples.at(0).stack, "megatron-lm-2021");
  const io::Dataset d = io::read_dataset(io::data_dir() + "/lmsimbench");
  EXPECT_EQ(calib::make_problem(d, "gpu").samples.at(0).stack, "gpu");
  EXPECT_EQ(calib::make_problem(d, "npu").samples.at(0).stack, "npu");
  // Each names systems that exist, and the GPU platforms with a shipped θ all have one.
  for (const char* sys : {"a100_sxm_80g", "h100_sxm_80g", "b200_sxm_180g", "v100_sxm2_32g", "ascend_910b3_64g"})
    EXPECT_TRUE(std::any_of(io::presets().stacks.begin(), io::presets().stacks.end(), [&](const io::StackPreset& st) {
      return std::find(st.systems.begin(), st.systems.end(), sys) != st.systems.end();
    })) << sys;
}

TEST(Published, ReadsTheShippedSetWithItsReadings) {
  const io::PublishedSet ps = io::read_published(io::data_dir() + "/public");
  EXPECT_GE(ps.runs.size(), 25u);
  EXPECT_GE(ps.dropped.size(), 1u);
  for (const auto& r : ps.runs) {
    EXPECT_GT(r.time_s, 0) << r.label;
    EXPECT_FALSE(r.note.empty()) << r.label;
  }
  // Narayanan et al.'s 2021 Megatron-LM scattered pipeline sends over TP (§4.1); every later row runs Megatron-core,
  // which does not.
  for (const auto& r : ps.runs)
    EXPECT_EQ(r.settings.pipeline_scatter_gather, r.source.rfind("narayanan", 0) == 0) << r.label;
  // The Qwen3-235B-A22B H100 run folds EP 32 over tp·dp (its recipe's expert TP 1).
  bool folded = false;
  for (const auto& r : ps.runs)
    if (r.strategy.expert_tensor_parallel == 1 && r.strategy.expert_parallel == 32) folded = true;
  EXPECT_TRUE(folded);
  // NeMo 24.07's launcher configurations: Apex distributed Adam stores the master copy's remainders over bf16
  // parameters; Nemotron-4-340B sets a bf16 optimizer state, with which it fits the 80 GB it ran on.
  std::size_t remainders = 0;
  bool nemotron = false;
  for (const auto& r : ps.runs) {
    remainders += r.settings.reuse_fp32_param ? 1 : 0;
    if (r.model.name != "Nemotron-4-340B") continue;
    nemotron = true;
    EXPECT_TRUE(r.settings.bf16_optimizer_state);
    const auto* sp = io::presets().find_system(r.system);
    ASSERT_TRUE(sp);
    const Prediction p = simulate(r.model, r.strategy, sp->system, r.settings, sp->default_params);
    ASSERT_TRUE(p.ok());
    EXPECT_LT(p.max_peak_memory_bytes, sp->system.hbm_capacity_bytes);
    TrainingSettings adam = r.settings;
    adam.bf16_optimizer_state = false;  // 12 bytes per owned parameter: it would not fit
    EXPECT_GT(simulate(r.model, r.strategy, sp->system, adam, sp->default_params).max_peak_memory_bytes,
              sp->system.hbm_capacity_bytes);
  }
  EXPECT_TRUE(nemotron);
  // The nine NeMo 24.07 runs and the nine long-sequence runs (NeMo 24.03, same optimizer), and the two Bridge GPT-OSS
  // runs (BF16 under Megatron-core's precision-aware optimizer: TE's FusedAdam stores the remainders).
  EXPECT_EQ(remainders, 20u);
  std::size_t bf16_moments = 0;
  for (const auto& r : ps.runs) {
    bf16_moments += r.settings.bf16_adam_moments ? 1 : 0;
    if (r.model.name == "gpt-oss-120b") {
      EXPECT_TRUE(r.settings.reuse_fp32_param);
    }
  }
  EXPECT_EQ(bf16_moments, 2u);  // the two DeepSeek-V3 runs (its recipe's bf16 moments)
  // Every Megatron-Bridge performance run uses Transformer Engine's cross entropy, and so do NeMo 2's performance
  // scripts behind the B200 long-sequence runs; no other source says so.
  for (const auto& r : ps.runs) {
    const bool nemo2 = r.source == "nemo_long_sequence" && r.system == "b200_sxm_180g";
    EXPECT_EQ(r.settings.te_cross_entropy, r.source == "megatron_bridge_h100_b200" || nemo2) << r.label;
    // Every FP8 run there gathers FP8 parameters; the BF16 ones (GPT-OSS) have none to gather.
    EXPECT_EQ(r.settings.fp8_param_gather,
              (r.source == "megatron_bridge_h100_b200" || nemo2) && r.settings.precision == Precision::fp8)
        << r.label;
  }
  // The NeMo long-sequence runs (H100: 4K-1M tokens, CP up to 32; B200: 8K-1M, CP up to 16) are validation rows:
  // which attention count the page's TFLOP/s uses is not stated (data/public/NOTE.md). Their times follow from
  // NeMo's full count, per GPU: the B200 rows with the reading's GPU count, their printed layout's product (a
  // quarter of the page's "# of GPUs", printed as 1,024 for the 1M row; its "1,608" TFLOP/s read with the comma).
  std::size_t long_seq = 0;
  for (const auto& r : ps.runs) {
    if (r.source != "nemo_long_sequence") continue;
    ++long_seq;
    EXPECT_FALSE(r.fit) << r.label;
    if (r.settings.seq_length != 1048576) continue;
    const double f = io::nemo_model_flops_per_token(r.model, 1048576.0);
    if (r.system == "h100_sxm_80g") {
      EXPECT_NEAR(r.time_s, 4.0 * 1048576 * f / (536e12 * 1024), 1e-9);
      EXPECT_EQ(r.strategy.context_parallel, 32);
    } else {
      EXPECT_EQ(r.strategy.devices(), 256);
      EXPECT_NEAR(r.time_s, 4.0 * 1048576 * f / (1608e12 * 256), 1e-9);
      EXPECT_NE(r.derivation.find("the reading's GPU count 256"), std::string::npos) << r.derivation;
    }
  }
  EXPECT_EQ(long_seq, 17u);
  // Narayanan et al. 2021 Table 1, GPT 1.7B on 32 GPUs at 137 TFLOP/s: Eq. 3 gives 3.53 s.
  bool found = false;
  for (const auto& r : ps.runs)
    if (r.label == "GPT 1.7B 32xa100_sxm_80g") {
      found = true;
      EXPECT_NEAR(r.time_s, 3.528, 0.005);
    }
  EXPECT_TRUE(found);
}

// NeMo's performance pages count attention FLOPs full: the NeMo 24.07 page's Llama-2-7B row prints 16,934
// tokens/s/GPU and 780 model TFLOP/s/GPU at 4,096 tokens, 4.606e10 FLOPs per token; the full count gives that to
// 0.1 %, the causal count is 7 % short.
TEST(Published, NemoModelFlopsCountAttentionFull) {
  const Model m = io::resolve_model("Llama-2-7B");
  const double implied = 780e12 / 16934;
  const double full = io::nemo_model_flops_per_token(m, 4096);
  EXPECT_NEAR(full / implied, 1.0, 1e-3);
  const double attention_full = 12.0 * 32 * 4096 * 4096;   // 12·L·s·(heads·head_dim)
  EXPECT_LT((full - attention_full / 2) / implied, 0.94);  // causal counting misses
}

// A scratch folder holding the shipped NeMo 24.07 data file, for readings written by a test.
std::string published_folder(const char* name) {
  const std::string dir = (std::filesystem::temp_directory_path() / name).string();
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(io::data_dir() + "/public/nemo2407_h100.csv", dir + "/nemo2407_h100.csv",
                             std::filesystem::copy_options::overwrite_existing);
  return dir;
}

// Reading the published folder fails on readings.csv's field `field` (the reading `row`).
void expect_refused(const std::string& dir, const std::string& row, const std::string& field) {
  try {
    io::read_published(dir);
    ADD_FAILURE() << "accepted: " << row;
  } catch (const io::InputError& e) {
    EXPECT_EQ(e.field(), field) << e.what();
    EXPECT_NE(std::string(e.what()).find("readings.csv"), std::string::npos) << e.what();
  }
}

// A reading may name a stack instead of stating every setting: an empty cell is then the stack's. The NeMo 24.07
// Llama-2-7B row read so gives the settings and time of its full reading in the shipped set.
TEST(Published, AReadingNamesItsStack) {
  const std::string dir = published_folder("lmsim_published_stack");
  auto write =
      [&](const std::string& row) {
        std::ofstream(dir + "/readings.csv")
            << "file,line,use,model,system,recompute,micro_batch_size,virtual_pipeline,stack,overlap_p2p_comm,note\n"
            << row << "\n";
      };
  write("nemo2407_h100.csv,10,use,Llama-2-7B,h100_sxm_80g,none,1,1,nemo-24.07,,x");
  const io::PublishedSet mine = io::read_published(dir);
  ASSERT_EQ(mine.runs.size(), 1u);
  EXPECT_EQ(mine.runs[0].stack, "nemo-24.07");
  const io::PublishedSet shipped = io::read_published(io::data_dir() + "/public");
  const auto it = std::find_if(shipped.runs.begin(), shipped.runs.end(),
                               [](const io::PublishedRun& r) { return r.file == "nemo2407_h100.csv" && r.line == 10; });
  ASSERT_NE(it, shipped.runs.end());
  EXPECT_DOUBLE_EQ(mine.runs[0].time_s, it->time_s);
  // The same run (SP and TP communication overlap, on in the stack, are moot at tp 1).
  const System& h100 = io::presets().find_system("h100_sxm_80g")->system;
  const Prediction a = simulate(mine.runs[0].model, mine.runs[0].strategy, h100, mine.runs[0].settings, {});
  const Prediction b = simulate(it->model, it->strategy, h100, it->settings, {});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_DOUBLE_EQ(a.iteration_time_s, b.iteration_time_s);
  EXPECT_DOUBLE_EQ(a.max_peak_memory_bytes, b.max_peak_memory_bytes);
  // A cell overrides the stack.
  write("nemo2407_h100.csv,10,use,Llama-2-7B,h100_sxm_80g,none,1,1,nemo-24.07,false,x");
  EXPECT_FALSE(io::read_published(dir).runs[0].settings.overlap_p2p_comm);
  // An unknown stack, or no stack and a setting left unstated, is named.
  for (const auto& [row, field] :
       {std::pair<std::string, std::string>{"nemo2407_h100.csv,10,use,Llama-2-7B,"
                                            "h100_sxm_80g,none,1,1,nemo,,x",
                                            "stack"},
        {"nemo2407_h100.csv,10,use,Llama-2-7B,h100_sxm_80g,none,1,1,,true,x", "precision"}}) {
    write(row);
    expect_refused(dir, row, field);
  }
  std::filesystem::remove_all(dir);
}

TEST(Published, BadReadingsNameTheFileLineAndField) {
  const std::string dir = published_folder("lmsim_published_bad");
  // A readings.csv of the required columns, `extra` optional ones and a note, with one row.
  auto expect_error =
      [&](const std::string& extra, const std::string& row, const char* field) {
        std::ofstream(dir + "/readings.csv")
            << "file,line,use,model,system,recompute,sequence_parallel,micro_batch_size,virtual_pipeline,precision,"
               "tp_comm_overlap,overlap_grad_reduce,overlap_param_gather,distributed_optimizer,fp32_gradients,"
               "flash_attention,dropout,overlap_p2p_comm,"
            << extra << "note\n"
            << row << "\n";
        expect_refused(dir, row, field);
      };
  const std::string ok = "true,true,true,true,false,true,false,true,x";
  expect_error("", "nemo2407_h100.csv,999,use,Llama-2-7B,h100_sxm_80g,none,false,1,1,fp8," + ok, "line");  // no row
  expect_error("", "nemo2407_h100.csv,10,use,Llama-2-7B,h999,none,false,1,1,fp8," + ok, "system");
  expect_error("", "nemo2407_h100.csv,10,use,Llama-2-7B,h100_sxm_80g,some,false,1,1,fp8," + ok, "recompute");
  expect_error("", "nemo2407_h100.csv,10,use,Llama-2-7B,h100_sxm_80g,none,false,2,1,fp8," + ok, "micro_batch_size");
  expect_error("", "nemo2407_h100.csv,10,maybe,Llama-2-7B,h100_sxm_80g,none,false,1,1,fp8," + ok, "use");
  // The optional columns: FSDP and Megatron's recompute modules.
  const std::string selective = "nemo2407_h100.csv,10,use,Llama-2-7B,h100_sxm_80g,selective,false,1,1,fp8,";
  expect_error("fsdp,recompute_modules,", selective + "true,true,true,true,false,true,false,true,maybe,core_attn,x",
               "fsdp");
  expect_error("fsdp,recompute_modules,",
               selective + "true,true,true,true,false,true,false,true,true,core_attn attention,x", "recompute_modules");
  // Settings that contradict each other are the reading's fault, named by the setting: FP8 parameters under bf16.
  expect_error("fp8_param_gather,",
               "nemo2407_h100.csv,10,use,Llama-2-7B,h100_sxm_80g,none,false,1,1,bf16,true,true,true,true,false,true,"
               "false,true,true,x",
               "fp8_param_gather");
  // A GPU count of the reading's that is not its layout's product is the reading's fault.
  expect_error("gpus,",
               "nemo2407_h100.csv,10,use,Llama-2-7B,h100_sxm_80g,none,false,1,1,fp8," +
                   std::string("true,true,true,true,false,true,false,true,16,x"),
               "gpus");
  // A recipe the row's device cannot run: MX block scaling on H100 (no MXFP8 tensor cores).
  expect_error("fp8_recipe,",
               "nemo2407_h100.csv,10,use,Llama-2-7B,h100_sxm_80g,none,false,1,1,fp8," +
                   std::string("true,true,true,true,false,true,false,true,mxfp8,x"),
               "fp8_recipe");
  // NeMo's model TFLOP/s converts for dense models only: an MoE model read against it is the data row's metric.
  std::ofstream(dir + "/readings.csv")
      << "file,line,use,model,system,recompute,sequence_parallel,micro_batch_size,virtual_pipeline,precision,"
         "tp_comm_overlap,overlap_grad_reduce,overlap_param_gather,distributed_optimizer,fp32_gradients,"
         "flash_attention,dropout,overlap_p2p_comm,note\n"
      << "nemo2407_h100.csv,11,use,Qwen3-30B-A3B,h100_sxm_80g,none,false,1,1,fp8," << ok << "\n";
  try {
    io::read_published(dir);
    ADD_FAILURE() << "an MoE model was converted with NeMo's dense model FLOPs";
  } catch (const io::InputError& e) {
    EXPECT_EQ(e.field(), "metric") << e.what();
    EXPECT_NE(std::string(e.what()).find("nemo2407_h100.csv:11"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(Published, FixAndFreeRestrictTheFit) {
  const io::PublishedSet ps = io::read_published(io::data_dir() + "/public");
  calib::Problem pb = calib::make_problem(ps, "a100_sxm_80g");
  calib::restrict_free(pb, {"matmul_efficiency"}, {"kernel_launch_us=3"});
  ASSERT_EQ(pb.free.size(), 1u);
  EXPECT_STREQ(param_table()[pb.free[0]].name, "matmul_efficiency");
  EXPECT_DOUBLE_EQ(pb.start.kernel_launch_us, 3);
  EXPECT_THROW(calib::restrict_free(pb, {"no_such"}, {}), io::InputError);
  EXPECT_THROW(calib::restrict_free(pb, {}, {"kernel_launch_us=-1"}), io::InputError);
  EXPECT_THROW(calib::restrict_free(pb, {"kernel_launch_us"}, {"kernel_launch_us=3"}), io::InputError);
  ASSERT_EQ(pb.free.size(), 1u);  // a failed call changes nothing
  const calib::FitResult fr = calib::fit(pb, calib::all_indices(pb), calib::FitOptions{});
  EXPECT_DOUBLE_EQ(fr.params.kernel_launch_us, 3);  // held
}

TEST(Fidelity, BatchLevelMoeOverlapHidesExpertAllToAllUnderTheOtherMicroBatch) {
  const Model& m = preset("DeepSeek-V3");
  TrainingSettings t = run_settings(4096, 8192, Precision::fp8);
  t.sequence_parallel = true;
  const Strategy s = *parse_config_name("dp64-tp2-pp8-cp1-ep64-noRC-vpp4").strategy;
  const Prediction plain = simulate(m, s, h100(), t, PlatformParams{});
  t.overlap_moe_expert_parallel_comm = true;
  const Prediction ovl = simulate(m, s, h100(), t, PlatformParams{});
  ASSERT_TRUE(plain.ok() && ovl.ok());
  EXPECT_GT(plain.breakdown.ep_comm_s, 0);
  EXPECT_LT(ovl.breakdown.ep_comm_s, plain.breakdown.ep_comm_s);
  // The compute itself is unchanged (the bottleneck stage may change once the all-to-all is hidden).
  EXPECT_DOUBLE_EQ(ovl.stages[1].forward_compute_s, plain.stages[1].forward_compute_s);
  EXPECT_LT(ovl.stages[1].ep_comm_s, plain.stages[1].ep_comm_s);
  // Only the steady phase pairs passes: of m·v = 128·4 chunk passes, stage i leaves (p − i − 1)·2 + (v − 1)·p
  // warm-up forwards (and as many cool-down backwards) alone, their all-to-alls exposed. Stages 2 and 6 hold eight
  // MoE layers each; stage 2 leaves 34 passes alone, stage 6 26.
  ASSERT_EQ(ovl.num_micro_batches, 128);
  ASSERT_EQ(ovl.stages[2].num_layers, 8);
  ASSERT_EQ(ovl.stages[6].num_layers, 8);
  const double hidden_2 = plain.stages[2].ep_comm_s - ovl.stages[2].ep_comm_s;
  const double hidden_6 = plain.stages[6].ep_comm_s - ovl.stages[6].ep_comm_s;
  ASSERT_GT(hidden_6, 0);
  EXPECT_NEAR(hidden_2 / hidden_6, (512.0 - 34) / (512.0 - 26), 1e-9);
}

namespace {
// GPT-3 175B on 512 A100s, dp8-tp8-pp8 without recompute, sequence 2048, global batch 1536: the run the throughput
// figures are checked on.
struct Gpt3Run {
  Model m = preset("GPT-3-175B");
  TrainingSettings t;
  Strategy s = strat(8, 8, 8);
  Prediction p;
  Gpt3Run() {
    t.seq_length = 2048;
    t.global_batch_size = 1536;
    p = simulate(m, s, a100(), t, PlatformParams{});
  }
};
}  // namespace

TEST(Fidelity, ModelFlopsFollowSixNPlusAttention) {
  // Dense GPT, no recompute: model FLOPs = 6·N·tokens + causal attention 6·L·s·h·tokens (Narayanan et al. 2021
  // Eq. 3 without its recompute term), per device.
  const Gpt3Run run;
  const Strategy& s = run.s;
  const TrainingSettings& t = run.t;
  const Prediction& p = run.p;
  ASSERT_TRUE(p.ok());
  const double tokens = 1536.0 * 2048, L = 96, h = 12288, V = 51200;
  const double f = 72 * 1536.0 * 2048 * L * h * h * (1 + 2048 / (12 * h) + V / (12 * L * h));  // 6·N·T form
  EXPECT_NEAR(p.model_flops_per_device, f / s.devices(), 0.03 * f / s.devices());
  const Throughput tp = throughput(p, s, a100(), t);
  EXPECT_NEAR(tp.tokens_per_s_per_device, tokens / (p.iteration_time_s * 512), 1e-9);
  EXPECT_NEAR(tp.mfu, tp.model_tflops_per_device * 1e12 / a100().peak_flops(t.precision), 1e-12);
}

TEST(Fidelity, TrainingRunRunsWholeIterations) {
  const Gpt3Run gpt3;
  const Model& m = gpt3.m;
  const Strategy& s = gpt3.s;
  const TrainingSettings& t = gpt3.t;
  const Prediction& p = gpt3.p;
  ASSERT_TRUE(p.ok());
  const double per_iteration = 1536.0 * 2048;
  const TrainingRun run = training_run(p, s, t, 10.5 * per_iteration);  // half an iteration more: a whole one
  EXPECT_EQ(run.iterations, 11);
  EXPECT_DOUBLE_EQ(run.time_s, 11 * p.iteration_time_s);
  EXPECT_DOUBLE_EQ(run.device_hours, 11 * p.iteration_time_s * 512 / 3600);
  EXPECT_EQ(training_run(p, s, t, 10 * per_iteration).iterations, 10);
  EXPECT_EQ(training_run(p, s, t, 0).iterations, 0);
  Strategy bad = s;
  bad.tensor_parallel = 7;  // 96 heads over tp 7: refused, no run
  const Prediction q = simulate(m, bad, a100(), t, PlatformParams{});
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(training_run(q, bad, t, per_iteration).time_s, 0);
}

TEST(Fidelity, NvlinkSharpAllReduceSendsEachBufferOnce) {
  // NCCL's NVLS all-reduce on an NVSwitch with SHARP: one send and one receive of the buffer instead of the ring's
  // 2(n-1)/n; reduce-scatter and all-gather (sequence parallelism) are unchanged.
  System ring = h100();
  ring.nvlink_sharp = false;
  ASSERT_TRUE(h100().nvlink_sharp);
  const PlatformParams p = io::presets().find_system("h100_sxm_80g")->default_params;
  TrainingSettings t = megatron2022();
  t.seq_length = 8192;
  Strategy s;
  s.tensor_parallel = 8;
  s.recompute = Recompute::none;
  s.sequence_parallel = false;
  const Model m = gpt22b();
  const Prediction nvls = simulate(m, s, h100(), t, p);
  const Prediction rings = simulate(m, s, ring, t, p);
  ASSERT_TRUE(nvls.ok() && rings.ok());
  const double a = nvls.breakdown.tp_comm_s + nvls.breakdown.tp_comm_overlapped_s;
  const double b = rings.breakdown.tp_comm_s + rings.breakdown.tp_comm_overlapped_s;
  EXPECT_NEAR(a / b, 8.0 / 14.0, 0.05);  // bandwidth-bound: bytes vs 2·7/8·bytes
  s.sequence_parallel = true;
  const Prediction sp_nvls = simulate(m, s, h100(), t, p), sp_ring = simulate(m, s, ring, t, p);
  EXPECT_NEAR(sp_nvls.breakdown.tp_comm_s / sp_ring.breakdown.tp_comm_s, 1.0, 0.01);  // only the loss all-reduces
  EXPECT_FALSE(a100().nvlink_sharp);                                                  // NVSwitch gen2: no SHARP
}

TEST(Fidelity, NvlsOffRunsEveryAllReduceAsOnASystemWithoutSharp) {
  // NCCL_NVLS_ENABLE=0 (NeMo's and Megatron-Bridge's performance launchers): the hardware has SHARP, NCCL does not
  // use it. Every all-reduce, the TP one inside a node and the hierarchical DP one across nodes, runs as on a
  // system without it; the same setting on that system changes nothing.
  System ring = h100();
  ring.nvlink_sharp = false;
  const PlatformParams p = io::presets().find_system("h100_sxm_80g")->default_params;
  TrainingSettings t = megatron2022();
  t.seq_length = 8192;
  t.distributed_optimizer = false;  // the gradients all-reduced over dp
  t.global_batch_size = 64;
  TrainingSettings off = t;
  off.nccl_nvls_enable = false;
  const Model m = gpt22b();
  const auto tp = [](const Prediction& x) { return x.breakdown.tp_comm_s + x.breakdown.tp_comm_overlapped_s; };
  const auto dp = [](const Prediction& x) { return x.breakdown.dp_comm_exposed_s + x.breakdown.dp_comm_overlapped_s; };
  Strategy s;
  s.recompute = Recompute::none;
  s.sequence_parallel = false;
  // tp4 in one node; tp2 x dp16 on four nodes, four ranks of each DP group a node (hierarchical all-reduce).
  for (const auto& [tensor, data] : {std::pair{4, 1}, std::pair{2, 16}}) {
    s.tensor_parallel = tensor;
    s.data_parallel = data;
    const Prediction on_nvls = simulate(m, s, h100(), t, p), off_nvls = simulate(m, s, h100(), off, p);
    const Prediction rings = simulate(m, s, ring, t, p), rings_off = simulate(m, s, ring, off, p);
    ASSERT_TRUE(on_nvls.ok() && off_nvls.ok() && rings.ok() && rings_off.ok()) << config_name(s);
    EXPECT_DOUBLE_EQ(off_nvls.iteration_time_s, rings.iteration_time_s) << config_name(s);
    EXPECT_DOUBLE_EQ(rings_off.iteration_time_s, rings.iteration_time_s) << config_name(s);
    if (tensor == 4) {
      EXPECT_NEAR(tp(on_nvls) / tp(off_nvls), 4.0 / 6.0, 0.05);  // bytes vs 2·3/4·bytes
    } else {
      EXPECT_LT(dp(on_nvls), 0.95 * dp(off_nvls));  // the in-node steps around the network's
    }
  }
}

// NCCL's protocols (tuning.cc): LL moves half the bus bandwidth at 0.6 / 3.4 of Simple's NVLink step latency, LL128
// 0.92 of it at 1.9 / 3.4; each call runs the fastest. FP8 current scaling's 4-byte amax all-reduces over TP8 run
// LL, the DP gradient reduce-scatter Simple; a library without those protocols (the Ascend preset's HCCL) runs
// every call as Simple.
TEST(Fidelity, NcclRunsSmallCollectivesUnderItsLowLatencyProtocols) {
  const Model m = preset("Llama-3-8B");
  const PlatformParams p = io::presets().find_system("h100_sxm_80g")->default_params;
  TrainingSettings t = run_settings(8192, 64, Precision::fp8);
  t.fp8_recipe = Fp8Recipe::tensorwise;
  t.nccl_nvls_enable = false;  // rings only (NVLS is Simple's alone)
  Strategy s = strat(8, 8, 1);
  s.sequence_parallel = true;
  const auto find = [](const std::vector<CollectiveRecord>& v, const char* prim, const char* group, double bytes) {
    for (const auto& c : v)
      if (c.primitive == prim && c.group == group && (bytes == 0 || c.bytes == bytes)) return c;
    ADD_FAILURE() << prim << " over " << group << " not listed";
    return CollectiveRecord{};
  };
  const double step_s = h100().intra_node.latency_s + p.collective_latency_us * 1e-6;
  const double bw = h100().intra_node.bandwidth_bytes_per_s * p.intra_node_bandwidth_efficiency;
  const double launch_ms = p.kernel_launch_us * 1e-3, moved = 2.0 * 7 / 8 * 4;  // a ring all-reduce of 4 bytes
  const auto nccl = collective_diagnostics(m, s, h100(), t, p);
  const CollectiveRecord amax = find(nccl, "all_reduce", "tp", 4);
  EXPECT_EQ(amax.protocol, "ll");
  EXPECT_NEAR(amax.predicted_ms, launch_ms + (14 * step_s * 0.6 / 3.4 + moved / (0.5 * bw)) * 1e3, 1e-9);
  EXPECT_EQ(find(nccl, "reduce_scatter", "dp", 0).protocol, "simple");
  System hccl = h100();
  hccl.nccl_protocols = false;
  hccl.nvlink_sharp = false;
  const auto simple = collective_diagnostics(m, s, hccl, t, p);
  const CollectiveRecord plain = find(simple, "all_reduce", "tp", 4);
  EXPECT_EQ(plain.protocol, "simple");
  EXPECT_NEAR(plain.predicted_ms, launch_ms + (14 * step_s + moved / bw) * 1e3, 1e-9);
  for (const auto& c : simple) EXPECT_EQ(c.protocol, "simple") << c.primitive << " over " << c.group;
  // A mid-size all-gather runs LL128: 0.92 of the bandwidth, 1.9 / 3.4 of Simple's step latency.
  int ll128 = 0;
  for (const auto& c : nccl)
    if (c.protocol == "ll128" && c.primitive == "all_gather" && c.group == "tp") {
      ++ll128;
      EXPECT_NEAR(c.predicted_ms, launch_ms + (7 * step_s * 1.9 / 3.4 + 7.0 / 8 * c.bytes / (0.92 * bw)) * 1e3, 1e-9);
    }
  EXPECT_GT(ll128, 0);
  // Across nodes (four GPUs a node: TP 8 on two), the amax all-reduce's network steps take LL's 2.7 / 14 of
  // Simple's: two steps over the rails on a quarter of the buffer, twice three inside the node around them.
  System quads = h100();
  quads.devices_per_node = 4;
  const CollectiveRecord split = find(collective_diagnostics(m, s, quads, t, p), "all_reduce", "tp", 4);
  const double net_step_s = h100().inter_node.latency_s + p.collective_latency_us * 1e-6;
  const double net_bw = h100().inter_node.bandwidth_bytes_per_s * p.inter_node_bandwidth_efficiency;
  EXPECT_EQ(split.protocol, "ll");
  EXPECT_EQ(split.nodes, 2);
  EXPECT_NEAR(split.predicted_ms,
              launch_ms + (6 * step_s * 0.6 / 3.4 + 2 * net_step_s * 2.7 / 14 + (6 / bw + 1 / net_bw) / 0.5) * 1e3,
              1e-9);
  EXPECT_FALSE(io::presets().find_system("ascend_910b3_64g")->system.nccl_protocols);
  EXPECT_TRUE(a100().nccl_protocols);
}

// Point-to-point sends (and an all-to-all's per-peer chunks) use LL up to NCCL_P2P_LL_THRESHOLD (16 KiB) and Simple
// above (NCCL enqueue.cc): a pipeline activation of 8 KiB runs LL, one of 32 KiB Simple.
TEST(Fidelity, PointToPointSendsAndAllToAllChunksUseLlUpTo16KiB) {
  Model m = gpt22b();
  m.hidden_size = 64;
  m.num_attention_heads = m.num_kv_heads = 1;
  m.head_dim = 64;
  m.ffn_hidden_size = 256;
  const PlatformParams p = io::presets().find_system("h100_sxm_80g")->default_params;
  for (const auto& [seq, protocol] : {std::pair{64, "ll"}, std::pair{256, "simple"}}) {
    TrainingSettings t = run_settings(seq, 8);
    const auto v = collective_diagnostics(m, strat(1, 1, 2), h100(), t, p);
    const auto it = std::find_if(v.begin(), v.end(), [](const auto& c) { return c.primitive == "send_recv"; });
    ASSERT_NE(it, v.end());
    EXPECT_EQ(it->bytes, seq * 64 * 2);
    EXPECT_EQ(it->protocol, protocol) << it->bytes << " bytes";
  }
  // An all-to-all sends each peer its share: Ulysses' 32 KiB query all-to-all over CP 2 is 16 KiB a peer, LL.
  m.num_attention_heads = m.num_kv_heads = 2;
  m.head_dim = 32;
  TrainingSettings t = run_settings(512, 8);
  t.cp_comm_type = CpCommType::a2a;
  const auto v = collective_diagnostics(m, strat(1, 1, 1, 2), h100(), t, p);
  const auto a2a = std::find_if(v.begin(), v.end(), [](const auto& c) { return c.primitive == "all_to_all"; });
  ASSERT_NE(a2a, v.end());
  EXPECT_EQ(a2a->bytes, 256 * 2 * 2 * 32);
  EXPECT_EQ(a2a->protocol, "ll");
}

// FP8 current scaling all-reduces each sequence-parallel input's amax over TP before a column-parallel linear's
// cast (QKV, FC1: forward) and each row-parallel linear's output-gradient amax (proj, FC2: backward), so that the
// TP ranks cast with one scale (Transformer Engine's quantizers, amax_reduction_group = tp_group). Delayed scaling,
// BF16 and TP 1 have none.
TEST(Fidelity, Fp8CurrentScalingAllReducesTheAmaxOverTensorParallelRanks) {
  const Model m = preset("Llama-3-8B");
  const PlatformParams p;
  const auto amax_calls = [&](Precision prec, Fp8Recipe r, int tp) {
    TrainingSettings t = run_settings(8192, 16, prec);
    t.fp8_recipe = r;
    Strategy s = strat(8 / tp, tp, 1);
    s.sequence_parallel = tp > 1;
    double calls = 0;
    for (const auto& c : collective_diagnostics(m, s, h100(), t, p))
      if (c.primitive == "all_reduce" && c.group == "tp" && c.bytes == 4) calls += c.count;
    return calls;
  };
  const double micro_batches = 16.0 / 2, layers = 32;
  EXPECT_EQ(amax_calls(Precision::fp8, Fp8Recipe::tensorwise, 4), micro_batches * layers * 4);
  EXPECT_EQ(amax_calls(Precision::fp8, Fp8Recipe::delayed, 4), 0);
  EXPECT_EQ(amax_calls(Precision::fp8, Fp8Recipe::blockwise, 4), 0);  // per-tile scales, computed in the cast
  EXPECT_EQ(amax_calls(Precision::bf16, Fp8Recipe::tensorwise, 4), 0);
  EXPECT_EQ(amax_calls(Precision::fp8, Fp8Recipe::tensorwise, 1), 0);
}

TEST(Fidelity, Fp8SequenceParallelGathersCrossTheTpGroupInFp8) {
  // Under FP8, TE casts a column-parallel linear's SP input (forward, again for the weight gradient) and a
  // row-parallel one's output gradient before gathering them: 1 byte an element (MXFP8 adds one scale per 32, the
  // block-scaling recipe one fp32 scale per 128). A block-scaled output gradient crosses in both its copies (rowwise
  // for dgrad, columnwise for wgrad) unless userbuffers gather it. The reduce-scatters, the LM head's gather and an
  // MoE layer's dispatcher gathers stay 16-bit.
  const PlatformParams p;
  const auto gathers = [&](const Model& m, const System& sys, Precision prec, Fp8Recipe r, const char* name,
                           bool userbuffers = false) {
    TrainingSettings t = run_settings(4096, 8, prec);
    t.fp8_recipe = r;
    t.tp_comm_overlap = userbuffers;
    std::map<double, double> calls;  // all-gather bytes -> calls per iteration
    for (const auto& c : collective_diagnostics(m, *parse_config_name(name).strategy, sys, t, p))
      if (c.group == "tp" && (c.primitive == "all_gather" || c.primitive == "reduce_scatter"))
        calls[(c.primitive == "all_gather" ? 1 : -1) * c.bytes] += c.count;
    return calls;
  };
  const Model& dense = preset("Llama-3-8B");
  const double tokens = 4096, h = 4096, layers = 32, mb = 8.0 / 2;
  const auto fp8 = gathers(dense, h100(), Precision::fp8, Fp8Recipe::delayed, "dp2-tp4-pp1-cp1-noRC-sp");
  EXPECT_EQ(fp8.at(tokens * h), mb * layers * 2 * 3);             // attention and MLP: three gathers each
  EXPECT_EQ(fp8.at(tokens * h * 2), mb);                          // the LM head's input
  EXPECT_EQ(fp8.at(-tokens * h * 2), mb * (layers * 2 * 2 + 2));  // and the embedding's and LM head's
  const auto bf16 = gathers(dense, h100(), Precision::bf16, Fp8Recipe::delayed, "dp2-tp4-pp1-cp1-noRC-sp");
  EXPECT_EQ(bf16.count(tokens * h), 0u);
  EXPECT_EQ(bf16.at(tokens * h * 2), mb * (layers * 2 * 3 + 1));
  const auto mx = gathers(dense, io::presets().find_system("b200_sxm_180g")->system, Precision::fp8, Fp8Recipe::mxfp8,
                          "dp2-tp4-pp1-cp1-noRC-sp");
  EXPECT_EQ(mx.at(tokens * h * (1 + 1.0 / 32)), mb * layers * 2 * 2);  // the inputs, forward and for wgrad
  EXPECT_EQ(mx.at(2 * tokens * h * (1 + 1.0 / 32)), mb * layers * 2);  // the output gradients, both copies
  const auto bw = gathers(dense, h100(), Precision::fp8, Fp8Recipe::blockwise, "dp2-tp4-pp1-cp1-noRC-sp");
  EXPECT_EQ(bw.at(tokens * h * (1 + 4.0 / 128)), mb * layers * 2 * 2);
  EXPECT_EQ(bw.at(2 * tokens * h * (1 + 4.0 / 128)), mb * layers * 2);
  const auto ub = gathers(dense, h100(), Precision::fp8, Fp8Recipe::blockwise, "dp2-tp4-pp1-cp1-noRC-sp", true);
  EXPECT_EQ(ub.at(tokens * h * (1 + 4.0 / 128)), mb * layers * 2 * 3);  // userbuffers: one usage at a time
  EXPECT_EQ(ub.count(2 * tokens * h * (1 + 4.0 / 128)), 0u);
  const auto cs = gathers(dense, h100(), Precision::fp8, Fp8Recipe::tensorwise, "dp2-tp4-pp1-cp1-noRC-sp");
  EXPECT_EQ(cs.at(tokens * h), mb * layers * 2 * 3);  // per-tensor: the rowwise copy, transposed after the gather
  // Qwen3-30B-A3B (every layer MoE): only the attention block's gathers are TE's.
  const Model& moe = preset("Qwen3-30B-A3B");
  const double mh = static_cast<double>(moe.hidden_size), ml = static_cast<double>(moe.num_layers);
  const auto m8 = gathers(moe, h100(), Precision::fp8, Fp8Recipe::delayed, "dp4-tp2-pp1-cp1-ep4-noRC-sp");
  EXPECT_EQ(m8.at(tokens * mh), mb / 2 * ml * 3);
}

TEST(Fidelity, DelayedFp8ScalingAllReducesEachChunksAmaxesOverTheStagesRanks) {
  // One fp8_autocast per model chunk, its amaxes all-reduced over the stage's tp·cp·dp ranks at the forward's end
  // and after the backward: 3 amaxes per FP8 GEMM forward, 2 backward (4 bytes each), 4 GEMMs a dense layer.
  const Model m = preset("Llama-3-8B");
  const PlatformParams p;
  const auto amax = [&](Precision prec, Fp8Recipe r, int pp, int vpp) {
    TrainingSettings t = run_settings(8192, 16, prec);
    t.fp8_recipe = r;
    Strategy s = strat(8 / pp, 1, pp);
    s.virtual_pipeline = vpp;
    return collective_diagnostics(m, s, h100(), t, p);
  };
  const auto records = amax(Precision::fp8, Fp8Recipe::delayed, 2, 2);
  const double micro_batches = 16.0 / 4, chunk_gemms = 4.0 * 32 / (2 * 2);
  double fwd = 0, bwd = 0;
  for (const auto& c : records) {
    if (c.group != "amax") continue;
    EXPECT_EQ(c.primitive, "all_reduce");
    EXPECT_EQ(c.group_size, 4);
    EXPECT_EQ(c.count, micro_batches * 2);
    EXPECT_TRUE(c.bytes == 12 * chunk_gemms || c.bytes == 8 * chunk_gemms) << c.bytes;
    (c.bytes == 12 * chunk_gemms ? fwd : bwd) += c.count;
  }
  EXPECT_EQ(fwd, 2 * micro_batches * 2);  // two stages, two chunks each
  EXPECT_EQ(bwd, 2 * micro_batches * 2);
  // A grouped expert linear keeps one scaling meta per local expert: 2 + 2·16 FP8 GEMMs a Qwen3-30B-A3B layer on
  // EP 8 (its router stays 16-bit).
  const Model& moe = preset("Qwen3-30B-A3B");
  const Strategy ep8 = *parse_config_name("dp8-tp1-pp1-cp1-ep8-noRC").strategy;
  System grouped = h100();  // one kernel launch for all the experts: still one meta per expert
  grouped.grouped_gemm_kernel = true;
  double moe_fwd_bytes = 0;
  for (const auto& c : collective_diagnostics(moe, ep8, grouped, run_settings(4096, 8, Precision::fp8), p))
    if (c.group == "amax" && moe_fwd_bytes == 0) moe_fwd_bytes = c.bytes;
  EXPECT_EQ(moe_fwd_bytes, 12.0 * (2 + 2 * 16) * static_cast<double>(moe.num_layers));
  for (const auto& other :
       {amax(Precision::fp8, Fp8Recipe::tensorwise, 2, 2), amax(Precision::fp8, Fp8Recipe::blockwise, 2, 2),
        amax(Precision::bf16, Fp8Recipe::delayed, 2, 2)})
    for (const auto& c : other) EXPECT_NE(c.group, "amax");
  // --tp-only-amax-red: over the TP·CP ranks alone (none with tp 1 and cp 1).
  {
    TrainingSettings t = run_settings(8192, 16, Precision::fp8);
    t.tp_only_amax_red = true;
    Strategy s = strat(2, 2, 1, 2);
    s.sequence_parallel = true;
    int sizes = 0;
    for (const auto& c : collective_diagnostics(m, s, h100(), t, p))
      if (c.group == "amax") {
        EXPECT_EQ(c.group_size, 4);
        ++sizes;
      }
    EXPECT_GT(sizes, 0);
    for (const auto& c : collective_diagnostics(m, strat(8, 1, 1), h100(), t, p)) EXPECT_NE(c.group, "amax");
  }
  // Without TP the reductions are a stage's whole exposed tp_comm_s, as the records time them: per micro-batch,
  // each chunk's pair.
  TrainingSettings t = run_settings(8192, 16, Precision::fp8);
  Strategy piped = strat(4, 1, 2);
  piped.virtual_pipeline = 2;
  const Prediction staged = simulate(m, piped, h100(), t, p);
  ASSERT_TRUE(staged.ok());
  double stage0_s = 0;
  for (const auto& c : records)
    if (c.group == "amax" && c.stage == 0) stage0_s += c.count * c.predicted_ms * 1e-3 / micro_batches;
  EXPECT_NEAR(staged.stages[0].tp_comm_s, stage0_s, 1e-9 * stage0_s);
  const Prediction delayed = simulate(m, strat(8, 1, 1), h100(), t, p);
  t.fp8_recipe = Fp8Recipe::tensorwise;
  const Prediction current = simulate(m, strat(8, 1, 1), h100(), t, p);
  ASSERT_TRUE(delayed.ok() && current.ok());
  double timed_s = 0;
  for (const auto& c : amax(Precision::fp8, Fp8Recipe::delayed, 1, 1))
    if (c.group == "amax") timed_s += c.count * c.predicted_ms * 1e-3;
  EXPECT_GT(timed_s, 0);
  EXPECT_NEAR(delayed.breakdown.tp_comm_s, timed_s, 1e-9 * timed_s);
  EXPECT_EQ(current.breakdown.tp_comm_s, 0);
}

TEST(Fidelity, RecomputeModulesFreeTheirActivationsAndReplayTheirForward) {
  // Megatron-core --recompute-modules: each selected submodule keeps only its input (or drops its output) and
  // re-runs its forward in backward.
  const Model m = gpt22b();
  TrainingSettings t = megatron2022();
  const PlatformParams p;
  const Strategy s = with(strat(1, 8, 1), Recompute::selective, false);
  const Prediction attn = simulate(m, s, a100(), t, p);
  const LayerActivation attn_a = layer_activation(m, s, t, p, false);
  t.recompute_modules |= module_bit(RecomputeModule::mlp);
  const Prediction mlp = simulate(m, s, a100(), t, p);
  const LayerActivation mlp_a = layer_activation(m, s, t, p, false);
  ASSERT_TRUE(attn.ok() && mlp.ok());
  // The dense MLP frees its FC1 output and activation output: (2·f + 2·f)·S / t bytes (GELU, f = 4h).
  const double S = 2048 * 4, f = 4 * 6144;
  EXPECT_NEAR(attn_a.stored_bytes - mlp_a.stored_bytes, 4 * f * S / 8, 1e-6 * attn_a.stored_bytes);
  // ... and replays FC1 and FC2: about as much as the attention core, far less than the whole forward.
  const double replay = mlp.layer.recompute_s - attn.layer.recompute_s;
  EXPECT_GT(replay, 0.2 * attn.layer.forward_s);
  EXPECT_LT(mlp.layer.recompute_s, mlp.layer.forward_s);
  EXPECT_LT(mlp.max_peak_memory_bytes, attn.max_peak_memory_bytes);
  // layernorm drops the two norms' outputs: 4·S·h bytes, replayed by memory-bound kernels only.
  t.recompute_modules = module_bit(RecomputeModule::core_attn) | module_bit(RecomputeModule::layernorm);
  const LayerActivation ln_a = layer_activation(m, s, t, p, false);
  EXPECT_NEAR(attn_a.stored_bytes - ln_a.stored_bytes, 4 * S * 6144, 1e-6 * attn_a.stored_bytes);
  // No module: selective recompute keeps everything and replays nothing.
  t.recompute_modules = 0;
  const Prediction nothing = simulate(m, s, a100(), t, p);
  const Prediction none = simulate(m, with(strat(1, 8, 1), Recompute::none, false), a100(), t, p);
  EXPECT_DOUBLE_EQ(nothing.layer.recompute_s, 0);
  EXPECT_NEAR(nothing.max_peak_memory_bytes, none.max_peak_memory_bytes, 1e-9 * none.max_peak_memory_bytes);
}

TEST(Fidelity, MoeLayerKeepsPerRoutedRowItsTokenProbabilityAndExpertActivations) {
  // Megatron-core (0.13 on) weights each expert's output by its router probability inside the weighted SwiGLU, so
  // a routed row keeps its dispatched token (2h bytes in bf16), its probability (4), FC1's gated output (2·2·fm)
  // and FC2's input (2·fm): no h-wide expert output. Halving top-k removes exactly those rows.
  const Model& m = preset("Qwen3-30B-A3B");
  Model half = m;
  half.experts_per_token = m.experts_per_token / 2;
  TrainingSettings t = run_settings(4096, 64);
  const Strategy s = *parse_config_name("dp8-tp1-pp1-cp1-ep8-noRC").strategy;
  const PlatformParams p;
  const double h = static_cast<double>(m.hidden_size), fm = static_cast<double>(m.moe_ffn_hidden_size);
  const double rows = 4096.0 * static_cast<double>(m.experts_per_token - half.experts_per_token);
  const double full = layer_activation(m, s, t, p, true).stored_bytes;
  EXPECT_NEAR(full - layer_activation(half, s, t, p, true).stored_bytes, rows * (2 * h + 4 + 6 * fm), 1e-9 * full);
}

TEST(Fidelity, TransformerEngineCrossEntropyKeepsTwoBytesPerLogit) {
  // Megatron's vocab-parallel cross entropy: 16-bit logits, fp32 softmax, 16-bit gradient (8 bytes per element);
  // Transformer Engine's writes the gradient into the 16-bit logits (2). Qwen3-0.6B's loss dwarfs a layer.
  // Time: Megatron's is a chain of PyTorch ops (40 + 16 bytes per logit, 12 + 8 kernels) even where the rest of
  // the stack is fused; Transformer Engine's one kernel moves 12 + 8 bytes (4 + 4 kernels).
  const Model& m = preset("Qwen3-0.6B");
  TrainingSettings t = run_settings(4096, 8);
  const Strategy s = *parse_config_name("dp8-tp1-pp1-cp1-noRC").strategy;
  const double logits = 4096.0 * static_cast<double>(m.vocab_size);  // 151936 = 1187 x 128: no padding at tp 1
  const Prediction native = simulate(m, s, h100(), t, PlatformParams{});
  t.te_cross_entropy = true;
  const Prediction te = simulate(m, s, h100(), t, PlatformParams{});
  ASSERT_TRUE(native.ok() && te.ok());
  EXPECT_DOUBLE_EQ(native.stages[0].transient_bytes, 8 * logits);
  EXPECT_DOUBLE_EQ(te.stages[0].transient_bytes, 2 * logits);
  const PlatformParams p{};
  const double per_micro_batch_s =
      36 * logits / (h100().hbm_bandwidth_bytes_per_s * p.vector_bandwidth_efficiency) + 12 * p.kernel_launch_us * 1e-6;
  EXPECT_NEAR(native.iteration_time_s - te.iteration_time_s,
              per_micro_batch_s * static_cast<double>(native.num_micro_batches), 1e-9 * native.iteration_time_s);
  EXPECT_TRUE(io::settings_from_json(io::to_json(t), "settings.json").te_cross_entropy);
}

// Gemma-2's final-logit soft-capping (c·tanh(logits / c)): three elementwise kernels over the logits each way
// (12 bytes per element forward, 14 backward) and tanh's 16-bit output kept at the loss.
TEST(Fidelity, FinalLogitSoftcappingKeepsItsTanhOutput) {
  const Model& capped = preset("Gemma-2-9B");
  ASSERT_EQ(capped.final_logit_softcapping, 30.0);
  Model plain = capped;
  plain.final_logit_softcapping = 0;
  const TrainingSettings t = run_settings(8192, 8);
  const Strategy s = *parse_config_name("dp8-tp1-pp1-cp1-noRC").strategy;
  const PlatformParams p;
  const Prediction a = simulate(plain, s, h100(), t, p), b = simulate(capped, s, h100(), t, p);
  ASSERT_TRUE(a.ok() && b.ok());
  const double logits = 8192.0 * 256000;  // 256000 = 2000 x 128: no padding at tp 1
  EXPECT_DOUBLE_EQ(b.stages[0].transient_bytes - a.stages[0].transient_bytes, 2 * logits);
  const double per_mb =
      26 * logits / (h100().hbm_bandwidth_bytes_per_s * p.vector_bandwidth_efficiency) + 6 * p.kernel_launch_us * 1e-6;
  EXPECT_NEAR(b.breakdown.compute_s - a.breakdown.compute_s, per_mb, 1e-9 * b.breakdown.compute_s);  // 1 micro-batch
}

// GPT's learned positions are added at the input: its layers run no rotary embedding (Megatron-LM
// --position-embedding-type learned_absolute), where a rotary model reads and writes q and k (2 x 2 bytes a
// element forward, 1.5 times that backward) and keeps the same Q, K, V.
TEST(Fidelity, LearnedPositionsRunNoRotaryEmbedding) {
  const Model& learned = preset("GPT-22B");  // 48 layers, 64 heads of 96
  ASSERT_EQ(learned.position_embedding_type, PositionEmbedding::learned_absolute);
  EXPECT_FALSE(learned.is_rotary());
  EXPECT_TRUE(preset("Llama-3-8B").is_rotary());
  EXPECT_TRUE(preset("DeepSeek-V3").is_rotary());  // MLA's decoupled rotary heads
  Model rotary = learned;
  rotary.position_embedding_type = PositionEmbedding::rope;
  const TrainingSettings t = run_settings(2048, 1);
  const Strategy s = *parse_config_name("dp1-tp8-pp1-cp1-noRC").strategy;
  const PlatformParams p;
  const Prediction a = simulate(learned, s, h100(), t, p), b = simulate(rotary, s, h100(), t, p);
  ASSERT_TRUE(a.ok() && b.ok());
  const double qk_width = 2048.0 * (64 + 64) * 96 / 8 * 2;
  EXPECT_NEAR(b.breakdown.compute_s - a.breakdown.compute_s,
              48 * 2 * qk_width * 2.5 / (h100().hbm_bandwidth_bytes_per_s * p.vector_bandwidth_efficiency),
              1e-9 * a.breakdown.compute_s);
  EXPECT_FALSE(same_architecture(learned, rotary));
  // The position table: 2048 rows of the model's, replicated across TP on the first stage; a longer run's sequence
  // needs as many rows.
  EXPECT_DOUBLE_EQ(count_params(learned).embedding - count_params(rotary).embedding, 2048.0 * 6144);
  const Strategy two = *parse_config_name("dp1-tp8-pp2-cp1-noRC").strategy;
  for (std::int64_t seq : {2048, 4096}) {
    const TrainingSettings ts = run_settings(seq, 2);
    const Prediction x = simulate(learned, two, h100(), ts, p), y = simulate(rotary, two, h100(), ts, p);
    ASSERT_TRUE(x.ok() && y.ok());
    EXPECT_DOUBLE_EQ(x.stages[0].weight_bytes - y.stages[0].weight_bytes, 2.0 * static_cast<double>(seq) * 6144) << seq;
    EXPECT_DOUBLE_EQ(x.stages[1].weight_bytes, y.stages[1].weight_bytes);
  }
}

// Without gradient-accumulation fusion every weight gradient is written in 16 bits and added into the gradient
// buffer each micro-batch: 2 + 2·4 bytes per weight with fp32 buffers, 2 + 2·2 with 16-bit ones, one kernel per GEMM.
TEST(Fidelity, UnfusedGradientAccumulationAddsEachWeightGradientIntoTheBuffer) {
  const Model& m = preset("Llama-3-8B");
  const Strategy s = *parse_config_name("dp8-tp1-pp1-cp1-noRC").strategy;
  const PlatformParams p;
  const double layer = 4096.0 * (4096 + 2 * 1024) + 4096.0 * 4096 + 4096.0 * 2 * 14336 + 14336.0 * 4096;
  const double weights = 32 * layer + 128256.0 * 4096, calls = 32 * 4 + 1;  // the layers' four linears, the head
  for (bool fp32 : {true, false}) {
    TrainingSettings t = run_settings(4096, 16);  // two micro-batches per rank
    t.fp32_gradients = fp32;
    const Prediction fused = simulate(m, s, h100(), t, p);
    t.gradient_accumulation_fusion = false;
    const Prediction unfused = simulate(m, s, h100(), t, p);
    ASSERT_TRUE(fused.ok() && unfused.ok());
    const double per_mb =
        weights * (fp32 ? 10 : 6) / (h100().hbm_bandwidth_bytes_per_s * p.vector_bandwidth_efficiency) +
        calls * p.kernel_launch_us * 1e-6;
    EXPECT_NEAR(unfused.breakdown.compute_s - fused.breakdown.compute_s, 2 * per_mb, 1e-9 * fused.breakdown.compute_s)
        << fp32;
    EXPECT_DOUBLE_EQ(unfused.max_peak_memory_bytes, fused.max_peak_memory_bytes);
  }
  TrainingSettings t = run_settings(4096, 16);
  t.gradient_accumulation_fusion = false;
  EXPECT_FALSE(io::settings_from_json(io::to_json(t), "settings.json").gradient_accumulation_fusion);
}

// --no-masked-softmax-fusion (MindSpeed-LLM's recipes): stored scores go through PyTorch's fp32 scale-mask-softmax,
// 20 + 24 bytes per score element forward and backward where the fused kernel moves 4 + 6.
TEST(Fidelity, AnUnfusedMaskedSoftmaxMovesTheScoresInFp32) {
  const Model& m = preset("Qwen3-0.6B");  // 28 layers, 16 heads
  TrainingSettings t = run_settings(4096, 8);
  t.flash_attention = false;
  const Strategy s = *parse_config_name("dp8-tp1-pp1-cp1-noRC").strategy;
  const PlatformParams p;
  const Prediction fused = simulate(m, s, h100(), t, p);
  t.masked_softmax_fusion = false;
  const Prediction unfused = simulate(m, s, h100(), t, p);
  ASSERT_TRUE(fused.ok() && unfused.ok());
  const double scores = 16.0 * 4096 * 4096;
  EXPECT_NEAR(unfused.breakdown.compute_s - fused.breakdown.compute_s,
              28 * scores * (20 + 24 - 4 - 6) / (h100().hbm_bandwidth_bytes_per_s * p.vector_bandwidth_efficiency),
              1e-9 * fused.breakdown.compute_s);
  t.flash_attention = true;  // moot under flash attention
  TrainingSettings f = t;
  f.masked_softmax_fusion = true;
  EXPECT_DOUBLE_EQ(simulate(m, s, h100(), t, p).iteration_time_s, simulate(m, s, h100(), f, p).iteration_time_s);
}

TEST(Fidelity, ContextParallelAttentionMergesItsStepsOutputs) {
  // CP 2 at sequence 8192 against no CP at 4096: the same tokens per rank, so the memory-bound bytes differ only
  // by the merge of the two steps (Transformer Engine's P2P context parallelism). Per layer, with Q and the output
  // of a·d and K, V of 2·g·d elements per token: forward 4 + 4.5 bytes per output element, backward 4 + 6 per Q
  // element and 6·2 + 4 per K, V element; the softmax statistics (an fp32 log-sum-exp per head and token) read twice
  // and written once by the forward merge, read once a step in backward. Measured from the slope in 1 / HBM
  // efficiency with nothing overlapped.
  const Model& m = preset("Llama-3-8B");
  TrainingSettings t = run_settings(8192, 1);
  t.distributed_optimizer = false;
  t.overlap_grad_reduce = false;
  auto vector_bytes = [&](const char* name, std::int64_t seq) {
    t.seq_length = seq;
    const Strategy s = *parse_config_name(name).strategy;
    PlatformParams a, b;
    a.vector_bandwidth_efficiency = 0.25;
    b.vector_bandwidth_efficiency = 0.5;
    const double dt = simulate(m, s, h100(), t, a).iteration_time_s - simulate(m, s, h100(), t, b).iteration_time_s;
    return dt / (1 / 0.25 - 1 / 0.5) * h100().hbm_bandwidth_bytes_per_s;
  };
  const double tokens = 4096, qd = tokens * 32 * 128, kvd = tokens * 8 * 256, lse = 4 * tokens * 32;
  const double expected = 32 * (qd * 8.5 + qd * 10 + kvd * 16 + lse * (3 + 2));
  EXPECT_NEAR(vector_bytes("dp1-tp1-pp1-cp2-noRC", 8192) - vector_bytes("dp1-tp1-pp1-cp1-noRC", 4096), expected,
              1e-6 * expected);
  // Selective recompute of the attention core replays the forward merge too.
  const double replayed = 32 * (qd * 8.5 + lse * 3);
  EXPECT_NEAR(vector_bytes("dp1-tp1-pp1-cp2-selRC", 8192) - vector_bytes("dp1-tp1-pp1-cp2-noRC", 8192), replayed,
              1e-6 * replayed);
}

double total_bytes_of(const std::vector<CollectiveRecord>& v, const char* prim, const char* group) {
  double sum = 0;
  for (const auto& c : v)
    if (c.primitive == prim && c.group == group) sum += c.bytes;
  return sum;
}

// Ulysses (cp_comm_type a2a): all-to-alls of Q, K, V and the output around an attention core that runs the whole
// sequence for a/(t·cp) heads, the same FLOPs in one call per head group; no ring, no step merge.
TEST(Fidelity, UlyssesContextParallelTradesTheSequenceSplitForAHeadSplit) {
  const Model& m = preset("Llama-3-8B");  // 32 heads, 8 KV heads, head_dim 128
  TrainingSettings ring = run_settings(32768, 4), ulysses = ring;
  ulysses.cp_comm_type = CpCommType::a2a;
  const Strategy s = *parse_config_name("dp1-tp1-pp1-cp4-noRC").strategy;
  const auto rd = collective_diagnostics(m, s, h100(), ring, PlatformParams{});
  const auto ud = collective_diagnostics(m, s, h100(), ulysses, PlatformParams{});
  const double tokens = 32768 / 4, q = tokens * 32 * 128 * 2, kv = tokens * 8 * 128 * 2;
  EXPECT_GT(total_bytes_of(rd, "send_recv", "cp"), 0);
  EXPECT_DOUBLE_EQ(total_bytes_of(rd, "all_to_all", "cp"), 0);
  EXPECT_DOUBLE_EQ(total_bytes_of(ud, "send_recv", "cp"), 0);
  EXPECT_DOUBLE_EQ(total_bytes_of(ud, "all_to_all", "cp"), 2 * q + 2 * kv);  // Q, K, V, output
  const Prediction a = simulate(m, s, h100(), ring, PlatformParams{}),
                   b = simulate(m, s, h100(), ulysses, PlatformParams{});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_DOUBLE_EQ(a.model_flops_per_device, b.model_flops_per_device);
  EXPECT_DOUBLE_EQ(b.breakdown.cp_comm_overlapped_s, 0);  // nothing computes beside the all-to-alls
  EXPECT_GT(b.breakdown.cp_comm_exposed_s, 0);
  EXPECT_LT(b.breakdown.compute_s, a.breakdown.compute_s);  // no step merge, full-length flash calls
  // KV heads that do not split cp ways are repeated: 8 / tp 4 = 2 per rank over cp 4, twice.
  const Strategy s4 = *parse_config_name("dp1-tp4-pp1-cp4-noRC").strategy;
  const double kv4 = tokens * 2 * 128 * 2, q4 = tokens * 8 * 128 * 2;
  EXPECT_DOUBLE_EQ(total_bytes_of(collective_diagnostics(m, s4, h100(), ulysses, PlatformParams{}), "all_to_all", "cp"),
                   2 * q4 + 2 * 2 * kv4);
  const Prediction r4 = simulate(m, s4, h100(), ring, PlatformParams{}),
                   u4 = simulate(m, s4, h100(), ulysses, PlatformParams{});
  ASSERT_TRUE(r4.ok() && u4.ok());
  EXPECT_DOUBLE_EQ(u4.stages[0].activation_bytes - r4.stages[0].activation_bytes, 32 * 2 * kv4);  // K, V kept twice
  // MindSpeed-LLM's --kv-head-repeat-before-uly-alltoall: K and V repeated to all 32 query heads (4x) at any tp.
  TrainingSettings full = ulysses;
  full.kv_head_repeat_before_uly_alltoall = true;
  EXPECT_DOUBLE_EQ(total_bytes_of(collective_diagnostics(m, s, h100(), full, PlatformParams{}), "all_to_all", "cp"),
                   2 * q + 2 * 4 * kv);
  // Validity: Ulysses splits the heads over tp·cp and the sequence cp ways; the ring needs 2·cp chunks and flash.
  const ValidityOptions vo;
  EXPECT_EQ(check(m, *parse_config_name("dp1-tp4-pp1-cp16-noRC").strategy, ulysses, vo),
            Rejection::heads_not_divisible_by_tp_cp);
  TrainingSettings odd = ulysses;
  odd.seq_length = 4100;  // 4 x 1025
  EXPECT_EQ(check(m, s, odd, vo), Rejection::ok);
  odd.cp_comm_type = CpCommType::p2p;
  EXPECT_EQ(check(m, s, odd, vo), Rejection::sequence_not_divisible_by_cp);
  TrainingSettings scores = ulysses;
  scores.flash_attention = false;
  EXPECT_EQ(check(m, s, scores, vo), Rejection::ok);
  scores.cp_comm_type = CpCommType::allgather;
  EXPECT_EQ(check(m, s, scores, vo), Rejection::cp_needs_flash_attention);
  // The settings file takes Megatron-core's names and MindSpeed-LLM's; the adaptive algorithm is refused.
  EXPECT_EQ(io::settings_from_json(io::Json{{"cp_comm_type", "ulysses_cp_algo"}}, "s.json").cp_comm_type,
            CpCommType::a2a);
  EXPECT_EQ(io::settings_from_json(io::to_json(ulysses), "s.json").cp_comm_type, CpCommType::a2a);
  try {
    io::settings_from_json(io::Json{{"cp_comm_type", "adaptive_cp_algo"}}, "s.json");
    ADD_FAILURE() << "adaptive_cp_algo accepted";
  } catch (const io::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("not modelled"), std::string::npos) << e.what();
  }
}

// a2a+p2p (MindSpeed hybrid_cp_algo, Megatron-core's hierarchical CP): Ulysses over the inner u ranks, then a ring
// over the cp/u groups. Llama-3-8B at cp 4 with u 2: the all-to-alls over a 2-rank "cp" group move the same local
// Q, K, V and output as pure Ulysses; the ring passes the (gathered) K, V block once forward, twice backward.
TEST(Fidelity, HierarchicalContextParallelRunsUlyssesInsideARing) {
  const Model& m = preset("Llama-3-8B");
  TrainingSettings t = run_settings(32768, 4);
  t.cp_comm_type = CpCommType::a2a_p2p;
  t.ulysses_degree_in_cp = 2;
  const Strategy s = *parse_config_name("dp1-tp1-pp1-cp4-noRC").strategy;
  const auto d = collective_diagnostics(m, s, h100(), t, PlatformParams{});
  const double tokens = 32768 / 4, q = tokens * 32 * 128 * 2, kv = tokens * 8 * 128 * 2;
  EXPECT_DOUBLE_EQ(total_bytes_of(d, "all_to_all", "cp"), 2 * q + 2 * kv);
  EXPECT_DOUBLE_EQ(bytes_of(d, "send_recv", "cp_ring"), 2 * kv);
  for (const auto& c : d) {
    if (c.group == "cp") {
      EXPECT_EQ(c.group_size, 2);
    }
    if (c.group == "cp_ring") {
      EXPECT_EQ(c.group_size, 2);
      EXPECT_DOUBLE_EQ(c.count, 3.0 * 32 * 4);  // one step forward, two backward: 32 layers, 4 micro-batches
    }
  }
  TrainingSettings ring = t;
  ring.cp_comm_type = CpCommType::p2p;
  const Prediction h = simulate(m, s, h100(), t, PlatformParams{});
  ASSERT_TRUE(h.ok());
  EXPECT_DOUBLE_EQ(h.model_flops_per_device, simulate(m, s, h100(), ring, PlatformParams{}).model_flops_per_device);
  EXPECT_GT(h.breakdown.cp_comm_exposed_s, 0);     // the all-to-alls
  EXPECT_GT(h.breakdown.cp_comm_overlapped_s, 0);  // the ring under the core
  // The Ulysses degree must split cp, below it; the heads split tp·u ways.
  const ValidityOptions vo;
  for (std::int64_t u : {0, 1, 3, 4}) {
    TrainingSettings bad = t;
    bad.ulysses_degree_in_cp = u;
    EXPECT_EQ(check(m, s, bad, vo), Rejection::cp_hierarchy_invalid) << u;
  }
  EXPECT_EQ(check(m, s, t, vo), Rejection::ok);
  const TrainingSettings read =
      io::settings_from_json(io::Json{{"cp_comm_type", "hybrid_cp_algo"}, {"ulysses_degree_in_cp", 2}}, "s.json");
  EXPECT_EQ(read.cp_comm_type, CpCommType::a2a_p2p);
  EXPECT_EQ(io::settings_from_json(io::to_json(read), "s.json").ulysses_degree_in_cp, 2);
}

// The K/V all-gather (cp_comm_type allgather): K and V gathered before the core in forward and backward, their
// gradients reduce-scattered; each a full cp-fold buffer, exposed.
// MindSpeed-LLM turns flash attention on in context-parallel runs only (flash_attention_with_cp): a run without
// CP keeps its stored scores, a CP run predicts as with flash attention set.
TEST(Fidelity, FlashAttentionWithCpTurnsItOnForContextParallelRunsAlone) {
  const Model& m = preset("Qwen3-0.6B");
  TrainingSettings stored = run_settings(4096, 8), flash = stored, mindspeed = stored;
  stored.flash_attention = false;
  mindspeed.flash_attention = false;
  mindspeed.flash_attention_with_cp = true;
  const Strategy cp1 = *parse_config_name("dp8-tp1-pp1-cp1-noRC").strategy;
  const Strategy cp2 = *parse_config_name("dp4-tp1-pp1-cp2-noRC").strategy;
  const PlatformParams p;
  EXPECT_DOUBLE_EQ(simulate(m, cp1, h100(), mindspeed, p).max_peak_memory_bytes,
                   simulate(m, cp1, h100(), stored, p).max_peak_memory_bytes);
  EXPECT_DOUBLE_EQ(simulate(m, cp2, h100(), mindspeed, p).max_peak_memory_bytes,
                   simulate(m, cp2, h100(), flash, p).max_peak_memory_bytes);
  EXPECT_DOUBLE_EQ(simulate(m, cp2, h100(), mindspeed, p).iteration_time_s,
                   simulate(m, cp2, h100(), flash, p).iteration_time_s);
  const ValidityOptions vo;
  EXPECT_EQ(check(m, cp2, stored, vo), Rejection::cp_needs_flash_attention);
  EXPECT_EQ(check(m, cp2, mindspeed, vo), Rejection::ok);
}

TEST(Fidelity, AllGatherContextParallelGathersKeysAndValues) {
  const Model& m = preset("Llama-3-8B");
  TrainingSettings t = run_settings(32768, 4);
  t.cp_comm_type = CpCommType::allgather;
  const Strategy s = *parse_config_name("dp1-tp1-pp1-cp4-noRC").strategy;
  const auto d = collective_diagnostics(m, s, h100(), t, PlatformParams{});
  const double kv = 32768.0 / 4 * 8 * 256 * 2;
  EXPECT_DOUBLE_EQ(bytes_of(d, "all_gather", "cp"), 4 * kv);
  EXPECT_DOUBLE_EQ(bytes_of(d, "reduce_scatter", "cp"), 4 * kv);
  EXPECT_DOUBLE_EQ(total_bytes_of(d, "send_recv", "cp"), 0);
  const Prediction p = simulate(m, s, h100(), t, PlatformParams{});
  ASSERT_TRUE(p.ok());
  EXPECT_DOUBLE_EQ(p.breakdown.cp_comm_overlapped_s, 0);
  EXPECT_GT(p.breakdown.cp_comm_exposed_s, 0);
}

TEST(Fidelity, Fp8ParametersKeepTwoBytesAndGatherInEightBits) {
  // FP8 without FP8 parameters: bf16 weights plus TE's FP8 workspace (3 bytes each); with them, the FP8 data and
  // its transpose (2), and the distributed optimizer's parameter all-gather moves 1 byte per parameter, not 2.
  const Model& m = preset("Llama-3-8B");
  TrainingSettings t = run_settings(8192, 128, Precision::fp8);
  const Strategy s = *parse_config_name("dp8-tp1-pp1-cp1-noRC").strategy;
  const Prediction workspace = simulate(m, s, h100(), t, PlatformParams{});
  const double gather16 = bytes_of(collective_diagnostics(m, s, h100(), t, PlatformParams{}), "all_gather", "dp");
  t.fp8_param_gather = true;
  const Prediction fp8 = simulate(m, s, h100(), t, PlatformParams{});
  ASSERT_TRUE(workspace.ok() && fp8.ok());
  EXPECT_NEAR(fp8.stages[0].weight_bytes / workspace.stages[0].weight_bytes, 2.0 / 3.0, 1e-12);
  EXPECT_DOUBLE_EQ(bytes_of(collective_diagnostics(m, s, h100(), t, PlatformParams{}), "all_gather", "dp"),
                   gather16 / 2);
  EXPECT_TRUE(io::settings_from_json(io::to_json(t), "settings.json").fp8_param_gather);
  t.precision = Precision::bf16;  // FP8 parameters need FP8 training
  EXPECT_FALSE(validate(t).empty());
}

TEST(Fidelity, Fp8ExpertGemmsCastEachExpertSplitWithItsOwnKernels) {
  // The slope of the iteration time in the per-kernel launch cost counts kernels. FP8 adds, per layer and
  // micro-batch, kFp8KernelsFwd + kFp8KernelsBwd = 3 cast kernels for each launch of a linear GEMM: QKV and the
  // out-projection once each, each expert's FC1 and FC2 split once per local expert (128 on one rank); and, under
  // delayed scaling, the concatenation and scale-update kernels of the chunk's two amax reductions.
  const Model& m = preset("Qwen3-30B-A3B");
  TrainingSettings t = run_settings(4096, 1);
  const Strategy s = *parse_config_name("dp1-tp1-pp1-cp1-noRC").strategy;
  auto slope = [&](Precision prec) {
    t.precision = prec;
    PlatformParams a, b;
    b.kernel_launch_us = a.kernel_launch_us + 1;
    return simulate(m, s, h100(), t, b).iteration_time_s - simulate(m, s, h100(), t, a).iteration_time_s;
  };
  const double kernels = (slope(Precision::fp8) - slope(Precision::bf16)) * 1e6;
  const double launches = 1 + 1 + 2.0 * static_cast<double>(m.num_experts);
  EXPECT_NEAR(kernels, static_cast<double>(m.num_layers) * 3 * launches + 2 * 2, 1e-3);
}

TEST(Fidelity, MoePermutationsMoveEachRoutedRowInAndOut) {
  // Memory-bound bytes of an MoE layer that grow with top-k, from the iteration time's slope in 1 / HBM efficiency
  // on one rank (128 local experts, no SP): permute, sort, unsort (read and write each routed row) and un-permute
  // (read it) forward, the same backward: 2·7 row moves of 2·h bytes; the fused SwiGLU reads 2·fm and writes fm
  // per row forward, 1.5x that backward.
  const Model& m = preset("Qwen3-30B-A3B");
  Model half = m;
  half.experts_per_token = m.experts_per_token / 2;
  const TrainingSettings t = run_settings(4096, 1);
  const Strategy s = *parse_config_name("dp1-tp1-pp1-cp1-noRC").strategy;
  auto vector_bytes = [&](const Model& model) {
    PlatformParams a, b;
    a.vector_bandwidth_efficiency = 0.25;
    b.vector_bandwidth_efficiency = 0.5;
    const double dt =
        simulate(model, s, h100(), t, a).iteration_time_s - simulate(model, s, h100(), t, b).iteration_time_s;
    return dt / (1 / 0.25 - 1 / 0.5) * h100().hbm_bandwidth_bytes_per_s;
  };
  const double h = static_cast<double>(m.hidden_size), fm = static_cast<double>(m.moe_ffn_hidden_size);
  const double rows = 4096.0 * static_cast<double>(m.experts_per_token - half.experts_per_token);
  const double per_layer = rows * (2 * 7 * 2 * h + 2.5 * 3 * 2 * fm);
  const double expected = static_cast<double>(m.num_layers) * per_layer;
  EXPECT_NEAR(vector_bytes(m) - vector_bytes(half), expected, 1e-6 * expected);
}

TEST(Fidelity, MoeRouterScoresTheRanksOwnTokens) {
  // With SP the MoE layer's input is sharded over TP: each rank routes S / tp tokens; without SP all S.
  const Model& m = preset("Qwen3-30B-A3B");
  const TrainingSettings t = run_settings(4096, 64);
  auto router_rows = [&](const char* name) {
    for (const auto& g : gemm_diagnostics(m, *parse_config_name(name).strategy, h100(), t, PlatformParams{}))
      if (g.name == "router") return g.m;
    return std::int64_t{0};
  };
  EXPECT_EQ(router_rows("dp4-tp2-pp1-cp1-ep4-etp1-noRC-sp"), 2048);
  EXPECT_EQ(router_rows("dp4-tp2-pp1-cp1-ep4-etp1-noRC-nosp"), 4096);
}

TEST(Fidelity, MoeDispatcherGathersTheTokenCountsBeforeItsAllToAll) {
  // One int64 per expert from every EP rank, forward only; a single-rank expert group has nothing to gather.
  const Model& m = preset("Qwen3-30B-A3B");
  const TrainingSettings t = run_settings(4096, 64);
  const auto ep8 =
      collective_diagnostics(m, *parse_config_name("dp8-tp1-pp1-cp1-ep8-noRC").strategy, h100(), t, PlatformParams{});
  const auto ep1 =
      collective_diagnostics(m, *parse_config_name("dp8-tp1-pp1-cp1-noRC").strategy, h100(), t, PlatformParams{});
  EXPECT_DOUBLE_EQ(bytes_of(ep8, "all_gather", "ep"), 8.0 * static_cast<double>(m.num_experts) * 8);
  EXPECT_EQ(bytes_of(ep1, "all_gather", "ep"), 0);
  EXPECT_EQ(bytes_of(ep1, "all_gather", "etp"), 0);
}

TEST(Fidelity, MoeRecomputeCoversItsActivationAndReplaysTheDispatch) {
  const Model& m = preset("Qwen3-30B-A3B");
  TrainingSettings t;
  t.seq_length = 4096;
  t.global_batch_size = 64;
  const Strategy s = *parse_config_name("dp8-tp1-pp1-cp1-ep8-selRC").strategy;
  const PlatformParams p;
  t.recompute_modules = module_bit(RecomputeModule::moe_act);
  const LayerActivation act = layer_activation(m, s, t, p, true);
  const Prediction act_p = simulate(m, s, h100(), t, p);
  t.recompute_modules = module_bit(RecomputeModule::moe);
  const LayerActivation moe = layer_activation(m, s, t, p, true);
  const Prediction moe_p = simulate(m, s, h100(), t, p);
  t.recompute_modules = module_bit(RecomputeModule::moe) | module_bit(RecomputeModule::moe_act);
  const LayerActivation both = layer_activation(m, s, t, p, true);
  ASSERT_TRUE(act_p.ok() && moe_p.ok());
  EXPECT_LT(moe.stored_bytes, act.stored_bytes);          // the whole layer frees more than its activation
  EXPECT_DOUBLE_EQ(both.stored_bytes, moe.stored_bytes);  // moe already covers moe_act: no double count
  EXPECT_GT(moe_p.breakdown.recompute_s, act_p.breakdown.recompute_s);
  // A dense-only module leaves MoE layers alone.
  t.recompute_modules = module_bit(RecomputeModule::mlp);
  EXPECT_DOUBLE_EQ(layer_activation(m, s, t, p, true).live_bytes, 0);
}

TEST(Fidelity, Fp8LinearLayersKeepTheirInputsInFp8) {
  // Transformer Engine keeps an FP8 linear layer's input for its weight gradient as the FP8 copy it cast.
  const Model& m = preset("Llama-3-8B");
  TrainingSettings t = run_settings(4096, 8);
  const Strategy s = strat(8, 1, 1);
  const PlatformParams p;
  t.precision = Precision::bf16;
  const double bf16 = layer_activation(m, s, t, p, false).stored_bytes;
  t.precision = Precision::fp8;
  const double fp8 = layer_activation(m, s, t, p, false).stored_bytes;
  const double S = 4096, h = 4096, ad = 32 * 128, f = 14336;
  // QKV and FC1 inputs (h each) and the FC2 input (f) halve; flash attention keeps its 16-bit output besides the
  // out-projection's FP8 copy (+a·d).
  EXPECT_NEAR(bf16 - fp8, S * (2 * h + f - ad), 1e-9 * bf16);
}

TEST(Fidelity, FsdpShardsParametersAndGathersThemEveryMicroBatch) {
  const Model& m = preset("Llama-3-8B");
  TrainingSettings t = run_settings(8192, 128);
  const Strategy s = strat(8, 1, 1);
  PlatformParams p;
  const Prediction zero1 = simulate(m, s, h100(), t, p);
  t.fsdp = true;
  const Prediction fsdp = simulate(m, s, h100(), t, p);
  ASSERT_TRUE(zero1.ok() && fsdp.ok());
  const double params = count_params(m).total, layer = params / m.num_layers;
  // Weights and gradients: a 1/dp shard plus the gathered layers (two of weights, one of gradients).
  EXPECT_NEAR(fsdp.stages[0].weight_bytes, 2 * (params / 8 + 2 * layer), 1e-6 * params);
  EXPECT_NEAR(fsdp.stages[0].gradient_bytes, 4 * (params / 8 + layer), 1e-6 * params);  // fp32 gradients
  EXPECT_LT(fsdp.max_peak_memory_bytes, zero1.max_peak_memory_bytes - 30.0 * (1 << 30));
  // Every micro-batch gathers twice and reduce-scatters once.
  const double mb = static_cast<double>(fsdp.num_micro_batches);
  for (const auto& k : collective_diagnostics(m, s, h100(), t, p)) {
    if (k.group == "dp") {
      EXPECT_DOUBLE_EQ(k.count, k.primitive == "all_gather" ? 2 * mb : mb) << k.primitive;
    }
  }
  // Without overlap all of it is exposed, in every micro-batch.
  p.dp_overlap = 0;
  const Prediction exposed = simulate(m, s, h100(), t, p);
  EXPECT_GT(exposed.breakdown.dp_comm_exposed_s, mb * 0.001);
  EXPECT_NEAR(exposed.iteration_time_s - fsdp.iteration_time_s,
              exposed.breakdown.dp_comm_exposed_s - fsdp.breakdown.dp_comm_exposed_s, 1e-9);
}

TEST(Fidelity, UnfusedNormsAndActivationsKeepMoreActivations) {
  const Model& m = preset("Qwen3-1.7B");  // RMSNorm, q/k norms, SwiGLU
  TrainingSettings t = run_settings(4096, 8);
  const Strategy s = strat(8, 1, 1);
  const PlatformParams p;
  const double fused = layer_activation(m, s, t, p, false).stored_bytes;
  t.fused_norm = false;  // PyTorch RMSNorm: fp32 input copy + normalised output, 4 bytes more per element
  const double norm = layer_activation(m, s, t, p, false).stored_bytes;
  const double S = 4096, h = 2048, qk = (16 + 8) * 128, f = 6144;
  EXPECT_NEAR(norm - fused, 4 * S * (2 * h + qk), 1e-9 * fused);
  t.fused_norm = true;
  t.fused_kernels = false;  // unfused SwiGLU also keeps act(gate)
  EXPECT_NEAR(layer_activation(m, s, t, p, false).stored_bytes - fused, 2 * S * f, 1e-9 * fused);
}

TEST(Fidelity, Fp8WeightCastsAreCachedAcrossMicroBatches) {
  // Megatron-core sets Transformer Engine's is_first_microbatch each iteration: a weight's FP8 copy is cast once
  // per iteration, so the per-micro-batch forward shrinks as micro-batches grow; a 16-bit run does not change.
  const Model& m = preset("Llama-3-8B");
  const Strategy s = strat(8, 1, 1);
  for (Precision precision : {Precision::fp8, Precision::bf16}) {
    const Prediction few = simulate(m, s, h100(), run_settings(4096, 8, precision), PlatformParams{});
    const Prediction many = simulate(m, s, h100(), run_settings(4096, 256, precision), PlatformParams{});
    ASSERT_TRUE(few.ok() && many.ok());
    if (precision == Precision::fp8)
      EXPECT_LT(many.layer.forward_s, few.layer.forward_s);
    else
      EXPECT_DOUBLE_EQ(many.layer.forward_s, few.layer.forward_s);
  }
}

// The optimizer step, op by op as Megatron's mixed-precision optimizer runs it: FP16 with 16-bit gradients
// copies them into fp32 (6 bytes per parameter) and unscales them (8) before the norm (4), Adam (28) and the copy
// back into the 16-bit parameters (6), and zeroes its 16-bit gradient buffer (2): 54 bytes. BF16 with fp32
// gradients reads them in place and zeroes 4 bytes: 42. The master's remainders save the copy back; a step the
// FP16 loss scaler skips (moments not yet allocated) stops after the inf check.
TEST(Fidelity, OptimizerStepMovesWhatTheMixedPrecisionOptimizerMoves) {
  const Model m = gpt22b();
  const Strategy s = with(*parse_config_name("dp1-tp8-pp1-cp1-noRC").strategy, Recompute::none, false);
  const PlatformParams p{};
  const double per_byte_s = 1 / (a100().hbm_bandwidth_bytes_per_s * p.vector_bandwidth_efficiency);
  auto step_s = [&](const TrainingSettings& t) {
    const Prediction pr = simulate(m, s, a100(), t, p);
    EXPECT_TRUE(pr.ok());
    return pr.stages[0].optimizer_s;
  };
  const TrainingSettings fp16 = megatron2022();
  TrainingSettings half = fp16;
  half.fp32_gradients = false;
  const Prediction pr = simulate(m, s, a100(), half, p);
  ASSERT_TRUE(pr.ok());
  const double params = pr.stages[0].weight_bytes / 2;  // 16-bit weights, replicated optimizer: all owned
  TrainingSettings bf16 = fp16;
  bf16.precision = Precision::bf16;
  bf16.fp32_gradients = true;
  EXPECT_NEAR(step_s(half) - step_s(bf16), 12 * params * per_byte_s, 1e-9);
  TrainingSettings remainders = bf16;
  remainders.reuse_fp32_param = true;
  EXPECT_NEAR(step_s(bf16) - step_s(remainders), 6 * params * per_byte_s, 1e-9);
  TrainingSettings skipped = half;
  skipped.optimizer_moments_allocated = false;
  EXPECT_NEAR(step_s(half) - step_s(skipped), 38 * params * per_byte_s, 1e-9);
  TrainingSettings sixteen_bit_state = bf16;
  sixteen_bit_state.bf16_optimizer_state = true;
  sixteen_bit_state.fp32_gradients = false;
  EXPECT_NEAR(step_s(bf16) - step_s(sixteen_bit_state), (42 - 18) * params * per_byte_s, 1e-9);
  // bf16 moments beside the fp32 master copy: Adam reads and writes each moment in 2 bytes, not 4 (8 fewer).
  TrainingSettings bf16_moments = bf16;
  bf16_moments.bf16_adam_moments = true;
  EXPECT_NEAR(step_s(bf16) - step_s(bf16_moments), 8 * params * per_byte_s, 1e-9);
}

// Megatron-core's tunable interleaved schedule: a virtual stage runs N micro-batches in a row (N = p by default).
// N in [p, m] with the last group whole or at least p long lets m run undivided by p; the warm-up holds
// (p - i - 1)·2 + (v - 1)·N chunks in flight, so a larger N keeps more activations.
TEST(Fidelity, MicrobatchGroupsPerVirtualStageSetWhichMicroBatchCountsInterleave) {
  const Model& m = preset("GPT-3-175B");
  const Strategy s = *parse_config_name("dp16-tp4-pp8-cp1-noRC-mbs1-vpp6-sp").strategy;
  TrainingSettings t = run_settings(2048, 160);  // 10 micro-batches per pipeline
  const ValidityOptions o{};
  EXPECT_EQ(check(m, s, t, o), Rejection::vpp_needs_pipeline);  // 10 % 8 != 0
  t.microbatch_group_size_per_vp_stage = 10;
  EXPECT_EQ(check(m, s, t, o), Rejection::ok);
  t.global_batch_size = 192;  // 12 micro-batches: groups of 10 leave 2 < p
  EXPECT_EQ(check(m, s, t, o), Rejection::vpp_needs_pipeline);
  t.microbatch_group_size_per_vp_stage = 4;  // below p
  EXPECT_EQ(check(m, s, t, o), Rejection::vpp_needs_pipeline);
  t.microbatch_group_size_per_vp_stage = 12;
  EXPECT_EQ(check(m, s, t, o), Rejection::ok);
  // 16 micro-batches in groups of 16 against the default 8: stage 0 holds 14 + 5·16 + 1 = 95 chunks against 55.
  t.global_batch_size = 256;
  t.microbatch_group_size_per_vp_stage = 0;
  const Prediction by_p = simulate(m, s, h100(), t, PlatformParams{});
  t.microbatch_group_size_per_vp_stage = 16;
  const Prediction by_16 = simulate(m, s, h100(), t, PlatformParams{});
  ASSERT_TRUE(by_p.ok() && by_16.ok());
  EXPECT_DOUBLE_EQ(by_p.stages[0].inflight_microbatches, 55.0 / 6);
  EXPECT_DOUBLE_EQ(by_16.stages[0].inflight_microbatches, 95.0 / 6);
  EXPECT_NEAR(by_16.stages[0].activation_bytes / by_p.stages[0].activation_bytes, 95.0 / 55, 1e-12);
  EXPECT_EQ(io::settings_from_json(io::to_json(t), "s.json").microbatch_group_size_per_vp_stage, 16);
}

TEST(Fidelity, DataParallelTrafficSharesLinksNotCompute) {
  // Gradients reduced under the backward (--overlap-grad-reduce). With TP inside a node and DP across nodes, a
  // backward TP all-reduce left exposed (no asynchronous all-reduce) occupies NVLink only: the DP reduction runs
  // beside it over the network as in idle time, so less of it is exposed than with that all-reduce hidden.
  const Model& m = preset("Llama-3-8B");
  TrainingSettings t;
  t.seq_length = 8192;
  t.global_batch_size = 16;
  t.overlap_grad_reduce = true;
  auto dp_exposed = [&](const char* name, bool async) {
    TrainingSettings u = t;
    u.async_tensor_model_parallel_allreduce = async;
    const Prediction p = simulate(m, *parse_config_name(name).strategy, h100(), u, PlatformParams{});
    EXPECT_TRUE(p.ok()) << name;
    return std::pair{p.breakdown.dp_comm_exposed_s, p.breakdown.tp_comm_s};
  };
  const auto [across_async, tp_across_async] = dp_exposed("dp2-tp8-pp1-cp1-noRC-mbs8", true);
  const auto [across_sync, tp_across_sync] = dp_exposed("dp2-tp8-pp1-cp1-noRC-mbs8", false);
  ASSERT_GT(tp_across_sync, tp_across_async);  // the synchronous all-reduce is exposed
  ASSERT_GT(across_async, 0);                  // and some DP traffic was exposed beside the async one
  EXPECT_LT(across_sync, across_async);

  // (That compute hiding a ring on the DP group's links cannot hide DP traffic too is what keeps a faster
  // attention from slowing an iteration: Invariants.AFasterPlatformParameterNeverSlowsAnIteration.)
}

// With a pipeline the last stage keeps its own copy of the word embedding when it is tied to the output layer or an
// MTP module embeds its input there (Megatron-core GPTModel); finalize_model_grads all-reduces the copies'
// gradients over the first and last stage once per iteration, after the backward. The diagnostics list that
// all-reduce as simulate() times it; untied, unpipelined or MTP-free-and-untied runs have none.
TEST(Fidelity, TheFirstAndLastStageAllReduceTheirEmbeddingCopiesGradients) {
  Model untied = preset("Llama-3-8B"), tied = untied, mtp = untied;
  tied.tied_embeddings = true;
  mtp.mtp_layers = 1;
  TrainingSettings t = run_settings(4096, 8);
  t.fp32_gradients = true;
  auto embedding_records = [&](const Model& m, int pp) {
    std::vector<CollectiveRecord> out;
    for (const auto& c : collective_diagnostics(m, strat(1, 2, pp), h100(), t, PlatformParams{}))
      if (c.group == "embedding") out.push_back(c);
    return out;
  };
  EXPECT_TRUE(embedding_records(untied, 2).empty());
  EXPECT_TRUE(embedding_records(tied, 1).empty());
  for (const Model* m : {&tied, &mtp}) {
    const auto records = embedding_records(*m, 2);
    ASSERT_EQ(records.size(), 2u) << m->name;
    for (int stage : {0, 1}) {
      const CollectiveRecord& r = records[static_cast<std::size_t>(stage)];
      EXPECT_EQ(r.stage, stage);
      EXPECT_EQ(r.primitive, "all_reduce");
      EXPECT_EQ(r.group_size, 2);
      EXPECT_DOUBLE_EQ(r.count, 1);
      EXPECT_DOUBLE_EQ(r.bytes, 4.0 * 128256 * 4096 / 2);  // fp32 gradients of the vocab-padded table over tp 2
    }
  }
  // Tied or not, a pipelined stage pair holds the same parameters (the last stage its output layer): with no DP
  // traffic the all-reduce is all that tying adds to the iteration.
  const double gap = simulate(tied, strat(1, 2, 2), h100(), t, PlatformParams{}).iteration_time_s -
                     simulate(untied, strat(1, 2, 2), h100(), t, PlatformParams{}).iteration_time_s;
  EXPECT_NEAR(gap, embedding_records(tied, 2)[0].predicted_ms * 1e-3, 1e-12);
}

// The MTP stage's own embedding is a third vocabulary-sized table beside the first stage's embedding and its output
// layer: one more vocab x h / t of weights there, and none in a single stage, where one embedding serves both.
TEST(Fidelity, AnMtpStageKeepsItsOwnEmbeddingCopy) {
  const TrainingSettings t = run_settings(4096, 8);
  auto last_stage_bytes_per_vocab_row = [&](int mtp_layers, int pp) {
    auto weights = [&](std::int64_t vocab) {
      Model m = preset("Llama-3-8B");
      m.mtp_layers = mtp_layers;
      m.vocab_size = vocab;
      const Prediction p = simulate(m, strat(1, 2, pp), h100(), t, PlatformParams{});
      EXPECT_TRUE(p.ok());
      return p.stages[static_cast<std::size_t>(pp - 1)].weight_bytes;
    };
    return (weights(128256 + 256) - weights(128256)) / 256;  // whole multiples of the padding (128 x tp)
  };
  const double row = 2.0 * 4096 / 2;                                // one 16-bit row of a table split over tp 2
  EXPECT_DOUBLE_EQ(last_stage_bytes_per_vocab_row(0, 2), row);      // the output layer
  EXPECT_DOUBLE_EQ(last_stage_bytes_per_vocab_row(1, 2), 2 * row);  // and the MTP embedding copy
  EXPECT_DOUBLE_EQ(last_stage_bytes_per_vocab_row(1, 1), 2 * row);  // one stage: embedding and output layer
}

// Flash attention's backward recomputes the scores: five matrix products against the forward's two, 2.5 times the
// forward's FLOPs at the same throughput (Dao 2023).
TEST(Fidelity, FlashAttentionBackwardDoesTwoAndAHalfTimesTheForwardsWork) {
  PlatformParams p;
  p.kernel_launch_us = 0;  // the kernels alone
  std::vector<double> us;
  for (const auto& g : gemm_diagnostics(preset("Llama-3-8B"), strat(8, 1, 1), h100(), run_settings(8192, 64), p))
    if (g.name == "scores") us.push_back(g.predicted_us);
  ASSERT_EQ(us.size(), 2u);  // the forward call and the fused backward
  EXPECT_NEAR(us[1] / us[0], 2.5, 1e-12);
}

// Where only launches cost time, a layer's backward takes twice its forward: each GEMM's input- and weight-gradient
// kernels, and twice the forward's memory-bound kernels.
TEST(Fidelity, ABackwardLaunchesTwiceTheForwardsKernels) {
  TrainingSettings t = run_settings(4096, 8);
  t.flash_attention = false;  // the scores through their own GEMMs and softmax kernels
  const Prediction p = simulate(preset("Llama-3-8B"), strat(8, 1, 1), launch_bound(), t, PlatformParams{});
  ASSERT_TRUE(p.ok());
  ASSERT_GT(p.layer.forward_s, 0);
  EXPECT_NEAR(p.layer.backward_s / p.layer.forward_s, 2.0, 1e-6);
}

// Matrix units that need their own tiled layout (Ascend's Cube) convert each GEMM's 16-bit operands and output
// with one more kernel that reads and writes them: 4 bytes per element of A, B and C.
TEST(Fidelity, ALayoutConversionReadsAndWritesEachOperandAndTheOutput) {
  const Model m = preset("Llama-3-8B");
  System tiled = h100();
  tiled.gemm_layout_conversion = true;
  PlatformParams p;
  p.kernel_launch_us = 0;
  auto fc1 = [&](const System& sys) {
    for (const auto& g : gemm_diagnostics(m, strat(8, 1, 1), sys, run_settings(4096, 64), p))
      if (g.name == "fc1") return g;
    ADD_FAILURE() << "no fc1 GEMM";
    return GemmRecord{};
  };
  const GemmRecord plain = fc1(h100()), converted = fc1(tiled);
  const double elements =
      static_cast<double>(plain.batch) * static_cast<double>(plain.m * plain.k + plain.k * plain.n + plain.m * plain.n);
  EXPECT_NEAR(converted.predicted_us - plain.predicted_us,
              4 * elements / (h100().hbm_bandwidth_bytes_per_s * p.vector_bandwidth_efficiency) * 1e6, 1e-6);
}

// An MTP module embeds its shifted input tokens and runs the LM head and loss once more, each with the TP collectives
// the first and last stage run (Megatron-core MultiTokenPredictionLayer). Without SP and with the backward
// all-reduce synchronous every TP collective is exposed, so the diagnostics' TP calls on a stage add up to its
// exposed TP time; the MTP stage makes six more hidden-size all-reduces a micro-batch: its layer's four, its
// embedding's forward one and its head's backward one.
TEST(Fidelity, AnMtpModuleEmbedsItsInputAndRunsTheHeadAgainWithTheirCollectives) {
  TrainingSettings t = run_settings(4096, 8);
  t.async_tensor_model_parallel_allreduce = false;
  t.pipeline_scatter_gather = false;  // no TP gather of received slices (pipeline traffic)
  Model m = preset("Llama-3-8B");
  const double act = 4096.0 * 4096 * 2;
  auto calls_of_act = [&](const Model& model) {
    double calls = 0;
    for (const auto& c : collective_diagnostics(model, strat(1, 2, 2), h100(), t, PlatformParams{}))
      if (c.group == "tp" && c.stage == 1 && c.primitive == "all_reduce" && c.bytes == act) calls += c.count;
    return calls;
  };
  const double without = calls_of_act(m);
  m.mtp_layers = 1;
  EXPECT_DOUBLE_EQ(calls_of_act(m) - without, 8 * 6.0);  // 8 micro-batches
  const Prediction p = simulate(m, strat(1, 2, 2), h100(), t, PlatformParams{});
  ASSERT_TRUE(p.ok());
  double listed_s[2] = {0, 0};
  for (const auto& c : collective_diagnostics(m, strat(1, 2, 2), h100(), t, PlatformParams{}))
    if (c.group == "tp") listed_s[c.stage] += c.count * c.predicted_ms * 1e-3;
  for (int stage : {0, 1})
    EXPECT_NEAR(listed_s[stage], 8 * p.stages[static_cast<std::size_t>(stage)].tp_comm_s, 1e-9) << "stage " << stage;
}

// Where only HBM traffic costs time (GEMMs at no cost, no launches): a memory-bound op's backward reads its input
// and its output's gradient and writes its input's gradient, 1.5 times its forward's bytes. QK-norm normalises q
// and k (a + g heads of head_dim each, read and written).
TEST(Fidelity, AMemoryBoundOpsBackwardMovesOneAndAHalfTimesItsForwardsBytes) {
  const TrainingSettings t = run_settings(4096, 8);
  auto layer = [&](bool qk_norm) {
    Model m = preset("Llama-3-8B");
    m.qk_norm = qk_norm;
    return simulate(m, strat(8, 1, 1), gemms_free(), t, no_launch()).layer;
  };
  const auto with = layer(true), without = layer(false);
  const double fwd = with.forward_s - without.forward_s, bwd = with.backward_s - without.backward_s;
  const double qk_bytes = 4096.0 * (32 + 8) * 128 * 2;  // q and k, 16-bit
  EXPECT_NEAR(fwd, hbm_s(2 * qk_bytes), 1e-12);
  EXPECT_NEAR(bwd / fwd, 1.5, 1e-9);
}

// Stored-score (unfused) attention repeats a GQA model's K and V to every head before the batched products: per
// layer forward it reads g and writes a heads of each, 2(a + g) heads, as many as the rotary embedding's read and
// write of q and k. Four KV heads fewer take 8 heads' traffic from each (GEMMs at no cost, no launches).
TEST(Fidelity, UnfusedGqaAttentionRepeatsKeysAndValuesToEveryHead) {
  TrainingSettings t = run_settings(4096, 8);
  t.flash_attention = false;
  auto forward = [&](std::int64_t kv_heads) {
    Model m = preset("Llama-3-8B");
    m.num_kv_heads = kv_heads;
    return simulate(m, strat(8, 1, 1), gemms_free(), t, no_launch()).layer.forward_s;
  };
  const double head_bytes = 4096.0 * 128 * 2;  // one head's q, k or v over the sequence, 16-bit
  const double rotary = 2 * 4 * head_bytes, expand = 2 * 4 * head_bytes;
  EXPECT_NEAR(forward(8) - forward(4), hbm_s(rotary + expand), 1e-12);
}

// Where only launches cost time, a layer's forward counts its kernels: one per GEMM call (a grouped expert GEMM one
// per local expert on TE's GroupedLinear), and besides them 12 a layer (fused kernels), 16 more in an MoE layer
// (router top-k and softmax, permutations, the dispatcher's bookkeeping).
TEST(Fidelity, ALayerLaunchesItsGemmsAndAFixedCountOfOtherKernels) {
  const System fast = launch_bound();
  PlatformParams p;
  p.kernel_launch_us = 1;
  const TrainingSettings t = run_settings(4096, 8);
  auto launches = [&](const char* model) {
    return simulate(preset(model), strat(8, 1, 1), fast, t, p).layer.forward_s * 1e6;
  };
  EXPECT_NEAR(launches("Llama-3-8B"), 12 + 6, 1e-3);  // qkv, scores, pv, out, fc1, fc2
  // qkv, scores, pv, out, the router and the 128 experts' FC1 and FC2 (one rank holds all: EP 1)
  EXPECT_NEAR(launches("Qwen3-30B-A3B"), 12 + 16 + 5 + 2 * 128, 1e-3);
  // The optimizer step's multi-tensor kernels: six, and two more per layer the stage holds.
  const Prediction dense = simulate(preset("Llama-3-8B"), strat(8, 1, 1), fast, t, p);
  EXPECT_NEAR(dense.stages[0].optimizer_s * 1e6, 6 + 2 * 32, 1e-3);
}

// Hidden dropout at the two residual adds of a layer: fused into the bias-dropout-add it reads and writes half a
// tensor more (the 1-byte mask beside 2 reads and 1 write); unfused it is its own kernel, 2.5 tensors more.
TEST(Fidelity, HiddenDropoutAddsItsPassToEachResidual) {
  const double act = 4096.0 * 4096 * 2;
  for (const bool fused : {true, false}) {
    auto forward = [&](bool dropout) {
      TrainingSettings t = run_settings(4096, 8);
      t.fused_kernels = fused;
      t.hidden_dropout = dropout;
      return simulate(preset("Llama-3-8B"), strat(8, 1, 1), gemms_free(), t, no_launch()).layer.forward_s;
    };
    EXPECT_NEAR(forward(true) - forward(false), hbm_s(2 * (fused ? 0.5 : 2.5) * act), 1e-12) << fused;
  }
}

// A gated MLP's activation reads gate and up and writes their product (3 tensors of the FFN width), unfused as SiLU
// then a multiply (5); an ungated one reads and writes one (2).
TEST(Fidelity, AGatedActivationMovesThreeTensorsFusedAndFiveUnfused) {
  for (const bool fused : {true, false}) {
    TrainingSettings t = run_settings(4096, 8);
    t.fused_kernels = fused;
    auto forward = [&](Activation a) {
      Model m = preset("Llama-3-8B");
      m.activation = a;
      return simulate(m, strat(8, 1, 1), gemms_free(), t, no_launch()).layer.forward_s;
    };
    const double ffn_tensor = 4096.0 * 14336 * 2;
    EXPECT_NEAR(forward(Activation::swiglu) - forward(Activation::gelu), hbm_s(((fused ? 3.0 : 5.0) - 2) * ffn_tensor),
                1e-12)
        << fused;
  }
}

// The first stage looks the tokens up in its embedding (read a row, write the activation) and scatters their
// gradient back: 2 hidden-size tensors each way beside what a middle stage of as many layers does.
TEST(Fidelity, TheEmbeddingLookupAndItsGradientMoveTwoActivationsEachWay) {
  const Prediction p = simulate(preset("Llama-3-8B"), strat(2, 1, 4), gemms_free(), run_settings(4096, 8), no_launch());
  ASSERT_TRUE(p.ok());
  const double act = 4096.0 * 4096 * 2;
  EXPECT_NEAR(p.stages[0].forward_compute_s - p.stages[1].forward_compute_s, hbm_s(2 * act), 1e-12);
  EXPECT_NEAR(p.stages[0].backward_compute_s - p.stages[1].backward_compute_s, hbm_s(2 * act), 1e-12);
}

// Megatron's vocab-parallel cross entropy all-reduces three fp32 values a token over TP (the logits' maximum, the
// sum of exponentials and the target logit), every micro-batch on the last stage.
TEST(Fidelity, VocabParallelCrossEntropyAllReducesThreeValuesAToken) {
  const TrainingSettings t = run_settings(4096, 8);
  double calls = 0;
  for (const auto& c : collective_diagnostics(preset("Llama-3-8B"), strat(1, 2, 2), h100(), t, PlatformParams{}))
    if (c.group == "tp" && c.primitive == "all_reduce" && c.bytes == 4096.0 * 4) {
      EXPECT_EQ(c.stage, 1);
      calls += c.count;
    }
  EXPECT_DOUBLE_EQ(calls, 3 * 8.0);  // 8 micro-batches
}

// An all-to-all over a group spanning nodes (Qwen3-30B-A3B's EP 16 over two 8-GPU nodes) sends (k - 1)/n of the
// buffer over NVLink and (n - k)/n over the rails, with k - 1 NVLink steps and one step per other node.
TEST(Fidelity, AnAllToAllAcrossNodesSplitsItsBytesBetweenNvlinkAndTheRails) {
  const PlatformParams p;
  const System& sys = h100();
  for (const auto& c :
       collective_diagnostics(preset("Qwen3-30B-A3B"), *parse_config_name("dp16-tp1-pp1-cp1-ep16-noRC").strategy, sys,
                              run_settings(4096, 64), p))
    if (c.primitive == "all_to_all") {
      ASSERT_EQ(c.group, "ep");
      ASSERT_EQ(c.nodes, 2);
      const double n = 16, k = 8;
      const double intra_bw = sys.intra_node.bandwidth_bytes_per_s * p.intra_node_bandwidth_efficiency,
                   inter_bw = sys.inter_node.bandwidth_bytes_per_s * p.inter_node_bandwidth_efficiency;
      const double intra_lat = sys.intra_node.latency_s + p.collective_latency_us * 1e-6,
                   inter_lat = sys.inter_node.latency_s + p.collective_latency_us * 1e-6;
      const double expected = (k - 1) / n * c.bytes / intra_bw + (n - k) / n * c.bytes / inter_bw +
                              (k - 1) * intra_lat + 1 * inter_lat + p.kernel_launch_us * 1e-6;
      EXPECT_NEAR(c.predicted_ms * 1e-3, expected, 1e-12);
      return;
    }
  ADD_FAILURE() << "no all-to-all";
}

// The router's softmax and top-k over every expert move 3 fp32 values a token and expert forward, half as much
// again backward: what halving the experts (same top-k) takes away where only HBM traffic costs time.
TEST(Fidelity, TheRoutersSoftmaxMovesThreeValuesATokenAndExpert) {
  auto layer = [&](std::int64_t experts) {
    Model m = preset("Qwen3-30B-A3B");
    m.num_experts = experts;
    return simulate(m, strat(8, 1, 1), gemms_free(), run_settings(4096, 8), no_launch()).layer;
  };
  const auto all = layer(128), half = layer(64);
  const double fwd = all.forward_s - half.forward_s, bwd = all.backward_s - half.backward_s;
  EXPECT_NEAR(fwd, hbm_s(3 * 4096.0 * 64 * 4), 1e-12);
  EXPECT_NEAR(bwd / fwd, 1.5, 1e-6);  // (the router GEMM's residual cost)
}

// An all-reduce over one rank per node (DP 4 across four 8-GPU nodes, TP 8 inside each) goes over the rails as a
// tree: 2·log2(n) latency steps where a ring takes 2(n - 1), the ring's 2(n - 1)/n of the buffer in bytes.
TEST(Fidelity, AnAllReduceOverOneRankPerNodeTakesTheTreesLatencySteps) {
  const PlatformParams p;
  const System& sys = h100();
  TrainingSettings t = run_settings(4096, 64);
  t.distributed_optimizer = false;
  for (const auto& c : collective_diagnostics(preset("Llama-3-8B"), strat(4, 8, 1), sys, t, p))
    if (c.group == "dp") {
      ASSERT_EQ(c.primitive, "all_reduce");
      ASSERT_EQ(c.nodes, 4);
      const double n = 4, inter_bw = sys.inter_node.bandwidth_bytes_per_s * p.inter_node_bandwidth_efficiency;
      const double inter_lat = sys.inter_node.latency_s + p.collective_latency_us * 1e-6;
      EXPECT_NEAR(c.predicted_ms * 1e-3,
                  2 * (n - 1) / n * c.bytes / inter_bw + 2 * std::log2(n) * inter_lat + p.kernel_launch_us * 1e-6,
                  1e-12);
      return;
    }
  ADD_FAILURE() << "no DP all-reduce";
}
