#include "io/dataset.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <tuple>

#include "io/csv.hpp"
#include "io/error.hpp"
#include "io/specs.hpp"

namespace fs = std::filesystem;

namespace lmsim::io {

const Run* Collection::find(const std::string& config) const {
  for (const auto& r : runs)
    if (r.config == config) return &r;
  return nullptr;
}

const Collection* Dataset::find(const std::string& ms, const std::string& platform) const {
  for (const auto& c : collections)
    if (c.model_setting == ms && c.platform == platform) return &c;
  return nullptr;
}

std::vector<ModelSetting> model_settings(const std::string& registry_csv) {
  const CsvTable t = read_csv(registry_csv, {"model_setting", "model", "seq_length", "devices"});
  std::vector<ModelSetting> out;
  for (std::size_t i = 0; i < t.rows.size(); ++i)
    out.push_back({t.text(i, "model_setting"), t.text(i, "model"), t.integer(i, "seq_length", 1, 1 << 24),
                   static_cast<int>(t.integer(i, "devices", 1, 1 << 20))});
  return out;
}

std::optional<ModelSetting> find_model_setting(const std::string& id) {
  static const std::vector<ModelSetting> registry = model_settings(data_dir() + "/model_settings.csv");
  for (const auto& m : registry)
    if (m.id == id) return m;
  static const std::regex pat(R"(^([a-z0-9]+)_([0-9a-z.]+?)_([0-9]+)k(?:_([0-9]+)p)?$)");
  std::smatch sm;
  if (!std::regex_match(id, sm, pat)) return std::nullopt;
  ModelSetting m{id, "", std::stoll(sm[3]) * 1024, sm[4].matched ? std::stoi(sm[4]) : 8};
  return m;
}

namespace {

const std::string kSweepGpu = "_tp_pp_sweep_cp1_gpu", kSweepNpu = "_tp_pp_sweep_cp1_npu";

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

bool is_collection_dir(const fs::path& p) {
  return fs::exists(p / "step_time_summary.csv") || fs::exists(p / "peak_memory.csv");
}

}  // namespace

std::string comm_primitive(const std::string& type) {
  std::string k;
  for (char ch : type)
    if (std::isalnum(static_cast<unsigned char>(ch)))
      k += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (const char* prefix : {"hcom", "hccl", "nccl"})
    if (k.rfind(prefix, 0) == 0) k = k.substr(std::string(prefix).size());
  static const std::pair<const char*, const char*> kNames[] = {
      {"allreduce", "all_reduce"},    {"allgather", "all_gather"},         {"reducescatter", "reduce_scatter"},
      {"alltoall", "all_to_all"},     {"broadcast", "broadcast"},          {"pointtopoint", "point_to_point"},
      {"sendrecv", "point_to_point"}, {"send", "point_to_point"},          {"receive", "point_to_point"},
      {"recv", "point_to_point"},     {"batchsendrecv", "point_to_point"}, {"p2p", "point_to_point"}};
  for (const auto& [stem, name] : kNames)
    if (k.rfind(stem, 0) == 0) return name;
  return type;
}

std::string comm_group(const std::string& group) {
  std::string k;
  for (char ch : group) k += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  static const std::pair<const char*, const char*> kGroups[] = {{"tensor", "tp"},       {"pipeline", "pp"},
                                                                {"data", "dp"},         {"context", "cp"},
                                                                {"expert_data", "edp"}, {"expert", "ep"}};
  for (const auto& [stem, name] : kGroups)
    if (k.rfind(stem, 0) == 0) return name;
  for (const char* g : {"tp", "pp", "dp", "cp", "edp", "ep"})
    if (k == g || k.rfind(std::string(g) + "_", 0) == 0 || k.rfind(std::string(g) + "-", 0) == 0) return g;
  return group;
}

namespace {

// Defaults for a collection without training_settings.json: the stack of the bundled collections of its platform
// (`--stack gpu` / `--stack npu`: those collections' own training_settings.json, whose notes give the evidence),
// the same study's runs on the same software stack, at the collection's sequence length. What a collection's own
// runs show otherwise (stored scores or unfused norms ruled out by a run that ran, SP's collectives measured)
// infer_settings() reads. Another platform's collection is a system preset's: lmsim's defaults, or what its
// training_settings.json says.
TrainingSettings platform_defaults(const std::string& platform, std::int64_t seq) {
  TrainingSettings t;
  if (platform == "gpu" || platform == "npu") t = resolve_stack(platform).settings;
  t.seq_length = seq;
  t.micro_batch_size = 1;
  t.global_batch_size = 32;
  t.distributed_optimizer = true;
  return t;
}

int rank_field(const CsvRow& row, int devices) {
  const std::int64_t r = row.integer("rank_id", 0, 1 << 20);
  if (r >= devices)
    row.fail("rank_id", "rank " + std::to_string(r) + " is out of range for " + std::to_string(devices) + " devices");
  return static_cast<int>(r);
}

// The identity of a configuration: its name with micro-batch, sequence parallel and distributed optimizer
// resolved against the collection's settings, so `…-noRC` and `…-noRC-mbs1` (micro-batch 1 by default) are one.
std::string canonical_config(const Strategy& s, const TrainingSettings& t) {
  const ResolvedStrategy rs = resolve(s, t);
  Strategy c = s;
  c.micro_batch_size = rs.micro_batch_size;
  c.sequence_parallel = s.tensor_parallel > 1 ? std::optional<bool>(rs.sequence_parallel) : std::nullopt;
  c.distributed_optimizer = rs.distributed_optimizer;
  return config_name(c);
}

Run& run_for(Collection& c, std::map<std::string, std::size_t>& index, const CsvRow& row) {
  const std::string& name = row.text("optimization_config");
  if (auto it = index.find(name); it != index.end()) return c.runs[it->second];
  ParseResult pr = parse_config_name(name);
  if (!pr.strategy) row.fail("optimization_config", pr.error);
  Strategy& st = *pr.strategy;
  fold_moe_replicas(st, c.devices);  // an MoE name counting its replicas outside the expert group
  if (st.devices() != c.devices)
    row.fail(
        "optimization_config",
        "'" + name + "' uses dp*tp*pp*cp = " + std::to_string(st.devices()) +
            (st.expert_parallel > 1 ? " (dp*tp*pp*cp*ep = " + std::to_string(st.devices() * st.expert_parallel) + ")"
                                    : std::string()) +
            " devices, the collection has " + std::to_string(c.devices));
  const std::string key = canonical_config(*pr.strategy, c.settings);
  if (auto it = index.find(key); it != index.end()) {
    if (c.runs[it->second].config != name)  // another spelling of a configuration already read
      row.fail("optimization_config",
               "'" + name + "' is the same configuration as '" + c.runs[it->second].config + "' (" + key + ")");
  }
  Run r;
  r.config = name;
  r.strategy = *pr.strategy;
  r.named_in = row.path();
  r.named_at_line = row.line();
  index.emplace(name, c.runs.size());
  index.emplace(key, c.runs.size());
  c.runs.push_back(std::move(r));
  return c.runs.back();
}

// A row key seen twice in a summary file is an error (each summary has one row per key).
template <class Key>
void unique_row(std::set<Key>& seen, Key key, const CsvRow& row, const char* column, const std::string& what) {
  if (!seen.insert(std::move(key)).second) row.fail(column, "duplicate row for " + what);
}

void read_views(Collection& c, const fs::path& dir) {
  std::map<std::string, std::size_t> index;
  const fs::path step = dir / "step_time_summary.csv";
  if (fs::exists(step)) {
    CsvReader t(step.string(), {"optimization_config", "iteration_time_ms"});
    while (t.next()) {
      const CsvRow row = t.row();
      Run& r = run_for(c, index, row);
      if (r.iteration_time_s) row.fail("optimization_config", "duplicate configuration '" + r.config + "'");
      r.iteration_time_s = row.positive("iteration_time_ms", 1e9) / 1e3;
    }
  }
  const fs::path mem = dir / "peak_memory.csv";
  if (fs::exists(mem)) {
    CsvReader t(mem.string(), {"optimization_config", "rank_id", "peak_memory_mb"});
    std::set<std::pair<std::string, int>> seen;
    while (t.next()) {
      const CsvRow row = t.row();
      Run& r = run_for(c, index, row);
      const double bytes = row.positive("peak_memory_mb", 1e8) * 1048576.0;
      const std::string& rid = row.text("rank_id");
      if (rid == "max") {
        if (!r.peak_memory_bytes.empty() || seen.count({r.config, -1}))
          row.fail("rank_id", "'max' row for '" + r.config + "' mixed with per-rank rows or repeated");
        seen.insert({r.config, -1});
        r.peak_memory_max_bytes = bytes;
        continue;
      }
      const int rank = rank_field(row, c.devices);
      if (seen.count({r.config, -1})) row.fail("rank_id", "per-rank row for '" + r.config + "' after a 'max' row");
      if (!seen.insert({r.config, rank}).second)
        row.fail("rank_id", "duplicate rank " + std::to_string(rank) + " for '" + r.config + "'");
      r.peak_memory_bytes.push_back({rank, bytes});
      r.peak_memory_max_bytes = std::max(r.peak_memory_max_bytes.value_or(0.0), bytes);
    }
    for (auto& r : c.runs)
      std::sort(r.peak_memory_bytes.begin(), r.peak_memory_bytes.end(),
                [](const RankValue& a, const RankValue& b) { return a.rank < b.rank; });
  }
  const fs::path trace = dir / "step_trace_time_summary.csv";
  if (fs::exists(trace)) {
    CsvReader t(trace.string(), {"optimization_config", "rank_id", "computing", "communication",
                                 "communication_not_overlapped", "overlapped", "free", "stage", "bubble"});
    std::set<std::pair<std::string, int>> seen;
    while (t.next()) {
      const CsvRow row = t.row();
      Run& r = run_for(c, index, row);
      const int rank = rank_field(row, c.devices);
      unique_row(seen, std::pair{r.config, rank}, row, "rank_id", "'" + r.config + "' rank " + std::to_string(rank));
      auto ms = [&](const char* col) { return row.number(col, 0, 1e12) / 1e3; };  // profiler ms -> s
      r.step_trace.push_back({rank, ms("computing"), ms("communication"), ms("communication_not_overlapped"),
                              ms("overlapped"), ms("free"), ms("stage"), ms("bubble")});
    }
  }
  const fs::path ops = dir / "operator_latency_by_category.csv";
  if (fs::exists(ops)) {
    CsvReader t(ops.string(), {"optimization_config", "rank_id", "op_category", "op_type", "core_type", "count",
                               "total_time_us", "avg_time_us", "ratio_percent"});
    std::set<std::string> seen;
    while (t.next()) {
      const CsvRow row = t.row();
      Run& r = run_for(c, index, row);
      const int rank = rank_field(row, c.devices);
      unique_row(seen,
                 r.config + '\x1f' + std::to_string(rank) + '\x1f' + row.text("op_category") + '\x1f' +
                     row.raw("op_type") + '\x1f' + row.raw("core_type"),
                 row, "op_category", "'" + r.config + "' rank " + std::to_string(rank) + " " + row.raw("op_type"));
      r.op_categories.push_back({rank, row.text("op_category"), row.raw("op_type"), row.raw("core_type"),
                                 row.number("count", 0, 1e15), row.number("total_time_us", 0, 1e15),
                                 row.number("avg_time_us", 0, 1e15), row.number("ratio_percent", 0, 100)});
    }
  }
  const fs::path comm = dir / "comm_summary.csv";
  if (fs::exists(comm)) {
    CsvReader t(comm.string(), {"comm_scope", "comm_type", "comm_group", "op_count", "elapsed_time_sum_ms",
                                "wait_time_sum_ms", "link_bandwidth"});
    std::set<std::string> seen;
    while (t.next()) {
      const CsvRow row = t.row();
      const std::string type = comm_primitive(row.text("comm_type")), group = comm_group(row.raw("comm_group"));
      unique_row(seen, row.raw("comm_scope") + '\x1f' + type + '\x1f' + group, row, "comm_type",
                 row.raw("comm_scope") + " " + type + " " + group);
      c.comm_summary.push_back({row.raw("comm_scope"), type, group, row.number("op_count", 0, 1e15),
                                row.number("elapsed_time_sum_ms", 0, 1e15) / 1e3,
                                row.number("wait_time_sum_ms", 0, 1e15) / 1e3, row.number("link_bandwidth", 0, 1e9)});
    }
  }
  const fs::path msum = dir / "matrix_latency_summary.csv";
  if (fs::exists(msum)) {
    CsvReader t(msum.string(), {"batch", "m", "k", "n", "median_us"});
    std::set<std::array<std::int64_t, 4>> seen;
    while (t.next()) {
      const CsvRow row = t.row();
      const std::array<std::int64_t, 4> shape{row.integer("batch", 1, 1LL << 32), row.integer("m", 1, 1LL << 32),
                                              row.integer("k", 1, 1LL << 32), row.integer("n", 1, 1LL << 32)};
      unique_row(seen, shape, row, "batch", "one matrix shape");
      c.matrix_summary.push_back({shape[0], shape[1], shape[2], shape[3], row.positive("median_us", 1e12)});
    }
  }
  // Per-run rank folders: <dir>/<config>/rank_<id>/{comm_time.csv, matrix_operator_latency.csv}.
  for (auto& r : c.runs) {
    const fs::path rd = dir / r.config;
    if (!fs::is_directory(rd)) continue;
    std::vector<fs::path> ranks;
    for (const auto& e : fs::directory_iterator(rd))
      if (e.is_directory() && e.path().filename().string().rfind("rank_", 0) == 0) ranks.push_back(e.path());
    std::sort(ranks.begin(), ranks.end());
    std::map<int, std::string> rank_folder;
    for (const auto& rp : ranks) {
      const std::string id = rp.filename().string().substr(5);
      double v = 0;
      if (!parse_number(id, v) || v != static_cast<int>(v) || v < 0 || v >= c.devices)
        throw InputError(rp.string(), 0, "rank_id",
                         "folder name is not rank_<id> with id in [0, " + std::to_string(c.devices) + ")");
      if (auto [it, fresh] = rank_folder.emplace(static_cast<int>(v), rp.filename().string()); !fresh)
        throw InputError(rp.string(), 0, "rank_id", "the same rank as folder '" + it->second + "'");
      RankFiles rf{static_cast<int>(v), {}, {}, {}};
      const fs::path ct = rp / "comm_time.csv";
      if (fs::exists(ct)) {
        CsvReader t(ct.string(), {"comm_scope", "comm_type", "comm_group", "op_name", "elapsed_time_ms", "wait_time_ms",
                                  "link_type", "link_transit_size_mb", "link_bandwidth_gbps"});
        while (t.next()) {
          const CsvRow row = t.row();
          rf.comm.push_back({row.raw("comm_scope"), comm_primitive(row.text("comm_type")),
                             comm_group(row.raw("comm_group")), row.raw("op_name"), row.raw("link_type"),
                             row.number("elapsed_time_ms", 0, 1e12) / 1e3, row.number("wait_time_ms", 0, 1e12) / 1e3,
                             row.number("link_transit_size_mb", 0, 1e12) * 1048576.0,
                             row.number("link_bandwidth_gbps", 0, 1e9)});
        }
      }
      const fs::path mt = rp / "matrix_operator_latency.csv";
      if (fs::exists(mt)) {
        CsvReader t(mt.string(), {"type", "duration_us", "batch", "m", "n", "k"});
        // Room for the most rows the file can hold: only the pages used count, and the vector never regrows.
        rf.matrix.reserve(static_cast<std::size_t>(fs::file_size(mt) / 12));
        std::map<std::string, std::uint16_t> types;
        while (t.next()) {
          const CsvRow row = t.row();
          const auto [it, fresh] = types.emplace(row.raw("type"), static_cast<std::uint16_t>(types.size()));
          if (fresh) {
            if (types.size() > 65535) row.fail("type", "more than 65,535 kernel types");
            rf.matrix_types.push_back(it->first);
          }
          auto dim = [&](const char* col) { return static_cast<std::int32_t>(row.integer(col, 1, 2147483647)); };
          rf.matrix.push_back(
              {row.positive("duration_us", 1e12), dim("batch"), dim("m"), dim("n"), dim("k"), it->second});
        }
      }
      r.ranks.push_back(std::move(rf));
    }
  }
}

struct ManifestRow {
  std::string directory, model_setting, platform, system, model;
  std::int64_t seq = 0;
  int devices = 0;
};

// Validity rules for a collection's measured runs, which evidently ran: the whole job counts as one node (its TP
// groups may span it), stages may differ by a layer and heads may be padded.
ValidityOptions measured_validity(const Collection& c) { return {c.devices, true, true, true}; }

// The stack settings that set how many bytes a rank keeps, read off a collection's measured peak memory where
// nothing stronger decided them: every combination of the undecided ones is scored by the root-mean-square log
// error of the predicted peaks (the system's θ) against the measured ones, and the best replaces the settings as
// read only where they miss by more than the memory model's own error (10 %, kBeyondModelError) and the reading at
// least halves the miss. Among readings within 10 % of the best score, the one changing fewest settings wins.
// Recorded settings (training_settings.json) are kept; a reading that fits the peaks that much better is said
// (`settings_contradicted`).
// Sequence parallelism divides the activations outside the tensor-parallel region by t (Korthikanti et al. 2022
// §4.2.2), flash attention drops the s x s scores, fused norms their fp32 copies, and the gradient dtype and the
// reused master copy set the bytes per parameter: each leaves its own pattern over the runs' degrees.
// The memory model's error allowance: 10 %, about twice its leave-one-model-out error on the bundled runs (4.6 %).
constexpr double kBeyondModelError = 1.10;

// Whether stronger evidence than the peaks decided a memory setting: sequence parallelism by the tp group's profiled
// collectives when there are any (infer_settings), the others by a run's feasibility (`proven`).
using Proven = std::vector<bool TrainingSettings::*>;
bool decided(const Collection& c, const MemorySetting& m, const Proven& proven) {
  if (m.member == &TrainingSettings::sequence_parallel)
    return std::any_of(c.comm_summary.begin(), c.comm_summary.end(),
                       [](const CommSummaryRow& r) { return r.comm_group == "tp"; });
  return std::find(proven.begin(), proven.end(), m.member) != proven.end();
}

// What the peaks say: the settings to change (`changes`: "sequence_parallel true, ..."; empty when the settings as
// read fit, or no reading does clearly better) and `settings` with them changed.
struct MemoryReading {
  std::string changes;
  TrainingSettings settings;
  std::size_t runs = 0;
  double fit_pct = 0, before_pct = 0;  // root-mean-square error of the peaks with the changes and without
  std::string fits(const char* before) const {
    char buf[200];
    std::snprintf(buf, sizeof buf, "the %zu measured peaks fit to %.1f %% (root-mean-square) so read, %.1f %% %s", runs,
                  fit_pct, before_pct, before);
    return buf;
  }
};
MemoryReading read_memory_settings(const Collection& c, const Proven& proven) {
  MemoryReading out{"", c.settings};
  std::vector<const MemorySetting*> open;
  for (const MemorySetting& m : kMemorySettings)
    if (!decided(c, m, proven)) open.push_back(&m);
  std::vector<const Run*> measured;
  for (const Run& r : c.runs)
    if (r.peak_memory_max_bytes) measured.push_back(&r);
  constexpr std::size_t kMinRuns = 4;  // fewer cannot tell five settings' patterns apart
  if (measured.size() < kMinRuns) return out;
  const SystemPreset& sp = *presets().find_system(c.system);
  const Model& model = presets().find_model(c.model)->model;
  SimOptions so;
  so.validity = measured_validity(c);
  auto score = [&](const TrainingSettings& t) {  // root-mean-square log error; infinite where a run is rejected
    double sum = 0;
    for (const Run* r : measured) {
      const Prediction p = simulate(model, r->strategy, sp.system, t, sp.params(), so);
      if (!p.ok() || !(p.max_peak_memory_bytes > 0)) return std::numeric_limits<double>::infinity();
      const double e = std::log(p.max_peak_memory_bytes / *r->peak_memory_max_bytes);
      sum += e * e;
    }
    return std::sqrt(sum / static_cast<double>(measured.size()));
  };
  const double current = score(c.settings);
  if (!(current > std::log(kBeyondModelError))) return out;
  struct Candidate {
    unsigned flips;
    double rms;
  };
  std::vector<Candidate> all;
  for (unsigned flips = 1; flips < (1u << open.size()); ++flips) {
    TrainingSettings t = c.settings;
    for (std::size_t i = 0; i < open.size(); ++i)
      if (flips & (1u << i)) t.*open[i]->member = !(t.*open[i]->member);
    all.push_back({flips, score(t)});
  }
  const double best = std::min_element(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) {
                        return a.rms < b.rms;
                      })->rms;
  if (!(best <= 0.5 * current)) return out;
  const Candidate& pick = *std::min_element(all.begin(), all.end(), [&](const Candidate& a, const Candidate& b) {
    const bool na = a.rms <= 1.1 * best, nb = b.rms <= 1.1 * best;
    if (na != nb) return na;
    const int ca = std::popcount(a.flips), cb = std::popcount(b.flips);
    return ca != cb ? ca < cb : a.rms < b.rms;
  });
  for (std::size_t i = 0; i < open.size(); ++i)
    if (pick.flips & (1u << i)) {
      bool& v = out.settings.*open[i]->member;
      v = !v;
      out.changes += (out.changes.empty() ? "" : ", ") + std::string(open[i]->name) + (v ? " true" : " false");
    }
  out.runs = measured.size();
  out.fit_pct = 100 * (std::exp(pick.rms) - 1);
  out.before_pct = 100 * (std::exp(current) - 1);
  return out;
}

// A measured MoE run named without an expert-TP degree, whose experts could not have been split over TP as
// Megatron-core's default does (expert TP = TP: ep·tp must divide the stage's tp·cp·dp ranks), ran with whole
// experts on each rank and EP spread over the TP ranks too (Megatron-core's MoE parallel folding with expert TP 1;
// MindSpeed-LLM's --moe-tp-extend-ep): it ran, so it is read so, and said in `settings_inferred`. Runs that either
// reading allows keep the default.
void read_expert_tensor_parallel(Collection& c) {
  const Model& model = presets().find_model(c.model)->model;
  if (!model.is_moe()) return;
  std::string folded;
  for (Run& r : c.runs) {
    Strategy& s = r.strategy;
    if (s.expert_parallel <= 1 || s.expert_tensor_parallel > 0 || s.tensor_parallel <= 1) continue;
    if (check(model, s, c.settings, measured_validity(c)) != Rejection::ep_not_dividing_dp_cp) continue;
    Strategy whole = s;
    whole.set_expert_tensor(1);
    if (check(model, whole, c.settings, measured_validity(c)) == Rejection::ep_not_dividing_dp_cp) continue;
    s = whole;
    folded += (folded.empty() ? "'" : ", '") + r.config + "'";
  }
  if (folded.empty()) return;
  c.settings_inferred += (c.settings_inferred.empty() ? "" : "; ") + std::string("expert tensor parallel 1 in ") +
                         folded +
                         ": their expert parallelism does not fit in the stage's tp x cp x dp ranks with experts split "
                         "over tp, so the experts are whole on each rank (MoE parallel folding, MindSpeed-LLM's "
                         "--moe-tp-extend-ep)";
}

// A collection without training_settings.json: what its own runs show beyond its platform's defaults, said in
// `settings_inferred`. Sequence parallelism shows in the tensor-parallel group's measured collectives
// (comm_summary.csv): all-gathers and reduce-scatters with it, all-reduces without; the context-parallel algorithm
// in the cp group's. And the runs ran, so where storing the s x s scores is impossible flash attention was on: a
// context-parallel run by ring or K/V gather (both need flash; Ulysses does not), or a measured run that the system's θ
// puts over the device's memory with the scores stored and within it with flash attention (a run over it either way
// says nothing of the scores).
void infer_settings(Collection& c) {
  if (c.settings_recorded) {  // taken as they are; where the peaks contradict them, said
    const MemoryReading r = read_memory_settings(c, {});
    if (!r.changes.empty())
      c.settings_contradicted = r.changes + ": " + r.fits("as training_settings.json records them");
    return;
  }
  auto say = [&](const std::string& what) { c.settings_inferred += (c.settings_inferred.empty() ? "" : "; ") + what; };
  double all_reduce_s = 0, gather_scatter_s = 0;
  for (const auto& row : c.comm_summary) {
    if (row.comm_group != "tp") continue;
    if (row.comm_type == "all_reduce") all_reduce_s += row.elapsed_time_sum_s;
    if (row.comm_type == "all_gather" || row.comm_type == "reduce_scatter") gather_scatter_s += row.elapsed_time_sum_s;
  }
  if (!c.settings.sequence_parallel && gather_scatter_s > all_reduce_s) {
    c.settings.sequence_parallel = true;
    say("sequence_parallel true: the tp group's measured collectives are all-gathers and reduce-scatters, not "
        "all-reduces (comm_summary.csv)");
  }
  // The context-parallel algorithm shows in the cp group's measured collectives: point-to-point under the ring
  // (p2p), all-to-alls under Ulysses (a2a), all-gathers under the K/V gather; the one that took the most time.
  // Where no group is named cp (a profiler's own group names), a dense model's all-to-alls still tell: nothing
  // but Ulysses context parallelism runs one there.
  struct CpEvidence {
    const char* primitive;
    CpCommType type;
    const char* words;
    double seconds;
  };
  CpEvidence evidence[] = {{"point_to_point", CpCommType::p2p, "point-to-point", 0},
                           {"all_to_all", CpCommType::a2a, "all-to-alls", 0},
                           {"all_gather", CpCommType::allgather, "all-gathers", 0}};
  double all_to_all_s = 0;
  for (const auto& row : c.comm_summary) {
    if (row.comm_type == "all_to_all") all_to_all_s += row.elapsed_time_sum_s;
    for (CpEvidence& e : evidence)
      if (row.comm_group == "cp" && row.comm_type == e.primitive) e.seconds += row.elapsed_time_sum_s;
  }
  const CpEvidence& most =
      *std::max_element(std::begin(evidence), std::end(evidence),
                        [](const CpEvidence& a, const CpEvidence& b) { return a.seconds < b.seconds; });
  const bool has_cp =
      std::any_of(c.runs.begin(), c.runs.end(), [](const Run& r) { return r.strategy.context_parallel > 1; });
  if (most.seconds > 0 && most.type != c.settings.cp_comm_type) {
    c.settings.cp_comm_type = most.type;
    say(std::string("cp_comm_type ") + to_string(most.type) + ": the cp group's measured collectives are " +
        most.words + " (comm_summary.csv)");
  } else if (most.seconds == 0 && all_to_all_s > 0 && has_cp && !presets().find_model(c.model)->model.is_moe() &&
             c.settings.cp_comm_type != CpCommType::a2a) {
    c.settings.cp_comm_type = CpCommType::a2a;
    say("cp_comm_type a2a: the dense model's runs measured all-to-alls, which only Ulysses context parallelism runs "
        "(comm_summary.csv)");
  }
  // The MoE dispatcher shows in what was not measured: Megatron-core's all-to-all dispatcher runs all-to-alls in
  // every expert-parallel run, the all-gather one none (it all-gathers and reduce-scatters over expert TP x EP).
  // A profile with collectives but no all-to-all, from a collection with an expert-parallel run, is the latter.
  const bool ep_run = std::any_of(c.runs.begin(), c.runs.end(), [](const Run& r) {
    return r.strategy.expert_parallel > 1 && (r.iteration_time_s || r.peak_memory_max_bytes);
  });
  if (ep_run && !c.comm_summary.empty() && all_to_all_s == 0 && presets().find_model(c.model)->model.is_moe() &&
      c.settings.moe_token_dispatcher_type != MoeDispatcher::allgather) {
    c.settings.moe_token_dispatcher_type = MoeDispatcher::allgather;
    say("moe_token_dispatcher_type allgather: the measured collectives hold no all-to-all, which the all-to-all "
        "dispatcher runs in every expert-parallel run (comm_summary.csv)");
  }
  // Memory-saving settings a run's feasibility can prove: a run that ran could not have needed more memory than
  // the device has. In order, each on top of what was read before it: flash attention (context parallelism needs
  // it outright; on a V100, which FlashAttention-2 does not run, that is a memory-efficient kernel such as
  // PyTorch's SDPA), then fused norms (which keep only their input). Proof needs the run to exceed the device by
  // more than the memory model's error: 10 %, about twice its leave-one-model-out error on the bundled runs (4.6 %),
  // and to do so under the leanest reading of every other memory setting nothing has decided (SP on unless the tp
  // group was profiled, the other saving on, 16-bit gradients, the master copy reused): otherwise the run may have
  // fitted by one of those instead.
  const SystemPreset& sp = *presets().find_system(c.system);
  const ModelPreset& mp = *presets().find_model(c.model);
  SimOptions so;
  so.validity = measured_validity(c);
  struct Saving {
    bool TrainingSettings::*member;
    const char* name;
    const char* instead;  // what the run would need memory for without it
  };
  const Saving savings[] = {{&TrainingSettings::flash_attention, "flash_attention", "the attention scores stored"},
                            {&TrainingSettings::fused_norm, "fused_norm", "PyTorch's norms (fp32 copies kept)"}};
  Proven proven;  // set by a run's feasibility: not open to the memory reading
  for (const Saving& v : savings) {
    if (c.settings.*v.member) continue;
    for (const Run& r : c.runs) {
      if (!r.iteration_time_s && !r.peak_memory_max_bytes) continue;  // not measured: not known to have run
      std::string why;
      // A context-parallel run says nothing of the others where the stack turns flash on for it alone; elsewhere
      // the ring and the K/V gather need it (Ulysses does not, so its runs prove it only by their memory).
      const bool cp_run = v.member == &TrainingSettings::flash_attention && r.strategy.context_parallel > 1;
      if (cp_run && c.settings.flash_attention_with_cp) continue;
      if (cp_run && c.settings.cp_comm_type != CpCommType::a2a) {
        why = "'" + r.config + "' uses context parallelism by " + to_string(c.settings.cp_comm_type) +
              ", which needs flash attention";
      } else {
        TrainingSettings lean = c.settings;
        for (const MemorySetting& m : kMemorySettings)
          if (!decided(c, m, proven)) lean.*m.member = m.lean;
        TrainingSettings stored = lean;
        stored.*v.member = false;
        const Prediction without = simulate(mp.model, r.strategy, sp.system, stored, sp.params(), so),
                         saved = simulate(mp.model, r.strategy, sp.system, lean, sp.params(), so);
        const double cap = sp.system.hbm_capacity_bytes;
        if (without.ok() && saved.ok() && without.max_peak_memory_bytes > kBeyondModelError * cap &&
            saved.max_peak_memory_bytes <= cap)
          why = "'" + r.config + "' ran, yet with " + v.instead + " it would need " +
                std::to_string(static_cast<int>(without.max_peak_memory_bytes / 1073741824.0)) + " GiB of " +
                std::to_string(static_cast<int>(cap / 1073741824.0));
      }
      if (why.empty()) continue;
      c.settings.*v.member = true;
      proven.push_back(v.member);
      say(std::string(v.name) + " true: " + why);
      break;
    }
  }
  if (const MemoryReading r = read_memory_settings(c, proven); !r.changes.empty()) {
    c.settings = r.settings;
    c.settings_from_peaks = true;
    say(r.changes + ": " + r.fits("as read before") + " (peak_memory.csv)");
  }
}

Collection open_collection(const std::string& root, const ManifestRow& mr) {
  Collection c;
  c.directory = mr.directory;
  const fs::path dir = fs::path(root) / mr.directory;
  std::string leaf = dir.filename().string();
  c.platform = mr.platform;
  if (c.platform.empty()) c.platform = ends_with(leaf, kSweepGpu) ? "gpu" : "npu";
  c.model_setting = mr.model_setting;
  if (c.model_setting.empty()) {
    c.model_setting = leaf;
    for (const auto& suf : {kSweepGpu, kSweepNpu})
      if (ends_with(leaf, suf)) c.model_setting = leaf.substr(0, leaf.size() - suf.size());
  }
  const auto ms = find_model_setting(c.model_setting);
  c.model = !mr.model.empty() ? mr.model : ms ? ms->model : "";
  if (c.model.empty())
    throw InputError(
        dir.string(), 0, "model_setting",
        "cannot map '" + c.model_setting + "' to a model: add it to data/model_settings.csv or the manifest");
  if (!presets().find_model(c.model))
    throw InputError(dir.string(), 0, "model", "model '" + c.model + "' has no preset in data/presets/models.json");
  c.devices = mr.devices > 0 ? mr.devices : ms ? ms->devices : 8;
  c.system = !mr.system.empty()    ? mr.system
             : c.platform == "gpu" ? "v100_sxm2_32g"
             : c.platform == "npu" ? "ascend_910b3_64g"
                                   : c.platform;  // a system preset named as the platform
  if (!presets().find_system(c.system))
    throw InputError(dir.string(), 0, "system", "system '" + c.system + "' has no preset");
  const std::int64_t seq = mr.seq > 0 ? mr.seq : ms ? ms->seq_length : 4096;
  c.settings = platform_defaults(c.platform, seq);
  const fs::path ts = dir / "training_settings.json";
  if (fs::exists(ts)) {
    c.settings = settings_from_json(parse_json_file(ts.string()), ts.string(), "", c.settings);
    c.settings_recorded = true;
  }
  const System& sys = presets().find_system(c.system)->system;
  if (const auto problem = precision_problem(sys, c.settings))
    throw InputError((dir / "training_settings.json").string(), 0, problem->field,
                     "system " + c.system + " " + problem->why);
  read_views(c, dir);
  read_expert_tensor_parallel(c);
  infer_settings(c);
  const Model& model = presets().find_model(c.model)->model;
  for (const auto& r : c.runs)
    if (const Rejection why = check(model, r.strategy, c.settings, measured_validity(c)); why != Rejection::ok)
      throw InputError(r.named_in, r.named_at_line, "optimization_config",
                       "'" + r.config + "' is impossible for " + c.model + ": " +
                           explain(why, model, r.strategy, c.settings, measured_validity(c)));
  return c;
}

}  // namespace

Dataset read_dataset(const std::string& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) throw InputError(root, 0, "", "dataset directory does not exist");
  Dataset d;
  d.root = root;
  std::vector<ManifestRow> rows;
  const fs::path manifest = fs::path(root) / "data_manifest.csv";
  std::optional<CsvTable> listed;
  if (fs::exists(manifest)) listed = read_csv(manifest.string(), {});
  // A manifest names each collection's folder (`directory`), or only its model setting, whose folder is then
  // <model_setting>/ or the paper's supplement folder for its platform; one that names neither is not a list of
  // collections, and the folders are found as without it.
  if (listed && !listed->has("directory") && !listed->has("model_setting")) listed.reset();
  if (listed) {
    const CsvTable& t = *listed;
    auto folder_of = [&](std::size_t i) {
      if (t.has("directory")) return t.text(i, "directory");
      const std::string ms = t.text(i, "model_setting");
      const std::string platform = t.has("platform") ? t.at(i, t.col("platform")) : std::string();
      std::error_code e;
      // The main collections are <model_setting>/ (the NPU's); the GPU's are supplement folders.
      const std::string sweep = ms + "_tp_pp_sweep_cp1_" + platform, processed = "processed_" + platform + "/" + sweep;
      const std::vector<std::string> cands = platform == "gpu" ? std::vector<std::string>{processed, sweep, ms}
                                                               : std::vector<std::string>{ms, processed, sweep};
      for (const std::string& cand : cands)
        if (fs::is_directory(fs::path(root) / cand, e)) return cand;
      t.fail(i, "model_setting",
             "no folder '" + ms + "' (nor the " + (platform.empty() ? "platform" : platform) +
                 " supplement folder) in the dataset root, and no directory column");
    };
    std::map<std::string, std::string> seen;  // resolved folder -> as the manifest writes it
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
      ManifestRow mr;
      mr.directory = folder_of(i);
      if (mr.directory.find("..") != std::string::npos || (!mr.directory.empty() && mr.directory[0] == '/'))
        t.fail(i, "directory", "must be a relative path inside the dataset root");
      if (!fs::is_directory(fs::path(root) / mr.directory, ec))
        t.fail(i, "directory", "'" + mr.directory + "' does not exist");
      // Identity is the resolved folder: `x`, `./x`, `x/` and a symlink to x are one collection.
      const fs::path resolved = fs::canonical(fs::path(root) / mr.directory, ec);
      if (ec) t.fail(i, "directory", "'" + mr.directory + "' cannot be resolved: " + ec.message());
      if (auto [it, fresh] = seen.emplace(resolved.string(), mr.directory); !fresh)
        t.fail(i, "directory", "'" + mr.directory + "' is the same folder as '" + it->second + "'");
      auto opt = [&](const char* col) { return t.has(col) ? t.at(i, t.col(col)) : std::string(); };
      mr.model_setting = opt("model_setting");
      mr.platform = opt("platform");
      // gpu / npu (the paper's collections) or any system preset: an A100 -> H100 shortlist is expressible.
      if (!mr.platform.empty() && mr.platform != "gpu" && mr.platform != "npu" && !presets().find_system(mr.platform))
        t.fail(i, "platform", "'" + mr.platform + "' is not gpu, npu or a system preset");
      mr.system = opt("system");
      mr.model = opt("model");
      if (t.has("seq_length") && !opt("seq_length").empty()) mr.seq = t.integer(i, "seq_length", 1, 1 << 24);
      if (t.has("devices") && !opt("devices").empty())
        mr.devices = static_cast<int>(t.integer(i, "devices", 1, 1 << 20));
      rows.push_back(mr);
    }
  } else {
    std::vector<std::tuple<bool, std::string, std::string>> found;  // (through a symlink, name, resolved folder)
    auto add = [&](const fs::path& p, const std::string& rel) {
      std::error_code e2;
      const fs::path c = fs::canonical(p, e2);
      if (e2) throw InputError(p.string(), 0, "", "cannot be resolved: " + e2.message());
      found.emplace_back(c != fs::absolute(p).lexically_normal(), rel, c.string());
    };
    for (const auto& e : fs::directory_iterator(root)) {
      if (!e.is_directory(ec)) continue;  // files, dangling links and symlink loops are not collections
      if (is_collection_dir(e.path())) {
        add(e.path(), e.path().filename().string());
      } else {
        for (const auto& s : fs::directory_iterator(e.path(), ec))
          if (s.is_directory(ec) && is_collection_dir(s.path()))
            add(s.path(), (e.path().filename() / s.path().filename()).string());
      }
    }
    std::sort(found.begin(), found.end());
    std::set<std::string> resolved;  // a folder reached twice (symlinks) is one collection, under its real name
    std::vector<std::string> dirs;
    for (const auto& [link, rel, c] : found)
      if (resolved.insert(c).second) dirs.push_back(rel);
    for (auto& dir : dirs) rows.push_back(ManifestRow{dir, "", "", "", "", 0, 0});
  }
  if (rows.empty())
    throw InputError(root, 0, "",
                     "no measured collections found (no data_manifest.csv, no folder with step_time_summary.csv)");
  for (const auto& mr : rows) d.collections.push_back(open_collection(root, mr));
  // One measurement per (model setting, platform, configuration): the same run in two folders (a copied
  // collection, a folder read twice) would count twice in every fit and metric.
  std::map<std::string, std::string> measured;
  for (const auto& c : d.collections)
    for (const auto& r : c.runs) {
      const std::string key = c.model_setting + "/" + c.platform + "/" + canonical_config(r.strategy, c.settings);
      if (auto [it, fresh] = measured.emplace(key, c.directory + "/" + r.config); !fresh)
        throw InputError(r.named_in, r.named_at_line, "optimization_config",
                         "'" + r.config + "' of " + c.model_setting + " on " + c.platform + " is also measured in " +
                             it->second + ": a collection is in the dataset twice");
    }
  return d;
}

DatasetSummary summarize(const Dataset& d) {
  DatasetSummary out;
  std::map<std::string, std::map<std::string, std::set<std::string>>> timed;  // setting -> platform -> configs
  for (const auto& c : d.collections) {
    CollectionSummary cs{&c, c.runs.size(), 0, 0, 0, 0, 0, 0};
    for (const auto& r : c.runs) {
      cs.with_time += r.iteration_time_s ? 1 : 0;
      cs.with_memory += r.peak_memory_max_bytes ? 1 : 0;
      cs.with_per_rank_memory += r.peak_memory_bytes.empty() ? 0 : 1;
      cs.with_step_trace += r.step_trace.empty() ? 0 : 1;
      cs.with_operator_categories += r.op_categories.empty() ? 0 : 1;
      cs.with_rank_files += r.ranks.empty() ? 0 : 1;
      if (r.iteration_time_s) timed[c.model_setting][c.platform].insert(r.config);
    }
    out.collections.push_back(cs);
  }
  for (const auto& [ms, plats] : timed) {
    ModelSettingSummary s;
    for (const auto& [plat, cfgs] : plats) s.timed_per_platform[plat] = cfgs.size();
    if (plats.size() == 2) {
      const auto& a = plats.begin()->second;
      const auto& b = std::next(plats.begin())->second;
      for (const auto& x : a) s.both_platforms += b.count(x);
    }
    out.model_settings[ms] = s;
  }
  return out;
}

}  // namespace lmsim::io
