// lmsim/calibration/metrics.hpp — the accuracy and ranking metrics of LM-SimBench, used by calibration,
// evaluation and search reports alike.
//
// Conventions: `pred` and `meas` are paired; sMAPE = 100/n Σ |p - m| / ((|p| + |m|)/2 + ε), ε = 1e-12 (as the
// paper); MAPE = 100/n Σ |p - m| / |m|; R² = 1 - SS_res/SS_tot (NaN when the measurements are constant);
// Spearman ρ uses average ranks for ties; Kendall τ_b is tie-corrected. Lower is better for times.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace lmsim::metrics {

double mae(const std::vector<double>& pred, const std::vector<double>& meas);
double smape_pct(const std::vector<double>& pred, const std::vector<double>& meas, double eps = 1e-12);
double mape_pct(const std::vector<double>& pred, const std::vector<double>& meas);
// R²; NaN when the measurements are constant (undefined).
double r2(const std::vector<double>& pred, const std::vector<double>& meas);
std::vector<double> average_ranks(const std::vector<double>& v);  // 1-based, ties averaged
// Spearman ρ (Pearson on average ranks); NaN when either side is constant or n < 2.
double spearman(const std::vector<double>& a, const std::vector<double>& b);
// Kendall τ_b; NaN when either side is constant or n < 2.
double kendall_tau_b(const std::vector<double>& a, const std::vector<double>& b);

// Indices of the k smallest values of `score`, ties broken by index (stable).
std::vector<std::size_t> top_k(const std::vector<double>& score, std::size_t k);
// 1 when the arg-min of pred is an arg-min of meas (any tie of the measured minimum counts), else 0.
double top1_hit(const std::vector<double>& pred, const std::vector<double>& meas);
// |top_k(a) ∩ top_k(b)|; k is clamped to the set size.
std::size_t top_k_overlap(const std::vector<double>& a, const std::vector<double>& b, std::size_t k);
// The paper's Eq. 7: 100 · (min measured time within the shortlist / min measured time overall − 1), the
// shortlist being the k best by `score`.
double regret_at_k_pct(const std::vector<double>& score, const std::vector<double>& meas, std::size_t k);
// Fraction of measured-feasible items that are predicted feasible (retention) and fraction of items whose
// feasibility verdicts agree.
double feasible_retention(const std::vector<bool>& pred, const std::vector<bool>& meas);
double feasible_agreement(const std::vector<bool>& pred, const std::vector<bool>& meas);
// Jensen–Shannon divergence (base 2, in [0, 1]) of two share vectors keyed by category; the union of keys is
// used, a missing key counts as 0, and each side is normalised to sum 1.
double jensen_shannon(const std::map<std::string, double>& p, const std::map<std::string, double>& q);
double median(std::vector<double> v);

}  // namespace lmsim::metrics
