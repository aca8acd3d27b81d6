// Calibration benchmark: fits θ for both bundled platforms (jointly over Qwen3-0.6B and 1.7B), prints in-sample
// and leave-one-configuration-out figures beside the LM-SimBench paper's calibrated-Calculon numbers, the
// residual of every configuration, parameters on bounds, and the wall time.
//   calibration_bench [--dataset DIR] [--no-cv] [--residuals]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "calibration/calibrate.hpp"
#include "calibration/uncertainty.hpp"
#include "io/io.hpp"

using namespace lmsim;

namespace {
struct PaperRow {
  const char* platform;
  double time_mape_06, time_mape_17, mem_mape_lo, mem_mape_hi;
};
// LM-SimBench Table (calibrated Calculon, in-sample): time MAPE per model; per-rank peak-memory MAPE range.
const PaperRow kPaper[] = {{"gpu", 10.28, 11.22, 12.55, 15.99}, {"npu", 10.19, 7.97, 12.55, 15.99}};

void print_report(const char* label, const calib::Report& r) {
  std::printf(
      "  %-22s time MAPE %6.2f %%  sMAPE %6.2f %%  R2 %6.3f  MAE %6.3f s  max APE %6.2f %% | memory MAPE %6.2f %%  rho "
      "%6.3f | top-1 strata %d/%zu\n",
      label, r.time_mape_pct, r.time_smape_pct, r.time_r2, r.time_mae_s, r.time_max_ape_pct, r.memory_mape_pct,
      r.memory_spearman, r.top1_strata_hits, r.strata.size());
  for (const auto& m : r.models)
    std::printf("      %-24s time rho %6.3f  tau_b %6.3f  top-1 %s (regret %5.2f %%)  memory rho %6.3f\n",
                m.name.c_str(), m.time_spearman, m.time_kendall, m.top1_hit > 0 ? "hit " : "miss", m.top1_regret_pct,
                m.memory_spearman);
  for (const auto& s : r.strata)
    std::printf("      %-24s n=%2zu time rho %6.3f  top-1 %s  measured best %s, predicted best %s\n", s.name.c_str(),
                s.n, s.time_spearman, s.top1_hit > 0 ? "hit " : "miss", s.measured_best.c_str(),
                s.predicted_best.c_str());
}
void print_coverage(const char* label, const calib::Coverage& c) {
  auto pct = [](std::size_t k, std::size_t n) {
    return n ? 100.0 * static_cast<double>(k) / static_cast<double>(n) : 0.0;
  };
  std::printf("  %-22s interval coverage (target 80 / 90 %%): time %5.1f / %5.1f %% of %zu", label,
              pct(c.time_in_80, c.n_time), pct(c.time_in_90, c.n_time), c.n_time);
  if (c.n_memory)
    std::printf(", memory %5.1f / %5.1f %% of %zu", pct(c.memory_in_80, c.n_memory), pct(c.memory_in_90, c.n_memory),
                c.n_memory);
  std::printf("\n");
}
}  // namespace

int main(int argc, char** argv) {
  std::string dir = io::data_dir() + "/lmsimbench";
  bool cv = true, residuals = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--dataset") && i + 1 < argc)
      dir = argv[++i];
    else if (!std::strcmp(argv[i], "--no-cv"))
      cv = false;
    else if (!std::strcmp(argv[i], "--residuals"))
      residuals = true;
  }
  const io::Dataset d = io::read_dataset(dir);
  double total_fit_s = 0;
  for (const auto& paper : kPaper) {
    calib::Problem pb = calib::make_problem(d, paper.platform);
    const auto idx = calib::all_indices(pb);
    calib::FitOptions fo;
    const calib::FitResult fr = calib::fit(pb, idx, fo);
    total_fit_s += fr.wall_s;
    std::printf("\n== platform %s (%s): %zu configurations, %zu free parameters ==\n", paper.platform,
                pb.system.name.c_str(), idx.size(), pb.free.size());
    std::printf("  fit: objective %.5f, %d evaluations, %.2f s; on bounds:", fr.objective, fr.evaluations, fr.wall_s);
    for (const auto& b : fr.on_bounds) std::printf(" %s", b.c_str());
    std::printf("%s\n  theta:", fr.on_bounds.empty() ? " none" : "");
    for (std::size_t i = 0; i < kNumParams; ++i) std::printf(" %s=%.4g", param_table()[i].name, get(fr.params, i));
    std::printf("\n");
    const auto in = calib::predict(pb, idx, fr.params);
    const calib::Report rin = calib::score(pb, in);
    print_report("in-sample", rin);
    // The uncalibrated preset (the prior's centre) with the intervals predict and search give a system without a
    // fitted θ (calib::prior_uncertainty): how much of the measured runs the priors' stated widths hold.
    const PlatformParams& preset = io::presets().find_system(pb.system.name)->default_params;
    print_report("uncalibrated preset", calib::score(pb, calib::predict(pb, idx, preset)));
    print_coverage("  prior intervals", calib::coverage_of(pb, preset, calib::prior_uncertainty(), {}, idx));
    std::printf(
        "  paper (calibrated Calculon, in-sample): time MAPE %.2f %% / %.2f %% (0.6B / 1.7B), memory MAPE %.2f-%.2f "
        "%%\n",
        paper.time_mape_06, paper.time_mape_17, paper.mem_mape_lo, paper.mem_mape_hi);
    // Each model fitted alone: how much of the joint in-sample error is the model structure on one model's runs,
    // and how much the two models disagreeing with one θ.
    std::set<std::string> models;
    for (auto i : idx) models.insert(pb.samples[i].model_setting);
    std::printf("  each model fitted alone (in-sample time MAPE):");
    for (const auto& m : models) {
      std::vector<std::size_t> own;
      for (auto i : idx)
        if (pb.samples[i].model_setting == m) own.push_back(i);
      const calib::FitResult f1 = calib::fit(pb, own, fo);
      std::printf(" %s %.2f %%", m.c_str(), calib::score(pb, calib::predict(pb, own, f1.params)).time_mape_pct);
    }
    std::printf(" (jointly %.2f %%)\n", rin.time_mape_pct);
    std::printf("  time outliers (beyond 3x the assumed per-run error, counted linearly by the fit):");
    const auto outliers = calib::time_outliers(pb, in);
    for (const auto& p : outliers)
      std::printf(" %s:%s %+.1f %%", pb.samples[p.index].model_setting.c_str(), pb.samples[p.index].config.c_str(),
                  100 * (p.time_s / pb.samples[p.index].time_s - 1));
    std::printf("%s\n", outliers.empty() ? " none" : "");
    if (residuals) {
      for (const auto& p : in) {
        const auto& s = pb.samples[p.index];
        std::printf("      %-14s %-22s time %6.2f / %6.2f s (%+6.1f %%)  mem %6.2f / %6.2f GiB (%+6.1f %%)\n",
                    s.model_setting.c_str(), s.config.c_str(), p.time_s, s.time_s, 100 * (p.time_s / s.time_s - 1),
                    p.mem_max_bytes / 1073741824.0, s.mem_max_bytes / 1073741824.0,
                    100 * (p.mem_max_bytes / s.mem_max_bytes - 1));
      }
    }
    {
      // The published GPU sets carry no memory, so those θ give memory intervals from the priors alone. How far to
      // trust such an interval, on the runs whose peaks were measured: fit on their times only, so the memory
      // parameters stay at the preset's prior centre, and count the measured peaks inside the intervals.
      calib::Problem times = pb;
      for (auto& smp : times.samples) smp.mem_max_bytes = 0;
      times.free.erase(std::remove_if(times.free.begin(), times.free.end(), calib::memory_param), times.free.end());
      const calib::FitResult ft = calib::fit(times, idx, fo);
      const calib::Uncertainty ut = calib::laplace(times, idx, ft.params);
      calib::Coverage c;
      std::vector<double> ape, half;
      for (auto i : idx) {
        const calib::Sample& smp = pb.samples[i];
        const auto iv =
            calib::intervals(smp.model, smp.strategy, pb.system, smp.settings, ft.params, ut, calib::sim_options(pb));
        if (!iv) continue;
        calib::tally(c, *iv, 0, smp.mem_max_bytes);
        ape.push_back(std::fabs(iv->memory_bytes_90.value / smp.mem_max_bytes - 1));
        half.push_back(iv->memory_bytes_90.upper / iv->memory_bytes_90.value - 1);
      }
      std::sort(half.begin(), half.end());
      double mape = 0;
      for (double x : ape) mape += x / static_cast<double>(ape.size());
      std::printf(
          "  memory from priors     (theta fitted on times only) memory MAPE %5.2f %%; 80 / 90 %% intervals cover "
          "%zu / %zu of %zu, median 90 %% upper end +%.0f %%\n",
          100 * mape, c.memory_in_80, c.memory_in_90, c.n_memory, half.empty() ? 0.0 : 100 * half[half.size() / 2]);
    }
    if (cv) {
      const auto t0 = std::chrono::steady_clock::now();
      const calib::CvResult cr = calib::cross_validate(pb, idx, {calib::CvKind::loo, 0}, fo);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      print_report("leave-one-config-out", cr.report);
      std::printf("  (LOO: %zu folds, %.1f s)\n", cr.folds.size(), s);
      print_coverage("LOO", calib::interval_coverage(pb, cr));
      const calib::CvResult mo = calib::cross_validate(pb, idx, {calib::CvKind::leave_one_model_out, 0}, fo);
      print_report("leave-one-model-out", mo.report);
      print_coverage("leave-one-model-out", calib::interval_coverage(pb, mo));
      // What a θ fitted on one model gives another: each fold's intervals widened by the extrapolation scale that
      // fold measures on its own runs, for the distance the held-out model lies beyond its range (its hidden size).
      print_coverage("  widened beyond range", calib::widened_coverage(pb, mo, fo));
      // How fast the error grows beyond the fitted runs' range, as calibrate records it in θ.
      calib::Uncertainty ue = calib::laplace(pb, idx, fr.params);
      calib::set_extrapolation_scale(ue, pb, idx, fo);
      std::printf(
          "  beyond the fitted range (extremes of TP / PP / hidden size held out) log sd per e-fold: time %.1f %%, "
          "memory %.1f %% "
          "(%zu predictions)\n",
          100 * ue.extrapolation_time_log_sd, 100 * ue.extrapolation_memory_log_sd, ue.extrapolation_n_time);
      if (residuals) {
        for (const auto& p : mo.out_of_sample) {
          const auto& smp = pb.samples[p.index];
          std::printf("      LOMO %-14s %-22s time %6.2f / %6.2f s (%+6.1f %%)  mem %+6.1f %%\n",
                      smp.model_setting.c_str(), smp.config.c_str(), p.time_s, smp.time_s,
                      100 * (p.time_s / smp.time_s - 1), 100 * (p.mem_max_bytes / smp.mem_max_bytes - 1));
        }
        for (const auto& f : mo.folds) {
          std::printf("      LOMO fold theta:");
          for (std::size_t i = 0; i < kNumParams; ++i) std::printf(" %s=%.4g", param_table()[i].name, get(f.params, i));
          std::printf("\n");
        }
      }
      if (residuals)
        for (const auto& p : cr.out_of_sample) {
          const auto& smp = pb.samples[p.index];
          std::printf("      LOO %-14s %-22s time %+6.1f %%  mem %+6.1f %%\n", smp.model_setting.c_str(),
                      smp.config.c_str(), 100 * (p.time_s / smp.time_s - 1),
                      100 * (p.mem_max_bytes / smp.mem_max_bytes - 1));
        }
    }
  }
  std::printf("\nboth platforms calibrated in %.2f s (target <= 10 s)\n", total_fit_s);
  return 0;
}
