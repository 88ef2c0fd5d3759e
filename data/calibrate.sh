#!/bin/sh
# calibrate.sh - rebuild the shipped efficiency table (data/efficiency.json,
# include/reverie/efficiency.h) from the recordings the project ships in
# traces/ (their provenance: traces/PROVENANCE.md).  Run from the source
# root:  data/calibrate.sh build/reverie data/efficiency.json
# Every recording of a GPU the catalogue knows goes in: one rank of the
# 8-rank DLRM job (the others run the same kernels), both sides of each
# pair (the two sides of a GPU pair are the pairs that the fixed-cost
# ratio reads; the A10G's fp32 and bf16 sides are two dtypes of one
# GPU).  A trace whose deviceProperties name no catalogue GPU goes in with
# the GPU its provenance names (the MI250 trace).  Traces without GPU
# kernels (hta_cpu_only, hta_rank_non_gpu, hta_cupti_profiler_a100) and the
# tiny event-sync and Triton examples (a handful of kernels) are left out;
# so are the synthetic traces and the DataLoader pair, whose GPU the trace
# does not name.  The project's own recordings on an H100 and an H200
# (traces/recorded: the same jobs on both, so they are pairs) all go in.
set -eu
reverie=$1
out=$2
"$reverie" calibrate --force -o "$out" \
    traces/pairs/gpu_h100_vs_mi300x_timesformer/h100.json.gz \
    traces/pairs/gpu_h100_vs_mi300x_bert_small/h100.json.gz \
    traces/pairs/gpu_h100_vs_mi300x_timesformer/mi300x.json.gz \
    traces/pairs/gpu_h100_vs_mi300x_bert_small/mi300x.json.gz \
    traces/tracelens_mi300x_resnet_act_checkpoint.json.gz \
    traces/hta_resnet50_v100.json.gz \
    traces/kineto_legacy_resnet50_v100.2steps.json.gz \
    traces/hta_transformer_ddp_v100_rank1.2steps.json.gz \
    traces/hta_recsys_v100_rank1.json.gz \
    traces/param_dlrm_v100_8ranks/rank0.json.gz \
    traces/hta_alexnet_a100.json.gz \
    traces/hta_simple_add_a100.json.gz \
    traces/param_linear_2080ti.json.gz \
    traces/pairs/weights_fp32_vs_bf16_a10g/fp32.json.gz \
    traces/pairs/weights_fp32_vs_bf16_a10g/bf16.json.gz \
    traces/recorded/h100/*.json.gz traces/recorded/h200/*.json.gz >/dev/null 2>&1
"$reverie" calibrate --force --from "$out" -o "$out.mi250" --source-gpu MI250 \
    traces/hta_minitoy_mi250.json.gz >/dev/null 2>&1
mv "$out.mi250" "$out"
