#include "io/megatron_log.hpp"

#include <algorithm>
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

MegatronRun read_megatron_log(const std::string& path, MemoryReport memory) {
  note_input(path);
  std::ifstream in(path);
  if (!in) throw InputError(path, 0, "", "cannot read the log");
  static const std::regex arg_line(R"(^\s+([A-Za-z0-9_]+) \.+ (.*?)\s*$)");
  static const std::regex iter_line(R"(iteration\s+(\d+)/\s*\d+ \|.*elapsed time per iteration \(ms\): ([0-9.eE+-]+))");
  static const std::regex mem_line(
      R"(\[Rank (\d+)\] \(after \d+ iterations\) memory \(MB\) \| allocated: [0-9.eE+-]+ \| max allocated: ([0-9.eE+-]+) \| reserved: [0-9.eE+-]+ \| max reserved: ([0-9.eE+-]+))");
  std::map<std::string, Arg> args;
  std::vector<std::pair<double, long>> intervals;
  MegatronRun r;
  r.log = path;
  bool in_args = false, saw_args = false;
  std::string line;
  long ln = 0;
  std::smatch m;
  while (std::getline(in, line)) {
    ++ln;
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
    if (std::regex_search(line, m, iter_line)) {
      double ms = 0;
      if (!parse_number(m[2].str(), ms) || ms <= 0)
        throw InputError(path, ln, "elapsed time per iteration (ms)", "'" + m[2].str() + "' is not a positive time");
      intervals.emplace_back(ms, ln);
    } else if (std::regex_search(line, m, mem_line)) {
      double mb = 0;
      const std::string v = memory == MemoryReport::max_reserved ? m[3].str() : m[2].str();
      if (!parse_number(v, mb) || mb <= 0)
        throw InputError(path, ln, memory == MemoryReport::max_reserved ? "max reserved" : "max allocated",
                         "'" + v + "' is not a positive size");
      const int rank = std::stoi(m[1].str());
      r.peak_memory_bytes[rank] = std::max(r.peak_memory_bytes[rank], mb * 1048576.0);
    }
  }
  if (!saw_args)
    throw InputError(path, 0, "arguments", "no Megatron 'arguments' block (start the run with its default logging)");
  auto get = [&](const char* key, const char* dflt) -> std::pair<std::string, long> {
    auto it = args.find(key);
    if (it != args.end()) return {it->second.value, it->second.line};
    if (dflt) return {dflt, 0};
    throw InputError(path, 0, key, "argument missing from the arguments block");
  };
  auto integer = [&](const char* key, const char* dflt, std::int64_t lo, std::int64_t hi) {
    const auto [v, l] = get(key, dflt);
    double x = 0;
    if (!parse_number(v, x) || x != static_cast<double>(static_cast<std::int64_t>(x)) || x < lo || x > hi)
      throw InputError(path, l, key,
                       "'" + v + "' is not an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return static_cast<std::int64_t>(x);
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
  if (args.count("expert_tensor_parallel_size") && args["expert_tensor_parallel_size"].value != "None")
    s.set_expert_tensor(static_cast<int>(integer("expert_tensor_parallel_size", nullptr, 1, 1 << 16)));
  r.devices = integer("world_size", nullptr, 1, 1 << 24);
  const std::int64_t model_parallel = std::int64_t{s.tensor_parallel} * s.pipeline_parallel * s.context_parallel;
  if (r.devices % model_parallel != 0)
    throw InputError(path, get("world_size", nullptr).second, "world_size",
                     "not divisible by tensor x pipeline x context parallel sizes");
  s.data_parallel = static_cast<int>(r.devices / model_parallel);
  if (args.count("data_parallel_size") && integer("data_parallel_size", nullptr, 1, 1 << 24) != s.data_parallel)
    throw InputError(path, args["data_parallel_size"].line, "data_parallel_size",
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
  const std::string fp8 = get("fp8", "None").first;
  if (fp8 != "None" && fp8 != "False")
    t.precision = Precision::fp8;
  else if (flag("bf16", false))
    t.precision = Precision::bf16;
  else if (flag("fp16", false))
    t.precision = Precision::fp16;
  else
    throw InputError(path, 0, "bf16", "neither bf16, fp16 nor fp8: fp32 training is not modelled");
  t.distributed_optimizer = flag("use_distributed_optimizer", false);
  t.sequence_parallel = s.tensor_parallel > 1 && flag("sequence_parallel", false);
  t.flash_attention =
      flag("use_flash_attn", false) || get("attention_backend", "None").first.find("flash") != std::string::npos;
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
  t.fp8_param_gather = t.precision == Precision::fp8 && flag("fp8_param_gather", false);
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

}  // namespace lmsim::io
