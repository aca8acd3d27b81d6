#include "simulator/model.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>

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

const char* to_string(PositionEmbedding p) { return p == PositionEmbedding::rope ? "rope" : "learned_absolute"; }

std::int64_t Model::num_moe_layers() const {
  std::int64_t n = 0;
  for (std::int64_t l = 0; l < num_layers; ++l) n += layer_is_moe(l) ? 1 : 0;
  return n;
}

double Model::attention_window_fraction(std::int64_t seq) const {
  const std::int64_t limit = sliding_window > 0 ? sliding_window : attention_chunk_size;
  if (limit <= 0 || seq <= limit) return 1.0;
  const double w = static_cast<double>(limit) / static_cast<double>(seq);
  const double rest = static_cast<double>(seq % limit) / static_cast<double>(seq);
  const double windowed = sliding_window > 0 ? 2 * w - w * w : static_cast<double>(seq / limit) * w * w + rest * rest;
  // Layers f, 2f, ... (1-based) attend in full.
  const std::int64_t full = window_attn_skip_freq > 0 ? num_layers / window_attn_skip_freq : 0;
  const double n = static_cast<double>(num_layers), f = static_cast<double>(full);
  return (f + (n - f) * windowed) / n;
}

bool same_architecture(const Model& a, const Model& b) {
  const auto body = [](const Model& m) {
    return std::tie(m.hidden_size, m.num_layers, m.num_attention_heads, m.num_kv_heads, m.head_dim, m.ffn_hidden_size,
                    m.tied_embeddings, m.activation, m.norm, m.position_embedding_type, m.max_position_embeddings,
                    m.qkv_bias, m.qk_norm, m.post_norms, m.sliding_window, m.window_attn_skip_freq,
                    m.attention_chunk_size, m.final_logit_softcapping, m.num_experts, m.experts_per_token,
                    m.moe_ffn_hidden_size, m.num_shared_experts, m.first_dense_layers, m.moe_layer_frequency,
                    m.moe_router_num_groups, m.moe_router_group_topk, m.mtp_layers, m.q_lora_rank, m.kv_lora_rank,
                    m.qk_rope_head_dim, m.v_head_dim);
  };
  const auto va = static_cast<double>(a.vocab_size), vb = static_cast<double>(b.vocab_size);
  return body(a) == body(b) && std::abs(va - vb) <= 0.05 * std::max(va, vb);
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
  if (!positive(m.vocab_size)) return "vocab_size must be positive";
  if (m.sliding_window < 0 || m.window_attn_skip_freq < 0 || m.attention_chunk_size < 0)
    return "sliding_window, attention_chunk_size and window_attn_skip_freq must not be negative";
  if (m.sliding_window > 0 && m.attention_chunk_size > 0)
    return "sliding_window and attention_chunk_size exclude each other";
  if (m.num_experts < 0) return "num_experts must not be negative";
  if (m.is_moe()) {
    if (!positive(m.experts_per_token) || m.experts_per_token > m.num_experts)
      return "experts_per_token must be in [1, num_experts]";
    if (!positive(m.moe_ffn_hidden_size)) return "moe_ffn_hidden_size must be positive";
    if (!positive(m.moe_layer_frequency)) return "moe_layer_frequency must be positive";
    if (m.first_dense_layers < 0 || m.first_dense_layers >= m.num_layers)
      return "first_dense_layers must be in [0, num_layers)";
    // Megatron-core's group_limited_topk: equal groups, top-(topk / group_topk) scores summed per group.
    if (m.moe_router_num_groups > 0 &&
        (m.num_experts % m.moe_router_num_groups != 0 || m.moe_router_group_topk < 1 ||
         m.moe_router_group_topk > m.moe_router_num_groups || m.experts_per_token % m.moe_router_group_topk != 0 ||
         m.experts_per_token > m.moe_router_group_topk * (m.num_experts / m.moe_router_num_groups)))
      return "moe_router_num_groups must divide num_experts and moe_router_group_topk be in [1, groups], dividing "
             "experts_per_token, with enough experts in the chosen groups";
    if (m.moe_router_num_groups == 0 && m.moe_router_group_topk != 0)
      return "moe_router_group_topk needs moe_router_num_groups";
  }
  if (!positive(m.ffn_hidden_size) && m.has_dense_layers())
    return "ffn_hidden_size must be positive (the model has layers with a dense MLP)";
  if (m.num_shared_experts < 0) return "num_shared_experts must not be negative";
  if (m.is_mla() && (!positive(m.qk_rope_head_dim) || !positive(m.v_head_dim)))
    return "MLA needs qk_rope_head_dim and v_head_dim";
  if (m.is_mla() && m.position_embedding_type != PositionEmbedding::rope)
    return "MLA applies rotary embeddings to its decoupled heads: position_embedding_type must be rope";
  if (m.hidden_size > (1 << 20) || m.num_layers > 4096 || m.vocab_size > (1LL << 24) || m.num_attention_heads > 4096 ||
      m.ffn_hidden_size > (1LL << 22) || m.num_experts > 65536)
    return "a dimension is absurdly large";
  return {};
}

}  // namespace lmsim
