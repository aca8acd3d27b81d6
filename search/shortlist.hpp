// lmsim/search/shortlist.hpp — cross-platform shortlists and the paired-platform report (LM-SimBench §5).
//
// Owns: ranking paired candidates by a source platform's time (measured or predicted), keeping the top k, and
// scoring that shortlist on the target platform's measured times (optimum inside, Top-1 / Top-k regret, the
// paper's Eq. 7); the target simulator's own top-k and a combined rule; and the cross-platform report (time and
// memory ρ / τ_b pooled and per recompute stratum, lowest-memory top-3 overlap, RC/noRC direction agreement,
// median ratios, recompute overhead and saving, leave-one-out median-ratio transfer). Pure functions on vectors.
#pragma once

#include <string>
#include <vector>

namespace lmsim::search {

struct PairedConfig {
  std::string config;  // dataset name, e.g. dp2-tp4-pp1-cp1-RC
  bool recompute;
  double source_time_s, target_time_s;                              // measured
  double source_memory_bytes, target_memory_bytes;                  // measured (maximum over ranks)
  double source_predicted_time_s = 0, target_predicted_time_s = 0;  // 0 = not available
};

struct ShortlistRule {
  std::string name;  // e.g. "npu measured top-3"
  std::vector<std::string> shortlist;
  bool contains_target_optimum;
  double top1_regret_pct, topk_regret_pct;
};

struct ShortlistReport {
  std::string target_optimum;
  std::size_t candidates, k;
  std::vector<ShortlistRule> rules;
};

// Rules: source measured top-k; source predicted top-k (when predictions exist); target predicted top-k; combined
// (mean of the source-measured rank and the target-predicted rank, ties by name).
ShortlistReport shortlist(const std::vector<PairedConfig>& c, std::size_t k, const std::string& source,
                          const std::string& target);

// A configuration measured on the source platform only (no target measurement to pair it with), with the target
// simulator's prediction for it: what a user with one platform's runs takes to the other.
struct ProposalConfig {
  std::string config;
  double source_time_s;                  // measured
  double target_predicted_time_s;        // simulated on the target system with its θ
  double target_predicted_memory_bytes;  // maximum over ranks
  bool target_fits;                      // predicted to fit the target device
};

struct Proposal {
  std::size_t candidates, fitting, k;  // measured configurations; those predicted to fit the target
  std::vector<ShortlistRule> rules;    // no target measurement: regrets NaN, contains_target_optimum false
};

// The shortlist rules of shortlist() among the candidates predicted to fit the target (source measured top-k,
// target predicted top-k, combined ranks), unscored: there is no target measurement to score them on.
Proposal propose(const std::vector<ProposalConfig>& c, std::size_t k, const std::string& source,
                 const std::string& target);

struct StratumCorrelation {
  std::string stratum;  // all | noRC | RC
  std::size_t n;
  double time_spearman, time_kendall, memory_spearman, memory_kendall;
};

struct CrossPlatformReport {
  std::vector<StratumCorrelation> strata;
  std::size_t lowest_memory_top3_overlap;
  std::size_t rc_pairs, rc_direction_agreements;
  double median_time_ratio, median_memory_ratio;                                  // target / source
  double source_recompute_time_overhead_pct, target_recompute_time_overhead_pct;  // medians over RC pairs
  double source_recompute_memory_saving_pct, target_recompute_memory_saving_pct;
  double transfer_time_smape_pct, transfer_time_r2;  // LOO median-ratio transfer of source time to target time
  double transfer_memory_smape_pct, transfer_memory_r2;
  double source_top1_regret_pct, source_top3_regret_pct;  // measured source ranking scored on the target
};

CrossPlatformReport cross_platform(const std::vector<PairedConfig>& c);

}  // namespace lmsim::search
