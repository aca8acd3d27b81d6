// lmsim/calibration/evaluate.hpp — scoring predictions against measured collections (LM-SimBench's three levels).
//
// Owns: system level (time and per-rank / maximum memory: MAE, sMAPE, R², MAPE, ρ, τ_b, Top-k, regret,
// feasibility), component level where the views exist (stage compute vs step-trace `computing`, exposed
// communication vs `communication_not_overlapped`, matrix-kernel latency per problem, communication shares by
// primitive via Jensen–Shannon divergence) and simulation cost. Predictions come from lmsim (with θ per
// platform) or from any other tool's CSV, scored identically.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "calibration/calibrate.hpp"
#include "io/dataset.hpp"

namespace lmsim::eval {

struct ComponentReport {
  std::size_t matrix_n = 0;
  double matrix_mae_us = 0, matrix_smape_pct = 0, matrix_r2 = 0, matrix_spearman = 0;
  std::size_t matrix_slowest3_overlap = 0;
  std::size_t trace_n = 0;
  double compute_smape_pct = 0, compute_r2 = 0, comm_exposed_smape_pct = 0, comm_exposed_r2 = 0;
  std::map<std::string, double> measured_comm_share, predicted_comm_share;  // percent by primitive
  double comm_share_jsd = -1;                                               // -1: no measured shares
};

struct CollectionEvaluation {
  std::string model_setting, platform, system, predictor;
  calib::Problem problem;
  std::vector<calib::SamplePrediction> predictions;
  calib::Report report;
  ComponentReport components;
  std::vector<double> simulation_wall_s;  // per configuration (empty when unknown)
  double median_simulation_wall_s = -1;
  std::string theta_source;  // lmsim: which θ predicted (a given file's platform, or the system preset's)
};

// θ per platform name (gpu/npu) or system name; a collection without one uses its system preset's θ: the shipped
// fitted θ where there is one (fitted on the bundled runs: in-sample there), else the uncalibrated defaults.
std::vector<CollectionEvaluation> evaluate_lmsim(const io::Dataset& d,
                                                 const std::map<std::string, PlatformParams>& theta,
                                                 const std::vector<std::string>& models);

// Another simulator's predictions, CSV columns: model_setting, platform, optimization_config, iteration_time_s,
// peak_memory_gib, and optionally rank_id (per-rank memory rows; `max` or empty for the maximum) and
// simulation_wall_s. Errors name the file, line and field.
std::vector<CollectionEvaluation> evaluate_file(const io::Dataset& d, const std::string& csv, const std::string& name,
                                                const std::vector<std::string>& models);

}  // namespace lmsim::eval
