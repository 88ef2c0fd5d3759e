#!/bin/sh
# cli_seqpoint.sh REVERIE GENTRACE SOURCE_ROOT - `reverie seqpoint` (SeqPoint):
# on a generated sequence-model trace whose steps differ by input length,
# a few representative iterations project the epoch within 1% of every
# iteration (recorded, replayed and after a what-if); bins are exact
# k-means; lengths from files; bad input in one line.
reverie=$1
gentrace=$2
root=$3
. "$(dirname "$0")/cli_lib.sh"

# 200 steps of a 4-layer MLP, each step's input length drawn from 128..2048
# (log-normal): GEMM time follows the length, so steps take 3 to 47 ms.
trace="$work/lengths.json.gz"
"$gentrace" -o "$trace" --steps 200 --layers 4 --single-gpu --lengths 128..2048 --seed 7 2>/dev/null ||
    fail "reverie-gentrace --lengths failed"
# saved once: each run below then reads the graph, not the JSON
"$reverie" import "$trace" -o "$work/lengths.rvg" >/dev/null 2>&1 || fail "import failed"
trace="$work/lengths.rvg"

expect_status 0 "$reverie" seqpoint "$trace" --opt 'scale:select=kind=cpu,factor=0.5' --json
json_check "d['steps'] == 200 and d['epoch']['iterations'] == 200 and 'aten::addmm' in d['lengths_from']"
json_check "d['epoch']['min_length'] >= 128 and d['epoch']['max_length'] <= 2048 and d['epoch']['distinct_lengths'] > 100"
# a few points stand for the epoch (the thesis profiles 214-345x fewer iterations)
json_check "d['chosen_by'] == 'tolerance' and d['tolerance_met'] and 1 <= d['points'] <= 10"
json_check "sum(b['iterations'] for b in d['bins']) == 200"
json_check "all(a['high'] < b['low'] for a, b in zip(d['bins'], d['bins'][1:]))"
json_check "all(b['low'] <= b['mean_length'] <= b['high'] for b in d['bins'])"
# the projection's error under 1%: on the recorded steps (where the count was
# chosen), on the replay and after a what-if (neither seen by the choice)
json_check "all(abs(d['projection'][k]['error']) < 0.01 for k in ('recorded', 'simulated', 'predicted'))"
json_check "d['noise'] is not None and d['noise'] < 0.02 and d['spread'] <= d['tolerance']"

# the table says how the bins were chosen
expect_status 0 "$reverie" seqpoint "$trace" --points 3
expect_in "$work/out" "3 bins of input length (exact 1-D k-means"
expect_in "$work/out" "as --points asked"
expect_in "$work/out" "profile 3 of 200 iterations"

# exact k-means: three clusters of lengths are the three bins, and a bin's
# representative is the traced step of the length nearest its mean
seq 1 200 | awk '{print ($1 % 3 == 0) ? 200 : ($1 % 3 == 1) ? 1000 : 1900}' >"$work/steps.txt"
printf '190 200 210\n# the long ones\n990 1000 1010 1020\n1900\n' >"$work/epoch.txt"
expect_status 0 "$reverie" seqpoint "$trace" --lengths "$work/steps.txt" --epoch "$work/epoch.txt" --points 3 --json
json_check "[(b['low'], b['high'], b['iterations']) for b in d['bins']] == [(190, 210, 3), (990, 1020, 4), (1900, 1900, 1)]"
json_check "[b['representative']['length'] for b in d['bins']] == [200, 1000, 1900]"
json_check "d['epoch']['from'].endswith('epoch.txt') and d['epoch']['iterations'] == 8"

# bad input: one line each
expect_status 1 "$reverie" seqpoint "$trace" --points -1
one_line
expect_status 1 "$reverie" seqpoint "$trace" --tolerance 200
one_line
printf '10 20 x30\n' >"$work/bad.txt"
expect_status 2 "$reverie" seqpoint "$trace" --epoch "$work/bad.txt"
one_line
expect_in "$work/err" "bad.txt:1: 'x30' is not a length"
printf '10 20\n' >"$work/short.txt"
expect_status 2 "$reverie" seqpoint "$trace" --lengths "$work/short.txt"
one_line
expect_in "$work/err" "2 lengths for 200 traced steps"
expect_status 2 "$reverie" seqpoint "$trace" --epoch "$work/missing.txt"
one_line
# a trace without shapes asks for the lengths
expect_status 2 "$reverie" seqpoint "$root/traces/hta_transformer_ddp_v100_rank1.2steps.json.gz"
one_line
expect_in "$work/err" "record_shapes=True"

# steps whose shapes do not differ are one length
"$gentrace" -o "$work/same.json.gz" --steps 4 --layers 2 --single-gpu 2>/dev/null
expect_status 0 "$reverie" seqpoint "$work/same.json.gz" --json
json_check "d['points'] == 1 and 'same shapes' in d['lengths_from']"

exit $((failures > 0))
