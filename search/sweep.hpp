// lmsim/search/sweep.hpp — the distributed sweep: MPI ranks × OpenMP threads over an indexable space.
//
// Owns: evaluating candidates (simulate → validity → capacity check → objective), dynamic chunk distribution
// (an MPI one-sided fetch-and-add counter: no master rank, a slow rank never stalls the others), per-thread and
// per-rank top-k / Pareto / rejection counts merged at the end, checkpoints (completed chunks + state, per rank,
// written atomically) and resume, and stopping cleanly on SIGINT/SIGTERM. Results do not depend on the number
// of ranks or threads.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "search/ranking.hpp"
#include "search/space.hpp"

namespace lmsim::search {

enum class Objective { time, tokens_per_device, device_hours };
const char* to_string(Objective o);

struct SweepOptions {
  std::size_t top_k = 20;
  Objective objective = Objective::time;
  double token_budget = 1e12;  // tokens, for device_hours
  double memory_margin_bytes = 0;
  ValidityOptions validity;  // devices_per_node is taken from each scenario's system
  std::uint64_t chunk = 0;   // candidates per chunk; 0 = automatic
  bool write_all = false;
  std::string checkpoint_dir;  // empty: no checkpoints
  double checkpoint_every_s = 30;
  bool resume = false;
  bool progress = true;
};

// Rejection reasons (Rejection::count_ of them) plus one for "exceeds memory".
constexpr std::size_t kReasons = static_cast<std::size_t>(Rejection::count_) + 1;
constexpr std::size_t kExceedsMemory = kReasons - 1;
const char* reason_name(std::size_t r);

struct AllRecord {
  std::uint64_t index;
  double time_s, peak_bytes;
  std::int32_t reason;  // 0 ok, else Rejection value, or kExceedsMemory
};

struct SweepResult {
  std::vector<Entry> ranking;  // best first
  std::vector<Entry> pareto;   // by time
  std::array<std::uint64_t, kReasons> rejections{};
  std::uint64_t evaluated = 0, feasible = 0, resumed_chunks = 0;
  std::vector<AllRecord> all;  // with write_all, on rank 0, sorted by index
  double wall_s = 0;
  int ranks = 1, threads = 1;
  bool interrupted = false;
};

// Tie-break key of a candidate: configuration name, then scenario label.
std::string candidate_key(const Space& s, std::uint64_t index);
// Objective value of a feasible prediction (lower is better).
double objective_value(const Prediction& p, const Scenario& sc, const Strategy& s, const SweepOptions& o);

// Collective over MPI_COMM_WORLD (MPI must be initialised); the complete result is on rank 0.
SweepResult sweep(const Space& space, const SweepOptions& o);

// Installs SIGINT/SIGTERM handlers that ask a running sweep to checkpoint and stop.
void install_stop_handlers();

}  // namespace lmsim::search
