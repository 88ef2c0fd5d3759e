#!/bin/sh
# sweep.sh - what a sweep costs against one whatif and a shell loop.
#   tests/bench/sweep.sh BUILD_DIR [VARIANTS]
# On a generated graph of about 100k tasks (112 steps of 20 layers): one
# whatif (best of 5), a sweep of VARIANTS (default 1000) scale factors on
# every core - each variant in a child process of its own (the default,
# --isolate) and in threads (--no-isolate) - and a shell loop of 100
# whatifs; prints wall times, variants per minute, the sweep's cost in
# whatifs (bound: 60), what isolation adds per variant, and the load average.
set -eu
build=$1
variants=${2:-1000}
reverie=$build/reverie
dir=$(mktemp -d "${TMPDIR:-/tmp}/reverie-bench-sweep.XXXXXX")
trap 'rm -rf "$dir"' EXIT
export REVERIE_PLUGIN_PATH="$build/optimizations"

now() { date +%s.%N; }
# calc EXPRESSION : floating-point arithmetic (awk is everywhere, bc is not)
calc() { awk "BEGIN { print $1 }"; }
# cpu COMMAND... : run it; print the CPU seconds (user + system) it and its
# children took, from the shell's `times` (the machine is shared: wall
# time says as much about the neighbours as about reverie)
cpu() {
    ("$@"; times) | awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/); print u[1] * 60 + u[2] + s[1] * 60 + s[2] }'
}

"$build/tests/gen/reverie-gentrace" -o "$dir/trace.json" --steps 112 --layers 20 --seed 7 2>/dev/null
"$reverie" import --quiet "$dir/trace.json" -o "$dir/g.rvg"

best=1000
for run in 1 2 3 4 5; do
    start=$(now)
    "$reverie" whatif "$dir/g.rvg" --opt scale:factor=0.5 >/dev/null
    took=$(calc "$(now) - $start")
    best=$(calc "$took < $best ? $took : $best")
done

sweep_to() { # FILE [OPTION]: the sweep's rows into FILE
    out=$1
    shift
    "$reverie" sweep "$dir/g.rvg" --vary "scale.factor=0.001..1/$variants" "$@" >"$out"
}
start=$(now)
sweep_cpu=$(cpu sweep_to "$dir/sweep.csv")
sweep_s=$(calc "$(now) - $start")
rows=$(($(wc -l <"$dir/sweep.csv") - 1))

start=$(now)
threads_cpu=$(cpu sweep_to "$dir/threads.csv" --no-isolate)
threads_s=$(calc "$(now) - $start")
cmp -s "$dir/sweep.csv" "$dir/threads.csv" || echo "sweep.sh: isolated and threaded sweeps differ" >&2

start=$(now)
i=1
while [ $i -le 100 ]; do
    "$reverie" whatif "$dir/g.rvg" --opt "scale:factor=0.$i" >/dev/null
    i=$((i + 1))
done
loop_s=$(calc "$(now) - $start")

tasks=$("$reverie" info "$dir/g.rvg" | sed -n 's/^tasks: //p')
printf 'graph: %s tasks; %s cores; load average %s\n' "$tasks" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf 'one whatif: %.3f s (best of 5)\n' "$best"
printf 'sweep of %d variants: %.2f s = %.0f variants/minute = %.1f whatifs (bound 60)\n' "$rows" "$sweep_s" \
    "$(calc "$rows / $sweep_s * 60")" "$(calc "$sweep_s / $best")"
printf 'the same with --no-isolate (threads): %.2f s = %.0f variants/minute\n' "$threads_s" \
    "$(calc "$rows / $threads_s * 60")"
printf 'CPU (user + system): isolated %.2f s, threads %.2f s: isolation costs %.3f ms of CPU a variant (%+.1f%%)\n' \
    "$sweep_cpu" "$threads_cpu" "$(calc "($sweep_cpu - $threads_cpu) / $rows * 1000")" \
    "$(calc "($sweep_cpu / $threads_cpu - 1) * 100")"
printf 'shell loop of 100 whatifs: %.2f s = %.0f variants/minute\n' "$loop_s" "$(calc "100 / $loop_s * 60")"
