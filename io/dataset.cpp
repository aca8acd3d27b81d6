#include "io/dataset.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

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

// Paper defaults for a collection without training_settings.json (Section 4 of the paper).
TrainingSettings platform_defaults(const std::string& platform, std::int64_t seq) {
  TrainingSettings t;
  t.seq_length = seq;
  t.micro_batch_size = 1;
  t.global_batch_size = 32;
  t.distributed_optimizer = true;
  if (platform == "gpu") {  // Megatron-LM on V100: FP16, no fused kernels, no sequence parallel
    t.precision = Precision::fp16;
    t.flash_attention = false;
    t.fused_kernels = false;
    t.sequence_parallel = false;
  } else {  // MindSpeed-LLM on Ascend: BF16, fused kernels, sequence parallel
    t.precision = Precision::bf16;
    t.flash_attention = true;
    t.fused_kernels = true;
    t.sequence_parallel = true;
  }
  return t;
}

int rank_field(const CsvTable& t, std::size_t row, int devices) {
  const std::int64_t r = t.integer(row, "rank_id", 0, 1 << 20);
  if (r >= devices)
    t.fail(row, "rank_id",
           "rank " + std::to_string(r) + " is out of range for " + std::to_string(devices) + " devices");
  return static_cast<int>(r);
}

Run& run_for(Collection& c, std::map<std::string, std::size_t>& index, const CsvTable& t, std::size_t row) {
  const std::string& name = t.text(row, "optimization_config");
  auto it = index.find(name);
  if (it != index.end()) return c.runs[it->second];
  ParseResult pr = parse_config_name(name);
  if (!pr.strategy) t.fail(row, "optimization_config", pr.error);
  if (pr.strategy->devices() != c.devices)
    t.fail(row, "optimization_config",
           "'" + name + "' uses dp*tp*pp*cp = " + std::to_string(pr.strategy->devices()) +
               " devices, the collection has " + std::to_string(c.devices));
  Run r;
  r.config = name;
  r.strategy = *pr.strategy;
  index.emplace(name, c.runs.size());
  c.runs.push_back(std::move(r));
  return c.runs.back();
}

void read_views(Collection& c, const fs::path& dir) {
  std::map<std::string, std::size_t> index;
  const fs::path step = dir / "step_time_summary.csv";
  if (fs::exists(step)) {
    const CsvTable t = read_csv(step.string(), {"optimization_config", "iteration_time_ms"});
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
      Run& r = run_for(c, index, t, i);
      if (r.iteration_time_s) t.fail(i, "optimization_config", "duplicate configuration '" + r.config + "'");
      r.iteration_time_s = t.positive(i, "iteration_time_ms", 1e9) / 1e3;
    }
  }
  const fs::path mem = dir / "peak_memory.csv";
  if (fs::exists(mem)) {
    const CsvTable t = read_csv(mem.string(), {"optimization_config", "rank_id", "peak_memory_mb"});
    std::set<std::pair<std::string, int>> seen;
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
      Run& r = run_for(c, index, t, i);
      const double bytes = t.positive(i, "peak_memory_mb", 1e8) * 1048576.0;
      const std::string& rid = t.text(i, "rank_id");
      if (rid == "max") {
        if (!r.peak_memory_bytes.empty() || seen.count({r.config, -1}))
          t.fail(i, "rank_id", "'max' row for '" + r.config + "' mixed with per-rank rows or repeated");
        seen.insert({r.config, -1});
        r.peak_memory_max_bytes = bytes;
        continue;
      }
      const int rank = rank_field(t, i, c.devices);
      if (seen.count({r.config, -1})) t.fail(i, "rank_id", "per-rank row for '" + r.config + "' after a 'max' row");
      if (!seen.insert({r.config, rank}).second)
        t.fail(i, "rank_id", "duplicate rank " + std::to_string(rank) + " for '" + r.config + "'");
      r.peak_memory_bytes.push_back({rank, bytes});
      r.peak_memory_max_bytes = std::max(r.peak_memory_max_bytes.value_or(0.0), bytes);
    }
    for (auto& r : c.runs)
      std::sort(r.peak_memory_bytes.begin(), r.peak_memory_bytes.end(),
                [](const RankValue& a, const RankValue& b) { return a.rank < b.rank; });
  }
  const fs::path trace = dir / "step_trace_time_summary.csv";
  if (fs::exists(trace)) {
    const CsvTable t =
        read_csv(trace.string(), {"optimization_config", "rank_id", "computing", "communication",
                                  "communication_not_overlapped", "overlapped", "free", "stage", "bubble"});
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
      Run& r = run_for(c, index, t, i);
      auto ms = [&](const char* col) { return t.number(i, col, 0, 1e12) / 1e3; };  // profiler ms -> s
      r.step_trace.push_back({rank_field(t, i, c.devices), ms("computing"), ms("communication"),
                              ms("communication_not_overlapped"), ms("overlapped"), ms("free"), ms("stage"),
                              ms("bubble")});
    }
  }
  const fs::path ops = dir / "operator_latency_by_category.csv";
  if (fs::exists(ops)) {
    const CsvTable t = read_csv(ops.string(), {"optimization_config", "rank_id", "op_category", "op_type", "core_type",
                                               "count", "total_time_us", "avg_time_us", "ratio_percent"});
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
      Run& r = run_for(c, index, t, i);
      r.op_categories.push_back({rank_field(t, i, c.devices), t.text(i, "op_category"), t.at(i, t.col("op_type")),
                                 t.at(i, t.col("core_type")), t.number(i, "count", 0, 1e15),
                                 t.number(i, "total_time_us", 0, 1e15), t.number(i, "avg_time_us", 0, 1e15),
                                 t.number(i, "ratio_percent", 0, 100)});
    }
  }
  const fs::path comm = dir / "comm_summary.csv";
  if (fs::exists(comm)) {
    const CsvTable t = read_csv(comm.string(), {"comm_scope", "comm_type", "comm_group", "op_count",
                                                "elapsed_time_sum_ms", "wait_time_sum_ms", "link_bandwidth"});
    for (std::size_t i = 0; i < t.rows.size(); ++i)
      c.comm_summary.push_back({t.at(i, t.col("comm_scope")), t.text(i, "comm_type"), t.at(i, t.col("comm_group")),
                                t.number(i, "op_count", 0, 1e15), t.number(i, "elapsed_time_sum_ms", 0, 1e15) / 1e3,
                                t.number(i, "wait_time_sum_ms", 0, 1e15) / 1e3, t.number(i, "link_bandwidth", 0, 1e9)});
  }
  const fs::path msum = dir / "matrix_latency_summary.csv";
  if (fs::exists(msum)) {
    const CsvTable t = read_csv(msum.string(), {"batch", "m", "k", "n", "median_us"});
    for (std::size_t i = 0; i < t.rows.size(); ++i)
      c.matrix_summary.push_back({t.integer(i, "batch", 1, 1LL << 32), t.integer(i, "m", 1, 1LL << 32),
                                  t.integer(i, "k", 1, 1LL << 32), t.integer(i, "n", 1, 1LL << 32),
                                  t.positive(i, "median_us", 1e12)});
  }
  // Per-run rank folders: <dir>/<config>/rank_<id>/{comm_time.csv, matrix_operator_latency.csv}.
  for (auto& r : c.runs) {
    const fs::path rd = dir / r.config;
    if (!fs::is_directory(rd)) continue;
    std::vector<fs::path> ranks;
    for (const auto& e : fs::directory_iterator(rd))
      if (e.is_directory() && e.path().filename().string().rfind("rank_", 0) == 0) ranks.push_back(e.path());
    std::sort(ranks.begin(), ranks.end());
    for (const auto& rp : ranks) {
      const std::string id = rp.filename().string().substr(5);
      double v = 0;
      if (!parse_number(id, v) || v != static_cast<int>(v) || v < 0 || v >= c.devices)
        throw InputError(rp.string(), 0, "rank_id",
                         "folder name is not rank_<id> with id in [0, " + std::to_string(c.devices) + ")");
      RankFiles rf{static_cast<int>(v), {}, {}};
      const fs::path ct = rp / "comm_time.csv";
      if (fs::exists(ct)) {
        const CsvTable t =
            read_csv(ct.string(), {"comm_scope", "comm_type", "comm_group", "op_name", "elapsed_time_ms",
                                   "wait_time_ms", "link_type", "link_transit_size_mb", "link_bandwidth_gbps"});
        for (std::size_t i = 0; i < t.rows.size(); ++i)
          rf.comm.push_back({t.at(i, t.col("comm_scope")), t.text(i, "comm_type"), t.at(i, t.col("comm_group")),
                             t.at(i, t.col("op_name")), t.at(i, t.col("link_type")),
                             t.number(i, "elapsed_time_ms", 0, 1e12) / 1e3, t.number(i, "wait_time_ms", 0, 1e12) / 1e3,
                             t.number(i, "link_transit_size_mb", 0, 1e12) * 1048576.0,
                             t.number(i, "link_bandwidth_gbps", 0, 1e9)});
      }
      const fs::path mt = rp / "matrix_operator_latency.csv";
      if (fs::exists(mt)) {
        const CsvTable t = read_csv(mt.string(), {"type", "duration_us", "batch", "m", "n", "k"});
        for (std::size_t i = 0; i < t.rows.size(); ++i)
          rf.matrix.push_back({t.at(i, t.col("type")), t.positive(i, "duration_us", 1e12),
                               t.integer(i, "batch", 1, 1LL << 32), t.integer(i, "m", 1, 1LL << 32),
                               t.integer(i, "n", 1, 1LL << 32), t.integer(i, "k", 1, 1LL << 32)});
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
  c.system = !mr.system.empty() ? mr.system : (c.platform == "gpu" ? "v100_sxm2_32g" : "ascend_910b3_64g");
  if (!presets().find_system(c.system))
    throw InputError(dir.string(), 0, "system", "system '" + c.system + "' has no preset");
  const std::int64_t seq = mr.seq > 0 ? mr.seq : ms ? ms->seq_length : 4096;
  c.settings = platform_defaults(c.platform, seq);
  const fs::path ts = dir / "training_settings.json";
  if (fs::exists(ts)) {
    c.settings = settings_from_json(parse_json_file(ts.string()), ts.string(), "", c.settings);
    c.settings_recorded = true;
  }
  if (!(presets().find_system(c.system)->system.peak_flops(c.settings.precision) > 0))
    throw InputError((dir / "training_settings.json").string(), 0, "precision",
                     std::string("system ") + c.system + " has no " + to_string(c.settings.precision) + " throughput");
  read_views(c, dir);
  for (const auto& r : c.runs)
    if (check(presets().find_model(c.model)->model, r.strategy, c.settings, {c.devices, true, true, true}) !=
        Rejection::ok)
      throw InputError((dir / "step_time_summary.csv").string(), 0, "optimization_config",
                       "'" + r.config + "' is impossible for " + c.model + ": " +
                           describe(check(presets().find_model(c.model)->model, r.strategy, c.settings,
                                          {c.devices, true, true, true})));
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
  if (fs::exists(manifest)) {
    const CsvTable t = read_csv(manifest.string(), {"directory"});
    std::set<std::string> seen;
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
      ManifestRow mr;
      mr.directory = t.text(i, "directory");
      if (mr.directory.find("..") != std::string::npos || (!mr.directory.empty() && mr.directory[0] == '/'))
        t.fail(i, "directory", "must be a relative path inside the dataset root");
      if (!seen.insert(mr.directory).second) t.fail(i, "directory", "duplicate directory '" + mr.directory + "'");
      if (!fs::is_directory(fs::path(root) / mr.directory))
        t.fail(i, "directory", "'" + mr.directory + "' does not exist");
      auto opt = [&](const char* col) { return t.has(col) ? t.at(i, t.col(col)) : std::string(); };
      mr.model_setting = opt("model_setting");
      mr.platform = opt("platform");
      if (!mr.platform.empty() && mr.platform != "gpu" && mr.platform != "npu")
        t.fail(i, "platform", "'" + mr.platform + "' is not gpu or npu");
      mr.system = opt("system");
      mr.model = opt("model");
      if (t.has("seq_length") && !opt("seq_length").empty()) mr.seq = t.integer(i, "seq_length", 1, 1 << 24);
      if (t.has("devices") && !opt("devices").empty())
        mr.devices = static_cast<int>(t.integer(i, "devices", 1, 1 << 20));
      rows.push_back(mr);
    }
  } else {
    std::vector<std::string> dirs;
    for (const auto& e : fs::directory_iterator(root)) {
      if (!e.is_directory()) continue;
      if (is_collection_dir(e.path())) {
        dirs.push_back(e.path().filename().string());
      } else {
        for (const auto& s : fs::directory_iterator(e.path()))
          if (s.is_directory() && is_collection_dir(s.path()))
            dirs.push_back((e.path().filename() / s.path().filename()).string());
      }
    }
    std::sort(dirs.begin(), dirs.end());
    for (auto& dir : dirs) rows.push_back(ManifestRow{dir, "", "", "", "", 0, 0});
  }
  if (rows.empty())
    throw InputError(root, 0, "",
                     "no measured collections found (no data_manifest.csv, no folder with step_time_summary.csv)");
  for (const auto& mr : rows) d.collections.push_back(open_collection(root, mr));
  return d;
}

}  // namespace lmsim::io
