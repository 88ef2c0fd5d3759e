#!/bin/sh
# cli_store.sh - command-line tests for saved graphs: `reverie import`, the
# identical output of info and simulate for a trace and its graph, and exit
# status 2 with a clear message for damaged or foreign .rvg files.
#
# usage: cli_store.sh REVERIE SOURCE_ROOT [GENTRACE]
# Uses three traces the project ships in traces/; exits 77 (skipped) if one
# is missing.  With GENTRACE, also checks that importing a trace large enough
# for the importer's threads twice gives the same bytes.
set -u

reverie=$1
root=$2
gentrace=${3:-}
. "$(dirname "$0")/cli_lib.sh"

# expect_error TEXT : the last command's stderr says TEXT on one line.
expect_error() {
    grep -qF -- "$1" "$work/err" || fail "stderr lacks '$1': $(head -c 300 "$work/err")"
    [ "$(wc -l <"$work/err")" -eq 1 ] || fail "stderr is not one line: $(cat "$work/err")"
}

traces=""
for name in small_ddp.json.gz hta_event_sync.json.gz hta_resnet50_v100.json.gz; do
    if [ ! -f "$root/traces/$name" ]; then
        echo "SKIP: $root/traces/$name is missing"
        exit 77
    fi
    traces="$traces $root/traces/$name"
done

# A trace and its saved graph print the same for every read-only command.
for trace in $traces; do
    graph="$work/$(basename "$trace" .json.gz).rvg"
    expect_status 0 "$reverie" import "$trace" -o "$graph"
    grep -Eq "^wrote $graph: [0-9]+ tasks( \(plus [0-9]+ nested runtime calls merged into their callers\))?, [0-9]+ edges, [0-9]+ steps, [0-9.]+ MB in [0-9.]+ s$" "$work/out" ||
        fail "import summary: $(cat "$work/out")"
    for command in "info" "info --json" "simulate" "simulate --json"; do
        # shellcheck disable=SC2086
        "$reverie" $command "$trace" >"$work/from_trace" 2>&1
        # shellcheck disable=SC2086
        "$reverie" $command "$graph" >"$work/from_graph" 2>&1
        cmp -s "$work/from_trace" "$work/from_graph" || fail "reverie $command differs for $trace and its graph"
    done
done
set -- $traces
trace=$1
graph="$work/$(basename "$trace" .json.gz).rvg"
size=$(wc -c <"$graph")

# Options and usage.
expect_status 0 "$reverie" import --quiet "$trace" -o "$work/quiet.rvg"
[ -s "$work/out" ] && fail "--quiet printed: $(cat "$work/out")"
cp "$trace" "$work/copy.json.gz"
expect_status 0 "$reverie" import "$work/copy.json.gz"
[ -f "$work/copy.rvg" ] || fail "the default output is not the trace's name with .rvg"
expect_status 1 "$reverie" import
# the same trace twice is one recording twice: not one job
expect_status 2 "$reverie" import "$trace" "$trace" -o "$work/two.rvg"
expect_error "$trace and $trace hold one recording"
expect_status 1 "$reverie" import --no-such-option "$trace"
expect_status 2 "$reverie" import "$work/missing.json" -o "$work/missing.rvg"
expect_status 2 "$reverie" import "$trace" -o "$work/no/such/dir/g.rvg"
expect_error "cannot write $work/no/such/dir/g.rvg"

# Content decides: a graph under another name still loads.
cp "$graph" "$work/graph.bin"
expect_status 0 "$reverie" info "$work/graph.bin"

# Damaged graphs: exit 2, one line naming the file.
for cut in 0 7 8 23 24 100 $((size / 2)) $((size - 1)); do
    head -c "$cut" "$graph" >"$work/cut.rvg"
    expect_status 2 "$reverie" info "$work/cut.rvg"
    expect_error "$work/cut.rvg"
done
for at in 0 9 16 30 200 $((size / 2)) $((size - 1)); do
    cp "$graph" "$work/flip.rvg"
    byte=$(od -An -tu1 -j "$at" -N1 "$graph" | tr -d ' ')
    printf "\\$(printf '%03o' $((byte ^ 16)))" | dd of="$work/flip.rvg" bs=1 seek="$at" conv=notrunc 2>/dev/null
    expect_status 2 "$reverie" simulate "$work/flip.rvg"
    expect_error "$work/flip.rvg: "
done
cp "$graph" "$work/newer.rvg"
printf '\012' | dd of="$work/newer.rvg" bs=1 seek=8 conv=notrunc 2>/dev/null
expect_status 2 "$reverie" info "$work/newer.rvg"
expect_error "$work/newer.rvg: format version 10 is newer than this reverie supports (9); re-import the trace"

# Not graphs at all, under a .rvg name.
: >"$work/empty.rvg"
expect_status 2 "$reverie" info "$work/empty.rvg"
expect_error "$work/empty.rvg: named .rvg but is not a reverie graph: it is empty"
gzip -dc "$trace" >"$work/json.rvg"
expect_status 2 "$reverie" simulate "$work/json.rvg"
expect_error "$work/json.rvg: named .rvg but is not a reverie graph"
cp "$trace" "$work/gz.rvg"
expect_status 2 "$reverie" info "$work/gz.rvg"
expect_error "named .rvg but is not a reverie graph"

# The same trace imported twice saves to the same bytes, although the
# importer's threads intern names in whatever order they run.
same_twice=$traces
if [ -n "$gentrace" ]; then
    "$gentrace" -o "$work/generated.json" --steps 30 --layers 20 2>/dev/null || fail "reverie-gentrace failed"
    same_twice="$same_twice $work/generated.json"
fi
for trace in $same_twice; do
    "$reverie" import --quiet --force "$trace" -o "$work/first.rvg" &&
        "$reverie" import --quiet --force "$trace" -o "$work/second.rvg" ||
        fail "import $trace failed"
    cmp -s "$work/first.rvg" "$work/second.rvg" || fail "two imports of $trace differ"
done

# A job whose ranks are alike is saved once (format version 8) and
# replayed as it is held: simulate prints what it prints for the ranks'
# traces, in every form, and info and --explain (which rebuild the joint
# graph) print the same too.  A rank made unlike (rank 0 runs a kernel
# the others do not) is a class of its own, the others still held once
# (version 9), with the same output again.
same_as_traces() { # folder, saved job
    for command in "simulate" "simulate --json" "simulate --csv" "simulate --explain 3" "info --json"; do
        # shellcheck disable=SC2086
        "$reverie" $command "$1" 2>/dev/null >"$work/from_traces"
        # shellcheck disable=SC2086
        "$reverie" $command "$2" 2>/dev/null >"$work/from_graph"
        cmp -s "$work/from_traces" "$work/from_graph" || fail "reverie $command differs for $1 and its saved graph"
    done
    expect_status 0 "$reverie" import --quiet --force "$2" -o "$work/again.rvg"
    cmp -s "$2" "$work/again.rvg" || fail "$2 saves to other bytes when loaded and saved again"
}
format_version() { od -An -tu4 -j8 -N4 "$1" | tr -d ' '; }
if [ -n "$gentrace" ]; then
    "$gentrace" --ranks 4 --steps 3 --layers 4 --clock-skew-us 900 -o "$work/job" 2>/dev/null || fail "reverie-gentrace --ranks failed"
    expect_status 0 "$reverie" import --quiet "$work/job" -o "$work/job.rvg"
    [ "$(format_version "$work/job.rvg")" = 8 ] || fail "the alike job was not saved as version 8"
    "$reverie" info "$work/job.rvg" | grep -q "^ranks alike: yes" || fail "info does not say the ranks are alike"
    same_as_traces "$work/job" "$work/job.rvg"
    "$gentrace" --ranks 4 --steps 3 --layers 4 --clock-skew-us 900 --unlike-rank 0 -o "$work/unlike" 2>/dev/null ||
        fail "reverie-gentrace --unlike-rank failed"
    expect_status 0 "$reverie" import --quiet "$work/unlike" -o "$work/unlike.rvg"
    [ "$(format_version "$work/unlike.rvg")" = 9 ] || fail "the job of an unlike rank was not saved as version 9"
    "$reverie" info "$work/unlike.rvg" | grep -q "^ranks alike: 2 classes, the largest of 3 ranks: {0} {1-3} (rank index 1's task" ||
        fail "info does not say the ranks are in two classes"
    "$reverie" info --json "$work/unlike.rvg" | python3 -c "import json, sys; job = json.load(sys.stdin)['job']; sys.exit(job['rank_classes'] != 2 or job['rank_class'] != [0, 1, 1, 1])" ||
        fail "info --json does not give each rank's class"
    same_as_traces "$work/unlike" "$work/unlike.rvg"
    [ "$(stat -c %s "$work/unlike.rvg")" -lt $(($(stat -c %s "$work/job.rvg") * 3)) ] ||
        fail "the job of an unlike rank takes more than three times the alike job's file"
    # damaged in its alike ranks section: one line, exit 2, from simulate as from info
    cp "$work/job.rvg" "$work/damaged.rvg"
    size=$(wc -c <"$work/damaged.rvg")
    printf '\377' | dd of="$work/damaged.rvg" bs=1 seek=$((size - 5)) conv=notrunc 2>/dev/null
    for command in simulate info; do
        expect_status 2 "$reverie" $command "$work/damaged.rvg"
        expect_error "section 'alike ranks': checksum mismatch"
    done
fi

# Failed writes leave no temporary files behind.
leftovers=$(find "$work" -name '*.rvg.*' | head -3)
[ -z "$leftovers" ] || fail "temporary files left: $leftovers"

if [ "$failures" -ne 0 ]; then
    echo "$failures failures"
    exit 1
fi
echo "all store command-line checks passed"
