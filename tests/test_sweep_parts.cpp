// The sweep's pieces, without mpirun: evaluate_chunk, the in-process work queue, checkpoints as a unit (round
// trip, checksum, validation), the record spool (torn tail), and the top-k cost contract.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>

#include "io/error.hpp"
#include "io/specs.hpp"
#include "search/checkpoint.hpp"
#include "search/records.hpp"
#include "search/sweep.hpp"

using namespace lmsim;
using namespace lmsim::search;
namespace fs = std::filesystem;

namespace {
Space small_space() {
  const io::SystemPreset& sp = *io::presets().find_system("a100_sxm_80g");
  Scenario s{sp.system, sp.default_params, TrainingSettings{}, 8, "a100/8"};
  s.settings.global_batch_size = 32;
  return Space(io::presets().find_model("Qwen3-0.6B")->model, {s}, SpaceFilter{});
}
struct TempDir {
  fs::path p = fs::temp_directory_path() / ("lmsim_parts_" + std::to_string(::getpid()) + "_" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
  TempDir() { fs::create_directories(p); }
  ~TempDir() { fs::remove_all(p); }
};
}  // namespace

TEST(SweepParts, ChunksAddUpToTheWholeSpace) {
  const Space space = small_space();
  const KeyFn key = [&space](std::uint64_t i) { return candidate_key(space, i); };
  SweepOptions o;
  o.top_k = 5;
  const ChunkResult whole = evaluate_chunk(space, 0, space.size(), o, key);
  Counts sum{};
  TopK top(o.top_k, &key);
  std::vector<AllRecord> recs;
  for (std::uint64_t lo = 0; lo < space.size(); lo += 97) {
    const ChunkResult c = evaluate_chunk(space, lo, std::min(space.size(), lo + 97), o, key, &recs);
    for (std::size_t r = 0; r < kReasons; ++r) sum[r] += c.counts[r];
    top.merge(c.entries);
  }
  EXPECT_EQ(sum, whole.counts);
  ASSERT_EQ(recs.size(), space.size());
  for (std::uint64_t i = 0; i < recs.size(); ++i) ASSERT_EQ(recs[i].index, i);
  TopK best(o.top_k, &key);
  best.merge(whole.entries);
  const auto a = top.sorted(), b = best.sorted();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].index, b[i].index);
  EXPECT_GT(whole.counts[0], 0u);
}

TEST(SweepParts, LocalQueueHandsOutEachChunkOnceAndStopsEveryone) {
  LocalWorkQueue q(1000);
  std::vector<int> seen(1000, 0);
  std::vector<std::thread> ts;
  std::mutex mu;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&] {
      while (auto id = q.claim(false)) {
        std::lock_guard<std::mutex> g(mu);
        ++seen[*id];
      }
    });
  for (auto& t : ts) t.join();
  for (int v : seen) EXPECT_EQ(v, 1);
  EXPECT_FALSE(q.stopped());
  LocalWorkQueue s(10);
  EXPECT_TRUE(s.claim(false).has_value());
  EXPECT_FALSE(s.claim(true).has_value());   // one participant asks to stop ...
  EXPECT_FALSE(s.claim(false).has_value());  // ... and every later claim stops
  EXPECT_TRUE(s.stopped());
}

TEST(SweepParts, CheckpointRoundTripAndValidation) {
  TempDir d;
  const CheckpointKey key{"abc123", 100, 1050};
  CheckpointState st;
  Counts c{};
  c[0] = 60;
  c[kExceedsMemory] = 40;
  st.chunk_counts[3] = c;
  Counts last{};
  last[0] = 50;
  st.chunk_counts[10] = last;  // the short last chunk: 1050 - 1000
  st.entries = {{1.5, 305, 1.5, 2e9}, {2.5, 1001, 2.5, 1e9}};
  const std::string path = checkpoint_path(d.p.string(), 0);
  write_checkpoint(path, key, st);
  const CheckpointState back = read_checkpoint(path, key);
  EXPECT_EQ(back.chunk_counts, st.chunk_counts);
  ASSERT_EQ(back.entries.size(), 2u);
  EXPECT_EQ(back.entries[1].index, 1001u);
  EXPECT_FALSE(fs::exists(path + ".tmp"));

  // Another search's checkpoint is refused, naming why.
  CheckpointKey other = key;
  other.fingerprint = "def456";
  EXPECT_THROW(read_checkpoint(path, other), io::InputError);

  // Any edited byte fails the checksum.
  std::string text;
  {
    std::ifstream f(path);
    text.assign(std::istreambuf_iterator<char>(f), {});
  }
  auto rewrite = [&](const std::string& t) {
    std::ofstream f(path, std::ios::trunc);
    f << t;
  };
  std::string edited = text;
  edited.replace(edited.find("E 305"), 5, "E 306");
  rewrite(edited);
  try {
    read_checkpoint(path, key);
    FAIL() << "an edited checkpoint was accepted";
  } catch (const io::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("checksum"), std::string::npos) << e.what();
  }
  rewrite(text.substr(0, text.size() / 2));  // torn
  EXPECT_THROW(read_checkpoint(path, key), io::InputError);

  // Valid checksums over invalid content (a file written by someone else) are still checked value by value.
  auto bad_state = [&](CheckpointState s, const std::string& field) {
    write_checkpoint(path, key, s);
    try {
      read_checkpoint(path, key);
      ADD_FAILURE() << "accepted a checkpoint with a bad " << field;
    } catch (const io::InputError& e) {
      EXPECT_EQ(e.field(), field) << e.what();
      EXPECT_GT(e.line(), 1);
    }
  };
  CheckpointState s1 = st;
  s1.chunk_counts[11] = c;  // beyond the space
  bad_state(s1, "chunk");
  CheckpointState s2 = st;
  s2.chunk_counts[3][0] = 61;  // counts no longer add up to 100
  bad_state(s2, "counts");
  CheckpointState s3 = st;
  s3.entries.push_back({1.0, 5000, 1.0, 1e9});  // index beyond the space
  bad_state(s3, "entry");
  CheckpointState s4 = st;
  s4.entries.push_back({1.0, 150, 1.0, 1e9});  // chunk 1 is not completed
  bad_state(s4, "entry");
  CheckpointState s5 = st;
  s5.entries[0].time_s = -1;
  bad_state(s5, "entry");
}

TEST(SweepParts, RecordSpoolCutsATornTailAndAppends) {
  TempDir d;
  const std::string path = records_path(d.p.string(), 0);
  {
    RecordSpool s(path);
    s.append(0, {{0, 1.0, 2.0, 0}, {1, 0.0, 0.0, 3}});
    s.append(1, {{2, 1.5, 2.5, 0}, {3, 1.0, 9.0, static_cast<std::int32_t>(kExceedsMemory)}});
  }
  const auto full = fs::file_size(path);
  fs::resize_file(path, full - 10);  // a rank killed mid-block
  std::vector<std::uint64_t> ids;
  scan_spool(path, [&](std::uint64_t id, const std::vector<AllRecord>&) { ids.push_back(id); });
  EXPECT_EQ(ids, std::vector<std::uint64_t>{0});
  {
    RecordSpool s(path);  // reopening cuts the torn block, then appends after the valid prefix
    s.append(1, {{2, 1.5, 2.5, 0}, {3, 1.0, 9.0, static_cast<std::int32_t>(kExceedsMemory)}});
  }
  ids.clear();
  scan_spool(path, [&](std::uint64_t id, const std::vector<AllRecord>&) { ids.push_back(id); });
  EXPECT_EQ(ids, (std::vector<std::uint64_t>{0, 1}));
  EXPECT_EQ(fs::file_size(path), full);
  EXPECT_EQ(spooled_chunks(d.p.string(), 4, 2), (std::set<std::uint64_t>{0, 1}));
  EXPECT_EQ(spooled_chunks(d.p.string(), 5, 2), (std::set<std::uint64_t>{0, 1}));
  EXPECT_EQ(spooled_chunks(d.p.string(), 4, 3), (std::set<std::uint64_t>{}));  // lengths do not match the chunk
}

TEST(SweepParts, FingerprintCoversSearchOptions) {
  const Space space = small_space();
  SweepOptions o;
  const std::string a = fingerprint(space, 1024, o);
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a, fingerprint(space, 1024, o));
  for (auto change : std::vector<std::function<void(SweepOptions&)>>{
           [](SweepOptions& x) { x.top_k = 21; }, [](SweepOptions& x) { x.memory_margin_bytes = 1; },
           [](SweepOptions& x) { x.objective = Objective::device_hours; },
           [](SweepOptions& x) { x.validity.allow_uneven_layers = true; },
           [](SweepOptions& x) { x.write_all = true; }}) {
    SweepOptions p = o;
    change(p);
    EXPECT_NE(fingerprint(space, 1024, p), a);
  }
  EXPECT_NE(fingerprint(space, 2048, o), a);
  // The scenario's system and settings too: a node wired with direct links, an on/off setting.
  const io::SystemPreset& sp = *io::presets().find_system("a100_sxm_80g");
  const Model& m = io::presets().find_model("Qwen3-0.6B")->model;
  Scenario s{sp.system, sp.default_params, TrainingSettings{}, 8, "a100/8"};
  s.settings.global_batch_size = 32;
  Scenario linked = s;
  linked.system.intra_node_links = io::presets().find_system("v100_sxm2_32g")->system.intra_node_links;
  linked.system.intra_node_host_bandwidth_bytes_per_s = 16e9;
  EXPECT_NE(fingerprint(Space(m, {linked}, SpaceFilter{}), 1024, o), a);
  Scenario te = s;
  te.settings.te_cross_entropy = true;
  EXPECT_NE(fingerprint(Space(m, {te}, SpaceFilter{}), 1024, o), a);
}
