# cli_lib.sh - what the command-line test scripts share; sourced, not run.
# Sets $work (a scratch folder removed on exit) and $failures, and defines
# fail and expect_status.

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# expect_status STATUS COMMAND... : run it, keeping stdout/stderr in $work.
expect_status() {
    want=$1
    shift
    "$@" >"$work/out" 2>"$work/err"
    got=$?
    [ "$got" -eq "$want" ] || fail "exit $got, expected $want: $* ($(head -c 300 "$work/err"))"
}
