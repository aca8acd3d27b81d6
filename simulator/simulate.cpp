// Stage E (aggregation) and the memory model; stages A–D are in execution.hpp.
#include "simulator/simulate.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

#include "simulator/execution.hpp"

namespace lmsim {
namespace detail {

namespace {
LinkUse use_link(const Link& l, double efficiency, const PlatformParams& p) {
  return {l.bandwidth_bytes_per_s * efficiency, l.latency_s + p.collective_latency_us * 1e-6};
}
// A group of `size` ranks whose neighbours are `stride` ranks apart, on nodes of `node` devices.
GroupUse place(double size, double stride, double node) {
  GroupUse g{size, 1, 1};
  if (size <= 1) return g;
  if (stride * size <= node) {
    g.per_node = size;
  } else if (stride >= node) {
    g.nodes = size;
  } else {
    g.per_node = std::max(1.0, std::floor(node / stride));
    g.nodes = std::ceil(size / g.per_node);
  }
  return g;
}
}  // namespace

const char* group_name(Group g) {
  switch (g) {
    case Group::tp: return "tp";
    case Group::cp: return "cp";
    case Group::cp_ring: return "cp_ring";
    case Group::ep: return "ep";
    case Group::etp: return "etp";
    case Group::tp_ep: return "tp_ep";
    case Group::dp: return "dp";
    case Group::edp: return "edp";
    case Group::pp: return "pp";
    case Group::embedding: return "embedding";
    case Group::amax: return "amax";
    case Group::count_: break;
  }
  return "?";
}
const char* prim_name(Prim p) {
  switch (p) {
    case Prim::all_reduce: return "all_reduce";
    case Prim::all_gather: return "all_gather";
    case Prim::reduce_scatter: return "reduce_scatter";
    case Prim::all_to_all: return "all_to_all";
    case Prim::send_recv: return "send_recv";
    case Prim::fused_all_to_all: return "fused_all_to_all";
  }
  return "?";
}

Ctx make_ctx(const Model& m, const Strategy& s, const System& sys, const TrainingSettings& t, const PlatformParams& p) {
  Ctx c{};
  c.m = &m;
  c.sys = &sys;
  c.p = &p;
  c.r = resolve(s, t);
  c.t = t;
  c.t.flash_attention = t.flash_in(s.context_parallel);  // the run's own: MindSpeed-LLM turns it on under CP
  c.b = static_cast<double>(c.r.micro_batch_size);
  c.s = static_cast<double>(t.seq_length);
  c.cp = s.context_parallel;
  c.s_local = c.s / c.cp;
  c.cp_ulysses = static_cast<double>(ulysses_degree(c.r.cp_comm_type, c.r.ulysses_degree_in_cp, s.context_parallel));
  c.cp_ring = c.cp / c.cp_ulysses;  // the K/V all-gather's too: its queries stay the local s/cp
  c.tokens = c.b * c.s_local;
  c.h = static_cast<double>(m.hidden_size);
  c.tp = s.tensor_parallel;
  // Heads are padded to a multiple of tp (KV heads replicated) when the validity options allow it.
  c.a = std::ceil(static_cast<double>(m.num_attention_heads) / c.tp) * c.tp;
  c.g = std::ceil(static_cast<double>(m.num_kv_heads) / c.tp) * c.tp;
  c.d = static_cast<double>(m.head_dim);
  c.f = static_cast<double>(m.ffn_hidden_size);
  c.ep = s.expert_parallel;
  c.etp = s.expert_tensor();
  c.dp = s.data_parallel;
  c.pp = s.pipeline_parallel;
  c.vpp = s.virtual_pipeline;
  // Megatron pads the vocabulary to a multiple of 128 x tensor_parallel.
  const double pad = 128.0 * c.tp;
  c.vocab_padded = std::ceil(static_cast<double>(m.vocab_size) / pad) * pad;
  c.sp_div = c.r.sequence_parallel ? c.tp : 1.0;
  c.fp8 = quantizes_linear(t.precision);
  c.nvfp4 = t.precision == Precision::fp4;
  c.userbuffers = c.r.tp_comm_overlap;
  // Under FP8 or FP4 only the linear layers use the low-precision units; everything else runs in bf16 (fp16 where
  // bf16 is absent).
  c.peak_flops =
      c.fp8 ? (sys.peak_flops_bf16 > 0 ? sys.peak_flops_bf16 : sys.peak_flops_fp16) : sys.peak_flops(t.precision);
  c.peak_flops_linear = sys.peak_flops(t.precision);
  if (c.nvfp4) c.peak_flops_linear *= sys.fp4_gemm_throughput;
  if (t.precision == Precision::fp8 && t.fp8_recipe == Fp8Recipe::blockwise)
    c.peak_flops_linear *= sys.fp8_block_scaled_gemm_throughput;
  c.hbm_bw = sys.hbm_bandwidth_bytes_per_s;
  c.intra = use_link(sys.intra_node, p.intra_node_bandwidth_efficiency, p);
  c.inter = use_link(sys.inter_node, p.inter_node_bandwidth_efficiency, p);
  // The group table. Rank order tp, cp, dp, pp (Megatron-LM's RankGenerator order tp-cp-ep-dp-pp); the experts of
  // a stage fold over its tp·cp·dp ranks in the order etp, ep, edp (the expert rank generator).
  // With etp = tp that is ep inside dp·cp.
  const double node = sys.devices_per_node;
  // The node's link shares by group shape, worked out once with its link matrix (NodeLinks): a lookup per group.
  // Only the context-parallel ring sends point to point inside its group (the pipeline's pairs are set below); the
  // other groups' p2p_share is their ring's, never read.
  const LinkTable links(sys);
  // A stride as the link table takes it: any stride of a node's size or more places no two members in one node,
  // so larger ones (up to tp·cp·dp·pp, beyond an int's range) are held at 2^30 rather than converted out of range.
  const auto stride_of = [](double stride) { return static_cast<int>(std::min(stride, 1073741824.0)); };
  auto set = [&](Group g, double size, double stride) {
    GroupUse& gu = c.groups[static_cast<std::size_t>(g)];
    gu = place(size, stride, node);
    const int members = static_cast<int>(gu.per_node), step = stride_of(stride);
    gu.intra_share = links.ring_bandwidth_share(members, step);
    const bool ring = g == Group::cp || g == Group::cp_ring;
    gu.p2p_share = ring ? links.ring_neighbour_share(members, step) : gu.intra_share;
  };
  set(Group::tp, c.tp, 1);
  // Under a2a+p2p the Ulysses part is the inner cp_ulysses ranks (stride tp) and the ring runs over the parts
  // (stride tp·cp_ulysses), as Megatron-core's hierarchical context-parallel groups are built.
  set(Group::cp, c.cp_ulysses > 1 ? c.cp_ulysses : c.cp, c.tp);
  set(Group::cp_ring, c.cp_ulysses > 1 ? c.cp_ring : 1, c.tp * c.cp_ulysses);
  set(Group::ep, c.ep, c.etp);
  set(Group::etp, c.etp, 1);
  // The expert-TP x EP ranks, contiguous: only the all-gather and flex dispatchers send over them (a group of 1
  // otherwise).
  if (m.is_moe() && t.moe_token_dispatcher_type != MoeDispatcher::alltoall) set(Group::tp_ep, c.etp * c.ep, 1);
  set(Group::dp, c.dp * c.cp, c.tp);
  set(Group::edp, c.tp * c.cp * c.dp / (c.ep * c.etp), c.etp * c.ep);
  // Delayed FP8 scaling's amax reduction group: a stage's tp·cp·dp ranks, contiguous (visit_chunk_collectives);
  // with --tp-only-amax-red its tp·cp ranks.
  if (t.reduces_delayed_amax()) set(Group::amax, c.tp * c.cp * (t.tp_only_amax_red ? 1 : c.dp), 1);
  // Point-to-point between neighbouring stages: across nodes as soon as the whole job leaves one node.
  // Neighbouring stages are tp·cp·dp ranks apart; the first and last stage (tied embeddings) (pp-1)·tp·cp·dp.
  const double stage = c.tp * c.cp * c.dp, crosses = stage * c.pp > node ? 2.0 : 1.0;
  const double pp_pair = links.ring_bandwidth_share(2, stride_of(stage), true);
  c.groups[static_cast<std::size_t>(Group::pp)] = GroupUse{2, 1, crosses, pp_pair, pp_pair};
  const double edge_pair = links.ring_bandwidth_share(2, stride_of(stage * (c.pp - 1)));
  c.groups[static_cast<std::size_t>(Group::embedding)] = GroupUse{2, 1, crosses, edge_pair, edge_pair};
  return c;
}

// Parameters of one rank: dense (reduced over dp·cp) and expert (sharded over ep·etp, reduced over the
// expert-data-parallel group).
struct StageParams {
  double dense, expert;
  double trainable = 0;  // under LoRA the adapters' (dense-class: reduced over dp·cp); the rest is frozen
};

// What one layer keeps for backward (per micro-batch) and owns, on one rank: one fold over its ops.
struct LayerFootprint {
  double full = 0;        // everything the layer's ops keep
  double checkpoint = 0;  // what full recompute keeps: the layer's input
  // What each --recompute-modules submodule frees: normal checkpointing keeps only the module's input,
  // output-discarding checkpointing drops its output.
  std::array<double, kNumRecomputeModules> module{};
  StageParams params{0, 0};  // the weights its ops own, as sharded
};
LayerFootprint layer_footprint(const Ctx& c, bool moe) {
  LayerFootprint a{};
  visit_layer(c, moe, [&](const LayerOp& o) {
    a.full += o.stored;
    if (o.frees != RecomputeModule::none) a.module[static_cast<std::size_t>(o.frees)] += o.stored;
    (o.expert_params ? a.params.expert : a.params.dense) += o.params;
    if (o.is_gemm && o.gemm.adapter) a.params.trainable += o.params;  // LoRA's: the only ones with gradients
  });
  // A layer's input: split over TP under SP, and with --distribute-saved-activations (which needs SP off).
  a.checkpoint = 2 * c.tokens * c.h / (c.r.distribute_saved_activations ? c.tp : c.sp_div);
  return a;
}

LayerActivation layer_activation_from(const Ctx& c, const LayerFootprint& a) {
  const double full = a.full;
  switch (c.r.s.recompute) {
    case Recompute::none: return {full, 0};
    case Recompute::selective: {
      // The replayed modules' freed bytes; the largest checkpoint (a module, or a whole MoE layer) is alive again
      // while it is recomputed.
      double freed = 0, live = 0, moe_layer = 0;
      for (int i = 0; i < kNumRecomputeModules; ++i) {
        const auto r = static_cast<RecomputeModule>(i);
        if (!replays(c.t, r)) continue;
        const double b = a.module[static_cast<std::size_t>(i)];
        freed += b;
        const bool in_moe_layer =
            r == RecomputeModule::moe || r == RecomputeModule::moe_act || r == RecomputeModule::shared_experts;
        if (in_moe_layer && c.t.recomputes(RecomputeModule::moe))
          moe_layer += b;  // inside the MoE layer's checkpoint
        else
          live = std::max(live, b);
      }
      return {full - freed, std::max(live, moe_layer)};
    }
    case Recompute::full: return {a.checkpoint, full};
  }
  return {full, 0};
}

// Time of one layer's passes for one micro-batch. Communication is split into exposed and hidden per group.
struct LayerTime {
  double fwd_compute, bwd_compute, recompute, attn_fwd;
  double model_flops;  // 3x the forward GEMM FLOPs of the layer (model FLOPs, no recompute)
  double fp8_gemms;    // GEMMs run in FP8 per pass (one per expert of a grouped linear)
  double tp_fwd, tp_bwd, cp_fwd, cp_bwd, cp_hidden, ep_fwd, ep_bwd;
  double ep_alone;  // exposed EP all-to-all of a pass that has no other micro-batch to overlap with
  // Seconds each group's hidden traffic keeps its links busy under the forward / backward compute (TP's is all of
  // its hidden time; the CP ring's hidden time is net of the compute it slows, cp_hidden).
  double tp_link_fwd, tp_link_bwd, cp_link_fwd, cp_link_bwd, ep_link_fwd, ep_link_bwd;
  double tp_hidden() const { return tp_link_fwd + tp_link_bwd; }
};

constexpr std::size_t kNumRoles = 7;
inline std::size_t role_index(OpRole r) { return static_cast<std::size_t>(r); }

// Without gradient-accumulation fusion each weight-gradient GEMM writes a 16-bit gradient that Megatron's backward
// hook adds into the gradient buffer (main_grad.add_): the buffer read and written, the gradient read, one kernel
// per GEMM call, every micro-batch. Megatron-FSDP's hook copies it into the unsharded bucket its reduce-scatter
// sends (main_grad.copy_: the buffer written, not read). Fused, the GEMM accumulates in place at no extra cost.
double unfused_wgrad_accumulation_s(const Ctx& c, double weights, double gemm_calls) {
  if (c.t.gradient_accumulation_fusion) return 0;
  const double buffer_passes = c.r.fsdp ? 1.0 : 2.0;
  return vector_time_s(c, weights * (2 + buffer_passes * grad_bytes_per_param(c.t)), gemm_calls);
}

LayerTime layer_time(const Ctx& c, bool moe) {
  LayerTime lt{};
  // One forward call and one input-gradient call of each role's GEMMs (compute that can hide a collective).
  std::array<double, kNumRoles> call{}, input_grad{};
  std::array<double, kNumRecomputeModules + 1> module_gemm_fwd{};  // forward GEMM time per recompute module
  double gemm_fwd = 0, gemm_bwd = 0, weights = 0, weight_gemms = 0;
  VectorWork v;
  visit_layer(c, moe, [&](const LayerOp& o) {  // one pass: GEMMs and memory-bound work
    if (!o.is_gemm) {
      v.add(o);
      return;
    }
    const Gemm& g = o.gemm;
    const GemmTime gt = gemm_time(c, g);
    module_gemm_fwd[static_cast<std::size_t>(g.module)] += gt.forward;
    // Model FLOPs count causal attention at half whether or not the kernel skips the masked blocks, and a frozen
    // (LoRA) GEMM's forward and input gradient only.
    const double causal = (g.role == OpRole::attn_core && !c.t.flash_attention) ? 0.5 : 1.0;
    const bool fixed = frozen(c, g);
    lt.model_flops += (fixed ? 2 : 3) * 2 * g.batch * g.m * g.n * g.k * causal;
    if (runs_fp8(c, g)) lt.fp8_gemms += g.batch;
    call[role_index(g.role)] += gt.call;
    input_grad[role_index(g.role)] += gt.input_grad;
    if (has_weight(g.role) && !fixed) {
      weights += o.params;
      weight_gemms += g.launches;
    }
    gemm_fwd += gt.forward;
    gemm_bwd += gt.backward;
  });
  const double score_fwd = vector_time_s(c, v.score_fwd_bytes, 0);
  const double score_bwd = vector_time_s(c, v.score_bwd_bytes, 0);
  lt.fwd_compute = gemm_fwd + vector_time_s(c, v.fwd_bytes, v.fwd_kernels) + score_fwd;
  lt.bwd_compute = gemm_bwd + vector_time_s(c, v.bwd_bytes, v.bwd_kernels()) + score_bwd +
                   unfused_wgrad_accumulation_s(c, weights, weight_gemms);
  lt.attn_fwd = call[role_index(OpRole::attn_core)] + score_fwd;
  // Compute that can hide a collective: a linear's forward call or (backward) its input-gradient call, as long as
  // its weight-gradient one unless userbuffers split it; or the attention core (forward; backward is twice as long).
  auto window = [&](OpRole r, bool backward) {
    if (r == OpRole::head) return 0.0;
    if (r == OpRole::attn_core) return backward ? 2 * lt.attn_fwd : lt.attn_fwd;
    return (backward ? input_grad : call)[role_index(r)];
  };
  const double nccl_share = nccl_contention_share(c);
  visit_layer_collectives(c, moe, [&](const Collective& k) {
    const double one = collective_time_s(c, k.prim, k.group, k.bytes);
    const double f = k.fwd * one, b = k.bwd * one;
    const double fe = std::max(0.0, f - window(k.hide_fwd, false)), be = std::max(0.0, b - window(k.hide_bwd, true));
    switch (k.group) {
      case Group::tp:
        lt.tp_fwd += fe;
        lt.tp_bwd += be;
        lt.tp_link_fwd += f - fe;
        lt.tp_link_bwd += b - be;
        break;
      case Group::cp:
      case Group::cp_ring: {
        // The ring's NCCL sends beside the attention core slow it as overlapped DP traffic does (`nccl_share`).
        const double cost = nccl_share * (f - fe + b - be);
        lt.cp_fwd += fe + nccl_share * (f - fe);
        lt.cp_bwd += be + nccl_share * (b - be);
        lt.cp_hidden += f - fe + b - be - cost;
        lt.cp_link_fwd += f - fe;
        lt.cp_link_bwd += b - be;
        break;
      }
      default:
        lt.ep_fwd += fe;
        lt.ep_bwd += be;
        break;
    }
  });
  // --overlap-moe-expert-parallel-comm: the steady 1F1B phase runs one micro-batch's forward beside another's
  // backward, layer by layer, so each one's dispatch / combine all-to-alls hide under the other's compute, which
  // they slow by the share of the GPU they take (`ep_contention_share`), as overlapped DP traffic does.
  lt.ep_alone = lt.ep_fwd + lt.ep_bwd;
  if (c.r.moe_a2a_overlap && moe) {
    const double ep = lt.ep_fwd + lt.ep_bwd, exposed = std::max(0.0, ep - (lt.fwd_compute + lt.bwd_compute));
    const double scale = ep > 0 ? (exposed + ep_contention_share(c) * (ep - exposed)) / ep : 0;
    const double hidden = ep > 0 ? (ep - exposed) / ep : 0;  // share of each pass's exchange under the other's
    lt.ep_link_fwd = hidden * lt.ep_fwd;
    lt.ep_link_bwd = hidden * lt.ep_bwd;
    lt.ep_fwd *= scale;
    lt.ep_bwd *= scale;
  }
  switch (c.r.s.recompute) {
    case Recompute::none: break;
    // Selective recompute re-runs the forward of each --recompute-modules submodule: by default the attention
    // core (scores, softmax, dropout, scores·V); the MoE layer re-runs its dispatch / combine all-to-alls too.
    case Recompute::selective:
      for (int i = 0; i < kNumRecomputeModules; ++i) {
        const auto r = static_cast<RecomputeModule>(i);
        const auto k = static_cast<std::size_t>(i);
        if (!replays(c.t, r)) continue;
        // The core, its memory-bound work (CP's step merge) and its context-parallel exchange not hidden under
        // it (Transformer Engine's attention runs the CP communication inside the checkpointed module).
        if (r == RecomputeModule::core_attn) {
          lt.recompute += lt.attn_fwd + vector_time_s(c, v.module_fwd_bytes[k], v.module_fwd_kernels[k]) + lt.cp_fwd;
          continue;
        }
        const double gemms = module_gemm_fwd[k], bytes = v.module_fwd_bytes[k];
        if (bytes > 0 || gemms > 0) lt.recompute += gemms + vector_time_s(c, bytes, v.module_fwd_kernels[k]);
        if (r == RecomputeModule::moe && moe) lt.recompute += lt.ep_fwd;  // the MoE layer re-dispatches its tokens
      }
      break;
    case Recompute::full: lt.recompute = lt.fwd_compute + lt.tp_fwd + lt.cp_fwd + lt.ep_fwd; break;
  }
  return lt;
}

struct EdgeTime {
  double fwd, bwd, tp_fwd, tp_bwd;
};
EdgeTime edge_time(const Ctx& c, bool first, bool last) {
  EdgeTime e{};
  if (!first && !last) return e;
  const double act = c.tokens * c.h * 2;
  if (first) {  // embedding lookup and its gradient scatter
    e.fwd += vector_time_s(c, 2 * act, 2);
    e.bwd += vector_time_s(c, 2 * act, 2);
  }
  if (last) {
    const Gemm head = head_gemm(c);
    const GemmTime g = gemm_time(c, head);
    e.fwd += g.forward;
    e.bwd += g.backward + unfused_wgrad_accumulation_s(c, head.n * head.k, 1);
    // Only Transformer Engine's cross entropy is one kernel; Megatron's vocab-parallel cross entropy is a chain of
    // PyTorch ops whatever else is fused (its native --cross-entropy-loss-fusion, June 2024, is read as that chain).
    const bool fused = c.t.fused_kernels && c.t.te_cross_entropy;
    const double logits = c.tokens * c.vocab_padded / c.tp;
    e.fwd += vector_time_s(c, 2 * act / c.sp_div + logits * (fused ? kLossBytesFwdFused : kLossBytesFwdUnfused),
                           fused ? 4 : 12);
    e.bwd += vector_time_s(c, 4 * act / c.sp_div + logits * (fused ? kLossBytesBwdFused : kLossBytesBwdUnfused),
                           fused ? 4 : 8);
    if (c.m->final_logit_softcapping > 0) {
      e.fwd += vector_time_s(c, logits * kSoftcapBytesFwd, kSoftcapKernels);
      e.bwd += vector_time_s(c, logits * kSoftcapBytesBwd, kSoftcapKernels);
    }
  }
  visit_edge_collectives(c, first, last, [&](const Collective& k) {
    const double one = collective_time_s(c, k.prim, k.group, k.bytes);
    e.tp_fwd += k.fwd * one;
    e.tp_bwd += k.bwd * one;
  });
  return e;
}

// The settings a layer that first_last_layers_bf16 keeps out of FP8 runs under: the run's, in BF16 (the run's own
// where it has no such layers).
TrainingSettings bf16_layer_settings(const TrainingSettings& t) {
  if (!t.runs_bf16_ends()) return t;
  TrainingSettings b = t;
  b.precision = Precision::bf16;
  b.fp8_param_gather = false;
  b.first_last_layers_bf16 = false;
  return b;
}

// Number of MoE layers among [lo, hi).
double moe_layers_in(const Model& m, std::int64_t lo, std::int64_t hi) {
  if (!m.is_moe()) return 0;
  const std::int64_t start = std::max(lo, m.first_dense_layers);
  if (start >= hi) return 0;
  const std::int64_t fq = m.moe_layer_frequency;
  // Every layer from first_dense_layers on (the common case, without the divisions below).
  if (fq == 1) return static_cast<double>(hi - start);
  auto upto = [&](std::int64_t x) {  // MoE layers in [first_dense_layers, x)
    return x <= m.first_dense_layers ? 0 : (x - m.first_dense_layers + fq - 1) / fq;
  };
  return static_cast<double>(upto(hi) - upto(start));
}

// Layers of one pipeline chunk of n that full recompute replays, and the checkpoints it keeps: Megatron-core's
// checkpointed forward (megatron/core/recompute.py) runs uniform groups of N layers, each keeping only its input and
// replayed whole, or (block) checkpoints the chunk's first N layers one by one and runs the rest plainly. Without
// full recompute: none (selective recompute replays modules of every layer; see stage_counts).
struct ChunkReplay {
  std::int64_t replayed = 0, checkpoints = 0;
};
ChunkReplay chunk_replay(const Strategy& s, std::int64_t n) {
  if (s.recompute != Recompute::full) return {};
  const std::int64_t k = std::max(1, s.recompute_num_layers);
  if (s.recompute_method == RecomputeMethod::block) return {std::min(k, n), std::min(k, n)};
  return {n, (n + k - 1) / k};
}

// The layers pipeline rank i holds: its chunks i, i + p, ..., i + (v - 1)·p of the split.
struct StageLayers {
  int first = 0;
  double layers = 0, moe = 0;  // transformer layers, of which MoE
  int mtp = 0;                 // multi-token-prediction modules (on the last chunk)
  // Under full recompute: layers replayed (of which MoE), checkpoints kept, and the layers one replay
  // re-materialises at once (a uniform group, at most the widest chunk).
  double replayed = 0, replayed_moe = 0, checkpoints = 0, replay_group = 1;
  double bf16 = 0, bf16_moe = 0;  // layers run in BF16 under FP8 (first_last_layers_bf16), of which MoE
  // The same layers, wherever they start.
  bool same_layers(const StageLayers& o) const {
    return layers == o.layers && moe == o.moe && mtp == o.mtp && replayed == o.replayed &&
           replayed_moe == o.replayed_moe && checkpoints == o.checkpoints && replay_group == o.replay_group &&
           bf16 == o.bf16 && bf16_moe == o.bf16_moe;
  }
};
// A dense model split into whole chunks of `middle` layers but the two ends, with every layer of a chunk replayed
// alike and run in one precision: its middle stages hold the same layers.
bool middle_stages_alike(const Model& m, const PipelineSplit& sp, const Strategy& s, const TrainingSettings& t) {
  const bool partial = s.recompute == Recompute::full && s.recompute_num_layers > 0;
  return !m.is_moe() && sp.kind != SplitKind::uneven && !partial && !t.runs_bf16_ends();
}
// The BF16 layers among [lo, hi) (first_last_layers_bf16: the model's first and last layers), and of them MoE.
void add_bf16_layers(const Model& m, const TrainingSettings& t, std::int64_t lo, std::int64_t hi, StageLayers& out) {
  const std::int64_t ranges[2][2] = {{0, t.bf16_layers_at_start()},
                                     {m.num_layers - t.bf16_layers_at_end(), m.num_layers}};
  for (const auto& r : ranges) {
    const std::int64_t a = std::max(lo, r[0]), b = std::min(hi, r[1]);
    if (a >= b) continue;
    out.bf16 += static_cast<double>(b - a);
    out.bf16_moe += moe_layers_in(m, a, b);
  }
}
StageLayers stage_layers(const Model& m, const PipelineSplit& sp, const Strategy& s, const TrainingSettings& t, int i) {
  const int pp = s.pipeline_parallel, vpp = s.virtual_pipeline;
  StageLayers out;
  out.first = static_cast<int>(sp.first_layer_of_chunk(i, m.num_layers));
  if (i == pp - 1) out.mtp = static_cast<int>(m.mtp_layers);
  if (middle_stages_alike(m, sp, s, t)) {  // dense: every chunk holds `middle` but the two ends
    if (sp.chunks == 1) {
      out.layers = static_cast<double>(sp.first);
    } else {
      out.layers = static_cast<double>(vpp) * static_cast<double>(sp.middle);
      if (i == 0) out.layers += static_cast<double>(sp.first - sp.middle);
      if (i == pp - 1) out.layers += static_cast<double>(sp.last - sp.middle);
    }
    if (s.recompute == Recompute::full) out.replayed = out.checkpoints = out.layers;
    return out;
  }
  std::int64_t widest = 0;
  for (int v = 0; v < vpp; ++v) {
    const std::int64_t chunk = static_cast<std::int64_t>(v) * pp + i;
    const std::int64_t lo = sp.first_layer_of_chunk(chunk, m.num_layers), n = sp.layers_of_chunk(chunk, m.num_layers);
    out.layers += static_cast<double>(n);
    out.moe += moe_layers_in(m, lo, lo + n);
    const ChunkReplay r = chunk_replay(s, n);
    out.replayed += static_cast<double>(r.replayed);
    if (r.replayed > 0) out.replayed_moe += moe_layers_in(m, lo, lo + r.replayed);
    out.checkpoints += static_cast<double>(r.checkpoints);
    if (t.runs_bf16_ends()) add_bf16_layers(m, t, lo, lo + n, out);
    widest = std::max(widest, n);
  }
  if (s.recompute_method == RecomputeMethod::uniform && s.recompute_num_layers > 1)
    out.replay_group = static_cast<double>(std::min<std::int64_t>(s.recompute_num_layers, widest));
  return out;
}

// A stage's layers by kind — MTP modules counted as layers of the kind of the model's last layer — and those whose
// forward backward replays: all of them under selective recompute (their chosen modules), the replayed ones under
// full recompute (MTP modules too, except under block, which Megatron-core does not apply to them), none without.
struct StageCounts {
  double dense, moe, replay_dense, replay_moe;
  double stored_layers;  // under full recompute: checkpoints kept (MTP modules' included)
  // Of those, the layers run in BF16 (first_last_layers_bf16), and their replays: all under selective recompute;
  // under full recompute their kind's replayed share (exact but for block recompute's partial chunks).
  double bf16_dense, bf16_moe, replay_bf16_dense, replay_bf16_moe;
};
StageCounts stage_counts(const Model& m, const Strategy& s, const StageLayers& sl) {
  const bool mtp_moe = m.layer_is_moe(m.num_layers - 1);
  StageCounts k{};
  k.moe = sl.moe + (mtp_moe ? sl.mtp : 0);
  k.dense = sl.layers - sl.moe + (mtp_moe ? 0 : sl.mtp);
  if (s.recompute == Recompute::selective) {
    k.replay_dense = k.dense;
    k.replay_moe = k.moe;
  } else if (s.recompute == Recompute::full) {
    const double mtp = s.recompute_method == RecomputeMethod::block ? 0.0 : sl.mtp;
    k.replay_moe = sl.replayed_moe + (mtp_moe ? mtp : 0);
    k.replay_dense = sl.replayed - sl.replayed_moe + (mtp_moe ? 0 : mtp);
    k.stored_layers = sl.checkpoints + mtp;
  }
  if (sl.bf16 > 0) {
    k.bf16_moe = sl.bf16_moe;
    k.bf16_dense = sl.bf16 - sl.bf16_moe;
    k.replay_bf16_dense = k.dense > 0 ? k.bf16_dense * k.replay_dense / k.dense : 0.0;
    k.replay_bf16_moe = k.moe > 0 ? k.bf16_moe * k.replay_moe / k.moe : 0.0;
  }
  return k;
}

// In-flight micro-batches' worth of a stage's layers held at the activation peak. 1F1B: stage i holds
// min(p - i, m); interleaved 1F1B (Megatron's warm-up count) holds (p - i - 1)·2 + (v - 1)·N + 1 chunks of
// L/(p·v) layers, at most m·v, N the micro-batches a virtual stage runs in a row (p by default). Without pipelining
// micro-batches run one after another.
double inflight(int pp, int vpp, std::int64_t mb, int i, std::int64_t group) {
  if (pp == 1) return 1;
  if (vpp == 1) return static_cast<double>(std::min<std::int64_t>(pp - i, mb));
  const std::int64_t chunks =
      static_cast<std::int64_t>(pp - i - 1) * 2 + static_cast<std::int64_t>(vpp - 1) * group + 1;
  return static_cast<double>(std::min(chunks, mb * vpp)) / vpp;
}

// Share of a stage's chunk passes with no other micro-batch's pass beside them: the warm-up forwards (and as many
// cool-down backwards) of Megatron's schedules — (p − i − 1)·2 + (v − 1)·N chunks interleaved, p − i − 1
// micro-batches in 1F1B, the first forward (and last backward) without pipelining — over m·v.
double unpaired_share(int pp, int vpp, std::int64_t mb, int i, std::int64_t group) {
  const double warmup = pp == 1   ? 1.0
                        : vpp > 1 ? static_cast<double>((pp - i - 1) * 2 + (vpp - 1) * group)
                                  : static_cast<double>(pp - i - 1);
  return std::min(1.0, warmup / (static_cast<double>(mb) * vpp));
}

// Data-parallel traffic run beside other work. Time in which the stage idles (its pipeline slack) carries it for
// free; beside compute it hides up to that compute's length but slows it, NCCL's kernels taking SMs and HBM
// bandwidth from the GEMMs (Megatron-core's interleaved schedule launches its gradient reductions "at the same time
// across the pipeline-parallel group" because "asynchronous communication tends to slow down compute"): each second
// hidden so costs `share` seconds (`dp_contention_share`). What neither holds is exposed.
struct Overlapped {
  double exposed_s, hidden_s;
};
Overlapped overlap_dp_traffic(double comm_s, double idle_s, double busy_s, double share) {
  const double idle = std::min(comm_s, idle_s);
  const double busy = std::min(comm_s - idle, busy_s);
  return {comm_s - idle - (1 - share) * busy, idle + (1 - share) * busy};
}

// The links a group's traffic is bound by: the network once the group spans nodes, else the node's own links. Two
// groups bound by the same links carry one collective's bytes at a time.
bool shares_links(const GroupUse& a, const GroupUse& b) { return (a.nodes > 1) == (b.nodes > 1); }

// One micro-batch's pass through a stage as the data-parallel traffic sees it: its compute less the seconds it
// already hides other traffic on the DP group's links under (busy: a link carries one collective at a time), and
// the collectives it leaves exposed on other links, beside which the DP traffic runs as in idle time (free).
struct PassWindow {
  double busy_s, free_s;
};

// How much of a stage's once-per-iteration DP traffic its compute can hold, as Megatron-core's schedules launch it
// (pipeline_parallel/schedules.py). Without interleaving the traffic is bucketed inside the one pass it follows
// (the last micro-batch's backward for the gradients, the first forward for the parameters): up to that pass.
// Interleaved, each model chunk's share (1/v) goes as a whole: a chunk's gradient reduction is launched after its
// last micro-batch's backward (grad_sync_func), and the backward visits the chunks from the last to the first in
// groups of `group` micro-batches, so chunk j finishes j·group chunk-backwards before the end; one reduction at a
// time, every chunk's but the first (last done) hides behind what follows it, at most group chunk-passes each.
// A chunk's parameter gather (param_sync_func) is launched at the first forward of the chunk before it, group
// chunk-forwards ahead of its own; the first chunk's is bucketed inside its own first forward.
// `pass_s`: one micro-batch's pass over all of the stage's chunks.
double dp_hiding_window_s(double comm_s, double pass_s, int vpp, std::int64_t group, bool bucketed_first) {
  if (vpp <= 1) return pass_s;
  const double chunk_comm = comm_s / vpp, chunk_pass = pass_s / vpp;
  const double spacing = static_cast<double>(group) * chunk_pass;
  return (bucketed_first ? chunk_pass : 0.0) + (vpp - 1) * std::min(chunk_comm, spacing);
}

// DP traffic beside a stage's passes: the window `dp_hiding_window_s` gives over the pass's busy and free seconds
// together, its free share carrying traffic as the stage's idle `slack_s` does.
Overlapped overlap_beside_pass(double comm_s, double slack_s, const PassWindow& pass, int vpp, std::int64_t group,
                               bool bucketed_first, double share) {
  const double length = pass.busy_s + pass.free_s;
  const double window = dp_hiding_window_s(comm_s, length, vpp, group, bucketed_first);
  const double free = length > 0 ? window * pass.free_s / length : 0.0;
  return overlap_dp_traffic(comm_s, slack_s + free, window - free, share);
}

// A rank of a stage: its layers (MTP modules are layers too), plus the embedding, the final norm and the head.
// The parameters with gradients, optimizer state and data-parallel traffic: all of them, or under LoRA only the
// adapters (dense-class; the frozen base has none).
StageParams with_gradients(const TrainingSettings& t, const StageParams& sp) {
  return t.lora() ? StageParams{sp.trainable, 0, sp.trainable} : sp;
}

StageParams stage_params(const Ctx& c, const StageParams& dense_layer, const StageParams& moe_layer,
                         const StageLayers& sl, const StageCounts& n, bool is_first, bool is_last) {
  const Model& m = *c.m;
  double dense = n.dense * dense_layer.dense + n.moe * moe_layer.dense;
  dense += sl.mtp * (2 * c.h * c.h / c.tp + 2 * norm_weights(m) * c.h);  // MTP: 2h -> h projection, its two norms
  const double expert = n.moe * moe_layer.expert;
  const double head = c.vocab_padded * c.h / c.tp;
  if (is_first) dense += head + position_table_rows(c) * c.h;
  const double final_norm = norm_weights(m) * c.h;
  if (is_last) dense += final_norm + ((!m.tied_embeddings || c.pp > 1) ? head : 0.0);
  // An untied model's MTP stage keeps an embedding copy beside its output layer (keeps_embedding_copy).
  if (is_last && !m.tied_embeddings && sl.mtp > 0 && keeps_embedding_copy(c)) dense += head;
  return {dense, expert, n.dense * dense_layer.trainable + n.moe * moe_layer.trainable};
}

}  // namespace detail

using namespace detail;

// The model's parameter counts: the layers' op lists on one unsharded rank (every expert on it).
ParamCount count_params(const Model& m) {
  // Ctx keeps pointers to the system and θ: they must outlive it (no temporaries).
  const System sys{};
  const PlatformParams p{};
  const Ctx c = make_ctx(m, Strategy{}, sys, TrainingSettings{}, p);
  const StageParams dense = layer_footprint(c, false).params;
  const StageParams moe = m.is_moe() ? layer_footprint(c, true).params : StageParams{0, 0};
  const double h = static_cast<double>(m.hidden_size);
  const double moe_layers = static_cast<double>(m.num_moe_layers());
  const double dense_layers = static_cast<double>(m.num_layers) - moe_layers;
  const double experts = static_cast<double>(m.num_experts), topk = static_cast<double>(m.experts_per_token);
  const double final_norm = norm_weights(m) * h;
  ParamCount out;
  out.embedding = static_cast<double>(m.vocab_size + learned_positions(m)) * h;
  out.output_head = m.tied_embeddings ? 0.0 : out.embedding;
  const double common = dense_layers * dense.dense + moe_layers * moe.dense + final_norm;
  out.non_embedding = common + moe_layers * moe.expert;
  out.total = out.non_embedding + out.embedding + out.output_head;
  out.active_per_token =
      common + (experts > 0 ? moe_layers * moe.expert * topk / experts : 0.0) + out.embedding + out.output_head;
  return out;
}

LayerActivation layer_activation(const Model& m, const Strategy& s, const TrainingSettings& t, const PlatformParams& p,
                                 bool moe_layer) {
  const System dummy{};
  const Ctx c = make_ctx(m, s, dummy, t, p);
  return layer_activation_from(c, layer_footprint(c, moe_layer));
}

namespace {
bool precision_runs(const System& sys, const TrainingSettings& t) {
  if (!(sys.peak_flops(t.precision) > 0)) return false;
  if (!quantizes_linear(t.precision)) return true;
  return (sys.peak_flops_bf16 > 0 || sys.peak_flops_fp16 > 0) &&
         (t.precision != Precision::fp8 || t.fp8_recipe != Fp8Recipe::mxfp8 || sys.mxfp8);
}
}  // namespace

std::optional<SettingsProblem> precision_problem(const System& sys, const TrainingSettings& t) {
  if (precision_runs(sys, t)) return std::nullopt;
  if (!(sys.peak_flops(t.precision) > 0))
    return SettingsProblem{"precision",
                           std::string("has no ") + to_string(t.precision) + " throughput; choose another precision"};
  if (!(sys.peak_flops_bf16 > 0 || sys.peak_flops_fp16 > 0))
    return SettingsProblem{"precision", std::string("has no 16-bit throughput for the layers ") +
                                            to_string(t.precision) + " leaves out; choose another precision"};
  return SettingsProblem{"fp8_recipe",
                         "has no MXFP8 tensor cores (fp8_recipe mxfp8 needs Blackwell or later); choose fp8_recipe "
                         "tensorwise, delayed or blockwise"};
}

std::string precision_unsupported(const System& sys, const TrainingSettings& t) {
  const auto problem = precision_problem(sys, t);
  return problem ? problem->why : std::string();
}

Prediction simulate(const Model& m, const Strategy& s, const System& sys, const TrainingSettings& t,
                    const PlatformParams& p, const SimOptions& o) {
  Prediction pr;
  pr.rejection = check(m, s, t, o.validity);
  if (pr.rejection == Rejection::ok && !precision_runs(sys, t)) pr.rejection = Rejection::precision_unsupported;
  // DeepEP and HybridEP are CUDA kernels (NVSHMEM / NVLink): an NVIDIA GPU's system says its SMs.
  if (pr.rejection == Rejection::ok && m.is_moe() && t.moe_token_dispatcher_type == MoeDispatcher::flex &&
      sys.sm_count <= 0)
    pr.rejection = Rejection::flex_dispatcher_unsupported;
  if (pr.rejection != Rejection::ok) return pr;
  const PipelineSplit split = *pipeline_split(m, s, o.validity.allow_uneven_layers);
  pr.pipeline_split = split.kind;
  const Ctx c = make_ctx(m, s, sys, t, p);
  // A model without dense layers (Qwen3-30B-A3B) has its MoE layer in the dense slots too: no layer counts as
  // dense, and the per-layer report gives the MoE layer.
  const bool dense_layers = m.has_dense_layers(), two_kinds = m.is_moe() && dense_layers;
  const LayerFootprint dense_f = layer_footprint(c, !dense_layers);
  const LayerFootprint moe_f = two_kinds ? layer_footprint(c, true) : dense_f;
  const StageParams dense_params = dense_f.params, moe_params = moe_f.params;
  const int pp = s.pipeline_parallel, vpp = s.virtual_pipeline;
  const std::int64_t mb = c.r.num_micro_batches;
  pr.num_micro_batches = mb;
  pr.num_stages = pp;

  const LayerTime dense_t = layer_time(c, !dense_layers);
  const LayerTime moe_t = two_kinds ? layer_time(c, true) : dense_t;
  const LayerActivation dense_a = layer_activation_from(c, dense_f);
  const LayerActivation moe_a = two_kinds ? layer_activation_from(c, moe_f) : dense_a;
  // The same layers run in BF16, for the model's first and last ones under first_last_layers_bf16 (only then).
  struct Bf16Layers {
    LayerTime dense_t, moe_t;
    LayerActivation dense_a, moe_a;
  };
  std::optional<Bf16Layers> bf16;
  if (t.runs_bf16_ends()) {
    const Ctx cb = make_ctx(m, s, sys, bf16_layer_settings(t), p);
    const LayerTime d = layer_time(cb, !dense_layers);
    const LayerActivation da = layer_activation_from(cb, layer_footprint(cb, !dense_layers));
    bf16.emplace(Bf16Layers{d, two_kinds ? layer_time(cb, true) : d, da,
                            two_kinds ? layer_activation_from(cb, layer_footprint(cb, true)) : da});
  }

  double p2p = 0;  // pipeline traffic of one micro-batch through one chunk boundary, forward + backward
  visit_pipeline_collectives(
      c, [&](const Collective& k) { p2p += (k.fwd + k.bwd) * collective_time_s(c, k.prim, k.group, k.bytes); });
  double checkpoint_gather = 0;  // per kept checkpoint and micro-batch (--distribute-saved-activations)
  visit_checkpoint_collectives(c, [&](const Collective& k) {
    checkpoint_gather += (k.fwd + k.bwd) * collective_time_s(c, k.prim, k.group, k.bytes);
  });
  // Loss peak on the last stage (the logits and what the cross entropy keeps of them).
  const double logits_bytes = ((t.te_cross_entropy ? kLogitBytesPerElementTe : kLogitBytesPerElement) +
                               (m.final_logit_softcapping > 0 ? kSoftcapKeptBytes : 0.0)) *
                              c.tokens * c.vocab_padded / c.tp;
  const double grad_bytes = grad_bytes_per_param(t);
  const double weight_bytes = weight_bytes_per_param(t, c.r);
  const double capacity = sys.hbm_capacity_bytes - o.memory_margin_bytes;
  // A multi-token-prediction module's own passes through the embedding (its shifted input tokens) and through the
  // LM head and loss, with their TP collectives (Megatron-core MultiTokenPredictionLayer; only MTP models).
  const EdgeTime mtp_edges = m.mtp_layers > 0 ? edge_time(c, true, true) : EdgeTime{};

  // What a stage costs per micro-batch and what it keeps follow from its layers and whether it holds the model's
  // ends (StageWork); where it sits in the schedule (its warm-up depth, in-flight micro-batches and the idle time
  // its DP traffic runs in) is applied per stage in the loop below. Middle stages holding the same layers share one
  // StageWork: in a uniform split it is worked out for the first, second and last stage only.
  // stage_work also fills the StageResult: every field but first_layer, ep_comm_s, per_microbatch_s, the DP terms,
  // the in-flight micro-batches and the activation, runtime and peak bytes.
  struct StageWork {
    double ld, lm;  // dense and MoE layers (MTP modules included)
    double model_flops, fsdp_exposed, fsdp_hidden, stored;
    double grad_time, param_time, grad_share, param_share;  // share: dp_contention_share, time-weighted
    PassWindow fwd, bwd;                                    // one micro-batch's forward / backward (with recompute)
  };
  // A layer's traffic as the DP traffic sees it, per pass: hidden traffic on the DP group's links (the
  // context-parallel ring's hidden traffic is the ring's) and exposed traffic on other links. Only where DP traffic
  // overlaps anything at all.
  struct LinkLoad {
    double on_fwd = 0, on_bwd = 0, off_fwd = 0, off_bwd = 0;
  };
  // The dense parameters' DP group, or where it is one rank (an MoE model's expert data parallelism alone) the
  // experts'.
  const GroupUse& dp_links = c.group(Group::dp).size > 1 ? c.group(Group::dp) : c.group(Group::edp);
  const bool dp_overlaps = dp_links.size > 1 && (t.overlap_grad_reduce || t.overlap_param_gather || c.r.fsdp);
  const bool tp_shared = shares_links(c.group(Group::tp), dp_links),
             cp_shared = shares_links(c.group(c.cp_ulysses > 1 ? Group::cp_ring : Group::cp), dp_links),
             ep_shared = shares_links(c.group(Group::ep), dp_links);
  auto link_load = [&](const LayerTime& l) {
    LinkLoad k;
    if (!dp_overlaps) return k;
    // One group's traffic of one pass: its hidden seconds where it shares the DP links, its exposed ones where not.
    auto add = [](bool shared, double hidden, double exposed, double& on, double& off) {
      if (shared)
        on += hidden;
      else
        off += exposed;
    };
    add(tp_shared, l.tp_link_fwd, l.tp_fwd, k.on_fwd, k.off_fwd);
    add(tp_shared, l.tp_link_bwd, l.tp_bwd, k.on_bwd, k.off_bwd);
    add(cp_shared, l.cp_link_fwd, l.cp_fwd, k.on_fwd, k.off_fwd);
    add(cp_shared, l.cp_link_bwd, l.cp_bwd, k.on_bwd, k.off_bwd);
    add(ep_shared, l.ep_link_fwd, l.ep_fwd, k.on_fwd, k.off_fwd);
    add(ep_shared, l.ep_link_bwd, l.ep_bwd, k.on_bwd, k.off_bwd);
    return k;
  };
  const LinkLoad dense_load = link_load(dense_t), moe_load = two_kinds ? link_load(moe_t) : dense_load;
  StageParams dp_key{-1, -1};
  double grad_time = 0, param_time = 0, grad_share = 0, param_share = 0;
  const double head_flops = (t.lora() ? 2 : 3) * 2 * c.tokens * c.vocab_padded / c.tp * c.h;  // frozen: no wgrad
  auto stage_work = [&](const StageLayers& sl, bool is_first, bool is_last, StageResult& st) {
    StageWork w{};
    // MTP modules: one layer each plus another pass through the LM head and loss.
    const StageCounts n = stage_counts(m, s, sl);
    const double ld = n.dense, lm = n.moe;
    w.ld = ld;
    w.lm = lm;
    st.num_layers = static_cast<int>(sl.layers);
    st.mtp_layers = sl.mtp;
    const EdgeTime e = edge_time(c, is_first, is_last);
    st.forward_compute_s = ld * dense_t.fwd_compute + lm * moe_t.fwd_compute + e.fwd + sl.mtp * mtp_edges.fwd;
    w.model_flops = ld * dense_t.model_flops + lm * moe_t.model_flops + (is_last ? (1 + sl.mtp) * head_flops : 0.0);
    st.backward_compute_s = ld * dense_t.bwd_compute + lm * moe_t.bwd_compute + e.bwd + sl.mtp * mtp_edges.bwd;
    st.recompute_s = n.replay_dense * dense_t.recompute + n.replay_moe * moe_t.recompute;
    const double edge_tp_fwd = e.tp_fwd + sl.mtp * mtp_edges.tp_fwd, edge_tp_bwd = e.tp_bwd + sl.mtp * mtp_edges.tp_bwd;
    st.tp_comm_s = ld * (dense_t.tp_fwd + dense_t.tp_bwd) + lm * (moe_t.tp_fwd + moe_t.tp_bwd) + edge_tp_fwd +
                   edge_tp_bwd + n.stored_layers * checkpoint_gather;
    st.tp_comm_overlapped_s = ld * dense_t.tp_hidden() + lm * moe_t.tp_hidden();
    if (t.reduces_delayed_amax()) {
      // Delayed FP8 scaling: each chunk's forward and backward end with an amax all-reduce and its kernels.
      const double chunk_gemms = (ld * dense_t.fp8_gemms + lm * moe_t.fp8_gemms) / vpp;
      visit_chunk_collectives(c, chunk_gemms, [&](const Collective& k) {
        st.tp_comm_s += vpp * (k.fwd + k.bwd) * collective_time_s(c, k.prim, k.group, k.bytes);
        const double kernels = vpp * vector_time_s(c, 2 * k.bytes, kDelayedAmaxKernels);
        (k.fwd > 0 ? st.forward_compute_s : st.backward_compute_s) += kernels;
      });
    }
    st.cp_comm_exposed_s = ld * (dense_t.cp_fwd + dense_t.cp_bwd) + lm * (moe_t.cp_fwd + moe_t.cp_bwd);
    st.cp_comm_overlapped_s = ld * dense_t.cp_hidden + lm * moe_t.cp_hidden;
    // The stage's BF16 end layers (first_last_layers_bf16) cost their BF16 twins' time, not the FP8 layers' counted
    // above (their replays at their kind's replayed share).
    const bool ends = bf16 && n.bf16_dense + n.bf16_moe > 0;
    if (ends) {
      auto delta = [&](auto get) {
        return n.bf16_dense * (get(bf16->dense_t) - get(dense_t)) + n.bf16_moe * (get(bf16->moe_t) - get(moe_t));
      };
      st.forward_compute_s += delta([](const LayerTime& l) { return l.fwd_compute; });
      st.backward_compute_s += delta([](const LayerTime& l) { return l.bwd_compute; });
      st.recompute_s += n.replay_bf16_dense * (bf16->dense_t.recompute - dense_t.recompute) +
                        n.replay_bf16_moe * (bf16->moe_t.recompute - moe_t.recompute);
      st.tp_comm_s += delta([](const LayerTime& l) { return l.tp_fwd + l.tp_bwd; });
      st.tp_comm_overlapped_s += delta([](const LayerTime& l) { return l.tp_hidden(); });
      st.cp_comm_exposed_s += delta([](const LayerTime& l) { return l.cp_fwd + l.cp_bwd; });
      st.cp_comm_overlapped_s += delta([](const LayerTime& l) { return l.cp_hidden; });
    }
    // With overlap_p2p_comm (Megatron-LM's default) the interleaved schedule posts each chunk's transfers before
    // computing the next chunk: a boundary's traffic hides under one chunk's compute, whose NCCL send/recv kernels slow
    // it as overlapped DP traffic does (1 - dp_overlap of each hidden second).
    const double chunk_compute =
        (st.forward_compute_s + st.backward_compute_s + st.recompute_s) / static_cast<double>(vpp);
    const double p2p_beyond = (t.overlap_p2p_comm && vpp > 1) ? std::max(0.0, p2p - chunk_compute) : p2p;
    const double p2p_exposed = p2p_beyond + nccl_contention_share(c) * (p2p - p2p_beyond);
    st.pp_comm_s = vpp * p2p_exposed;
    st.pp_comm_overlapped_s = vpp * (p2p - p2p_exposed);
    const StageParams all = stage_params(c, dense_params, moe_params, sl, n, is_first, is_last);
    const StageParams sp = with_gradients(t, all);
    const double params = sp.dense + sp.expert, weights = all.dense + all.expert;
    // Data-parallel traffic of the stage: its gradient reduction and (distributed optimizer) parameter gather.
    if (sp.dense != dp_key.dense || sp.expert != dp_key.expert) {  // stages often share their parameter counts
      dp_key = sp;
      grad_time = param_time = grad_share = param_share = 0;
      visit_dp_collectives(c, sp.dense, sp.expert, [&](const DpCollective& k) {
        const double time = collective_time_s(c, k.prim, k.group, k.bytes);
        (k.grad ? grad_time : param_time) += time;
        (k.grad ? grad_share : param_share) += time * dp_contention_share(c, k);
      });
      grad_share = grad_time > 0 ? grad_share / grad_time : 0.0;  // time-weighted over the stage's collectives
      param_share = param_time > 0 ? param_share / param_time : 0.0;
    }
    const double edge_off_fwd = dp_overlaps && !tp_shared ? edge_tp_fwd : 0.0,
                 edge_off_bwd = dp_overlaps && !tp_shared ? edge_tp_bwd : 0.0;
    LinkLoad load{ld * dense_load.on_fwd + lm * moe_load.on_fwd, ld * dense_load.on_bwd + lm * moe_load.on_bwd,
                  ld * dense_load.off_fwd + lm * moe_load.off_fwd, ld * dense_load.off_bwd + lm * moe_load.off_bwd};
    if (ends) {  // the BF16 end layers' loads for their FP8 twins'
      const LinkLoad dense_loadb = link_load(bf16->dense_t), moe_loadb = link_load(bf16->moe_t);
      auto delta = [&](double LinkLoad::*f) {
        return n.bf16_dense * (dense_loadb.*f - dense_load.*f) + n.bf16_moe * (moe_loadb.*f - moe_load.*f);
      };
      for (double LinkLoad::*f : {&LinkLoad::on_fwd, &LinkLoad::on_bwd, &LinkLoad::off_fwd, &LinkLoad::off_bwd})
        load.*f += delta(f);
    }
    w.fwd = PassWindow{std::max(0.0, st.forward_compute_s - load.on_fwd), load.off_fwd + edge_off_fwd};
    w.bwd =
        PassWindow{std::max(0.0, st.backward_compute_s + st.recompute_s - load.on_bwd), load.off_bwd + edge_off_bwd};
    w.grad_time = grad_time;
    w.param_time = param_time;
    w.grad_share = grad_share;
    w.param_share = param_share;
    // FSDP repeats them every micro-batch, layer by layer: gather before the forward and again before the
    // backward, reduce-scatter after it, prefetched under the neighbouring layers' compute.
    if (c.r.fsdp) {
      const double comm = 2 * param_time + grad_time;
      const Overlapped o =
          overlap_dp_traffic(comm, w.fwd.free_s + w.bwd.free_s, w.fwd.busy_s + w.bwd.busy_s,
                             comm > 0 ? (2 * param_time * param_share + grad_time * grad_share) / comm : 0.0);
      w.fsdp_exposed = o.exposed_s;
      w.fsdp_hidden = o.hidden_s;
    }
    const bool dist = c.r.distributed_optimizer;
    const double owned = dist ? sp.dense / c.group(Group::dp).size + sp.expert / c.group(Group::edp).size : params;
    // Under FSDP a rank keeps its shard plus the gathered parameters of the layer it computes and of the one it
    // prefetches, and one layer's unsharded gradients before their reduce-scatter.
    const double layer_params = params / std::max(1.0, static_cast<double>(sl.layers + sl.mtp));
    st.weight_bytes = weight_bytes * (c.r.fsdp ? owned + 2 * layer_params : weights);
    st.gradient_bytes = grad_bytes * (c.r.fsdp ? owned + layer_params : params);
    st.optimizer_bytes = optimizer_state_bytes_per_param(t) * owned;
    // Full recompute keeps its checkpoints and, where it leaves layers unreplayed (block), their whole activations;
    // its replay re-materialises a layer (a uniform group of them) at a time.
    const bool full = s.recompute == Recompute::full;
    w.stored = full ? n.stored_layers * dense_f.checkpoint + (ld - n.replay_dense) * dense_f.full +
                          (lm - n.replay_moe) * moe_f.full
                    : ld * dense_a.stored_bytes + lm * moe_a.stored_bytes;
    if (ends && !full)
      w.stored += n.bf16_dense * (bf16->dense_a.stored_bytes - dense_a.stored_bytes) +
                  n.bf16_moe * (bf16->moe_a.stored_bytes - moe_a.stored_bytes);
    const double replay_live = !full ? 1.0 : n.replay_dense + n.replay_moe > 0 ? sl.replay_group : 0.0;
    // The largest working set of the layer kinds the stage holds (an MoE-only stage has no dense layer's).
    double layer_live = std::max(ld > 0 ? dense_a.live_bytes : 0.0, lm > 0 ? moe_a.live_bytes : 0.0);
    if (ends)
      layer_live = std::max({layer_live, n.bf16_dense > 0 ? bf16->dense_a.live_bytes : 0.0,
                             n.bf16_moe > 0 ? bf16->moe_a.live_bytes : 0.0});
    st.transient_bytes = std::max(replay_live * layer_live, is_last ? logits_bytes : 0.0);
    const OptimizerStepBytes ob = optimizer_step_bytes_per_param(t);
    st.optimizer_s = vector_time_s(c, ob.per_owned * owned + ob.per_local * (c.r.fsdp ? owned : params),
                                   6 + 2.0 * (sl.layers + sl.mtp));
    return w;
  };

  double max_c = 0, sum_c = 0, max_grad_tail = 0, max_step_tail = 0;
  int crit = 0, grad_stage = 0, step_stage = 0;
  std::array<double, kMaxStages> grad_exposed, param_exposed, fsdp_exposed_mb;  // [0, pp) written below
  StageWork w{};
  StageLayers sl{};
  const bool alike = middle_stages_alike(m, split, s, t);
  double model_flops = 0;  // of one micro-batch, summed over the stages
  for (int i = 0; i < pp; ++i) {
    const bool is_first = i == 0, is_last = i == pp - 1;
    StageResult& st = pr.stages[static_cast<std::size_t>(i)];
    // Stage i - 1 is a middle stage from i = 2 on: the same layers there cost the same here.
    const bool middle = i >= 2 && !is_last;
    bool same = middle && alike;
    if (same) {
      sl.first = static_cast<int>(split.first_layer_of_chunk(i, m.num_layers));
    } else {
      const StageLayers prev = sl;
      sl = stage_layers(m, split, s, t, i);
      same = middle && sl.same_layers(prev);
    }
    if (same) {
      st = pr.stages[static_cast<std::size_t>(i - 1)];
    } else {
      st = StageResult{};
      w = stage_work(sl, is_first, is_last, st);
    }
    st.first_layer = sl.first;
    const double ld = w.ld, lm = w.lm;
    model_flops += w.model_flops;
    // With the batch-level overlap only the steady phase pairs a forward with another micro-batch's backward: the
    // warm-up forwards and cool-down backwards (Megatron's warm-up count) keep their all-to-alls exposed.
    const double paired = c.r.moe_a2a_overlap ? 1.0 - unpaired_share(pp, vpp, mb, i, c.r.vp_group) : 1.0;
    st.ep_comm_s = ld * (dense_t.ep_fwd + dense_t.ep_bwd) +
                   lm * (paired * (moe_t.ep_fwd + moe_t.ep_bwd) + (1.0 - paired) * moe_t.ep_alone);
    st.per_microbatch_s = st.forward_compute_s + st.backward_compute_s + st.recompute_s + st.tp_comm_s +
                          st.cp_comm_exposed_s + st.ep_comm_s + st.pp_comm_s + w.fsdp_exposed;
    st.inflight_microbatches = inflight(pp, vpp, mb, i, c.r.vp_group);
    st.activation_bytes = st.inflight_microbatches * w.stored;
    const double allocated =
        st.weight_bytes + st.gradient_bytes + st.optimizer_bytes + st.activation_bytes + st.transient_bytes;
    st.runtime_bytes = p.runtime_memory_gib * 1073741824.0 + p.runtime_memory_fraction * allocated;
    st.peak_bytes = allocated + st.runtime_bytes;

    // Data-parallel traffic, once per iteration (not with FSDP: per micro-batch above). With --overlap-grad-reduce
    // the gradient reduction runs under the last backward passes and with --overlap-param-gather the parameter
    // all-gather under the first forwards, as dp_hiding_window_s says. In 1F1B stage i also idles i
    // chunk-backwards at the end of the iteration (and i chunk-forwards at the start), time in which its traffic
    // proceeds unhindered.
    const double iter_grad = c.r.fsdp ? 0.0 : w.grad_time, iter_param = c.r.fsdp ? 0.0 : w.param_time;
    const double bwd_window = st.backward_compute_s + st.recompute_s, fwd_window = st.forward_compute_s;
    const std::int64_t group = std::min(c.r.vp_group, mb);
    const Overlapped grad = t.overlap_grad_reduce ? overlap_beside_pass(iter_grad, i * bwd_window / vpp, w.bwd, vpp,
                                                                        group, false, w.grad_share)
                                                  : Overlapped{iter_grad, 0.0};
    const Overlapped param =
        (t.overlap_param_gather && c.r.distributed_optimizer)
            ? overlap_beside_pass(iter_param, i * fwd_window / vpp, w.fwd, vpp, group, true, w.param_share)
            : Overlapped{iter_param, 0.0};
    const double grad_hidden = grad.hidden_s, param_hidden = param.hidden_s;
    grad_exposed[static_cast<std::size_t>(i)] = grad.exposed_s;
    param_exposed[static_cast<std::size_t>(i)] = param.exposed_s;
    if (!t.lora())  // a frozen embedding has no gradient to reduce
      visit_embedding_collectives(c, is_first, is_last, [&](const DpCollective& k) {
        grad_exposed[static_cast<std::size_t>(i)] += collective_time_s(c, k.prim, k.group, k.bytes);
      });
    st.dp_comm_exposed_s = grad_exposed[static_cast<std::size_t>(i)] + param_exposed[static_cast<std::size_t>(i)] +
                           static_cast<double>(mb) * w.fsdp_exposed;
    st.dp_comm_overlapped_s = grad_hidden + param_hidden + static_cast<double>(mb) * w.fsdp_hidden;
    fsdp_exposed_mb[static_cast<std::size_t>(i)] = w.fsdp_exposed;

    if (st.per_microbatch_s > max_c) {
      max_c = st.per_microbatch_s;
      crit = i;
    }
    sum_c += st.per_microbatch_s;
    if (grad_exposed[static_cast<std::size_t>(i)] > max_grad_tail) {
      max_grad_tail = grad_exposed[static_cast<std::size_t>(i)];
      grad_stage = i;
    }
    // The optimizer step follows the global gradient-norm reduction, so it starts when the slowest stage's
    // gradients are reduced; the parameter gather follows it unless overlapped with the next forward.
    const double step_tail = st.optimizer_s + param_exposed[static_cast<std::size_t>(i)];
    if (step_tail > max_step_tail) {
      max_step_tail = step_tail;
      step_stage = i;
    }
    if (st.peak_bytes > pr.max_peak_memory_bytes) {
      pr.max_peak_memory_bytes = st.peak_bytes;
      pr.peak_stage = i;
    }
  }
  // 1F1B with heterogeneous stages: the bottleneck stage runs all m micro-batches, the others add their
  // fill/drain once, shortened v-fold by interleaving: uniform stages give the bubble (p - 1)/(v·m).
  const double mbd = static_cast<double>(mb);
  pr.model_flops_per_device = mbd * model_flops / static_cast<double>(pp);
  const double pipe = mbd * max_c + (sum_c - max_c) / vpp;
  pr.iteration_time_s = pipe + max_grad_tail + max_step_tail;
  pr.critical_stage = crit;
  const StageResult& cs = pr.stages[static_cast<std::size_t>(crit)];
  Breakdown& b = pr.breakdown;
  b.compute_s = mbd * (cs.forward_compute_s + cs.backward_compute_s);
  b.recompute_s = mbd * cs.recompute_s;
  b.tp_comm_s = mbd * cs.tp_comm_s;
  b.tp_comm_overlapped_s = mbd * cs.tp_comm_overlapped_s;
  b.cp_comm_exposed_s = mbd * cs.cp_comm_exposed_s;
  b.cp_comm_overlapped_s = mbd * cs.cp_comm_overlapped_s;
  b.ep_comm_s = mbd * cs.ep_comm_s;
  b.pp_comm_s = mbd * cs.pp_comm_s;
  b.pp_comm_overlapped_s = mbd * cs.pp_comm_overlapped_s;
  b.bubble_s = pipe - mbd * max_c;
  // FSDP's exposed per-micro-batch traffic is in every micro-batch of the critical stage.
  b.dp_comm_exposed_s = max_grad_tail + param_exposed[static_cast<std::size_t>(step_stage)] +
                        mbd * fsdp_exposed_mb[static_cast<std::size_t>(crit)];
  b.dp_comm_overlapped_s = pr.stages[static_cast<std::size_t>(grad_stage)].dp_comm_overlapped_s;
  b.optimizer_s = pr.stages[static_cast<std::size_t>(step_stage)].optimizer_s;
  pr.layer.moe = !dense_layers;
  pr.layer.forward_s = dense_t.fwd_compute + dense_t.tp_fwd + dense_t.cp_fwd + dense_t.ep_fwd;
  // A checkpointed layer (its own checkpoint: uniform groups of one) gathers its distributed input first.
  pr.layer.backward_s =
      dense_t.bwd_compute + dense_t.tp_bwd + dense_t.cp_bwd + dense_t.ep_bwd + dense_t.recompute + checkpoint_gather;
  pr.layer.recompute_s = dense_t.recompute;
  pr.layer.tp_comm_exposed_s = dense_t.tp_fwd + dense_t.tp_bwd + checkpoint_gather;
  pr.layer.tp_comm_hidden_s = dense_t.tp_hidden();
  pr.capacity_bytes = sys.hbm_capacity_bytes;
  pr.feasible = pr.max_peak_memory_bytes <= capacity;
  return pr;
}

Throughput throughput(const Prediction& p, const Strategy& s, const System& sys, const TrainingSettings& t) {
  Throughput out;
  if (!p.ok() || !(p.iteration_time_s > 0)) return out;
  out.model_tflops_per_device = p.model_flops_per_device / p.iteration_time_s / 1e12;
  out.mfu = p.model_flops_per_device / p.iteration_time_s / sys.peak_flops(t.precision);
  out.tokens_per_s_per_device = static_cast<double>(t.global_batch_size) * static_cast<double>(t.seq_length) /
                                (p.iteration_time_s * static_cast<double>(s.devices()));
  return out;
}

TrainingRun training_run(double iteration_time_s, std::int64_t devices, const TrainingSettings& t, double tokens) {
  TrainingRun out;
  const double per_iteration = static_cast<double>(t.global_batch_size) * static_cast<double>(t.seq_length);
  if (!(iteration_time_s > 0) || !(tokens > 0) || !(per_iteration > 0)) return out;
  out.iterations = std::ceil(tokens / per_iteration);
  out.time_s = out.iterations * iteration_time_s;
  out.device_hours = out.time_s * static_cast<double>(devices) / 3600.0;
  return out;
}

TrainingRun training_run(const Prediction& p, const Strategy& s, const TrainingSettings& t, double tokens) {
  return p.ok() ? training_run(p.iteration_time_s, s.devices(), t, tokens) : TrainingRun{};
}

double predict_gemm_us(const System& sys, Precision dtype, const PlatformParams& p, double batch, double m, double n,
                       double k) {
  const double peak = sys.peak_flops(dtype) * (dtype == Precision::fp4 ? sys.fp4_gemm_throughput : 1.0);
  return gemm_kernel_s(peak, quantizes_linear(dtype) ? p.fp8_matmul_efficiency : p.matmul_efficiency, p.matmul_half_dim,
                       batch, m, n, k) *
         1e6;
}

RankCoord rank_coord(const Strategy& s, int rank) {
  RankCoord rc{};
  rc.tp = rank % s.tensor_parallel;
  rank /= s.tensor_parallel;
  rc.cp = rank % s.context_parallel;
  rank /= s.context_parallel;
  rc.dp = rank % s.data_parallel;
  rc.pp = rank / s.data_parallel;
  return rc;
}

std::vector<double> per_rank_peak_memory(const Prediction& pr, const Strategy& s) {
  std::vector<double> out;
  if (!pr.ok()) return out;
  const std::int64_t n = s.devices();
  out.reserve(static_cast<std::size_t>(n));
  for (std::int64_t r = 0; r < n; ++r)
    out.push_back(pr.stages[static_cast<std::size_t>(rank_coord(s, static_cast<int>(r)).pp)].peak_bytes);
  return out;
}

const char* to_string(TermKind k) {
  switch (k) {
    case TermKind::compute: return "compute";
    case TermKind::exposed: return "exposed";
    case TermKind::hidden: return "hidden";
    case TermKind::bubble: return "bubble";
    case TermKind::optimizer: return "optimizer";
  }
  return "?";
}

const std::array<TermInfo<Breakdown>, kNumBreakdownTerms>& breakdown_terms() {
  using B = Breakdown;
  static const std::array<TermInfo<B>, kNumBreakdownTerms> t = {{
      {"compute_s", &B::compute_s, TermKind::compute, "forward + backward compute of all micro-batches"},
      {"recompute_s", &B::recompute_s, TermKind::compute, "activation recomputation"},
      {"tp_comm_s", &B::tp_comm_s, TermKind::exposed,
       "tensor-parallel collectives (and delayed FP8 scaling's amax all-reduces) on the critical path"},
      {"tp_comm_overlapped_s", &B::tp_comm_overlapped_s, TermKind::hidden,
       "tensor-parallel collectives hidden under GEMMs"},
      {"cp_comm_exposed_s", &B::cp_comm_exposed_s, TermKind::exposed,
       "context-parallel exchange (ring, all-to-all or K/V all-gather) not hidden by attention"},
      {"cp_comm_overlapped_s", &B::cp_comm_overlapped_s, TermKind::hidden,
       "context-parallel ring exchange hidden by attention"},
      {"ep_comm_s", &B::ep_comm_s, TermKind::exposed, "MoE all-to-all dispatch and combine"},
      {"pp_comm_s", &B::pp_comm_s, TermKind::exposed, "pipeline send/receive (and TP gather of received slices)"},
      {"pp_comm_overlapped_s", &B::pp_comm_overlapped_s, TermKind::hidden,
       "pipeline traffic hidden under chunk compute"},
      {"dp_comm_exposed_s", &B::dp_comm_exposed_s, TermKind::exposed,
       "data-parallel gradient reduction / parameter gather not hidden"},
      {"dp_comm_overlapped_s", &B::dp_comm_overlapped_s, TermKind::hidden,
       "data-parallel traffic hidden under compute or pipeline slack"},
      {"bubble_s", &B::bubble_s, TermKind::bubble, "pipeline fill and drain"},
      {"optimizer_s", &B::optimizer_s, TermKind::optimizer, "optimizer step"},
  }};
  return t;
}

const std::array<TermInfo<StageResult>, kNumStageTimeTerms>& stage_time_terms() {
  using S = StageResult;
  static const std::array<TermInfo<S>, kNumStageTimeTerms> t = {{
      {"per_microbatch_s", &S::per_microbatch_s, TermKind::compute, "one micro-batch through the stage, all chunks"},
      {"forward_compute_s", &S::forward_compute_s, TermKind::compute, "forward compute per micro-batch"},
      {"backward_compute_s", &S::backward_compute_s, TermKind::compute, "backward compute per micro-batch"},
      {"recompute_s", &S::recompute_s, TermKind::compute, "recomputation per micro-batch"},
      {"tp_comm_s", &S::tp_comm_s, TermKind::exposed, "exposed TP collectives per micro-batch"},
      {"tp_comm_overlapped_s", &S::tp_comm_overlapped_s, TermKind::hidden, "hidden TP collectives per micro-batch"},
      {"cp_comm_exposed_s", &S::cp_comm_exposed_s, TermKind::exposed, "exposed CP exchange per micro-batch"},
      {"cp_comm_overlapped_s", &S::cp_comm_overlapped_s, TermKind::hidden, "hidden CP exchange per micro-batch"},
      {"ep_comm_s", &S::ep_comm_s, TermKind::exposed, "EP all-to-all per micro-batch"},
      {"pp_comm_s", &S::pp_comm_s, TermKind::exposed, "pipeline traffic per micro-batch"},
      {"pp_comm_overlapped_s", &S::pp_comm_overlapped_s, TermKind::hidden, "hidden pipeline traffic per micro-batch"},
      {"dp_comm_exposed_s", &S::dp_comm_exposed_s, TermKind::exposed, "exposed DP traffic per iteration"},
      {"dp_comm_overlapped_s", &S::dp_comm_overlapped_s, TermKind::hidden, "hidden DP traffic per iteration"},
      {"optimizer_s", &S::optimizer_s, TermKind::optimizer, "optimizer step per iteration"},
      {"inflight_microbatches", &S::inflight_microbatches, TermKind::compute,
       "micro-batches of activations held at the peak (count)"},
  }};
  return t;
}

const std::array<TermInfo<StageResult>, kNumStageMemoryTerms>& stage_memory_terms() {
  using S = StageResult;
  static const std::array<TermInfo<S>, kNumStageMemoryTerms> t = {{
      {"weight_bytes", &S::weight_bytes, TermKind::compute, "parameters (16-bit; FP8 adds its copy)"},
      {"gradient_bytes", &S::gradient_bytes, TermKind::compute, "gradient buffers"},
      {"optimizer_bytes", &S::optimizer_bytes, TermKind::compute, "master weights and optimizer moments owned"},
      {"activation_bytes", &S::activation_bytes, TermKind::compute, "stored activations of in-flight micro-batches"},
      {"transient_bytes", &S::transient_bytes, TermKind::compute,
       "largest short-lived buffer (logits or a recomputed layer)"},
      {"runtime_bytes", &S::runtime_bytes, TermKind::compute, "runtime constant and allocator overhead"},
      {"peak_bytes", &S::peak_bytes, TermKind::compute, "peak of one rank of the stage"},
  }};
  return t;
}

namespace {
// Whether a replayed layer re-runs this GEMM: every one under full recompute, the chosen modules' under selective.
double replays_gemm(const Ctx& c, const Gemm& g) {
  if (c.r.s.recompute == Recompute::full) return 1;
  if (c.r.s.recompute != Recompute::selective || g.module == RecomputeModule::none) return 0;
  return replays(c.t, g.module) ? 1 : 0;
}
// A stage's layers in the groups the diagnostics visit: each kind's FP8 (or only) layers under the run's context `c`,
// then its BF16 end layers (first_last_layers_bf16) under `cb`; f(ctx, moe, layers, replayed) for each group held.
template <class F>
void visit_layer_groups(const StageCounts& n, const Ctx& c, const Ctx& cb, F&& f) {
  for (const bool moe : {false, true}) {
    const double layers = moe ? n.moe : n.dense, bf16 = moe ? n.bf16_moe : n.bf16_dense;
    const double replayed = moe ? n.replay_moe : n.replay_dense;
    const double bf16_replayed = moe ? n.replay_bf16_moe : n.replay_bf16_dense;
    if (layers - bf16 > 0) f(c, moe, layers - bf16, replayed - bf16_replayed);
    if (bf16 > 0) f(cb, moe, bf16, bf16_replayed);
  }
}
}  // namespace

std::vector<GemmRecord> gemm_diagnostics(const Model& m, const Strategy& s, const System& sys,
                                         const TrainingSettings& t, const PlatformParams& p) {
  std::vector<GemmRecord> out;
  if (check(m, s, t, ValidityOptions{sys.devices_per_node, true, true, true}) != Rejection::ok) return out;
  const PipelineSplit split = *pipeline_split(m, s, true);
  const Ctx c = make_ctx(m, s, sys, t, p);
  const Ctx cb = make_ctx(m, s, sys, bf16_layer_settings(t), p);  // the BF16 end layers' (first_last_layers_bf16)
  const double mb = static_cast<double>(c.r.num_micro_batches);
  for (int i = 0; i < s.pipeline_parallel; ++i) {
    const StageLayers sl = stage_layers(m, split, s, t, i);
    const StageCounts n = stage_counts(m, s, sl);
    // `count` calls of g per micro-batch, as userbuffers' split u runs them: u.splits calls of 1/u.splits of the
    // rows each (a whole call is one split), `scale` times a call's time. A call of the same shape and time as the
    // previous record adds to it.
    auto add = [&](const Ctx& x, const Gemm& g, UserbuffersSplit u, double count, double scale) {
      const double us = scale * gemm_split_call_s(x, g, u) / u.splits * 1e6;
      GemmRecord r{g.name,
                   i,
                   static_cast<std::int64_t>(g.batch),
                   static_cast<std::int64_t>(g.m / u.splits),
                   static_cast<std::int64_t>(g.n),
                   static_cast<std::int64_t>(g.k),
                   runs_fp8(x, g) ? t.precision : (c.fp8 ? Precision::bf16 : t.precision),
                   count * u.splits * mb,
                   us};
      GemmRecord* last = out.empty() ? nullptr : &out.back();
      if (last && last->name == r.name && last->stage == i && last->m == r.m && last->predicted_us == r.predicted_us)
        last->count += r.count;
      else
        out.push_back(r);
    };
    // Each pass as gemm_time runs it (visit_gemm_calls); the forward again where the layer's recompute replays it.
    auto calls = [&](const Ctx& x, const Gemm& g, double layers, double replayed) {
      if (layers <= 0) return;
      visit_gemm_calls(x, g, [&](GemmPass pass, UserbuffersSplit u, double scale) {
        add(x, g, u, pass == GemmPass::forward ? layers + replayed * replays_gemm(x, g) : layers, scale);
      });
    };
    visit_layer_groups(n, c, cb, [&](const Ctx& x, bool moe, double layers, double replayed) {
      visit_layer_ops(x, moe, [&](const Gemm& g) { calls(x, g, layers, replayed); });
    });
    if (i == s.pipeline_parallel - 1) calls(c, head_gemm(c), 1 + sl.mtp, 0);  // once more per MTP module
  }
  return out;
}

std::vector<CollectiveRecord> collective_diagnostics(const Model& m, const Strategy& s, const System& sys,
                                                     const TrainingSettings& t, const PlatformParams& p) {
  std::vector<CollectiveRecord> out;
  if (check(m, s, t, ValidityOptions{sys.devices_per_node, true, true, true}) != Rejection::ok) return out;
  const PipelineSplit split = *pipeline_split(m, s, true);
  const Ctx c = make_ctx(m, s, sys, t, p);
  const Ctx cb = make_ctx(m, s, sys, bf16_layer_settings(t), p);  // the BF16 end layers' (first_last_layers_bf16)
  const StageParams dense_params = layer_footprint(c, false).params;
  const StageParams moe_params = m.is_moe() ? layer_footprint(c, true).params : dense_params;
  const double mb = static_cast<double>(c.r.num_micro_batches);
  const double rc = s.recompute == Recompute::full ? 1 : 0;
  // The FP8 GEMMs of a layer of each kind, for delayed scaling's per-chunk amax reductions.
  // (A one-rank group reduces nothing: its concatenation and scale-update kernels still run, in simulate().)
  const bool amax = t.reduces_delayed_amax() && c.group(Group::amax).size > 1;
  const double dense_fp8 = amax && m.has_dense_layers() ? layer_time(c, false).fp8_gemms : 0.0;
  const double moe_fp8 = amax && m.is_moe() ? layer_time(c, true).fp8_gemms : 0.0;
  for (int i = 0; i < s.pipeline_parallel; ++i) {
    const StageLayers sl = stage_layers(m, split, s, t, i);
    const StageCounts n = stage_counts(m, s, sl);
    auto add = [&](Prim prim, Group g, double bytes, double count) {
      if (count <= 0) return;
      const GroupUse& gu = c.group(g);
      const CollectiveTiming timed = collective_timing(c, prim, gu, bytes);
      out.push_back({prim_name(prim), group_name(g), i, static_cast<int>(gu.size), static_cast<int>(gu.nodes),
                     link_share(gu, prim), bytes, count, timed.s * 1e3, timed.protocol});
    };
    // A full-recompute replay re-runs the layer's forward collectives.
    auto layer = [&](double layers, double replayed) {
      return [&, layers, replayed](const Collective& k) {
        add(k.prim, k.group, k.bytes, mb * (layers * (k.fwd + k.bwd) + rc * replayed * k.fwd));
      };
    };
    visit_layer_groups(n, c, cb, [&](const Ctx& x, bool moe, double layers, double replayed) {
      visit_layer_collectives(x, moe, layer(layers, replayed));
    });
    visit_checkpoint_collectives(
        c, [&](const Collective& k) { add(k.prim, k.group, k.bytes, mb * n.stored_layers * (k.fwd + k.bwd)); });
    visit_edge_collectives(c, i == 0, i == s.pipeline_parallel - 1,
                           [&](const Collective& k) { add(k.prim, k.group, k.bytes, mb * (k.fwd + k.bwd)); });
    visit_edge_collectives(c, true, true,  // each MTP module's embedding and head (mtp_edges)
                           [&](const Collective& k) { add(k.prim, k.group, k.bytes, mb * sl.mtp * (k.fwd + k.bwd)); });
    visit_pipeline_collectives(
        c, [&](const Collective& k) { add(k.prim, k.group, k.bytes, mb * s.virtual_pipeline * (k.fwd + k.bwd)); });
    visit_chunk_collectives(c, (n.dense * dense_fp8 + n.moe * moe_fp8) / s.virtual_pipeline,
                            [&](const Collective& k) { add(k.prim, k.group, k.bytes, mb * s.virtual_pipeline); });
    const StageParams sp =
        with_gradients(t, stage_params(c, dense_params, moe_params, sl, n, i == 0, i == s.pipeline_parallel - 1));
    // Once per iteration; with FSDP per micro-batch, the gather twice (forward and backward).
    visit_dp_collectives(c, sp.dense, sp.expert, [&](const DpCollective& k) {
      add(k.prim, k.group, k.bytes, c.r.fsdp ? mb * (k.grad ? 1 : 2) : 1);
    });
    if (!t.lora())
      visit_embedding_collectives(c, i == 0, i == s.pipeline_parallel - 1,
                                  [&](const DpCollective& k) { add(k.prim, k.group, k.bytes, 1); });
  }
  return out;
}

}  // namespace lmsim
