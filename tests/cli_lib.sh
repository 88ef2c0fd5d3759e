# cli_lib.sh - what the command-line test scripts share; sourced, not run.
# Sets $work (a scratch folder removed on exit) and $failures, and defines
# fail, expect_status, expect_in, one_line and json_check.

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

# expect_in FILE TEXT : the file holds TEXT.
expect_in() {
    grep -qF -- "$2" "$1" || fail "$1 lacks \"$2\": $(head -c 300 "$1")"
}

# one_line : the last command's error is exactly one line (besides the
# timing model's notes).
one_line() {
    [ "$(grep -vc '^reverie: note:' "$work/err")" -eq 1 ] || fail "expected one line on stderr: $(cat "$work/err")"
}

# json_check EXPRESSION : a python3 expression over d, the JSON in
# $work/out, is true.
json_check() {
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if ($1) else 1)" "$work/out" ||
        fail "JSON check failed: $1: $(head -c 400 "$work/out")"
}
