#include "apps/emit.hpp"

#include <spdlog/spdlog.h>

#include "io/error.hpp"
#include "io/specs.hpp"

namespace lmsim::app {

namespace {
std::string n(std::int64_t v) { return std::to_string(v); }
const char* b(bool v) { return v ? "true" : "false"; }
// The distributed optimizer as the flags name it: the strategy's, or because FP8 parameters need it (over one-rank
// data-parallel groups, where it shards nothing).
bool names_distributed_optimizer(const ResolvedStrategy& r) { return r.distributed_optimizer || r.fp8_param_gather; }
// Said where only MindSpeed-LLM has the flag.
constexpr const char* kReuseFp32Param =
    "BF16 parameters kept inside their fp32 master copy (MindSpeed-LLM's --reuse-fp32-param)";
// Adam's moments in bf16 beside the fp32 master copy: Megatron-core's precision-aware optimizer (Transformer Engine's
// FusedAdam); MindSpeed-LLM and NeMo 2's overrides are not known here to name it.
constexpr const char* kBf16AdamMomentsFlags =
    "--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16";
constexpr const char* kBf16AdamMoments =
    "Adam's moments in bf16 beside the fp32 master copy (Megatron-core's "
    "--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16)";
// What the Megatron-LM of the published A100 runs did and no framework of today can be told to (so said, never
// emitted): its synchronous backward TP all-reduce (Megatron-LM ignored --no-async-tensor-model-parallel-allreduce
// from April 2024 and removed it in January 2026, 639c08ab82) and its pipeline scatter/gather (Narayanan et al.
// 2021 §4.1, gone when the pipeline moved into Megatron-core in March 2023).
// Nor can they be told to run PyTorch's own norms (but MindSpeed-LLM, whose fused RMSNorm is opt-in) or keep Adam's
// state in 16 bits without a master copy.
void say_unsettable(bool mindspeed, const Strategy& s, const TrainingSettings& t, const ResolvedStrategy& r,
                    EmittedFlags& e) {
  if (!t.fused_norm && !mindspeed)
    e.unsaid.push_back(
        "unfused (PyTorch) norms, which keep an fp32 copy of their input (Transformer Engine's and "
        "Apex's are fused)");
  if (t.bf16_optimizer_state)
    e.unsaid.push_back("Adam's state in 16 bits without a master copy (NeMo 1.x optim.dtype bf16)");
  if (r.synchronous_tp_allreduce)
    e.unsaid.push_back("the synchronous backward TP all-reduce (Megatron-core always overlaps it)");
  if (t.lora())
    e.unsaid.push_back("LoRA fine-tuning, rank " + std::to_string(t.lora_rank) +
                       " (Megatron-LM has no flag for it; Megatron-Bridge's fine-tuning recipes take peft=lora with "
                       "its dim and target_modules)");
  if (t.document_tokens > 0 && t.document_tokens < t.seq_length)
    e.unsaid.push_back("documents of " + std::to_string(t.document_tokens) +
                       " tokens packed into each sequence, attention within each (a property of the dataset and its "
                       "packing: Megatron-Bridge's packed sequence specs, Megatron-core's packed_seq_params)");
  if (t.pipeline_scatter_gather && !r.sequence_parallel && s.tensor_parallel > 1 && s.pipeline_parallel > 1)
    e.unsaid.push_back(
        "the pipeline's scatter/gather of stage-boundary tensors over the TP ranks (Megatron-core sends the whole "
        "tensor from every TP rank; --set pipeline_scatter_gather=false times that)");
}

// Megatron-LM's (and MindSpeed-LLM's, which takes Megatron's flags and adds its own) command line.
EmittedFlags megatron_flags(bool mindspeed, const Model& m, const Strategy& s, const TrainingSettings& t,
                            const ResolvedStrategy& r, const std::optional<PipelineSplit>& split) {
  EmittedFlags e;
  auto add = [&](const std::string& f) { e.flags += (e.flags.empty() ? "" : " ") + f; };
  add("--tensor-model-parallel-size " + n(s.tensor_parallel));
  add("--pipeline-model-parallel-size " + n(s.pipeline_parallel));
  add("--context-parallel-size " + n(s.context_parallel));
  if (s.context_parallel > 1) {
    add(mindspeed ? std::string("--context-parallel-algo ") + io::mindspeed_cp_algo(r.cp_comm_type)
                  : std::string("--cp-comm-type ") + to_string(r.cp_comm_type));
    if (r.cp_comm_type == CpCommType::a2a_p2p && r.ulysses_degree_in_cp > 0)
      add(mindspeed ? "--ulysses-degree-in-cp " + n(r.ulysses_degree_in_cp)
                    : "--hierarchical-context-parallel-sizes " + n(r.ulysses_degree_in_cp) + " " +
                          n(s.context_parallel / r.ulysses_degree_in_cp));
  }
  if (s.expert_parallel > 1) add("--expert-model-parallel-size " + n(s.expert_parallel));
  if (s.expert_tensor_parallel > 0) add("--expert-tensor-parallel-size " + n(s.expert_tensor_parallel));
  // Megatron-core's default dispatcher is allgather, lmsim's alltoall (every published recipe's): always said.
  if (m.is_moe()) add(std::string("--moe-token-dispatcher-type ") + to_string(t.moe_token_dispatcher_type));
  // flex: lmsim models DeepEP's deduplicating kernels, Megatron-core's default backend (HybridEP, GB200's, sends
  // the same way).
  if (m.is_moe() && t.moe_token_dispatcher_type == MoeDispatcher::flex) add("--moe-flex-dispatcher-backend deepep");
  if (m.is_moe() && t.moe_expert_capacity_factor > 0)
    add("--moe-expert-capacity-factor " + fmt::format("{:g}", t.moe_expert_capacity_factor) +
        (t.moe_pad_expert_input_to_capacity ? " --moe-pad-expert-input-to-capacity" : ""));
  // lmsim times the experts as Transformer Engine's GroupedLinear; Megatron-core's default is one MLP per expert.
  if (m.is_moe()) add("--moe-grouped-gemm");
  if (s.virtual_pipeline > 1 && split && split->kind == SplitKind::even)
    add("--num-layers-per-virtual-pipeline-stage " + n(m.num_layers / (s.pipeline_parallel * s.virtual_pipeline)));
  else if (s.virtual_pipeline > 1)
    add("--num-virtual-stages-per-pipeline-rank " + n(s.virtual_pipeline));
  if (s.virtual_pipeline > 1 && t.microbatch_group_size_per_vp_stage > 0)
    add("--microbatch-group-size-per-virtual-pipeline-stage " + n(t.microbatch_group_size_per_vp_stage));
  if (split && split->kind == SplitKind::embedding_loss)
    add("--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split");
  if (split && split->kind == SplitKind::explicit_layers)
    add("--decoder-first-pipeline-num-layers " + n(split->first) + " --decoder-last-pipeline-num-layers " +
        n(split->last));
  if (r.sequence_parallel) add("--sequence-parallel");
  if (s.recompute == Recompute::full)
    add(std::string("--recompute-granularity full --recompute-method ") + to_string(s.recompute_method) +
        " --recompute-num-layers " + n(std::max(1, s.recompute_num_layers)));
  if (r.distribute_saved_activations) add("--distribute-saved-activations");
  if (s.recompute == Recompute::selective) {
    add("--recompute-granularity selective");
    if (t.recompute_modules != module_bit(RecomputeModule::core_attn)) {
      std::string mods;
      for (const std::string& name : io::recompute_module_names(t)) mods += " " + name;
      add("--recompute-modules" + mods);
    }
  }
  if (r.fsdp)
    add("--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params");
  else if (names_distributed_optimizer(r))
    add("--use-distributed-optimizer");
  // Megatron-LM's argument check takes --overlap-param-gather only beside --overlap-grad-reduce; without a
  // data-parallel group neither has anything to overlap.
  const bool dp_group = r.data_parallel_group, grad_overlap = t.overlap_grad_reduce && dp_group;
  if (grad_overlap) add("--overlap-grad-reduce");
  if (t.overlap_param_gather && r.distributed_optimizer && dp_group) {
    if (grad_overlap)
      add("--overlap-param-gather");
    else
      e.unsaid.push_back(
          "the parameter all-gather overlapped while the gradient reduction is not (Megatron-LM "
          "takes --overlap-param-gather only with --overlap-grad-reduce)");
  }
  if (t.nccl_ub) add("--use-nccl-ub");
  if (t.tp_comm_overlap && r.sequence_parallel) add("--tp-comm-overlap");
  say_unsettable(mindspeed, s, t, r, e);
  // The interleaved schedule overlaps its sends by default since October 2023 (4eeff55d1f), which took the
  // --overlap-p2p-communication of May 2023 away: only turning it off is a flag.
  if (!t.overlap_p2p_comm && s.virtual_pipeline > 1) add("--no-overlap-p2p-communication");
  // The batch-level EP overlap as Megatron-Bridge's performance scripts run it (utils/overrides.py): with the
  // weight-gradient GEMMs delayed, which Megatron-core's MoE guide pairs with it.
  if (r.moe_a2a_overlap) add("--overlap-moe-expert-parallel-comm --delay-wgrad-compute");
  // Megatron-LM's attention and hidden dropout default to 0.1 (TransformerConfig): a run without is said.
  if (!t.attention_dropout) add("--attention-dropout 0.0");
  if (!t.hidden_dropout) add("--hidden-dropout 0.0");
  // Megatron-LM's argument check refuses Transformer Engine's cross entropy since June 2026 (168cb15d70, for its
  // stability); Megatron-Bridge and NeMo set it on the model's configuration, which only warns.
  if (t.te_cross_entropy)
    e.unsaid.push_back(
        "Transformer Engine's fused cross entropy (--cross-entropy-loss-fusion --cross-entropy-fusion-impl te, "
        "which Megatron-LM refuses since June 2026; without it the loss runs as Megatron's own chain of ops, as "
        "predict --set te_cross_entropy=false times it)");
  if (t.precision == Precision::fp8) add("--bf16 --fp8-format hybrid");
  if (t.precision == Precision::fp8 && t.fp8_recipe != Fp8Recipe::delayed)  // Megatron's default is delayed
    add(std::string("--fp8-recipe ") + to_string(t.fp8_recipe));
  if (t.precision == Precision::fp4) add("--bf16 --fp4-format e2m1 --fp4-recipe nvfp4");
  if (r.fp8_param_gather) add(t.precision == Precision::fp4 ? "--fp4-param-gather" : "--fp8-param-gather");
  if (t.reduces_amax_over_tp_only()) add("--tp-only-amax-red");
  if (t.runs_bf16_ends())
    add("--first-last-layers-bf16 --num-layers-at-start-in-bf16 " + n(t.num_layers_at_start_in_bf16) +
        " --num-layers-at-end-in-bf16 " + n(t.num_layers_at_end_in_bf16));
  if (t.precision == Precision::bf16) add("--bf16");
  if (t.precision == Precision::fp16) add("--fp16");
  if (t.fp32_gradients) add("--accumulate-allreduce-grads-in-fp32");
  if (!t.gradient_accumulation_fusion) add("--no-gradient-accumulation-fusion");
  const bool flash = t.flash_in(s.context_parallel);
  // Unfused kernels: each fusion Megatron-LM has a switch for, off (the stored-scores softmax's only without flash).
  if (!t.fused_kernels) add("--no-bias-gelu-fusion --no-bias-swiglu-fusion --no-bias-dropout-fusion --no-rope-fusion");
  if ((!t.masked_softmax_fusion || !t.fused_kernels) && !flash) add("--no-masked-softmax-fusion");
  // Megatron-core's attention backend defaults to auto (Transformer Engine picks cuDNN's fused kernel on Hopper and
  // later): said either way, fused or flash (FlashAttention-2); attention over stored s x s scores is its unfused
  // backend. MindSpeed-LLM's flash attention is off unless asked for.
  if (flash)
    add(mindspeed ? std::string("--use-flash-attn")
                  : std::string("--attention-backend ") + to_string(t.attention_backend));
  if (mindspeed && t.fused_norm && m.norm == Norm::rmsnorm) add("--use-fused-rmsnorm");  // MindSpeed's, opt-in
  // MindSpeed's fused SwiGLU and rotary kernels are opt-in too (its argument check takes them only with --swiglu
  // and --position-embedding-type rope), as MindSpeed-LLM's recipes pass them.
  if (mindspeed && t.fused_kernels && m.activation == Activation::swiglu) add("--use-fused-swiglu");
  if (mindspeed && t.fused_kernels && m.is_rotary()) add("--use-fused-rotary-pos-emb");
  if (!flash && !mindspeed) add("--attention-backend unfused");
  if (mindspeed && s.context_parallel > 1 && r.cp_comm_type == CpCommType::a2a && t.kv_head_repeat_before_uly_alltoall)
    add("--kv-head-repeat-before-uly-alltoall");
  if (t.reuse_fp32_param && mindspeed) add("--reuse-fp32-param");
  if (t.reuse_fp32_param && !mindspeed) e.unsaid.push_back(kReuseFp32Param);
  if (t.bf16_adam_moments && !mindspeed) add(kBf16AdamMomentsFlags);
  if (t.bf16_adam_moments && mindspeed) e.unsaid.push_back(kBf16AdamMoments);
  add("--micro-batch-size " + n(r.micro_batch_size));
  add("--global-batch-size " + n(t.global_batch_size));
  add("--seq-length " + n(t.seq_length));
  return e;
}

// A recipe's overrides: NeMo 2's (NeMo-Run: trainer.strategy.*, model.config.*) or Megatron-Bridge's (trailing
// KEY=VALUE overrides of its ConfigContainer, as scripts/training/run_recipe.py takes them: model.*, train.*,
// dataset.*, ddp.*, optimizer.*, comm_overlap.*, mixed_precision).
EmittedFlags recipe_overrides(bool bridge, const Model& m, const Strategy& s, const TrainingSettings& t,
                              const ResolvedStrategy& r, const std::optional<PipelineSplit>& split) {
  EmittedFlags e;
  auto add = [&](const std::string& f) { e.flags += (e.flags.empty() ? "" : " ") + f; };
  const std::string par = bridge ? "model." : "trainer.strategy.";  // parallel sizes
  const std::string cfg = bridge ? "model." : "model.config.";      // the transformer's configuration
  // NeMo 2's MegatronStrategy copies its parallelism fields (the sizes, the split, the micro-batch grouping) over the
  // model configuration's at setup (nemo/lightning/_strategy_lib.py, set_model_parallel_attributes): they are the
  // strategy's to say, or the model's are overwritten with the strategy's defaults.
  add(par + "tensor_model_parallel_size=" + n(s.tensor_parallel));
  add(par + "pipeline_model_parallel_size=" + n(s.pipeline_parallel));
  add(par +
      "virtual_pipeline_model_parallel_size=" + (s.virtual_pipeline > 1 ? n(s.virtual_pipeline) : std::string("null")));
  add(par + "context_parallel_size=" + n(s.context_parallel));
  if (s.virtual_pipeline > 1 && t.microbatch_group_size_per_vp_stage > 0)
    add(par + "microbatch_group_size_per_vp_stage=" + n(t.microbatch_group_size_per_vp_stage));
  if (s.context_parallel > 1) add(cfg + "cp_comm_type=" + to_string(r.cp_comm_type));
  if (s.context_parallel > 1 && r.cp_comm_type == CpCommType::a2a_p2p && r.ulysses_degree_in_cp > 0)
    add(cfg + "hierarchical_context_parallel_sizes=[" + n(r.ulysses_degree_in_cp) + "," +
        n(s.context_parallel / r.ulysses_degree_in_cp) + "]");
  add(par + "expert_model_parallel_size=" + n(s.expert_parallel));
  if (s.expert_tensor_parallel > 0) add(par + "expert_tensor_parallel_size=" + n(s.expert_tensor_parallel));
  if (m.is_moe()) add(cfg + "moe_token_dispatcher_type=" + to_string(t.moe_token_dispatcher_type));
  if (m.is_moe() && t.moe_token_dispatcher_type == MoeDispatcher::flex) add(cfg + "moe_flex_dispatcher_backend=deepep");
  if (m.is_moe() && t.moe_expert_capacity_factor > 0)
    add(cfg + "moe_expert_capacity_factor=" + fmt::format("{:g}", t.moe_expert_capacity_factor) + " " + cfg +
        "moe_pad_expert_input_to_capacity=" + b(t.moe_pad_expert_input_to_capacity));
  if (m.is_moe()) add(cfg + "moe_grouped_gemm=true");
  add(par + "sequence_parallel=" + b(r.sequence_parallel));
  if (split && split->kind == SplitKind::embedding_loss)
    add(par + "account_for_embedding_in_pipeline_split=true " + par + "account_for_loss_in_pipeline_split=true");
  if (split && split->kind == SplitKind::explicit_layers)
    add(par + "num_layers_in_first_pipeline_stage=" + n(split->first) + " " + par +
        "num_layers_in_last_pipeline_stage=" + n(split->last));
  if (s.recompute == Recompute::full)
    add(cfg + "recompute_granularity=full " + cfg + "recompute_method=" + to_string(s.recompute_method) + " " + cfg +
        "recompute_num_layers=" + n(std::max(1, s.recompute_num_layers)));
  if (r.distribute_saved_activations) add(cfg + "distribute_saved_activations=true");
  if (t.reduces_amax_over_tp_only()) add(cfg + "tp_only_amax_red=true");
  if (s.recompute == Recompute::selective) {
    add(cfg + "recompute_granularity=selective");
    if (t.recompute_modules != module_bit(RecomputeModule::core_attn)) {
      std::string mods;
      for (const std::string& name : io::recompute_module_names(t)) mods += (mods.empty() ? "" : ",") + name;
      add(cfg + "recompute_modules=[" + mods + "]");
    }
  }
  say_unsettable(false, s, t, r, e);
  // Dropout: the recipes' model configurations differ (the Llama ones 0, GPT-3's Megatron-core's 0.1), so it is said
  // either way, at Megatron-core's rate when on (the rate does not change what lmsim times).
  const auto rate = [](bool on) { return on ? "0.1" : "0.0"; };
  add(cfg + "attention_dropout=" + rate(t.attention_dropout) + " " + cfg + "hidden_dropout=" + rate(t.hidden_dropout));
  if (!t.fused_kernels)
    add(cfg + "bias_activation_fusion=false " + cfg + "bias_dropout_fusion=false " + cfg + "apply_rope_fusion=false");
  if ((!t.masked_softmax_fusion || !t.fused_kernels) && !t.flash_in(s.context_parallel))
    add(cfg + "masked_softmax_fusion=false");
  if (!t.flash_in(s.context_parallel))
    e.unsaid.push_back(
        "attention over stored s x s scores, without flash attention (the recipes leave "
        "attention_backend to Transformer Engine, which picks a fused kernel; an AttnBackend, "
        "set it to unfused in the recipe)");
  else if (t.attention_backend == AttentionBackend::flash)
    e.unsaid.push_back(
        "FlashAttention-2 as the flash kernel (the recipes leave attention_backend to Transformer Engine, which "
        "picks cuDNN's fused kernel on Hopper and later; NVTE_FUSED_ATTN=0 in the executor's env_vars gives "
        "FlashAttention, as NeMo's 2024 launcher had it)");
  if (t.reuse_fp32_param) e.unsaid.push_back(kReuseFp32Param);
  if (!bridge) {
    if (t.bf16_adam_moments) e.unsaid.push_back(kBf16AdamMoments);
    if (r.fsdp) e.unsaid.push_back("fully sharded data parallelism (Megatron-FSDP)");
    if (r.moe_a2a_overlap)
      e.unsaid.push_back(
          "the batch-level EP all-to-all overlap (Megatron-core's overlap_moe_expert_parallel_comm, "
          "which NeMo 2's sources do not name)");
    add(std::string("optim.config.use_distributed_optimizer=") + b(names_distributed_optimizer(r)));
    if (t.nccl_ub) add("trainer.strategy.ddp.nccl_ub=true");
    // NeMo 2 runs TP overlap through its MegatronCommOverlapCallback, which sets up the userbuffers and writes its
    // own tp_comm_overlap (off unless the callback was built with it) over the model configuration's.
    if (t.tp_comm_overlap && r.sequence_parallel)
      e.unsaid.push_back(
          "TP communication overlap (NeMo 2 takes it from the recipe's "
          "MegatronCommOverlapCallback(tp_comm_overlap=True), which overwrites "
          "model.config.tp_comm_overlap)");
    if (t.te_cross_entropy)
      add("model.config.cross_entropy_loss_fusion=true model.config.cross_entropy_fusion_impl=te");
    if (t.precision == Precision::fp8) add("trainer.plugins.fp8=hybrid");
    if (t.precision == Precision::fp4)
      e.unsaid.push_back(
          "NVFP4 linear layers (precision fp4: lmsim names no NeMo 2 precision-plugin key for them; Megatron-LM's "
          "--fp4-format e2m1 and Megatron-Bridge's bf16_with_nvfp4_mixed set them)");
    if (t.precision == Precision::fp8 && t.fp8_recipe != Fp8Recipe::delayed)
      add(std::string("trainer.plugins.fp8_recipe=") + to_string(t.fp8_recipe));
    if (t.runs_bf16_ends())
      add("trainer.plugins.first_last_layers_bf16=true trainer.plugins.num_layers_at_start_in_bf16=" +
          n(t.num_layers_at_start_in_bf16) +
          " trainer.plugins.num_layers_at_end_in_bf16=" + n(t.num_layers_at_end_in_bf16));
    add("data.micro_batch_size=" + n(r.micro_batch_size));
    add("data.global_batch_size=" + n(t.global_batch_size));
    add("data.seq_length=" + n(t.seq_length));
    return e;
  }
  // Megatron-Bridge: the distributed optimizer is named to both the DDP wrapper and the optimizer, as its recipes
  // do (Megatron-FSDP requires it); FSDP as its performance scripts' Megatron-FSDP override sets it.
  const bool dist_opt = names_distributed_optimizer(r) || r.fsdp;
  if (r.fsdp) add("ddp.use_megatron_fsdp=true ddp.data_parallel_sharding_strategy=optim_grads_params");
  add(std::string("ddp.use_distributed_optimizer=") + b(dist_opt) +
      " optimizer.use_distributed_optimizer=" + b(dist_opt));
  if (t.nccl_ub) add("ddp.nccl_ub=true");
  // Bridge's overrides turn a dtype's name into the torch.dtype the field holds (omegaconf_utils, str_to_dtype).
  if (t.bf16_adam_moments)
    add("optimizer.use_precision_aware_optimizer=true optimizer.exp_avg_dtype=bf16 optimizer.exp_avg_sq_dtype=bf16");
  // The recipe's CommOverlapConfig decides the overlaps at setup (training/comm_overlap.py: TP overlap as given,
  // p2p overlap whenever vp > 1, DP overlap whenever dp > 1 under the distributed optimizer) unless its own fields
  // say otherwise, so they are said there; comm_overlap.* needs a recipe that sets one (every H100 / B200 one does).
  const bool dp_overlap = t.overlap_grad_reduce && r.data_parallel_group;
  add(std::string("comm_overlap.tp_comm_overlap=") + b(t.tp_comm_overlap && r.sequence_parallel));
  if (s.pipeline_parallel > 1)
    add(std::string("comm_overlap.overlap_p2p_comm=") + b(t.overlap_p2p_comm && s.virtual_pipeline > 1));
  if (dist_opt)
    add(std::string("comm_overlap.overlap_grad_reduce=") + b(dp_overlap) +
        " comm_overlap.overlap_param_gather=" + b(t.overlap_param_gather));
  else
    add(std::string("ddp.overlap_grad_reduce=") + b(dp_overlap));
  if (r.moe_a2a_overlap)
    add("comm_overlap.overlap_moe_expert_parallel_comm=true comm_overlap.delay_wgrad_compute=true");
  if (t.te_cross_entropy) add("model.cross_entropy_loss_fusion=true model.cross_entropy_fusion_impl=te");
  if (!t.gradient_accumulation_fusion) add("model.gradient_accumulation_fusion=false");
  // Precision is a registered MixedPrecisionConfig recipe (training/mixed_precision.py); it also sets the
  // gradient-reduction dtype and FP8 parameter gather, which a recipe name cannot change (a mixed_precision given
  // by name takes no nested overrides): where lmsim simulated otherwise, that is said.
  const bool fp16 = t.precision == Precision::fp16;
  const bool fp8 = t.precision == Precision::fp8;
  const char* const fp8_mp[kNumFp8Recipes] = {"bf16_with_fp8_delayed_scaling_mixed",
                                              "bf16_with_fp8_current_scaling_mixed", "bf16_with_mxfp8_mixed",
                                              "bf16_with_fp8_subchannel_scaling_mixed"};
  const bool fp4 = t.precision == Precision::fp4;
  const std::string mp = fp8    ? fp8_mp[static_cast<int>(t.fp8_recipe)]
                         : fp4  ? "bf16_with_nvfp4_mixed"
                         : fp16 ? "fp16_mixed"
                                : "bf16_mixed";
  add("mixed_precision=" + mp);
  // The current-scaling recipe runs one layer at each end in BF16 (Bridge's performance scripts turn it off,
  // precision.py); the others run every layer in FP8 (FP4).
  const bool recipe_ends = fp8 && t.fp8_recipe == Fp8Recipe::tensorwise;
  const std::int64_t start = t.bf16_layers_at_start(), end = t.bf16_layers_at_end();
  if ((fp8 || fp4) && (recipe_ends ? start != 1 || end != 1 : start + end > 0))
    e.unsaid.push_back((start + end > 0 ? n(start) + " layer(s) at the start and " + n(end) + " at the end in BF16"
                                        : std::string("every layer in ") + (fp4 ? "FP4" : "FP8")) +
                       " (" + mp +
                       (recipe_ends ? " runs one layer at each end in BF16"
                                    : std::string(" runs every layer in ") + (fp4 ? "FP4" : "FP8")) +
                       "; a recipe whose mixed_precision is a MixedPrecisionConfig takes "
                       "mixed_precision.first_last_layers_bf16=" +
                       b(start + end > 0) +
                       (start + end > 0 ? " mixed_precision.num_layers_at_start_in_bf16=" + n(start) +
                                              " mixed_precision.num_layers_at_end_in_bf16=" + n(end)
                                        : std::string(", as Megatron-Bridge's performance scripts set it")) +
                       ")");
  const bool recipe_fp32_reduce = !fp16;  // the FP8 recipe also gathers FP8 parameters in 8 bits
  if (t.fp32_gradients != recipe_fp32_reduce)
    e.unsaid.push_back(std::string(t.fp32_gradients ? "fp32" : "16-bit") + " gradient reduction (" + mp +
                       " sets grad_reduce_in_fp32=" + b(recipe_fp32_reduce) + "; a recipe whose mixed_precision is a " +
                       "MixedPrecisionConfig takes mixed_precision.grad_reduce_in_fp32=" + b(t.fp32_gradients) + ")");
  const bool recipe_fp8_params = t.fp8_recipe != Fp8Recipe::blockwise;  // the subchannel recipe gathers 16-bit ones
  if (fp8 && r.fp8_param_gather != recipe_fp8_params)
    e.unsaid.push_back(std::string("FP8 parameters gathered in ") + (r.fp8_param_gather ? "8" : "16") + " bits (" + mp +
                       " sets fp8_param_gather=" + b(recipe_fp8_params) +
                       "; a recipe whose mixed_precision is a MixedPrecisionConfig takes "
                       "mixed_precision.fp8_param_gather=" +
                       b(r.fp8_param_gather) + ")");
  if (fp4 && !r.fp8_param_gather)  // the NVFP4 recipe gathers FP4 parameters
    e.unsaid.push_back(std::string("FP4 parameters gathered in 16 bits (") + mp +
                       " sets fp4_param_gather=true; a recipe whose mixed_precision is a MixedPrecisionConfig takes "
                       "mixed_precision.fp4_param_gather=false)");
  add("train.micro_batch_size=" + n(r.micro_batch_size));
  add("train.global_batch_size=" + n(t.global_batch_size));
  add("dataset.seq_length=" + n(t.seq_length));
  return e;
}
}  // namespace

EmittedFlags emit_flags(const std::string& framework, const Model& m, const System& sys, const Strategy& s,
                        const TrainingSettings& t, bool allow_uneven_layers) {
  const ResolvedStrategy r = resolve(s, t);
  const auto split = pipeline_split(m, s, allow_uneven_layers);
  const bool megatron = framework == "megatron" || framework == "mindspeed";
  if (megatron || framework == "nemo" || framework == "megatron-bridge") {
    EmittedFlags e = megatron ? megatron_flags(framework == "mindspeed", m, s, t, r, split)
                              : recipe_overrides(framework == "megatron-bridge", m, s, t, r, split);
    // NVLS is NCCL's environment, not a flag: said where it differs from what the framework's launch gives (NCCL's
    // default, on, for a bare Megatron-LM; off in NeMo's and Megatron-Bridge's performance launchers).
    if (sys.nvlink_sharp && megatron && !t.nccl_nvls_enable)
      e.unsaid.push_back("NCCL's NVLS algorithms off (export NCCL_NVLS_ENABLE=0, as NeMo's launchers do)");
    if (sys.nvlink_sharp && !megatron && t.nccl_nvls_enable)
      e.unsaid.push_back(
          "NCCL's NVLS all-reduce (the performance launchers export NCCL_NVLS_ENABLE=0: set it to 1 in the "
          "executor's env_vars)");
    return e;
  }
  std::string known;
  for (const std::string& f : emit_frameworks()) known += (known.empty() ? "" : ", ") + f;
  throw io::InputError("--emit", 0, "", "'" + framework + "' is not one of " + known);
}

void warn_unsaid(const std::string& framework, const EmittedFlags& e) {
  for (const std::string& u : e.unsaid)
    spdlog::warn("--emit {}: lmsim simulated {}, which these flags do not set", framework, u);
}

io::Json emit_json(const std::string& framework, const EmittedFlags& e) {
  return {{"framework", framework}, {"flags", e.flags}, {"unsaid", e.unsaid}};
}

}  // namespace lmsim::app
