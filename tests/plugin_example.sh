#!/bin/sh
# plugin_example.sh - build the README's plugin example out of tree, the way
# a plugin author would: against an installed reverie found by pkg-config,
# then load it by path in a what-if.  CI runs it after `meson install`.
#
# usage: plugin_example.sh DESTDIR REVERIE README TRACE
#   DESTDIR  where `meson install --destdir` put the install (its prefix inside)
#   REVERIE  the reverie executable to run the plugin with
set -eu
destdir=$1 reverie=$2 readme=$3 trace=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The first ```c block of the "Write your own optimization" section, verbatim.
awk '/^#+ Write your own optimization/ { section = 1 }
     section && /^```c$/ { inside = 1; next }
     inside && /^```$/ { exit }
     inside { print }' "$readme" > "$work/my_opt.c"
[ -s "$work/my_opt.c" ] || { echo "no C example in $readme" >&2; exit 1; }

installed=$(find "$destdir" -name reverie.pc | head -1)
[ -f "$installed" ] || { echo "no reverie.pc under $destdir (run meson install --destdir)" >&2; exit 1; }
# The staged reverie.pc names the final prefix; point it into the stage
# (glib's own .pc stays as the system has it).
mkdir "$work/pc"
sed "s|^prefix=|prefix=$destdir|" "$installed" > "$work/pc/reverie.pc"
export PKG_CONFIG_PATH="$work/pc"
# The README's command, with the staged install standing in for the real one.
cc -shared -fPIC $(pkg-config --cflags reverie) "$work/my_opt.c" -o "$work/my_opt.so" $(pkg-config --libs reverie)
"$reverie" whatif "$trace" --opt "$work/my_opt.so:factor=0.8" > "$work/out"
grep -q "scaled .* tasks by 0.8" "$work/out" || { echo "the example plugin did not run:" >&2; cat "$work/out" >&2; exit 1; }
echo "plugin example: built against the installed reverie ($(pkg-config --modversion reverie)) and ran"
