#!/bin/sh
# cli_ranks.sh - command-line tests for several ranks of one job: simulate,
# whatif, info, import and validate take a folder or a list of traces; the
# JSON schema of a job; a saved job; and bad input (a rank twice, a rank
# missing, ranks of different jobs, a saved job given as a rank, an empty
# folder), each one line on stderr with exit status 2.
#
# usage: cli_ranks.sh REVERIE SOURCE_ROOT
# Uses the 8 DLRM ranks the project ships (traces/param_dlrm_v100_8ranks).
set -u

reverie=$1
root=$2
job="$root/traces/param_dlrm_v100_8ranks"
. "$(dirname "$0")/cli_lib.sh"

for r in 0 1 2 3 4 5 6 7; do
    [ -f "$job/rank$r.json.gz" ] || { echo "missing $job/rank$r.json.gz: skipped" >&2; exit 77; }
done

# stderr is one line that holds TEXT
expect_one_line_error() { # TEXT
    [ "$(wc -l <"$work/err")" -eq 1 ] || fail "stderr is not one line: $(cat "$work/err")"
    expect_in "$work/err" "$1"
}

# --- a folder, and the same files listed --------------------------------
expect_status 0 "$reverie" simulate "$job"
expect_in "$work/out" "8 ranks"
expect_in "$work/out" "(the slowest rank)"
grep -c "ProfilerStep#10" "$work/out" | grep -qx 9 || fail "simulate: not 8 rank rows and a job row"
cp "$work/out" "$work/folder.txt"
expect_status 0 "$reverie" simulate "$job"/rank0.json.gz "$job"/rank1.json.gz "$job"/rank2.json.gz "$job"/rank3.json.gz \
    "$job"/rank4.json.gz "$job"/rank5.json.gz "$job"/rank6.json.gz "$job"/rank7.json.gz
tail -n +2 "$work/out" >"$work/list.rows"
tail -n +2 "$work/folder.txt" >"$work/folder.rows"
cmp -s "$work/list.rows" "$work/folder.rows" || fail "a list of the files replays unlike their folder"

# --- the JSON of a job --------------------------------------------------
expect_status 0 "$reverie" simulate "$job" --json
python3 - "$work/out" <<'EOF' || fail "simulate --json of a job"
import json, sys
d = json.load(open(sys.argv[1]))
ranks = d["ranks"]
assert [r["rank"] for r in ranks] == list(range(8)), ranks
for r in ranks:
    assert r["source"].endswith("rank%d.json.gz" % r["rank"])
    step = r["steps"][0]
    assert step["name"] == "ProfilerStep#10" and step["recorded_us"] > 0 and step["simulated_us"] > 0
    assert abs(step["simulated_us"] - step["recorded_us"]) <= 0.05 * step["recorded_us"], step
    assert r["collectives"] == 8 and r["wait_us"] >= 0
# the job's step is its slowest rank's
assert abs(d["steps"][0]["recorded_us"] - max(r["steps"][0]["recorded_us"] for r in ranks)) < 1e-6
EOF

# --- a straggler: the others wait for it, and the report says so ---------
expect_status 0 "$reverie" whatif "$job" --opt straggler:rank=3,factor=2 --json
python3 - "$work/out" <<'EOF' || fail "whatif straggler --json"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["predicted_us"] > d["baseline_us"] * 1.1, (d["predicted_us"], d["baseline_us"])
for r in d["ranks"]:
    if r["rank"] == 3:
        continue
    most = max(r["waited_for"], key=lambda w: w["us"])
    assert most["rank"] == 3, (r["rank"], r["waited_for"])
    assert "baseline_us" in r["steps"][0] and "predicted_us" in r["steps"][0]
EOF
expect_status 0 "$reverie" whatif "$job" --opt straggler:rank=3,factor=2
expect_in "$work/out" "(rank 3 "

# --- info: ranks, clocks, how the collectives were matched ---------------
expect_status 0 "$reverie" info "$job"
expect_in "$work/out" "distributed: 8 ranks of 8 in one graph"
expect_in "$work/out" "collectives: 8 matched across ranks"
expect_in "$work/out" "by order in its process group"
expect_status 0 "$reverie" info "$job" --json
python3 - "$work/out" <<'EOF' || fail "info --json of a job"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["job"]["collectives_matched"] == 8 and d["job"]["kernels_unmatched"] == 0
assert len(d["job"]["ranks"]) == 8
EOF

# --- a saved job replays as the folder does ------------------------------
expect_status 0 "$reverie" import "$job" -o "$work/job.rvg"
expect_status 0 "$reverie" simulate "$work/job.rvg"
cmp -s "$work/out" "$work/folder.txt" || fail "the saved job replays unlike the folder"
# a saved job's breakdown: each rank's step over its own resources, the
# parts adding up to the step (windows of different ranks overlap in time)
expect_status 0 "$reverie" breakdown "$work/job.rvg" --json
json_check "all(abs(sum(s[k + '_us'] for k in ('cpu_only', 'gpu_only', 'overlap', 'idle')) - s['time_us']) < 0.01 for r in d['runs'] for s in r['steps']) and len(d['runs'][0]['steps']) == 8"
expect_status 1 "$reverie" import "$job"/rank0.json.gz "$job"/rank1.json.gz
expect_one_line_error "give the output with -o GRAPH.rvg when importing several ranks"

# --- validate takes a folder on either side ------------------------------
expect_status 0 "$reverie" validate "$job" "$job"
expect_in "$work/out" "replay error"

# --- bad input: one line, exit 2 ----------------------------------------
expect_status 2 "$reverie" simulate "$job"/rank0.json.gz "$job"/rank0.json.gz
expect_one_line_error "hold one recording"
cp "$job"/rank0.json.gz "$work/rank0-again.json.gz"
expect_status 2 "$reverie" simulate "$job"/rank0.json.gz "$work/rank0-again.json.gz"
expect_one_line_error "rank0-again.json.gz hold one recording"
# a folder with a trace that names no rank and the graph imported beside
# it (import's default output): one recording, not a job of two ranks
mkdir "$work/beside"
cp "$root/traces/pairs/weights_fp32_vs_bf16_a10g/fp32.json.gz" "$work/beside/"
"$reverie" import --quiet "$work/beside/fp32.json.gz" || fail "import into $work/beside"
expect_status 2 "$reverie" simulate "$work/beside"
expect_one_line_error "fp32.json.gz and $work/beside/fp32.rvg hold one recording"
expect_status 2 "$reverie" simulate "$job"/rank0.json.gz "$job"/rank1.json.gz "$job"/rank2.json.gz
expect_one_line_error "5 of 8 ranks are missing (ranks 3, 4, 5, 6, 7;"
expect_status 2 "$reverie" whatif "$job"/rank0.json.gz "$root/traces/hta_transformer_ddp_v100_rank1.2steps.json.gz" --opt amp
expect_one_line_error "ranks from different jobs"
expect_status 2 "$reverie" simulate "$work/job.rvg" "$job"/rank0.json.gz
expect_one_line_error "holds a job of 8 ranks already: give it alone"
# ranks load side by side: still the first broken rank in order is the error
mkdir "$work/broken"
cp "$job"/rank*.json.gz "$work/broken/"
printf '{"traceEvents": [' | gzip >"$work/broken/rank3.json.gz"
printf 'not json' | gzip >"$work/broken/rank6.json.gz"
expect_status 2 "$reverie" simulate "$work/broken"
expect_one_line_error "rank3.json.gz"
grep -q "rank6" "$work/err" && fail "the error of a later rank was reported: $(cat "$work/err")"
mkdir "$work/empty"
expect_status 2 "$reverie" info "$work/empty"
expect_one_line_error "a folder with no .json, .json.gz or .rvg file in it"
# a bad parameter is one error line after the notes on what the traces lacked
expect_plugin_error() { # TEXT
    [ "$(grep -vc '^reverie: note: ' "$work/err")" -eq 1 ] || fail "not one error line: $(cat "$work/err")"
    grep -v '^reverie: note: ' "$work/err" | grep -qF -- "$1" || fail "the error lacks \"$1\": $(cat "$work/err")"
}
# each rank's DataLoader gets workers of its own (an edge across ranks
# would be refused: test_job's an_edge_across_ranks_is_refused)
expect_status 0 "$reverie" whatif "$job" --opt dataloader:workers=4
expect_in "$work/out" "8 batches (steps x ranks)"
expect_in "$work/out" "4 workers of its rank"
expect_status 1 "$reverie" whatif "$job" --opt straggler:rank=9
expect_plugin_error "rank=9: the graph holds ranks 0, 1, 2, 3, 4, 5, 6, 7"

# --plot of a job: one group per step of the job, each bar as tall as the
# job's step in --json (the slowest rank's), its breakdown that rank's own
plot_check() {
    python3 "$(dirname "$0")/plot_bars.py" "$@" || fail "the plot disagrees with --json: $*"
}
expect_status 0 "$reverie" simulate "$job" --plot "$work/job.svg"
expect_status 0 "$reverie" simulate "$job" --json
plot_check "$work/job.svg" "$work/out" recorded_us simulated_us
expect_status 0 "$reverie" whatif "$job" --opt straggler:rank=3,factor=1.5 --plot "$work/job.svg" --force
expect_status 0 "$reverie" whatif "$job" --opt straggler:rank=3,factor=1.5 --json
plot_check "$work/job.svg" "$work/out" baseline_us predicted_us

[ "$failures" -eq 0 ] || { echo "$failures failures" >&2; exit 1; }
echo "cli_ranks: all checks passed"
