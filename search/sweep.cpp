#include "search/sweep.hpp"

#include <mpi.h>
#include <omp.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "io/error.hpp"

namespace fs = std::filesystem;

namespace lmsim::search {

namespace {
std::atomic<bool> g_stop{false};
extern "C" void on_signal(int) { g_stop.store(true); }
using Counts = std::array<std::uint64_t, kReasons>;  // [0] = feasible
}  // namespace

void install_stop_handlers() {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
}

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
  return to_string(static_cast<Rejection>(r));
}

std::string candidate_key(const Space& s, std::uint64_t index) {
  const Candidate c = s.at(index);
  return config_name(c.strategy) + "|" + s.scenarios()[c.scenario].label;
}

double objective_value(const Prediction& p, const Scenario& sc, const Strategy& s, const SweepOptions& o) {
  const double tokens = static_cast<double>(sc.settings.global_batch_size * sc.settings.seq_length);
  switch (o.objective) {
    case Objective::time: return p.iteration_time_s;
    case Objective::tokens_per_device:  // maximise throughput per device == minimise device-seconds per token
      return p.iteration_time_s * s.devices() / tokens;
    case Objective::device_hours: return p.iteration_time_s * s.devices() * (o.token_budget / tokens) / 3600.0;
  }
  return p.iteration_time_s;
}

namespace {

struct RankState {
  std::map<std::uint64_t, Counts> chunk_counts;  // completed chunks and what they counted
  std::vector<Entry> entries;                    // top-k and Pareto candidates (merged lazily)
};

// Everything that changes a search's results: the model's architecture (not just its name), every scenario's
// system, training settings, θ and device count, the space's size and chunking, and every search option that
// filters, scores or ranks. A resume with any of them changed is refused instead of mixing two searches.
std::uint64_t fingerprint(const Space& s, std::uint64_t chunk, const SweepOptions& o) {
  std::ostringstream d;
  d.precision(17);
  const Model& m = s.model();
  d << m.name << ' ' << m.hidden_size << ' ' << m.num_layers << ' ' << m.num_attention_heads << ' ' << m.num_kv_heads
    << ' ' << m.head_dim << ' ' << m.ffn_hidden_size << ' ' << m.vocab_size << ' ' << m.tied_embeddings << ' '
    << static_cast<int>(m.activation) << ' ' << static_cast<int>(m.norm) << ' ' << m.qkv_bias << m.qk_norm
    << m.post_norms << ' ' << m.num_experts << ' ' << m.experts_per_token << ' ' << m.moe_ffn_hidden_size << ' '
    << m.num_shared_experts << ' ' << m.first_dense_layers << ' ' << m.moe_layer_frequency << ' ' << m.mtp_layers << ' '
    << m.q_lora_rank << ' ' << m.kv_lora_rank << ' ' << m.qk_rope_head_dim << ' ' << m.v_head_dim << '\n';
  for (const auto& sc : s.scenarios()) {
    const System& y = sc.system;
    const TrainingSettings& t = sc.settings;
    d << sc.label << ' ' << sc.devices << ' ' << y.name << ' ' << y.devices_per_node << ' ' << y.peak_flops_fp16 << ' '
      << y.peak_flops_bf16 << ' ' << y.peak_flops_fp8 << ' ' << y.hbm_capacity_bytes << ' '
      << y.hbm_bandwidth_bytes_per_s << ' ' << y.intra_node.bandwidth_bytes_per_s << ' ' << y.intra_node.latency_s
      << ' ' << y.inter_node.bandwidth_bytes_per_s << ' ' << y.inter_node.latency_s << ' ' << y.gemm_layout_conversion
      << ' ' << t.seq_length << ' ' << t.global_batch_size << ' ' << t.micro_batch_size << ' '
      << static_cast<int>(t.precision) << t.distributed_optimizer << t.flash_attention << t.fused_kernels
      << t.sequence_parallel << t.dropout << t.fp32_gradients << t.tp_comm_overlap << t.overlap_grad_reduce
      << t.overlap_param_gather << t.pipeline_scatter_gather << t.overlap_p2p_comm << t.overlap_moe_expert_parallel_comm
      << ' ' << t.moe_load_imbalance;
    for (std::size_t i = 0; i < kNumParams; ++i) d << ' ' << get(sc.params, i);
    d << '\n';
  }
  d << s.size() << '/' << chunk << ' ' << static_cast<int>(o.objective) << ' ' << o.token_budget << ' '
    << o.memory_margin_bytes << ' ' << o.top_k << ' ' << o.write_all << ' ' << o.validity.allow_cross_node_tp
    << o.validity.allow_uneven_layers << o.validity.allow_padded_heads;
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char ch : d.str()) {
    h ^= ch;
    h *= 1099511628211ULL;
  }
  return h;
}

void write_checkpoint(const std::string& dir, int rank, std::uint64_t fp, std::uint64_t chunk, const RankState& st) {
  std::ostringstream o;
  o.precision(17);
  o << "lmsim-checkpoint 1 " << fp << " " << chunk << "\n";
  for (const auto& [id, c] : st.chunk_counts) {
    o << "C " << id;
    for (auto v : c) o << " " << v;
    o << "\n";
  }
  for (const auto& e : st.entries)
    o << "E " << e.index << " " << e.objective << " " << e.time_s << " " << e.peak_bytes << "\n";
  o << "END\n";
  const std::string path = dir + "/rank_" + std::to_string(rank) + ".ckpt";
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << o.str();
    f.flush();
    if (!f) throw std::runtime_error("cannot write checkpoint " + tmp);
  }
  fs::rename(tmp, path);
}

// Reads every checkpoint of the folder; unions completed chunks (identical duplicates are harmless) and entries.
void read_checkpoints(const std::string& dir, std::uint64_t fp, std::uint64_t chunk, RankState& into) {
  if (!fs::is_directory(dir)) return;
  std::map<std::uint64_t, Entry> entries;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".ckpt") continue;
    std::ifstream f(e.path());
    std::string magic, line;
    int version = 0;
    std::uint64_t ffp = 0, fchunk = 0;
    f >> magic >> version >> ffp >> fchunk;
    if (magic != "lmsim-checkpoint" || version != 1)
      throw io::InputError(e.path().string(), 1, "", "not an lmsim checkpoint");
    if (ffp != fp || fchunk != chunk)
      throw io::InputError(e.path().string(), 1, "",
                           "checkpoint of a different search (model, scenarios, space or "
                           "chunk size differ); remove it or drop --resume");
    std::getline(f, line);
    RankState part;
    std::map<std::uint64_t, Entry> part_entries;
    bool complete = false;
    while (std::getline(f, line)) {
      std::istringstream ls(line);
      std::string tag;
      ls >> tag;
      if (tag == "C") {
        std::uint64_t id;
        Counts c{};
        ls >> id;
        for (auto& v : c) ls >> v;
        part.chunk_counts[id] = c;
      } else if (tag == "E") {
        Entry en{};
        ls >> en.index >> en.objective >> en.time_s >> en.peak_bytes;
        part_entries[en.index] = en;
      } else if (tag == "END") {
        complete = true;
      }
    }
    if (!complete) continue;  // a torn file (should not happen: files are renamed into place)
    for (auto& [id, c] : part.chunk_counts) into.chunk_counts[id] = c;
    for (auto& [i, en] : part_entries) entries[i] = en;
  }
  for (auto& [i, en] : entries) into.entries.push_back(en);
}

// Keeps only the entries that can still be in the top-k or on the Pareto front.
void compact(std::vector<Entry>& entries, std::size_t k, const KeyFn& key) {
  TopK t(k, &key);
  Pareto f(&key);
  t.merge(entries);
  f.merge(entries);
  entries = t.raw();
  entries.insert(entries.end(), f.front().begin(), f.front().end());
}

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
  // Chunk size depends on the space only, so a resumed run may use another number of ranks or threads.
  const std::uint64_t chunk = o.chunk ? o.chunk : std::clamp<std::uint64_t>(size / 20000, 1024, 1 << 20);
  const std::uint64_t n_chunks = (size + chunk - 1) / chunk;
  const std::uint64_t fp = fingerprint(space, chunk, o);
  const KeyFn key = [&space](std::uint64_t i) { return candidate_key(space, i); };

  RankState state;
  std::vector<char> done(n_chunks, 0);
  if (o.resume && !o.checkpoint_dir.empty()) {
    RankState prior;
    read_checkpoints(o.checkpoint_dir, fp, chunk, prior);
    for (const auto& [id, c] : prior.chunk_counts)
      if (id < n_chunks) done[id] = 1;
    res.resumed_chunks = prior.chunk_counts.size();
    if (rank == 0) state = std::move(prior);  // rank 0 carries the earlier results forward
    MPI_Barrier(MPI_COMM_WORLD);              // everyone has read the old files before any is rewritten
  }
  if (!o.checkpoint_dir.empty() && rank == 0) fs::create_directories(o.checkpoint_dir);
  MPI_Barrier(MPI_COMM_WORLD);

  // Shared chunk counter on rank 0, advanced with one-sided fetch-and-add.
  std::int64_t* counter = nullptr;
  MPI_Win win;
  MPI_Win_allocate(rank == 0 ? static_cast<MPI_Aint>(sizeof(std::int64_t)) : 0, sizeof(std::int64_t), MPI_INFO_NULL,
                   MPI_COMM_WORLD, &counter, &win);
  if (rank == 0) *counter = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  auto next_chunk = [&]() {
    const std::int64_t one = 1;
    std::int64_t got = 0;
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
    MPI_Fetch_and_op(&one, &got, MPI_INT64_T, 0, 0, MPI_SUM, win);
    MPI_Win_unlock(0, win);
    return static_cast<std::uint64_t>(got);
  };

  std::mutex mu;  // guards `state`, the write_all records and MPI calls from threads (MPI_THREAD_SERIALIZED)
  std::vector<AllRecord> all;
  auto last_ckpt = std::chrono::steady_clock::now();
  auto last_print = last_ckpt;
  const bool tty = isatty(fileno(stderr));
  std::atomic<bool> failed{false};
  std::string failure;
  std::uint64_t evaluated_here = 0;

#pragma omp parallel
  {
    try {
      SimOptions so;
      so.validity = o.validity;
      so.memory_margin_bytes = o.memory_margin_bytes;
      while (!g_stop.load() && !failed.load()) {
        std::uint64_t id;
        {
          std::lock_guard<std::mutex> lock(mu);
          id = next_chunk();
        }
        if (id >= n_chunks) break;
        if (done[id]) continue;
        const std::uint64_t lo = id * chunk, hi = std::min(size, lo + chunk);
        TopK top(o.top_k, &key);
        Pareto front(&key);
        Counts counts{};
        std::vector<AllRecord> recs;
        for (std::uint64_t i = lo; i < hi; ++i) {
          const Candidate c = space.at(i);
          const Scenario& sc = space.scenarios()[c.scenario];
          so.validity.devices_per_node = sc.system.devices_per_node;
          const Prediction p = simulate(space.model(), c.strategy, sc.system, sc.settings, sc.params, so);
          std::int32_t reason = 0;
          if (!p.ok()) {
            reason = static_cast<std::int32_t>(p.rejection);
          } else if (!p.feasible) {
            reason = static_cast<std::int32_t>(kExceedsMemory);
          } else {
            const Entry e{objective_value(p, sc, c.strategy, o), i, p.iteration_time_s, p.max_peak_memory_bytes};
            top.offer(e);
            front.offer(e);
          }
          ++counts[static_cast<std::size_t>(reason)];
          if (o.write_all)
            recs.push_back({i, p.ok() ? p.iteration_time_s : 0.0, p.ok() ? p.max_peak_memory_bytes : 0.0, reason});
        }
        std::lock_guard<std::mutex> lock(mu);
        state.chunk_counts[id] = counts;
        evaluated_here += hi - lo;
        for (const auto& e : top.raw()) state.entries.push_back(e);
        for (const auto& e : front.front()) state.entries.push_back(e);
        if (state.entries.size() > 8 * (o.top_k + 64)) {  // compact: keep only what can still matter
          compact(state.entries, o.top_k, key);
        }
        if (o.write_all) all.insert(all.end(), recs.begin(), recs.end());
        const auto now = std::chrono::steady_clock::now();
        if (!o.checkpoint_dir.empty() &&
            std::chrono::duration<double>(now - last_ckpt).count() >= o.checkpoint_every_s) {
          write_checkpoint(o.checkpoint_dir, rank, fp, chunk, state);
          last_ckpt = now;
        }
        if (rank == 0 && o.progress && std::chrono::duration<double>(now - last_print).count() >= (tty ? 0.25 : 10.0)) {
          last_print = now;
          const double el = std::chrono::duration<double>(now - t0).count();
          const double frac = std::min(1.0, static_cast<double>(id + 1) / static_cast<double>(n_chunks));
          const double rate = static_cast<double>(id + 1) * chunk / std::max(el, 1e-9);
          const double eta = frac > 0 ? el * (1 - frac) / frac : 0;
          if (tty) {
            const int w = 30, filled = static_cast<int>(frac * w);
            std::fprintf(stderr, "\r[%.*s%*s] %5.1f%%  %.3g cfg/s  ETA %.0f s ", filled,
                         "##############################", w - filled, "", 100 * frac, rate, eta);
          } else {
            spdlog::info("search: {:.1f}% of {} configurations, {:.3g} configurations/s, ETA {:.0f} s", 100 * frac,
                         size, rate, eta);
          }
        }
      }
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mu);
      failure = e.what();
      failed.store(true);
    }
  }
  if (rank == 0 && o.progress && tty) std::fprintf(stderr, "\n");
  if (failed.load()) {
    std::fprintf(stderr, "lmsim: error on rank %d: %s\n", rank, failure.c_str());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Win_free(&win);
  int stopped_here = g_stop.load() ? 1 : 0, stopped = 0;
  MPI_Allreduce(&stopped_here, &stopped, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (!o.checkpoint_dir.empty() && stopped) write_checkpoint(o.checkpoint_dir, rank, fp, chunk, state);
  res.interrupted = stopped != 0;

  // Merge: counts by reduction, entries and records gathered on rank 0.
  Counts mine{};
  for (const auto& [id, c] : state.chunk_counts)
    for (std::size_t r = 0; r < kReasons; ++r) mine[r] += c[r];
  Counts total{};
  MPI_Reduce(mine.data(), total.data(), static_cast<int>(kReasons), MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  compact(state.entries, o.top_k, key);
  const std::vector<Entry> gathered = gather_to_root(state.entries, rank, nranks);
  if (o.write_all) {
    std::vector<AllRecord> every = gather_to_root(all, rank, nranks);
    std::sort(every.begin(), every.end(), [](const AllRecord& a, const AllRecord& b) { return a.index < b.index; });
    res.all = std::move(every);
  }
  if (rank == 0) {
    TopK t(o.top_k, &key);
    Pareto f(&key);
    t.merge(gathered);
    f.merge(gathered);
    res.ranking = t.sorted();
    res.pareto = f.front();
    res.rejections = total;
    res.feasible = total[0];
    for (auto v : total) res.evaluated += v;
  }
  std::uint64_t ev = evaluated_here, ev_total = 0;
  MPI_Reduce(&ev, &ev_total, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace lmsim::search
