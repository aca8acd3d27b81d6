#include "search/explain.hpp"

#include <omp.h>

#include <array>
#include <cmath>
#include <limits>

namespace lmsim::search {

namespace {
// Every candidate of the space simulated as the sweep simulates it, over OpenMP threads: f(thread, index, scenario,
// prediction), thread in [0, omp_get_max_threads()).
template <class F>
void for_each_prediction(const Space& space, const SweepOptions& o, F&& f) {
  const std::uint64_t n = space.size();
#pragma omp parallel for schedule(dynamic, 4096)
  for (std::uint64_t i = 0; i < n; ++i) {
    const Candidate c = space.at(i);
    const Scenario& sc = space.scenarios()[c.scenario];
    f(static_cast<std::size_t>(omp_get_thread_num()), i, sc,
      simulate(space.model(), c.strategy, sc.system, sc.settings, sc.params, scenario_sim_options(sc, o)));
  }
}
}  // namespace

NothingFits explain_nothing_fits(const Space& space, const SpaceFilter& filter, const SweepOptions& o) {
  NothingFits out;
  std::vector<std::pair<double, std::uint64_t>> best(static_cast<std::size_t>(omp_get_max_threads()),
                                                     {std::numeric_limits<double>::infinity(), 0});
  std::vector<Prediction> kept(best.size());
  // Per thread and rule: how many candidates break it, and the first that does.
  constexpr std::size_t kRules = static_cast<std::size_t>(Rejection::count_);
  std::vector<std::array<std::pair<std::uint64_t, std::uint64_t>, kRules>> broken(
      best.size(), std::array<std::pair<std::uint64_t, std::uint64_t>, kRules>{});
  for_each_prediction(space, o, [&](std::size_t thread, std::uint64_t i, const Scenario& sc, const Prediction& p) {
    if (!p.ok()) {
      auto& [count, first] = broken[thread][static_cast<std::size_t>(p.rejection)];
      if (count++ == 0 || i < first) first = i;
      return;
    }
    const double lack = p.max_peak_memory_bytes - (sc.system.hbm_capacity_bytes - o.memory_margin_bytes);
    auto& b = best[thread];
    if (lack < b.first || (lack == b.first && i < b.second)) {
      b = {lack, i};
      kept[thread] = p;
    }
  });
  std::size_t w = 0;
  for (std::size_t t = 1; t < best.size(); ++t)
    if (best[t].first < best[w].first || (best[t].first == best[w].first && best[t].second < best[w].second)) w = t;
  if (std::isfinite(best[w].first)) {
    out.closest = Entry{best[w].first, best[w].second, kept[w].iteration_time_s, kept[w].max_peak_memory_bytes};
    out.lacking_bytes = best[w].first;
  } else {
    std::uint64_t most = 0;
    for (std::size_t rule = 1; rule < kRules; ++rule) {
      std::uint64_t count = 0, first = std::numeric_limits<std::uint64_t>::max();
      for (const auto& t : broken)
        if (t[rule].first > 0) count += t[rule].first, first = std::min(first, t[rule].second);
      if (count > most) {
        most = count;
        out.commonest = static_cast<Rejection>(rule);
        out.commonest_example = first;
      }
    }
  }
  // Larger jobs: the same space at 2x, 4x, ... 32x the devices; the first count where anything fits.
  for (std::size_t si = 0; si < space.scenarios().size(); ++si) {
    NothingFits::Larger l{si, 0, std::nullopt};
    for (int m = 2; m <= 32 && !l.devices; m *= 2) {
      Scenario sc = space.scenarios()[si];
      sc.devices *= m;
      const Space bigger(space.model(), {sc}, filter);
      const SimOptions so = scenario_sim_options(sc, o);
      for (std::uint64_t i = 0; i < bigger.size(); ++i) {
        const Candidate c = bigger.at(i);
        if (simulate(space.model(), c.strategy, sc.system, sc.settings, sc.params, so).feasible) {
          l.devices = sc.devices;
          l.example = c.strategy;
          break;
        }
      }
    }
    out.larger.push_back(l);
  }
  return out;
}

std::optional<Entry> shortest_run(const Space& space, const SweepOptions& o) {
  std::vector<std::optional<Entry>> best(static_cast<std::size_t>(omp_get_max_threads()));
  for_each_prediction(space, o, [&](std::size_t thread, std::uint64_t i, const Scenario& sc, const Prediction& p) {
    if (!p.feasible) return;
    const double days =
        training_run(p.iteration_time_s, space.at(i).strategy.devices(), sc.settings, o.token_budget).days();
    auto& b = best[thread];
    if (!b || days < b->objective || (days == b->objective && i < b->index))
      b = Entry{days, i, p.iteration_time_s, p.max_peak_memory_bytes};
  });
  std::optional<Entry> out;
  for (const auto& b : best)
    if (b && (!out || b->objective < out->objective || (b->objective == out->objective && b->index < out->index)))
      out = b;
  return out;
}

std::string first_layers(int n) { return n == 1 ? "the first layer" : "the first " + std::to_string(n) + " layers"; }

std::string partial_recompute_phrase(const Strategy& s) {
  return s.recompute == Recompute::none
             ? "no recompute"
             : "recompute of only " + first_layers(s.recompute_num_layers) + " of each pipeline chunk";
}

std::optional<PartialRecompute> partial_recompute_alternative(const Model& m, const Strategy& s, const System& sys,
                                                              const TrainingSettings& t, const PlatformParams& p,
                                                              const SimOptions& so) {
  if (s.recompute != Recompute::full || s.recompute_num_layers != 0) return std::nullopt;
  const auto split = pipeline_split(m, s, so.validity.allow_uneven_layers);
  if (!split) return std::nullopt;
  auto block = [&](std::int64_t n) {  // block 0: no layer replayed, which is no recompute
    Strategy b = s;
    b.recompute = n > 0 ? Recompute::full : Recompute::none;
    b.recompute_method = n > 0 ? RecomputeMethod::block : RecomputeMethod::uniform;
    b.recompute_num_layers = static_cast<int>(n);
    return PartialRecompute{b, simulate(m, b, sys, t, p, so)};
  };
  // Smallest n in [0, widest) that fits.
  std::int64_t lo = 0, hi = split->widest_chunk() - 1;
  if (hi < lo) return std::nullopt;
  auto last = block(hi);
  if (!last.prediction.feasible) return std::nullopt;
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    auto p = block(mid);
    if (p.prediction.feasible) {
      hi = mid;
      last = p;
    } else {
      lo = mid + 1;
    }
  }
  return last;
}

}  // namespace lmsim::search
