// `lmsim evaluate` (predictions vs measurements, any simulator) and `lmsim shortlist` (NPU-guided GPU
// shortlists and the cross-platform report).
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>

#include "apps/common.hpp"
#include "calibration/evaluate.hpp"
#include "calibration/metrics.hpp"
#include "search/shortlist.hpp"

namespace lmsim::app {

namespace {

// A θ file as evaluate uses it: its values, covariance and fitted models.
eval::Theta read_theta(const std::string& file, const io::Json& j, const PlatformParams& base, std::string source) {
  eval::Theta t{io::load_params(file, base), std::move(source), load_uncertainty(j, file), {}, {}, {}, {}, {}};
  if (const auto fit = theta_fit(j, file, nullptr)) {
    t.fitted_models = fit->models;
    t.fitted_model_specs = fit->model_specs;
    t.fitted_configurations = fit->configurations;
    t.fitted_range = fit->range;
  }
  t.file = file;
  return t;
}

// θ per platform from --params files (keyed by the platform they were fitted for).
std::map<std::string, eval::Theta> load_thetas(const std::vector<std::string>& files) {
  std::map<std::string, eval::Theta> out;
  for (const auto& f : files) {
    const io::Json j = io::parse_json_file(f);
    std::string key;
    if (j.contains("provenance") && j["provenance"].contains("platform"))
      key = j["provenance"]["platform"].get<std::string>();
    if (key.empty()) throw io::InputError(f, 0, "provenance.platform", "θ file does not say which platform it is for");
    PlatformParams base;
    if (j["provenance"].contains("system"))
      if (const auto* sp = io::presets().find_system(j["provenance"]["system"].get<std::string>()))
        base = sp->default_params;
    out[key] = read_theta(f, j, base, "");
  }
  return out;
}

// System `system`'s shipped fitted θ file (with its covariance, so the evaluation carries intervals as predict
// does), unless `out` already has a θ for it or for `platform`.
void add_shipped_theta(std::map<std::string, eval::Theta>& out, const std::string& system,
                       const std::string& platform) {
  if (out.count(platform) || out.count(system)) return;
  const io::SystemPreset* sp = io::presets().find_system(system);
  if (!sp || sp->calibrated_path.empty()) return;
  const std::string& f = sp->calibrated_path;
  out[system] = read_theta(f, io::parse_json_file(f), sp->default_params, sp->params_source());
}

// The given θ, and for every other system of the dataset with a shipped fitted θ file, that file.
std::map<std::string, eval::Theta> thetas_for(const io::Dataset& d, const std::vector<std::string>& files) {
  std::map<std::string, eval::Theta> out = load_thetas(files);
  for (const auto& c : d.collections) add_shipped_theta(out, c.system, c.platform);
  return out;
}

io::Json num(double v) { return std::isfinite(v) ? io::Json(v) : io::Json(nullptr); }

io::Json components_json(const eval::ComponentReport& c) {
  io::Json j{{"matrix_n", c.matrix_n},
             {"matrix_mae_us", num(c.matrix_mae_us)},
             {"matrix_smape_pct", num(c.matrix_smape_pct)},
             {"matrix_r2", num(c.matrix_r2)},
             {"matrix_latency_spearman", num(c.matrix_spearman)},
             {"matrix_slowest3_overlap", c.matrix_slowest3_overlap},
             {"step_trace_configurations", c.trace_n},
             {"compute_smape_pct", num(c.compute_smape_pct)},
             {"compute_r2", num(c.compute_r2)},
             {"comm_exposed_smape_pct", num(c.comm_exposed_smape_pct)},
             {"comm_exposed_r2", num(c.comm_exposed_r2)},
             {"comm_share_jsd", c.comm_share_jsd >= 0 ? io::Json(c.comm_share_jsd) : io::Json(nullptr)},
             {"measured_comm_share_pct", c.measured_comm_share},
             {"predicted_comm_share_pct", c.predicted_comm_share}};
  return j;
}

// How many measurements the prediction intervals hold, and on what footing.
io::Json coverage_json(const eval::CollectionEvaluation& e) {
  const calib::Coverage& c = e.coverage;
  return io::Json{{"in_sample", e.theta_fitted_on_model},
                  {"residual_scale", e.intervals_from_priors  ? "priors"
                                     : e.held_out_model_scale ? "held_out_models"
                                                              : "fitted_runs"},
                  {"n_time", c.n_time},
                  {"time_in_80", c.time_in_80},
                  {"time_in_90", c.time_in_90},
                  {"n_memory", c.n_memory},
                  {"memory_in_80", c.memory_in_80},
                  {"memory_in_90", c.memory_in_90}};
}

void write_eval_group(io::H5Writer& w, const eval::CollectionEvaluation& e) {
  const std::string g = "/" + e.model_setting + "/" + e.platform + "/" + e.predictor;
  std::vector<std::string> cfg, strat;
  std::vector<double> mt, pt, te, mm, pm, me, wall;
  std::vector<std::int64_t> rc;
  for (const auto& p : e.predictions) {
    const auto& s = e.problem.samples[p.index];
    cfg.push_back(s.config);
    rc.push_back(s.recompute() ? 1 : 0);
    mt.push_back(s.time_s > 0 ? s.time_s : std::nan(""));
    pt.push_back(p.time_s);
    te.push_back(s.time_s > 0 ? 100 * (p.time_s / s.time_s - 1) : std::nan(""));
    mm.push_back(s.mem_max_bytes > 0 ? s.mem_max_bytes : std::nan(""));
    pm.push_back(p.mem_max_bytes);
    me.push_back(s.mem_max_bytes > 0 ? 100 * (p.mem_max_bytes / s.mem_max_bytes - 1) : std::nan(""));
  }
  w.group(g);
  w.write(g + "/configurations/optimization_config", cfg);
  w.write(g + "/configurations/recompute", rc);
  w.write(g + "/measured/iteration_time_s", mt);
  w.write(g + "/measured/max_peak_memory_bytes", mm);
  w.write(g + "/predicted/iteration_time_s", pt);
  w.write(g + "/predicted/max_peak_memory_bytes", pm);
  w.write(g + "/errors/time_pct", te);
  w.write(g + "/errors/memory_pct", me);
  if (!e.simulation_wall_s.empty()) w.write(g + "/predicted/simulation_wall_s", e.simulation_wall_s);
  // Central 80 % and 90 % intervals when θ has a covariance (memory ones when θ has a memory scale: measured, or
  // from the priors when it was fitted without memory data).
  const bool memory_iv = std::any_of(e.intervals.begin(), e.intervals.end(),
                                     [](const calib::PredictionIntervals& iv) { return iv.memory_log_sd > 0; });
  for (const auto& end : calib::kIntervalEnds) {
    if (e.intervals.empty()) break;  // no covariance, no intervals
    std::vector<double> t, m;
    for (const auto& iv : e.intervals) {
      t.push_back(end.of(iv.*end.time));
      m.push_back(end.of(iv.*end.memory));
    }
    w.write(g + "/predicted/iteration_time_s_" + end.percentile, t);
    if (memory_iv) w.write(g + "/predicted/max_peak_memory_bytes_" + end.percentile, m);
  }
  io::Json m = report_json(e.report);
  m["components"] = components_json(e.components);
  if (!e.intervals.empty()) m["interval_coverage"] = coverage_json(e);
  m["median_simulation_wall_s"] = num(e.median_simulation_wall_s);
  w.group(g + "/metrics");
  w.attr(g + "/metrics", "json", m.dump());
  w.attr(g + "/metrics", "time_mape_pct", e.report.time_mape_pct);
  w.attr(g + "/metrics", "time_smape_pct", e.report.time_smape_pct);
  w.attr(g + "/metrics", "time_r2", e.report.time_r2);
  w.attr(g + "/metrics", "memory_mape_pct", e.report.memory_mape_pct);
  w.attr(g + "/metrics", "time_spearman", e.report.min_model_time_spearman);
  w.attr(g + "/metrics", "memory_spearman", e.report.min_model_memory_spearman);
  w.attr(g, "system", e.system);
}

// Every run of an evaluation: its configuration, measured and predicted time and peak memory, their errors, and
// (with a θ covariance) the 80 % interval. The same records feed the JSON's "runs" and `--runs`' table.
struct RunRecord {
  std::string config;
  double measured_s, predicted_s, time_err_pct, lo80_s, hi80_s, measured_gib, predicted_gib, memory_err_pct;
};
std::vector<RunRecord> run_records(const eval::CollectionEvaluation& e) {
  std::vector<RunRecord> out;
  const double gib = 1073741824.0, nan = std::nan("");
  for (std::size_t k = 0; k < e.predictions.size(); ++k) {
    const auto& p = e.predictions[k];
    const auto& s = e.problem.samples[p.index];
    RunRecord r{s.config,
                s.time_s > 0 ? s.time_s : nan,
                p.time_s,
                nan,
                nan,
                nan,
                s.mem_max_bytes > 0 ? s.mem_max_bytes / gib : nan,
                p.mem_max_bytes / gib,
                nan};
    if (s.time_s > 0) r.time_err_pct = 100 * (p.time_s / s.time_s - 1);
    if (s.mem_max_bytes > 0) r.memory_err_pct = 100 * (p.mem_max_bytes / s.mem_max_bytes - 1);
    if (k < e.intervals.size()) {
      r.lo80_s = e.intervals[k].time_s_80.lower;
      r.hi80_s = e.intervals[k].time_s_80.upper;
    }
    out.push_back(r);
  }
  return out;
}
io::Json runs_json(const std::vector<RunRecord>& runs) {
  io::Json a = io::Json::array();
  for (const auto& r : runs)
    a.push_back({{"optimization_config", r.config},
                 {"measured_iteration_time_s", num(r.measured_s)},
                 {"predicted_iteration_time_s", num(r.predicted_s)},
                 {"time_error_pct", num(r.time_err_pct)},
                 {"predicted_iteration_time_s_p10", num(r.lo80_s)},
                 {"predicted_iteration_time_s_p90", num(r.hi80_s)},
                 {"measured_max_peak_memory_gib", num(r.measured_gib)},
                 {"predicted_max_peak_memory_gib", num(r.predicted_gib)},
                 {"memory_error_pct", num(r.memory_err_pct)}});
  return a;
}

struct EvalCli {
  std::string dataset, published, out;
  std::vector<std::string> params, models, predictions, names;
  bool json = false, compare = false, runs = false;
};

// One evaluation: options in, the report on `os`.
void run_evaluate(const EvalCli& ec, std::ostream& os) {
  const bool published = !ec.published.empty();
  if (published && (!ec.predictions.empty() || !ec.models.empty()))
    throw io::InputError("command line", 0, "--published",
                         "scores lmsim on every published run: --predictions and --models apply to datasets");
  const io::Dataset d = published ? io::Dataset{} : read_dataset_warned(ec.dataset);
  std::vector<std::vector<eval::CollectionEvaluation>> sets;
  std::map<std::string, eval::Theta> thetas;
  if (published) {
    const io::PublishedSet ps = io::read_published(ec.published);
    thetas = load_thetas(ec.params);
    for (const auto& r : ps.runs) add_shipped_theta(thetas, r.system, r.system);
    sets.push_back(eval::evaluate_published(ps, thetas));
  } else {
    thetas = thetas_for(d, ec.params);
  }
  if (!published && (ec.predictions.empty() || ec.compare)) sets.push_back(eval::evaluate_lmsim(d, thetas, ec.models));
  // lmsim's predictions of runs beyond the range θ was fitted on (sequence length, devices, degrees): extrapolations.
  auto outside = [&](const eval::CollectionEvaluation& e) {
    const auto it = thetas.count(e.platform) ? thetas.find(e.platform) : thetas.find(e.system);
    if (it == thetas.end()) return std::vector<std::string>{};
    std::vector<std::vector<std::pair<std::string, double>>> runs;
    for (const auto& p : e.predictions) {
      const calib::Sample& s = e.problem.samples[p.index];
      runs.push_back(range_values(s.model, s.strategy, s.settings));
    }
    return outside_fitted_range(it->second.fitted_range, runs);
  };
  for (std::size_t i = 0; i < ec.predictions.size(); ++i) {
    const std::string name =
        i < ec.names.size() ? ec.names[i] : std::filesystem::path(ec.predictions[i]).stem().string();
    sets.push_back(eval::evaluate_file(d, ec.predictions[i], name, ec.models));
  }
  io::Json j = io::Json::array();
  std::vector<std::vector<std::string>> rows, per_run;  // per_run: --runs' table
  auto cell = [](double v, int prec) { return std::isfinite(v) ? fmt(v, prec) : std::string("-"); };
  for (const auto& set : sets)
    for (const auto& e : set) {
      io::Json x = report_json(e.report);
      x["model_setting"] = e.model_setting;
      x["platform"] = e.platform;
      x["predictor"] = e.predictor;
      x["components"] = components_json(e.components);
      x["median_simulation_wall_s"] = num(e.median_simulation_wall_s);
      const std::vector<RunRecord> runs = run_records(e);
      x["runs"] = runs_json(runs);
      if (ec.runs)
        for (const auto& r : runs)
          per_run.push_back(
              {e.predictor, e.model_setting, e.platform, r.config, cell(r.measured_s, 3), cell(r.predicted_s, 3),
               std::isfinite(r.lo80_s) ? cell(r.lo80_s, 3) + " - " + cell(r.hi80_s, 3) : "-", cell(r.time_err_pct, 1),
               cell(r.measured_gib, 2), cell(r.predicted_gib, 2), cell(r.memory_err_pct, 1)});
      if (!e.theta_source.empty()) x["theta_source"] = e.theta_source;
      if (!e.intervals.empty()) x["interval_coverage"] = coverage_json(e);
      if (const io::Collection* c = d.find(e.model_setting, e.platform)) {
        x["settings"] = c->settings_recorded ? "recorded" : "assumed";
        x["settings_inferred"] = c->settings_inferred;
        // Settings read off this collection's own peaks make its memory figures in-sample for those settings.
        x["settings_read_from_measured_peaks"] = c->settings_from_peaks;
      }
      if (e.predictor == "lmsim") {
        const auto o = outside(e);
        x["outside_fitted_range"] = o;
        if (!o.empty())
          spdlog::warn("{} on {}: runs beyond the range θ was fitted on: {}; their predictions extrapolate",
                       e.model_setting, e.platform, join(o));
      }
      j.push_back(x);
      const auto& m = e.report.models.empty() ? calib::StratumReport{} : e.report.models[0];
      rows.push_back(
          {e.predictor, e.model_setting, e.platform, std::to_string(e.report.n_time), fmt(e.report.time_mape_pct, 2),
           fmt(e.report.time_smape_pct, 2), fmt(e.report.time_r2, 3), fmt(m.time_spearman, 3), fmt(m.time_kendall, 3),
           fmt(m.top1_regret_pct, 1), fmt(m.top3_regret_pct, 1), fmt(e.report.memory_mape_pct, 2),
           fmt(m.memory_spearman, 3), e.components.matrix_n ? fmt(e.components.matrix_smape_pct, 1) : "-",
           e.components.comm_share_jsd >= 0 ? fmt(e.components.comm_share_jsd, 3) : "-",
           e.median_simulation_wall_s >= 0 ? fmt(e.median_simulation_wall_s * 1e6, 3) : "-",
           e.intervals.empty() ? "-"
                               : std::to_string(e.coverage.time_in_80) + "/" + std::to_string(e.coverage.time_in_90) +
                                     " of " + std::to_string(e.coverage.n_time) +
                                     (e.theta_fitted_on_model   ? " (in-sample)"
                                      : e.intervals_from_priors ? " (priors)"
                                                                : "")});
    }
  if (!ec.out.empty()) {
    io::H5Writer w(ec.out);
    for (const auto& set : sets)
      for (const auto& e : set) write_eval_group(w, e);
    write_provenance(w, "/", ec.params);
    w.attr("/", "dataset", published ? ec.published : d.root);
    w.attr("/", "summary_json", j.dump());
    w.commit();
  }
  if (ec.json) {
    os << j.dump(1) << "\n";
    return;
  }
  os << table(
      {"predictor", "model_setting", "platform", "n", "time MAPE%", "sMAPE%", "R2", "rho", "tau_b", "top1 regret%",
       "top3 regret%", "mem MAPE%", "mem rho", "matrix sMAPE%", "comm JSD", "us/config", "time in 80/90 %"},
      rows);
  if (ec.runs)  // every run's error beside the table of figures
    os << "\n"
       << table({"predictor", "model_setting", "platform", "configuration", "time s", "predicted s", "80 % interval s",
                 "error %", "mem GiB", "predicted GiB", "mem error %"},
                per_run);
  std::set<std::string> sources;  // say which θ predicted, plainly
  for (const auto& set : sets)
    for (const auto& e : set)
      if (!e.theta_source.empty()) sources.insert(e.platform + ": " + e.theta_source);
  for (const auto& s : sources) os << "θ " << s << "\n";
  for (const auto& c : d.collections)
    if (!c.settings_inferred.empty())
      os << "settings of " << c.model_setting << " on " << c.platform << " read from its own runs"
         << (c.settings_from_peaks ? " (its memory figures are in-sample for them)" : "") << ": " << c.settings_inferred
         << "\n";
  if (!ec.out.empty()) os << "wrote " << ec.out << "\n";
}

// ------------------------------------------------------------------ shortlist
struct ShortCli {
  std::string dataset, from = "npu", to = "gpu", source = "measured";
  std::vector<std::string> params, models;
  // The target's training settings for source-only model settings (default: the gpu / npu platform's stack, or
  // lmsim's defaults on a system preset).
  std::string stack, settings_file;
  std::vector<std::string> set;
  std::size_t k = 3;
  bool json = false;
  std::string out;
  // --to given as a system JSON file (`lmsim predict --system FILE.json`'s format): the file, and `to` becomes the
  // system's name, which labels the target in the report.
  std::string to_system_file;
};

io::Json cross_json(const search::CrossPlatformReport& r) {
  io::Json strata = io::Json::array();
  for (const auto& s : r.strata)
    strata.push_back({{"stratum", s.stratum},
                      {"n", s.n},
                      {"time_spearman", num(s.time_spearman)},
                      {"time_kendall_tau_b", num(s.time_kendall)},
                      {"memory_spearman", num(s.memory_spearman)},
                      {"memory_kendall_tau_b", num(s.memory_kendall)}});
  return io::Json{{"strata", strata},
                  {"lowest_memory_top3_overlap", r.lowest_memory_top3_overlap},
                  {"rc_pairs", r.rc_pairs},
                  {"rc_direction_agreements", r.rc_direction_agreements},
                  {"median_time_ratio_target_over_source", num(r.median_time_ratio)},
                  {"median_memory_ratio_target_over_source", num(r.median_memory_ratio)},
                  {"source_recompute_time_overhead_pct", num(r.source_recompute_time_overhead_pct)},
                  {"target_recompute_time_overhead_pct", num(r.target_recompute_time_overhead_pct)},
                  {"source_recompute_memory_saving_pct", num(r.source_recompute_memory_saving_pct)},
                  {"target_recompute_memory_saving_pct", num(r.target_recompute_memory_saving_pct)},
                  {"loo_transfer_time_smape_pct", num(r.transfer_time_smape_pct)},
                  {"loo_transfer_time_r2", num(r.transfer_time_r2)},
                  {"loo_transfer_memory_smape_pct", num(r.transfer_memory_smape_pct)},
                  {"loo_transfer_memory_r2", num(r.transfer_memory_r2)},
                  {"source_top1_regret_pct", num(r.source_top1_regret_pct)},
                  {"source_top3_regret_pct", num(r.source_top3_regret_pct)}};
}

// Predicted times of one platform's configurations of `setting`, θ fitted on the platform's *other* model
// settings (leave-one-model-out), so the predictions are out of sample; or from a given θ file.
std::map<std::string, double> predicted_times(const io::Dataset& d, const std::string& platform,
                                              const std::string& setting,
                                              const std::map<std::string, eval::Theta>& given, std::string& how) {
  std::map<std::string, double> out;
  calib::Problem all = calib::make_problem(d, platform);
  std::vector<std::size_t> train, test;
  for (std::size_t i = 0; i < all.samples.size(); ++i)
    (all.samples[i].model_setting == setting ? test : train).push_back(i);
  PlatformParams p = all.start;
  if (auto it = given.find(platform); it != given.end()) {
    p = it->second.params;
    how = "θ from --params (in-sample if it was fitted on these configurations)";
  } else if (!train.empty()) {
    p = calib::fit(all, train, calib::FitOptions{}).params;
    how = "θ fitted on the other model settings (leave-one-model-out, out of sample)";
  } else {
    how = "system preset defaults (no other model setting to fit on)";
  }
  for (const auto& sp : calib::predict(all, test, p)) out[all.samples[sp.index].config] = sp.time_s;
  return out;
}

// A source-only model setting's shortlist: its measured runs simulated on the target platform's system (a gpu or
// npu target is the bundled collections' system and stack; another target names a system preset, run with lmsim's
// default settings; --stack, --settings and --set replace or amend those), with the θ given for the target, else the
// system's shipped θ. The source's sequence length and batch sizes are kept.
struct ProposalResult {
  std::string model_setting, system, how;
  std::string settings;  // which training settings the target was simulated with
  std::vector<search::ProposalConfig> configs;
  std::size_t rejected = 0;  // measured configurations the target cannot run (a TP group wider than its node, ...)
  std::map<std::string, std::size_t> why;  // those, by reason
  struct Example {
    std::string config, explanation;  // the reason's first configuration, and the figures of it that break the rule
  };
  std::map<std::string, Example> example;  // per reason
  search::Proposal proposal;
};
ProposalResult propose_from(const io::Collection& src, const ShortCli& sc,
                            const std::map<std::string, eval::Theta>& given) {
  ProposalResult out;
  out.model_setting = src.model_setting;
  const bool stack = sc.to == "gpu" || sc.to == "npu";
  out.system = sc.to == "gpu" ? "v100_sxm2_32g" : sc.to == "npu" ? "ascend_910b3_64g" : sc.to;
  System sys;
  PlatformParams params;
  std::string theta_file;
  if (!sc.to_system_file.empty()) {  // a system file: its own parameters, or the defaults it is based on
    sys = io::resolve_system(sc.to_system_file, &params, &out.how);
  } else if (const io::SystemPreset* sp = io::presets().find_system(out.system)) {
    sys = sp->system;
    params = sp->params();
    out.how = sp->params_source();
    theta_file = sp->calibrated_path;
  } else {
    throw io::InputError("--to", 0, "", "'" + sc.to + "' is neither gpu, npu, a system preset nor a system JSON file");
  }
  auto it = given.find(sc.to);
  // A system file has no θ of its own name: a --params θ for another platform than the source's is the target's.
  if (it == given.end() && !sc.to_system_file.empty())
    for (auto g = given.begin(); g != given.end(); ++g)
      if (g->first != sc.from) {
        if (it != given.end())
          throw io::InputError("--params", 0, "",
                               "θ files for " + it->first + " and " + g->first + ": give one for " + sc.to_system_file);
        it = g;
      }
  if (it != given.end()) {
    params = it->second.params;
    out.how = "θ from --params" + (it->first == sc.to ? std::string() : " (fitted for " + it->first + ")");
    theta_file = it->second.file;
  }
  const std::string stack_name = !sc.stack.empty() ? sc.stack : stack ? sc.to : std::string();
  TrainingSettings t = with_settings_options(stack_settings_on(stack_name, sys), sc.settings_file, sc.set, sys);
  out.settings = stack_name.empty() ? "lmsim's defaults" : "the " + stack_name + " stack";
  if (!sc.settings_file.empty()) out.settings += ", " + sc.settings_file;
  for (const auto& kv : sc.set) out.settings += ", " + kv;
  t.seq_length = src.settings.seq_length;
  t.global_batch_size = src.settings.global_batch_size;
  t.micro_batch_size = src.settings.micro_batch_size;
  out.settings += fmt::format(" (sequence {}, global batch {}, micro-batch {} as measured on {})", t.seq_length,
                              t.global_batch_size, t.micro_batch_size, sc.from);
  const std::string given_by = !sc.set.empty() ? std::string("--set")
                               : !sc.settings_file.empty()
                                   ? sc.settings_file
                                   : "the " + (stack_name.empty() ? sc.to : stack_name) + " settings";
  if (auto why = validate(t); !why.empty()) throw io::InputError(given_by, 0, "", why);
  if (const auto problem = precision_problem(sys, t))
    throw io::InputError(given_by, 0, problem->field, out.system + " " + problem->why);
  if (!theta_file.empty()) {
    const io::Json theta = io::parse_json_file(theta_file);
    say_fitted_stacks(theta, it != given.end() ? "θ " + theta_file : "the shipped θ for " + out.system, stack_name,
                      !sc.settings_file.empty() || !sc.set.empty(), t);
    warn_if_other_stack(theta, theta_file, t);
  }
  const Model& model = io::presets().find_model(src.model)->model;
  SimOptions so;
  so.validity = {sys.devices_per_node, false, true, true};
  for (const auto& r : src.runs) {
    if (!r.iteration_time_s) continue;
    const Prediction p = simulate(model, r.strategy, sys, t, params, so);
    if (!p.ok()) {
      ++out.rejected;
      if (out.why[describe(p.rejection)]++ == 0)
        out.example[describe(p.rejection)] = {r.config, explain(p.rejection, model, r.strategy, t, so.validity)};
      continue;
    }
    out.configs.push_back({r.config, *r.iteration_time_s, p.iteration_time_s, p.max_peak_memory_bytes, p.feasible});
  }
  out.proposal = search::propose(out.configs, sc.k, sc.from, sc.to);
  return out;
}

// One shortlist: options in, the report on `os`.
void run_shortlist(ShortCli sc, std::ostream& os) {
  // A target given as a system file is named by its system in the report (and in --params' θ files).
  if (sc.to.size() > 5 && sc.to.substr(sc.to.size() - 5) == ".json" && !io::presets().find_system(sc.to)) {
    if (!std::filesystem::exists(sc.to)) throw io::InputError(sc.to, 0, "--to", "system file does not exist");
    sc.to_system_file = sc.to;
    sc.to = io::resolve_system(sc.to).name;
  }
  const io::Dataset d = read_dataset_warned(sc.dataset);
  const auto given = load_thetas(sc.params);
  // Model settings measured on both platforms are scored (paired); those measured on the source only get the
  // same rules unscored, the target simulated (`proposals`).
  std::set<std::string> settings, source_only;
  for (const auto& c : d.collections)
    if (c.platform == sc.from &&
        (sc.models.empty() || std::find(sc.models.begin(), sc.models.end(), c.model_setting) != sc.models.end()))
      (d.find(c.model_setting, sc.to) ? settings : source_only).insert(c.model_setting);
  if (settings.empty() && source_only.empty())
    throw io::InputError(sc.dataset, 0, "platform", "no model setting is measured on " + sc.from);
  if (source_only.empty() && (!sc.stack.empty() || !sc.settings_file.empty() || !sc.set.empty()))
    spdlog::warn(
        "--stack, --settings and --set set the {} settings of model settings measured on {} only; every one here is "
        "measured on both, scored against the {} runs as they ran: the options change nothing",
        sc.to, sc.from, sc.to);
  io::Json j = io::Json::object();
  struct Result {
    std::string model_setting;
    search::ShortlistReport shortlist;
    search::CrossPlatformReport cross;
    std::string target_predictions;
  };
  std::vector<Result> reports;
  std::unique_ptr<io::H5Writer> w;
  if (!sc.out.empty()) w = std::make_unique<io::H5Writer>(sc.out);
  for (const auto& ms : settings) {
    const io::Collection& src = *d.find(ms, sc.from);
    const io::Collection& tgt = *d.find(ms, sc.to);
    std::string how_src, how_tgt;
    const auto tpred = predicted_times(d, sc.to, ms, given, how_tgt);
    std::map<std::string, double> spred;
    if (sc.source == "predicted") spred = predicted_times(d, sc.from, ms, given, how_src);
    std::vector<search::PairedConfig> pairs;
    for (const auto& r : src.runs) {
      const io::Run* t = tgt.find(r.config);
      if (!t || !r.iteration_time_s || !t->iteration_time_s || !r.peak_memory_max_bytes || !t->peak_memory_max_bytes)
        continue;
      search::PairedConfig pc{r.config,
                              r.strategy.recompute != Recompute::none,
                              *r.iteration_time_s,
                              *t->iteration_time_s,
                              *r.peak_memory_max_bytes,
                              *t->peak_memory_max_bytes};
      if (auto it = tpred.find(r.config); it != tpred.end()) pc.target_predicted_time_s = it->second;
      if (auto it = spred.find(r.config); it != spred.end()) pc.source_predicted_time_s = it->second;
      pairs.push_back(pc);
    }
    if (pairs.size() < 2) continue;
    std::sort(pairs.begin(), pairs.end(), [](const auto& a, const auto& b) { return a.config < b.config; });
    const search::ShortlistReport s = search::shortlist(pairs, sc.k, sc.from, sc.to);
    const search::CrossPlatformReport x = search::cross_platform(pairs);
    reports.push_back({ms, s, x, how_tgt});
    io::Json rules = io::Json::array();
    for (const auto& r : s.rules)
      rules.push_back({{"rule", r.name},
                       {"shortlist", r.shortlist},
                       {"contains_target_optimum", r.contains_target_optimum},
                       {"top1_regret_pct", num(r.top1_regret_pct)},
                       {"topk_regret_pct", num(r.topk_regret_pct)}});
    j[ms] = {{"source", sc.from},
             {"target", sc.to},
             {"candidates", s.candidates},
             {"k", s.k},
             {"target_optimum", s.target_optimum},
             {"rules", rules},
             {"target_predictions", how_tgt},
             {"cross_platform", cross_json(x)}};
    if (w) {
      const std::string g = "/" + ms + "/shortlist";
      w->group(g);
      std::vector<std::string> names;
      std::vector<double> st, tt, sm, tm, tp;
      for (const auto& p : pairs) {
        names.push_back(p.config);
        st.push_back(p.source_time_s);
        tt.push_back(p.target_time_s);
        sm.push_back(p.source_memory_bytes);
        tm.push_back(p.target_memory_bytes);
        tp.push_back(p.target_predicted_time_s);
      }
      w->write(g + "/optimization_config", names);
      w->write(g + "/" + sc.from + "_time_s", st);
      w->write(g + "/" + sc.to + "_time_s", tt);
      w->write(g + "/" + sc.from + "_max_peak_memory_bytes", sm);
      w->write(g + "/" + sc.to + "_max_peak_memory_bytes", tm);
      w->write(g + "/" + sc.to + "_predicted_time_s", tp);
      w->attr(g, "report_json", j[ms].dump());
    }
  }
  std::vector<ProposalResult> proposals;
  for (const auto& ms : source_only) {
    ProposalResult pr = propose_from(*d.find(ms, sc.from), sc, given);
    io::Json rules = io::Json::array();
    for (const auto& r : pr.proposal.rules) rules.push_back({{"rule", r.name}, {"shortlist", r.shortlist}});
    io::Json examples = io::Json::object();
    for (const auto& [reason, e] : pr.example)
      examples[reason] = {{"optimization_config", e.config}, {"explanation", e.explanation}};
    io::Json configs = io::Json::array();
    for (const auto& c : pr.configs)
      configs.push_back({{"optimization_config", c.config},
                         {sc.from + "_time_s", c.source_time_s},
                         {sc.to + "_predicted_time_s", c.target_predicted_time_s},
                         {sc.to + "_predicted_max_peak_memory_bytes", c.target_predicted_memory_bytes},
                         {sc.to + "_predicted_fits", c.target_fits}});
    j[ms] = {{"source", sc.from},
             {"target", sc.to},
             {"paired", false},
             {"target_system", pr.system},
             {"candidates", pr.proposal.candidates},
             {"predicted_to_fit", pr.proposal.fitting},
             {"not_runnable_on_target", pr.why},
             {"not_runnable_examples", examples},
             {"k", pr.proposal.k},
             {"rules", rules},
             {"target_predictions", pr.how},
             {"target_settings", pr.settings},
             {"configurations", configs}};
    if (w) {
      const std::string g = "/" + ms + "/proposal";
      w->group(g);
      std::vector<std::string> names;
      std::vector<double> st, tp, tm;
      std::vector<std::int64_t> fits;
      for (const auto& c : pr.configs) {
        names.push_back(c.config);
        st.push_back(c.source_time_s);
        tp.push_back(c.target_predicted_time_s);
        tm.push_back(c.target_predicted_memory_bytes);
        fits.push_back(c.target_fits ? 1 : 0);
      }
      w->write(g + "/optimization_config", names);
      w->write(g + "/" + sc.from + "_time_s", st);
      w->write(g + "/" + sc.to + "_predicted_time_s", tp);
      w->write(g + "/" + sc.to + "_predicted_max_peak_memory_bytes", tm);
      w->write(g + "/" + sc.to + "_predicted_fits", fits);
      w->attr(g, "report_json", j[ms].dump());
    }
    proposals.push_back(std::move(pr));
  }
  if (w) {
    write_provenance(*w, "/", sc.params);
    w->commit();
  }
  if (sc.json) {
    os << j.dump(1) << "\n";
    return;
  }
  auto cell = [](double v, int prec) { return std::isnan(v) ? std::string("-") : fmt(v, prec); };
  for (const auto& [ms, r, x, how] : reports) {  // the text from the result structs
    os << ms << ": " << r.candidates << " paired configurations; " << sc.to << " optimum (measured) "
       << r.target_optimum << "\n";
    std::vector<std::vector<std::string>> rows;
    for (const auto& rule : r.rules) {
      rows.push_back({rule.name, join(rule.shortlist), rule.contains_target_optimum ? "yes" : "no",
                      cell(rule.top1_regret_pct, 1), cell(rule.topk_regret_pct, 1)});
    }
    os << table({"rule", "shortlist", "optimum inside", "top-1 regret %", "top-k regret %"}, rows) << "  (" << sc.to
       << " predictions: " << how << ")\n";
    std::vector<std::vector<std::string>> xs;
    for (const auto& st : x.strata)
      xs.push_back({st.stratum, std::to_string(st.n), cell(st.time_spearman, 3), cell(st.time_kendall, 3),
                    cell(st.memory_spearman, 3), cell(st.memory_kendall, 3)});
    os << "  cross-platform (" << sc.from << " vs " << sc.to << "):\n"
       << table({"stratum", "n", "time rho", "time tau_b", "memory rho", "memory tau_b"}, xs)
       << "  lowest-memory top-3 overlap " << x.lowest_memory_top3_overlap << "/3; RC direction agreement "
       << x.rc_direction_agreements << "/" << x.rc_pairs << "; median " << sc.to << "/" << sc.from << " time ratio "
       << fmt(x.median_time_ratio, 3) << ", memory ratio " << fmt(x.median_memory_ratio, 3)
       << "; LOO median-ratio transfer: time sMAPE " << fmt(x.transfer_time_smape_pct, 2) << " %, R2 "
       << fmt(x.transfer_time_r2, 3) << "\n\n";
  }
  for (const auto& pr : proposals) {
    const search::Proposal& p = pr.proposal;
    std::string cannot;
    for (const auto& [reason, n] : pr.why)
      cannot += (cannot.empty() ? "" : "; ") + std::to_string(n) + ", e.g. " + pr.example.at(reason).config + ": " +
                pr.example.at(reason).explanation;
    os << pr.model_setting << ": measured on " << sc.from << " only; " << p.candidates + pr.rejected
       << " measured configurations, " << p.fitting << " predicted to fit " << pr.system
       << (pr.rejected ? "; " + std::to_string(pr.rejected) + " cannot run there (" + cannot + ")" : std::string())
       << "\n";
    if (p.rules.empty()) {
      os << "  none is predicted to fit " << pr.system << "\n\n";
      continue;
    }
    std::vector<std::vector<std::string>> rows;
    std::set<std::string> named;
    for (const auto& rule : p.rules) {
      rows.push_back({rule.name, join(rule.shortlist)});
      named.insert(rule.shortlist.begin(), rule.shortlist.end());
    }
    os << table({"rule", "shortlist (unscored: no " + sc.to + " measurement)"}, rows) << "  (" << sc.to
       << " predictions: " << pr.how << "; settings: " << pr.settings << ")\n";
    std::vector<std::vector<std::string>> cs;
    for (const auto& c : pr.configs)
      if (named.count(c.config))
        cs.push_back({c.config, fmt(c.source_time_s, 3), fmt(c.target_predicted_time_s, 3),
                      fmt(c.target_predicted_memory_bytes / 1073741824.0, 2)});
    os << table({"configuration", sc.from + " measured s", sc.to + " predicted s", sc.to + " predicted GiB"}, cs)
       << "\n";
  }
  if (!sc.out.empty()) os << "wrote " << sc.out << "\n";
}

}  // namespace

void register_evaluate(CLI::App& app) {
  auto* cmd = app.add_subcommand("evaluate", "score predictions (lmsim's or another tool's) against measured runs");
  auto eval_opts = std::make_shared<EvalCli>();  // owned by the commands: no file-scope state
  auto short_opts = std::make_shared<ShortCli>();
  EvalCli& ec = *eval_opts;
  ShortCli& sc = *short_opts;
  ec.dataset = io::data_dir() + "/lmsimbench";
  auto* ds = cmd->add_option("--dataset", ec.dataset, "dataset root (default: bundled data)");
  cmd->add_option("--published", ec.published,
                  "published measurements in data/public's layout (readings.csv and its files) instead of a dataset: "
                  "every run predicted with θ for its system; runs θ was fitted on are scored apart (lmsim_in_sample)")
      ->excludes(ds);
  cmd->add_option("--params", ec.params, "θ files from lmsim calibrate (one per platform)")->delimiter(',');
  cmd->add_option("--models", ec.models, "model settings or model names")->delimiter(',');
  cmd->add_option("--predictions", ec.predictions, "another simulator's predictions CSV (repeatable)");
  cmd->add_option("--name", ec.names, "names of the prediction sets, in order");
  cmd->add_flag("--compare", ec.compare, "score lmsim too and show all prediction sets side by side");
  cmd->add_option("--out", ec.out, "HDF5 report");
  cmd->add_flag("--json", ec.json, "machine-readable output (each evaluation's runs under \"runs\")");
  cmd->add_flag("--runs", ec.runs, "also print every run: measured and predicted time and memory, errors, intervals");
  cmd->callback([eval_opts] { run_evaluate(*eval_opts, std::cout); });

  auto* sl = app.add_subcommand("shortlist", "shortlist target-platform configurations from source-platform runs");
  sc.dataset = io::data_dir() + "/lmsimbench";
  sl->add_option("--dataset", sc.dataset, "dataset root (default: bundled data)");
  sl->add_option("--from", sc.from, "source platform (gpu, npu or a system preset named as a collection platform)");
  sl->add_option("--to", sc.to,
                 "target platform (likewise), or a system JSON file as predict's --system takes (a model setting "
                 "measured on the source only is simulated on it)");
  sl->add_option("--k", sc.k, "shortlist size")->check(CLI::Range(1, 1000));
  sl->add_option("--source", sc.source, "rank the source by measured or predicted time")
      ->check(CLI::IsMember({"measured", "predicted"}));
  sl->add_option("--params", sc.params, "θ files (default: fit leave-one-model-out)")->delimiter(',');
  sl->add_option("--models", sc.models, "model settings")->delimiter(',');
  sl->add_option("--out", sc.out, "HDF5 file");
  sl->add_flag("--json", sc.json, "machine-readable output");
  add_stack_option(*sl, sc.stack);
  sl->add_option("--settings", sc.settings_file, "training settings JSON over the stack");
  add_set_option(*sl, sc.set);
  sl->footer(
      "--stack, --settings and --set give the target's training settings for model settings measured on the source "
      "only (default: the gpu / npu platform's stack, lmsim's defaults on a system preset); the source's sequence "
      "length and batch sizes are kept. Model settings measured on both are scored as their target runs ran.");
  sl->callback([short_opts] { run_shortlist(*short_opts, std::cout); });
}

}  // namespace lmsim::app
