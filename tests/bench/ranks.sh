#!/bin/sh
# ranks.sh - what a job of many alike ranks costs to replay, against a
# small job of the same model: generated DDP jobs of 30 steps (about 11,200
# tasks per rank), each imported to one saved job (held once: format
# version 8), then `reverie simulate` of each saved job, RUNS times in
# turn.  Prints the median CPU time (user + system, from the kernel's
# accounting of each finished run: os.wait4) and peak memory of each, and
# their ratios.
#   tests/bench/ranks.sh BUILD_DIR [BIG_RANKS] [RUNS]
# `meson test -C build --benchmark ranks` runs it with 256 ranks, 11 runs.
set -eu
build=$1
big=${2:-256}
runs=${3:-11}
reverie=$build/reverie
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for ranks in 8 "$big"; do
    "$build/tests/gen/reverie-gentrace" --ranks "$ranks" --steps 30 -o "$work/job$ranks" 2>/dev/null
    "$reverie" import --quiet "$work/job$ranks" -o "$work/job$ranks.rvg"
    rm -rf "$work/job$ranks"
    echo "saved job of $ranks ranks: $(($(wc -c <"$work/job$ranks.rvg") / 1000000)) MB"
done

python3 - "$reverie" "$work/job8.rvg" "$work/job$big.rvg" "$big" "$runs" <<'PY'
import os, statistics, subprocess, sys
reverie, small, large, big, runs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])

def run(graph):
    child = subprocess.Popen([reverie, "simulate", graph], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "simulate failed"
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024

figures = {small: [], large: []}
for _ in range(runs):  # in turn, so that a drift of the machine's speed touches both
    for graph in (small, large):
        figures[graph].append(run(graph))
cpu = {g: statistics.median(f[0] for f in figures[g]) for g in figures}
peak = {g: statistics.median(f[1] for f in figures[g]) for g in figures}
print(f"simulate, median of {runs} runs: 8 ranks {cpu[small]:.3f} s of CPU and {peak[small]:.1f} MiB; "
      f"{big} ranks {cpu[large]:.3f} s and {peak[large]:.1f} MiB")
print(f"ratio {big} ranks / 8 ranks: CPU {cpu[large] / cpu[small]:.1f}x, peak memory {peak[large] / peak[small]:.1f}x")
PY
