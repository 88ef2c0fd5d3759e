#!/bin/sh
# run.sh - build the saved-graph fuzzer (fuzz_store.c) with clang's libFuzzer,
# AddressSanitizer and UndefinedBehaviorSanitizer, seed it with a few saved
# graphs and run it.
#
# usage: tests/fuzz/run.sh [SECONDS] [BUILD_DIR] [-- LIBFUZZER_OPTIONS...]
#   SECONDS    how long to fuzz (default 60)
#   BUILD_DIR  a meson build folder with a built `reverie`, used to import
#              the seed traces (default: build)
#   JOBS=N     in the environment: N fuzzing processes in parallel
# Crashing inputs land in tests/fuzz/crashes/; copy each (renamed, not .rvg)
# into tests/fuzz/regressions/, where test_store.c checks that it now fails
# cleanly.  The corpus grows in tests/fuzz/corpus/ (both folders are ignored
# by git).
set -eu

seconds=${1:-60}
build=${2:-build}
[ $# -ge 2 ] && shift 2 || shift $#
[ "${1:-}" = "--" ] && shift

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
fuzz=tests/fuzz
mkdir -p "$build/fuzz" "$fuzz/corpus" "$fuzz/crashes"
binary=$build/fuzz/fuzz_store

# Every sanitizer report is fatal, signed overflow included (build.sh): the
# loader's time bounds promise that the replay of an accepted graph cannot
# overflow.
tests/fuzz/build.sh fuzz_store "$binary"

# Seeds: small saved graphs of traces the project ships.
reverie=$build/reverie
seed() {
    [ -f "$1" ] || return 0
    name=$(basename "$1" | sed 's/\.json\(\.gz\)\{0,1\}$//')
    "$reverie" import --quiet "$1" -o "$fuzz/corpus/seed-$name.rvg" || true
}
for trace in hta_cpu_only hta_triton_a100 hta_event_sync hta_event_sync_multi_stream \
             hta_simple_add_small_a100 hta_rank_non_gpu; do
    seed "traces/$trace.json.gz"
done
seed traces/small_ddp.json.gz

# Run inside BUILD/fuzz, where libFuzzer's per-job logs (fuzz-N.log) go.
jobs=${JOBS:-1}
set -- -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=4096 \
    -artifact_prefix="$root/$fuzz/crashes/" -print_final_stats=1 "$@"
if [ "$jobs" -gt 1 ]; then
    set -- -jobs="$jobs" -workers="$jobs" "$@"
fi
binary=$(cd "$(dirname "$binary")" && pwd)/fuzz_store
cd "$build/fuzz"
exec "$binary" "$@" "$root/$fuzz/corpus"
