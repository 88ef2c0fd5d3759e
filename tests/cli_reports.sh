#!/bin/sh
# cli_reports.sh - command-line tests for what shows where the time went:
# `breakdown`, `critical-path`, and the --timeline, --plot, --csv and
# --diff options of `simulate` and `whatif`; every command's --help shows
# an example; bad usage and unwritable files give one line and the right
# exit status.
#
# usage: cli_reports.sh REVERIE SOURCE_ROOT
# Uses the trace the project ships (traces/small_ddp.json.gz).
set -u

reverie=$1
root=$2
trace="$root/traces/small_ddp.json.gz"
. "$(dirname "$0")/cli_lib.sh"

# A JSON file that python's parser accepts (gzip when named .gz); prints a key's presence.
json_has() { # FILE KEY
    python3 - "$1" "$2" <<'PY' || fail "$1: not JSON with key $2"
import gzip, json, sys
path, key = sys.argv[1], sys.argv[2]
data = json.load(gzip.open(path) if path.endswith('.gz') else open(path))
sys.exit(0 if key in data else 1)
PY
}

[ -f "$trace" ] || { echo "missing $trace" >&2; exit 1; }

# --- every command's --help shows an example -----------------------------
for command in import info simulate whatif validate sweep plugins query export-graph breakdown critical-path; do
    expect_status 0 "$reverie" "$command" --help
    expect_in "$work/out" "Example"
done

# --- breakdown -----------------------------------------------------------
expect_status 0 "$reverie" breakdown "$trace"
expect_in "$work/out" "cpu_only"
expect_in "$work/out" "exposed comm"
expect_in "$work/out" "gpu stream 0/20"
expect_status 0 "$reverie" breakdown "$trace" --json
cp "$work/out" "$work/breakdown.json"
json_has "$work/breakdown.json" runs
expect_status 0 "$reverie" breakdown "$trace" --csv --opt 'scale:select=kind=kernel,factor=0.5' --plot "$work/b.svg"
head -1 "$work/out" | grep -qx 'run,step,section,name,part,us,share_of_step' || fail "breakdown --csv header: $(head -1 "$work/out")"
grep -q '^predicted,ProfilerStep#1,split,,gpu_only,' "$work/out" || fail "breakdown --csv has no predicted rows"
grep -q '<svg' "$work/b.svg" || fail "breakdown --plot wrote no SVG"

# --- critical-path -------------------------------------------------------
expect_status 0 "$reverie" critical-path "$trace" --top 3
expect_in "$work/out" "longest links"
expect_status 0 "$reverie" critical-path "$trace" --json --timeline "$work/cp.json.gz"
cp "$work/out" "$work/cp.json"
json_has "$work/cp.json" tasks
expect_in "$work/cp.json" '"recorded_start_us"'
json_has "$work/cp.json.gz" traceEvents
expect_status 0 "$reverie" critical-path "$trace" --csv
head -1 "$work/out" | grep -q '^run,step,name,kind,resource' || fail "critical-path --csv header"

# --- simulate and whatif options ----------------------------------------
expect_status 0 "$reverie" simulate "$trace" --timeline "$work/sim.json" --plot "$work/sim.svg"
json_has "$work/sim.json" traceEvents
expect_in "$work/sim.json" '"name":"process_name"'
expect_in "$work/sim.json" '"cat":"ac2g"'
expect_in "$work/sim.json" 'ProfilerStep#1'
grep -q '<svg' "$work/sim.svg" || fail "simulate --plot wrote no SVG"
expect_status 0 "$reverie" simulate "$trace" --json
python3 "$(dirname "$0")/plot_bars.py" "$work/sim.svg" "$work/out" recorded_us simulated_us ||
    fail "simulate --plot's bars disagree with --json"
expect_status 0 "$reverie" simulate "$trace" --csv
head -1 "$work/out" | grep -qx 'step,recorded_us,simulated_us,error,unexplained_us' || fail "simulate --csv header"
[ "$(wc -l < "$work/out")" -eq 5 ] || fail "simulate --csv: expected 4 steps"
opt='scale:select=kind=kernel,factor=0.5'
expect_status 0 "$reverie" whatif "$trace" --opt "$opt" --diff --timeline "$work/w.json" --plot "$work/w.svg"
expect_in "$work/out" "what changed"
expect_in "$work/out" "critical path by kind"
expect_in "$work/w.json" '"args":{"name":"baseline rank'
expect_in "$work/w.json" '"args":{"name":"predicted rank'
expect_in "$work/w.json" '"change":"changed"'
expect_status 0 "$reverie" whatif "$trace" --opt "$opt" --diff --json
cp "$work/out" "$work/w-diff.json"
python3 "$(dirname "$0")/plot_bars.py" "$work/w.svg" "$work/w-diff.json" baseline_us predicted_us ||
    fail "whatif --plot's bars disagree with --json"
json_has "$work/w-diff.json" diff
expect_status 0 "$reverie" whatif "$trace" --opt "$opt" --csv
head -1 "$work/out" | grep -qx 'step,recorded_us,baseline_us,predicted_us,speedup' || fail "whatif --csv header"

# --- info and import agree; a single process is not "rank -1 of -1" ------
cat > "$work/single.json" <<'JSON'
{"traceEvents": [
 {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": 7, "ts": 100, "dur": 10, "args": {"correlation": 1}},
 {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": 7, "tid": 7, "ts": 102, "dur": 5, "args": {"correlation": 2}},
 {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 115, "dur": 20, "args": {"correlation": 1, "device": 0, "stream": 7}}
]}
JSON
expect_status 0 "$reverie" info "$work/single.json"
expect_in "$work/out" "distributed: not recorded"
grep -q "rank -1" "$work/out" && fail "info still prints rank -1"
info_tasks=$(sed -n 's/^tasks: //p' "$work/out")
expect_status 0 "$reverie" import "$work/single.json" -o "$work/single.rvg"
expect_in "$work/out" "wrote $work/single.rvg: $info_tasks tasks (plus 1 nested runtime calls merged"

# --- bad usage and bad files ----------------------------------------------
expect_status 1 "$reverie" breakdown
expect_status 1 "$reverie" breakdown "$trace" --json --csv
expect_status 1 "$reverie" critical-path "$trace" --top -1
expect_status 1 "$reverie" simulate "$trace" --json --csv
expect_status 2 "$reverie" breakdown "$work/missing.json"
expect_status 2 "$reverie" simulate "$trace" --timeline /nonexistent-folder/t.json
expect_in "$work/err" "cannot write /nonexistent-folder/t.json"
[ "$(grep -vc "reverie: note:" "$work/err")" -eq 1 ] || fail "unwritable timeline: more than one error line"
expect_status 2 "$reverie" breakdown "$trace" --plot /nonexistent-folder/p.svg
expect_in "$work/err" "cannot write /nonexistent-folder/p.svg"
expect_status 1 "$reverie" critical-path "$trace" --opt no-such-plugin

# --- simulate --explain --json names each task by its trace timestamp ------
# (whole microseconds: 12 significant digits would round it to 10 ms)
expect_status 0 "$reverie" simulate "$trace" --explain 5 --json
python3 - "$work/out" "$trace" <<'PY' || fail "simulate --explain --json: recorded_start_us does not name a recorded task"
import gzip, json, sys
largest = json.load(open(sys.argv[1]))['unexplained']['largest']
events = json.load(gzip.open(sys.argv[2]))['traceEvents']
starts = {(e.get('name'), int(float(e['ts']))) for e in events if e.get('ph') == 'X'}
assert largest, 'no unexplained tasks listed'
for item in largest:
    assert isinstance(item['recorded_start_us'], int), item
    assert any((item['name'], item['recorded_start_us'] + d) in starts for d in (-1, 0, 1)), item
PY

if [ "$failures" -ne 0 ]; then
    echo "$failures failures" >&2
    exit 1
fi
echo "cli_reports: all passed"
