#!/usr/bin/env bash
# Installs the Debian 12 packages lmsim needs, only those missing (idempotent). Needs root or sudo.
#   bash jobs/deps.sh            to build and run lmsim
#   bash jobs/deps.sh --tests    also the test suite and benchmarks (GoogleTest, Google Benchmark, pytest, Slurm, clang-format)
set -euo pipefail
# What building and running lmsim needs (the CLI, the libraries, the Python module, plots):
pkgs=(build-essential cmake libopenmpi-dev openmpi-bin libnlopt-cxx-dev libhdf5-dev hdf5-tools libssl-dev libspdlog-dev
      libcli11-dev nlohmann-json3-dev libfmt-dev python3 python3-h5py python3-matplotlib python3-numpy python3-dev
      pybind11-dev)
# What only the test suite and the benchmarks need (`deps.sh --tests`): a real single-node Slurm for the job tests.
if [ "${1:-}" = "--tests" ]; then
  pkgs+=(libgtest-dev libbenchmark-dev python3-pytest slurm-wlm munge clang-format)
fi
pkgs+=(${LMSIM_EXTRA_PACKAGES:-})
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "lmsim: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
