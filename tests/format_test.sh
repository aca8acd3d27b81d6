#!/usr/bin/env bash
# Every C++ source and header is as clang-format (.clang-format at the root) writes it. Skipped (77) where
# clang-format is not installed; `bash jobs/deps.sh --tests` installs Debian's.
#   format_test.sh SOURCE_DIR
set -euo pipefail
root=${1:?usage: format_test.sh SOURCE_DIR}
command -v clang-format >/dev/null || { echo "clang-format not installed: skipped"; exit 77; }
mapfile -t files < <(cd "$root" && find apps bench calibration io search simulator tests \
                       \( -name '*.cpp' -o -name '*.hpp' \) -print | sort)
[ ${#files[@]} -gt 0 ] || { echo "no C++ files found under $root"; exit 1; }
# One clang-format for all: its warnings name each file it would change.
if ! out=$(cd "$root" && clang-format --dry-run -Werror "${files[@]}" 2>&1); then
  echo "not clang-formatted (run: clang-format -i FILE):"
  grep -o '^[^:]*\.[ch]pp' <<<"$out" | sort -u | sed 's/^/  /'
  exit 1
fi
echo "format: ${#files[@]} files as clang-format writes them"
