#!/usr/bin/env python3
"""checkpoint_hooks.py - measure the checkpoint plugin's hook_cost from recorded pairs.

PyTorch's non-reentrant checkpoint (use_reentrant=False) runs a block's
forward under saved-tensor hooks: a Python call for every tensor an
operator saves.  The checkpoint plugin charges them as a fraction of the
forward's host time over the checkpointed blocks (hook_cost), paid in the
forward, again in the recomputation, and once more when the backward
unpacks.  A trace without checkpointing cannot show that fraction; a pair
recorded in one run can.  For each pair (BASELINE, CHECKPOINTED):

  forward span   from a step's start to the backward thread's first call
                 (the forward's host time on a host-bound step), the median
                 over the steps after the first, in each trace (and their
                 range: the host's speed moves from step to step within one
                 run, and where that spread is larger than the growth the
                 ratio says nothing);
  blocks' host   the forward host time of the blocks the plugin finds, as
                 its note says (checkpoint:cut=blocks,hook_cost=0);

hook_cost = (checkpointed span - baseline span) / blocks' host.

  python3 tests/bench/checkpoint_hooks.py [--reverie build/reverie] BASELINE CHECKPOINTED [BASELINE CHECKPOINTED ...]

It is not part of the test suite; docs/optimizations.md (checkpoint) has
what it printed on the recordings in traces/recorded/*_checkpoint.
"""
import argparse
import gzip
import json
import re
import statistics
import subprocess
import sys

UNITS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


def forward_spans_ms(path):
    """Over the steps after the first, the time from the step's start to
    the first call on another thread than the step's."""
    with gzip.open(path, "rt") as handle:
        events = json.load(handle)["traceEvents"]
    steps = sorted((e for e in events if e.get("cat") == "user_annotation"
                    and str(e.get("name", "")).startswith("ProfilerStep#")), key=lambda e: e["ts"])
    if len(steps) < 2:
        sys.exit(f"{path}: fewer than two ProfilerStep annotations")
    calls = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "cuda_runtime")]
    spans = []
    for step in steps[1:]:
        begin, end = step["ts"], step["ts"] + step["dur"]
        other = [e["ts"] for e in calls if e["tid"] != step["tid"] and begin <= e["ts"] < end]
        if other:
            spans.append((min(other) - begin) / 1e3)
    if not spans:
        sys.exit(f"{path}: no call on a second thread (no backward thread) in its steps")
    return spans


def blocks_host_ms(reverie, path):
    result = subprocess.run([reverie, "whatif", path, "--opt", "checkpoint:cut=blocks,hook_cost=0", "--json"],
                            capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{path}: reverie whatif failed: {result.stderr.strip()}")
    notes = json.loads(result.stdout)["optimizations"][0]["notes"]
    found = re.search(r"recomputation's host time: ([0-9.]+) (ns|us|ms|s) a step", notes)
    if not found:
        sys.exit(f"{path}: the checkpoint plugin's notes name no recomputation host time")
    return float(found.group(1)) * UNITS[found.group(2)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reverie", default="build/reverie")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("traces", nargs="+", help="BASELINE CHECKPOINTED, one pair after another")
    args = parser.parse_args()
    if len(args.traces) % 2:
        parser.error("give the traces in pairs: BASELINE CHECKPOINTED")
    rows = []
    for baseline, checkpointed in zip(args.traces[0::2], args.traces[1::2]):
        base_spans, ckpt_spans = forward_spans_ms(baseline), forward_spans_ms(checkpointed)
        base_ms, ckpt_ms = statistics.median(base_spans), statistics.median(ckpt_spans)
        host_ms = blocks_host_ms(args.reverie, baseline)
        # the host's own speed moves from step to step within a run: where
        # the spans' spread is larger than the growth, the ratio is noise
        rows.append({"baseline": baseline, "checkpointed": checkpointed, "forward_span_ms": [base_ms, ckpt_ms],
                     "forward_span_range_ms": [[min(base_spans), max(base_spans)], [min(ckpt_spans), max(ckpt_spans)]],
                     "blocks_host_ms": host_ms, "hook_cost": (ckpt_ms - base_ms) / host_ms})
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    for row in rows:
        (base_lo, base_hi), (ckpt_lo, ckpt_hi) = row["forward_span_range_ms"]
        print(f"{row['baseline']}: forward span {row['forward_span_ms'][0]:.1f} -> {row['forward_span_ms'][1]:.1f} ms "
              f"(steps {base_lo:.1f}-{base_hi:.1f} -> {ckpt_lo:.1f}-{ckpt_hi:.1f} ms), "
              f"blocks' host {row['blocks_host_ms']:.1f} ms: hook_cost {row['hook_cost']:.2f}")
    print(f"median hook_cost {statistics.median(r['hook_cost'] for r in rows):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
