// lmsim/simulator/execution.hpp — internal: stages A–D of the simulator.
//
// A compile / B bind: `Ctx` holds the sharded dimensions of one rank (TP/CP/EP/SP applied, vocabulary padded) and
// one table of parallel groups (`GroupUse`: size, how its ranks sit on nodes, the links it uses), built from the
// Megatron rank order.
// C execution representation: `visit_layer_ops` lists the forward GEMMs of one transformer layer for one
// micro-batch, each op carrying its role (which linear it is, whether it is the attention core, whether it runs
// in FP8); `visit_layer_collectives` lists the layer's collectives, each naming the op whose compute can hide it
// in forward and backward (Megatron-LM's overlap rules). Backward is derived from forward.
// D cost estimators: `gemm_time_s`, `vector_time_s`, `collective_time_s` (hierarchical over NVLink and rails).
// Every formula lives here once; simulate(), the diagnostics and the memory model all call these.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#include "simulator/simulate.hpp"

namespace lmsim::detail {

enum class Prim { all_reduce, all_gather, reduce_scatter, all_to_all, send_recv };
// The parallel groups a rank belongs to; `edp` is the expert-data-parallel group (dp·cp / ep) that reduces the
// expert weights' gradients.
enum class Group { tp, cp, ep, dp, edp, pp, count_ };
constexpr std::size_t kNumGroups = static_cast<std::size_t>(Group::count_);
const char* group_name(Group g);
const char* prim_name(Prim p);

struct LinkUse {
  double bandwidth_bytes_per_s;  // effective: nominal x fitted efficiency
  double latency_s;
};

// One parallel group as placed on the machine (Megatron rank order: tp fastest, then cp, dp (ep inside dp), pp).
// A group of `size` ranks spans `nodes` nodes with `per_node` of its ranks on each; a collective over it runs
// inside the NVLink domain when nodes == 1, over one rail per rank when per_node == 1, else hierarchically.
struct GroupUse {
  double size = 1, per_node = 1, nodes = 1;
};

struct Ctx {
  const Model* m;
  const System* sys;
  const PlatformParams* p;
  ResolvedStrategy r;
  TrainingSettings t;
  // Sharded dimensions (doubles: they enter FLOP and byte formulas only).
  double b, s, s_local, tokens;  // micro-batch, full and per-CP-rank sequence, local tokens b*s_local
  double h, a, g, d, f, vocab_padded;
  double tp, cp, ep, dp, pp, vpp;
  double sp_div;             // t when sequence parallel, else 1: divides work and activations outside the TP region
  double peak_flops;         // 16-bit dense FLOP/s (the training precision, or bf16/fp16 under FP8)
  double peak_flops_linear;  // FLOP/s of the linear layers: FP8 peak under FP8 training, else peak_flops
  bool fp8;
  double hbm_bw;
  LinkUse intra, inter;
  std::array<GroupUse, kNumGroups> groups;
  const GroupUse& group(Group g) const { return groups[static_cast<std::size_t>(g)]; }
};

Ctx make_ctx(const Model& m, const Strategy& s, const System& sys, const TrainingSettings& t, const PlatformParams& p);

// ---------------------------------------------------------------- D: cost estimators
// GEMM kernel: FLOPs at a size-dependent efficiency, eff = e_max · d / (d + d_half) with d the smallest of
// m, n, k (thin problems under-fill the matrix units and are bandwidth-bound).
inline double gemm_kernel_s(double peak_flops, double e_max, double half_dim, double batch, double m, double n,
                            double k) {
  const double flops = 2.0 * batch * m * n * k;
  const double dmin = std::min({m, n, k});
  return flops / (peak_flops * e_max * dmin / (dmin + half_dim));
}
// Memory-bound kernels: bytes over the fitted fraction of HBM bandwidth, plus their launches.
inline double vector_time_s(const Ctx& c, double bytes, double kernels) {
  return bytes / (c.hbm_bw * c.p->vector_bandwidth_efficiency) + kernels * c.p->kernel_launch_us * 1e-6;
}

// What a GEMM of the layer is: the input-side (column-parallel) and output-side (row-parallel) linear layers of
// the attention and MLP blocks, the attention core (scores and scores·V), the MoE router, the LM head.
enum class OpRole { attn_in, attn_core, attn_out, mlp_in, mlp_out, router, head };
inline bool is_linear(OpRole r) {
  return r == OpRole::attn_in || r == OpRole::attn_out || r == OpRole::mlp_in || r == OpRole::mlp_out;
}

struct Gemm {
  const char* name;
  OpRole role;
  double batch, m, n, k;
  // Kernel launches per call: 1 for one (batched) kernel; the local expert count for Transformer Engine's
  // GroupedLinear, which runs one cuBLAS GEMM per expert (multi-stream), not one grouped kernel.
  double launches = 1;
  RecomputeModule module = RecomputeModule::none;  // the --recompute-modules submodule it belongs to
};

// Transformer Engine FP8 (Micikevicius et al. 2022; TE's Linear / LayerNormLinear): only the linear layers run in
// FP8; attention BMMs, softmax, router and LM head stay 16-bit. Each FP8 GEMM casts its input with a fused
// cast-transpose (read 2 bytes, write the FP8 copy and its transpose: 4 bytes per element) and its weight likewise
// once per micro-batch; backward casts the output gradient the same way. Plus amax / scale updates.
constexpr double kFp8CastBytesPerElement = 4, kFp8KernelsFwd = 2, kFp8KernelsBwd = 1;

inline bool runs_fp8(const Ctx& c, const Gemm& g) { return c.fp8 && is_linear(g.role); }

// Flash attention (Dao 2023): the scores and scores·V products are one fused kernel, whose throughput is its own
// fraction of the 16-bit peak (it does not follow the GEMM shape rule); its backward recomputes the scores, five
// matrix products against the forward's two: 2.5x the forward's FLOPs.
inline bool is_flash_core(const Ctx& c, const Gemm& g) { return c.t.flash_attention && g.role == OpRole::attn_core; }
constexpr double kFlashBackwardFlopRatio = 2.5;

// One GEMM's kernel, µs-level, without launch: what a profiler's matrix_operator_latency.csv reports.
inline double gemm_kernel_time_s(const Ctx& c, const Gemm& g) {
  if (is_flash_core(c, g)) return 2.0 * g.batch * g.m * g.n * g.k / (c.peak_flops * c.p->flash_attention_efficiency);
  return runs_fp8(c, g)
             ? gemm_kernel_s(c.peak_flops_linear, c.p->fp8_matmul_efficiency, c.p->matmul_half_dim, g.batch, g.m, g.n,
                             g.k)
             : gemm_kernel_s(c.peak_flops, c.p->matmul_efficiency, c.p->matmul_half_dim, g.batch, g.m, g.n, g.k);
}
// One call of a GEMM: its kernel plus one launch; on devices whose matrix units need their own tiled layout, plus
// one conversion kernel that reads and writes the 16-bit operands and output (2·2·(mk + kn + mn) bytes).
inline double gemm_call_s(const Ctx& c, const Gemm& g) {
  double t = gemm_kernel_time_s(c, g) + g.launches * c.p->kernel_launch_us * 1e-6;
  if (c.sys->gemm_layout_conversion) t += vector_time_s(c, 4 * g.batch * (g.m * g.k + g.k * g.n + g.m * g.n), 1);
  return t;
}
// A GEMM's time in the schedule. Forward: one call, plus (FP8) the input and weight casts. Backward: two calls
// of the same size (input and weight gradients), plus (FP8) the output-gradient cast; the flash-attention core
// 2.5x its forward.
struct GemmTime {
  double call, forward, backward;
};
inline GemmTime gemm_time(const Ctx& c, const Gemm& g) {
  GemmTime t;
  t.call = gemm_call_s(c, g);
  t.forward = t.call;
  t.backward = (is_flash_core(c, g) ? kFlashBackwardFlopRatio : 2.0) * t.call;
  if (runs_fp8(c, g)) {
    t.forward += vector_time_s(c, kFp8CastBytesPerElement * g.batch * (g.m * g.k + g.k * g.n), kFp8KernelsFwd);
    t.backward += vector_time_s(c, kFp8CastBytesPerElement * g.batch * g.m * g.n, kFp8KernelsBwd);
  }
  return t;
}

// Ring steps over n ranks moving `bytes` (the full buffer per rank) over one link (Thakur et al. 2005; NCCL's
// bus-bandwidth model). Across nodes (`tree`) all-reduce switches to NCCL's double binary tree when that has
// fewer latency steps (2·log2 n against 2(n-1)); its bandwidth term is the ring's.
inline double flat_collective_s(Prim prim, const LinkUse& l, double n, double bytes, bool tree = false) {
  if (n <= 1) return 0;
  double steps = 0, volume = 0;
  switch (prim) {
    case Prim::all_reduce:
      steps = tree ? std::min(2 * (n - 1), 2 * std::ceil(std::log2(n))) : 2 * (n - 1);
      volume = 2 * (n - 1) / n * bytes;
      break;
    case Prim::all_gather:
    case Prim::reduce_scatter:
    case Prim::all_to_all:
      steps = n - 1;
      volume = (n - 1) / n * bytes;
      break;
    case Prim::send_recv:
      steps = 1;
      volume = bytes;
      break;
  }
  return volume / l.bandwidth_bytes_per_s + steps * l.latency_s;
}

// A collective over a placed group, one kernel launch. Inside one NVLink domain: a ring on NVLink. Across nodes
// with one rank per node: a ring (or tree) over the rails. Otherwise NCCL's hierarchical algorithm: reduce-scatter
// inside the node, the inter-node step on 1/per_node of the buffer with every rank on its own rail, all-gather
// inside the node; all-to-all sends (per_node - 1)/n of the buffer over NVLink and the rest over the rails.
inline double collective_time_s(const Ctx& c, Prim prim, const GroupUse& gu, double bytes) {
  const double launch = c.p->kernel_launch_us * 1e-6;
  if (prim == Prim::send_recv) return flat_collective_s(prim, gu.nodes > 1 ? c.inter : c.intra, 2, bytes) + launch;
  if (gu.size <= 1) return 0;
  // NVLS all-reduce inside one NVSwitch domain: one send and one receive of the buffer, two switch round trips.
  const bool nvls = c.sys->nvlink_sharp && prim == Prim::all_reduce && gu.size > 2;
  if (gu.nodes <= 1 && nvls) return bytes / c.intra.bandwidth_bytes_per_s + 2 * c.intra.latency_s + launch;
  if (gu.nodes <= 1) return flat_collective_s(prim, c.intra, gu.size, bytes) + launch;
  if (gu.per_node <= 1) return flat_collective_s(prim, c.inter, gu.size, bytes, true) + launch;
  const double k = gu.per_node, n = gu.size;
  if (prim == Prim::all_to_all)
    return (k - 1) / n * bytes / c.intra.bandwidth_bytes_per_s + (n - k) / n * bytes / c.inter.bandwidth_bytes_per_s +
           (k - 1) * c.intra.latency_s + (gu.nodes - 1) * c.inter.latency_s + launch;
  const double inter = flat_collective_s(prim, c.inter, gu.nodes, bytes / k, true);
  // Hierarchical: intra-node reduce-scatter + all-gather around the inter-node step (NVLS: in the switch).
  const double intra = prim != Prim::all_reduce ? flat_collective_s(prim, c.intra, k, bytes)
                       : (c.sys->nvlink_sharp && k > 2)
                           ? bytes / c.intra.bandwidth_bytes_per_s + 2 * c.intra.latency_s
                           : 2 * flat_collective_s(Prim::reduce_scatter, c.intra, k, bytes);
  return intra + inter + launch;
}
inline double collective_time_s(const Ctx& c, Prim prim, Group g, double bytes) {
  return collective_time_s(c, prim, c.group(g), bytes);
}

// ---------------------------------------------------------------- C: execution representation
// Bytes moved per s x s score element by the unfused scale / mask / softmax (/ cast / dropout) chain of
// non-flash attention, forward and backward (counted from Megatron-LM's unfused path: fp16 scores read, fp32
// softmax written and read back, 16-bit probabilities written); fused softmax reads and writes 16-bit once.
constexpr double kScoreBytesFwdUnfused = 20, kScoreBytesBwdUnfused = 24;
constexpr double kScoreBytesFwdFused = 4, kScoreBytesBwdFused = 6;
// Dropout on the 16-bit attention probabilities (non-flash): read, write, 1-byte mask.
constexpr double kScoreDropoutBytes = 5;
// Cross-entropy bytes per logit element (vocab-parallel: cast, max, subtract, exp, sum, divide; backward).
constexpr double kLossBytesFwdUnfused = 40, kLossBytesBwdUnfused = 16;
constexpr double kLossBytesFwdFused = 12, kLossBytesBwdFused = 8;
// Kernels launched per layer forward besides GEMMs and collectives (norms, rotary, residuals, activation,
// softmax chain, copies); backward launches twice as many.
constexpr double kLayerKernelsUnfused = 24, kLayerKernelsFused = 12, kMoeExtraKernels = 16;
// Bytes an Adam step moves per locally owned parameter: fp32 grad read, master/m/v read+write, 16-bit
// param written, grad-norm read.
constexpr double kOptimizerBytesPerParam = 38;
// Bytes per logit element alive at the loss: 16-bit logits (2), fp32 softmax kept for backward (4), 16-bit
// logit gradient (2).
constexpr double kLogitBytesPerElement = 8;

// GEMMs of one transformer layer's forward pass for one micro-batch on one rank, in execution order.
template <class F>
void visit_layer_ops(const Ctx& c, bool moe, F&& f) {
  const Model& m = *c.m;
  const double S = c.tokens, h = c.h, t = c.tp;
  // With flash attention the score and PV products are one fused kernel that skips masked blocks (causal: half).
  const double causal = c.t.flash_attention ? 0.5 : 1.0;
  const double heads = c.b * c.a / t;
  if (m.is_mla()) {
    const double ql = static_cast<double>(m.q_lora_rank), kvl = static_cast<double>(m.kv_lora_rank);
    const double rope = static_cast<double>(m.qk_rope_head_dim), vd = static_cast<double>(m.v_head_dim);
    if (ql > 0) {
      f(Gemm{"q_down", OpRole::attn_in, 1, S, ql, h});
      f(Gemm{"q_up", OpRole::attn_in, 1, S, c.a * (c.d + rope) / t, ql, 1, RecomputeModule::mla_up_proj});
    } else {
      f(Gemm{"q", OpRole::attn_in, 1, S, c.a * (c.d + rope) / t, h});
    }
    f(Gemm{"kv_down", OpRole::attn_in, 1, S, kvl + rope, h});
    f(Gemm{"kv_up", OpRole::attn_in, 1, S, c.a * (c.d + vd) / t, kvl, 1, RecomputeModule::mla_up_proj});
    f(Gemm{"scores", OpRole::attn_core, heads, c.s_local, c.s * causal, c.d + rope, 1, RecomputeModule::core_attn});
    f(Gemm{"pv", OpRole::attn_core, heads, c.s_local, vd, c.s * causal, 1, RecomputeModule::core_attn});
    f(Gemm{"out", OpRole::attn_out, 1, S, h, c.a * vd / t});
  } else {
    f(Gemm{"qkv", OpRole::attn_in, 1, S, (c.a + 2 * c.g) * c.d / t, h});
    f(Gemm{"scores", OpRole::attn_core, heads, c.s_local, c.s * causal, c.d, 1, RecomputeModule::core_attn});
    f(Gemm{"pv", OpRole::attn_core, heads, c.s_local, c.d, c.s * causal, 1, RecomputeModule::core_attn});
    f(Gemm{"out", OpRole::attn_out, 1, S, h, c.a * c.d / t});
  }
  const double gate = m.is_gated() ? 2.0 : 1.0;
  if (!moe) {
    f(Gemm{"fc1", OpRole::mlp_in, 1, S, gate * c.f / t, h, 1, RecomputeModule::mlp});
    f(Gemm{"fc2", OpRole::mlp_out, 1, S, h, c.f / t, 1, RecomputeModule::mlp});
    return;
  }
  const double fm = static_cast<double>(m.moe_ffn_hidden_size);
  const double experts = static_cast<double>(m.num_experts), topk = static_cast<double>(m.experts_per_token);
  const double local_experts = experts / c.ep;
  // Tokens per local expert: each rank routes its own tokens (all S of them once gathered over TP) to experts on
  // ep ranks; the busiest expert gets moe_load_imbalance x the mean.
  const double rows = S * topk * c.ep / experts * c.t.moe_load_imbalance;
  f(Gemm{"router", OpRole::router, 1, S, experts, h, 1, RecomputeModule::moe});
  f(Gemm{"expert_fc1", OpRole::mlp_in, local_experts, rows, gate * fm / t, h, local_experts, RecomputeModule::moe});
  f(Gemm{"expert_fc2", OpRole::mlp_out, local_experts, rows, h, fm / t, local_experts, RecomputeModule::moe});
  if (m.num_shared_experts > 0) {
    const double fs = fm * static_cast<double>(m.num_shared_experts);
    f(Gemm{"shared_fc1", OpRole::mlp_in, 1, S, gate * fs / t, h, 1, RecomputeModule::shared_experts});
    f(Gemm{"shared_fc2", OpRole::mlp_out, 1, S, h, fs / t, 1, RecomputeModule::shared_experts});
  }
}

inline Gemm head_gemm(const Ctx& c) { return Gemm{"lm_head", OpRole::head, 1, c.tokens, c.vocab_padded / c.tp, c.h}; }

// A collective of the schedule. `fwd` / `bwd` are calls per forward / backward pass; `hide_fwd` / `hide_bwd`
// name the ops whose compute can hide it (OpRole::head = none: exposed).
struct Collective {
  Prim prim;
  Group group;
  double bytes;
  double fwd, bwd;
  OpRole hide_fwd = OpRole::head, hide_bwd = OpRole::head;
};

// Collectives of one transformer layer for one micro-batch, with Megatron-LM's overlap rules (Shoeybi et al. 2019;
// Korthikanti et al. 2022 §4.2.2; Megatron-LM's LinearWithGradAccumulationAndAsyncCommunication):
// - no SP: forward all-reduces after each row-parallel linear (exposed); backward all-reduces the input gradient
//   of each column-parallel linear while its weight gradient is computed (hidden under that GEMM);
// - SP: forward all-gathers before each column-parallel linear and reduce-scatters after each row-parallel one
//   (exposed); backward all-gathers the output gradient before each row-parallel linear (exposed), re-gathers the
//   input of each column-parallel linear under its input-gradient GEMM and reduce-scatters its input gradient
//   under its weight-gradient GEMM;
// - TP communication overlap (Transformer Engine userbuffers, NeMo's tp_comm_overlap; needs SP): every one of
//   those is pipelined with the linear it feeds or drains, hidden up to that GEMM's time.
// Ring attention for CP (K and V blocks passed cp-1 times, dK/dV returned in backward) hides under the attention
// core. Expert dispatch and combine are all-to-alls over EP of the rank's (SP-sharded) routed tokens.
template <class F>
void visit_layer_collectives(const Ctx& c, bool moe, F&& f) {
  const double act = c.tokens * c.h * 2;  // one 16-bit hidden-state tensor of the local tokens
  if (c.tp > 1) {
    const bool uo = c.r.sequence_parallel && c.t.tp_comm_overlap;
    const OpRole in_roles[2] = {OpRole::attn_in, OpRole::mlp_in}, out_roles[2] = {OpRole::attn_out, OpRole::mlp_out};
    for (int blk = 0; blk < 2; ++blk) {
      const OpRole in = in_roles[blk], out = out_roles[blk], none = OpRole::head;
      if (c.r.sequence_parallel) {
        f(Collective{Prim::all_gather, Group::tp, act, 1, 0, uo ? in : none, none});
        f(Collective{Prim::reduce_scatter, Group::tp, act, 1, 0, uo ? out : none, none});
        f(Collective{Prim::all_gather, Group::tp, act, 0, 1, none, uo ? out : none});
        f(Collective{Prim::all_gather, Group::tp, act, 0, 1, none, in});
        f(Collective{Prim::reduce_scatter, Group::tp, act, 0, 1, none, in});
      } else {
        f(Collective{Prim::all_reduce, Group::tp, act, 1, 0, none, none});
        f(Collective{Prim::all_reduce, Group::tp, act, 0, 1, none, in});
      }
    }
  }
  if (c.cp > 1) {
    const double kv_heads = c.m->is_mla() ? c.a : c.g;
    const double kv = 2 * c.tokens * kv_heads * c.d / c.tp * 2;
    f(Collective{Prim::send_recv, Group::cp, kv, c.cp - 1, 2 * (c.cp - 1), OpRole::attn_core, OpRole::attn_core});
  }
  if (moe && c.ep > 1) {
    const double routed = act * static_cast<double>(c.m->experts_per_token) / c.sp_div;
    f(Collective{Prim::all_to_all, Group::ep, routed, 2, 2});
  }
}

// Embedding (first stage) and LM head / loss (last stage) collectives for one micro-batch.
template <class F>
void visit_edge_collectives(const Ctx& c, bool first, bool last, F&& f) {
  const double act = c.tokens * c.h * 2;
  if (c.tp > 1 && first)
    f(Collective{c.r.sequence_parallel ? Prim::reduce_scatter : Prim::all_reduce, Group::tp, act, 1, 0});
  if (c.tp > 1 && last) {
    if (c.r.sequence_parallel) {
      f(Collective{Prim::all_gather, Group::tp, act, 1, 0});
      f(Collective{Prim::reduce_scatter, Group::tp, act, 0, 1});
    } else {
      f(Collective{Prim::all_reduce, Group::tp, act, 0, 1});
    }
    f(Collective{Prim::all_reduce, Group::tp, c.tokens * 4, 3, 0});  // max, sum, target logit
  }
}

// Pipeline send/receive of one micro-batch's boundary activation (and, in backward, its gradient), per chunk
// boundary. Megatron's scatter/gather optimisation (Narayanan et al. 2021 §4.1): each TP rank sends only its
// 1/t slice, and without SP the receiver all-gathers the slices over the TP group (NVLink). With SP the tensor is
// already sharded. `fwd` counts the send and the matching gather of one forward pass.
template <class F>
void visit_pipeline_collectives(const Ctx& c, F&& f) {
  if (c.pp <= 1) return;
  const double act = c.tokens * c.h * 2;
  const bool sliced = c.r.sequence_parallel || c.t.pipeline_scatter_gather;
  f(Collective{Prim::send_recv, Group::pp, sliced ? act / c.tp : act, 1, 1});
  if (sliced && !c.r.sequence_parallel && c.tp > 1) f(Collective{Prim::all_gather, Group::tp, act, 1, 1});
}

// Data-parallel gradient reduction and (distributed optimizer) parameter all-gather for one stage, once per
// iteration: dense parameters over dp·cp, expert parameters over the expert-data-parallel group.
// `grad` marks the gradient reduction (overlappable with backward), the rest gathers parameters.
// Bytes per parameter of the gradient buffers (and of their data-parallel reduction): fp32 with Megatron's
// --accumulate-allreduce-grads-in-fp32, else 16-bit.
inline double grad_bytes_per_param(const TrainingSettings& t) { return t.fp32_gradients ? 4.0 : 2.0; }
// Optimizer state per owned parameter for mixed-precision Adam (Megatron-LM theoretical_memory_usage.py: 12 bytes,
// the 18 of "2 + 4 + 12" less weights and gradients): the fp32 master copy (4), created with the optimizer, and
// the fp32 moments exp_avg / exp_avg_sq (4 + 4), created lazily by the first step that is applied. MindSpeed's
// --reuse-fp32-param keeps the 16-bit copy of the owned parameters inside the master copy: "sizeof(bfloat16) x
// parameters / DP" saved with the distributed optimizer (MindSpeed docs, reuse_fp32_param.md).
inline double optimizer_state_bytes_per_param(const TrainingSettings& t) {
  return 4.0 + (t.optimizer_moments_allocated ? 8.0 : 0.0) - (t.reuse_fp32_param ? 2.0 : 0.0);
}

struct DpCollective {
  Prim prim;
  Group group;
  double bytes;
  bool grad;
};
template <class F>
void visit_dp_collectives(const Ctx& c, double dense_params, double expert_params, F&& f) {
  const double gb = grad_bytes_per_param(c.t), pb = 2.0;  // parameters are gathered in 16 bits
  const std::pair<Group, double> parts[2] = {{Group::dp, dense_params}, {Group::edp, expert_params}};
  for (const auto& [g, params] : parts) {
    if (params <= 0 || c.group(g).size <= 1) continue;
    if (c.r.distributed_optimizer) {
      f(DpCollective{Prim::reduce_scatter, g, gb * params, true});
      f(DpCollective{Prim::all_gather, g, pb * params, false});
    } else {
      f(DpCollective{Prim::all_reduce, g, gb * params, true});
    }
  }
}

// Memory-bound bytes and kernel count of one layer's forward pass (backward: twice the bytes and kernels,
// plus its own score traffic).
struct VectorWork {
  double fwd_bytes, bwd_bytes, fwd_kernels, bwd_kernels;
  double score_fwd_bytes, score_bwd_bytes;  // the s x s part, separated for selective recompute
  // Forward bytes and kernels of the memory-bound work inside each --recompute-modules submodule (part of
  // fwd_bytes; the attention core's is score_fwd_bytes).
  std::array<double, kNumRecomputeModules> module_fwd_bytes{}, module_fwd_kernels{};
};
VectorWork layer_vector_work(const Ctx& c, bool moe);

}  // namespace lmsim::detail
