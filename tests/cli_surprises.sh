#!/bin/bash
# cli_surprises.sh REVERIE SOURCE_DIR PLUGIN_DIR - the command line does
# what a user expects where a mistake is easy: "did you mean" for
# commands, optimizations and parameters; a plugin of REVERIE_PLUGIN_PATH
# named like a built-in one is refused unless given by path; reverie's own
# --timeline output is refused as input with a line that says what it is.
reverie=$1 source=$2 plugins=$3
. "$(dirname "$0")/cli_lib.sh"
trace="$source/traces/small_ddp.json.gz"

# expect_message STATUS TEXT COMMAND... : exits STATUS with one line holding TEXT
expect_message() {
    local status=$1 text=$2
    shift 2
    expect_status "$status" "$@"
    one_line
    expect_in "$work/err" "$text"
}

# --- did you mean -------------------------------------------------------------
expect_message 1 "unknown command 'simulat': did you mean 'simulate'?" "$reverie" simulat "$trace"
expect_message 1 "did you mean 'critical-path'?" "$reverie" critical_path "$trace"
expect_message 1 "no optimization named 'fused_adam': did you mean 'fused-adam'?" "$reverie" whatif "$trace" --opt fused_adam
expect_message 1 "did you mean 'hardware'?" "$reverie" whatif "$trace" --opt hardwre:gpu=A100-SXM4-80GB
expect_message 1 "unknown parameter 'wrold': did you mean 'world'?" "$reverie" whatif "$trace" --opt ddp:wrold=8
expect_message 1 "unknown parameter 'bucket-cap': did you mean 'bucket_cap'?" "$reverie" whatif "$trace" --opt ddp:bucket-cap=25MiB
expect_message 1 "no parameter 'bandwith': did you mean 'bandwidth'?" "$reverie" sweep "$trace" --vary ddp.bandwith=1Gbps,2Gbps
expect_message 1 "did you mean 'fused-adam'?" "$reverie" sweep "$trace" --opt fused_adm --vary scale.factor=1,2
# nothing close: no guess
expect_message 1 "unknown command 'zzzz' (see reverie --help)" "$reverie" zzzz
expect_status 1 "$reverie" whatif "$trace" --opt qqqqqq
grep -q "did you mean" "$work/err" && fail "a guess for a name like none: $(cat "$work/err")"

# --- a user's plugin named like a built-in one ---------------------------------
mkdir "$work/mine"
cp "$plugins/scale.so" "$work/mine/amp.so"
REVERIE_PLUGIN_PATH="$work/mine" expect_message 1 "has the name of the built-in optimization amp" \
    "$reverie" whatif "$trace" --opt amp
expect_in "$work/err" "--opt $work/mine/amp.so"
# given by path, it is used (it is scale: factor=0.5 halves the GPU kernels)
REVERIE_PLUGIN_PATH="$work/mine" expect_status 0 "$reverie" whatif "$trace" --opt "$work/mine/amp.so:factor=0.5" --json
json_check "abs(d['predicted_gpu_us'] * 2 - d['baseline_gpu_us']) < 1"
# listed once, the built-in one, and the user's named on stderr
REVERIE_PLUGIN_PATH="$work/mine" expect_status 0 "$reverie" plugins --json
json_check "[p['name'] for p in d].count('amp') == 1 and [p['name'] for p in d].count('scale') == 1"
expect_in "$work/err" "$work/mine/amp.so: not listed: it has the name of the built-in optimization"
# the built-in folder itself on REVERIE_PLUGIN_PATH is no shadow
REVERIE_PLUGIN_PATH="$plugins" expect_status 0 "$reverie" whatif "$trace" --opt amp
REVERIE_PLUGIN_PATH="$plugins" expect_status 0 "$reverie" plugins
[ -s "$work/err" ] && fail "the built-in folder on REVERIE_PLUGIN_PATH: $(cat "$work/err")"

# --- reverie's own timeline is not a trace ---------------------------------------
expect_status 0 "$reverie" simulate "$trace" --timeline "$work/replay.json.gz"
expect_message 2 "this is a timeline reverie wrote (--timeline), not a profiler trace" "$reverie" simulate "$work/replay.json.gz"
expect_in "$work/err" "$work/replay.json.gz"
# one written before the marker came first: known by its "reverie" summary at the end
printf '{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":2,"args":{"stream":7}}],"reverie":[]}' >"$work/old.json"
expect_message 2 "this is a timeline reverie wrote" "$reverie" info "$work/old.json"

[ "$failures" -eq 0 ] && echo "cli_surprises: all checks passed"
exit $((failures > 0))
