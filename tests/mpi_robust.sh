#!/usr/bin/env bash
# Robustness of `lmsim search` under MPI: --write-all streams every candidate into /all identically on 1 and 2
# ranks and across kill -9 + resume; SIGTERM to one rank stops every rank; a corrupted checkpoint is refused by
# its checksum; ranks started with different searches (MPMD) are refused; two searches on one --out are refused;
# a failed search leaves no checkpoint folder.
set -u
lmsim="$1"
source "$(dirname "$0")/mpi_common.sh"
same() {  # same a.h5 b.h5 dataset...
  local msg
  [ -f "$1" ] && [ -f "$2" ] || { bad "missing $1 or $2"; return 1; }
  msg=$(same_datasets "$@") || { bad "$1 and $2: $msg"; return 1; }
}
all_sets=(/all/scenario /all/dp /all/tp /all/pp /all/vpp /all/micro_batch_size /all/recompute /all/sequence_parallel
          /all/status /all/iteration_time_s /all/max_peak_memory_bytes /ranking/config_name /feasibility/count)

# --write-all: identical on 1 and 2 ranks; one row per candidate; statuses agree with the feasibility counts.
space=(--model Qwen3-0.6B --system a100_sxm_80g,h100_sxm_80g --devices 8,16,32 --global-batch 32,64 --top 10
       --chunk 700)
OMP_NUM_THREADS=2 timeout 120 mpirun -np 1 "$lmsim" search "${space[@]}" --quiet --write-all --out "$tmp/a1.h5" \
  >/dev/null 2>"$tmp/err" || bad "write-all on 1 rank failed: $(tail -2 "$tmp/err")"
OMP_NUM_THREADS=1 timeout 120 mpirun -np 2 "$lmsim" search "${space[@]}" --quiet --write-all --out "$tmp/a2.h5" \
  >/dev/null 2>"$tmp/err" || bad "write-all on 2 ranks failed: $(tail -2 "$tmp/err")"
same "$tmp/a1.h5" "$tmp/a2.h5" "${all_sets[@]}"
/usr/bin/python3 - "$tmp/a2.h5" <<'PY' || fail=1
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
st = f["/all/status"]
names = h5py.check_enum_dtype(st.dtype)
codes = st[...]
n = int(f["/provenance"].attrs["space_size"])
assert len(codes) == n, (len(codes), n)
assert f["/all/sequence_parallel"].dtype == np.bool_, f["/all/sequence_parallel"].dtype
reasons = [r.decode() if isinstance(r, bytes) else r for r in f["/feasibility/reason"][...]]
for r, c in zip(reasons, f["/feasibility/count"][...]):
    assert (codes == names[r]).sum() == c, (r, c)
ok = codes == names["feasible"]
t = f["/all/iteration_time_s"][...]
assert (t[ok] > 0).all() and abs(t[ok].min() - f["/ranking/iteration_time_s"][0]) < 1e-12
print("write-all: %d rows, statuses match the feasibility counts" % n)
PY
ls "$tmp"/a1.h5.ckpt >/dev/null 2>&1 && bad "spool folder left after a completed --write-all"

# kill -9 during a --write-all run, then resume on another rank count: /all as uninterrupted.
big=(--model Llama-3-70B --system h100_sxm_80g,a100_sxm_80g --devices 512,1024,2048,4096 --seq 4096,8192,16384
     --global-batch 512,1024,2048 --top 15 --chunk 20000 --checkpoint-every 0.05 --write-all)
OMP_NUM_THREADS=1 timeout 300 mpirun -np 2 "$lmsim" search "${big[@]}" --quiet --out "$tmp/full.h5" >/dev/null 2>&1 ||
  bad "uninterrupted write-all search failed"
kill_midway "$tmp/killed.h5" "${big[@]}"
if [ -e "$tmp/killed.h5" ]; then
  echo "(write-all search finished before kill -9; resume case not exercised)"
else
  OMP_NUM_THREADS=2 timeout 300 mpirun -np 1 "$lmsim" search "${big[@]}" --quiet --resume --out "$tmp/killed.h5" \
    >"$tmp/resume.out" 2>&1 || bad "write-all resume failed: $(tail -3 "$tmp/resume.out")"
  same "$tmp/full.h5" "$tmp/killed.h5" "${all_sets[@]}" && echo "write-all: kill -9 + resume reproduces /all"
fi

# A corrupted checkpoint is refused by its checksum, naming the file.
slow=(--model Llama-3-70B --system h100_sxm_80g,a100_sxm_80g --devices 512,768,1024,1536,2048,3072,4096,6144,8192
      --seq 2048,4096,8192,16384,32768,65536 --global-batch 512,768,1024,1536,2048,4096 --top 15 --chunk 50000
      --checkpoint-every 0.05)
OMP_NUM_THREADS=1 mpirun -np 2 "$lmsim" search "${slow[@]}" --quiet --out "$tmp/c.h5" >/dev/null 2>&1 &
pid=$!
wait_for_checkpoint "$tmp/c.h5"
# SIGTERM to ONE rank stops every rank at its next chunk claim: the job ends soon, non-zero, without output.
start=$(date +%s.%N)
victim=$(pgrep -f "lmsim search .*c.h5" | tail -1)
kill -TERM "$victim"
wait "$pid"
rc=$?
took=$(python3 -c "print(round($(date +%s.%N) - $start, 2))")
if [ -e "$tmp/c.h5" ]; then
  echo "(search finished before SIGTERM; single-rank stop not exercised)"
else
  [ "$rc" != 0 ] || bad "SIGTERM to one rank: exit 0 without output"
  python3 -c "import sys; sys.exit(0 if $took < 5 else 1)" || bad "SIGTERM to one rank took $took s to stop the job"
  echo "SIGTERM to one rank stopped the job in $took s (exit $rc)"
  f=$(ls "$tmp/c.h5.ckpt/"rank_*.ckpt | head -1)
  python3 - "$f" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
i = b.index(b"\nC ") + 3
b[i] = ord("9") if b[i] != ord("9") else ord("8")
open(p, "wb").write(bytes(b))
PY
  OMP_NUM_THREADS=1 timeout 120 mpirun -np 1 "$lmsim" search "${slow[@]}" --quiet --resume --out "$tmp/c.h5" \
    >"$tmp/corrupt.out" 2>&1
  rc=$?
  [ "$rc" = 2 ] || bad "corrupted checkpoint: exit $rc, expected 2"
  grep -q "checksum" "$tmp/corrupt.out" && grep -q "rank_" "$tmp/corrupt.out" ||
    bad "corrupted checkpoint: unclear message: $(tail -2 "$tmp/corrupt.out")"
fi

# Two searches on one --out: the second is refused and does not touch the first's checkpoints.
OMP_NUM_THREADS=1 mpirun -np 1 "$lmsim" search "${slow[@]}" --quiet --out "$tmp/l.h5" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 200); do
  sleep 0.05
  [ -e "$tmp/l.h5.ckpt/lock" ] && break
done
OMP_NUM_THREADS=1 timeout 60 mpirun -np 1 "$lmsim" search "${space[@]}" --quiet --out "$tmp/l.h5" >"$tmp/lock.out" 2>&1
rc=$?
[ "$rc" = 2 ] || bad "second search on one --out: exit $rc, expected 2"
grep -q "another search" "$tmp/lock.out" || bad "second search on one --out: unclear message: $(tail -2 "$tmp/lock.out")"
kill -TERM "$pid" 2>/dev/null
wait "$pid" 2>/dev/null

# MPMD: ranks started with different arguments are refused, not merged.
OMP_NUM_THREADS=1 timeout 60 mpirun -np 1 "$lmsim" search "${space[@]}" --quiet --out "$tmp/m.h5" : \
  -np 1 "$lmsim" search "${space[@]}" --quiet --memory-margin 3 --out "$tmp/m.h5" >"$tmp/mpmd.out" 2>&1
rc=$?
[ "$rc" != 0 ] || bad "MPMD ranks with different searches exited 0"
grep -q "different search" "$tmp/mpmd.out" || bad "MPMD: unclear message: $(tail -3 "$tmp/mpmd.out")"
[ -e "$tmp/m.h5" ] && bad "MPMD left an output file"

# A search refused before sweeping leaves no checkpoint folder behind.
OMP_NUM_THREADS=1 timeout 60 mpirun -np 1 "$lmsim" search "${space[@]}" --quiet --out "$tmp/nodir/x.h5" >/dev/null 2>&1 &&
  bad "search into a missing folder exited 0"
OMP_NUM_THREADS=1 timeout 60 mpirun -np 1 "$lmsim" search --model NoSuch --system a100_sxm_80g --devices 8 --quiet \
  --out "$tmp/e.h5" >/dev/null 2>&1 && bad "search with an unknown model exited 0"
ls -d "$tmp"/e.h5* "$tmp"/nodir* 2>/dev/null | grep -q . && bad "leftovers after refused searches: $(ls "$tmp")"
# A full disk while writing the HDF5 file: exit 2 with a message, no crash, nothing at the final path, and
# --resume writes the result once there is room (needs a small tmpfs: root with mount rights, else skipped).
mkdir -p "$tmp/full"
if mount -t tmpfs -o size=2M tmpfs "$tmp/full" 2>/dev/null; then
  OMP_NUM_THREADS=1 timeout 60 mpirun -np 1 "$lmsim" search "${space[@]}" --quiet --write-all --out "$tmp/full/o.h5" \
    --checkpoint-dir "$tmp/full.ckpt" >"$tmp/full.out" 2>&1
  rc=$?
  [ "$rc" = 2 ] || bad "full disk: exit $rc, expected 2: $(grep -v info "$tmp/full.out" | tail -2)"
  grep -q "disk full" "$tmp/full.out" || bad "full disk: unclear message: $(grep -v info "$tmp/full.out" | tail -2)"
  [ -e "$tmp/full/o.h5" ] && bad "full disk: a partial file at the final path"
  ls "$tmp/full/" | grep -q tmp && bad "full disk: temporary file left: $(ls "$tmp/full")"
  OMP_NUM_THREADS=1 timeout 60 mpirun -np 1 "$lmsim" search "${space[@]}" --quiet --write-all --out "$tmp/a3.h5" \
    --checkpoint-dir "$tmp/full.ckpt" --resume >"$tmp/full2.out" 2>&1 || bad "resume after a full disk failed"
  same "$tmp/a1.h5" "$tmp/a3.h5" "${all_sets[@]}"
  umount "$tmp/full"
else
  echo "(cannot mount a small tmpfs here: full-disk case skipped)"
fi
[ $fail = 0 ] && echo "mpi_robust: all checks passed"
exit $fail
