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
