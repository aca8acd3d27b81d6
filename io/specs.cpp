#include "io/specs.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "io/csv.hpp"
#include "io/error.hpp"

#ifndef LMSIM_DATA_DIR
#define LMSIM_DATA_DIR "data"
#endif
#ifndef LMSIM_INSTALL_DATADIR
#define LMSIM_INSTALL_DATADIR "share/lmsim/data"
#endif
#ifndef LMSIM_INSTALLED_DATA_DIR
#define LMSIM_INSTALLED_DATA_DIR "/usr/local/share/lmsim/data"
#endif

namespace fs = std::filesystem;

namespace lmsim::io {

namespace {

// Reads one JSON object strictly: every key must be consumed, each with the right type and range.
class Obj {
 public:
  Obj(const Json& j, std::string file, std::string path) : j_(j), file_(std::move(file)), path_(std::move(path)) {
    if (!j_.is_object()) throw InputError(file_, 0, path_.empty() ? "(top level)" : path_, "expected a JSON object");
  }
  ~Obj() = default;
  std::string where(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  bool has(const std::string& key) const {
    asked_.insert(key);
    return j_.contains(key);
  }
  const Json& raw(const std::string& key) {
    seen_.insert(key);
    asked_.insert(key);
    auto it = j_.find(key);
    if (it == j_.end()) {
      std::vector<std::string> present;
      for (auto k = j_.begin(); k != j_.end(); ++k) present.push_back(k.key());
      const std::string typo = did_you_mean(key, present);
      throw InputError(file_, 0, where(key),
                       typo.empty() ? "required key is missing"
                                    : "required key is missing (is '" + typo + "' a misspelling of it?)");
    }
    return *it;
  }
  double number(const std::string& key, double lo, double hi) {
    const Json& v = raw(key);
    if (!v.is_number()) throw InputError(file_, 0, where(key), "expected a number, got " + v.dump());
    const double d = v.get<double>();
    if (!std::isfinite(d) || d < lo || d > hi)
      throw InputError(file_, 0, where(key), "value " + v.dump() + " is outside [" + fmt(lo) + ", " + fmt(hi) + "]");
    return d;
  }
  double number_or(const std::string& key, double lo, double hi, double dflt) {
    return has(key) ? number(key, lo, hi) : dflt;
  }
  std::int64_t integer(const std::string& key, std::int64_t lo, std::int64_t hi) {
    const Json& v = raw(key);
    if (!v.is_number_integer()) throw InputError(file_, 0, where(key), "expected an integer, got " + v.dump());
    const std::int64_t i = v.get<std::int64_t>();
    if (i < lo || i > hi)
      throw InputError(file_, 0, where(key),
                       "value " + v.dump() + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return i;
  }
  std::int64_t integer_or(const std::string& key, std::int64_t lo, std::int64_t hi, std::int64_t dflt) {
    return has(key) ? integer(key, lo, hi) : dflt;
  }
  bool boolean(const std::string& key) {
    const Json& v = raw(key);
    if (!v.is_boolean()) throw InputError(file_, 0, where(key), "expected true or false, got " + v.dump());
    return v.get<bool>();
  }
  bool boolean_or(const std::string& key, bool dflt) { return has(key) ? boolean(key) : dflt; }
  std::string str(const std::string& key) {
    const Json& v = raw(key);
    if (!v.is_string()) throw InputError(file_, 0, where(key), "expected a string, got " + v.dump());
    if (v.get<std::string>().empty())
      throw InputError(file_, 0, where(key), "empty string; leave the key out to use the default");
    return v.get<std::string>();
  }
  std::string str_or(const std::string& key, const std::string& dflt) { return has(key) ? str(key) : dflt; }
  // A set of module names as a JSON array of them, e.g. Megatron's --recompute-modules ["core_attn", "mlp"]: the
  // bits `bit` gives each, of an enum with `count` names.
  template <class E>
  std::uint8_t module_bits_or(const std::string& key, std::uint8_t dflt, int count, std::uint8_t (*bit)(E)) {
    if (!has(key)) return dflt;
    const Json& v = raw(key);
    if (!v.is_array()) throw InputError(file_, 0, where(key), "expected an array of module names, got " + v.dump());
    std::uint8_t bits = 0;
    for (const Json& e : v) {
      const auto m = e.is_string() ? from_name<E>(e.get<std::string>(), count) : std::nullopt;
      if (!m) throw InputError(file_, 0, where(key), e.dump() + " is not one of " + names_of<E>(count));
      bits |= bit(*m);
    }
    return bits;
  }
  std::uint8_t recompute_modules_or(const std::string& key, std::uint8_t dflt) {
    return module_bits_or<RecomputeModule>(key, dflt, kNumRecomputeModules,
                                           [](RecomputeModule m) { return module_bit(m); });
  }
  template <class E>
  E choice(const std::string& key, std::initializer_list<std::pair<const char*, E>> options, E dflt) {
    if (!has(key)) return dflt;
    const std::string v = str(key);
    std::string list;
    for (const auto& [n, e] : options) {
      if (v == n) return e;
      list += std::string(list.empty() ? "" : ", ") + n;
    }
    throw InputError(file_, 0, where(key), "'" + v + "' is not one of " + list);
  }
  Obj sub(const std::string& key) { return Obj(raw(key), file_, where(key)); }
  // Every key must be known; an unknown one names the closest known key (`num_layer` -> `num_layers`).
  void finish() const {
    for (auto it = j_.begin(); it != j_.end(); ++it)
      if (!seen_.count(it.key())) {
        const std::vector<std::string> cands(asked_.begin(), asked_.end());
        const std::string hint = did_you_mean(it.key(), cands);
        throw InputError(file_, 0, where(it.key()),
                         hint.empty() ? "unknown key" : "unknown key; did you mean '" + hint + "'?");
      }
  }
  void mark(const std::string& key) { seen_.insert(key); }
  const std::string& file() const { return file_; }

 private:
  static std::string fmt(double v) {
    std::string s = std::to_string(v);
    return s;
  }
  const Json& j_;
  std::string file_, path_;
  std::set<std::string> seen_;
  mutable std::set<std::string> asked_;  // every key the reader knows of, for "did you mean"
};

constexpr double kGiB = 1073741824.0;

}  // namespace

Model model_from_json(const Json& j, const std::string& file, const std::string& path) {
  Obj o(j, file, path);
  Model m;
  m.name = o.str("name");
  m.hidden_size = o.integer("hidden_size", 1, 1 << 20);
  m.num_layers = o.integer("num_layers", 1, 4096);
  m.num_attention_heads = o.integer("num_attention_heads", 1, 4096);
  m.num_kv_heads = o.integer_or("num_kv_heads", 1, 4096, m.num_attention_heads);
  if (!j.contains("head_dim") && m.hidden_size % m.num_attention_heads != 0)
    throw InputError(file, 0, path.empty() ? "hidden_size" : path + ".hidden_size",
                     "hidden_size is not divisible by num_attention_heads; give head_dim explicitly");
  m.head_dim = o.integer_or("head_dim", 1, 1 << 16, m.hidden_size / m.num_attention_heads);
  m.ffn_hidden_size = o.integer("ffn_hidden_size", 0, 1 << 22);
  m.vocab_size = o.integer("vocab_size", 1, 1 << 24);
  m.tied_embeddings = o.boolean_or("tied_embeddings", false);
  m.activation = o.choice<Activation>(
      "activation", {{"swiglu", Activation::swiglu}, {"geglu", Activation::geglu}, {"gelu", Activation::gelu}},
      Activation::swiglu);
  m.norm = o.choice<Norm>("norm", {{"rmsnorm", Norm::rmsnorm}, {"layernorm", Norm::layernorm}}, Norm::rmsnorm);
  m.position_embedding_type = o.choice<PositionEmbedding>(
      "position_embedding_type",
      {{"rope", PositionEmbedding::rope}, {"learned_absolute", PositionEmbedding::learned_absolute}},
      PositionEmbedding::rope);
  m.max_position_embeddings = o.integer_or("max_position_embeddings", 0, std::int64_t{1} << 24, 0);
  m.qkv_bias = o.boolean_or("qkv_bias", false);
  m.qk_norm = o.boolean_or("qk_norm", false);
  m.post_norms = o.boolean_or("post_norms", false);
  m.sliding_window = o.integer_or("sliding_window", 0, std::int64_t{1} << 40, 0);
  m.window_attn_skip_freq = o.integer_or("window_attn_skip_freq", 0, 4096, 0);
  m.attention_chunk_size = o.integer_or("attention_chunk_size", 0, std::int64_t{1} << 40, 0);
  m.final_logit_softcapping = o.number_or("final_logit_softcapping", 0, 1e6, 0);
  m.mtp_layers = o.integer_or("mtp_layers", 0, 16, 0);
  if (o.has("moe")) {
    Obj e = o.sub("moe");
    m.num_experts = e.integer("num_experts", 1, 65536);
    m.experts_per_token = e.integer("experts_per_token", 1, 65536);
    m.moe_ffn_hidden_size = e.integer("moe_ffn_hidden_size", 1, 1 << 22);
    m.num_shared_experts = e.integer_or("num_shared_experts", 0, 64, 0);
    m.first_dense_layers = e.integer_or("first_dense_layers", 0, 4096, 0);
    m.moe_layer_frequency = e.integer_or("moe_layer_frequency", 1, 4096, 1);
    m.moe_router_num_groups = e.integer_or("moe_router_num_groups", 0, 65536, 0);
    m.moe_router_group_topk = e.integer_or("moe_router_group_topk", 0, 65536, 0);
    e.finish();
  }
  if (o.has("mla")) {
    Obj a = o.sub("mla");
    m.q_lora_rank = a.integer_or("q_lora_rank", 0, 1 << 16, 0);
    m.kv_lora_rank = a.integer("kv_lora_rank", 1, 1 << 16);
    m.qk_rope_head_dim = a.integer("qk_rope_head_dim", 1, 1 << 12);
    m.v_head_dim = a.integer("v_head_dim", 1, 1 << 12);
    a.finish();
  }
  // Informational keys of presets.
  o.mark("card_total_params");
  o.mark("card_active_params");
  o.mark("source");
  o.finish();
  if (auto why = validate(m); !why.empty()) throw InputError(file, 0, path.empty() ? "(model)" : path, why);
  return m;
}

bool is_hf_config(const Json& j) { return j.is_object() && (j.contains("architectures") || j.contains("model_type")); }

// The name of a HuggingFace config without _name_or_path: a checkpoint folder's name for its config.json
// (Mixtral-8x7B/config.json), else the file's own stem (mixtral.json).
static std::string hf_config_name(const std::string& file) {
  const auto path = std::filesystem::absolute(file).lexically_normal();
  return path.filename() == "config.json" ? path.parent_path().filename().string() : path.stem().string();
}

// A config's per-layer list of which layers attend in full (`full` marks one, `limited` a windowed or chunked one):
// the period f of window_attn_skip_freq, full layers at 1-based f, 2f, ... (1: every layer; 0: none). Another
// entry, a list of another length, or full layers off one period are errors naming `key`.
static std::int64_t full_layer_period(const Json& list, const char* key, std::int64_t layers, const Json& full,
                                      const Json& limited, const std::string& file) {
  if (!list.is_array() || static_cast<std::int64_t>(list.size()) != layers)
    throw InputError(file, 0, key, "expected one entry per hidden layer");
  std::int64_t first_full = 0;
  for (std::int64_t i = 0; i < layers; ++i) {
    const Json& e = list[static_cast<std::size_t>(i)];
    if (e != full && e != limited)
      throw InputError(file, 0, key,
                       "entry " + std::to_string(i) + " is neither " + full.dump() + " nor " + limited.dump());
    const bool is_full = e == full;
    if (is_full && first_full == 0) first_full = i + 1;
    if (is_full != (first_full > 0 && (i + 1) % first_full == 0))
      throw InputError(file, 0, key,
                       "full-attention layers are not every n-th layer; give a model JSON (window_attn_skip_freq)");
  }
  return first_full;
}

// Which layers of a HuggingFace MoE stack route to experts, as its modelling code decides layer by layer, turned
// into lmsim's description: a dense prefix, then every n-th layer. Any other pattern is refused by name.
struct MoePlacement {
  std::int64_t first_dense_layers, moe_layer_frequency;
};
static MoePlacement moe_placement(const std::vector<bool>& is_moe, const char* key, const std::string& file) {
  const auto layers = static_cast<std::int64_t>(is_moe.size());
  auto next_moe = [&](std::int64_t from) {
    while (from < layers && !is_moe[static_cast<std::size_t>(from)]) ++from;
    return from;
  };
  const std::int64_t first = next_moe(0), second = first < layers ? next_moe(first + 1) : layers;
  if (first >= layers) throw InputError(file, 0, key, "no layer has experts; give a model JSON");
  const std::int64_t step = second < layers ? second - first : std::max<std::int64_t>(1, layers - first);
  for (std::int64_t i = 0; i < layers; ++i)
    if (is_moe[static_cast<std::size_t>(i)] != (i >= first && (i - first) % step == 0))
      throw InputError(file, 0, key,
                       "the expert layers are not a dense prefix followed by every n-th layer (layer " +
                           std::to_string(i) +
                           "); give a model JSON (moe.first_dense_layers, moe.moe_layer_frequency)");
  return {first, step};
}

// The layer indices a config lists under `key` (Llama-4's moe_layers, Qwen's mlp_only_layers), each checked.
static std::vector<bool> listed_layers(const Json& j, const char* key, std::int64_t layers, const std::string& file) {
  std::vector<bool> listed(static_cast<std::size_t>(layers), false);
  if (!j.contains(key) || j[key].is_null()) return listed;
  if (!j[key].is_array()) throw InputError(file, 0, key, "expected a list of layer indices");
  for (const Json& e : j[key]) {
    if (!e.is_number_integer() || e.get<std::int64_t>() < 0 || e.get<std::int64_t>() >= layers)
      throw InputError(file, 0, key,
                       "entry " + e.dump() + " is not a layer index in [0, " + std::to_string(layers - 1) + "]");
    listed[static_cast<std::size_t>(e.get<std::int64_t>())] = true;
  }
  return listed;
}

Model model_from_hf_config(const Json& j, const std::string& file) {
  std::string arch = j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
                             j["architectures"][0].is_string()
                         ? j["architectures"][0].get<std::string>()
                         : "";
  const std::string type =
      j.contains("model_type") && j["model_type"].is_string() ? j["model_type"].get<std::string>() : "";
  // Multimodal checkpoints: the language model trains alone (the vision tower is not modelled), read as the
  // causal-LM architecture it is. Its keys come from text_config over the top level's (Qwen2-VL and Qwen2.5-VL keep
  // them at the top level; tie_word_embeddings often stays there), and Gemma-3's omitted keys take transformers'
  // Gemma3TextConfig defaults (vocab_size is implicit in them).
  struct Multimodal {
    const char *arch, *type, *text_arch;
  };
  static const Multimodal kMultimodal[] = {
      {"Gemma3ForConditionalGeneration", "gemma3", "Gemma3ForCausalLM"},
      {"Llama4ForConditionalGeneration", "llama4", "Llama4ForCausalLM"},
      {"Qwen2VLForConditionalGeneration", "qwen2_vl", "Qwen2ForCausalLM"},
      {"Qwen2_5_VLForConditionalGeneration", "qwen2_5_vl", "Qwen2ForCausalLM"},
      {"Qwen3VLForConditionalGeneration", "qwen3_vl", "Qwen3ForCausalLM"},
      {"Qwen3VLMoeForConditionalGeneration", "qwen3_vl_moe", "Qwen3MoeForCausalLM"},
      {"Mistral3ForConditionalGeneration", "mistral3", "MistralForCausalLM"}};
  const Multimodal* mm = nullptr;
  for (const Multimodal& x : kMultimodal)
    if (arch == x.arch || (arch.empty() && type == x.type)) mm = &x;
  if (mm) {
    const bool has_text = j.contains("text_config") && j["text_config"].is_object();
    if (!has_text && !j.contains("num_hidden_layers"))
      throw InputError(file, 0, "text_config", "a multimodal config keeps its language model here; none given");
    Json text = Json::object();
    if (std::string(mm->type) == "gemma3")
      text = {{"hidden_size", 2304},         {"intermediate_size", 9216},
              {"num_hidden_layers", 26},     {"num_attention_heads", 8},
              {"num_key_value_heads", 4},    {"head_dim", 256},
              {"vocab_size", 262208},        {"sliding_window", 4096},
              {"sliding_window_pattern", 6}, {"hidden_activation", "gelu_pytorch_tanh"}};
    for (const auto& [key, value] : j.items())
      if (key != "text_config" && key != "vision_config" && key != "architectures" && key != "model_type")
        text[key] = value;
    if (has_text) text.update(j["text_config"]);
    text.erase("model_type");
    if (j.contains("_name_or_path")) text["_name_or_path"] = j["_name_or_path"];
    text["architectures"] = Json::array({mm->text_arch});
    try {
      return model_from_hf_config(text, file);
    } catch (const InputError& e) {
      if (!has_text) throw;
      throw InputError(file, 0, "text_config." + e.field(), e.why());
    }
  }
  auto need = [&](const char* key) -> const Json& {
    if (!j.contains(key))
      throw InputError(file, 0, key, "HuggingFace config lacks '" + std::string(key) + "' (" + arch + ")");
    return j[key];
  };
  auto integer = [&](const char* key, std::int64_t lo, std::int64_t hi) {
    const Json& v = need(key);
    if (!v.is_number_integer() || v.get<std::int64_t>() < lo || v.get<std::int64_t>() > hi)
      throw InputError(file, 0, key, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return v.get<std::int64_t>();
  };
  auto integer_or = [&](const char* key, std::int64_t lo, std::int64_t hi, std::int64_t dflt) {
    return j.contains(key) && !j[key].is_null() ? integer(key, lo, hi) : dflt;
  };
  auto flag_or = [&](const char* key, bool dflt) {
    if (!j.contains(key) || j[key].is_null()) return dflt;
    if (!j[key].is_boolean()) throw InputError(file, 0, key, "expected true or false");
    return j[key].get<bool>();
  };
  struct Family {
    const char *arch, *type;
  };
  const Family families[] = {{"LlamaForCausalLM", "llama"},
                             {"MistralForCausalLM", "mistral"},
                             {"MixtralForCausalLM", "mixtral"},
                             {"Qwen2ForCausalLM", "qwen2"},
                             {"Qwen2MoeForCausalLM", "qwen2_moe"},
                             {"Qwen3ForCausalLM", "qwen3"},
                             {"Qwen3MoeForCausalLM", "qwen3_moe"},
                             {"Gemma2ForCausalLM", "gemma2"},
                             {"Gemma3ForCausalLM", "gemma3_text"},
                             {"Phi3ForCausalLM", "phi3"},
                             {"PhimoeForCausalLM", "phimoe"},
                             {"NemotronForCausalLM", "nemotron"},
                             {"GptOssForCausalLM", "gpt_oss"},
                             {"DeepseekV2ForCausalLM", "deepseek_v2"},
                             {"DeepseekV3ForCausalLM", "deepseek_v3"},
                             {"Glm4MoeForCausalLM", "glm4_moe"},
                             {"Llama4ForCausalLM", "llama4_text"}};
  auto model_name = [&](const std::string& fallback) {
    const bool named =
        j.contains("_name_or_path") && j["_name_or_path"].is_string() && !j["_name_or_path"].get<std::string>().empty();
    const std::string n = named ? j["_name_or_path"].get<std::string>() : hf_config_name(file);
    return n.empty() ? fallback : n;
  };
  // GPT-2 and GPTBigCode (StarCoder) under GPT-2's key names: GPT's layout (LayerNorm, biased linears, an ungated
  // GELU MLP n_inner wide, 4·n_embd when null, tied embeddings) with learned positions, n_positions rows;
  // GPTBigCode's multi_query shares one K/V head among the queries.
  const bool bigcode = arch == "GPTBigCodeForCausalLM" || (arch.empty() && type == "gpt_bigcode");
  if (bigcode || arch == "GPT2LMHeadModel" || (arch.empty() && type == "gpt2")) {
    Model m;
    m.name = model_name(bigcode ? "gpt_bigcode" : "gpt2");
    m.hidden_size = integer("n_embd", 1, 1 << 20);
    m.num_layers = integer("n_layer", 1, 4096);
    m.num_attention_heads = integer("n_head", 1, 4096);
    if (m.hidden_size % m.num_attention_heads != 0)
      throw InputError(file, 0, "n_embd", "n_embd is not divisible by n_head");
    m.num_kv_heads = bigcode && flag_or("multi_query", true) ? 1 : m.num_attention_heads;
    m.head_dim = m.hidden_size / m.num_attention_heads;
    m.ffn_hidden_size = integer_or("n_inner", 1, 1 << 22, 4 * m.hidden_size);
    m.vocab_size = integer("vocab_size", 1, 1 << 24);
    m.tied_embeddings = flag_or("tie_word_embeddings", true);
    m.activation = Activation::gelu;
    m.norm = Norm::layernorm;
    m.qkv_bias = true;
    m.position_embedding_type = PositionEmbedding::learned_absolute;
    m.max_position_embeddings = integer("n_positions", 1, 1 << 24);
    if (auto why = validate(m); !why.empty()) throw InputError(file, 0, "(model)", why);
    return m;
  }
  std::string family;
  for (const auto& f : families)
    if (arch == f.arch || (arch.empty() && type == f.type)) family = f.type;
  if (family.empty()) {
    std::string list = "GPT2LMHeadModel, GPTBigCodeForCausalLM";
    for (const auto& f : families) list += ", " + std::string(f.arch);
    for (const Multimodal& x : kMultimodal) list += ", " + std::string(x.arch);  // read through their language model
    throw InputError(
        file, 0, "architectures",
        "'" + (arch.empty() ? type : arch) + "' is not a supported architecture (supported: " + list + ")");
  }
  const bool gemma = family == "gemma2" || family == "gemma3_text";
  Model m;
  m.name = model_name(family);
  m.hidden_size = integer("hidden_size", 1, 1 << 20);
  m.num_layers = integer("num_hidden_layers", 1, 4096);
  m.num_attention_heads = integer("num_attention_heads", 1, 4096);
  m.num_kv_heads = integer_or("num_key_value_heads", 1, 4096, m.num_attention_heads);
  if ((!j.contains("head_dim") || j["head_dim"].is_null()) && m.hidden_size % m.num_attention_heads != 0)
    throw InputError(file, 0, "hidden_size", "hidden_size is not divisible by num_attention_heads and no head_dim");
  m.head_dim = integer_or("head_dim", 1, 1 << 16, m.hidden_size / m.num_attention_heads);
  m.vocab_size = integer("vocab_size", 1, 1 << 24);
  m.tied_embeddings = flag_or("tie_word_embeddings", gemma);  // transformers' per-family default
  // LayerNorm where the family's modelling code uses it (PhiMoE's nn.LayerNorm, Nemotron's LayerNorm1P).
  m.norm = family == "phimoe" || family == "nemotron" ? Norm::layernorm : Norm::rmsnorm;
  const std::string act = j.contains("hidden_act") && j["hidden_act"].is_string() ? j["hidden_act"].get<std::string>()
                          : j.contains("hidden_activation") && j["hidden_activation"].is_string()
                              ? j["hidden_activation"].get<std::string>()
                              : "silu";
  // Every family here is gated but Nemotron, whose squared-ReLU MLP is one up-projection: the gelu class, as the
  // Nemotron-4-340B preset models it.
  m.activation = family == "nemotron"        ? Activation::gelu
                 : act.rfind("gelu", 0) == 0 ? Activation::geglu
                                             : Activation::swiglu;
  m.qkv_bias = family == "qwen2" || family == "qwen2_moe" || flag_or("attention_bias", false);
  m.qk_norm = family == "qwen3" || family == "qwen3_moe" || family == "gemma3_text" || flag_or("use_qk_norm", false);
  m.post_norms = gemma;
  // transformers applies sliding_window unless use_sliding_window says otherwise (Qwen2 carries a window it does
  // not use). Which layers attend in full: layer_types where the config lists them (newer transformers), else
  // Gemma-3's sliding_window_pattern (every n-th layer global), Gemma-2's and GPT-OSS's alternation, or none.
  if (j.contains("sliding_window") && j["sliding_window"].is_number_integer() &&
      j["sliding_window"].get<std::int64_t>() > 0 && flag_or("use_sliding_window", true)) {
    m.sliding_window = integer("sliding_window", 1, std::int64_t{1} << 40);
    m.window_attn_skip_freq = family == "gemma2" || family == "gpt_oss" ? 2 : 0;
    if (family == "gemma3_text") m.window_attn_skip_freq = integer_or("sliding_window_pattern", 1, 4096, 6);
    if (j.contains("layer_types") && !j["layer_types"].is_null()) {
      m.window_attn_skip_freq =
          full_layer_period(j["layer_types"], "layer_types", m.num_layers, "full_attention", "sliding_attention", file);
      if (m.window_attn_skip_freq == 1) m.sliding_window = 0;  // every layer attends in full
    }
  }
  if (j.contains("final_logit_softcapping") && j["final_logit_softcapping"].is_number() &&
      j["final_logit_softcapping"].get<double>() > 0)
    m.final_logit_softcapping = j["final_logit_softcapping"].get<double>();
  // The expert layers by the family's own rule (`moe(i)`), placed as a dense prefix and every n-th layer after it.
  auto place_moe = [&](const char* key, auto moe) {
    std::vector<bool> is_moe(static_cast<std::size_t>(m.num_layers));
    for (std::int64_t i = 0; i < m.num_layers; ++i) is_moe[static_cast<std::size_t>(i)] = moe(i);
    const MoePlacement at = moe_placement(is_moe, key, file);
    m.first_dense_layers = at.first_dense_layers;
    m.moe_layer_frequency = at.moe_layer_frequency;
  };
  if (family == "mixtral" || family == "phimoe" || family == "gpt_oss") {
    // Every layer's MLP is the routed experts, each intermediate_size wide.
    m.ffn_hidden_size = integer("intermediate_size", 1, 1 << 22);
    m.num_experts = integer("num_local_experts", 1, 65536);
    m.experts_per_token = integer("num_experts_per_tok", 1, 65536);
    m.moe_ffn_hidden_size = m.ffn_hidden_size;
  } else if (family == "llama4_text") {
    // Llama-4: routed experts and one shared expert, each intermediate_size wide, in every
    // interleave_moe_layer_step-th layer (0-based step-1, 2·step-1, ...); the others a dense MLP of
    // intermediate_size_mlp. Three of four layers attend in chunks of attention_chunk_size; the NoPE layers (every
    // nope_layer_interval-th, or those no_rope_layers marks 0) in full.
    m.num_experts = integer("num_local_experts", 1, 65536);
    m.experts_per_token = integer("num_experts_per_tok", 1, 65536);
    m.moe_ffn_hidden_size = integer("intermediate_size", 1, 1 << 22);
    m.num_shared_experts = 1;
    // transformers' Llama4TextConfig: moe_layers, else every interleave_moe_layer_step-th layer.
    const std::int64_t step = integer_or("interleave_moe_layer_step", 1, 4096, 1);
    const bool listed = j.contains("moe_layers") && !j["moe_layers"].is_null();
    const std::vector<bool> moe_layers = listed_layers(j, "moe_layers", m.num_layers, file);
    place_moe(listed ? "moe_layers" : "interleave_moe_layer_step",
              [&](std::int64_t i) { return listed ? moe_layers[static_cast<std::size_t>(i)] : (i + 1) % step == 0; });
    m.ffn_hidden_size =
        m.first_dense_layers > 0 || m.moe_layer_frequency > 1 ? integer("intermediate_size_mlp", 1, 1 << 22) : 0;
    m.attention_chunk_size = integer_or("attention_chunk_size", 0, std::int64_t{1} << 40, 0);
    m.window_attn_skip_freq = integer_or("nope_layer_interval", 1, 4096, 4);
    if (j.contains("no_rope_layers") && j["no_rope_layers"].is_array() && !j["no_rope_layers"].empty())
      m.window_attn_skip_freq = full_layer_period(j["no_rope_layers"], "no_rope_layers", m.num_layers, 0, 1, file);
  } else if (family == "qwen3_moe" || family == "qwen2_moe") {
    m.ffn_hidden_size = integer_or("intermediate_size", 0, 1 << 22, 0);
    m.num_experts = integer("num_experts", 1, 65536);
    m.experts_per_token = integer("num_experts_per_tok", 1, 65536);
    m.moe_ffn_hidden_size = integer("moe_intermediate_size", 1, 1 << 22);
    // Qwen2/3-MoE's rule (transformers): experts where (i + 1) % decoder_sparse_step == 0 and i is not in
    // mlp_only_layers; the other layers are dense MLPs of intermediate_size.
    const std::int64_t step = integer_or("decoder_sparse_step", 1, 4096, 1);
    const std::vector<bool> dense = listed_layers(j, "mlp_only_layers", m.num_layers, file);
    place_moe(
        std::any_of(dense.begin(), dense.end(), [](bool d) { return d; }) ? "mlp_only_layers" : "decoder_sparse_step",
        [&](std::int64_t i) { return !dense[static_cast<std::size_t>(i)] && (i + 1) % step == 0; });
    if (m.first_dense_layers > 0 || m.moe_layer_frequency > 1)
      m.ffn_hidden_size = integer("intermediate_size", 1, 1 << 22);
    // Qwen2-MoE's shared expert: one MLP of shared_expert_intermediate_size, as wide as that many routed experts
    // side by side (its sigmoid gate, one h -> 1 projection, is left out).
    const std::int64_t shared = integer_or("shared_expert_intermediate_size", 0, 1 << 24, 0);
    if (shared % m.moe_ffn_hidden_size != 0)
      throw InputError(
          file, 0, "shared_expert_intermediate_size",
          "not a multiple of moe_intermediate_size (" + std::to_string(m.moe_ffn_hidden_size) + "); give a model JSON");
    m.num_shared_experts = shared / m.moe_ffn_hidden_size;
  } else if (family == "deepseek_v2" || family == "deepseek_v3" || family == "glm4_moe") {
    m.ffn_hidden_size = integer("intermediate_size", 1, 1 << 22);
    m.num_experts = integer("n_routed_experts", 1, 65536);
    m.experts_per_token = integer("num_experts_per_tok", 1, 65536);
    m.moe_ffn_hidden_size = integer("moe_intermediate_size", 1, 1 << 22);
    m.num_shared_experts = integer_or("n_shared_experts", 0, 64, 0);
    // Group-limited routing (DeepSeek-V2/V3's n_group / topk_group; one group is no limit).
    if (const std::int64_t groups = integer_or("n_group", 0, 65536, 0); groups > 1) {
      m.moe_router_num_groups = groups;
      m.moe_router_group_topk = integer("topk_group", 1, groups);
    }
    // transformers' rule: experts from layer first_k_dense_replace on, where i % moe_layer_freq == 0 (GLM-4.5:
    // every layer from there).
    const std::int64_t first = integer_or("first_k_dense_replace", 0, 4096, 0);
    const std::int64_t freq = family == "glm4_moe" ? 1 : integer_or("moe_layer_freq", 1, 4096, 1);
    place_moe(freq > 1 ? "moe_layer_freq" : "first_k_dense_replace",
              [&](std::int64_t i) { return i >= first && i % freq == 0; });
    m.mtp_layers = integer_or("num_nextn_predict_layers", 0, 16, 0);
    if (family != "glm4_moe") {  // multi-head latent attention (GLM-4.5 keeps grouped-query attention)
      m.q_lora_rank = integer_or("q_lora_rank", 0, 1 << 16, 0);  // null: queries projected directly (V2-Lite)
      m.kv_lora_rank = integer("kv_lora_rank", 1, 1 << 16);
      m.qk_rope_head_dim = integer("qk_rope_head_dim", 1, 1 << 12);
      m.head_dim = integer("qk_nope_head_dim", 1, 1 << 12);
      m.v_head_dim = integer("v_head_dim", 1, 1 << 12);
    }
  } else {
    m.ffn_hidden_size = integer("intermediate_size", 1, 1 << 22);
  }
  if (auto why = validate(m); !why.empty()) throw InputError(file, 0, "(model)", why);
  return m;
}

Json to_json(const Model& m) {
  Json j;
  j["name"] = m.name;
  j["hidden_size"] = m.hidden_size;
  j["num_layers"] = m.num_layers;
  j["num_attention_heads"] = m.num_attention_heads;
  j["num_kv_heads"] = m.num_kv_heads;
  j["head_dim"] = m.head_dim;
  j["ffn_hidden_size"] = m.ffn_hidden_size;
  j["vocab_size"] = m.vocab_size;
  j["tied_embeddings"] = m.tied_embeddings;
  j["activation"] = to_string(m.activation);
  j["norm"] = to_string(m.norm);
  j["position_embedding_type"] = to_string(m.position_embedding_type);
  if (m.max_position_embeddings > 0) j["max_position_embeddings"] = m.max_position_embeddings;
  j["qkv_bias"] = m.qkv_bias;
  j["qk_norm"] = m.qk_norm;
  j["post_norms"] = m.post_norms;
  if (m.sliding_window > 0) j["sliding_window"] = m.sliding_window;
  if (m.attention_chunk_size > 0) j["attention_chunk_size"] = m.attention_chunk_size;
  if (m.sliding_window > 0 || m.attention_chunk_size > 0) j["window_attn_skip_freq"] = m.window_attn_skip_freq;
  if (m.final_logit_softcapping > 0) j["final_logit_softcapping"] = m.final_logit_softcapping;
  if (m.mtp_layers > 0) j["mtp_layers"] = m.mtp_layers;
  if (m.is_moe())
    j["moe"] = {{"num_experts", m.num_experts},
                {"experts_per_token", m.experts_per_token},
                {"moe_ffn_hidden_size", m.moe_ffn_hidden_size},
                {"num_shared_experts", m.num_shared_experts},
                {"first_dense_layers", m.first_dense_layers},
                {"moe_layer_frequency", m.moe_layer_frequency}};
  if (m.moe_router_num_groups > 0) {
    j["moe"]["moe_router_num_groups"] = m.moe_router_num_groups;
    j["moe"]["moe_router_group_topk"] = m.moe_router_group_topk;
  }
  if (m.is_mla())
    j["mla"] = {{"q_lora_rank", m.q_lora_rank},
                {"kv_lora_rank", m.kv_lora_rank},
                {"qk_rope_head_dim", m.qk_rope_head_dim},
                {"v_head_dim", m.v_head_dim}};
  return j;
}

namespace {
Link link_from(Obj o) {
  Link l;
  l.bandwidth_bytes_per_s = o.number("bandwidth_gb_per_s", 1e-3, 1e6) * 1e9;
  l.latency_s = o.number("latency_us", 0, 1e6) * 1e-6;
  o.finish();
  return l;
}
// A node's direct-link table: an array of rows of non-negative link counts (the shape and symmetry are checked by
// validate(System)).
std::vector<int> link_matrix(const Json& v, const std::string& file, const std::string& where) {
  std::vector<int> out;
  if (!v.is_array()) throw InputError(file, 0, where, "expected an array of rows of link counts, got " + v.dump());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const Json& row = v[i];
    if (!row.is_array() || row.size() != v.size())
      throw InputError(file, 0, where + "[" + std::to_string(i) + "]",
                       "expected a row of " + std::to_string(v.size()) + " link counts, got " + row.dump());
    for (const Json& e : row) {
      if (!e.is_number_integer() || e.get<std::int64_t>() < 0 || e.get<std::int64_t>() > 64)
        throw InputError(file, 0, where + "[" + std::to_string(i) + "]",
                         "link count " + e.dump() + " is not an integer in [0, 64]");
      out.push_back(static_cast<int>(e.get<std::int64_t>()));
    }
  }
  return out;
}
Json link_json(const Link& l) {
  return Json{{"bandwidth_gb_per_s", l.bandwidth_bytes_per_s / 1e9}, {"latency_us", l.latency_s * 1e6}};
}
}  // namespace

System system_from_json(const Json& j, const std::string& file, const std::string& path, PlatformParams* defaults) {
  Obj o(j, file, path);
  System s;
  s.name = o.str("name");
  s.device = o.str_or("device", s.name);
  s.devices_per_node = static_cast<int>(o.integer("devices_per_node", 1, 1024));
  Obj f = o.sub("peak_tflops");
  s.peak_flops_fp16 = f.number_or("fp16", 0, 1e6, 0) * 1e12;
  s.peak_flops_bf16 = f.number_or("bf16", 0, 1e6, 0) * 1e12;
  s.peak_flops_fp8 = f.number_or("fp8", 0, 1e6, 0) * 1e12;
  s.peak_flops_fp4 = f.number_or("fp4", 0, 1e6, 0) * 1e12;
  f.finish();
  s.hbm_capacity_bytes = o.number("hbm_capacity_gib", 1e-3, 1e6) * kGiB;
  s.hbm_bandwidth_bytes_per_s = o.number("hbm_bandwidth_gb_per_s", 1e-3, 1e7) * 1e9;
  {
    Obj in = o.sub("intra_node");
    s.intra_node_host_bandwidth_bytes_per_s = in.number_or("host_bandwidth_gb_per_s", 1e-3, 1e6, 0) * 1e9;
    if (in.has("links")) s.intra_node_links = NodeLinks(link_matrix(in.raw("links"), in.file(), in.where("links")));
    in.mark("links");
    in.mark("host_bandwidth_gb_per_s");
    s.intra_node = link_from(in);
  }
  s.inter_node = link_from(o.sub("inter_node"));
  s.gemm_layout_conversion = o.boolean_or("gemm_layout_conversion", false);
  s.nvlink_sharp = o.boolean_or("nvlink_sharp", false);
  s.nccl_protocols = o.boolean_or("nccl_protocols", true);
  s.sm_count = static_cast<int>(o.integer_or("sm_count", 0, 100000, 0));
  s.fused_attention = o.boolean_or("fused_attention", true);
  s.grouped_gemm_kernel = o.boolean_or("grouped_gemm_kernel", false);
  s.flash_softmax_stats_bytes = o.number_or("flash_softmax_stats_bytes", 0, 1024, 4);
  s.flash_attention_2_throughput = o.number_or("flash_attention_2_throughput", 0.05, 4, 1);
  s.mxfp8 = o.boolean_or("mxfp8", false);
  s.fp8_block_scaled_gemm_throughput = o.number_or("fp8_block_scaled_gemm_throughput", 0.05, 4, 1);
  s.fp4_gemm_throughput = o.number_or("fp4_gemm_throughput", 0.05, 4, 1);
  if (o.has("default_params")) {
    const PlatformParams d = params_from_json(o.raw("default_params"), file, o.where("default_params"));
    if (defaults) *defaults = d;
  }
  o.mark("source");
  o.mark("calibrated_params");
  o.mark("prior_params");
  o.mark("prior_note");
  o.mark("theta");  // what `lmsim systems --json` says of the preset's θ; informational, so its output reads back
  o.finish();
  if (auto why = validate(s); !why.empty()) throw InputError(file, 0, path.empty() ? "(system)" : path, why);
  return s;
}

Json to_json(const System& s) {
  Json j;
  j["name"] = s.name;
  j["device"] = s.device;
  j["devices_per_node"] = s.devices_per_node;
  j["peak_tflops"] = {{"fp16", s.peak_flops_fp16 / 1e12},
                      {"bf16", s.peak_flops_bf16 / 1e12},
                      {"fp8", s.peak_flops_fp8 / 1e12},
                      {"fp4", s.peak_flops_fp4 / 1e12}};
  j["hbm_capacity_gib"] = s.hbm_capacity_bytes / kGiB;
  j["hbm_bandwidth_gb_per_s"] = s.hbm_bandwidth_bytes_per_s / 1e9;
  j["intra_node"] = link_json(s.intra_node);
  if (!s.intra_node_links.empty()) {
    const std::size_t n = static_cast<std::size_t>(s.devices_per_node);
    Json rows = Json::array();
    for (std::size_t i = 0; i < n; ++i)
      rows.push_back(std::vector<int>(s.intra_node_links.begin() + static_cast<std::ptrdiff_t>(i * n),
                                      s.intra_node_links.begin() + static_cast<std::ptrdiff_t>((i + 1) * n)));
    j["intra_node"]["links"] = rows;
    j["intra_node"]["host_bandwidth_gb_per_s"] = s.intra_node_host_bandwidth_bytes_per_s / 1e9;
  }
  j["inter_node"] = link_json(s.inter_node);
  j["gemm_layout_conversion"] = s.gemm_layout_conversion;
  j["nvlink_sharp"] = s.nvlink_sharp;
  j["nccl_protocols"] = s.nccl_protocols;
  if (s.sm_count > 0) j["sm_count"] = s.sm_count;
  j["fused_attention"] = s.fused_attention;
  j["grouped_gemm_kernel"] = s.grouped_gemm_kernel;
  j["flash_softmax_stats_bytes"] = s.flash_softmax_stats_bytes;
  j["flash_attention_2_throughput"] = s.flash_attention_2_throughput;
  j["mxfp8"] = s.mxfp8;
  j["fp8_block_scaled_gemm_throughput"] = s.fp8_block_scaled_gemm_throughput;
  j["fp4_gemm_throughput"] = s.fp4_gemm_throughput;
  return j;
}

const char* mindspeed_cp_algo(CpCommType c) {
  static const char* const kNames[kNumCpCommTypes] = {"megatron_cp_algo", "ulysses_cp_algo", "kvallgather_cp_algo",
                                                      "hybrid_cp_algo"};
  return kNames[static_cast<int>(c)];
}

std::optional<CpCommType> parse_cp_comm_type(const std::string& name) {
  if (const auto c = from_name<CpCommType>(name, kNumCpCommTypes)) return c;
  for (int i = 0; i < kNumCpCommTypes; ++i)
    if (name == mindspeed_cp_algo(static_cast<CpCommType>(i))) return static_cast<CpCommType>(i);
  return std::nullopt;
}

std::string cp_comm_type_problem(const std::string& name) {
  if (name.find("adaptive") != std::string::npos)
    return "'" + name + "': adaptive context parallelism is not modelled; use " + names_of<CpCommType>(kNumCpCommTypes);
  std::string mindspeed;
  for (int i = 0; i < kNumCpCommTypes; ++i)
    mindspeed += std::string(i ? ", " : "") + mindspeed_cp_algo(static_cast<CpCommType>(i));
  return "'" + name + "' is not one of " + names_of<CpCommType>(kNumCpCommTypes) + " (or MindSpeed-LLM's " + mindspeed +
         ")";
}

// Megatron-core's --cp-comm-type, or MindSpeed-LLM's --context-parallel-algo name for the same algorithm.
CpCommType cp_comm_type_or(Obj& o, const std::string& key, CpCommType dflt) {
  if (!o.has(key)) return dflt;
  const std::string v = o.str(key);
  if (const auto c = parse_cp_comm_type(v)) return *c;
  throw InputError(o.file(), 0, o.where(key), cp_comm_type_problem(v));
}

TrainingSettings settings_from_json(const Json& j, const std::string& file, const std::string& path,
                                    const TrainingSettings& base, bool consistent) {
  Obj o(j, file, path);
  TrainingSettings t = base;
  t.seq_length = o.integer_or("seq_length", 1, 1 << 24, t.seq_length);
  t.global_batch_size = o.integer_or("global_batch_size", 1, 1 << 30, t.global_batch_size);
  t.micro_batch_size = o.integer_or("micro_batch_size", 1, 1 << 30, t.micro_batch_size);
  t.precision = o.choice<Precision>(
      "precision",
      {{"fp16", Precision::fp16}, {"bf16", Precision::bf16}, {"fp8", Precision::fp8}, {"fp4", Precision::fp4}},
      t.precision);
  if (o.has(kBothDropouts)) t.hidden_dropout = t.attention_dropout = o.boolean(kBothDropouts);
  for (const SettingFlag& f : kSettingFlags) t.*f.member = o.boolean_or(f.name, t.*f.member);
  t.recompute_modules = o.recompute_modules_or("recompute_modules", t.recompute_modules);
  t.moe_load_imbalance = o.number_or("moe_load_imbalance", 1, 64, t.moe_load_imbalance);
  t.moe_expert_capacity_factor = o.number_or("moe_expert_capacity_factor", 0, 64, t.moe_expert_capacity_factor);
  t.cp_comm_type = cp_comm_type_or(o, "cp_comm_type", t.cp_comm_type);
  // Megatron-core's names; MindSpeed-LLM's alltoall_seq is the all-to-all exchange on SP-sharded tokens.
  t.moe_token_dispatcher_type = o.choice<MoeDispatcher>("moe_token_dispatcher_type",
                                                        {{"alltoall", MoeDispatcher::alltoall},
                                                         {"alltoall_seq", MoeDispatcher::alltoall},
                                                         {"allgather", MoeDispatcher::allgather},
                                                         {"flex", MoeDispatcher::flex}},
                                                        t.moe_token_dispatcher_type);
  t.attention_backend = o.choice<AttentionBackend>(
      "attention_backend", {{"fused", AttentionBackend::fused}, {"flash", AttentionBackend::flash}},
      t.attention_backend);
  t.fp8_recipe = o.choice<Fp8Recipe>("fp8_recipe",
                                     {{"delayed", Fp8Recipe::delayed},
                                      {"tensorwise", Fp8Recipe::tensorwise},
                                      {"mxfp8", Fp8Recipe::mxfp8},
                                      {"blockwise", Fp8Recipe::blockwise}},
                                     t.fp8_recipe);
  t.ulysses_degree_in_cp = o.integer_or("ulysses_degree_in_cp", 0, 65536, t.ulysses_degree_in_cp);
  t.num_layers_at_start_in_bf16 =
      o.integer_or("num_layers_at_start_in_bf16", 0, 1 << 16, t.num_layers_at_start_in_bf16);
  t.num_layers_at_end_in_bf16 = o.integer_or("num_layers_at_end_in_bf16", 0, 1 << 16, t.num_layers_at_end_in_bf16);
  t.microbatch_group_size_per_vp_stage =
      o.integer_or("microbatch_group_size_per_vp_stage", 0, 1 << 20, t.microbatch_group_size_per_vp_stage);
  t.document_tokens = o.integer_or("document_tokens", 0, 1 << 24, t.document_tokens);
  t.lora_rank = o.integer_or("lora_rank", 0, 1 << 16, t.lora_rank);
  t.lora_target_modules = o.module_bits_or<LoraTarget>("lora_target_modules", t.lora_target_modules, kNumLoraTargets,
                                                       [](LoraTarget l) { return lora_bit(l); });
  o.mark("note");
  o.finish();
  if (!consistent) return t;
  if (auto bad = settings_problem(t))
    throw InputError(file, 0, path.empty() ? bad->field : path + "." + bad->field, bad->why);
  return t;
}

std::vector<std::string> recompute_module_names(const TrainingSettings& t) {
  std::vector<std::string> names;
  for (int i = 0; i < kNumRecomputeModules; ++i)
    if (t.recomputes(static_cast<RecomputeModule>(i))) names.push_back(to_string(static_cast<RecomputeModule>(i)));
  return names;
}

std::vector<std::string> lora_target_names(const TrainingSettings& t) {
  std::vector<std::string> names;
  for (int i = 0; i < kNumLoraTargets; ++i)
    if (t.lora_targets(static_cast<LoraTarget>(i))) names.push_back(to_string(static_cast<LoraTarget>(i)));
  return names;
}

Json to_json(const TrainingSettings& t) {
  Json j{{"seq_length", t.seq_length},
         {"global_batch_size", t.global_batch_size},
         {"micro_batch_size", t.micro_batch_size},
         {"precision", to_string(t.precision)}};
  for (const SettingFlag& f : kSettingFlags) j[f.name] = t.*f.member;
  j["recompute_modules"] = recompute_module_names(t);
  j["moe_load_imbalance"] = t.moe_load_imbalance;
  j["moe_expert_capacity_factor"] = t.moe_expert_capacity_factor;
  j["cp_comm_type"] = to_string(t.cp_comm_type);
  j["moe_token_dispatcher_type"] = to_string(t.moe_token_dispatcher_type);
  j["attention_backend"] = to_string(t.attention_backend);
  j["fp8_recipe"] = to_string(t.fp8_recipe);
  if (t.ulysses_degree_in_cp > 0) j["ulysses_degree_in_cp"] = t.ulysses_degree_in_cp;
  if (t.first_last_layers_bf16) {
    j["num_layers_at_start_in_bf16"] = t.num_layers_at_start_in_bf16;
    j["num_layers_at_end_in_bf16"] = t.num_layers_at_end_in_bf16;
  }
  if (t.microbatch_group_size_per_vp_stage > 0)
    j["microbatch_group_size_per_vp_stage"] = t.microbatch_group_size_per_vp_stage;
  if (t.document_tokens > 0) j["document_tokens"] = t.document_tokens;
  if (t.lora()) {
    j["lora_rank"] = t.lora_rank;
    j["lora_target_modules"] = lora_target_names(t);
  }
  return j;
}

PlatformParams params_from_json(const Json& j, const std::string& file, const std::string& path,
                                const PlatformParams& base) {
  Obj o(j, file, path);
  PlatformParams p = base;
  if (o.has(kRetiredParam))
    throw InputError(file, 0, o.where(kRetiredParam), std::string(kRetiredParamWhy) + "; remove the key");
  for (std::size_t i = 0; i < kNumParams; ++i) {
    const ParamInfo& info = param_table()[i];
    if (o.has(info.name)) set(p, i, o.number(info.name, info.lower, info.upper));
  }
  o.finish();
  return p;
}

Json to_json(const PlatformParams& p) {
  Json j;
  for (std::size_t i = 0; i < kNumParams; ++i) j[param_table()[i].name] = get(p, i);
  return j;
}

namespace {
long line_of(const std::string& text, std::size_t byte) {
  long line = 1;
  for (std::size_t i = 0; i < byte && i < text.size(); ++i) line += text[i] == '\n' ? 1 : 0;
  return line;
}
// Byte offset of the n-th (0-based) occurrence of "key" used as an object key, for error lines.
std::size_t key_offset(const std::string& text, const std::string& key, int n) {
  const std::string quoted = "\"" + key + "\"";
  std::size_t pos = 0;
  for (;;) {
    pos = text.find(quoted, pos);
    if (pos == std::string::npos) return text.size();
    std::size_t after = pos + quoted.size();
    while (after < text.size() && std::isspace(static_cast<unsigned char>(text[after]))) ++after;
    if (after < text.size() && text[after] == ':' && n-- == 0) return pos;
    pos += quoted.size();
  }
}
}  // namespace

Json parse_json_file(const std::string& file) {
  const std::string text = read_file(file);
  // A key given twice in one object is an error (JSON leaves it undefined; silently keeping the last hides typos).
  std::vector<std::vector<std::string>> open_objects;
  std::map<std::string, int> seen_as_key;
  auto check_keys = [&](int, Json::parse_event_t ev, Json& parsed) {
    if (ev == Json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (ev == Json::parse_event_t::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (ev == Json::parse_event_t::key && parsed.is_string()) {
      const std::string k = parsed.get<std::string>();
      const int n = seen_as_key[k]++;
      auto& keys = open_objects.back();
      if (std::find(keys.begin(), keys.end(), k) != keys.end())
        throw InputError(file, line_of(text, key_offset(text, k, n)), k, "key given twice in one object");
      keys.push_back(k);
    }
    return true;
  };
  try {
    return Json::parse(text, check_keys);
  } catch (const Json::parse_error& e) {
    throw InputError(file, line_of(text, e.byte), "", std::string("malformed JSON: ") + e.what());
  } catch (const Json::out_of_range&) {  // a number beyond a double's range
    static const std::regex number(R"(-?[0-9]+(\.[0-9]+)?[eE][+-]?[0-9]+)");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), number); it != std::sregex_iterator(); ++it)
      if (!std::isfinite(std::strtod(it->str().c_str(), nullptr)))
        throw InputError(file, line_of(text, static_cast<std::size_t>(it->position())), "",
                         "number " + it->str() + " is beyond the range of a double");
    throw InputError(file, 0, "", "a number is beyond the range of a double");
  }
}

std::string data_dir() {
  if (const char* env = std::getenv("LMSIM_DATA_DIR"); env && *env) return env;
  std::error_code ec;
  auto has_presets = [&ec](const fs::path& d) { return fs::is_directory(d / "presets", ec); };
  // An installed (possibly moved) lmsim: <prefix>/bin/lmsim next to <prefix>/share/lmsim/data.
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path beside = exe.parent_path().parent_path() / LMSIM_INSTALL_DATADIR;
    if (has_presets(beside)) return beside.string();
  }
  if (has_presets(LMSIM_DATA_DIR)) return LMSIM_DATA_DIR;  // the build tree: the source checkout's data/
  return LMSIM_INSTALLED_DATA_DIR;                         // a program linking the installed libraries
}

Presets load_presets(const std::string& dir) {
  Presets p;
  const std::string mf = dir + "/presets/models.json";
  const Json mj = parse_json_file(mf);
  if (!mj.contains("models") || !mj["models"].is_array()) throw InputError(mf, 0, "models", "expected an array");
  for (std::size_t i = 0; i < mj["models"].size(); ++i) {
    const Json& e = mj["models"][i];
    const std::string where = "models[" + std::to_string(i) + "]";
    ModelPreset mp;
    mp.model = model_from_json(e, mf, where);
    if (e.contains("card_total_params") && e["card_total_params"].is_number())
      mp.card_total_params = e["card_total_params"].get<double>();
    if (e.contains("card_active_params") && e["card_active_params"].is_number())
      mp.card_active_params = e["card_active_params"].get<double>();
    if (e.contains("source") && e["source"].is_string()) mp.source = e["source"].get<std::string>();
    p.models.push_back(std::move(mp));
  }
  const std::string sf = dir + "/presets/systems.json";
  const Json sj = parse_json_file(sf);
  if (!sj.contains("systems") || !sj["systems"].is_array()) throw InputError(sf, 0, "systems", "expected an array");
  for (std::size_t i = 0; i < sj["systems"].size(); ++i) {
    const Json& e = sj["systems"][i];
    SystemPreset sp;
    sp.system = system_from_json(e, sf, "systems[" + std::to_string(i) + "]", &sp.default_params);
    if (e.contains("source") && e["source"].is_string()) sp.source = e["source"].get<std::string>();
    // A shipped θ file the entry names under `key` (relative to the data folder): its shown name, its path and its
    // values over the preset's defaults. Library data, not an input of the command that happens to load the presets.
    auto theta_file = [&](const char* key, std::string& shown, std::string& path) {
      const std::string where = "systems[" + std::to_string(i) + "]." + key;
      if (!e[key].is_string()) throw InputError(sf, 0, where, "expected a θ file path");
      shown = "data/" + e[key].get<std::string>();
      path = dir + "/" + e[key].get<std::string>();
      if (!std::filesystem::exists(path)) throw InputError(sf, 0, where, "no file " + path);
      const PlatformParams values = load_params(path, sp.default_params);
      forget_input(path);
      return values;
    };
    if (e.contains("calibrated_params"))
      sp.calibrated_params = theta_file("calibrated_params", sp.calibrated_file, sp.calibrated_path);
    if (e.contains("prior_params")) {  // the prior's centre (the uncalibrated defaults) from another system's fit
      const std::string where = "systems[" + std::to_string(i) + "].prior_params";
      if (!e.contains("prior_note") || !e["prior_note"].is_string() || e["prior_note"].get<std::string>().empty())
        throw InputError(sf, 0, where, "needs a prior_note saying why the values carry over");
      if (!sp.calibrated_file.empty())
        throw InputError(sf, 0, where, "a system with calibrated_params is centred on its own fit");
      sp.default_params = theta_file("prior_params", sp.prior_file, sp.prior_path);
      sp.prior_note = e["prior_note"].get<std::string>();
    }
    p.systems.push_back(std::move(sp));
  }
  const std::string kf = dir + "/presets/stacks.json";
  const Json kj = parse_json_file(kf);
  Obj top(kj, kf, "");
  top.mark("note");
  const Json& list = top.raw("stacks");
  top.finish();
  if (!list.is_array()) throw InputError(kf, 0, "stacks", "expected an array");
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string where = "stacks[" + std::to_string(i) + "]";
    Obj o(list[i], kf, where);
    StackPreset st;
    st.name = o.str("name");
    st.summary = o.str("summary");
    st.source = o.str_or("source", "");
    st.describes = o.str_or("describes", "");
    auto names = [&](const char* key) {
      std::vector<std::string> v;
      if (!o.has(key)) return v;
      const Json& a = o.raw(key);
      if (!a.is_array()) throw InputError(kf, 0, where + "." + key, "expected an array of names");
      for (const Json& e : a) {
        if (!e.is_string()) throw InputError(kf, 0, where + "." + key, "expected a name, got " + e.dump());
        v.push_back(e.get<std::string>());
      }
      return v;
    };
    st.systems = names("systems");
    st.varies = names("varies");
    for (const auto& sys : st.systems)
      if (!p.find_system(sys)) throw InputError(kf, 0, where + ".systems", "no system preset '" + sys + "'");
    if (o.has("settings_file") == o.has("settings"))
      throw InputError(kf, 0, where, "give exactly one of settings_file and settings");
    if (o.has("settings_file")) {
      st.settings_file = o.str("settings_file");
      const std::string f = dir + "/" + st.settings_file;
      st.settings = settings_from_json(parse_json_file(f), f);
      forget_input(f);
    } else {
      st.settings = settings_from_json(o.raw("settings"), kf, where + ".settings");
    }
    o.finish();
    if (p.find_stack(st.name)) throw InputError(kf, 0, where + ".name", "stack '" + st.name + "' is listed twice");
    p.stacks.push_back(std::move(st));
  }
  forget_input(kf);
  return p;
}

const Presets& presets() {
  static const Presets p = load_presets(data_dir());
  return p;
}

namespace {
std::string lower(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}
// Levenshtein distance, for "did you mean".
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}
}  // namespace

std::string did_you_mean(const std::string& name, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = std::string::npos;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(lower(name), lower(c));
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best_d <= std::max<std::size_t>(2, name.size() / 3) ? best : "";
}

// Names match without regard to case (`llama-3-8b` is `Llama-3-8B`).
const ModelPreset* Presets::find_model(const std::string& name) const {
  for (const auto& m : models)
    if (m.model.name == name) return &m;
  for (const auto& m : models)
    if (lower(m.model.name) == lower(name)) return &m;
  return nullptr;
}
const SystemPreset* Presets::find_system(const std::string& name) const {
  for (const auto& s : systems)
    if (s.system.name == name) return &s;
  for (const auto& s : systems)
    if (lower(s.system.name) == lower(name)) return &s;
  return nullptr;
}

const StackPreset* Presets::find_stack(const std::string& name) const {
  for (const auto& s : stacks)
    if (s.name == name) return &s;
  return nullptr;
}

namespace {
// An unknown preset name: the closest preset, then all of them.
[[noreturn]] void unknown_preset(const char* option, const char* kind, const std::string& name,
                                 const std::vector<std::string>& names) {
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  const std::string hint = did_you_mean(name, names);
  throw InputError(option, 0, "",
                   "unknown " + std::string(kind) + " '" + name + "' (not a preset, not a .json file)" +
                       (hint.empty() ? "" : "; did you mean '" + hint + "'?") + " Presets: " + list);
}
}  // namespace

Model resolve_model(const std::string& name) {
  if (const ModelPreset* mp = presets().find_model(name)) return mp->model;
  if (name.size() > 5 && name.substr(name.size() - 5) == ".json" && std::filesystem::exists(name)) {
    const Json j = parse_json_file(name);
    return is_hf_config(j) ? model_from_hf_config(j, name) : model_from_json(j, name);
  }
  std::vector<std::string> names;
  for (const auto& m : presets().models) names.push_back(m.model.name);
  unknown_preset("--model", "model", name, names);
}

System resolve_system(const std::string& name, PlatformParams* defaults, std::string* params_source) {
  if (const SystemPreset* sp = presets().find_system(name)) {
    if (defaults) *defaults = sp->params();
    if (params_source) *params_source = sp->params_source();
    return sp->system;
  }
  if (params_source) *params_source = "uncalibrated defaults of " + name;
  if (name.size() > 5 && name.substr(name.size() - 5) == ".json" && std::filesystem::exists(name))
    return system_from_json(parse_json_file(name), name, "", defaults);
  std::vector<std::string> names;
  for (const auto& s : presets().systems) names.push_back(s.system.name);
  unknown_preset("--system", "system", name, names);
}

std::string unknown_stack(const std::string& name) {
  std::vector<std::string> names;
  std::string list;
  for (const auto& st : presets().stacks) {
    names.push_back(st.name);
    list += (list.empty() ? "" : ", ") + st.name;
  }
  const std::string typo = did_you_mean(name, names);
  return "unknown stack '" + name + "'" + (typo.empty() ? "" : " (did you mean '" + typo + "'?)") +
         "; the stacks: " + list;
}

std::string matching_stack(const TrainingSettings& t) {
  auto shape = [](const TrainingSettings& x) {
    Json j = to_json(x);
    for (const char* k : {"seq_length", "global_batch_size", "micro_batch_size"}) j.erase(k);
    return j;
  };
  const Json mine = shape(t);
  for (const auto& st : presets().stacks)
    if (shape(st.settings) == mine) return st.name;
  return "";
}

const StackPreset& resolve_stack(const std::string& name, const char* option) {
  if (const StackPreset* st = presets().find_stack(name)) return *st;
  throw InputError(option, 0, "", unknown_stack(name));
}

PlatformParams params_of_theta_file(const Json& j, const std::string& file, const PlatformParams& base) {
  if (j.is_object() && j.contains("params")) return params_from_json(j["params"], file, "params", base);
  return params_from_json(j, file, "", base);
}

PlatformParams load_params(const std::string& file, const PlatformParams& base) {
  return params_of_theta_file(parse_json_file(file), file, base);
}

bool fold_moe_replicas(Strategy& s, std::int64_t devices) {
  if (s.devices() == devices || s.expert_parallel <= 1 || s.devices() * s.expert_parallel != devices) return false;
  s.data_parallel *= s.expert_parallel;
  return true;
}

Strategy parse_strategy(const std::string& name, const std::string& source, std::int64_t devices) {
  // The command line's spelling (parse_strategy_spec): any field order, dp from the device count, the other degrees
  // 1 where left out, recompute also as Megatron's flag values; dataset names stay exactly as the dataset writes them.
  ParseResult r = parse_strategy_spec(name, devices);
  if (!r.strategy) throw InputError(source, 0, "", r.error);  // the flag is the field
  return *r.strategy;
}

}  // namespace lmsim::io
