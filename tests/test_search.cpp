#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "io/published.hpp"
#include "io/specs.hpp"
#include "search/explain.hpp"
#include "search/ranking.hpp"
#include "search/space.hpp"
#include "tests/helpers.hpp"

using namespace lmsim;
using namespace lmsim::search;

namespace {
Scenario scenario(int devices, std::int64_t gbs = 32) {
  const io::SystemPreset& sp = *io::presets().find_system("a100_sxm_80g");
  Scenario s{sp.system, sp.default_params, TrainingSettings{}, devices, "a100/" + std::to_string(devices)};
  s.settings.global_batch_size = gbs;
  return s;
}
// A filter that leaves Llama-3-8B one candidate per (dp, cp) layout: tp 1, pp 1, no recompute, micro-batch 1.
SpaceFilter tp1_pp1_filter() {
  SpaceFilter f;
  f.tp = {1};
  f.pp = {1};
  f.recompute = {Recompute::none};
  f.micro_batch = {1};
  return f;
}
const Model& llama3_8b() { return io::presets().find_model("Llama-3-8B")->model; }
}  // namespace

TEST(Space, EnumerationMatchesBruteForce) {
  const Model m = io::presets().find_model("Qwen3-0.6B")->model;  // 28 layers
  SpaceFilter f;
  const Space space(m, {scenario(8), scenario(16, 64)}, f);
  // Brute force: every (tp, pp, cp) dividing the devices, dp the rest; micro-batch | gbs/dp; vpp 1, or with pp > 1
  // any vpp whose pp·vpp chunks split the 28 layers evenly or the 30 slots of layers, embedding and loss; sp only
  // when tp > 1; three recompute modes and two optimizer modes, one where dp·cp is 1 (nothing to shard: both would be
  // the same run).
  std::uint64_t expect = 0;
  for (auto [dev, gbs] : {std::pair{8, 32}, std::pair{16, 64}})
    for (int tp = 1; tp <= dev; ++tp)
      for (int pp = 1; pp <= dev; ++pp)
        for (int cp = 1; cp <= dev; ++cp) {
          if (dev % (tp * pp * cp)) continue;
          const int dp = dev / (tp * pp * cp);
          std::uint64_t mbs = 0, vpp = 0;
          for (int b = 1; b <= gbs; ++b) mbs += (gbs % dp == 0 && (gbs / dp) % b == 0) ? 1 : 0;
          for (int v = 1; v <= 30; ++v) vpp += (v == 1 || (pp > 1 && (28 % (pp * v) == 0 || 30 % (pp * v) == 0)));
          expect += 3 * std::max<std::uint64_t>(mbs, 1) * std::max<std::uint64_t>(vpp, 1) * (tp > 1 ? 2 : 1) *
                    (dp * cp > 1 ? 2 : 1);
        }
  EXPECT_EQ(space.size(), expect);
  std::set<std::string> names;
  for (std::uint64_t i = 0; i < space.size(); ++i) {
    const Candidate c = space.at(i);
    EXPECT_EQ(c.strategy.devices(), space.scenarios()[c.scenario].devices);
    names.insert(config_name(c.strategy) + "|" + space.scenarios()[c.scenario].label);
  }
  EXPECT_EQ(names.size(), space.size());  // every index is a distinct candidate
}

// Interleaving is swept wherever the simulator can split the chunks, including with the embedding and the loss
// in the split: the published layouts of Llama-3.1-405B (126 layers, pp 8 vpp 8) and DeepSeek-V3 (61 layers and an
// MTP module, pp 8 vpp 4) are in their spaces, and no swept degree is rejected for its layer split.
TEST(Space, InterleavingIsSweptWhereTheLayersSplitWithEmbeddingAndLoss) {
  for (const auto& [name, want_vpp] : {std::pair<std::string, int>{"Llama-3.1-405B", 8}, {"DeepSeek-V3", 4}}) {
    const Model m = io::presets().find_model(name)->model;
    SpaceFilter f;
    f.pp = {8};
    f.recompute = {Recompute::none};
    f.micro_batch = {1};
    const Space space(m, {scenario(64, 512)}, f);
    std::set<int> vpps;
    for (std::uint64_t i = 0; i < space.size(); ++i) {
      const Candidate c = space.at(i);
      vpps.insert(c.strategy.virtual_pipeline);
      EXPECT_TRUE(pipeline_split(m, c.strategy, false).has_value()) << name << " " << config_name(c.strategy);
    }
    EXPECT_TRUE(vpps.count(want_vpp)) << name;
    EXPECT_TRUE(vpps.count(1)) << name;
  }
}

// Every published layout, calibration and validation row alike, is a candidate of the default space of its
// scenario (its degrees fixed, every other dimension as the search sweeps it): a layout the simulator predicts and a
// framework ran is one the search can propose.
TEST(Space, EveryPublishedLayoutIsInItsDefaultSpace) {
  const io::PublishedSet ps = io::read_published(io::data_dir() + "/public");
  ASSERT_GE(ps.runs.size(), 30u);
  for (const auto& r : ps.runs) {
    const Strategy& want = r.strategy;
    const io::SystemPreset& sp = *io::presets().find_system(r.system);
    SpaceFilter f;
    f.dp = {want.data_parallel};
    f.tp = {want.tensor_parallel};
    f.pp = {want.pipeline_parallel};
    f.cp = {want.context_parallel};
    f.ep = {want.expert_parallel};
    const auto sc = scenarios_of(sp.system, sp.default_params, r.settings, {static_cast<int>(want.devices())},
                                 {r.settings.seq_length}, {r.settings.global_batch_size});
    const Space space(r.model, sc, f);
    bool found = false;
    for (std::uint64_t i = 0; i < space.size() && !found; ++i) {
      const Strategy c = space.at(i).strategy;
      found = c.expert_tensor() == want.expert_tensor() && c.virtual_pipeline == want.virtual_pipeline &&
              c.micro_batch_size == want.micro_batch_size && c.recompute == want.recompute;
    }
    EXPECT_TRUE(found) << r.file << ":" << r.line << " " << r.label << " " << config_name(want);
  }
}

// `--vpp 4` sweeps vpp 4 only: a pp at which it cannot run gets it rejected, never vpp 1 in its place (which once
// filled the ranking with pp 1 layouts).
TEST(Space, VirtualPipelineRestrictionIsNeverReplacedByADefault) {
  SpaceFilter f;
  f.vpp = {4};
  const Space space(llama3_8b(), {scenario(8, 64)}, f);
  ASSERT_GT(space.size(), 0u);
  bool some_valid = false;
  for (std::uint64_t i = 0; i < space.size(); ++i) {
    const Candidate c = space.at(i);
    EXPECT_EQ(c.strategy.virtual_pipeline, 4) << config_name(c.strategy);
    some_valid = some_valid || check(llama3_8b(), c.strategy, space.scenarios()[0].settings, {}) == Rejection::ok;
  }
  EXPECT_TRUE(some_valid);  // pp 2 and pp 4 split 32 layers into 4 chunks per stage
}

TEST(Space, BlockRecomputeIsSweptWhereItIsPartial) {
  // Llama-3-8B's 32 layers on 8 devices: block N is swept for each layout whose widest chunk has more than N layers
  // (block 8 at pp 2, where chunks hold 16, but not at pp 4, where they hold 8: that is full recompute).
  SpaceFilter f;
  f.tp = {1};
  f.micro_batch = {1};
  f.recompute = {Recompute::full};
  f.recompute_layers = {8, 2, 8};  // repeated and unordered: swept once each
  const Space space(llama3_8b(), {scenario(8, 64)}, f);
  std::set<std::string> names;
  std::uint64_t plain = 0;
  for (std::uint64_t i = 0; i < space.size(); ++i) {
    const Strategy s = space.at(i).strategy;
    EXPECT_TRUE(names.insert(config_name(s)).second) << config_name(s);
    if (s.recompute_num_layers == 0) {
      ++plain;
      continue;
    }
    EXPECT_EQ(s.recompute_method, RecomputeMethod::block);
    const std::int64_t chunk = 32 / (s.pipeline_parallel * s.virtual_pipeline);
    EXPECT_LT(s.recompute_num_layers, chunk) << config_name(s);
  }
  EXPECT_TRUE(names.count("dp4-tp1-pp2-cp1-RC-block8-mbs1-do"));
  EXPECT_FALSE(names.count("dp2-tp1-pp4-cp1-RC-block8-mbs1-do"));
  EXPECT_TRUE(names.count("dp2-tp1-pp4-cp1-RC-block2-mbs1-vpp2-do"));
  EXPECT_TRUE(names.count("dp2-tp1-pp4-cp1-RC-mbs1-vpp2-do"));
  // Without layer counts the same space holds exactly the plain candidates.
  SpaceFilter none = f;
  none.recompute_layers.clear();
  EXPECT_EQ(Space(llama3_8b(), {scenario(8, 64)}, none).size(), plain);
}

TEST(Explain, PartialRecomputeAlternativeIsTheFewestBlockLayersThatFit) {
  // Llama-3-8B on 2 devices at pp 2 (16 layers a chunk), with the margin set so that capacity falls between full
  // and no recompute: the alternative is the smallest block count whose peak fits, found by brute force too.
  const Model& m = llama3_8b();
  const Space space(m, {scenario(2, 32)}, SpaceFilter{});
  const Scenario& sc = space.scenarios()[0];
  Candidate c{0, lmsim::test::strat(1, 1, 2)};
  c.strategy.micro_batch_size = 4;
  auto peak = [&](Recompute r, int n) {
    Strategy s = c.strategy;
    s.recompute = r;
    s.recompute_method = n > 0 ? RecomputeMethod::block : RecomputeMethod::uniform;
    s.recompute_num_layers = n;
    const Prediction p = simulate(m, s, sc.system, sc.settings, sc.params, {});
    EXPECT_TRUE(p.ok()) << config_name(s);
    return p.max_peak_memory_bytes;
  };
  const double full = peak(Recompute::full, 0), none = peak(Recompute::none, 0);
  ASSERT_LT(full, none);
  SweepOptions o;
  o.memory_margin_bytes = sc.system.hbm_capacity_bytes - (full + none) / 2;
  int expect = 0;
  for (int n = 1; n < 16 && !expect; ++n)
    if (peak(Recompute::full, n) <= sc.system.hbm_capacity_bytes - o.memory_margin_bytes) expect = n;
  ASSERT_GT(expect, 1);
  c.strategy.recompute = Recompute::full;
  auto alternative = [&](const Candidate& x) {
    SimOptions so;
    so.memory_margin_bytes = o.memory_margin_bytes;
    return partial_recompute_alternative(m, x.strategy, sc.system, sc.settings, sc.params, so);
  };
  const auto alt = alternative(c);
  ASSERT_TRUE(alt);
  EXPECT_EQ(alt->strategy.recompute_method, RecomputeMethod::block);
  EXPECT_EQ(alt->strategy.recompute_num_layers, expect);
  EXPECT_TRUE(alt->prediction.feasible);
  // Only a plain full-recompute candidate has one; none where even 15 of 16 layers do not fit.
  Candidate sel = c;
  sel.strategy.recompute = Recompute::selective;
  EXPECT_FALSE(alternative(sel));
  EXPECT_FALSE(alternative(alt ? Candidate{0, alt->strategy} : c));
  o.memory_margin_bytes = sc.system.hbm_capacity_bytes - (full + peak(Recompute::full, 15)) / 2;
  EXPECT_FALSE(alternative(c));
  // With room for every activation, the alternative is no recompute at all, the fastest layout of the three.
  o.memory_margin_bytes = sc.system.hbm_capacity_bytes - none;
  const auto no_rc = alternative(c);
  ASSERT_TRUE(no_rc);
  EXPECT_EQ(no_rc->strategy.recompute, Recompute::none);
  EXPECT_EQ(config_name(no_rc->strategy), "dp1-tp1-pp2-cp1-noRC-mbs4");
  EXPECT_EQ(partial_recompute_phrase(no_rc->strategy), "no recompute");
  EXPECT_EQ(partial_recompute_phrase(alt->strategy),
            "recompute of only the first " + std::to_string(expect) + " layers of each pipeline chunk");
  EXPECT_EQ(first_layers(1), "the first layer");  // as the messages name it
  EXPECT_EQ(first_layers(19), "the first 19 layers");
}

TEST(Space, MicroBatchRestrictionIsNeverReplacedByADefault) {
  const Model m = io::presets().find_model("Qwen3-0.6B")->model;
  SpaceFilter f;
  f.micro_batch = {3};  // divides no gbs/dp of 32
  const Space space(m, {scenario(8, 32)}, f);
  ASSERT_GT(space.size(), 0u);
  for (std::uint64_t i = 0; i < space.size(); ++i) EXPECT_EQ(space.at(i).strategy.micro_batch_size, 3);
}

TEST(Space, FiltersRestrictEveryDimension) {
  const Model m = io::presets().find_model("Qwen3-30B-A3B")->model;
  SpaceFilter f;
  f.tp = {2};
  f.ep = {1, 4};
  f.etp = {0};  // experts as tp (the default also sweeps expert TP 1)
  f.recompute = {Recompute::full};
  f.micro_batch = {1};
  f.sequence_parallel = {true};
  f.distributed_optimizer = {true};
  const Space space(m, {scenario(16)}, f);
  ASSERT_GT(space.size(), 0u);
  for (std::uint64_t i = 0; i < space.size(); ++i) {
    const Strategy s = space.at(i).strategy;
    EXPECT_EQ(s.tensor_parallel, 2);
    EXPECT_EQ(s.expert_tensor(), 2);
    EXPECT_TRUE(s.expert_parallel == 1 || s.expert_parallel == 4);
    EXPECT_EQ(s.recompute, Recompute::full);
    EXPECT_EQ(s.micro_batch_size, 1);
    EXPECT_EQ(s.sequence_parallel, std::optional<bool>(true));
    EXPECT_EQ((s.data_parallel * s.context_parallel) % s.expert_parallel, 0);
  }
}

TEST(Space, ExpertTensorParallelFoldsExpertsOverTheStageRanks) {
  const Model m = io::presets().find_model("Qwen3-30B-A3B")->model;
  SpaceFilter f;
  f.tp = {1, 2};
  f.pp = {1};
  f.cp = {1};
  f.recompute = {Recompute::none};
  f.micro_batch = {1};
  f.sequence_parallel = {true};
  f.distributed_optimizer = {true};
  f.etp = {0};
  const std::uint64_t as_tp = Space(m, {scenario(16)}, f).size();
  f.etp.clear();  // the default: as tp and 1
  const std::uint64_t as_tp_and_1 = Space(m, {scenario(16)}, f).size();
  f.etp = {0, 1};
  EXPECT_EQ(Space(m, {scenario(16)}, f).size(), as_tp_and_1);
  EXPECT_GT(as_tp_and_1, as_tp);
  f.etp = {0, 1, 2};  // as tp, 1, 2 (2 equals tp at tp = 2: listed once)
  const Space space(m, {scenario(16)}, f);
  std::set<std::string> names;
  bool folded = false;
  for (std::uint64_t i = 0; i < space.size(); ++i) {
    const Strategy s = space.at(i).strategy;
    EXPECT_TRUE(names.insert(config_name(s)).second) << config_name(s);
    EXPECT_NE(s.expert_tensor_parallel, s.tensor_parallel);  // canonical: etp = tp is written as "as tp"
    EXPECT_EQ((s.tensor_parallel * s.context_parallel * s.data_parallel) % (s.expert_parallel * s.expert_tensor()), 0);
    if (s.expert_parallel > s.data_parallel * s.context_parallel) folded = true;
  }
  EXPECT_TRUE(folded);  // EP 16 over tp2 x dp8 with expert TP 1
  EXPECT_GT(space.size(), as_tp);
  // A dense model has no expert options: the list changes nothing.
  const Model d = io::presets().find_model("Llama-3-8B")->model;
  SpaceFilter g = f;
  g.etp.clear();
  EXPECT_EQ(Space(d, {scenario(16)}, f).size(), Space(d, {scenario(16)}, g).size());
}

TEST(Space, FsdpVariantsPairOnlyWithTheShardedOptimizer) {
  const Model& m = llama3_8b();
  SpaceFilter f = tp1_pp1_filter();
  const std::uint64_t plain = Space(m, {scenario(8)}, f).size();  // no-do and do
  f.fsdp = {false, true};
  const Space space(m, {scenario(8)}, f);
  EXPECT_EQ(space.size(), plain / 2 * 3);  // no-do, do, do + fsdp
  int fsdp = 0;
  for (std::uint64_t i = 0; i < space.size(); ++i) {
    const Strategy s = space.at(i).strategy;
    ASSERT_TRUE(s.fsdp.has_value());
    if (*s.fsdp) {
      ++fsdp;
      EXPECT_EQ(s.distributed_optimizer, std::optional<bool>(true));
      // The strategy token and the training setting are the same model.
      TrainingSettings t = scenario(8).settings;
      const Prediction a = simulate(m, s, scenario(8).system, t, PlatformParams{});
      Strategy plain_s = s;
      plain_s.fsdp.reset();
      t.fsdp = true;
      const Prediction b = simulate(m, plain_s, scenario(8).system, t, PlatformParams{});
      EXPECT_DOUBLE_EQ(a.iteration_time_s, b.iteration_time_s);
      EXPECT_DOUBLE_EQ(a.max_peak_memory_bytes, b.max_peak_memory_bytes);
    }
  }
  EXPECT_EQ(static_cast<std::uint64_t>(fsdp), space.size() / 3);
}

// The context-parallel algorithms are swept where cp > 1 only; each variant predicts as the setting would.
TEST(Space, ContextParallelAlgorithmsAreSweptWhereThereIsContextParallelism) {
  const Model& m = llama3_8b();
  SpaceFilter f = tp1_pp1_filter();
  f.distributed_optimizer = {true};
  Scenario sc = scenario(8);
  sc.settings.seq_length = 32768;
  const Space plain(m, {sc}, f);  // cp 1, 2, 4, 8 over 8 devices: one candidate each
  ASSERT_EQ(plain.size(), 4u);
  f.cp_comm_type = {CpCommType::p2p, CpCommType::a2a};
  const Space space(m, {sc}, f);
  ASSERT_EQ(space.size(), 1u + 3 * 2);
  int a2a = 0;
  for (std::uint64_t i = 0; i < space.size(); ++i) {
    const Strategy s = space.at(i).strategy;
    EXPECT_EQ(s.cp_comm_type.has_value(), s.context_parallel > 1) << config_name(s);
    if (s.cp_comm_type != CpCommType::a2a) continue;
    ++a2a;
    EXPECT_EQ(parse_config_name(config_name(s)).strategy, s);
    TrainingSettings t = sc.settings;
    Strategy by_setting = s;
    by_setting.cp_comm_type.reset();
    t.cp_comm_type = CpCommType::a2a;
    const Prediction a = simulate(m, s, sc.system, sc.settings, PlatformParams{}),
                     b = simulate(m, by_setting, sc.system, t, PlatformParams{}),
                     ring = simulate(m, by_setting, sc.system, sc.settings, PlatformParams{});
    ASSERT_TRUE(a.ok() && b.ok() && ring.ok());
    EXPECT_DOUBLE_EQ(a.iteration_time_s, b.iteration_time_s);
    EXPECT_NE(a.iteration_time_s, ring.iteration_time_s);
  }
  EXPECT_EQ(a2a, 3);
  EXPECT_NE(space.signature(), plain.signature());
  // a2a+p2p is swept at every Ulysses degree that splits cp below it: cp 4 at 2, cp 8 at 2 and 4, cp 2 at none.
  f.cp_comm_type = {CpCommType::a2a_p2p};
  const Space hybrid(m, {sc}, f);
  ASSERT_EQ(hybrid.size(), 1u + 1 + 2);  // cp 1 (the settings' algorithm, moot), cp 4, cp 8
  for (std::uint64_t i = 0; i < hybrid.size(); ++i) {
    const Strategy s = hybrid.at(i).strategy;
    if (s.context_parallel == 1) continue;
    EXPECT_EQ(s.cp_comm_type, CpCommType::a2a_p2p);
    EXPECT_TRUE(s.ulysses_degree == 2 || (s.context_parallel == 8 && s.ulysses_degree == 4)) << config_name(s);
    TrainingSettings t = sc.settings;
    t.cp_comm_type = CpCommType::a2a_p2p;
    t.ulysses_degree_in_cp = s.ulysses_degree;
    Strategy by_setting = s;
    by_setting.cp_comm_type.reset();
    by_setting.ulysses_degree = 0;
    EXPECT_DOUBLE_EQ(simulate(m, s, sc.system, sc.settings, PlatformParams{}).iteration_time_s,
                     simulate(m, by_setting, sc.system, t, PlatformParams{}).iteration_time_s);
  }
}

// With a one-rank data-parallel group there is nothing to shard: the distributed-optimizer and FSDP variants are
// the same run, so one is swept (not FSDP while another variant is allowed), and it predicts as the others would.
TEST(Space, OneRankDataParallelGroupsSweepOneShardingVariant) {
  const Model m = io::presets().find_model("Llama-3-8B")->model;
  SpaceFilter f;
  f.tp = {8};
  f.recompute = {Recompute::none};
  f.micro_batch = {1};
  f.sequence_parallel = {true};
  f.fsdp = {true, false};
  const Space space(m, {scenario(8)}, f);
  ASSERT_EQ(space.size(), 1u);  // tp 8 on 8 devices: dp = pp = cp = 1
  const Strategy s = space.at(0).strategy;
  EXPECT_EQ(s.fsdp, std::optional<bool>(false));
  Strategy other = s;
  other.distributed_optimizer = !s.distributed_optimizer.value_or(false);
  const TrainingSettings t = scenario(8).settings;
  const Prediction a = simulate(m, s, scenario(8).system, t, PlatformParams{});
  const Prediction b = simulate(m, other, scenario(8).system, t, PlatformParams{});
  EXPECT_DOUBLE_EQ(a.iteration_time_s, b.iteration_time_s);
  EXPECT_DOUBLE_EQ(a.max_peak_memory_bytes, b.max_peak_memory_bytes);
  // An MoE model whose expert group still has ranks keeps every variant: the experts' optimizer shards over it.
  const Model moe = io::presets().find_model("Qwen3-30B-A3B")->model;
  SpaceFilter g;
  g.tp = {8};
  g.ep = {1};
  g.recompute = {Recompute::none};
  g.micro_batch = {1};
  g.sequence_parallel = {true};
  g.etp = {1};
  EXPECT_EQ(Space(moe, {scenario(8)}, g).size(), 2u);  // etp 1, ep 1: eight expert-data-parallel ranks
}

TEST(Ranking, TopKAndParetoMergesAreOrderIndependent) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(1, 10);
  std::vector<Entry> all;
  for (std::uint64_t i = 0; i < 3000; ++i) {
    const double t = std::round(u(rng) * 4) / 4;  // many exact ties
    all.push_back({t, i, t, std::round(u(rng) * 4) / 4});
  }
  const KeyFn key = [](std::uint64_t i) { return "cfg" + std::to_string(100000 - i); };
  // Reference: sort everything.
  std::vector<Entry> ref = all;
  std::sort(ref.begin(), ref.end(), [&](const Entry& a, const Entry& b) {
    return a.objective != b.objective ? a.objective < b.objective : key(a.index) < key(b.index);
  });
  std::vector<Entry> ref_front;
  for (const auto& e : all) {
    bool dominated = false;
    for (const auto& o : all)
      if (o.index != e.index && o.time_s <= e.time_s && o.peak_bytes <= e.peak_bytes &&
          (o.time_s < e.time_s || o.peak_bytes < e.peak_bytes || key(o.index) < key(e.index)))
        dominated = true;
    if (!dominated) ref_front.push_back(e);
  }
  for (int split : {1, 2, 3, 7}) {
    std::vector<Entry> shuffled = all;
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    std::vector<TopK> tops(static_cast<std::size_t>(split), TopK(25, &key));
    std::vector<Pareto> fronts(static_cast<std::size_t>(split), Pareto(&key));
    for (std::size_t i = 0; i < shuffled.size(); ++i) {
      tops[i % static_cast<std::size_t>(split)].offer(shuffled[i]);
      fronts[i % static_cast<std::size_t>(split)].offer(shuffled[i]);
    }
    TopK top(25, &key);
    Pareto front(&key);
    for (int s = split - 1; s >= 0; --s) {
      top.merge(tops[static_cast<std::size_t>(s)].raw());
      front.merge(fronts[static_cast<std::size_t>(s)].front());
    }
    const auto got = top.sorted();
    ASSERT_EQ(got.size(), 25u);
    for (std::size_t i = 0; i < 25; ++i) EXPECT_EQ(got[i].index, ref[i].index) << "split " << split << " rank " << i;
    std::set<std::uint64_t> a, b;
    for (const auto& e : front.front()) a.insert(e.index);
    for (const auto& e : ref_front) b.insert(e.index);
    EXPECT_EQ(a, b) << "split " << split;
  }
}

TEST(Space, ScenariosCrossEverySizeAndRefuseBadOnes) {
  const io::SystemPreset& sp = *io::presets().find_system("a100_sxm_80g");
  const auto s = scenarios_of(sp.system, sp.default_params, TrainingSettings{}, {8, 16}, {2048, 4096}, {});
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].label, "a100_sxm_80g/8dev/seq2048/gbs32");
  EXPECT_EQ(s[3].label, "a100_sxm_80g/16dev/seq4096/gbs32");
  EXPECT_EQ(s[3].settings.micro_batch_size, 1);
  EXPECT_THROW(scenarios_of(sp.system, sp.default_params, TrainingSettings{}, {8}, {0}, {}), std::invalid_argument);
  EXPECT_THROW(scenarios_of(sp.system, sp.default_params, TrainingSettings{}, {-8}, {}, {}), std::invalid_argument);
  // Flash attention swept: each size twice, labelled, the setting set; a repeated value is one scenario.
  TrainingSettings scores;
  scores.flash_attention = false;
  const auto f = scenarios_of(sp.system, sp.default_params, scores, {8}, {}, {}, {{true, false, true}, {}});
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].label, "a100_sxm_80g/8dev/seq4096/gbs32/flash");
  EXPECT_TRUE(f[0].settings.flash_attention);
  EXPECT_EQ(f[1].label, "a100_sxm_80g/8dev/seq4096/gbs32/noflash");
  EXPECT_FALSE(f[1].settings.flash_attention);
  // The MoE dispatcher swept beside it: every combination, flash attention's part first.
  const auto d = scenarios_of(sp.system, sp.default_params, scores, {8}, {}, {},
                              {{true}, {MoeDispatcher::allgather, MoeDispatcher::alltoall}});
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].label, "a100_sxm_80g/8dev/seq4096/gbs32/flash/allgather");
  EXPECT_EQ(d[0].settings.moe_token_dispatcher_type, MoeDispatcher::allgather);
  EXPECT_TRUE(d[0].settings.flash_attention);
  EXPECT_EQ(d[1].label, "a100_sxm_80g/8dev/seq4096/gbs32/flash/alltoall");
  EXPECT_EQ(d[1].settings.moe_token_dispatcher_type, MoeDispatcher::alltoall);
}

namespace {

// Whole strategy spaces the properties below are checked over: dense and MoE models, every stack, a switch, direct
// links and a full mesh, FSDP, every context-parallel algorithm and MoE dispatcher, partial block recompute.
struct PropertySpace {
  const char* model;
  const char* system;
  const char* stack;
  int devices;
  std::int64_t seq, gbs;
  std::vector<bool> fsdp;
  std::vector<CpCommType> cp_comm;
  std::vector<MoeDispatcher> dispatchers;
};
const std::vector<PropertySpace>& property_spaces() {
  static const std::vector<CpCommType> all_cp = {CpCommType::p2p, CpCommType::a2a, CpCommType::allgather,
                                                 CpCommType::a2a_p2p};
  static const std::vector<PropertySpace> spaces = {
      {"Llama-3-8B", "h100_sxm_80g", "megatron-bridge", 32, 8192, 64, {false, true}, all_cp, {}},
      {"Qwen3-0.6B", "v100_sxm2_32g", "gpu", 8, 4096, 32, {}, {}, {}},
      {"Qwen3-1.7B", "ascend_910b3_64g", "npu", 16, 8192, 32, {}, all_cp, {}},
      {"Gemma-2-9B", "ascend_910b3_64g", "npu", 8, 8192, 16, {}, {}, {}},
      {"GPT-22B", "a100_sxm_80g", "megatron-lm-2021", 64, 2048, 256, {}, {}, {}},
      {"Llama-3-70B", "h100_sxm_80g", "nemo-24.07", 128, 8192, 256, {}, {}, {}},
      {"Qwen3-30B-A3B",
       "h100_sxm_80g",
       "megatron-bridge",
       16,
       4096,
       64,
       {false, true},
       {},
       {MoeDispatcher::alltoall, MoeDispatcher::allgather, MoeDispatcher::flex}},
      {"gpt-oss-20b", "b200_sxm_180g", "megatron-bridge", 16, 4096, 32, {}, {}, {MoeDispatcher::alltoall}},
      {"DeepSeek-V3", "h100_sxm_80g", "nemo-24.07", 256, 4096, 512, {}, {}, {MoeDispatcher::flex}},
  };
  return spaces;
}

// Calls f(model, candidate, scenario, prediction) for about `per_space` candidates spread over each space, those
// the simulator accepts; returns how many.
template <class F>
std::uint64_t for_each_prediction(std::uint64_t per_space, F f) {
  std::uint64_t n = 0;
  for (const PropertySpace& k : property_spaces()) {
    const Model& m = io::presets().find_model(k.model)->model;
    const io::SystemPreset& sp = *io::presets().find_system(k.system);
    SettingSweep sweep;
    sweep.moe_dispatcher = k.dispatchers;
    SpaceFilter filter;
    filter.fsdp = k.fsdp;
    filter.cp_comm_type = k.cp_comm;
    filter.recompute_layers = {1};
    const Space space(m,
                      scenarios_of(sp.system, sp.default_params, io::resolve_stack(k.stack).settings, {k.devices},
                                   {k.seq}, {k.gbs}, sweep),
                      filter);
    EXPECT_GT(space.size(), 0u) << k.model;
    const std::uint64_t step = std::max<std::uint64_t>(1, space.size() / per_space);
    for (std::uint64_t i = 0; i < space.size(); i += step) {
      const Candidate c = space.at(i);
      const Scenario& s = space.scenarios()[c.scenario];
      const Prediction p = simulate(m, c.strategy, s.system, s.settings, s.params);
      if (!p.ok()) continue;
      ++n;
      f(m, c, s, p);
    }
  }
  return n;
}

std::string label(const Candidate& c, const Scenario& s) { return config_name(c.strategy) + " " + s.label; }

}  // namespace

// Every prediction: finite positive time and memory; no negative term; the critical-path terms adding up to the
// iteration; each stage's memory terms adding up to its peak and the largest stage peak being the one reported;
// no model FLOP rate above the device's peak. (All of each space, about 600,000 runs, passed when this was written.)
TEST(Invariants, EveryPredictionIsPhysicallyConsistent) {
  const std::uint64_t n =
      for_each_prediction(4000, [](const Model&, const Candidate& c, const Scenario& s, const Prediction& p) {
        const std::string name = label(c, s);
        ASSERT_TRUE(std::isfinite(p.iteration_time_s) && p.iteration_time_s > 0) << name;
        ASSERT_TRUE(std::isfinite(p.max_peak_memory_bytes) && p.max_peak_memory_bytes > 0) << name;
        double critical = 0;
        for (const auto& term : breakdown_terms()) {
          const double v = p.breakdown.*(term.field);
          ASSERT_TRUE(std::isfinite(v) && v >= 0) << name << ": " << term.name << " = " << v;
          if (term.kind != TermKind::hidden) critical += v;
        }
        ASSERT_NEAR(critical, p.iteration_time_s, 1e-9 * p.iteration_time_s) << name;
        double largest = 0;
        for (int st = 0; st < p.num_stages; ++st) {
          const StageResult& r = p.stages[static_cast<std::size_t>(st)];
          for (const auto& term : stage_time_terms()) {
            const double v = r.*(term.field);
            ASSERT_TRUE(std::isfinite(v) && v >= 0) << name << " stage " << st << ": " << term.name << " = " << v;
          }
          double bytes = 0;
          for (const auto& term : stage_memory_terms()) {
            const double v = r.*(term.field);
            ASSERT_TRUE(std::isfinite(v) && v >= 0) << name << " stage " << st << ": " << term.name << " = " << v;
            if (term.field != &StageResult::peak_bytes) bytes += v;
          }
          ASSERT_NEAR(bytes, r.peak_bytes, 1e-9 * r.peak_bytes) << name << " stage " << st;
          largest = std::max(largest, r.peak_bytes);
        }
        ASSERT_DOUBLE_EQ(largest, p.max_peak_memory_bytes) << name;
        const double rate = p.model_flops_per_device / p.iteration_time_s;
        ASSERT_GT(rate, 0) << name;
        ASSERT_LE(rate, s.system.peak_flops(s.settings.precision)) << name;
      });
  EXPECT_GT(n, 10000u);
}

// What each knob does, whatever the layout: recomputing (fully or selectively) never makes an iteration faster;
// sequence parallelism and the distributed optimizer never add memory.
TEST(Invariants, RecomputeNeverSpeedsUpAndShardingNeverAddsMemory) {
  const std::uint64_t n =
      for_each_prediction(2000, [](const Model& m, const Candidate& c, const Scenario& s, const Prediction& p) {
        const std::string name = label(c, s);
        auto run = [&](const Strategy& x) { return simulate(m, x, s.system, s.settings, s.params); };
        if (c.strategy.recompute == Recompute::none) {
          for (Recompute rc : {Recompute::selective, Recompute::full}) {
            Strategy x = c.strategy;
            x.recompute = rc;
            const Prediction q = run(x);
            if (q.ok()) {
              ASSERT_GE(q.iteration_time_s, p.iteration_time_s * (1 - 1e-12)) << name << " " << to_string(rc);
            }
          }
        }
        Strategy sp = c.strategy, nosp = c.strategy;
        sp.sequence_parallel = true;
        nosp.sequence_parallel = false;
        if (c.strategy.tensor_parallel > 1) {
          const Prediction a = run(sp), b = run(nosp);
          if (a.ok() && b.ok()) {
            ASSERT_LE(a.max_peak_memory_bytes, b.max_peak_memory_bytes * (1 + 1e-12)) << name;
          }
        }
        Strategy dist = c.strategy, whole = c.strategy;
        dist.distributed_optimizer = true;
        whole.distributed_optimizer = false;
        const Prediction a = run(dist), b = run(whole);
        if (a.ok() && b.ok()) {
          ASSERT_LE(a.max_peak_memory_bytes, b.max_peak_memory_bytes * (1 + 1e-12)) << name;
        }
      });
  EXPECT_GT(n, 5000u);
}
// A platform parameter moved 20 % in its faster direction (more efficiency or overlap, less latency, a smaller
// half-efficiency size), within its bounds, never slows an iteration down: hidden traffic that becomes exposed as
// compute speeds up can at most take back what the compute saved.
TEST(Invariants, AFasterPlatformParameterNeverSlowsAnIteration) {
  std::vector<std::pair<std::size_t, double>> faster;  // (θ index, factor)
  for (std::size_t i = 0; i < kNumParams; ++i) {
    const std::string name = param_table()[i].name;
    if (name.find("efficiency") != std::string::npos || name == "dp_overlap") faster.emplace_back(i, 1.2);
    if (name.find("_us") != std::string::npos || name.find("half_") != std::string::npos) faster.emplace_back(i, 0.8);
  }
  ASSERT_EQ(faster.size(), 11u);  // every time parameter (runtime memory and score bytes change no time)
  const std::uint64_t n =
      for_each_prediction(1000, [&](const Model& m, const Candidate& c, const Scenario& s, const Prediction& p) {
        for (const auto& [i, factor] : faster) {
          PlatformParams q = s.params;
          set(q, i, std::clamp(get(q, i) * factor, param_table()[i].lower, param_table()[i].upper));
          const Prediction f = simulate(m, c.strategy, s.system, s.settings, q);
          ASSERT_LE(f.iteration_time_s, p.iteration_time_s * (1 + 1e-9))
              << label(c, s) << ": " << param_table()[i].name << " " << get(s.params, i) << " -> " << get(q, i);
        }
      });
  EXPECT_GT(n, 3000u);
}

// Scaling the work: twice the global batch on the same layout costs at most twice the time (the bubble, the DP
// traffic and the optimizer step are per iteration); twice the sequence costs more time and memory; a micro-batch
// twice as large never needs less memory (more tokens in flight, or as many with fewer micro-batches).
TEST(Invariants, MoreWorkNeverCostsLess) {
  const std::uint64_t n =
      for_each_prediction(1500, [](const Model& m, const Candidate& c, const Scenario& s, const Prediction& p) {
        const std::string name = label(c, s);
        TrainingSettings batch = s.settings, sequence = s.settings;
        batch.global_batch_size *= 2;
        sequence.seq_length *= 2;
        const Prediction b = simulate(m, c.strategy, s.system, batch, s.params);
        if (b.ok()) {
          ASSERT_LE(b.iteration_time_s, 2 * p.iteration_time_s * (1 + 1e-12)) << name;
        }
        const Prediction q = simulate(m, c.strategy, s.system, sequence, s.params);
        if (q.ok()) {
          ASSERT_GT(q.iteration_time_s, p.iteration_time_s) << name;
          ASSERT_GT(q.max_peak_memory_bytes, p.max_peak_memory_bytes) << name;
        }
        Strategy larger = c.strategy;
        larger.micro_batch_size = 2 * resolve(c.strategy, s.settings).micro_batch_size;
        const Prediction l = simulate(m, larger, s.system, s.settings, s.params);
        if (l.ok()) {
          ASSERT_GE(l.max_peak_memory_bytes, p.max_peak_memory_bytes * (1 - 1e-12)) << name;
        }
      });
  EXPECT_GT(n, 5000u);
}
