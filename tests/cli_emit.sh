#!/usr/bin/env bash
# `--emit`: the strategy as each framework's flags, consistent with the configuration name.
set -euo pipefail
lmsim=$1
fail() { echo "FAIL: $*"; exit 1; }
run() { "$lmsim" --log-level error predict --model Llama-3.1-405B --system h100_sxm_80g --seq 8192 --global-batch 512 "$@"; }
m=$(run --strategy dp8-tp8-pp8-cp2-RC-vpp8-sp --emit megatron)
for f in "--tensor-model-parallel-size 8" "--pipeline-model-parallel-size 8" "--context-parallel-size 2" \
         "--num-virtual-stages-per-pipeline-rank 8" "--account-for-embedding-in-pipeline-split" \
         "--account-for-loss-in-pipeline-split" "--sequence-parallel" "--recompute-granularity full" \
         "--use-distributed-optimizer" "--micro-batch-size 1" "--global-batch-size 512" "--seq-length 8192"; do
  [[ "$m" == *"$f"* ]] || fail "megatron flags lack '$f': $m"
done
n=$(run --strategy dp8-tp8-pp8-cp2-selRC-vpp8-nosp --emit nemo)
[[ "$n" == *"trainer.strategy.virtual_pipeline_model_parallel_size=8"* ]] || fail "nemo vpp: $n"
[[ "$n" == *"trainer.strategy.sequence_parallel=false"* ]] || fail "nemo sp: $n"
[[ "$n" == *"model.config.recompute_granularity=selective"* ]] || fail "nemo recompute: $n"
e=$(run --strategy dp8-tp8-pp8-cp2-noRC-first15-last15-sp --emit mindspeed)
[[ "$e" == *"--decoder-first-pipeline-num-layers 15 --decoder-last-pipeline-num-layers 15"* ]] || fail "uneven: $e"
[[ "$e" != *"--recompute"* ]] || fail "noRC emitted recompute: $e"
# An MoE layout names its dispatcher (Megatron-core's default is allgather, lmsim's alltoall), a dense one none.
moe() { "$lmsim" --log-level error predict --model Phi-3.5-MoE-instruct --system ascend_910b3_64g --devices 16 "$@"; }
e=$(moe --strategy dp2-tp2-pp4-cp1-ep2-RC --emit megatron)
[[ "$e" == *"--expert-model-parallel-size 2 --moe-token-dispatcher-type alltoall"* ]] || fail "moe dispatcher: $e"
e=$(moe --strategy dp2-tp2-pp4-cp1-ep2-RC --set moe_token_dispatcher_type=allgather --emit nemo)
[[ "$e" == *"model.config.moe_token_dispatcher_type=allgather"* ]] || fail "nemo moe dispatcher: $e"
e=$("$lmsim" --log-level error predict --model Phi-3.5-MoE-instruct --system h100_sxm_80g --devices 16 \
  --strategy dp2-tp2-pp4-cp1-ep2-RC --set moe_token_dispatcher_type=flex --emit megatron)
[[ "$e" == *"--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep"* ]] || fail "flex backend: $e"
[[ "$m" != *"dispatcher"* && "$m" != *"grouped"* ]] || fail "dense model emitted MoE flags: $m"
[[ "$e" == *"--moe-grouped-gemm"* ]] || fail "moe grouped gemm: $e"
j=$(run --strategy dp8-tp8-pp8-cp2-RC-vpp8-sp --emit megatron --json)
python3 -c "import json,sys; j=json.loads(sys.argv[1]); assert j['emit']['framework']=='megatron' and '--sequence-parallel' in j['emit']['flags']" "$j" || fail "json emit"
# FSDP and module recompute: from the name token and the settings, into the flags and the report's settings line.
settings=$(mktemp)
trap 'rm -f "$settings"' EXIT
echo '{"recompute_modules": ["core_attn", "mlp"], "te_cross_entropy": true, "nccl_ub": true}' > "$settings"
f=$(run --strategy dp64-tp8-pp1-cp1-selRC-fsdp --settings "$settings" --emit megatron)
[[ "$f" == *"--use-nccl-ub"* ]] || fail "nccl user buffers: $f"
u=$(run --strategy dp64-tp8-pp1-cp1-selRC-fsdp --settings "$settings" --emit nemo)
[[ "$u" == *"trainer.strategy.ddp.nccl_ub=true"* ]] || fail "nemo nccl user buffers: $u"
# Megatron-LM refuses Transformer Engine's cross entropy: said, not emitted; the recipes set it on the model.
[[ "$f" != *"--cross-entropy-fusion-impl"* ]] || fail "te cross entropy emitted for Megatron-LM: $f"
j=$(run --strategy dp64-tp8-pp1-cp1-selRC-fsdp --settings "$settings" --emit megatron --json)
[[ "$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['emit']['unsaid'])" "$j")" == *"fused cross entropy"* ]] ||
  fail "te cross entropy not said: $j"
[[ "$u" == *"model.config.cross_entropy_loss_fusion=true model.config.cross_entropy_fusion_impl=te"* ]] ||
  fail "nemo te cross entropy: $u"
[[ "$f" == *"--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params"* ]] || fail "fsdp flags: $f"
[[ "$f" == *"--recompute-modules core_attn mlp"* ]] || fail "recompute modules: $f"
[[ "$f" != *"--use-distributed-optimizer"* ]] || fail "fsdp also emitted the distributed optimizer: $f"
t=$(run --strategy dp64-tp8-pp1-cp1-selRC-fsdp --settings "$settings")
[[ "$t" == *"settings        "*"FSDP, overlapped gradient reduction, recompute modules core_attn+mlp, TE cross entropy, NCCL user buffers"* ]] ||
  fail "settings line: $t"
# Distributed checkpoints: emitted, and named in the settings line, where Megatron runs them (full recompute,
# TP > 1, no SP); said not to apply elsewhere.
echo '{"distribute_saved_activations": true}' > "$settings"
x=$(run --strategy dp8-tp8-pp8-cp2-RC-vpp8-nosp --settings "$settings" --emit megatron)
[[ "$x" == *"--recompute-method uniform --recompute-num-layers 1 --distribute-saved-activations"* ]] || fail "dsa: $x"
x=$(run --strategy dp8-tp8-pp8-cp2-RC-vpp8-nosp --settings "$settings" --emit nemo)
[[ "$x" == *"model.config.distribute_saved_activations=true"* ]] || fail "nemo dsa: $x"
x=$(run --strategy dp8-tp8-pp8-cp2-RC-vpp8-sp --settings "$settings" --emit megatron)
[[ "$x" != *"--distribute-saved-activations"* ]] || fail "dsa emitted under SP: $x"
x=$(run --strategy dp8-tp8-pp8-cp2-RC-vpp8-nosp --settings "$settings")
[[ "$x" == *", checkpoints distributed over TP"* ]] || fail "dsa settings line: $x"
x=$(run --strategy dp8-tp8-pp8-cp2-RC-vpp8-sp --settings "$settings")
[[ "$x" == *", checkpoints not distributed (needs full recompute, TP > 1 and no SP)"* ]] || fail "dsa moot: $x"
# What today's frameworks cannot be told (said in `unsaid`, never emitted): the synchronous backward TP all-reduce
# of Megatron-LM before September 2021 (its switch is gone from Megatron-LM) where it applies (no SP), and the
# pipeline scatter/gather of Narayanan et al. (tp > 1, pp > 1, no SP).
unsaid() { python3 -c "import json,sys; print('|'.join(json.loads(sys.argv[1])['emit']['unsaid']))" "$1"; }
x=$(run --strategy dp8-tp8-pp8-cp2-RC-vpp8-nosp --set async_tensor_model_parallel_allreduce=false --emit megatron --json)
[[ "$x" != *"--no-async-tensor-model-parallel-allreduce"* ]] || fail "removed flag emitted: $x"
[[ "$(unsaid "$x")" == *"synchronous backward TP all-reduce"* ]] || fail "sync all-reduce not said: $x"
[[ "$(unsaid "$x")" == *"scatter/gather"* ]] || fail "scatter/gather not said: $x"
x=$(run --strategy dp8-tp8-pp8-cp2-RC-vpp8-sp --set async_tensor_model_parallel_allreduce=false --emit megatron --json)
[[ "$(unsaid "$x")" != *"synchronous"* && "$(unsaid "$x")" != *"scatter"* ]] || fail "said under SP: $x"
x=$(run --strategy dp8-tp8-pp8-cp2-RC-vpp8-nosp --set pipeline_scatter_gather=false --emit nemo --json)
[[ "$(unsaid "$x")" != *"scatter"* ]] || fail "scatter/gather said when off: $x"
# Attention over stored scores: Megatron-core's unfused backend; the recipes' overrides say they leave it.
[[ "$m" == *"--attention-backend fused"* && "$m" != *"unfused"* ]] || fail "fused backend: $m"
# FlashAttention-2 (NeMo's 2024 launcher: NVTE_FUSED_ATTN=0): Megatron's flash backend; the recipes say they leave it.
x=$(run --strategy dp8-tp8-pp8-cp2-RC-vpp8-sp --set attention_backend=flash --emit megatron)
[[ "$x" == *"--attention-backend flash"* ]] || fail "flash backend: $x"
x=$(run --strategy dp8-tp8-pp8-cp2-RC-vpp8-sp --set attention_backend=flash --emit nemo --json)
[[ "$(unsaid "$x")" == *"FlashAttention-2 as the flash kernel"* ]] || fail "nemo flash backend not said: $x"
x=$(run --strategy dp8-tp8-pp8-cp2-RC-vpp8-sp --emit nemo --json)
[[ "$(unsaid "$x")" != *"FlashAttention-2"* ]] || fail "fused backend said: $x"
x=$(run --strategy dp8-tp8-pp8-cp2-RC-vpp8-sp --stack nemo-24.07)
[[ "$x" == *", flash attention (FlashAttention-2, 0.62 of cuDNN's), SP"* ]] || fail "FA2 settings line: $x"
x=$(run --strategy dp8-tp8-pp8-cp1-RC-vpp8-sp --set flash_attention=false --emit megatron)
[[ "$x" == *"--attention-backend unfused"* ]] || fail "unfused backend: $x"
x=$(run --strategy dp8-tp8-pp8-cp1-RC-vpp8-sp --set flash_attention=false --emit megatron-bridge --json)
[[ "$(unsaid "$x")" == *"stored s x s scores"* ]] || fail "bridge unfused attention not said: $x"
# Unfused kernels (the bundled V100 runs'): every fusion switch off; PyTorch norms said.
g=$("$lmsim" --log-level error predict --model Qwen3-1.7B --system v100_sxm2_32g --stack gpu --devices 8 \
  --strategy dp2-tp2-pp2-cp1-RC --emit megatron --json)
[[ "$g" == *"--no-bias-gelu-fusion --no-bias-swiglu-fusion --no-bias-dropout-fusion --no-rope-fusion"* &&
   "$g" == *"--no-masked-softmax-fusion"* ]] || fail "unfused kernels: $g"
g=$("$lmsim" --log-level error predict --model Qwen3-1.7B --system ascend_910b3_64g --stack npu --devices 8 \
  --strategy dp2-tp2-pp2-cp1-RC --emit megatron-bridge --json)
[[ "$g" == *"model.masked_softmax_fusion=false"* && "$g" != *"bias_activation_fusion"* ]] || fail "npu fusions: $g"
[[ "$(unsaid "$g")" == *"unfused (PyTorch) norms"* ]] || fail "unfused norms not said: $g"
[[ "$m" != *"fusion"* ]] || fail "fusion switches for fused kernels: $m"
# MindSpeed-LLM's fused RMSNorm is opt-in: asked for where the norms are fused, nothing said where not.
g=$(run --strategy dp8-tp8-pp8-cp2-RC-vpp8-sp --emit mindspeed)
[[ "$g" == *"--use-fused-rmsnorm"* ]] || fail "mindspeed fused rmsnorm: $g"
# So are its fused SwiGLU and rotary kernels, which its argument check takes only for SwiGLU and rope models.
[[ "$g" == *"--use-fused-swiglu"* && "$g" == *"--use-fused-rotary-pos-emb"* ]] || fail "mindspeed fused swiglu/rope: $g"
x=$(run --strategy dp8-tp8-pp8-cp2-RC-vpp8-sp --set fused_kernels=false --emit mindspeed)
[[ "$x" != *"--use-fused-swiglu"* && "$x" != *"--use-fused-rotary"* ]] || fail "mindspeed unfused kernels: $x"
x=$("$lmsim" --log-level error predict --model GPT-3-175B --system h100_sxm_80g --seq 2048 --global-batch 512 \
  --devices 512 --strategy tp8-pp8-RC-sp --emit mindspeed)
[[ "$x" != *"--use-fused-swiglu"* && "$x" != *"--use-fused-rotary"* ]] || fail "mindspeed GELU / learned positions: $x"
# Dropout, on in Megatron-LM by default and in some recipes' models: said either way.
[[ "$m" == *"--attention-dropout 0.0 --hidden-dropout 0.0"* ]] || fail "dropout off: $m"
x=$(run --strategy dp8-tp8-pp8-cp2-RC-vpp8-sp --set dropout=true --emit megatron)
[[ "$x" != *"dropout"* ]] || fail "dropout on (Megatron's default) emitted: $x"
x=$(run --strategy dp8-tp8-pp8-cp2-RC-vpp8-sp --set dropout=true --emit megatron-bridge)
[[ "$x" == *"model.attention_dropout=0.1 model.hidden_dropout=0.1"* ]] || fail "bridge dropout: $x"
x=$(run --strategy dp8-tp8-pp8-cp2-RC-vpp8-sp --emit nemo)
[[ "$x" == *"model.config.attention_dropout=0.0 model.config.hidden_dropout=0.0"* ]] || fail "nemo dropout: $x"
# Hidden and attention dropout apart: each said as it is.
x=$(run --strategy dp8-tp8-pp8-cp2-RC-vpp8-sp --set hidden_dropout=true --emit megatron)
[[ "$x" == *"--attention-dropout 0.0"* && "$x" != *"--hidden-dropout"* ]] || fail "hidden dropout only: $x"
x=$(run --strategy dp8-tp8-pp8-cp2-RC-vpp8-sp --set attention_dropout=true --emit megatron-bridge)
[[ "$x" == *"model.attention_dropout=0.1 model.hidden_dropout=0.0"* ]] || fail "bridge attention dropout only: $x"
# The batch-level EP overlap with its delayed weight gradients, as Megatron-Bridge's performance scripts run it,
# where Megatron-core lets it run (EP > 1, no full recompute, interleaved when pipelined); elsewhere not in effect.
x=$(moe --strategy dp4-tp2-pp2-cp1-ep2-noRC-vpp2 --set overlap_moe_expert_parallel_comm=true --emit megatron)
[[ "$x" == *"--overlap-moe-expert-parallel-comm --delay-wgrad-compute"* ]] || fail "ep overlap: $x"
x=$(moe --strategy dp4-tp2-pp2-cp1-ep2-noRC-vpp2 --set overlap_moe_expert_parallel_comm=true --emit megatron-bridge)
[[ "$x" == *"comm_overlap.overlap_moe_expert_parallel_comm=true comm_overlap.delay_wgrad_compute=true"* ]] ||
  fail "bridge ep overlap: $x"
x=$(moe --strategy dp4-tp2-pp2-cp1-ep2-noRC-vpp2 --set overlap_moe_expert_parallel_comm=true --emit nemo --json)
[[ "$(unsaid "$x")" == *"batch-level EP all-to-all overlap"* ]] || fail "nemo ep overlap not said: $x"
x=$(moe --strategy dp2-tp2-pp4-cp1-ep2-RC --set overlap_moe_expert_parallel_comm=true --emit megatron)
[[ "$x" != *"overlap-moe"* ]] || fail "ep overlap under full recompute: $x"
x=$(moe --strategy dp2-tp2-pp4-cp1-ep2-noRC --set overlap_moe_expert_parallel_comm=true)
[[ "$x" == *"batch-level EP overlap not in effect"* ]] || fail "ep overlap without interleaving: $x"
x=$(moe --strategy dp4-tp2-pp2-cp1-ep2-noRC-vpp2 --set overlap_moe_expert_parallel_comm=true)
[[ "$x" == *", batch-level EP overlap,"* || "$x" == *", batch-level EP overlap"$'\n'* ]] || fail "ep overlap in effect: $x"
# Megatron-LM takes the parameter-gather overlap only beside the gradient-reduction one, and neither without DP.
x=$(run --strategy dp1-tp8-pp8-cp1-RC-vpp8-sp --stack megatron-bridge --emit megatron)
[[ "$x" != *"--overlap-param-gather"* && "$x" != *"--overlap-grad-reduce"* ]] || fail "DP overlaps without DP: $x"
x=$(run --strategy dp8-tp8-pp8-cp1-RC-vpp8-sp --stack megatron-bridge --emit megatron)
[[ "$x" == *"--overlap-grad-reduce --overlap-param-gather"* ]] || fail "DP overlaps: $x"
x=$(run --strategy dp8-tp8-pp8-cp1-RC-vpp8-sp --stack megatron-bridge --set overlap_grad_reduce=false --emit megatron --json)
flags=$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['emit']['flags'])" "$x")
[[ "$flags" != *"--overlap-param-gather"* && "$(unsaid "$x")" == *"parameter all-gather overlapped"* ]] ||
  fail "param-gather overlap alone: $flags"
# FP8 parameters only with the optimizer state sharded (Megatron-LM's argument check): said where moot.
x=$("$lmsim" --log-level error predict --model Llama-3-8B --system h100_sxm_80g --stack megatron-bridge --seq 8192 \
  --global-batch 128 --devices 8 --strategy dp8-tp1-pp1-noRC-nodo --emit megatron)
[[ "$x" != *"--fp8-param-gather"* ]] || fail "fp8 params without do: $x"
x=$("$lmsim" --log-level error predict --model Llama-3-8B --system h100_sxm_80g --stack megatron-bridge --seq 8192 \
  --global-batch 128 --devices 8 --strategy dp8-tp1-pp1-noRC-nodo)
[[ "$x" == *"FP8 parameters not in effect"* ]] || fail "fp8 params moot not said: $x"
x=$("$lmsim" --log-level error predict --model Llama-3-8B --system h100_sxm_80g --stack megatron-bridge --seq 8192 \
  --global-batch 128 --devices 8 --strategy dp8-tp1-pp1-noRC-do --emit megatron)
[[ "$x" == *"--fp8-param-gather"* ]] || fail "fp8 params: $x"
x=$("$lmsim" --log-level error predict --model Llama-3-8B --system h100_sxm_80g --stack megatron-bridge --seq 8192 \
  --global-batch 128 --devices 8 --strategy dp1-tp8-pp1-noRC-nodo-sp --emit megatron)
[[ "$x" == *"--use-distributed-optimizer"* && "$x" == *"--fp8-param-gather"* ]] ||
  fail "fp8 params over a one-rank DP group: $x"
# The interleaved schedule overlaps its sends unless told not to: only --no-overlap-p2p-communication exists.
[[ "$m" == *"--no-overlap-p2p-communication"* ]] || fail "p2p overlap off not said: $m"
x=$(run --strategy dp8-tp8-pp8-cp2-RC-vpp8-sp --set overlap_p2p_comm=true --emit megatron)
[[ "$x" != *"overlap-p2p"* ]] || fail "p2p overlap flag emitted for the default: $x"
x=$(run --strategy dp8-tp8-pp8-cp2-RC-sp --emit megatron)
[[ "$x" != *"overlap-p2p"* ]] || fail "p2p overlap flag without interleaving: $x"
x=$(run --strategy dp8-tp8-pp8-cp2-RC-vpp8-nosp --set async_tensor_model_parallel_allreduce=false)
[[ "$x" == *", synchronous backward TP all-reduce"* ]] || fail "sync all-reduce settings line: $x"
# The context-parallel algorithm: Megatron-core's --cp-comm-type, MindSpeed-LLM's --context-parallel-algo.
echo '{"cp_comm_type": "ulysses_cp_algo"}' > "$settings"
u=$(run --strategy dp8-tp8-pp8-cp2-RC-vpp8-sp --settings "$settings" --emit mindspeed)
[[ "$u" == *"--context-parallel-algo ulysses_cp_algo"* ]] || fail "mindspeed cp algorithm: $u"
u=$(run --strategy dp8-tp8-pp8-cp2-RC-vpp8-sp --settings "$settings" --emit megatron)
[[ "$u" == *"--cp-comm-type a2a"* ]] || fail "megatron cp algorithm: $u"
[[ "$m" == *"--cp-comm-type p2p"* ]] || fail "megatron default cp algorithm: $m"
echo '{"cp_comm_type": "a2a+p2p", "ulysses_degree_in_cp": 2}' > "$settings"
h=$(run --strategy dp4-tp8-pp8-cp4-RC-vpp8-sp --settings "$settings" --emit mindspeed)
[[ "$h" == *"--context-parallel-algo hybrid_cp_algo --ulysses-degree-in-cp 2"* ]] || fail "mindspeed hybrid: $h"
h=$(run --strategy dp4-tp8-pp8-cp4-RC-vpp8-sp --settings "$settings" --emit megatron)
[[ "$h" == *"--cp-comm-type a2a+p2p --hierarchical-context-parallel-sizes 2 2"* ]] || fail "megatron hybrid: $h"
echo '{"cp_comm_type": "ulysses_cp_algo"}' > "$settings"
u=$(run --strategy dp8-tp8-pp8-cp2-RC-vpp8-sp --settings "$settings")
[[ "$u" == *"context parallel by Ulysses (a2a)"* ]] || fail "settings line: $u"
# Diagnostics name each collective's share of the intra-node links: a TP pair on the DGX-1 cube-mesh gets 1/6.
d=$("$lmsim" --log-level error predict --model Qwen3-0.6B --system v100_sxm2_32g --strategy dp4-tp2-pp1-cp1-noRC \
  --diagnostics --json)
python3 -c "
import json,sys
j=json.loads(sys.argv[1])
tp=[c for c in j['collectives'] if c['group']=='tp']
assert tp and all(abs(c['link_share']-1/6)<1e-9 for c in tp), tp
" "$d" || fail "link_share of a DGX-1 TP pair"
# ... and the protocol that runs it: NCCL's Simple, LL128 or LL on NVIDIA systems, Simple alone under HCCL.
python3 -c "
import json,sys
j=json.loads(sys.argv[1])
assert all(c['protocol'] in ('simple','ll128','ll','nvls') for c in j['collectives']), j['collectives']
assert {c['protocol'] for c in j['collectives']} > {'simple'}, j['collectives']
" "$d" || fail "protocols of NCCL's collectives"
n=$("$lmsim" --log-level error predict --model Qwen3-0.6B --system ascend_910b3_64g --strategy dp4-tp2-pp1-cp1-noRC \
  --diagnostics --json)
python3 -c "
import json,sys
j=json.loads(sys.argv[1])
assert j['collectives'] and all(c['protocol']=='simple' for c in j['collectives']), j['collectives']
" "$n" || fail "HCCL runs every collective as Simple"
t=$("$lmsim" --log-level error predict --model Qwen3-0.6B --system v100_sxm2_32g --strategy dp4-tp2-pp1-cp1-noRC \
  --diagnostics)
grep -q "ms/call  protocol" <<<"$t" || fail "diagnostics table's protocol column: $t"
# Partial full recompute: the name's method token into each framework's method and layer-count flags.
b=$(run --strategy dp8-tp8-pp8-cp2-RC-block3-vpp8-sp --emit megatron)
[[ "$b" == *"--recompute-granularity full --recompute-method block --recompute-num-layers 3"* ]] || fail "block: $b"
[[ "$m" == *"--recompute-method uniform --recompute-num-layers 1"* ]] || fail "uniform default: $m"
b=$(run --strategy dp8-tp8-pp8-cp2-RC-uniform2-vpp8-sp --emit nemo)
[[ "$b" == *"model.config.recompute_method=uniform model.config.recompute_num_layers=2"* ]] || fail "nemo uniform: $b"
t=$(run --strategy dp8-tp8-pp8-cp2-RC-block3-vpp8-sp)
[[ "$t" == *"full recompute of the first 3 layers of every chunk"* ]] || fail "settings line: $t"
# The interleaved schedule's micro-batch group: emitted for Megatron-LM and NeMo when set.
g=$("$lmsim" --log-level error predict --model GPT-3-175B --system h100_sxm_80g --seq 2048 --global-batch 160 \
  --devices 512 --strategy dp16-tp4-pp8-cp1-noRC-mbs1-vpp6-sp --set microbatch_group_size_per_vp_stage=10 --emit megatron)
[[ "$g" == *"--microbatch-group-size-per-virtual-pipeline-stage 10"* ]] || fail "megatron micro-batch group: $g"
g=$("$lmsim" --log-level error predict --model GPT-3-175B --system h100_sxm_80g --seq 2048 --global-batch 160 \
  --devices 512 --strategy dp16-tp4-pp8-cp1-noRC-mbs1-vpp6-sp --set microbatch_group_size_per_vp_stage=10 --emit nemo)
[[ "$g" == *"trainer.strategy.microbatch_group_size_per_vp_stage=10"* ]] || fail "nemo micro-batch group: $g"
# NeMo 2's comm-overlap callback decides TP overlap over the model configuration: said, not emitted.
g=$(run --strategy dp8-tp8-pp8-cp2-noRC-vpp8-sp --stack nemo-24.07 --emit nemo --json)
[[ "$g" != *"tp_comm_overlap=true"* && "$(unsaid "$g")" == *"MegatronCommOverlapCallback"* ]] || fail "nemo tp overlap: $g"
# NeMo 2's strategy overwrites the model configuration's split fields with its own: they are the strategy's keys.
g=$(run --strategy dp8-tp8-pp8-cp2-noRC-vpp8-sp --emit nemo)
[[ "$g" == *"trainer.strategy.account_for_embedding_in_pipeline_split=true trainer.strategy.account_for_loss_in_pipeline_split=true"* ]] ||
  fail "nemo embedding/loss split: $g"
g=$(run --strategy dp8-tp8-pp8-cp2-noRC-first15-last15-sp --emit nemo)
[[ "$g" == *"trainer.strategy.num_layers_in_first_pipeline_stage=15 trainer.strategy.num_layers_in_last_pipeline_stage=15"* ]] ||
  fail "nemo explicit split: $g"
# Megatron-Bridge: ConfigContainer overrides (model.*, train.*, dataset.*, ddp.*, comm_overlap.*, mixed_precision);
# what a registered precision recipe cannot say (the bridge stack's 16-bit gradient reduction) is named, in JSON
# and as a warning, and nothing is named where the flags say it all.
mb=$(run --stack megatron-bridge --strategy dp8-tp8-pp8-cp2-selRC-vpp8-sp --emit megatron-bridge 2>/dev/null)
for f in "model.tensor_model_parallel_size=8" "model.pipeline_model_parallel_size=8" \
         "model.virtual_pipeline_model_parallel_size=8" "model.context_parallel_size=2" "model.sequence_parallel=true" \
         "model.account_for_embedding_in_pipeline_split=true" "model.recompute_granularity=selective" \
         "ddp.use_distributed_optimizer=true optimizer.use_distributed_optimizer=true" \
         "comm_overlap.tp_comm_overlap=true" "comm_overlap.overlap_p2p_comm=true" \
         "comm_overlap.overlap_grad_reduce=true comm_overlap.overlap_param_gather=true" \
         "mixed_precision=bf16_with_fp8_current_scaling_mixed" "train.micro_batch_size=1" \
         "train.global_batch_size=512" "dataset.seq_length=8192"; do
  [[ "$mb" == *"$f"* ]] || fail "megatron-bridge overrides lack '$f': $mb"
done
[[ "$mb" != *"trainer."* && "$mb" != *"model.config."* ]] || fail "megatron-bridge emitted NeMo 2 keys: $mb"
# The warnings come at --log-level warn.
runw() { "$lmsim" --log-level warn predict --model Llama-3.1-405B --system h100_sxm_80g --seq 8192 --global-batch 512 "$@"; }
moew() { "$lmsim" --log-level warn predict --model Phi-3.5-MoE-instruct --system ascend_910b3_64g --devices 16 "$@"; }
w=$(runw --stack megatron-bridge --strategy dp8-tp8-pp8-cp2-selRC-vpp8-sp --emit megatron-bridge 2>&1 >/dev/null)
[[ "$w" == *"16-bit gradient reduction"*"mixed_precision.grad_reduce_in_fp32=false"* ]] || fail "unsaid warning: $w"
j=$(run --stack megatron-bridge --strategy dp8-tp8-pp8-cp2-selRC-vpp8-sp --emit megatron-bridge --json)
python3 -c "import json,sys; u=json.loads(sys.argv[1])['emit']['unsaid']; assert len(u)==2 and 'first_last_layers_bf16=false' in u[0] and '16-bit gradient' in u[1], u" "$j" ||
  fail "json unsaid"
# The FP8 recipe: Megatron's --fp8-recipe (delayed, its default, unsaid), NeMo 2's plugin, Bridge's precision recipe.
x=$(run --stack megatron-bridge --strategy dp8-tp8-pp8-cp2-selRC-vpp8-sp --emit megatron)
[[ "$x" == *"--bf16 --fp8-format hybrid --fp8-recipe tensorwise"* ]] || fail "megatron fp8 recipe: $x"
x=$(run --stack nemo-24.07 --strategy dp8-tp8-pp8-cp2-selRC-vpp8-sp --emit megatron)
[[ "$x" != *"--fp8-recipe"* ]] || fail "delayed recipe emitted: $x"
[[ "$x" != *"--tp-only-amax-red"* ]] || fail "tp-only amax reduction emitted unset: $x"
# --tp-only-amax-red: said under delayed scaling, where it acts; named in the settings line.
x=$(run --stack nemo-24.07 --set tp_only_amax_red=true --strategy dp8-tp8-pp8-cp2-selRC-vpp8-sp --emit megatron)
[[ "$x" == *"--tp-only-amax-red"* ]] || fail "tp-only amax reduction: $x"
x=$(run --stack nemo-24.07 --set tp_only_amax_red=true --strategy dp8-tp8-pp8-cp2-selRC-vpp8-sp --emit megatron-bridge)
[[ "$x" == *"model.tp_only_amax_red=true"* ]] || fail "bridge tp-only amax reduction: $x"
x=$(run --stack megatron-bridge --set tp_only_amax_red=true --strategy dp8-tp8-pp8-cp2-selRC-vpp8-sp --emit megatron)
[[ "$x" != *"--tp-only-amax-red"* ]] || fail "tp-only amax reduction under current scaling: $x"
x=$(run --stack nemo-24.07 --set tp_only_amax_red=true --strategy dp8-tp8-pp8-cp2-selRC-vpp8-sp)
[[ "$x" == *"(delayed scaling), amax reduced over TP only"* ]] || fail "tp-only amax settings line: $x"
# MX block scaling on Blackwell (on H100 it is refused: tests/cli_bad_input.sh).
runb() { "$lmsim" --log-level error predict --model Llama-3.1-405B --system b200_sxm_180g --seq 8192 --global-batch 512 "$@"; }
x=$(runb --stack megatron-bridge --set fp8_recipe=mxfp8 --strategy dp8-tp8-pp8-cp2-selRC-vpp8-sp --emit nemo)
[[ "$x" == *"trainer.plugins.fp8=hybrid trainer.plugins.fp8_recipe=mxfp8"* ]] || fail "nemo fp8 recipe: $x"
x=$(runb --stack megatron-bridge --set fp8_recipe=mxfp8 --strategy dp8-tp8-pp8-cp2-selRC-vpp8-sp --emit megatron-bridge)
[[ "$x" == *"mixed_precision=bf16_with_mxfp8_mixed"* ]] || fail "bridge mxfp8 recipe: $x"
x=$(run --stack megatron-bridge --strategy dp8-tp8-pp8-cp2-selRC-vpp8-sp)
[[ "$x" == *"settings        fp8 (tensorwise scaling), flash attention, SP"* ]] || fail "fp8 recipe settings line: $x"
# First and last layers in BF16: Megatron's and NeMo's flags; Bridge's current-scaling recipe runs 1 and 1 itself.
x=$(run --stack megatron-bridge --set first_last_layers_bf16=true --set num_layers_at_end_in_bf16=2 --strategy dp8-tp8-pp8-cp2-selRC-vpp8-sp --emit megatron)
[[ "$x" == *"--first-last-layers-bf16 --num-layers-at-start-in-bf16 1 --num-layers-at-end-in-bf16 2"* ]] || fail "megatron bf16 ends: $x"
x=$(run --stack megatron-bridge --set first_last_layers_bf16=true --strategy dp8-tp8-pp8-cp2-selRC-vpp8-sp --emit nemo)
[[ "$x" == *"trainer.plugins.first_last_layers_bf16=true trainer.plugins.num_layers_at_start_in_bf16=1 trainer.plugins.num_layers_at_end_in_bf16=1"* ]] ||
  fail "nemo bf16 ends: $x"
x=$(run --stack megatron-bridge --set first_last_layers_bf16=true --strategy dp8-tp8-pp8-cp2-selRC-vpp8-sp)
[[ "$x" == *"(tensorwise scaling), the first 1 and last 1 layers in BF16,"* ]] || fail "bf16 ends settings line: $x"
for ends in "1 1" "2 1" "0 0"; do
  read -r a z <<< "$ends"
  j=$(run --stack megatron-bridge --set first_last_layers_bf16=$([[ $a$z == 00 ]] && echo false || echo true) \
    --set num_layers_at_start_in_bf16=$a --set num_layers_at_end_in_bf16=$z --strategy dp8-tp8-pp8-cp2-selRC-vpp8-sp \
    --emit megatron-bridge --json)
  python3 -c "
import json,sys
u=[x for x in json.loads(sys.argv[1])['emit']['unsaid'] if 'BF16' in x]
want={'1 1': None, '2 1': '2 layer(s) at the start and 1 at the end in BF16', '0 0': 'every layer in FP8'}[sys.argv[2]]
assert (u == []) if want is None else (len(u) == 1 and u[0].startswith(want)), u" "$j" "$ends" || fail "bridge bf16 ends $ends"
done
# Block scaling (Bridge's fp8_sc "subchannel" recipe, which gathers 16-bit parameters).
x=$(run --stack megatron-bridge --set fp8_recipe=blockwise --strategy dp8-tp8-pp8-cp2-selRC-vpp8-sp --emit megatron)
[[ "$x" == *"--fp8-recipe blockwise"* ]] || fail "megatron blockwise recipe: $x"
j=$(run --stack megatron-bridge --set fp8_recipe=blockwise --strategy dp8-tp8-pp8-cp2-selRC-vpp8-sp --emit megatron-bridge --json)
python3 -c "
import json,sys
e=json.loads(sys.argv[1])['emit']
assert 'mixed_precision=bf16_with_fp8_subchannel_scaling_mixed' in e['flags'], e
assert any('FP8 parameters gathered in 8 bits' in x and 'fp8_param_gather=true)' in x for x in e['unsaid']), e" "$j" ||
  fail "bridge blockwise recipe"
j=$(run --stack megatron-bridge --set fp8_recipe=blockwise --set fp8_param_gather=false --strategy dp8-tp8-pp8-cp2-selRC-vpp8-sp --emit megatron-bridge --json)
python3 -c "import json,sys; u=json.loads(sys.argv[1])['emit']['unsaid']; assert not any('FP8 parameters' in x for x in u), u" "$j" ||
  fail "bridge blockwise recipe, 16-bit parameters"
# NVFP4 (precision fp4) on B200: Megatron's --fp4-format flags, Bridge's bf16_with_nvfp4_mixed (FP4 parameters), NeMo unsaid.
b200() { "$lmsim" --log-level error predict --model Llama-3-70B --system b200_sxm_180g --seq 8192 --global-batch 128 \
  --stack megatron-bridge --set precision=fp4 --strategy dp2-tp4-pp8-cp1-noRC-vpp5-sp "$@"; }
x=$(b200 --emit megatron)
[[ "$x" == *"--bf16 --fp4-format e2m1 --fp4-recipe nvfp4"* && "$x" == *"--fp4-param-gather"* && "$x" != *"--fp8"* ]] ||
  fail "megatron nvfp4: $x"
j=$(b200 --emit megatron-bridge --json)
python3 -c "
import json,sys
e=json.loads(sys.argv[1])['emit']
assert 'mixed_precision=bf16_with_nvfp4_mixed' in e['flags'], e
assert [x for x in e['unsaid'] if 'gradient reduction' not in x] == [], e" "$j" || fail "bridge nvfp4: $j"
j=$(b200 --set fp8_param_gather=false --emit megatron-bridge --json)
python3 -c "import json,sys; u=json.loads(sys.argv[1])['emit']['unsaid']; assert any('FP4 parameters gathered in 16 bits' in x for x in u), u" "$j" ||
  fail "bridge nvfp4, 16-bit parameters"
j=$(b200 --emit nemo --json)
python3 -c "import json,sys; u=json.loads(sys.argv[1])['emit']['unsaid']; assert any('NVFP4' in x for x in u), u" "$j" || fail "nemo nvfp4 unsaid"
# Adam's moments in bf16 (Megatron-core's precision-aware optimizer): Megatron flags, Bridge overrides, NeMo unsaid.
x=$(run --set bf16_adam_moments=true --strategy dp8-tp8-pp8-cp2-selRC-vpp8-sp --emit megatron)
[[ "$x" == *"--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16"* ]] || fail "megatron bf16 moments: $x"
x=$(run --set bf16_adam_moments=true --strategy dp8-tp8-pp8-cp2-selRC-vpp8-sp --emit megatron-bridge)
[[ "$x" == *"optimizer.use_precision_aware_optimizer=true optimizer.exp_avg_dtype=bf16 optimizer.exp_avg_sq_dtype=bf16"* ]] ||
  fail "bridge bf16 moments: $x"
j=$(run --set bf16_adam_moments=true --strategy dp8-tp8-pp8-cp2-selRC-vpp8-sp --emit nemo --json)
python3 -c "import json,sys; u=json.loads(sys.argv[1])['emit']['unsaid']; assert any('moments in bf16' in x for x in u), u" "$j" ||
  fail "nemo bf16 moments unsaid"
j=$(run --stack megatron-bridge --strategy dp8-tp8-pp8-cp2-selRC-vpp8-sp --set fp8_param_gather=false --emit megatron-bridge --json)
python3 -c "import json,sys; u=json.loads(sys.argv[1])['emit']['unsaid']; assert any('FP8 parameters gathered in 16 bits' in x for x in u), u" "$j" ||
  fail "json unsaid fp8 gather"
j=$(run --strategy dp8-tp8-pp8-cp2-RC-vpp8-sp --emit megatron-bridge --set nccl_nvls_enable=false --json)
python3 -c "import json,sys; e=json.loads(sys.argv[1])['emit']; assert e['unsaid']==[] and 'mixed_precision=bf16_mixed' in e['flags'], e" "$j" ||
  fail "bf16 with fp32 reduction said in full"
x=$(run --strategy dp64-tp8-pp1-cp1-noRC-fsdp --emit megatron-bridge 2>/dev/null)
[[ "$x" == *"ddp.use_megatron_fsdp=true ddp.data_parallel_sharding_strategy=optim_grads_params ddp.use_distributed_optimizer=true"* ]] ||
  fail "megatron-bridge fsdp: $x"
[[ "$x" != *"overlap_p2p_comm"* ]] || fail "p2p overlap said without a pipeline: $x"
w=$(runw --strategy dp64-tp8-pp1-cp1-noRC-fsdp --emit nemo 2>&1 >/dev/null)
[[ "$w" == *"--emit nemo: lmsim simulated fully sharded data parallelism"* ]] || fail "nemo fsdp unsaid: $w"
w=$(moew --strategy dp2-tp2-pp4-cp1-ep2-RC --stack npu --emit megatron 2>&1 >/dev/null)
[[ "$w" == *"--reuse-fp32-param"* ]] || fail "megatron reuse_fp32_param unsaid: $w"
w=$(moew --strategy dp2-tp2-pp4-cp1-ep2-RC --stack npu --emit mindspeed 2>&1 >/dev/null)
[[ "$w" != *"do not set"* ]] || fail "mindspeed said reuse_fp32_param unsaid: $w"
# The settings line names the overlaps in effect: TP communication overlap with SP (and that it is not without),
# the data-parallel ones, and the interleaved pipeline's overlapped sends.
t=$(run --strategy dp8-tp8-pp8-cp2-noRC-vpp8-sp --stack megatron-bridge)
for f in ", SP, TP communication overlap," ", overlapped gradient reduction, overlapped parameter gather," \
         ", overlapped pipeline sends"; do
  [[ "$t" == *"$f"* ]] || fail "settings line lacks '$f': $t"
done
t=$(run --strategy dp8-tp8-pp8-cp2-noRC-vpp8-nosp --stack megatron-bridge)
[[ "$t" == *", TP communication overlap not in effect (needs SP)"* ]] || fail "settings line, no SP: $t"
t=$(run --strategy dp1-tp8-pp8-cp1-noRC-vpp8-sp --stack megatron-bridge --set overlap_p2p_comm=false)
[[ "$t" != *"overlapped gradient"* && "$t" != *"overlapped pipeline"* ]] || fail "overlaps said without a group: $t"
# NCCL's NVLS: named in the settings line on a system with NVLink SHARP (on by NCCL's default, off under the NeMo and
# Megatron-Bridge stacks, whose launchers export NCCL_NVLS_ENABLE=0), not on one without; said by --emit where the
# framework's launch differs.
t=$(run --strategy dp8-tp8-pp8-cp2-noRC-vpp8-sp)
[[ "$t" == *", NCCL NVLS all-reduce"* ]] || fail "NVLS on: $t"
t=$(run --strategy dp8-tp8-pp8-cp2-noRC-vpp8-sp --stack megatron-bridge)
[[ "$t" == *", NCCL NVLS off (ring all-reduce)"* ]] || fail "NVLS off under the stack: $t"
t=$("$lmsim" --log-level error predict --model Llama-3.1-405B --system a100_sxm_80g --seq 8192 --global-batch 512 \
  --strategy dp8-tp8-pp8-cp2-noRC-vpp8-sp)
[[ "$t" == *"settings "* && "$t" != *"NVLS"* ]] || fail "NVLS said on an A100: $t"
w=$(runw --strategy dp8-tp8-pp8-cp2-noRC-vpp8-sp --stack megatron-bridge --emit megatron 2>&1 >/dev/null)
[[ "$w" == *"NVLS algorithms off (export NCCL_NVLS_ENABLE=0"* ]] || fail "megatron NVLS off unsaid: $w"
w=$(runw --strategy dp8-tp8-pp8-cp2-noRC-vpp8-sp --emit megatron-bridge 2>&1 >/dev/null)
[[ "$w" == *"NVLS all-reduce (the performance launchers export NCCL_NVLS_ENABLE=0"* ]] || fail "bridge NVLS on unsaid: $w"
w=$(runw --strategy dp8-tp8-pp8-cp2-noRC-vpp8-sp --stack megatron-bridge --emit megatron-bridge 2>&1 >/dev/null)
[[ "$w" != *"NVLS"* ]] || fail "bridge NVLS off said: $w"
# The experts' data-parallel group counts: dp1 with tp4 over ep2·etp1 leaves two ranks a DP group of the experts'
# gradients, which the overlaps hide (flags and settings line).
moe8() { "$lmsim" --log-level error predict --model Qwen3-30B-A3B --system h100_sxm_80g --devices 8 --global-batch 64 \
  --stack megatron-bridge "$@"; }
x=$(moe8 --strategy dp1-tp4-pp2-ep2-etp1 --emit megatron)
[[ "$x" == *"--overlap-grad-reduce --overlap-param-gather"* ]] || fail "expert DP overlap flags: $x"
x=$(moe8 --strategy dp1-tp4-pp2-ep2-etp1 --emit megatron-bridge)
[[ "$x" == *"comm_overlap.overlap_grad_reduce=true"* ]] || fail "expert DP overlap override: $x"
x=$(moe8 --strategy dp1-tp4-pp2-ep2-etp1)
[[ "$x" == *", overlapped gradient reduction, overlapped parameter gather"* ]] || fail "expert DP settings line: $x"
x=$(moe8 --strategy dp1-tp4-pp2-ep4-etp1 --emit megatron)
[[ "$x" != *"--overlap-grad-reduce"* ]] || fail "overlap flags without any DP group: $x"
# Token dropping: Megatron's capacity flags, the Bridge/NeMo config keys, and the settings line.
cap=(--set moe_expert_capacity_factor=1.25 --set moe_pad_expert_input_to_capacity=true)
x=$(moe8 --strategy dp2-tp4-ep8-etp1 "${cap[@]}" --emit megatron)
[[ "$x" == *"--moe-expert-capacity-factor 1.25 --moe-pad-expert-input-to-capacity"* ]] || fail "capacity flags: $x"
x=$(moe8 --strategy dp2-tp4-ep8-etp1 "${cap[@]}" --emit megatron-bridge)
[[ "$x" == *"moe_expert_capacity_factor=1.25"*"moe_pad_expert_input_to_capacity=true"* ]] || fail "capacity config: $x"
x=$(moe8 --strategy dp2-tp4-ep8-etp1 "${cap[@]}")
[[ "$x" == *", token dropping at capacity factor 1.25, padded to capacity"* ]] || fail "capacity settings line: $x"
x=$(moe8 --strategy dp2-tp4-ep8-etp1 --emit megatron)
[[ "$x" != *"capacity"* ]] || fail "dropless emits a capacity: $x"
echo "cli_emit: all checks passed"
