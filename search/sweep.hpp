// lmsim/search/sweep.hpp — the distributed sweep: MPI ranks × OpenMP threads over an indexable space.
//
// Owns the pieces of a sweep and the driver that joins them:
//   evaluate_chunk()  candidates [lo, hi) → rejection counts, the chunk's top-k and Pareto entries, records;
//   WorkQueue         which chunk to evaluate next; LocalWorkQueue (in-process) and the MPI one-sided queue (a
//                     fetch-and-add counter on rank 0: no master rank, a slow rank never stalls the others). A stop
//                     requested on any rank (SIGINT/SIGTERM) is seen by every rank at its next claim;
//   Progress          the progress line (rank 0);
//   checkpoints       search/checkpoint.hpp; every-candidate records for --write-all: search/records.hpp;
//   sweep()           the driver.
// Results do not depend on the number of ranks or threads.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
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
  double max_run_days = 0;     // > 0: a candidate whose run of token_budget tokens takes longer is rejected
  ValidityOptions validity;    // devices_per_node is taken from each scenario's system
  std::uint64_t chunk = 0;     // candidates per chunk; 0 = automatic
  bool write_all = false;      // spool every candidate's record into checkpoint_dir (required then)
  std::string checkpoint_dir;  // empty: no checkpoints
  double checkpoint_every_s = 30;
  bool resume = false;
  bool progress = true;
};

// How the sweep simulates a scenario's candidates: its validity rules on the scenario's system (devices per node),
// feasible within capacity minus the memory margin. Every re-simulation of a candidate after the sweep uses it too.
SimOptions scenario_sim_options(const Scenario& s, const SweepOptions& o);

// Rejection reasons (Rejection::count_ of them) plus "exceeds memory" and "exceeds the deadline" (a run of
// SweepOptions::token_budget tokens longer than max_run_days); [0] counts feasible candidates.
constexpr std::size_t kReasons = static_cast<std::size_t>(Rejection::count_) + 2;
constexpr std::size_t kExceedsMemory = kReasons - 2;
constexpr std::size_t kExceedsDeadline = kReasons - 1;
using Counts = std::array<std::uint64_t, kReasons>;
const char* reason_name(std::size_t r);

// One candidate's outcome, as spooled for --write-all.
struct AllRecord {
  std::uint64_t index;
  double time_s, peak_bytes;  // 0 when rejected before simulation
  std::int32_t reason;        // 0 ok, else Rejection value, kExceedsMemory or kExceedsDeadline
};

struct SweepResult {
  std::vector<Entry> ranking;                           // best first
  std::vector<Entry> pareto;                            // by time
  std::vector<std::optional<Entry>> best_per_scenario;  // per scenario of the space: its best, if any fits
  Counts rejections{};
  std::uint64_t evaluated = 0, feasible = 0, resumed_chunks = 0, chunk = 0;
  double wall_s = 0;
  int ranks = 1, threads = 1;
  bool interrupted = false;
};

// Tie-break key of a candidate (used only between equal objectives): the simpler layout first (fewer parallel
// dimensions, fewer model-parallel devices, fewer virtual stages, less recompute), then name and scenario.
std::string candidate_key(const Space& s, std::uint64_t index);
// Objective value of a feasible prediction (lower is better).
double objective_value(const Prediction& p, const Scenario& sc, const Strategy& s, const SweepOptions& o);
// Candidates per chunk: depends on the space only, so a resumed run may use other rank or thread counts.
std::uint64_t chunk_size(std::uint64_t space_size, const SweepOptions& o);

// Everything that changes a search's results (the model's architecture, every scenario's system, settings, θ
// and device count, the space, the chunking and every option that filters, scores or ranks), as SHA-256 hex.
std::string fingerprint(const Space& s, std::uint64_t chunk, const SweepOptions& o);

struct ChunkResult {
  Counts counts{};
  std::vector<Entry> entries;  // the chunk's top-k ∪ Pareto front ∪ best per scenario, each index once
};
// Evaluates candidates [lo, hi); appends one record per candidate to `records` when given.
ChunkResult evaluate_chunk(const Space& space, std::uint64_t lo, std::uint64_t hi, const SweepOptions& o,
                           const KeyFn& key, std::vector<AllRecord>* records = nullptr);

// The chunks of a sweep, handed out once each across every participant.
class WorkQueue {
 public:
  virtual ~WorkQueue() = default;
  // The next chunk id, or nothing when the chunks are exhausted or a stop was requested anywhere (`stop_here`
  // requests one). Thread-safe.
  virtual std::optional<std::uint64_t> claim(bool stop_here) = 0;
  bool stopped() const { return stopped_.load(); }

 protected:
  std::atomic<bool> stopped_{false};
};

class LocalWorkQueue final : public WorkQueue {
 public:
  explicit LocalWorkQueue(std::uint64_t n_chunks) : n_(n_chunks) {}
  std::optional<std::uint64_t> claim(bool stop_here) override;

 private:
  std::uint64_t n_;
  std::atomic<std::uint64_t> next_{0};
  std::atomic<bool> stop_{false};
};

// Progress of a sweep on stderr: a bar on a terminal, a log line every 10 s otherwise.
class Progress {
 public:
  Progress(std::uint64_t space_size, std::uint64_t chunk, bool enabled);
  void claimed(std::uint64_t chunk_id);  // thread-safe
  void finish();

 private:
  std::uint64_t size_, chunk_, n_chunks_;
  bool enabled_, tty_;
  std::chrono::steady_clock::time_point t0_;
  std::atomic<std::int64_t> last_print_ns_{0};
};

// Collective over MPI_COMM_WORLD (MPI must be initialised); the complete result is on rank 0. Every rank must
// run the same search (checked: the fingerprints are compared). With write_all, every candidate's record is in
// o.checkpoint_dir (search/records.hpp) when it returns uninterrupted.
SweepResult sweep(const Space& space, const SweepOptions& o);

// Installs SIGINT/SIGTERM handlers that ask a running sweep to checkpoint and stop; stop_requested() reads it.
void install_stop_handlers();
bool stop_requested();

}  // namespace lmsim::search
