#!/bin/sh
# cli_hardware.sh - command-line tests for the hardware and precision
# projection: `kernels` (and --target), `comm-fraction`, `calibrate`,
# whatif's GPU kernel time and range, validate's GPU kernel error, range and
# host/GPU split, that the shipped efficiency table is current, and the
# one-line errors of the catalogue, the tables and the plugins on them
# (metaflow's bundled and bad rule files too).
#
# usage: cli_hardware.sh REVERIE SOURCE_ROOT
# Uses the traces the project ships; exits 77 (skipped) when they are missing.
set -u

reverie=$1
root=$2
. "$(dirname "$0")/cli_lib.sh"

pair="$root/traces/pairs/gpu_h100_vs_mi300x_timesformer"
weights="$root/traces/pairs/weights_fp32_vs_bf16_a10g"
legacy="$root/traces/pairs/dataloader_workers_v100/num_workers_0.json.gz"
ddp="$root/traces/kineto_legacy_resnet50_v100.2steps.json.gz"
for file in "$pair/h100.json.gz" "$pair/mi300x.json.gz" "$weights/fp32.json.gz" "$legacy" "$ddp" \
    "$root/traces/recorded/h200/gpt_fp32.json.gz" "$root/traces/recorded/h200/gpt_amp_bf16.json.gz"; do
    [ -f "$file" ] || { echo "missing $file: skipped" >&2; exit 77; }
done


# --- every new command's --help shows an example ---------------------------
for command in kernels comm-fraction; do
    expect_status 0 "$reverie" "$command" --help
    expect_in "$work/out" "Example"
done

# --- kernels ----------------------------------------------------------------
expect_status 0 "$reverie" kernels "$pair/h100.json.gz" --scaling
expect_in "$work/out" "H100-SXM"
expect_in "$work/out" "every kernel is classified"
expect_in "$work/out" "operator models against the shapes"
expect_status 0 "$reverie" kernels "$weights/fp32.json.gz" --json
json_check "d['gpu'] == 'A10G' and d['usual_dtype'] == 'fp32' and d['classes']['gemm']['kernels'] == 49"
expect_status 1 "$reverie" kernels "$legacy"
expect_in "$work/err" "no deviceProperties"
expect_in "$work/err" "--source-gpu=NAME"
one_line
expect_status 0 "$reverie" kernels "$legacy" --source-gpu V100
# whether the convolutions recorded their stride (Concrete Inputs) or are
# taken at stride 1: a 2021 trace has none, the MI300X ResNet all
expect_status 0 "$reverie" kernels "$ddp"
expect_in "$work/out" "no convolution recorded its stride"
expect_status 0 "$reverie" kernels "$root/traces/tracelens_mi300x_resnet_act_checkpoint.json.gz" --json
json_check "d['classes']['conv']['shaped'] > 0 and d['classes']['conv']['with_arguments'] == d['classes']['conv']['shaped']"
# MIOpen's layout transposes follow their convolutions onto another
# vendor's GPU (counted as conv there), not onto AMD's own MI250
mi300x_resnet="$root/traces/tracelens_mi300x_resnet_act_checkpoint.json.gz"
expect_status 0 "$reverie" kernels "$mi300x_resnet" --target H100-SXM --json
json_check "d['target']['library_helpers']['kernels'] > 500 and d['target']['classes']['conv']['kernels'] > d['classes']['conv']['kernels'] + 500"
expect_status 0 "$reverie" kernels "$mi300x_resnet" --target MI250
! grep -q "library convolutions launched" "$work/out" || fail "MIOpen's helpers moved onto AMD's own MI250: $(grep 'library convolutions' "$work/out")"
expect_status 0 "$reverie" kernels "$mi300x_resnet" --target H100-SXM
expect_in "$work/out" "library convolutions launched under other names"

# --- whatif: GPU kernel time beside the step times --------------------------
expect_status 0 "$reverie" whatif "$pair/h100.json.gz" --opt hardware:gpu=MI300X --json
json_check "d['baseline_gpu_us'] > 150000 and 0 < d['predicted_gpu_us'] < d['baseline_gpu_us']"
expect_status 0 "$reverie" whatif "$pair/h100.json.gz" --opt hardware:gpu=MI300X
expect_in "$work/out" "GPU kernels"
expect_in "$work/out" "H100-SXM (deviceProperties \"NVIDIA H100 80GB HBM3\") -> MI300X"

# --- validate: the GPU kernel error and where the step goes ------------------
expect_status 0 "$reverie" validate "$weights/fp32.json.gz" "$weights/bf16.json.gz" --opt precision:dtype=bf16 --json
json_check "abs(d['gpu_kernel']['error']) < 0.15 and d['gpu_kernel']['no_change_error'] > 0.5"
json_check "set(d['shares']['predicted']) == {'cpu_only_us', 'gpu_only_us', 'overlap_us', 'idle_us'}"
expect_status 0 "$reverie" validate "$pair/h100.json.gz" "$pair/mi300x.json.gz" --opt hardware:gpu=MI300X
expect_in "$work/out" "error of the GPU kernel time"
expect_in "$work/out" "where the steady step goes"
expect_in "$work/out" "variant recorded 4378.7 MiB"

# --- validate: the predicted peak against the variant's recorded one ---------
# both sides recorded [memory] events (the decoder in fp32, then under bf16
# autocast): the error is the prediction's against the variant's peak, no
# change the baseline's recorded peak, and amp lowers the predicted peak
decoder="$root/traces/recorded/h200"
expect_status 0 "$reverie" validate "$decoder/gpt_fp32.json.gz" "$decoder/gpt_amp_bf16.json.gz" --opt amp:dtype=bf16 --json
json_check "(m := d['memory'])['predicted_bytes'] < m['baseline_estimate_bytes'] and abs(m['error'] - (m['predicted_bytes'] / m['variant_recorded_bytes'] - 1)) < 1e-9 and abs(m['no_change_error'] - (m['baseline_recorded_bytes'] / m['variant_recorded_bytes'] - 1)) < 1e-9 and m['not_estimated'] is None"
# no [memory] events on either side: nulls, and the text says why
expect_status 0 "$reverie" validate "$weights/fp32.json.gz" "$weights/bf16.json.gz" --opt precision:dtype=bf16 --json
json_check "(m := d['memory'])['predicted_bytes'] > 0 and m['variant_recorded_bytes'] is None and m['error'] is None and m['no_change_error'] is None"
expect_status 0 "$reverie" validate "$weights/fp32.json.gz" "$weights/bf16.json.gz" --opt precision:dtype=bf16
expect_in "$work/out" "the variant recorded no peak"

# --- comm-fraction -------------------------------------------------------------
expect_status 0 "$reverie" comm-fraction "$ddp" --opt ddp:world=16,bandwidth=25Gbps --scale 4:1 --scale 4:4 --json
json_check "len(d['scenarios']) == 3 and all(abs(s['exposed_comm_us'] + s['overlapped_comm_us'] - s['comm_us']) < 1 for s in d['scenarios'])"
# compute 4x faster exposes more of the same communication; links 4x faster shrink it again
json_check "d['scenarios'][1]['exposed_fraction'] > d['scenarios'][0]['exposed_fraction'] > 0"
json_check "d['scenarios'][2]['comm_us'] < d['scenarios'][1]['comm_us'] / 3"
expect_status 0 "$reverie" comm-fraction "$pair/h100.json.gz"
expect_in "$work/out" "no communication in this graph"
expect_status 1 "$reverie" comm-fraction "$ddp" --scale 4
expect_in "$work/err" "expected COMPUTE:LINKS"
one_line
expect_status 1 "$reverie" comm-fraction "$ddp" --scale 0:1
one_line

# --- bad input: one line each -----------------------------------------------------
expect_status 1 "$reverie" whatif "$pair/h100.json.gz" --opt hardware:gpu=TPUv5
expect_in "$work/err" "unknown GPU 'TPUv5' (known: V100-SXM2"
one_line
expect_status 1 "$reverie" whatif "$legacy" --opt hardware:gpu=A100
expect_in "$work/err" "give source_gpu=NAME"
one_line
expect_status 0 "$reverie" whatif "$legacy" --opt hardware:gpu=A100,source_gpu=V100
expect_status 3 "$reverie" whatif "$weights/bf16.json.gz" --opt precision:dtype=bf16
expect_in "$work/err" "already bf16"
one_line
expect_status 1 "$reverie" whatif "$pair/h100.json.gz" --opt model-scale:hidden=0
one_line
echo '{"format": "reverie-gpu-catalogue", "gpus": [{"id": "X"}]}' >"$work/bad.json"
REVERIE_GPU_CATALOGUE="$work/bad.json" "$reverie" whatif "$pair/h100.json.gz" --opt hardware:gpu=MI300X \
    >"$work/out" 2>"$work/err"
[ $? -eq 2 ] || fail "a bad catalogue should exit 2"
expect_in "$work/err" "GPU catalogue entry X"
one_line
REVERIE_GPU_CATALOGUE="$work/none.json" "$reverie" whatif "$pair/h100.json.gz" --opt hardware:gpu=MI300X \
    >"$work/out" 2>"$work/err"
[ $? -eq 2 ] || fail "a missing catalogue should exit 2"
one_line

# --- metaflow: bundled rule files found from the build tree; bad rule files
expect_status 0 "$reverie" whatif "$weights/fp32.json.gz" --opt metaflow:rules=qkv
expect_in "$work/out" "rule 1 qkv (merge-parallel layer~linear): 2 substitutions"
expect_status 3 "$reverie" whatif "$pair/h100.json.gz" --opt metaflow:rules=conv-bn-relu
expect_in "$work/err" "rule 1 (\"conv-bn-relu\", fuse) found nothing"
one_line
expect_status 1 "$reverie" whatif "$ddp" --opt metaflow:rules=no-such-rule
expect_in "$work/err" "bundled: conv-bn-relu, conv-bn-relu-train, conv-relu, qkv"
one_line
printf '{"rules": [\n  {"action": "fuse"\n   "match": []}]}' >"$work/rules.json"
expect_status 1 "$reverie" whatif "$ddp" --opt "metaflow:rules=$work/rules.json"
expect_in "$work/err" "rules.json: line 3, column"
one_line
printf '{"rules": [{"action": "remove", "match": "layer~relu"}, {"action": "fuse", "match": ["layer~conv"]}]}' \
    >"$work/rules.json"
expect_status 1 "$reverie" whatif "$ddp" --opt "metaflow:rules=$work/rules.json"
expect_in "$work/err" "rules.json: rule 2: \"match\" must list 2 to 8 selections, not 1"
one_line

# --- calibrate: per-GPU efficiency tables ---------------------------------------
bert="$root/traces/pairs/gpu_h100_vs_mi300x_bert_small"
expect_status 0 "$reverie" calibrate --help
expect_in "$work/out" "Example"
expect_status 0 "$reverie" calibrate "$pair/h100.json.gz" "$bert/mi300x.json.gz" -o "$work/table.json" --json
json_check "d['recordings_in_table'] == 2 and [a['gpu'] for a in d['added']] == ['H100-SXM', 'MI300X'] and d['added'][0]['gap_us'] > 0 and d['added'][1]['samples'] > 50"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['format'] == 'reverie-efficiency' and len(d['recordings']) == 2" \
    "$work/table.json" || fail "the table is not a reverie-efficiency file"
expect_status 1 "$reverie" calibrate "$bert/h100.json.gz" -o "$work/table.json"
expect_in "$work/err" "already exists; give --force"
one_line
expect_status 1 "$reverie" calibrate "$bert/h100.json.gz" -o "$bert/h100.json.gz" --force
expect_in "$work/err" "is an input of this run"
one_line
expect_status 1 "$reverie" calibrate "$bert/h100.json.gz" --from "$work/table.json" -o "$work/table.json" --force
expect_in "$work/err" "is an input of this run"
expect_status 0 "$reverie" calibrate "$bert/h100.json.gz" "$bert/mi300x.json.gz" --from "$work/table.json" -o "$work/refined.json"
expect_in "$work/out" "(replaced)"
expect_in "$work/out" "3 recordings"
expect_status 1 "$reverie" calibrate "$legacy" -o "$work/legacy.json"
expect_in "$work/err" "--source-gpu=NAME"
one_line
[ ! -e "$work/legacy.json" ] || fail "a failed calibrate left a table behind"
expect_status 1 "$reverie" calibrate "$bert/h100.json.gz"
expect_in "$work/err" "-o TABLE.json"
printf '{"format": "reverie-efficiency", "version": 1, "recordings": [{"gpu": "H100-SXM"}]}' >"$work/bad.json"
expect_status 2 "$reverie" calibrate "$bert/h100.json.gz" --from "$work/bad.json" -o "$work/out.json"
expect_in "$work/err" "bad.json: efficiency recording 1:"
one_line

# --- hardware with tables: the same job is never read; a table of one's own; none
expect_status 0 "$reverie" whatif "$bert/h100.json.gz" --opt "hardware:gpu=MI300X,efficiency=$work/refined.json"
expect_in "$work/out" "left out, a recording of this job: $bert/h100.json.gz"
expect_in "$work/out" "left out, a recording of this job: $bert/mi300x.json.gz"
expect_in "$work/out" "predicted range (each estimate at its low, then its high end)"
expect_status 0 "$reverie" whatif "$bert/h100.json.gz" --opt hardware:gpu=MI300X,efficiency=none --json
json_check "d['predicted_gpu_low_us'] < d['predicted_gpu_us'] < d['predicted_gpu_high_us']"
expect_in "$work/out" "efficiency=none: each kernel keeps its own efficiency"
expect_status 2 "$reverie" whatif "$bert/h100.json.gz" --opt "hardware:gpu=MI300X,efficiency=$work/missing.json"
expect_in "$work/err" "efficiency=none projects without one"
one_line
expect_status 0 "$reverie" whatif "$bert/h100.json.gz" --opt hardware:gpu=H100 --json
json_check "d['predicted_low_us'] is None and d['predicted_gpu_us'] == d['baseline_gpu_us']"
# a table of odd figures it accepts: the MI300X's buckets at 10^-27 of
# their roofline.  whatif refuses the durations in one line naming the
# table; kernels --target shows the classes' totals saturated (its total
# overflowed int64 into a negative time)
python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
for r in d['recordings']:
    if r['gpu'] == 'MI300X':
        for b in r['buckets']: b['roofline_us'], b['variable_us'] = 1e-12, 1e15
json.dump(d, open(sys.argv[2], 'w'))" "$root/data/efficiency.json" "$work/tiny.json"
expect_status 1 "$reverie" whatif "$pair/h100.json.gz" --opt "hardware:gpu=MI300X,efficiency=$work/tiny.json"
expect_in "$work/err" "with the efficiency table $work/tiny.json would make task"
one_line
expect_status 0 "$reverie" kernels "$pair/h100.json.gz" --target MI300X --efficiency "$work/tiny.json"
expect_in "$work/out" "total                      158.433 9223372036854.775"

# --- validate: the range and whether the recording is inside (the accuracy suite reads these)
expect_status 0 "$reverie" validate "$bert/mi300x.json.gz" "$bert/h100.json.gz" --opt hardware:gpu=H100 --json
json_check "abs(d['gpu_kernel']['error']) < 0.07 and d['gpu_kernel']['inside_range'] is True and d['gpu_kernel']['predicted_low_us'] < d['gpu_kernel']['variant_us'] < d['gpu_kernel']['predicted_high_us'] and d['predicted_steady_low_us'] <= d['predicted_steady_us'] <= d['predicted_steady_high_us']"
expect_status 0 "$reverie" validate "$pair/h100.json.gz" "$pair/mi300x.json.gz" --opt hardware:gpu=MI300X
expect_in "$work/out" "GPU kernel time"
expect_in "$work/out" "(recorded inside)"

# --- kernels --target: per class before, after, range and the deciding term
expect_status 0 "$reverie" kernels "$bert/h100.json.gz" --target MI300X
expect_in "$work/out" "projected to MI300X"
expect_in "$work/out" "decided by"
expect_status 0 "$reverie" kernels "$bert/h100.json.gz" --target MI300X --json
json_check "d['target']['gpu'] == 'MI300X' and len(d['target']['left_out']) == 2 and all(c['low_us'] <= c['after_us'] <= c['high_us'] and c['decided_by'] in ('fixed', 'peak', 'waves', 'bandwidth', 'cache', 'class', 'link') for c in d['target']['classes'].values())"
expect_status 1 "$reverie" kernels "$bert/h100.json.gz" --efficiency none
expect_in "$work/err" "--efficiency goes with --target"
expect_status 1 "$reverie" kernels "$bert/h100.json.gz" --target TPUv5
expect_in "$work/err" "unknown GPU 'TPUv5'"
one_line

# --- autocast flags GEMMs whose dimensions are no multiple of 8 -------------
# (the decoder's vocabulary projection, 50,257 wide: one a step of five; its
# other GEMMs fold 8 x 511 rows into 4,088 and are aligned)
decoder="$root/traces/recorded/h100/gpt_fp32.json.gz"
if [ -f "$decoder" ]; then
    expect_status 0 "$reverie" whatif "$decoder" --opt amp:dtype=bf16
    expect_in "$work/out" "5 GEMMs with shapes"
    expect_status 0 "$reverie" whatif "$ddp" --opt amp
    ! grep -q "no multiple of 8" "$work/out" || fail "ResNet-50's GEMMs flagged as unaligned: $(grep 'multiple of 8' "$work/out")"
fi

# --- cuDNN's batch norms cast to bf16 are flagged: PyTorch runs bf16 batch
# norm with its own kernels (not in fp16, and not where there is none)
resnet="$root/traces/recorded/h100/resnet50_fp32.json.gz"
if [ -f "$resnet" ]; then
    expect_status 0 "$reverie" whatif "$resnet" --opt amp:dtype=bf16
    expect_in "$work/out" "cuDNN batch-norm kernels ("
    expect_in "$work/out" "PyTorch runs bf16 batch norm with its own kernels"
    expect_status 0 "$reverie" whatif "$resnet" --opt precision:dtype=bf16
    expect_in "$work/out" "cuDNN batch-norm kernels ("
    expect_status 0 "$reverie" whatif "$resnet" --opt amp
    ! grep -q "cuDNN batch-norm" "$work/out" || fail "fp16 autocast flagged cuDNN's batch norms: $(grep 'cuDNN batch-norm' "$work/out")"
    expect_status 0 "$reverie" whatif "$decoder" --opt amp:dtype=bf16
    ! grep -q "cuDNN batch-norm" "$work/out" || fail "the decoder (no batch norm) flagged: $(grep 'cuDNN batch-norm' "$work/out")"
fi

# --- the shipped table is what calibrate.sh makes of the shipped traces today
(cd "$root" && sh data/calibrate.sh "$reverie" "$work/shipped.json") || fail "data/calibrate.sh failed"
cmp -s "$work/shipped.json" "$root/data/efficiency.json" ||
    fail "data/efficiency.json is stale: run data/calibrate.sh build/reverie data/efficiency.json from the source root"

[ "$failures" -eq 0 ] || { echo "$failures failures" >&2; exit 1; }
echo "cli_hardware: all checks passed"
