// lmsim/simulator/model.hpp — the model M of a simulation instance x = (M, P, N).
//
// Owns: the architecture description of a decoder-only transformer (dense or MoE, MHA/GQA/MQA/MLA) and the
// parameter counts that follow from it. Pure value type; no I/O.
#pragma once

#include <cstdint>
#include <string>

namespace lmsim {

enum class Activation { swiglu, geglu, gelu };
enum class Norm { rmsnorm, layernorm };
// Where positions enter (Megatron-LM --position-embedding-type): rotary embeddings applied to q and k in every
// layer, or GPT's learned table added to the input embedding (its rows are first-stage parameters; the lookup and
// add, one pass over the stage's input, are not timed).
enum class PositionEmbedding { rope, learned_absolute };

const char* to_string(Activation a);
const char* to_string(Norm n);
const char* to_string(PositionEmbedding p);

struct Model {
  std::string name;
  std::int64_t hidden_size = 0;
  std::int64_t num_layers = 0;
  std::int64_t num_attention_heads = 0;
  std::int64_t num_kv_heads = 0;  // = num_attention_heads for MHA, 1 for MQA
  std::int64_t head_dim = 0;      // may differ from hidden_size / num_attention_heads (Qwen3, Gemma-2)
  std::int64_t ffn_hidden_size = 0;
  std::int64_t vocab_size = 0;
  bool tied_embeddings = false;
  Activation activation = Activation::swiglu;
  Norm norm = Norm::rmsnorm;
  PositionEmbedding position_embedding_type = PositionEmbedding::rope;
  // learned_absolute: the position table's rows (Megatron-LM --max-position-embeddings), a parameter of the first
  // stage replicated across TP; at least the run's sequence (0: exactly it).
  std::int64_t max_position_embeddings = 0;
  bool qkv_bias = false;
  bool qk_norm = false;
  bool post_norms = false;  // Gemma-2 style extra norms after attention and MLP
  // Sliding-window attention: a query attends to the sliding_window tokens up to itself (0: full causal
  // attention). window_attn_skip_freq, as Megatron-core spells it: every n-th layer attends in full, the others
  // through the window (Gemma-2: 2, local and global layers alternate); 0: every layer is windowed (Mistral-7B
  // v0.1). MindSpeed-LLM passes them as --sliding-window / --interleave-sliding-window.
  std::int64_t sliding_window = 0;
  std::int64_t window_attn_skip_freq = 0;
  // Chunked attention (Llama-4's attention_chunk_size): a query attends only to the tokens of its own chunk of this
  // many, up to itself; window_attn_skip_freq's every n-th layer attends in full (Llama-4: its NoPE layers, every
  // 4th). 0: none. Exclusive with sliding_window.
  std::int64_t attention_chunk_size = 0;
  // Gemma-2's final-logit soft-capping: logits = c·tanh(logits / c) before the loss (HF final_logit_softcapping,
  // MindSpeed-LLM --output-logit-softcapping); 0: none.
  double final_logit_softcapping = 0;

  // Mixture of experts: 0 experts = dense.
  std::int64_t num_experts = 0;
  std::int64_t experts_per_token = 0;
  std::int64_t moe_ffn_hidden_size = 0;
  std::int64_t num_shared_experts = 0;   // each of moe_ffn_hidden_size width
  std::int64_t first_dense_layers = 0;   // leading layers that keep a dense MLP (DeepSeek-V3: 3)
  std::int64_t moe_layer_frequency = 1;  // after the dense prefix, every n-th layer is MoE
  // Group-limited routing (Megatron-core --moe-router-num-groups / --moe-router-group-topk; HF n_group /
  // topk_group): the experts split into that many equal groups and a token's experts lie in group_topk of them
  // (DeepSeek-V3: 8 groups, one per node of its EP 64 layout, 4 chosen). 0: not limited.
  std::int64_t moe_router_num_groups = 0;
  std::int64_t moe_router_group_topk = 0;
  // Multi-token prediction (DeepSeek-V3): modules after the last layer, each one transformer layer (MoE when the
  // model's last layer is) plus a 2h -> h projection and another pass through the shared LM head and loss.
  std::int64_t mtp_layers = 0;

  // Multi-head latent attention (DeepSeek-V2/V3); kv_lora_rank > 0 switches it on. head_dim is then the
  // non-rotary query/key head dimension.
  std::int64_t q_lora_rank = 0;
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_rope_head_dim = 0;
  std::int64_t v_head_dim = 0;

  bool is_moe() const { return num_experts > 0; }
  bool is_mla() const { return kv_lora_rank > 0; }
  bool is_gated() const { return activation != Activation::gelu; }
  bool is_rotary() const { return position_embedding_type == PositionEmbedding::rope; }  // MLA: always (validate)
  bool layer_is_moe(std::int64_t layer) const {
    return is_moe() && layer >= first_dense_layers && (layer - first_dense_layers) % moe_layer_frequency == 0;
  }
  std::int64_t num_moe_layers() const;
  // Whether any layer keeps a dense MLP: every layer of a dense model; an MoE model's leading dense layers and, with
  // moe_layer_frequency > 1, the layers between its MoE ones. Qwen3-30B-A3B has none.
  bool has_dense_layers() const {
    return !is_moe() || first_dense_layers > 0 || (moe_layer_frequency > 1 && num_layers > 1);
  }
  // The share of full causal attention's work (query-key pairs) the model's layers do on average at sequence
  // length seq: a windowed layer pairs a query with at most sliding_window keys, w·s − w²/2 pairs against s²/2; a
  // chunked one does the causal square of each chunk, (⌊s/c⌋·c² + (s mod c)²)/2.
  double attention_window_fraction(std::int64_t seq) const;
};

struct ParamCount {
  double total = 0;             // every parameter stored (embedding counted once if tied)
  double non_embedding = 0;     // total minus input embedding and output head
  double active_per_token = 0;  // parameters touched by one token (MoE: top-k experts only)
  double embedding = 0;         // input embedding (vocab x hidden), with a learned position table's rows x hidden
  double output_head = 0;       // 0 when tied
};

// Counted on the op list of simulator/execution.hpp (each op owns its weights); defined in simulate.cpp.
ParamCount count_params(const Model& m);

// Whether two specs describe the same network, whatever their names: every architectural field equal, the
// vocabulary within 5 % (one tokenizer padded differently: GPT-2's 50,257 entries, Megatron's 51,200). A θ fitted on
// a published run read from its table ("GPT3-175B") was thereby fitted on the preset of that model ("GPT-3-175B").
bool same_architecture(const Model& a, const Model& b);

// Structural sanity of a spec; returns an empty string when valid, else the offending field and why.
std::string validate(const Model& m);

}  // namespace lmsim
