// `lmsim predict` as a function: one simulation with its intervals, and its `--json` report. Shared by the CLI and
// the Python module, so both give the same figures.
#pragma once

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "apps/common.hpp"
#include "search/explain.hpp"

namespace lmsim::app {

struct PredictRequest {
  RunOptions run;
  std::string strategy;
  bool allow_uneven = false, allow_cross_node = false;
  std::string emit;         // megatron | nemo | mindspeed | empty
  double train_tokens = 0;  // > 0: also the training run of that many tokens (training_run)
};

struct PredictResult {
  Resolved r;
  Strategy s;
  Prediction p;
  std::vector<double> mem;  // per rank
  bool has_iv = false;
  calib::PredictionIntervals iv{};
  double p_fits = std::nan("");                   // P(max peak ≤ capacity) when θ's intervals cover memory
  std::vector<std::string> outside_fitted_range;  // dimensions beyond θ's fitted runs (an extrapolation)
  std::vector<calib::PriorLean> unfitted;         // parameters θ's runs never measured that the time leans on
  std::vector<calib::PriorLean> loosely_fitted;   // fitted ones, said where they make most of a wide interval
  std::vector<calib::Elasticity> elasticities;    // d log T / d log θ per parameter (with has_iv)
  double beyond_range_log_sq = 0;                 // calib::beyond_range_log_sq of θ's fitted range (0: inside)
  calib::TimeSdParts time_sd_parts{};             // where the time interval's width comes from (with has_iv)
  // Under plain full recompute: the fewest block-recomputed layers per chunk that still fit (search/explain.hpp).
  std::optional<search::PartialRecompute> partial;
  double partial_p_fits = std::nan("");  // its P(fits), with the same memory interval
  std::string emit;
  bool allow_uneven = false;
  double train_tokens = 0;  // > 0: the training run of that many tokens is reported (run())
  TrainingRun run() const { return training_run(p, s, r.settings, train_tokens); }
  io::Json json() const;  // the `predict --json` document
};

// Throws io::InputError for bad input or a strategy that cannot run the model.
PredictResult predict(const PredictRequest& q);
// The same with the model, system, settings and θ resolved already (resolve(q.run)): several strategies compared
// under one resolution say its notes once. `name_in_warnings` starts each warning with the strategy's name.
PredictResult predict(const PredictRequest& q, const Resolved& r, bool name_in_warnings = false);

}  // namespace lmsim::app
