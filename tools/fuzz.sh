#!/usr/bin/env bash
# tools/fuzz.sh — builds and runs the libFuzzer targets of fuzz/.
#
#   tools/fuzz.sh build [DIR]            set up DIR (default build-fuzz) with
#                                        clang and -Dfuzz=true, then build it
#   tools/fuzz.sh list                   the target names (fuzz/fuzz_*.c)
#   tools/fuzz.sh run DIR TARGET [FLAG…] run one target; FLAGs go to libFuzzer
#                                        (default -runs=10000000)
#   tools/fuzz.sh all DIR [FLAG…]        run every target, one after another
#
# A run reads the checked-in seeds in fuzz/corpus/<name>/ and writes what it
# discovers to DIR/corpus/<name>/, never to the seeds.  A crash or a failed
# check leaves its input in DIR/artifacts/ and makes the run fail; turn each
# into a unit test next to the parser it broke, with the fix.
# Exit status: 0 when every run finished clean.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"

targets() {
  local f
  for f in fuzz/fuzz_*.c; do
    f=${f#fuzz/}
    printf '%s\n' "${f%.c}"
  done
}

build() {
  local dir=${1:-build-fuzz}
  if [ ! -f "$dir/build.ninja" ]; then
    CC=clang meson setup "$dir" -Dfuzz=true --buildtype=debugoptimized \
      -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
  fi
  ninja -C "$dir" $(targets | sed 's|^|fuzz/|') >/dev/null
}

run() {
  local dir=$1 name=$2; shift 2
  [ $# -gt 0 ] || set -- -runs=10000000
  local seeds="$ROOT/fuzz/corpus/${name#fuzz_}"
  local work="$dir/corpus/${name#fuzz_}" art="$dir/artifacts"
  mkdir -p "$work" "$art"
  [ -d "$seeds" ] || { echo "fuzz: no seed corpus $seeds" >&2; return 1; }
  local log="$dir/$name.log"
  if ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
     UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
     "$dir/fuzz/$name" -artifact_prefix="$art/$name-" "$@" \
       "$work" "$seeds" >"$log" 2>&1; then
    echo "fuzz: $name: $(grep -a '^Done' "$log" | tail -n 1)"
  else
    echo "fuzz: $name FAILED (log: $log)" >&2
    grep -aE 'fuzz check failed|ERROR:|SUMMARY:|Test unit written' "$log" \
      | head -n 20 >&2
    return 1
  fi
}

cmd=${1:-}
shift || true
case "$cmd" in
  build) build "$@" ;;
  list) targets ;;
  run) run "$@" ;;
  all)
    dir=${1:-build-fuzz}; shift || true
    status=0
    for t in $(targets); do run "$dir" "$t" "$@" || status=1; done
    exit "$status"
    ;;
  *) sed -n '2,16p' "$0" >&2; exit 2 ;;
esac
