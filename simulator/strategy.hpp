// lmsim/simulator/strategy.hpp — the parallel strategy P of x = (M, P, N) and the training settings it runs under.
//
// Owns: parallel degrees and execution options (Megatron-LM spelling), the dataset's configuration names
// (`dp2-tp4-pp1-cp1-RC`, `dp1-tp2-pp2-cp1-ep4-noRC`) and their extended, round-tripping form, and the validity
// rules that say whether a strategy can run a model at all.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "simulator/model.hpp"
#include "simulator/system.hpp"

namespace lmsim {

enum class Recompute { none, selective, full };
const char* to_string(Recompute r);

// Megatron-core `--recompute-method` with `--recompute-granularity full` (TransformerBlock's checkpointed forward,
// megatron/core/recompute.py), per pipeline chunk of n layers with N = `--recompute-num-layers`:
//   uniform  the chunk's layers in consecutive groups of N, each group checkpointed whole: only its input is kept,
//            and the group's forward is replayed at once in backward (N = 1 is the usual "full recompute");
//   block    only the chunk's first N layers are checkpointed, one by one; the other n - N keep every activation
//            and are not replayed: memory traded for time between no recompute and full recompute.
enum class RecomputeMethod : std::uint8_t { uniform, block };
const char* to_string(RecomputeMethod m);

// Megatron-core `--recompute-modules` (with `--recompute-granularity selective`): the submodules whose forward is
// re-run in backward instead of keeping their activations (TransformerConfig.recompute_modules). core_attn, mlp,
// moe and shared_experts checkpoint normally (keep their input); layernorm, moe_act and mla_up_proj discard their
// output once consumed. `none` marks ops outside every module.
enum class RecomputeModule : std::uint8_t {
  core_attn,
  layernorm,
  mlp,
  moe_act,
  moe,
  shared_experts,
  mla_up_proj,
  none
};
constexpr int kNumRecomputeModules = 7;
const char* to_string(RecomputeModule m);
constexpr int kNumRecompute = 3, kNumPrecisions = 4;

// How context parallelism hands the attention its keys and values (Megatron-core --cp-comm-type; MindSpeed-LLM
// --context-parallel-algo). p2p: ring attention, K/V blocks passed around the cp ranks under the attention core
// (Transformer Engine AttnFuncWithCPAndKVP2P; MindSpeed megatron_cp_algo). a2a: DeepSpeed-Ulysses (Jacobs et al.
// 2023), all-to-alls that trade the sequence split for a head split around the attention core (TE
// AttnFuncWithCPAndQKVOA2A; MindSpeed ulysses_cp_algo). allgather: K/V all-gathered before the attention and their
// gradients reduce-scattered after it (TE AttnFuncWithCPAndKVAllGather; MindSpeed kvallgather_cp_algo).
// a2a_p2p ("a2a+p2p"): both, hierarchically: Ulysses over the inner ulysses_degree_in_cp ranks of the cp group, a
// ring over the cp / ulysses_degree_in_cp groups so formed (Megatron-core --hierarchical-context-parallel-sizes;
// MindSpeed hybrid_cp_algo with --ulysses-degree-in-cp).
enum class CpCommType : std::uint8_t { p2p, a2a, allgather, a2a_p2p };
constexpr int kNumCpCommTypes = 4;
const char* to_string(CpCommType c);

// How an MoE layer hands its tokens to the experts (Megatron-core --moe-token-dispatcher-type). alltoall
// (MoEAlltoAllTokenDispatcher): each rank sends its routed tokens over EP to the ranks holding their experts, and
// with SP the expert-TP ranks gather each other's; MindSpeed-LLM's alltoall_seq is the same exchange. allgather
// (MoEAllGatherTokenDispatcher; MindSpeed-LLM's Phi-3.5-MoE recipe): every rank of the expert-TP x EP group
// all-gathers the group's tokens, keeps the rows routed to its local experts, and the experts' outputs are
// reduce-scattered back. flex (MoEFlexTokenDispatcher with DeepEP on H100/B200, HybridEP on GB200; Megatron-Bridge's
// DeepSeek-V3 H100 recipe): one fused dispatch / combine over the expert-TP x EP ranks that sends each token once to
// every rank (and across nodes once to every node) holding one of its experts, forwarding inside the node.
enum class MoeDispatcher : std::uint8_t { alltoall, allgather, flex };
constexpr int kNumMoeDispatchers = 3;
const char* to_string(MoeDispatcher d);

// Which fused attention kernel runs flash attention (Megatron-core --attention-backend, Transformer Engine's
// DotProductAttention backends). fused: cuDNN's fused attention, which TE prefers on Hopper and later (June 2024,
// 43569381c) and which the fitted flash_attention_efficiency describes; flash: TE's FlashAttention backend, Dao's
// FlashAttention-2 in the 2024 containers, also what NVTE_FUSED_ATTN=0 leaves TE (NeMo's launcher exported it from
// February to August 2024) and what the legacy model's --use-flash-attn runs. Its throughput against the fused
// kernel's is the device's (System::flash_attention_2_throughput).
enum class AttentionBackend : std::uint8_t { fused, flash };
constexpr int kNumAttentionBackends = 2;
const char* to_string(AttentionBackend b);

// How FP8 training scales its tensors (Megatron-core --fp8-recipe; Transformer Engine's recipes). delayed
// (DelayedScaling, Megatron's default and NeMo 24.07's): each cast takes its scale from an amax history and records
// the amax in the same kernel; each model chunk's forward and backward end by all-reducing those amaxes over the
// stage's tp·cp·dp ranks (visit_chunk_collectives). tensorwise (Float8CurrentScaling; Megatron-Bridge's fp8_cs
// recipes): each cast first reads its input for the amax, computes the scale, then casts, and the input of a
// column-parallel linear under SP (the gradient of a row-parallel one in backward) all-reduces its amax over the TP
// group first (TE linear.py's amax reduction groups; timed under NCCL's LL, see visit_layer_collectives). mxfp8
// (MXFP8BlockScaling, Blackwell): per-32-element scales computed inside the cast kernel: delayed's cast costs, no amax
// reduction. blockwise (Float8BlockScaling, DeepSeek-V3's scheme, Megatron-Bridge's fp8_sc "subchannel" recipe;
// Hopper or later with CUDA 12.9, any device with FP8 throughput here): fp32 scales per 1x128 tile of activations and
// gradients and per 128x128 block of weights, computed inside the cast kernel (TE's quantize_transpose_*_blockwise):
// also delayed's cast costs and no amax reduction. Its GEMMs run at θ's FP8 efficiency, fitted on per-tensor runs:
// cuBLAS's block-scaled kernel also promotes its partial sums every 128 elements of K in every pass, a cost no
// calibration run measures.
// The two block-scaled recipes move their scales with their data, and an all-gather of a tensor wanted both ways
// (a sequence-parallel output gradient: rowwise for dgrad, columnwise for wgrad) gathers both copies, where a
// per-tensor one gathers the rowwise copy and transposes it (TE distributed.py, _all_gather_mxfp8 and
// _start_all_gather_fp8_blockwise against _all_gather_fp8).
enum class Fp8Recipe : std::uint8_t { delayed, tensorwise, mxfp8, blockwise };
constexpr int kNumFp8Recipes = 4;
const char* to_string(Fp8Recipe r);

// The linear layers LoRA can adapt (Megatron-Bridge's LoRA target_modules, Megatron-core's module names).
enum class LoraTarget : std::uint8_t { linear_qkv, linear_proj, linear_fc1, linear_fc2 };
constexpr int kNumLoraTargets = 4;
const char* to_string(LoraTarget l);
constexpr std::uint8_t lora_bit(LoraTarget l) { return static_cast<std::uint8_t>(1u << static_cast<unsigned>(l)); }
constexpr std::uint8_t kAllLoraTargets = (1u << kNumLoraTargets) - 1;

// The value of an enum (its values 0 .. count-1) whose to_string() is `name`; and the names, comma-separated, for
// messages. Readers of every format parse enum names through these, so a name is spelled in one place.
template <class E>
std::optional<E> from_name(std::string_view name, int count) {
  for (int i = 0; i < count; ++i)
    if (name == to_string(static_cast<E>(i))) return static_cast<E>(i);
  return std::nullopt;
}
template <class E>
std::string names_of(int count) {
  std::string list;
  for (int i = 0; i < count; ++i) list += std::string(i ? ", " : "") + to_string(static_cast<E>(i));
  return list;
}

constexpr std::uint8_t module_bit(RecomputeModule m) {
  return m == RecomputeModule::none ? 0 : static_cast<std::uint8_t>(1u << static_cast<unsigned>(m));
}

// Settings of a training run that are not parallel degrees: what a measured collection was run with.
struct TrainingSettings {
  std::int64_t seq_length = 4096;
  std::int64_t global_batch_size = 32;
  std::int64_t micro_batch_size = 1;
  Precision precision = Precision::bf16;
  bool distributed_optimizer = true;
  bool flash_attention = true;  // false: s x s attention scores are materialised and stored
  // Flash attention in every context-parallel run whatever flash_attention says: MindSpeed-LLM's argument
  // validation turns --use-flash-attn on when context_parallel_size > 1 (its runs without CP keep the setting).
  bool flash_attention_with_cp = false;
  bool flash_in(int context_parallel) const {
    return flash_attention || (context_parallel > 1 && flash_attention_with_cp);
  }
  // Flash attention that only context parallelism brings in: without CP these settings store the scores.
  bool flash_only_through_cp(int context_parallel) const { return !flash_attention && flash_in(context_parallel); }
  bool fused_kernels = true;  // fused norm / rotary / softmax / cross-entropy / bias-activation kernels
  // The stored-scores softmax as one fused scale-mask-softmax kernel (Megatron --masked-softmax-fusion, on by
  // default; MindSpeed-LLM's recipes pass --no-masked-softmax-fusion). Needs fused_kernels; moot under flash.
  bool masked_softmax_fusion = true;
  // A fused RMSNorm / LayerNorm kernel (apex, Transformer Engine, MindSpeed --use-fused-rmsnorm), which keeps only
  // its input. false: the framework's PyTorch norm, which keeps an fp32 copy of its input and its normalised output.
  bool fused_norm = true;
  bool sequence_parallel = false;  // default for tp > 1
  // Dropout at any rate above zero (Megatron --hidden-dropout, --attention-dropout; 0.1 each by default there, 0 in
  // most recipes since). Hidden: the bias-dropout-add after attention and after the MLP, a 1-byte mask kept per
  // element. Attention: on the softmax probabilities, its own kernel over stored scores (what it keeps there is part
  // of θ's attention_score_bytes), or Philox draws inside the flash kernel in each pass, which keep nothing. A
  // settings file's "dropout" sets both (docs/formats.md).
  bool hidden_dropout = false;
  bool attention_dropout = false;
  bool fp32_gradients = true;  // fp32 gradient buffers (Megatron --accumulate-allreduce-grads-in-fp32)
  // Weight-gradient GEMMs accumulate straight into the gradient buffer (Megatron --gradient-accumulation-fusion,
  // APEX / TE fused wgrad). false (--no-gradient-accumulation-fusion, set by MindSpeed-LLM's recipes): each writes a
  // 16-bit gradient that the backward hook then adds into the buffer, per micro-batch.
  bool gradient_accumulation_fusion = true;
  // Adam's two fp32 moments exist. They are created by the first applied optimizer step; false describes a
  // peak recorded before it, e.g. while FP16 dynamic loss scaling (initial scale 2^32) still skips every step.
  bool optimizer_moments_allocated = true;
  // The bf16 parameters double as the top half of their fp32 master copy, which keeps only the 16-bit remainder:
  // 2 bytes per owned parameter less. MindSpeed --reuse-fp32-param; Apex DistributedFusedAdam and TE FusedAdam
  // store_param_remainders (NeMo 1.x sets it for an fp32 optimizer over bf16 parameters). Under FP8 the parameters
  // are bf16 too.
  bool reuse_fp32_param = false;
  // Adam's state in 16 bits: bf16 moments and no separate master copy (the bf16 parameters are updated in place).
  // NeMo 1.x optim.dtype: bf16 with Apex DistributedFusedAdam (NeMo 24.07's Nemotron-4-340B recipe).
  bool bf16_optimizer_state = false;
  // Adam's two moments in bf16 beside an fp32 master copy (Megatron-core --use-precision-aware-optimizer
  // --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16, Transformer Engine's FusedAdam; Megatron-Bridge's DeepSeek-V3
  // recipe): 2 + 2 bytes per owned parameter for the moments, not 4 + 4.
  bool bf16_adam_moments = false;
  // Fully sharded data parallelism (Megatron-FSDP optim_grads_params / ZeRO-3 / torch FSDP2): parameters and
  // gradients are sharded over the data-parallel group like the optimizer state; every micro-batch all-gathers each
  // layer's parameters before its forward and again before its backward and reduce-scatters its gradients.
  bool fsdp = false;
  // Submodules selective recompute re-runs (bits of module_bit); Megatron's default is the attention core.
  std::uint8_t recompute_modules = module_bit(RecomputeModule::core_attn);
  bool recomputes(RecomputeModule m) const { return (recompute_modules & module_bit(m)) != 0; }
  double moe_load_imbalance = 1.0;  // busiest expert's tokens / mean tokens per expert (>= 1)
  // Token dropping (Megatron-core --moe-expert-capacity-factor; 0: dropless, its default): an expert takes at most
  // this many times the mean of the tokens routed to it from each rank, the rest dropped; with
  // moe_pad_expert_input_to_capacity it takes exactly that many (padded), so every shape is static.
  double moe_expert_capacity_factor = 0;
  bool moe_pad_expert_input_to_capacity = false;
  CpCommType cp_comm_type = CpCommType::p2p;  // Megatron-core's default
  // The published recipes' dispatcher; Megatron-core's own default is allgather (emitted flags always name it).
  MoeDispatcher moe_token_dispatcher_type = MoeDispatcher::alltoall;
  AttentionBackend attention_backend = AttentionBackend::fused;  // the flash kernel, where flash attention runs
  Fp8Recipe fp8_recipe = Fp8Recipe::delayed;                     // under precision fp8
  std::int64_t ulysses_degree_in_cp = 0;  // the Ulysses degree of a2a+p2p (MindSpeed's name); 0: unset
  // Interleaved schedule: the micro-batches a virtual stage runs in a row (Megatron-core
  // --microbatch-group-size-per-virtual-pipeline-stage, since November 2024); 0: pipeline_parallel, the default,
  // which needs the micro-batches divisible by pipeline_parallel. A group of N in [p, m] lets any m run whose last
  // group is whole or at least p (schedules.py), at (v - 1)·N warm-up chunks instead of (v - 1)·p.
  std::int64_t microbatch_group_size_per_vp_stage = 0;
  // Under Ulysses, K and V repeated to every query head before the all-to-all (MindSpeed-LLM's
  // --kv-head-repeat-before-uly-alltoall, on by default there); false: only as far as the heads must split cp ways.
  bool kv_head_repeat_before_uly_alltoall = false;
  // Overlap features of the framework (Megatron-LM / NeMo flag names).
  bool tp_comm_overlap = false;  // TE userbuffers: TP all-gather / reduce-scatter pipelined with GEMMs (needs SP)
  // Without SP, the backward all-reduce of a column-parallel linear's input gradient runs while the linear's weight
  // gradient is computed (Megatron-LM --async-tensor-model-parallel-allreduce: opt-in from September 2021, commits
  // 16c90445 / f3e57f6f, the default from February 2022, its switch ignored from April 2024). false: Megatron-LM
  // before it, whose autograd all-reduced the input gradient after the linear's whole backward
  // (_CopyToModelParallelRegion, the code of the SC21 scripts, examples/sc21): exposed.
  bool async_tensor_model_parallel_allreduce = true;
  bool overlap_grad_reduce = true;    // --overlap-grad-reduce: bucketed DP gradient reduction during backward
  bool overlap_param_gather = false;  // --overlap-param-gather: distributed-optimizer all-gather during forward
  // Narayanan et al. 2021 §4.1: without SP each TP rank sends 1/t of a stage's boundary tensor and the receiver
  // all-gathers the slices on NVLink. Megatron-LM's pipeline did so in the published A100 runs (Narayanan 2021,
  // Korthikanti 2022) and until it moved into Megatron-core (March 2023, 3c92fa93), which sends the whole tensor
  // from every TP rank: false for Megatron-core stacks (both bundled ones set it so).
  bool pipeline_scatter_gather = true;
  // Interleaved 1F1B's sends/receives under compute: Megatron-LM's default since October 2023, off with
  // --no-overlap-p2p-communication.
  bool overlap_p2p_comm = false;
  bool overlap_moe_expert_parallel_comm = false;  // batch-level overlap: one micro-batch's EP all-to-all under
                                                  // another's compute (Megatron-core 0.14)
  // Transformer Engine's fused cross entropy (Megatron --cross-entropy-loss-fusion --cross-entropy-fusion-impl te,
  // set by every Megatron-Bridge performance recipe): keeps the 16-bit logits and writes their gradient into them,
  // where Megatron's vocab-parallel cross entropy keeps an fp32 softmax besides.
  bool te_cross_entropy = false;
  // FP8 parameters (Megatron --fp8-param-gather; every Megatron-Bridge FP8 current- and MX-scaling recipe): the
  // linear layers' weights live as FP8 with their transposed (column-wise) copy instead of bf16 plus an FP8
  // workspace, and the distributed optimizer gathers them in 8 bits. Under precision fp4 the same for NVFP4
  // (Megatron --fp4-param-gather; Megatron-Bridge's nvfp4 recipe): 4-bit weights, gathered as their packed rowwise
  // data. Needs precision fp8 or fp4.
  bool fp8_param_gather = false;
  // Full recompute's checkpoints split over the TP ranks (Megatron --distribute-saved-activations): each rank keeps
  // 1/t of every checkpointed input and all-gathers it before the replay. Megatron allows it only with full
  // recompute, TP > 1 and no SP (whose checkpoints are already split); elsewhere it has no effect here.
  bool distribute_saved_activations = false;
  // NCCL user-buffer registration of the gradient and parameter buffers (Megatron-core's DDP `nccl_ub`,
  // --use-nccl-ub; Megatron-Bridge sets it with Megatron-FSDP): the data-parallel collectives run NCCL's
  // SM-efficient zero-copy algorithms, so traffic overlapped with compute takes few of the GPU's SMs from it.
  bool nccl_ub = false;
  // NCCL's NVLink SHARP algorithms (the NCCL_NVLS_ENABLE environment variable; NCCL turns them on by default where
  // the system has NVLink SHARP, System::nvlink_sharp). NeMo's and Megatron-Bridge's performance launchers export
  // NCCL_NVLS_ENABLE=0 to save the memory NVLS buffers take (NeMo-Framework-Launcher conf/config.yaml at 1ab2c781,
  // Megatron-Bridge scripts/performance/utils/executors.py at 5776a6d90), and turn it back on only with NCCL user
  // buffers: their all-reduces then run as rings.
  bool nccl_nvls_enable = true;
  // Delayed FP8 scaling's amax reduction over the TP (and CP) ranks alone (Megatron --tp-only-amax-red), not the
  // stage's whole tp·cp·dp group: a smaller all-reduce per chunk pass (inside the node where tp·cp fits one), at the
  // cost of each data-parallel replica scaling with its own amaxes.
  bool tp_only_amax_red = false;
  // FP8 (or FP4: fp4_utils.get_fp4_context) training with the model's first and last layers in BF16
  // (Megatron-core --first-last-layers-bf16 with
  // --num-layers-at-start-in-bf16 / --num-layers-at-end-in-bf16, 1 each by default; Megatron-Bridge's
  // current-scaling recipes set it, 1 and 1, and its performance scripts turn it off): those layers run outside the
  // FP8 autocast (fp8_utils.is_first_last_bf16_layer, by global layer number: the first stage's first layers and the
  // last stage's last ones), as BF16 layers do. Megatron-core refuses it under delayed scaling and counts above
  // num_layers / pipeline_parallel. MTP modules stay FP8.
  bool first_last_layers_bf16 = false;
  std::int64_t num_layers_at_start_in_bf16 = 1, num_layers_at_end_in_bf16 = 1;
  // Packed sequences: each sequence holds documents of this many tokens (the dataset's mean length) and attention
  // stays inside each, as Megatron-core runs packed sequences (Transformer Engine's THD layout with cu_seqlens;
  // Megatron-Bridge's fine-tuning recipes pack their datasets so) and document masking does; 0: one document a
  // sequence, attending causally over all of it. Needs flash attention (the fused kernel's variable-length form).
  std::int64_t document_tokens = 0;
  // LoRA fine-tuning (Hu et al. 2021, arXiv 2106.09685; Megatron-Bridge's peft LoRA with its `dim` and
  // `target_modules`): the base model is frozen and each targeted linear layer of the dense layers gains a rank-r
  // adapter (x·A·B, A in x r, B r x out) whose output is added to the layer's. Only the adapters have gradients,
  // optimizer state and data-parallel traffic; frozen linear layers run no weight-gradient GEMM and keep no input
  // for one (Transformer Engine saves it only when the weight requires a gradient). 0: full training.
  std::int64_t lora_rank = 0;
  std::uint8_t lora_target_modules = kAllLoraTargets;  // bits of lora_bit; Bridge's default: all four
  bool lora() const { return lora_rank > 0; }
  bool lora_targets(LoraTarget l) const { return lora() && (lora_target_modules & lora_bit(l)) != 0; }
  // The layers at the start / end of the model that run in BF16: the counts under FP8 with first_last_layers_bf16.
  std::int64_t bf16_layers_at_start() const { return runs_bf16_ends() ? num_layers_at_start_in_bf16 : 0; }
  std::int64_t bf16_layers_at_end() const { return runs_bf16_ends() ? num_layers_at_end_in_bf16 : 0; }
  bool runs_bf16_ends() const { return quantizes_linear(precision) && first_last_layers_bf16; }
  // Delayed FP8 scaling's per-chunk amax all-reduce runs (FP8 under the delayed recipe); and over tp·cp alone.
  bool reduces_delayed_amax() const { return precision == Precision::fp8 && fp8_recipe == Fp8Recipe::delayed; }
  bool reduces_amax_over_tp_only() const { return tp_only_amax_red && reduces_delayed_amax(); }
};

// The on/off settings by name (the settings-JSON key and the published-readings column): one table that the
// settings reader and writer, the published-readings reader and the search checkpoint's fingerprint loop over.
struct SettingFlag {
  const char* name;
  bool TrainingSettings::*member;
};
inline constexpr SettingFlag kSettingFlags[] = {
    {"distributed_optimizer", &TrainingSettings::distributed_optimizer},
    {"flash_attention", &TrainingSettings::flash_attention},
    {"flash_attention_with_cp", &TrainingSettings::flash_attention_with_cp},
    {"fused_kernels", &TrainingSettings::fused_kernels},
    {"masked_softmax_fusion", &TrainingSettings::masked_softmax_fusion},
    {"fused_norm", &TrainingSettings::fused_norm},
    {"sequence_parallel", &TrainingSettings::sequence_parallel},
    {"hidden_dropout", &TrainingSettings::hidden_dropout},
    {"attention_dropout", &TrainingSettings::attention_dropout},
    {"fp32_gradients", &TrainingSettings::fp32_gradients},
    {"gradient_accumulation_fusion", &TrainingSettings::gradient_accumulation_fusion},
    {"optimizer_moments_allocated", &TrainingSettings::optimizer_moments_allocated},
    {"reuse_fp32_param", &TrainingSettings::reuse_fp32_param},
    {"bf16_optimizer_state", &TrainingSettings::bf16_optimizer_state},
    {"fsdp", &TrainingSettings::fsdp},
    {"tp_comm_overlap", &TrainingSettings::tp_comm_overlap},
    {"async_tensor_model_parallel_allreduce", &TrainingSettings::async_tensor_model_parallel_allreduce},
    {"overlap_grad_reduce", &TrainingSettings::overlap_grad_reduce},
    {"overlap_param_gather", &TrainingSettings::overlap_param_gather},
    {"pipeline_scatter_gather", &TrainingSettings::pipeline_scatter_gather},
    {"overlap_p2p_comm", &TrainingSettings::overlap_p2p_comm},
    {"overlap_moe_expert_parallel_comm", &TrainingSettings::overlap_moe_expert_parallel_comm},
    {"te_cross_entropy", &TrainingSettings::te_cross_entropy},
    {"fp8_param_gather", &TrainingSettings::fp8_param_gather},
    {"kv_head_repeat_before_uly_alltoall", &TrainingSettings::kv_head_repeat_before_uly_alltoall},
    {"distribute_saved_activations", &TrainingSettings::distribute_saved_activations},
    {"nccl_ub", &TrainingSettings::nccl_ub},
    {"nccl_nvls_enable", &TrainingSettings::nccl_nvls_enable},
    {"moe_pad_expert_input_to_capacity", &TrainingSettings::moe_pad_expert_input_to_capacity},
    {"tp_only_amax_red", &TrainingSettings::tp_only_amax_red},
    {"first_last_layers_bf16", &TrainingSettings::first_last_layers_bf16},
    {"bf16_adam_moments", &TrainingSettings::bf16_adam_moments},
};

// The first contradiction in a set of training settings: the setting to blame (its JSON / readings.csv name) and
// why; nullopt when they are consistent. validate() is its message alone.
struct SettingsProblem {
  std::string field, why;
};
std::optional<SettingsProblem> settings_problem(const TrainingSettings& t);
std::string validate(const TrainingSettings& t);

struct Strategy {
  int data_parallel = 1;
  int tensor_parallel = 1;
  int pipeline_parallel = 1;
  int context_parallel = 1;
  int expert_parallel = 1;
  // Tensor parallelism of the routed experts (Megatron-core --expert-tensor-parallel-size); 0: tensor_parallel.
  // Set apart from it, the experts fold over the tp·cp·dp ranks of a stage (MoE parallel folding): ep·etp ranks
  // hold every expert once, so expert_parallel may span the attention's TP ranks.
  int expert_tensor_parallel = 0;
  int virtual_pipeline = 1;  // model chunks per pipeline rank (interleaved 1F1B when > 1)
  Recompute recompute = Recompute::none;
  // With full recompute: Megatron's --recompute-method and --recompute-num-layers (see RecomputeMethod); 0 is
  // Megatron's default, uniform groups of one layer. Canonical: uniform with 1 is stored as 0.
  RecomputeMethod recompute_method = RecomputeMethod::uniform;
  int recompute_num_layers = 0;
  std::int64_t micro_batch_size = 0;  // 0: from the training settings
  std::optional<bool> sequence_parallel;
  std::optional<bool> distributed_optimizer;
  std::optional<bool> fsdp;                // fully sharded data parallelism (see TrainingSettings::fsdp)
  std::optional<CpCommType> cp_comm_type;  // the context-parallel algorithm (cp > 1; see TrainingSettings)
  int ulysses_degree = 0;  // the Ulysses degree of a2a+p2p (TrainingSettings::ulysses_degree_in_cp); 0: the settings'
  // Transformer layers of the first / last pipeline chunk (Megatron's --decoder-first-pipeline-num-layers /
  // --decoder-last-pipeline-num-layers); 0: chosen by the split rule (see pipeline_split()).
  int first_stage_layers = 0;
  int last_stage_layers = 0;

  // Devices the strategy occupies; 64-bit, so no product of int degrees can overflow.
  std::int64_t devices() const {
    return static_cast<std::int64_t>(data_parallel) * tensor_parallel * pipeline_parallel * context_parallel;
  }
  int expert_tensor() const { return expert_tensor_parallel > 0 ? expert_tensor_parallel : tensor_parallel; }
  // Sets the expert TP degree in canonical form: a degree equal to tensor_parallel (set first) is stored as 0.
  void set_expert_tensor(int etp) { expert_tensor_parallel = etp == tensor_parallel ? 0 : etp; }
  bool operator==(const Strategy&) const = default;
};

// The configuration name: the dataset's form when only dataset fields are set, else with extension tokens
// `-etp<N>` (after `-ep<N>`), `-mbs<N>`, `-vpp<N>`, `-first<N>`, `-last<N>`, `-sp|-nosp`, `-do|-nodo`,
// `-fsdp|-nofsdp`, `-p2p|-a2a|-allgather|-a2a+p2p` (the context-parallel algorithm, with cp > 1), `-uly<N>` (after
// `-a2a+p2p`: its Ulysses degree). Recompute: `RC` full,
// `noRC` none, `selRC` selective; after `RC`, `-block<N>` (N >= 1) or `-uniform<N>` (N >= 2) name the method and
// layer count (the first extension token).
std::string config_name(const Strategy& s);

struct ParseResult {
  std::optional<Strategy> strategy;
  std::string error;  // names the offending token when strategy is empty
};
ParseResult parse_config_name(const std::string& name);
// A strategy as a person types it: the fields of a configuration name in any order, tp, pp and cp 1 where left
// out, the recompute field noRC (Megatron's default) where left out or spelled full|selective|none, and dp, where
// left out, the `devices` (0: none given) over tp·pp·cp. The name it stands for is then read by parse_config_name,
// with its checks and messages. Dataset names are read strictly (parse_config_name): they must say what ran.
ParseResult parse_strategy_spec(const std::string& spec, std::int64_t devices = 0);

// Effective options after applying the settings' defaults.
struct ResolvedStrategy {
  Strategy s;
  std::int64_t micro_batch_size;
  std::int64_t num_micro_batches;  // per pipeline, per iteration
  bool sequence_parallel;
  bool distributed_optimizer;  // the optimizer state is sharded (always under FSDP)
  bool fsdp;
  CpCommType cp_comm_type;
  std::int64_t ulysses_degree_in_cp;  // a2a+p2p's Ulysses degree in effect (0: none given)
  std::int64_t vp_group;              // micro-batches per virtual-stage group: the setting, else pipeline_parallel
  bool distribute_saved_activations;  // in effect: asked for, full recompute, TP > 1 and no SP
  bool synchronous_tp_allreduce;      // in effect: async_tensor_model_parallel_allreduce off, TP > 1 and no SP
  // The batch-level EP overlap in effect: asked for (overlap_moe_expert_parallel_comm) where Megatron-core's
  // TransformerConfig lets it run: EP > 1, the all-to-all or flex dispatcher, no full recompute and no replay of the
  // MoE module, interleaved when pipelined.
  bool moe_a2a_overlap;
  // FP8 parameters (fp8_param_gather) in effect: FP8 training with the optimizer state sharded, as Megatron-LM's
  // argument check requires (the distributed optimizer or FSDP), or over one-rank data-parallel groups, where the
  // distributed optimizer shards nothing (emitted with it).
  bool fp8_param_gather;
  // Transformer Engine's userbuffers TP overlap in effect: asked for (tp_comm_overlap), TP > 1 and SP on.
  bool tp_comm_overlap;
  // Some data-parallel group has more than one rank: the dense parameters' dp·cp or the experts' (see
  // one_rank_data_parallel), so there are gradients to reduce and the DP overlaps have something to hide.
  bool data_parallel_group;
};
ResolvedStrategy resolve(const Strategy& s, const TrainingSettings& t);
// Whether every data-parallel group is one rank: Megatron's dp·cp and, for the experts, tp·cp·dp / (etp·ep). Nothing
// is sharded over them, so the distributed optimizer and FSDP are no-ops there.
constexpr bool one_rank_data_parallel(std::int64_t dp, std::int64_t tp, std::int64_t cp, std::int64_t expert_tp,
                                      std::int64_t ep) {
  return dp * cp == 1 && tp == expert_tp * ep;
}
// The Ulysses (all-to-all) degree inside a cp group: cp under a2a, the inner degree under a2a+p2p, else 1.
constexpr std::int64_t ulysses_degree(CpCommType c, std::int64_t ulysses_degree_in_cp, std::int64_t cp) {
  return c == CpCommType::a2a ? cp : c == CpCommType::a2a_p2p ? ulysses_degree_in_cp : 1;
}
// The Ulysses degrees a2a+p2p can take inside a cp group: above 1 (else it is the ring), below cp (else Ulysses
// alone) and dividing it (the ring runs over the cp / degree parts).
constexpr bool valid_ulysses_degree_in_cp(std::int64_t degree, std::int64_t cp) {
  return degree >= 2 && degree < cp && cp % degree == 0;
}

// Why a strategy cannot run a model; `ok` when it can. Counted per reason by the search.
enum class Rejection {
  ok,
  heads_not_divisible_by_tp,
  kv_heads_not_divisible_by_tp,
  layers_not_divisible_by_pp_vpp,
  sequence_not_divisible_by_cp,
  sequence_not_divisible_by_tp,
  experts_not_divisible_by_ep,
  ep_not_dividing_dp_cp,
  ep_without_experts,
  batch_not_divisible,
  vpp_needs_pipeline,
  tp_crosses_node,
  cp_needs_flash_attention,
  precision_unsupported,
  degree_out_of_range,
  heads_not_divisible_by_tp_cp,
  cp_hierarchy_invalid,
  recompute_layers_invalid,
  flex_dispatcher_unsupported,
  bf16_layers_exceed_stage,
  count_,  // number of reasons
};
const char* to_string(Rejection r);
const char* describe(Rejection r);

struct ValidityOptions {
  int devices_per_node = 8;
  bool allow_cross_node_tp = false;
  bool allow_uneven_layers = false;  // pp may leave stages one layer apart (first stages get the extra layers)
  // Heads / KV heads not divisible by tp are padded up to a multiple of tp (KV heads replicated), as some stacks
  // do; used for measured runs, which evidently ran.
  bool allow_padded_heads = false;
};

Rejection check(const Model& m, const Strategy& s, const TrainingSettings& t, const ValidityOptions& o);
// describe() with the figures of this model, strategy and settings that break its rule ("32 layers over pp 2 x vpp 3
// = 6 chunks; with pp 2, vpp 1, 2, 4, 8 or 16 splits them"), for messages naming one strategy.
std::string explain(Rejection why, const Model& m, const Strategy& s, const TrainingSettings& t,
                    const ValidityOptions& o);

// How the transformer layers (and the multi-token-prediction module) are split over the pp·vpp pipeline chunks,
// in Megatron-LM's rules, first that applies:
//   explicit   first / last chunk sizes given (--decoder-first/last-pipeline-num-layers), the rest even;
//   even       layers divisible by the chunk count (an MTP module rides on the last chunk);
//   embedding_loss  layers + MTP + 2 divisible: the embedding and the loss each take one layer's slot in the first and
//              last chunk (--account-for-embedding-in-pipeline-split, --account-for-loss-in-pipeline-split);
//   uneven     (allow_uneven_layers, no interleaving) the first L mod p stages take one layer more.
enum class SplitKind { even, embedding_loss, explicit_layers, uneven };
const char* to_string(SplitKind k);
struct PipelineSplit {
  SplitKind kind = SplitKind::even;
  std::int64_t chunks = 1;
  std::int64_t first = 0, middle = 0, last = 0;  // transformer layers of the first, middle and last chunks
  std::int64_t layers_of_chunk(std::int64_t c, std::int64_t num_layers) const {
    if (kind == SplitKind::uneven) return num_layers / chunks + (c < num_layers % chunks ? 1 : 0);
    if (chunks == 1) return first;
    return c == 0 ? first : c == chunks - 1 ? last : middle;
  }
  std::int64_t first_layer_of_chunk(std::int64_t c, std::int64_t num_layers) const {
    if (kind == SplitKind::uneven) return c * (num_layers / chunks) + std::min(c, num_layers % chunks);
    return c == 0 ? 0 : first + (c - 1) * middle;
  }
  std::int64_t widest_chunk() const { return std::max({first, middle, last}); }
};
std::optional<PipelineSplit> pipeline_split(const Model& m, const Strategy& s, bool allow_uneven_layers);
// The layer slots of the embedding_loss split: the layers, the MTP modules, the embedding and the loss.
inline std::int64_t embedding_loss_slots(const Model& m) { return m.num_layers + m.mtp_layers + 2; }

}  // namespace lmsim
