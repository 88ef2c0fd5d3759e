#!/bin/bash
# hostile.sh BUILD_DIR - wall-clock and memory figures for hostile input
# (issue 15), printed, not asserted: timings belong in benchmarks.
#
#   1. A value under a key the importer ignores, 64 MiB and 256 MiB of it,
#      gzipped: the time of `reverie info` on each and their ratio (linear
#      scanning gives about 4; the old scanner was quadratic, about 16).
#      test_hardening.c asserts the same ratio on bytes scanned.
#   2. A gzip bomb: 22 MB expanding to 6 GiB of events, under a 3 GB
#      address-space limit (ulimit -v), with the default limits (the
#      --max-events limit ends it) and with the limits raised (memory runs
#      out: one line, exit 2, never an abort).
# Needs about 30 MB of disk in TMPDIR and a few minutes.
set -u
build=${1:?usage: hostile.sh BUILD_DIR}
reverie=$(cd "$build" && pwd)/reverie
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
kernel='{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":1,"args":{"stream":7,"device":0,"correlation":1}}'

measure() { # LABEL COMMAND...: exit status, message, wall and CPU seconds, peak memory
    local label=$1
    shift
    /usr/bin/time -f "%e %U %S %M" -o "$work/time" "$@" >/dev/null 2>"$work/err"
    local status=$?
    read -r wall user sys peak < <(tail -n 1 "$work/time")
    printf '%-34s exit %d  %7.2f s wall  %7.2f s CPU  %7.1f MB peak  %s\n' "$label" "$status" "$wall" \
        "$(awk "BEGIN { print $user + $sys }")" "$(awk "BEGIN { print $peak / 1024 }")" \
        "$(grep -v '^Command' "$work/err" | head -c 160)"
}

echo "== an ignored value, gzipped"
for mb in 64 256; do
    { printf '{"junk": "'; head -c $((mb << 20)) /dev/zero | tr '\0' a; printf '", "traceEvents": [%s]}' "$kernel"; } |
        gzip -1 >"$work/ignored-$mb.json.gz"
    measure "ignored value of $mb MiB" "$reverie" info "$work/ignored-$mb.json.gz"
    cp "$work/time" "$work/time-$mb"
done
read -r wall64 _ <"$work/time-64"
read -r wall256 _ <"$work/time-256"
echo "ratio 256 MiB / 64 MiB (wall): $(awk "BEGIN { printf \"%.2f\", $wall256 / $wall64 }") (the issue allows 6)"

echo "== a gzip bomb: 6 GiB of events"
{ for ((i = 0; i < 10000; i++)); do printf '%s,' "$kernel"; done; } | gzip -9 >"$work/member.gz"
printf '{"traceEvents": [' | gzip -9 >"$work/bomb.json.gz"
members=$(( (6 << 30) / $(gzip -dc "$work/member.gz" | wc -c) ))
for ((i = 0; i < members; i++)); do cat "$work/member.gz"; done >>"$work/bomb.json.gz"
printf '%s]}' "$kernel" | gzip -9 >>"$work/bomb.json.gz"
echo "bomb: $(stat -c %s "$work/bomb.json.gz") bytes of gzip, $members members of 10000 events"
measure "bomb, default limits, ulimit -v 3GB" bash -c "ulimit -v 3000000; exec \"$reverie\" info \"$work/bomb.json.gz\""
measure "bomb, limits raised, ulimit -v 3GB" bash -c "ulimit -v 3000000; exec \"$reverie\" info \"$work/bomb.json.gz\" --max-events 4000000000 --max-bytes 100GiB"
