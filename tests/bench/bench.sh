#!/bin/sh
# bench.sh - generate a ~1 million event trace and run reverie-bench on it.
#   tests/bench/bench.sh BUILD_DIR [EVENTS]
# `meson test -C build --benchmark` runs this.
set -eu
build=$1
events=${2:-1000000}
trace=${TMPDIR:-/tmp}/reverie-bench-$$.json
trap 'rm -f "$trace"' EXIT
"$build/tests/gen/reverie-gentrace" -o "$trace" --events "$events" --seed 7
"$build/tests/bench/reverie-bench" "$trace"
