#include "simulator/model.hpp"

#include <string>

namespace lmsim {

const char* to_string(Activation a) {
  switch (a) {
    case Activation::swiglu: return "swiglu";
    case Activation::geglu: return "geglu";
    case Activation::gelu: return "gelu";
  }
  return "?";
}

const char* to_string(Norm n) { return n == Norm::rmsnorm ? "rmsnorm" : "layernorm"; }

std::int64_t Model::num_moe_layers() const {
  std::int64_t n = 0;
  for (std::int64_t l = 0; l < num_layers; ++l) n += layer_is_moe(l) ? 1 : 0;
  return n;
}

namespace {
double norm_params(const Model& m, double width) { return m.norm == Norm::layernorm ? 2.0 * width : width; }
double mlp_params(const Model& m, double ffn) {
  const double h = static_cast<double>(m.hidden_size);
  return (m.is_gated() ? 3.0 : 2.0) * h * ffn;
}
}  // namespace

LayerParams layer_params(const Model& m) {
  LayerParams p;
  const double h = static_cast<double>(m.hidden_size);
  const double a = static_cast<double>(m.num_attention_heads);
  const double g = static_cast<double>(m.num_kv_heads);
  const double d = static_cast<double>(m.head_dim);
  if (m.is_mla()) {
    const double rope = static_cast<double>(m.qk_rope_head_dim);
    const double vd = static_cast<double>(m.v_head_dim);
    const double ql = static_cast<double>(m.q_lora_rank);
    const double kvl = static_cast<double>(m.kv_lora_rank);
    const double q = ql > 0 ? h * ql + ql + ql * a * (d + rope) : h * a * (d + rope);
    p.attention = q + h * (kvl + rope) + kvl + kvl * a * (d + vd) + a * vd * h;
  } else {
    p.attention = h * a * d + 2.0 * h * g * d + a * d * h;
    if (m.qkv_bias) p.attention += (a + 2.0 * g) * d;
    if (m.qk_norm) p.attention += 2.0 * d;
  }
  p.mlp_dense = mlp_params(m, static_cast<double>(m.ffn_hidden_size));
  if (m.is_moe()) {
    p.router = h * static_cast<double>(m.num_experts);
    p.expert = mlp_params(m, static_cast<double>(m.moe_ffn_hidden_size));
    p.shared_experts = static_cast<double>(m.num_shared_experts) * p.expert;
  }
  p.norms = norm_params(m, h) * (m.post_norms ? 4.0 : 2.0);
  return p;
}

ParamCount count_params(const Model& m) {
  const LayerParams lp = layer_params(m);
  const double h = static_cast<double>(m.hidden_size);
  const double moe_layers = static_cast<double>(m.num_moe_layers());
  const double dense_layers = static_cast<double>(m.num_layers) - moe_layers;
  const double experts = static_cast<double>(m.num_experts);
  const double topk = static_cast<double>(m.experts_per_token);
  const double common = static_cast<double>(m.num_layers) * (lp.attention + lp.norms) + norm_params(m, h);
  ParamCount c;
  c.embedding = static_cast<double>(m.vocab_size) * h;
  c.output_head = m.tied_embeddings ? 0.0 : c.embedding;
  const double moe_total = moe_layers * (lp.router + lp.shared_experts + experts * lp.expert);
  const double moe_active = moe_layers * (lp.router + lp.shared_experts + topk * lp.expert);
  c.non_embedding = common + dense_layers * lp.mlp_dense + moe_total;
  c.total = c.non_embedding + c.embedding + c.output_head;
  c.active_per_token = common + dense_layers * lp.mlp_dense + moe_active + c.embedding + c.output_head;
  return c;
}

std::string validate(const Model& m) {
  auto positive = [](std::int64_t v) { return v > 0; };
  if (!positive(m.hidden_size)) return "hidden_size must be positive";
  if (!positive(m.num_layers)) return "num_layers must be positive";
  if (!positive(m.num_attention_heads)) return "num_attention_heads must be positive";
  if (!positive(m.num_kv_heads)) return "num_kv_heads must be positive";
  if (m.num_kv_heads > m.num_attention_heads) return "num_kv_heads exceeds num_attention_heads";
  if (m.num_attention_heads % m.num_kv_heads != 0) return "num_attention_heads must be a multiple of num_kv_heads";
  if (!positive(m.head_dim)) return "head_dim must be positive";
  if (!positive(m.ffn_hidden_size) && m.first_dense_layers > 0) return "ffn_hidden_size must be positive";
  if (!m.is_moe() && !positive(m.ffn_hidden_size)) return "ffn_hidden_size must be positive";
  if (!positive(m.vocab_size)) return "vocab_size must be positive";
  if (m.num_experts < 0) return "num_experts must not be negative";
  if (m.is_moe()) {
    if (!positive(m.experts_per_token) || m.experts_per_token > m.num_experts)
      return "experts_per_token must be in [1, num_experts]";
    if (!positive(m.moe_ffn_hidden_size)) return "moe_ffn_hidden_size must be positive";
    if (!positive(m.moe_layer_frequency)) return "moe_layer_frequency must be positive";
    if (m.first_dense_layers < 0 || m.first_dense_layers >= m.num_layers)
      return "first_dense_layers must be in [0, num_layers)";
  }
  if (m.num_shared_experts < 0) return "num_shared_experts must not be negative";
  if (m.is_mla() && (!positive(m.qk_rope_head_dim) || !positive(m.v_head_dim)))
    return "MLA needs qk_rope_head_dim and v_head_dim";
  if (m.hidden_size > (1 << 20) || m.num_layers > 4096 || m.vocab_size > (1LL << 24) || m.num_attention_heads > 4096 ||
      m.ffn_hidden_size > (1LL << 22) || m.num_experts > 65536)
    return "a dimension is absurdly large";
  return {};
}

}  // namespace lmsim
