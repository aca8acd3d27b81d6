// lmsim/simulator/simulate.hpp — S_θ(M, P, N): iteration time, per-rank peak memory and their breakdowns.
//
// Owns: the public entry point `simulate()` and its result types, the per-rank view of the result, and the
// on-request diagnostics (GEMM problems and collectives in the dataset's own shapes). The hot path allocates
// nothing; diagnostics allocate and are produced only when asked for.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "simulator/model.hpp"
#include "simulator/params.hpp"
#include "simulator/strategy.hpp"
#include "simulator/system.hpp"

namespace lmsim {

constexpr int kMaxStages = 128;

// One pipeline stage (every rank with that pipeline coordinate behaves the same in this model).
struct StageResult {
  int first_layer;
  int num_layers;
  // Time of one micro-batch through this stage (all virtual chunks), seconds.
  double forward_compute_s;
  double backward_compute_s;
  double recompute_s;
  double tp_comm_s;             // tensor-parallel collectives (and delayed FP8 amax reductions), exposed
  double tp_comm_overlapped_s;  // backward TP traffic hidden under the linear layers' backward GEMMs
  double cp_comm_exposed_s;     // context-parallel exchange (ring, all-to-all, K/V gather) not hidden by attention
  double cp_comm_overlapped_s;
  double ep_comm_s;             // MoE all-to-all dispatch and combine
  double pp_comm_s;             // point-to-point activation / gradient transfers, exposed
  double pp_comm_overlapped_s;  // hidden under the chunk's compute (overlap_p2p_comm, interleaved)
  double per_microbatch_s;
  // Once per iteration, seconds.
  double dp_comm_exposed_s;     // gradient reduction + parameter gather not hidden (after slack), per iteration
  double dp_comm_overlapped_s;  // hidden under backward / forward / the stage's pipeline slack
  double optimizer_s;
  int mtp_layers;  // multi-token-prediction modules on this stage
  // Memory of one rank of this stage, bytes.
  double weight_bytes;
  double gradient_bytes;
  double optimizer_bytes;
  double activation_bytes;  // stored activations of all in-flight micro-batches
  double transient_bytes;   // the largest short-lived buffer: logits / loss or a recomputed layer
  double runtime_bytes;     // runtime constant + allocator overhead
  double peak_bytes;
  double inflight_microbatches;
};

// Iteration-level breakdown, seconds, along the critical (slowest) stage. Every writer (predict's JSON and text,
// the search's HDF5, evaluate) loops over `breakdown_terms()`, the one description of these fields.
struct Breakdown {
  double compute_s = 0;
  double recompute_s = 0;
  double tp_comm_s = 0;
  double tp_comm_overlapped_s = 0;
  double cp_comm_exposed_s = 0;
  double cp_comm_overlapped_s = 0;
  double ep_comm_s = 0;
  double pp_comm_s = 0;
  double pp_comm_overlapped_s = 0;
  double dp_comm_exposed_s = 0;
  double dp_comm_overlapped_s = 0;
  double bubble_s = 0;
  double optimizer_s = 0;
};

// What a result term is: busy compute, communication on the critical path (exposed), communication hidden under
// compute (hidden: not part of the iteration time), the pipeline bubble, the optimizer step.
enum class TermKind { compute, exposed, hidden, bubble, optimizer };
const char* to_string(TermKind k);
template <class Owner>
struct TermInfo {
  const char* name;  // the key every writer uses (JSON, HDF5 dataset, CSV column)
  double Owner::*field;
  TermKind kind;
  const char* doc;
};
constexpr std::size_t kNumBreakdownTerms = 13;
const std::array<TermInfo<Breakdown>, kNumBreakdownTerms>& breakdown_terms();
// The per-stage times of StageResult (per micro-batch unless the doc says per iteration), same rules.
constexpr std::size_t kNumStageTimeTerms = 15;
const std::array<TermInfo<StageResult>, kNumStageTimeTerms>& stage_time_terms();
// Per-stage memory (bytes; `kind` is unused).
constexpr std::size_t kNumStageMemoryTerms = 7;
const std::array<TermInfo<StageResult>, kNumStageMemoryTerms>& stage_memory_terms();

// One dense transformer layer (an MoE one where the model has no dense layers), one micro-batch, on one rank of the
// critical stage: what Korthikanti et al. 2022 Table 4 reports. Forward includes its exposed communication;
// backward includes recomputation.
struct LayerTiming {
  bool moe = false;  // the layer reported is an MoE layer
  double forward_s = 0;
  double backward_s = 0;
  double recompute_s = 0;
  double tp_comm_exposed_s = 0;  // forward + backward
  double tp_comm_hidden_s = 0;
};

struct Prediction {
  Rejection rejection = Rejection::ok;  // not ok: nothing else is set
  // Model FLOPs of one iteration per device: three times the forward GEMM FLOPs of the op list (forward, input and
  // weight gradients), causal attention counted at half, recomputation not counted (the MFU convention of
  // Chowdhery et al. 2022 / Narayanan et al. 2021 without their recompute term).
  double model_flops_per_device = 0;
  SplitKind pipeline_split = SplitKind::even;
  LayerTiming layer;
  double iteration_time_s = 0;
  double max_peak_memory_bytes = 0;
  double capacity_bytes = 0;
  bool feasible = false;  // the paper's Eq. 6: peak <= capacity on every device
  int peak_stage = 0;
  int critical_stage = 0;
  std::int64_t num_micro_batches = 0;
  Breakdown breakdown;
  int num_stages = 0;
  std::array<StageResult, kMaxStages> stages;  // only [0, num_stages) are written

  bool ok() const { return rejection == Rejection::ok; }
};

struct SimOptions {
  ValidityOptions validity;
  double memory_margin_bytes = 0;  // capacity reduction before the feasibility check
};

Prediction simulate(const Model& m, const Strategy& s, const System& sys, const TrainingSettings& t,
                    const PlatformParams& p, const SimOptions& o = {});

// Why the system cannot run the settings' arithmetic, as a predicate of the system ("has no ..."), empty when it
// can: no dense throughput in the precision (an FP8 run also needs a 16-bit one for the layers it leaves out of
// FP8), or MX block scaling (fp8_recipe mxfp8) on a device without MXFP8 tensor cores. simulate() rejects such a
// pair with Rejection::precision_unsupported.
// The same with the setting it blames: "precision", or "fp8_recipe" for MX scaling on a device without it.
std::optional<SettingsProblem> precision_problem(const System& sys, const TrainingSettings& t);
std::string precision_unsupported(const System& sys, const TrainingSettings& t);

// The figures practitioners compare: model TFLOP/s per device, MFU (against the training precision's dense
// peak: FP8 runs against the FP8 peak) and tokens per second per device.
struct Throughput {
  double model_tflops_per_device = 0, mfu = 0, tokens_per_s_per_device = 0;
};
Throughput throughput(const Prediction& p, const Strategy& s, const System& sys, const TrainingSettings& t);

// A training run of `tokens` tokens at `iteration_time_s` on `devices`: whole iterations of global batch x sequence
// tokens (rounded up: Megatron-LM's --train-samples runs whole iterations), their wall-clock time and device-hours.
// All zero where the time or `tokens` is not positive.
struct TrainingRun {
  double iterations = 0, time_s = 0, device_hours = 0;
  double days() const { return time_s / 86400; }
  // The run's days were every iteration to take `iteration_time_s` (an end of the iteration's interval).
  double days_at(double iteration_time_s) const { return iterations * iteration_time_s / 86400; }
};
TrainingRun training_run(double iteration_time_s, std::int64_t devices, const TrainingSettings& t, double tokens);
// The same at a prediction's pace (zero where it failed).
TrainingRun training_run(const Prediction& p, const Strategy& s, const TrainingSettings& t, double tokens);

// Megatron rank order: tensor fastest, then context, then data (expert inside data), then pipeline.
struct RankCoord {
  int tp, cp, dp, pp;
};
RankCoord rank_coord(const Strategy& s, int rank);
// Peak memory of every rank of the job, bytes, index = global rank.
std::vector<double> per_rank_peak_memory(const Prediction& pr, const Strategy& s);

// Diagnostics, produced on request only. A GEMM's calls in the shapes its kernels run: a call userbuffers split
// into tp slices is tp calls of 1/tp of the rows, each with the slice's time.
struct GemmRecord {
  std::string name;  // qkv, scores, pv, out, fc1, fc2, router, expert_fc1, ..., lm_head
  int stage;
  std::int64_t batch, m, n, k;
  Precision dtype;
  double count;         // calls per iteration on one rank of the stage (forward, backward, recompute replays)
  double predicted_us;  // per call, as simulate() times it (without FP8 casts)
};
struct CollectiveRecord {
  std::string primitive;  // all_reduce, all_gather, reduce_scatter, all_to_all, send_recv, fused_all_to_all
  std::string group;      // tp, cp, cp_ring, ep, etp, tp_ep, dp, edp, pp, embedding, amax
  int stage;
  int group_size;
  int nodes;          // nodes the group spans (1: inside the NVLink domain)
  double link_share;  // share of the device's intra-node bandwidth it gets: the group's ring, or (send_recv) the pair's
                      // links
  double bytes;       // per call
  double count;       // calls per iteration
  double predicted_ms;   // per call, as simulate() times it
  std::string protocol;  // what runs it: NCCL's simple, ll128 or ll protocol, nvls (in the switch), fused (the flex
                         // dispatcher's own kernel)
};
std::vector<GemmRecord> gemm_diagnostics(const Model& m, const Strategy& s, const System& sys,
                                         const TrainingSettings& t, const PlatformParams& p);
std::vector<CollectiveRecord> collective_diagnostics(const Model& m, const Strategy& s, const System& sys,
                                                     const TrainingSettings& t, const PlatformParams& p);

// Predicted kernel time of one GEMM (batch, m x k @ k x n), µs, without launch overhead: what a profiler's
// matrix_operator_latency.csv reports.
double predict_gemm_us(const System& sys, Precision dtype, const PlatformParams& p, double batch, double m, double n,
                       double k);

// Activation bytes of one transformer layer for one micro-batch on one rank (the generalised
// Korthikanti et al. 2022 formula; see execution.hpp). Exposed for tests and docs.
struct LayerActivation {
  double stored_bytes;  // kept from forward to backward
  double live_bytes;    // extra bytes alive while this layer's backward runs (recomputed activations)
};
LayerActivation layer_activation(const Model& m, const Strategy& s, const TrainingSettings& t, const PlatformParams& p,
                                 bool moe_layer);

}  // namespace lmsim
