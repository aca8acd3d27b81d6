#!/usr/bin/env bash
# MPI sweep of a strategy space: mpirun with N ranks (default 2), OpenMP threads per rank from OMP_NUM_THREADS.
#   bash jobs/sweep.sh OUT.h5 [lmsim search options...]      e.g. LMSIM_RANKS=4 bash jobs/sweep.sh results/x.h5 \
#        --model Llama-3-70B --system h100_sxm_80g --devices 1024 --seq 8192 --global-batch 1024
set -euo pipefail
source "$(dirname "$0")/env.sh"
out=$1
shift
ranks=${LMSIM_RANKS:-2}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
mpirun -np "$ranks" --bind-to none "$lmsim_bin" search --out "$out" "$@"
