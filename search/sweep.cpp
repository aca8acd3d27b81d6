#include "search/sweep.hpp"

#include <fcntl.h>
#include <mpi.h>
#include <omp.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <set>
#include <sstream>

#include "io/error.hpp"
#include "io/hash.hpp"
#include "search/checkpoint.hpp"
#include "search/records.hpp"

namespace fs = std::filesystem;

namespace lmsim::search {

namespace {
std::atomic<bool> g_stop{false};
extern "C" void on_signal(int) { g_stop.store(true); }
}  // namespace

void install_stop_handlers() {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
}
bool stop_requested() { return g_stop.load(); }

const char* to_string(Objective o) {
  switch (o) {
    case Objective::time: return "iteration_time";
    case Objective::tokens_per_device: return "tokens_per_second_per_device";
    case Objective::device_hours: return "device_hours_for_token_budget";
  }
  return "?";
}

const char* reason_name(std::size_t r) {
  if (r == 0) return "feasible";
  if (r == kExceedsMemory) return "exceeds_memory";
  if (r == kExceedsDeadline) return "exceeds_deadline";
  return to_string(static_cast<Rejection>(r));
}

std::string candidate_key(const Space& s, std::uint64_t index) {
  // Simpler layouts first: fewer parallel dimensions in use, fewer model-parallel devices, fewer virtual stages,
  // less recomputation, no FSDP; then the name, so the order is total.
  const Candidate c = s.at(index);
  const Strategy& t = c.strategy;
  const int dims = (t.tensor_parallel > 1) + (t.pipeline_parallel > 1) + (t.context_parallel > 1) +
                   (t.expert_parallel > 1) + (t.virtual_pipeline > 1);
  char prefix[64];
  std::snprintf(
      prefix, sizeof prefix, "%d|%012lld|%06d|%d|%d|", dims,
      static_cast<long long>(t.tensor_parallel) * t.pipeline_parallel * t.context_parallel * t.expert_parallel,
      t.virtual_pipeline, static_cast<int>(t.recompute), t.fsdp.value_or(false) ? 1 : 0);
  return prefix + config_name(t) + "|" + s.scenarios()[c.scenario].label;
}

double objective_value(const Prediction& p, const Scenario& sc, const Strategy& s, const SweepOptions& o) {
  const double tokens = static_cast<double>(sc.settings.global_batch_size * sc.settings.seq_length);
  switch (o.objective) {
    case Objective::time: return p.iteration_time_s;
    case Objective::tokens_per_device:  // maximise throughput per device == minimise device-seconds per token
      return p.iteration_time_s * static_cast<double>(s.devices()) / tokens;
    case Objective::device_hours: return training_run(p, s, sc.settings, o.token_budget).device_hours;
  }
  return p.iteration_time_s;
}

std::uint64_t chunk_size(std::uint64_t space_size, const SweepOptions& o) {
  return o.chunk ? o.chunk : std::clamp<std::uint64_t>(space_size / 20000, 1024, 1 << 20);
}

std::string fingerprint(const Space& s, std::uint64_t chunk, const SweepOptions& o) {
  std::ostringstream d;
  d.precision(17);
  const Model& m = s.model();
  d << m.name << ' ' << m.hidden_size << ' ' << m.num_layers << ' ' << m.num_attention_heads << ' ' << m.num_kv_heads
    << ' ' << m.head_dim << ' ' << m.ffn_hidden_size << ' ' << m.vocab_size << ' ' << m.tied_embeddings << ' '
    << static_cast<int>(m.activation) << ' ' << static_cast<int>(m.norm) << ' ' << m.qkv_bias << m.qk_norm
    << m.post_norms << ' ' << m.final_logit_softcapping << ' ' << m.num_experts << ' ' << m.experts_per_token << ' '
    << m.moe_ffn_hidden_size << ' ' << m.num_shared_experts << ' ' << m.first_dense_layers << ' '
    << m.moe_layer_frequency << ' ' << m.mtp_layers << ' ' << m.q_lora_rank << ' ' << m.kv_lora_rank << ' '
    << m.qk_rope_head_dim << ' ' << m.v_head_dim << '\n';
  for (const auto& sc : s.scenarios()) {
    const System& y = sc.system;
    const TrainingSettings& t = sc.settings;
    d << sc.label << ' ' << sc.devices << ' ' << y.name << ' ' << y.devices_per_node << ' ' << y.peak_flops_fp16 << ' '
      << y.peak_flops_bf16 << ' ' << y.peak_flops_fp8 << ' ' << y.hbm_capacity_bytes << ' '
      << y.hbm_bandwidth_bytes_per_s << ' ' << y.intra_node.bandwidth_bytes_per_s << ' ' << y.intra_node.latency_s
      << ' ' << y.inter_node.bandwidth_bytes_per_s << ' ' << y.inter_node.latency_s << ' ' << y.gemm_layout_conversion
      << y.nvlink_sharp << y.nccl_protocols << y.fused_attention << y.grouped_gemm_kernel << ' '
      << y.flash_softmax_stats_bytes << ' ' << y.intra_node_host_bandwidth_bytes_per_s << ' ' << y.sm_count << ' '
      << y.flash_attention_2_throughput << ' ' << y.mxfp8 << ' ' << y.fp8_block_scaled_gemm_throughput << ' '
      << y.peak_flops_fp4 << ' ' << y.fp4_gemm_throughput << ' ';
    for (int l : y.intra_node_links) d << l << ',';
    d << ' ' << t.seq_length << ' ' << t.global_batch_size << ' ' << t.micro_batch_size << ' '
      << static_cast<int>(t.precision) << ' ';
    for (const SettingFlag& f : kSettingFlags) d << t.*f.member;
    d << ' ' << int{t.recompute_modules} << ' ' << t.moe_load_imbalance << ' ' << t.moe_expert_capacity_factor << ' '
      << to_string(t.cp_comm_type) << ' ' << t.ulysses_degree_in_cp << ' ' << t.microbatch_group_size_per_vp_stage
      << ' ' << to_string(t.moe_token_dispatcher_type) << ' ' << to_string(t.attention_backend) << ' '
      << to_string(t.fp8_recipe) << ' ' << t.num_layers_at_start_in_bf16 << ' ' << t.num_layers_at_end_in_bf16 << ' '
      << t.document_tokens << ' ' << t.lora_rank << ' ' << int{t.lora_target_modules};
    for (std::size_t i = 0; i < kNumParams; ++i) d << ' ' << get(sc.params, i);
    d << '\n';
  }
  d << s.signature();
  d << s.size() << '/' << chunk << ' ' << static_cast<int>(o.objective) << ' ' << o.token_budget << ' '
    << o.memory_margin_bytes << ' ' << o.max_run_days << ' ' << o.top_k << ' ' << o.write_all << ' '
    << o.validity.allow_cross_node_tp << o.validity.allow_uneven_layers << o.validity.allow_padded_heads;
  return io::sha256_hex(d.str());
}

// ---- evaluate_chunk ----------------------------------------------------------------------------------------

namespace {
// The union of a top-k, a Pareto front and each scenario's best, each index once.
std::vector<Entry> union_of(const TopK& top, const Pareto& front, const std::vector<TopK>& best = {}) {
  std::vector<Entry> v = top.raw();
  v.insert(v.end(), front.front().begin(), front.front().end());
  for (const auto& b : best) v.insert(v.end(), b.raw().begin(), b.raw().end());
  std::sort(v.begin(), v.end(), [](const Entry& a, const Entry& b) { return a.index < b.index; });
  v.erase(std::unique(v.begin(), v.end(), [](const Entry& a, const Entry& b) { return a.index == b.index; }), v.end());
  return v;
}
}  // namespace

SimOptions scenario_sim_options(const Scenario& s, const SweepOptions& o) {
  SimOptions so;
  so.validity = o.validity;
  so.validity.devices_per_node = s.system.devices_per_node;
  so.memory_margin_bytes = o.memory_margin_bytes;
  return so;
}

ChunkResult evaluate_chunk(const Space& space, std::uint64_t lo, std::uint64_t hi, const SweepOptions& o,
                           const KeyFn& key, std::vector<AllRecord>* records) {
  std::vector<SimOptions> per_scenario;  // each scenario's, made once per chunk
  per_scenario.reserve(space.scenarios().size());
  for (const Scenario& sc : space.scenarios()) per_scenario.push_back(scenario_sim_options(sc, o));
  TopK top(o.top_k, &key);
  Pareto front(&key);
  std::vector<TopK> best(space.scenarios().size(), TopK(1, &key));
  ChunkResult r;
  for (std::uint64_t i = lo; i < hi; ++i) {
    const Candidate c = space.at(i);
    const Scenario& sc = space.scenarios()[c.scenario];
    const Prediction p =
        simulate(space.model(), c.strategy, sc.system, sc.settings, sc.params, per_scenario[c.scenario]);
    std::int32_t reason = 0;
    if (!p.ok()) {
      reason = static_cast<std::int32_t>(p.rejection);
    } else if (!p.feasible) {
      reason = static_cast<std::int32_t>(kExceedsMemory);
    } else if (o.max_run_days > 0 &&
               training_run(p.iteration_time_s, c.strategy.devices(), sc.settings, o.token_budget).days() >
                   o.max_run_days) {
      reason = static_cast<std::int32_t>(kExceedsDeadline);
    } else {
      const Entry e{objective_value(p, sc, c.strategy, o), i, p.iteration_time_s, p.max_peak_memory_bytes};
      top.offer(e);
      front.offer(e);
      best[c.scenario].offer(e);
    }
    ++r.counts[static_cast<std::size_t>(reason)];
    if (records)
      records->push_back({i, p.ok() ? p.iteration_time_s : 0.0, p.ok() ? p.max_peak_memory_bytes : 0.0, reason});
  }
  r.entries = union_of(top, front, best);
  return r;
}

// ---- work queues -------------------------------------------------------------------------------------------

std::optional<std::uint64_t> LocalWorkQueue::claim(bool stop_here) {
  if (stop_here) stop_.store(true);
  if (stop_.load()) {
    stopped_.store(true);
    return std::nullopt;
  }
  const std::uint64_t id = next_.fetch_add(1);
  if (id >= n_) return std::nullopt;
  return id;
}

namespace {
// The chunk counter and the stop flag live in a window on rank 0; a claim adds 1 to the counter and this rank's
// stop request to the flag in one exclusive epoch, so a stop asked anywhere is seen by everyone's next claim.
class MpiWorkQueue final : public WorkQueue {
 public:
  explicit MpiWorkQueue(std::uint64_t n_chunks) : n_(n_chunks) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Win_allocate(rank == 0 ? static_cast<MPI_Aint>(2 * sizeof(std::int64_t)) : 0, sizeof(std::int64_t),
                     MPI_INFO_NULL, MPI_COMM_WORLD, &base_, &win_);
    if (rank == 0) base_[0] = base_[1] = 0;
    MPI_Barrier(MPI_COMM_WORLD);
  }
  ~MpiWorkQueue() override { MPI_Win_free(&win_); }
  std::optional<std::uint64_t> claim(bool stop_here) override {
    std::lock_guard<std::mutex> lock(mu_);  // MPI_THREAD_SERIALIZED
    const std::int64_t one = 1, ask = stop_here ? 1 : 0;
    std::int64_t got = 0, stop = 0;
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win_);
    MPI_Fetch_and_op(&ask, &stop, MPI_INT64_T, 0, 1, MPI_SUM, win_);
    MPI_Fetch_and_op(&one, &got, MPI_INT64_T, 0, 0, MPI_SUM, win_);
    MPI_Win_unlock(0, win_);
    if (stop + ask > 0) {
      stopped_.store(true);
      return std::nullopt;
    }
    if (static_cast<std::uint64_t>(got) >= n_) return std::nullopt;
    return static_cast<std::uint64_t>(got);
  }

 private:
  std::uint64_t n_;
  std::int64_t* base_ = nullptr;
  MPI_Win win_;
  std::mutex mu_;
};
}  // namespace

// ---- progress ----------------------------------------------------------------------------------------------

Progress::Progress(std::uint64_t space_size, std::uint64_t chunk, bool enabled)
    : size_(space_size),
      chunk_(chunk),
      n_chunks_((space_size + chunk - 1) / chunk),
      enabled_(enabled),
      tty_(isatty(fileno(stderr))),
      t0_(std::chrono::steady_clock::now()) {}

void Progress::claimed(std::uint64_t chunk_id) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  const std::int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now - t0_).count();
  std::int64_t last = last_print_ns_.load();
  const std::int64_t every = tty_ ? 250'000'000 : 10'000'000'000;
  if (ns - last < every || !last_print_ns_.compare_exchange_strong(last, ns)) return;
  const double el = static_cast<double>(ns) * 1e-9;
  const double frac = std::min(1.0, static_cast<double>(chunk_id + 1) / static_cast<double>(n_chunks_));
  const double rate = static_cast<double>(chunk_id + 1) * static_cast<double>(chunk_) / std::max(el, 1e-9);
  const double eta = frac > 0 ? el * (1 - frac) / frac : 0;
  if (tty_) {
    const int w = 30, filled = static_cast<int>(frac * w);
    std::fprintf(stderr, "\r[%.*s%*s] %5.1f%%  %.3g cfg/s  ETA %.0f s ", filled, "##############################",
                 w - filled, "", 100 * frac, rate, eta);
  } else {
    spdlog::info("search: {:.1f}% of {} configurations, {:.3g} configurations/s, ETA {:.0f} s", 100 * frac, size_, rate,
                 eta);
  }
}

void Progress::finish() {
  if (enabled_ && tty_ && last_print_ns_.load() > 0) std::fprintf(stderr, "\n");
}

// ---- the driver ----------------------------------------------------------------------------------------------

namespace {

// Concatenation of every rank's vector on rank 0 (trivially copyable elements, sent as bytes).
template <class T>
std::vector<T> gather_to_root(const std::vector<T>& mine, int rank, int nranks) {
  const int bytes = static_cast<int>(mine.size() * sizeof(T));
  std::vector<int> counts(static_cast<std::size_t>(nranks)), displs(static_cast<std::size_t>(nranks));
  MPI_Gather(&bytes, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<T> out;
  if (rank == 0) {
    int off = 0;
    for (int r = 0; r < nranks; ++r) {
      displs[static_cast<std::size_t>(r)] = off;
      off += counts[static_cast<std::size_t>(r)];
    }
    out.resize(static_cast<std::size_t>(off) / sizeof(T));
  }
  MPI_Gatherv(mine.data(), bytes, MPI_BYTE, out.data(), counts.data(), displs.data(), MPI_BYTE, 0, MPI_COMM_WORLD);
  return out;
}

// Every rank must run the same search: rank 0's fingerprint is broadcast and compared everywhere.
void check_same_search(const std::string& fp, int rank) {
  char root[65] = {};
  if (rank == 0) std::snprintf(root, sizeof root, "%s", fp.c_str());
  MPI_Bcast(root, 65, MPI_CHAR, 0, MPI_COMM_WORLD);
  const int mine = fp == root ? 1 : 0;
  int all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all)
    throw io::InputError("command line", 0, "",
                         mine ? "the ranks of this job were started with different searches (another rank's model, "
                                "systems, options or θ differ from rank 0's)"
                              : "this rank was started with a different search than rank 0 (model, systems, options "
                                "or θ differ)");
}

// An exclusive lock on the checkpoint folder for the sweep's lifetime: two searches never share one.
class FolderLock {
 public:
  explicit FolderLock(const std::string& dir) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw io::InputError(dir, 0, "", "cannot create the checkpoint folder: " + ec.message());
    const std::string path = (fs::path(dir) / "lock").string();
    fd_ = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd_ < 0) throw io::InputError(path, 0, "", "cannot open the lock file of the checkpoint folder");
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd_);
      fd_ = -1;
      throw io::InputError(dir, 0, "",
                           "another search is using this checkpoint folder (the same --out?); wait for it or choose "
                           "another --out / --checkpoint-dir");
    }
  }
  ~FolderLock() {
    if (fd_ >= 0) ::close(fd_);
  }

 private:
  int fd_ = -1;
};

}  // namespace

SweepResult sweep(const Space& space, const SweepOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  SweepResult res;
  res.ranks = nranks;
  res.threads = omp_get_max_threads();
  const std::uint64_t size = space.size();
  const std::uint64_t chunk = chunk_size(size, o);
  const std::uint64_t n_chunks = (size + chunk - 1) / chunk;
  res.chunk = chunk;
  const CheckpointKey ckey{fingerprint(space, chunk, o), chunk, size};
  check_same_search(ckey.fingerprint, rank);
  const KeyFn key = [&space](std::uint64_t i) { return candidate_key(space, i); };
  const bool checkpoints = !o.checkpoint_dir.empty();
  if (o.write_all && !checkpoints) throw std::invalid_argument("sweep: write_all needs a checkpoint folder");

  // Rank 0 locks the folder, then clears what an earlier search left unless resuming.
  std::optional<FolderLock> lock;
  int lock_ok = 1;
  std::optional<io::InputError> lock_error;
  if (checkpoints && rank == 0) {
    try {
      lock.emplace(o.checkpoint_dir);
      if (!o.resume) {
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(o.checkpoint_dir, ec)) {
          const std::string n = e.path().filename().string();
          if (n.rfind("rank_", 0) == 0) fs::remove(e.path(), ec);
        }
      }
    } catch (const io::InputError& e) {
      lock_ok = 0;
      lock_error = e;
    }
  }
  MPI_Bcast(&lock_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!lock_ok) {
    if (lock_error) throw *lock_error;
    throw io::InputError(o.checkpoint_dir, 0, "", "rank 0 could not lock the checkpoint folder");
  }

  // Completed chunks of an earlier run: in a checkpoint and, with write_all, also spooled.
  CheckpointState state;
  std::vector<char> done(n_chunks, 0);
  if (o.resume && checkpoints) {
    CheckpointState prior = read_checkpoints(o.checkpoint_dir, ckey);
    if (o.write_all) {
      const std::set<std::uint64_t> spooled = spooled_chunks(o.checkpoint_dir, size, chunk);
      for (auto it = prior.chunk_counts.begin(); it != prior.chunk_counts.end();)
        it = spooled.count(it->first) ? std::next(it) : prior.chunk_counts.erase(it);
      std::erase_if(prior.entries, [&](const Entry& e) { return !prior.chunk_counts.count(e.index / chunk); });
    }
    for (const auto& [id, c] : prior.chunk_counts) done[id] = 1;
    res.resumed_chunks = prior.chunk_counts.size();
    if (rank == 0) state = std::move(prior);  // rank 0 carries the earlier results forward
  }
  MPI_Barrier(MPI_COMM_WORLD);  // everyone has read the old files before any is rewritten

  TopK top(o.top_k, &key);
  Pareto front(&key);
  std::vector<TopK> best(space.scenarios().size(), TopK(1, &key));
  auto merge = [&](const std::vector<Entry>& es) {  // each index arrives once
    top.merge(es);
    front.merge(es);
    for (const auto& e : es) best[space.at(e.index).scenario].offer(e);
  };
  merge(state.entries);
  std::optional<RecordSpool> spool;
  if (o.write_all) spool.emplace(records_path(o.checkpoint_dir, rank));

  MpiWorkQueue queue(n_chunks);
  Progress progress(size, chunk, o.progress && rank == 0);
  std::mutex mu;  // guards state, top, front, the spool and checkpoint writes
  auto last_ckpt = std::chrono::steady_clock::now();
  std::atomic<bool> failed{false};
  std::string failure;
  std::uint64_t evaluated_here = 0;
  auto save = [&] {
    state.entries = union_of(top, front, best);
    if (spool) spool->flush();  // records reach the disk before the checkpoint that counts them
    write_checkpoint(checkpoint_path(o.checkpoint_dir, rank), ckey, state);
  };

#pragma omp parallel
  {
    try {
      std::vector<AllRecord> recs;
      while (!failed.load()) {
        const auto id = queue.claim(g_stop.load());
        if (!id) break;
        progress.claimed(*id);
        if (done[*id]) continue;
        const std::uint64_t lo = *id * chunk, hi = std::min(size, lo + chunk);
        recs.clear();
        ChunkResult cr = evaluate_chunk(space, lo, hi, o, key, o.write_all ? &recs : nullptr);
        std::lock_guard<std::mutex> guard(mu);
        if (spool) spool->append(*id, recs);
        state.chunk_counts[*id] = cr.counts;
        evaluated_here += hi - lo;
        merge(cr.entries);
        const auto now = std::chrono::steady_clock::now();
        if (checkpoints && std::chrono::duration<double>(now - last_ckpt).count() >= o.checkpoint_every_s) {
          save();
          last_ckpt = now;
        }
      }
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> guard(mu);
      failure = e.what();
      failed.store(true);
    }
  }
  progress.finish();
  if (failed.load()) {
    std::fprintf(stderr, "lmsim: error on rank %d: %s\n", rank, failure.c_str());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int stopped_here = queue.stopped() ? 1 : 0, stopped = 0;
  MPI_Allreduce(&stopped_here, &stopped, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  // The final state is checkpointed too: if writing the results fails (a full disk), --resume rewrites them
  // without evaluating anything again.
  if (checkpoints) save();
  if (spool) spool->flush();
  spool.reset();
  res.interrupted = stopped != 0;

  // Merge: counts by reduction, entries gathered on rank 0.
  Counts mine{};
  for (const auto& [id, c] : state.chunk_counts)
    for (std::size_t r = 0; r < kReasons; ++r) mine[r] += c[r];
  Counts total{};
  MPI_Reduce(mine.data(), total.data(), static_cast<int>(kReasons), MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  const std::vector<Entry> gathered = gather_to_root(union_of(top, front, best), rank, nranks);
  if (rank == 0) {
    // Ranks evaluated disjoint chunks, so every index arrives once.
    TopK t(o.top_k, &key);
    Pareto f(&key);
    std::vector<TopK> b(space.scenarios().size(), TopK(1, &key));
    t.merge(gathered);
    f.merge(gathered);
    for (const auto& e : gathered) b[space.at(e.index).scenario].offer(e);
    res.ranking = t.sorted();
    res.pareto = f.front();
    for (const auto& x : b) res.best_per_scenario.push_back(x.raw().empty() ? std::nullopt : std::optional(x.raw()[0]));
    res.rejections = total;
    res.feasible = total[0];
    for (auto v : total) res.evaluated += v;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace lmsim::search
