#!/bin/sh
# cli_memory.sh - command-line tests for `reverie memory` and the peak
# memory that whatif and vdnn report: the breakdown adds up, --json parses
# and agrees with the text, --gpu says whether it fits, a saved graph gives
# the same answer as its trace, and bad input gives one line and a non-zero
# exit.
#
# usage: cli_memory.sh REVERIE SOURCE_ROOT
# Uses the traces the project ships; exits 77 (skipped) when they are missing.
set -u

reverie=$1
root=$2
. "$(dirname "$0")/cli_lib.sh"

h100="$root/traces/pairs/gpu_h100_vs_mi300x_timesformer/h100.json.gz"
generated="$root/traces/gen_mlp_memory.json.gz"
no_shapes="$root/traces/hta_transformer_ddp_v100_rank1.2steps.json.gz"
neither="$root/traces/hta_simple_add_small_a100.json.gz"
resnet="$root/traces/kineto_legacy_resnet50_v100.2steps.json.gz"
for file in "$h100" "$generated" "$no_shapes" "$neither" "$resnet"; do
    [ -f "$file" ] || { echo "missing $file: skipped" >&2; exit 77; }
done


# --- help ---------------------------------------------------------------------
expect_status 0 "$reverie" memory --help
expect_in "$work/out" "Examples"
expect_status 0 "$reverie" --help
expect_in "$work/out" "memory"

# --- the real inference pair: estimate and recording ------------------------
expect_status 0 "$reverie" memory "$h100" --gpu H100-SXM
expect_in "$work/out" "inference: no backward phase"
expect_in "$work/out" "recorded ([memory] events): peak 4282.7 MiB allocated"
expect_in "$work/out" "estimate vs recorded peak:"
expect_in "$work/out" "H100-SXM: "
expect_in "$work/out" " fits ("
expect_status 0 "$reverie" memory "$h100" --gpu H100-SXM --json
json_check "d['recorded']['peak_allocated_bytes'] == 4490752000"
json_check "abs(d['estimate_error']) < 0.11"
json_check "all(sum(v for k, v in row.items() if k != 'total') == row['total'] for row in d['estimate']['phases'].values())"
json_check "d['estimate']['peak_bytes'] == max(row['total'] for row in d['estimate']['phases'].values())"
json_check "d['gpu']['fits'] and d['gpu']['peak_from'] == 'recorded'"

# --- a generated training job: every phase, the optimizer found ---------------
expect_status 0 "$reverie" memory "$generated" --json
json_check "d['estimate']['training'] and set(d['estimate']['phases']) == {'forward', 'backward', 'optimizer'}"
json_check "d['estimate']['optimizer_factor'] == 2"
json_check "d['estimate']['phases']['optimizer']['optimizer_state'] == 2 * d['estimate']['phases']['optimizer']['weights']"
json_check "0 < d['estimate_error'] < 0.035"
json_check "len(d['recorded']['steps']) == 4"

# --- a saved graph answers the same -------------------------------------------
expect_status 0 "$reverie" import "$generated" -o "$work/g.rvg"
expect_status 0 "$reverie" memory "$generated"
cp "$work/out" "$work/from_trace"
expect_status 0 "$reverie" memory "$work/g.rvg"
tail -n +2 "$work/out" >"$work/a"; tail -n +2 "$work/from_trace" >"$work/b"
cmp -s "$work/a" "$work/b" || fail "the saved graph's memory report differs from the trace's"

# --- does not fit --------------------------------------------------------------
expect_status 0 "$reverie" memory "$no_shapes" --gpu T4 --json
json_check "d['estimate'] is None and 'record_shapes' in d['estimate_missing']"
json_check "d['gpu']['peak_from'] == 'recorded' and d['gpu']['fits']"
expect_status 0 "$reverie" memory "$resnet" --gpu T4
expect_in "$work/out" "estimate from shapes (training"
expect_in "$work/out" "events without totals"
expect_status 0 "$reverie" memory "$resnet" --json
json_check "d['recorded']['peak_allocated_bytes'] is None and d['recorded']['peak_above_start_bytes'] > 0"
json_check "0 < d['above_start_error'] < 0.13"

# --- whatif reports the peak; vdnn lowers it and says what it costs -----------
expect_status 0 "$reverie" whatif "$h100" --opt scale:select=kind=kernel,factor=0.5 --json
json_check "d['baseline_peak_bytes'] == d['predicted_peak_bytes'] > 0 and d['recorded_peak_bytes'] == 4490752000"
expect_status 0 "$reverie" whatif "$h100" --opt scale:select=kind=kernel,factor=0.5
expect_in "$work/out" "peak memory "
expect_status 0 "$reverie" whatif "$resnet" --opt vdnn --json
json_check "d['predicted_peak_bytes'] < d['baseline_peak_bytes']"
json_check "'peak_with_bytes=%d' % d['predicted_peak_bytes'] in d['optimizations'][0]['notes']"
json_check "'prefetch_stall_ns=' in d['optimizations'][0]['notes']"
expect_status 0 "$reverie" whatif "$no_shapes" --opt scale:select=kind=kernel,factor=0.5 --json
json_check "d['baseline_peak_bytes'] is None and d['recorded_peak_bytes'] > 0"

# --- memory --opt: the estimate of the optimized job, as whatif's peak line -------
expect_status 0 "$reverie" memory "$resnet" --json
cp "$work/out" "$work/plain.json"
expect_status 0 "$reverie" memory "$resnet" --opt checkpoint:segments=4 --json
json_check "d['optimizations'] == 'checkpoint:segments=4' and d['above_start_error'] is None"
json_check "d['estimate']['recomputed_bytes'] > 0"
python3 -c "import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); sys.exit(0 if b['estimate']['peak_bytes'] < a['estimate']['peak_bytes'] and b['estimate']['phases']['forward']['weights'] == a['estimate']['phases']['forward']['weights'] else 1)" "$work/plain.json" "$work/out" \
    || fail "checkpoint did not lower the estimate, or moved the weights"
cp "$work/out" "$work/checkpointed.json"
expect_status 0 "$reverie" whatif "$resnet" --opt checkpoint:segments=4 --json
python3 -c "import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); sys.exit(0 if a['estimate']['peak_bytes'] == b['predicted_peak_bytes'] else 1)" "$work/checkpointed.json" "$work/out" \
    || fail "memory --opt and whatif --opt disagree on the peak"
expect_status 0 "$reverie" memory "$resnet" --opt batch-size:factor=2 --gpu T4
expect_in "$work/out" "after batch-size:factor=2: estimate from shapes"
expect_in "$work/out" "(the trace's, before the optimizations) recorded"
expect_in "$work/out" "T4: 14.9 GiB of memory; the estimate peak"
expect_status 0 "$reverie" memory "$resnet" --opt pipeline:stages=4,schedule=1f1b --json
json_check "d['estimate']['pipeline_stages'] == 4 and 0 <= d['estimate']['pipeline_stage'] < 4"
python3 -c "import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); sys.exit(0 if b['estimate']['peak_bytes'] < a['estimate']['peak_bytes'] else 1)" "$work/plain.json" "$work/out" \
    || fail "a pipeline stage should hold less than the whole model"
expect_status 0 "$reverie" memory "$resnet" --opt pipeline:stages=4
expect_in "$work/out" "on pipeline stage "
expect_status 1 "$reverie" memory "$resnet" --opt nosuch
one_line
expect_in "$work/err" "no optimization named 'nosuch'"
expect_status 1 "$reverie" memory "$resnet" --opt checkpoint:segments=0
one_line

# --- bad input: one line, non-zero exit -----------------------------------------
expect_status 2 "$reverie" memory "$neither"
one_line
expect_in "$work/err" "nothing to measure memory from"
expect_status 1 "$reverie" memory "$h100" --gpu NoSuchGPU
one_line
expect_status 1 "$reverie" memory
one_line
expect_status 1 "$reverie" memory "$h100" "$h100"
one_line
expect_status 2 "$reverie" memory "$work/missing.json"
one_line
printf '{"traceEvents": [{"ph": "i", "name": "[memory]", "ts": 1, "pid": 1, "tid": 1, "args": {"Device Type": 1, "Device Id": 0, "Total Allocated": "x", "Bytes": []}}]}' >"$work/bad.json"
expect_status 2 "$reverie" memory "$work/bad.json"
one_line
expect_in "$work/err" "\"Bytes\" must be an integer"

# --- an inference trace recorded without ProfilerStep ------------------------------
# The whole trace is its step and all of it forward: a positive estimate,
# half of it in bf16, never "0.0 MiB" (nor "-100%" against a recording).
fp32="$root/traces/pairs/weights_fp32_vs_bf16_a10g/fp32.json.gz"
bf16="$root/traces/pairs/weights_fp32_vs_bf16_a10g/bf16.json.gz"
if [ -f "$fp32" ] && [ -f "$bf16" ]; then
    expect_status 0 "$reverie" memory "$fp32" --json
    json_check "d['estimate']['peak_bytes'] > 10 * 2**20 and d['estimate']['peak_phase'] == 'forward'"
    cp "$work/out" "$work/fp32.json"
    expect_status 0 "$reverie" memory "$bf16" --json
    python3 -c "import json,sys; a=json.load(open(sys.argv[1]))['estimate']['peak_bytes']; b=json.load(open(sys.argv[2]))['estimate']['peak_bytes']; sys.exit(0 if 0.4 < b / a < 0.6 else 1)" \
        "$work/fp32.json" "$work/out" || fail "bf16's estimate is not about half of fp32's"
    expect_status 0 "$reverie" memory "$fp32"
    grep -q "peak 0.0 MiB" "$work/out" && fail "an inference trace without ProfilerStep estimated at 0.0 MiB"
    expect_status 0 "$reverie" whatif "$fp32" --opt precision:dtype=bf16 --json
    json_check "d['baseline_peak_bytes'] > 0 and 0.4 < d['predicted_peak_bytes'] / d['baseline_peak_bytes'] < 0.6"
fi

[ "$failures" -eq 0 ] || exit 1
exit 0
