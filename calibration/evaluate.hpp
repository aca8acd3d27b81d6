// lmsim/calibration/evaluate.hpp — scoring predictions against measured collections (LM-SimBench's three levels).
//
// Owns: system level (time and per-rank / maximum memory: MAE, sMAPE, R², MAPE, ρ, τ_b, Top-k, regret,
// feasibility), component level where the views exist (stage compute vs step-trace `computing`, exposed
// communication vs `communication_not_overlapped`, matrix-kernel latency per problem, communication shares by
// primitive via Jensen–Shannon divergence, measured as transfers: elapsed less the wait for peers) and simulation cost.
// Predictions come from lmsim (with θ per platform) or from any other tool's CSV, scored identically.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "calibration/calibrate.hpp"
#include "calibration/uncertainty.hpp"
#include "io/dataset.hpp"
#include "io/published.hpp"

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

using calib::FittedRange;

// A θ to predict with and what is known of how far to trust it (from a θ file written by `lmsim calibrate`).
struct Theta {
  PlatformParams params;
  std::string source;                              // said in reports
  std::optional<calib::Uncertainty> uncertainty;   // prediction intervals when present
  std::vector<std::string> fitted_models;          // model presets of the runs θ was fitted on (empty: not recorded)
  std::vector<std::string> fitted_configurations;  // those runs, "<model>:<configuration>" (empty: not recorded)
  // The fitted runs' range per dimension, (name, [min, max]), as the θ file's provenance records it (empty: not
  // recorded); the CLI flags the runs beyond it.
  FittedRange fitted_range;
  std::vector<Model> fitted_model_specs;  // the fitted models' architectures (empty: not recorded)
  std::string file;                       // the θ file it was read from (empty: not from a file)
};
// The fitted model `m` is, as θ's record names it: by name, or by architecture where the θ file records the fitted
// models' specs (simulator same_architecture); nullopt when θ was not fitted on it.
std::optional<std::string> fitted_as(const std::vector<std::string>& fitted_models,
                                     const std::vector<Model>& fitted_specs, const Model& m);
inline bool fitted_on(const Theta& t, const Model& m) {
  return fitted_as(t.fitted_models, t.fitted_model_specs, m).has_value();
}

struct CollectionEvaluation {
  std::string model_setting, platform, system, predictor;
  calib::Problem problem;
  std::vector<calib::SamplePrediction> predictions;
  calib::Report report;
  ComponentReport components;
  std::vector<double> simulation_wall_s;  // per configuration (empty when unknown)
  double median_simulation_wall_s = -1;
  std::string theta_source;  // lmsim: which θ predicted (a given file's platform, or the system preset's)
  // lmsim with a θ covariance: every prediction's 80 / 90 % intervals (parallel to `predictions`; NaN where the
  // strategy is rejected) and how many measurements they hold. When θ was fitted on this collection's model the
  // coverage is in-sample; for another model the intervals take θ's held-out-model scale where it has one.
  std::vector<calib::PredictionIntervals> intervals;
  calib::Coverage coverage;
  bool theta_fitted_on_model = false, held_out_model_scale = false;
  bool intervals_from_priors = false;  // θ is uncalibrated: the intervals are its priors' (calib::prior_uncertainty)
};

// θ per platform name (gpu/npu) or system name; a collection without one uses its system preset's θ values (the
// shipped fitted θ where there is one, with no intervals; else the uncalibrated defaults, with the intervals of
// their priors, calib::prior_uncertainty).
std::vector<CollectionEvaluation> evaluate_lmsim(const io::Dataset& d, const std::map<std::string, Theta>& theta,
                                                 const std::vector<std::string>& models);

// Published measurements (io::read_published: the calibration set's layout): one evaluation per source file and
// system, every run (fitted or validation row) predicted with θ for its system (given, else the system preset's
// uncalibrated defaults with their priors' intervals: a shipped θ is given as a θ file, whose provenance names its
// fitted runs).
// The runs θ was fitted on (its provenance's configurations) are scored apart, as predictor "lmsim_in_sample", so
// "lmsim" figures are of runs θ never saw.
std::vector<CollectionEvaluation> evaluate_published(const io::PublishedSet& ps,
                                                     const std::map<std::string, Theta>& theta);

// Another simulator's predictions, CSV columns: model_setting, platform, optimization_config, iteration_time_s,
// peak_memory_gib, and optionally rank_id (per-rank memory rows; `max` or empty for the maximum) and
// simulation_wall_s. Errors name the file, line and field.
std::vector<CollectionEvaluation> evaluate_file(const io::Dataset& d, const std::string& csv, const std::string& name,
                                                const std::vector<std::string>& models);

}  // namespace lmsim::eval
