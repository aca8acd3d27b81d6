#!/usr/bin/env bash
# Search throughput: configurations/s with 1 and 2 MPI ranks (one OpenMP thread each) on a space of > 10^7
# candidates, and on Calculon's example space (Turing-NLG-530B-like model, 5,128 devices).
#   bash bench/search_bench.sh [build-dir]
set -euo pipefail
build=${1:-build}
lmsim="$build/apps/lmsim"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
run() {  # run <ranks> <label> <args...>
  local np=$1 label=$2
  shift 2
  OMP_NUM_THREADS=1 mpirun -np "$np" "$lmsim" search --quiet --json --top 20 "$@" 2>/dev/null |
    python3 -c "import json,sys; j=json.load(sys.stdin); print('%-34s ranks=%d  space=%11d  wall=%7.3f s  rate=%8.2f M configurations/s' % ('$label', j['ranks'], j['space_size'], j['wall_s'], j['configurations_per_s']/1e6))"
}
big=(--model Llama-3-70B --system h100_sxm_80g,a100_sxm_80g --devices 512,1024,2048,4096 --seq 4096,8192,16384
     --global-batch 512,1024,2048,4096)
run 1 "Llama-3-70B, 24 scenarios" "${big[@]}"
run 2 "Llama-3-70B, 24 scenarios" "${big[@]}"
calc=(--model Turing-NLG-530B --system a100_sxm_80g --devices 5128 --seq 2048 --global-batch 2564,5128,10256 --allow-cross-node-tp)
run 1 "Calculon example (530B, 5128 dev)" "${calc[@]}"
run 2 "Calculon example (530B, 5128 dev)" "${calc[@]}"

# Top-k cost: the same space with --top 20 and --top 100000 (target: at most 2x).
OMP_NUM_THREADS=1 mpirun -np 2 "$lmsim" search --quiet --json --top 100000 "${big[@]}" 2>/dev/null |
  python3 -c "import json,sys; j=json.load(sys.stdin); print('%-34s ranks=%d  space=%11d  wall=%7.3f s  rate=%8.2f M configurations/s' % ('Llama-3-70B, --top 100000', j['ranks'], j['space_size'], j['wall_s'], j['configurations_per_s']/1e6))"

# --write-all memory: peak RSS per rank (targets: < 400 MiB per rank at 2.5 M candidates; ~90 M complete).
wa() {  # wa <label> <args...>
  local label=$1 out
  shift
  out=$(mktemp -d)
  OMP_NUM_THREADS=1 mpirun -np 2 /usr/bin/time -f "%M" "$lmsim" search --quiet --json --top 20 --write-all \
    --out "$out/all.h5" "$@" 2>"$out/err" >"$out/json"
  python3 - "$label" "$out" <<'PY'
import json, os, sys
label, d = sys.argv[1], sys.argv[2]
j = json.load(open(os.path.join(d, "json")))
rss = [int(l) for l in open(os.path.join(d, "err")) if l.strip().isdigit()]
print("%-34s ranks=2  space=%11d  peak RSS per rank %s MiB  file %.2f GB" % (label, j["space_size"],
      "/".join("%.0f" % (r / 1024) for r in rss), os.path.getsize(os.path.join(d, "all.h5")) / 1e9))
PY
  rm -rf "$out"
}
wa "--write-all, 2.6 M candidates" --model Llama-3-70B --system h100_sxm_80g,a100_sxm_80g --devices 1024,2048 \
  --seq 4096,8192,16384 --global-batch 1024,2048
wa "--write-all, 94 M candidates" --model Llama-3-70B --system h100_sxm_80g,a100_sxm_80g \
  --devices 512,768,1024,1536,2048,3072,4096,6144,8192 --seq 2048,4096,8192,16384,32768 \
  --global-batch 512,768,1024,1536,2048
