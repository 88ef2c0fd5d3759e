#!/bin/bash
# cli_docs.sh REVERIE SOURCE_DIR BUILD_DIR VERSION - what is generated from
# the program cannot drift from it: the plugin reference is `reverie plugins
# --markdown`; the man page is help2man's output (when help2man is there)
# and renders; bash completion offers the program's commands, options,
# optimizations and parameters; --version and the library's soname are the
# build's.
reverie=$1 source=$2 build=$3 version=$4
. "$(dirname "$0")/cli_lib.sh"

# the plugin reference
"$reverie" plugins --markdown >"$work/reference.md" 2>"$work/err" || fail "plugins --markdown failed: $(cat "$work/err")"
diff -u "$source/docs/plugin-reference.md" "$work/reference.md" >"$work/diff" ||
    fail "docs/plugin-reference.md is not 'reverie plugins --markdown' (regenerate it): $(head -20 "$work/diff")"
grep -q '^## fused-adam$' "$work/reference.md" || fail "the reference lacks fused-adam"

# the man page: as generated (the date line aside), and it renders
if [ -f "$build/docs/reverie.1" ]; then
    diff -u <(grep -v '^\.TH' "$source/docs/reverie.1") <(grep -v '^\.TH' "$build/docs/reverie.1") >"$work/diff" ||
        fail "docs/reverie.1 is not the generated page (meson compile -C build man-page): $(head -20 "$work/diff")"
else
    echo "SKIP: help2man is missing: the man page is not compared with the program's help"
fi
if command -v man >/dev/null; then
    MANWIDTH=80 man --warnings -l "$source/docs/reverie.1" >"$work/man" 2>"$work/err" || fail "man -l failed: $(cat "$work/err")"
    [ ! -s "$work/err" ] || fail "man -l warns: $(head -5 "$work/err")"
    for text in "whatif" "--opt" "EXIT STATUS" "REVERIE_PLUGIN_PATH" "sweep"; do expect_in "$work/man" "$text"; done
fi

# bash completion: the program's own words
complete_words() {
    # complete_words WORD... : the completions of the last word
    (
        . "$source/src/cli/completion.bash"
        COMP_WORDS=("$reverie" "$@")
        COMP_CWORD=$#
        _reverie
        printf '%s\n' "${COMPREPLY[@]}"
    )
}
complete_words wha | grep -qx whatif || fail "completion: 'wha' does not give whatif"
complete_words whatif t.json --o | grep -qx -- --opt || fail "completion: whatif --o does not give --opt"
complete_words sweep g.rvg --j | grep -qx -- --json || fail "completion: sweep --j does not give --json"
complete_words whatif t.json --opt fused | grep -qx fused-adam || fail "completion: --opt fused does not give fused-adam"
complete_words whatif t.json --opt ddp:wor | grep -qx ddp:world= || fail "completion: --opt ddp:wor does not give ddp:world="
complete_words whatif t.json --opt ddp:world=8,band | grep -qx ddp:world=8,bandwidth= ||
    fail "completion: --opt ddp:world=8,band does not give the bandwidth parameter"
complete_words sweep g.rvg --vary ddp.band | grep -qx ddp.bandwidth= || fail "completion: --vary ddp.band"

# the version and the soname are the build's
"$reverie" --version >"$work/out"
grep -q "^reverie $version\( (git [0-9a-z.-]*)\)\?$" "$work/out" || fail "--version: $(cat "$work/out")"
if command -v objdump >/dev/null; then
    objdump -p "$build/libreverie.so.0" | grep -q 'SONAME *libreverie\.so\.0$' || fail "libreverie has no soname libreverie.so.0"
    objdump -p "$reverie" | grep -q 'NEEDED *libreverie\.so\.0$' || fail "reverie does not link libreverie.so.0"
fi

# the project stands alone: no file of it names the development folder
# that sits beside a checkout (built outputs and git's own files aside)
folder="../sha""red/"   # in two pieces, so that this file does not name it
named=$(grep -rlaF --exclude-dir='build*' --exclude-dir=.git --exclude-dir='__pycache__' "$folder" "$source" 2>/dev/null)
[ -z "$named" ] || fail "files name $folder: $named"

[ "$failures" -eq 0 ] && echo "docs: plugin reference, man page, completion, version: ok"
exit $((failures > 0))
