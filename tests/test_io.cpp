#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>

#include "io/io.hpp"

using namespace lmsim;
namespace fs = std::filesystem;

namespace {
const std::string kMini = std::string(LMSIM_TEST_FIXTURES) + "/mini";
const std::string kSetting = "qwen25_0point5_32k";

std::string slurp(const fs::path& p) { return io::read_file(p.string()); }
void spit(const fs::path& p, const std::string& s) {
  std::ofstream o(p, std::ios::binary | std::ios::trunc);
  o << s;
}

// A private copy of the mini fixture to break.
struct Scratch {
  fs::path root;
  Scratch() {
    root = fs::temp_directory_path() / ("lmsim_io_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    fs::remove_all(root);
    fs::copy(kMini, root, fs::copy_options::recursive);
  }
  ~Scratch() { fs::remove_all(root); }
  fs::path file(const std::string& name) const { return root / kSetting / name; }
  static int& counter() {
    static int c = 0;
    return c;
  }
};

// Expects reading the dataset at `root` to fail on an optimization_config with a message holding `why`.
void expect_config_refused(const fs::path& root, const std::string& why) {
  try {
    io::read_dataset(root.string());
    ADD_FAILURE() << "accepted: " << why;
  } catch (const io::InputError& e) {
    EXPECT_EQ(e.field(), "optimization_config") << e.what();
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

// Expects read_dataset to fail with an InputError naming `file`, a line when `line` is set, and `field`.
void expect_bad(const Scratch& s, const std::string& file, bool line, const std::string& field,
                const std::string& why) {
  try {
    io::read_dataset(s.root.string());
    ADD_FAILURE() << "accepted: " << why;
  } catch (const io::InputError& e) {
    EXPECT_NE(std::string(e.file()).find(file), std::string::npos) << e.what();
    if (line) {
      EXPECT_GT(e.line(), 0) << e.what();
    }
    if (!field.empty()) {
      EXPECT_EQ(e.field(), field) << e.what();
    }
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what() << " (expected '" << why << "')";
  }
}
}  // namespace

TEST(Dataset, BundledDataHasBothQwen3SettingsOnBothPlatforms) {
  const io::Dataset d = io::read_dataset(io::data_dir() + "/lmsimbench");
  ASSERT_EQ(d.collections.size(), 4u);
  for (const char* plat : {"gpu", "npu"}) {
    const io::Collection* a = d.find("qwen3_0.6b_4k", plat);
    const io::Collection* b = d.find("qwen3_1.7b_4k", plat);
    ASSERT_TRUE(a && b) << plat;
    EXPECT_EQ(a->runs.size(), 15u);
    EXPECT_EQ(b->runs.size(), 11u);
    EXPECT_EQ(a->model, "Qwen3-0.6B");
    EXPECT_TRUE(a->settings_recorded);
    EXPECT_FALSE(a->settings.overlap_grad_reduce) << plat;  // Megatron's default, MindSpeed-LLM's Qwen3 recipes
    for (const auto& r : a->runs) {
      EXPECT_TRUE(r.iteration_time_s.has_value());
      EXPECT_TRUE(r.peak_memory_max_bytes.has_value());
      EXPECT_TRUE(r.peak_memory_bytes.empty());  // the paper gives only the maximum over ranks
    }
  }
  const io::Run* r = d.find("qwen3_0.6b_4k", "gpu")->find("dp4-tp2-pp1-cp1-noRC");
  ASSERT_NE(r, nullptr);
  EXPECT_DOUBLE_EQ(*r->iteration_time_s, 6.40);
  EXPECT_NEAR(*r->peak_memory_max_bytes, 29.03 * 1073741824.0, 1.0);
  EXPECT_EQ(d.find("qwen3_0.6b_4k", "gpu")->settings.precision, Precision::fp16);
  EXPECT_EQ(d.find("qwen3_0.6b_4k", "npu")->settings.precision, Precision::bf16);
  EXPECT_EQ(d.find("qwen3_1.7b_4k", "npu")->matrix_summary.size(), 10u);
}

TEST(Dataset, SummaryCountsMeasurementsAndPairedConfigurations) {
  const io::Dataset d = io::read_dataset(io::data_dir() + "/lmsimbench");
  const io::DatasetSummary s = io::summarize(d);
  ASSERT_EQ(s.collections.size(), 4u);
  for (const auto& c : s.collections) {
    EXPECT_EQ(c.with_time, c.configurations);
    EXPECT_EQ(c.with_per_rank_memory, 0u);  // the paper gives the maximum over ranks only
  }
  EXPECT_EQ(s.model_settings.at("qwen3_0.6b_4k").both_platforms, 15u);
  EXPECT_EQ(s.model_settings.at("qwen3_1.7b_4k").both_platforms, 11u);
  EXPECT_EQ(s.model_settings.at("qwen3_1.7b_4k").timed_per_platform.at("npu"), 11u);
}

TEST(Dataset, MiniFixtureExercisesEveryViewAndRankFile) {
  const io::Dataset d = io::read_dataset(kMini);
  ASSERT_EQ(d.collections.size(), 1u);
  const io::Collection& c = d.collections[0];
  EXPECT_EQ(c.model, "Qwen2.5-0.5B");
  EXPECT_EQ(c.platform, "npu");
  EXPECT_EQ(c.settings.seq_length, 32768);
  EXPECT_EQ(c.settings.global_batch_size, 8);
  ASSERT_EQ(c.runs.size(), 2u);
  const io::Run& r = *c.find("dp1-tp2-pp2-cp2-RC");
  EXPECT_DOUBLE_EQ(*r.iteration_time_s, 12.3455);
  ASSERT_EQ(r.peak_memory_bytes.size(), 8u);
  EXPECT_EQ(r.peak_memory_bytes[3].rank, 3);
  EXPECT_DOUBLE_EQ(r.peak_memory_bytes[3].value, 20300.0 * 1048576.0);
  EXPECT_DOUBLE_EQ(*r.peak_memory_max_bytes, 20700.0 * 1048576.0);
  ASSERT_EQ(r.step_trace.size(), 2u);
  EXPECT_DOUBLE_EQ(r.step_trace[1].communication_not_overlapped_s, 2.4);
  ASSERT_EQ(r.op_categories.size(), 2u);
  EXPECT_DOUBLE_EQ(r.op_categories[1].total_time_us, 2000000.0);
  ASSERT_EQ(r.ranks.size(), 2u);
  EXPECT_EQ(r.ranks[1].rank, 7);
  ASSERT_EQ(r.ranks[0].comm.size(), 2u);
  EXPECT_DOUBLE_EQ(r.ranks[0].comm[0].link_transit_bytes, 16.0 * 1048576.0);
  ASSERT_EQ(r.ranks[0].matrix.size(), 2u);
  EXPECT_EQ(r.ranks[0].matrix[1].batch, 7);
  EXPECT_TRUE(r.ranks[1].matrix.empty());  // optional file absent
  const io::Run& m = *c.find("dp2-tp2-pp2-cp1-noRC");
  EXPECT_TRUE(m.peak_memory_bytes.empty());
  EXPECT_DOUBLE_EQ(*m.peak_memory_max_bytes, 30000.5 * 1048576.0);
  EXPECT_TRUE(m.step_trace.empty());
  ASSERT_EQ(c.comm_summary.size(), 2u);
  EXPECT_DOUBLE_EQ(c.comm_summary[0].elapsed_time_sum_s, 1.5005);
}

TEST(Dataset, ACollectionWithoutSettingsGetsItsStacksDefaults) {
  Scratch s;
  fs::remove(s.file("training_settings.json"));
  const io::Dataset d = io::read_dataset(s.root.string());
  ASSERT_EQ(d.collections.size(), 1u);
  const io::Collection& c = d.collections[0];
  EXPECT_FALSE(c.settings_recorded);
  ASSERT_EQ(c.platform, "npu");
  // What the bundled MindSpeed-LLM collections show of the stack: BF16, SP not in effect, 16-bit gradient
  // buffers, the fp32 master copy reused, PyTorch's RMSNorm ...
  EXPECT_EQ(c.settings.precision, Precision::bf16);
  EXPECT_FALSE(c.settings.sequence_parallel);
  EXPECT_FALSE(c.settings.fp32_gradients);
  EXPECT_TRUE(c.settings.reuse_fp32_param);
  EXPECT_FALSE(c.settings.fused_norm);
  // ... and, as MindSpeed-LLM's recipes run, neither fused weight-gradient accumulation nor the fused softmax, nor
  // the gradient reduction overlapped with the backward, nor Narayanan's scattered pipeline sends (Megatron-core's
  // pipeline; lmsim's default keeps them, as the published A100 runs had them) ...
  EXPECT_FALSE(c.settings.gradient_accumulation_fusion);
  EXPECT_FALSE(c.settings.masked_softmax_fusion);
  EXPECT_FALSE(c.settings.overlap_grad_reduce);
  EXPECT_FALSE(c.settings.pipeline_scatter_gather);
  EXPECT_TRUE(TrainingSettings{}.pipeline_scatter_gather);
  // ... flash attention in its context-parallel runs (MindSpeed-LLM turns it on there) and K, V repeated to every
  // head before a Ulysses all-to-all ...
  EXPECT_TRUE(c.settings.flash_attention_with_cp);
  EXPECT_TRUE(c.settings.kv_head_repeat_before_uly_alltoall);
  // ... and the scores stored otherwise, which this 32K collection's runs without CP rule out: they ran.
  EXPECT_TRUE(c.settings.flash_attention);
  EXPECT_NE(c.settings_inferred.find("ran, yet with the attention scores stored"), std::string::npos)
      << c.settings_inferred;
}

// A MindSpeed-LLM collection turns flash attention on for its context-parallel runs alone: the bundled Qwen3 runs
// store their scores (memory) while the full collections also hold CP runs. A CP run says nothing of the others
// there, as it does on a stack whose CP needs flash attention everywhere (Megatron-LM on the V100s).
// A measured MoE run whose EP cannot fit beside experts split over TP (Megatron-core's default expert TP) ran with
// whole experts: read as expert TP 1 and said; a run either reading allows keeps the default. The LM-SimBench
// Phi-3.5-MoE collection (16 devices, dp 1 throughout, ep up to 8) holds such runs.
TEST(Dataset, AnMoERunThatCouldOnlyHaveRunWithWholeExpertsIsReadSo) {
  const fs::path root = fs::temp_directory_path() / ("lmsim_etp_" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "phi35_moe_4k");
  spit(root / "phi35_moe_4k" / "step_time_summary.csv",
       "optimization_config,iteration_time_ms\ndp1-tp2-pp8-cp1-ep2-RC,9000\ndp2-tp2-pp4-cp1-ep2-RC,8000\n"
       "dp1-tp4-pp4-cp1-ep2-etp2-RC,8500\n");
  const io::Dataset ds = io::read_dataset(root.string());
  ASSERT_EQ(ds.collections.size(), 1u);
  const io::Collection& c = ds.collections[0];
  EXPECT_EQ(c.find("dp1-tp2-pp8-cp1-ep2-RC")->strategy.expert_tensor(), 1);
  EXPECT_EQ(c.find("dp2-tp2-pp4-cp1-ep2-RC")->strategy.expert_tensor(), 2);       // ep·tp = 4 fits tp·dp = 4
  EXPECT_EQ(c.find("dp1-tp4-pp4-cp1-ep2-etp2-RC")->strategy.expert_tensor(), 2);  // named: kept (and fits)
  EXPECT_NE(c.settings_inferred.find("expert tensor parallel 1 in 'dp1-tp2-pp8-cp1-ep2-RC':"), std::string::npos)
      << c.settings_inferred;
  EXPECT_EQ(c.settings_inferred.find("dp2-tp2"), std::string::npos) << c.settings_inferred;
  // A run no expert TP lets run stays an error naming it.
  spit(root / "phi35_moe_4k" / "step_time_summary.csv",
       "optimization_config,iteration_time_ms\ndp1-tp2-pp8-cp1-ep4-RC,9000\n");
  expect_config_refused(root, "'dp1-tp2-pp8-cp1-ep4-RC' is impossible");  // an EP wider than the stage's ranks
  fs::remove_all(root);
}

// An MoE collection's profile without all-to-alls ran the all-gather dispatcher (Megatron-core's all-to-all one
// runs them in every expert-parallel run); one with them keeps the default.
TEST(Dataset, AnMoEProfileWithoutAllToAllsReadsTheAllGatherDispatcher) {
  const fs::path root = fs::temp_directory_path() / ("lmsim_dispatch_" + std::to_string(::getpid()));
  const fs::path dir = root / "phi35_moe_4k";
  auto read = [&](const std::string& comm) {
    fs::remove_all(root);
    fs::create_directories(dir);
    spit(dir / "step_time_summary.csv", "optimization_config,iteration_time_ms\ndp2-tp2-pp4-cp1-ep2-RC,9000\n");
    spit(dir / "comm_summary.csv",
         "comm_scope,comm_type,comm_group,op_count,elapsed_time_sum_ms,wait_time_sum_ms,link_bandwidth\n"
         "intra,all_gather,tp,100,500,10,100\nintra,reduce_scatter,tp,100,500,10,100\n" +
             comm);
    const io::Dataset ds = io::read_dataset(root.string());
    return ds.collections.at(0);
  };
  const io::Collection gathered = read("");
  EXPECT_EQ(gathered.settings.moe_token_dispatcher_type, MoeDispatcher::allgather);
  EXPECT_NE(gathered.settings_inferred.find("moe_token_dispatcher_type allgather"), std::string::npos)
      << gathered.settings_inferred;
  const io::Collection exchanged = read("intra,all_to_all,ep,50,300,10,100\n");
  EXPECT_EQ(exchanged.settings.moe_token_dispatcher_type, MoeDispatcher::alltoall);
  EXPECT_EQ(exchanged.settings_inferred.find("moe_token_dispatcher_type"), std::string::npos);
  fs::remove_all(root);
}

TEST(Dataset, AContextParallelRunProvesFlashAttentionOnlyWhereTheStackDoesNotForceIt) {
  const fs::path root = fs::temp_directory_path() / ("lmsim_cp_flash_" + std::to_string(::getpid()));
  fs::remove_all(root);
  const std::string runs =
      "optimization_config,iteration_time_ms\ndp4-tp1-pp1-cp2-noRC,5000\ndp8-tp1-pp1-cp1-noRC,4000\n";
  for (const char* d : {"qwen3_0.6b_4k", "processed_gpu/qwen3_0.6b_4k_tp_pp_sweep_cp1_gpu"}) {
    fs::create_directories(root / d);
    spit(root / d / "step_time_summary.csv", runs);
  }
  const io::Dataset ds = io::read_dataset(root.string());
  ASSERT_EQ(ds.collections.size(), 2u);
  for (const io::Collection& c : ds.collections) {
    const Model& m = io::presets().find_model(c.model)->model;
    const auto* sp = io::presets().find_system(c.system);
    const Prediction cp1 = simulate(m, c.find("dp8-tp1-pp1-cp1-noRC")->strategy, sp->system, c.settings, sp->params());
    TrainingSettings stored = c.settings;
    stored.flash_attention = false;
    stored.flash_attention_with_cp = false;
    const Prediction cp1_stored =
        simulate(m, c.find("dp8-tp1-pp1-cp1-noRC")->strategy, sp->system, stored, sp->params());
    if (c.platform == "npu") {  // MindSpeed-LLM: the CP run has flash, the other keeps its scores
      EXPECT_FALSE(c.settings.flash_attention) << c.settings_inferred;
      EXPECT_TRUE(c.settings.flash_in(2));
      EXPECT_DOUBLE_EQ(cp1.max_peak_memory_bytes, cp1_stored.max_peak_memory_bytes);
    } else {  // Megatron-LM: CP needs flash attention, which the collection then ran everywhere
      EXPECT_TRUE(c.settings.flash_attention);
      EXPECT_NE(c.settings_inferred.find("context parallelism by p2p"), std::string::npos) << c.settings_inferred;
      EXPECT_LT(cp1.max_peak_memory_bytes, cp1_stored.max_peak_memory_bytes);
    }
  }
  fs::remove_all(root);
}

// Without recorded settings the scores are stored unless the runs themselves rule it out: a run that ran could
// not have needed more memory than the device has.
TEST(Dataset, UnrecordedSettingsAreReadFromTheRunsThemselves) {
  const fs::path root = fs::temp_directory_path() / ("lmsim_infer_" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "qwen3_0.6b_4k");
  spit(root / "qwen3_0.6b_4k" / "step_time_summary.csv",
       "optimization_config,iteration_time_ms\ndp4-tp2-pp1-cp1-noRC,3930\n");
  auto read = [&](const std::string& manifest) {
    if (!manifest.empty()) spit(root / "data_manifest.csv", manifest);
    return io::read_dataset(root.string()).collections.at(0);
  };
  const io::Collection at_4k = read("");  // 4K tokens: the bundled layout, scores fit
  EXPECT_FALSE(at_4k.settings.flash_attention);
  EXPECT_TRUE(at_4k.settings_inferred.empty()) << at_4k.settings_inferred;
  // The same layout at 16K tokens would need over 200 GB for its scores and fits with flash attention: it ran, so
  // flash attention was on.
  const io::Collection at_16k = read("directory,seq_length\nqwen3_0.6b_4k,16384\n");
  EXPECT_TRUE(at_16k.settings.flash_attention);
  EXPECT_NE(at_16k.settings_inferred.find("'dp4-tp2-pp1-cp1-noRC' ran, yet with the attention scores stored"),
            std::string::npos)
      << at_16k.settings_inferred;
  // At 64K it would not fit either way (its logits alone take 20 GB a rank): that says nothing of the scores.
  EXPECT_FALSE(read("directory,seq_length\nqwen3_0.6b_4k,65536\n").settings.flash_attention);
  // Sequence parallelism shows in the tp group's measured collectives: all-reduces without it ...
  spit(root / "qwen3_0.6b_4k" / "comm_summary.csv",
       "comm_scope,comm_type,comm_group,op_count,elapsed_time_sum_ms,wait_time_sum_ms,link_bandwidth\n"
       "intra,all_reduce,tp,448,1500,10,120\nintra,reduce_scatter,dp,4,30,1,120\n");
  EXPECT_FALSE(read("directory\nqwen3_0.6b_4k\n").settings.sequence_parallel);
  // ... all-gathers and reduce-scatters with it.
  spit(root / "qwen3_0.6b_4k" / "comm_summary.csv",
       "comm_scope,comm_type,comm_group,op_count,elapsed_time_sum_ms,wait_time_sum_ms,link_bandwidth\n"
       "intra,all_gather,tp,448,800,10,120\nintra,reduce_scatter,tp,448,800,10,120\nintra,all_reduce,dp,4,30,1,120\n");
  const io::Collection sp = read("");
  EXPECT_TRUE(sp.settings.sequence_parallel);
  EXPECT_NE(sp.settings_inferred.find("sequence_parallel true"), std::string::npos) << sp.settings_inferred;
  // Recorded settings are taken as they are.
  spit(root / "qwen3_0.6b_4k" / "training_settings.json", "{\"flash_attention\": false, \"seq_length\": 4096}");
  const io::Collection recorded = read("directory\nqwen3_0.6b_4k\n");
  EXPECT_FALSE(recorded.settings.flash_attention);
  EXPECT_TRUE(recorded.settings_inferred.empty());
  fs::remove_all(root);
}

// LM-SimBench's MoE names: Qwen3-30B-A3B's EP degree is written ep1; Phi-3.5-MoE on 16 devices lists dp 1 with tp
// and pp down to 1, so its names count dp·tp·pp·cp·ep = 16, the expert group inside Megatron's data-parallel one.
TEST(Dataset, MoeNamesAreReadAsTheDatasetWritesThem) {
  const fs::path root = fs::temp_directory_path() / ("lmsim_moe_names_" + std::to_string(::getpid()));
  fs::remove_all(root);
  for (const char* d : {"qwen3_30b_a3b_4k", "phi35_moe_4k"}) fs::create_directories(root / d);
  spit(root / "qwen3_30b_a3b_4k" / "step_time_summary.csv",
       "optimization_config,iteration_time_ms\ndp1-tp4-pp2-cp2-ep1-RC,20000\n");
  spit(root / "phi35_moe_4k" / "step_time_summary.csv",
       "optimization_config,iteration_time_ms\ndp1-tp2-pp1-cp1-ep8-RC,9000\ndp1-tp8-pp2-cp1-ep1-noRC,8000\n");
  const io::Dataset d = io::read_dataset(root.string());
  ASSERT_EQ(d.collections.size(), 2u);
  for (const io::Collection& c : d.collections) {
    EXPECT_EQ(c.devices, 16) << c.model_setting;
    for (const io::Run& r : c.runs) {
      EXPECT_EQ(r.strategy.devices(), 16) << r.config;
      if (r.config == "dp1-tp2-pp1-cp1-ep8-RC") {
        EXPECT_EQ(r.strategy.data_parallel, 8);
        EXPECT_EQ(r.strategy.expert_parallel, 8);
      }
    }
  }
  // A name that multiplies to the device count neither way is refused, both products named.
  spit(root / "phi35_moe_4k" / "step_time_summary.csv",
       "optimization_config,iteration_time_ms\ndp1-tp2-pp1-cp1-ep4-RC,9000\n");
  expect_config_refused(root, "dp*tp*pp*cp*ep = 8");  // a name on 8 devices in a 16-device collection
  fs::remove_all(root);
}

// A manifest that names model settings, not folders, finds each collection's folder (the setting's own, or the
// paper's supplement folder of its platform); one that names neither is not a list of collections.
TEST(Dataset, AManifestWithoutADirectoryColumnFindsTheFolders) {
  const fs::path root = fs::temp_directory_path() / ("lmsim_manifest_" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "qwen3_0.6b_4k");
  fs::create_directories(root / "processed_gpu" / "qwen3_0.6b_4k_tp_pp_sweep_cp1_gpu");
  spit(root / "qwen3_0.6b_4k" / "step_time_summary.csv",
       "optimization_config,iteration_time_ms\ndp8-tp1-pp1-cp1-RC,4690\n");
  spit(root / "processed_gpu" / "qwen3_0.6b_4k_tp_pp_sweep_cp1_gpu" / "step_time_summary.csv",
       "optimization_config,iteration_time_ms\ndp8-tp1-pp1-cp1-RC,5100\n");
  spit(root / "data_manifest.csv", "model_setting,platform,num_configs\nqwen3_0.6b_4k,npu,1\nqwen3_0.6b_4k,gpu,1\n");
  io::Dataset d = io::read_dataset(root.string());
  ASSERT_EQ(d.collections.size(), 2u);
  ASSERT_NE(d.find("qwen3_0.6b_4k", "gpu"), nullptr);
  EXPECT_EQ(d.find("qwen3_0.6b_4k", "gpu")->directory, "processed_gpu/qwen3_0.6b_4k_tp_pp_sweep_cp1_gpu");
  EXPECT_EQ(d.find("qwen3_0.6b_4k", "npu")->directory, "qwen3_0.6b_4k");
  spit(root / "data_manifest.csv", "name,notes\nanything,at all\n");  // not a collection list: the folders are read
  EXPECT_EQ(io::read_dataset(root.string()).collections.size(), 2u);
  spit(root / "data_manifest.csv", "model_setting,platform\nqwen3_1.7b_4k,npu\n");
  try {
    io::read_dataset(root.string());
    ADD_FAILURE() << "a model setting without a folder was accepted";
  } catch (const io::InputError& e) {
    EXPECT_EQ(e.field(), "model_setting");
    EXPECT_EQ(e.line(), 2);
  }
  fs::remove_all(root);
}

TEST(Dataset, CommunicationPrimitivesAndGroupsAreReadInAnySpelling) {
  for (const char* t : {"all_reduce", "allReduce", "AllReduce", "hcom_allReduce", "all-reduce"})
    EXPECT_EQ(io::comm_primitive(t), "all_reduce") << t;
  EXPECT_EQ(io::comm_primitive("hcom_allGather"), "all_gather");
  EXPECT_EQ(io::comm_primitive("ReduceScatter"), "reduce_scatter");
  EXPECT_EQ(io::comm_primitive("alltoallv"), "all_to_all");
  for (const char* t : {"send", "recv", "send_recv", "batch_send_recv", "point_to_point"})
    EXPECT_EQ(io::comm_primitive(t), "point_to_point") << t;
  EXPECT_EQ(io::comm_primitive("reduce"), "reduce");
  for (const char* g : {"tp", "TP", "tensor_parallel", "tp_group"}) EXPECT_EQ(io::comm_group(g), "tp") << g;
  EXPECT_EQ(io::comm_group("expert_data_parallel"), "edp");
  EXPECT_EQ(io::comm_group("EP"), "ep");
  EXPECT_EQ(io::comm_group("dp_cp"), "dp");
  EXPECT_EQ(io::comm_group("group_17"), "group_17");
  // Sequence parallelism is read from the tp group's collectives whatever their spelling.
  Scratch s;
  fs::remove(s.file("training_settings.json"));
  spit(s.file("comm_summary.csv"),
       "comm_scope,comm_type,comm_group,op_count,elapsed_time_sum_ms,wait_time_sum_ms,link_bandwidth\n"
       "intra,hcom_allGather,TP,448,800,10,120\nintra,hcom_reduceScatter,TP,448,800,10,120\n"
       "intra,hcom_allReduce,DP,4,30,1,120\n");
  EXPECT_TRUE(io::read_dataset(s.root.string()).collections.at(0).settings.sequence_parallel);
}

// The context-parallel algorithm is read from the cp group's measured collectives. Under Ulysses (all-to-alls) a
// context-parallel run says nothing of flash attention, which the ring needs and Ulysses does not.
TEST(Dataset, TheContextParallelAlgorithmIsReadFromTheCpGroupsCollectives) {
  Scratch s;
  fs::remove(s.file("training_settings.json"));
  const std::string header =
      "comm_scope,comm_type,comm_group,op_count,elapsed_time_sum_ms,wait_time_sum_ms,link_bandwidth\n";
  spit(s.file("comm_summary.csv"), header + "intra,hcom_alltoall,CP,224,900,10,120\nintra,send,cp,2,5,1,120\n");
  const io::Collection ulysses = io::read_dataset(s.root.string()).collections.at(0);
  EXPECT_EQ(ulysses.settings.cp_comm_type, CpCommType::a2a);
  EXPECT_NE(ulysses.settings_inferred.find("cp_comm_type a2a"), std::string::npos) << ulysses.settings_inferred;
  // At 32K tokens flash attention still shows, but by a run's memory, not by its context parallelism.
  EXPECT_TRUE(ulysses.settings.flash_attention);
  EXPECT_NE(ulysses.settings_inferred.find("ran, yet with the attention scores stored"), std::string::npos)
      << ulysses.settings_inferred;
  spit(s.file("comm_summary.csv"), header + "intra,hcom_send,CP,224,900,10,120\nintra,hcom_alltoall,CP,2,5,1,120\n");
  const io::Collection ring = io::read_dataset(s.root.string()).collections.at(0);
  EXPECT_EQ(ring.settings.cp_comm_type, CpCommType::p2p);
  // Groups under the profiler's own names: a dense model's all-to-alls are Ulysses'.
  spit(s.file("comm_summary.csv"), header + "intra,hcom_alltoall,hccl_group_7,224,900,10,120\n");
  const io::Collection unnamed = io::read_dataset(s.root.string()).collections.at(0);
  EXPECT_EQ(unnamed.settings.cp_comm_type, CpCommType::a2a) << unnamed.settings_inferred;
  spit(s.file("comm_summary.csv"), header + "intra,hcom_allreduce,hccl_group_7,224,900,10,120\n");
  EXPECT_EQ(io::read_dataset(s.root.string()).collections.at(0).settings.cp_comm_type, CpCommType::p2p);
}

// Fused norms are read off a run like flash attention: InternLM2.5-7B at 32K, dp1-tp4-cp2 without recompute, would
// need about 77 GiB of the 910B3's 64 with PyTorch's norms (the bundled collections' reading) and 58 with fused
// ones; it ran. The proof holds only where nothing else could have made it fit: with SP undecided it could have,
// so the tp group's profile (all-reduces: SP off) is needed. A run within the memory model's error of the device
// proves nothing.
TEST(Dataset, FusedNormsAreReadFromARunThatCouldNotHaveRunWithout) {
  const fs::path root = fs::temp_directory_path() / ("lmsim_fused_norm_" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "internlm25_7b_32k");
  const fs::path f = root / "internlm25_7b_32k" / "step_time_summary.csv";
  spit(f, "optimization_config,iteration_time_ms\ndp1-tp4-pp1-cp2-noRC,80000\n");
  // Without a profile of the tp group, sequence parallelism could have made the run fit as well: nothing proven.
  EXPECT_FALSE(io::read_dataset(root.string()).collections.at(0).settings.fused_norm);
  // The tp group's all-reduces say SP was off: then only fused norms explain it.
  spit(root / "internlm25_7b_32k" / "comm_summary.csv",
       "comm_scope,comm_type,comm_group,op_count,elapsed_time_sum_ms,wait_time_sum_ms,link_bandwidth\n"
       "intra,all_reduce,tp,448,1500,10,120\n");
  const io::Collection c = io::read_dataset(root.string()).collections.at(0);
  EXPECT_TRUE(c.settings.flash_in(2));  // MindSpeed-LLM turns it on under CP
  EXPECT_FALSE(c.settings.sequence_parallel);
  EXPECT_TRUE(c.settings.fused_norm);
  EXPECT_NE(c.settings_inferred.find("fused_norm true: 'dp1-tp4-pp1-cp2-noRC' ran"), std::string::npos)
      << c.settings_inferred;
  spit(f, "optimization_config,iteration_time_ms\ndp1-tp4-pp1-cp2-RC,90000\n");  // recompute: fits either way
  EXPECT_FALSE(io::read_dataset(root.string()).collections.at(0).settings.fused_norm);
  fs::remove_all(root);
}

// Without recorded settings and without a profile of the tp group's collectives, the memory-setting readings come
// from the measured peaks: here a Qwen3-8B collection whose peaks were made with sequence parallelism on (the
// simulator's own, spread by +-2 %). Read with the stack's defaults they miss; the reading that fits turns SP on
// and nothing else. Three runs are too few to read five settings from, and peaks the defaults already fit change
// nothing.
TEST(Dataset, MemorySettingsAreReadFromTheMeasuredPeaksPattern) {
  const fs::path root = fs::temp_directory_path() / ("lmsim_memory_reading_" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "qwen3_8b_4k");
  const std::vector<std::string> configs = {"dp4-tp2-pp1-cp1-noRC", "dp2-tp4-pp1-cp1-noRC", "dp1-tp8-pp1-cp1-noRC",
                                            "dp2-tp2-pp2-cp1-noRC", "dp1-tp2-pp4-cp1-RC",   "dp2-tp4-pp1-cp1-RC"};
  const double spread[] = {1.02, 0.98, 1.01, 0.99, 1.02, 0.985};
  auto write = [&](std::size_t n, bool sequence_parallel) {
    std::string times = "optimization_config,iteration_time_ms\n",
                peaks = "optimization_config,rank_id,peak_memory_mb\n";
    const io::Collection plain = [&] {
      spit(root / "qwen3_8b_4k" / "step_time_summary.csv",
           "optimization_config,iteration_time_ms\n" + configs[0] + ",5000\n");
      fs::remove(root / "qwen3_8b_4k" / "peak_memory.csv");
      return io::read_dataset(root.string()).collections.at(0);
    }();
    TrainingSettings made = plain.settings;
    made.sequence_parallel = sequence_parallel;
    const auto* sp = io::presets().find_system(plain.system);
    const Model& m = io::presets().find_model(plain.model)->model;
    for (std::size_t i = 0; i < n; ++i) {
      const Prediction p = simulate(m, *parse_config_name(configs[i]).strategy, sp->system, made, sp->params());
      EXPECT_TRUE(p.ok()) << configs[i];
      times += configs[i] + ",5000\n";
      peaks += configs[i] + ",max," + std::to_string(p.max_peak_memory_bytes * spread[i] / 1048576.0) + "\n";
    }
    spit(root / "qwen3_8b_4k" / "step_time_summary.csv", times);
    spit(root / "qwen3_8b_4k" / "peak_memory.csv", peaks);
    return io::read_dataset(root.string()).collections.at(0);
  };
  const io::Collection with_sp = write(configs.size(), true);
  EXPECT_TRUE(with_sp.settings.sequence_parallel) << with_sp.settings_inferred;
  EXPECT_NE(with_sp.settings_inferred.find("sequence_parallel true: the 6 measured peaks fit to"), std::string::npos)
      << with_sp.settings_inferred;
  for (bool TrainingSettings::*other : {&TrainingSettings::flash_attention, &TrainingSettings::fused_norm,
                                        &TrainingSettings::fp32_gradients, &TrainingSettings::reuse_fp32_param})
    EXPECT_EQ(with_sp.settings.*other, write(1, false).settings.*other);
  const io::Collection few = write(3, true);
  EXPECT_FALSE(few.settings.sequence_parallel) << few.settings_inferred;
  const io::Collection as_defaults = write(configs.size(), false);
  EXPECT_FALSE(as_defaults.settings.sequence_parallel);
  EXPECT_EQ(as_defaults.settings_inferred.find("measured peaks"), std::string::npos) << as_defaults.settings_inferred;
  // Recorded settings are kept; where the peaks contradict them, that is said.
  spit(root / "qwen3_8b_4k" / "training_settings.json", "{\"sequence_parallel\": false}");
  const io::Collection recorded = write(configs.size(), true);
  EXPECT_FALSE(recorded.settings.sequence_parallel);
  EXPECT_TRUE(recorded.settings_inferred.empty()) << recorded.settings_inferred;
  EXPECT_NE(recorded.settings_contradicted.find("sequence_parallel true: the 6 measured peaks fit to"),
            std::string::npos)
      << recorded.settings_contradicted;
  EXPECT_TRUE(write(configs.size(), false).settings_contradicted.empty());
  fs::remove(root / "qwen3_8b_4k" / "training_settings.json");
  // A profile of the tp group's collectives decides SP instead: all-reduces, so off, whatever the peaks show.
  spit(root / "qwen3_8b_4k" / "comm_summary.csv",
       "comm_scope,comm_type,comm_group,op_count,elapsed_time_sum_ms,wait_time_sum_ms,link_bandwidth\n"
       "intra,all_reduce,tp,448,1500,10,120\n");
  EXPECT_FALSE(write(configs.size(), true).settings.sequence_parallel);
  fs::remove_all(root);
}

TEST(Dataset, GpuSupplementFoldersAreUnderstood) {
  Scratch s;
  fs::create_directories(s.root / "processed_gpu");
  fs::copy(s.root / kSetting, s.root / "processed_gpu" / (kSetting + "_tp_pp_sweep_cp1_gpu"),
           fs::copy_options::recursive);
  // A V100 cannot run bf16: the GPU copy records fp16 (the reader rejects a precision the system lacks).
  const fs::path gpu_settings =
      s.root / "processed_gpu" / (kSetting + "_tp_pp_sweep_cp1_gpu") / "training_settings.json";
  spit(gpu_settings, "{\"seq_length\": 32768, \"global_batch_size\": 8, \"precision\": \"bf16\"}");
  EXPECT_THROW(io::read_dataset(s.root.string()), io::InputError);
  spit(gpu_settings,
       "{\"seq_length\": 32768, \"global_batch_size\": 8, \"precision\": \"fp16\", \"flash_attention\": true}");
  const io::Dataset d = io::read_dataset(s.root.string());
  ASSERT_EQ(d.collections.size(), 2u);
  const io::Collection* g = d.find(kSetting, "gpu");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->system, "v100_sxm2_32g");
  EXPECT_FALSE(g->settings.pipeline_scatter_gather);  // what the file leaves out comes from its stack's defaults
  EXPECT_NE(d.find(kSetting, "npu"), nullptr);
}

TEST(Dataset, ModelSettingIdentifiersMapToModelAndSequence) {
  auto a = io::find_model_setting("qwen15_1.8b_8k");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->model, "Qwen1.5-1.8B");
  EXPECT_EQ(a->seq_length, 8192);
  auto b = io::find_model_setting("internlm25_1point8b_32k");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->model, "InternLM2.5-1.8B");
  EXPECT_EQ(b->seq_length, 32768);
  auto c = io::find_model_setting("internlm25_20b_32k_16p");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->devices, 16);
  auto u = io::find_model_setting("newmodel_3b_16k_32p");  // pattern fallback
  ASSERT_TRUE(u);
  EXPECT_EQ(u->seq_length, 16384);
  EXPECT_EQ(u->devices, 32);
  EXPECT_FALSE(io::find_model_setting("not a setting"));
}

struct BadCase {
  const char* name;
  const char* file;
  std::function<void(const Scratch&)> mutate;
  bool line;
  const char* field;
  const char* why;
};

TEST(Dataset, EveryBadInputClassIsRejectedWithFileLineAndField) {
  auto replace = [](const fs::path& p, const std::string& from, const std::string& to) {
    std::string s = slurp(p);
    const auto pos = s.find(from);
    ASSERT_NE(pos, std::string::npos) << from;
    s.replace(pos, from.size(), to);
    spit(p, s);
  };
  const std::vector<BadCase> cases = {
      {"truncated quoted field", "operator_latency_by_category.csv",
       [&](const Scratch& s) {
         replace(s.file("operator_latency_by_category.csv"), "\"2000000\",400,25.0\n", "\"2000000,4");
       },
       true, "", "unterminated"},
      {"wrong delimiter", "step_time_summary.csv",
       [&](const Scratch& s) {
         spit(s.file("step_time_summary.csv"), "optimization_config;iteration_time_ms\ndp1-tp2-pp2-cp2-RC;5\n");
       },
       true, "", "delimiter"},
      {"duplicate header", "step_time_summary.csv",
       [&](const Scratch& s) { replace(s.file("step_time_summary.csv"), "iteration_time_ms", "optimization_config"); },
       true, "optimization_config", "duplicate column"},
      {"missing column", "peak_memory.csv",
       [&](const Scratch& s) { replace(s.file("peak_memory.csv"), "peak_memory_mb", "peak_mem"); }, true,
       "peak_memory_mb", "missing"},
      {"duplicate configuration", "step_time_summary.csv",
       [&](const Scratch& s) {
         replace(s.file("step_time_summary.csv"), "dp2-tp2-pp2-cp1-noRC", "dp1-tp2-pp2-cp2-RC");
       },
       true, "optimization_config", "duplicate"},
      {"non-numeric", "step_time_summary.csv",
       [&](const Scratch& s) { replace(s.file("step_time_summary.csv"), "12345.5", "12,345 ms"); }, true, "", "fields"},
      {"unit suffix", "step_time_summary.csv",
       [&](const Scratch& s) { replace(s.file("step_time_summary.csv"), "12345.5", "12.3s"); }, true,
       "iteration_time_ms", "not a finite number"},
      {"NaN", "step_time_summary.csv",
       [&](const Scratch& s) { replace(s.file("step_time_summary.csv"), "9876", "nan"); }, true, "iteration_time_ms",
       "not a finite number"},
      {"inf", "peak_memory.csv", [&](const Scratch& s) { replace(s.file("peak_memory.csv"), "30000.5", "inf"); }, true,
       "peak_memory_mb", "not a finite number"},
      {"negative", "step_time_summary.csv",
       [&](const Scratch& s) { replace(s.file("step_time_summary.csv"), "9876", "-9876"); }, true, "iteration_time_ms",
       "positive"},
      {"zero memory", "peak_memory.csv", [&](const Scratch& s) { replace(s.file("peak_memory.csv"), "30000.5", "0"); },
       true, "peak_memory_mb", "positive"},
      {"rank out of range", "peak_memory.csv",
       [&](const Scratch& s) { replace(s.file("peak_memory.csv"), "dp1-tp2-pp2-cp2-RC,7,", "dp1-tp2-pp2-cp2-RC,8,"); },
       true, "rank_id", "out of range"},
      {"duplicate rank", "peak_memory.csv",
       [&](const Scratch& s) { replace(s.file("peak_memory.csv"), "dp1-tp2-pp2-cp2-RC,7,", "dp1-tp2-pp2-cp2-RC,6,"); },
       true, "rank_id", "duplicate rank"},
      {"max mixed with ranks", "peak_memory.csv",
       [&](const Scratch& s) {
         replace(s.file("peak_memory.csv"), "dp1-tp2-pp2-cp2-RC,7,", "dp1-tp2-pp2-cp2-RC,max,");
       },
       true, "rank_id", "mixed"},
      {"malformed configuration", "step_time_summary.csv",
       [&](const Scratch& s) { replace(s.file("step_time_summary.csv"), "dp2-tp2-pp2-cp1-noRC", "dp2-tp2-pp2-noRC"); },
       true, "optimization_config", "expected dp<d>"},
      {"inconsistent device count", "step_time_summary.csv",
       [&](const Scratch& s) {
         replace(s.file("step_time_summary.csv"), "dp2-tp2-pp2-cp1-noRC", "dp1-tp2-pp2-cp1-noRC");
       },
       true, "optimization_config", "devices"},
      {"strategy impossible for the model", "step_time_summary.csv",
       [&](const Scratch& s) {
         replace(s.file("step_time_summary.csv"), "dp2-tp2-pp2-cp1-noRC", "dp2-tp2-pp2-cp1-ep2-noRC");
       },
       false, "optimization_config", "impossible"},
      {"ragged row", "comm_summary.csv",
       [&](const Scratch& s) { replace(s.file("comm_summary.csv"), "300,50,80", "300,50"); }, true, "", "fields"},
      {"empty file", "step_trace_time_summary.csv",
       [&](const Scratch& s) { spit(s.file("step_trace_time_summary.csv"), ""); }, true, "", "empty"},
      {"rank folder out of range", "rank_9",
       [&](const Scratch& s) { fs::rename(s.file("dp1-tp2-pp2-cp2-RC/rank_7"), s.file("dp1-tp2-pp2-cp2-RC/rank_9")); },
       false, "rank_id", "rank_<id>"},
      {"unknown settings key", "training_settings.json",
       [&](const Scratch& s) { replace(s.file("training_settings.json"), "\"precision\"", "\"precisoin\""); }, false,
       "precisoin", "unknown key"},
      {"malformed JSON", "training_settings.json",
       [&](const Scratch& s) { replace(s.file("training_settings.json"), "}", ""); }, true, "", "malformed JSON"},
      {"absurd setting", "training_settings.json",
       [&](const Scratch& s) { replace(s.file("training_settings.json"), "32768", "-4"); }, false, "seq_length",
       "outside"},
      {"manifest names a missing folder", "data_manifest.csv",
       [&](const Scratch& s) { spit(s.root / "data_manifest.csv", "directory\nnot_there\n"); }, true, "directory",
       "does not exist"},
      {"manifest bad platform", "data_manifest.csv",
       [&](const Scratch& s) { spit(s.root / "data_manifest.csv", "directory,platform\n" + kSetting + ",tpu\n"); },
       true, "platform", "not gpu, npu or a system preset"},
      {"one configuration spelled twice", "step_time_summary.csv",
       [&](const Scratch& s) {
         replace(s.file("step_time_summary.csv"), "dp2-tp2-pp2-cp1-noRC,9876",
                 "dp2-tp2-pp2-cp1-noRC,9876\ndp2-tp2-pp2-cp1-noRC-mbs1,9877");
       },
       true, "optimization_config", "same configuration"},
      {"rank folder spelled twice", "rank_",
       [&](const Scratch& s) {
         fs::copy(s.file("dp1-tp2-pp2-cp2-RC/rank_7"), s.file("dp1-tp2-pp2-cp2-RC/rank_07"),
                  fs::copy_options::recursive);
       },
       false, "rank_id", "same rank"},
      {"summary row repeated", "comm_summary.csv",
       [&](const Scratch& s) {
         std::string t = slurp(s.file("comm_summary.csv"));
         spit(s.file("comm_summary.csv"), t + t.substr(t.find('\n') + 1));
       },
       true, "comm_type", "duplicate row"},
      {"field longer than 1 MiB", "step_time_summary.csv",
       [&](const Scratch& s) {
         replace(s.file("step_time_summary.csv"), "dp2-tp2-pp2-cp1-noRC", std::string(2 << 20, 'x'));
       },
       true, "", "longer than 1 MiB"},
      {"manifest names one folder twice", "data_manifest.csv",
       [&](const Scratch& s) {
         spit(s.root / "data_manifest.csv", "directory\n" + kSetting + "\n./" + kSetting + "/\n");
       },
       true, "directory", "same folder"},
      {"a collection copied", "_copy",
       [&](const Scratch& s) {
         fs::copy(s.root / kSetting, s.root / (kSetting + "_copy"), fs::copy_options::recursive);
         spit(s.root / "data_manifest.csv",
              "directory,model_setting\n" + kSetting + "," + kSetting + "\n" + kSetting + "_copy," + kSetting + "\n");
       },
       true, "optimization_config", "twice"},
      {"configuration the model cannot run", "step_time_summary.csv",
       [&](const Scratch& s) {
         replace(s.file("step_time_summary.csv"), "dp2-tp2-pp2-cp1-noRC,9876",
                 "dp2-tp2-pp2-cp1-noRC,9876\ndp2-tp2-pp2-cp1-ep2-noRC,9000");  // experts on a dense model
       },
       true, "optimization_config", "is impossible"},
      {"unknown model setting", "zzz_1b_4k",
       [&](const Scratch& s) { fs::rename(s.root / kSetting, s.root / "zzz_1b_4k"); }, false, "model_setting",
       "cannot map"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Scratch s;
    c.mutate(s);
    expect_bad(s, c.file, c.line, c.field, c.why);
  }
}

TEST(Dataset, ByteOrderMarkAndCrlfAreTolerated) {
  Scratch s;
  std::string t = slurp(s.file("step_time_summary.csv"));
  std::string crlf;
  for (char ch : t) crlf += ch == '\n' ? std::string("\r\n") : std::string(1, ch);
  spit(s.file("step_time_summary.csv"), "\xEF\xBB\xBF" + crlf);
  const io::Dataset d = io::read_dataset(s.root.string());
  EXPECT_DOUBLE_EQ(*d.collections[0].find("dp2-tp2-pp2-cp1-noRC")->iteration_time_s, 9.876);
}

TEST(Dataset, SymlinksAndLoopsDoNotReadACollectionTwice) {
  Scratch s;
  fs::create_directory_symlink(s.root / kSetting, s.root / "alias");  // the same collection under another name
  fs::create_directory_symlink(s.root / "loop", s.root / "loop");     // a loop: skipped, never followed
  const io::Dataset d = io::read_dataset(s.root.string());
  EXPECT_EQ(d.collections.size(), 1u);
}

TEST(Dataset, MissingDirectoryIsAnError) {
  EXPECT_THROW(io::read_dataset("/nonexistent/lmsim/dataset"), io::InputError);
}

TEST(Specs, ModelJsonRoundTripsAndIsStrict) {
  const Model m = io::presets().find_model("DeepSeek-V3")->model;
  const Model back = io::model_from_json(io::to_json(m), "mem");
  EXPECT_EQ(io::to_json(back), io::to_json(m));
  EXPECT_DOUBLE_EQ(count_params(back).total, count_params(m).total);
  const Model gpt = io::presets().find_model("GPT-3-175B")->model;  // learned positions survive the round trip
  EXPECT_EQ(io::model_from_json(io::to_json(gpt), "mem").position_embedding_type, PositionEmbedding::learned_absolute);
  EXPECT_EQ(io::model_from_json(io::to_json(gpt), "mem").max_position_embeddings, 2048);
  EXPECT_EQ(io::to_json(m)["position_embedding_type"], "rope");
  auto bad = [&](const std::string& key, const io::Json& value, const std::string& why) {
    io::Json j = io::to_json(io::presets().find_model("Qwen3-0.6B")->model);
    if (value.is_null())
      j.erase(key);
    else
      j[key] = value;
    try {
      io::model_from_json(j, "model.json");
      ADD_FAILURE() << key << " accepted";
    } catch (const io::InputError& e) {
      EXPECT_EQ(e.file(), "model.json");
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  bad("hidden_size", nullptr, "missing");
  bad("hidden_size", -5, "outside");
  bad("hidden_size", "1024", "integer");
  bad("num_layers", 1e12, "integer");
  bad("vocab_size", 0, "outside");
  bad("activation", "relu", "not one of");
  bad("position_embedding_type", "alibi", "not one of");
  bad("max_position_embeddings", -1, "outside");
  {  // MLA's decoupled heads are rotary
    io::Json j = io::to_json(io::presets().find_model("DeepSeek-V3")->model);
    j["position_embedding_type"] = "learned_absolute";
    EXPECT_THROW(io::model_from_json(j, "model.json"), io::InputError);
  }
  bad("hidden_sise", 1024, "unknown key");
  bad("num_kv_heads", 3, "multiple");
  bad("name", "", "empty string");
  {  // hidden_size not divisible by the heads, without head_dim: refused, not truncated
    io::Json j = io::to_json(io::presets().find_model("Qwen3-0.6B")->model);
    j.erase("head_dim");
    j["hidden_size"] = 1000;
    j["num_attention_heads"] = 3;
    j["num_kv_heads"] = 3;
    EXPECT_THROW(io::model_from_json(j, "model.json"), io::InputError);
    j["head_dim"] = 128;  // explicit head_dim (as Qwen3 and Gemma have) is fine
    EXPECT_NO_THROW(io::model_from_json(j, "model.json"));
  }
}

TEST(Specs, JsonFilesRefuseDuplicateKeysAndOverflowingNumbers) {
  const auto dir = std::filesystem::temp_directory_path() / ("lmsim_json_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto expect_error = [&](const std::string& text, long line, const std::string& field, const std::string& why) {
    const std::string f = (dir / "x.json").string();
    {
      std::ofstream o(f);
      o << text;
    }
    try {
      io::parse_json_file(f);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const io::InputError& e) {
      EXPECT_EQ(e.line(), line) << e.what();
      EXPECT_EQ(e.field(), field) << e.what();
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  expect_error("{\n \"a\": 1,\n \"b\": {\"a\": 2},\n \"a\": 3\n}", 4, "a", "twice");
  expect_error("{\"num_layers\": 4,\n \"hidden_size\": 1e999}", 2, "", "range of a double");
  const std::string ok = (dir / "ok.json").string();
  {
    std::ofstream o(ok);
    o << R"({"a": {"x": 1}, "b": {"x": 2}, "x": [{"y": 1}, {"y": 2}]})";  // same key in different objects: fine
  }
  EXPECT_NO_THROW(io::parse_json_file(ok));
  std::filesystem::remove_all(dir);
}

TEST(Specs, SystemSettingsAndParamsAreStrict) {
  const System s = io::presets().find_system("h100_sxm_80g")->system;
  const System back = io::system_from_json(io::to_json(s), "mem");
  EXPECT_DOUBLE_EQ(back.peak_flops_fp8, s.peak_flops_fp8);
  EXPECT_DOUBLE_EQ(back.intra_node.bandwidth_bytes_per_s, s.intra_node.bandwidth_bytes_per_s);
  io::Json j = io::to_json(s);
  j["hbm_capacity_gib"] = -1;
  EXPECT_THROW(io::system_from_json(j, "sys.json"), io::InputError);
  // A direct-link table round-trips; a malformed one is refused naming intra_node.links.
  const System v100 = io::presets().find_system("v100_sxm2_32g")->system;
  ASSERT_EQ(v100.intra_node_links.size(), 64u);
  const System v100_back = io::system_from_json(io::to_json(v100), "mem");
  EXPECT_EQ(v100_back.intra_node_links, v100.intra_node_links);
  EXPECT_DOUBLE_EQ(v100_back.intra_node_host_bandwidth_bytes_per_s, v100.intra_node_host_bandwidth_bytes_per_s);
  auto refused = [](const io::Json& bad, const char* what) {
    try {
      io::system_from_json(bad, "sys.json");
      ADD_FAILURE() << "accepted: " << what;
    } catch (const io::InputError& e) {
      EXPECT_NE(std::string(e.what()).find("intra_node"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("sys.json"), std::string::npos) << e.what();
    }
  };
  io::Json asym = io::to_json(v100);
  asym["intra_node"]["links"][0][1] = 2;  // 0-1 has 2 links, 1-0 has 1
  refused(asym, "an asymmetric link table");
  io::Json ragged = io::to_json(v100);
  ragged["intra_node"]["links"][3] = io::Json{0, 1};
  refused(ragged, "a ragged link table");
  io::Json small = io::to_json(v100);
  small["intra_node"]["links"] = io::Json{io::Json{0, 1}, io::Json{1, 0}};  // 2 x 2 on an 8-device node
  refused(small, "a table of the wrong size");
  io::Json no_host = io::to_json(v100);
  no_host["intra_node"].erase("host_bandwidth_gb_per_s");
  refused(no_host, "unlinked pairs without a host path");
  TrainingSettings t;
  t.precision = Precision::fp8;
  t.hidden_dropout = true;  // attention dropout left off: the two are written and read apart
  t.recompute_modules = module_bit(RecomputeModule::core_attn) | module_bit(RecomputeModule::moe_act);
  EXPECT_EQ(io::to_json(io::settings_from_json(io::to_json(t), "mem")), io::to_json(t));
  EXPECT_EQ(io::to_json(t)["recompute_modules"], (io::Json{"core_attn", "moe_act"}));
  // "dropout" sets both, as the single flag of earlier settings files did; a named one wins over it.
  const TrainingSettings both = io::settings_from_json(io::Json{{"dropout", true}}, "old.json");
  EXPECT_TRUE(both.hidden_dropout && both.attention_dropout);
  const TrainingSettings hidden_only =
      io::settings_from_json(io::Json{{"dropout", true}, {"attention_dropout", false}}, "mixed.json");
  EXPECT_TRUE(hidden_only.hidden_dropout);
  EXPECT_FALSE(hidden_only.attention_dropout);
  io::Json bad_modules = io::to_json(t);
  bad_modules["recompute_modules"] = {"core_attn", "attention"};  // not a Megatron module name
  try {
    io::settings_from_json(bad_modules, "settings.json");
    ADD_FAILURE() << "unknown recompute module accepted";
  } catch (const io::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("recompute_modules"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("mla_up_proj"), std::string::npos) << e.what();  // lists the choices
  }
  io::Json p = io::to_json(PlatformParams{});
  EXPECT_EQ(io::params_from_json(p, "mem"), PlatformParams{});
  p["matmul_efficiency"] = 1.5;  // θ outside bounds
  EXPECT_THROW(io::params_from_json(p, "theta.json"), io::InputError);
  // The retired θ key is refused with what replaced it, not as an unknown key.
  io::Json old = io::to_json(PlatformParams{});
  old["optimizer_bytes_per_param"] = 12;
  try {
    io::params_from_json(old, "theta.json");
    ADD_FAILURE() << "optimizer_bytes_per_param accepted";
  } catch (const io::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer_moments_allocated"), std::string::npos) << e.what();
  }
  io::Json fsdp_nodo = io::to_json(TrainingSettings{});
  fsdp_nodo["fsdp"] = true;
  fsdp_nodo["distributed_optimizer"] = false;
  EXPECT_THROW(io::settings_from_json(fsdp_nodo, "settings.json"), io::InputError);
  t.precision = Precision::fp16;  // MindSpeed's --reuse-fp32-param keeps BF16 halves: bf16 only
  t.reuse_fp32_param = true;
  EXPECT_THROW(io::settings_from_json(io::to_json(t), "settings.json"), io::InputError);
  EXPECT_THROW(io::resolve_model("NoSuchModel"), io::InputError);
  EXPECT_THROW(io::resolve_system("no_such_system"), io::InputError);
  EXPECT_THROW(io::parse_strategy("dp2-tp4-zero3"), io::InputError);
  EXPECT_THROW(io::parse_strategy("tp4-pp2"), io::InputError);  // no dp, no device count to derive it from
  // The command line's spelling: left-out degrees 1, recompute none (here in Megatron's flag spelling), dp from the
  // device count.
  EXPECT_EQ(config_name(io::parse_strategy("dp2-tp4")), "dp2-tp4-pp1-cp1-noRC");
  EXPECT_EQ(config_name(io::parse_strategy("full-pp2-tp4", "--strategy", 64)), "dp8-tp4-pp2-cp1-RC");
}

// load_presets over a copy of the shipped presets folder (the θ files linked) in which `file` (under presets/)
// reads `text`.
io::Presets presets_with(const std::string& file, const std::string& text) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("lmsim_presets_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "presets");
  for (const char* f : {"models.json", "systems.json", "stacks.json"})
    fs::copy_file(fs::path(io::data_dir()) / "presets" / f, dir / "presets" / f, fs::copy_options::overwrite_existing);
  fs::create_directory_symlink(fs::path(io::data_dir()) / "params", dir / "params");  // the shipped θ files
  std::ofstream(dir / "presets" / file) << text;
  struct Removed {
    fs::path dir;
    ~Removed() { fs::remove_all(dir); }
  } removed{dir};
  return io::load_presets(dir.string());
}
// ... which must refuse it, naming that file and `field`.
void expect_presets_refused(const std::string& file, const std::string& text, const std::string& field) {
  try {
    presets_with(file, text);
    ADD_FAILURE() << "accepted: " << text.substr(0, 400);
  } catch (const io::InputError& e) {
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
  }
}

// The stack table: every entry parsed like a settings file, and a bad one refused naming the file and entry.
TEST(Specs, StacksAreStrict) {
  const io::StackPreset* nemo = io::presets().find_stack("nemo-24.07");
  ASSERT_TRUE(nemo);
  EXPECT_EQ(nemo->settings.precision, Precision::fp8);
  EXPECT_TRUE(nemo->settings.tp_comm_overlap && nemo->settings.overlap_param_gather);
  const io::StackPreset* npu = io::presets().find_stack("npu");
  ASSERT_TRUE(npu);  // the bundled collection's own file
  EXPECT_FALSE(npu->settings_file.empty());
  EXPECT_FALSE(npu->settings.flash_attention);
  auto refused = [](const std::string& stacks, const std::string& field) {
    expect_presets_refused("stacks.json", stacks, field);
  };
  const std::string ok = R"({"name": "s", "summary": "a stack", "settings": {"precision": "bf16"}})";
  EXPECT_EQ(presets_with("stacks.json", "{\"stacks\": [" + ok + "]}").stacks.at(0).settings.precision, Precision::bf16);
  refused(R"({"stacks": [{"summary": "no name", "settings": {}}]})", "stacks[0].name");
  refused(R"({"stacks": [{"name": "s", "summary": "x", "settings": {"precison": "bf16"}}]})",
          "stacks[0].settings.precison");
  refused(R"({"stacks": [{"name": "s", "summary": "x"}]})", "exactly one of settings_file and settings");
  refused(R"({"stacks": [{"name": "s", "summary": "x", "settings": {}, "systems": ["h900"]}]})",
          "no system preset 'h900'");
  refused("{\"stacks\": [" + ok + ", " + ok + "]}", "listed twice");
  refused(R"({"stacks": [{"name": "s", "summary": "x", "settings": {}, "colour": 1}]})", "stacks[0].colour");
}

// A system no run calibrated may centre its prior (its uncalibrated defaults) on the shipped fit of the same GPU:
// the H200 on the H100's, the GB200 on the B200's, said in the θ source. The entry is strict.
TEST(Specs, AnUncalibratedSystemsPriorMayBeTheSameGpusFit) {
  for (const auto& [system, fit] : {std::pair{"h200_sxm_141g", "h100_sxm_80g"}, {"gb200_nvl72", "b200_sxm_180g"}}) {
    const io::SystemPreset* sp = io::presets().find_system(system);
    const io::SystemPreset* of = io::presets().find_system(fit);
    ASSERT_TRUE(sp && of);
    EXPECT_TRUE(sp->calibrated_file.empty());
    for (std::size_t i = 0; i < kNumParams; ++i)
      EXPECT_DOUBLE_EQ(get(sp->default_params, i), get(of->calibrated_params, i)) << param_table()[i].name;
    EXPECT_NE(sp->params_source().find("uncalibrated"), std::string::npos);
    EXPECT_NE(sp->params_source().find(of->calibrated_file), std::string::npos) << sp->params_source();
  }
  EXPECT_TRUE(io::presets().find_system("a100_sxm_80g")->prior_file.empty());
  std::ifstream in(std::filesystem::path(io::data_dir()) / "presets" / "systems.json");
  const std::string shipped((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto refused = [&](const std::string& from, const std::string& to, const std::string& says) {
    std::string text = shipped;
    const auto at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    expect_presets_refused("systems.json", text, "prior_params");
    expect_presets_refused("systems.json", text, says);
  };
  const std::string note =
      "the same GH100 GPU (compute, clocks), NVLink 4 and NDR InfiniBand as h100_sxm_80g; only "
      "HBM3e capacity and bandwidth differ, which the preset states";
  refused(note, "", "needs a prior_note");
  refused("params/params_h100_sxm_80g.json\", \"prior_note\"", "params/params_h999.json\", \"prior_note\"", "no file");
  refused("{\"name\": \"a100_sxm_80g\",",
          "{\"name\": \"a100_sxm_80g\", \"prior_params\": \"params/params_h100_sxm_80g.json\", \"prior_note\": \"x\",",
          "centred on its own fit");
}

TEST(Hdf5, WritesAtomicallyAndReadsBack) {
  const std::string f = (fs::temp_directory_path() / ("lmsim_h5_" + std::to_string(::getpid()) + ".h5")).string();
  {
    io::H5Writer w(f);
    w.write("/a/b/values", std::vector<double>{1.5, 2.5});
    w.write("/a/names", std::vector<std::string>{"x", "yy"});
    w.write("/a/ints", std::vector<std::int64_t>{3, 4, 5});
    w.attr("/a", "note", std::string("hello"));
    w.attr("/a", "pi", 3.25);
    EXPECT_FALSE(fs::exists(f));  // nothing at the final path before commit
    w.commit();
  }
  EXPECT_EQ(io::h5_read_doubles(f, "/a/b/values"), (std::vector<double>{1.5, 2.5}));
  EXPECT_EQ(io::h5_read_strings(f, "/a/names"), (std::vector<std::string>{"x", "yy"}));
  EXPECT_EQ(io::h5_read_ints(f, "/a/ints").size(), 3u);
  EXPECT_EQ(io::h5_read_string_attr(f, "/a", "note"), "hello");
  EXPECT_DOUBLE_EQ(io::h5_read_double_attr(f, "/a", "pi"), 3.25);
  fs::remove(f);
  {
    io::H5Writer w(f);
    w.write("/x", std::vector<double>{1});
  }  // abandoned without commit
  EXPECT_FALSE(fs::exists(f));
}

TEST(HuggingFace, ConfigPredictsExactlyLikeThePreset) {
  const std::string dir = std::string(LMSIM_TEST_FIXTURES) + "/hf/";
  const std::pair<const char*, const char*> pairs[] = {{"llama3_8b", "Llama-3-8B"},
                                                       {"qwen3_1p7b", "Qwen3-1.7B"},
                                                       {"qwen3_30b_a3b", "Qwen3-30B-A3B"},
                                                       {"gemma2_9b", "Gemma-2-9B"},
                                                       {"deepseek_v3", "DeepSeek-V3"},
                                                       {"phi3p5_mini", "Phi-3.5-mini-instruct"},
                                                       {"phi3p5_moe", "Phi-3.5-MoE-instruct"},
                                                       {"gpt_oss_20b", "gpt-oss-20b"},
                                                       {"nemotron4_340b", "Nemotron-4-340B"}};
  const System& sys = io::presets().find_system("h100_sxm_80g")->system;
  TrainingSettings t;
  t.seq_length = 4096;
  t.global_batch_size = 256;
  for (const auto& [folder, preset] : pairs) {
    const Model hf = io::resolve_model(dir + folder + "/config.json");
    const Model& pm = io::presets().find_model(preset)->model;
    Strategy s;
    s.data_parallel = 4;
    s.tensor_parallel = 2;
    s.pipeline_parallel = 2;
    if (pm.is_moe()) s.expert_parallel = 4;
    const Prediction a = simulate(hf, s, sys, t, PlatformParams{}), b = simulate(pm, s, sys, t, PlatformParams{});
    ASSERT_TRUE(a.ok() && b.ok()) << folder;
    EXPECT_DOUBLE_EQ(a.iteration_time_s, b.iteration_time_s) << folder;
    EXPECT_DOUBLE_EQ(a.max_peak_memory_bytes, b.max_peak_memory_bytes) << folder;
    EXPECT_DOUBLE_EQ(count_params(hf).total, count_params(pm).total) << folder;
  }
}

// Architectures with no preset, read from their HuggingFace configs: their parameter counts against the model cards
// (total and, for MoE, activated per token: lmsim's active count keeps the input embedding, a lookup, which Qwen's
// card counts and DeepSeek's and GLM's leave out; the cards round to a tenth or a whole billion).
TEST(HuggingFace, ConfigsWithoutAPresetCountTheirModelCardsParameters) {
  const std::string dir = std::string(LMSIM_TEST_FIXTURES) + "/hf/";
  struct Card {
    const char* folder;
    double total_b, active_b;
    bool active_counts_embedding;
  };
  for (const Card& c :
       {Card{"gemma3_1b", 1.0, 0, true}, Card{"deepseek_v2_lite", 15.7, 2.4, false},
        Card{"qwen1p5_moe_a2p7b", 14.3, 2.7, true}, Card{"glm4p5_air", 106, 12, false}, Card{"glm4p5", 355, 32, false},
        Card{"deepseek_v2", 236, 21, false}, Card{"qwen2_57b_a14b", 57.4, 14, true},
        Card{"llama4_scout", 109, 17, true}, Card{"llama4_maverick", 400, 17, true},
        // Vision-language checkpoints: their language models' cards (Qwen2.5-7B, Qwen3-8B, Qwen3-30B-A3B,
        // Mistral-Small-24B); the vision towers are not modelled
        Card{"qwen2p5_vl_7b", 7.61, 0, true}, Card{"qwen3_vl_8b", 8.2, 0, true},
        Card{"qwen3_vl_30b_a3b", 30.5, 3.3, true}, Card{"mistral_small_3p1_24b", 23.6, 0, true},
        // GPT-2's key names: GPT-2 XL (1.56 B on its model card's count) and StarCoder (15.5 B)
        Card{"gpt2_xl", 1.56, 0, true}, Card{"starcoder", 15.5, 0, true}}) {
    const Model m = io::resolve_model(dir + c.folder + "/config.json");
    const ParamCount n = count_params(m);
    EXPECT_NEAR(n.total / 1e9, c.total_b, 0.02 * c.total_b) << c.folder;
    if (c.active_b > 0) {
      const double active = n.active_per_token - (c.active_counts_embedding ? 0.0 : n.embedding);
      EXPECT_NEAR(active / 1e9, c.active_b, 0.08 * c.active_b) << c.folder;
    }
  }
  // GPT-2 and GPTBigCode: learned positions (n_positions rows), LayerNorm, an ungated GELU MLP (n_inner, or 4·n_embd),
  // tied embeddings; StarCoder's multi-query attention keeps one K/V head.
  const Model gpt2 = io::resolve_model(dir + "gpt2_xl/config.json");
  EXPECT_EQ(gpt2.position_embedding_type, PositionEmbedding::learned_absolute);
  EXPECT_EQ(gpt2.max_position_embeddings, 1024);
  EXPECT_EQ(gpt2.ffn_hidden_size, 4 * 1600);
  EXPECT_EQ(gpt2.num_kv_heads, 25);
  EXPECT_EQ(gpt2.head_dim, 64);
  EXPECT_TRUE(gpt2.activation == Activation::gelu && gpt2.norm == Norm::layernorm && gpt2.tied_embeddings);
  const Model starcoder = io::resolve_model(dir + "starcoder/config.json");
  EXPECT_EQ(starcoder.num_kv_heads, 1);
  EXPECT_EQ(starcoder.max_position_embeddings, 8192);
  const Model gemma3 = io::resolve_model(dir + "gemma3_1b/config.json");
  EXPECT_TRUE(gemma3.qk_norm && gemma3.post_norms && gemma3.tied_embeddings);
  EXPECT_EQ(gemma3.sliding_window, 512);
  EXPECT_EQ(gemma3.window_attn_skip_freq, 6);  // five local layers, then a global one
  EXPECT_EQ(gemma3.activation, Activation::geglu);
  const Model lite = io::resolve_model(dir + "deepseek_v2_lite/config.json");
  EXPECT_TRUE(lite.is_mla());
  EXPECT_EQ(lite.q_lora_rank, 0);  // queries projected directly
  EXPECT_EQ(lite.mtp_layers, 0);
  const Model qwen = io::resolve_model(dir + "qwen1p5_moe_a2p7b/config.json");
  EXPECT_EQ(qwen.num_shared_experts, 4);  // one 5632-wide shared expert: four 1408-wide ones side by side
  EXPECT_TRUE(qwen.qkv_bias);
  EXPECT_EQ(qwen.sliding_window, 0);  // use_sliding_window false
  const Model glm = io::resolve_model(dir + "glm4p5_air/config.json");
  EXPECT_FALSE(glm.is_mla());
  EXPECT_EQ(glm.mtp_layers, 1);
  EXPECT_EQ(glm.first_dense_layers, 1);
  EXPECT_TRUE(glm.qkv_bias);
}

// Gemma-3's multimodal checkpoints: the language model from text_config, its omitted keys at transformers' defaults
// (vocabulary 262,208); 27B is the language model's share of the card's 27.4B (the vision tower is not modelled).
TEST(HuggingFace, AGemma3MultimodalConfigIsReadThroughItsTextConfig) {
  const std::string dir = std::string(LMSIM_TEST_FIXTURES) + "/hf/";
  const Model m = io::resolve_model(dir + "gemma3_27b_it/config.json");
  EXPECT_EQ(m.name, "gemma3_27b_it");
  EXPECT_EQ(m.vocab_size, 262208);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.window_attn_skip_freq, 6);
  EXPECT_TRUE(m.qk_norm && m.post_norms && m.tied_embeddings);
  EXPECT_NEAR(count_params(m).total / 1e9, 27.0, 0.3);
  io::Json j = io::parse_json_file(dir + "gemma3_27b_it/config.json");
  j["text_config"]["num_hidden_layers"] = "62";
  try {
    io::model_from_hf_config(j, "config.json");
    ADD_FAILURE();
  } catch (const io::InputError& e) {
    EXPECT_EQ(e.field(), "text_config.num_hidden_layers");
  }
  j.erase("text_config");
  try {
    io::model_from_hf_config(j, "config.json");
    ADD_FAILURE();
  } catch (const io::InputError& e) {
    EXPECT_EQ(e.field(), "text_config");
  }
}

// Llama-4 (through its text_config): MoE in every interleave_moe_layer_step-th layer with a shared expert, dense
// MLPs of intermediate_size_mlp between, and chunked attention but in every 4th (NoPE) layer.
namespace {
// The field a HuggingFace config is refused on ("" when it is read).
std::string refused_on(const io::Json& j) {
  try {
    io::model_from_hf_config(j, "config.json");
  } catch (const io::InputError& e) {
    return e.field();
  }
  return "";
}
}  // namespace

// Vision-language checkpoints train their language model as the causal LM it is: from text_config over the top
// level's keys (Qwen2.5-VL keeps them at the top level).
TEST(HuggingFace, AVisionLanguageConfigIsReadAsItsLanguageModel) {
  const std::string dir = std::string(LMSIM_TEST_FIXTURES) + "/hf/";
  const Model vl = io::resolve_model(dir + "qwen3_vl_30b_a3b/config.json");
  EXPECT_EQ(vl.name, "qwen3_vl_30b_a3b");
  EXPECT_TRUE(same_architecture(vl, io::resolve_model(dir + "qwen3_30b_a3b/config.json")));
  const Model q25 = io::resolve_model(dir + "qwen2p5_vl_7b/config.json");
  EXPECT_TRUE(q25.qkv_bias);  // Qwen2's
  EXPECT_FALSE(q25.tied_embeddings);
  EXPECT_EQ(q25.sliding_window, 0);  // use_sliding_window false
  EXPECT_EQ(q25.hidden_size, 3584);
  const Model q3 = io::resolve_model(dir + "qwen3_vl_8b/config.json");
  EXPECT_TRUE(q3.qk_norm);           // Qwen3's
  EXPECT_FALSE(q3.tied_embeddings);  // from the top level
  io::Json j = io::parse_json_file(dir + "qwen3_vl_8b/config.json");
  j["tie_word_embeddings"] = true;
  EXPECT_TRUE(io::model_from_hf_config(j, "config.json").tied_embeddings);
  j["text_config"]["tie_word_embeddings"] = false;  // text_config's own wins
  EXPECT_FALSE(io::model_from_hf_config(j, "config.json").tied_embeddings);
  j["text_config"].erase("num_hidden_layers");
  EXPECT_EQ(refused_on(j), "text_config.num_hidden_layers");
  j.erase("text_config");
  EXPECT_EQ(refused_on(j), "text_config");
}

TEST(HuggingFace, Llama4ReadsItsInterleavedExpertsAndChunkedAttention) {
  const std::string dir = std::string(LMSIM_TEST_FIXTURES) + "/hf/";
  const Model mav = io::resolve_model(dir + "llama4_maverick/config.json");
  EXPECT_EQ(mav.num_moe_layers(), 24);
  EXPECT_FALSE(mav.layer_is_moe(0));  // transformers' moe_layers: 1, 3, 5, ...
  EXPECT_TRUE(mav.layer_is_moe(1));
  EXPECT_EQ(mav.ffn_hidden_size, 16384);
  EXPECT_EQ(mav.num_shared_experts, 1);
  EXPECT_EQ(mav.attention_chunk_size, 8192);
  EXPECT_EQ(mav.window_attn_skip_freq, 4);
  // Chunked attention's work: each 8192-token chunk's causal square. At 32K tokens the 36 chunked layers do a
  // quarter of full causal attention, the 12 NoPE layers all of it; at 8K (one chunk) every layer attends in full.
  EXPECT_DOUBLE_EQ(mav.attention_window_fraction(8192), 1.0);
  EXPECT_DOUBLE_EQ(mav.attention_window_fraction(32768), (12 + 36 * 0.25) / 48);
  EXPECT_DOUBLE_EQ(mav.attention_window_fraction(12288),
                   (12 + 36 * (8192.0 * 8192 + 4096.0 * 4096) / (12288.0 * 12288)) / 48);  // a chunk and a half
  const Model scout = io::resolve_model(dir + "llama4_scout/config.json");
  EXPECT_EQ(scout.num_moe_layers(), 48);
  EXPECT_TRUE(scout.qk_norm);
  // Its model JSON round-trips, chunks included.
  const Model again = io::model_from_json(io::to_json(mav), "mav.json");
  EXPECT_TRUE(same_architecture(again, mav));
  EXPECT_EQ(again.attention_chunk_size, 8192);
  // An explicit no_rope_layers list: 0 marks a full-attention layer, every n-th.
  io::Json j = io::parse_json_file(dir + "llama4_scout/config.json");
  io::Json rope = io::Json::array();
  for (int i = 0; i < 48; ++i) rope.push_back((i + 1) % 3 == 0 ? 0 : 1);
  j["text_config"]["no_rope_layers"] = rope;
  EXPECT_EQ(io::model_from_hf_config(j, "config.json").window_attn_skip_freq, 3);
  j["text_config"]["no_rope_layers"][0] = 0;
  try {
    io::model_from_hf_config(j, "config.json");
    ADD_FAILURE();
  } catch (const io::InputError& e) {
    EXPECT_EQ(e.field(), "text_config.no_rope_layers");
  }
}

TEST(HuggingFace, ExpertLayersFollowEachFamilysRule) {
  const std::string dir = std::string(LMSIM_TEST_FIXTURES) + "/hf/";
  auto layers_where = [](int from, int to, int step) {
    io::Json list = io::Json::array();
    for (int i = from; i < to; i += step) list.push_back(i);
    return list;
  };
  // Llama-4: an explicit moe_layers list wins over interleave_moe_layer_step.
  io::Json mav = io::parse_json_file(dir + "llama4_maverick/config.json");
  mav["text_config"]["moe_layers"] = layers_where(1, 48, 2);
  EXPECT_TRUE(same_architecture(io::model_from_hf_config(mav, "config.json"),
                                io::resolve_model(dir + "llama4_maverick/config.json")));
  mav["text_config"]["moe_layers"] = layers_where(3, 48, 4);
  const Model sparse = io::model_from_hf_config(mav, "config.json");
  EXPECT_EQ(sparse.num_moe_layers(), 12);
  EXPECT_FALSE(sparse.layer_is_moe(1));
  EXPECT_TRUE(sparse.layer_is_moe(3));
  EXPECT_TRUE(sparse.layer_is_moe(47));
  EXPECT_EQ(sparse.ffn_hidden_size, 16384);  // intermediate_size_mlp: the dense layers between
  mav["text_config"]["moe_layers"] = io::Json::array({0, 1, 5});
  EXPECT_EQ(refused_on(mav), "text_config.moe_layers");
  mav["text_config"]["moe_layers"] = io::Json::array({1, 48});
  EXPECT_EQ(refused_on(mav), "text_config.moe_layers");
  // Qwen3-MoE: mlp_only_layers are dense, of intermediate_size; decoder_sparse_step n puts experts in layers
  // n-1, 2n-1, ... (transformers' (i + 1) % n == 0).
  io::Json qwen = io::parse_json_file(dir + "qwen3_30b_a3b/config.json");
  qwen["mlp_only_layers"] = io::Json::array({0, 1});
  const Model prefix = io::model_from_hf_config(qwen, "config.json");
  EXPECT_EQ(prefix.num_moe_layers(), 46);
  EXPECT_FALSE(prefix.layer_is_moe(1));
  EXPECT_TRUE(prefix.layer_is_moe(2));
  EXPECT_EQ(prefix.ffn_hidden_size, qwen["intermediate_size"].get<std::int64_t>());
  qwen["mlp_only_layers"] = io::Json::array({0, 5});
  EXPECT_EQ(refused_on(qwen), "mlp_only_layers");
  qwen["mlp_only_layers"] = io::Json::array();
  qwen["decoder_sparse_step"] = 2;
  const Model every_other = io::model_from_hf_config(qwen, "config.json");
  EXPECT_FALSE(every_other.layer_is_moe(0));
  EXPECT_TRUE(every_other.layer_is_moe(1));
  EXPECT_EQ(every_other.num_moe_layers(), 24);
  // DeepSeek-V3: experts from first_k_dense_replace on where i % moe_layer_freq == 0.
  io::Json ds = io::parse_json_file(dir + "deepseek_v3/config.json");
  ds["moe_layer_freq"] = 2;
  const Model ds2 = io::model_from_hf_config(ds, "config.json");
  EXPECT_FALSE(ds2.layer_is_moe(3));
  EXPECT_TRUE(ds2.layer_is_moe(4));
  EXPECT_FALSE(ds2.layer_is_moe(5));
  EXPECT_EQ(ds2.num_moe_layers(), 29);  // 4, 6, ..., 60
  ds["first_k_dense_replace"] = 61;
  EXPECT_EQ(refused_on(ds), "moe_layer_freq");
}

TEST(HuggingFace, LayerTypesSayWhichLayersAttendInFull) {
  const std::string base = R"("architectures": ["GptOssForCausalLM"], "hidden_size": 2880, "num_hidden_layers": 4,
    "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64, "intermediate_size": 2880,
    "num_local_experts": 32, "num_experts_per_tok": 4, "vocab_size": 201088, "sliding_window": 128)";
  auto read = [&](const std::string& types) {
    return io::model_from_hf_config(io::Json::parse("{" + base + R"(, "layer_types": )" + types + "}"), "c.json");
  };
  const std::string s = R"("sliding_attention")", f = R"("full_attention")";
  EXPECT_EQ(read("[" + s + "," + f + "," + s + "," + f + "]").window_attn_skip_freq, 2);
  EXPECT_EQ(read("[" + s + "," + s + "," + s + "," + f + "]").window_attn_skip_freq, 4);
  const Model all_windowed = read("[" + s + "," + s + "," + s + "," + s + "]");
  EXPECT_EQ(all_windowed.sliding_window, 128);
  EXPECT_EQ(all_windowed.window_attn_skip_freq, 0);
  EXPECT_EQ(read("[" + f + "," + f + "," + f + "," + f + "]").sliding_window, 0);
  for (const std::string& bad : {"[" + f + "," + s + "," + s + "," + f + "]", "[" + s + "," + f + "]",
                                 "[" + s + "," + f + "," + s + R"(, "chunked_attention"])"}) {
    try {
      read(bad);
      ADD_FAILURE() << bad;
    } catch (const io::InputError& e) {
      EXPECT_EQ(e.field(), "layer_types") << bad;
    }
  }
}

TEST(HuggingFace, AConfigWithoutItsNameIsNamedByItsFolderOrItsFile) {
  const io::Json j = io::Json::parse(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
    "num_hidden_layers": 32, "num_attention_heads": 32, "intermediate_size": 14336, "vocab_size": 128256})");
  EXPECT_EQ(io::model_from_hf_config(j, "ckpt/Llama-3-8B/config.json").name, "Llama-3-8B");
  EXPECT_EQ(io::model_from_hf_config(j, "/tmp/my_llama.json").name, "my_llama");
  io::Json named = j;
  named["_name_or_path"] = "meta-llama/Meta-Llama-3-8B";
  EXPECT_EQ(io::model_from_hf_config(named, "/tmp/my_llama.json").name, "meta-llama/Meta-Llama-3-8B");
}

TEST(HuggingFace, ASlidingWindowIsReadUnlessTheConfigTurnsItOff) {
  const std::string base = R"("hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000)";
  auto read = [&](const std::string& extra) {
    return io::model_from_hf_config(io::Json::parse("{" + base + ", " + extra + "}"), "config.json");
  };
  const Model v01 = read(R"("architectures": ["MistralForCausalLM"], "sliding_window": 4096)");
  EXPECT_EQ(v01.sliding_window, 4096);
  EXPECT_EQ(v01.window_attn_skip_freq, 0);
  EXPECT_EQ(read(R"("architectures": ["MistralForCausalLM"], "sliding_window": null)").sliding_window, 0);
  EXPECT_EQ(read(R"("architectures": ["MistralForCausalLM"], "sliding_window": 0)").sliding_window, 0);
  EXPECT_EQ(read(R"("architectures": ["Qwen2ForCausalLM"], "sliding_window": 131072, "use_sliding_window": false)")
                .sliding_window,
            0);
  const Model gemma = io::resolve_model(std::string(LMSIM_TEST_FIXTURES) + "/hf/gemma2_9b/config.json");
  EXPECT_EQ(gemma.sliding_window, 4096);
  EXPECT_EQ(gemma.window_attn_skip_freq, 2);
  EXPECT_EQ(gemma.final_logit_softcapping, 30.0);
}

TEST(HuggingFace, UnsupportedArchitectureOrMissingKeyIsNamed) {
  try {
    io::model_from_hf_config(io::Json::parse(R"({"architectures": ["Starcoder2ForCausalLM"], "hidden_size": 3072})"),
                             "config.json");
    ADD_FAILURE();
  } catch (const io::InputError& e) {
    EXPECT_EQ(e.field(), "architectures");
    EXPECT_NE(std::string(e.what()).find("Starcoder2ForCausalLM"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("Phi3ForCausalLM"), std::string::npos);  // the supported list
  }
  const io::Json j = io::Json::parse(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 4096})");
  try {
    io::model_from_hf_config(j, "config.json");
    ADD_FAILURE();
  } catch (const io::InputError& e) {
    EXPECT_EQ(e.field(), "num_hidden_layers");
  }
}

namespace {
// `read` of a temporary file holding `log`, removed afterwards.
template <class Read>
io::MegatronRun read_through_file(const std::string& log, Read read) {
  const auto f = fs::temp_directory_path() / ("lmsim_log_" + std::to_string(::getpid()) + ".log");
  spit(f, log);
  struct Remove {
    fs::path f;
    ~Remove() { fs::remove(f); }
  } remove{f};
  return read(f.string());
}

// A Megatron log: `text` with `lines` inserted after its argument line `after`.
io::MegatronRun read_log_with(const std::string& text, const std::string& after, const std::string& lines) {
  std::string log = text;
  log.insert(log.find(after) + after.size(), lines);
  return read_through_file(log, [](const std::string& f) { return io::read_megatron_log(f); });
}
}  // namespace

TEST(MegatronLog, ReadsTheOverlapAndLossFusionFlags) {
  // Transformer Engine's cross entropy needs both the loss fusion and its te implementation.
  const std::string text = slurp(fs::path(LMSIM_TEST_FIXTURES) / "megatron" / "run_tp2_pp2.log");
  const std::string marker = "  tp_comm_overlap ................................. False\n";
  ASSERT_NE(text.find(marker), std::string::npos);
  auto read = [&](const std::string& lines) { return read_log_with(text, marker, lines).settings; };
  const TrainingSettings none = read("");
  EXPECT_FALSE(none.te_cross_entropy || none.overlap_p2p_comm || none.overlap_moe_expert_parallel_comm);
  EXPECT_TRUE(none.gradient_accumulation_fusion && none.masked_softmax_fusion);  // Megatron's defaults
  EXPECT_TRUE(none.async_tensor_model_parallel_allreduce);                       // a log without the switch overlaps
  EXPECT_FALSE(
      read("  async_tensor_model_parallel_allreduce ........... False\n").async_tensor_model_parallel_allreduce);
  EXPECT_EQ(none.microbatch_group_size_per_vp_stage, 0);  // unset: Megatron-core takes pipeline_parallel
  EXPECT_EQ(read("  microbatch_group_size_per_vp_stage .............. 4\n").microbatch_group_size_per_vp_stage, 4);
  const TrainingSettings unfused = read(
      "  gradient_accumulation_fusion .................... False\n"
      "  masked_softmax_fusion ........................... False\n");
  EXPECT_FALSE(unfused.gradient_accumulation_fusion || unfused.masked_softmax_fusion);
  const TrainingSettings te = read(
      "  cross_entropy_fusion_impl ....................... te\n"
      "  cross_entropy_loss_fusion ....................... True\n"
      "  overlap_p2p_comm ................................ True\n"
      "  overlap_moe_expert_parallel_comm ................ True\n"
      "  fp8_param_gather ................................ True\n");
  EXPECT_TRUE(te.te_cross_entropy && te.overlap_p2p_comm && te.overlap_moe_expert_parallel_comm);
  EXPECT_FALSE(te.distribute_saved_activations);
  EXPECT_TRUE(read("  distribute_saved_activations .................... True\n").distribute_saved_activations);
  EXPECT_FALSE(none.nccl_ub);
  EXPECT_TRUE(read("  nccl_ub ......................................... True\n").nccl_ub);
  EXPECT_FALSE(none.tp_only_amax_red);
  EXPECT_TRUE(read("  tp_only_amax_red ................................ True\n").tp_only_amax_red);
  EXPECT_FALSE(te.fp8_param_gather);  // the fixture trains in bf16: no FP8 parameters
  EXPECT_FALSE(read("  cross_entropy_fusion_impl ....................... te\n").te_cross_entropy);
  EXPECT_THROW(read("  cross_entropy_fusion_impl ....................... triton\n"), io::InputError);
}

TEST(MegatronLog, ReadsTheFullRecomputeMethodAndLayerCount) {
  std::string text = slurp(fs::path(LMSIM_TEST_FIXTURES) / "megatron" / "run_tp2_pp2.log");
  const std::string method = "  recompute_method ................................ uniform\n";
  ASSERT_NE(text.find(method), std::string::npos);
  auto read = [&](const std::string& lines) {
    std::string t = text;
    t.replace(t.find(method), method.size(), lines);
    return read_log_with(t, "  seq_length ...................................... 4096\n", "").strategy;
  };
  const Strategy uniform1 = read(method);  // the fixture: uniform, Megatron's default of one layer
  EXPECT_EQ(uniform1.recompute, Recompute::full);
  EXPECT_EQ(uniform1.recompute_num_layers, 0);
  EXPECT_EQ(config_name(uniform1), "dp2-tp2-pp2-cp1-RC");
  const Strategy block = read(
      "  recompute_method ................................ block\n"
      "  recompute_num_layers ............................ 5\n");
  EXPECT_EQ(block.recompute_method, RecomputeMethod::block);
  EXPECT_EQ(block.recompute_num_layers, 5);
  const Strategy groups = read(method + "  recompute_num_layers ............................ 2\n");
  EXPECT_EQ(config_name(groups), "dp2-tp2-pp2-cp1-RC-uniform2");
  EXPECT_THROW(read("  recompute_method ................................ None\n"), io::InputError);
  EXPECT_THROW(read(method + "  recompute_num_layers ............................ 0\n"), io::InputError);
}

TEST(MegatronLog, ReadsTheContextParallelAlgorithm) {
  // The fixture run (8 ranks, tp2 pp2) made dp1 cp2; Megatron-core logs --cp-comm-type as a list, MindSpeed-LLM
  // its --context-parallel-algo, which wins.
  std::string text = slurp(fs::path(LMSIM_TEST_FIXTURES) / "megatron" / "run_tp2_pp2.log");
  auto swap = [&](const std::string& from, const std::string& to) {
    ASSERT_NE(text.find(from), std::string::npos) << from;
    text.replace(text.find(from), from.size(), to);
  };
  swap("  context_parallel_size ........................... 1\n",
       "  context_parallel_size ........................... 2\n");
  swap("  data_parallel_size .............................. 2\n",
       "  data_parallel_size .............................. 1\n");
  const std::string marker = "  seq_length ...................................... 4096\n";
  auto read = [&](const std::string& lines) { return read_log_with(text, marker, lines).settings.cp_comm_type; };
  EXPECT_EQ(read(""), CpCommType::p2p);
  EXPECT_EQ(read("  cp_comm_type .................................... ['a2a']\n"), CpCommType::a2a);
  EXPECT_EQ(read("  cp_comm_type .................................... allgather\n"), CpCommType::allgather);
  EXPECT_EQ(read("  context_parallel_algo ........................... ulysses_cp_algo\n"
                 "  cp_comm_type .................................... ['p2p']\n"),
            CpCommType::a2a);
  EXPECT_THROW(read("  cp_comm_type .................................... ['a2a', 'p2p']\n"), io::InputError);
  EXPECT_EQ(read("  context_parallel_algo ........................... hybrid_cp_algo\n"
                 "  ulysses_degree_in_cp ............................ 2\n"),
            CpCommType::a2a_p2p);
  EXPECT_THROW(read("  cp_comm_type .................................... ['a2a+p2p']\n"), io::InputError);  // no sizes
  EXPECT_THROW(read("  context_parallel_algo ........................... adaptive_cp_algo\n"), io::InputError);
}

TEST(MegatronLog, ReadsDropoutRecomputeModulesDispatcherFsdpAndPipelineSends) {
  // Settings a Megatron-LM arguments block carries that were once dropped: each read, with Megatron's default.
  std::string text = slurp(fs::path(LMSIM_TEST_FIXTURES) / "megatron" / "run_tp2_pp2.log");
  const std::string marker = "  seq_length ...................................... 4096\n";
  auto read = [&](const std::string& lines) { return read_log_with(text, marker, lines); };
  const io::MegatronRun none = read("");
  EXPECT_TRUE(none.settings.hidden_dropout && none.settings.attention_dropout);  // both default to 0.1
  EXPECT_EQ(none.settings.moe_token_dispatcher_type, MoeDispatcher::allgather);  // Megatron's default
  EXPECT_FALSE(none.settings.pipeline_scatter_gather || none.settings.fsdp);
  const TrainingSettings off = read(
                                   "  hidden_dropout .................................. 0.0\n"
                                   "  attention_dropout ............................... 0.0\n")
                                   .settings;
  EXPECT_FALSE(off.hidden_dropout || off.attention_dropout);
  const TrainingSettings attention_only = read("  hidden_dropout .................................. 0.0\n").settings;
  EXPECT_FALSE(attention_only.hidden_dropout);
  EXPECT_TRUE(attention_only.attention_dropout);  // its default 0.1
  EXPECT_THROW(read("  hidden_dropout .................................. 1.5\n"), io::InputError);
  // Sizes beyond any integer, or not whole, are refused before they are converted.
  EXPECT_THROW(read("  micro_batch_size ................................ 1e30\n"), io::InputError);
  EXPECT_THROW(read("  micro_batch_size ................................ 1.5\n"), io::InputError);
  EXPECT_EQ(
      read("  moe_token_dispatcher_type ....................... alltoall_seq\n").settings.moe_token_dispatcher_type,
      MoeDispatcher::alltoall);
  EXPECT_EQ(read("  moe_token_dispatcher_type ....................... flex\n").settings.moe_token_dispatcher_type,
            MoeDispatcher::flex);
  EXPECT_THROW(read("  moe_token_dispatcher_type ....................... deepep\n"), io::InputError);
  // Scattered pipeline sends only before the pipeline moved into Megatron-core (no transformer_impl yet).
  const std::string scatter = "  scatter_gather_tensors_in_pipeline .............. True\n";
  EXPECT_TRUE(read(scatter).settings.pipeline_scatter_gather);
  EXPECT_FALSE(
      read(scatter + "  transformer_impl ................................ local\n").settings.pipeline_scatter_gather);
  EXPECT_TRUE(read("  use_torch_fsdp2 ................................. True\n").settings.fsdp);
  EXPECT_TRUE(read("  use_megatron_fsdp ............................... True\n").settings.fsdp);
  EXPECT_THROW(read("  use_megatron_fsdp ............................... True\n"
                    "  data_parallel_sharding_strategy ................. optim\n"),
               io::InputError);
  // Selective recompute's modules, the attention core by default.
  const std::string full = "  recompute_granularity ........................... full\n";
  ASSERT_NE(text.find(full), std::string::npos);
  text.replace(text.find(full), full.size(), "  recompute_granularity ........................... selective\n");
  EXPECT_EQ(read("").settings.recompute_modules, module_bit(RecomputeModule::core_attn));
  EXPECT_EQ(
      read("  recompute_modules ............................... ['moe_act', 'layernorm']\n").settings.recompute_modules,
      module_bit(RecomputeModule::moe_act) | module_bit(RecomputeModule::layernorm));
  EXPECT_THROW(read("  recompute_modules ............................... ['attention']\n"), io::InputError);
}

TEST(MegatronLog, ReadsTransformerEngineAttentionAsFlash) {
  // A Megatron-core model on Transformer Engine's layers picks a flash or cuDNN fused kernel unless told otherwise;
  // --use-flash-attn speaks for the legacy model only.
  std::string text = slurp(fs::path(LMSIM_TEST_FIXTURES) / "megatron" / "run_tp2_pp2.log");
  const std::string legacy_flash = text;  // --use-flash-attn True, the legacy model
  const std::string flash = "  use_flash_attn .................................. True\n";
  ASSERT_NE(text.find(flash), std::string::npos);
  text.replace(text.find(flash), flash.size(), "  use_flash_attn .................................. False\n");
  const std::string marker = "  seq_length ...................................... 4096\n";
  auto read = [&](const std::string& lines) { return read_log_with(text, marker, lines).settings.flash_attention; };
  const std::string te = "  transformer_impl ................................ transformer_engine\n";
  EXPECT_FALSE(read(""));
  EXPECT_FALSE(read(te));  // a legacy model (no --use-mcore-models) on TE layers
  EXPECT_TRUE(read(te + "  use_mcore_models ................................ True\n"));
  EXPECT_TRUE(read(te + "  use_legacy_models ............................... False\n"));
  EXPECT_FALSE(read(te + "  use_legacy_models ............................... True\n"));
  EXPECT_TRUE(read(te + "  use_legacy_models ............................... False\n"
                        "  attention_backend ............................... AttnBackend.auto\n"));
  EXPECT_FALSE(read(te + "  use_legacy_models ............................... False\n"
                         "  attention_backend ............................... AttnBackend.unfused\n"));
  EXPECT_TRUE(read("  attention_backend ............................... AttnBackend.fused\n"));
  EXPECT_FALSE(
      read("  transformer_impl ................................ local\n"
           "  use_legacy_models ............................... False\n"));
  // Which flash kernel: FlashAttention-2 where the flash backend is named or the legacy model's --use-flash-attn
  // drives it; cuDNN's fused kernel under fused or auto (Transformer Engine's choice on Hopper and later).
  auto backend = [&](const std::string& lines) {
    return read_log_with(text, marker, lines).settings.attention_backend;
  };
  const std::string mcore = te + "  use_legacy_models ............................... False\n";
  EXPECT_EQ(backend(mcore + "  attention_backend ............................... AttnBackend.flash\n"),
            AttentionBackend::flash);
  EXPECT_EQ(backend(mcore + "  attention_backend ............................... AttnBackend.fused\n"),
            AttentionBackend::fused);
  EXPECT_EQ(backend(mcore + "  attention_backend ............................... AttnBackend.auto\n"),
            AttentionBackend::fused);
  EXPECT_EQ(backend(mcore), AttentionBackend::fused);
  EXPECT_EQ(read_log_with(legacy_flash, marker, "").settings.attention_backend, AttentionBackend::flash);
  // The FP8 recipe: delayed where the log does not name one, the others as named; an unknown one is refused.
  const std::string fp8 = "  fp8 ............................................. hybrid\n";
  auto recipe = [&](const std::string& lines) { return read_log_with(text, marker, fp8 + lines).settings; };
  EXPECT_EQ(recipe("").precision, Precision::fp8);
  EXPECT_EQ(recipe("").fp8_recipe, Fp8Recipe::delayed);
  EXPECT_EQ(recipe("  fp8_recipe ...................................... tensorwise\n").fp8_recipe,
            Fp8Recipe::tensorwise);
  EXPECT_EQ(recipe("  fp8_recipe ...................................... blockwise\n").fp8_recipe, Fp8Recipe::blockwise);
  EXPECT_THROW(recipe("  fp8_recipe ...................................... custom\n"), io::InputError);
  // --first-last-layers-bf16 and its counts (1 each unless given).
  const std::string ends =
      "  fp8_recipe ...................................... tensorwise\n"
      "  first_last_layers_bf16 .......................... True\n";
  EXPECT_FALSE(recipe("").first_last_layers_bf16);
  EXPECT_TRUE(recipe(ends).first_last_layers_bf16);
  EXPECT_EQ(recipe(ends).bf16_layers_at_start(), 1);
  EXPECT_EQ(recipe(ends).bf16_layers_at_end(), 1);
  const TrainingSettings two = recipe(ends +
                                      "  num_layers_at_start_in_bf16 ..................... 2\n"
                                      "  num_layers_at_end_in_bf16 ....................... 0\n");
  EXPECT_EQ(two.bf16_layers_at_start(), 2);
  EXPECT_EQ(two.bf16_layers_at_end(), 0);
  // --fp4-format e2m1: NVFP4 (its only recipe modelled), FP4 parameters under either name the args carry, BF16
  // ends as under FP8.
  const std::string fp4 = "  fp4 ............................................. e2m1\n";
  auto fp4_run = [&](const std::string& lines) { return read_log_with(text, marker, fp4 + lines).settings; };
  EXPECT_EQ(fp4_run("").precision, Precision::fp4);
  EXPECT_FALSE(fp4_run("").fp8_param_gather);
  EXPECT_TRUE(fp4_run("  fp4_param_gather ................................ True\n").fp8_param_gather);
  EXPECT_TRUE(fp4_run("  fp4_param ....................................... True\n").fp8_param_gather);
  EXPECT_FALSE(read_log_with(text, marker, "  fp4_param_gather ................................ True\n")
                   .settings.fp8_param_gather);  // not without FP4
  EXPECT_EQ(fp4_run("  first_last_layers_bf16 .......................... True\n").bf16_layers_at_end(), 1);
  EXPECT_THROW(fp4_run("  fp4_recipe ...................................... custom\n"), io::InputError);
  // The precision-aware optimizer: bf16 moments as named; under BF16 TE keeps the master copy as remainders
  // (store_param_remainders, on unless said), under current-scaling FP8 Megatron-core keeps it whole.
  const std::string pao = "  use_precision_aware_optimizer ................... True\n";
  const std::string bf16_moments =
      "  exp_avg_dtype ................................... torch.bfloat16\n"
      "  exp_avg_sq_dtype ................................ torch.bfloat16\n";
  const TrainingSettings plain = read_log_with(text, marker, "").settings;
  EXPECT_FALSE(plain.bf16_adam_moments || plain.reuse_fp32_param);
  const TrainingSettings aware = read_log_with(text, marker, pao + bf16_moments).settings;
  EXPECT_TRUE(aware.bf16_adam_moments);
  ASSERT_EQ(aware.precision, Precision::bf16);  // the fixture's
  EXPECT_TRUE(aware.reuse_fp32_param);
  EXPECT_FALSE(read_log_with(text, marker, pao + "  store_param_remainders .......................... False\n")
                   .settings.reuse_fp32_param);
  const TrainingSettings cs = recipe("  fp8_recipe ...................................... tensorwise\n" + pao);
  EXPECT_FALSE(cs.reuse_fp32_param || cs.bf16_adam_moments);
  EXPECT_THROW(
      read_log_with(text, marker, pao + "  exp_avg_dtype ................................... torch.bfloat16\n"),
      io::InputError);  // one moment in bf16
}

namespace {
// A Megatron-Bridge fixture log with `from` replaced by `to` (nothing when `from` is empty), read through a
// temporary file.
io::MegatronRun read_bridge_with(const std::string& fixture, const std::string& from, const std::string& to,
                                 std::int64_t devices, io::MemoryReport memory = io::MemoryReport::max_reserved) {
  std::string log = slurp(fs::path(LMSIM_TEST_FIXTURES) / "megatron_bridge" / fixture);
  if (!from.empty()) {
    const auto at = log.find(from);
    if (at == std::string::npos) throw std::logic_error("not in the fixture: " + from);
    log.replace(at, from.size(), to);
  }
  return read_through_file(log, [&](const std::string& f) { return io::read_megatron_bridge_log(f, memory, devices); });
}
}  // namespace

TEST(MegatronBridgeLog, TheSummaryAndTheYamlConfigurationReadAlike) {
  // The same run as Bridge logs it since February 2026 (non-default values, world size from --devices) and before
  // (the whole configuration as YAML, world size from its HyperCommGrid line).
  for (const char* fixture : {"run_summary.log", "run_yaml.log"}) {
    SCOPED_TRACE(fixture);
    const io::MegatronRun r = read_bridge_with(fixture, "", "", std::string(fixture) == "run_summary.log" ? 8 : 0);
    EXPECT_EQ(config_name(r.strategy), "dp2-tp2-pp2-cp1-selRC-vpp2");
    EXPECT_EQ(r.devices, 8);
    EXPECT_EQ(r.num_layers, 28);
    const TrainingSettings& t = r.settings;
    EXPECT_EQ(t.seq_length, 4096);
    EXPECT_EQ(t.global_batch_size, 32);
    EXPECT_EQ(t.micro_batch_size, 1);
    EXPECT_EQ(t.precision, Precision::bf16);
    EXPECT_EQ(t.recompute_modules, module_bit(RecomputeModule::core_attn) | module_bit(RecomputeModule::mlp));
    EXPECT_TRUE(t.sequence_parallel && t.distributed_optimizer && t.overlap_grad_reduce && t.overlap_param_gather);
    EXPECT_TRUE(t.flash_attention);  // TE's auto backend
    EXPECT_TRUE(t.gradient_accumulation_fusion && t.masked_softmax_fusion && t.te_cross_entropy);
    EXPECT_FALSE(t.hidden_dropout || t.attention_dropout || t.fp32_gradients || t.tp_comm_overlap ||
                 t.pipeline_scatter_gather || t.fsdp);
    EXPECT_DOUBLE_EQ(r.iteration_time_s, 5.375);  // the median of the intervals after the first
    ASSERT_EQ(r.peak_memory_bytes.size(), 4u);    // the ranks of data-parallel rank 0 report
    EXPECT_DOUBLE_EQ(r.peak_memory_bytes.at(0), 21.0e9);
    EXPECT_DOUBLE_EQ(r.peak_memory_bytes.at(4), 17.25e9);
  }
  EXPECT_DOUBLE_EQ(read_bridge_with("run_yaml.log", "", "", 0, io::MemoryReport::max_allocated).peak_memory_bytes.at(4),
                   16.0e9);
  // An NVFP4 run (bf16_with_nvfp4_mixed): the model configuration's fp4 and fp4_param fields.
  const TrainingSettings fp4 =
      read_bridge_with("run_yaml.log", "  fp8: null\n", "  fp4: e2m1\n  fp4_recipe: nvfp4\n  fp4_param: true\n", 0)
          .settings;
  EXPECT_EQ(fp4.precision, Precision::fp4);
  EXPECT_TRUE(fp4.fp8_param_gather);
}

TEST(MegatronBridgeLog, LinesLabelledByTheLauncherReadAsTheyWere) {
  // srun --label and torchrun --tee put the rank before each line; Windows line ends.
  const std::pair<const char*, fs::path> logs[] = {{"run_summary.log", fs::path("megatron_bridge") / "run_summary.log"},
                                                   {"run_tp2_pp2.log", fs::path("megatron") / "run_tp2_pp2.log"}};
  for (const auto& [name, rel] : logs) {
    const std::string text = slurp(fs::path(LMSIM_TEST_FIXTURES) / rel);
    const bool bridge = rel.parent_path() == "megatron_bridge";
    auto read = [&](const std::string& log) {
      return read_through_file(log, [&](const std::string& f) {
        return bridge ? io::read_megatron_bridge_log(f, io::MemoryReport::max_reserved, 8) : io::read_megatron_log(f);
      });
    };
    const io::MegatronRun plain = read(text);
    for (const std::string label : {"0: ", "[default0]:", "CRLF"}) {
      SCOPED_TRACE(std::string(name) + " " + label);
      std::string labelled, line;
      std::istringstream in(text);
      while (std::getline(in, line)) labelled += label == "CRLF" ? line + "\r\n" : label + line + "\n";
      const io::MegatronRun r = read(labelled);
      EXPECT_EQ(config_name(r.strategy), config_name(plain.strategy));
      EXPECT_EQ(io::to_json(r.settings), io::to_json(plain.settings));
      EXPECT_EQ(r.iteration_time_s, plain.iteration_time_s);
      EXPECT_EQ(r.peak_memory_bytes, plain.peak_memory_bytes);
    }
  }
}

TEST(MegatronBridgeLog, AFieldTheSummaryLeavesOutHasMegatronCoresDefault) {
  auto drop = [](const std::string& line) { return read_bridge_with("run_summary.log", line, "", 8).settings; };
  EXPECT_FALSE(drop("  masked_softmax_fusion: True  (Mcore default: False)\n").masked_softmax_fusion);
  EXPECT_FALSE(drop("  gradient_accumulation_fusion: True  (Mcore default: False)\n").gradient_accumulation_fusion);
  EXPECT_TRUE(drop("  hidden_dropout: 0.0  (Mcore default: 0.1)\n").hidden_dropout);
  EXPECT_EQ(drop("  recompute_modules: ['core_attn', 'mlp']  (Mcore default: None)\n").recompute_modules,
            module_bit(RecomputeModule::core_attn));
  const io::MegatronRun one_stage =
      read_bridge_with("run_summary.log", "  pipeline_model_parallel_size: 2  (Mcore default: 1)\n", "", 8);
  EXPECT_EQ(one_stage.strategy.pipeline_parallel, 1);
  EXPECT_EQ(one_stage.strategy.data_parallel, 4);
  // Quoted values are unquoted; an FP8 model reads as such.
  EXPECT_EQ(read_bridge_with("run_summary.log", "  bf16: True  (Mcore default: False)\n  cross",
                             "  bf16: True  (Mcore default: False)\n  fp8: 'e4m3'  (Mcore default: None)\n  cross", 8)
                .settings.precision,
            Precision::fp8);
  // A YAML field with a mapping under it is not a list: left out, it takes the default.
  EXPECT_EQ(
      read_bridge_with("run_yaml.log", "  - core_attn\n  - mlp\n", "    unknown: 1\n", 0).settings.recompute_modules,
      module_bit(RecomputeModule::core_attn));
  // The YAML form spells an enum as {_target_, _call_, _args_}: AttnBackend 3 is unfused.
  EXPECT_FALSE(read_bridge_with("run_yaml.log", "    - 5\n", "    - 3\n", 0).settings.flash_attention);
}

TEST(MegatronBridgeLog, BadInputNamesTheField) {
  auto field = [](const char* fixture, const std::string& from, const std::string& to, std::int64_t devices,
                  io::MemoryReport mem = io::MemoryReport::max_reserved) {
    try {
      read_bridge_with(fixture, from, to, devices, mem);
    } catch (const io::InputError& e) {
      return e.field();
    }
    return std::string("no error");
  };
  EXPECT_EQ(field("run_summary.log", "", "", 0), "world_size");  // not logged, not given
  EXPECT_EQ(field("run_yaml.log", "", "", 16), "world_size");    // the grid says 8
  EXPECT_EQ(field("run_summary.log", "Configuration Summary", "Summary", 8), "configuration");
  EXPECT_EQ(field("run_summary.log", "  micro_batch_size: 1\n", "  micro_batch_size: 0\n", 8), "micro_batch_size");
  EXPECT_EQ(field("run_yaml.log", "  recompute_granularity: selective\n", "  recompute_granularity: blocks\n", 0),
            "recompute_granularity");
  EXPECT_EQ(field("run_yaml.log", "  - mlp\n", "  - mlps\n", 0), "recompute_modules");
  EXPECT_EQ(field("run_summary.log", "mem-max-reserved-gigabytes: 21.0", "mem-max-reserved-gigabytes: -1", 8),
            "mem-max-reserved-gigabytes");
  EXPECT_EQ(field("run_summary.log", " | mem-max-reserved-gigabytes: 21.0", "", 8), "mem-max-reserved-gigabytes");
  EXPECT_EQ(
      field("run_summary.log", "elapsed time per iteration (ms): 5400.0", "elapsed time per iteration (ms): 0", 8),
      "elapsed time per iteration (ms)");
}

// The fusion switches behind fused_kernels, under each framework's name, counted as the model runs them.
TEST(MegatronLog, ReadsTheKernelFusionSwitchesTheModelRuns) {
  const std::string text = slurp(fs::path(LMSIM_TEST_FIXTURES) / "megatron" / "run_tp2_pp2.log");
  const std::string marker = "  tp_comm_overlap ................................. False\n";
  const Model llama = io::presets().find_model("Llama-3-8B")->model;  // SwiGLU, RoPE, RMSNorm
  const Model gpt = io::presets().find_model("GPT-3-175B")->model;    // GELU, learned positions, LayerNorm
  struct Read {
    TrainingSettings t;
    std::vector<std::string> notes;
  };
  auto read = [&](const std::string& lines, const Model& m) {
    io::MegatronRun r = read_log_with(text, marker, lines);
    std::vector<std::string> notes = io::resolve_kernel_fusions(r, m);
    return Read{r.settings, notes};
  };
  // Before January 2024 Megatron-LM neither fused nor logged SwiGLU and RoPE: one of three on, read unfused, said.
  const Read old = read("", llama);
  EXPECT_FALSE(old.t.fused_kernels);
  ASSERT_EQ(old.notes.size(), 1u);
  EXPECT_NE(old.notes[0].find("bias_swiglu_fusion off (not logged"), std::string::npos) << old.notes[0];
  EXPECT_NE(old.notes[0].find("read as unfused"), std::string::npos) << old.notes[0];
  // Today's Megatron-LM logs all three (on by default): fused, nothing to say.
  const std::string today =
      "  bias_swiglu_fusion .............................. True\n"
      "  bias_dropout_fusion ............................. True\n"
      "  apply_rope_fusion ............................... True\n";
  const Read all = read(today, llama);
  EXPECT_TRUE(all.t.fused_kernels);
  EXPECT_TRUE(all.notes.empty());
  // --no-rope-fusion alone: two of three on, read fused and said.
  const Read no_rope = read(
      "  bias_swiglu_fusion .............................. True\n"
      "  apply_rope_fusion ............................... False\n",
      llama);
  EXPECT_TRUE(no_rope.t.fused_kernels);
  ASSERT_EQ(no_rope.notes.size(), 1u);
  EXPECT_NE(no_rope.notes[0].find("apply_rope_fusion off"), std::string::npos) << no_rope.notes[0];
  // GPT: its GELU moves the same bytes fused or not and it has no rotary embedding; the bias-dropout-add decides.
  EXPECT_TRUE(read("", gpt).t.fused_kernels);
  EXPECT_TRUE(read("", gpt).notes.empty());
  EXPECT_FALSE(read("  bias_dropout_fusion ............................. False\n", gpt).t.fused_kernels);
  // MindSpeed's opt-in NPU kernels win over Megatron's switches; its fused RMSNorm sets fused_norm for RMSNorm models.
  const std::string mindspeed =
      "  use_fused_swiglu ................................ True\n"
      "  use_fused_rotary_pos_emb ........................ True\n"
      "  use_fused_rmsnorm ............................... False\n";
  const Read ms = read(mindspeed, llama);
  EXPECT_TRUE(ms.t.fused_kernels && ms.notes.empty());
  EXPECT_FALSE(ms.t.fused_norm);
  EXPECT_TRUE(read(mindspeed, gpt).t.fused_norm);  // a LayerNorm model: the switch is not its
  EXPECT_FALSE(read("  use_fused_swiglu ................................ False\n"
                    "  use_fused_rotary_pos_emb ........................ False\n" +
                        today,
                    llama)
                   .t.fused_kernels);
  // Megatron-Bridge: a field the summary leaves out has Megatron-core's default, off; the Llama providers set all
  // three.
  io::MegatronRun bridge = read_bridge_with("run_summary.log", "", "", 8);
  EXPECT_TRUE(io::resolve_kernel_fusions(bridge, llama).empty());
  EXPECT_FALSE(bridge.settings.fused_kernels);
  bridge = read_bridge_with("run_summary.log", "  hidden_size: 1024",
                            "  apply_rope_fusion: True  (Mcore default: False)\n"
                            "  bias_activation_fusion: True  (Mcore default: False)\n"
                            "  bias_dropout_fusion: True  (Mcore default: False)\n  hidden_size: 1024",
                            8);
  EXPECT_TRUE(io::resolve_kernel_fusions(bridge, llama).empty());
  EXPECT_TRUE(bridge.settings.fused_kernels);
  EXPECT_THROW(read("  bias_swiglu_fusion .............................. maybe\n", llama), io::InputError);
}

TEST(MegatronLog, ReadsExpertTensorParallelism) {
  // The fixture run at tp2, with the expert TP line Megatron-core logs: None (experts follow tp), 2 (= tp) and 1.
  const std::string text = slurp(fs::path(LMSIM_TEST_FIXTURES) / "megatron" / "run_tp2_pp2.log");
  const std::string marker = "  expert_model_parallel_size ...................... 1\n";
  ASSERT_NE(text.find(marker), std::string::npos);
  const std::pair<const char*, int> cases[] = {{"None", 0}, {"2", 0}, {"1", 1}};
  for (const auto& [value, etp] : cases)
    EXPECT_EQ(
        read_log_with(text, marker, std::string("  expert_tensor_parallel_size ..................... ") + value + "\n")
            .strategy.expert_tensor_parallel,
        etp)
        << value;
}
