#!/usr/bin/env bash
# README command 1: install what is missing, build Release, run the main job on the bundled data.
set -euo pipefail
here=$(dirname "$0")
bash "$here/deps.sh"
source "$here/env.sh"
lmsim_build_release -DLMSIM_BUILD_TESTS=OFF -DLMSIM_BUILD_BENCH=OFF
bash "$here/pipeline.sh"
