#!/usr/bin/env bash
# Every bad-input class through the CLI: exit code 2, one message naming the file/field, nothing written.
set -u
lmsim="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
expect() {  # expect <code> <message-substring> <args...>
  local code="$1" msg="$2"
  shift 2
  # `search` initialises Open MPI, under which LeakSanitizer cannot run (the mpi_ tests skip the sanitizer pass
  # for the same reason); address and undefined-behaviour checks stay on.
  if [ "$1" = search ]; then
    ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" "$lmsim" "$@" >"$tmp/out" 2>"$tmp/err"
  else
    "$lmsim" "$@" >"$tmp/out" 2>"$tmp/err"
  fi
  local rc=$?
  if [ "$rc" != "$code" ] || ! grep -q -- "$msg" "$tmp/err" "$tmp/out"; then
    echo "FAIL: lmsim $* -> exit $rc (want $code), stderr: $(head -c 300 "$tmp/err")"
    fail=1
  fi
}
expect 0 "lmsim" --version
expect 0 "predict" --help
# --stack's help names the stacks (their paragraphs would bury the other options); `lmsim stacks` gives each one a
# paragraph of lines within 100 columns, every stack of `stacks --json` by name.
"$lmsim" predict --help >"$tmp/help" 2>&1
if ! grep -q -- "--stack .*gpu, npu, megatron-lm-2021, nemo-24.07, megatron-bridge; .lmsim stacks" "$tmp/help" ||
  grep -q "Apex distributed Adam" "$tmp/help"; then
  echo "FAIL: predict --help's --stack: $(grep -- --stack "$tmp/help" | head -c 300)"
  fail=1
fi
"$lmsim" stacks >"$tmp/stacks" 2>&1 || { echo "FAIL: lmsim stacks failed"; fail=1; }
if awk 'length($0) > 100 { bad = 1 } END { exit !bad }' "$tmp/stacks"; then
  echo "FAIL: lmsim stacks prints lines over 100 columns"
  fail=1
fi
for name in $("$lmsim" stacks --json | python3 -c 'import json, sys; print(" ".join(s["name"] for s in json.load(sys.stdin)))'); do
  grep -q "^$name: [a-z0-9]*, θ fitted on " "$tmp/stacks" || { echo "FAIL: lmsim stacks has no paragraph for $name"; fail=1; }
done
expect 2 "unknown model 'NoSuch'" predict --model NoSuch --system v100_sxm2_32g --strategy dp8-tp1-pp1-cp1-RC
expect 2 "unknown system" predict --model Qwen3-0.6B --system nope --strategy dp8-tp1-pp1-cp1-RC
expect 2 "^lmsim: error: --strategy: strategy 'dp8-tp1-pp1-cp1-XX': unknown field 'XX'; fields: dp<N>" \
  predict --model Qwen3-0.6B --system v100_sxm2_32g --strategy dp8-tp1-pp1-cp1-XX
# A strategy as a person types it: fields in any order, dp from --devices; said as the configuration it stands for,
# predicted as that configuration is. Without --devices a missing dp is named; a device count tp·pp·cp does not
# divide, likewise.
expect 0 "'sp-RC-pp2-tp4' read as dp1-tp4-pp2-cp1-RC-sp" predict --model Qwen3-0.6B --system v100_sxm2_32g --devices 8 \
  --strategy sp-RC-pp2-tp4
typed=$("$lmsim" predict --model Qwen3-0.6B --system v100_sxm2_32g --devices 8 --strategy sp-RC-pp2-tp4 --json \
  2>/dev/null | python3 -c 'import json, sys; d = json.load(sys.stdin); print(d["strategy"], d["iteration_time_s"])')
named=$("$lmsim" predict --model Qwen3-0.6B --system v100_sxm2_32g --strategy dp1-tp4-pp2-cp1-RC-sp --json \
  2>/dev/null | python3 -c 'import json, sys; d = json.load(sys.stdin); print(d["strategy"], d["iteration_time_s"])')
if [ -z "$typed" ] || [ "$typed" != "$named" ]; then
  echo "FAIL: sp-RC-pp2-tp4 on 8 devices predicted '$typed', its configuration name '$named'"
  fail=1
fi
expect 2 "no dp<N>: give it, or the device count (--devices)" predict --model Qwen3-0.6B --system v100_sxm2_32g \
  --strategy tp4-pp2-RC
# Several device counts: every strategy at each, dp from the count (a layout's scaling), each as predicted alone.
scaling=$("$lmsim" predict --model Llama-3-8B --system h100_sxm_80g --devices 8,16,32 --strategy tp2,tp2-RC --json \
  2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)["predictions"]
print(" ".join("%s@%d" % (p["strategy"], p["devices"]) for p in d), d[2]["iteration_time_s"])')
alone=$("$lmsim" predict --model Llama-3-8B --system h100_sxm_80g --strategy dp8-tp2-pp1-cp1-noRC --json 2>/dev/null |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["iteration_time_s"])')
want="dp4-tp2-pp1-cp1-noRC@8 dp4-tp2-pp1-cp1-RC@8 dp8-tp2-pp1-cp1-noRC@16 dp8-tp2-pp1-cp1-RC@16"
want="$want dp16-tp2-pp1-cp1-noRC@32 dp16-tp2-pp1-cp1-RC@32 $alone"
if [ -z "$alone" ] || [ "$scaling" != "$want" ]; then
  echo "FAIL: --devices 8,16,32 --strategy tp2,tp2-RC gave '$scaling', want '$want'"
  fail=1
fi
# Each row's scaling efficiency: the same strategy's device-seconds per iteration at the first count over its own.
"$lmsim" predict --model Llama-3-8B --system h100_sxm_80g --devices 8,32 --strategy tp2,tp2-RC --json 2>/dev/null |
  python3 -c '
import json, sys
d = json.load(sys.stdin)["predictions"]
for i, p in enumerate(d):
    base = d[i % 2]
    want = base["iteration_time_s"] * base["devices"] / (p["iteration_time_s"] * p["devices"])
    assert abs(p["scaling_efficiency"] - want) < 1e-12 and (i >= 2 or p["scaling_efficiency"] == 1), (i, p)
assert all(p["scaling_efficiency"] < 1 for p in d[2:])' || { echo "FAIL: scaling_efficiency"; fail=1; }
expect 0 "scaling %: device-seconds per iteration at 8 devices over those here" predict --model Llama-3-8B \
  --system h100_sxm_80g --devices 8,32 --strategy tp2
expect 2 "'dp8-tp2' uses dp\*tp\*pp\*cp = 16 devices, --devices is 8" predict --model Llama-3-8B --system h100_sxm_80g \
  --devices 8,16 --strategy dp8-tp2
expect 2 "take one --strategy and one --devices; 1 strategy at 2 device counts were given" predict \
  --model Llama-3-8B --system h100_sxm_80g --devices 8,16 --strategy tp2 --emit megatron
expect 2 "8 devices are not a multiple of tp\*pp\*cp = 3" predict --model Qwen3-0.6B --system v100_sxm2_32g --devices 8 \
  --strategy tp1-pp3-RC
# --set KEY=VALUE: one training setting, checked as the settings JSON is.
expect 2 "--set: field 'nosuch': unknown key" predict --model Qwen3-0.6B --system v100_sxm2_32g \
  --strategy dp8-tp1-pp1-cp1-RC --set nosuch=1
expect 2 "--set: field 'fsdp': expected KEY=VALUE" predict --model Qwen3-0.6B --system v100_sxm2_32g \
  --strategy dp8-tp1-pp1-cp1-RC --set fsdp
expect 2 "--set: field 'cp_comm_type'" search --model Qwen3-0.6B --system v100_sxm2_32g --devices 8 \
  --set cp_comm_type=ring
expect 0 "unfused kernels" predict --model Qwen3-0.6B --system v100_sxm2_32g --strategy dp8-tp1-pp1-cp1-RC \
  --set fused_kernels=false
# A stack's precision-bound settings follow a precision set over it (Megatron-Bridge's mixed-precision recipes set
# them together); named alongside, a contradiction is still refused. From a settings file alike.
bridge=(predict --model Llama-3-8B --system h100_sxm_80g --stack megatron-bridge --strategy dp8-tp1-pp1-cp1-noRC)
expect 0 "precision bf16: fp8_param_gather off" "${bridge[@]}" --set precision=bf16
expect 2 "fp8_param_gather needs precision fp8" "${bridge[@]}" --set precision=bf16 --set fp8_param_gather=true
printf '{"precision": "fp16"}\n' > "$tmp/fp16.json"
expect 0 "fp16.json: precision fp16: reuse_fp32_param off" predict --model Qwen3-0.6B --system ascend_910b3_64g \
  --stack npu --strategy dp8-tp1-pp1-cp1-RC --settings "$tmp/fp16.json"
# `models --model` shows how a HuggingFace config is read; an unsupported one, or a layer pattern lmsim cannot
# describe, is named.
fixtures=$(cd "$(dirname "$0")/fixtures/hf" && pwd)
expect 0 "glm4p5_air  106.852" models --model "$fixtures/glm4p5_air/config.json"
expect 2 "unknown model 'NoSuch'" models --model NoSuch
printf '{"architectures": ["Starcoder2ForCausalLM"], "hidden_size": 3072}\n' > "$tmp/starcoder2.json"
expect 2 "field 'architectures': 'Starcoder2ForCausalLM' is not a supported architecture" models --model "$tmp/starcoder2.json"
python3 -c "
import json
c = json.load(open('$fixtures/gpt_oss_20b/config.json'))
c['layer_types'][0] = 'full_attention'
json.dump(c, open('$tmp/gpt_oss_bad.json', 'w'))"
expect 2 "field 'layer_types': full-attention layers are not every n-th layer" predict --model "$tmp/gpt_oss_bad.json" \
  --system h100_sxm_80g --strategy dp8-tp1-pp1-cp1-ep8-RC
# A device without the frameworks' fused attention (V100, sm70): stored scores by default, flash_attention true warned.
printf '{"flash_attention": true}\n' > "$tmp/flash.json"
expect 0 "$tmp/flash.json: flash_attention true on v100_sxm2_32g" predict --model Qwen3-0.6B --system v100_sxm2_32g \
  --strategy dp8-tp1-pp1-cp1-RC --settings "$tmp/flash.json"
expect 0 "attention scores stored" predict --model Qwen3-0.6B --system v100_sxm2_32g --strategy dp8-tp1-pp1-cp1-RC
expect 0 "flash attention" predict --model Qwen3-0.6B --system a100_sxm_80g --strategy dp8-tp1-pp1-cp1-RC
# Outputs: a device is written through, never replaced; an output that is an input, or a folder, is refused.
printf '{"params": {"kernel_launch_us": 5}}\n' > "$tmp/theta_in.json"
expect 0 "" predict --model Qwen3-0.6B --system v100_sxm2_32g --strategy dp8-tp1-pp1-cp1-RC --gemms-csv /dev/null
[ -c /dev/null ] || { echo "FAIL: /dev/null is no longer a character device"; fail=1; }
expect 2 "also an input" predict --model Qwen3-0.6B --system v100_sxm2_32g --strategy dp8-tp1-pp1-cp1-RC \
  --params "$tmp/theta_in.json" --gemms-csv "$tmp/theta_in.json"
grep -q kernel_launch_us "$tmp/theta_in.json" || { echo "FAIL: input overwritten"; fail=1; }
# calibrate refuses a bad output once its inputs are read and before the fit, not after: the fit's first line
# ("calibrating ...") never shows.
before_fit() {
  if grep -q "calibrating" "$tmp/err"; then echo "FAIL: calibrate $* was refused after the fit started"; fail=1; fi
}
expect 2 "also an input" calibrate --platform gpu --start "$tmp/theta_in.json" --out "$tmp/theta_in.json"
before_fit --start theta_in.json --out theta_in.json
mkdir -p "$tmp/adir"
expect 2 "not a regular file" calibrate --platform gpu --out "$tmp/adir"
before_fit --out adir
expect 2 "not a regular file" calibrate --platform gpu --out "$tmp/ok.json" --report "$tmp/adir"
before_fit --report adir
expect 2 "no/such: field .--report.: output folder does not exist" calibrate --platform gpu --out "$tmp/ok.json" --report "$tmp/no/such"
before_fit --report no/such
[ -e "$tmp/ok.json" ] && { echo "FAIL: calibrate wrote --out although --report failed"; fail=1; }
ls "$tmp" | grep -q "\.tmp\." && { echo "FAIL: temporary files left behind"; fail=1; }

# Names: case-insensitive presets, "did you mean" for presets and JSON keys.
expect 0 "" predict --model llama-3-8b --system H100_SXM_80G --strategy dp8-tp1-pp1-cp1-noRC
expect 2 "did you mean 'Llama-3-8B'" predict --model Llama-3-8 --system h100_sxm_80g --strategy dp8-tp1-pp1-cp1-noRC
printf '{"name":"x","hidden_size":64,"num_layers":2,"num_attention_heads":4,"ffn_hidden_size":128,"vocab_size":100,"tied_embedding":true}' > "$tmp/typo.json"
expect 2 "did you mean 'tied_embeddings'" predict --model "$tmp/typo.json" --system h100_sxm_80g --strategy dp1-tp1-pp1-cp1-noRC
# A system file whose direct-link table is not symmetric: refused naming the file and intra_node.links.
"$lmsim" systems --json | python3 -c "
import json,sys
systems={s['name']: s for s in json.load(sys.stdin)}
v=systems['v100_sxm2_32g']
assert v['theta']['kind'] == 'fitted' and systems['h200_sxm_141g']['theta']['kind'] == 'prior_from_fit', systems
assert systems['h200_sxm_141g']['theta']['file'].endswith('params_h100_sxm_80g.json'), systems['h200_sxm_141g']
assert systems['b200_sxm_180g']['mxfp8'] and not systems['h100_sxm_80g']['mxfp8'], 'mxfp8'
assert systems['h100_sxm_80g']['fp8_block_scaled_gemm_throughput'] == 0.81, 'block-scaled GEMMs'
assert systems['b200_sxm_180g']['fp8_block_scaled_gemm_throughput'] == 1, 'block-scaled GEMMs'
v['intra_node']['links'][0][1]=2
json.dump(v,open(sys.argv[1],'w'))" "$tmp/mesh.json"
expect 0 "4500 MX" systems  # the table marks MXFP8 tensor cores beside the FP8 peak
expect 2 "intra_node.links is not symmetric" predict --model Qwen3-0.6B --system "$tmp/mesh.json" --strategy dp4-tp2-pp1-cp1-noRC
expect 2 "mesh.json" predict --model Qwen3-0.6B --system "$tmp/mesh.json" --strategy dp4-tp2-pp1-cp1-noRC
expect 2 "not none|noRC" search --model Qwen3-0.6B --system v100_sxm2_32g --devices 8 --recompute sometimes
expect 2 "neither tp nor a positive integer" search --model Qwen3-30B-A3B --system h100_sxm_80g --devices 8 --etp 0
expect 2 "no layout with --tp 3 is valid for 8 devices" search --model Qwen3-0.6B --system v100_sxm2_32g --devices 8 --tp 3
expect 2 "etp equal to tp" predict --model Qwen3-30B-A3B --system h100_sxm_80g --strategy dp4-tp2-pp1-cp1-ep8-etp2-noRC
expect 2 "neither all nor a positive number of layers" search --model Llama-3-8B --system h100_sxm_80g --devices 8 --recompute-layers 0
expect 2 "the recompute field is not RC" predict --model Llama-3-8B --system h100_sxm_80g --strategy dp8-tp1-pp1-cp1-selRC-block2

# Numbers: non-finite options, a negative chunk, sizes predict would refuse (issue: one validation path).
srch=(search --model Llama-3-8B --system h100_sxm_80g --devices 8 --top 1)
expect 2 "not a finite number" "${srch[@]}" --token-budget nan
expect 2 "differs from --train-tokens" "${srch[@]}" --train-tokens 1e9 --token-budget 1e12
expect 2 "not a finite number" "${srch[@]}" --memory-margin inf
expect 2 "not a finite number" "${srch[@]}" --checkpoint-every nan
expect 2 "not in range" "${srch[@]}" --chunk -1
expect 2 "not a finite number" predict --model Llama-3-8B --system h100_sxm_80g --strategy dp8 --train-tokens nan
expect 2 "train-tokens: Value 0 not in range" predict --model Llama-3-8B --system h100_sxm_80g --strategy dp8 --train-tokens 0
expect 2 "train-tokens: Value 1e19 not in range" predict --model Llama-3-8B --system h100_sxm_80g --strategy dp8 --train-tokens 1e19
expect 2 "train-tokens: Value 1e19 not in range" "${srch[@]}" --train-tokens 1e19
expect 2 "global_batch_size" "${srch[@]}" --global-batch 1099511627776
expect 2 "not a finite number" calibrate --platform gpu --out "$tmp/x.json" --ftol-rel nan
expect 2 "no such parameter" calibrate --platform gpu --out "$tmp/x.json" --fix nope=1
expect 2 "is not a number in" calibrate --platform gpu --out "$tmp/x.json" --fix kernel_launch_us=-4
expect 2 "no longer a platform parameter" calibrate --platform gpu --out "$tmp/x.json" --fix optimizer_bytes_per_param=12
[ -e "$tmp/x.json" ] && { echo "FAIL: calibrate wrote output after bad input"; fail=1; }
expect 2 "not divisible" predict --model Qwen3-0.6B --system v100_sxm2_32g --strategy dp1-tp1-pp8-cp1-RC --stack gpu
expect 2 "unknown stack 'megatron-brige' (did you mean 'megatron-bridge'?); the stacks: gpu, npu," predict \
  --model Qwen3-0.6B --system h100_sxm_80g --strategy dp8-tp1-pp1-cp1-RC --stack megatron-brige
expect 2 "readings.csv: file does not exist" evaluate --published "$tmp/no_such_folder"
expect 2 "--predictions and --models apply to datasets" evaluate --published "$LMSIM_DATA_DIR/public" --models x
expect 2 "excludes" evaluate --published "$LMSIM_DATA_DIR/public" --dataset "$LMSIM_DATA_DIR/lmsimbench"
expect 2 "unknown stack 'nemo'" search --model Qwen3-0.6B --system h100_sxm_80g --devices 8 --stack nemo
expect 2 "uses dp\*tp\*pp\*cp = 8 devices, --devices is 16" predict --model Qwen3-0.6B --system v100_sxm2_32g \
  --strategy dp8-tp1-pp1-cp1-RC --devices 16
# An MoE name as LM-SimBench writes it (dp·tp·pp·cp·ep = devices) is read with Megatron's dp·ep; one that adds up
# neither way names both products.
expect 0 "Megatron's data-parallel degree is dp·ep = 16 (dp16-tp1-pp1-cp1-ep8-RC)" predict --model Qwen3-30B-A3B \
  --system h100_sxm_80g --strategy dp2-tp1-pp1-cp1-ep8-RC --devices 16
expect 2 "(dp\*tp\*pp\*cp\*ep = 16) devices, --devices is 32" predict --model Qwen3-30B-A3B --system h100_sxm_80g \
  --strategy dp2-tp1-pp1-cp1-ep8-RC --devices 32
expect 2 "'sp' and 'sp' set the same thing" predict --model Qwen3-0.6B --system h100_sxm_80g \
  --strategy dp4-tp2-pp1-cp1-RC-sp-sp
expect 2 "no bf16" predict --model Qwen3-0.6B --system v100_sxm2_32g --strategy dp8-tp1-pp1-cp1-RC --settings <(echo '{"precision":"bf16"}')
# Contradicting settings name the setting to blame as the field.
expect 2 "field 'fp8_param_gather': fp8_param_gather needs precision fp8" predict --model Qwen3-0.6B \
  --system h100_sxm_80g --strategy dp8-tp1-pp1-cp1-RC --settings <(echo '{"precision":"bf16","fp8_param_gather":true}')
expect 2 "field 'cp_comm_type': 'ring' is not one of p2p, a2a, allgather" predict --model Qwen3-0.6B \
  --system h100_sxm_80g --strategy dp4-tp1-pp1-cp2-RC --settings <(echo '{"cp_comm_type":"ring"}')
# Ulysses splits the heads over tp·cp: Qwen3-0.6B's 16 over tp 4 x cp 8 cannot.
expect 2 "tensor_parallel x context_parallel" predict --model Qwen3-0.6B --system h100_sxm_80g \
  --strategy dp1-tp4-pp1-cp8-RC --settings <(echo '{"cp_comm_type":"a2a"}')
echo '{"params": {"matmul_efficiency": 3}}' >"$tmp/theta.json"
expect 2 "matmul_efficiency" predict --model Qwen3-0.6B --system v100_sxm2_32g --strategy dp8-tp1-pp1-cp1-RC --params "$tmp/theta.json"
echo '{"params": {"matmul_efficiency": 0.5,}' >"$tmp/broken.json"
expect 2 "broken.json:1" predict --model Qwen3-0.6B --system v100_sxm2_32g --strategy dp8-tp1-pp1-cp1-RC --params "$tmp/broken.json"
echo '{"name":"m","hidden_size":-4,"num_layers":2,"num_attention_heads":2,"ffn_hidden_size":8,"vocab_size":10}' >"$tmp/model.json"
expect 2 "hidden_size" predict --model "$tmp/model.json" --system v100_sxm2_32g --strategy dp8-tp1-pp1-cp1-RC
expect 2 "does not exist" dataset info "$tmp/none"
# Several strategies are compared only once every one of them predicts: a bad one is named, nothing is written.
expect 2 "'dp2-tp3-pp1-cp1-RC' cannot run" predict --model Qwen3-0.6B --system v100_sxm2_32g \
  --strategy dp8-tp1-pp1-cp1-RC,dp2-tp3-pp1-cp1-RC --json
[ -s "$tmp/out" ] && { echo "FAIL: a refused comparison wrote $(head -c 200 "$tmp/out")"; fail=1; }
expect 2 "'deepep' is not one of alltoall, allgather, flex" search --model Phi-3.5-MoE-instruct \
  --system ascend_910b3_64g --devices 16 --moe-dispatcher alltoall,deepep
# --vary: a key the settings do not have, a value of the wrong type, a key another option sweeps or --set fixes, an
# empty value, and no varied setting a system can run.
vary="search --model Qwen3-0.6B --system v100_sxm2_32g --devices 8 --global-batch 32"
expect 2 "--vary: field 'bogus': unknown key" $vary --vary bogus=1,2
expect 2 "field 'tp_comm_overlap': expected true or false" $vary --vary tp_comm_overlap=true,maybe
expect 2 "field '--vary': sequence_parallel has its own option: --sp" $vary --vary sequence_parallel=true,false
expect 2 "field '--vary': precision is also fixed by --set precision=fp16" $vary --vary precision=fp16 --set precision=fp16
expect 2 "'precision=fp16,,bf16': an empty value" $vary --vary precision=fp16,,bf16
expect 2 "field '--vary': v100_sxm2_32g can run none of the varied settings" $vary --vary precision=bf16,fp8
# Each value alone is checked when given; how it sits with the other settings, in each combination: FP8 parameters
# run under the Megatron-Bridge stack's FP8, and are refused, naming the combination, without it.
expect 2 "field '--vary': h100_sxm_80g, fp8_param_gather=true: fp8_param_gather needs precision fp8" \
  search --model Qwen3-0.6B --system h100_sxm_80g --devices 8 --vary fp8_param_gather=true,false
expect 2 "field '--vary': h100_sxm_80g, fp8_param_gather=true: fp8_param_gather needs precision fp8" \
  predict --model Qwen3-0.6B --system h100_sxm_80g --strategy dp8 --vary fp8_param_gather=true
expect 0 "" search --model Qwen3-0.6B --system h100_sxm_80g --devices 8 --stack megatron-bridge \
  --vary fp8_param_gather=true,false
expect 2 "field '--vary': seq_length has its own option: --seq" predict --model Qwen3-0.6B --system v100_sxm2_32g \
  --strategy dp8 --vary seq_length=1024,2048
expect 2 "h100_sxm_80g: field 'fp8_recipe': system has no MXFP8 tensor cores" predict --model Qwen3-0.6B \
  --system h100_sxm_80g --strategy dp8 --set precision=fp8 --set fp8_recipe=mxfp8
expect 2 "--set: field 'lora_target_modules': \"linear_q\" is not one of linear_qkv" predict --model Qwen3-0.6B \
  --system h100_sxm_80g --strategy dp8 --set lora_rank=8 --set 'lora_target_modules=["linear_q"]'
expect 2 "--set: field 'lora_rank': LoRA under fsdp is not modelled" predict --model Qwen3-0.6B \
  --system h100_sxm_80g --strategy dp8 --set lora_rank=8 --set fsdp=true
expect 2 "--set: field 'document_tokens': packed documents need flash attention" predict --model Qwen3-0.6B \
  --system h100_sxm_80g --strategy dp8 --set document_tokens=512 --set flash_attention=false
expect 2 "h100_sxm_80g: field 'peak_tflops': system has no fp4 throughput" predict --model Qwen3-0.6B \
  --system h100_sxm_80g --strategy dp8 --set precision=fp4
expect 2 "field '--vary': v100_sxm2_32g, precision=fp8: system has no fp8 throughput" predict --model Qwen3-0.6B \
  --system v100_sxm2_32g --strategy dp8 --vary precision=fp16,fp8
expect 2 "and one value per --vary; 1 strategy at 1 device count under 2 combinations of settings were given" predict \
  --model Qwen3-0.6B --system v100_sxm2_32g --strategy dp8 --vary hidden_dropout=true,false --diagnostics
expect 2 "--max-days: needs --train-tokens" search --model Qwen3-0.6B --system h100_sxm_80g --devices 8 --max-days 30
expect 2 "max-days" search --model Qwen3-0.6B --system h100_sxm_80g --devices 8 --train-tokens 1e9 --max-days nan
expect 2 "max-days" search --model Qwen3-0.6B --system h100_sxm_80g --devices 8 --train-tokens 1e9 --max-days 0
# An EP that fits only with whole experts on each rank names the -etp1 spelling that runs.
expect 2 "expert tensor parallel = tp by default, dp1-tp2-pp8-cp1-ep2-etp1-RC keeps each expert whole on a rank and runs" \
  predict --model Phi-3.5-MoE-instruct --system ascend_910b3_64g --devices 16 --strategy dp1-tp2-pp8-cp1-ep2-RC
# A strategy that cannot run says with which figures, and what would split the layers.
expect 2 "(28 layers over pp 2 x vpp 4 = 8 chunks; with pp 2, vpp 1, 2, 3, 5, 7, 14 or 15 splits them)" \
  predict --model Qwen3-0.6B --system v100_sxm2_32g --strategy dp2-tp2-pp2-cp1-RC-vpp4 --global-batch 64
expect 2 "pp 1, 2, 3, 4, 5, 6, 7, 10, 14, 15, 28 or 30 splits them); --allow-uneven-layers lets the first stages" \
  predict --model Qwen3-0.6B --system v100_sxm2_32g --strategy dp1-tp1-pp8-cp1-RC
expect 2 "take one --strategy and one --devices; 2 strategies at 1 device count were given" predict --model Qwen3-0.6B --system v100_sxm2_32g \
  --strategy dp8-tp1-pp1-cp1-RC --strategy dp4-tp2-pp1-cp1-RC --emit megatron
expect 2 "seq" predict --model Qwen3-0.6B --system v100_sxm2_32g --strategy dp8-tp1-pp1-cp1-RC --seq abc
expect 2 "not a positive integer" predict --model Qwen3-0.6B --system v100_sxm2_32g --strategy dp8-tp1-pp1-cp1-RC --seq 0
expect 2 "not a positive integer" predict --model Qwen3-0.6B --system v100_sxm2_32g --strategy dp8-tp1-pp1-cp1-RC --global-batch 2.5
expect 2 "no measured runs" calibrate --platform gpu --models NoSuch --out "$tmp/p.json"
expect 2 "matches no measured" calibrate --platform gpu --test-on dp9-tp1-pp1-cp1-RC --out "$tmp/p.json"
expect 2 "exactly one" calibrate --out "$tmp/p.json"
[ -e "$tmp/p.json" ] && { echo "FAIL: a failed calibrate left $tmp/p.json"; fail=1; }
# The target settings of a source-only shortlist are checked like predict's, and a refused one writes nothing.
cp -r "$LMSIM_DATA_DIR/lmsimbench" "$tmp/npu_only"
rm -r "$tmp/npu_only/processed_gpu/qwen3_1.7b_4k_tp_pp_sweep_cp1_gpu"
sed -i '/qwen3_1.7b_4k_tp_pp_sweep_cp1_gpu/d' "$tmp/npu_only/data_manifest.csv"
expect 2 "--set: field 'bogus': unknown key" shortlist --dataset "$tmp/npu_only" --set bogus=1 --out "$tmp/sl.h5"
expect 2 "--set: field 'precision': v100_sxm2_32g has no fp8 throughput" shortlist --dataset "$tmp/npu_only" \
  --set precision=fp8 --out "$tmp/sl.h5"
expect 2 "unknown stack" shortlist --dataset "$tmp/npu_only" --stack nosuch --out "$tmp/sl.h5"
expect 2 "nosuch.json: field '--to': system file does not exist" shortlist --dataset "$tmp/npu_only" --to "$tmp/nosuch.json" --out "$tmp/sl.h5"
[ -e "$tmp/sl.h5" ] && { echo "FAIL: a refused shortlist left $tmp/sl.h5"; fail=1; }
rm -r "$tmp/npu_only"
ls "$tmp" | grep -q tmp && { echo "FAIL: temporary files left behind"; fail=1; }
if [ $fail = 0 ]; then echo "cli_bad_input: all cases passed"; fi
exit $fail
