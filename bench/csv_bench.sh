#!/usr/bin/env bash
# Streaming CSV reader: peak RSS of `lmsim dataset info` on 256 MiB files (target: < 300 MiB).
#   (a) a step_time_summary.csv of one row repeated: refused at its first duplicate, line 3;
#   (b) a valid 256 MiB per-rank matrix_operator_latency.csv: 8 M kernels, all kept.
#   bash bench/csv_bench.sh [build-dir]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lmsim="${1:-$root/build}/apps/lmsim"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$root/tests/fixtures/mini" "$tmp/ds"
c="$tmp/ds/qwen25_0point5_32k"
measure() {  # measure <label>
  /usr/bin/time -f "%M %e" -o "$tmp/t" "$lmsim" dataset info "$tmp/ds" >"$tmp/out" 2>&1 || true
  read -r kib secs < <(tail -1 "$tmp/t")
  printf '%-52s peak RSS %4d MiB  %5.2f s  (%s)\n' "$1" $((kib / 1024)) "$secs" "$(tail -1 "$tmp/out" | cut -c1-60)"
}
python3 - "$c/step_time_summary.csv" <<'PY'
import sys
row = b"dp1-tp2-pp2-cp2-RC,12345.5\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"optimization_config,iteration_time_ms\n" + row * ((256 << 20) // len(row)))
PY
measure "256 MiB step_time_summary.csv, one row repeated"
cp "$root/tests/fixtures/mini/qwen25_0point5_32k/step_time_summary.csv" "$c/"
python3 - "$c/dp1-tp2-pp2-cp2-RC/rank_0/matrix_operator_latency.csv" <<'PY'
import sys
p = sys.argv[1]
cols = open(p).readline().strip().split(",")
vals = {"type": "MatMul", "duration_us": "12.5", "batch": "1", "m": "4096", "n": "4096", "k": "4096"}
line = (",".join(vals.get(c, "0") for c in cols) + "\n").encode()
with open(p, "wb") as f:
    f.write((",".join(cols) + "\n").encode() + line * ((256 << 20) // len(line)))
PY
measure "256 MiB matrix_operator_latency.csv, valid"
