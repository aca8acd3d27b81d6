#include "io/megatron_log.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <regex>

#include "io/csv.hpp"
#include "io/error.hpp"
#include "io/specs.hpp"

namespace lmsim::io {

namespace {

struct Arg {
  std::string value;
  long line;
};

// The items of a logged Python list or scalar (`['a2a', 'p2p']`, `[2, 4]`, `p2p`): brackets, quotes and blanks
// dropped, split at commas.
std::vector<std::string> logged_list(const std::string& v) {
  std::vector<std::string> items;
  std::string item;
  for (char ch : v + ",") {
    if (ch == ',') {
      if (!item.empty()) items.push_back(item);
      item.clear();
    } else if (ch != '[' && ch != ']' && ch != '\'' && ch != '"' && ch != ' ') {
      item += ch;
    }
  }
  return items;
}

}  // namespace

namespace {

using Args = std::map<std::string, Arg>;

// What a log's lines give besides its settings: the logged iteration intervals (ms, line) and each reporting rank's
// peak memory.
struct Measured {
  std::vector<std::pair<double, long>> intervals;
  std::map<int, double> peak_memory_bytes;
};

// The label a launcher puts before each line it relays: Slurm's `srun --label` ("12: ") or torchrun's
// `--tee` / `--redirects` ("[default3]:"). A Windows line end goes too.
void strip_launcher_label(std::string& line) {
  if (!line.empty() && line.back() == '\r') line.pop_back();
  std::size_t i = 0;
  if (line.rfind("[default", 0) == 0) {
    i = 8;
    while (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]))) ++i;
    if (i > 8 && line.compare(i, 2, "]:") == 0) line.erase(0, i + 2);
    return;
  }
  while (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]))) ++i;
  if (i > 0 && line.compare(i, 2, ": ") == 0) line.erase(0, i + 2);
}

// A log read line by line: each line's number, with the launcher's label taken off.
class LogLines {
 public:
  explicit LogLines(const std::string& path) : in_(path) {
    note_input(path);
    if (!in_) throw InputError(path, 0, "", "cannot read the log");
  }
  bool next(std::string& line) {
    if (!std::getline(in_, line)) return false;
    ++number;
    strip_launcher_label(line);
    return true;
  }
  long number = 0;

 private:
  std::ifstream in_;
};

// training_log's `iteration N/ M | … | elapsed time per iteration (ms): T |`, the same in Megatron-LM and
// Megatron-Bridge; true when `line` is one.
bool read_interval(const std::string& path, const std::string& line, long ln, Measured& out) {
  static const std::regex iter_line(R"(iteration\s+(\d+)/\s*\d+ \|.*elapsed time per iteration \(ms\): ([0-9.eE+-]+))");
  std::smatch m;
  if (!std::regex_search(line, m, iter_line)) return false;
  double ms = 0;
  if (!parse_number(m[2].str(), ms) || ms <= 0)
    throw InputError(path, ln, "elapsed time per iteration (ms)", "'" + m[2].str() + "' is not a positive time");
  out.intervals.emplace_back(ms, ln);
  return true;
}

// An integer a log states (a rank, a parallel degree, a size), within [lo, hi]: checked against the range before it
// is converted, so no value overflows the conversion.
std::int64_t logged_count(const std::string& path, long ln, const char* field, const std::string& v, std::int64_t lo,
                          std::int64_t hi) {
  double x = 0;
  if (!parse_number(v, x) || x < static_cast<double>(lo) || x > static_cast<double>(hi) || x != std::floor(x))
    throw InputError(path, ln, field,
                     "'" + v + "' is not an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return static_cast<std::int64_t>(x);
}

// One rank's reported peak, `v` in units of `unit_bytes`.
void note_peak(const std::string& path, long ln, const char* field, const std::string& v, double unit_bytes,
               const std::string& rank, Measured& out) {
  double x = 0;
  if (!parse_number(v, x) || x <= 0) throw InputError(path, ln, field, "'" + v + "' is not a positive size");
  const int r = static_cast<int>(logged_count(path, ln, "Rank", rank, 0, 1 << 24));
  out.peak_memory_bytes[r] = std::max(out.peak_memory_bytes[r], x * unit_bytes);
}

MegatronRun run_from_args(const std::string& path, const Args& args, const Measured& measured);

}  // namespace

MegatronRun read_megatron_log(const std::string& path, MemoryReport memory) {
  LogLines lines(path);
  static const std::regex arg_line(R"(^\s+([A-Za-z0-9_]+) \.+ (.*?)\s*$)");
  static const std::regex mem_line(
      R"(\[Rank (\d+)\] \(after \d+ iterations\) memory \(MB\) \| allocated: [0-9.eE+-]+ \| max allocated: ([0-9.eE+-]+) \| reserved: [0-9.eE+-]+ \| max reserved: ([0-9.eE+-]+))");
  Args args;
  Measured measured;
  bool in_args = false, saw_args = false;
  std::string line;
  std::smatch m;
  while (lines.next(line)) {
    const long ln = lines.number;
    if (line.find("------------------------ arguments ------------------------") != std::string::npos) {
      in_args = saw_args = true;
      continue;
    }
    if (in_args) {
      if (line.find("end of arguments") != std::string::npos) {
        in_args = false;
      } else if (std::regex_search(line, m, arg_line)) {
        args[m[1]] = {m[2], ln};
      }
      continue;
    }
    if (read_interval(path, line, ln, measured)) continue;
    if (std::regex_search(line, m, mem_line)) {
      const bool reserved = memory == MemoryReport::max_reserved;
      note_peak(path, ln, reserved ? "max reserved" : "max allocated", reserved ? m[3].str() : m[2].str(), 1048576.0,
                m[1].str(), measured);
    }
  }
  if (!saw_args)
    throw InputError(path, 0, "arguments", "no Megatron 'arguments' block (start the run with its default logging)");
  return run_from_args(path, args, measured);
}

namespace {

// A Megatron-Bridge value as Megatron-LM's arguments block prints it: Python's repr and YAML's spellings of
// strings, booleans and None undone.
std::string bridge_value(std::string v) {
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.pop_back();
  if (v.size() >= 2 && (v.front() == '\'' || v.front() == '"') && v.back() == v.front()) v = v.substr(1, v.size() - 2);
  if (v == "true") return "True";
  if (v == "false") return "False";
  if (v == "null" || v == "~") return "None";
  return v;
}

// The names Megatron-Bridge's configuration gives settings Megatron-LM's arguments name otherwise.
constexpr std::pair<const char*, const char*> kBridgeAliases[] = {
    {"grad_reduce_in_fp32", "accumulate_allreduce_grads_in_fp32"},
    {"num_layers_in_first_pipeline_stage", "decoder_first_pipeline_num_layers"},
    {"num_layers_in_last_pipeline_stage", "decoder_last_pipeline_num_layers"},
    {"sequence_length", "seq_length"},
    {"fp8_param", "fp8_param_gather"},
};

// Megatron-core's defaults where Megatron-LM's arguments differ (TransformerConfig / ModelParallelConfig: no fused
// weight-gradient accumulation, masked softmax, bias-activation, bias-dropout-add or RoPE), and what every Bridge GPT
// model is: a Megatron-core model built from Transformer Engine's layer specs.
constexpr std::pair<const char*, const char*> kBridgeDefaults[] = {
    {"gradient_accumulation_fusion", "False"},  {"masked_softmax_fusion", "False"}, {"bias_activation_fusion", "False"},
    {"bias_dropout_fusion", "False"},           {"apply_rope_fusion", "False"},     {"use_mcore_models", "True"},
    {"transformer_impl", "transformer_engine"},
};

}  // namespace

MegatronRun read_megatron_bridge_log(const std::string& path, MemoryReport memory, std::int64_t devices) {
  LogLines lines(path);
  static const std::regex section_line(R"(^\[([A-Za-z0-9_]+)\])");
  static const std::regex summary_field(R"(^  ([A-Za-z0-9_]+): (.*)$)");
  static const std::regex yaml_top(R"(^([A-Za-z_][A-Za-z0-9_]*):\s*(.*)$)");
  static const std::regex yaml_field(R"(^  ([A-Za-z_][A-Za-z0-9_]*):\s*(.*)$)");
  static const std::regex yaml_item(R"(^  - (.*)$)");
  static const std::regex yaml_nested(R"(^    (_target_|_args_):\s*(.*)$)");
  static const std::regex yaml_nested_item(R"(^    - (.*)$)");
  static const std::regex grid_line(R"(initialized HyperCommGrid with tp=(\d+), pp=(\d+), cp=(\d+), dp=(\d+))");
  static const std::regex mem_line(R"(\[Rank (\d+)\] \(after \d+ iterations\) memory \(GB\)(.*))");
  enum class Block { none, summary, yaml } block = Block::none;
  std::map<std::string, Args> sections;
  std::string section;
  // A YAML field whose value follows on its own lines: a block list, or an enum as {_target_, _call_, _args_}.
  struct Pending {
    std::string key, target;
    long line = 0;
    bool enum_args = false;
    std::vector<std::string> items;
  } pending;
  auto flush = [&] {
    if (pending.key.empty()) return;
    std::string v;
    if (pending.enum_args && !pending.items.empty()) {
      // AttnBackend's values (megatron/core/transformer/enums.py); another enum keeps its number.
      static const char* const kAttnBackends[] = {"", "flash", "fused", "unfused", "local", "auto"};
      double x = 0;
      const bool attn =
          pending.target.size() >= 11 && pending.target.compare(pending.target.size() - 11, 11, "AttnBackend") == 0;
      v = attn && parse_number(pending.items[0], x) && x >= 1 && x <= 5
              ? std::string("AttnBackend.") + kAttnBackends[static_cast<int>(x)]
              : pending.items[0];
    } else if (!pending.enum_args && pending.target.empty() && !pending.items.empty()) {  // a block list
      v = "[";
      for (std::size_t i = 0; i < pending.items.size(); ++i) v += (i ? ", " : "") + pending.items[i];
      v += "]";
    }
    if (!v.empty()) sections[section][pending.key] = {v, pending.line};
    pending = Pending{};
  };
  Measured measured;
  bool saw_config = false;
  std::int64_t grid_world = 0;
  long grid_line_no = 0;
  std::string line;
  std::smatch m;
  while (lines.next(line)) {
    const long ln = lines.number;
    if (line.find("Configuration Summary (Non-Default Values vs Megatron Core)") != std::string::npos) {
      block = Block::summary;
      saw_config = true;
      section.clear();
      continue;
    }
    if (line.find("------- Task Configuration -------") != std::string::npos) {
      block = Block::yaml;
      saw_config = true;
      section.clear();
      continue;
    }
    if (block == Block::summary) {
      // Sections `[model] Non-default values (vs Mcore TransformerConfig):` (a field absent has Megatron-core's
      // default) and `[train]:` (every value set); the block ends with a rule of '=' after its first section.
      if (std::regex_search(line, m, section_line)) {
        section = m[1];
      } else if (!section.empty() && line.size() >= 20 && line.find_first_not_of('=') == std::string::npos) {
        block = Block::none;
      } else if (!section.empty() && std::regex_match(line, m, summary_field)) {
        std::string v = m[2];
        if (const auto cut = v.rfind("  (Mcore default: "); cut != std::string::npos) v.resize(cut);
        sections[section][m[1]] = {bridge_value(v), ln};
      }
      continue;
    }
    if (block == Block::yaml) {
      // yaml.safe_dump of the configuration: sections at the margin, their fields two spaces in.
      if (line.size() >= 20 && line.find_first_not_of('-') == std::string::npos) {
        flush();
        block = Block::none;
      } else if (std::regex_match(line, m, yaml_top)) {
        flush();
        section = m[1];
      } else if (std::regex_match(line, m, yaml_field)) {
        flush();
        if (bridge_value(m[2]).empty())
          pending = Pending{m[1], "", ln, false, {}};
        else
          sections[section][m[1]] = {bridge_value(m[2]), ln};
      } else if (!pending.key.empty() && std::regex_match(line, m, yaml_item)) {
        pending.items.push_back(bridge_value(m[1]));
      } else if (!pending.key.empty() && std::regex_match(line, m, yaml_nested)) {
        if (m[1] == "_target_") pending.target = bridge_value(m[2]);
        if (m[1] == "_args_") pending.enum_args = true;
      } else if (pending.enum_args && std::regex_match(line, m, yaml_nested_item)) {
        pending.items.push_back(bridge_value(m[1]));
      }
      continue;
    }
    if (read_interval(path, line, ln, measured)) continue;
    if (std::regex_search(line, m, grid_line)) {
      grid_world = 1;
      for (int i = 1; i <= 4; ++i) {  // each at most 2^16, so the product is checked before it can overflow
        grid_world *= logged_count(path, ln, "HyperCommGrid", m[i].str(), 1, 1 << 16);
        if (grid_world > std::int64_t{1} << 24)
          throw InputError(path, ln, "HyperCommGrid", std::to_string(grid_world) + " ranks: more than 2^24");
      }
      grid_line_no = ln;
    } else if (std::regex_search(line, m, mem_line)) {
      // logger.memory_keys names what is reported; the default names below.
      const bool reserved = memory == MemoryReport::max_reserved;
      const std::string key = reserved ? "mem-max-reserved-gigabytes" : "mem-max-allocated-gigabytes";
      const std::string other = reserved ? "mem-max-allocated-gigabytes" : "mem-max-reserved-gigabytes";
      const std::string rest = m[2];
      std::smatch v;
      if (std::regex_search(rest, v, std::regex("\\| " + key + ": ([^ |]+)")))
        note_peak(path, ln, key.c_str(), v[1].str(), 1e9, m[1].str(), measured);
      else if (rest.find(other) != std::string::npos)
        throw InputError(path, ln, key,
                         std::string("not in the memory report, which has ") + other + ": pass --memory " +
                             (reserved ? "max-allocated" : "max-reserved"));
    }
  }
  flush();
  if (!saw_config)
    throw InputError(path, 0, "configuration",
                     "no Megatron-Bridge configuration (its 'Configuration Summary' or 'Task Configuration' block)");
  // One name -> value view: the model's fields, then the DDP, optimizer, training and dataset configurations' (a
  // field in several, as bf16 or use_distributed_optimizer, is the first's).
  Args args;
  for (const char* name : {"model", "ddp", "optimizer", "train", "dataset"})
    for (const auto& [key, arg] : sections[name]) args.emplace(key, arg);
  for (const auto& [bridge, megatron] : kBridgeAliases)
    if (args.count(bridge)) args.emplace(megatron, args.at(bridge));
  for (const auto& [key, value] : kBridgeDefaults) args.emplace(key, Arg{value, 0});
  if (devices > 0 && grid_world > 0 && devices != grid_world)
    throw InputError(path, grid_line_no, "world_size",
                     "the log's parallel grid has " + std::to_string(grid_world) + " ranks, --devices says " +
                         std::to_string(devices));
  if (devices <= 0 && grid_world <= 0)
    throw InputError(path, 0, "world_size", "Megatron-Bridge does not log the world size: pass --devices");
  args["world_size"] = {std::to_string(grid_world > 0 ? grid_world : devices), grid_line_no};
  return run_from_args(path, args, measured);
}

namespace {

// One run from its settings under Megatron-LM's argument names (a value missing takes Megatron-LM's default).
MegatronRun run_from_args(const std::string& path, const Args& args, const Measured& measured) {
  MegatronRun r;
  r.log = path;
  r.peak_memory_bytes = measured.peak_memory_bytes;
  auto get = [&](const char* key, const char* dflt) -> std::pair<std::string, long> {
    auto it = args.find(key);
    if (it != args.end()) return {it->second.value, it->second.line};
    if (dflt) return {dflt, 0};
    throw InputError(path, 0, key, "argument missing from the arguments block");
  };
  auto integer = [&](const char* key, const char* dflt, std::int64_t lo, std::int64_t hi) {
    const auto [v, l] = get(key, dflt);
    return logged_count(path, l, key, v, lo, hi);
  };
  auto flag = [&](const char* key, bool dflt) {
    const auto [v, l] = get(key, dflt ? "True" : "False");
    if (v == "True") return true;
    if (v == "False" || v == "None") return false;
    throw InputError(path, l, key, "'" + v + "' is not True or False");
  };
  Strategy& s = r.strategy;
  s.tensor_parallel = static_cast<int>(integer("tensor_model_parallel_size", "1", 1, 1 << 16));
  s.pipeline_parallel = static_cast<int>(integer("pipeline_model_parallel_size", "1", 1, 1 << 16));
  s.context_parallel = static_cast<int>(integer("context_parallel_size", "1", 1, 1 << 16));
  s.expert_parallel = static_cast<int>(integer("expert_model_parallel_size", "1", 1, 1 << 16));
  // Megatron-core logs None when the experts follow tensor_model_parallel_size.
  if (args.count("expert_tensor_parallel_size") && args.at("expert_tensor_parallel_size").value != "None")
    s.set_expert_tensor(static_cast<int>(integer("expert_tensor_parallel_size", nullptr, 1, 1 << 16)));
  r.devices = integer("world_size", nullptr, 1, 1 << 24);
  const std::int64_t model_parallel = std::int64_t{s.tensor_parallel} * s.pipeline_parallel * s.context_parallel;
  if (r.devices % model_parallel != 0)
    throw InputError(path, get("world_size", nullptr).second, "world_size",
                     "not divisible by tensor x pipeline x context parallel sizes");
  s.data_parallel = static_cast<int>(r.devices / model_parallel);
  if (args.count("data_parallel_size") && integer("data_parallel_size", nullptr, 1, 1 << 24) != s.data_parallel)
    throw InputError(path, args.at("data_parallel_size").line, "data_parallel_size",
                     "does not equal world_size / (tp x pp x cp)");
  r.num_layers = static_cast<int>(integer("num_layers", nullptr, 1, 1 << 16));
  if (const auto [v, l] = get("num_layers_per_virtual_pipeline_stage", "None"); v != "None") {
    const std::int64_t per = integer("num_layers_per_virtual_pipeline_stage", nullptr, 1, 1 << 16);
    if (r.num_layers % (s.pipeline_parallel * per) != 0)
      throw InputError(path, l, "num_layers_per_virtual_pipeline_stage", "does not divide num_layers / pp");
    s.virtual_pipeline = static_cast<int>(r.num_layers / (s.pipeline_parallel * per));
  } else if (const auto [v2, l2] = get("virtual_pipeline_model_parallel_size", "None"); v2 != "None") {
    s.virtual_pipeline = static_cast<int>(integer("virtual_pipeline_model_parallel_size", nullptr, 1, 1 << 16));
  }
  s.first_stage_layers = static_cast<int>(get("decoder_first_pipeline_num_layers", "None").first == "None"
                                              ? 0
                                              : integer("decoder_first_pipeline_num_layers", nullptr, 1, 1 << 16));
  s.last_stage_layers = static_cast<int>(get("decoder_last_pipeline_num_layers", "None").first == "None"
                                             ? 0
                                             : integer("decoder_last_pipeline_num_layers", nullptr, 1, 1 << 16));
  const auto [rc, rcl] = get("recompute_granularity", "None");
  if (rc == "full")
    s.recompute = Recompute::full;
  else if (rc == "selective")
    s.recompute = Recompute::selective;
  else if (rc == "None")
    s.recompute = Recompute::none;
  else
    throw InputError(path, rcl, "recompute_granularity", "'" + rc + "' is not full, selective or None");
  if (s.recompute == Recompute::full) {  // Megatron's --recompute-method / --recompute-num-layers
    const auto [method, ml] = get("recompute_method", "uniform");
    if (method != "uniform" && method != "block")
      throw InputError(path, ml, "recompute_method", "'" + method + "' is not uniform or block");
    s.recompute_method = method == "block" ? RecomputeMethod::block : RecomputeMethod::uniform;
    const auto layers = static_cast<int>(integer("recompute_num_layers", "1", 1, 1 << 16));
    s.recompute_num_layers = s.recompute_method == RecomputeMethod::uniform && layers == 1 ? 0 : layers;
  }
  TrainingSettings& t = r.settings;
  t.seq_length = integer("seq_length", nullptr, 1, 1 << 24);
  t.global_batch_size = integer("global_batch_size", nullptr, 1, std::int64_t{1} << 32);
  t.micro_batch_size = integer("micro_batch_size", "1", 1, 1 << 20);
  // Megatron-core fills an unset group size with pipeline_parallel, which is what 0 means here.
  if (get("microbatch_group_size_per_vp_stage", "None").first != "None")
    t.microbatch_group_size_per_vp_stage = integer("microbatch_group_size_per_vp_stage", nullptr, 1, 1 << 20);
  const std::string fp8 = get("fp8", "None").first, fp4 = get("fp4", "None").first;
  // --first-last-layers-bf16 with its two counts (1 each by default), under FP8 or FP4.
  auto bf16_ends = [&] {
    t.first_last_layers_bf16 = flag("first_last_layers_bf16", false);
    if (t.first_last_layers_bf16) {
      t.num_layers_at_start_in_bf16 = integer("num_layers_at_start_in_bf16", "1", 0, 1 << 16);
      t.num_layers_at_end_in_bf16 = integer("num_layers_at_end_in_bf16", "1", 0, 1 << 16);
    }
  };
  if (fp8 != "None" && fp8 != "False") {
    t.precision = Precision::fp8;
    // Megatron-core's --fp8-recipe (delayed by default).
    const auto [rv, rl] = get("fp8_recipe", "delayed");
    const auto rec = from_name<Fp8Recipe>(rv, kNumFp8Recipes);
    if (!rec)
      throw InputError(path, rl, "fp8_recipe", "'" + rv + "' is not one of " + names_of<Fp8Recipe>(kNumFp8Recipes));
    t.fp8_recipe = *rec;
    bf16_ends();
  } else if (fp4 != "None" && fp4 != "False") {
    // --fp4-format e2m1 with --fp4-recipe nvfp4 (its default): TE's NVFP4BlockScaling.
    t.precision = Precision::fp4;
    const auto [rv, rl] = get("fp4_recipe", "nvfp4");
    if (rv != "nvfp4")
      throw InputError(path, rl, "fp4_recipe", "'" + rv + "' is not modelled: only nvfp4 (a custom quantizer is not)");
    bf16_ends();
  } else if (flag("bf16", false))
    t.precision = Precision::bf16;
  else if (flag("fp16", false))
    t.precision = Precision::fp16;
  else
    throw InputError(path, 0, "bf16", "neither bf16, fp16, fp8 nor fp4: fp32 training is not modelled");
  t.distributed_optimizer = flag("use_distributed_optimizer", false);
  if (flag("use_precision_aware_optimizer", false)) {
    // Megatron-core's precision-aware optimizer (Transformer Engine's FusedAdam): its moments in the dtypes named;
    // without FP8 parameters other than delayed scaling's, TE keeps the master copy too, as the 16-bit remainders
    // of the bf16 parameters (store_param_remainders, on by default).
    auto bf16_dtype = [&](const char* key) {
      const auto [v, l] = get(key, "torch.float32");
      if (v == "torch.bfloat16" || v == "bfloat16" || v == "bf16") return true;
      if (v == "torch.float32" || v == "float32" || v == "fp32") return false;
      throw InputError(path, l, key, "'" + v + "' is not modelled: Adam's moments in fp32 or bf16 only");
    };
    const bool m1 = bf16_dtype("exp_avg_dtype"), m2 = bf16_dtype("exp_avg_sq_dtype");
    if (m1 != m2)
      throw InputError(path, get("exp_avg_sq_dtype", "").second, "exp_avg_sq_dtype",
                       "differs from exp_avg_dtype: one moment in bf16 is not modelled");
    t.bf16_adam_moments = m1;
    const bool te_master =
        t.precision == Precision::bf16 || (t.precision == Precision::fp8 && t.fp8_recipe == Fp8Recipe::delayed);
    t.reuse_fp32_param = te_master && flag("store_param_remainders", true);
  }
  t.sequence_parallel = s.tensor_parallel > 1 && flag("sequence_parallel", false);
  {
    // The attention kernel. --use-flash-attn drives the legacy model's; a Megatron-core model with Transformer
    // Engine's layers (--use-mcore-models, the default once --use-legacy-models exists) runs TE's DotProductAttention,
    // which picks its flash or cuDNN fused kernel under --attention-backend auto (also before that argument existed);
    // flash and fused are both memory-efficient, unfused and local keep the s x s scores.
    const std::string backend = get("attention_backend", "None").first;
    const bool mcore =
        args.count("use_legacy_models") ? !flag("use_legacy_models", false) : flag("use_mcore_models", false);
    const bool te = get("transformer_impl", "local").first == "transformer_engine";
    const auto has = [&](const char* n) { return backend.find(n) != std::string::npos; };
    const bool chosen = has("flash") || (has("fused") && !has("unfused"));
    t.flash_attention = flag("use_flash_attn", false) || chosen || (mcore && te && (backend == "None" || has("auto")));
    // Which flash kernel: FlashAttention-2 where the log names the flash backend or the legacy model's
    // --use-flash-attn drives it; else cuDNN's fused kernel, which TE picks under auto on Hopper and later (an
    // NVTE_FUSED_ATTN=0 in the launcher's environment is not in the log: dataset import --set attention_backend=flash).
    t.attention_backend = has("flash") || (flag("use_flash_attn", false) && !(mcore && te)) ? AttentionBackend::flash
                                                                                            : AttentionBackend::fused;
  }
  {
    // Dropout (Megatron's --hidden-dropout / --attention-dropout, 0.1 by default): any rate above zero is on.
    for (const auto& [key, on] :
         {std::pair{"hidden_dropout", &t.hidden_dropout}, std::pair{"attention_dropout", &t.attention_dropout}}) {
      const auto [v, l] = get(key, "0.1");
      double p = 0;
      if (!parse_number(v, p) || p < 0 || p >= 1) throw InputError(path, l, key, "'" + v + "' is not a rate in [0, 1)");
      *on = p > 0;
    }
  }
  if (s.recompute == Recompute::selective) {  // --recompute-modules, Megatron-core's default the attention core
    const auto [v, l] = get("recompute_modules", "['core_attn']");
    t.recompute_modules = 0;
    for (const std::string& name : logged_list(v)) {
      const auto mod = from_name<RecomputeModule>(name, kNumRecomputeModules);
      if (!mod)
        throw InputError(path, l, "recompute_modules",
                         "'" + name + "' is not one of " + names_of<RecomputeModule>(kNumRecomputeModules));
      t.recompute_modules |= module_bit(*mod);
    }
    if (t.recompute_modules == 0) throw InputError(path, l, "recompute_modules", "selective recompute of no module");
  }
  {
    // --moe-token-dispatcher-type (Megatron-LM's and Megatron-core's default: allgather); MindSpeed-LLM's
    // alltoall_seq is the all-to-all exchange.
    const auto [v, l] = get("moe_token_dispatcher_type", "allgather");
    const auto d = from_name<MoeDispatcher>(v == "alltoall_seq" ? "alltoall" : v, kNumMoeDispatchers);
    if (!d)
      throw InputError(path, l, "moe_token_dispatcher_type",
                       "'" + v + "' is not one of " + names_of<MoeDispatcher>(kNumMoeDispatchers));
    t.moe_token_dispatcher_type = *d;
  }
  // Narayanan et al.'s scattered pipeline sends: Megatron-LM's --no-scatter-gather-tensors-in-pipeline switched them
  // off until its pipeline moved into Megatron-core (39b83c79, January 2023), which sends whole tensors while the
  // argument stayed logged until March 2024. A log with transformer_impl (December 2022 on) is read as the latter.
  t.pipeline_scatter_gather = !args.count("transformer_impl") && flag("scatter_gather_tensors_in_pipeline", false);
  {
    // Fully sharded data parallelism: torch FSDP2 or Megatron-FSDP (--use-custom-fsdp before its rename), whose
    // default sharding is parameters, gradients and optimizer state (optim_grads_params), the one modelled.
    t.fsdp = flag("use_torch_fsdp2", false) || flag("use_megatron_fsdp", false) || flag("use_custom_fsdp", false);
    const auto [v, l] = get("data_parallel_sharding_strategy", "optim_grads_params");
    if (t.fsdp && v != "optim_grads_params")
      throw InputError(path, l, "data_parallel_sharding_strategy",
                       "'" + v + "': only optim_grads_params (parameters, gradients and optimizer state) is modelled");
  }
  {
    // Kernel fusions under each framework's name (resolve_kernel_fusions picks those the model runs). MindSpeed's
    // opt-in --use-fused-swiglu / --use-fused-rotary-pos-emb / --use-fused-rmsnorm where its log has them (its NPU
    // kernels; Megatron's jit fusions do not fuse there); else Megatron-core's TransformerConfig fields a
    // Megatron-Bridge log gives (bias_activation_fusion, absent: False); else Megatron-LM's arguments:
    // --no-bias-swiglu-fusion and --no-rope-fusion since January 2024 (de9428a701; before, SwiGLU and RoPE ran
    // unfused and were not logged), --no-bias-gelu-fusion and --no-bias-dropout-fusion (on by default).
    auto fusion = [&](std::initializer_list<const char*> names, bool dflt) {
      for (const char* name : names)
        if (args.count(name)) return FusionSwitch{name, flag(name, dflt), args.at(name).line};
      return FusionSwitch{*(names.end() - 1), dflt, 0};
    };
    r.swiglu_fusion = fusion({"use_fused_swiglu", "bias_activation_fusion", "bias_swiglu_fusion"}, false);
    r.gelu_fusion = fusion({"bias_activation_fusion", "bias_gelu_fusion"}, true);
    r.bias_dropout_fusion = fusion({"bias_dropout_fusion"}, true);
    r.rope_fusion = fusion({"use_fused_rotary_pos_emb", "apply_rope_fusion"}, false);
    if (args.count("use_fused_rmsnorm")) r.rmsnorm_fusion = fusion({"use_fused_rmsnorm"}, false);
  }
  if (const auto it = args.find("position_embedding_type"); it != args.end()) {
    r.position_embedding_type = it->second.value;
    r.position_embedding_line = it->second.line;
  }
  t.overlap_grad_reduce = flag("overlap_grad_reduce", false);
  t.overlap_param_gather = flag("overlap_param_gather", false);
  t.tp_comm_overlap = flag("tp_comm_overlap", false);
  // Logged from September 2021 (ignored from April 2024, 5fffdfc7, when it is logged True unless passed off); a log
  // without it overlaps.
  t.async_tensor_model_parallel_allreduce = flag("async_tensor_model_parallel_allreduce", true);
  t.fp32_gradients = flag("accumulate_allreduce_grads_in_fp32", false);
  t.gradient_accumulation_fusion = flag("gradient_accumulation_fusion", true);  // Megatron's default
  t.masked_softmax_fusion = flag("masked_softmax_fusion", true);
  t.overlap_p2p_comm = flag("overlap_p2p_comm", false);
  t.distribute_saved_activations = flag("distribute_saved_activations", false);
  // FP8 parameters, or FP4 ones (--fp4-param-gather, read into args as fp4_param_gather or fp4_param).
  t.fp8_param_gather = (t.precision == Precision::fp8 && flag("fp8_param_gather", false)) ||
                       (t.precision == Precision::fp4 && (flag("fp4_param_gather", false) || flag("fp4_param", false)));
  t.tp_only_amax_red = flag("tp_only_amax_red", false);
  t.overlap_moe_expert_parallel_comm = flag("overlap_moe_expert_parallel_comm", false);
  t.nccl_ub = flag("nccl_ub", false);
  {
    const auto [impl, line] = get("cross_entropy_fusion_impl", "native");
    if (impl != "native" && impl != "te")
      throw InputError(path, line, "cross_entropy_fusion_impl", "'" + impl + "' is not native or te");
    t.te_cross_entropy = flag("cross_entropy_loss_fusion", false) && impl == "te";
  }
  if (s.context_parallel > 1) {
    // MindSpeed-LLM's --context-parallel-algo, else Megatron-core's --cp-comm-type (logged as a list, one entry
    // per layer or one for all: one algorithm for every layer is modelled). Without CP neither matters.
    const char* key = args.count("context_parallel_algo") ? "context_parallel_algo" : "cp_comm_type";
    const auto [v, line] = get(key, "p2p");
    std::vector<std::string> names = logged_list(v);
    if (names.empty()) names.push_back("p2p");
    if (std::any_of(names.begin(), names.end(), [&](const std::string& n) { return n != names[0]; }))
      throw InputError(path, line, key, "'" + v + "': a context-parallel algorithm per layer is not modelled");
    const auto c = parse_cp_comm_type(names[0]);
    if (!c) throw InputError(path, line, key, cp_comm_type_problem(names[0]));
    t.cp_comm_type = *c;
    // The Ulysses degree of a2a+p2p: MindSpeed-LLM's --ulysses-degree-in-cp, or the first of Megatron-core's
    // --hierarchical-context-parallel-sizes.
    if (*c == CpCommType::a2a_p2p) {
      const char* deg =
          args.count("ulysses_degree_in_cp") ? "ulysses_degree_in_cp" : "hierarchical_context_parallel_sizes";
      const auto [dv, dl] = get(deg, "None");
      const std::vector<std::string> sizes = logged_list(dv);
      double u = 0;
      if (sizes.empty() || !parse_number(sizes[0], u) || u < 2 ||
          u != static_cast<double>(static_cast<std::int64_t>(u)))
        throw InputError(path, dl, deg, "'" + dv + "' does not give a Ulysses degree of 2 or more for a2a+p2p");
      t.ulysses_degree_in_cp = static_cast<std::int64_t>(u);
    }
  }
  const auto& intervals = measured.intervals;
  if (intervals.empty()) throw InputError(path, 0, "elapsed time per iteration (ms)", "no iteration lines in the log");
  // The first logged interval includes start-up and warm-up: the median of the others (all when there is one).
  std::vector<double> ms;
  for (std::size_t i = intervals.size() > 1 ? 1 : 0; i < intervals.size(); ++i) ms.push_back(intervals[i].first);
  std::sort(ms.begin(), ms.end());
  const std::size_t n = ms.size();
  r.iteration_time_s = (n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2])) / 1e3;
  r.intervals_used = static_cast<int>(n);
  for (const auto& [rank, bytes] : r.peak_memory_bytes)
    if (rank >= r.devices) throw InputError(path, 0, "Rank", "rank " + std::to_string(rank) + " is beyond world_size");
  return r;
}

}  // namespace

std::vector<std::string> resolve_kernel_fusions(MegatronRun& run, const Model& m) {
  std::vector<const FusionSwitch*> counted;
  if (m.activation == Activation::swiglu) counted.push_back(&run.swiglu_fusion);
  if (m.activation == Activation::geglu) counted.push_back(&run.gelu_fusion);
  counted.push_back(&run.bias_dropout_fusion);
  if (m.is_rotary()) counted.push_back(&run.rope_fusion);
  const auto on = std::count_if(counted.begin(), counted.end(), [](const FusionSwitch* f) { return f->on; });
  run.settings.fused_kernels = 2 * on >= static_cast<std::ptrdiff_t>(counted.size());
  if (!run.rmsnorm_fusion.name.empty() && m.norm == Norm::rmsnorm) run.settings.fused_norm = run.rmsnorm_fusion.on;
  std::vector<std::string> notes;
  if (on > 0 && on < static_cast<std::ptrdiff_t>(counted.size())) {
    std::string list;
    for (const FusionSwitch* f : counted)
      list += (list.empty() ? "" : ", ") + f->name + (f->on ? " on" : " off") +
              (f->line > 0 ? " (line " + std::to_string(f->line) + ")" : " (not logged: the default)");
    notes.push_back(run.log + ": kernel fusions differ (" + list + "); lmsim models them as one setting, read as " +
                    (run.settings.fused_kernels ? "fused (at least half on)" : "unfused (fewer than half on)") +
                    "; the other reading is fused_kernels in the imported training_settings.json");
  }
  return notes;
}

}  // namespace lmsim::io
