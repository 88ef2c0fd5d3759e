#!/bin/sh
# ranks.sh - what a job of many alike ranks costs to replay, against a
# small job of the same model: generated DDP jobs of 30 steps (about 11,200
# tasks per rank), each imported to one saved job (held once: format
# version 8), and the large job again with rank 0 another program (held as
# two classes: version 9), then `reverie simulate` of each saved job, RUNS
# times in turn.  Prints the median CPU time (user + system, from the
# kernel's accounting of each finished run: os.wait4) and peak memory of
# each, and their ratios to the small job's.
#   tests/bench/ranks.sh BUILD_DIR [BIG_RANKS] [RUNS]
# `meson test -C build --benchmark ranks` runs it with 256 ranks, 11 runs.
set -eu
build=$1
big=${2:-256}
runs=${3:-11}
reverie=$build/reverie
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

save() { # name, gentrace options...
    name=$1
    shift
    "$build/tests/gen/reverie-gentrace" "$@" --steps 30 -o "$work/$name" 2>/dev/null
    "$reverie" import --quiet "$work/$name" -o "$work/$name.rvg"
    rm -rf "${work:?}/$name"
    echo "saved $name: $(($(wc -c <"$work/$name.rvg") / 1000000)) MB, format version $(od -An -tu4 -j8 -N4 "$work/$name.rvg" | tr -d ' ')"
}
save job8 --ranks 8
save "job$big" --ranks "$big"
save "job${big}_unlike0" --ranks "$big" --unlike-rank 0

python3 - "$reverie" "$work/job8.rvg" "$work/job$big.rvg" "$big" "$runs" "$work/job${big}_unlike0.rvg" <<'PY'
import os, statistics, subprocess, sys
reverie, small, large, big, runs, unlike = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6]

def run(graph):
    child = subprocess.Popen([reverie, "simulate", graph], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "simulate failed"
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024

figures = {small: [], large: [], unlike: []}
for _ in range(runs):  # in turn, so that a drift of the machine's speed touches all
    for graph in (small, large, unlike):
        figures[graph].append(run(graph))
cpu = {g: statistics.median(f[0] for f in figures[g]) for g in figures}
peak = {g: statistics.median(f[1] for f in figures[g]) for g in figures}
print(f"simulate, median of {runs} runs: 8 ranks {cpu[small]:.3f} s of CPU and {peak[small]:.1f} MiB; "
      f"{big} ranks {cpu[large]:.3f} s and {peak[large]:.1f} MiB")
print(f"ratio {big} ranks / 8 ranks: CPU {cpu[large] / cpu[small]:.1f}x, peak memory {peak[large] / peak[small]:.1f}x")
print(f"{big} ranks, rank 0 unlike (two classes): {cpu[unlike]:.3f} s and {peak[unlike]:.1f} MiB; "
      f"ratio to 8 ranks: CPU {cpu[unlike] / cpu[small]:.1f}x, peak memory {peak[unlike] / peak[small]:.1f}x")
PY
