# Sourced by the job scripts: Open MPI as root (containers, CI) and oversubscription on small machines.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none  # no CMA in unprivileged containers
lmsim_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
lmsim_build=${LMSIM_BUILD_DIR:-$lmsim_root/build}
lmsim_bin=$lmsim_build/apps/lmsim
lmsim_build_release() {  # lmsim_build_release [-DLMSIM_BUILD_TESTS=ON ...]
  cmake -S "$lmsim_root" -B "$lmsim_build" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
  cmake --build "$lmsim_build" -j "$(nproc)" 2>&1 | grep -E "error|warning" || true
  test -x "$lmsim_bin"
}
