// lmsim/calibration/uncertainty.hpp — how far to trust a prediction: θ's covariance and prediction intervals.
//
// Owns: the Laplace approximation of θ's posterior at the MAP fit (Gauss-Newton: the Jacobian of every fitted
// run's log prediction with respect to the free parameters, by central differences, plus the prior's precision),
// the residual log-error scale of time and peak memory, and turning both into prediction intervals for any
// configuration: var(log T) = gᵀ Σ g + s², g = ∂ log T / ∂θ; s is the fitted runs' residual scale, or for a model
// outside them the held-out models' one. Intervals are log-normal, so they are asymmetric in seconds and bytes.
// Beyond the fitted runs' range (sequence, devices, TP/PP/CP/EP degrees) the residual scale grows at a rate measured
// by holding out the runs' own extreme values. Also their measured coverage: per cross-validation fold, and nested
// for models outside the fit.
#pragma once

#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "calibration/calibrate.hpp"

namespace lmsim::calib {

// The residual scales of a fit, which a θ file stores as they are: over its fitted runs, on models held out of
// it, and beyond its fitted range.
struct ResidualScales {
  double time_log_sd = 0;    // residual sd of log(predicted / measured) time over the fitted runs
  double memory_log_sd = 0;  // the same for peak memory; without memory runs, the objective's stated per-run scale
  std::size_t n_time = 0, n_memory = 0;
  // Residual degrees of freedom per kind: runs of that kind less the effective number of parameters its fit used
  // (the hat matrix's trace: at most the free parameters that move that kind; 0: unknown, normal quantiles).
  // Intervals take Student-t quantiles with them.
  double time_dof = 0, memory_dof = 0;
  // The residual scale on runs of a model the fit never saw: the root-mean-square log error of the calibration's
  // leave-one-model-out (or leave-one-source-out) predictions, each made by a fold fitted without that model
  // (0: not measured). Such errors are systematic per model, which the fitted runs' residuals cannot show.
  double unseen_time_log_sd = 0, unseen_memory_log_sd = 0;
  std::size_t unseen_n_time = 0, unseen_n_memory = 0;
  // How fast the error grows beyond the fitted runs' range: log sd per unit of log distance outside it (0: not
  // measured). Measured by holding out each dimension's extreme runs (set_extrapolation_scale); a prediction
  // beyond the range adds (scale · distance)² to its residual variance (beyond_range).
  double extrapolation_time_log_sd = 0, extrapolation_memory_log_sd = 0;
  std::size_t extrapolation_n_time = 0, extrapolation_n_memory = 0;
  // Empty: the scale above was measured on these runs. Else the θ file it was taken from (borrow_extrapolation_scale).
  std::string extrapolation_from;
};

struct Uncertainty : ResidualScales {
  std::vector<std::size_t> free;   // indices into param_table(): the fitted ones, then `n_prior_only` below
  std::vector<double> covariance;  // free.size()² row-major, in the parameters' units
  // The parameters the fit never saw: the data could not identify them (flash attention's or FP8's efficiency
  // without such runs, the inter-node link without a group that crosses a node, DP overlap without overlapped DP
  // traffic, the memory terms without memory measurements) or `--free` left them out. The last `n_prior_only`
  // entries of `free` are those the user did not fix, held at their prior centre with the prior's variance,
  // uncorrelated with the rest: a prediction that leans on one gets that prior's width, and a θ fitted without
  // memory measurements still has a memory interval from what the priors state.
  std::size_t n_prior_only = 0;
};

// The dimensions along which a fit's runs span a range, and predictions are checked against it: outside, the
// terms that scale with them extrapolate.
struct RangeDim {
  const char* name;
  double (*of)(const Model&, const Strategy&, const TrainingSettings&);
};
inline constexpr RangeDim kRangeDims[] = {
    {"seq_length",
     [](const Model&, const Strategy&, const TrainingSettings& t) { return static_cast<double>(t.seq_length); }},
    {"devices", [](const Model&, const Strategy& s, const TrainingSettings&) { return double(s.devices()); }},
    {"tensor_parallel",
     [](const Model&, const Strategy& s, const TrainingSettings&) { return double(s.tensor_parallel); }},
    {"pipeline_parallel",
     [](const Model&, const Strategy& s, const TrainingSettings&) { return double(s.pipeline_parallel); }},
    {"context_parallel",
     [](const Model&, const Strategy& s, const TrainingSettings&) { return double(s.context_parallel); }},
    {"expert_parallel",
     [](const Model&, const Strategy& s, const TrainingSettings&) { return double(s.expert_parallel); }},
    // The model's scale: GEMM shapes, message and activation sizes follow the hidden size. A θ fitted on one model
    // and used for another extrapolates along it.
    {"hidden_size", [](const Model& m, const Strategy&, const TrainingSettings&) { return double(m.hidden_size); }},
    // The routed experts a token chooses among (a dense MLP: one, always chosen). A θ fitted on dense runs and used
    // for an MoE model extrapolates the router, the token permutation, the grouped expert GEMMs and the dispatch,
    // none of which its runs timed.
    {"num_experts", [](const Model& m, const Strategy&, const TrainingSettings&) {
       return m.is_moe() ? double(m.num_experts) : 1.0;
     }}};
// A range per dimension, (name, [min, max]), as a θ file's provenance records it (`provenance.fitted_range`).
using FittedRange = std::vector<std::pair<std::string, std::array<double, 2>>>;
// The range of the runs `idx` of `pb`.
FittedRange fitted_range(const Problem& pb, const std::vector<std::size_t>& idx);
// How far a configuration lies outside `range`: Σ over dimensions of (log of its value over the nearer end)² for
// the dimensions where it is outside (0 inside; dimensions the range does not record count as inside).
double beyond_range_log_sq(const FittedRange& range, const Model& m, const Strategy& s, const TrainingSettings& t);
// The same per dimension of kRangeDims, signed: log(value / max) above the range, −log(min / value) below, 0
// inside. Two configurations beyond the range by the same amount share that extrapolation's error: the
// difference of their logs carries (scale · |δ₁ − δ₂|)², not the sum of both.
std::array<double, std::size(kRangeDims)> beyond_range_logs(const FittedRange& range, const Model& m, const Strategy& s,
                                                            const TrainingSettings& t);

// The extrapolation scale of `u`, by leave-the-extremes-out cross-validation of `pb`'s runs `train`: for each
// dimension of kRangeDims with two or more values, the runs at its largest (and, separately, its smallest) value
// are held out, θ is fitted on the rest (at least three runs), and the held-out runs are predicted from beyond the
// rest's range. Per kind, scale² = max(0, Σ (log error)² − n · s²) / Σ distance², s the fitted runs' residual
// scale: the error in excess of what any run shows, per unit of log distance. Unchanged when nothing can be held
// out (every dimension has one value).
void set_extrapolation_scale(Uncertainty& u, const Problem& pb, const std::vector<std::size_t>& train,
                             const FitOptions& o);
// Where set_extrapolation_scale measured nothing (no dimension had extremes to hold out with three runs left: the
// B200 fit's two runs), the scale of `start`, the uncertainty of the θ file `start_file` the fit started from and
// whose θ is its prior's centre (the B200 fit is the H100 one moved by two runs), stands in, recorded as taken from
// that file. A fit held near another's θ extrapolates as that fit did; no widening at all would claim it
// extrapolates perfectly. Unchanged when `u` has a scale of its own or `start` has none.
void borrow_extrapolation_scale(Uncertainty& u, const Uncertainty& start, const std::string& start_file);
// `u` for a configuration `log_sq` (beyond_range_log_sq) outside the fitted range: each kind's residual variance
// grows by (extrapolation scale)² · log_sq, with at most the extrapolation's held-out runs as degrees of freedom.
// Unchanged inside the range or when no extrapolation scale was measured.
Uncertainty beyond_range(Uncertainty u, double log_sq);

// θ's covariance at `theta` (the fit's optimum) over the training runs `train`.
Uncertainty laplace(const Problem& pb, const std::vector<std::size_t>& train, const PlatformParams& theta);

// Records the held-out scale of a leave-one-model-out or leave-one-source-out cross-validation `cv` of `pb` in `u`
// (other kinds hold out configurations of fitted models and leave `u` as it is).
void set_unseen_scale(Uncertainty& u, const Problem& pb, CvKind kind, const CvResult& cv);
// True when memory's interval comes from the priors alone (θ fitted without memory measurements).
inline bool memory_from_priors(const Uncertainty& u) { return u.n_memory == 0 && u.memory_log_sd > 0; }
// What a θ no run was fitted on is worth (a system preset's uncalibrated defaults, which are the calibration prior's
// centre), as far as the priors state: every parameter prior-only (σ from param_table(), uncorrelated) and each
// kind's residual the objective's stated per-run error `stated_sd` (sqrt of the prior weight, ~3 %) at normal
// quantiles. `predict` and `search` give a system without a fitted θ these intervals; `calibration_bench` and
// `public_bench` measure how much of the measured runs they hold.
Uncertainty prior_uncertainty(double stated_sd = std::sqrt(Weights{}.prior));
// True when time's interval comes from the priors alone (no run fitted: prior_uncertainty).
inline bool time_from_priors(const Uncertainty& u) { return u.n_time == 0 && u.time_log_sd > 0; }

// `u` for a model outside the fitted runs: each kind's residual scale is the larger of the fitted runs' and the
// held-out one, with the held-out runs as its degrees of freedom. Unchanged when no held-out scale was measured.
Uncertainty for_unseen_model(Uncertainty u);

// The uncertainty θ gives one prediction of (m, s, t), the one rule predict, evaluate and the benches' coverage
// follow: a model θ was not fitted on (`model_fitted` false) takes the held-out models' residual scale where θ
// measured one (for_unseen_model), and a configuration beyond θ's fitted range `range` is then widened by θ's
// extrapolation scale (beyond_range). predict takes the first step (for_model) once per model and the second per
// strategy; search takes the first likewise and widens each candidate from the distances it also compares between
// candidates (beyond_range_logs).
struct PredictionUncertainty {
  Uncertainty u;
  bool held_out_scale = false;     // the held-out models' scale was taken
  double beyond_range_log_sq = 0;  // beyond_range_log_sq of `range` (0: inside it)
};
PredictionUncertainty for_model(const Uncertainty& u, bool model_fitted);
PredictionUncertainty for_prediction(const Uncertainty& u, bool model_fitted, const FittedRange& range, const Model& m,
                                     const Strategy& s, const TrainingSettings& t);

struct Interval {
  double value = 0, lower = 0, upper = 0;  // lower/upper at the requested central coverage
};
struct PredictionIntervals {
  Interval time_s_80, time_s_90;
  Interval memory_bytes_80, memory_bytes_90;  // max over ranks; zero width when memory_log_sd is 0
  double time_log_sd = 0, memory_log_sd = 0;  // total (parameter + residual) sd of the logs
};
// The intervals' ends as percentiles, one table for every writer (`iteration_time_s_p05`, ...,
// `max_peak_memory_bytes_p95`): the 90 % interval spans p05-p95, the 80 % one p10-p90.
struct IntervalEnd {
  const char* percentile;  // "p05", "p10", "p90", "p95"
  Interval PredictionIntervals::*time;
  Interval PredictionIntervals::*memory;
  bool upper;
  double of(const Interval& x) const { return upper ? x.upper : x.lower; }
};
inline constexpr IntervalEnd kIntervalEnds[] = {
    {"p05", &PredictionIntervals::time_s_90, &PredictionIntervals::memory_bytes_90, false},
    {"p10", &PredictionIntervals::time_s_80, &PredictionIntervals::memory_bytes_80, false},
    {"p90", &PredictionIntervals::time_s_80, &PredictionIntervals::memory_bytes_80, true},
    {"p95", &PredictionIntervals::time_s_90, &PredictionIntervals::memory_bytes_90, true}};

// A prediction and the gradient of its logs with respect to the free parameters (central differences).
struct LogSensitivity {
  double time_s = 0, memory_bytes = 0;
  std::vector<double> g_time, g_memory;
};
std::optional<LogSensitivity> log_sensitivity(const Model& m, const Strategy& s, const System& sys,
                                              const TrainingSettings& t, const PlatformParams& theta,
                                              const Uncertainty& u, const SimOptions& o = {});
// gᵀ Σ h.
double quad(const Uncertainty& u, const std::vector<double>& g, const std::vector<double>& h);
// The sd of a prediction's log, parameter and residual together: sqrt(s² + gᵀ Σ g). Memory's is 0 when θ has no
// memory scale (an uncertainty written before memory priors were kept: nothing is known of its error).
struct LogSds {
  double time = 0, memory = 0;
};
LogSds total_log_sds(const Uncertainty& u, const LogSensitivity& ls);

// The parameters θ's runs never measured that a prediction leans on: each prior-only parameter whose prior sd moves
// the prediction's log time by at least `min_log_sd` (|g|·σ over ± one prior sd), largest first. A search's best
// layout on a θ fitted without flash-attention runs may owe its place to the flash efficiency's prior centre.
struct PriorLean {
  std::size_t param = 0;   // index into param_table()
  double time_log_sd = 0;  // its share of the time's log sd
  double param_sd = 0;     // the parameter's own sd (its prior's for a prior-only one)
};
std::vector<PriorLean> prior_leans(const Uncertainty& u, const LogSensitivity& ls, double min_log_sd = 0.01);
// What bounds a prediction, parameter by parameter: the elasticity d log T / d log θ of its time to each of `u`'s
// parameters (g·θ; over ± one prior sd for a prior-only one, as its sensitivity is a secant), those of at least
// `min` in size, largest first. A launch-bound MoE layer shows kernel_launch_us near +0.5, a compute-bound dense
// one matmul_efficiency near −1.
struct Elasticity {
  std::size_t param = 0;  // index into param_table()
  double value = 0;       // 10 % more of the parameter: about 10·value % more time
  bool prior_only = false;
};
std::vector<Elasticity> time_elasticities(const Uncertainty& u, const LogSensitivity& ls, const PlatformParams& theta,
                                          double min = 0.01);
// "flash_attention_efficiency 0.5 ± 0.15 (time ± 6.1 %), ..." for a warning: the first `most` of them.
std::string describe(const std::vector<PriorLean>& leans, const PlatformParams& theta,
                     std::size_t most = static_cast<std::size_t>(-1));

// Where a prediction's time interval comes from, as log sds whose squares add up to the total's: the residual scale
// (the fitted runs', or held-out models' for a model outside them), the widening beyond the fitted range, the
// fitted parameters' covariance, and the priors of parameters the runs never measured. `base` is the uncertainty
// before beyond_range, `widened` after it, `ls` the prediction's sensitivities to `widened`'s parameters.
struct TimeSdParts {
  double residual = 0, beyond_range = 0, fitted_parameters = 0, unfitted_priors = 0;
};
TimeSdParts time_sd_parts(const Uncertainty& base, const Uncertainty& widened, const LogSensitivity& ls);
// Where the fitted parameters make most of a wide time interval (a log sd of kLooseFittedLogSd or more, above the
// residual and the unfitted priors' parts): the fitted ones whose marginal sd alone (correlations apart) moves the
// time by a quarter of that or more, largest first; else none. `u` and `ls` as for `parts`. They are the ones θ's
// runs pinned little for this configuration: a B200 θ fitted on two dense runs leaves the kernel launch and
// collective latency near their priors, on which an MoE layer's many small kernels and all-to-alls lean.
constexpr double kLooseFittedLogSd = 0.10;  // well above the 2-4 % residual scales of the shipped fits
std::vector<PriorLean> loosely_fitted(const Uncertainty& u, const LogSensitivity& ls, const TimeSdParts& parts);

// Risk of ranked candidates that share one θ: P(peak ≤ capacity) and P(objective within 5 % of the first
// candidate's). Parameter uncertainty is shared (so the difference of two candidates' logs has variance
// (g_i − g_0)ᵀ Σ (g_i − g_0)); residual errors are independent per configuration.
struct CandidateRisk {
  double p_fits = 0, p_within_5pct = 0;
  double p_in_time = std::nan("");  // P(the training run finishes within a deadline), when the search has one
  double time_p90_s = 0;            // upper end of the central 80 % interval
  double time_log_sd = 0;
};
double normal_cdf(double z);
// Student's t distribution function with `dof` degrees of freedom; dof <= 0 means the normal one. The
// probabilities a search reports (P(fits), P(within 5 %)) use it with the same degrees of freedom as the intervals.
double student_t_cdf(double t, double dof);
// P(peak ≤ capacity) for a predicted peak whose log has sd `memory_log_sd` (parameter and residual) and `dof`
// degrees of freedom; NaN when the sd is 0 (no memory scale: nothing is known of memory error).
double p_fits(double peak_bytes, double capacity_bytes, double memory_log_sd, double dof);
// The central-interval quantile of Student's t with `dof` degrees of freedom for coverage `p` (0.8 → 1.2816 as
// dof → ∞); dof <= 0 means the normal quantile.
double central_quantile(double p, double dof);

// Intervals from a prediction's sensitivities (log_sensitivity, on `u`'s parameters).
PredictionIntervals intervals(const LogSensitivity& ls, const Uncertainty& u);
// Intervals for one configuration; nullopt when the strategy is rejected.
std::optional<PredictionIntervals> intervals(const Model& m, const Strategy& s, const System& sys,
                                             const TrainingSettings& t, const PlatformParams& theta,
                                             const Uncertainty& u, const SimOptions& o = {});

// Measured coverage of the intervals on held-out runs: every CV fold's θ and its own Laplace covariance (from
// that fold's training runs only) predict the fold's test runs.
struct Coverage {
  std::size_t n_time = 0, time_in_80 = 0, time_in_90 = 0;
  std::size_t n_memory = 0, memory_in_80 = 0, memory_in_90 = 0;
};
// Counts one run's measurements (those > 0; memory only when the intervals have a memory scale) into `c`.
void tally(Coverage& c, const PredictionIntervals& iv, double time_s, double mem_max_bytes);
Coverage interval_coverage(const Problem& pb, const CvResult& cv);
// interval_coverage with each fold's intervals widened where a test run lies beyond the fold's range, by the
// extrapolation scale that fold measures on its own runs (set_extrapolation_scale): what a θ calibrate wrote from
// those runs alone would give them.
Coverage widened_coverage(const Problem& pb, const CvResult& cv, const FitOptions& o);
// Coverage on the runs `test` of θ `theta` fitted on the runs `train` with uncertainty `u`, each test run's
// intervals as for_prediction gives them: a model with no run (nor one of the same architecture) in `train` takes
// `u`'s held-out-model scale, a run outside the training runs' range is widened.
Coverage coverage_of(const Problem& pb, const PlatformParams& theta, const Uncertainty& u,
                     const std::vector<std::size_t>& train, const std::vector<std::size_t>& test);
// Coverage of the intervals a model outside the fitted runs gets (for_unseen_model), by nested cross-validation:
// `outer` is a leave-one-model-out or leave-one-source-out cross-validation (`kind`); each of its folds' θ and
// covariance come from its training runs, its held-out scale from an inner cross-validation of the same kind on
// those runs alone, and its extrapolation scale from its own extreme runs (as `calibrate` records both), and its
// intervals predict the held-out group as for_prediction gives them (the held-out scale for a run whose model the
// fold has no run of, widened beyond the fold's range). Empty with fewer than three groups (the inner one needs
// two).
Coverage unseen_model_coverage(const Problem& pb, const CvResult& outer, CvKind kind, const FitOptions& o);

// JSON-able form for θ files (`uncertainty` next to `params`), and back. Reading checks names and sizes.
struct UncertaintyJson : ResidualScales {
  std::vector<std::string> free, prior_only;  // the covariance spans both, in that order
  std::vector<std::vector<double>> covariance;
};
UncertaintyJson to_json_form(const Uncertainty& u);
Uncertainty from_json_form(const UncertaintyJson& j, const std::string& file);

}  // namespace lmsim::calib
