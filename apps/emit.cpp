#include "apps/emit.hpp"

#include "io/error.hpp"
#include "io/specs.hpp"

namespace lmsim::app {

namespace {
std::string n(std::int64_t v) { return std::to_string(v); }
}  // namespace

std::string emit_flags(const std::string& framework, const Model& m, const Strategy& s, const TrainingSettings& t,
                       bool allow_uneven_layers) {
  const ResolvedStrategy r = resolve(s, t);
  const auto split = pipeline_split(m, s, allow_uneven_layers);
  std::string out;
  auto add = [&](const std::string& f) { out += (out.empty() ? "" : " ") + f; };
  if (framework == "megatron" || framework == "mindspeed") {
    add("--tensor-model-parallel-size " + n(s.tensor_parallel));
    add("--pipeline-model-parallel-size " + n(s.pipeline_parallel));
    add("--context-parallel-size " + n(s.context_parallel));
    if (s.context_parallel > 1) {
      add(framework == "mindspeed" ? std::string("--context-parallel-algo ") + io::mindspeed_cp_algo(r.cp_comm_type)
                                   : std::string("--cp-comm-type ") + to_string(r.cp_comm_type));
      if (r.cp_comm_type == CpCommType::a2a_p2p && r.ulysses_degree_in_cp > 0)
        add(framework == "mindspeed" ? "--ulysses-degree-in-cp " + n(r.ulysses_degree_in_cp)
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
    else if (r.distributed_optimizer)
      add("--use-distributed-optimizer");
    if (t.overlap_grad_reduce && s.data_parallel * s.context_parallel > 1) add("--overlap-grad-reduce");
    if (t.overlap_param_gather && r.distributed_optimizer) add("--overlap-param-gather");
    if (t.nccl_ub) add("--use-nccl-ub");
    if (t.tp_comm_overlap && r.sequence_parallel) add("--tp-comm-overlap");
    // Megatron-LM's switch from February 2022 (a synchronous all-reduce, as the SC21 runs had); ignored from April
    // 2024, whose backward always overlaps.
    if (r.synchronous_tp_allreduce) add("--no-async-tensor-model-parallel-allreduce");
    if (t.overlap_p2p_comm && s.virtual_pipeline > 1) add("--overlap-p2p-communication");
    if (t.overlap_moe_expert_parallel_comm) add("--overlap-moe-expert-parallel-comm");
    if (t.te_cross_entropy) add("--cross-entropy-loss-fusion --cross-entropy-fusion-impl te");
    if (t.precision == Precision::fp8) add("--bf16 --fp8-format hybrid");
    if (t.fp8_param_gather) add("--fp8-param-gather");
    if (t.precision == Precision::bf16) add("--bf16");
    if (t.precision == Precision::fp16) add("--fp16");
    if (t.fp32_gradients) add("--accumulate-allreduce-grads-in-fp32");
    if (!t.gradient_accumulation_fusion) add("--no-gradient-accumulation-fusion");
    const bool flash = t.flash_in(s.context_parallel);
    if (!t.masked_softmax_fusion && !flash) add("--no-masked-softmax-fusion");
    if (flash) add(framework == "mindspeed" ? "--use-flash-attn" : "--attention-backend flash");
    if (framework == "mindspeed" && s.context_parallel > 1 && r.cp_comm_type == CpCommType::a2a &&
        t.kv_head_repeat_before_uly_alltoall)
      add("--kv-head-repeat-before-uly-alltoall");
    if (t.reuse_fp32_param && framework == "mindspeed") add("--reuse-fp32-param");
    add("--micro-batch-size " + n(r.micro_batch_size));
    add("--global-batch-size " + n(t.global_batch_size));
    add("--seq-length " + n(t.seq_length));
    return out;
  }
  if (framework == "nemo") {
    add("trainer.strategy.tensor_model_parallel_size=" + n(s.tensor_parallel));
    add("trainer.strategy.pipeline_model_parallel_size=" + n(s.pipeline_parallel));
    add("trainer.strategy.virtual_pipeline_model_parallel_size=" +
        (s.virtual_pipeline > 1 ? n(s.virtual_pipeline) : std::string("null")));
    add("trainer.strategy.context_parallel_size=" + n(s.context_parallel));
    if (s.virtual_pipeline > 1 && t.microbatch_group_size_per_vp_stage > 0)
      add("model.config.microbatch_group_size_per_vp_stage=" + n(t.microbatch_group_size_per_vp_stage));
    if (s.context_parallel > 1) add(std::string("model.config.cp_comm_type=") + to_string(r.cp_comm_type));
    if (s.context_parallel > 1 && r.cp_comm_type == CpCommType::a2a_p2p && r.ulysses_degree_in_cp > 0)
      add("model.config.hierarchical_context_parallel_sizes=[" + n(r.ulysses_degree_in_cp) + "," +
          n(s.context_parallel / r.ulysses_degree_in_cp) + "]");
    add("trainer.strategy.expert_model_parallel_size=" + n(s.expert_parallel));
    if (s.expert_tensor_parallel > 0)
      add("trainer.strategy.expert_tensor_parallel_size=" + n(s.expert_tensor_parallel));
    if (m.is_moe())
      add(std::string("model.config.moe_token_dispatcher_type=") + to_string(t.moe_token_dispatcher_type));
    if (m.is_moe() && t.moe_token_dispatcher_type == MoeDispatcher::flex)
      add("model.config.moe_flex_dispatcher_backend=deepep");
    add(std::string("trainer.strategy.sequence_parallel=") + (r.sequence_parallel ? "true" : "false"));
    if (split && split->kind == SplitKind::embedding_loss)
      add("model.config.account_for_embedding_in_pipeline_split=true "
          "model.config.account_for_loss_in_pipeline_split=true");
    if (split && split->kind == SplitKind::explicit_layers)
      add("model.config.num_layers_in_first_pipeline_stage=" + n(split->first) +
          " model.config.num_layers_in_last_pipeline_stage=" + n(split->last));
    if (s.recompute == Recompute::full)
      add(std::string("model.config.recompute_granularity=full model.config.recompute_method=") +
          to_string(s.recompute_method) +
          " model.config.recompute_num_layers=" + n(std::max(1, s.recompute_num_layers)));
    if (r.distribute_saved_activations) add("model.config.distribute_saved_activations=true");
    if (s.recompute == Recompute::selective) {
      add("model.config.recompute_granularity=selective");
      if (t.recompute_modules != module_bit(RecomputeModule::core_attn)) {
        std::string mods;
        for (const std::string& name : io::recompute_module_names(t)) mods += (mods.empty() ? "" : ",") + name;
        add("model.config.recompute_modules=[" + mods + "]");
      }
    }
    add(std::string("optim.config.use_distributed_optimizer=") + (r.distributed_optimizer ? "true" : "false"));
    if (t.nccl_ub) add("trainer.strategy.ddp.nccl_ub=true");
    if (t.tp_comm_overlap && r.sequence_parallel) add("model.config.tp_comm_overlap=true");
    if (t.te_cross_entropy)
      add("model.config.cross_entropy_loss_fusion=true model.config.cross_entropy_fusion_impl=te");
    if (t.precision == Precision::fp8) add("trainer.plugins.fp8=hybrid");
    add("data.micro_batch_size=" + n(r.micro_batch_size));
    add("data.global_batch_size=" + n(t.global_batch_size));
    add("data.seq_length=" + n(t.seq_length));
    return out;
  }
  throw io::InputError("--emit", 0, "emit", "'" + framework + "' is not megatron, nemo or mindspeed");
}

}  // namespace lmsim::app
