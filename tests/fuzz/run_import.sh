#!/bin/sh
# run_import.sh - build the importer fuzzer (fuzz_import.c) with clang's
# libFuzzer, AddressSanitizer and UndefinedBehaviorSanitizer, seed it with
# small real traces (gunzipped, and one still gzipped) and the bad inputs of
# tests/data/bad, and run it.
#
# usage: tests/fuzz/run_import.sh [SECONDS] [BUILD_DIR] [-- LIBFUZZER_OPTIONS...]
#   SECONDS    how long to fuzz (default 60)
#   BUILD_DIR  where to build and keep the corpus (default: build); everything
#              goes under BUILD_DIR/fuzz-import/, which git ignores
#   JOBS=N     in the environment: N fuzzing processes in parallel
# A crashing input lands in BUILD_DIR/fuzz-import/crashes/.  Fix the code,
# then copy the input into tests/data/bad/ with a name saying what it is;
# test_import.c and cli_errors.sh check every file there fails cleanly (add
# it to bad_cases in test_import.c with the message it must give).
set -eu

seconds=${1:-60}
build=${2:-build}
[ $# -ge 2 ] && shift 2 || shift $#
[ "${1:-}" = "--" ] && shift

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=$build/fuzz-import
mkdir -p "$out/corpus" "$out/crashes"
binary=$out/fuzz_import

# build.sh: every sanitizer report is fatal, signed overflow included (the
# importer bounds times and the simulator saturates its sums).
tests/fuzz/build.sh fuzz_import "$binary"

# Seeds: the small traces the project ships and the bad inputs.
traces=traces
for trace in hta_cpu_only hta_triton_a100 hta_event_sync hta_event_sync_multi_stream \
             hta_simple_add_small_a100 hta_rank_non_gpu; do
    [ -f "$traces/$trace.json.gz" ] && gzip -dc "$traces/$trace.json.gz" >"$out/corpus/seed-$trace.json"
done
[ -f "$traces/hta_triton_a100.json.gz" ] && cp "$traces/hta_triton_a100.json.gz" "$out/corpus/seed-gzipped.json.gz"
[ -f "$traces/kineto_legacy_resnet50_v100.json.gz" ] &&
    gzip -dc "$traces/kineto_legacy_resnet50_v100.json.gz" | head -c 60000 >"$out/corpus/seed-legacy-head.json"
for file in tests/data/bad/*; do
    [ -f "$file" ] && cp "$file" "$out/corpus/bad-$(basename "$file")"
done

# Run inside $out: with -jobs, libFuzzer writes fuzz-N.log to the current folder.
out=$(cd "$out" && pwd)
jobs=${JOBS:-1}
set -- -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=4096 \
    -dict="$root/tests/fuzz/import.dict" -artifact_prefix="$out/crashes/" -print_final_stats=1 "$@"
if [ "$jobs" -gt 1 ]; then
    set -- -jobs="$jobs" -workers="$jobs" "$@"
fi
cd "$out"
exec ./fuzz_import "$@" corpus
