// lmsim/search/explain.hpp — why a search found nothing that fits, and what would.
//
// Owns: the valid candidate nearest to fitting (the smallest shortfall of per-device memory against capacity
// minus margin), or when none is valid the rule most candidates break with one that breaks it, and, per scenario, the
// smallest device count among 2x..32x the searched one at which some candidate of the same space fits. Runs on one
// rank, after a sweep that found nothing. And, for a full-recompute winner, the partial recompute that would still fit.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "search/sweep.hpp"

namespace lmsim::search {

struct NothingFits {
  std::optional<Entry> closest;  // time_s and peak_bytes of the nearest candidate (objective: its shortfall, bytes)
  double lacking_bytes = 0;      // peak - (capacity - margin) of `closest`
  // Without a valid candidate (no `closest`): the rule most of them break, and the first candidate that breaks it.
  Rejection commonest = Rejection::ok;
  std::uint64_t commonest_example = 0;
  struct Larger {
    std::size_t scenario;
    int devices = 0;  // smallest device count tried that fits something; 0 when none up to 32x
    std::optional<Strategy> example;
  };
  std::vector<Larger> larger;
};

NothingFits explain_nothing_fits(const Space& space, const SpaceFilter& filter, const SweepOptions& o);
// When candidates fit in memory but none runs SweepOptions::token_budget tokens within max_run_days: the one whose
// run is shortest (objective: its run's days; the lowest index among equals), if any fits.
std::optional<Entry> shortest_run(const Space& space, const SweepOptions& o);

// The fastest partial recompute of a plain full-recompute strategy that still fits: Megatron's --recompute-method
// block with the fewest --recompute-num-layers whose peak stays within capacity minus the options' margin, or no
// recompute at all (a block of 0) when that fits. Memory falls and time rises with the count, so a bisection over
// 0 .. (widest chunk - 1). Empty when the strategy is not plain full recompute or no partial count fits.
struct PartialRecompute {
  Strategy strategy;  // block recompute of N >= 1 layers, or recompute none
  Prediction prediction;
};
// "the first layer" / "the first N layers": what a block recompute of N replays in each chunk, for messages.
std::string first_layers(int n);
// What a partial recompute replays, for messages: "no recompute", or "recompute of only the first N layers of each
// pipeline chunk".
std::string partial_recompute_phrase(const Strategy& s);
std::optional<PartialRecompute> partial_recompute_alternative(const Model& m, const Strategy& s, const System& sys,
                                                              const TrainingSettings& t, const PlatformParams& p,
                                                              const SimOptions& so);

}  // namespace lmsim::search
