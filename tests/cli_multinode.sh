#!/bin/sh
# cli_multinode.sh - the recipe of docs/ranks.md for jobs past one machine:
# each rank imported to its own saved graph as a separate process (GNU
# parallel standing in for a Slurm array, one process per rank as one
# node each), then one join.  The join must give, byte for byte, what the
# single command gives on the traces: the simulate and whatif reports and
# the joint saved graph.  Run on a generated 4-rank job and on the shipped
# 8-rank DLRM job.  Skipped (exit 77) where GNU parallel is not installed.
#
# usage: cli_multinode.sh REVERIE GENTRACE SOURCE_ROOT
set -u

reverie=$1
gentrace=$2
root=$3
. "$(dirname "$0")/cli_lib.sh"

if ! command -v parallel >/dev/null 2>&1; then
    echo "skip: GNU parallel is not installed (Debian: apt-get install parallel)"
    exit 77
fi

# same_as_single NAME FOLDER : FOLDER (ranks as traces) against the recipe.
same_as_single() {
    name=$1
    single=$work/$name/single
    split=$work/$name/split
    mkdir -p "$single" "$split/job"
    cp -r "$2" "$single/job"
    # every rank on its own "node", from the same working folder (a shared
    # file system), so that each saved graph names its trace as the single
    # command does
    (cd "$single" && parallel --will-cite --plus --halt now,fail=1 -j 4 \
        "'$reverie' import --quiet {} -o '$split/job/{/..}.rvg'" ::: job/*.json.gz) ||
        { fail "$name: parallel import failed"; return; }
    [ "$(ls "$split/job" | wc -l)" -eq "$(ls "$single/job" | wc -l)" ] ||
        fail "$name: not one saved graph per rank: $(ls "$split/job")"
    for side in single split; do
        (cd "$work/$name/$side" &&
            "$reverie" simulate job --json >simulate.json 2>/dev/null &&
            "$reverie" whatif job --opt network:bandwidth_factor=2 --opt straggler:rank=1,factor=1.5 --json \
                >whatif.json 2>/dev/null &&
            "$reverie" import --quiet job -o job.rvg 2>/dev/null) || fail "$name: the $side side failed"
    done
    for file in simulate.json whatif.json job.rvg; do
        cmp -s "$single/$file" "$split/$file" || fail "$name: $file differs between the single command and the recipe"
    done
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if len(d['ranks']) == int(sys.argv[2]) else 1)" \
        "$split/simulate.json" "$3" || fail "$name: the joined job does not hold $3 ranks"
}

"$gentrace" --ranks 4 --steps 3 --layers 4 -o "$work/generated-job" 2>/dev/null || fail "gentrace --ranks 4 failed"
same_as_single generated "$work/generated-job" 4
same_as_single dlrm "$root/traces/param_dlrm_v100_8ranks" 8

if [ "$failures" -ne 0 ]; then
    echo "$failures failures"
    exit 1
fi
echo "the per-rank recipe gives the single command's reports and joint graph, byte for byte"
