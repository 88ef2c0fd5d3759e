#!/bin/sh
# run_all.sh [SECONDS] [BUILD_DIR] - build every fuzz harness with clang's
# libFuzzer and the sanitizers (build.sh), seed each, and fuzz each for
# SECONDS (default 60): what .ci/run does after the test suites.
#
# A crash becomes a regression input: it is copied to
# tests/fuzz/regressions/HARNESS-crash-SHA1 (the harness's prefix, so that
# replay-HARNESS picks it up in `meson test`), and the script exits 1 naming
# the files, to be fixed and committed.  Corpora and logs stay under
# BUILD_DIR/fuzz-all/, which git ignores.
#
# Harnesses and their regression prefixes:
#   fuzz_store   saved-graph loader   overflow-, store-
#   fuzz_import  trace importer       import-
#   fuzz_elf     ELF reader           elf-
#   fuzz_params  parameters, escaping params-
#   fuzz_metaflow metaflow rule files metaflow-
#   fuzz_forge   forged saved graphs  forge-  (valid checksums, every report)
#   fuzz_efficiency efficiency tables efficiency-  (views and plans of what is accepted)
#
# HARNESSES="fuzz_efficiency ..." in the environment fuzzes only those.
set -eu
seconds=${1:-60}
build=${2:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
[ -x "$build/reverie" ] || { echo "run_all.sh: build reverie first (ninja -C $build)"; exit 1; }
out=$(cd "$build" && pwd)/fuzz-all
regressions=$root/tests/fuzz/regressions
mkdir -p "$out"
# fuzz_efficiency projects between GPUs of the source tree's catalogue
REVERIE_GPU_CATALOGUE=$root/data/gpus.json
export REVERIE_GPU_CATALOGUE

seed_store() {
    for trace in traces/small_ddp.json.gz traces/hta_event_sync.json.gz traces/hta_triton_a100.json.gz; do
        if [ -f "$trace" ]; then "$build/reverie" import --quiet --force "$trace" -o "$1/seed-$(basename "$trace" .json.gz).rvg" || true; fi
    done
    # a job of alike ranks, saved once (format version 8)
    if "$build/tests/gen/reverie-gentrace" --ranks 2 --steps 1 --layers 2 -o "$1/job" 2>/dev/null; then
        "$build/reverie" import --quiet --force "$1/job" -o "$1/seed-alike-job.rvg" || true
    fi
    rm -rf "$1/job"
    # a job of two classes of alike ranks, rank 1 the other (format version 9)
    if "$build/tests/gen/reverie-gentrace" --ranks 3 --steps 1 --layers 2 --unlike-rank 1 -o "$1/job" 2>/dev/null; then
        "$build/reverie" import --quiet --force "$1/job" -o "$1/seed-classes-job.rvg" || true
    fi
    rm -rf "$1/job"
    cp "$regressions"/overflow-* "$1/" 2>/dev/null || true
    return 0
}

seed_import() {
    for trace in hta_cpu_only hta_triton_a100 hta_event_sync hta_simple_add_small_a100; do
        if [ -f "traces/$trace.json.gz" ]; then gzip -dc "traces/$trace.json.gz" >"$1/seed-$trace.json"; fi
    done
    gzip -dc traces/small_ddp.json.gz | head -c 60000 >"$1/seed-small-ddp-head.json"
    # a rank of a generated job: collectives named by process group and sequence number
    if "$build/tests/gen/reverie-gentrace" --ranks 2 --steps 1 --layers 2 -o "$1/job" 2>/dev/null; then
        gzip -dc "$1/job/rank1.json.gz" | head -c 60000 >"$1/seed-rank-of-a-job.json"
    fi
    rm -rf "$1/job"
    cp traces/small_ddp.json.gz "$1/seed-gzipped.json.gz"
    # convolutions and pools with their Concrete Inputs (op_args.c reads them by schema)
    cat >"$1/seed-conv-arguments.json" <<'SEED'
{"traceEvents": [
{"ph": "X", "cat": "cpu_op", "name": "aten::conv2d", "pid": 1, "tid": 1, "ts": 10, "dur": 50, "args": {"External id": 1, "Input Dims": [[8, 64, 56, 56], [128, 64, 3, 3], [], [], [], [], []], "Concrete Inputs": ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "1"]}},
{"ph": "X", "cat": "cpu_op", "name": "aten::conv_transpose2d", "pid": 1, "tid": 1, "ts": 70, "dur": 20, "args": {"External id": 2, "Input Dims": [[8, 64, 28, 28], [64, 32, 3, 3], [], [], [], [], [], []], "Concrete Inputs": ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "1", "[1, 1]"]}},
{"ph": "X", "cat": "cpu_op", "name": "aten::max_pool2d", "pid": 1, "tid": 1, "ts": 95, "dur": 3, "args": {"External id": 3, "Input Dims": [[8, 64, 56, 56], [], [], [], [], []], "Concrete Inputs": ["", "[3, 3]", "[2, 2]", "[1, 1]", "[1, 1]", "False"]}},
{"ph": "X", "cat": "cpu_op", "name": "aten::adaptive_avg_pool2d", "pid": 1, "tid": 1, "ts": 99, "dur": 1, "args": {"External id": 4, "Input Dims": [[8, 64, 7, 7], []], "Concrete Inputs": ["", "[1, 1]"]}},
{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 20, "dur": 5, "args": {"correlation": 7, "External id": 1}},
{"ph": "X", "cat": "kernel", "name": "implicit_convolve_sgemm", "pid": 0, "tid": 7, "ts": 30, "dur": 40, "args": {"correlation": 7, "device": 0, "stream": 7, "grid": [98, 1, 1], "block": [128, 1, 1]}}
]}
SEED
    for file in tests/data/bad/* "$regressions"/import-*; do
        [ -f "$file" ] && cp "$file" "$1/bad-$(basename "$file")"
    done
    return 0
}

seed_elf() {
    for plugin in "$build"/optimizations/*.so; do [ -f "$plugin" ] && cp "$plugin" "$1/"; done
    return 0
}

seed_metaflow() {
    cp data/metaflow/*.json "$1/"
    printf '{"rules": [{"name": "x", "action": "scale:2", "match": "layer~linear"}]}' >"$1/seed-scale"
    printf '{"rules": [{"action": "merge-parallel", "match": "layer~conv", "count": 3, "skip": ["op~relu"]}]}' >"$1/seed-merge"
    printf '{"description": "d", "rules": []}' >"$1/seed-empty"
    return 0
}

seed_params() {
    printf 'n=1.5,i=8,d=5us,b=25MiB,w=100Gbps,c=bb,s=kind=kernel,phase=forward' >"$1/seed-all"
    printf 'i=1e300,d=1e9s,b=16PiB' >"$1/seed-huge"
    printf 'w=0.125b/s,n=2,n=3' >"$1/seed-twice"
    printf 's=\033]0;x\007\342\200\256\377' >"$1/seed-escapes"
}

# Edits of 14 bytes (fuzz_forge.c): a self-loop, steps inside each other,
# the extreme times, a long name, and an edge appended.
seed_forge() {
    # edges (2), field 1 (to) := field 0 (from) of edge 0: a self-loop
    printf '\002\001\000\000\003\000\000\000\000\000\000\000\000\000' >"$1/seed-self-loop"
    # steps (3), field 3 (begin marker) of step 1 := the begin marker of step 0
    printf '\003\003\001\000\003\000\000\000\000\000\003\000\000\000' >"$1/seed-steps-share-a-marker"
    # tasks (1): start of task 3 := the largest time; duration of task 5 := an extreme
    printf '\001\002\003\000\002\000\007\000\000\000\000\000\000\000\001\000\005\000\002\000\001\000\000\000\000\000\000\000' >"$1/seed-extreme-times"
    # string 2 becomes 65280 bytes of 'x'
    printf '\340\000\001\000\170\000\000\377\000\000\000\000\000\000' >"$1/seed-long-name"
    # a new edge from task 1 to task 2
    printf '\300\004\000\000\000\000\001\000\000\000\002\000\000\000' >"$1/seed-new-edge"
    return 0
}

# Tables small enough to mutate quickly (the shipped one is 350 KB): the
# BERT-small pair calibrated (H100 and MI300X sides of one job), trimmed
# copies of data/efficiency.json (a recording of each GPU; two H100/H200
# pairs; one recording of an older table, without job_members, with two
# buckets), an empty table, and a truncated one.
seed_efficiency() {
    pair=traces/pairs/gpu_h100_vs_mi300x_bert_small
    if [ -f "$pair/h100.json.gz" ]; then
        "$build/reverie" calibrate --force "$pair/h100.json.gz" "$pair/mi300x.json.gz" -o "$1/seed-pair.json" >/dev/null || true
    fi
    python3 - data/efficiency.json "$1" <<'EOF'
import json, sys
table = json.load(open(sys.argv[1]))
recordings = table["recordings"]
def write(name, chosen):
    with open(sys.argv[2] + "/" + name, "w") as out:
        json.dump(dict(table, about="", recordings=chosen), out, separators=(",", ":"))
gpus = {}
for r in recordings:
    gpus.setdefault(r["gpu"], r)
write("seed-one-per-gpu.json", list(gpus.values()))
write("seed-h100-h200.json", [r for r in recordings if r["gpu"] == "H100-SXM"][-2:] +
      [r for r in recordings if r["gpu"] == "H200"][-2:])
old = {k: v for k, v in recordings[0].items() if k != "job_members"}
write("seed-older-two-buckets.json", [dict(old, buckets=old["buckets"][:2])])
write("seed-empty.json", [])
EOF
    head -c 3000 data/efficiency.json >"$1/seed-truncated.json"
    cp "$regressions"/efficiency-* "$1/" 2>/dev/null || true
    return 0
}

crashes=""
for harness in ${HARNESSES:-fuzz_store fuzz_import fuzz_elf fuzz_params fuzz_metaflow fuzz_forge fuzz_efficiency}; do
    work=$out/$harness
    rm -rf "$work/crashes" # an earlier run's, already kept under regressions/
    mkdir -p "$work/corpus" "$work/crashes"
    echo "== $harness: building"
    tests/fuzz/build.sh "$harness" "$work/$harness"
    "seed_${harness#fuzz_}" "$work/corpus"
    max_len=65536
    [ "$harness" = fuzz_elf ] && max_len=262144
    set -- -max_total_time="$seconds" -max_len=$max_len -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$work/crashes/" -print_final_stats=1
    [ "$harness" = fuzz_import ] && set -- "$@" -dict="$root/tests/fuzz/import.dict"
    [ "$harness" = fuzz_efficiency ] && set -- "$@" -dict="$root/tests/fuzz/efficiency.dict"
    echo "== $harness: fuzzing for $seconds s"
    (cd "$work" && ./"$harness" "$@" corpus >"$work/log" 2>&1) || true
    grep -E "^stat::number_of_executed_units|^#[0-9]+.*DONE" "$work/log" | tail -1 || true
    prefix=${harness#fuzz_}
    for crash in "$work"/crashes/*; do
        [ -f "$crash" ] || continue
        name=$prefix-crash-$(sha1sum "$crash" | cut -c1-12)
        cp "$crash" "$regressions/$name"
        crashes="$crashes $name"
        echo "== $harness: CRASH, kept as tests/fuzz/regressions/$name"
        grep -m3 -E "ERROR|fuzz_|runtime error" "$work/log" || true
    done
done
if [ -n "$crashes" ]; then
    echo "run_all.sh: new crashes:$crashes (fix them, then commit the regression inputs)"
    exit 1
fi
echo "run_all.sh: no crash in $seconds s per harness"
