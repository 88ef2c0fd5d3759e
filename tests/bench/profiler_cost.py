#!/usr/bin/env python3
"""profiler_cost.py - measure the unprofiled plugin's whole_cost from recordings timed both ways.

A trace bounds the PyTorch profiler's cost per operator only between
operators (the gaps between sibling operators: `reverie info` prints the
bound); the profiler also costs inside each operator and runtime call,
which a trace cannot show apart from the work.  A job recorded with the
profiler and timed without it in the same run can: this script finds, for
each such job, the cost per operator at which `--opt unprofiled` predicts
the unprofiled mean step (bisection on op_cost), and divides it by the
trace's bound.  That ratio is `whole_cost`.

Each FOLDER holds traces with `manifest.jsonl` (traces/record.py's) and
`unprofiled.jsonl` (record.py --no-profile, the same jobs); FOLDER:TIMING
reads the timings from another folder.  A job whose profiled and unprofiled
steps differ by less than MIN_GAIN is left out: its host hides behind the
GPU, and no cost per operator would show in its step.

  python3 tests/bench/profiler_cost.py [--reverie build/reverie] FOLDER[:TIMING]...

It is not part of the test suite; docs/optimizations.md (unprofiled) has
what it printed on the recordings in traces/recorded/*_checkpoint.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

MIN_GAIN = 1.10
BISECTIONS = 20
MAX_COST_US = 200.0


def whatif_mean_ms(reverie, trace, cost_us):
    """The mean step after the first, baseline and predicted, with op_cost."""
    result = subprocess.run([reverie, "whatif", trace, "--opt", f"unprofiled:op_cost={cost_us:.4f}us", "--json"],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(result.stderr.strip())
    steps = json.loads(result.stdout)["steps"][1:] or json.loads(result.stdout)["steps"]
    mean = lambda key: sum(step[key] for step in steps) / len(steps) / 1e3
    return mean("baseline_us"), mean("predicted_us")


def bound_us(reverie, trace):
    result = subprocess.run([reverie, "info", trace, "--json"], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(result.stderr.strip())
    estimate = json.loads(result.stdout)["timing"]["estimates"]["profiler_op_cost"]
    return estimate["value"] if estimate["source"] == "bound" else None


def fitted_cost_us(reverie, trace, unprofiled_ms):
    low, high = 0.0, MAX_COST_US
    for _ in range(BISECTIONS):
        middle = (low + high) / 2
        if whatif_mean_ms(reverie, trace, middle)[1] > unprofiled_ms:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def jobs(folder, timing):
    unprofiled = {}
    with open(os.path.join(timing, "unprofiled.jsonl")) as handle:
        for line in handle:
            entry = json.loads(line)
            unprofiled[(entry["job"], entry["variant"])] = 1e3 * statistics.mean(entry["step_seconds_measured"])
    with open(os.path.join(folder, "manifest.jsonl")) as handle:
        for line in handle:
            entry = json.loads(line)
            trace = os.path.join(folder, entry.get("file") or "")
            key = (entry["job"], entry["variant"])
            if entry.get("file") and os.path.exists(trace) and key in unprofiled:
                yield f"{entry['job']}:{entry['variant']}", trace, unprofiled[key]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reverie", default="build/reverie")
    parser.add_argument("folders", nargs="+", help="FOLDER or FOLDER:TIMING")
    args = parser.parse_args()
    ratios = []
    for argument in args.folders:
        folder, _, timing = argument.partition(":")
        for name, trace, unprofiled_ms in jobs(folder, timing or folder):
            profiled_ms, _ = whatif_mean_ms(args.reverie, trace, 0.0)
            bound = bound_us(args.reverie, trace)
            label = f"{os.path.basename(folder.rstrip('/'))} {name}"
            if profiled_ms < MIN_GAIN * unprofiled_ms or not bound:
                why = "no bound in the trace" if not bound else f"profiled {profiled_ms:.1f} ms, unprofiled {unprofiled_ms:.1f} ms"
                print(f"{label}: left out ({why})")
                continue
            cost = fitted_cost_us(args.reverie, trace, unprofiled_ms)
            if cost >= MAX_COST_US - 1:
                print(f"{label}: left out (no cost per operator reaches {unprofiled_ms:.1f} ms: the profiler costs inside calls too)")
                continue
            ratios.append(cost / bound)
            print(f"{label}: profiled {profiled_ms:.1f} ms, unprofiled {unprofiled_ms:.1f} ms; "
                  f"cost {cost:.2f} us per operator against a bound of {bound:.3f} us: whole_cost {cost / bound:.2f}")
    if ratios:
        print(f"median whole_cost {statistics.median(ratios):.2f} over {len(ratios)} jobs "
              f"({min(ratios):.2f}-{max(ratios):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
