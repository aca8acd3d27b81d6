// lmsim/simulator/execution.hpp — internal: stages A–D of the simulator.
//
// A compile / B bind: `Ctx` holds the sharded dimensions of one rank (TP/CP/EP/SP applied, vocabulary padded)
// and the links each parallel group uses (intra- or inter-node, from the Megatron rank order).
// C execution representation: `visit_gemms`, `visit_collectives` enumerate the forward work of one transformer
// layer, of the embedding and of the LM head for one micro-batch; backward is derived from it.
// D cost estimators: `gemm_time_s`, `vector_time_s`, `collective_time_s`.
// Every formula lives here once; simulate(), the diagnostics and the memory model all call these.
#pragma once

#include <algorithm>
#include <cstdint>

#include "simulator/simulate.hpp"

namespace lmsim::detail {

enum class Prim { all_reduce, all_gather, reduce_scatter, all_to_all, send_recv };
enum class Group { tp, cp, ep, dp, pp, embedding };

struct LinkUse {
  double bandwidth_bytes_per_s;  // effective: nominal x fitted efficiency
  double latency_s;
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
  double sp_div;  // t when sequence parallel, else 1: divides work and activations outside the TP region
  double peak_flops, hbm_bw;
  LinkUse tp_link, cp_link, ep_link, dp_link, pp_link;
};

Ctx make_ctx(const Model& m, const Strategy& s, const System& sys, const TrainingSettings& t, const PlatformParams& p);

// ---------------------------------------------------------------- D: cost estimators
// GEMM kernel: FLOPs at a size-dependent efficiency, eff = e_max · d / (d + d_half) with d the smallest of
// m, n, k (thin problems under-fill the matrix units and are bandwidth-bound).
inline double gemm_kernel_s(double peak_flops, const PlatformParams& p, double batch, double m, double n, double k) {
  const double flops = 2.0 * batch * m * n * k;
  const double dmin = std::min({m, n, k});
  const double eff = p.matmul_efficiency * dmin / (dmin + p.matmul_half_dim);
  return flops / (peak_flops * eff);
}
// Memory-bound kernels: bytes over the fitted fraction of HBM bandwidth, plus their launches.
inline double vector_time_s(const Ctx& c, double bytes, double kernels) {
  return bytes / (c.hbm_bw * c.p->vector_bandwidth_efficiency) + kernels * c.p->kernel_launch_us * 1e-6;
}
// A GEMM in the schedule: its kernel plus one launch; on devices whose matrix units need their own tiled layout,
// plus one conversion kernel that reads and writes the 16-bit operands and output (2 · 2 · (mk + kn + mn) bytes).
inline double gemm_time_s(const Ctx& c, double batch, double m, double n, double k) {
  double t = gemm_kernel_s(c.peak_flops, *c.p, batch, m, n, k) + c.p->kernel_launch_us * 1e-6;
  if (c.sys->gemm_layout_conversion) t += vector_time_s(c, 4 * batch * (m * k + k * n + m * n), 1);
  return t;
}
// Ring collectives (Thakur et al. 2005; NCCL's bus-bandwidth model): `bytes` is the full buffer per rank
// (the gathered size for all-gather / reduce-scatter). One kernel launch each.
inline double collective_time_s(const Ctx& c, Prim prim, const LinkUse& l, double n, double bytes) {
  if (n <= 1 && prim != Prim::send_recv) return 0;
  double steps = 0, volume = 0;
  switch (prim) {
    case Prim::all_reduce:
      steps = 2 * (n - 1);
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
  return volume / l.bandwidth_bytes_per_s + steps * l.latency_s + c.p->kernel_launch_us * 1e-6;
}

// ---------------------------------------------------------------- C: execution representation
// Bytes moved per s x s score element by the unfused scale / mask / softmax (/ cast / dropout) chain of
// non-flash attention, forward and backward (counted from Megatron-LM's unfused path: fp16 scores read, fp32
// softmax written and read back, 16-bit probabilities written); fused softmax reads and writes 16-bit once.
constexpr double kScoreBytesFwdUnfused = 20, kScoreBytesBwdUnfused = 24;
constexpr double kScoreBytesFwdFused = 4, kScoreBytesBwdFused = 6;
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

struct Gemm {
  const char* name;
  double batch, m, n, k;
  double multiplicity;  // per forward pass of the layer
};

// GEMMs of one transformer layer's forward pass for one micro-batch on one rank.
template <class F>
void visit_layer_gemms(const Ctx& c, bool moe, F&& f) {
  const Model& m = *c.m;
  const double S = c.tokens, h = c.h, t = c.tp;
  // With flash attention the score and PV products are one fused kernel that skips masked blocks (causal: half).
  const double causal = c.t.flash_attention ? 0.5 : 1.0;
  const double heads = c.b * c.a / t;
  if (m.is_mla()) {
    const double ql = static_cast<double>(m.q_lora_rank), kvl = static_cast<double>(m.kv_lora_rank);
    const double rope = static_cast<double>(m.qk_rope_head_dim), vd = static_cast<double>(m.v_head_dim);
    if (ql > 0) {
      f(Gemm{"q_down", 1, S, ql, h, 1});
      f(Gemm{"q_up", 1, S, c.a * (c.d + rope) / t, ql, 1});
    } else {
      f(Gemm{"q", 1, S, c.a * (c.d + rope) / t, h, 1});
    }
    f(Gemm{"kv_down", 1, S, kvl + rope, h, 1});
    f(Gemm{"kv_up", 1, S, c.a * (c.d + vd) / t, kvl, 1});
    f(Gemm{"scores", heads, c.s_local, c.s * causal, c.d + rope, 1});
    f(Gemm{"pv", heads, c.s_local, vd, c.s * causal, 1});
    f(Gemm{"out", 1, S, h, c.a * vd / t, 1});
  } else {
    f(Gemm{"qkv", 1, S, (c.a + 2 * c.g) * c.d / t, h, 1});
    f(Gemm{"scores", heads, c.s_local, c.s * causal, c.d, 1});
    f(Gemm{"pv", heads, c.s_local, c.d, c.s * causal, 1});
    f(Gemm{"out", 1, S, h, c.a * c.d / t, 1});
  }
  const double gate = m.is_gated() ? 2.0 : 1.0;
  if (!moe) {
    f(Gemm{"fc1", 1, S, gate * c.f / t, h, 1});
    f(Gemm{"fc2", 1, S, h, c.f / t, 1});
    return;
  }
  const double fm = static_cast<double>(m.moe_ffn_hidden_size);
  const double experts = static_cast<double>(m.num_experts), topk = static_cast<double>(m.experts_per_token);
  const double local_experts = experts / c.ep;
  const double rows = S * topk * c.ep / experts * c.t.moe_load_imbalance;  // tokens per local expert
  f(Gemm{"router", 1, S, experts, h, 1});
  f(Gemm{"expert_fc1", local_experts, rows, gate * fm / t, h, 1});
  f(Gemm{"expert_fc2", local_experts, rows, h, fm / t, 1});
  if (m.num_shared_experts > 0) {
    const double fs = fm * static_cast<double>(m.num_shared_experts);
    f(Gemm{"shared_fc1", 1, S, gate * fs / t, h, 1});
    f(Gemm{"shared_fc2", 1, S, h, fs / t, 1});
  }
}

inline void visit_head_gemms(const Ctx& c, auto&& f) { f(Gemm{"lm_head", 1, c.tokens, c.vocab_padded / c.tp, c.h, 1}); }

struct Collective {
  Prim prim;
  Group group;
  double bytes;
  double fwd, bwd;  // calls per forward / backward pass
};

// Collectives of one transformer layer for one micro-batch (Megatron-LM tensor parallelism with or without
// sequence parallelism; ring attention for CP; all-to-all dispatch / combine for EP).
template <class F>
void visit_layer_collectives(const Ctx& c, bool moe, F&& f) {
  const double act = c.tokens * c.h * 2;  // one 16-bit hidden-state tensor of the local tokens
  if (c.tp > 1) {
    if (c.r.sequence_parallel) {
      f(Collective{Prim::all_gather, Group::tp, act, 2, 4});  // backward re-gathers inputs for weight grads
      f(Collective{Prim::reduce_scatter, Group::tp, act, 2, 2});
    } else {
      f(Collective{Prim::all_reduce, Group::tp, act, 2, 2});
    }
  }
  if (c.cp > 1) {  // K and V blocks of the local tokens passed cp-1 times; backward also returns dK, dV
    const double kv_heads = c.m->is_mla() ? c.a : c.g;
    const double kv = 2 * c.tokens * kv_heads * c.d / c.tp * 2;
    f(Collective{Prim::send_recv, Group::cp, kv, c.cp - 1, 2 * (c.cp - 1)});
  }
  if (moe && c.ep > 1) {
    const double routed = act * static_cast<double>(c.m->experts_per_token);
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

inline const LinkUse& link_of(const Ctx& c, Group g) {
  switch (g) {
    case Group::tp: return c.tp_link;
    case Group::cp: return c.cp_link;
    case Group::ep: return c.ep_link;
    case Group::dp: return c.dp_link;
    case Group::pp:
    case Group::embedding: return c.pp_link;
  }
  return c.tp_link;
}
inline double group_size(const Ctx& c, Group g) {
  switch (g) {
    case Group::tp: return c.tp;
    case Group::cp: return c.cp;
    case Group::ep: return c.ep;
    case Group::dp: return c.dp;
    case Group::pp: return 2;
    case Group::embedding: return 2;
  }
  return 1;
}

// Memory-bound bytes and kernel count of one layer's forward pass (backward: twice the bytes and kernels,
// plus its own score traffic).
struct VectorWork {
  double fwd_bytes, bwd_bytes, fwd_kernels, bwd_kernels;
  double score_fwd_bytes, score_bwd_bytes;  // the s x s part, separated for selective recompute
};
VectorWork layer_vector_work(const Ctx& c, bool moe);

}  // namespace lmsim::detail
