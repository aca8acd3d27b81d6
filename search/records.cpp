#include "search/records.hpp"

#include <cstring>
#include <filesystem>
#include <regex>
#include <stdexcept>

#include "io/error.hpp"
#include "io/hash.hpp"

namespace fs = std::filesystem;

namespace lmsim::search {

namespace {
constexpr char kBlockMagic[4] = {'L', 'M', 'R', 'B'};
constexpr std::size_t kHeader = 4 + 8 + 8, kSum = 64;

std::vector<std::string> spool_files(const std::string& dir) {
  std::vector<std::string> out;
  static const std::regex name(R"(rank_[0-9]+\.records)");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (std::regex_match(e.path().filename().string(), name)) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace

std::string records_path(const std::string& dir, int rank) {
  return (fs::path(dir) / ("rank_" + std::to_string(rank) + ".records")).string();
}

std::uint64_t scan_spool(const std::string& path,
                         const std::function<void(std::uint64_t, const std::vector<AllRecord>&)>& fn) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return 0;
  std::uint64_t valid = 0;
  std::vector<AllRecord> recs;
  for (;;) {
    char head[kHeader];
    if (std::fread(head, 1, kHeader, f) != kHeader || std::memcmp(head, kBlockMagic, 4) != 0) break;
    std::uint64_t id = 0, n = 0;
    std::memcpy(&id, head + 4, 8);
    std::memcpy(&n, head + 12, 8);
    if (n > (std::uint64_t{1} << 32)) break;
    recs.resize(n);
    char sum[kSum];
    if (std::fread(recs.data(), sizeof(AllRecord), n, f) != n || std::fread(sum, 1, kSum, f) != kSum) break;
    std::string bytes(head, kHeader);
    bytes.append(reinterpret_cast<const char*>(recs.data()), n * sizeof(AllRecord));
    if (io::sha256_hex(bytes) != std::string(sum, kSum)) break;
    fn(id, recs);
    valid += kHeader + n * sizeof(AllRecord) + kSum;
  }
  std::fclose(f);
  return valid;
}

RecordSpool::RecordSpool(std::string path) : path_(std::move(path)) {
  std::error_code ec;
  if (fs::exists(path_, ec)) {
    const std::uint64_t valid = scan_spool(path_, [](std::uint64_t, const std::vector<AllRecord>&) {});
    fs::resize_file(path_, valid, ec);
    if (ec) throw io::InputError(path_, 0, "", "cannot truncate the record spool: " + ec.message());
  }
  f_ = std::fopen(path_.c_str(), "ab");
  if (!f_) throw io::InputError(path_, 0, "", "cannot open the record spool for writing");
}

RecordSpool::~RecordSpool() {
  if (f_) std::fclose(f_);
}

void RecordSpool::append(std::uint64_t chunk_id, const std::vector<AllRecord>& records) {
  std::string bytes(kBlockMagic, 4);
  const std::uint64_t n = records.size();
  bytes.append(reinterpret_cast<const char*>(&chunk_id), 8);
  bytes.append(reinterpret_cast<const char*>(&n), 8);
  bytes.append(reinterpret_cast<const char*>(records.data()), n * sizeof(AllRecord));
  const std::string sum = io::sha256_hex(bytes);
  if (std::fwrite(bytes.data(), 1, bytes.size(), f_) != bytes.size() || std::fwrite(sum.data(), 1, kSum, f_) != kSum)
    throw io::InputError(path_, 0, "", "cannot write the record spool (disk full?)");
}

void RecordSpool::flush() {
  if (std::fflush(f_) != 0) throw io::InputError(path_, 0, "", "cannot write the record spool (disk full?)");
}

std::set<std::uint64_t> spooled_chunks(const std::string& dir, std::uint64_t space_size, std::uint64_t chunk) {
  std::set<std::uint64_t> out;
  for (const auto& p : spool_files(dir))
    scan_spool(p, [&](std::uint64_t id, const std::vector<AllRecord>& r) {
      const std::uint64_t lo = id * chunk;
      if (lo < space_size && r.size() == std::min(space_size, lo + chunk) - lo) out.insert(id);
    });
  return out;
}

void write_all_records(io::H5Writer& w, const Space& space, const std::string& dir, std::uint64_t chunk) {
  const std::uint64_t n = space.size(), n_chunks = (n + chunk - 1) / chunk;
  std::vector<std::string> status_names, recompute_names;
  for (std::size_t r = 0; r < kReasons; ++r) status_names.push_back(reason_name(r));
  for (Recompute r : {Recompute::none, Recompute::selective, Recompute::full}) recompute_names.push_back(to_string(r));
  using io::H5Type;
  const auto c_scen = w.column("/all/scenario", H5Type::i32, n);
  const auto c_dp = w.column("/all/dp", H5Type::i32, n), c_tp = w.column("/all/tp", H5Type::i32, n);
  const auto c_pp = w.column("/all/pp", H5Type::i32, n), c_cp = w.column("/all/cp", H5Type::i32, n);
  const auto c_ep = w.column("/all/ep", H5Type::i32, n), c_vpp = w.column("/all/vpp", H5Type::i32, n);
  const auto c_etp = w.column("/all/etp", H5Type::i32, n);
  const auto c_mbs = w.column("/all/micro_batch_size", H5Type::i64, n);
  const auto c_rc = w.enum_column("/all/recompute", recompute_names, n);
  const auto c_rcl = w.column("/all/recompute_num_layers", H5Type::i32, n);
  const auto c_sp = w.enum_column("/all/sequence_parallel", {"FALSE", "TRUE"}, n);
  const auto c_do = w.enum_column("/all/distributed_optimizer", {"FALSE", "TRUE"}, n);
  const auto c_fsdp = w.enum_column("/all/fsdp", {"FALSE", "TRUE"}, n);
  std::vector<std::string> cpc_names;
  for (int i = 0; i < kNumCpCommTypes; ++i) cpc_names.push_back(to_string(static_cast<CpCommType>(i)));
  const auto c_cpc = w.enum_column("/all/cp_comm_type", cpc_names, n);
  const auto c_uly = w.column("/all/ulysses_degree", H5Type::i32, n);
  const auto c_st = w.enum_column("/all/status", status_names, n);
  const auto c_t = w.column("/all/iteration_time_s", H5Type::f64, n);
  const auto c_m = w.column("/all/max_peak_memory_bytes", H5Type::f64, n);
  std::vector<char> written(n_chunks, 0);
  std::vector<std::int32_t> scen;
  StrategyColumns<std::int32_t, std::int8_t> strat;
  std::vector<std::int8_t> rc, st, cpc;
  std::vector<double> t, m;
  for (const auto& file : spool_files(dir)) {
    scan_spool(file, [&](std::uint64_t id, const std::vector<AllRecord>& recs) {
      if (id >= n_chunks || written[id]) return;  // a chunk evaluated twice (resume) has identical records
      const std::uint64_t lo = id * chunk, len = std::min(n, lo + chunk) - lo;
      if (recs.size() != len) return;
      scen.clear();
      strat.clear();
      rc.clear();
      cpc.clear();
      st.clear();
      t.clear();
      m.clear();
      for (std::uint64_t k = 0; k < len; ++k) {
        const AllRecord& a = recs[k];
        if (a.index != lo + k || a.reason < 0 || static_cast<std::size_t>(a.reason) >= kReasons)
          throw io::InputError(file, 0, "", "record spool holds a record out of place");
        const Candidate c = space.at(a.index);
        scen.push_back(static_cast<std::int32_t>(c.scenario));
        strat.add(c.strategy, space.scenarios()[c.scenario].settings);
        st.push_back(static_cast<std::int8_t>(a.reason));
        t.push_back(a.time_s);
        m.push_back(a.peak_bytes);
      }
      for (Recompute r : strat.recompute) rc.push_back(static_cast<std::int8_t>(r));
      for (CpCommType c : strat.cp_comm_type) cpc.push_back(static_cast<std::int8_t>(c));
      const std::pair<io::H5Writer::ColumnId, const void*> cols[] = {{c_scen, scen.data()},
                                                                     {c_dp, strat.dp.data()},
                                                                     {c_tp, strat.tp.data()},
                                                                     {c_pp, strat.pp.data()},
                                                                     {c_cp, strat.cp.data()},
                                                                     {c_ep, strat.ep.data()},
                                                                     {c_etp, strat.etp.data()},
                                                                     {c_vpp, strat.vpp.data()},
                                                                     {c_mbs, strat.micro_batch_size.data()},
                                                                     {c_rc, rc.data()},
                                                                     {c_rcl, strat.recompute_num_layers.data()},
                                                                     {c_sp, strat.sequence_parallel.data()},
                                                                     {c_do, strat.distributed_optimizer.data()},
                                                                     {c_fsdp, strat.fsdp.data()},
                                                                     {c_cpc, cpc.data()},
                                                                     {c_uly, strat.ulysses_degree.data()},
                                                                     {c_st, st.data()},
                                                                     {c_t, t.data()},
                                                                     {c_m, m.data()}};
      for (const auto& [col, data] : cols) w.write_at(col, lo, data, len);
      written[id] = 1;
    });
  }
  for (std::uint64_t id = 0; id < n_chunks; ++id)
    if (!written[id])
      throw std::runtime_error("--write-all: chunk " + std::to_string(id) + " has no records in " + dir);
  w.attr("/all", "rows", std::string("one per candidate; row i is the candidate of global index i"));
}

}  // namespace lmsim::search
