// Public GPU calibration benchmark: fits θ per GPU system (A100, H100, B200) on the published Megatron / NeMo /
// Megatron-Bridge measurements shipped in data/public/, and prints in-sample, leave-one-model-out and
// leave-one-source-out time errors with every run's residual.
//   public_bench [--data DIR] [--residuals] [--terms] [--fix NAME=VALUE ...]   (--fix: hold a θ parameter, e.g. to
//   see what a parameter on its bound absorbs; --terms: each fitted and validation run's result terms under the
//   in-sample θ, as shares of its predicted time, to read a residual against what the prediction is made of)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>

#include "calibration/calibrate.hpp"
#include "calibration/uncertainty.hpp"
#include "io/io.hpp"

using namespace lmsim;

namespace {
void line(const char* label, const calib::Problem& pb, const std::vector<calib::SamplePrediction>& preds,
          bool residuals) {
  const calib::Report r = calib::score(pb, preds);
  std::printf("  %-24s n=%2zu  time MAPE %6.2f %%  max APE %6.2f %%  rho %6.3f\n", label, r.n_time, r.time_mape_pct,
              r.time_max_ape_pct, r.models.empty() ? 0.0 : r.min_model_time_spearman);
  if (!residuals) return;
  for (const auto& p : preds) {
    const auto& s = pb.samples[p.index];
    if (!(s.time_s > 0)) continue;
    std::printf("      %-26s %-18s %-40s %8.3f / %8.3f s (%+6.1f %%)\n", s.source.substr(0, 26).c_str(),
                s.model_setting.substr(0, 18).c_str(), s.config.c_str(), p.time_s, s.time_s,
                100 * (p.time_s / s.time_s - 1));
  }
}
// Every run's result terms (breakdown_terms(), the one table every writer loops over) under θ, as
// percentages of its predicted iteration time, beside its residual.
void terms(const calib::Problem& pb, const std::vector<std::size_t>& idx, const PlatformParams& theta) {
  std::printf("  %-18s %-40s %7s", "terms (% of time)", "", "resid");
  for (const auto& t : breakdown_terms()) {
    std::string n = t.name;
    if (n.size() > 2 && n.compare(n.size() - 2, 2, "_s") == 0) n.resize(n.size() - 2);
    std::printf(" %8.8s", n.c_str());
  }
  std::printf("\n");
  for (auto i : idx) {
    const calib::Sample& s = pb.samples[i];
    const Prediction pr = simulate(s.model, s.strategy, pb.system, s.settings, theta, calib::sim_options(pb));
    if (!pr.ok() || !(s.time_s > 0)) continue;
    std::printf("      %-18s %-40s %+6.1f%%", s.model_setting.substr(0, 18).c_str(), s.config.c_str(),
                100 * (pr.iteration_time_s / s.time_s - 1));
    for (const auto& t : breakdown_terms()) std::printf(" %8.1f", 100 * pr.breakdown.*t.field / pr.iteration_time_s);
    std::printf("\n");
  }
}
// How many held-out times the 80 % and 90 % intervals hold.
void coverage_line(const char* label, const calib::Coverage& c) {
  std::printf("  %-24s time in 80 %% interval %zu/%zu, in 90 %% interval %zu/%zu\n", label, c.time_in_80, c.n_time,
              c.time_in_90, c.n_time);
}

// Every published run ran, so every one should be predicted to fit its devices' memory: the feasibility the
// search filters on. Prints the share that does, the predicted peak of those that do not, and the P(fits) the
// search would give them: with no memory measured, from the priors of θ's memory parameters (`u`).
void feasibility(const calib::Problem& pb, const std::vector<calib::SamplePrediction>& preds,
                 const calib::Uncertainty& u, const PlatformParams& theta) {
  std::size_t fit = 0;
  for (const auto& p : preds) fit += p.feasible ? 1 : 0;
  std::printf("  %-24s %zu/%zu published layouts predicted to fit in %.0f GiB", "feasibility retention", fit,
              preds.size(), pb.system.hbm_capacity_bytes / 1073741824.0);
  std::vector<double> pf;
  for (const auto& p : preds) {
    const calib::Sample& s = pb.samples[p.index];
    const auto ls =
        calib::log_sensitivity(s.model, s.strategy, pb.system, s.settings, theta, u, calib::sim_options(pb));
    if (!ls) continue;
    const double x = calib::p_fits(ls->memory_bytes, pb.system.hbm_capacity_bytes, calib::total_log_sds(u, *ls).memory,
                                   u.memory_dof);
    if (std::isfinite(x)) pf.push_back(x);
  }
  std::sort(pf.begin(), pf.end());
  if (!pf.empty())
    std::printf("; P(fits)%s: min %.2f, median %.2f, %zu below 0.9", calib::memory_from_priors(u) ? " from priors" : "",
                pf.front(), pf[pf.size() / 2],
                static_cast<std::size_t>(std::count_if(pf.begin(), pf.end(), [](double x) { return x < 0.9; })));
  std::printf("\n");
  for (const auto& p : preds)
    if (!p.feasible)
      std::printf("      does not fit: %-18s %-40s %6.1f GiB\n",
                  pb.samples[p.index].model_setting.substr(0, 18).c_str(), pb.samples[p.index].config.c_str(),
                  p.mem_max_bytes / 1073741824.0);
}
}  // namespace

int main(int argc, char** argv) {
  std::string dir = io::data_dir() + "/public";
  bool residuals = false, show_terms = false;
  std::vector<std::string> fix;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--data") && i + 1 < argc)
      dir = argv[++i];
    else if (!std::strcmp(argv[i], "--fix") && i + 1 < argc)
      fix.push_back(argv[++i]);
    else if (!std::strcmp(argv[i], "--residuals"))
      residuals = true;
    else if (!std::strcmp(argv[i], "--terms"))
      show_terms = true;
  }
  const io::PublishedSet ps = io::read_published(dir);
  std::printf("published set: %zu runs used, %zu rows dropped (reasons in %s/readings.csv)\n", ps.runs.size(),
              ps.dropped.size(), dir.c_str());
  PlatformParams h100{};
  calib::Uncertainty h100_shipped;  // the B200 fit starts from the H100 one and takes its extrapolation scale
  for (const std::string system : {"a100_sxm_80g", "h100_sxm_80g", "b200_sxm_180g"}) {
    calib::Problem pb = calib::make_problem(ps, system);
    // B200 has two dense runs: it starts from, and its prior is centred on, the H100 fit (as jobs/calibrate.sh).
    if (system == "b200_sxm_180g") pb.start = h100;
    if (!fix.empty()) calib::restrict_free(pb, {}, fix);
    const auto idx = calib::all_indices(pb);
    calib::FitOptions fo;
    const calib::FitResult fr = calib::fit(pb, idx, fo);
    if (system == "h100_sxm_80g") h100 = fr.params;
    std::printf("\n== %s: %zu runs, %zu free parameters; fit %.2f s; on bounds:", system.c_str(), idx.size(),
                pb.free.size(), fr.wall_s);
    for (const auto& b : fr.on_bounds) std::printf(" %s", b.c_str());
    std::printf("%s\n  theta:", fr.on_bounds.empty() ? " none" : "");
    for (auto i : pb.free) std::printf(" %s=%.4g", param_table()[i].name, get(fr.params, i));
    std::printf("\n");
    const PlatformParams& preset = io::presets().find_system(system)->default_params;
    line("uncalibrated preset", pb, calib::predict(pb, idx, preset), false);
    // The intervals predict and search give a system without a fitted θ: the priors' stated widths.
    coverage_line("  prior intervals", calib::coverage_of(pb, preset, calib::prior_uncertainty(), {}, idx));
    // An uncalibrated system may centre its prior on another system's fit (systems.json `prior_params`: H200 on the
    // H100 fit, GB200 on the B200 fit, the same GPU). The B200 predicted from the H100 fit, a different GPU, bounds
    // what such a transfer misses.
    if (system == "b200_sxm_180g") {
      line("H100 fit (another GPU)", pb, calib::predict(pb, idx, h100), false);
      coverage_line("  prior intervals", calib::coverage_of(pb, h100, calib::prior_uncertainty(), {}, idx));
    }
    line("in-sample", pb, calib::predict(pb, idx, fr.params), residuals);
    if (show_terms) terms(pb, idx, fr.params);
    std::set<std::string> models, sources;
    for (auto i : idx) {
      models.insert(pb.samples[i].model_setting);
      sources.insert(pb.samples[i].source);
    }
    calib::CvResult lomo;  // kept: the shipped θ's held-out-model scale comes from it (as jobs/calibrate.sh fits it)
    if (models.size() > 1) {
      const auto& cv = lomo = calib::cross_validate(pb, idx, {calib::CvKind::leave_one_model_out, 0}, fo);
      line("leave-one-model-out", pb, cv.out_of_sample, residuals);
      coverage_line("  interval coverage", calib::interval_coverage(pb, cv));
      // What predict and search give a model outside the fit: the residual scale of held-out models, measured by
      // an inner leave-one-model-out inside each fold.
      const calib::Coverage u = calib::unseen_model_coverage(pb, cv, calib::CvKind::leave_one_model_out, fo);
      if (u.n_time) coverage_line("  unseen-model intervals", u);
    }
    if (sources.size() > 1) {
      const auto cv = calib::cross_validate(pb, idx, {calib::CvKind::leave_one_source_out, 0}, fo);
      line("leave-one-source-out", pb, cv.out_of_sample, residuals);
      // A held-out source's runs lie partly beyond the fold's range: each fold's intervals as its own fit gives
      // them, then widened by the extrapolation scale that fold measures on its own runs.
      coverage_line("  interval coverage", calib::interval_coverage(pb, cv));
      coverage_line("  widened beyond range", calib::widened_coverage(pb, cv, fo));
    }
    // How fast the error grows beyond the fitted runs' range (each dimension's extreme runs held out in turn), as
    // calibrate records it; the validation rows' intervals widen by it where they lie outside the range.
    calib::Uncertainty shipped = calib::laplace(pb, idx, fr.params);
    calib::set_extrapolation_scale(shipped, pb, idx, fo);
    calib::set_unseen_scale(shipped, pb, calib::CvKind::leave_one_model_out, lomo);
    if (system == "h100_sxm_80g") h100_shipped = shipped;
    if (system == "b200_sxm_180g") calib::borrow_extrapolation_scale(shipped, h100_shipped, "the H100 fit");
    if (shipped.extrapolation_n_time)
      std::printf(
          "  beyond the fitted range  time log sd +%.1f %% per e-fold (%zu held-out extreme-run predictions%s%s)\n",
          100 * shipped.extrapolation_time_log_sd, shipped.extrapolation_n_time,
          shipped.extrapolation_from.empty() ? "" : " of ", shipped.extrapolation_from.c_str());
    std::vector<std::size_t> every = idx;
    // Validation rows, one group per source (the MoE runs and the long-sequence runs miss for different reasons).
    const auto val_all = calib::validation_indices(pb);
    std::set<std::string> val_sources;
    for (auto i : val_all) val_sources.insert(pb.samples[i].source);
    for (const auto& src : val_sources) {
      std::vector<std::size_t> val;
      for (auto i : val_all)
        if (pb.samples[i].source == src) val.push_back(i);
      line(("validation: " + src).c_str(), pb, calib::predict(pb, val, fr.params), true);
      if (show_terms) terms(pb, val, fr.params);
      // The shipped fit's intervals on rows it never saw, as predict gives them (calib::for_prediction).
      coverage_line("  interval coverage", calib::coverage_of(pb, fr.params, shipped, idx, val));
    }
    every.insert(every.end(), val_all.begin(), val_all.end());
    feasibility(pb, calib::predict(pb, every, fr.params), calib::laplace(pb, idx, fr.params), fr.params);
  }
  return 0;
}
