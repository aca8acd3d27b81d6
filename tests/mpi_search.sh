#!/usr/bin/env bash
# MPI behaviour of `lmsim search`: identical HDF5 rankings for 1, 2 and 3 ranks and several thread counts;
# kill -9 mid-sweep then --resume gives the uninterrupted ranking; SIGTERM checkpoints and exits non-zero;
# an error on one rank aborts the job; no output appears at the final path unless the run completed.
set -u
lmsim="$1"
source "$(dirname "$0")/mpi_common.sh"
say() { echo "$*"; }
same_ranking() {  # same_ranking a.h5 b.h5
  local msg
  msg=$(same_datasets "$1" "$2" /ranking/config_name /ranking/scenario /ranking/iteration_time_s \
    /ranking/max_peak_memory_bytes /ranking/objective /pareto/config_name /feasibility/reason /feasibility/count) ||
    { bad "$1 and $2: $msg"; return 1; }
}
space=(--model Qwen3-0.6B --system v100_sxm2_32g,ascend_910b3_64g --devices 8,16,32 --global-batch 32,64 --top 15)
for np in 1 2 3; do
  for th in 1 2; do
    OMP_NUM_THREADS=$th timeout 120 mpirun -np $np "$lmsim" search "${space[@]}" --quiet --out "$tmp/r_${np}_$th.h5" \
      >/dev/null 2>"$tmp/err" || bad "search -np $np threads $th failed: $(tail -3 "$tmp/err")"
  done
done
for f in "$tmp"/r_*.h5; do same_ranking "$tmp/r_1_1.h5" "$f"; done
say "determinism across ranks/threads checked"

# Context-parallel algorithms swept where cp > 1: their column in /ranking and /all, their token in the names.
OMP_NUM_THREADS=1 timeout 120 mpirun -np 2 "$lmsim" search --model Llama-3-8B --system h100_sxm_80g --devices 16 \
  --seq 65536 --global-batch 64 --cp 1,2,4 --cp-comm-type p2p,ulysses_cp_algo --top 50 --write-all --quiet \
  --out "$tmp/cpc.h5" >/dev/null 2>"$tmp/err" || bad "CP-algorithm search failed: $(tail -3 "$tmp/err")"
/usr/bin/python3 - "$tmp/cpc.h5" <<'PY' || bad "CP-algorithm columns"
import sys, h5py
f = h5py.File(sys.argv[1], "r")
names = [n.decode() for n in f["/ranking/config_name"][...]]
algos = [a.decode() for a in f["/ranking/cp_comm_type"][...]]
cps = f["/ranking/cp"][...]
assert {a for a, c in zip(algos, cps) if c > 1} == {"p2p", "a2a"}, algos
for n, a, c in zip(names, algos, cps):
    assert n.endswith("-" + a) == (c > 1), (n, a, c)
assert h5py.check_enum_dtype(f["/all/cp_comm_type"].dtype) == {"p2p": 0, "a2a": 1, "allgather": 2, "a2a+p2p": 3}
assert (f["/ranking/ulysses_degree"][...] == 0).all() and (f["/all/ulysses_degree"][...] == 0).all()
PY

# Partial full recompute swept on request: its layer count in /ranking and /all, its token in the names.
OMP_NUM_THREADS=1 timeout 120 mpirun -np 2 "$lmsim" search --model Llama-3-70B --system h100_sxm_80g --devices 32 \
  --seq 8192 --global-batch 128 --recompute RC --recompute-layers 2,4 --top 50 --write-all --quiet \
  --out "$tmp/rcl.h5" >/dev/null 2>"$tmp/err" || bad "block-recompute search failed: $(tail -3 "$tmp/err")"
/usr/bin/python3 - "$tmp/rcl.h5" <<'PY' || bad "recompute_num_layers columns"
import sys, h5py
f = h5py.File(sys.argv[1], "r")
names = [n.decode() for n in f["/ranking/config_name"][...]]
layers = f["/ranking/recompute_num_layers"][...]
assert 2 in set(layers) and set(layers) <= {0, 2, 4}, set(layers)
for n, k in zip(names, layers):
    assert ("-RC-block%d-" % k in n) if k else ("-block" not in n), (n, k)
assert set(f["/all/recompute_num_layers"][...]) == {0, 2, 4}
PY

# Every rank resolves the same model and θ: their warnings are said once (rank 0), not once per rank.
OMP_NUM_THREADS=1 timeout 120 mpirun -np 3 "$lmsim" search --model Qwen3-30B-A3B --system h100_sxm_80g --devices 16 \
  --global-batch 256 --top 3 >/dev/null 2>"$tmp/moe.err" || bad "3-rank MoE search failed: $(tail -3 "$tmp/moe.err")"
n=$(grep -c "is a mixture of experts" "$tmp/moe.err")
[ "$n" = 1 ] || bad "the MoE warning was printed $n times by 3 ranks (expected once)"

# kill -9 mid-sweep, then resume. The space takes about 4 s on 2 ranks here, ten times the 0.35 s after which
# the kill and the SIGTERM below arrive (a killed run that had finished fails the test).
big=(--model Llama-3-70B --system h100_sxm_80g,a100_sxm_80g --devices 512,768,1024,1536,2048,3072,4096,6144,8192
     --seq 4096,16384,65536 --global-batch 512,1024,4096 --top 15 --chunk 50000 --checkpoint-every 0.05)
OMP_NUM_THREADS=1 timeout 300 mpirun -np 2 "$lmsim" search "${big[@]}" --quiet --out "$tmp/full.h5" >/dev/null 2>&1 ||
  bad "uninterrupted big search failed"
kill_midway "$tmp/killed.h5" "${big[@]}"
[ -e "$tmp/killed.h5" ] && bad "a killed search left a file at the final path"
ls "$tmp/killed.h5.ckpt/"rank_*.ckpt >/dev/null 2>&1 || bad "no checkpoint was written before the kill"
# Resuming with anything that changes the results (here the memory margin) is refused, the checkpoint kept.
if OMP_NUM_THREADS=1 timeout 120 mpirun -np 1 "$lmsim" search "${big[@]}" --quiet --resume --memory-margin 1 \
     --out "$tmp/killed.h5" >"$tmp/mixed.out" 2>&1; then
  bad "resume with another --memory-margin was accepted"
else
  grep -q "different search" "$tmp/mixed.out" || bad "changed-option resume: unclear message: $(tail -2 "$tmp/mixed.out")"
fi
ls "$tmp/killed.h5.ckpt/"rank_*.ckpt >/dev/null 2>&1 || bad "a refused resume removed the checkpoints"
OMP_NUM_THREADS=2 timeout 300 mpirun -np 3 "$lmsim" search "${big[@]}" --quiet --resume --out "$tmp/killed.h5" \
  >"$tmp/resume.out" 2>&1 || bad "resume failed: $(tail -3 "$tmp/resume.out")"
same_ranking "$tmp/full.h5" "$tmp/killed.h5" && say "kill -9 + resume (2 ranks -> 3 ranks) reproduces the ranking"
[ -d "$tmp/killed.h5.ckpt" ] && bad "checkpoints left after a completed run"

# SIGTERM: checkpoint, non-zero exit, no output; then resume.
OMP_NUM_THREADS=1 mpirun -np 2 "$lmsim" search "${big[@]}" --quiet --out "$tmp/term.h5" >/dev/null 2>"$tmp/term.err" &
pid=$!
wait_for_checkpoint "$tmp/term.h5"
kill -TERM "$pid"
wait "$pid"
rc=$?
if [ "$rc" = 0 ] && [ -e "$tmp/term.h5" ]; then
  say "(search finished before SIGTERM arrived; SIGTERM case not exercised)"
else
  [ "$rc" != 0 ] || bad "SIGTERM run exited 0 without output"
  [ -e "$tmp/term.h5" ] && bad "SIGTERM left an output file"
  OMP_NUM_THREADS=1 timeout 300 mpirun -np 2 "$lmsim" search "${big[@]}" --quiet --resume --out "$tmp/term.h5" >/dev/null 2>&1 ||
    bad "resume after SIGTERM failed"
  same_ranking "$tmp/full.h5" "$tmp/term.h5" && say "SIGTERM + resume reproduces the ranking"
fi

# An error on a rank aborts the whole job with a message naming the rank, never a hang.
OMP_NUM_THREADS=1 timeout 60 mpirun -np 2 "$lmsim" search --model NoSuchModel --system h100_sxm_80g --devices 8 \
  --out "$tmp/err.h5" >/dev/null 2>"$tmp/abort.err"
rc=$?
[ "$rc" = 0 ] && bad "an invalid search exited 0"
[ "$rc" = 124 ] && bad "an invalid search hung"
grep -q "rank" "$tmp/abort.err" || bad "abort message does not name the rank: $(head -3 "$tmp/abort.err")"
[ -e "$tmp/err.h5" ] && bad "a failed search left an output file"
[ $fail = 0 ] && echo "mpi_search: all checks passed"
exit $fail
