#!/bin/sh
# build.sh HARNESS OUTPUT - build one libFuzzer harness (tests/fuzz/HARNESS.c)
# with clang, AddressSanitizer and UndefinedBehaviorSanitizer, against every
# library source, so that a new file in src/ never breaks the fuzz builds
# again (run_import.sh once failed to link when stats.c appeared).
#
# Every sanitizer report is fatal: the loaders refuse times beyond the
# limits (checked.h, validate.h) and the simulator saturates its sums.
set -eu
harness=$1
output=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
# the project's version, as meson.build passes it to every source
version=$(sed -n "s/^ *version: *'\([^']*\)'.*/\1/p" meson.build | head -n 1)
[ -n "$version" ] || { echo "build.sh: no version: line in meson.build" >&2; exit 1; }
# shellcheck disable=SC2046
clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -DREVERIE_PLUGIN_DIR='"/nonexistent"' -DREVERIE_DATA_DIR='"/nonexistent"' -DREVERIE_VERSION="\"$version\"" -Iinclude "tests/fuzz/$harness.c" \
    src/util/*.c src/import/*.c src/graph/*.c src/sim/*.c src/report/*.c src/store/*.c \
    src/model/*.c src/comm/*.c src/transform/*.c \
    $(pkg-config --cflags --libs glib-2.0 gmodule-2.0 gthread-2.0 igraph zlib jansson cairo) -lm -o "$output"
