#!/usr/bin/env bash
# tools/format.sh [--check] — formats every C file of src/ and tests/ with the
# pinned .clang-format (clang-format 14).  With --check it changes nothing
# and exits 1, listing the files that differ.
set -euo pipefail
cd "$(dirname "$0")/.."

FORMAT=$(command -v clang-format-14 || command -v clang-format || true)
[ -n "$FORMAT" ] || { echo "format: clang-format not found (apt-get install clang-format)" >&2; exit 1; }
case "$("$FORMAT" --version)" in
  *"version 14."*) ;;
  *) echo "format: clang-format 14 is pinned; found: $("$FORMAT" --version)" >&2; exit 1 ;;
esac

mapfile -t files < <(git ls-files 'src/*.c' 'src/*.h' 'tests/*.c' 'tests/*.h')
if [ "${1:-}" = "--check" ]; then
  bad=0
  for f in "${files[@]}"; do
    if ! "$FORMAT" "$f" | cmp -s - "$f"; then
      echo "format: $f is not formatted (run: make format)"
      bad=1
    fi
  done
  exit "$bad"
fi
"$FORMAT" -i "${files[@]}"
