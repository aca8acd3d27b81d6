// Stage E (aggregation) and the memory model; stages A–D are in execution.hpp.
#include "simulator/simulate.hpp"

#include <algorithm>
#include <cmath>

#include "simulator/execution.hpp"

namespace lmsim {
namespace detail {

namespace {
LinkUse use_link(const System& sys, const PlatformParams& p, bool crosses_node) {
  if (crosses_node)
    return {sys.inter_node.bandwidth_bytes_per_s * p.inter_node_bandwidth_efficiency,
            sys.inter_node.latency_s + p.collective_latency_us * 1e-6};
  return {sys.intra_node.bandwidth_bytes_per_s * p.intra_node_bandwidth_efficiency,
          sys.intra_node.latency_s + p.collective_latency_us * 1e-6};
}
}  // namespace

Ctx make_ctx(const Model& m, const Strategy& s, const System& sys, const TrainingSettings& t, const PlatformParams& p) {
  Ctx c{};
  c.m = &m;
  c.sys = &sys;
  c.p = &p;
  c.r = resolve(s, t);
  c.t = t;
  c.b = static_cast<double>(c.r.micro_batch_size);
  c.s = static_cast<double>(t.seq_length);
  c.cp = s.context_parallel;
  c.s_local = c.s / c.cp;
  c.tokens = c.b * c.s_local;
  c.h = static_cast<double>(m.hidden_size);
  c.tp = s.tensor_parallel;
  // Heads are padded to a multiple of tp (KV heads replicated) when the validity options allow it.
  c.a = std::ceil(static_cast<double>(m.num_attention_heads) / c.tp) * c.tp;
  c.g = std::ceil(static_cast<double>(m.num_kv_heads) / c.tp) * c.tp;
  c.d = static_cast<double>(m.head_dim);
  c.f = static_cast<double>(m.ffn_hidden_size);
  c.ep = s.expert_parallel;
  c.dp = s.data_parallel;
  c.pp = s.pipeline_parallel;
  c.vpp = s.virtual_pipeline;
  // Megatron pads the vocabulary to a multiple of 128 x tensor_parallel.
  const double pad = 128.0 * c.tp;
  c.vocab_padded = std::ceil(static_cast<double>(m.vocab_size) / pad) * pad;
  c.sp_div = c.r.sequence_parallel ? c.tp : 1.0;
  c.peak_flops = sys.peak_flops(t.precision);
  c.hbm_bw = sys.hbm_bandwidth_bytes_per_s;
  // Rank order tp, cp, dp (ep inside dp), pp: a group crosses a node when its span of consecutive ranks does.
  const double node = sys.devices_per_node;
  c.tp_link = use_link(sys, p, c.tp > node);
  c.cp_link = use_link(sys, p, c.tp * c.cp > node);
  c.ep_link = use_link(sys, p, c.tp * c.cp * c.ep > node);
  c.dp_link = use_link(sys, p, c.tp * c.cp * c.dp > node);
  c.pp_link = use_link(sys, p, c.tp * c.cp * c.dp * c.pp > node);
  return c;
}

VectorWork layer_vector_work(const Ctx& c, bool moe) {
  const Model& m = *c.m;
  const double S = c.tokens, t = c.tp, act = S * c.h * 2;
  const bool fused = c.t.fused_kernels;
  VectorWork w{};
  // norms (read + write) and the two residual adds (two reads, one write), outside the TP region
  double outside = (m.post_norms ? 8.0 : 4.0) * act + 6.0 * act;
  if (c.t.dropout) outside += 5.0 * act;
  double inside = 0;
  const double qk_width = S * (c.a + (m.is_mla() ? c.a : c.g)) * c.d / t * 2;
  inside += 2 * qk_width;                 // rotary embedding on q and k
  if (m.qk_norm) inside += 2 * qk_width;  // q/k RMSNorm
  if (!c.t.flash_attention && c.g < c.a && !m.is_mla())
    inside += 2 * S * (c.a + c.g) * c.d / t * 2;  // unfused GQA: K and V repeated to every query head
  const double gate_in = m.is_gated() ? 3.0 : 2.0;
  const double fm = moe ? static_cast<double>(m.moe_ffn_hidden_size) : c.f;
  double mlp_rows = S;
  if (moe) {
    const double topk = static_cast<double>(m.experts_per_token);
    mlp_rows = S * (topk * c.t.moe_load_imbalance + static_cast<double>(m.num_shared_experts));
    inside += 4 * S * topk * c.h * 2 + 3 * S * static_cast<double>(m.num_experts) * 4;  // permute, router
  }
  inside += gate_in * mlp_rows * fm / t * 2;  // activation function
  w.fwd_bytes = outside / c.sp_div + inside;
  w.bwd_bytes = 2 * w.fwd_bytes;
  const double kernels = (fused ? kLayerKernelsFused : kLayerKernelsUnfused) + (moe ? kMoeExtraKernels : 0);
  w.fwd_kernels = kernels;
  w.bwd_kernels = 2 * kernels;
  if (!c.t.flash_attention) {
    const double scores = c.b * c.a / t * c.s_local * c.s;
    w.score_fwd_bytes = scores * (fused ? kScoreBytesFwdFused : kScoreBytesFwdUnfused);
    w.score_bwd_bytes = scores * (fused ? kScoreBytesBwdFused : kScoreBytesBwdUnfused);
  }
  return w;
}

// Generalised per-layer activation memory of Korthikanti et al., "Reducing Activation Recomputation in Large
// Transformer Models" (2022), Eq. 1–2: 34·s·b·h + 5·a·s²·b bytes for GPT with dropout, split into the part
// outside the TP region (10·s·b·h, divided by t only with sequence parallelism), the part inside it (24·s·b·h / t)
// and the score part (5·a·s²·b / t, absent with flash attention and under selective recompute). Here every term
// is written for explicit head_dim, GQA/MQA/MLA, gated MLPs, q/k norms and MoE, so the published formula is the
// special case a·d = h, g = a, f = 4h, GELU, dropout on, score bytes 5.
struct ActivationParts {
  double outside, inside, scores, checkpoint;
};
ActivationParts activation_parts(const Ctx& c, bool moe) {
  const Model& m = *c.m;
  const double S = c.tokens, h = c.h, t = c.tp;
  ActivationParts a{};
  // attention-norm input, QKV input, MLP-norm input, FC1 input (+ post-norm inputs), dropout masks
  a.outside = (m.post_norms ? 12.0 : 8.0) * S * h + (c.t.dropout ? 2.0 * S * h : 0.0);
  const double kv_heads = (c.t.flash_attention && !m.is_mla()) ? c.g : c.a;  // unfused GQA expands K, V
  const double qk = m.is_mla() ? c.d + static_cast<double>(m.qk_rope_head_dim) : c.d;
  const double vd = m.is_mla() ? static_cast<double>(m.v_head_dim) : c.d;
  double inside = 2 * S * c.a * qk + 2 * S * kv_heads * qk + 2 * S * kv_heads * vd;  // Q, K, V
  if (m.qk_norm) inside += 2 * S * (c.a + c.g) * c.d;                                // norm inputs
  inside += 2 * S * c.a * vd;  // attention output = out-projection input
  if (m.is_mla()) inside += 2 * S * (static_cast<double>(m.kv_lora_rank + m.q_lora_rank));
  if (c.t.flash_attention) inside += 4 * c.b * c.a * c.s_local;  // softmax log-sum-exp
  const double gate = m.is_gated() ? 2.0 : 1.0;
  if (!moe) {
    inside += 2 * S * c.f * gate + 2 * S * c.f;  // FC1 output (activation input), activation output
  } else {
    const double fm = static_cast<double>(m.moe_ffn_hidden_size);
    const double topk = static_cast<double>(m.experts_per_token);
    const double rows = S * topk * c.t.moe_load_imbalance;
    inside += rows * (2 * fm * gate + 2 * fm);
    inside += static_cast<double>(m.num_shared_experts) * S * (2 * fm * gate + 2 * fm);
    a.outside += 2 * rows * h * 2 + S * static_cast<double>(m.num_experts) * 4;  // permuted tokens, router
  }
  a.inside = inside / t;
  a.outside /= c.sp_div;
  if (!c.t.flash_attention) a.scores = c.p->attention_score_bytes * c.b * c.a / t * c.s_local * c.s;
  a.checkpoint = 2 * S * h / c.sp_div;  // full recompute keeps each layer's input
  return a;
}

LayerActivation layer_activation_from(const Ctx& c, bool moe) {
  const ActivationParts a = activation_parts(c, moe);
  const double full = a.outside + a.inside + a.scores;
  switch (c.r.s.recompute) {
    case Recompute::none: return {full, 0};
    case Recompute::selective: return {a.outside + a.inside, a.scores};
    case Recompute::full: return {a.checkpoint, full};
  }
  return {full, 0};
}

// Time of one layer's passes for one micro-batch.
struct LayerTime {
  double fwd_compute, bwd_compute, recompute, tp_fwd, tp_bwd, tp_bwd_overlapped, cp_fwd, cp_bwd, attn_fwd, ep_fwd,
      ep_bwd;
};

bool is_attention_core(const char* name) {
  return (name[0] == 's' && name[1] == 'c') || (name[0] == 'p' && name[1] == 'v');  // "scores", "pv"
}

LayerTime layer_time(const Ctx& c, bool moe) {
  LayerTime lt{};
  double gemm = 0, attn = 0;
  visit_layer_gemms(c, moe, [&](const Gemm& g) {
    const double tm = g.multiplicity * gemm_time_s(c, g.batch, g.m, g.n, g.k);
    gemm += tm;
    if (is_attention_core(g.name)) attn += tm;
  });
  // Megatron-LM overlaps backward tensor-parallel communication with the linear layers' backward GEMMs (the
  // input-gradient all-reduce / reduce-scatter runs under the weight-gradient GEMM; with sequence parallelism
  // the input re-gather runs under the input-gradient GEMM): backward TP traffic is hidden up to the
  // duration of the backward linear GEMMs (twice their forward time).
  const double tp_bwd_window = 2 * (gemm - attn);
  const VectorWork v = layer_vector_work(c, moe);
  const double score_fwd = vector_time_s(c, v.score_fwd_bytes, 0);
  const double score_bwd = vector_time_s(c, v.score_bwd_bytes, 0);
  lt.fwd_compute = gemm + vector_time_s(c, v.fwd_bytes, v.fwd_kernels) + score_fwd;
  lt.bwd_compute = 2 * gemm + vector_time_s(c, v.bwd_bytes, v.bwd_kernels) + score_bwd;
  lt.attn_fwd = attn + score_fwd;
  visit_layer_collectives(c, moe, [&](const Collective& k) {
    const double one = collective_time_s(c, k.prim, link_of(c, k.group), group_size(c, k.group), k.bytes);
    double* fwd = k.group == Group::tp ? &lt.tp_fwd : k.group == Group::cp ? &lt.cp_fwd : &lt.ep_fwd;
    double* bwd = k.group == Group::tp ? &lt.tp_bwd : k.group == Group::cp ? &lt.cp_bwd : &lt.ep_bwd;
    *fwd += k.fwd * one;
    *bwd += k.bwd * one;
  });
  lt.tp_bwd_overlapped = std::min(lt.tp_bwd, tp_bwd_window);
  lt.tp_bwd -= lt.tp_bwd_overlapped;
  const double cp_fwd_exposed = std::max(0.0, lt.cp_fwd - lt.attn_fwd);
  switch (c.r.s.recompute) {
    case Recompute::none: break;
    case Recompute::selective: lt.recompute = lt.attn_fwd; break;
    case Recompute::full: lt.recompute = lt.fwd_compute + lt.tp_fwd + cp_fwd_exposed + lt.ep_fwd; break;
  }
  return lt;
}

struct EdgeTime {
  double fwd, bwd, tp_fwd, tp_bwd;
};
EdgeTime edge_time(const Ctx& c, bool first, bool last) {
  EdgeTime e{};
  const double act = c.tokens * c.h * 2;
  if (first) {  // embedding lookup and its gradient scatter
    e.fwd += vector_time_s(c, 2 * act, 2);
    e.bwd += vector_time_s(c, 2 * act, 2);
  }
  if (last) {
    visit_head_gemms(c, [&](const Gemm& g) {
      const double tm = gemm_time_s(c, g.batch, g.m, g.n, g.k);
      e.fwd += tm;
      e.bwd += 2 * tm;
    });
    const bool fused = c.t.fused_kernels;
    const double logits = c.tokens * c.vocab_padded / c.tp;
    e.fwd += vector_time_s(c, 2 * act / c.sp_div + logits * (fused ? kLossBytesFwdFused : kLossBytesFwdUnfused),
                           fused ? 4 : 12);
    e.bwd += vector_time_s(c, 4 * act / c.sp_div + logits * (fused ? kLossBytesBwdFused : kLossBytesBwdUnfused),
                           fused ? 4 : 8);
  }
  visit_edge_collectives(c, first, last, [&](const Collective& k) {
    const double one = collective_time_s(c, k.prim, link_of(c, k.group), group_size(c, k.group), k.bytes);
    e.tp_fwd += k.fwd * one;
    e.tp_bwd += k.bwd * one;
  });
  return e;
}

// Number of MoE layers among [lo, hi).
double moe_layers_in(const Model& m, std::int64_t lo, std::int64_t hi) {
  if (!m.is_moe()) return 0;
  const std::int64_t start = std::max(lo, m.first_dense_layers);
  if (start >= hi) return 0;
  const std::int64_t fq = m.moe_layer_frequency;
  auto upto = [&](std::int64_t x) {  // MoE layers in [first_dense_layers, x)
    return x <= m.first_dense_layers ? 0 : (x - m.first_dense_layers + fq - 1) / fq;
  };
  return static_cast<double>(upto(hi) - upto(start));
}

// Layers of pipeline stage i: equal split, or (uneven) the first L mod p stages one layer more.
void stage_layers(const Model& m, int pp, int i, int& first, int& count) {
  const int L = static_cast<int>(m.num_layers);
  const int base = L / pp, extra = L % pp;
  count = base + (i < extra ? 1 : 0);
  first = i * base + std::min(i, extra);
}

// In-flight micro-batches' worth of a stage's layers held at the activation peak. 1F1B: stage i holds
// min(p - i, m); interleaved 1F1B (Megatron's warm-up count) holds (p - i - 1)·2 + (v - 1)·p + 1 chunks of
// L/(p·v) layers, at most m·v. Without pipelining micro-batches run one after another.
double inflight(int pp, int vpp, std::int64_t mb, int i) {
  if (pp == 1) return 1;
  if (vpp == 1) return static_cast<double>(std::min<std::int64_t>(pp - i, mb));
  const std::int64_t chunks = static_cast<std::int64_t>(pp - i - 1) * 2 + static_cast<std::int64_t>(vpp - 1) * pp + 1;
  return static_cast<double>(std::min(chunks, mb * vpp)) / vpp;
}

}  // namespace detail

using namespace detail;

LayerActivation layer_activation(const Model& m, const Strategy& s, const TrainingSettings& t, const PlatformParams& p,
                                 bool moe_layer) {
  const System dummy{};
  const Ctx c = make_ctx(m, s, dummy, t, p);
  return layer_activation_from(c, moe_layer);
}

Prediction simulate(const Model& m, const Strategy& s, const System& sys, const TrainingSettings& t,
                    const PlatformParams& p, const SimOptions& o) {
  Prediction pr;
  pr.rejection = check(m, s, t, o.validity);
  if (pr.rejection == Rejection::ok && !(sys.peak_flops(t.precision) > 0))
    pr.rejection = Rejection::precision_unsupported;
  if (pr.rejection != Rejection::ok) return pr;
  const Ctx c = make_ctx(m, s, sys, t, p);
  const LayerParams lp = layer_params(m);
  const int pp = s.pipeline_parallel, vpp = s.virtual_pipeline;
  const std::int64_t mb = c.r.num_micro_batches;
  pr.num_micro_batches = mb;
  pr.num_stages = pp;

  const LayerTime dense_t = layer_time(c, false);
  const LayerTime moe_t = m.is_moe() ? layer_time(c, true) : dense_t;
  const LayerActivation dense_a = layer_activation_from(c, false);
  const LayerActivation moe_a = m.is_moe() ? layer_activation_from(c, true) : dense_a;

  const double act = c.tokens * c.h * 2;
  const double p2p = pp > 1 ? collective_time_s(c, Prim::send_recv, c.pp_link, 2, act / c.sp_div) : 0;
  const double dp_group = c.dp * c.cp, edp_group = c.dp * c.cp / c.ep;
  const double final_norm = (m.norm == Norm::layernorm ? 2.0 : 1.0) * c.h;
  // Loss peak on the last stage: 16-bit logits, their fp32 softmax kept for backward, 16-bit logit gradient.
  const double logits_bytes = kLogitBytesPerElement * c.tokens * c.vocab_padded / c.tp;
  const double grad_bytes_per_param = t.fp32_gradients ? 4.0 : 2.0;
  const double weight_bytes_per_param = t.precision == Precision::fp8 ? 3.0 : 2.0;
  const double capacity = sys.hbm_capacity_bytes - o.memory_margin_bytes;

  double max_c = 0, sum_c = 0, max_tail = 0;
  int crit = 0, tail_stage = 0;
  for (int i = 0; i < pp; ++i) {
    StageResult& st = pr.stages[static_cast<std::size_t>(i)];
    int first = 0, n = 0;
    stage_layers(m, pp, i, first, n);
    const bool is_first = i == 0, is_last = i == pp - 1;
    const double nm = moe_layers_in(m, first, first + n), nd = n - nm;
    st.first_layer = first;
    st.num_layers = n;
    const EdgeTime e = edge_time(c, is_first, is_last);
    st.forward_compute_s = nd * dense_t.fwd_compute + nm * moe_t.fwd_compute + e.fwd;
    st.backward_compute_s = nd * dense_t.bwd_compute + nm * moe_t.bwd_compute + e.bwd;
    st.recompute_s = nd * dense_t.recompute + nm * moe_t.recompute;
    st.tp_comm_s = nd * (dense_t.tp_fwd + dense_t.tp_bwd) + nm * (moe_t.tp_fwd + moe_t.tp_bwd) + e.tp_fwd + e.tp_bwd;
    st.tp_comm_overlapped_s = nd * dense_t.tp_bwd_overlapped + nm * moe_t.tp_bwd_overlapped;
    const double cp_comm = nd * (dense_t.cp_fwd + dense_t.cp_bwd) + nm * (moe_t.cp_fwd + moe_t.cp_bwd);
    const double attn = (nd * dense_t.attn_fwd + nm * moe_t.attn_fwd) * 3;  // forward + backward (2x)
    st.cp_comm_exposed_s = std::max(0.0, cp_comm - attn);
    st.cp_comm_overlapped_s = cp_comm - st.cp_comm_exposed_s;
    st.ep_comm_s = nd * (dense_t.ep_fwd + dense_t.ep_bwd) + nm * (moe_t.ep_fwd + moe_t.ep_bwd);
    st.pp_comm_s = 2 * vpp * p2p;
    st.per_microbatch_s = st.forward_compute_s + st.backward_compute_s + st.recompute_s + st.tp_comm_s +
                          st.cp_comm_exposed_s + st.ep_comm_s + st.pp_comm_s;

    // Parameters held by one rank of this stage.
    // Norm weights and the router are replicated across TP; projections are sharded.
    double dense_params =
        nd * lp.mlp_dense / c.tp + n * (lp.attention / c.tp + lp.norms) + nm * (lp.router + lp.shared_experts / c.tp);
    const double expert_params = nm * static_cast<double>(m.num_experts) * lp.expert / (c.ep * c.tp);
    const double head = c.vocab_padded * c.h / c.tp;
    if (is_first) dense_params += head;
    if (is_last) dense_params += final_norm + ((!m.tied_embeddings || pp > 1) ? head : 0.0);
    const double params = dense_params + expert_params;
    st.weight_bytes = weight_bytes_per_param * params;
    st.gradient_bytes = grad_bytes_per_param * params;
    const bool dist = c.r.distributed_optimizer;
    const double owned = dist ? dense_params / dp_group + expert_params / edp_group : params;
    st.optimizer_bytes = p.optimizer_bytes_per_param * owned;
    st.inflight_microbatches = inflight(pp, vpp, mb, i);
    const double stored = nd * dense_a.stored_bytes + nm * moe_a.stored_bytes;
    st.activation_bytes = st.inflight_microbatches * stored;
    const double live =
        std::max(n > 0 ? (nm > 0 ? std::max(dense_a.live_bytes, moe_a.live_bytes) : dense_a.live_bytes) : 0.0,
                 is_last ? logits_bytes : 0.0);
    st.transient_bytes = live;
    const double allocated =
        st.weight_bytes + st.gradient_bytes + st.optimizer_bytes + st.activation_bytes + st.transient_bytes;
    st.runtime_bytes = p.runtime_memory_gib * 1073741824.0 + p.runtime_memory_fraction * allocated;
    st.peak_bytes = allocated + st.runtime_bytes;

    // Data-parallel gradient reduction (+ parameter all-gather with the distributed optimizer).
    double dp_time = 0;
    if (dist) {
      dp_time = collective_time_s(c, Prim::reduce_scatter, c.dp_link, dp_group, grad_bytes_per_param * dense_params) +
                collective_time_s(c, Prim::all_gather, c.dp_link, dp_group, 2 * dense_params) +
                collective_time_s(c, Prim::reduce_scatter, c.dp_link, edp_group, grad_bytes_per_param * expert_params) +
                collective_time_s(c, Prim::all_gather, c.dp_link, edp_group, 2 * expert_params);
    } else {
      dp_time = collective_time_s(c, Prim::all_reduce, c.dp_link, dp_group, grad_bytes_per_param * dense_params) +
                collective_time_s(c, Prim::all_reduce, c.dp_link, edp_group, grad_bytes_per_param * expert_params);
    }
    // Overlap is bounded by the last micro-batch's backward, the only compute left to hide it behind.
    st.dp_comm_overlapped_s = std::min(p.dp_overlap * dp_time, st.backward_compute_s);
    st.dp_comm_exposed_s = dp_time - st.dp_comm_overlapped_s;
    if (pp > 1 && m.tied_embeddings && (is_first || is_last))
      st.dp_comm_exposed_s += collective_time_s(c, Prim::all_reduce, c.pp_link, 2, 4 * head);
    st.optimizer_s = vector_time_s(c, kOptimizerBytesPerParam * owned, 6 + 2.0 * n);

    if (st.per_microbatch_s > max_c) {
      max_c = st.per_microbatch_s;
      crit = i;
    }
    sum_c += st.per_microbatch_s;
    const double tail = st.dp_comm_exposed_s + st.optimizer_s;
    if (tail > max_tail) {
      max_tail = tail;
      tail_stage = i;
    }
    if (st.peak_bytes > pr.max_peak_memory_bytes) {
      pr.max_peak_memory_bytes = st.peak_bytes;
      pr.peak_stage = i;
    }
  }
  // 1F1B with heterogeneous stages: the bottleneck stage runs all m micro-batches, the others add their
  // fill/drain once, shortened v-fold by interleaving: uniform stages give the bubble (p - 1)/(v·m).
  const double mbd = static_cast<double>(mb);
  const double pipe = mbd * max_c + (sum_c - max_c) / vpp;
  pr.iteration_time_s = pipe + max_tail;
  pr.critical_stage = crit;
  const StageResult& cs = pr.stages[static_cast<std::size_t>(crit)];
  const StageResult& ts = pr.stages[static_cast<std::size_t>(tail_stage)];
  Breakdown& b = pr.breakdown;
  b.compute_s = mbd * (cs.forward_compute_s + cs.backward_compute_s);
  b.recompute_s = mbd * cs.recompute_s;
  b.tp_comm_s = mbd * cs.tp_comm_s;
  b.tp_comm_overlapped_s = mbd * cs.tp_comm_overlapped_s;
  b.cp_comm_exposed_s = mbd * cs.cp_comm_exposed_s;
  b.cp_comm_overlapped_s = mbd * cs.cp_comm_overlapped_s;
  b.ep_comm_s = mbd * cs.ep_comm_s;
  b.pp_comm_s = mbd * cs.pp_comm_s;
  b.bubble_s = pipe - mbd * max_c;
  b.dp_comm_exposed_s = ts.dp_comm_exposed_s;
  b.dp_comm_overlapped_s = ts.dp_comm_overlapped_s;
  b.optimizer_s = ts.optimizer_s;
  pr.capacity_bytes = sys.hbm_capacity_bytes;
  pr.feasible = pr.max_peak_memory_bytes <= capacity;
  return pr;
}

double predict_gemm_us(const System& sys, Precision dtype, const PlatformParams& p, double batch, double m, double n,
                       double k) {
  return gemm_kernel_s(sys.peak_flops(dtype), p, batch, m, n, k) * 1e6;
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
  const int n = s.devices();
  out.reserve(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) out.push_back(pr.stages[static_cast<std::size_t>(rank_coord(s, r).pp)].peak_bytes);
  return out;
}

namespace {
const char* prim_name(Prim p) {
  switch (p) {
    case Prim::all_reduce: return "all_reduce";
    case Prim::all_gather: return "all_gather";
    case Prim::reduce_scatter: return "reduce_scatter";
    case Prim::all_to_all: return "all_to_all";
    case Prim::send_recv: return "send_recv";
  }
  return "?";
}
const char* group_name(Group g) {
  switch (g) {
    case Group::tp: return "tp";
    case Group::cp: return "cp";
    case Group::ep: return "ep";
    case Group::dp: return "dp";
    case Group::pp: return "pp";
    case Group::embedding: return "embedding";
  }
  return "?";
}
double recompute_factor(const Ctx& c, const char* name) {
  if (c.r.s.recompute == Recompute::full) return 1;
  const std::string n(name);
  if (c.r.s.recompute == Recompute::selective && (n == "scores" || n == "pv")) return 1;
  return 0;
}
}  // namespace

std::vector<GemmRecord> gemm_diagnostics(const Model& m, const Strategy& s, const System& sys,
                                         const TrainingSettings& t, const PlatformParams& p) {
  std::vector<GemmRecord> out;
  if (check(m, s, t, ValidityOptions{sys.devices_per_node, true, true, true}) != Rejection::ok) return out;
  const Ctx c = make_ctx(m, s, sys, t, p);
  const double mb = static_cast<double>(c.r.num_micro_batches);
  for (int i = 0; i < s.pipeline_parallel; ++i) {
    int first = 0, n = 0;
    stage_layers(m, s.pipeline_parallel, i, first, n);
    const double nm = moe_layers_in(m, first, first + n), nd = n - nm;
    auto add = [&](const Gemm& g, double layers, double passes) {
      out.push_back({g.name, i, static_cast<std::int64_t>(g.batch), static_cast<std::int64_t>(g.m),
                     static_cast<std::int64_t>(g.n), static_cast<std::int64_t>(g.k), t.precision,
                     layers * passes * mb * g.multiplicity, gemm_time_s(c, g.batch, g.m, g.n, g.k) * 1e6});
    };
    if (nd > 0) visit_layer_gemms(c, false, [&](const Gemm& g) { add(g, nd, 3 + recompute_factor(c, g.name)); });
    if (nm > 0) visit_layer_gemms(c, true, [&](const Gemm& g) { add(g, nm, 3 + recompute_factor(c, g.name)); });
    if (i == s.pipeline_parallel - 1) visit_head_gemms(c, [&](const Gemm& g) { add(g, 1, 3); });
  }
  return out;
}

std::vector<CollectiveRecord> collective_diagnostics(const Model& m, const Strategy& s, const System& sys,
                                                     const TrainingSettings& t, const PlatformParams& p) {
  std::vector<CollectiveRecord> out;
  if (check(m, s, t, ValidityOptions{sys.devices_per_node, true, true, true}) != Rejection::ok) return out;
  const Ctx c = make_ctx(m, s, sys, t, p);
  const double mb = static_cast<double>(c.r.num_micro_batches);
  const double rc = s.recompute == Recompute::full ? 1 : 0;
  const Prediction pr = simulate(m, s, sys, t, p);
  for (int i = 0; i < s.pipeline_parallel; ++i) {
    int first = 0, n = 0;
    stage_layers(m, s.pipeline_parallel, i, first, n);
    const double nm = moe_layers_in(m, first, first + n), nd = n - nm;
    auto add = [&](const Collective& k, double layers) {
      const double count = layers * mb * (k.fwd * (1 + rc) + k.bwd);
      if (count <= 0) return;
      const double size = group_size(c, k.group);
      out.push_back({prim_name(k.prim), group_name(k.group), i, static_cast<int>(size), k.bytes, count,
                     collective_time_s(c, k.prim, link_of(c, k.group), size, k.bytes) * 1e3});
    };
    if (nd > 0) visit_layer_collectives(c, false, [&](const Collective& k) { add(k, nd); });
    if (nm > 0) visit_layer_collectives(c, true, [&](const Collective& k) { add(k, nm); });
    visit_edge_collectives(c, i == 0, i == s.pipeline_parallel - 1, [&](const Collective& k) {
      const double count = mb * (k.fwd + k.bwd);
      if (count > 0)
        out.push_back({prim_name(k.prim), group_name(k.group), i, static_cast<int>(c.tp), k.bytes, count,
                       collective_time_s(c, k.prim, c.tp_link, c.tp, k.bytes) * 1e3});
    });
    if (s.pipeline_parallel > 1) {
      const double bytes = c.tokens * c.h * 2 / c.sp_div;
      out.push_back({"send_recv", "pp", i, 2, bytes, 2 * mb * s.virtual_pipeline,
                     collective_time_s(c, Prim::send_recv, c.pp_link, 2, bytes) * 1e3});
    }
    const StageResult& st = pr.stages[static_cast<std::size_t>(i)];
    const double dp_ms = (st.dp_comm_exposed_s + st.dp_comm_overlapped_s) * 1e3;
    const int dp_size = static_cast<int>(c.dp * c.cp);
    if (dp_size > 1 && c.r.distributed_optimizer) {
      // Gradient reduce-scatter and 16-bit parameter all-gather, their time split by volume.
      const double grad = st.gradient_bytes, param = st.weight_bytes;
      out.push_back({"reduce_scatter", "dp", i, dp_size, grad, 1, dp_ms * grad / (grad + param)});
      out.push_back({"all_gather", "dp", i, dp_size, param, 1, dp_ms * param / (grad + param)});
    } else if (dp_size > 1) {
      out.push_back({"all_reduce", "dp", i, dp_size, st.gradient_bytes, 1, dp_ms});
    }
  }
  return out;
}

}  // namespace lmsim
