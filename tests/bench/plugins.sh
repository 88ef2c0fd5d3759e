#!/bin/sh
# plugins.sh - generate the two graphs of the plugin benchmark and run it.
#   tests/bench/plugins.sh BUILD_DIR [SMALL_STEPS LARGE_STEPS]
#   REVERIE_BENCH_ONLY=gist,metaflow tests/bench/plugins.sh BUILD_DIR   (only those)
# 30 mixed layers give about 1,317 tasks per step: 76 and 760 steps are
# about 100k and 1M tasks.  `meson test -C build --benchmark` runs this.
set -eu
build=$1
small_steps=${2:-76}
large_steps=${3:-760}
dir=$(mktemp -d "${TMPDIR:-/tmp}/reverie-bench-plugins.XXXXXX")
trap 'rm -rf "$dir"' EXIT
for steps in "$small_steps" "$large_steps"; do
    "$build/tests/gen/reverie-gentrace" -o "$dir/$steps.json" --steps "$steps" --layers 30 \
        --mixed-layers --single-gpu --seed 7
done
REVERIE_PLUGIN_PATH="$build/optimizations" REVERIE_GPU_CATALOGUE="$build/data/gpus.json" \
    REVERIE_EFFICIENCY="$build/data/efficiency.json" \
    "$build/tests/bench/reverie-bench-plugins" "$dir/$small_steps.json" "$dir/$large_steps.json"
