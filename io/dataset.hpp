// lmsim/io/dataset.hpp — reader for the LM-SimBench dataset layout (arXiv 2611.14285, Appendix C.4).
//
// Owns: discovering measured collections under a root (the manifest when present, else the folders), mapping a
// model setting (`qwen15_1.8b_8k`, `internlm25_1point8b_32k`, `internlm25_20b_32k_16p`) to a model and sequence
// length, reading each view with units converted once here (ms -> s, MB -> bytes), and validating everything
// (rank ids, duplicates, configuration names, degrees vs device count). Optional views may be absent.
//
// Peak memory: `peak_memory.csv` has one row per (configuration, rank). When only the maximum over ranks is
// known (the paper's tables), the row's rank_id is the literal `max`; such a run has no per-rank values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "simulator/simulator.hpp"

namespace lmsim::io {

struct StepTraceRow {
  int rank;
  double computing_s, communication_s, communication_not_overlapped_s, overlapped_s, free_s, stage_s, bubble_s;
};
struct OperatorCategoryRow {
  int rank;
  std::string op_category, op_type, core_type;
  double count, total_time_us, avg_time_us, ratio_percent;
};
// A communication primitive and a parallel group as the dataset's profiles may spell them ("allReduce",
// "hcom_allGather", "AllToAll", "send"; "TP", "tensor_parallel"), in the names lmsim uses (all_reduce, all_gather,
// reduce_scatter, all_to_all, broadcast, point_to_point; tp, pp, dp, cp, ep, edp); anything else unchanged.
std::string comm_primitive(const std::string& type);
std::string comm_group(const std::string& group);

struct CommSummaryRow {
  std::string comm_scope, comm_type, comm_group;
  double op_count, elapsed_time_sum_s, wait_time_sum_s, link_bandwidth_gb_per_s;
};
struct CommEvent {
  std::string comm_scope, comm_type, comm_group, op_name, link_type;
  double elapsed_time_s, wait_time_s, link_transit_bytes, link_bandwidth_gb_per_s;
};
// One matrix kernel of a per-rank trace: 32 bytes, so a trace of millions of kernels stays small.
struct MatrixOp {
  double duration_us;
  std::int32_t batch, m, n, k;
  std::uint16_t type;  // index into RankFiles::matrix_types
};
struct RankFiles {
  int rank;
  std::vector<CommEvent> comm;
  std::vector<MatrixOp> matrix;
  std::vector<std::string> matrix_types;  // kernel type names (MatMul, BatchMatMul, ...)
};
struct RankValue {
  int rank;
  double value;
};

struct Run {
  std::string config;
  Strategy strategy;
  std::string named_in;  // the file and line that first named the configuration, for messages about it
  long named_at_line = 0;
  std::optional<double> iteration_time_s;
  std::vector<RankValue> peak_memory_bytes;     // per rank, sorted by rank; empty when only the max is known
  std::optional<double> peak_memory_max_bytes;  // max over ranks: given, or computed from the per-rank rows
  std::vector<StepTraceRow> step_trace;
  std::vector<OperatorCategoryRow> op_categories;
  std::vector<RankFiles> ranks;
};

// Matched matrix problems with a median latency (lmsim extension file `matrix_latency_summary.csv`: the paper's
// Table 29 has no per-run attribution).
struct MatrixSummaryRow {
  std::int64_t batch, m, k, n;
  double median_us;
};

struct Collection {
  std::string directory;      // path relative to the root
  std::string model_setting;  // e.g. qwen3_0.6b_4k
  std::string platform;       // gpu | npu
  std::string system;         // system preset name
  std::string model;          // model preset name
  int devices = 0;
  TrainingSettings settings;
  bool settings_recorded = false;    // false: platform defaults were assumed (no training_settings.json)
  std::string settings_inferred;     // what the runs themselves showed beyond those defaults (empty: nothing)
  bool settings_from_peaks = false;  // some of them were read off the measured peak memory (read_memory_settings)
  // Recorded settings that the measured peaks contradict: the reading that fits them, and how well (empty: none).
  std::string settings_contradicted;
  std::vector<Run> runs;
  std::vector<CommSummaryRow> comm_summary;
  std::vector<MatrixSummaryRow> matrix_summary;
  const Run* find(const std::string& config) const;
};

// The stack settings that set how many bytes a rank keeps, each with the value that keeps fewer: what the reader
// takes off a collection's measured peaks where nothing stronger decided them, and, all at that value, the reading a
// run's feasibility must rule out before it proves one of them (see infer_settings in dataset.cpp).
struct MemorySetting {
  bool TrainingSettings::*member;
  const char* name;
  bool lean;
};
inline constexpr MemorySetting kMemorySettings[] = {{&TrainingSettings::sequence_parallel, "sequence_parallel", true},
                                                    {&TrainingSettings::flash_attention, "flash_attention", true},
                                                    {&TrainingSettings::fused_norm, "fused_norm", true},
                                                    {&TrainingSettings::fp32_gradients, "fp32_gradients", false},
                                                    {&TrainingSettings::reuse_fp32_param, "reuse_fp32_param", true}};

struct Dataset {
  std::string root;
  std::vector<Collection> collections;
  const Collection* find(const std::string& model_setting, const std::string& platform) const;
};

// What a dataset holds: per collection, how many configurations carry each measurement; per model setting, the
// timed configurations per platform and how many are timed on exactly two platforms (the paired set).
struct CollectionSummary {
  const Collection* collection;
  std::size_t configurations, with_time, with_memory, with_per_rank_memory, with_step_trace, with_operator_categories,
      with_rank_files;
};
struct ModelSettingSummary {
  std::map<std::string, std::size_t> timed_per_platform;
  std::size_t both_platforms = 0;  // 0 unless exactly two platforms
};
struct DatasetSummary {
  std::vector<CollectionSummary> collections;
  std::map<std::string, ModelSettingSummary> model_settings;
};
DatasetSummary summarize(const Dataset& d);

// Model-setting registry row (data/model_settings.csv): identifier -> model preset, sequence length, devices.
struct ModelSetting {
  std::string id, model;
  std::int64_t seq_length;
  int devices;
};
std::vector<ModelSetting> model_settings(const std::string& registry_csv);
// Resolves an identifier through the registry, else by its pattern (<family>_<size>_<seq>k[_<n>p]).
std::optional<ModelSetting> find_model_setting(const std::string& id);

Dataset read_dataset(const std::string& root);

}  // namespace lmsim::io
