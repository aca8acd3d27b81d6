#!/usr/bin/env bash
# Installs the Debian 12 packages lmsim needs, only those missing (idempotent). Needs root or sudo.
set -euo pipefail
pkgs=(build-essential cmake libopenmpi-dev openmpi-bin libnlopt-cxx-dev libhdf5-dev hdf5-tools libssl-dev libspdlog-dev
      libgtest-dev libcli11-dev nlohmann-json3-dev libfmt-dev libbenchmark-dev python3 python3-h5py
      python3-matplotlib python3-numpy python3-dev pybind11-dev python3-pytest slurm-wlm munge ${LMSIM_EXTRA_PACKAGES:-})
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
