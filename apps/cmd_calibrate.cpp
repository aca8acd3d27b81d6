// `lmsim calibrate`: fit θ for one platform from measured runs, report in-sample / held-out / CV accuracy,
// write params.json with provenance and optionally an HDF5 report.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <set>

#include "apps/common.hpp"
#include "calibration/calibrate.hpp"
#include "calibration/metrics.hpp"
#include "io/hash.hpp"

namespace lmsim::app {

io::Json report_json(const calib::Report& r) {
  auto num = [](double v) { return std::isfinite(v) ? io::Json(v) : io::Json(nullptr); };
  io::Json j{{"n_time", r.n_time},
             {"n_memory", r.n_memory},
             {"time_mae_s", num(r.time_mae_s)},
             {"time_smape_pct", num(r.time_smape_pct)},
             {"time_r2", num(r.time_r2)},
             {"time_mape_pct", num(r.time_mape_pct)},
             {"time_max_ape_pct", num(r.time_max_ape_pct)},
             {"time_spearman", num(r.min_model_time_spearman)},
             {"memory_mape_pct", num(r.memory_mape_pct)},
             {"memory_smape_pct", num(r.memory_smape_pct)},
             {"memory_rank_mape_pct", num(r.memory_rank_mape_pct)},
             {"memory_spearman", num(r.min_model_memory_spearman)},
             {"memory_spearman_pooled", num(r.memory_spearman)},
             {"feasible_agreement", num(r.feasible_agreement)},
             {"top1_strata_hits", r.top1_strata_hits},
             {"strata", r.strata.size()}};
  io::Json models = io::Json::array(), strata = io::Json::array();
  auto st = [&](const calib::StratumReport& s) {
    return io::Json{{"name", s.name},
                    {"n", s.n},
                    {"time_spearman", num(s.time_spearman)},
                    {"time_kendall_tau_b", num(s.time_kendall)},
                    {"top1_hit", s.top1_hit > 0},
                    {"top1_regret_pct", num(s.top1_regret_pct)},
                    {"memory_spearman", num(s.memory_spearman)},
                    {"measured_best", s.measured_best},
                    {"predicted_best", s.predicted_best}};
  };
  for (const auto& m : r.models) models.push_back(st(m));
  for (const auto& s : r.strata) strata.push_back(st(s));
  j["per_model"] = models;
  j["per_stratum"] = strata;
  return j;
}

std::string report_line(const std::string& label, const calib::Report& r) {
  return table({"set", "n", "time MAPE %", "sMAPE %", "R2", "MAE s", "min model rho", "memory MAPE %", "min mem rho",
                "top-1 strata"},
               {{label, std::to_string(r.n_time), fmt(r.time_mape_pct, 2), fmt(r.time_smape_pct, 2), fmt(r.time_r2, 3),
                 fmt(r.time_mae_s, 3), fmt(r.min_model_time_spearman, 3), fmt(r.memory_mape_pct, 2),
                 fmt(r.min_model_memory_spearman, 3),
                 std::to_string(r.top1_strata_hits) + "/" + std::to_string(r.strata.size())}});
}

namespace {

// The training settings the fit saw: one object when every fitted run shares them, else "varies per run".
io::Json settings_summary(const calib::Problem& pb, const calib::FitResult& fr) {
  io::Json first;
  for (auto i : fr.train) {
    io::Json s = io::to_json(pb.samples[i].settings);
    for (const char* k : {"seq_length", "global_batch_size", "micro_batch_size"}) s.erase(k);
    if (first.is_null())
      first = s;
    else if (first != s)
      return "varies per run (see the data's readings)";
  }
  return first;
}

// The software stacks the fitted runs ran (presets/stacks.json), where known: what `predict` names as the stacks
// that reproduce the runs θ describes.
io::Json stacks_of(const calib::Problem& pb, const calib::FitResult& fr) {
  std::set<std::string> names;
  for (auto i : fr.train)
    if (!pb.samples[i].stack.empty()) names.insert(pb.samples[i].stack);
  return io::Json(std::vector<std::string>(names.begin(), names.end()));
}

struct CalOpts {
  std::string dataset, published, platform, system, out, report, cv, params_start;
  std::vector<std::string> models, calibrate_on, test_on, fix, free;
  bool json = false, coverage = false;
  calib::FitOptions fit;
  calib::Weights weights;
};

// The files a fit read, with content hashes.
io::Json input_files(const io::Dataset& d, const io::PublishedSet& ps, const calib::Problem& pb) {
  io::Json files = io::Json::array();
  auto add = [&](const std::string& path) {
    if (!std::filesystem::exists(path)) return;
    files.push_back({{"path", path}, {"sha256", io::sha256_file(path)}});
  };
  for (const auto& c : d.collections) {
    if (c.platform != pb.platform && c.system != pb.platform) continue;
    for (const char* f : {"step_time_summary.csv", "peak_memory.csv", "training_settings.json"})
      add(d.root + "/" + c.directory + "/" + f);
  }
  if (!ps.root.empty()) {
    add(ps.root + "/readings.csv");
    std::set<std::string> seen;
    for (const auto& r : ps.runs)
      if (r.system == pb.system.name && seen.insert(r.file).second) add(ps.root + "/" + r.file);
  }
  return files;
}

// The θ file the fit started from, which is also the prior's centre: a --start file, else the one a preset with
// `prior_params` takes from another system's shipped fit (empty: the preset's defaults).
std::string start_file(const CalOpts& co, const calib::Problem& pb) {
  if (!co.params_start.empty()) return co.params_start;
  const io::SystemPreset* sp = io::presets().find_system(pb.system.name);
  return sp ? sp->prior_path : std::string();
}

io::Json provenance(const CalOpts& co, const io::Json& files, const std::string& data_root, const calib::Problem& pb,
                    const calib::FitResult& fr) {
  io::Json used = io::Json::array();
  // The fitted models' architectures, so a prediction knows a model θ was fitted on under another name.
  io::Json models = io::Json::array();
  std::set<std::string> seen;
  for (auto i : fr.train) {
    used.push_back(pb.samples[i].model_setting + ":" + pb.samples[i].config);
    if (seen.insert(pb.samples[i].model.name).second) models.push_back(io::to_json(pb.samples[i].model));
  }
  io::Json free = io::Json::array();
  for (auto i : pb.free) free.push_back(param_table()[i].name);
  const std::string start = start_file(co, pb);  // recorded with its hash
  const io::Json run = provenance_json({start});
  return io::Json{
      {"lmsim_version", LMSIM_VERSION_STRING},
      {"lmsim_commit", run["lmsim_commit"]},
      {"command_line", run["command_line"]},
      {"start_theta_files", run["theta_files"]},
      {"created", run["created_utc"]},
      {"platform", pb.platform},
      {"system", pb.system.name},
      {"dataset", data_root},
      {"training_settings", settings_summary(pb, fr)},
      {"stacks", stacks_of(pb, fr)},
      {"files", files},
      {"configurations", used},
      {"models", models},
      {"fitted_range", fitted_range_json(pb, fr.train)},
      {"free_parameters", free},
      {"algorithm",
       {{"global", co.fit.global_algorithm},
        {"local", co.fit.local_algorithm},
        {"global_evals", co.fit.global_evals},
        {"local_evals", co.fit.local_evals},
        {"starts", co.fit.starts},
        {"seed", co.fit.seed},
        {"ftol_rel", co.fit.ftol_rel}}},
      {"objective",
       {{"form",
         "weighted mean squared log-ratio of time (pseudo-Huber beyond the prior's assumed per-run error "
         "sqrt(prior)), peak memory (per rank where available, else the maximum) and the fitted models' "
         "matrix-kernel latency"},
        {"weights",
         {{"time", pb.weights.time},
          {"memory", pb.weights.memory},
          {"matrix", pb.weights.matrix},
          {"prior", pb.weights.prior}}},
        {"prior",
         "Gaussian around the start θ (the preset defaults unless --start; a preset's prior_params fit where it names "
         "one), σ per parameter in docs/simulator.md"},
        {"value", fr.objective}}},
      {"evaluations", fr.evaluations},
      {"wall_s", fr.wall_s},
      {"on_bounds", fr.on_bounds}};
}

void write_h5(const CalOpts& co, const std::string& file, const calib::Problem& pb, const calib::FitResult& fr,
              const std::vector<std::pair<std::string, std::vector<calib::SamplePrediction>>>& sets,
              const io::Json& prov) {
  io::H5Writer w(file);
  w.group("/params");
  for (std::size_t i = 0; i < kNumParams; ++i) w.attr("/params", param_table()[i].name, get(fr.params, i));
  w.attr("/", "provenance_json", prov.dump());
  write_provenance(w, "/", {co.params_start});
  for (const auto& [name, preds] : sets) {
    std::vector<std::string> ms, cfg;
    std::vector<double> pt, mt, pm, mm;
    for (const auto& p : preds) {
      const auto& s = pb.samples[p.index];
      ms.push_back(s.model_setting);
      cfg.push_back(s.config);
      pt.push_back(p.time_s);
      mt.push_back(s.time_s > 0 ? s.time_s : std::nan(""));
      pm.push_back(p.mem_max_bytes);
      mm.push_back(s.mem_max_bytes > 0 ? s.mem_max_bytes : std::nan(""));
    }
    const std::string g = "/" + name;
    w.write(g + "/model_setting", ms);
    w.write(g + "/optimization_config", cfg);
    w.write(g + "/predicted_time_s", pt);
    w.write(g + "/measured_time_s", mt);
    w.write(g + "/predicted_max_peak_memory_bytes", pm);
    w.write(g + "/measured_max_peak_memory_bytes", mm);
    const calib::Report r = calib::score(pb, preds);
    w.attr(g, "report_json", report_json(r).dump());
    w.attr(g, "time_mape_pct", r.time_mape_pct);
    w.attr(g, "memory_mape_pct", r.memory_mape_pct);
  }
  w.commit();
}

// One calibration: the command line's options in, the report on `os` (θ to --out, the HDF5 report to --report).
void run(const CalOpts& co, std::ostream& os) {
  if (co.out.empty() && !co.json)
    throw io::InputError("command line", 0, "--out", "--out is required (or --json, which prints θ)");
  if (co.platform.empty() == co.system.empty())
    throw io::InputError("command line", 0, "--platform", "give exactly one of --platform gpu|npu and --system NAME");
  if (!co.published.empty() && co.system.empty())
    throw io::InputError("command line", 0, "--system", "--published needs --system NAME (one GPU system at a time)");
  io::Dataset d;
  io::PublishedSet ps;
  calib::Problem pb;
  if (co.published.empty()) {
    d = read_dataset_warned(co.dataset);
    pb = calib::make_problem(d, co.platform.empty() ? co.system : co.platform, co.models);
  } else {
    ps = io::read_published(co.published);
    pb = calib::make_problem(ps, co.system);
  }
  pb.weights = co.weights;
  // The start θ file (--start, or the one the preset's prior is taken from), read once: its values when --start
  // names it, its uncertainty for the extrapolation scale a fit too small to measure one borrows.
  const std::string start = start_file(co, pb);
  const io::Json start_json = start.empty() ? io::Json() : io::parse_json_file(start);
  if (!co.params_start.empty()) pb.start = io::params_of_theta_file(start_json, start, pb.start);
  calib::restrict_free(pb, co.free, co.fix);
  std::vector<std::size_t> train =
      co.calibrate_on.empty() ? calib::all_indices(pb) : calib::select(pb, co.calibrate_on);
  std::vector<std::size_t> test = calib::select(pb, co.test_on);
  // Every name must match a measured run: a bare configuration name matches it in every model, `model:config` one.
  for (const auto& [flag, names] : {std::pair{"--calibrate-on", &co.calibrate_on}, std::pair{"--test-on", &co.test_on}})
    for (const auto& name : *names)
      if (calib::select(pb, {name}).empty())
        throw io::InputError(flag, 0, "",
                             "'" + name +
                                 "' matches no measured configuration of this platform (use exact names, or "
                                 "model_setting:config)");
  if (!test.empty()) {  // never fit on a test configuration
    std::set<std::size_t> ts(test.begin(), test.end());
    std::vector<std::size_t> kept;
    for (auto i : train)
      if (!ts.count(i)) kept.push_back(i);
    train = kept;
  }
  const calib::CvSpec cv = calib::parse_cv(co.cv);
  // Now that every input is read: a bad --out or --report is refused before the fit and its cross-validation.
  for (const auto& [flag, path] : {std::pair{"--out", &co.out}, std::pair{"--report", &co.report}})
    if (!path->empty()) io::check_output_ahead(*path, flag);
  // Predictions of models outside the fit take the held-out models' error only when it was measured.
  if (cv.kind != calib::CvKind::leave_one_model_out && cv.kind != calib::CvKind::leave_one_source_out) {
    std::set<std::string> models;
    for (auto i : train) models.insert(pb.samples[i].model_setting);
    if (models.size() >= 2)
      spdlog::info(
          "θ's intervals for models outside these runs need their held-out error: add --cv leave-one-model-out "
          "(the runs cover {} models)",
          models.size());
  }
  spdlog::info("calibrating {} ({}) on {} configurations, {} free parameters", pb.platform, pb.system.name,
               train.size(), pb.free.size());
  if (2 * pb.free.size() > train.size())
    spdlog::warn(
        "{} free parameters for {} measured configurations: θ is under-determined; hold some with --fix or "
        "restrict them with --free",
        pb.free.size(), train.size());
  const calib::FitResult fr = calib::fit(pb, train, co.fit);
  for (const auto& name : fr.on_bounds)
    for (const auto& info : param_table())
      if (name == info.name) spdlog::warn("{} ended on its bound: the model may be missing {}", name, info.bound_hint);
  const auto in = calib::predict(pb, train, fr.params);
  const calib::Report rin = calib::score(pb, in);
  // Runs the robust time loss treated as outliers: named, so the user looks for the effect or repeats the run.
  io::Json outliers = io::Json::array();
  std::vector<std::string> named;
  for (const auto& p : calib::time_outliers(pb, in)) {
    const calib::Sample& s = pb.samples[p.index];
    const double err_pct = 100 * (p.time_s / s.time_s - 1);
    outliers.push_back({{"run", s.model_setting + ":" + s.config}, {"time_error_pct", err_pct}});
    named.push_back(fmt::format("{}:{} ({:+.1f} %)", s.model_setting, s.config, err_pct));
  }
  if (!named.empty())
    spdlog::warn(
        "{} of {} runs miss by more than 3x the assumed per-run error ({:.1f} %) and pull the fit as outliers: {}; "
        "the model may lack an effect they share, or the measurements are worth repeating",
        named.size(), in.size(), 300 * std::sqrt(pb.weights.prior), join(named));
  std::vector<std::pair<std::string, std::vector<calib::SamplePrediction>>> sets = {{"in_sample", in}};
  io::Json out;
  out["params"] = io::to_json(fr.params);
  calib::Uncertainty unc = calib::laplace(pb, train, fr.params);
  out["provenance"] = provenance(co, input_files(d, ps, pb),
                                 co.published.empty() ? d.root : co.published + " (published measurements)", pb, fr);
  io::Json rep;
  rep["in_sample"] = report_json(rin);
  rep["time_outliers"] = outliers;
  calib::Report rtest, rcv;
  if (!test.empty()) {
    const auto tp = calib::predict(pb, test, fr.params);
    rtest = calib::score(pb, tp);
    rep["test"] = report_json(rtest);
    sets.push_back({"test", tp});
  }
  calib::CvResult cr;
  if (cv.kind != calib::CvKind::none) {
    cr = calib::cross_validate(pb, train, cv, co.fit);
    rep["cv"] = report_json(cr.report);
    rep["cv"]["kind"] = co.cv;
    rep["cv"]["folds"] = cr.folds.size();
    sets.push_back({"cv", cr.out_of_sample});
    calib::set_unseen_scale(unc, pb, cv.kind, cr);
  }
  // How fast the error grows beyond the fitted runs' range (each dimension's extreme runs held out in turn).
  calib::set_extrapolation_scale(unc, pb, train, co.fit);
  if (!start.empty())  // too few runs to measure one: the start's
    if (const auto su = load_uncertainty(start_json, start)) calib::borrow_extrapolation_scale(unc, *su, start);
  out["uncertainty"] = uncertainty_json(unc);
  std::vector<calib::CoverageRow> coverage;
  if (co.coverage) {
    coverage = calib::calibration_coverage(pb, test, co.fit);
    io::Json cj = io::Json::array();
    for (const auto& c : coverage)
      cj.push_back({{"calibration_set", c.calibration_set},
                    {"n_calibration", c.n_calibration},
                    {"n_test", c.n_test},
                    {"test_time_mape_pct", c.test.time_mape_pct},
                    {"test_memory_mape_pct", c.test.memory_mape_pct},
                    {"test_min_model_time_spearman", c.test.min_model_time_spearman}});
    rep["coverage"] = cj;
  }
  out["report"] = rep;
  // All outputs or none: the report first (the likelier to fail), then θ; a failed θ write takes the report back.
  if (!co.report.empty()) write_h5(co, co.report, pb, fr, sets, out["provenance"]);
  try {
    if (!co.out.empty()) io::write_file_atomic(co.out, out.dump(1) + "\n");
  } catch (...) {
    if (!co.report.empty() && io::check_output(co.report) == io::OutputMode::replace) std::remove(co.report.c_str());
    throw;
  }
  if (co.json) {
    os << out.dump(1) << "\n";
    return;
  }
  os << "calibrated " << pb.platform << " (" << pb.system.name << ") on " << train.size()
     << " configurations: objective " << fmt(fr.objective, 5) << ", " << fr.evaluations << " evaluations, "
     << fmt(fr.wall_s, 2) << " s\n";
  std::vector<std::vector<std::string>> prow;
  for (std::size_t i = 0; i < kNumParams; ++i) {
    const ParamInfo& info = param_table()[i];
    const bool fitted = std::find(pb.free.begin(), pb.free.end(), i) != pb.free.end();
    const bool bound = std::find(fr.on_bounds.begin(), fr.on_bounds.end(), info.name) != fr.on_bounds.end();
    // Not fitted: given by --fix (known), or unidentified by these runs or left out by --free (its prior, which
    // the intervals of a prediction that leans on it carry).
    const bool fixed = std::find(pb.fixed.begin(), pb.fixed.end(), i) != pb.fixed.end();
    const std::string status = fitted  ? (bound ? "fitted, ON BOUND" : "fitted")
                               : fixed ? "fixed (--fix)"
                                       : fmt::format("not fitted: prior ± {:g} kept for the intervals", info.prior_sd);
    prow.push_back(
        {info.name, fmt(get(fr.params, i), 4), info.unit, fmt(info.lower, 2) + " .. " + fmt(info.upper, 2), status});
  }
  os << table({"parameter", "value", "unit", "bounds", "status"}, prow) << "\n" << report_line("in-sample", rin);
  if (!test.empty()) os << report_line("test", rtest);
  if (cv.kind != calib::CvKind::none) os << report_line("cv " + co.cv, cr.report);
  if (unc.extrapolation_n_time > 0)
    os << "beyond the fitted range: time log sd grows " << fmt(100 * unc.extrapolation_time_log_sd, 1)
       << " % per e-fold outside it"
       << (unc.extrapolation_n_memory > 0 ? ", memory " + fmt(100 * unc.extrapolation_memory_log_sd, 1) + " %"
                                          : std::string())
       << " (each dimension's extreme runs held out: " << unc.extrapolation_n_time << " predictions)\n";
  if (co.published.empty())
    os << "paper, calibrated Calculon (in-sample): time MAPE 10.28/11.22 % (V100, 0.6B/1.7B), 10.19/7.97 % "
          "(910B3); time rho 0.853-0.950; memory MAPE 12.55-15.99 %, memory rho 0.986-0.994\n";
  if (co.coverage) {
    std::vector<std::vector<std::string>> rows;
    for (const auto& c : coverage)
      rows.push_back({c.calibration_set, std::to_string(c.n_calibration), std::to_string(c.n_test),
                      fmt(c.test.time_mape_pct, 2), fmt(c.test.memory_mape_pct, 2)});
    os << "\ncalibration coverage (fixed test set):\n"
       << table({"calibration set", "n_cal", "n_test", "test time MAPE %", "test memory MAPE %"}, rows);
  }
  os << "wrote " << co.out << (co.report.empty() ? "" : " and " + co.report) << "\n";
}
}  // namespace

void register_calibrate(CLI::App& app) {
  auto* cmd = app.add_subcommand("calibrate", "fit the platform parameters θ to measured runs");
  auto opts = std::make_shared<CalOpts>();  // owned by the command: no file-scope state
  CalOpts& co = *opts;
  co.dataset = io::data_dir() + "/lmsimbench";
  cmd->add_option("--dataset", co.dataset, "dataset root in the LM-SimBench layout (default: bundled data)");
  cmd->add_option("--published", co.published,
                  "calibrate on published measurements instead (a folder with readings.csv, e.g. data/public)");
  cmd->add_option("--fix", co.fix, "hold a parameter at a value: NAME=VALUE (repeatable)")->delimiter(',');
  cmd->add_option("--free", co.free, "fit only these parameters (default: every one the data can identify)")
      ->delimiter(',');
  cmd->add_option("--platform", co.platform, "a collection platform: gpu, npu or a system preset name");
  cmd->add_option("--system", co.system, "calibrate the collections measured on this system preset instead");
  cmd->add_option("--models", co.models, "model settings or model names to use (default: all)")->delimiter(',');
  cmd->add_option("--calibrate-on", co.calibrate_on, "configurations to fit on (default: all not in --test-on)")
      ->delimiter(',');
  cmd->add_option("--test-on", co.test_on, "held-out configurations, scored and never fitted on")->delimiter(',');
  cmd->add_option("--cv", co.cv, "cross-validation: loo, kfold=K, leave-one-model-out or leave-one-source-out");
  cmd->add_option("--out", co.out, "params.json to write (required unless --json prints θ)");
  cmd->add_option("--report", co.report, "HDF5 report to write");
  cmd->add_option("--start", co.params_start, "θ file to start from (default: the system preset's defaults)");
  cmd->add_option("--seed", co.fit.seed, "random seed (same seed, same θ)");
  cmd->add_option("--global-evals", co.fit.global_evals, "evaluations of the global stage")
      ->check(CLI::Range(0, 10000000));
  cmd->add_option("--local-evals", co.fit.local_evals, "evaluations of each local polish")
      ->check(CLI::Range(0, 10000000));
  cmd->add_option("--starts", co.fit.starts, "local polishes (multi-start)")->check(CLI::Range(1, 1000));
  cmd->add_option("--ftol-rel", co.fit.ftol_rel, "relative objective tolerance")
      ->check(finite_number())
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--global-algorithm", co.fit.global_algorithm, "GN_CRS2_LM, GN_ISRES, GN_DIRECT_L, GN_ESCH");
  cmd->add_option("--local-algorithm", co.fit.local_algorithm, "LN_BOBYQA, LN_SBPLX, LN_NELDERMEAD, LN_COBYLA");
  cmd->add_option("--weight-time", co.weights.time, "objective weight of iteration time")->check(CLI::Range(0.0, 1e6));
  cmd->add_option(
         "--weight-prior", co.weights.prior,
         "prior strength: assumed per-run squared log error; time errors beyond its square root count linearly "
         "(0 = no prior, plain least squares)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--weight-memory", co.weights.memory, "objective weight of peak memory")->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--weight-matrix", co.weights.matrix, "objective weight of matrix-kernel latency")
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_flag("--coverage", co.coverage, "also fit on differently shaped calibration sets (LM-SimBench D.3)");
  cmd->add_flag("--json", co.json, "machine-readable output");
  cmd->callback([opts] { run(*opts, std::cout); });
}

}  // namespace lmsim::app
