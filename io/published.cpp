#include "io/published.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "io/csv.hpp"
#include "io/error.hpp"
#include "io/specs.hpp"

namespace lmsim::io {

namespace {

const std::vector<std::string> kReadingColumns = {
    "file", "line", "use", "model", "system", "recompute", "micro_batch_size", "virtual_pipeline", "note"};
// The settings a reading must state when it names no stack (`stack` column empty or absent); with a stack, an empty
// cell is the stack's.
const std::vector<std::string> kStatedSettings = {
    "precision",           "sequence_parallel",    "tp_comm_overlap",
    "overlap_grad_reduce", "overlap_param_gather", "distributed_optimizer",
    "fp32_gradients",      "flash_attention",      "hidden_dropout",
    "attention_dropout",   "overlap_p2p_comm"};
const std::vector<std::string> kDataColumns = {"source",  "model", "layers", "hidden", "heads", "ffn",  "vocab",
                                               "seq_len", "gpus",  "tp",     "pp",     "cp",    "ep",   "vp",
                                               "dp",      "mbs",   "gbs",    "metric", "value", "unit", "gpu_type"};

// An enum setting's column, where the row has a value: one of the enum's names, else the row and column are named.
template <class E>
void choice(const CsvTable& t, std::size_t r, const char* col, int count, E& out) {
  if (!t.has(col) || t.at(r, t.col(col)).empty()) return;
  const std::string name = t.text(r, col);
  const auto v = from_name<E>(name, count);
  if (!v) t.fail(r, col, "'" + name + "' is not one of " + names_of<E>(count));
  out = *v;
}

bool flag(const CsvTable& t, std::size_t r, const char* col) {
  const std::string& v = t.text(r, col);
  if (v == "true") return true;
  if (v == "false") return false;
  t.fail(r, col, "'" + v + "' is not true or false");
}

std::int64_t whole(const CsvTable& t, std::size_t r, const char* col, std::int64_t lo, std::int64_t hi) {
  return t.integer(r, col, lo, hi);
}

bool is_integer_text(const std::string& s) {
  if (s.empty()) return false;
  for (char ch : s)
    if (ch < '0' || ch > '9') return false;
  return true;
}

// The published value: the first number of the cell ("30624 (29521)" lists a variant in parentheses), its digits
// grouped in threes by commas as a page may print them ("1,671").
double published_value(const CsvTable& t, std::size_t r) {
  std::string v = t.text(r, "value");
  v = v.substr(0, v.find(' '));
  static const std::regex kGrouped(R"(\d{1,3}(,\d{3})+(\.\d*)?)");
  if (std::regex_match(v, kGrouped)) v.erase(std::remove(v.begin(), v.end(), ','), v.end());
  double out = 0;
  if (!parse_number(v, out) || !(out > 0)) t.fail(r, "value", "'" + t.text(r, "value") + "' is not a positive number");
  return out;
}

// GPT as Megatron-LM builds it (Narayanan et al. 2021; NeMo's GPT-3 configs): MHA, GELU MLP, LayerNorm, biases,
// tied embeddings, learned positions (no rotary; a table of the sequence's rows). Architecture from the row.
Model gpt_from_row(const CsvTable& t, std::size_t r) {
  Model m;
  m.name = t.text(r, "model");
  m.num_layers = whole(t, r, "layers", 1, 4096);
  m.hidden_size = whole(t, r, "hidden", 1, 1 << 20);
  m.num_attention_heads = whole(t, r, "heads", 1, 4096);
  m.num_kv_heads = m.num_attention_heads;
  m.head_dim = m.hidden_size / m.num_attention_heads;
  m.ffn_hidden_size = whole(t, r, "ffn", 1, 1 << 22);
  m.vocab_size = t.rows[r][t.col("vocab")].empty() ? 50257 : whole(t, r, "vocab", 1, 1 << 24);  // GPT-2 BPE
  m.tied_embeddings = true;
  m.activation = Activation::gelu;
  m.norm = Norm::layernorm;
  m.position_embedding_type = PositionEmbedding::learned_absolute;
  m.max_position_embeddings = whole(t, r, "seq_len", 1, 1 << 24);  // the recipes' table: the sequence
  m.qkv_bias = true;
  if (auto why = validate(m); !why.empty()) t.fail(r, "model", why);
  return m;
}

}  // namespace

// NeMo's performance pages count model FLOPs with attention full, not causal: per token 6 FLOPs per layer weight
// (the model's non-embedding parameters: attention, MLP and the norms, which are negligible), 12·L·s·(heads·head_dim)
// for the attention scores and scores·V, and 6·h·V for the LM head. Checked on the NeMo 24.07 page, which prints
// both tokens/s and TFLOP/s: their ratio matches this count to 0.13 % on all ten rows with a published architecture
// (GPT-3, Llama-2, Llama-3, Nemotron-4-340B); counting attention as causal misses by 1.3-11 %. Dense models only
// (the pages that use it).
double nemo_model_flops_per_token(const Model& m, double seq) {
  const double h = static_cast<double>(m.hidden_size), L = static_cast<double>(m.num_layers);
  const double q = static_cast<double>(m.num_attention_heads * m.head_dim);
  return 6 * count_params(m).non_embedding + 12 * L * seq * q + 6 * h * static_cast<double>(m.vocab_size);
}

PublishedSet read_published(const std::string& dir) {
  PublishedSet out;
  out.root = dir;
  const CsvTable rd = read_csv(dir + "/readings.csv", kReadingColumns);
  std::map<std::string, CsvTable> files;
  std::set<std::pair<std::string, long>> seen;
  for (std::size_t i = 0; i < rd.rows.size(); ++i) {
    const std::string file = rd.text(i, "file");
    if (file.find('/') != std::string::npos || file.find("..") != std::string::npos)
      rd.fail(i, "file", "must name a file in the same folder");
    const long line = static_cast<long>(rd.integer(i, "line", 2, 1 << 30));
    if (!seen.insert({file, line}).second) rd.fail(i, "line", file + ":" + std::to_string(line) + " is read twice");
    auto it = files.find(file);
    if (it == files.end()) it = files.emplace(file, read_csv(dir + "/" + file, kDataColumns)).first;
    const CsvTable& t = it->second;
    std::size_t r = t.rows.size();
    for (std::size_t k = 0; k < t.rows.size(); ++k)
      if (t.lines[k] == line) r = k;
    if (r == t.rows.size()) rd.fail(i, "line", file + " has no data row at line " + std::to_string(line));
    const std::string label = t.text(r, "model") + " " + t.text(r, "gpus") + "x" + t.rows[r][t.col("gpu_type")];
    const std::string use = rd.text(i, "use");
    if (use == "drop") {
      out.dropped.push_back({file, line, label, rd.text(i, "note")});
      continue;
    }
    if (use != "use" && use != "validate") rd.fail(i, "use", "'" + use + "' is not use, validate or drop");

    PublishedRun run;
    run.fit = use == "use";
    run.file = file;
    run.line = line;
    run.source = std::filesystem::path(file).stem().string();
    run.system = rd.text(i, "system");
    if (!presets().find_system(run.system)) rd.fail(i, "system", "'" + run.system + "' is not a system preset");
    run.label = t.text(r, "model") + " " + t.text(r, "gpus") + "x" + run.system;
    run.note = rd.text(i, "note");
    const std::string model = rd.text(i, "model");
    if (model == "row:gpt") {
      run.model = gpt_from_row(t, r);
    } else if (const ModelPreset* mp = presets().find_model(model)) {
      run.model = mp->model;
    } else {
      rd.fail(i, "model", "'" + model + "' is neither a model preset nor row:gpt");
    }

    Strategy& s = run.strategy;
    s.tensor_parallel = static_cast<int>(whole(t, r, "tp", 1, 65536));
    s.pipeline_parallel = static_cast<int>(whole(t, r, "pp", 1, 128));
    s.context_parallel = static_cast<int>(whole(t, r, "cp", 1, 65536));
    s.expert_parallel = static_cast<int>(whole(t, r, "ep", 1, 65536));
    s.data_parallel = static_cast<int>(whole(t, r, "dp", 1, 65536));
    // The recipe's --expert-tensor-parallel-size where it differs from tp (MoE parallel folding); empty: tp.
    if (rd.has("expert_tensor_parallel") && !rd.at(i, rd.col("expert_tensor_parallel")).empty())
      s.set_expert_tensor(static_cast<int>(rd.integer(i, "expert_tensor_parallel", 1, 65536)));
    // The row's GPU count, or the reading's where the row's contradicts its own layout and batch (its note says
    // why): then it must be the layout's product, and the time is derived per GPU with it.
    const bool read_gpus = rd.has("gpus") && !rd.at(i, rd.col("gpus")).empty();
    const std::int64_t gpus = read_gpus ? rd.integer(i, "gpus", 1, 1 << 24) : whole(t, r, "gpus", 1, 1 << 24);
    if (s.devices() != gpus) {
      const std::string why =
          "tp·pp·cp·dp = " + std::to_string(s.devices()) + " is not the GPU count " + std::to_string(gpus);
      if (read_gpus) rd.fail(i, "gpus", why);
      t.fail(r, "dp", why);
    }
    const std::string rc = rd.text(i, "recompute");
    const auto recompute = from_name<Recompute>(rc, kNumRecompute);
    if (!recompute) rd.fail(i, "recompute", "'" + rc + "' is not one of " + names_of<Recompute>(kNumRecompute));
    s.recompute = *recompute;
    s.virtual_pipeline = static_cast<int>(rd.integer(i, "virtual_pipeline", 1, 4096));
    const std::string& vp = t.rows[r][t.col("vp")];
    if (is_integer_text(vp) && std::stoll(vp) != s.virtual_pipeline)
      rd.fail(i, "virtual_pipeline", "the row publishes vp " + vp);
    s.micro_batch_size = rd.integer(i, "micro_batch_size", 1, 1 << 20);
    const std::string& mbs = t.rows[r][t.col("mbs")];
    if (is_integer_text(mbs) && std::stoll(mbs) != s.micro_batch_size)
      rd.fail(i, "micro_batch_size", "the row publishes mbs " + mbs);

    TrainingSettings& st = run.settings;
    // A reading may name a stack (presets/stacks.json): its settings are the base, and a column left empty is the
    // stack's. Without one every setting of kStatedSettings is stated.
    const std::string stack = rd.has("stack") ? rd.at(i, rd.col("stack")) : std::string();
    if (!stack.empty()) {
      const StackPreset* sp = presets().find_stack(stack);
      if (!sp) rd.fail(i, "stack", unknown_stack(stack));
      st = sp->settings;
      run.stack = stack;
    } else {
      for (const auto& sp : presets().stacks)  // the stack whose published file this is, if any
        if (sp.describes == file) run.stack = sp.name;
      st.fused_kernels = true;
      const bool both_dropouts = rd.has(kBothDropouts) && !rd.at(i, rd.col(kBothDropouts)).empty();
      for (const auto& col : kStatedSettings)
        if ((!rd.has(col) || rd.at(i, rd.col(col)).empty()) &&
            !(both_dropouts && (col == "hidden_dropout" || col == "attention_dropout")))
          rd.fail(i, col, "required when the reading names no stack");
    }
    st.seq_length = whole(t, r, "seq_len", 1, 1 << 24);
    st.global_batch_size = whole(t, r, "gbs", 1, 1 << 30);
    st.micro_batch_size = s.micro_batch_size;
    if (rd.has("precision") && !rd.at(i, rd.col("precision")).empty()) {
      const std::string prec = rd.text(i, "precision");
      const auto precision = from_name<Precision>(prec, kNumPrecisions);
      if (!precision) rd.fail(i, "precision", "'" + prec + "' is not one of " + names_of<Precision>(kNumPrecisions));
      st.precision = *precision;
    }
    // The on/off settings the reading states: any column it has with a value in the row.
    if (rd.has(kBothDropouts) && !rd.at(i, rd.col(kBothDropouts)).empty())
      st.hidden_dropout = st.attention_dropout = flag(rd, i, kBothDropouts);
    for (const SettingFlag& f : kSettingFlags)
      if (rd.has(f.name) && !rd.at(i, rd.col(f.name)).empty()) st.*f.member = flag(rd, i, f.name);
    // Megatron's --recompute-modules for selective recompute, space-separated; empty: the default (core_attn).
    if (rd.has("recompute_modules") && !rd.at(i, rd.col("recompute_modules")).empty()) {
      st.recompute_modules = 0;
      std::istringstream names(rd.at(i, rd.col("recompute_modules")));
      for (std::string name; names >> name;) {
        const auto m = from_name<RecomputeModule>(name, kNumRecomputeModules);
        if (!m) rd.fail(i, "recompute_modules", "'" + name + "' is not a Megatron recompute module");
        st.recompute_modules |= module_bit(*m);
      }
    }
    // The enum settings by their Megatron-core names, each column optional; empty: the stack's (Megatron-core's or
    // lmsim's default without one): --moe-token-dispatcher-type (all-to-all), --attention-backend for the flash
    // kernel (fused: cuDNN; flash: FlashAttention-2), --fp8-recipe (delayed).
    choice(rd, i, "moe_token_dispatcher_type", kNumMoeDispatchers, st.moe_token_dispatcher_type);
    choice(rd, i, "attention_backend", kNumAttentionBackends, st.attention_backend);
    choice(rd, i, "fp8_recipe", kNumFp8Recipes, st.fp8_recipe);
    // A contradiction is blamed on its setting: the table's own sizes on the data row, the rest on the reading.
    if (auto bad = settings_problem(st)) {
      if (bad->field == "global_batch_size" || bad->field == "seq_length")
        t.fail(r, bad->field == "seq_length" ? "seq_len" : "gbs", bad->why);
      rd.fail(i, rd.has(bad->field) ? bad->field : "precision", bad->why);
    }
    const System& sys = presets().find_system(run.system)->system;
    if (const auto problem = precision_problem(sys, st)) rd.fail(i, problem->field, run.system + " " + problem->why);

    const std::string metric = t.text(r, "metric");
    const double v = published_value(t, r);
    const double B = static_cast<double>(st.global_batch_size), S = static_cast<double>(st.seq_length);
    if (metric == "tokens_per_sec_per_GPU") {
      run.time_s = B * S / (v * static_cast<double>(gpus));
      run.derivation = "gbs·seq / (tokens/s/GPU · gpus)";
    } else if (metric == "achieved_TFLOPs_per_GPU") {
      // Narayanan et al. 2021, Eq. 3 (counts the recomputed forward pass): F = 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)).
      const double l = static_cast<double>(run.model.num_layers), h = static_cast<double>(run.model.hidden_size);
      const double V = static_cast<double>(run.model.vocab_size);
      const double F = 96 * B * S * l * h * h * (1 + S / (6 * h) + V / (16 * l * h));
      run.time_s = F / (v * 1e12 * static_cast<double>(gpus));
      run.derivation = "Narayanan et al. 2021 Eq. 3 FLOPs / (TFLOP/s/GPU · gpus)";
    } else if (metric == "model_TFLOPs_per_GPU" || metric == "TFLOPs_per_GPU_with_CP") {
      if (run.model.is_moe() || run.model.is_mla())
        t.fail(r, "metric", "NeMo model TFLOP/s is converted for dense models only");
      run.time_s = B * S * nemo_model_flops_per_token(run.model, S) / (v * 1e12 * static_cast<double>(gpus));
      run.derivation = "NeMo model FLOPs (full attention) / (TFLOP/s/GPU · gpus)";
    } else {
      t.fail(r, "metric",
             "'" + metric +
                 "' gives no iteration time (use tokens_per_sec_per_GPU, achieved_TFLOPs_per_GPU, "
                 "model_TFLOPs_per_GPU or TFLOPs_per_GPU_with_CP)");
    }
    if (read_gpus) run.derivation += ", the reading's GPU count " + std::to_string(gpus);
    out.runs.push_back(std::move(run));
  }
  if (out.runs.empty()) throw InputError(dir + "/readings.csv", 0, "use", "no row is used");
  return out;
}

}  // namespace lmsim::io
