# Shared by the MPI test scripts (sourced after `lmsim=$1`): Open MPI as root, a scratch folder, failure
# bookkeeping, HDF5 dumps, and a search killed with -9 once it has checkpointed.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
dump() { h5dump -d "$2" "$1" | tail -n +2; }

# wait_for_checkpoint OUT.h5: until a rank's first checkpoint of that search exists (at most 10 s).
wait_for_checkpoint() {
  for _ in $(seq 1 200); do
    sleep 0.05
    ls "$1.ckpt/"rank_*.ckpt >/dev/null 2>&1 && return 0
  done
}

# kill_midway OUT.h5 SEARCH_ARGS...: a 2-rank search started in its own session and killed with -9 (every rank)
# shortly after its first checkpoint appears; returns once no rank is left.
kill_midway() {
  local out=$1 pid
  shift
  setsid bash -c "OMP_NUM_THREADS=1 exec mpirun -np 2 '$lmsim' search $* --quiet --out '$out'" >/dev/null 2>&1 &
  pid=$!
  wait_for_checkpoint "$out"
  sleep 0.3
  kill -9 -- -"$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  for _ in $(seq 1 100); do pgrep -f "$(basename "$out")" >/dev/null || break; sleep 0.05; done
}
