#!/bin/sh
# cli_sweep.sh - command-line tests for `reverie sweep`: every row agrees
# with `reverie whatif` for the same specs, lists and ranges expand as
# documented, shards merge into the whole sweep row for row, -j does not
# change the output, a failing variant is a row, and bad input is one line
# on stderr with nothing on stdout.
#
# usage: cli_sweep.sh REVERIE GENTRACE
set -u

reverie=$1
gentrace=$2
. "$(dirname "$0")/cli_lib.sh"

# expect_usage_error STATUS TEXT ARGS... : fails before any work: the
# status, one stderr line containing TEXT, and nothing on stdout.
expect_usage_error() {
    status=$1
    text=$2
    shift 2
    expect_status "$status" "$reverie" sweep "$@"
    grep -qF -- "$text" "$work/err" || fail "sweep $*: stderr lacks '$text': $(head -c 300 "$work/err")"
    [ "$(wc -l <"$work/err")" -eq 1 ] || fail "sweep $*: stderr is not one line: $(cat "$work/err")"
    [ -s "$work/out" ] && fail "sweep $*: printed on stdout: $(head -c 200 "$work/out")"
}

# whatif_ms GRAPH SPEC... : whatif's predicted total in ms, as sweep prints it.
whatif_ms() {
    graph=$1
    shift
    set -- $(for spec in "$@"; do printf -- '--opt\n%s\n' "$spec"; done)
    "$reverie" whatif "$graph" "$@" --json |
        python3 -c 'import json, sys; print("%.6f" % (json.load(sys.stdin)["predicted_us"] / 1000))'
}

# column FILE NAME : the values of a CSV column, one per line.
column() {
    python3 -c 'import csv, sys
for row in csv.DictReader(open(sys.argv[1])): print(row[sys.argv[2]])' "$1" "$2"
}

"$gentrace" -o "$work/trace.json" --steps 4 --layers 6 2>/dev/null || { echo "reverie-gentrace failed"; exit 1; }
"$gentrace" -o "$work/mixed.json" --steps 3 --layers 6 --mixed-layers --single-gpu 2>/dev/null ||
    { echo "reverie-gentrace failed"; exit 1; }
"$reverie" import --quiet "$work/trace.json" -o "$work/g.rvg" || { echo "import failed"; exit 1; }
"$reverie" import --quiet "$work/mixed.json" -o "$work/mixed.rvg" || { echo "import failed"; exit 1; }
g=$work/g.rvg

# A list: the header, one row per value, each row what whatif predicts.
expect_status 0 "$reverie" sweep "$g" --vary scale.factor=0.5,1
[ "$(head -1 "$work/out")" = "variant,scale.factor,predicted_ms,baseline_ms,speedup,predicted_peak_mib,baseline_peak_mib,error" ] ||
    fail "CSV header: $(head -1 "$work/out")"
[ "$(wc -l <"$work/out")" -eq 3 ] || fail "two values should give two rows: $(cat "$work/out")"
cp "$work/out" "$work/list.csv"
[ "$(column "$work/list.csv" predicted_ms | head -1)" = "$(whatif_ms "$g" scale:factor=0.5)" ] ||
    fail "factor 0.5 differs from whatif: $(sed -n 2p "$work/list.csv")"
row=$(sed -n 3p "$work/list.csv")
[ "$(echo "$row" | cut -d, -f3)" = "$(echo "$row" | cut -d, -f4)" ] || fail "factor 1 should predict the baseline: $row"
[ "$(echo "$row" | cut -d, -f5)" = "1.000000" ] || fail "factor 1 should have speedup 1: $row"

# The peak memory columns: the memory model after each variant, as whatif
# says it (a larger batch raises it; the baseline column does not move).
expect_status 0 "$reverie" sweep "$g" --opt batch-size:source_gpu=V100-SXM2 --vary batch-size.factor=1,8
cp "$work/out" "$work/peak.csv"
for factor in 1 8; do
    expected=$("$reverie" whatif "$g" --opt batch-size:source_gpu=V100-SXM2,factor=$factor --json |
        python3 -c 'import json, sys; print("%.1f" % (json.load(sys.stdin)["predicted_peak_bytes"] / 1048576))')
    got=$(awk -F, -v f=$factor 'NR > 1 && $2 == f { print $6 }' "$work/peak.csv")
    [ "$got" = "$expected" ] || fail "batch-size factor=$factor: sweep peak $got MiB, whatif $expected MiB"
done
awk -F, 'NR == 2 { one = $6; if ($7 != one) exit 1 } NR == 3 { if (!($6 > one) || $7 != one) exit 1 }' "$work/peak.csv" ||
    fail "a larger batch should raise the peak column: $(cat "$work/peak.csv")"
expect_status 0 "$reverie" sweep "$g" --opt batch-size:source_gpu=V100-SXM2 --vary batch-size.factor=1,8 --no-peak
awk -F, 'NR > 1 && ($6 != "" || $7 != "") { exit 1 }' "$work/out" || fail "--no-peak should leave the peak empty: $(cat "$work/out")"

# The shortcuts a sweep takes for variants that change durations only (the
# memory model's peak reused, the scale selection matched once) change no
# row: the same sweeps with REVERIE_SWEEP_FULL_CHECKS set, which turns them
# off, in threads and in worker processes, on a graph of one dtype and on
# one of mixed layers; the variants mix plugins that change durations only
# with ones that move tensors or add tasks, and selections that repeat.
cat >"$work/mix.txt" <<'EOF2'
scale:factor=0.5
scale:select=kind=kernel,factor=50
'scale:select=kind=kernel phase=backward,factor=0.01'
scale:select=kind=kernel,factor=3
checkpoint:segments=2
'scale:select=kind=kernel phase=backward,factor=100'
batch-size:source_gpu=V100-SXM2,factor=4
scale:select=kind=cpu,factor=0.5,part=overhead
hardware:gpu=H100-SXM,source_gpu=V100-SXM2
grad-accumulation:steps=2
batch-size:source_gpu=V100-SXM2,factor=2 scale:factor=0.5
scale:factor=2
EOF2
for graph in "$g" "$work/mixed.rvg"; do
    for isolation in --isolate --no-isolate; do
        expect_status 0 "$reverie" sweep "$graph" --variants "$work/mix.txt" $isolation
        cp "$work/out" "$work/fast.csv"
        expect_status 0 env REVERIE_SWEEP_FULL_CHECKS=1 "$reverie" sweep "$graph" --variants "$work/mix.txt" $isolation
        cmp -s "$work/fast.csv" "$work/out" ||
            fail "sweep $graph $isolation: rows differ with REVERIE_SWEEP_FULL_CHECKS: $(diff "$work/fast.csv" "$work/out" | head -5)"
        [ "$(wc -l <"$work/out")" -eq 13 ] || fail "sweep $graph --variants: $(cat "$work/out")"
    done
done

# Ranges, linear and log, with units kept as written.
expect_status 0 "$reverie" sweep "$g" --vary 'scale.factor=0.25..1/4'
[ "$(column "$work/out" scale.factor | tr '\n' ' ')" = "0.25 0.5 0.75 1 " ] ||
    fail "linear range: $(column "$work/out" scale.factor | tr '\n' ' ')"
expect_status 0 "$reverie" sweep "$g" --vary 'network.bandwidth_factor=1..8/4 log'
[ "$(column "$work/out" network.bandwidth_factor | tr '\n' ' ')" = "1 2 4 8 " ] ||
    fail "log range: $(column "$work/out" network.bandwidth_factor | tr '\n' ' ')"
expect_status 0 "$reverie" sweep "$g" --vary 'ddp.bandwidth=10Gbps..40Gbps/4' --vary 'ddp.latency=1us..3us/3'
[ "$(column "$work/out" ddp.bandwidth | sort -u | tr '\n' ' ')" = "10Gbps 20Gbps 30Gbps 40Gbps " ] ||
    fail "range with units: $(column "$work/out" ddp.bandwidth | sort -u | tr '\n' ' ')"
# The cartesian product, the first --vary outermost.
[ "$(wc -l <"$work/out")" -eq 13 ] || fail "4 x 3 values should give 12 rows"
[ "$(column "$work/out" ddp.latency | head -4 | tr '\n' ' ')" = "1us 2us 3us 1us " ] ||
    fail "the last --vary should change fastest: $(column "$work/out" ddp.latency | head -4 | tr '\n' ' ')"
[ "$(column "$work/out" variant | tail -1)" = "11" ] || fail "variants are numbered from 0"

# Policies and inserted tasks: p3 and vdnn rows agree with whatif, run on one
# worker so each variant starts from the scratch graph the previous changed.
expect_status 0 "$reverie" sweep "$work/mixed.rvg" -j 1 --opt 'vdnn:policy=all' --vary 'p3.bandwidth=1Gbps,40Gbps' \
    --vary p3.priority=on,off
for variant in 0 1 2 3; do
    line=$(grep "^$variant," "$work/out")
    bandwidth=$(echo "$line" | cut -d, -f2)
    priority=$(echo "$line" | cut -d, -f3)
    expected=$(whatif_ms "$work/mixed.rvg" vdnn:policy=all "p3:bandwidth=$bandwidth,priority=$priority")
    [ "$(echo "$line" | cut -d, -f4)" = "$expected" ] || fail "p3 variant $variant: $line, whatif $expected"
done

# --variants: one line of --opt specs each; comments and blank lines skipped.
cat >"$work/variants.txt" <<'EOF'
# specs as in whatif
scale:factor=0.5

--opt amp --opt 'scale:select=kind=cpu,factor=0.5'
EOF
expect_status 0 "$reverie" sweep "$g" --variants "$work/variants.txt"
[ "$(wc -l <"$work/out")" -eq 3 ] || fail "--variants: two lines should give two rows: $(cat "$work/out")"
[ "$(column "$work/out" predicted_ms | sed -n 2p)" = "$(whatif_ms "$g" amp 'scale:select=kind=cpu,factor=0.5')" ] ||
    fail "--variants line 2 differs from whatif"
grep -q '^1,"--opt amp' "$work/out" || fail "--variants: the opts column holds the line: $(sed -n 3p "$work/out")"

# JSON Lines: one object per variant, the same numbers as the CSV.
expect_status 0 "$reverie" sweep "$g" --vary scale.factor=0.5,1 --jsonl --steps
python3 - "$work/out" "$work/list.csv" <<'EOF' || fail "JSON Lines disagree with the CSV"
import csv, json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
table = list(csv.DictReader(open(sys.argv[2])))
assert [r["variant"] for r in rows] == [0, 1]
for r, t in zip(rows, table):
    assert r["params"] == {"scale.factor": t["scale.factor"]}, r
    assert "%.6f" % (r["predicted_us"] / 1000) == t["predicted_ms"], (r, t)
    assert r["error"] is None and r["opts"] == ["scale:factor=" + t["scale.factor"]], r
    assert abs(sum(s["predicted_us"] for s in r["steps"]) - r["predicted_us"]) < 1e-3, r
EOF

# --steps in CSV: one column per step, adding up to the total.
expect_status 0 "$reverie" sweep "$g" --vary scale.factor=0.5 --steps
head -1 "$work/out" | grep -q ',step_1_ms,step_2_ms,step_3_ms,step_4_ms,error$' || fail "--steps header: $(head -1 "$work/out")"
awk -F, 'NR == 2 { s = $8 + $9 + $10 + $11; if (s - $3 > 1e-5 || $3 - s > 1e-5) exit 1 }' "$work/out" ||
    fail "step times do not add up: $(sed -n 2p "$work/out")"

# -j does not change the output; shards merge into the whole sweep.
"$reverie" sweep "$g" --vary 'scale.factor=0.1..1/10' --vary scale.part=all,overhead -j 1 >"$work/whole.csv" ||
    fail "whole sweep failed"
"$reverie" sweep "$g" --vary 'scale.factor=0.1..1/10' --vary scale.part=all,overhead -j 3 >"$work/parallel.csv"
cmp -s "$work/whole.csv" "$work/parallel.csv" || fail "-j 3 gives other rows than -j 1"
for k in 1 2 3 4; do
    "$reverie" sweep "$g" --vary 'scale.factor=0.1..1/10' --vary scale.part=all,overhead --shard "$k/4" \
        >"$work/part-$k.csv" || fail "shard $k/4 failed"
done
{ head -n 1 "$work/part-1.csv"; tail -q -n +2 "$work"/part-*.csv | sort -t, -k1,1n; } >"$work/merged.csv"
cmp -s "$work/whole.csv" "$work/merged.csv" || fail "the four shards do not merge into the whole sweep"
[ "$(wc -l <"$work/part-1.csv")" -eq 6 ] || fail "shard 1/4 of 20 variants should hold 5 rows"
"$reverie" sweep "$g" --vary 'scale.factor=0.1..1/10' --jsonl >"$work/whole.jsonl"
for k in 1 2 3; do
    "$reverie" sweep "$g" --vary 'scale.factor=0.1..1/10' --jsonl --shard "$k/3" >"$work/part-$k.jsonl"
done
cat "$work"/part-*.jsonl | sort -t: -k2,2n >"$work/merged.jsonl"
cmp -s "$work/whole.jsonl" "$work/merged.jsonl" || fail "the JSON Lines shards do not merge into the whole sweep"

# Several inputs: a source column, variants numbered over all of them.
expect_status 0 "$reverie" sweep "$g" "$work/trace.json" --vary scale.factor=0.5,1
head -1 "$work/out" | grep -q '^variant,source,scale.factor,' || fail "several inputs: $(head -1 "$work/out")"
[ "$(column "$work/out" variant | tr '\n' ' ')" = "0 1 2 3 " ] || fail "several inputs: variants 0-3 expected"
[ "$(column "$work/out" predicted_ms | sed -n 1p)" = "$(column "$work/out" predicted_ms | sed -n 3p)" ] ||
    fail "a trace and its graph should predict the same"

# A failing variant is a row with its error; the others run; the exit
# status is the first failure's (1: a parameter out of range).
expect_status 1 "$reverie" sweep "$g" --vary scale.factor=-1,1
[ "$(sed -n 2p "$work/out")" = '0,-1,,,,,,scale: factor=-1: the factor must be a finite number >= 0' ] ||
    fail "error row: $(sed -n 2p "$work/out")"
[ -n "$(column "$work/out" predicted_ms | sed -n 2p)" ] || fail "the variant after a failure should run"
grep -q "1 of 2 variants failed; first: variant 0: scale: factor=-1: the factor must be a finite number >= 0" "$work/err" ||
    fail "failure summary: $(cat "$work/err")"

# Bad input: one line, before any work, nothing on stdout.
expect_usage_error 1 "plugin ddp has no parameter 'nope'" "$g" --vary ddp.nope=1,2
expect_usage_error 1 "missing bandwidth unit" "$g" --vary ddp.bandwidth=10,20
expect_usage_error 1 "missing bandwidth unit" "$g" --vary 'ddp.bandwidth=10..400/5'
expect_usage_error 1 "missing duration unit" "$g" --vary 'ddp.latency=1..3/3'
expect_usage_error 1 "--shard takes K/N" "$g" --vary scale.factor=1 --shard 5/4
expect_usage_error 1 "--shard takes K/N" "$g" --vary scale.factor=1 --shard 0/4
expect_usage_error 1 "--shard takes K/N" "$g" --vary scale.factor=1 --shard 1/0
expect_usage_error 1 "--shard takes K/N" "$g" --vary scale.factor=1 --shard half
expect_usage_error 1 "--plot draws the curve of one --vary" "$g" --vary scale.factor=1,2 --vary amp.compute_speedup=2,3 --plot "$work/p.svg"
expect_usage_error 1 "--plot draws the curve of one --vary" "$g" "$g" --vary scale.factor=1,2 --plot "$work/p.svg"

# --plot: the rows as usual, and an SVG picture of them.
expect_status 0 "$reverie" sweep "$g" --vary 'scale.factor=0.25..1/4' --plot "$work/curve.svg"
[ "$(wc -l < "$work/out")" -eq 5 ] || fail "--plot: the rows should still be printed"
head -c 200 "$work/curve.svg" | grep -q '<svg' || fail "--plot wrote no SVG"
if command -v python3 >/dev/null 2>&1; then
    python3 -c "import sys, xml.dom.minidom as m; m.parse(sys.argv[1])" "$work/curve.svg" || fail "--plot: not well-formed XML"
fi
expect_status 2 "$reverie" sweep "$g" --vary 'scale.factor=0.5,1' --plot "$work/no/such/dir/curve.svg"
expect_usage_error 1 "nothing to sweep" "$g" --opt amp
expect_usage_error 1 "expected NAME.PARAM=LIST" "$g" --vary scale.factor
expect_usage_error 1 "a range is lo..hi/N" "$g" --vary 'scale.factor=0..1'
expect_usage_error 1 "a range is lo..hi/N" "$g" --vary 'scale.factor=0..1/1'
expect_usage_error 1 "a log range needs both ends above zero" "$g" --vary 'scale.factor=0..1/3 log'
expect_usage_error 1 "not a range" "$g" --vary 'ddp.algorithm=ring..tree/2'
expect_usage_error 1 "expected one of ring|tree|hierarchical" "$g" --vary ddp.algorithm=ring,star
expect_usage_error 1 "is given twice" "$g" --vary scale.factor=1 --vary scale.factor=2
expect_usage_error 1 "is applied 2 times" "$g" --opt scale --opt scale --vary scale.factor=1,2
expect_usage_error 1 "an empty value" "$g" --vary scale.factor=1,,2
expect_usage_error 1 "give at least one trace or graph" --vary scale.factor=1
expect_usage_error 1 "no optimization named 'nosuch'" "$g" --vary nosuch.x=1
printf 'scale:factor=1\nscale:nope=2\n' >"$work/bad.txt"
expect_usage_error 1 "bad.txt:2: plugin scale: unknown parameter 'nope'" "$g" --variants "$work/bad.txt"
expect_usage_error 2 "--variants:" "$g" --variants "$work/missing.txt"
expect_usage_error 2 "missing.rvg" "$work/missing.rvg" --vary scale.factor=1

expect_status 0 "$reverie" sweep --help
grep -q "Examples:" "$work/out" || fail "--help has no example"

if [ "$failures" -ne 0 ]; then
    echo "$failures failures"
    exit 1
fi
echo "all sweep command-line checks passed"
