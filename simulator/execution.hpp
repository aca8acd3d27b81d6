// lmsim/simulator/execution.hpp — internal: stages A–D of the simulator.
//
// A compile / B bind: `Ctx` holds the sharded dimensions of one rank (TP/CP/EP/SP applied, vocabulary padded) and
// one table of parallel groups (`GroupUse`: size, how its ranks sit on nodes, the links it uses), built from the
// Megatron rank order.
// C execution representation: `visit_layer` lists the ops of one transformer layer for one micro-batch — GEMMs
// (with their role: which linear, the attention core, FP8 or not) and memory-bound work — each carrying its own
// costs: bytes, kernels, the activations it keeps and the recompute module that replays or frees it. Layer time,
// vector work, activation memory and recompute are folds over that one list. `visit_layer_collectives` lists the
// layer's collectives, each naming the op whose compute can hide it in forward and backward (Megatron-LM's
// overlap rules). Backward is derived from forward.
// D cost estimators: `gemm_time_s`, `vector_time_s`, `collective_time_s` (hierarchical over NVLink and rails).
// Every formula lives here once; simulate(), the diagnostics and the memory model all call these.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <utility>

#include "simulator/simulate.hpp"

namespace lmsim::detail {

// fused_all_to_all: the flex MoE dispatcher's deduplicating dispatch / combine (DeepEP, HybridEP); its `bytes` are
// the rank's tokens, each sent once per rank and node that holds one of its experts (fused_all_to_all_s).
enum class Prim { all_reduce, all_gather, reduce_scatter, all_to_all, send_recv, fused_all_to_all };
// The parallel groups a rank belongs to; `etp` shards the routed experts (tp unless set apart), `edp` is the
// expert-data-parallel group (tp·cp·dp / (ep·etp)) that reduces the expert weights' gradients.
// `cp` is the context-parallel group, or under a2a+p2p its inner Ulysses part, and `cp_ring` the ring over those
// parts (size 1 otherwise). `tp_ep` is the expert-TP x EP group the all-gather MoE dispatcher gathers over (size 1
// under the all-to-all one; the flex dispatcher's group too). `pp` is a pair of neighbouring stages, `embedding`
// the first and last stage, which both hold the word embedding when it is tied to the output layer or an MTP
// module needs it (Megatron-core's embedding group).
enum class Group { tp, cp, cp_ring, ep, etp, tp_ep, dp, edp, pp, embedding, amax, count_ };
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
// `intra_share`: the share of the device's intra-node bandwidth its ring gets (`ring_bandwidth_share`: 1 on a
// switch, less on direct links such as DGX-1's cube-mesh or the Ascend 910B server's full mesh). `p2p_share`: the
// share a point-to-point transfer between neighbouring members gets (the context-parallel ring's K/V blocks, the
// pipeline's activations): on a switch the whole port, on direct links only the links between that pair. Groups
// that send nothing point to point (tp, ep, dp, ...) carry their ring's share there, unread.
struct GroupUse {
  double size = 1, per_node = 1, nodes = 1;
  double intra_share = 1;
  double p2p_share = 1;
};
// The share of the device's intra-node bandwidth a primitive gets over the group: its pair's for a send/receive.
inline double link_share(const GroupUse& gu, Prim prim) {
  return prim == Prim::send_recv ? gu.p2p_share : gu.intra_share;
}

struct Ctx {
  const Model* m;
  const System* sys;
  const PlatformParams* p;
  ResolvedStrategy r;
  TrainingSettings t;
  // Sharded dimensions (doubles: they enter FLOP and byte formulas only).
  double b, s, s_local, tokens;  // micro-batch, full and per-CP-rank sequence, local tokens b*s_local
  double h, a, g, d, f, vocab_padded;
  double tp, cp, ep, etp, dp, pp, vpp;
  // The cp ranks' split: a Ulysses degree (heads) times a ring degree (sequence: s / cp_ring queries a rank);
  // p2p and allgather 1 x cp, a2a cp x 1, a2a+p2p ulysses_degree_in_cp x the rest.
  double cp_ulysses, cp_ring;
  double sp_div;             // t when sequence parallel, else 1: divides work and activations outside the TP region
  double peak_flops;         // 16-bit dense FLOP/s (the training precision, or bf16/fp16 under FP8)
  double peak_flops_linear;  // FLOP/s of the linear layers: FP8 peak under FP8 training (times the device's
                             // block-scaled share under fp8_recipe blockwise), FP4 peak times the device's NVFP4
                             // GEMM share under FP4, else peak_flops
  bool fp8;                  // Transformer Engine quantizes the linear layers: precision fp8 or fp4
  bool nvfp4;                // ... in NVFP4 (precision fp4)
  bool userbuffers;  // Transformer Engine's userbuffers overlap the TP collectives: tp > 1, SP and tp_comm_overlap
  double hbm_bw;
  LinkUse intra, inter;
  std::array<GroupUse, kNumGroups> groups;
  const GroupUse& group(Group g) const { return groups[static_cast<std::size_t>(g)]; }
};

Ctx make_ctx(const Model& m, const Strategy& s, const System& sys, const TrainingSettings& t, const PlatformParams& p);
// Ctx points at the model, system and θ: a temporary would dangle, so none binds.
Ctx make_ctx(const Model&&, const Strategy&, const System&, const TrainingSettings&, const PlatformParams&) = delete;
Ctx make_ctx(const Model&, const Strategy&, const System&&, const TrainingSettings&, const PlatformParams&) = delete;
Ctx make_ctx(const Model&, const Strategy&, const System&, const TrainingSettings&, const PlatformParams&&) = delete;

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
  // GroupedLinear, which runs one cuBLAS GEMM per expert (multi-stream), not one grouped kernel (1 where the
  // platform has one: System::grouped_gemm_kernel).
  double launches = 1;
  RecomputeModule module = RecomputeModule::none;  // the --recompute-modules submodule it belongs to
  bool expert = false;                             // a routed expert's weight: reduced over the expert-DP group
  // One of the four linear layers Transformer Engine gives userbuffers (qkv, proj, fc1, fc2: Megatron-core's
  // tp_comm_buffer_name), whose TP collectives tp_comm_overlap pipelines with the GEMM (userbuffers_split).
  bool userbuffers = false;
  bool adapter = false;  // a LoRA adapter's A or B: trainable, 16-bit (Megatron's own linear layers, outside TE)
};
// Whether a GEMM multiplies by a weight (its k x n matrix per batch entry, as sharded on this rank) or by
// activations (the attention core).
inline bool has_weight(OpRole r) { return r != OpRole::attn_core; }
// A norm's weights per element of its width: a scale (RMSNorm) or a scale and a bias (LayerNorm).
inline double norm_weights(const Model& m) { return m.norm == Norm::layernorm ? 2.0 : 1.0; }
// A learned position table's rows as the model states them (0 for a rotary model, or when the model leaves them to
// the run), and as a run's first stage keeps them: at least its sequence (Megatron-LM requires
// max_position_embeddings >= seq_length; NeMo's GPT recipes set them equal).
inline double learned_positions(const Model& m) {
  return m.is_rotary() ? 0.0 : static_cast<double>(m.max_position_embeddings);
}
inline double position_table_rows(const Ctx& c) {
  return c.m->is_rotary() ? 0.0 : std::max(learned_positions(*c.m), c.s);
}

// Transformer Engine FP8 (Micikevicius et al. 2022; TE's Linear / LayerNormLinear): only the linear layers run in
// FP8; attention BMMs, softmax, router and LM head stay 16-bit. Each FP8 GEMM casts its input with a fused
// cast-transpose (read 2 bytes, write the FP8 copy and its transpose: 4 bytes per element) and its weight likewise
// once per micro-batch; backward casts the output gradient the same way. Plus amax / scale updates. A grouped
// expert GEMM casts each expert's split with that expert's own quantizer (TE GroupedLinear's split_quantize runs
// one quantize per split for current and MX scaling; only delayed scaling has a fused multi-tensor kernel): its
// cast kernels are per launch.
constexpr double kFp8CastBytesPerElement = 4, kFp8KernelsFwd = 2, kFp8KernelsBwd = 1;
// Current (tensorwise) scaling's cast (TE Float8CurrentScalingQuantizer): an amax kernel reads the 16-bit input
// first (2 bytes per element) and a scale kernel turns it into the scale before the cast: three kernels a cast.
constexpr double kFp8AmaxReadBytesPerElement = 2, kFp8CurrentScalingKernelsPerCast = 3;

inline bool runs_fp8(const Ctx& c, const Gemm& g) { return c.fp8 && is_linear(g.role) && !g.adapter; }
// Under LoRA every base weight is frozen: no weight gradient (TE skips its GEMM when the weight needs none).
inline bool frozen(const Ctx& c, const Gemm& g) { return c.t.lora() && has_weight(g.role) && !g.adapter; }
// NVFP4 (precision fp4; TE NVFP4BlockScaling, "Pretraining Large Language Models with NVFP4", arXiv 2509.25149):
// 4-bit E2M1 values, packed two to a byte, with one E4M3 scale per 16 elements (per 16x16 block for weights) and
// one fp32 scale per tensor from its amax. Its casts are current scaling's in structure: an amax pass over the
// 16-bit input (over the input and its random-Hadamard transform, one kernel), the TP amax all-reduce of a
// sequence-parallel input or output gradient, then the cast writing the rowwise copy and the Hadamard-transformed
// columnwise one (stochastic rounding for gradients). It writes fewer bytes but computes more (the 16x16 Hadamard
// products, random numbers): Transformer Engine's GEMM profiling example (docs/examples/gemm_profiling, B300, a 5B
// model's linear layers, autocast minus pre-quantized per-layer times) puts NVFP4's quantization at 2.689 ms
// against current scaling's 2.335 ms, so an NVFP4 cast is taken as current scaling's cast times their ratio.
constexpr double kNvfp4ValueBytes = 0.5, kNvfp4BlockElements = 16, kNvfp4CastVsCurrentScaling = 2.689 / 2.335;
// An NVFP4 element with its share of the block scale, wherever one is kept or moved.
constexpr double kNvfp4BytesPerElement = kNvfp4ValueBytes + 1 / kNvfp4BlockElements;
// The recipes whose every cast reads its input for the amax first and whose sequence-parallel casts all-reduce it
// over TP (TE's quantizers with amax_reduction_group: Float8CurrentScalingQuantizer, NVFP4Quantizer).
inline bool amax_before_cast(const Ctx& c) { return c.nvfp4 || (c.fp8 && c.t.fp8_recipe == Fp8Recipe::tensorwise); }
// The recipes that keep scales per block, moved with their data.
inline bool block_scaled(const Ctx& c) {
  return c.nvfp4 || (c.fp8 && (c.t.fp8_recipe == Fp8Recipe::mxfp8 || c.t.fp8_recipe == Fp8Recipe::blockwise));
}
// An FP8 tensor as it crosses a link: one byte an element, and the block-scaled recipes' scales beside the data
// (TE's _all_gather_mxfp8: one 8-bit scale per 32; _start_all_gather_fp8_blockwise: one fp32 scale per 1x128 tile);
// an NVFP4 one half a byte an element and one 8-bit scale per 16 (_all_gather_nvfp4).
constexpr double kMxfp8BlockElements = 32, kFp8BlockwiseTileElements = 128, kFp8BlockwiseScaleBytes = 4;
inline double fp8_gather_bytes_per_element(const Ctx& c) {
  if (c.nvfp4) return kNvfp4BytesPerElement;
  switch (c.t.fp8_recipe) {
    case Fp8Recipe::mxfp8: return 1 + 1 / kMxfp8BlockElements;
    case Fp8Recipe::blockwise: return 1 + kFp8BlockwiseScaleBytes / kFp8BlockwiseTileElements;
    case Fp8Recipe::delayed:
    case Fp8Recipe::tensorwise: break;
  }
  return 1;
}
// Copies of a sequence-parallel output gradient the TP all-gather carries: a block-scaled recipe gathers its rowwise
// and columnwise copies (dgrad and wgrad; see Fp8Recipe), unless userbuffers gather it (one usage at a time); a
// per-tensor one gathers the rowwise copy and transposes it after.
inline double fp8_grad_output_gather_copies(const Ctx& c, bool userbuffers) {
  return block_scaled(c) && !userbuffers ? 2.0 : 1.0;
}

// Flash attention (Dao 2023): the scores and scores·V products are one fused kernel, whose throughput is its own
// fraction of the 16-bit peak (it does not follow the GEMM shape rule); its backward recomputes the scores, five
// matrix products against the forward's two: 2.5x the forward's FLOPs.
inline bool is_flash_core(const Ctx& c, const Gemm& g) { return c.t.flash_attention && g.role == OpRole::attn_core; }
constexpr double kFlashBackwardFlopRatio = 2.5;
// Attention dropout inside the flash kernel: no mask is stored, each pass draws its Philox random numbers per score
// element in the kernel (the backward draws them again), integer work beside the matrix units that lowers the
// kernel's throughput. Measured with cuDNN and FlashAttention-4 on GB200 (bf16, p = 0.125, head dim 64-128, 1K-32K
// tokens; Dao-AILab/flash-attention pull request 2597, May 2026): forward 75-85 %, backward 60-70 % of the
// dropout-free throughput, roughly constant across sequence lengths. The mid-points, as fractions of it:
constexpr double kFlashDropoutForwardThroughput = 0.80, kFlashDropoutBackwardThroughput = 0.65;
// Transformer Engine's default pipelined overlap (`module/base.py`, initialize_ub): num_splits 4, num_sm 16.
constexpr double kPipelineOverlapSplits = 4, kPipelineOverlapSms = 16;

// The flash kernel's efficiency at sequence length L per call: an asymptote reached as L grows past the
// half-length, the way the FlashAttention-3 paper's (Shah et al. 2024) throughput curves rise from 1K to 16K
// tokens. Half-length 0: constant efficiency.
// FlashAttention-2 (AttentionBackend::flash) at its measured fraction of that kernel's throughput.
inline double flash_efficiency(const Ctx& c, double L) {
  const double backend = c.t.attention_backend == AttentionBackend::flash ? c.sys->flash_attention_2_throughput : 1.0;
  return backend * c.p->flash_attention_efficiency * L / (L + c.p->flash_attention_half_seq);
}
// The tokens one attention call sees per sequence: the sequence, or under packed documents (document_tokens) one
// document, which the variable-length kernel attends on its own (and context parallelism splits as it splits a
// sequence).
inline double attention_span(const Ctx& c) {
  const double doc = static_cast<double>(c.t.document_tokens);
  return doc > 0 && doc < c.s ? doc : c.s;
}
// The share of the sequence's s x s query-key square that attention computes before the causal half: the model's
// windows, and under packed documents the documents' own squares (each windowed alike), as chunked attention is.
inline double attended_pair_fraction(const Ctx& c) {
  const std::int64_t seq = static_cast<std::int64_t>(c.s), doc = c.t.document_tokens;
  if (doc <= 0 || doc >= seq) return c.m->attention_window_fraction(seq);
  const double n = static_cast<double>(seq / doc), L = static_cast<double>(doc), r = static_cast<double>(seq % doc);
  return (n * L * L * c.m->attention_window_fraction(doc) +
          r * r * (seq % doc > 0 ? c.m->attention_window_fraction(seq % doc) : 0.0)) /
         (c.s * c.s);
}
// The attention core's seconds per FLOP at peak, averaged over its kernel calls (1 / efficiency). Without CP one
// call sees the whole sequence. Transformer Engine's P2P context parallelism (causal, load-balanced: a rank holds
// chunks r and 2cp-1-r) runs one kernel per ring step, each 1/cp of the rank's attention FLOPs: step 0 the
// causal "diagonal" over the local sequence; every later step a "lower-triangle" (the local queries against half
// the received keys) or "upper-triangle" (half the queries against all of them) block, one side half the local
// sequence (TE `dot_product_attention/context_parallel.py`).
// All-to-all context parallelism (Ulysses) runs one call over the whole sequence for a/(t·cp) heads; a2a+p2p
// runs the ring's steps over the s/cp_ring queries its Ulysses exchange gathers; the K/V all-gather runs one call
// per local half-chunk, each of s/(2cp) queries.
inline double flash_inverse_efficiency(const Ctx& c) {
  const double span = attention_span(c);
  if (c.cp > 1 && c.r.cp_comm_type == CpCommType::allgather) return 1 / flash_efficiency(c, span / c.cp / 2);
  const double L = span / c.cp_ring, steps = c.cp_ring;
  return (1 / flash_efficiency(c, L) + (steps - 1) / flash_efficiency(c, L / 2)) / steps;
}
// Ulysses scatters each tensor's heads over the cp ranks, so a rank's KV heads (g/t) must split cp ways; where
// they do not, K and V are repeated by the smallest factor that makes them (with g/t a multiple of cp the factor
// is 1). MindSpeed-LLM's --kv-head-repeat-before-uly-alltoall repeats them to every query head (a/g) instead.
inline double ulysses_kv_repeat(const Ctx& c) {
  if (c.cp_ulysses <= 1 || c.m->is_mla()) return 1;
  if (c.t.kv_head_repeat_before_uly_alltoall) return c.a / c.g;
  const auto kv = static_cast<std::int64_t>(c.g / c.tp), cp = static_cast<std::int64_t>(c.cp_ulysses);
  std::int64_t a = kv, b = cp;
  while (b != 0) a = std::exchange(b, a % b);  // gcd(kv, cp)
  return static_cast<double>(cp / std::max<std::int64_t>(a, 1));
}

// One GEMM's kernel, µs-level, without launch: what a profiler's matrix_operator_latency.csv reports.
inline double gemm_kernel_time_s(const Ctx& c, const Gemm& g) {
  if (is_flash_core(c, g)) return 2.0 * g.batch * g.m * g.n * g.k * flash_inverse_efficiency(c) / c.peak_flops;
  return runs_fp8(c, g)
             ? gemm_kernel_s(c.peak_flops_linear, c.p->fp8_matmul_efficiency, c.p->matmul_half_dim, g.batch, g.m, g.n,
                             g.k)
             : gemm_kernel_s(c.peak_flops, c.p->matmul_efficiency, c.p->matmul_half_dim, g.batch, g.m, g.n, g.k);
}
// One call of a GEMM: its kernel plus one launch; on devices whose matrix units need their own tiled layout, plus
// one conversion kernel that reads and writes the 16-bit operands and output (2·2·(mk + kn + mn) bytes). Not for
// the flash-attention core: the fused kernel (Ascend's npu_fusion_attention, which MindSpeed runs) takes Q, K and V
// in their sequence-major layout and never writes the s x s scores a conversion would pass through.
inline double gemm_call_s(const Ctx& c, const Gemm& g) {
  double t = gemm_kernel_time_s(c, g) + g.launches * c.p->kernel_launch_us * 1e-6;
  if (c.sys->gemm_layout_conversion && !is_flash_core(c, g))
    t += vector_time_s(c, 4 * g.batch * (g.m * g.k + g.k * g.n + g.m * g.n), 1);
  return t;
}
// Transformer Engine's userbuffers TP overlap (tp_comm_overlap, with SP; TE `module/base.py` initialize_ub and
// NeMo's `recipes/tp_overlap_configs/userbuffers.py`) splits the GEMMs it overlaps along their rows:
// - the all-gather feeding a column-parallel linear's forward (qkv, fc1) and the output-gradient all-gather feeding
//   a row-parallel linear's input-gradient GEMM (proj, fc2) run as a ring exchange, one GEMM per slice received:
//   tp calls of 1/tp of the rows, the copies on the copy engines;
// - the reduce-scatter after a row-parallel forward (proj, fc2) runs as a ring exchange too in the FP8 recipes,
//   its reduction kernel on 1 SM the GEMMs leave free; elsewhere as TE's default pipeline, 4 splits whose
//   reduce-scatter kernels take 16 SMs the GEMMs leave free (`set_sm_margin`);
// - a column-parallel linear's backward overlaps its collectives in bulk, and weight gradients run whole.
// Thinner splits run at the lower efficiency of their shape (gemm_kernel_s), each with its own launch; a margin of
// m SMs slows each split by sm_count / (sm_count - m).
struct UserbuffersSplit {
  double splits = 1, sm_margin = 0;
  bool whole() const { return splits == 1 && sm_margin == 0; }
};
inline UserbuffersSplit userbuffers_split(const Ctx& c, const Gemm& g, bool input_grad) {
  if (!g.userbuffers || !c.userbuffers) return {};
  const bool row_parallel = g.role == OpRole::attn_out || g.role == OpRole::mlp_out;
  if (input_grad) return row_parallel ? UserbuffersSplit{c.tp, 0} : UserbuffersSplit{};
  if (!row_parallel) return {c.tp, 0};
  return runs_fp8(c, g) ? UserbuffersSplit{c.tp, 1} : UserbuffersSplit{kPipelineOverlapSplits, kPipelineOverlapSms};
}
inline double gemm_split_call_s(const Ctx& c, Gemm g, UserbuffersSplit u) {
  g.m /= u.splits;
  const double sms = c.sys->sm_count;
  const double slowdown = sms > u.sm_margin ? sms / (sms - u.sm_margin) : 1.0;
  return u.splits * (gemm_call_s(c, g) + (slowdown - 1) * gemm_kernel_time_s(c, g));
}
// The kernels one GEMM runs per micro-batch, pass by pass: the forward at userbuffers' forward split; the input
// gradient at its backward split and the weight gradient whole, each the forward's size; the flash-attention
// core's backward (dQ, dK, dV: input gradients only) as one fused kernel kFlashBackwardFlopRatio times its
// forward. f(pass, split, scale) runs `scale` times the calls of `split`. gemm_time sums these passes and
// gemm_diagnostics lists them, so both see one structure.
enum class GemmPass { forward, input_grad, weight_grad };
template <class F>
inline void visit_gemm_calls(const Ctx& c, const Gemm& g, F&& f) {
  if (is_flash_core(c, g)) {  // with dropout, each pass at its lower throughput (launch included: µs against ms)
    f(GemmPass::forward, UserbuffersSplit{}, c.t.attention_dropout ? 1 / kFlashDropoutForwardThroughput : 1.0);
    return f(GemmPass::input_grad, UserbuffersSplit{},
             kFlashBackwardFlopRatio / (c.t.attention_dropout ? kFlashDropoutBackwardThroughput : 1.0));
  }
  f(GemmPass::forward, userbuffers_split(c, g, false), 1.0);
  f(GemmPass::input_grad, userbuffers_split(c, g, true), 1.0);
  if (!frozen(c, g)) f(GemmPass::weight_grad, UserbuffersSplit{}, 1.0);
}
// A GEMM's time in the schedule: its passes (visit_gemm_calls), plus (FP8) the input and weight casts in the
// forward and the output-gradient cast in the backward. `call` and `input_grad` are what can hide a TP collective
// (forward; backward).
struct GemmTime {
  double call = 0, input_grad = 0, forward = 0, backward = 0;
};
inline GemmTime gemm_time(const Ctx& c, const Gemm& g) {
  GemmTime t;
  const double whole = gemm_call_s(c, g);
  double weight_grad = 0;
  visit_gemm_calls(c, g, [&](GemmPass pass, UserbuffersSplit u, double scale) {
    const double s = scale * (u.whole() ? whole : gemm_split_call_s(c, g, u));
    switch (pass) {
      case GemmPass::forward: t.call = s; break;
      case GemmPass::input_grad: t.input_grad = s; break;
      case GemmPass::weight_grad: weight_grad = s; break;
    }
  });
  t.forward = t.call;
  t.backward = t.input_grad + weight_grad;
  if (runs_fp8(c, g)) {
    // The weight's FP8 copy is cast on an iteration's first micro-batch and cached for the others (Megatron-core
    // sets TE's is_first_microbatch each iteration): amortised over the micro-batches.
    const double mbs = std::max<double>(1.0, static_cast<double>(c.r.num_micro_batches));
    const bool current = amax_before_cast(c);
    const double bytes = kFp8CastBytesPerElement + (current ? kFp8AmaxReadBytesPerElement : 0);
    const double kernels = current ? kFp8CurrentScalingKernelsPerCast : 1;
    const double nvfp4 = c.nvfp4 ? kNvfp4CastVsCurrentScaling : 1.0;
    t.forward += nvfp4 * vector_time_s(c, bytes * g.batch * (g.m * g.k + g.k * g.n / mbs),
                                       kernels * kFp8KernelsFwd * g.launches);
    t.backward += nvfp4 * vector_time_s(c, bytes * g.batch * g.m * g.n, kernels * kFp8KernelsBwd * g.launches);
  }
  return t;
}

// NCCL's protocols as its tuning model states them (NCCL src/graph/tuning.cc, ncclTopoTuneModel, ring): the share
// of the bus bandwidth that carries data (LL128 120 of each 128 bytes, 0.92; LL 4 of each 8, a flag beside each
// word) and the latency of a step over NVLink and over the network (hwLat, µs). A protocol's step takes the
// platform's own (fitted) step latency scaled by its hwLat over Simple's. NCCL runs, per call, the protocol its
// model times fastest: Simple for large buffers, LL128 and LL for smaller ones. Taken here as the fastest under
// lmsim's timing; picking by NCCL's own constants instead (base latencies 8.4 / 14 / 6.6 µs) put the V100 fit's
// leave-one-model-out at 3.05 % (2.48 % so). Point-to-point sends (the pipeline's activations, the all-to-all's
// per-peer chunks) use LL up to NCCL_P2P_LL_THRESHOLD (16 KiB) and Simple above.
constexpr double kSimpleNvlinkStepUs = 3.4, kSimpleNetStepUs = 14.0;  // hwLat, ring, Simple
struct Protocol {
  const char* name;
  // Per byte against Simple (1 / the bandwidth share), per NVLink step and per network step against Simple's.
  double transfer_factor, nvlink_step_factor, net_step_factor;
  constexpr Protocol(const char* n, double bandwidth_share, double nvlink_step_us, double net_step_us)
      : name(n),
        transfer_factor(1 / bandwidth_share),
        nvlink_step_factor(nvlink_step_us / kSimpleNvlinkStepUs),
        net_step_factor(net_step_us / kSimpleNetStepUs) {}
};
constexpr Protocol kSimple{"simple", 1.0, kSimpleNvlinkStepUs, kSimpleNetStepUs}, kLl128{"ll128", 0.92, 1.9, 4.0},
    kLl{"ll", 0.5, 0.6, 2.7};
constexpr double kP2pLlThresholdBytes = 16384;

// A collective under Simple, split into what a protocol changes: the transfer at link bandwidth, and its latency
// steps inside the node and across it.
struct CollectiveCost {
  double transfer_s = 0, intra_steps = 0, inter_steps = 0;
  // The time it takes under `p` with per-step latencies `intra_s` and `inter_s` (Simple's).
  double under(const Protocol& p, double intra_s, double inter_s) const {
    return transfer_s * p.transfer_factor + intra_steps * intra_s * p.nvlink_step_factor +
           inter_steps * inter_s * p.net_step_factor;
  }
  CollectiveCost& operator+=(const CollectiveCost& o) {
    transfer_s += o.transfer_s;
    intra_steps += o.intra_steps;
    inter_steps += o.inter_steps;
    return *this;
  }
};

// Ring steps over n ranks moving `bytes` (the full buffer per rank) at `bandwidth` (Thakur et al. 2005; NCCL's
// bus-bandwidth model), `inter` on the network. Across nodes (`tree`) all-reduce switches to NCCL's double binary
// tree when that has fewer latency steps (2·log2 n against 2(n-1)); its bandwidth term is the ring's.
inline CollectiveCost ring_cost(Prim prim, double bandwidth, double n, double bytes, bool inter, bool tree = false) {
  if (n <= 1) return {};
  double steps = 0, volume = 0;
  switch (prim) {
    case Prim::all_reduce:
      steps = tree ? std::min(2 * (n - 1), 2 * std::ceil(std::log2(n))) : 2 * (n - 1);
      volume = 2 * (n - 1) / n * bytes;
      break;
    case Prim::all_gather:
    case Prim::reduce_scatter:
    case Prim::all_to_all:
    case Prim::fused_all_to_all:  // (timed by fused_all_to_all_s; as an all-to-all of the buffer if ever here)
      steps = n - 1;
      volume = (n - 1) / n * bytes;
      break;
    case Prim::send_recv:
      steps = 1;
      volume = bytes;
      break;
  }
  return {volume / bandwidth, inter ? 0.0 : steps, inter ? steps : 0.0};
}

// The share of bins holding `bin_experts` experts each (the ranks or the nodes of a dispatch group) that one
// token's experts_per_token experts reach. Routing is taken as uniform: Megatron-Bridge's performance runs
// force-balance it (Megatron-core's moe_router_force_load_balancing draws random logits), and balanced routing is
// what the auxiliary losses aim at. Group-limited routing (Megatron-core group_limited_topk, DeepSeek-V3's
// node-limited routing) puts a token's experts in group_topk of the groups, topk / group_topk in each.
inline double expert_bin_reach(const Model& m, double bin_experts) {
  const double experts = static_cast<double>(m.num_experts), topk = static_cast<double>(m.experts_per_token);
  // P(none of `draws` experts drawn without replacement from `pool` lies among `in_bin` of them).
  const auto miss = [](double pool, double in_bin, double draws) {
    double p = 1;
    for (double i = 0; i < draws && p > 0; ++i) p *= std::max(0.0, (pool - in_bin - i) / (pool - i));
    return p;
  };
  const double groups = static_cast<double>(m.moe_router_num_groups),
               chosen = static_cast<double>(m.moe_router_group_topk);
  if (groups > 1) {
    const double per_group = experts / groups;
    // A bin of whole groups is reached when one of its groups is chosen (each chosen group gets experts).
    if (bin_experts >= per_group && std::fmod(bin_experts, per_group) == 0)
      return 1 - miss(groups, bin_experts / per_group, chosen);
    // A bin inside a group: its group chosen, then one of that group's topk / group_topk experts in the bin.
    if (bin_experts < per_group && std::fmod(per_group, bin_experts) == 0)
      return chosen / groups * (1 - miss(per_group, bin_experts, topk / chosen));
  }
  return 1 - miss(experts, bin_experts, topk);
}

// Padded to capacity (--moe-pad-expert-input-to-capacity, which needs a capacity factor): static shapes.
inline bool moe_padded(const TrainingSettings& t) {
  return t.moe_expert_capacity_factor > 0 && t.moe_pad_expert_input_to_capacity;
}
// The busiest expert's rows as a multiple of the mean routed to it: moe_load_imbalance dropless; capped at the
// capacity factor with token dropping (Megatron-core --moe-expert-capacity-factor), exactly it when padded to
// capacity (--moe-pad-expert-input-to-capacity).
inline double moe_expert_share(const TrainingSettings& t) {
  const double cf = t.moe_expert_capacity_factor;
  if (cf <= 0) return t.moe_load_imbalance;
  return moe_padded(t) ? cf : std::min(t.moe_load_imbalance, cf);
}
// The rows a rank permutes and sends, as a multiple of its routed tokens: c when padded to capacity (the padding
// travels), else 1 (dropped tokens of a busy expert are a small share, not counted).
inline double moe_sent_share(const TrainingSettings& t) { return moe_padded(t) ? t.moe_expert_capacity_factor : 1.0; }

// DeepEP's (and HybridEP's) dispatch or combine over the expert-TP x EP group `gu` of a rank's `bytes` of tokens
// (Megatron-core MoEFlexTokenDispatcher; DeepSeek-AI DeepEP, "normal" kernels). A token goes once to every rank
// holding one of its experts (all etp ranks of a split expert), not once per expert as the all-to-all dispatcher
// sends it; across nodes once to every other node holding one, over the rail to the rank of the same local index,
// which forwards it over NVLink to the others there. The network and NVLink legs are pipelined in one kernel: the
// slower one counts. Combine sends the experts' outputs back the same way, summed at the forwarding rank.
inline double fused_all_to_all_s(const Ctx& c, const GroupUse& gu, double bytes) {
  if (gu.size <= 1) return 0;
  const double ep = gu.size / c.etp, per_rank = static_cast<double>(c.m->num_experts) / ep;
  const double rank_reach = expert_bin_reach(*c.m, per_rank);
  // Ranks receiving the token, less those it reaches without NVLink: itself and each node's forwarding rank.
  const double nvlink_rows = std::max(0.0, c.etp * ep * rank_reach - gu.nodes * rank_reach);
  const double intra_bw = c.intra.bandwidth_bytes_per_s * gu.intra_share;
  double legs = nvlink_rows * bytes / intra_bw, latency = c.intra.latency_s;
  if (gu.nodes > 1) {
    // A node holds per_node / etp EP ranks' experts (one EP rank's when expert TP spans nodes).
    const double node_reach = expert_bin_reach(*c.m, per_rank * std::max(1.0, gu.per_node / c.etp));
    legs = std::max(legs, (gu.nodes - 1) * node_reach * bytes / c.inter.bandwidth_bytes_per_s);
    latency += c.inter.latency_s;
  }
  return legs + latency + c.p->kernel_launch_us * 1e-6;
}

// A collective over a placed group under Simple, without its launch. Inside one NVLink domain: a ring on NVLink.
// Across nodes with one rank per node: a ring (or tree) over the rails. Otherwise NCCL's hierarchical algorithm:
// reduce-scatter inside the node, the inter-node step on 1/per_node of the buffer with every rank on its own rail,
// all-gather inside the node; all-to-all sends (per_node - 1)/n of the buffer over NVLink and the rest over the rails.
inline CollectiveCost collective_cost(const Ctx& c, Prim prim, const GroupUse& gu, double bytes) {
  const double intra = c.intra.bandwidth_bytes_per_s * link_share(gu, prim), net = c.inter.bandwidth_bytes_per_s;
  if (prim == Prim::send_recv)
    return gu.nodes > 1 ? ring_cost(prim, net, 2, bytes, true) : ring_cost(prim, intra, 2, bytes, false);
  if (gu.nodes <= 1) return ring_cost(prim, intra, gu.size, bytes, false);
  if (gu.per_node <= 1) return ring_cost(prim, net, gu.size, bytes, true, true);
  const double k = gu.per_node, n = gu.size;
  if (prim == Prim::all_to_all) return {(k - 1) / n * bytes / intra + (n - k) / n * bytes / net, k - 1, gu.nodes - 1};
  // Hierarchical: intra-node reduce-scatter + all-gather around the inter-node step.
  CollectiveCost cost = ring_cost(prim, net, gu.nodes, bytes / k, true, true);
  const CollectiveCost in_node =
      ring_cost(prim == Prim::all_reduce ? Prim::reduce_scatter : prim, intra, k, bytes, false);
  cost += in_node;
  if (prim == Prim::all_reduce) cost += in_node;
  return cost;
}

// A collective over a placed group, one kernel launch: the fastest protocol NCCL offers for it (Simple alone where
// the system's library has no others), or NVLS's in-switch all-reduce where that is faster; `protocol` names it.
struct CollectiveTiming {
  double s;
  const char* protocol;
};
inline CollectiveTiming collective_timing(const Ctx& c, Prim prim, const GroupUse& gu, double bytes) {
  if (prim == Prim::fused_all_to_all) return {fused_all_to_all_s(c, gu, bytes), "fused"};
  if (prim != Prim::send_recv && gu.size <= 1) return {0.0, "none"};
  const double launch = c.p->kernel_launch_us * 1e-6;
  const CollectiveCost cost = collective_cost(c, prim, gu, bytes);
  const double intra_s = c.intra.latency_s, inter_s = c.inter.latency_s;
  const Protocol* pick = &kSimple;
  double s = cost.under(kSimple, intra_s, inter_s);
  if (c.sys->nccl_protocols && (prim == Prim::send_recv || prim == Prim::all_to_all)) {
    const double per_peer = prim == Prim::send_recv ? bytes : bytes / gu.size;
    if (per_peer <= kP2pLlThresholdBytes) pick = &kLl, s = cost.under(kLl, intra_s, inter_s);
  } else if (c.sys->nccl_protocols) {
    for (const Protocol* p : {&kLl128, &kLl})
      if (const double t = cost.under(*p, intra_s, inter_s); t < s) pick = p, s = t;
  }
  CollectiveTiming best{s + launch, pick->name};
  // NVLS (NVLink SHARP, Simple only): the all-reduce inside the node in the switch, one send and one receive of
  // the buffer and two switch round trips, around the ring's inter-node step on 1/per_node of it.
  if (c.sys->nvlink_sharp && c.t.nccl_nvls_enable && prim == Prim::all_reduce && gu.per_node > 2) {
    const double in_switch = bytes / (c.intra.bandwidth_bytes_per_s * gu.intra_share) + 2 * c.intra.latency_s;
    const CollectiveCost inter =
        ring_cost(prim, c.inter.bandwidth_bytes_per_s, gu.nodes, bytes / gu.per_node, true, true);
    const double nvls = in_switch + inter.under(kSimple, intra_s, inter_s) + launch;
    if (nvls < best.s) best = {nvls, "nvls"};
  }
  return best;
}
inline double collective_time_s(const Ctx& c, Prim prim, const GroupUse& gu, double bytes) {
  return collective_timing(c, prim, gu, bytes).s;
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
// Dropout on the 16-bit attention probabilities (non-flash): read, write, 1-byte mask. What it keeps is in θ's
// attention_score_bytes, fitted or preset for the stack's softmax and dropout (see PlatformParams).
constexpr double kScoreDropoutBytes = 5;
// Cross-entropy bytes per logit element. Megatron's vocab-parallel cross entropy (tensor_parallel/cross_entropy.py,
// PyTorch ops): the fp32 cast (2 + 4), max (4), in-place subtract (8), exp (8), sum (4), divide (8); backward the
// in-place scaling of the kept softmax (8) and the cast back (4 + 2). Transformer Engine's fused kernel
// (te_cross_entropy) reads the 16-bit logits and writes their gradient.
constexpr double kLossBytesFwdUnfused = 40, kLossBytesBwdUnfused = 16;
constexpr double kLossBytesFwdFused = 12, kLossBytesBwdFused = 8;
// Kernels launched per layer forward besides GEMMs and collectives (norms, rotary, residuals, activation,
// softmax chain, copies); backward launches twice as many.
constexpr double kLayerKernelsUnfused = 24, kLayerKernelsFused = 12, kMoeExtraKernels = 16;
// Bytes per logit element alive at the loss. Megatron's vocab-parallel cross entropy: 16-bit logits (2), the fp32
// softmax it keeps for backward (4), the 16-bit logit gradient (2). Transformer Engine's fused cross entropy
// (transformer_engine/pytorch/cross_entropy.py) keeps the 16-bit logits and writes the gradient into them (2).
constexpr double kLogitBytesPerElement = 8, kLogitBytesPerElementTe = 2;
// Final-logit soft-capping (Gemma-2; MindSpeed-LLM's output_logit_softcapping): divide, tanh, multiply, three
// 16-bit elementwise kernels over the logits (read and write each: 12 bytes per element); backward the multiply's
// and the divide's gradients (4 each) and tanh's (its kept output and the gradient read, one written: 6). The
// tanh output is what it keeps: 2 bytes per logit element more alive at the loss.
constexpr double kSoftcapBytesFwd = 12, kSoftcapBytesBwd = 14, kSoftcapKernels = 3, kSoftcapKeptBytes = 2;

// One step of a transformer layer's forward pass for one micro-batch on one rank — an op that carries its own
// costs (as Calculon's layers.py): a GEMM, or memory-bound work, with the activation bytes it keeps for backward.
// Every per-layer quantity is a fold over this one list: GEMM time, memory-bound time and kernels, stored
// activations, and what each --recompute-modules submodule replays and frees.
struct LayerOp {
  const char* name;
  bool is_gemm = false;
  Gemm gemm{};  // when is_gemm (its module: the submodule that replays it)
  // Memory-bound work, bytes per rank: forward, backward (its own: an elementwise backward inside the TP region
  // reads the saved input and the output gradient and writes the input gradient, 1.5x; a norm's or the
  // residual's moves as many as its forward), kernels, and the submodule that replays it.
  double fwd_bytes = 0, bwd_bytes = 0, kernels = 0;
  RecomputeModule module = RecomputeModule::none;
  bool score = false;  // the s x s scale / mask / softmax (/ dropout) chain of unfused attention
  // Activations it keeps for backward, bytes per rank (the TP region divided by t, the rest by sp), and the
  // submodule whose recompute frees them (none: kept under selective recompute).
  double stored = 0;
  RecomputeModule frees = RecomputeModule::none;
  // Parameters this op owns on one rank, as sharded: a GEMM's weight (k·n per batch entry: TP-sharded linear
  // layers divided by t, routed experts by ep·etp, duplicated ones such as MLA's down-projections and the router
  // whole), its bias, a norm's weights (replicated across TP). `expert`: reduced over the expert-DP group, not DP.
  double params = 0;
  bool expert_params = false;
};

// Whether selective recompute replays submodule r: chosen itself, or inside a chosen MoE layer (`moe` covers
// `moe_act` and `shared_experts`).
inline bool replays(const TrainingSettings& t, RecomputeModule r) {
  const bool in_moe = r == RecomputeModule::moe_act || r == RecomputeModule::shared_experts;
  return t.recomputes(r) || (in_moe && t.recomputes(RecomputeModule::moe));
}

// The ops of one layer, in execution order. Activation bytes generalise Korthikanti et al., "Reducing Activation
// Recomputation in Large Transformer Models" (2022), Eq. 1–2 (34·s·b·h + 5·a·s²·b for GPT with dropout: 10·s·b·h
// outside the TP region, 24·s·b·h / t inside, 5·a·s²·b / t of scores) to explicit head_dim, GQA/MQA/MLA, gated
// MLPs, q/k norms, MoE, FP8 and unfused kernels.
template <class F>
void visit_layer(const Ctx& c, bool moe, F&& f) {
  using R = RecomputeModule;
  const Model& m = *c.m;
  const double S = c.tokens, h = c.h, t = c.tp, sp = c.sp_div, act = S * h * 2;
  const bool fused = c.t.fused_kernels;
  // Transformer Engine's FP8 linear layers keep their input for the weight gradient as the FP8 copy they cast
  // (TE Linear / LayerNormLinear / LayerNormMLP save the quantized input): 1 byte per element, not 2 (NVFP4: its
  // columnwise copy, half a byte and a scale per 16). Other
  // saved tensors (norm inputs, activation inputs, attention tensors) stay 16-bit.
  const double lin = c.nvfp4 ? kNvfp4BytesPerElement : c.fp8 ? 1.0 : 2.0;
  // An unfused (PyTorch) RMSNorm keeps the fp32 copy of its input (kept by the square and the scaling) and its
  // normalised output (kept by the weight multiply): 4 + 2 bytes per element where a fused kernel keeps the
  // 2-byte input, so 4 more per normalised element.
  const double norm_kept = 2 + (c.t.fused_norm ? 0.0 : 4.0);
  // Without the bias-activation fusion a gated activation (SwiGLU) also keeps act(gate), the multiply's input:
  // gate and up (2·f), act(gate) (f) and the product (f), not 2·f + f.
  const double unfused_gate = (!fused && m.is_gated()) ? 2.0 : 0.0;
  double kernels_listed = 0;  // kernels of the memory-bound ops listed; the rest of the layer's count follows
  auto emit = [&](const LayerOp& o) {
    kernels_listed += o.kernels;
    f(o);
  };
  // `extra`: parameters besides the weight (a bias, the norm of a down-projection's output).
  auto gemm = [&](const Gemm& g, double stored = 0, R frees = R::none, double extra = 0) {
    LayerOp o{g.name, true, g};
    o.stored = stored;
    o.frees = frees;
    o.params = (has_weight(g.role) ? g.batch * g.n * g.k : 0.0) + extra;
    o.expert_params = g.expert;
    f(o);  // GEMM launches are their own (Gemm::launches)
  };
  // What a linear layer keeps only for its weight gradient: nothing when LoRA freezes it.
  const bool frozen_base = c.t.lora();
  auto wgrad_kept = [&](double bytes) { return frozen_base ? 0.0 : bytes; };
  // A LoRA adapter on linear layer `base` (Megatron-Bridge's ParallelLinearAdapter: linear_in A, in x r, split
  // over TP like its base's input side; linear_out B, r x out, like its output side): two 16-bit GEMMs forward,
  // their input and weight gradients backward, and the add of its scaled output into the base's. It keeps its
  // 16-bit input (the base's, gathered under SP as Bridge's adapter keeps it; none where the layer's input is kept
  // anyway, `shared`) and A's output for B's weight gradient. The adapters' small TP collectives are not modelled.
  auto adapter = [&](const Gemm& base, LoraTarget target, bool shared, R frees) {
    if (!c.t.lora_targets(target)) return;
    const double r = static_cast<double>(c.t.lora_rank);
    const bool column = base.role == OpRole::attn_in || base.role == OpRole::mlp_in;
    Gemm a{"lora_a", base.role, 1, base.m, column ? r / t : r, base.k, 1, base.module};
    a.adapter = true;
    gemm(a, (shared ? 0.0 : 2 * base.m * base.k) + 2 * base.m * r, frees);
    Gemm b{"lora_b", base.role, 1, base.m, base.n, r, 1, base.module};
    b.adapter = true;
    gemm(b);
    LayerOp o{"lora_add"};
    o.fwd_bytes = 2 * 3 * base.m * base.n;  // scale the adapter's output (read, write) and add it (read both, write)
    o.bwd_bytes = 2 * 2 * base.m * base.n;  // scale the output gradient for B
    o.kernels = 2;
    o.module = base.module;
    emit(o);
  };
  // Memory-bound work outside the TP region (divided by sp) or inside it (already per rank).
  auto outside = [&](const char* name, double bytes, double kernels, R module, double stored, R frees = R::none) {
    LayerOp o{name};
    o.fwd_bytes = o.bwd_bytes = bytes / sp;
    o.kernels = kernels;
    o.module = module;
    o.stored = stored / sp;
    o.frees = frees;
    emit(o);
  };
  auto inside = [&](const char* name, double bytes, double kernels, R module, double stored, R frees = R::none) {
    LayerOp o{name};
    o.fwd_bytes = bytes;
    o.bwd_bytes = 1.5 * bytes;
    o.kernels = kernels;
    o.module = module;
    o.stored = stored / t;
    o.frees = frees;
    emit(o);
  };
  // Norms (Korthikanti §4.2.2: outside the TP region) read and write their tensor; each keeps its input.
  // input_layernorm and pre_mlp_layernorm are what --recompute-modules layernorm replays.
  const double norm_w = norm_weights(m);
  auto norm = [&](const char* name, R module) {
    LayerOp o{name};
    o.fwd_bytes = o.bwd_bytes = 2 * act / sp;
    o.kernels = module == R::layernorm ? 1 : 0;
    o.module = module;
    o.stored = norm_kept * S * h / sp;
    o.params = norm_w * h;
    emit(o);
  };
  if (m.post_norms) norm("post_attention_norm", R::none);
  norm("input_layernorm", R::layernorm);

  // Attention. Its first linear keeps its input (the norm's output: what layernorm recompute frees).
  // Flash skips the masked blocks: half the pairs of a causal square, fewer under a sliding window (averaged over
  // the model's windowed and full layers). Stored scores are computed whole and masked.
  const double causal = c.t.flash_attention ? 0.5 * attended_pair_fraction(c) : 1.0;
  const double heads = c.b * c.a / t;
  const double kv_heads = (c.t.flash_attention && !m.is_mla()) ? c.g : c.a;  // unfused GQA expands K, V
  const double qk = m.is_mla() ? c.d + static_cast<double>(m.qk_rope_head_dim) : c.d;
  const double vd = m.is_mla() ? static_cast<double>(m.v_head_dim) : c.d;
  // Q, K, V kept (as the attention core takes them: under Ulysses after the all-to-all, K and V repeated).
  const double kv_kept = c.t.flash_attention ? ulysses_kv_repeat(c) : 1.0;
  const double qkv = 2 * S * c.a * qk + (2 * S * kv_heads * qk + 2 * S * kv_heads * vd) * kv_kept;
  const double qk_width = S * (c.a + (m.is_mla() ? c.a : c.g)) * c.d / t * 2;
  if (m.is_mla()) {
    const double ql = static_cast<double>(m.q_lora_rank), kvl = static_cast<double>(m.kv_lora_rank);
    const double rope = static_cast<double>(m.qk_rope_head_dim);
    // The down-projections are duplicated across TP (Megatron-core MLA: TE parallel_mode 'duplicated'), each with
    // the norm of its latent.
    if (ql > 0) {
      gemm(Gemm{"q_down", OpRole::attn_in, 1, S, ql, h}, wgrad_kept(lin * S * h / sp), R::layernorm, norm_w * ql);
      gemm(Gemm{"q_up", OpRole::attn_in, 1, S, c.a * (c.d + rope) / t, ql, 1, R::mla_up_proj});
    } else {
      gemm(Gemm{"q", OpRole::attn_in, 1, S, c.a * (c.d + rope) / t, h}, wgrad_kept(lin * S * h / sp), R::layernorm);
    }
    gemm(Gemm{"kv_down", OpRole::attn_in, 1, S, kvl + rope, h}, wgrad_kept(2 * S * (kvl + ql) / t), R::none,
         norm_w * kvl);  // keeps the latents
    gemm(Gemm{"kv_up", OpRole::attn_in, 1, S, c.a * (c.d + vd) / t, kvl, 1, R::mla_up_proj});
  } else {
    const Gemm qkv{"qkv", OpRole::attn_in, 1, S, (c.a + 2 * c.g) * c.d / t, h, 1, R::none, false, true};
    gemm(qkv, wgrad_kept(lin * S * h / sp), R::layernorm, m.qkv_bias ? (c.a + 2 * c.g) * c.d / t : 0.0);
    if (frozen_base) adapter(qkv, LoraTarget::linear_qkv, false, R::layernorm);
  }
  if (m.qk_norm) {  // one norm of head_dim each for q and k, shared by the heads, replicated across TP
    LayerOp o{"qk_norm"};
    o.fwd_bytes = 2 * qk_width;
    o.bwd_bytes = 1.5 * o.fwd_bytes;
    o.stored = norm_kept * S * (c.a + c.g) * c.d / t;
    o.params = 2 * norm_w * c.d;
    emit(o);
  }
  // Rotary embedding on q and k (MLA: applied with the up-projections, which mla_up_proj replays); the Q, K, V it
  // hands to the attention core are kept (up-projected ones freed by mla_up_proj). Learned positions (GPT) were
  // added at the input: no rotary traffic, the same Q, K, V kept.
  inside("rotary", m.is_rotary() ? 2 * qk_width : 0.0, m.is_mla() ? 2 : 0, m.is_mla() ? R::mla_up_proj : R::none, qkv,
         m.is_mla() ? R::mla_up_proj : R::none);
  if (!c.t.flash_attention && c.g < c.a && !m.is_mla())
    inside("gqa_expand", 2 * S * (c.a + c.g) * c.d / t * 2, 0, R::none, 0);  // K and V repeated to every head
  // The core's calls: the local queries against the keys they see; under Ulysses (cp_comm_type a2a) the whole
  // sequence for a/(t·cp) heads (the same FLOPs; a2a+p2p: s/cp_ring queries for a/(t·cp_ulysses) heads); under the
  // K/V all-gather two calls, one per local half-chunk.
  const double core_heads = heads / c.cp_ulysses, core_queries = c.s / c.cp_ring;
  const double core_calls = c.cp > 1 && c.r.cp_comm_type == CpCommType::allgather ? 2 : 1;
  gemm(Gemm{"scores", OpRole::attn_core, core_heads, core_queries, c.s * causal, qk, core_calls, R::core_attn});
  if (!c.t.flash_attention) {
    const double scores = c.b * c.a / t * c.s_local * c.s;
    LayerOp o{"softmax"};
    o.score = true;
    o.module = R::core_attn;
    const bool fused_softmax = fused && c.t.masked_softmax_fusion;
    o.fwd_bytes = scores * (fused_softmax ? kScoreBytesFwdFused : kScoreBytesFwdUnfused);
    o.bwd_bytes = scores * (fused_softmax ? kScoreBytesBwdFused : kScoreBytesBwdUnfused);
    if (c.t.attention_dropout) {  // attention-probability dropout: read, write, 1-byte mask; backward likewise
      o.fwd_bytes += scores * kScoreDropoutBytes;
      o.bwd_bytes += scores * kScoreDropoutBytes;
    }
    o.stored = c.p->attention_score_bytes * scores;
    o.frees = R::core_attn;
    emit(o);
  }
  // Flash attention keeps its softmax statistics (a log-sum-exp, or the device kernel's own).
  gemm(Gemm{"pv", OpRole::attn_core, core_heads, core_queries, vd, c.s * causal, core_calls, R::core_attn},
       c.t.flash_attention ? c.sys->flash_softmax_stats_bytes * c.b * c.a * c.s_local / t : 0);
  if (c.cp_ring > 1 && c.t.flash_attention && c.r.cp_comm_type != CpCommType::allgather) {
    // Context parallelism (Transformer Engine's AttnFuncWithCPAndKVP2P) runs the attention as cp steps (cp_ring
    // under a2a+p2p; "cp" below is that ring's degree), one flash
    // kernel per KV block, and merges them by their log-sum-exp: forward, the first step's partial output is
    // scaled (read, write) and each later one added into the output (read it, read-modify-write the output;
    // steps above the causal diagonal touch its second half only), all 16-bit; backward, each step's dQ is added
    // into dQ and its dK, dV into the K, V gradient that travels the ring, after one copy of K, V into it. Kernels:
    // the cp - 1 further flash launches, one output and (after the first) one log-sum-exp merge per step.
    // The merge also reads the running and the step's softmax statistics and writes the new ones, in the device
    // kernel's own layout (flash_softmax_stats_bytes per head and token: TE's fp32 log-sum-exp, 4; MindSpeed's
    // ring-attention update on Ascend, fp32 max and sum [b, n, s, 8] each, 64); backward reads them once a step.
    const double out = c.tokens * c.a * vd / t, q_el = c.tokens * c.a * qk / t;
    const double kv_el = c.tokens * kv_heads * (qk + vd) / t, steps = c.cp_ring;
    const double stats = c.sys->flash_softmax_stats_bytes * c.tokens * c.a / t;
    LayerOp o{"cp_merge"};
    o.fwd_bytes = out * (4 + 4.5 * (steps - 1)) + 3 * stats * (steps - 1);
    o.bwd_bytes = q_el * (4 + 6 * (steps - 1)) + kv_el * (6 * steps + 4) + stats * steps;
    o.kernels = 3 * steps - 2;
    o.module = R::core_attn;
    emit(o);
  }
  // The out-projection keeps its input, the attention output; flash attention keeps its own 16-bit copy besides
  // an FP8 one.
  const Gemm out{"out", OpRole::attn_out, 1, S, h, c.a * vd / t, 1, R::none, false, true};
  // Flash attention keeps its 16-bit output; the out-projection keeps its input (the same tensor when 16-bit).
  const double flash_out = c.t.flash_attention ? 2.0 : 0.0, out_in = wgrad_kept(lin);
  gemm(out, (c.t.flash_attention && !c.fp8 ? std::max(flash_out, out_in) : flash_out + out_in) * S * c.a * vd / t);
  if (frozen_base) adapter(out, LoraTarget::linear_proj, c.t.flash_attention, R::none);
  // The residual adds (two reads, one write each); with hidden dropout a 1-byte mask is written and kept. Fused
  // kernels do the bias-dropout-add in one pass (3 or 3.5 tensors); unfused, dropout is its own kernel (2.5 tensors).
  outside("residual", c.t.hidden_dropout ? (fused ? 7.0 : 11.0) * act : 6.0 * act, 0, R::none,
          c.t.hidden_dropout ? 2.0 * S * h : 0.0);
  if (m.post_norms) norm("post_mlp_norm", R::none);
  norm("pre_mlp_layernorm", R::layernorm);

  // MLP. Activation traffic per element of its output: gated, fused: read gate and up, write (3); unfused, SiLU
  // then the multiply: read gate, write act(gate), read both, write (5); ungated: read, write (2).
  const double gate = m.is_gated() ? 2.0 : 1.0;
  const double gate_in = m.is_gated() ? (fused ? 3.0 : 5.0) : 2.0;
  if (!moe) {
    const Gemm fc1{"fc1", OpRole::mlp_in, 1, S, gate * c.f / t, h, 1, R::mlp, false, true};
    gemm(fc1, wgrad_kept(lin * S * h / sp), R::layernorm);
    if (frozen_base) adapter(fc1, LoraTarget::linear_fc1, false, R::layernorm);
    inside("activation", gate_in * S * c.f / t * 2, 1, R::mlp, 2 * S * c.f * gate, R::mlp);  // keeps FC1's output
    const Gemm fc2{"fc2", OpRole::mlp_out, 1, S, h, c.f / t, 1, R::mlp, false, true};
    gemm(fc2, (wgrad_kept(lin) + unfused_gate) * S * c.f / t, R::mlp);
    if (frozen_base) adapter(fc2, LoraTarget::linear_fc2, false, R::mlp);
  } else {
    const double fm = static_cast<double>(m.moe_ffn_hidden_size);
    const double experts = static_cast<double>(m.num_experts), topk = static_cast<double>(m.experts_per_token);
    const double local_experts = experts / c.ep, et = c.etp;
    const double expert_launches = c.sys->grouped_gemm_kernel ? 1.0 : local_experts;
    // The rank's tokens (S / sp) are dispatched over EP; with SP the expert-TP ranks then gather each other's
    // (Megatron-core's all-to-all dispatcher), so an expert sees the tokens of its etp ranks. Tokens per local
    // expert: the busiest expert gets moe_load_imbalance x the mean.
    // The all-gather dispatcher gathers the whole expert-TP x EP group's tokens, SP-sharded or not.
    const bool gathered = c.t.moe_token_dispatcher_type == MoeDispatcher::allgather;
    const bool flex = c.t.moe_token_dispatcher_type == MoeDispatcher::flex;
    const double tokens = S / sp * (sp > 1 || gathered ? et : 1.0);
    // With token dropping (moe_expert_capacity_factor c) the busiest expert keeps at most c x the mean, padded ones
    // exactly c x (Megatron-core router.py, the capacity per expert from each rank's routed tokens).
    const double share = moe_expert_share(c.t);
    const double rows = tokens * topk * c.ep / experts * share;
    const double routed = tokens * topk * share;  // expert rows this rank computes
    // The router scores the rank's own tokens (SP-sharded with SP, all S duplicated over TP without).
    gemm(Gemm{"router", OpRole::router, 1, S / sp, experts, h, 1, R::moe}, wgrad_kept(lin * S * h / sp), R::layernorm);
    // Permutation, dispatch bookkeeping and router softmax / top-k; kept: the dispatched tokens (the experts' FC1
    // input), the router's fp32 probabilities over all experts, and each routed row's probability. Megatron-core
    // (since 0.13, "memory efficient token permutation") weights an expert's output by its probability inside the
    // expert's activation (weighted SwiGLU), so the un-permutation keeps no h-wide expert output for that product.
    // Traffic (Megatron-core's all-to-all dispatcher): the permutation gathers each routed row of the rank's own
    // tokens (read and write), the un-permutation reads them back and writes the tokens; with more than one local
    // expert the dispatched rows are also sorted by expert and unsorted after the experts (read and write each).
    // The all-gather dispatcher's permutation picks the rows routed to the local experts out of the gathered tokens
    // (read and write), already in expert order; the un-permutation reads them back and scatters them into a
    // zeroed buffer of the gathered size (written twice) for the reduce-scatter.
    // The flex dispatcher's kernels pack and unpack what they send: the rank permutes the tokens it received (one
    // per token and rank, `expert_bin_reach`) into rows per local expert (read and write) and un-permutes them,
    // summing each token's rows (read the rows, write the tokens).
    // A permutation's backward is the inverse permutation, the same bytes. Router softmax / top-k: 3·S·E fp32.
    // Padded to capacity, every permuted row set is c x the routed one (the padding rows move too).
    const double sent = moe_sent_share(c.t);
    const double own_rows = S / sp * topk * h * 2 * sent, sorted_rows = tokens * topk * h * 2 * sent;
    const double received =  // flex: the tokens in, once per rank
        flex ? S / sp * c.etp * c.ep * expert_bin_reach(m, experts / c.ep) * h * 2 : 0.0;
    const double permutes = gathered ? 3 * sorted_rows + 2 * (S / sp * c.ep * et * h * 2)
                            : flex   ? 3 * sorted_rows + received
                                     : 3 * own_rows + S / sp * h * 2 + (local_experts > 1 ? 4 * sorted_rows : 0.0);
    LayerOp o{"permute"};
    o.fwd_bytes = permutes + 3 * S / sp * experts * 4;
    o.bwd_bytes = permutes + 1.5 * 3 * S / sp * experts * 4;
    o.kernels = kMoeExtraKernels;
    o.module = R::moe;
    o.stored = routed * (wgrad_kept(h * lin) + 4) + S * experts * 4 / sp;
    o.frees = R::moe;
    emit(o);
    gemm(Gemm{"expert_fc1", OpRole::mlp_in, local_experts, rows, gate * fm / et, h, expert_launches, R::moe, true});
    // (`inside` divides what it keeps by t; the experts' share is 1/etp.)
    inside("expert_activation", gate_in * routed * fm / et * 2, 1, R::moe_act, routed * 2 * fm * gate * t / et, R::moe);
    gemm(Gemm{"expert_fc2", OpRole::mlp_out, local_experts, rows, h, fm / et, expert_launches, R::moe, true},
         routed * (wgrad_kept(lin) + unfused_gate) * fm / et, R::moe_act);
    if (m.num_shared_experts > 0) {
      const double fs = fm * static_cast<double>(m.num_shared_experts);
      gemm(Gemm{"shared_fc1", OpRole::mlp_in, 1, S, gate * fs / t, h, 1, R::shared_experts});
      inside("shared_activation", gate_in * S * fs / t * 2, 1, R::shared_experts, 2 * S * fs * gate, R::shared_experts);
      gemm(Gemm{"shared_fc2", OpRole::mlp_out, 1, S, h, fs / t, 1, R::shared_experts},
           (wgrad_kept(lin) + unfused_gate) * S * fs / t, R::shared_experts);
    }
  }
  // Kernels launched per layer forward besides GEMMs and collectives that no op above names (residual adds,
  // copies, casts, the softmax chain, rotary): the layer's total is kLayerKernels{Fused,Unfused} (+ MoE's).
  LayerOp rest{"other_kernels"};
  rest.kernels = (fused ? kLayerKernelsFused : kLayerKernelsUnfused) + (moe ? kMoeExtraKernels : 0) - kernels_listed;
  f(rest);
}

// The GEMMs of one layer, in execution order.
template <class F>
void visit_layer_ops(const Ctx& c, bool moe, F&& f) {
  visit_layer(c, moe, [&](const LayerOp& o) {
    if (o.is_gemm) f(o.gemm);
  });
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
//   of each column-parallel linear while its weight gradient is computed (hidden under that GEMM), or after the
//   linear's backward (exposed) without async_tensor_model_parallel_allreduce;
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
    const bool uo = c.userbuffers;
    const OpRole in_roles[2] = {OpRole::attn_in, OpRole::mlp_in}, out_roles[2] = {OpRole::attn_out, OpRole::mlp_out};
    for (int blk = 0; blk < 2; ++blk) {
      const OpRole in = in_roles[blk], out = out_roles[blk], none = OpRole::head;
      if (c.r.sequence_parallel) {
        // Under FP8 Transformer Engine casts before it gathers: a column-parallel linear's sequence-parallel input
        // (forward, and again for the weight gradient) and a row-parallel one's output gradient cross the TP group
        // in FP8 (TE 1.x LayerNormLinear's FP8 norm output and grad_output_preprocess; TE 2.x gather_along_first_dim
        // with a quantizer; userbuffers' all-gather buffers likewise), a block-scaled recipe's output gradient in
        // both its copies (fp8_grad_output_gather_copies). The reduce-scatters stay 16-bit, and so does an MoE
        // layer's, whose tokens the dispatcher gathers, not TE.
        const bool fp8_gather = c.fp8 && (blk == 0 || !moe);
        const double gathered = fp8_gather ? c.tokens * c.h * fp8_gather_bytes_per_element(c) : act;
        const double grad_gathered = fp8_gather ? gathered * fp8_grad_output_gather_copies(c, uo) : act;
        f(Collective{Prim::all_gather, Group::tp, gathered, 1, 0, uo ? in : none, none});
        f(Collective{Prim::reduce_scatter, Group::tp, act, 1, 0, uo ? out : none, none});
        f(Collective{Prim::all_gather, Group::tp, grad_gathered, 0, 1, none, uo ? out : none});
        f(Collective{Prim::all_gather, Group::tp, gathered, 0, 1, none, in});
        f(Collective{Prim::reduce_scatter, Group::tp, act, 0, 1, none, in});
        // FP8 current scaling also all-reduces the fp32 amax of a column-parallel linear's sequence-parallel input
        // (forward) and of a row-parallel one's output gradient (backward) over TP before the cast, so that every
        // rank casts with one scale (Transformer Engine's Linear / LayerNormLinear / LayerNormMLP quantizers,
        // amax_reduction_group = tp_group). Latency-bound: NCCL's LL protocol. Nothing overlaps them.
        if (amax_before_cast(c)) {
          f(Collective{Prim::all_reduce, Group::tp, 4, 1, 0, none, none});
          f(Collective{Prim::all_reduce, Group::tp, 4, 0, 1, none, none});
        }
      } else {
        f(Collective{Prim::all_reduce, Group::tp, act, 1, 0, none, none});
        f(Collective{Prim::all_reduce, Group::tp, act, 0, 1, none, c.r.synchronous_tp_allreduce ? none : in});
      }
    }
  }
  if (c.cp > 1) {
    const double kv_heads = c.m->is_mla() ? c.a : c.g;
    const double kv = 2 * c.tokens * kv_heads * c.d / c.tp * 2;
    const double repeat = ulysses_kv_repeat(c);
    if (c.cp_ulysses > 1) {
      // Ulysses (a2a, and the inner part of a2a+p2p): one all-to-all each for Q, K and V before the core (sequence
      // shards to head shards) and one for its output after it; backward runs them the other way for the
      // gradients. Nothing computes beside them: exposed.
      const double rope = c.m->is_mla() ? static_cast<double>(c.m->qk_rope_head_dim) : 0.0;
      const double vd = c.m->is_mla() ? static_cast<double>(c.m->v_head_dim) : c.d;
      const double per_head = c.tokens / c.tp * 2;
      const double tensors[4] = {per_head * c.a * (c.d + rope), per_head * kv_heads * repeat * (c.d + rope),
                                 per_head * kv_heads * repeat * vd, per_head * c.a * vd};
      for (double bytes : tensors) f(Collective{Prim::all_to_all, Group::cp, bytes, 1, 1});
    }
    if (c.r.cp_comm_type == CpCommType::allgather) {
      // K and V all-gathered before the core, again in backward, whose dK, dV are reduce-scattered: exposed.
      f(Collective{Prim::all_gather, Group::cp, kv * c.cp, 1, 1});
      f(Collective{Prim::reduce_scatter, Group::cp, kv * c.cp, 0, 1});
    } else if (c.cp_ring > 1) {
      // The ring (p2p, and the outer part of a2a+p2p): a rank's K and V block passed cp_ring - 1 times forward,
      // twice that with their gradients backward, under the attention core. After a Ulysses exchange the block
      // holds s/cp_ring tokens of a/(t·cp_ulysses) heads: as many elements as the local one (K, V repeated).
      const Group ring = c.cp_ulysses > 1 ? Group::cp_ring : Group::cp;
      f(Collective{Prim::send_recv, ring, kv * repeat, c.cp_ring - 1, 2 * (c.cp_ring - 1), OpRole::attn_core,
                   OpRole::attn_core});
    }
  }
  if (moe && c.t.moe_token_dispatcher_type == MoeDispatcher::allgather) {
    // The all-gather dispatcher (Megatron-core MoEAllGatherTokenDispatcher) over the expert-TP x EP group: the
    // rank's (SP-sharded) hidden states all-gathered before the experts, their gradient reduce-scattered in
    // backward; the experts' outputs reduce-scattered back at combine, all-gathered in backward. Beside them each
    // rank gathers the group's routing map (one byte per token and expert) and router probabilities (16-bit),
    // forward only. Sizes are the gathered buffers.
    const double group = c.ep * c.etp, own = act / c.sp_div;
    if (group <= 1) return;
    const double meta = c.tokens / c.sp_div * static_cast<double>(c.m->num_experts) * group;
    f(Collective{Prim::all_gather, Group::tp_ep, own * group, 1, 0});
    f(Collective{Prim::reduce_scatter, Group::tp_ep, own * group, 0, 1});
    f(Collective{Prim::reduce_scatter, Group::tp_ep, own * group, 1, 0});
    f(Collective{Prim::all_gather, Group::tp_ep, own * group, 0, 1});
    f(Collective{Prim::all_gather, Group::tp_ep, meta, 1, 0});      // routing map
    f(Collective{Prim::all_gather, Group::tp_ep, meta * 2, 1, 0});  // probabilities
    return;
  }
  if (moe && c.t.moe_token_dispatcher_type == MoeDispatcher::flex) {
    // The flex dispatcher: the rank's (SP-sharded) tokens dispatched and their outputs combined over the
    // expert-TP x EP group by one fused kernel each; backward runs each one's reverse. Its routing metadata (top-k
    // indices and fp32 probabilities) and the per-rank counts its notify step exchanges ride in the same kernels.
    f(Collective{Prim::fused_all_to_all, Group::tp_ep, act / c.sp_div, 2, 2});
    return;
  }
  const double routed = act * static_cast<double>(c.m->experts_per_token) / c.sp_div * moe_sent_share(c.t);
  // Before dispatching, the all-to-all dispatcher all-gathers every rank's per-expert token counts (one int64 per
  // expert) over its expert-TP x EP group, which size the uneven all-to-all (Megatron-core token_dispatcher.py,
  // preprocess): latency-bound, forward only. Taken over EP, or over expert TP when EP is 1. Padded to capacity,
  // the splits are static and no counts are exchanged.
  const double counts = 8 * static_cast<double>(c.m->num_experts);
  const bool padded = moe_padded(c.t);
  if (moe && !padded && c.ep > 1) f(Collective{Prim::all_gather, Group::ep, counts * c.ep, 1, 0});
  if (moe && !padded && c.ep <= 1 && c.etp > 1) f(Collective{Prim::all_gather, Group::etp, counts * c.etp, 1, 0});
  if (moe && c.ep > 1) f(Collective{Prim::all_to_all, Group::ep, routed, 2, 2});
  // With SP the expert-TP ranks gather the dispatched tokens (full buffer: etp ranks' share) and reduce-scatter
  // the experts' output at combine; backward runs the pair the other way.
  if (moe && c.etp > 1 && c.r.sequence_parallel) {
    f(Collective{Prim::all_gather, Group::etp, routed * c.etp, 1, 1});
    f(Collective{Prim::reduce_scatter, Group::etp, routed * c.etp, 1, 1});
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

// Delayed FP8 scaling's amax reduction, per micro-batch and model chunk (Transformer Engine DelayedScaling with
// reduce_amax, FP8GlobalStateManager.reduce_and_update_fp8_tensors). Under this recipe Megatron-core enters one
// fp8_autocast around a chunk's whole layer loop (TransformerBlock with get_fp8_context(config); current and MX
// scaling enter one per layer and reduce nothing there), its fp8_group the amax reduction group: the stage's
// tp·cp·dp ranks (get_amax_reduction_group(with_context_parallel=True); tp·cp with tp_only_amax_red). At the autocast's
// exit the forward's amaxes (input, weight and output of each FP8 GEMM) are concatenated and all-reduced with max,
// blocking the compute stream; the first FP8 module of the chunk's forward does the same for the backward's (input and
// output gradient) when its backward ends. 4-byte amaxes: latency-bound. `fp8_gemms`: the chunk's FP8 GEMMs (one per
// expert of a grouped linear, each with its own scaling meta).
constexpr double kAmaxBytes = 4, kDelayedAmaxesFwd = 3, kDelayedAmaxesBwd = 2;
// Each reduction also launches the concatenation and the fused amax-history / scale update kernel
// (tex.fused_amax_and_scale_update_after_reduction), whatever the group's size.
constexpr double kDelayedAmaxKernels = 2;
template <class F>
void visit_chunk_collectives(const Ctx& c, double fp8_gemms, F&& f) {
  if (!c.t.reduces_delayed_amax() || fp8_gemms <= 0) return;
  f(Collective{Prim::all_reduce, Group::amax, kAmaxBytes * kDelayedAmaxesFwd * fp8_gemms, 1, 0});
  f(Collective{Prim::all_reduce, Group::amax, kAmaxBytes * kDelayedAmaxesBwd * fp8_gemms, 0, 1});
}

// Collectives of one full-recompute checkpoint per micro-batch: with --distribute-saved-activations each TP rank
// keeps 1/t of the checkpointed input and all-gathers it before the replay in backward (Megatron-core
// CheckpointFunction: split_tensor_into_1d_equal_chunks, then gather_split_1d_tensor), on the critical path. The
// split's copy of 1/t of the tensor is left out.
template <class F>
void visit_checkpoint_collectives(const Ctx& c, F&& f) {
  if (c.r.distribute_saved_activations) f(Collective{Prim::all_gather, Group::tp, c.tokens * c.h * 2, 0, 1});
}

// Bytes per parameter of the gradient buffers (and of their data-parallel reduction): fp32 with Megatron's
// --accumulate-allreduce-grads-in-fp32, else 16-bit.
inline double grad_bytes_per_param(const TrainingSettings& t) { return t.fp32_gradients ? 4.0 : 2.0; }
// Bytes a rank keeps per parameter of its model copy: 16-bit; under FP8 plus Transformer Engine's FP8 weight
// workspace (kept across an iteration's micro-batches), or with FP8 parameters the FP8 data and its transposed
// (column-wise) copy only; under FP4 alike in NVFP4 (half a byte and a scale per 16 elements a copy). The
// few non-linear parameters (embedding, norms, router) are counted alike.
inline double weight_bytes_per_param(const TrainingSettings& t, const ResolvedStrategy& r) {
  if (!quantizes_linear(t.precision)) return 2.0;
  const double copy = t.precision == Precision::fp4 ? kNvfp4BytesPerElement : 1.0;
  return r.fp8_param_gather ? 2 * copy : 2.0 + copy;
}
// Bytes per parameter of the distributed optimizer's parameter all-gather: 16-bit; 8-bit with FP8 parameters; with
// FP4 ones the packed rowwise data, 4 bits (Megatron-core keeps only those bytes in its buffer and rebuilds the
// scales and the columnwise copy after the gather: fp4_utils.modify_nvfp4_rowwise_storage).
inline double param_gather_bytes_per_param(const TrainingSettings& t, const ResolvedStrategy& r) {
  if (!r.fp8_param_gather) return 2.0;
  return t.precision == Precision::fp4 ? kNvfp4ValueBytes : 1.0;
}

// Optimizer state per owned parameter for mixed-precision Adam (Megatron-LM theoretical_memory_usage.py: 12 bytes,
// the 18 of "2 + 4 + 12" less weights and gradients): the fp32 master copy (4), created with the optimizer, and
// the fp32 moments exp_avg / exp_avg_sq (4 + 4), created lazily by the first step that is applied. MindSpeed's
// --reuse-fp32-param keeps the 16-bit copy of the owned parameters inside the master copy: "sizeof(bfloat16) x
// parameters / DP" saved with the distributed optimizer (MindSpeed docs, reuse_fp32_param.md); Apex's and TE's
// store_param_remainders likewise. A 16-bit optimizer state (Apex DistributedFusedAdam dtype bf16 over bf16
// parameters: no master copy) keeps only the two bf16 moments; Megatron-core's precision-aware optimizer with bf16
// moments (bf16_adam_moments) keeps them beside the master copy.
inline double adam_moment_bytes(const TrainingSettings& t) {
  return t.bf16_optimizer_state || t.bf16_adam_moments ? 2.0 : 4.0;
}
inline double optimizer_state_bytes_per_param(const TrainingSettings& t) {
  const double moments = t.optimizer_moments_allocated ? 2 * adam_moment_bytes(t) : 0.0;
  if (t.bf16_optimizer_state) return moments;
  return 4.0 + moments - (t.reuse_fp32_param ? 2.0 : 0.0);
}

// HBM bytes of one optimizer step, op by op as Megatron's mixed-precision optimizer runs it
// (MixedPrecisionOptimizer.step in megatron/optimizer/optimizer.py, 2021-2022, and Megatron-core's since; Adam as
// Apex / TE FusedAdam's multi-tensor kernel), per parameter the rank owns:
//  - 16-bit gradients copied into fp32 main gradients (.float(): read 2, write 4); none when the buffer is fp32;
//  - FP16 only: the loss-scale unscale and inf check (torch._amp_foreach_non_finite_check_and_unscale_: 4 + 4);
//  - the gradient-norm read for clipping (4);
//  - Adam: gradient, master weight and the two moments read, master and moments written (4·4 + 3·4; the moments
//    at 2 bytes each with bf16_adam_moments);
//  - the master copied into the model's 16-bit parameters (4 + 2), none when those are the master's top half
//    (store_param_remainders / --reuse-fp32-param) or with a 16-bit state, which updates bf16 parameters and
//    moments in place (gradient, parameter and moments read, written: 2 bytes each).
// An FP16 step skipped by the loss scaler (Adam's moments not yet allocated) stops after the inf check. Per local
// parameter, every iteration zeroes the gradient buffer (zero_grad_buffer: one write).
struct OptimizerStepBytes {
  double per_owned, per_local;
};
inline OptimizerStepBytes optimizer_step_bytes_per_param(const TrainingSettings& t) {
  const double gb = grad_bytes_per_param(t);
  const bool loss_scaled = t.precision == Precision::fp16;
  if (t.bf16_optimizer_state) return {2 * gb + 3 * 2.0 + 3 * 2.0, gb};  // norm, then Adam in place
  const double to_main = gb < 4 ? gb + 4 : 0.0, unscale = loss_scaled ? 8.0 : 0.0;
  if (!t.optimizer_moments_allocated && loss_scaled) return {to_main + unscale, gb};
  const double m = adam_moment_bytes(t), adam = (4 + 4 + 2 * m) + (4 + 2 * m);
  const double to_model = t.reuse_fp32_param ? 0.0 : 4 + 2.0;
  return {to_main + unscale + 4 + adam + to_model, gb};
}

// Data-parallel gradient reduction and (distributed optimizer) parameter all-gather for one stage, once per
// iteration: dense parameters over dp·cp, expert parameters over the expert-data-parallel group.
// `grad` marks the gradient reduction (overlappable with backward), the rest gathers parameters.
struct DpCollective {
  Prim prim;
  Group group;
  double bytes;
  bool grad;
};
// The share of a GPU's compute that NCCL's conventional kernels take while they run beside compute, per second of
// traffic: fitted as 1 - dp_overlap (their SM count and HBM traffic are on no spec sheet). Charged to overlapped
// DP traffic, the interleaved schedule's overlapped pipeline sends and CP's ring.
inline double nccl_contention_share(const Ctx& c) { return 1.0 - c.p->dp_overlap; }

// The share of a GPU's compute that a data-parallel collective takes while it runs beside compute. With NCCL user
// buffers (`nccl_ub`) it is the SMs its zero-copy algorithms use over the GPU's: Megatron-core's
// DistributedDataParallelConfig.nccl_ub table, all-gather / reduce-scatter, 4 / 5 SMs inside an NVLink domain and
// 16 / 16 across nodes without SHARP (an all-reduce counted as a reduce-scatter). Otherwise NCCL's conventional
// kernels' share.
inline double dp_contention_share(const Ctx& c, const DpCollective& k) {
  if (!c.t.nccl_ub || c.sys->sm_count <= 0) return nccl_contention_share(c);
  const double sms = c.group(k.group).nodes > 1 ? 16.0 : k.prim == Prim::all_gather ? 4.0 : 5.0;
  return std::min(1.0, sms / c.sys->sm_count);
}

// The share of a GPU's compute that the MoE dispatch / combine takes while batch-level overlap runs it beside
// another micro-batch's compute: DeepEP's SMs over the GPU's for the flex dispatcher (Megatron-core's
// moe_flex_dispatcher_num_sms, 20 when unset), NCCL's conventional kernels' share for the all-to-all one.
constexpr double kFlexDispatcherSms = 20;
inline double ep_contention_share(const Ctx& c) {
  if (c.t.moe_token_dispatcher_type == MoeDispatcher::flex && c.sys->sm_count > 0)
    return std::min(1.0, kFlexDispatcherSms / c.sys->sm_count);
  return nccl_contention_share(c);
}

// Word-embedding copies (Megatron-core GPTModel): with a pipeline the last stage keeps its own copy of the
// embedding when it is tied to the output layer, or when that stage's MTP modules embed their shifted input tokens
// (pre_process or mtp_process builds one). finalize_model_grads all-reduces the copies' gradients over the
// embedding group once per iteration, after the backward and its DP reduction: exposed.
inline bool keeps_embedding_copy(const Ctx& c) { return c.pp > 1 && (c.m->tied_embeddings || c.m->mtp_layers > 0); }
template <class F>
void visit_embedding_collectives(const Ctx& c, bool is_first, bool is_last, F&& f) {
  if (keeps_embedding_copy(c) && (is_first || is_last))
    f(DpCollective{Prim::all_reduce, Group::embedding, grad_bytes_per_param(c.t) * c.vocab_padded * c.h / c.tp, true});
}

template <class F>
void visit_dp_collectives(const Ctx& c, double dense_params, double expert_params, F&& f) {
  const double gb = grad_bytes_per_param(c.t), pb = param_gather_bytes_per_param(c.t, c.r);
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

// Memory-bound bytes and kernel count of one layer's forward pass, folded over its memory-bound ops (backward:
// twice the kernels, its own bytes).
struct VectorWork {
  double fwd_bytes = 0, bwd_bytes = 0, fwd_kernels = 0;
  double score_fwd_bytes = 0, score_bwd_bytes = 0;  // the s x s part, separated for selective recompute
  // Forward bytes and kernels of the memory-bound work inside each --recompute-modules submodule (part of
  // fwd_bytes; the attention core's is score_fwd_bytes).
  std::array<double, kNumRecomputeModules> module_fwd_bytes{}, module_fwd_kernels{};

  void add(const LayerOp& o) {
    if (o.score) {  // selective recompute replays it with the attention core
      score_fwd_bytes += o.fwd_bytes;
      score_bwd_bytes += o.bwd_bytes;
    } else {
      fwd_bytes += o.fwd_bytes;
      bwd_bytes += o.bwd_bytes;
      if (o.module != RecomputeModule::none) {
        module_fwd_bytes[static_cast<std::size_t>(o.module)] += o.fwd_bytes;
        module_fwd_kernels[static_cast<std::size_t>(o.module)] += o.kernels;
      }
    }
    fwd_kernels += o.kernels;
  }
  double bwd_kernels() const { return 2 * fwd_kernels; }  // backward launches twice as many
};

}  // namespace lmsim::detail
