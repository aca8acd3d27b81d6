#include <gtest/gtest.h>

#include <cmath>

#include "calibration/metrics.hpp"

using namespace lmsim::metrics;

TEST(Metrics, ErrorsAgainstHandComputedValues) {
  const std::vector<double> p = {1, 2, 4}, m = {1, 4, 2};
  EXPECT_DOUBLE_EQ(mae(p, m), 4.0 / 3);
  EXPECT_NEAR(mape_pct(p, m), 100.0 * (0 + 0.5 + 1.0) / 3, 1e-12);
  EXPECT_NEAR(smape_pct(p, m), 100.0 * (0 + 2 / 3.0 + 2 / 3.0) / 3, 1e-9);
  // R² = 1 - SS_res / SS_tot: SS_res = 0 + 4 + 4, mean 7/3, SS_tot = 16/9 + 25/9 + 1/9 = 42/9
  EXPECT_NEAR(r2(p, m), 1 - 8 / (42.0 / 9), 1e-12);
  EXPECT_TRUE(std::isnan(r2({1, 2}, {3, 3})));   // constant measurements: undefined
  EXPECT_NEAR(smape_pct({0}, {0}), 0.0, 1e-12);  // ε keeps 0/0 finite
}

TEST(Metrics, RanksWithTies) {
  EXPECT_EQ(average_ranks({10, 20, 20, 5}), (std::vector<double>{2, 3.5, 3.5, 1}));
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  // ranks a = 1,2,3,4; b = 1,2.5,2.5,4 → Pearson of the ranks
  const double rho = spearman({1, 2, 3, 4}, {1, 5, 5, 9});
  EXPECT_NEAR(rho, 4.5 / std::sqrt(5.0 * 4.5), 1e-12);
  EXPECT_TRUE(std::isnan(spearman({1, 1, 1}, {1, 2, 3})));
}

TEST(Metrics, KendallTauBTieCorrected) {
  EXPECT_DOUBLE_EQ(kendall_tau_b({1, 2, 3}, {1, 2, 3}), 1.0);
  EXPECT_DOUBLE_EQ(kendall_tau_b({1, 2, 3}, {3, 2, 1}), -1.0);
  // a = 1,2,3,4; b = 1,2,2,3: pairs 6, concordant 5, discordant 0, ties in b only 1
  EXPECT_NEAR(kendall_tau_b({1, 2, 3, 4}, {1, 2, 2, 3}), 5 / std::sqrt(6.0 * 5.0), 1e-12);
  // a = 1,1,2,3; b = 1,2,2,3: concordant 4, a tie in a only and one in b only: each factor of the denominator
  // counts its own side's ties, 4 / sqrt((4 + 1) (4 + 1))
  EXPECT_NEAR(kendall_tau_b({1, 1, 2, 3}, {1, 2, 2, 3}), 0.8, 1e-12);
  EXPECT_TRUE(std::isnan(kendall_tau_b({2, 2}, {1, 2})));
}

TEST(Metrics, TopKRegretAndOverlap) {
  const std::vector<double> score = {3, 1, 2, 5}, meas = {10, 12, 11, 9};
  EXPECT_EQ(top_k(score, 2), (std::vector<std::size_t>{1, 2}));
  EXPECT_EQ(top_k(score, 10).size(), 4u);  // k larger than the set
  EXPECT_DOUBLE_EQ(top1_hit(score, meas), 0.0);
  EXPECT_DOUBLE_EQ(top1_hit({4, 3, 2, 1}, meas), 1.0);
  EXPECT_NEAR(regret_at_k_pct(score, meas, 1), 100.0 * (12.0 / 9 - 1), 1e-12);
  EXPECT_NEAR(regret_at_k_pct(score, meas, 3), 100.0 * (10.0 / 9 - 1), 1e-12);
  EXPECT_NEAR(regret_at_k_pct(score, meas, 4), 0.0, 1e-12);
  EXPECT_EQ(top_k_overlap(score, meas, 2), 0u);
  EXPECT_EQ(top_k_overlap(score, meas, 3), 2u);
  EXPECT_EQ(top_k_overlap(score, meas, 99), 4u);
  EXPECT_DOUBLE_EQ(top1_hit({1, 1}, {5, 5}), 1.0);  // ties of the measured minimum count as hits
}

TEST(Metrics, FeasibilityAndJensenShannon) {
  EXPECT_DOUBLE_EQ(feasible_retention({true, false, true}, {true, true, false}), 0.5);
  EXPECT_DOUBLE_EQ(feasible_agreement({true, false, true}, {true, true, false}), 1.0 / 3);
  EXPECT_DOUBLE_EQ(jensen_shannon({{"a", 1}}, {{"a", 2}}), 0.0);
  EXPECT_NEAR(jensen_shannon({{"a", 1}}, {{"b", 1}}), 1.0, 1e-12);  // disjoint: maximal, union of keys
  const double js = jensen_shannon({{"a", 1}, {"b", 1}}, {{"a", 1}});
  // p = (.5,.5), q = (1,0), m = (.75,.25): 0.5·(.5 log2(.5/.75) + .5 log2(.5/.25)) + 0.5·log2(1/.75)
  EXPECT_NEAR(js, 0.5 * (0.5 * std::log2(0.5 / 0.75) + 0.5 * std::log2(2.0)) + 0.5 * std::log2(1 / 0.75), 1e-12);
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2.0);
  EXPECT_DOUBLE_EQ(median({4, 1, 2, 3}), 2.5);
}
