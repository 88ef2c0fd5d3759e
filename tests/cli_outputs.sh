#!/bin/bash
# cli_outputs.sh REVERIE SOURCE_ROOT GENTRACE - nothing a user owns is lost
# (docs/hostile-input.md, "Outputs"), beside cli_hostile.sh's inputs:
#
#   - every option that names an output file, on every command, refuses
#     the input given as that output (itself, a hard link, a symbolic
#     link, a rank of a folder, the file standard input comes from) with
#     exit 1 and leaves it byte for byte as it was;
#   - on a full disk (a 64 KiB tmpfs, as root; skipped otherwise) every
#     output keeps its old content and the exit is 2, with no temporary
#     left; `> /dev/full` is exit 2 from every command;
#   - SIGINT and SIGKILL while a large timeline is being written leave the
#     old file intact, and SIGINT leaves no temporary (both kinds: unnamed
#     O_TMPFILE and named);
#   - plugins that crash, hang or call exit() under --isolate, and in a
#     sweep of 400 variants: 398 rows, 2 error rows, exit 3;
#   - ranks of two different jobs refused, naming the first collective
#     that differs; the forged cases (self-loops, nested steps, NUL bytes
#     in --variants, UTF-8 option values, exit codes, long names).
set -u
reverie=$1
root=$2
gentrace=$3
plugins=${REVERIE_HOSTILE_PLUGINS:?run through meson test}
. "$(dirname "$0")/cli_lib.sh"
trace=$root/traces/small_ddp.json.gz
[ -f "$trace" ] || { echo "missing $trace"; exit 1; }
skipped=0
skip() { skipped=$((skipped + 1)); echo "skip $1: $2"; }

in=$work/in
mkdir -p "$in"
zcat "$trace" >"$in/trace.json"
ln "$in/trace.json" "$in/hardlink.json"
ln -s "$in/trace.json" "$in/symlink.json"
"$gentrace" --ranks 2 --layers 4 --steps 2 -o "$in/job" 2>/dev/null || fail "gentrace --ranks failed"
"$reverie" import --quiet "$trace" -o "$in/graph.rvg" || fail "import failed"
sums() { md5sum "$in/trace.json" "$in/job/rank0.json.gz" "$in/job/rank1.json.gz" "$in/graph.rvg"; }
before=$(sums)

# refused SPEC COMMAND...: exit 1, one line saying it is an input, inputs unchanged
refused() {
    local name=$1
    shift
    expect_status 1 "$@"
    grep -q "is an input of this run" "$work/err" || fail "$name: not refused as an input: $(head -c 300 "$work/err")"
    one_line
    [ "$(sums)" = "$before" ] || fail "$name: an input changed"
}

# ---- every output option, every command: the input is never a target -------

for target in trace.json hardlink.json symlink.json; do
    t=$in/$target
    refused "import -o $target"       "$reverie" import "$in/trace.json" -o "$t" --force
    refused "export-graph -o $target" "$reverie" export-graph "$in/trace.json" -o "$t" --format dot --force
    refused "simulate --timeline $target" "$reverie" simulate "$in/trace.json" --timeline "$t" --force
    refused "simulate --plot $target" "$reverie" simulate "$in/trace.json" --plot "$t" --force
    refused "whatif --timeline $target" "$reverie" whatif "$in/trace.json" --opt amp --timeline "$t" --force
    refused "whatif --plot $target"   "$reverie" whatif "$in/trace.json" --opt amp --plot "$t" --force
    refused "breakdown --plot $target" "$reverie" breakdown "$in/trace.json" --plot "$t" --force
    refused "critical-path --timeline $target" "$reverie" critical-path "$in/trace.json" --timeline "$t" --force
    refused "sweep --plot $target"    "$reverie" sweep "$in/trace.json" --vary scale.factor=0.5,1 --plot "$t" --force
    for command in info simulate breakdown critical-path kernels memory comm-fraction query; do
        refused "$command -o $target" "$reverie" "$command" "$in/trace.json" -o "$t" --force
    done
    refused "whatif -o $target"   "$reverie" whatif "$in/trace.json" --opt amp -o "$t" --force
    refused "validate -o $target" "$reverie" validate "$in/trace.json" "$trace" -o "$t" --force
    refused "sweep -o $target"    "$reverie" sweep "$in/trace.json" --vary scale.factor=0.5 -o "$t" --force
    refused "calibrate -o $target" "$reverie" calibrate "$in/trace.json" --source-gpu V100-SXM2 -o "$t" --force
    refused "plan -o $target"     "$reverie" plan "$in/trace.json" --gpus 2 --gpu V100-SXM2 -o "$t" --force
    refused "seqpoint -o $target" "$reverie" seqpoint "$in/trace.json" -o "$t" --force
done
rank=$in/job/rank1.json.gz
refused "import FOLDER -o rank"           "$reverie" import "$in/job" -o "$rank" --force
refused "simulate FOLDER --timeline rank" "$reverie" simulate "$in/job" --timeline "$rank" --force
refused "whatif FOLDER -o rank"           "$reverie" whatif "$in/job" --opt amp -o "$rank" --force
refused "info FOLDER -o rank"             "$reverie" info "$in/job" -o "$rank" --force
refused "saved graph -o itself"           "$reverie" simulate "$in/graph.rvg" -o "$in/graph.rvg" --force
refused "stdin's file as --timeline"      bash -c '"$1" simulate - --timeline "$2" --force <"$2"' _ "$reverie" "$in/trace.json"
refused "stdin's file as import -o"       bash -c '"$1" import - -o "$2" --force <"$2"' _ "$reverie" "$in/trace.json"
refused "stdin's file as -o"              bash -c '"$1" info - -o "$2" --force <"$2"' _ "$reverie" "$in/trace.json"
refused "standard output appended to the input" bash -c '"$1" info "$2" >>"$2"' _ "$reverie" "$in/trace.json"
printf 'scale:factor=0.5\n' >"$work/variants.txt"
cp "$work/variants.txt" "$work/variants.kept"
expect_status 1 "$reverie" sweep "$trace" --variants "$work/variants.txt" -o "$work/variants.txt" --force
cmp -s "$work/variants.txt" "$work/variants.kept" || fail "--variants file replaced by -o"
# A table a plugin reads is an input too, though read after -o was opened.
cp "$root/data/efficiency.json" "$work/table.json"
cp "$work/table.json" "$work/table.kept"
expect_status 1 "$reverie" whatif "$trace" --opt "hardware:gpu=A100-40GB,source_gpu=V100-SXM2,efficiency=$work/table.json" \
    -o "$work/table.json" --force
expect_in "$work/err" "is an input of this run"
cmp -s "$work/table.json" "$work/table.kept" || fail "an efficiency= table replaced by -o"

# Two outputs of one run may not be one file; an existing file needs --force.
expect_status 1 "$reverie" simulate "$trace" --timeline "$work/same.out" --plot "$work/same.out"
expect_in "$work/err" "given as two outputs"
printf 'old report\n' >"$work/report.txt"
expect_status 1 "$reverie" simulate "$trace" -o "$work/report.txt"
expect_in "$work/err" "already exists; give --force"
[ "$(cat "$work/report.txt")" = "old report" ] || fail "-o without --force replaced the file"

# -o writes the report whole, and only when the command succeeded.
expect_status 0 "$reverie" simulate "$trace" --json -o "$work/report.txt" --force
[ -s "$work/out" ] && fail "-o: the report also went to standard output"
python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$work/report.txt" || fail "-o: not the JSON report"
cp "$work/report.txt" "$work/report.kept"
expect_status 3 "$reverie" whatif "$trace" --opt "$plugins/hostile_fail_silently.so" -o "$work/report.txt" --force
cmp -s "$work/report.txt" "$work/report.kept" || fail "a failed command replaced its -o report"
expect_status 0 "$reverie" sweep "$trace" --vary scale.factor=0.5,1 --json -o "$work/rows.jsonl"
[ "$(wc -l <"$work/rows.jsonl")" -eq 2 ] || fail "sweep -o: expected 2 JSON lines"

# ---- full disk: old contents kept, exit 2, no temporary ----------------------

tiny=$work/tiny
if [ "$(id -u)" = 0 ] && mkdir -p "$tiny" && mount -t tmpfs -o size=64k tmpfs "$tiny" 2>/dev/null; then
    full_disk() { # NAME FILE COMMAND...: FILE (in $tiny) holds "old" before and after; exit 2
        local name=$1 file=$2
        shift 2
        printf old >"$file"
        expect_status 2 "$@"
        one_line
        [ "$(cat "$file")" = old ] || fail "full disk, $name: the old file was replaced"
        [ "$(ls -A "$tiny")" = "$(basename "$file")" ] || fail "full disk, $name: left $(ls -A "$tiny")"
        rm -f "$file"
    }
    full_disk import        "$tiny/g.rvg"   "$reverie" import "$trace" -o "$tiny/g.rvg" --force
    full_disk export-graph  "$tiny/g.dot"   "$reverie" export-graph "$trace" -o "$tiny/g.dot" --force
    full_disk timeline      "$tiny/t.json"  "$reverie" simulate "$trace" --timeline "$tiny/t.json" --force
    full_disk timeline-gz   "$tiny/t.json.gz" "$reverie" whatif "$trace" --opt amp --timeline "$tiny/t.json.gz" --force
    full_disk report-o      "$tiny/q.json"  "$reverie" query "$trace" --json -n 0 -o "$tiny/q.json" --force
    full_disk critical-path "$tiny/cp.json" "$reverie" critical-path "$trace" --json -o "$tiny/cp.json" --force
    full_disk sweep-o       "$tiny/s.csv"   "$reverie" sweep "$trace" --vary 'scale.factor=0.01..1/1500' --no-peak --no-isolate -o "$tiny/s.csv" --force
    # a plot is small: fill the disk first
    head -c 60000 /dev/zero >"$tiny/filler"
    printf old >"$tiny/p.svg"
    expect_status 2 "$reverie" breakdown "$trace" --plot "$tiny/p.svg" --force
    [ "$(cat "$tiny/p.svg")" = old ] || fail "full disk, plot: the old file was replaced"
    [ -s "$work/out" ] && fail "full disk, plot: the report was printed although its plot failed"
    rm -f "$tiny/filler" "$tiny/p.svg"
    # so is an efficiency table (2 KB): the old one, then the disk filled
    printf old >"$tiny/e.json"
    cat /dev/zero >"$tiny/filler" 2>/dev/null
    expect_status 2 "$reverie" calibrate "$trace" --source-gpu V100-SXM2 -o "$tiny/e.json" --force
    [ "$(cat "$tiny/e.json")" = old ] || fail "full disk, calibrate: the old table was replaced"
    [ -s "$work/out" ] && fail "full disk, calibrate: the report was printed although its table failed"
    rm -f "$tiny/filler" "$tiny/e.json"
    # standard output into a full file
    expect_status 2 bash -c '"$1" query "$2" --json -n 0 >"$3"' _ "$reverie" "$trace" "$tiny/stdout.json"
    expect_in "$work/err" "cannot write standard output: No space left on device"
    rm -f "$tiny/stdout.json"
    umount "$tiny"
else
    skip full-disk "needs root to mount a 64 KiB tmpfs"
fi

# ---- > /dev/full: exit 2 from every command ----------------------------------

dev_full() {
    "$@" >/dev/full 2>"$work/err"
    local got=$?
    [ "$got" -eq 2 ] || fail "> /dev/full: exit $got, expected 2: $*"
    grep -q "No space left on device" "$work/err" || fail "> /dev/full: no line saying so: $* ($(head -c 200 "$work/err"))"
}
dev_full "$reverie" info "$trace"
dev_full "$reverie" simulate "$trace" --explain 5
dev_full "$reverie" whatif "$trace" --opt amp --json
dev_full "$reverie" validate "$trace" "$trace"
dev_full "$reverie" breakdown "$trace" --csv
dev_full "$reverie" critical-path "$trace" --json
dev_full "$reverie" comm-fraction "$trace"
dev_full "$reverie" kernels "$trace" --source-gpu V100-SXM2
dev_full "$reverie" memory "$trace"
dev_full "$reverie" sweep "$trace" --vary scale.factor=0.5,1
dev_full "$reverie" plugins --json
dev_full "$reverie" plan "$trace" --gpus 2 --gpu V100-SXM2
dev_full "$reverie" seqpoint "$trace" --json
dev_full "$reverie" query "$trace" kind=kernel
dev_full "$reverie" calibrate "$trace" --source-gpu V100-SXM2 -o "$work/devfull-table.json"
dev_full "$reverie" import "$trace" -o "$work/devfull.rvg"
dev_full "$reverie" export-graph "$trace" -o - --format dot --steps 1
dev_full "$reverie" --help
dev_full "$reverie" simulate --help

# ---- signals during a large timeline -------------------------------------------

"$gentrace" --events 100000 -o "$work/big.json.gz" 2>/dev/null || fail "gentrace --events failed"
"$reverie" import --quiet "$work/big.json.gz" -o "$work/big.rvg" || fail "cannot import the big trace"
mkdir -p "$work/signals"
# The timeline being written: a descriptor of the process open on a file
# of the signals folder that is not the target (unnamed: "#N (deleted)";
# named: ".t.json.reverie-XXXXXX") with bytes written.
writing() { # PID
    local fd link
    for fd in /proc/"$1"/fd/*; do
        link=$(readlink "$fd" 2>/dev/null) || continue
        case $link in
        "$work/signals/"*t.json) ;;
        "$work/signals/"*) [ "$(awk '/^pos:/ {print $2}' "/proc/$1/fdinfo/${fd##*/}" 2>/dev/null)" -gt 1000000 ] 2>/dev/null && return 0 ;;
        esac
    done
    return 1
}
interrupt() { # NAME SIGNAL [ENV...]
    local name=$1 signal=$2 pid waited=0
    shift 2
    printf 'old timeline\n' >"$work/signals/t.json"
    env "$@" "$reverie" simulate "$work/big.rvg" --timeline "$work/signals/t.json" --force >/dev/null 2>&1 &
    pid=$!
    until writing "$pid"; do
        sleep 0.05
        waited=$((waited + 1))
        if [ "$waited" -gt 1200 ] || ! kill -0 "$pid" 2>/dev/null; then
            fail "$name: the timeline write was not seen in progress"
            wait "$pid"
            return
        fi
    done
    kill "-$signal" "$pid"
    wait "$pid"
    local status=$?
    [ "$status" -gt 128 ] || fail "$name: exit $status, expected death by the signal"
    [ "$(cat "$work/signals/t.json")" = "old timeline" ] || fail "$name: the old timeline was not kept"
    if [ "$signal" = INT ] && [ "$(ls -A "$work/signals")" != t.json ]; then
        fail "$name: left $(ls -A "$work/signals")"
    fi
    rm -f "$work/signals/"* "$work/signals/".[!.]* 2>/dev/null
    echo "ok   $name"
}
interrupt "SIGINT, unnamed temporary" INT
interrupt "SIGKILL, unnamed temporary" KILL
interrupt "SIGINT, named temporary" INT REVERIE_NAMED_TEMPORARIES=1
interrupt "SIGKILL, named temporary" KILL REVERIE_NAMED_TEMPORARIES=1
# and one that finishes is complete, valid JSON
expect_status 0 "$reverie" simulate "$trace" --timeline "$work/signals/whole.json"
python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$work/signals/whole.json" || fail "timeline: not valid JSON"

# ---- the size bound on outputs --------------------------------------------------

printf 'old\n' >"$work/bounded.json"
expect_status 2 "$reverie" simulate "$trace" --timeline "$work/bounded.json" --force --max-output 100KB
expect_in "$work/err" "larger than the limit on one output"
[ "$(cat "$work/bounded.json")" = old ] || fail "--max-output: the old file was replaced"

# ---- plugins that crash, hang or exit ------------------------------------------

# Under AddressSanitizer a crash would print ASan's report (many lines) from
# the child before it dies: let the signal kill it plainly instead.
export ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}handle_segv=0"

for kind in crash hang exit; do
    expect_status 3 timeout 60 "$reverie" whatif "$trace" --opt "$plugins/hostile_$kind.so" --isolate --time-limit 2 \
        -o "$work/isolated.txt"
    one_line
    [ -e "$work/isolated.txt" ] && fail "--isolate $kind: a report file was written"
done
expect_in "$work/err" "called exit(0) in apply()"
expect_status 0 "$reverie" whatif "$trace" --opt amp --json --isolate
cp "$work/out" "$work/isolated.json"
expect_status 0 "$reverie" whatif "$trace" --opt amp --json
cmp -s "$work/out" "$work/isolated.json" || fail "--isolate changed whatif's answer"

started=$SECONDS
expect_status 3 timeout 120 env REVERIE_PLUGIN_PATH="$plugins" "$reverie" sweep "$trace" \
    --opt hostile_sometimes:crash=57,hang=311 --vary 'hostile_sometimes.n=0..399/400' --time-limit 3 -j 2
[ "$(wc -l <"$work/out")" -eq 401 ] || fail "sweep with a crash and a hang: $(wc -l <"$work/out") lines, expected 401"
[ "$(grep -c ',,,,,' "$work/out")" -eq 2 ] || fail "sweep: expected 2 error rows"
grep -q '^57,57,.*crashed in apply()' "$work/out" || fail "sweep: variant 57 is not the crash row"
grep -q '^311,311,.*did not finish within 3 s' "$work/out" || fail "sweep: variant 311 is not the hang row"
one_line
echo "ok   400-variant sweep with a crash and a hang in $((SECONDS - started)) s"

# ---- ranks of different jobs ------------------------------------------------------

"$gentrace" --ranks 2 --layers 6 --steps 2 -o "$work/job6" 2>/dev/null
mkdir -p "$work/mixed"
cp "$in/job/rank0.json.gz" "$work/mixed/rank0.json.gz"
cp "$work/job6/rank1.json.gz" "$work/mixed/rank1.json.gz"
expect_status 2 "$reverie" simulate "$work/mixed"
expect_in "$work/err" 'has 4 collectives on "0" but rank 1'
one_line
mkdir -p "$work/gather"
cp "$in/job/rank0.json.gz" "$work/gather/"
# rank 1's first collective becomes an all-gather (its operator, its
# "Collective name" and its kernel)
zcat "$in/job/rank1.json.gz" | sed '0,/nccl:all_reduce/s/nccl:all_reduce/nccl:all_gather/
    0,/"Collective name": "allreduce"/s/"Collective name": "allreduce"/"Collective name": "allgather"/
    0,/AllReduce/s/AllReduce/AllGather/' | gzip >"$work/gather/rank1.json.gz"
expect_status 2 "$reverie" simulate "$work/gather"
expect_in "$work/err" "the collective with sequence number"
expect_in "$work/err" "all_gather"
expect_status 0 "$reverie" simulate "$in/job"

# ---- forged cases ------------------------------------------------------------------

expect_status 3 "$reverie" whatif "$trace" --opt "$plugins/hostile_self_loop.so"
expect_in "$work/err" "wait for itself"
expect_status 3 "$reverie" whatif "$trace" --opt "$plugins/hostile_foreign_error.so"
expect_in "$work/err" "rules.json: No such file"
expect_status 1 "$reverie" whatif "$root/traces/pairs/dataloader_workers_v100/num_workers_0.json.gz" --opt dataloader:workers=5000
cat >"$work/nested.json" <<'EOF'
{"traceEvents": [
{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":100},
{"ph":"X","cat":"user_annotation","name":"ProfilerStep#2","pid":1,"tid":1,"ts":10,"dur":40},
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":20,"dur":5,"args":{"correlation":1}},
{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":30,"dur":10,"args":{"stream":7,"device":0,"correlation":1}}]}
EOF
expect_status 2 "$reverie" simulate "$work/nested.json"
expect_in "$work/err" "is nested inside step 0"
sed 's/"ts":10,"dur":40/"ts":50,"dur":100/' "$work/nested.json" >"$work/overlap.json"
expect_status 2 "$reverie" simulate "$work/overlap.json"
expect_in "$work/err" "overlap"
printf 'scale:factor=0.5\nscale:factor=0.7\0,junk\n' >"$work/nul.txt"
expect_status 2 "$reverie" sweep "$trace" --variants "$work/nul.txt"
expect_in "$work/err" "nul.txt:2: a NUL byte"
# Option values are UTF-8 text, whatever the locale; bytes that are not are refused.
expect_status 0 env LC_ALL=C "$reverie" query "$trace" 'name~é'
expect_in "$work/out" "matched: 0 of "
expect_status 0 env LC_ALL=C "$reverie" whatif "$trace" --opt 'scale:select=kind=kernel name!=é,factor=0.5'
expect_status 1 "$reverie" query "$trace" --group-by "$(printf 'n\377me')"
expect_in "$work/err" "not UTF-8"
# A long step name is cut where it is copied per event, its length said.
python3 - "$in/trace.json" "$work/long-name.json" <<'EOF'
import sys
text = open(sys.argv[1]).read().replace('"ProfilerStep#2"', '"ProfilerStep#2' + 'x' * 8000000 + '"')
open(sys.argv[2], 'w').write(text)
EOF
expect_status 0 "$reverie" simulate "$work/long-name.json" --timeline "$work/long.json"
[ "$(stat -c %s "$work/long.json")" -lt 20000000 ] || fail "a long name multiplied the timeline: $(stat -c %s "$work/long.json") bytes"
grep -q 'bytes in all\]' "$work/long.json" || fail "the cut name does not say its length"
expect_status 0 "$reverie" critical-path "$work/long-name.json" --json
[ "$(stat -c %s "$work/out")" -lt 20000000 ] || fail "critical-path --json copied the long name per task"

echo "$skipped skipped, $failures failures"
[ "$failures" -eq 0 ]
