#include <gtest/gtest.h>

#include "simulator/simulator.hpp"
#include "tests/helpers.hpp"

using namespace lmsim;
using lmsim::test::strat;

TEST(ConfigName, ParsesDatasetNames) {
  auto r = parse_config_name("dp2-tp4-pp1-cp1-RC");
  ASSERT_TRUE(r.strategy) << r.error;
  EXPECT_EQ(r.strategy->data_parallel, 2);
  EXPECT_EQ(r.strategy->tensor_parallel, 4);
  EXPECT_EQ(r.strategy->pipeline_parallel, 1);
  EXPECT_EQ(r.strategy->context_parallel, 1);
  EXPECT_EQ(r.strategy->recompute, Recompute::full);
  auto m = parse_config_name("dp1-tp2-pp2-cp1-ep4-noRC");
  ASSERT_TRUE(m.strategy) << m.error;
  EXPECT_EQ(m.strategy->expert_parallel, 4);
  EXPECT_EQ(m.strategy->recompute, Recompute::none);
  EXPECT_EQ(config_name(*m.strategy), "dp1-tp2-pp2-cp1-ep4-noRC");
}

TEST(ConfigName, TheDatasetsEp1SpellingIsReadAndWrittenCanonically) {
  auto r = parse_config_name("dp1-tp4-pp2-cp2-ep1-RC");
  ASSERT_TRUE(r.strategy) << r.error;
  EXPECT_EQ(r.strategy->expert_parallel, 1);
  EXPECT_EQ(config_name(*r.strategy), "dp1-tp4-pp2-cp2-RC");
  EXPECT_EQ(*r.strategy, *parse_config_name("dp1-tp4-pp2-cp2-RC").strategy);
}

TEST(ConfigName, ExtendedFormRoundTrips) {
  for (const char* n :
       {"dp2-tp4-pp1-cp1-RC", "dp8-tp1-pp1-cp1-noRC", "dp2-tp2-pp2-cp2-ep2-selRC-mbs2-vpp2-sp-do",
        "dp1-tp8-pp4-cp1-noRC-vpp7-nosp", "dp4-tp1-pp1-cp2-RC-mbs4-nodo", "dp1-tp1-pp1-cp1-RC-sp",
        "dp8-tp1-pp1-cp1-noRC-fsdp", "dp8-tp1-pp1-cp1-noRC-do-nofsdp", "dp16-tp2-pp8-cp1-ep32-etp1-noRC-vpp4",
        "dp8-tp2-pp1-cp1-etp1-RC", "dp2-tp1-pp1-cp4-noRC-a2a", "dp1-tp2-pp2-cp2-RC-mbs2-sp-do-allgather",
        "dp1-tp1-pp1-cp8-noRC-p2p", "dp1-tp1-pp1-cp8-noRC-a2a+p2p-uly2", "dp2-tp2-pp1-cp4-RC-sp-a2a+p2p",
        "dp2-tp4-pp4-cp1-RC-block3-mbs1-vpp2", "dp8-tp1-pp1-cp1-RC-uniform4"}) {
    auto r = parse_config_name(n);
    ASSERT_TRUE(r.strategy) << n << ": " << r.error;
    EXPECT_EQ(config_name(*r.strategy), n);
  }
  Strategy s;
  s.data_parallel = 3;
  s.virtual_pipeline = 5;
  s.micro_batch_size = 2;
  s.sequence_parallel = true;
  s.distributed_optimizer = false;
  s.recompute = Recompute::selective;
  EXPECT_EQ(parse_config_name(config_name(s)).strategy, s);
}

TEST(ConfigName, TheRecomputeMethodTokenSetsMegatronsMethodAndLayerCount) {
  const auto block = parse_config_name("dp2-tp4-pp4-cp1-RC-block3-vpp2");
  ASSERT_TRUE(block.strategy) << block.error;
  EXPECT_EQ(block.strategy->recompute_method, RecomputeMethod::block);
  EXPECT_EQ(block.strategy->recompute_num_layers, 3);
  const auto uniform = parse_config_name("dp2-tp4-pp4-cp1-RC-uniform2");
  ASSERT_TRUE(uniform.strategy) << uniform.error;
  EXPECT_EQ(uniform.strategy->recompute_method, RecomputeMethod::uniform);
  EXPECT_EQ(uniform.strategy->recompute_num_layers, 2);
  const std::string e = parse_config_name("dp2-tp4-pp1-cp1-noRC-block2").error;
  EXPECT_NE(e.find("'block2' names a full-recompute method; the recompute field is not RC"), std::string::npos) << e;
}

TEST(ConfigName, AMisplacedTokenIsToldApartFromAnUnknownOneAndTheOrderIsSaid) {
  const std::string misplaced = parse_config_name("dp1-tp8-pp1-cp1-noRC-sp-mbs4").error;
  EXPECT_NE(misplaced.find("'mbs4' is repeated or out of order"), std::string::npos) << misplaced;
  EXPECT_NE(misplaced.find("-mbs<N> -vpp<N>"), std::string::npos) << misplaced;
  const std::string unknown = parse_config_name("dp1-tp8-pp1-cp1-noRC-zero3").error;
  EXPECT_NE(unknown.find("unknown field 'zero3'"), std::string::npos) << unknown;
  const std::string zero = parse_config_name("dp1-tp8-pp1-cp1-noRC-mbs0").error;
  EXPECT_NE(zero.find("field 'mbs0': mbs takes a whole number from 1"), std::string::npos) << zero;
}

TEST(ConfigName, ADegreeBeyondTheLimitSaysTheLimit) {
  EXPECT_TRUE(parse_config_name("dp1048576-tp1-pp1-cp1-RC").strategy);
  const std::string e = parse_config_name("dp99999999-tp8-pp1-cp1-RC").error;
  EXPECT_NE(e.find("'dp99999999' is not dp<positive integer> (at most 1048576)"), std::string::npos) << e;
}

TEST(ConfigName, RejectsEveryMalformedForm) {
  for (const char* n : {"",
                        "dp2",
                        "dp2-tp4-pp1-cp1",
                        "dp2-tp4-pp1-cp1-",
                        "dp2-tp4-pp1-cp1-rc",
                        "dp2-tp4-pp1-cp1-RCX",
                        "tp4-dp2-pp1-cp1-RC",
                        "dp0-tp4-pp1-cp1-RC",
                        "dp-1-tp4-pp1-cp1-RC",
                        "dp02-tp4-pp1-cp1-RC",
                        "dpx-tp4-pp1-cp1-RC",
                        "dp2-tp4-pp1-cp1-RC-mbs0",
                        "dp2-tp4-pp1-cp1-RC-vpp1",
                        "dp2-tp4-pp1-cp1-RC-sp-sp",
                        "dp2-tp4-pp1-cp1-RC-sp-mbs2",
                        "dp2-tp4-pp1-cp1-RC-extra",
                        "dp2-tp4-pp1-cp1-RC ",
                        " dp2-tp4-pp1-cp1-RC",
                        "dp2-tp4-pp1-cp1-noRC-RC",
                        "dp99999999999-tp4-pp1-cp1-RC",
                        "dp2.5-tp4-pp1-cp1-RC",
                        "dp2--tp4-pp1-cp1-RC",
                        "dp2-tp4-pp1-cp1-ep4-ep4-RC",
                        "dp8-tp1-pp1-cp1-noRC-nodo-fsdp",
                        "dp8-tp1-pp1-cp1-noRC-fsdp-do",
                        "dp2-tp4-pp1-cp1-ep2-etp4-RC",
                        "dp2-tp4-pp1-cp1-etp1-ep2-RC",
                        "dp2-tp4-pp1-cp1-ep2-etp0-RC",
                        "dp8-tp1-pp1-cp1-noRC-a2a",
                        "dp2-tp1-pp1-cp4-noRC-a2a-sp",
                        "dp2-tp1-pp1-cp4-noRC-a2a-p2p",
                        "dp2-tp1-pp1-cp4-noRC-ring",
                        "dp1-tp1-pp1-cp8-noRC-a2a-uly2",
                        "dp1-tp1-pp1-cp8-noRC-uly2",
                        "dp1-tp1-pp1-cp8-noRC-a2a+p2p-uly8",
                        "dp1-tp1-pp1-cp8-noRC-a2a+p2p-uly3",
                        "dp1-tp1-pp1-cp8-noRC-a2a+p2p-uly1",
                        "dp2-tp4-pp1-cp1-noRC-block2",
                        "dp2-tp4-pp1-cp1-selRC-uniform2",
                        "dp2-tp4-pp1-cp1-RC-uniform1",
                        "dp2-tp4-pp1-cp1-RC-block0",
                        "dp2-tp4-pp1-cp1-RC-block2-uniform2",
                        "dp2-tp4-pp1-cp1-RC-mbs2-block2"}) {
    auto r = parse_config_name(n);
    EXPECT_FALSE(r.strategy) << "accepted '" << n << "'";
    EXPECT_FALSE(r.error.empty());
  }
}

TEST(StrategySpec, FieldsInAnyOrderReadAsTheirConfigurationName) {
  const std::pair<const char*, const char*> cases[] = {
      {"tp4-dp2-pp1-cp1-RC", "dp2-tp4-pp1-cp1-RC"},
      {"dp2-tp4-pp1-cp1-RC-sp-mbs2", "dp2-tp4-pp1-cp1-RC-mbs2-sp"},
      {"sp-vpp5-RC-pp4-tp8-dp2-mbs1", "dp2-tp8-pp4-cp1-RC-mbs1-vpp5-sp"},
      {"dp2-tp4", "dp2-tp4-pp1-cp1-noRC"},  // pp and cp 1, Megatron's default recompute (none)
      {"dp8-fsdp-do", "dp8-tp1-pp1-cp1-noRC-do-fsdp"},
      {"uly2-a2a+p2p-cp8-dp1", "dp1-tp1-pp1-cp8-noRC-a2a+p2p-uly2"},
      {"etp1-ep32-tp2-pp8-dp16-vpp4", "dp16-tp2-pp8-cp1-ep32-etp1-noRC-vpp4"},
      {"block3-RC-dp2-tp4-pp4-vpp2", "dp2-tp4-pp4-cp1-RC-block3-vpp2"},
      {"tp2-selective-dp4", "dp4-tp2-pp1-cp1-selRC"},  // Megatron's --recompute-granularity spellings
      {"full-dp4", "dp4-tp1-pp1-cp1-RC"},
      {"none-dp4", "dp4-tp1-pp1-cp1-noRC"},
  };
  for (const auto& [spec, name] : cases) {
    const ParseResult r = parse_strategy_spec(spec);
    ASSERT_TRUE(r.strategy) << spec << ": " << r.error;
    EXPECT_EQ(config_name(*r.strategy), name) << spec;
  }
}

TEST(StrategySpec, DataParallelFollowsFromTheDeviceCountWhenLeftOut) {
  const ParseResult r = parse_strategy_spec("tp8-pp8-cp2-vpp5-RC", 1024);
  ASSERT_TRUE(r.strategy) << r.error;
  EXPECT_EQ(config_name(*r.strategy), "dp8-tp8-pp8-cp2-RC-vpp5");
  EXPECT_EQ(r.strategy->devices(), 1024);
  // Megatron's dp: an MoE model's experts fold inside dp·cp, so ep does not divide the device count.
  EXPECT_EQ(config_name(*parse_strategy_spec("tp2-pp8-ep64-etp1-selRC", 1024).strategy),
            "dp64-tp2-pp8-cp1-ep64-etp1-selRC");
  // A dp given wins (the device count is the caller's to check against it).
  EXPECT_EQ(parse_strategy_spec("dp4-tp8", 1024).strategy->data_parallel, 4);
  const std::string none = parse_strategy_spec("tp8-pp8").error;
  EXPECT_NE(none.find("no dp<N>: give it, or the device count (--devices)"), std::string::npos) << none;
  const std::string uneven = parse_strategy_spec("tp3-pp4-RC", 256).error;
  EXPECT_NE(uneven.find("256 devices are not a multiple of tp*pp*cp = 12"), std::string::npos) << uneven;
}

TEST(StrategySpec, EveryConfigurationNameReadsAsTheStrictParserReadsIt) {
  for (const char* n : {"dp2-tp4-pp1-cp1-RC", "dp1-tp2-pp2-cp1-ep4-noRC", "dp1-tp4-pp2-cp2-ep1-RC",
                        "dp2-tp2-pp2-cp2-ep2-selRC-mbs2-vpp2-sp-do", "dp1-tp8-pp4-cp1-noRC-vpp7-nosp",
                        "dp16-tp2-pp8-cp1-ep32-etp1-noRC-vpp4", "dp1-tp2-pp2-cp2-RC-mbs2-sp-do-allgather",
                        "dp1-tp1-pp1-cp8-noRC-a2a+p2p-uly2", "dp2-tp4-pp4-cp1-RC-block3-mbs1-vpp2",
                        "dp8-tp1-pp1-cp1-RC-uniform4", "dp8-tp8-pp8-cp2-noRC-first15-last15"}) {
    const ParseResult strict = parse_config_name(n), spec = parse_strategy_spec(n, 4096);
    ASSERT_TRUE(strict.strategy) << n << ": " << strict.error;
    ASSERT_TRUE(spec.strategy) << n << ": " << spec.error;
    EXPECT_EQ(*spec.strategy, *strict.strategy) << n;
  }
}

TEST(StrategySpec, OnlyTheOrderAndTheOmissionsAreForgiven) {
  // Wrong only in their order, or leaving out what has a default: read.
  for (const char* n :
       {"dp2", "dp2-tp4-pp1-cp1", "tp4-dp2-pp1-cp1-RC", "dp2-tp4-pp1-cp1-RC-sp-mbs2", "dp2-tp4-pp1-cp1-etp1-ep2-RC",
        "dp8-tp1-pp1-cp1-noRC-fsdp-do", "dp2-tp1-pp1-cp4-noRC-a2a-sp", "dp2-tp4-pp1-cp1-RC-mbs2-block2"})
    EXPECT_TRUE(parse_strategy_spec(n).strategy) << n << ": " << parse_strategy_spec(n).error;
  // Wrong in what they say: refused, each with its reason.
  const std::pair<const char*, const char*> refused[] = {
      {"", "an empty field"},
      {"dp2-tp4-pp1-cp1-", "an empty field"},
      {"dp2--tp4", "an empty field"},
      {"dp2-tp4-pp1-cp1-noRC-RC", "two recompute fields, 'noRC' and 'RC'"},
      {"dp2-full-none", "two recompute fields, 'full' and 'none'"},  // as typed
      {"dp2-tp4-pp1-cp1-ep4-ep4-RC", "'ep' is given twice"},
      {"dp2-tp4-pp1-cp1-RC-sp-sp", "'sp' and 'sp' set the same thing"},
      {"dp2-tp4-RC-sp-nosp", "'sp' and 'nosp' set the same thing"},
      {"dp2-tp4-pp1-cp1-RC-block2-uniform2", "'block2' and 'uniform2' set the same thing"},
      {"dp2-tp4-pp1-cp1-RC-extra", "unknown field 'extra'"},
      {"dp2-tp4-pp1-cp1-rc", "unknown field 'rc'"},
      // A numbered field with a number no name carries says what the number must be.
      {"dp0-tp4", "field 'dp0': dp takes a whole number from 1 to 1048576"},
      {"dp2.5-tp4", "field 'dp2.5': dp takes a whole number"},
      {"dp8-RC-mbs0", "field 'mbs0': mbs takes a whole number"},
      {"dp8-RC-vpp02", "field 'vpp02': vpp takes a whole number from 1 to 1048576, written without leading zeros"},
      {"dp8-RC-mbsx", "unknown field 'mbsx'"},
      // What the configuration name it stands for breaks, as parse_config_name says it.
      {"dp2-tp4-noRC-block2", "read as 'dp2-tp4-pp1-cp1-noRC-block2'"},
      {"dp1-cp8-uly2", "a Ulysses degree (uly<N>) is a2a+p2p's: give a2a+p2p too"},
      {"dp1-cp8-a2a+p2p-uly8", "the Ulysses degree must be above 1, below cp and divide it"},
      {"dp8-a2a", "names a context-parallel algorithm; cp is 1"},
      {"dp8-nodo-fsdp", "'fsdp' shards the optimizer state: not with 'nodo'"},
      {"dp2-tp4-RC-vpp1", "vpp1 is written by omitting the vpp field"},
      {"dp2-tp4-ep2-etp4-RC", "etp equal to tp is written by omitting the etp field"},
  };
  for (const auto& [n, why] : refused) {
    const ParseResult r = parse_strategy_spec(n, 64);
    EXPECT_FALSE(r.strategy) << "accepted '" << n << "'";
    EXPECT_NE(r.error.find(why), std::string::npos) << n << ": " << r.error;
  }
}

namespace {
Model qwen3_06b() {
  Model m;
  m.name = "Qwen3-0.6B";
  m.hidden_size = 1024;
  m.num_layers = 28;
  m.num_attention_heads = 16;
  m.num_kv_heads = 8;
  m.head_dim = 128;
  m.ffn_hidden_size = 3072;
  m.vocab_size = 151936;
  m.tied_embeddings = true;
  m.qk_norm = true;
  return m;
}
}  // namespace

TEST(Validity, PaddedHeadsAreAnOptionForMeasuredRuns) {
  Model m = qwen3_06b();
  m.num_attention_heads = 20;  // Qwen1.5-4B: 20 heads, measured with tp 8 in LM-SimBench
  m.num_kv_heads = 20;
  TrainingSettings t;
  ValidityOptions strict, padded;
  padded.allow_padded_heads = true;
  EXPECT_EQ(check(m, strat(1, 8, 1, 1), t, strict), Rejection::heads_not_divisible_by_tp);
  EXPECT_EQ(check(m, strat(1, 8, 1, 1), t, padded), Rejection::ok);
}

// A rejection of one strategy names the figures that break its rule, and for the layer split the degrees that work.
TEST(Validity, ExplainNamesTheFiguresThatBreakTheRule) {
  const Model m = qwen3_06b();  // 28 layers: 30 slots with the embedding and the loss
  TrainingSettings t;
  t.global_batch_size = 30;
  ValidityOptions o;
  Strategy v = strat(1, 1, 2, 1);
  v.virtual_pipeline = 4;
  ASSERT_EQ(check(m, v, t, o), Rejection::layers_not_divisible_by_pp_vpp);
  EXPECT_EQ(explain(Rejection::layers_not_divisible_by_pp_vpp, m, v, t, o),
            std::string(describe(Rejection::layers_not_divisible_by_pp_vpp)) +
                " (28 layers over pp 2 x vpp 4 = 8 chunks; with pp 2, vpp 1, 2, 3, 5, 7, 14 or 15 splits them)");
  // Every degree listed splits the layers, and the one asked for is not among them.
  for (int vpp : {1, 2, 3, 5, 7, 14, 15}) {
    Strategy w = v;
    w.virtual_pipeline = vpp;
    EXPECT_TRUE(pipeline_split(m, w, false)) << vpp;
  }
  const std::string pp8 = explain(Rejection::layers_not_divisible_by_pp_vpp, m, strat(1, 1, 8, 1), t, o);
  EXPECT_NE(pp8.find("pp 1, 2, 3, 4, 5, 6, 7, 10, 14, 15, 28 or 30 splits them"), std::string::npos) << pp8;
  ASSERT_EQ(check(m, strat(4, 2, 1, 1), t, o), Rejection::batch_not_divisible);
  EXPECT_NE(explain(Rejection::batch_not_divisible, m, strat(4, 2, 1, 1), t, o)
                .find("(global batch 30, dp 4 x micro-batch 1 = 4)"),
            std::string::npos);
  EXPECT_EQ(explain(Rejection::cp_needs_flash_attention, m, v, t, o), describe(Rejection::cp_needs_flash_attention));
  // Every reason explains any strategy, even one whose degrees are out of range, and starts with its description.
  Strategy zero = strat(0, 0, 0, 0);
  zero.virtual_pipeline = 0;
  for (int r = 0; r < static_cast<int>(Rejection::count_); ++r)
    for (const Strategy& s : {v, zero}) {
      const std::string e = explain(static_cast<Rejection>(r), m, s, t, o);
      EXPECT_EQ(e.rfind(describe(static_cast<Rejection>(r)), 0), 0u) << r << ": " << e;
    }
}

TEST(Validity, EachRuleRejectsWithItsReason) {
  const Model m = qwen3_06b();
  TrainingSettings t;
  ValidityOptions o;
  EXPECT_EQ(check(m, strat(8, 1, 1, 1), t, o), Rejection::ok);
  Model m3 = m;
  m3.num_attention_heads = 12;
  m3.num_kv_heads = 12;
  EXPECT_EQ(check(m3, strat(1, 8, 1, 1), t, o), Rejection::heads_not_divisible_by_tp);
  Model kv = m;
  kv.num_kv_heads = 2;
  EXPECT_EQ(check(kv, strat(2, 4, 1, 1), t, o), Rejection::kv_heads_not_divisible_by_tp);
  // 28 layers: 8 chunks fit neither the even split (28 % 8) nor embedding + loss accounting (30 % 8).
  EXPECT_EQ(check(m, strat(1, 1, 8, 1), t, o), Rejection::layers_not_divisible_by_pp_vpp);
  Strategy v = strat(1, 1, 2, 1);
  v.virtual_pipeline = 4;
  EXPECT_EQ(check(m, v, t, o), Rejection::layers_not_divisible_by_pp_vpp);
  TrainingSettings unfused = t;
  unfused.flash_attention = false;
  EXPECT_EQ(check(m, strat(1, 1, 1, 2), unfused, o), Rejection::cp_needs_flash_attention);
  TrainingSettings odd = t;
  odd.seq_length = 4100;
  EXPECT_EQ(check(m, strat(1, 1, 1, 8), odd, o), Rejection::sequence_not_divisible_by_cp);
  TrainingSettings sp = t;
  sp.sequence_parallel = true;
  sp.seq_length = 4098;
  EXPECT_EQ(check(m, strat(1, 4, 1, 1), sp, o), Rejection::sequence_not_divisible_by_tp);
  Strategy ep = strat(4, 1, 1, 1);
  ep.expert_parallel = 2;
  EXPECT_EQ(check(m, ep, t, o), Rejection::ep_without_experts);
  Model moe = m;
  moe.num_experts = 6;
  moe.experts_per_token = 2;
  moe.moe_ffn_hidden_size = 512;
  ep.expert_parallel = 4;
  EXPECT_EQ(check(moe, ep, t, o), Rejection::experts_not_divisible_by_ep);
  Strategy ep3 = strat(2, 1, 1, 1);
  ep3.expert_parallel = 3;
  moe.num_experts = 6;
  EXPECT_EQ(check(moe, ep3, t, o), Rejection::ep_not_dividing_dp_cp);
  // MoE parallel folding: ep·etp must divide tp·cp·dp; etp is an MoE option.
  Strategy fold = strat(2, 2, 1, 1);
  fold.expert_parallel = 6;  // 6 x 1 does not divide tp·cp·dp = 4
  fold.expert_tensor_parallel = 1;
  EXPECT_EQ(check(moe, fold, t, o), Rejection::ep_not_dividing_dp_cp);
  fold.expert_parallel = 2;
  EXPECT_EQ(check(moe, fold, t, o), Rejection::ok);
  Strategy etp_dense = strat(4, 2, 1, 1);
  etp_dense.expert_tensor_parallel = 1;
  EXPECT_EQ(check(m, etp_dense, t, o), Rejection::ep_without_experts);
  EXPECT_EQ(check(m, strat(3, 1, 1, 1), t, o), Rejection::batch_not_divisible);  // 32 % 3
  Strategy vpp1 = strat(8, 1, 1, 1);
  vpp1.virtual_pipeline = 2;
  EXPECT_EQ(check(m, vpp1, t, o), Rejection::vpp_needs_pipeline);
  // A recompute layer count needs full recompute, and each method its own range (uniform 1 is written as 0).
  Strategy rcl = strat(8, 1, 1, 1);
  rcl.recompute_method = RecomputeMethod::block;
  rcl.recompute_num_layers = 2;
  EXPECT_EQ(check(m, rcl, t, o), Rejection::recompute_layers_invalid);
  rcl.recompute = Recompute::full;
  EXPECT_EQ(check(m, rcl, t, o), Rejection::ok);
  rcl.recompute_num_layers = 0;
  EXPECT_EQ(check(m, rcl, t, o), Rejection::recompute_layers_invalid);
  rcl.recompute_method = RecomputeMethod::uniform;
  EXPECT_EQ(check(m, rcl, t, o), Rejection::ok);
  rcl.recompute_num_layers = 1;
  EXPECT_EQ(check(m, rcl, t, o), Rejection::recompute_layers_invalid);
  rcl.recompute_num_layers = -3;
  EXPECT_EQ(check(m, rcl, t, o), Rejection::recompute_layers_invalid);
  Model wide = m;
  wide.num_attention_heads = 32;
  wide.num_kv_heads = 16;
  EXPECT_EQ(check(wide, strat(1, 16, 1, 1), t, o), Rejection::tp_crosses_node);
  o.allow_cross_node_tp = true;
  EXPECT_EQ(check(wide, strat(1, 16, 1, 1), t, o), Rejection::ok);
  ValidityOptions uneven;
  uneven.allow_uneven_layers = true;
  EXPECT_EQ(check(m, strat(2, 1, 3, 1), TrainingSettings{.global_batch_size = 32}, uneven), Rejection::ok);
}

// The batch-level EP overlap runs only where Megatron-core's TransformerConfig lets it: EP > 1, the all-to-all or
// flex dispatcher, no full recompute and no replay of the MoE module, interleaving when pipelined.
TEST(Resolve, TheBatchLevelEpOverlapIsInEffectOnlyWhereMegatronCoreRunsIt) {
  TrainingSettings t;
  t.overlap_moe_expert_parallel_comm = true;
  auto in_effect = [&](const char* name, const TrainingSettings& ts) {
    return resolve(*parse_config_name(name).strategy, ts).moe_a2a_overlap;
  };
  EXPECT_TRUE(in_effect("dp4-tp2-pp2-cp1-ep2-noRC-vpp2", t));
  EXPECT_TRUE(in_effect("dp8-tp2-pp1-cp1-ep2-selRC", t));
  EXPECT_FALSE(in_effect("dp4-tp2-pp2-cp1-ep2-noRC-vpp2", TrainingSettings{}));  // not asked for
  EXPECT_FALSE(in_effect("dp8-tp2-pp1-cp1-noRC", t));                            // no EP
  EXPECT_FALSE(in_effect("dp4-tp2-pp2-cp1-ep2-RC-vpp2", t));                     // full recompute
  EXPECT_FALSE(in_effect("dp4-tp2-pp2-cp1-ep2-noRC", t));                        // pipelined, not interleaved
  TrainingSettings gathered = t;
  gathered.moe_token_dispatcher_type = MoeDispatcher::allgather;
  EXPECT_FALSE(in_effect("dp4-tp2-pp2-cp1-ep2-noRC-vpp2", gathered));
  TrainingSettings moe_replay = t;
  moe_replay.recompute_modules = module_bit(RecomputeModule::moe);
  EXPECT_FALSE(in_effect("dp8-tp2-pp1-cp1-ep2-selRC", moe_replay));
  EXPECT_TRUE(in_effect("dp8-tp2-pp1-cp1-ep2-noRC", moe_replay));  // the modules matter only when replayed
}

// FP8 parameters need FP8 training and the optimizer state sharded (Megatron-LM's argument check): elsewhere the
// setting is moot and the weights are kept as TE's 16-bit copy plus its FP8 workspace.
TEST(Resolve, Fp8ParametersNeedFp8TrainingAndAShardedOptimizer) {
  TrainingSettings t;
  t.precision = Precision::fp8;
  t.fp8_param_gather = true;
  auto in_effect = [&](const char* name, const TrainingSettings& ts) {
    return resolve(*parse_config_name(name).strategy, ts).fp8_param_gather;
  };
  EXPECT_TRUE(in_effect("dp8-tp1-pp1-cp1-noRC-do", t));
  EXPECT_TRUE(in_effect("dp8-tp1-pp1-cp1-noRC-fsdp", t));
  EXPECT_FALSE(in_effect("dp8-tp1-pp1-cp1-noRC-nodo", t));
  EXPECT_TRUE(in_effect("dp1-tp8-pp1-cp1-noRC-nodo", t));  // one-rank DP group: the optimizer shards nothing
  TrainingSettings bf16 = t;
  bf16.precision = Precision::bf16;
  bf16.fp8_param_gather = false;
  EXPECT_FALSE(in_effect("dp8-tp1-pp1-cp1-noRC-do", bf16));
}
