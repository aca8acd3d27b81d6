// `lmsim models`, `lmsim systems`, `lmsim stacks`, `lmsim dataset info DIR`.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <set>

#include "apps/common.hpp"

namespace lmsim::app {

namespace {
// `text` as lines of at most `width` characters (a longer word stands alone), each indented by `indent` spaces.
std::string wrap(const std::string& text, std::size_t width, std::size_t indent) {
  const std::string pad(indent, ' ');
  std::string out, line;
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t end = std::min(text.find(' ', i), text.size());
    const std::string word = text.substr(i, end - i);
    if (!line.empty() && pad.size() + line.size() + 1 + word.size() > width) {
      out += pad + line + '\n';
      line.clear();
    }
    if (!word.empty()) line += (line.empty() ? "" : " ") + word;
    i = end + 1;
  }
  if (!line.empty()) out += pad + line + '\n';
  return out;
}
}  // namespace

void register_models(CLI::App& app) {
  auto* models = app.add_subcommand("models", "list model presets with their parameter counts");
  // Options live as long as the command (shared with its callback): no file-scope or static state.
  struct Options {
    bool models_json = false, systems_json = false;
    std::vector<std::string> models;
  };
  auto flags = std::make_shared<Options>();
  models->add_flag("--json", flags->models_json, "machine-readable output (each model's full spec as read)");
  models
      ->add_option("--model", flags->models,
                   "only these (repeatable or comma-separated): presets, model JSONs or HuggingFace config.json files "
                   "(how lmsim reads a config)")
      ->delimiter(',');
  models->callback([flags] {
    const auto& p = io::presets();
    struct Listed {
      Model model;
      double card_total_params;  // 0: no model card figure (not a preset)
    };
    std::vector<Listed> listed;
    if (flags->models.empty()) {
      for (const auto& mp : p.models) listed.push_back({mp.model, mp.card_total_params});
    } else {
      for (const std::string& name : flags->models) {
        const io::ModelPreset* mp = p.find_model(name);
        listed.push_back({io::resolve_model(name), mp ? mp->card_total_params : 0.0});
      }
    }
    if (flags->models_json) {
      io::Json arr = io::Json::array();
      for (const Listed& l : listed) {
        io::Json j = io::to_json(l.model);
        const ParamCount c = count_params(l.model);
        j["total_params"] = c.total;
        j["active_params"] = c.active_per_token;
        j["card_total_params"] = l.card_total_params > 0 ? io::Json(l.card_total_params) : io::Json(nullptr);
        arr.push_back(j);
      }
      std::cout << arr.dump(1) << "\n";
      return;
    }
    std::vector<std::vector<std::string>> rows;
    for (const Listed& l : listed) {
      const Model& m = l.model;
      const ParamCount c = count_params(m);
      rows.push_back(
          {m.name, fmt(c.total / 1e9, 3), fmt(c.active_per_token / 1e9, 3),
           l.card_total_params > 0 ? fmt(l.card_total_params / 1e9, 2) : "-", std::to_string(m.num_layers),
           std::to_string(m.hidden_size),
           std::to_string(m.num_attention_heads) + "/" + std::to_string(m.num_kv_heads) + "x" +
               std::to_string(m.head_dim),
           std::to_string(m.ffn_hidden_size), std::to_string(m.vocab_size),
           m.is_moe() ? std::to_string(m.num_experts) + " top-" + std::to_string(m.experts_per_token) : "-"});
    }
    std::cout << table(
        {"model", "params_B", "active_B", "card_B", "layers", "hidden", "heads/kv x dim", "ffn", "vocab", "experts"},
        rows);
  });
  auto* systems = app.add_subcommand("systems", "list system presets");
  systems->add_flag("--json", flags->systems_json, "machine-readable output");
  systems->callback([flags] {
    const bool systems_json = flags->systems_json;
    const auto& p = io::presets();
    // Which θ a prediction on the system uses by default: its shipped fit, another system's fit as its uncalibrated
    // defaults (the same GPU), or the preset's own guesses.
    auto theta_kind = [](const io::SystemPreset& sp) {
      return !sp.calibrated_file.empty() ? "fitted" : !sp.prior_file.empty() ? "prior_from_fit" : "uncalibrated";
    };
    auto theta_shown = [](const io::SystemPreset& sp) {
      if (!sp.calibrated_file.empty()) return std::string("fitted");
      if (sp.prior_file.empty()) return std::string("uncalibrated");
      return "uncalibrated, from " + std::filesystem::path(sp.prior_file).filename().string();
    };
    if (systems_json) {
      io::Json arr = io::Json::array();
      for (const auto& sp : p.systems) {
        io::Json j = io::to_json(sp.system);
        j["default_params"] = io::to_json(sp.default_params);
        j["theta"] = {{"kind", theta_kind(sp)},
                      {"file", !sp.calibrated_file.empty() ? sp.calibrated_file : sp.prior_file},
                      {"note", sp.prior_note}};
        arr.push_back(j);
      }
      std::cout << arr.dump(1) << "\n";
      return;
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& sp : p.systems) {
      const System& s = sp.system;
      rows.push_back({s.name, s.device, std::to_string(s.devices_per_node), fmt(s.peak_flops_fp16 / 1e12, 0),
                      fmt(s.peak_flops_bf16 / 1e12, 0), fmt(s.peak_flops_fp8 / 1e12, 0) + (s.mxfp8 ? " MX" : ""),
                      fmt(s.peak_flops_fp4 / 1e12, 0), gib(s.hbm_capacity_bytes),
                      fmt(s.hbm_bandwidth_bytes_per_s / 1e9, 0), fmt(s.intra_node.bandwidth_bytes_per_s / 1e9, 1),
                      s.intra_node_links.empty() ? "uniform" : "links",
                      fmt(s.inter_node.bandwidth_bytes_per_s / 1e9, 1), theta_shown(sp)});
    }
    std::cout << table({"system", "device", "per_node", "fp16_TF", "bf16_TF", "fp8_TF", "fp4_TF", "hbm_GiB", "hbm_GB/s",
                        "intra_GB/s", "intra", "inter_GB/s", "theta"},
                       rows);
  });
  auto stacks_json = std::make_shared<bool>(false);
  auto* stacks = app.add_subcommand("stacks", "list software stacks (--stack): the training settings they set");
  stacks->add_flag("--json", *stacks_json, "machine-readable output");
  stacks->callback([stacks_json] {
    const auto& p = io::presets();
    if (*stacks_json) {
      io::Json arr = io::Json::array();
      for (const auto& st : p.stacks)
        arr.push_back({{"name", st.name},
                       {"summary", st.summary},
                       {"source", st.source},
                       {"systems", st.systems},
                       {"settings", io::to_json(st.settings)}});
      std::cout << arr.dump(1) << "\n";
      return;
    }
    // A paragraph a stack: its summary is too long for a table's column.
    for (const auto& st : p.stacks) {
      std::cout << st.name << ": " << to_string(st.settings.precision) << ", θ fitted on "
                << (st.systems.empty() ? std::string("none") : join(st.systems)) << "\n"
                << wrap(st.summary, 100, 4);
      if (!st.source.empty()) std::cout << wrap("source: " + st.source, 100, 4);
    }
    std::cout << "The settings of each: lmsim stacks --json.\n";
  });
}

namespace {
io::Json dataset_json(const io::Dataset& d, const io::DatasetSummary& sum) {
  io::Json j;
  j["root"] = d.root;
  io::Json cols = io::Json::array();
  for (const auto& cs : sum.collections) {
    const io::Collection& c = *cs.collection;
    io::Json configs = io::Json::array();
    for (const auto& r : c.runs) configs.push_back(r.config);
    cols.push_back({{"directory", c.directory},
                    {"model_setting", c.model_setting},
                    {"platform", c.platform},
                    {"system", c.system},
                    {"model", c.model},
                    {"devices", c.devices},
                    {"settings", io::to_json(c.settings)},
                    {"settings_recorded", c.settings_recorded},
                    {"settings_inferred", c.settings_inferred},
                    {"settings_from_measured_peaks", c.settings_from_peaks},
                    {"settings_contradicted", c.settings_contradicted},
                    {"configurations", cs.configurations},
                    {"with_iteration_time", cs.with_time},
                    {"with_peak_memory", cs.with_memory},
                    {"with_per_rank_memory", cs.with_per_rank_memory},
                    {"with_step_trace", cs.with_step_trace},
                    {"with_operator_categories", cs.with_operator_categories},
                    {"with_rank_files", cs.with_rank_files},
                    {"comm_summary_rows", c.comm_summary.size()},
                    {"matrix_summary_rows", c.matrix_summary.size()},
                    {"config_names", configs}});
  }
  j["collections"] = cols;
  io::Json settings = io::Json::object();
  for (const auto& [ms, s] : sum.model_settings) {
    io::Json sj;
    for (const auto& [plat, n] : s.timed_per_platform) sj[plat] = n;
    sj["both_platforms"] = s.both_platforms;
    settings[ms] = sj;
  }
  j["model_settings"] = settings;
  return j;
}
}  // namespace

namespace {

struct ImportCli {
  std::string from, out, model_setting, model, system, platform, memory = "max-reserved";
  std::vector<std::string> logs, set;
  std::int64_t devices = 0;
  bool json = false;
};

// `lmsim dataset import --from megatron|megatron-bridge LOG...`: one collection of the dataset layout from training
// logs.
void run_import(const ImportCli& o) {
  namespace fs = std::filesystem;
  const bool bridge = o.from == "megatron-bridge";
  if (!bridge && o.from != "megatron")
    throw io::InputError("command line", 0, "--from", "'" + o.from + "' is not megatron or megatron-bridge");
  const Model model = io::resolve_model(o.model);
  const io::SystemPreset* sys = io::presets().find_system(o.system);
  if (!sys) throw io::InputError("command line", 0, "--system", "'" + o.system + "' is not a system preset");
  const std::string platform = o.platform.empty() ? o.system : o.platform;
  if (o.model_setting.empty() || o.model_setting.find_first_of("/\\") != std::string::npos ||
      o.model_setting.find("..") != std::string::npos)
    throw io::InputError("command line", 0, "--model-setting", "a plain folder name is required");
  const auto mem = o.memory == "max-allocated" ? io::MemoryReport::max_allocated : io::MemoryReport::max_reserved;
  std::vector<io::MegatronRun> runs;
  std::vector<std::string> warnings;  // readings the user should hear of, also in --json
  for (const auto& log : o.logs) {
    runs.push_back(bridge ? io::read_megatron_bridge_log(log, mem, o.devices) : io::read_megatron_log(log, mem));
    for (const std::string& note : io::resolve_kernel_fusions(runs.back(), model)) {
      spdlog::warn("{}", note);
      warnings.push_back(note);
    }
    if (o.devices > 0 && runs.back().devices != o.devices)
      throw io::InputError(log, 0, "world_size",
                           std::to_string(runs.back().devices) + " ranks, --devices says " + std::to_string(o.devices));
  }
  // One collection has one set of training settings: the first log's; per-run micro-batch, sequence parallel and
  // distributed optimizer go into the configuration name; anything else that differs is an error.
  const TrainingSettings base = runs[0].settings;
  std::map<std::string, std::string> seen;
  std::string step = "optimization_config,iteration_time_ms\n", memory = "optimization_config,rank_id,peak_memory_mb\n";
  for (auto& r : runs) {
    if (r.num_layers != model.num_layers)
      throw io::InputError(
          r.log, 0, "num_layers",
          std::to_string(r.num_layers) + " layers, " + model.name + " has " + std::to_string(model.num_layers));
    // Rotary or learned positions, as the log says where it does (rope and yarn rotate q and k).
    const std::string& pos = r.position_embedding_type;
    if ((pos == "learned_absolute" && model.is_rotary()) || ((pos == "rope" || pos == "yarn") && !model.is_rotary()))
      throw io::InputError(r.log, r.position_embedding_line, "position_embedding_type",
                           "'" + pos + "', " + model.name + " has " + to_string(model.position_embedding_type));
    if (r.devices != runs[0].devices)
      throw io::InputError(r.log, 0, "world_size", "differs from " + runs[0].log + ": one collection, one size");
    const TrainingSettings& t = r.settings;
    {
      // Every setting but the three a configuration name carries must be the first log's.
      const io::Json first = io::to_json(base);
      io::Json here = io::to_json(t);
      for (const char* per_run : {"micro_batch_size", "sequence_parallel", "distributed_optimizer"})
        here[per_run] = first[per_run];
      std::string differ;
      for (const auto& [key, value] : first.items())
        if (here[key] != value) differ += (differ.empty() ? "" : ", ") + key;
      if (!differ.empty())
        throw io::InputError(
            r.log, 0, "arguments",
            "training settings differ from " + runs[0].log + " (" + differ + "): import them as separate collections");
    }
    if (t.micro_batch_size != base.micro_batch_size) r.strategy.micro_batch_size = t.micro_batch_size;
    if (r.strategy.tensor_parallel > 1 && t.sequence_parallel != base.sequence_parallel)
      r.strategy.sequence_parallel = t.sequence_parallel;
    if (t.distributed_optimizer != base.distributed_optimizer)
      r.strategy.distributed_optimizer = t.distributed_optimizer;
    const std::string name = config_name(r.strategy);
    if (auto [it, fresh] = seen.emplace(name, r.log); !fresh)
      throw io::InputError(r.log, 0, "arguments", "the same configuration " + name + " as " + it->second);
    step += name + "," + fmt(r.iteration_time_s * 1e3, 3) + "\n";
    for (const auto& [rank, bytes] : r.peak_memory_bytes)
      memory += name + "," + std::to_string(rank) + "," + fmt(bytes / 1048576.0, 3) + "\n";
  }
  // Settings no log records (NCCL_NVLS_ENABLE, an optimizer state kept apart from Megatron's flags): --set, over
  // what the logs gave. Those a configuration name or the sizes carry stay each log's.
  TrainingSettings written = base;
  if (!o.set.empty()) {
    const io::Json j = settings_of_set(o.set);
    for (const char* per_run :
         {"micro_batch_size", "sequence_parallel", "distributed_optimizer", "seq_length", "global_batch_size"})
      if (j.contains(per_run))
        throw io::InputError("--set", 0, per_run,
                             "each log says it (the configuration name or the sizes); --set gives what the logs "
                             "do not record");
    written = io::settings_from_json(j, "--set", "", base);
    const io::Json logged = io::to_json(base), now = io::to_json(written);
    for (const auto& [key, value] : now.items())
      if (logged.contains(key) && logged[key] != value) {
        spdlog::info("--set {}={} replaces the logs' {} (a setting a log does not state is its framework's default)",
                     key, value.dump(), logged[key].dump());
      }
  }
  io::Json settings = io::to_json(written);
  settings["note"] = std::string("imported from ") + (bridge ? "Megatron-Bridge" : "Megatron-LM") +
                     " logs by lmsim dataset import" + (o.set.empty() ? std::string() : ", with --set " + join(o.set));
  // The manifest: the new collection's row replaces an earlier import of the same folder.
  const std::string folder = o.model_setting + "_" + platform;  // one collection per (model setting, platform)
  const fs::path root(o.out), dir = root / folder, manifest = root / "data_manifest.csv";
  std::error_code ec;
  fs::create_directories(root, ec);
  if (!fs::is_directory(root)) throw io::InputError(o.out, 0, "--out", "cannot create the dataset folder");
  const std::vector<std::string> cols = {"directory", "model_setting", "platform", "system",
                                         "model",     "seq_length",    "devices"};
  std::vector<std::vector<std::string>> rows;
  if (fs::exists(manifest)) {
    const io::CsvTable t = io::read_csv(manifest.string(), {"directory"});
    io::forget_input(manifest.string());  // updated on purpose
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
      if (t.text(i, "directory") == folder) continue;
      std::vector<std::string> row;
      for (const auto& c : cols) row.push_back(t.has(c) ? t.at(i, t.col(c)) : "");
      rows.push_back(row);
    }
  } else {
    for (const auto& e : fs::directory_iterator(root, ec))
      if (e.is_directory() && e.path().filename() != folder && fs::exists(e.path() / "step_time_summary.csv"))
        throw io::InputError(o.out, 0, "--out",
                             "holds collections but no data_manifest.csv: import into a new folder, or write a "
                             "manifest listing them first");
  }
  rows.push_back({folder, o.model_setting, platform, o.system, model.name, std::to_string(base.seq_length),
                  std::to_string(runs[0].devices)});
  std::string man;
  for (std::size_t c = 0; c < cols.size(); ++c) man += (c ? "," : "") + cols[c];
  man += "\n";
  for (const auto& r : rows) {
    for (std::size_t c = 0; c < r.size(); ++c) man += (c ? "," : "") + r[c];
    man += "\n";
  }
  fs::create_directories(dir, ec);
  io::write_file_atomic((dir / "step_time_summary.csv").string(), step);
  if (memory.find('\n') + 1 < memory.size()) io::write_file_atomic((dir / "peak_memory.csv").string(), memory);
  io::write_file_atomic((dir / "training_settings.json").string(), settings.dump(1) + "\n");
  io::write_file_atomic(manifest.string(), man);
  const io::Dataset d = io::read_dataset(o.out);  // the result reads back under every dataset rule
  const io::Collection* c = d.find(o.model_setting, platform);
  if (o.json) {
    std::cout << io::Json{{"dataset", o.out},
                          {"collection", dir.string()},
                          {"platform", platform},
                          {"configurations", c ? c->runs.size() : 0},
                          {"warnings", warnings}}
                     .dump(1)
              << "\n";
    return;
  }
  std::cout << "imported " << runs.size() << " run(s) into " << dir.string() << " (platform " << platform << ", system "
            << o.system << "); calibrate with: lmsim calibrate --dataset " << o.out << " --platform " << platform
            << " --out theta.json\n";
}

void register_dataset_import(CLI::App& ds) {
  auto* im = ds.add_subcommand("import", "turn training logs into a collection of the dataset layout");
  auto opts = std::make_shared<ImportCli>();
  ImportCli& o = *opts;
  im->add_option("--from", o.from, "log format: megatron (Megatron-LM, MindSpeed-LLM) or megatron-bridge")
      ->required()
      ->check(CLI::IsMember({"megatron", "megatron-bridge"}));
  im->add_option("LOG", o.logs, "training logs, one run each")->required();
  im->add_option("--out", o.out, "dataset root (created; its data_manifest.csv gains the collection)")->required();
  im->add_option("--model-setting", o.model_setting, "collection name, e.g. llama3_8b_8k")->required();
  im->add_option("--model", o.model, "model preset or JSON the runs trained")->required();
  im->add_option("--system", o.system, "system preset the runs ran on")->required();
  im->add_option("--platform", o.platform, "platform name of the collection (default: the system's name)");
  im->add_option("--memory", o.memory, "which report_memory figure is the peak: max-reserved or max-allocated")
      ->check(CLI::IsMember({"max-reserved", "max-allocated"}));
  im->add_option("--devices", o.devices,
                 "ranks each run used: needed for Megatron-Bridge logs without a HyperCommGrid line, checked "
                 "against the log otherwise")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 24));
  im->add_option("--set", o.set,
                 "KEY=VALUE (repeatable): a training setting the logs do not record, as the settings JSON spells "
                 "it (nccl_nvls_enable=false where the launcher exported NCCL_NVLS_ENABLE=0)");
  im->add_flag("--json", o.json, "machine-readable summary");
  im->callback([opts] { run_import(*opts); });
}

}  // namespace

void register_dataset(CLI::App& app) {
  auto* ds = app.add_subcommand("dataset", "inspect a dataset in the LM-SimBench layout");
  ds->require_subcommand(1);
  auto* info = ds->add_subcommand("info", "summarise the measured collections under DIR");
  auto opts = std::make_shared<std::pair<std::string, bool>>();  // DIR, --json
  info->add_option("DIR", opts->first, "dataset root")->required();
  info->add_flag("--json", opts->second, "machine-readable output");
  info->callback([opts] {
    const std::string& dir = opts->first;
    const bool json = opts->second;
    const io::Dataset d = read_dataset_warned(dir);
    const io::DatasetSummary sum = io::summarize(d);
    if (json) {
      std::cout << dataset_json(d, sum).dump(1) << "\n";
      return;
    }
    std::vector<std::vector<std::string>> rows;  // the text from the summary, not from the JSON
    for (const auto& cs : sum.collections) {
      const io::Collection& c = *cs.collection;
      rows.push_back({c.model_setting, c.platform, c.system, c.model, std::to_string(cs.configurations),
                      std::to_string(cs.with_time),
                      std::to_string(cs.with_memory) + (cs.with_per_rank_memory ? " (per rank)" : " (max only)"),
                      c.settings_recorded           ? "recorded"
                      : c.settings_inferred.empty() ? "assumed"
                                                    : "assumed*"});
    }
    std::cout << "dataset " << d.root << ": " << d.collections.size() << " collections\n"
              << table({"model_setting", "platform", "system", "model", "configs", "time", "memory", "settings"}, rows);
    for (const auto& [ms, s] : sum.model_settings)
      std::cout << ms << ": " << s.both_platforms << " configurations measured on both platforms\n";
    for (const auto& cs : sum.collections)
      if (!cs.collection->settings_inferred.empty())
        std::cout << "* " << cs.collection->directory << ": " << cs.collection->settings_inferred << "\n";
  });
  register_dataset_import(*ds);
}

}  // namespace lmsim::app

namespace lmsim::app {

void register_export(CLI::App& app) {
  auto* ex = app.add_subcommand("export", "write an lmsim HDF5 result as CSV files (one per table) for pandas");
  struct ExportCli {
    std::string file, dir;
    bool csv = false, json = false;
  };
  auto opts = std::make_shared<ExportCli>();
  ex->add_option("FILE", opts->file, "HDF5 file written by search, calibrate, evaluate or shortlist")->required();
  ex->add_flag("--csv", opts->csv, "CSV files (the only format for now)")->required();
  ex->add_option("--out", opts->dir, "output folder (default: FILE without .h5, plus _csv)");
  ex->add_flag("--json", opts->json, "list the files written as JSON");
  ex->callback([opts] {
    const std::string &file = opts->file, &dir = opts->dir;
    const bool json = opts->json;
    std::string out = dir;
    if (out.empty()) {
      const std::filesystem::path p(file);
      out = (p.parent_path() / (p.stem().string() + "_csv")).string();
    }
    const auto files = io::export_csv(file, out);
    if (json) {
      std::cout << io::Json{{"files", files}}.dump(1) << "\n";
      return;
    }
    for (const auto& f : files) std::cout << "wrote " << f << "\n";
  });
}

}  // namespace lmsim::app

namespace lmsim::app {

void register_plot(CLI::App& app) {
  auto* pl = app.add_subcommand("plot", "PNG plots of every lmsim result in a folder (python3-h5py, matplotlib)");
  auto opts = std::make_shared<std::pair<std::string, std::string>>();  // RESULTS_DIR, --out
  pl->add_option("RESULTS_DIR", opts->first, "folder with calibrate --report, evaluate, search or shortlist *.h5")
      ->required();
  pl->add_option("--out", opts->second, "folder for the PNGs (default: RESULTS_DIR)");
  pl->callback([opts] {
    const std::string &dir = opts->first, &out = opts->second;
    if (!std::filesystem::is_directory(dir)) throw io::InputError(dir, 0, "RESULTS_DIR", "no such folder");
    // The plotting script: installed beside the data (share/lmsim/plots.py) or in the checkout (jobs/plots.py).
    const std::filesystem::path data = io::data_dir();
    std::string script;
    for (const auto& p : {data.parent_path() / "plots.py", data.parent_path() / "jobs" / "plots.py"})
      if (std::filesystem::exists(p)) script = p.string();
    if (script.empty()) throw io::InputError(data.string(), 0, "", "plots.py is not installed beside the data");
    auto quote = [](const std::string& s) {
      std::string q = "'";
      for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
      return q + "'";
    };
    std::cout.flush();
    const int rc = std::system(
        ("/usr/bin/python3 " + quote(script) + " " + quote(dir) + (out.empty() ? "" : " " + quote(out))).c_str());
    if (rc != 0)
      throw io::InputError(dir, 0, "",
                           "plotting failed (needs /usr/bin/python3 with python3-h5py and python3-matplotlib)");
  });
}

}  // namespace lmsim::app
