// `lmsim models`, `lmsim systems`, `lmsim dataset info DIR`.
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include "apps/common.hpp"

namespace lmsim::app {

void register_models(CLI::App& app) {
  auto* models = app.add_subcommand("models", "list model presets with their parameter counts");
  static bool models_json, systems_json;
  models_json = systems_json = false;
  models->add_flag("--json", models_json, "machine-readable output");
  models->callback([] {
    const auto& p = io::presets();
    if (models_json) {
      io::Json arr = io::Json::array();
      for (const auto& mp : p.models) {
        io::Json j = io::to_json(mp.model);
        const ParamCount c = count_params(mp.model);
        j["total_params"] = c.total;
        j["active_params"] = c.active_per_token;
        j["card_total_params"] = mp.card_total_params;
        arr.push_back(j);
      }
      std::cout << arr.dump(1) << "\n";
      return;
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& mp : p.models) {
      const Model& m = mp.model;
      const ParamCount c = count_params(m);
      rows.push_back(
          {m.name, fmt(c.total / 1e9, 3), fmt(c.active_per_token / 1e9, 3),
           mp.card_total_params > 0 ? fmt(mp.card_total_params / 1e9, 2) : "-", std::to_string(m.num_layers),
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
  systems->add_flag("--json", systems_json, "machine-readable output");
  systems->callback([] {
    const auto& p = io::presets();
    if (systems_json) {
      io::Json arr = io::Json::array();
      for (const auto& sp : p.systems) {
        io::Json j = io::to_json(sp.system);
        j["default_params"] = io::to_json(sp.default_params);
        arr.push_back(j);
      }
      std::cout << arr.dump(1) << "\n";
      return;
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& sp : p.systems) {
      const System& s = sp.system;
      rows.push_back({s.name, s.device, std::to_string(s.devices_per_node), fmt(s.peak_flops_fp16 / 1e12, 0),
                      fmt(s.peak_flops_bf16 / 1e12, 0), fmt(s.peak_flops_fp8 / 1e12, 0), gib(s.hbm_capacity_bytes),
                      fmt(s.hbm_bandwidth_bytes_per_s / 1e9, 0), fmt(s.intra_node.bandwidth_bytes_per_s / 1e9, 1),
                      fmt(s.inter_node.bandwidth_bytes_per_s / 1e9, 1)});
    }
    std::cout << table({"system", "device", "per_node", "fp16_TF", "bf16_TF", "fp8_TF", "hbm_GiB", "hbm_GB/s",
                        "intra_GB/s", "inter_GB/s"},
                       rows);
  });
}

namespace {
io::Json dataset_json(const io::Dataset& d) {
  io::Json j;
  j["root"] = d.root;
  io::Json cols = io::Json::array();
  std::map<std::string, std::map<std::string, std::set<std::string>>> timed;  // setting -> platform -> configs
  for (const auto& c : d.collections) {
    io::Json cj;
    cj["directory"] = c.directory;
    cj["model_setting"] = c.model_setting;
    cj["platform"] = c.platform;
    cj["system"] = c.system;
    cj["model"] = c.model;
    cj["devices"] = c.devices;
    cj["settings"] = io::to_json(c.settings);
    cj["settings_recorded"] = c.settings_recorded;
    std::size_t with_time = 0, with_mem = 0, per_rank = 0, trace = 0, ops = 0, rank_files = 0;
    io::Json configs = io::Json::array();
    for (const auto& r : c.runs) {
      configs.push_back(r.config);
      with_time += r.iteration_time_s ? 1 : 0;
      with_mem += r.peak_memory_max_bytes ? 1 : 0;
      per_rank += r.peak_memory_bytes.empty() ? 0 : 1;
      trace += r.step_trace.empty() ? 0 : 1;
      ops += r.op_categories.empty() ? 0 : 1;
      rank_files += r.ranks.empty() ? 0 : 1;
      if (r.iteration_time_s) timed[c.model_setting][c.platform].insert(r.config);
    }
    cj["configurations"] = c.runs.size();
    cj["with_iteration_time"] = with_time;
    cj["with_peak_memory"] = with_mem;
    cj["with_per_rank_memory"] = per_rank;
    cj["with_step_trace"] = trace;
    cj["with_operator_categories"] = ops;
    cj["with_rank_files"] = rank_files;
    cj["comm_summary_rows"] = c.comm_summary.size();
    cj["matrix_summary_rows"] = c.matrix_summary.size();
    cj["config_names"] = configs;
    cols.push_back(cj);
  }
  j["collections"] = cols;
  io::Json settings = io::Json::object();
  for (const auto& [ms, plats] : timed) {
    io::Json sj;
    for (const auto& [plat, cfgs] : plats) sj[plat] = cfgs.size();
    if (plats.size() == 2) {
      std::size_t both = 0;
      const auto& a = plats.begin()->second;
      const auto& b = std::next(plats.begin())->second;
      for (const auto& x : a) both += b.count(x);
      sj["both_platforms"] = both;
    } else {
      sj["both_platforms"] = 0;
    }
    settings[ms] = sj;
  }
  j["model_settings"] = settings;
  return j;
}
}  // namespace

void register_dataset(CLI::App& app) {
  auto* ds = app.add_subcommand("dataset", "inspect a dataset in the LM-SimBench layout");
  ds->require_subcommand(1);
  auto* info = ds->add_subcommand("info", "summarise the measured collections under DIR");
  static std::string dir;
  static bool json;
  dir.clear();
  json = false;
  info->add_option("DIR", dir, "dataset root")->required();
  info->add_flag("--json", json, "machine-readable output");
  info->callback([] {
    const io::Dataset d = io::read_dataset(dir);
    const io::Json j = dataset_json(d);
    if (json) {
      std::cout << j.dump(1) << "\n";
      return;
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& c : j["collections"])
      rows.push_back({c["model_setting"].get<std::string>(), c["platform"].get<std::string>(),
                      c["system"].get<std::string>(), c["model"].get<std::string>(),
                      std::to_string(c["configurations"].get<int>()),
                      std::to_string(c["with_iteration_time"].get<int>()),
                      std::to_string(c["with_peak_memory"].get<int>()) +
                          (c["with_per_rank_memory"].get<int>() ? " (per rank)" : " (max only)"),
                      c["settings_recorded"].get<bool>() ? "recorded" : "assumed"});
    std::cout << "dataset " << d.root << ": " << d.collections.size() << " collections\n"
              << table({"model_setting", "platform", "system", "model", "configs", "time", "memory", "settings"}, rows);
    for (const auto& [ms, sj] : j["model_settings"].items())
      std::cout << ms << ": " << sj["both_platforms"].get<int>() << " configurations measured on both platforms\n";
  });
}

}  // namespace lmsim::app

namespace lmsim::app {

void register_export(CLI::App& app) {
  auto* ex = app.add_subcommand("export", "write an lmsim HDF5 result as CSV files (one per table) for pandas");
  static std::string file, dir;
  static bool csv, json;
  file.clear();
  dir.clear();
  csv = json = false;
  ex->add_option("FILE", file, "HDF5 file written by search, calibrate, evaluate or shortlist")->required();
  ex->add_flag("--csv", csv, "CSV files (the only format for now)")->required();
  ex->add_option("--out", dir, "output folder (default: FILE without .h5, plus _csv)");
  ex->add_flag("--json", json, "list the files written as JSON");
  ex->callback([] {
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
  static std::string dir, out;
  dir.clear();
  out.clear();
  pl->add_option("RESULTS_DIR", dir, "folder with calibrate --report, evaluate, search or shortlist *.h5")->required();
  pl->add_option("--out", out, "folder for the PNGs (default: RESULTS_DIR)");
  pl->callback([] {
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
