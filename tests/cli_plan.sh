#!/bin/sh
# cli_plan.sh REVERIE SOURCE_ROOT GENTRACE - `reverie plan`: on the shipped
# Transformer rank, for 64 GPUs, configurations that fit, ranked by their
# predicted step, each a split of the 64 GPUs, within the memory; a tight
# memory leaves some out with their reason and checkpoints others; a GPU
# count that is not whole nodes, and extras for the wrong plugin, refused
# in one line; a trace without shapes or [memory] events cannot be planned.
reverie=$1
root=$2
gentrace=$3
. "$(dirname "$0")/cli_lib.sh"

rank="$root/traces/hta_transformer_ddp_v100_rank1.2steps.json.gz"
"$reverie" import "$rank" -o "$work/rank.rvg" >/dev/null 2>&1 || fail "import failed"
shape="tp-allreduce:batch=8,seq=512,hidden=1024"

# 64 GPUs of the trace's V100 (32 GB), pipelines of up to 2 stages to keep it quick
expect_status 0 "$reverie" plan "$work/rank.rvg" --gpus 64 --max-pipeline 2 --with "$shape" --json -j 2
json_check "d['gpus'] == 64 and d['gpu'] == 'V100-SXM2' and d['memory_from'] == 'recorded'"
json_check "len(d['configurations']) >= 3"
json_check "all(c['tensor'] * c['pipeline'] * c['data'] == 64 for c in d['configurations'] + d['rejected'])"
json_check "all(set(c) >= {'tensor', 'pipeline', 'data', 'zero', 'microbatches', 'predicted_us', 'peak_bytes'} for c in d['configurations'])"
json_check "all(c['peak_bytes'] <= d['memory_bytes'] for c in d['configurations'])"
json_check "[c['predicted_us'] for c in d['configurations']] == sorted(c['predicted_us'] for c in d['configurations'])"
json_check "all(c['tensor'] <= 8 and c['pipeline'] <= 2 for c in d['configurations'] + d['rejected'])"
# sharding only lowers the peak: ZeRO-3 holds less than ZeRO-0 of the same split
json_check "all(a['peak_bytes'] > b['peak_bytes'] for a in d['configurations'] for b in d['configurations'] if a['zero'] == 0 and b['zero'] == 3 and (a['tensor'], a['pipeline'], a['microbatches']) == (b['tensor'], b['pipeline'], b['microbatches']))"

# a tight memory: some splits do not fit (their reason says by how much),
# and checkpointing is tried only for those
expect_status 0 "$reverie" plan "$work/rank.rvg" --gpus 64 --max-pipeline 2 --with "$shape" --memory 400MiB --max-tensor 4 --json -j 2
json_check "len(d['rejected']) > 0 and all('needs' in c['why'] for c in d['rejected'] if c['peak_bytes'] is not None)"
json_check "all(c['peak_bytes'] <= 400 * 2**20 for c in d['configurations'])"
json_check "any(c['checkpoint'] for c in d['configurations'] + d['rejected'])"
json_check "all(not c['checkpoint'] or any((r['tensor'], r['pipeline'], r['zero'], r['microbatches']) == (c['tensor'], c['pipeline'], c['zero'], c['microbatches']) and not r['checkpoint'] for r in d['rejected']) for c in d['configurations'] + d['rejected'])"

# the table says how it searched and what to run
expect_status 0 "$reverie" plan "$work/rank.rvg" --gpus 64 --max-pipeline 1 --max-tensor 2 --with "$shape" -n 3 -j 2
expect_in "$work/out" "64 GPUs of V100-SXM2"
expect_in "$work/out" "the recorded [memory] split, scaled"
expect_in "$work/out" "ranked by predicted step"
expect_in "$work/out" "the first: --opt"

# refusals: one line each
expect_status 1 "$reverie" plan "$work/rank.rvg" --gpus 12
one_line
expect_in "$work/err" "cannot be split"
expect_status 1 "$reverie" plan "$work/rank.rvg"
one_line
expect_status 1 "$reverie" plan "$work/rank.rvg" --gpus 8 --with amp
one_line
expect_status 1 "$reverie" plan "$work/rank.rvg" --gpus 8 --with tp-allreduce:degree=2
one_line
expect_in "$work/err" "sets degree itself"
expect_status 1 "$reverie" plan "$work/rank.rvg" --gpus 8 --gpu NoSuchGPU
one_line
expect_status 2 "$reverie" plan "$root/traces/hta_resnet50_v100.json.gz" --gpus 8
one_line
expect_in "$work/err" "cannot say what fits"

# a generated trace with shapes (the memory model on each configuration's
# graph) whose GPU the catalogue does not know: --gpu names it
"$gentrace" -o "$work/mixed.json.gz" --steps 2 --layers 6 --mixed-layers --single-gpu 2>/dev/null
expect_status 0 "$reverie" plan "$work/mixed.json.gz" --gpus 4 --gpu A100-40GB --json -j 2
json_check "d['memory_from'] == 'shapes' and len(d['configurations']) >= 3"
json_check "any(c['pipeline'] > 1 and c['data'] > 1 for c in d['configurations'])"
expect_in "$work/err" "taken as recorded on A100-40GB"

exit $((failures > 0))
