#!/bin/bash
# cli_errors.sh REVERIE BAD_DATA_DIR - the command line on bad input.
#
# For each input that is not a trace, `reverie simulate FILE` must exit with
# status 2 (bad input), print exactly one line on stderr (naming the file)
# and nothing on stdout - never crash, hang or print a partial table.
# The inputs are tests/data/bad/* plus a few made here (a directory, a
# missing file, a truncated gzip of a real-sized trace).
set -u
reverie=${1:?usage: cli_errors.sh REVERIE BAD_DATA_DIR}
data=${2:?usage: cli_errors.sh REVERIE BAD_DATA_DIR}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
checked=0

check() { # check FILE [WANT]: WANT is a substring the message must contain
    local file=$1 want=${2:-} status lines
    checked=$((checked + 1))
    timeout 60 "$reverie" simulate "$file" >"$work/out" 2>"$work/err"
    status=$?
    lines=$(wc -l <"$work/err")
    if [ "$status" -ne 2 ]; then
        echo "FAIL $file: exit status $status, expected 2"; failures=$((failures + 1))
    elif [ "$lines" -ne 1 ]; then
        echo "FAIL $file: $lines lines on stderr, expected 1"; failures=$((failures + 1))
    elif [ -s "$work/out" ]; then
        echo "FAIL $file: output on stdout"; failures=$((failures + 1))
    elif ! grep -qF -- "$file" "$work/err"; then
        echo "FAIL $file: the message does not name the file"; failures=$((failures + 1))
    elif [ -n "$want" ] && ! grep -qF -- "$want" "$work/err"; then
        echo "FAIL $file: the message lacks \"$want\""; failures=$((failures + 1))
    else
        echo "ok   $(cat "$work/err")"
        return
    fi
    sed 's/^/     stderr: /' "$work/err" | head -5
    head -c 300 "$work/out" | sed 's/^/     stdout: /'
}

shopt -s nullglob
files=("$data"/*)
[ ${#files[@]} -gt 0 ] || { echo "no inputs in $data"; exit 1; }
for file in "${files[@]}"; do
    [ -f "$file" ] || continue
    check "$file"
done

# Not a file at all.
mkdir "$work/a directory"
check "$work/a directory" "directory"
check "$work/does-not-exist.json" "No such file"

# A gzip trace of a realistic size, cut in the middle of its compressed stream.
{
    printf '{"traceEvents": [\n'
    for ((i = 0; i < 3000; i++)); do
        printf '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": %d, "dur": 4, "args": {"correlation": %d}},\n' $((1000 + 10 * i)) $((i + 1))
        printf '{"ph": "X", "cat": "kernel", "name": "kernel_%d", "pid": 0, "tid": 7, "ts": %d, "dur": 4, "args": {"correlation": %d, "stream": 7, "device": 0}},\n' $((i % 17)) $((1005 + 10 * i)) $((i + 1))
    done
    printf '{"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1, "ts": 40000, "dur": 4, "args": {"correlation": 99999}}\n]}\n'
} | gzip -c >"$work/whole.json.gz"
if ! "$reverie" simulate "$work/whole.json.gz" >/dev/null 2>"$work/err"; then
    echo "FAIL the untruncated generated trace does not load: $(cat "$work/err")"; failures=$((failures + 1))
fi
size=$(stat -c %s "$work/whole.json.gz")
head -c $((size / 2)) "$work/whole.json.gz" >"$work/half.json.gz"
check "$work/half.json.gz" "truncated"
gzip -dc "$work/whole.json.gz" 2>/dev/null | head -c 100000 >"$work/half.json"
check "$work/half.json" "truncated"

# Other subcommands take the same path through the importer.
for command in info; do
    checked=$((checked + 1))
    timeout 60 "$reverie" $command "$data/negative_dur.json" >"$work/out" 2>"$work/err"
    status=$?
    if [ "$status" -ne 2 ] || [ "$(wc -l <"$work/err")" -ne 1 ] || [ -s "$work/out" ]; then
        echo "FAIL reverie $command on a bad trace: status $status"; failures=$((failures + 1))
    fi
done

# Traces that are traces but odd: each replays with exit 0 and one note
# on stderr that says what the timing model had to assume.
odd() { # odd NAME WANT PYTHON-EVENTS
    local name=$1 want=$2
    checked=$((checked + 1))
    python3 -c "import json; base = 1700000000000000; ev = $3; json.dump({'traceEvents': ev}, open('$work/$name.json', 'w'))"
    timeout 60 "$reverie" simulate "$work/$name.json" >"$work/out" 2>"$work/err"
    status=$?
    if [ "$status" -ne 0 ] || ! grep -qF -- "$want" "$work/err" || [ "$(wc -l <"$work/err")" -ne 1 ]; then
        echo "FAIL $name: status $status, stderr:"; sed 's/^/     /' "$work/err"; failures=$((failures + 1))
    else
        echo "ok   $name: $(cat "$work/err")"
    fi
}
launch='{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1}'
kernel='{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7}'
odd gpu-before-launches "the GPU clock is" \
    "[dict($launch, ts=base + 100 * i + 50, dur=5, args={'correlation': i + 1}) for i in range(20)] + [dict($kernel, ts=base + 100 * i, dur=20, args={'correlation': i + 1, 'stream': 7, 'device': 0}) for i in range(20)]"
odd no-correlation "20 of 20 GPU tasks have no launch call" \
    "[dict($launch, ts=base + 100 * i, dur=5, args={}) for i in range(20)] + [dict($kernel, ts=base + 100 * i + 10, dur=20, args={'stream': 7, 'device': 0}) for i in range(20)]"
odd one-gpu-event "1 of 1 GPU tasks have no launch call" "[dict($kernel, ts=base, dur=20, args={'stream': 7, 'device': 0})]"

echo "$checked inputs checked, $failures failures"
[ "$failures" -eq 0 ]
