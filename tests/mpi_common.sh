# Shared by the MPI test scripts (sourced after `lmsim=$1`): Open MPI as root, a scratch folder, failure
# bookkeeping, HDF5 dataset comparison, and a search killed with -9 once it has checkpointed.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
# same_datasets A.h5 B.h5 DATASET...: each dataset has the same shape, type (enumeration names included) and bytes in
# both files; else it names the first that differs and fails. Compared in h5py: h5dump's text of a
# multi-million-row /all column takes seconds.
same_datasets() {
  /usr/bin/python3 - "$@" 2>&1 <<'PY'
import sys, h5py
files = [h5py.File(p, "r") for p in sys.argv[1:3]]
for d in sys.argv[3:]:
    missing = [p for p, f in zip(sys.argv[1:3], files) if d not in f]
    if missing:
        sys.exit("%s is missing in %s" % (d, missing[0]))
    x, y = (f[d] for f in files)
    if x.shape != y.shape or x.dtype != y.dtype or h5py.check_enum_dtype(x.dtype) != h5py.check_enum_dtype(y.dtype):
        sys.exit("%s differs in shape or type: %s %s against %s %s" % (d, x.shape, x.dtype, y.shape, y.dtype))
    u, v = x[()], y[()]
    if (u.tolist() != v.tolist()) if u.dtype.kind == "O" else (u.tobytes() != v.tobytes()):
        sys.exit("%s differs" % d)
PY
}

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
