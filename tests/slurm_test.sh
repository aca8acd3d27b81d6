#!/usr/bin/env bash
# Submits jobs/sweep.sbatch to a real single-node Slurm (slurmctld + slurmd + munged on localhost, configuration
# in a temporary folder, private ports) and checks the job's HDF5 result. If the machine refuses to run the
# daemons, says exactly why and exits 77 (ctest: skipped).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
for b in slurmctld slurmd sbatch munged; do
  command -v "$b" >/dev/null || { echo "SKIP: $b not installed (Debian packages slurm-wlm, munge)"; exit 77; }
done
tmp=$(mktemp -d /tmp/lmsim-slurm.XXXXXX)
chmod 755 "$tmp"
mkdir -p "$tmp/state" "$tmp/spool" "$tmp/log"
cleanup() {
  for p in slurmd slurmctld munged; do [ -f "$tmp/$p.pid" ] && kill "$(cat "$tmp/$p.pid")" 2>/dev/null; done
  sleep 0.5
  rm -rf "$tmp"
}
trap cleanup EXIT
host=$(hostname -s)
port=$((20000 + $$ % 20000))
dd if=/dev/urandom bs=1 count=1024 of="$tmp/munge.key" 2>/dev/null
chmod 400 "$tmp/munge.key"
if ! munged -f --key-file="$tmp/munge.key" --socket="$tmp/munge.sock" --pid-file="$tmp/munged.pid" \
  --log-file="$tmp/log/munged.log" --seed-file="$tmp/munge.seed" 2>"$tmp/log/munged.err"; then
  echo "SKIP: munged refused to start: $(cat "$tmp/log/munged.err" "$tmp/log/munged.log" 2>/dev/null | tail -3)"
  exit 77
fi
cat >"$tmp/slurm.conf" <<CONF
ClusterName=lmsimtest
SlurmctldHost=$host
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
AuthInfo=socket=$tmp/munge.sock
CredType=cred/munge
SlurmUser=$(id -un)
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
NodeName=$host CPUs=$(nproc) State=UNKNOWN
PartitionName=lmsim Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
printf 'CgroupPlugin=autodetect\nIgnoreSystemd=yes\n' >"$tmp/cgroup.conf"
export SLURM_CONF=$tmp/slurm.conf
slurmctld 2>"$tmp/log/slurmctld.err" || { echo "SKIP: slurmctld refused to start: $(tail -3 "$tmp/log/slurmctld.log" "$tmp/log/slurmctld.err" 2>/dev/null)"; exit 77; }
slurmd 2>"$tmp/log/slurmd.err" || { echo "SKIP: slurmd refused to start: $(tail -5 "$tmp/log/slurmd.log" "$tmp/log/slurmd.err" 2>/dev/null)"; exit 77; }
for _ in $(seq 1 40); do
  sinfo -h -o %t 2>/dev/null | grep -q idle && break
  sleep 0.25
done
if ! sinfo -h -o %t 2>/dev/null | grep -q idle; then
  echo "SKIP: the Slurm node never became idle: $(tail -5 "$tmp/log/slurmd.log" 2>/dev/null)"
  exit 77
fi
export LMSIM_ROOT=$root
out="$tmp/sweep.h5"
timeout 300 sbatch --wait --chdir="$root" --output="$tmp/job.out" --ntasks=2 --cpus-per-task=1 \
  "$root/jobs/sweep.sbatch" "$out" --model Qwen3-0.6B --system v100_sxm2_32g --stack gpu --devices 8 --top 5 --quiet
rc=$?
if [ $rc != 0 ]; then
  echo "FAIL: sbatch job exited $rc"
  tail -20 "$tmp/job.out"
  exit 1
fi
h5dump -d /ranking/config_name "$out" | grep -q "dp" || { echo "FAIL: no ranking in $out"; exit 1; }
grep -q "wrote $out" "$tmp/job.out" || { echo "FAIL: job output does not report the result"; exit 1; }
echo "slurm_test: sweep.sbatch ran under a real slurmctld/slurmd and wrote its ranking"
