#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "calibration/evaluate.hpp"
#include "io/io.hpp"
#include "search/shortlist.hpp"

using namespace lmsim;
namespace fs = std::filesystem;

namespace {
std::vector<search::PairedConfig> paired(const io::Dataset& d, const std::string& ms) {
  const io::Collection& npu = *d.find(ms, "npu");
  const io::Collection& gpu = *d.find(ms, "gpu");
  std::vector<search::PairedConfig> out;
  for (const auto& r : npu.runs) {
    const io::Run* g = gpu.find(r.config);
    out.push_back({r.config, r.strategy.recompute != Recompute::none, *r.iteration_time_s, *g->iteration_time_s,
                   *r.peak_memory_max_bytes, *g->peak_memory_max_bytes});
  }
  return out;
}
double r3(double v) { return std::round(v * 1000) / 1000; }
}  // namespace

// The paper's cross-platform figures (shared/data/paper/README.md), to three decimals.
TEST(CrossPlatform, ReproducesThePapersGoldenFigures) {
  const io::Dataset d = io::read_dataset(io::data_dir() + "/lmsimbench");
  struct Golden {
    const char* ms;
    double rho, tau, mem_rho, mem_tau, top1, top3, rho_norc, rho_rc;
    std::size_t agree, pairs;
  };
  for (const Golden& g : {Golden{"qwen3_0.6b_4k", 0.718, 0.562, 0.982, 0.924, 0.0, 0.0, 0.714, 0.683, 6, 6},
                          Golden{"qwen3_1.7b_4k", 0.664, 0.491, 0.991, 0.964, 6.9, 0.0, 1.000, 0.690, 3, 3}}) {
    SCOPED_TRACE(g.ms);
    const auto pc = paired(d, g.ms);
    const search::CrossPlatformReport x = search::cross_platform(pc);
    ASSERT_EQ(x.strata[0].stratum, "all");
    EXPECT_DOUBLE_EQ(r3(x.strata[0].time_spearman), g.rho);
    EXPECT_DOUBLE_EQ(r3(x.strata[0].time_kendall), g.tau);
    EXPECT_DOUBLE_EQ(r3(x.strata[0].memory_spearman), g.mem_rho);
    EXPECT_DOUBLE_EQ(r3(x.strata[0].memory_kendall), g.mem_tau);
    EXPECT_DOUBLE_EQ(r3(x.strata[1].time_spearman), g.rho_norc);
    EXPECT_DOUBLE_EQ(r3(x.strata[2].time_spearman), g.rho_rc);
    EXPECT_NEAR(x.source_top1_regret_pct, g.top1, 0.05);
    EXPECT_NEAR(x.source_top3_regret_pct, g.top3, 0.05);
    EXPECT_EQ(x.lowest_memory_top3_overlap, 3u);
    EXPECT_EQ(x.rc_pairs, g.pairs);
    EXPECT_EQ(x.rc_direction_agreements, g.agree);
    const search::ShortlistReport s = search::shortlist(pc, 3, "npu", "gpu");
    ASSERT_FALSE(s.rules.empty());
    EXPECT_TRUE(s.rules[0].contains_target_optimum);  // 15 -> 3 and 11 -> 3 candidates keep the GPU optimum
    EXPECT_NEAR(s.rules[0].top1_regret_pct, g.top1, 0.05);
  }
}

// Source-only runs: the shortlist rules among the configurations predicted to fit the target, unscored.
TEST(Shortlist, AProposalRanksOnlyWhatFitsTheTargetAndScoresNothing) {
  const std::vector<search::ProposalConfig> c = {
      {"a", 1.0, 9.0, 1e9, true},    // fastest measured, slowest predicted
      {"b", 2.0, 5.0, 1e9, true},    //
      {"c", 3.0, 4.0, 1e9, true},    // fastest predicted
      {"d", 0.5, 1.0, 9e10, false},  // fastest of all, but predicted not to fit: in no shortlist
  };
  const search::Proposal p = search::propose(c, 2, "npu", "gpu");
  EXPECT_EQ(p.candidates, 4u);
  EXPECT_EQ(p.fitting, 3u);
  ASSERT_EQ(p.rules.size(), 3u);
  EXPECT_EQ(p.rules[0].name, "npu measured top-2");
  EXPECT_EQ(p.rules[0].shortlist, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(p.rules[1].shortlist, (std::vector<std::string>{"c", "b"}));
  // Mean ranks a (1+3)/2, b (2+2)/2, c (3+1)/2 all tie: by name.
  EXPECT_EQ(p.rules[2].shortlist, (std::vector<std::string>{"a", "b"}));
  for (const auto& r : p.rules) {
    EXPECT_TRUE(std::isnan(r.top1_regret_pct)) << r.name;
    EXPECT_FALSE(r.contains_target_optimum) << r.name;
  }
  EXPECT_TRUE(search::propose({c[3]}, 2, "npu", "gpu").rules.empty());
}

TEST(Evaluate, FixtureWithEveryViewAndPerRankMemory) {
  const io::Dataset d = io::read_dataset(std::string(LMSIM_TEST_FIXTURES) + "/mini");
  const auto ev = eval::evaluate_lmsim(d, {}, {});
  ASSERT_EQ(ev.size(), 1u);
  const auto& e = ev[0];
  EXPECT_EQ(e.report.n_time, 2u);
  EXPECT_TRUE(std::isfinite(e.report.memory_rank_mape_pct));  // the fixture has per-rank memory
  EXPECT_EQ(e.components.matrix_n, 2u);                       // from the rank files
  EXPECT_EQ(e.components.trace_n, 1u);                        // one configuration has a step trace
  EXPECT_GE(e.components.comm_share_jsd, 0.0);                // comm_summary.csv present
  // Its shares are the transfers: elapsed less the wait for the peers (1500.5 - 100 and 300 - 50 ms).
  EXPECT_NEAR(e.components.measured_comm_share.at("all_reduce"), 100 * 1400.5 / 1650.5, 1e-9);
  EXPECT_NEAR(e.components.measured_comm_share.at("point_to_point"), 100 * 250 / 1650.5, 1e-9);
  EXPECT_GT(e.median_simulation_wall_s, 0.0);
  EXPECT_EQ(e.simulation_wall_s.size(), 2u);
}

// With a θ covariance every prediction carries intervals, and the evaluation counts the measurements inside them:
// in-sample for a model θ was fitted on; for another, at the held-out models' scale when θ has one.
TEST(Evaluate, IntervalsAndTheirCoverage) {
  const io::Dataset d = io::read_dataset(io::data_dir() + "/lmsimbench");
  const calib::Problem pb = calib::make_problem(d, "npu");
  const auto all = calib::all_indices(pb);
  const calib::FitResult fr = calib::fit(pb, all, calib::FitOptions{});
  calib::Uncertainty u = calib::laplace(pb, all, fr.params);
  u.unseen_time_log_sd = 10 * u.time_log_sd;  // a held-out scale far wider than the fitted runs'
  u.unseen_n_time = 26;
  eval::Theta t{fr.params, "test θ", u, {"Qwen3-0.6B", "Qwen3-1.7B"}, {}, {}, {}, {}};
  const auto fitted = eval::evaluate_lmsim(d, {{"npu", t}}, {"qwen3_1.7b_4k"});
  const auto& f = fitted[fitted[0].platform == "npu" ? 0 : 1];
  ASSERT_EQ(f.platform, "npu");
  ASSERT_EQ(f.intervals.size(), f.predictions.size());
  EXPECT_TRUE(f.theta_fitted_on_model);
  EXPECT_FALSE(f.held_out_model_scale);
  EXPECT_EQ(f.coverage.n_time, f.report.n_time);
  EXPECT_LE(f.coverage.time_in_80, f.coverage.time_in_90);
  // The fitted runs' scale is no blanket: in-sample, the 80 % band misses some of the runs (the 0.6B's TP-heavy
  // ones, which no θ reaches).
  const auto small = eval::evaluate_lmsim(d, {{"npu", t}}, {"qwen3_0.6b_4k"});
  const auto& sm = small[small[0].platform == "npu" ? 0 : 1];
  EXPECT_LT(sm.coverage.time_in_80, sm.coverage.n_time);
  EXPECT_GT(sm.coverage.time_in_80, sm.coverage.n_time / 2);
  for (std::size_t i = 0; i < f.predictions.size(); ++i) {
    EXPECT_LT(f.intervals[i].time_s_90.lower, f.predictions[i].time_s);
    EXPECT_GT(f.intervals[i].time_s_90.upper, f.predictions[i].time_s);
  }
  // The same θ said to be fitted on another model: the collection's model is unseen, the intervals widen.
  t.fitted_models = {"Qwen3-8B"};
  const auto unseen = eval::evaluate_lmsim(d, {{"npu", t}}, {"qwen3_1.7b_4k"});
  const auto& n = unseen[unseen[0].platform == "npu" ? 0 : 1];
  EXPECT_FALSE(n.theta_fitted_on_model);
  EXPECT_TRUE(n.held_out_model_scale);
  EXPECT_EQ(n.coverage.time_in_80, n.coverage.n_time);
  EXPECT_GT(n.intervals[0].time_s_80.upper, f.intervals[0].time_s_80.upper);
  // Fitted on the same network under another name (a published table's spelling): seen, by its architecture.
  Model renamed = io::presets().find_model("Qwen3-1.7B")->model;
  renamed.name = "qwen3-1.7b as a table spells it";
  t.fitted_model_specs = {renamed};
  const auto seen = eval::evaluate_lmsim(d, {{"npu", t}}, {"qwen3_1.7b_4k"});
  const auto& a = seen[seen[0].platform == "npu" ? 0 : 1];
  EXPECT_TRUE(a.theta_fitted_on_model);
  EXPECT_FALSE(a.held_out_model_scale);
  EXPECT_DOUBLE_EQ(a.intervals[0].time_s_80.upper, f.intervals[0].time_s_80.upper);
  renamed.num_layers += 1;  // one layer more is another model
  t.fitted_model_specs = {renamed};
  const auto other = eval::evaluate_lmsim(d, {{"npu", t}}, {"qwen3_1.7b_4k"});
  EXPECT_FALSE(other[other[0].platform == "npu" ? 0 : 1].theta_fitted_on_model);
  // Without a covariance there are none.
  EXPECT_TRUE(
      eval::evaluate_lmsim(d, {{"npu", {fr.params, "bare", std::nullopt, {}, {}, {}, {}, {}}}}, {"qwen3_1.7b_4k"})[0]
          .intervals.empty());
}

// Published measurements: every run predicted with its system's θ, the runs θ was fitted on scored apart.
TEST(Evaluate, PublishedRunsThetaWasFittedOnAreScoredApart) {
  const io::PublishedSet ps = io::read_published(io::data_dir() + "/public");
  const calib::Problem pb = calib::make_problem(ps, "a100_sxm_80g");
  std::vector<std::size_t> train = calib::all_indices(pb);
  ASSERT_GE(train.size(), 4u);
  train.resize(train.size() - 3);  // the three largest models held out of the fit
  const calib::FitResult fr = calib::fit(pb, train, calib::FitOptions{});
  eval::Theta t{fr.params, "test θ", calib::laplace(pb, train, fr.params), {}, {}, {}, {}, {}};
  for (auto i : train) {
    t.fitted_models.push_back(pb.samples[i].model.name);
    t.fitted_configurations.push_back(pb.samples[i].model_setting + ":" + pb.samples[i].config);
  }
  const auto ev = eval::evaluate_published(ps, {{"a100_sxm_80g", t}});
  std::size_t in = 0, out = 0, h100 = 0;
  for (const auto& e : ev) {
    if (e.system == "h100_sxm_80g") {
      EXPECT_EQ(e.predictor, "lmsim");  // no θ given: the uncalibrated defaults, never in-sample
      EXPECT_NE(e.theta_source.find("uncalibrated"), std::string::npos);
      EXPECT_TRUE(e.intervals_from_priors);  // with its priors' intervals
      EXPECT_EQ(e.coverage.n_time, e.predictions.size());
      h100 += e.predictions.size();
    }
    if (e.system != "a100_sxm_80g") continue;
    EXPECT_EQ(e.model_setting, "narayanan2021_table1_a100");
    const bool fitted = e.predictor == "lmsim_in_sample";
    (fitted ? in : out) += e.predictions.size();
    EXPECT_EQ(e.theta_fitted_on_model, fitted);
    EXPECT_EQ(e.coverage.n_time, e.predictions.size());  // θ has a covariance: every run has its intervals
    for (const auto& p : e.predictions) {
      const calib::Sample& s = e.problem.samples[p.index];
      const bool listed = std::find(t.fitted_configurations.begin(), t.fitted_configurations.end(),
                                    s.model_setting + ":" + s.config) != t.fitted_configurations.end();
      EXPECT_EQ(listed, fitted) << s.config;
    }
    if (fitted) {  // the same figures as scoring the fit's own predictions
      EXPECT_NEAR(e.report.time_mape_pct, calib::score(pb, calib::predict(pb, train, fr.params)).time_mape_pct, 1e-9);
    }
  }
  EXPECT_EQ(in, train.size());
  EXPECT_EQ(out, 3u);
  std::size_t h100_runs = 0;
  for (const auto& r : ps.runs) h100_runs += r.system == "h100_sxm_80g" ? 1 : 0;
  EXPECT_EQ(h100, h100_runs);  // validation rows included
}

TEST(Evaluate, AnotherToolsCsvIsScoredExactlyLikeLmsim) {
  const io::Dataset d = io::read_dataset(io::data_dir() + "/lmsimbench");
  const auto mine = eval::evaluate_lmsim(d, {}, {"qwen3_0.6b_4k"});
  const std::string csv = (fs::temp_directory_path() / ("lmsim_preds_" + std::to_string(::getpid()) + ".csv")).string();
  {
    std::ofstream o(csv);
    o.precision(17);
    o << "model_setting,platform,optimization_config,iteration_time_s,peak_memory_gib,simulation_wall_s\n";
    for (const auto& e : mine)
      for (const auto& p : e.predictions)
        o << e.model_setting << "," << e.platform << "," << e.problem.samples[p.index].config << "," << p.time_s << ","
          << p.mem_max_bytes / 1073741824.0 << ",0.002\n";
  }
  const auto theirs = eval::evaluate_file(d, csv, "copy", {"qwen3_0.6b_4k"});
  ASSERT_EQ(theirs.size(), mine.size());
  for (std::size_t i = 0; i < mine.size(); ++i) {
    EXPECT_NEAR(theirs[i].report.time_mape_pct, mine[i].report.time_mape_pct, 1e-9);
    EXPECT_NEAR(theirs[i].report.memory_mape_pct, mine[i].report.memory_mape_pct, 1e-6);
    EXPECT_DOUBLE_EQ(theirs[i].report.models[0].time_spearman, mine[i].report.models[0].time_spearman);
    EXPECT_DOUBLE_EQ(theirs[i].median_simulation_wall_s, 0.002);
  }
  // Bad rows name file, line and field.
  {
    std::ofstream o(csv);
    o << "model_setting,platform,optimization_config,iteration_time_s,peak_memory_gib\n"
      << "qwen3_0.6b_4k,npu,dp8-tp1-pp1-cp1-RC,-1,3\n";
  }
  try {
    eval::evaluate_file(d, csv, "bad", {});
    ADD_FAILURE() << "accepted a negative time";
  } catch (const io::InputError& e) {
    EXPECT_EQ(e.line(), 2);
    EXPECT_EQ(e.field(), "iteration_time_s");
  }
  fs::remove(csv);
}

// The paper's pooled communication shares (Table 30) are a profiler's elapsed times, waits included: a pipeline
// stage idles inside its blocking receives, so point-to-point is 42 % of the V100's communication there. Against
// them each predicted stage's idle time counts where it is spent (the drain in the closing all-reduce, the rest in
// receives); transfers alone would put point-to-point near 3 %.
TEST(Evaluate, PooledCommunicationSharesCountAStagesIdleTimeAsPointToPoint) {
  const io::Dataset d = io::read_dataset(io::data_dir() + "/lmsimbench");
  int v100 = 0;
  for (const auto& e : eval::evaluate_lmsim(d, {}, {"qwen3_0.6b_4k"})) {
    if (e.platform != "gpu") continue;
    ++v100;
    EXPECT_GT(e.components.measured_comm_share.at("point_to_point"), 40.0);
    EXPECT_GT(e.components.predicted_comm_share.at("point_to_point"), 30.0);
    EXPECT_LT(e.components.comm_share_jsd, 0.1);
  }
  EXPECT_EQ(v100, 1);
}
