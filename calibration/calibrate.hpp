// lmsim/calibration/calibrate.hpp — fitting θ to measured runs, scoring predictions, cross-validation.
//
// Owns: turning measured collections into calibration samples, the objective (squared log-ratio errors of
// iteration time, peak memory — per rank where the data has ranks, else the configuration maximum — and
// optionally matrix-kernel latency), the bounded, seeded, deterministic NLopt fit (global stage, then local
// polish from several starts), accuracy reports, and leave-one-out / k-fold / leave-one-model-out CV. Fold fits
// never see their test configurations.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "io/dataset.hpp"
#include "io/published.hpp"
#include "simulator/simulator.hpp"

namespace lmsim::calib {

struct Sample {
  std::string model_setting, config;
  std::string source;            // the collection or publication it comes from (leave-one-source-out groups by it)
  std::string stack;             // the software stack it ran (presets/stacks.json), where known
  bool validation_only = false;  // predicted and scored apart, never fitted (all_indices leaves it out)
  Model model;
  Strategy strategy;
  TrainingSettings settings;
  double time_s = 0;                          // 0: not measured
  double mem_max_bytes = 0;                   // 0: not measured
  std::vector<io::RankValue> mem_rank_bytes;  // empty when only the maximum is known
  bool recompute() const { return strategy.recompute != Recompute::none; }
};

struct MatrixSample {
  std::string model_setting;
  Precision dtype;
  double batch, m, n, k, median_us;
};

struct Weights {
  double time = 1.0;
  double memory = 1.0;
  double matrix = 0.3;  // matrix-kernel latency terms (where the data has them): keep GEMM parameters physical
  // Gaussian prior on every fitted parameter around the start value (the preset's θ), σ from param_table():
  // adds prior / n · Σ ((θ - θ0)/σ)² to the objective, n the runs fitted — the MAP estimate when every run's log
  // error has variance `prior` (the data term is a mean over runs, the prior is not). 0.001: a ~3 % error.
  // Time errors beyond that assumed error count linearly (pseudo-Huber, see objective()); 0: plain least squares.
  double prior = 0.001;
};

struct Problem {
  std::string platform;  // gpu | npu | the system name
  System system;
  PlatformParams start;  // the system preset's defaults
  std::vector<Sample> samples;
  std::vector<MatrixSample> matrix;
  Weights weights;
  std::vector<std::size_t> free;   // indices into param_table() that are fitted; the rest stay at `start`
  std::vector<std::size_t> fixed;  // held at a value the user gave (`--fix`): known, not merely unfitted
};

// Parameters that change only the memory prediction (runtime memory, stored score bytes); all others change only
// the time prediction.
bool memory_param(std::size_t i);

// Samples of one platform (`gpu`/`npu`) or system name, restricted to `models` (model settings or model names;
// empty = all). Throws io::InputError when nothing matches.
Problem make_problem(const io::Dataset& d, const std::string& platform_or_system,
                     const std::vector<std::string>& models = {});
// Samples of one system preset from published measurements (time only; model_setting = model name, source = the
// publication). Throws io::InputError when none is on that system.
Problem make_problem(const io::PublishedSet& ps, const std::string& system);

struct FitOptions {
  unsigned seed = 20261129;
  int global_evals = 6000;
  int local_evals = 3000;
  int starts = 4;  // local polishes: from the global optimum, the preset defaults and random points
  double ftol_rel = 1e-9;
  std::string global_algorithm = "GN_CRS2_LM";
  std::string local_algorithm = "LN_BOBYQA";
};

struct FitResult {
  PlatformParams params;
  double objective = 0;
  int evaluations = 0;
  double wall_s = 0;
  std::vector<std::string> on_bounds;  // fitted parameters within 0.1 % of a bound
  std::vector<std::size_t> train;
};

double objective(const Problem& pb, const std::vector<std::size_t>& idx, const PlatformParams& p);
// The time term's loss: pseudo-Huber of a squared log error `e2` at scale² `d2` (Charbonnier; Hartley & Zisserman,
// Multiple View Geometry, 2nd ed., App. 6.8): e2 for errors well inside the scale, 2·d·|e| beyond it, so a run no
// setting of θ reaches (off by a run-to-run effect the model has no term for) pulls the fit linearly, not
// quadratically. `objective` takes the assumed per-run error (the prior weight, ~3 %) as d2; with no prior the
// loss is the plain square. Iteration times only: peak memory is measured without such scatter.
double robust_sq(double e2, double d2);
// Its curvature relative to the square's, (1 + e2/d2)^(-3/2): the weight a run's Jacobian carries in the
// Gauss-Newton Hessian of the objective (uncertainty.hpp's Laplace approximation). 1 with no prior.
double robust_curvature(double e2, double d2);
// How measured runs are simulated: they evidently ran, so validity is relaxed (padded heads, uneven layers,
// cross-node TP).
SimOptions sim_options(const Problem& pb);
FitResult fit(const Problem& pb, const std::vector<std::size_t>& train, const FitOptions& o);

struct SamplePrediction {
  std::size_t index;
  double time_s;
  double mem_max_bytes;
  std::vector<double> mem_rank_bytes;  // every rank of the job
  bool feasible;
};
std::vector<SamplePrediction> predict(const Problem& pb, const std::vector<std::size_t>& idx, const PlatformParams& p);
// The predictions whose time misses its measurement by more than three times the objective's assumed per-run error
// (3·sqrt(prior), ~10 %): runs the robust time loss counts as outliers, where an effect the model lacks, or a
// measurement to repeat, is to be looked for. Empty without a prior (plain least squares).
std::vector<SamplePrediction> time_outliers(const Problem& pb, const std::vector<SamplePrediction>& preds);

struct StratumReport {
  std::string name;  // <model_setting>, or <model_setting>/<RC|noRC>
  std::size_t n = 0;
  double time_spearman = 0, time_kendall = 0, top1_hit = 0, top1_regret_pct = 0, memory_spearman = 0;
  double top3_regret_pct = 0;
  std::size_t top3_overlap = 0;
  std::string measured_best, predicted_best;
};

struct Report {
  std::size_t n_time = 0, n_memory = 0;
  double time_mae_s = 0, time_smape_pct = 0, time_r2 = 0, time_mape_pct = 0, time_max_ape_pct = 0;
  double memory_mape_pct = 0, memory_smape_pct = 0, memory_rank_mape_pct = 0, memory_spearman = 0;
  double feasible_agreement = 0;
  std::vector<StratumReport> models, strata;
  int top1_strata_hits = 0;
  double min_model_time_spearman = 0, min_model_memory_spearman = 0;
};
Report score(const Problem& pb, const std::vector<SamplePrediction>& preds);

enum class CvKind { none, loo, kfold, leave_one_model_out, leave_one_source_out };
struct CvSpec {
  CvKind kind = CvKind::none;
  int k = 5;
};
CvSpec parse_cv(const std::string& text);  // loo | kfold=K | leave-one-model-out | leave-one-source-out

struct CvResult {
  std::vector<SamplePrediction> out_of_sample;
  Report report;
  std::vector<FitResult> folds;
  std::vector<std::vector<std::size_t>> test_sets;
};
CvResult cross_validate(const Problem& pb, const std::vector<std::size_t>& idx, const CvSpec& cv, const FitOptions& o);

// Calibration coverage (LM-SimBench D.3): the test set fixed (every third configuration when `fixed_test` is
// empty), θ fitted on differently shaped calibration sets of the rest (all, TP endpoints, pp1, RC, noRC; sets of
// fewer than 3 are skipped) and scored on the test set.
struct CoverageRow {
  std::string calibration_set;
  std::size_t n_calibration = 0, n_test = 0;
  Report test;
};
std::vector<CoverageRow> calibration_coverage(const Problem& pb, std::vector<std::size_t> fixed_test,
                                              const FitOptions& o);

// `--free NAME...` (fit exactly these) and `--fix NAME=VALUE` (hold at VALUE, never fitted); unknown names,
// values outside the bounds and a name both fixed and free are input errors.
void restrict_free(Problem& pb, const std::vector<std::string>& free, const std::vector<std::string>& fix);

std::vector<std::size_t> all_indices(const Problem& pb);         // every sample that may be fitted
std::vector<std::size_t> validation_indices(const Problem& pb);  // the validation-only samples
// Indices whose configuration name is in `configs` (exact names, or `model_setting:config`).
std::vector<std::size_t> select(const Problem& pb, const std::vector<std::string>& configs);

}  // namespace lmsim::calib
