#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "calibration/calibrate.hpp"
#include "calibration/uncertainty.hpp"
#include "io/io.hpp"

using namespace lmsim;

namespace {
calib::Problem synthetic(const PlatformParams& truth, double noise, unsigned seed) {
  const io::Dataset d = io::read_dataset(io::data_dir() + "/lmsimbench");
  calib::Problem pb = calib::make_problem(d, "npu");
  std::mt19937 rng(seed);
  std::normal_distribution<double> n(0.0, noise);
  for (auto& s : pb.samples) {
    const Prediction p =
        simulate(s.model, s.strategy, pb.system, s.settings, truth, SimOptions{{8, true, true, true}, 0});
    s.time_s = p.iteration_time_s * std::exp(n(rng));
    s.mem_max_bytes = p.max_peak_memory_bytes * std::exp(n(rng));
  }
  for (auto& m : pb.matrix)
    m.median_us = predict_gemm_us(pb.system, m.dtype, truth, m.batch, m.m, m.n, m.k) * std::exp(n(rng));
  return pb;
}
PlatformParams truth() {
  PlatformParams t;
  t.matmul_efficiency = 0.55;
  t.matmul_half_dim = 150;
  t.vector_bandwidth_efficiency = 0.4;
  t.kernel_launch_us = 30;
  t.intra_node_bandwidth_efficiency = 0.5;
  t.collective_latency_us = 20;
  t.dp_overlap = 0.5;
  t.runtime_memory_gib = 0.8;
  t.runtime_memory_fraction = 0.05;
  t.attention_score_bytes = 6;
  return t;
}
}  // namespace

TEST(Calibration, RecoversKnownParametersFromSimulatedData) {
  const calib::Problem pb = synthetic(truth(), 0.005, 7);
  const calib::FitResult r = calib::fit(pb, calib::all_indices(pb), calib::FitOptions{});
  const calib::Report rep = calib::score(pb, calib::predict(pb, calib::all_indices(pb), r.params));
  EXPECT_LT(rep.time_mape_pct, 1.5);
  EXPECT_LT(rep.memory_mape_pct, 1.5);
  // Memory parameters are identified by the memory data alone.
  EXPECT_NEAR(r.params.runtime_memory_fraction, 0.05, 0.02);
  EXPECT_NEAR(r.params.attention_score_bytes, 6, 0.6);
  EXPECT_NEAR(r.params.matmul_efficiency, 0.55, 0.15);
}

// A fit that wants a parameter past its bound (runs twenty times faster than the device's peaks allow) stops on it
// and says so, upper bound or lower: `calibrate` warns of each with the effect it may be absorbing.
TEST(Calibration, AParameterPushedPastItsBoundIsReportedOnIt) {
  const io::Dataset d = io::read_dataset(io::data_dir() + "/lmsimbench");
  calib::Problem pb = calib::make_problem(d, "gpu");
  for (auto& s : pb.samples) s.time_s /= 20;
  const calib::FitResult r = calib::fit(pb, calib::all_indices(pb), calib::FitOptions{});
  auto on_bound = [&](const char* name) {
    return std::find(r.on_bounds.begin(), r.on_bounds.end(), name) != r.on_bounds.end();
  };
  EXPECT_TRUE(on_bound("vector_bandwidth_efficiency")) << r.params.vector_bandwidth_efficiency;  // upper: 1
  EXPECT_NEAR(r.params.vector_bandwidth_efficiency, 1.0, 1e-3);
  EXPECT_TRUE(on_bound("kernel_launch_us")) << r.params.kernel_launch_us;  // lower: 0
  for (const auto& name : r.on_bounds)
    for (const auto& info : param_table())
      if (name == info.name) {
        const double v = r.params.*(info.field), span = info.upper - info.lower;
        EXPECT_TRUE(v - info.lower < 1e-3 * span || info.upper - v < 1e-3 * span) << name << " = " << v;
      }
}

// The time term is pseudo-Huber at the assumed per-run error (the prior weight): a small error counts as its
// square, a run off by a factor e counts about 2·sqrt(prior) per unit of log error, not 1; no prior, plain squares.
TEST(Calibration, TimeErrorsBeyondTheAssumedRunErrorCountLinearly) {
  const io::Dataset d = io::read_dataset(io::data_dir() + "/lmsimbench");
  calib::Problem pb = calib::make_problem(d, "gpu");
  pb.matrix.clear();
  pb.samples.resize(1);
  calib::Sample& s = pb.samples[0];
  s.mem_max_bytes = 0;
  s.mem_rank_bytes.clear();
  const double predicted = calib::predict(pb, {0}, pb.start)[0].time_s;
  auto objective_at = [&](double log_error, double prior) {
    s.time_s = predicted * std::exp(-log_error);
    pb.weights.prior = prior;
    return calib::objective(pb, {0}, pb.start);  // θ at the prior centre: no prior term
  };
  EXPECT_NEAR(objective_at(0.005, 0.001), 0.005 * 0.005, 0.01 * 0.005 * 0.005);
  const double far = objective_at(1.0, 0.001);
  EXPECT_NEAR(far, 2 * 0.001 * (std::sqrt(1 + 1 / 0.001) - 1), 1e-9);
  EXPECT_LT(far, 0.07);
  EXPECT_NEAR(objective_at(1.0, 0.0), 1.0, 1e-9);
  // The Laplace approximation weights each time run by the loss's curvature: its second derivative in the log error,
  // relative to the square's 2, so the Hessian is that of the objective minimised.
  for (double e : {0.0, 0.02, 0.1, 0.3}) {
    const double h = 1e-4, d2 = 0.001;
    const double second = (calib::robust_sq((e + h) * (e + h), d2) - 2 * calib::robust_sq(e * e, d2) +
                           calib::robust_sq((e - h) * (e - h), d2)) /
                          (h * h);
    EXPECT_NEAR(calib::robust_curvature(e * e, d2), second / 2, 1e-4) << e;
  }
  EXPECT_DOUBLE_EQ(calib::robust_curvature(0.09, 0.0), 1.0);
}

// Kernel latencies are measurements of a model's training runs: a fit on one model's runs (a leave-one-model-out
// fold) uses that model's kernels only, never the held-out model's.
TEST(Calibration, AFitUsesOnlyTheKernelLatenciesOfTheModelsItFits) {
  const io::Dataset d = io::read_dataset(io::data_dir() + "/lmsimbench");
  calib::Problem pb = calib::make_problem(d, "npu");
  std::vector<std::size_t> small;
  for (auto i : calib::all_indices(pb))
    if (pb.samples[i].model_setting == "qwen3_0.6b_4k") small.push_back(i);
  ASSERT_FALSE(small.empty());
  const double before = calib::objective(pb, small, pb.start),
               all = calib::objective(pb, calib::all_indices(pb), pb.start);
  bool other = false;
  for (auto& m : pb.matrix)
    if (m.model_setting != "qwen3_0.6b_4k") {
      m.median_us *= 10;
      other = true;
    }
  ASSERT_TRUE(other);
  EXPECT_DOUBLE_EQ(calib::objective(pb, small, pb.start), before);
  EXPECT_GT(calib::objective(pb, calib::all_indices(pb), pb.start), all);  // the joint fit does use them
}

// Outliers are runs beyond three times the assumed per-run error; without a prior nothing is assumed.
TEST(Calibration, TimeOutliersLieBeyondThreeTimesTheAssumedRunError) {
  const io::Dataset d = io::read_dataset(io::data_dir() + "/lmsimbench");
  calib::Problem pb = calib::make_problem(d, "gpu");
  auto preds = calib::predict(pb, {0, 1, 2}, pb.start);
  preds[0].time_s = pb.samples[0].time_s * 1.05;  // inside 3 x 3.2 %
  preds[1].time_s = pb.samples[1].time_s * 0.85;  // beyond
  preds[2].time_s = pb.samples[2].time_s * 1.12;  // beyond
  const auto out = calib::time_outliers(pb, preds);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].index, 1u);
  EXPECT_EQ(out[1].index, 2u);
  pb.weights.prior = 0;
  EXPECT_TRUE(calib::time_outliers(pb, preds).empty());
}

TEST(Calibration, SameSeedSameTheta) {
  const calib::Problem pb = synthetic(truth(), 0.02, 3);
  calib::FitOptions o;
  o.global_evals = 1500;
  o.local_evals = 800;
  const auto a = calib::fit(pb, calib::all_indices(pb), o);
  const auto b = calib::fit(pb, calib::all_indices(pb), o);
  EXPECT_EQ(a.params, b.params);
  EXPECT_EQ(a.evaluations, b.evaluations);
}

TEST(Calibration, TimeParametersDoNotDependOnTheMemoryFit) {
  // Time and memory depend on disjoint parameters: holding a memory parameter must not move the time fit.
  const calib::Problem pb = synthetic(truth(), 0.02, 11);
  calib::Problem held = pb;
  calib::restrict_free(held, {}, {"attention_score_bytes=3", "runtime_memory_fraction=0.3"});
  const auto a = calib::fit(pb, calib::all_indices(pb), calib::FitOptions{});
  const auto b = calib::fit(held, calib::all_indices(held), calib::FitOptions{});
  for (const char* n : {"matmul_efficiency", "matmul_half_dim", "vector_bandwidth_efficiency", "kernel_launch_us",
                        "intra_node_bandwidth_efficiency", "collective_latency_us", "dp_overlap"})
    for (std::size_t i = 0; i < kNumParams; ++i)
      if (param_table()[i].name == std::string(n)) {
        EXPECT_DOUBLE_EQ(get(a.params, i), get(b.params, i)) << n;
      }
  EXPECT_EQ(b.params.attention_score_bytes, 3);
  EXPECT_NE(a.params.attention_score_bytes, 3);
}

TEST(Calibration, CoverageFitsEachShapeOnTheRestAndScoresTheFixedTestSet) {
  const calib::Problem pb = synthetic(truth(), 0.01, 13);
  calib::FitOptions o;
  o.global_evals = 800;
  o.local_evals = 400;
  const auto rows = calib::calibration_coverage(pb, {}, o);
  ASSERT_FALSE(rows.empty());
  const std::size_t n_test = (pb.samples.size() + 2) / 3;  // every third configuration
  for (const auto& r : rows) {
    EXPECT_EQ(r.n_test, n_test) << r.calibration_set;
    EXPECT_GE(r.n_calibration, 3u);
    EXPECT_LE(r.n_calibration + r.n_test, pb.samples.size());
    EXPECT_TRUE(std::isfinite(r.test.time_mape_pct));
  }
  EXPECT_EQ(rows.front().calibration_set, "RC only");  // sorted by name; "all remaining" has every other run
  for (const auto& r : rows)
    if (r.calibration_set == "all remaining") {
      EXPECT_EQ(r.n_calibration, pb.samples.size() - n_test);
    }
}

TEST(Calibration, CrossValidationNeverFitsOnItsTestConfigurations) {
  const calib::Problem pb = synthetic(truth(), 0.02, 5);
  calib::FitOptions o;
  o.global_evals = 300;
  o.local_evals = 200;
  o.starts = 1;
  for (const auto& cv :
       {calib::CvSpec{calib::CvKind::kfold, 4}, calib::CvSpec{calib::CvKind::leave_one_model_out, 0}}) {
    const calib::CvResult r = calib::cross_validate(pb, calib::all_indices(pb), cv, o);
    ASSERT_EQ(r.folds.size(), r.test_sets.size());
    std::set<std::size_t> covered;
    for (std::size_t f = 0; f < r.folds.size(); ++f) {
      const std::set<std::size_t> train(r.folds[f].train.begin(), r.folds[f].train.end());
      for (auto i : r.test_sets[f]) {
        EXPECT_FALSE(train.count(i)) << "fold " << f << " fitted on test sample " << i;
        covered.insert(i);
      }
    }
    EXPECT_EQ(covered.size(), pb.samples.size());
    EXPECT_EQ(r.out_of_sample.size(), pb.samples.size());
  }
}

TEST(Calibration, BadInputsGiveClearErrors) {
  const io::Dataset d = io::read_dataset(io::data_dir() + "/lmsimbench");
  EXPECT_THROW(calib::make_problem(d, "tpu"), io::InputError);
  EXPECT_THROW(calib::make_problem(d, "gpu", {"NoSuchModel"}), io::InputError);
  EXPECT_THROW(calib::parse_cv("kfold=1"), io::InputError);
  EXPECT_THROW(calib::parse_cv("kfold=x"), io::InputError);
  EXPECT_THROW(calib::parse_cv("bootstrap"), io::InputError);
  EXPECT_EQ(calib::parse_cv("kfold=5").k, 5);
  const calib::Problem pb = calib::make_problem(d, "gpu", {"qwen3_0.6b_4k"});
  EXPECT_EQ(pb.samples.size(), 15u);
  EXPECT_THROW(calib::fit(pb, {}, calib::FitOptions{}), io::InputError);
  EXPECT_THROW(calib::cross_validate(pb, calib::all_indices(pb), {calib::CvKind::leave_one_model_out, 0}, {}),
               io::InputError);
  EXPECT_TRUE(calib::select(pb, {"dp8-tp1-pp1-cp1-RC", "qwen3_0.6b_4k:dp4-tp2-pp1-cp1-noRC"}).size() == 2);
}

TEST(Uncertainty, IntervalsContainThePredictionAndWidenWithLessData) {
  const io::Dataset d = io::read_dataset(io::data_dir() + "/lmsimbench");
  const calib::Problem pb = calib::make_problem(d, "gpu");
  const auto all = calib::all_indices(pb);
  const calib::FitResult fr = calib::fit(pb, all, calib::FitOptions{});
  const calib::Uncertainty u = calib::laplace(pb, all, fr.params);
  const std::size_t k = u.free.size();
  ASSERT_EQ(u.covariance.size(), k * k);
  for (std::size_t a = 0; a < k; ++a) {
    EXPECT_GE(u.covariance[a * k + a], 0);
    for (std::size_t b = 0; b < k; ++b)
      EXPECT_NEAR(u.covariance[a * k + b], u.covariance[b * k + a], 1e-9 * (1 + std::fabs(u.covariance[a * k + b])));
  }
  EXPECT_GT(u.time_log_sd, 0);
  EXPECT_GT(u.memory_log_sd, 0);
  // The residual scales are the unbiased ones: squared log errors over the degrees of freedom they report.
  double st = 0, sm = 0;
  for (auto i : all) {
    const calib::Sample& r = pb.samples[i];
    const Prediction p = simulate(r.model, r.strategy, pb.system, r.settings, fr.params, calib::sim_options(pb));
    ASSERT_TRUE(p.ok());
    st += std::pow(std::log(p.iteration_time_s / r.time_s), 2);
    sm += std::pow(std::log(p.max_peak_memory_bytes / r.mem_max_bytes), 2);
  }
  EXPECT_NEAR(u.time_log_sd * u.time_log_sd * u.time_dof, st, 1e-9 * st);
  EXPECT_NEAR(u.memory_log_sd * u.memory_log_sd * u.memory_dof, sm, 1e-9 * sm);
  EXPECT_LT(u.time_dof, static_cast<double>(all.size()));  // the free parameters take their share
  const calib::Sample& s = pb.samples[0];
  const auto iv = calib::intervals(s.model, s.strategy, pb.system, s.settings, fr.params, u, calib::sim_options(pb));
  ASSERT_TRUE(iv);
  EXPECT_LT(iv->time_s_90.lower, iv->time_s_80.lower);
  EXPECT_LT(iv->time_s_80.lower, iv->time_s_80.value);
  EXPECT_GT(iv->time_s_80.upper, iv->time_s_80.value);
  EXPECT_GT(iv->time_s_90.upper, iv->time_s_80.upper);
  EXPECT_GT(iv->memory_bytes_90.upper, iv->memory_bytes_80.upper);
  // The same θ known from a quarter of the runs: its parameter part of the interval is wider.
  std::vector<std::size_t> few(all.begin(), all.begin() + static_cast<long>(all.size() / 4));
  calib::Uncertainty uf = calib::laplace(pb, few, fr.params);
  uf.time_log_sd = u.time_log_sd;  // compare the parameter part only
  const auto ivf = calib::intervals(s.model, s.strategy, pb.system, s.settings, fr.params, uf, calib::sim_options(pb));
  ASSERT_TRUE(ivf);
  EXPECT_GT(ivf->time_log_sd, iv->time_log_sd);
}

// A θ fitted without memory measurements (the published GPU sets give times only) still gets a memory interval:
// the memory parameters it never saw keep their prior, and the residual scale is the objective's stated one.
TEST(Uncertainty, WithoutMemoryRunsMemoryIntervalsComeFromThePriors) {
  const io::Dataset d = io::read_dataset(io::data_dir() + "/lmsimbench");
  calib::Problem pb = calib::make_problem(d, "gpu");
  for (auto& s : pb.samples) s.mem_max_bytes = 0;
  pb.free.erase(std::remove_if(pb.free.begin(), pb.free.end(), calib::memory_param), pb.free.end());
  const auto all = calib::all_indices(pb);
  const calib::Uncertainty u = calib::laplace(pb, all, pb.start);
  EXPECT_EQ(u.n_memory, 0u);
  ASSERT_TRUE(calib::memory_from_priors(u));
  // Every parameter the fit left out keeps its prior: the memory ones (runtime memory, its allocator share, stored
  // score bytes) and those the V100 runs cannot identify (inter-node link, DP overlap, FP8, flash attention).
  ASSERT_EQ(u.n_prior_only, kNumParams - pb.free.size());
  const std::size_t k = u.free.size();
  std::size_t memory_priors = 0;
  for (std::size_t a = k - u.n_prior_only; a < k; ++a) {
    memory_priors += calib::memory_param(u.free[a]) ? 1 : 0;
    const double sd = param_table()[u.free[a]].prior_sd;
    EXPECT_DOUBLE_EQ(u.covariance[a * k + a], sd * sd);
    for (std::size_t b = 0; b < k; ++b) EXPECT_TRUE(b == a || u.covariance[a * k + b] == 0.0);
  }
  EXPECT_EQ(memory_priors, 3u);
  EXPECT_NEAR(u.memory_log_sd, std::sqrt(pb.weights.prior), 1e-12);
  const calib::Sample& s = pb.samples[0];
  const auto iv = calib::intervals(s.model, s.strategy, pb.system, s.settings, pb.start, u, calib::sim_options(pb));
  ASSERT_TRUE(iv);
  EXPECT_GT(iv->memory_log_sd, u.memory_log_sd);  // the runtime terms' prior adds to the stated error
  EXPECT_LT(iv->memory_bytes_80.lower, iv->memory_bytes_80.value);
  EXPECT_TRUE(std::isfinite(calib::p_fits(iv->memory_bytes_80.value, 32.0 * (1 << 30), iv->memory_log_sd, 0)));
  // A parameter the user fixed is known, not merely unfitted: it gets no prior variance.
  calib::restrict_free(pb, {}, {"runtime_memory_gib=2"});
  const calib::Uncertainty uf = calib::laplace(pb, all, pb.start);
  EXPECT_EQ(uf.n_prior_only, u.n_prior_only - 1);
  for (auto i : uf.free) EXPECT_STRNE(param_table()[i].name, "runtime_memory_gib");
  // With memory measurements the residuals say how far memory is off: nothing is taken from the priors.
  const calib::Problem measured = calib::make_problem(d, "gpu");
  EXPECT_FALSE(calib::memory_from_priors(calib::laplace(measured, all, measured.start)));
}

// An uncalibrated preset (no run fitted: its values are the prior's centre) gets the intervals its priors state:
// every parameter at its prior sd and the stated per-run error. They hold a prediction made one prior sd away
// from the centre and not one three sds away.
TEST(Uncertainty, AnUncalibratedPresetsIntervalsAreItsPriors) {
  const io::Dataset d = io::read_dataset(io::data_dir() + "/lmsimbench");
  const calib::Problem pb = calib::make_problem(d, "gpu");
  const calib::Uncertainty u = calib::prior_uncertainty();
  ASSERT_TRUE(calib::time_from_priors(u));
  ASSERT_TRUE(calib::memory_from_priors(u));
  EXPECT_EQ(u.n_prior_only, kNumParams);
  EXPECT_NEAR(u.time_log_sd, std::sqrt(pb.weights.prior), 1e-12);
  EXPECT_FALSE(calib::time_from_priors(calib::laplace(pb, calib::all_indices(pb), pb.start)));
  const PlatformParams& preset = pb.start;
  std::size_t matmul = kNumParams;
  for (std::size_t i = 0; i < kNumParams; ++i)
    if (std::string(param_table()[i].name) == "matmul_efficiency") matmul = i;
  ASSERT_LT(matmul, kNumParams);
  const double sd = param_table()[matmul].prior_sd;
  ASSERT_GT(get(preset, matmul) - 3 * sd, param_table()[matmul].lower);
  const calib::Sample& s = pb.samples[0];
  const SimOptions so = calib::sim_options(pb);
  const auto iv = calib::intervals(s.model, s.strategy, pb.system, s.settings, preset, u, so);
  ASSERT_TRUE(iv);
  EXPECT_GT(iv->time_log_sd, u.time_log_sd);  // the parameters' priors widen the stated error
  auto time_at = [&](double matmul_efficiency) {
    PlatformParams p = preset;
    set(p, matmul, matmul_efficiency);
    return simulate(s.model, s.strategy, pb.system, s.settings, p, so).iteration_time_s;
  };
  const double one_sd = time_at(get(preset, matmul) - sd), three_sd = time_at(get(preset, matmul) - 3 * sd);
  EXPECT_LT(one_sd, iv->time_s_90.upper);
  EXPECT_GT(one_sd, iv->time_s_90.value);
  EXPECT_GT(three_sd, iv->time_s_90.upper);
}

// A prediction that leans on a parameter the fit never saw carries that parameter's prior: the V100 runs store
// their scores, so a flash-attention layout on the V100 θ depends on a flash efficiency nothing measured. Its time
// interval is wider than the same layout's with scores stored, and narrows again when the user fixes the efficiency.
TEST(Uncertainty, APredictionOnAnUnfittedParameterCarriesItsPrior) {
  const io::Dataset d = io::read_dataset(io::data_dir() + "/lmsimbench");
  calib::Problem pb = calib::make_problem(d, "gpu");
  const auto all = calib::all_indices(pb);
  const calib::FitResult fr = calib::fit(pb, all, calib::FitOptions{});
  const calib::Uncertainty u = calib::laplace(pb, all, fr.params);
  const auto flash = std::find_if(u.free.end() - static_cast<long>(u.n_prior_only), u.free.end(), [](std::size_t i) {
    return std::string(param_table()[i].name) == "flash_attention_efficiency";
  });
  ASSERT_NE(flash, u.free.end());
  const calib::Sample s = pb.samples[0];  // a copy: restrict_free below replaces the problem
  TrainingSettings with_flash = s.settings;
  with_flash.flash_attention = true;
  const auto so = calib::sim_options(pb);
  const auto stored = calib::intervals(s.model, s.strategy, pb.system, s.settings, fr.params, u, so);
  const auto fl = calib::intervals(s.model, s.strategy, pb.system, with_flash, fr.params, u, so);
  ASSERT_TRUE(stored && fl);
  // The 4K-token attention core is a large share of a Qwen3 layer: a ±0.15 prior on a 0.5 efficiency moves it
  // by some 30 %, several points of the iteration.
  EXPECT_GT(fl->time_log_sd, stored->time_log_sd + 0.02);
  // Where the width comes from: the parts' squares add up to the total's, and the flash prior is one of them.
  const auto ls = calib::log_sensitivity(s.model, s.strategy, pb.system, with_flash, fr.params, u, so);
  ASSERT_TRUE(ls);
  const calib::TimeSdParts parts = calib::time_sd_parts(u, u, *ls);
  EXPECT_NEAR(
      std::sqrt(parts.residual * parts.residual + parts.beyond_range * parts.beyond_range +
                parts.fitted_parameters * parts.fitted_parameters + parts.unfitted_priors * parts.unfitted_priors),
      fl->time_log_sd, 1e-9);
  EXPECT_GT(parts.unfitted_priors, 0.02);
  EXPECT_DOUBLE_EQ(parts.beyond_range, 0.0);
  calib::restrict_free(pb, {}, {"flash_attention_efficiency=0.5"});
  const calib::Uncertainty known = calib::laplace(pb, all, fr.params);
  EXPECT_EQ(known.n_prior_only, u.n_prior_only - 1);
  const auto fk = calib::intervals(s.model, s.strategy, pb.system, with_flash, fr.params, known, so);
  ASSERT_TRUE(fk);
  EXPECT_LT(fk->time_log_sd, fl->time_log_sd - 0.02);
}

// Beyond the fitted runs' range the intervals widen at the rate the calibration measured by holding out its own
// runs' extreme values: the distance is the summed squared log distances outside the range, per dimension.
TEST(Uncertainty, BeyondTheFittedRangeIntervalsWidenAtTheMeasuredRate) {
  const calib::FittedRange range{{"seq_length", {2048, 8192}}, {"tensor_parallel", {1, 4}}};
  const Model m0 = io::presets().find_model("Qwen3-1.7B")->model;
  Strategy s = io::parse_strategy("dp2-tp4-pp1-cp1-noRC");
  TrainingSettings t;
  t.seq_length = 4096;
  EXPECT_DOUBLE_EQ(calib::beyond_range_log_sq(range, m0, s, t), 0.0);
  t.seq_length = 32768;
  EXPECT_NEAR(calib::beyond_range_log_sq(range, m0, s, t), std::pow(std::log(4.0), 2), 1e-12);
  s = io::parse_strategy("dp1-tp8-pp1-cp1-noRC");
  t.seq_length = 1024;  // below the range counts as well, with its own sign
  EXPECT_NEAR(calib::beyond_range_log_sq(range, m0, s, t), 2 * std::pow(std::log(2.0), 2), 1e-12);
  const auto logs = calib::beyond_range_logs(range, m0, s, t);
  EXPECT_NEAR(logs[0], -std::log(2.0), 1e-12);  // seq_length, below
  EXPECT_NEAR(logs[2], std::log(2.0), 1e-12);   // tensor_parallel, above
  calib::Uncertainty u;
  u.time_log_sd = 0.03;
  u.time_dof = 20;
  EXPECT_DOUBLE_EQ(calib::beyond_range(u, 1.0).time_log_sd, 0.03);  // no scale measured: unchanged
  u.extrapolation_time_log_sd = 0.05;
  u.extrapolation_n_time = 12;
  EXPECT_DOUBLE_EQ(calib::beyond_range(u, 0.0).time_log_sd, 0.03);  // inside: unchanged
  const calib::Uncertainty w = calib::beyond_range(u, 4.0);
  EXPECT_NEAR(w.time_log_sd, std::sqrt(0.03 * 0.03 + 0.05 * 0.05 * 4.0), 1e-12);
  EXPECT_DOUBLE_EQ(w.time_dof, 12.0);  // no more certain than the held-out runs that measured the scale

  // Measured on the V100 runs: TP 1-8 and PP 1-4 have extremes to hold out (one sequence length, 8 devices).
  const io::Dataset d = io::read_dataset(io::data_dir() + "/lmsimbench");
  const calib::Problem pb = calib::make_problem(d, "gpu");
  const auto all = calib::all_indices(pb);
  const calib::FitResult fr = calib::fit(pb, all, calib::FitOptions{});
  calib::Uncertainty m = calib::laplace(pb, all, fr.params);
  calib::set_extrapolation_scale(m, pb, all, calib::FitOptions{});
  EXPECT_GT(m.extrapolation_n_time, 0u);
  EXPECT_GT(m.extrapolation_time_log_sd, 0.0);
  EXPECT_LT(m.extrapolation_time_log_sd, 0.2);
  EXPECT_GT(m.extrapolation_n_memory, 0u);
  const calib::Uncertainty back = calib::from_json_form(calib::to_json_form(m), "theta.json");
  EXPECT_DOUBLE_EQ(back.extrapolation_time_log_sd, m.extrapolation_time_log_sd);
  EXPECT_EQ(back.extrapolation_n_memory, m.extrapolation_n_memory);
  // A 64-device layout of the same model lies log(8) beyond the 8 fitted devices: its interval is wider.
  const calib::Sample& smp = pb.samples[0];
  Strategy big = smp.strategy;
  big.data_parallel *= 8;
  const calib::FittedRange fitted = calib::fitted_range(pb, all);
  EXPECT_NEAR(calib::beyond_range_log_sq(fitted, smp.model, big, smp.settings), std::pow(std::log(8.0), 2), 1e-9);
  // A larger model is an extrapolation too: Qwen3-8B's hidden size 4096 lies an e-fold of log 2 beyond 1024-2048.
  EXPECT_NEAR(
      calib::beyond_range_log_sq(fitted, io::presets().find_model("Qwen3-8B")->model, smp.strategy, smp.settings),
      std::pow(std::log(2.0), 2), 1e-9);
  // So is an MoE model on dense runs: Qwen3-30B-A3B's hidden size 2048 is inside, its 128 routed experts lie
  // log(128) beyond the dense runs' one.
  EXPECT_NEAR(
      calib::beyond_range_log_sq(fitted, io::presets().find_model("Qwen3-30B-A3B")->model, smp.strategy, smp.settings),
      std::pow(std::log(128.0), 2), 1e-9);
  const auto so = calib::sim_options(pb);
  const auto in = calib::intervals(smp.model, big, pb.system, smp.settings, fr.params, m, so);
  const auto out =
      calib::intervals(smp.model, big, pb.system, smp.settings, fr.params,
                       calib::beyond_range(m, calib::beyond_range_log_sq(fitted, smp.model, big, smp.settings)), so);
  ASSERT_TRUE(in && out);
  EXPECT_GT(out->time_log_sd, in->time_log_sd + 0.5 * m.extrapolation_time_log_sd * std::log(8.0));
}

// A fit with too few runs to hold any extreme out (the B200's two) takes the extrapolation scale of the θ it started
// from, says whence, and keeps it through the θ file; a fit that measured its own keeps that.
TEST(Uncertainty, TooFewRunsTakeTheStartThetasExtrapolationScale) {
  calib::Uncertainty start;
  start.extrapolation_time_log_sd = 0.023;
  start.extrapolation_n_time = 48;
  calib::Uncertainty u;
  u.time_log_sd = 0.03;
  calib::borrow_extrapolation_scale(u, start, "h100.json");
  EXPECT_DOUBLE_EQ(u.extrapolation_time_log_sd, 0.023);
  EXPECT_EQ(u.extrapolation_n_time, 48u);
  EXPECT_EQ(u.extrapolation_from, "h100.json");
  EXPECT_GT(calib::beyond_range(u, 4.0).time_log_sd, 0.03);  // it widens now
  const calib::Uncertainty back = calib::from_json_form(calib::to_json_form(u), "b200.json");
  EXPECT_EQ(back.extrapolation_from, "h100.json");
  calib::Uncertainty chain;  // taken from a θ that took it itself: the file that measured it is named
  calib::borrow_extrapolation_scale(chain, back, "b200.json");
  EXPECT_EQ(chain.extrapolation_from, "h100.json");
  calib::Uncertainty own;
  own.extrapolation_time_log_sd = 0.05;
  own.extrapolation_n_time = 6;
  calib::borrow_extrapolation_scale(own, start, "h100.json");
  EXPECT_DOUBLE_EQ(own.extrapolation_time_log_sd, 0.05);
  EXPECT_TRUE(own.extrapolation_from.empty());
  calib::Uncertainty none;  // nothing to take: no widening, as before
  calib::borrow_extrapolation_scale(none, calib::Uncertainty{}, "preset");
  EXPECT_EQ(none.extrapolation_n_time, 0u);
  EXPECT_TRUE(none.extrapolation_from.empty());
}

// Residual degrees of freedom per kind: the V100 fit frees runtime-memory terms that move memory only and
// compute / communication terms that move time only; intervals use Student-t quantiles with them.
TEST(Uncertainty, EachKindLosesTheEffectiveParametersOfItsFit) {
  EXPECT_NEAR(calib::central_quantile(0.9, 0), 1.6448536269514722, 1e-12);  // normal
  EXPECT_NEAR(calib::central_quantile(0.8, 0), 1.2815515655446004, 1e-12);
  EXPECT_NEAR(calib::central_quantile(0.99, 0), 2.5758293035489004, 1e-12);
  EXPECT_NEAR(calib::central_quantile(0.9, 6), 1.943180, 2e-3);  // Student t tables
  EXPECT_NEAR(calib::central_quantile(0.8, 6), 1.439756, 2e-3);
  EXPECT_NEAR(calib::central_quantile(0.9, 3), 2.353363, 1e-2);
  EXPECT_NEAR(calib::central_quantile(0.9, 30), 1.697261, 1e-4);
  // The distribution function the search's probabilities use: closed forms at 1 and 2 degrees of freedom
  // (Cauchy: 1/2 + atan(t)/π; ν = 2: 1/2 + t / (2 sqrt(2 + t²))), tables at 6, the normal one at 0.
  EXPECT_NEAR(calib::student_t_cdf(1.0, 1), 0.75, 1e-12);
  EXPECT_NEAR(calib::student_t_cdf(-3.0, 1), 0.5 + std::atan(-3.0) / M_PI, 1e-12);
  EXPECT_NEAR(calib::student_t_cdf(2.0, 2), 0.5 + 2.0 / (2 * std::sqrt(6.0)), 1e-12);
  EXPECT_NEAR(calib::student_t_cdf(1.943180, 6), 0.95, 1e-6);
  EXPECT_NEAR(calib::student_t_cdf(-1.439756, 6), 0.10, 1e-6);
  EXPECT_NEAR(calib::student_t_cdf(1.2815515655446004, 0), 0.9, 1e-12);
  EXPECT_DOUBLE_EQ(calib::student_t_cdf(0.0, 4), 0.5);
  // ... and agrees with the interval quantiles: the 90 % interval's end is the 95th percentile.
  for (double dof : {3.0, 5.0, 12.0})
    EXPECT_NEAR(calib::student_t_cdf(calib::central_quantile(0.9, dof), dof), 0.95, 2e-3);
  const io::Dataset d = io::read_dataset(io::data_dir() + "/lmsimbench");
  const calib::Problem pb = calib::make_problem(d, "gpu");
  const auto all = calib::all_indices(pb);
  const calib::FitResult fr = calib::fit(pb, all, calib::FitOptions{});
  const calib::Uncertainty u = calib::laplace(pb, all, fr.params);
  std::size_t memory_only = 0;
  for (std::size_t a = 0; a + u.n_prior_only < u.free.size(); ++a) {  // the fitted ones
    const std::string n = param_table()[u.free[a]].name;
    memory_only += n == "runtime_memory_gib" || n == "runtime_memory_fraction" || n == "attention_score_bytes";
  }
  ASSERT_EQ(memory_only, 3u);
  // The runs' degrees of freedom less the effective number of parameters (the hat matrix's trace): never more
  // than the free parameters that move a kind, and with the prior switched off exactly that many (a free
  // parameter no run's time depends on, dp_overlap on one node with nothing to overlap, costs none) ...
  const double time_params = static_cast<double>(u.free.size() - u.n_prior_only - memory_only);
  EXPECT_GE(u.time_dof, static_cast<double>(u.n_time) - time_params);
  EXPECT_LT(u.time_dof, static_cast<double>(u.n_time - 2));
  EXPECT_GE(u.memory_dof, static_cast<double>(u.n_memory - memory_only) - 1e-9);
  calib::Problem flat = pb;
  flat.weights.prior = 0;
  const calib::Uncertainty u0 = calib::laplace(flat, all, fr.params);
  EXPECT_NEAR(u0.memory_dof, static_cast<double>(u0.n_memory - memory_only), 1e-3);
  EXPECT_LT(u0.time_dof, static_cast<double>(u0.n_time) - time_params + 1.5);
  EXPECT_LE(u0.time_dof, u.time_dof + 1e-9);
  // ... while a prior that holds every parameter leaves nearly all of them to the residuals.
  calib::Problem firm = pb;
  firm.weights.prior = 1e4;
  EXPECT_GT(calib::laplace(firm, all, fr.params).time_dof, static_cast<double>(u.n_time) - 0.5);
  const calib::Sample& s = pb.samples[0];
  const auto iv = calib::intervals(s.model, s.strategy, pb.system, s.settings, fr.params, u, calib::sim_options(pb));
  ASSERT_TRUE(iv);
  EXPECT_NEAR(std::log(iv->time_s_90.upper / iv->time_s_90.value),
              calib::central_quantile(0.9, u.time_dof) * iv->time_log_sd, 1e-9);
  // Fewer runs than time parameters: the fit passes through them, so the residual scale falls back to the
  // objective's stated per-run error scale, not to the ~0 of the exact fit; stated, not estimated, it takes normal
  // quantiles (dof 0), as the uncalibrated presets' prior intervals do, not Student's t at one degree of freedom
  // (6.3 sds for a 90 % band).
  ASSERT_GT(pb.weights.prior, 0);
  const std::vector<std::size_t> pair{all[0], all[1]};
  const calib::FitResult exact = calib::fit(pb, pair, calib::FitOptions{});
  const calib::Uncertainty two = calib::laplace(pb, pair, exact.params);
  EXPECT_DOUBLE_EQ(two.time_dof, 0.0);
  EXPECT_DOUBLE_EQ(two.time_log_sd, std::sqrt(pb.weights.prior));
  const calib::Sample& p0 = pb.samples[pair[0]];
  const auto iv2 =
      calib::intervals(p0.model, p0.strategy, pb.system, p0.settings, exact.params, two, calib::sim_options(pb));
  ASSERT_TRUE(iv2);
  EXPECT_NEAR(std::log(iv2->time_s_90.upper / iv2->time_s_90.value), 1.6449 * iv2->time_log_sd,
              1e-3 * iv2->time_log_sd);
}

TEST(Uncertainty, AModelOutsideTheFitTakesTheHeldOutModelsScale) {
  const io::Dataset d = io::read_dataset(io::data_dir() + "/lmsimbench");
  const calib::Problem pb = calib::make_problem(d, "npu");
  const auto all = calib::all_indices(pb);
  const calib::FitResult fr = calib::fit(pb, all, calib::FitOptions{});
  const calib::Uncertainty u = calib::laplace(pb, all, fr.params);
  // Configurations held out of fitted models say nothing of a new model: told the folds held out configurations,
  // it leaves the scale unmeasured.
  calib::Uncertainty loo = u;
  const calib::CvResult cv = calib::cross_validate(pb, all, {calib::CvKind::leave_one_model_out, 0}, {});
  calib::set_unseen_scale(loo, pb, calib::CvKind::loo, cv);
  EXPECT_EQ(loo.unseen_n_time, 0u);
  EXPECT_DOUBLE_EQ(calib::for_unseen_model(loo).time_log_sd, u.time_log_sd);
  // Leave-one-model-out: the root-mean-square log error of the held-out predictions, every run counted.
  calib::Uncertainty lomo = u;
  calib::set_unseen_scale(lomo, pb, calib::CvKind::leave_one_model_out, cv);
  double ss = 0;
  for (const auto& p : cv.out_of_sample) ss += std::pow(std::log(p.time_s / pb.samples[p.index].time_s), 2);
  EXPECT_EQ(lomo.unseen_n_time, all.size());
  EXPECT_NEAR(lomo.unseen_time_log_sd, std::sqrt(ss / static_cast<double>(all.size())), 1e-12);
  // On the bundled NPU runs a held-out model misses by more than the fitted runs scatter: the unseen model's
  // intervals are wider, with the held-out runs as degrees of freedom; the fitted models' stay as they were.
  ASSERT_GT(lomo.unseen_time_log_sd, lomo.time_log_sd);
  const calib::Uncertainty unseen = calib::for_unseen_model(lomo);
  EXPECT_DOUBLE_EQ(unseen.time_log_sd, lomo.unseen_time_log_sd);
  EXPECT_DOUBLE_EQ(unseen.time_dof, static_cast<double>(all.size()));
  const calib::Sample& s = pb.samples[0];
  const auto so = calib::sim_options(pb);
  const auto seen_iv = calib::intervals(s.model, s.strategy, pb.system, s.settings, fr.params, lomo, so);
  const auto new_iv = calib::intervals(s.model, s.strategy, pb.system, s.settings, fr.params, unseen, so);
  ASSERT_TRUE(seen_iv && new_iv);
  EXPECT_GT(new_iv->time_s_90.upper, seen_iv->time_s_90.upper);
  // for_prediction, the one rule every interval follows: the held-out scale only for a model outside the fit and
  // only where it was measured; inside the fitted range no widening.
  const calib::FittedRange range = calib::fitted_range(pb, all);
  const auto outside = calib::for_prediction(lomo, false, range, s.model, s.strategy, s.settings);
  EXPECT_TRUE(outside.held_out_scale);
  EXPECT_DOUBLE_EQ(outside.beyond_range_log_sq, 0.0);
  EXPECT_DOUBLE_EQ(outside.u.time_log_sd, unseen.time_log_sd);
  const auto inside = calib::for_prediction(lomo, true, range, s.model, s.strategy, s.settings);
  EXPECT_FALSE(inside.held_out_scale);
  EXPECT_DOUBLE_EQ(inside.u.time_log_sd, lomo.time_log_sd);
  const auto unmeasured = calib::for_prediction(loo, false, range, s.model, s.strategy, s.settings);
  EXPECT_FALSE(unmeasured.held_out_scale);
  EXPECT_DOUBLE_EQ(unmeasured.u.time_log_sd, loo.time_log_sd);
  // Beyond the range (the runs fitted on one micro-batch size only, predicting another) it widens.
  calib::FittedRange narrow = range;
  for (auto& [dim, lo_hi] : narrow) lo_hi = {0.5 * lo_hi[0], 0.5 * lo_hi[0]};
  calib::Uncertainty scaled = lomo;
  scaled.extrapolation_time_log_sd = 0.05;
  scaled.extrapolation_n_time = 10;
  const auto beyond = calib::for_prediction(scaled, true, narrow, s.model, s.strategy, s.settings);
  EXPECT_GT(beyond.beyond_range_log_sq, 0.0);
  EXPECT_GT(beyond.u.time_log_sd, lomo.time_log_sd);
  // The θ file keeps it.
  const calib::Uncertainty back = calib::from_json_form(calib::to_json_form(lomo), "theta.json");
  EXPECT_DOUBLE_EQ(back.unseen_time_log_sd, lomo.unseen_time_log_sd);
  EXPECT_EQ(back.unseen_n_memory, lomo.unseen_n_memory);
}

TEST(Uncertainty, JsonFormIsCheckedWhenRead) {
  calib::UncertaintyJson j;
  j.free = {"matmul_efficiency", "kernel_launch_us"};
  j.prior_only = {"runtime_memory_gib"};
  j.covariance = {{0.01, 0.0, 0.0}, {0.0, 4.0, 0.0}, {0.0, 0.0, 1.0}};
  j.time_log_sd = 0.03;
  j.memory_log_sd = 0.03;
  j.n_time = 12;
  const calib::Uncertainty u = calib::from_json_form(j, "theta.json");
  EXPECT_EQ(u.free.size(), 3u);
  EXPECT_EQ(u.n_prior_only, 1u);
  EXPECT_TRUE(calib::memory_from_priors(u));
  const auto back = calib::to_json_form(u);
  EXPECT_EQ(back.free, j.free);
  EXPECT_EQ(back.prior_only, j.prior_only);
  EXPECT_EQ(back.covariance, j.covariance);
  EXPECT_EQ(back.n_time, 12u);
  auto bad = j;
  bad.prior_only = {"kernel_launch_us"};  // listed twice
  EXPECT_THROW(calib::from_json_form(bad, "theta.json"), io::InputError);
  bad = j;
  bad.free = {"no_such", "kernel_launch_us"};
  EXPECT_THROW(calib::from_json_form(bad, "theta.json"), io::InputError);
  bad = j;
  bad.covariance = {{0.01}};
  EXPECT_THROW(calib::from_json_form(bad, "theta.json"), io::InputError);
  bad = j;
  bad.covariance[0][0] = -1;
  EXPECT_THROW(calib::from_json_form(bad, "theta.json"), io::InputError);
}
