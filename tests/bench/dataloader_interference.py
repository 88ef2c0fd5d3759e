#!/usr/bin/env python3
"""dataloader_interference.py - the evidence behind dataloader's `interference`.

DataLoader workers run beside the training process on the same host and can
slow its host work (shared cores, caches, memory bandwidth, turbo bins).  A
num_workers=0 trace cannot show by how much, so the plugin's default comes
from recordings of one job with num_workers=0 and with N workers, made in
one run on one host.  This script measures, for each such pair:

  loop       the training loop's time a step: the step (its ProfilerStep
             annotation on the CPU) less the time inside the DataLoader's
             annotation (the loading in the baseline; taking the batch, and
             waiting for it, in the variant); the median of the steps after
             the first.
  host x     the variant's loop over the baseline's: how much slower the
             loop ran beside the workers (its host work, where the loop is
             host-bound; these recordings' are).
  busy       the fraction of a step that workers are loading: the baseline's
             median loading per batch over the variant's mean step after
             the first, at most 1 (the workers deliver one batch a step).
  slowdown   (host x - 1) / busy: the plugin's `interference`, the slowdown
             of the training process's host work while workers load.
  next()     the 10th percentile of the variant's DataLoader annotation: a
             batch taken when it is ready.  These recordings pin their
             batches (pin_memory=True), so it is the plugin's `pinned_get`,
             the take from the pin_memory thread's queue.

The plugin's defaults are the medians over the project's recordings (every
traces/recorded/*/ folder holding loader_workers0.json.gz and
loader_workersN.json.gz from one run; each variant against its own run's
baseline).  Pairs given with --pair are measured and printed but kept out of
the median (held out: the V100 pair in traces/pairs/ is one).

Standard library only; reads gzipped or plain Chrome-trace JSON.
  python3 tests/bench/dataloader_interference.py [--traces DIR] [--pair BASELINE VARIANT N]... [--json]
      [--check REVERIE]   exit 1 unless the medians are the defaults `reverie plugins --json` gives
                          dataloader's interference (to 3 decimals) and pinned_get (to the microsecond):
                          the accuracy suite runs it so
"""
import argparse
import functools
import glob
import gzip
import json
import os
import re
import statistics
import subprocess
import sys

@functools.lru_cache(maxsize=None)
def read_trace(path):
    """A trace's complete events and its GPU's name ("" when it names none;
    cached: one baseline serves each of its run's variants)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as stream:
        document = json.load(stream)
    events = document["traceEvents"] if isinstance(document, dict) else document
    devices = document.get("deviceProperties") if isinstance(document, dict) else None
    gpu = devices[0].get("name", "") if devices else ""
    return [e for e in events if e.get("ph") == "X" and "dur" in e and "ts" in e], gpu


def loading_spans(events):
    """The DataLoader annotations on the CPU: (start, end) pairs."""
    return [(e["ts"], e["ts"] + e["dur"]) for e in events
            if e.get("name", "").startswith("enumerate(DataLoader)") and e.get("cat") != "gpu_user_annotation"]


def steps_of(events):
    return sorted((e for e in events if e.get("name", "").startswith("ProfilerStep") and e.get("cat") != "gpu_user_annotation"),
                  key=lambda e: e["ts"])


def loop_times(events):
    """Each step's training loop after the first: the step less the time it spent in the DataLoader's annotation."""
    spans = loading_spans(events)
    loops = []
    for step in steps_of(events)[1:]:
        begin, end = step["ts"], step["ts"] + step["dur"]
        inside = sum(max(0, min(end, b) - max(begin, a)) for a, b in spans)
        loops.append(step["dur"] - inside)
    return loops


def measure(baseline_path, variant_path, workers):
    (base_events, gpu), (variant_events, _) = read_trace(baseline_path), read_trace(variant_path)
    base_loops, variant_loops = loop_times(base_events), loop_times(variant_events)
    loads = [b - a for a, b in loading_spans(base_events)]
    steps = [e["dur"] for e in steps_of(variant_events)][1:]
    if not loads or not base_loops or not variant_loops:
        raise ValueError(f"{baseline_path}, {variant_path}: each needs two steps, the baseline a DataLoader annotation")
    host = statistics.median(variant_loops) / statistics.median(base_loops)
    busy = min(1.0, statistics.median(loads) / statistics.mean(steps))
    takes = sorted(b - a for a, b in loading_spans(variant_events))
    return {"baseline": baseline_path, "variant": variant_path, "gpu": gpu, "workers": workers,
            "baseline_loop_ms": statistics.median(base_loops) / 1e3,
            "variant_loop_ms": statistics.median(variant_loops) / 1e3, "host_slowdown": host,
            "loading_ms": statistics.median(loads) / 1e3, "variant_step_ms": statistics.mean(steps) / 1e3,
            "busy": busy, "interference": (host - 1.0) / busy,
            "next_p10_ms": takes[len(takes) // 10] / 1e3 if takes else None}


def recorded_pairs(traces):
    pairs = []
    for baseline in sorted(glob.glob(os.path.join(traces, "recorded", "*", "loader_workers0.json.gz"))):
        for variant in sorted(glob.glob(os.path.join(os.path.dirname(baseline), "loader_workers*.json.gz"))):
            workers = int(re.search(r"loader_workers(\d+)", variant).group(1))
            if workers > 0:
                pairs.append((baseline, variant, workers))
    return pairs


def quartiles(values):
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "traces"))
    parser.add_argument("--pair", nargs=3, action="append", default=[], metavar=("BASELINE", "VARIANT", "N"),
                        help="a pair measured but kept out of the median")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--check", metavar="REVERIE", help="the reverie binary whose dataloader defaults to check")
    args = parser.parse_args()
    try:
        rows = [dict(measure(*pair), held_out=False) for pair in recorded_pairs(args.traces)]
        rows += [dict(measure(b, v, int(n)), held_out=True) for b, v, n in args.pair]
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as error:
        print(f"dataloader_interference: {error}", file=sys.stderr)
        return 2
    recorded = [r for r in rows if not r["held_out"]]
    if not recorded:
        print(f"dataloader_interference: no traces/recorded/*/loader_workers0.json.gz under {args.traces}",
              file=sys.stderr)
        return 2
    slowdowns = [r["interference"] for r in recorded]
    median, (low, high) = statistics.median(slowdowns), quartiles(slowdowns)
    takes = [r["next_p10_ms"] for r in recorded if r["next_p10_ms"] is not None]
    take_ms = statistics.median(takes) if takes else None
    if args.json:
        print(json.dumps({"pairs": rows, "interference": {"median": median, "quartiles": [low, high]},
                          "pinned_get_ms": take_ms, "count": len(recorded)}, indent=1))
    else:
        print_table(rows, args.traces)
        print(f"host slowdown while workers load, over {len(recorded)} recorded variants: median {median:.3f}, "
              f"quartiles {low:.3f}-{high:.3f}")
        for gpu in sorted({r["gpu"] for r in recorded}):
            mine = [r["interference"] for r in recorded if r["gpu"] == gpu]
            print(f"  on the {gpu or 'unnamed'} host alone: median {statistics.median(mine):.3f} ({len(mine)} variants)")
        if takes:
            print(f"a ready batch's next() (10th percentile), over the same: median {take_ms:.3f} ms, "
                  f"{min(takes):.3f}-{max(takes):.3f} ms")
    return check_defaults(args.check, median, take_ms) if args.check else 0


def print_table(rows, traces):
    print(f"{'variant':62} {'N':>2} {'loop':>18} {'host x':>7} {'loading':>10} {'step':>10} {'busy':>5} "
          f"{'slowdown':>8} {'next()':>9}")
    for r in rows:
        name = os.path.relpath(r["variant"], traces) + (" (held out)" if r["held_out"] else "")
        take = f"{r['next_p10_ms']:6.3f} ms" if r["next_p10_ms"] is not None else "        -"
        print(f"{name:62} {r['workers']:2d} {r['baseline_loop_ms']:6.1f} -> {r['variant_loop_ms']:5.1f} ms "
              f"{r['host_slowdown']:7.3f} {r['loading_ms']:7.1f} ms {r['variant_step_ms']:7.1f} ms "
              f"{r['busy']:5.2f} {r['interference']:8.3f} {take}")


def check_defaults(reverie, median, take_ms):
    """1 (with a line saying which) unless the plugin's defaults are these medians."""
    interference = float(plugin_default(reverie, "dataloader", "interference"))
    pinned_get_ms = duration_ms(plugin_default(reverie, "dataloader", "pinned_get"))
    failed = 0
    if round(median, 3) != round(interference, 3):
        print(f"dataloader_interference: dataloader's default interference {interference:g} is not the "
              f"recordings' median {median:.3f}", file=sys.stderr)
        failed = 1
    if take_ms is None or round(take_ms, 3) != round(pinned_get_ms, 3):
        print(f"dataloader_interference: dataloader's default pinned_get {pinned_get_ms:g} ms is not the "
              f"recordings' median next() {take_ms} ms", file=sys.stderr)
        failed = 1
    return failed


def duration_ms(text):
    match = re.fullmatch(r"([0-9.]+)(ns|us|ms|s)", text)
    if not match:
        raise ValueError(f"not a duration: {text}")
    return float(match.group(1)) * {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[match.group(2)]


def plugin_default(reverie, plugin, parameter):
    listing = json.loads(subprocess.run([reverie, "plugins", "--json"], check=True, capture_output=True).stdout)
    plugins = listing if isinstance(listing, list) else listing["plugins"]
    params = next(p for p in plugins if p["name"] == plugin)["params"]
    return next(p for p in params if p["name"] == parameter)["default"]


if __name__ == "__main__":
    sys.exit(main())
