#!/bin/bash
# cli_hostile.sh REVERIE SOURCE_ROOT [SANITIZE] - the command line against
# hostile input (issue 15), every case made here.
#
# Each case runs the real binary (under `timeout`, so a hang fails it) and
# must end with its documented exit status: 0 success, 1 bad usage or
# parameters, 2 bad input or an output that cannot be written, 3 a plugin
# error.  A failing run must print exactly one line on stderr and nothing
# on stdout (a sanitizer report is more than one line, so it fails the
# case).  And nothing may be lost: no case may change or remove a file it
# was not asked to write (a checksum of every file in the work folder is
# compared before and after), or leave a temporary file behind.  Files a
# case may write go to $work/scratch.
#
# SANITIZE is meson's b_sanitize; under a sanitizer the cases that need a
# memory limit (ulimit -v) are skipped, because ASan reserves terabytes of
# address space.  Cases that need root (a tiny tmpfs) skip without it.
set -u
reverie=$1
root=$2
sanitize=${3:-none}
plugins=${REVERIE_HOSTILE_PLUGINS:?run through meson test}
. "$(dirname "$0")/cli_lib.sh"
trace=$root/traces/small_ddp.json.gz
[ -f "$trace" ] || { echo "missing $trace"; exit 1; }
mkdir -p "$work/scratch" "$work/in"
export R=$reverie W=$work T=$trace P=$plugins
cases=0
skipped=0

out=$work/scratch/stdout
err=$work/scratch/stderr

# Every file outside scratch/: its type, size, inode and modification time
# in nanoseconds (a write changes the time, a replacement the inode), and a
# checksum of the small ones.
snapshot() {
    (cd "$work" && find . -path ./scratch -prune -o \( -type f -o -type l -o -type p \) -print | sort |
        while read -r file; do
            stat -c '%n %F %s %i %y' "$file"
            [ -f "$file" ] && [ ! -L "$file" ] && [ "$(stat -c %s "$file")" -lt 1000000 ] && md5sum <"$file"
        done)
}

leftovers() { # temporary files of an output written by output.c or GLib
    find "$work" \( -name '.*.reverie-*' -o -name '*.rvg.??????' -o -name 'reverie-import-*' \) -print
}

report() { # NAME WHY
    fail "case $1: $2"
    sed 's/^/     stderr: /' "$err" | head -5 >&2
    head -c 300 "$out" | sed 's/^/     stdout: /' >&2
    echo >&2 # the cut may end mid-line
}

# hostile NAME STATUS WANT COMMAND... : WANT is text stderr must hold
# (failures) or stdout must hold (successes); empty for none.
hostile() {
    local name=$1 want_status=$2 want=$3 before after status lines started=$SECONDS
    shift 3
    cases=$((cases + 1))
    before=$(snapshot)
    timeout 120 "$@" >"$out" 2>"$err" </dev/null
    status=$?
    after=$(snapshot)
    # the timing model's "note:" lines are not errors
    lines=$(grep -vc '^reverie: note: ' "$err")
    if [ "$status" -ne "$want_status" ]; then report "$name" "exit status $status, expected $want_status"; return; fi
    if [ "$status" -ne 0 ] && [ "$lines" -ne 1 ]; then report "$name" "$lines lines on stderr, expected 1"; return; fi
    if [ "$status" -ne 0 ] && [ -s "$out" ]; then report "$name" "output on stdout"; return; fi
    if [ -n "$want" ] && [ "$status" -ne 0 ] && ! grep -qF -- "$want" "$err"; then
        report "$name" "stderr lacks \"$want\""; return
    fi
    if [ -n "$want" ] && [ "$status" -eq 0 ] && ! grep -qF -- "$want" "$out"; then
        report "$name" "stdout lacks \"$want\""; return
    fi
    if grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$out" "$err"; then report "$name" "a control character was printed"; return; fi
    if [ "$before" != "$after" ]; then report "$name" "files outside scratch/ changed: $(diff <(echo "$before") <(echo "$after") | head -3)"; return; fi
    if [ -n "$(leftovers)" ]; then report "$name" "temporary files left: $(leftovers)"; rm -f $(leftovers); return; fi
    echo "ok   $name ($((SECONDS - started)) s): $(head -c 200 "$err" | tr '\n' ' ')"
}

skip() { skipped=$((skipped + 1)); echo "skip $1: $2"; }

have_python() { command -v python3 >/dev/null 2>&1; }

# ---- inputs ---------------------------------------------------------------

in=$work/in
zcat "$trace" >"$in/trace.json"
kernel='{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":2,"args":{"stream":7,"device":0}}'
events() { # N [EVENT]: a trace of N copies of one event
    local n=$1 event=${2:-$kernel}
    printf '{"traceEvents": ['
    for ((i = 0; i < n; i++)); do [ "$i" -gt 0 ] && printf ','; printf '%s' "$event"; done
    printf ']}'
}
repeat() { head -c "$2" /dev/zero | tr '\0' "$1"; } # CHAR BYTES

: >"$in/empty.json"
printf ' \n\t \r\n  ' >"$in/blank.json"
head -c 1048576 /dev/zero >"$in/nul.json"
truncate -s 2G "$in/nul-2g.json"                      # sparse: no disk, 2 GiB of NUL bytes
{ printf '\xef\xbb\xbf'; cat "$in/trace.json"; } >"$in/bom.json"
gzip -c "$in/bom.json" >"$in/bom.json.gz"
iconv -f UTF-8 -t UTF-16 "$in/trace.json" >"$in/utf16.json"
{ printf 'PK\003\004\024\000\000\000\010\000'; head -c 200 /dev/urandom; } >"$in/zip.json"
{ printf 'BZh91AY&SY'; head -c 100 /dev/urandom; } >"$in/bz2.json"
{ printf '\375' ; printf '7zXZ\000\000'; head -c 100 /dev/urandom; } >"$in/xz.json"
{ printf '\050\265\057\375'; head -c 100 /dev/urandom; } >"$in/zstd.json"
printf '<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head></html>\n' >"$in/page.json"
cp "$reverie" "$in/binary.json"
(cd "$in" && tar cf tar.json trace.json && tar czf tgz.json.gz trace.json)
gzip -c "$trace" >"$in/double.json.gz"
head -c $(($(stat -c %s "$trace") / 2)) "$trace" >"$in/truncated.json.gz"
cp "$trace" "$in/corrupt.json.gz"
printf '\377\377\377\377' | dd of="$in/corrupt.json.gz" bs=1 seek=$(($(stat -c %s "$trace") / 2)) conv=notrunc 2>/dev/null
half=$(($(stat -c %s "$in/trace.json") / 2))
{ head -c "$half" "$in/trace.json" | gzip -c; tail -c +$((half + 1)) "$in/trace.json" | gzip -c; } >"$in/members.json.gz"
{ printf '{"junk": "'; repeat a 8388608; printf '", "traceEvents": [%s]}' "$kernel"; } >"$in/ignored-string.json"
{ printf '{"junk": '; repeat '[' 1000000; repeat ']' 1000000; printf ', "traceEvents": [%s]}' "$kernel"; } >"$in/ignored-nested.json"
{ printf '{"junk": '; repeat '[' 1000000; printf ', "traceEvents": [%s]}' "$kernel"; } >"$in/unbalanced.json"
{ printf '{"traceEvents": [%s, {"ph": "X", "args": ' "$kernel"; repeat '[' 10000; repeat ']' 10000; printf '}]}'; } >"$in/deep-event.json"
{ printf '{"'; repeat k 70000; printf '": 1, "traceEvents": [%s]}' "$kernel"; } >"$in/huge-key.json"
{ printf '{"traceEvents": [%s, {"ph": "X", "name": "' "$kernel"; repeat x 68157440; printf '"}]}'; } >"$in/huge-event.json"
events 1000 >"$in/thousand.json"
# gzip bombs: gzip members of 10000 identical events (about 1 MB each,
# 3 KB compressed) repeated: bomb.json.gz holds 320001 events (35 MB), and
# big-bomb.json.gz 10 million (1.1 GB) in 30 MB, for the memory limit.
bomb() { # MEMBERS FILE
    printf '{"traceEvents": [' | gzip -9 >"$2"
    for ((i = 0; i < $1; i++)); do cat "$in/bomb-body.gz"; done >>"$2"
    printf '%s]}' "$kernel" | gzip -9 >>"$2"
}
{ for ((i = 0; i < 10000; i++)); do printf '%s,' "$kernel"; done; } | gzip -9 >"$in/bomb-body.gz"
bomb 32 "$in/bomb.json.gz"
[ "$sanitize" = none ] && bomb 1000 "$in/big-bomb.json.gz"
rm -f "$in/bomb-body.gz"
max_kernel='{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":1000000000000,"args":{"stream":7,"device":0}}'
events 10000 "$max_kernel" >"$in/max-durations.json"
events 1 '{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":2,"args":{"stream":1099511627776,"device":0}}' >"$in/wide-stream.json"
events 3 '{"ph":"X","cat":"mtia_ccp_events","name":"k","pid":0,"tid":7,"ts":1,"dur":2}' >"$in/mtia-only.json"
printf '{"traceEvents": [{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":50},
{"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":1,"dur":5},
{"ph":"X","cat":"mtia_ccp_events","name":"k","pid":1,"tid":9,"ts":2,"dur":3}]}' >"$in/mtia-host.json"
events 1 '{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":2,"args":{"stream":7,"device":-2}}' >"$in/wide-device.json"
events 1 '{"ph":"X","cat":"kernel","name":"ncclKernel_AllReduce_RING_LL_Sum_float","pid":0,"tid":7,"ts":1,"dur":2,"args":{"stream":7,"device":0,"bytes":9223372036854775807}}' >"$in/huge-bytes.json"
printf '{"distributedInfo": {"rank": 0, "world_size": 1000000000}, "traceEvents": [%s]}' "$kernel" >"$in/huge-world.json"
# Names that try to take over the terminal: a title, a clear screen, a fake report line.
evil='\\u001b]0;pwned\\u0007\\u001b[2J\\r\\n  total  0.001 ms  1000.000x\\u202e' # \\ for sed
zcat "$trace" | sed "s/\"ProfilerStep#2\"/\"ProfilerStep#2$evil\"/; s/\"ampere_sgemm_128x64_tn\"/\"ampere_sgemm_128x64_tn$evil\"/" >"$in/evil-names.json"
ln "$in/trace.json" "$in/hardlink.json"
ln -s "$in/trace.json" "$in/symlink.json"
mkfifo "$in/fifo-no-writer"
"$reverie" import --quiet "$trace" -o "$in/graph.rvg" || fail "cannot import the project's trace"
cp "$in/graph.rvg" "$in/existing.rvg"
gzip -c "$in/trace.json" >"$in/not-a-graph.rvg"
printf 'old contents\n' >"$in/existing.graphml"
if have_python; then
    python3 - "$in/graph.rvg" "$in" <<'EOF'
# Forge saved graphs with valid checksums: one with a cycle, one whose
# stored source path holds terminal escapes.
import struct, sys, zlib
path, folder = sys.argv[1], sys.argv[2]
data = open(path, 'rb').read()
count = struct.unpack_from('<I', data, 12)[0]
table = [struct.unpack_from('<IIQQ', data, 24 + 24 * i) for i in range(count)]
sections = {sid: bytearray(data[off:off + length]) for sid, crc, off, length in table}
def write(name, sections):
    order = [sid for sid, _, _, _ in table]
    offset = 24 + 24 * count
    entries, body = b'', b''
    for sid in order:
        entries += struct.pack('<IIQQ', sid, zlib.crc32(bytes(sections[sid])), offset, len(sections[sid]))
        body += sections[sid]
        offset += len(sections[sid])
    header = bytearray(data[:12] + struct.pack('<II', count, 0) + b'\0\0\0\0')  # keeps the version
    crc = zlib.crc32(bytes(header) + entries)
    struct.pack_into('<I', header, 16, crc)
    open(folder + '/' + name, 'wb').write(bytes(header) + entries + body)
edges = dict(sections)
e = bytearray(edges[4])
a, b = struct.unpack_from('<ii', e, 4)
struct.pack_into('<ii', e, 4 + 10, b, a)            # edge 1 := the reverse of edge 0
edges[4] = e
write('cycle.rvg', edges)
meta = bytearray(sections[6])
length = struct.unpack_from('<I', meta, 0)[0]
source = b'\x1b]0;pwned\x07evil\r\nfake line'
named = dict(sections)
named[6] = struct.pack('<I', len(source)) + source + meta[4 + length:]
write('evil-source.rvg', named)
EOF
fi

# ---- input files ------------------------------------------------------------

hostile empty-file            2 "the file is empty"                 "$R" simulate "$in/empty.json"
hostile white-space-only      2 "nothing but white space"           "$R" simulate "$in/blank.json"
hostile nul-bytes             2 "NUL bytes"                         "$R" simulate "$in/nul.json"
hostile nul-bytes-2gib        2 "NUL bytes"                         "$R" info "$in/nul-2g.json"
hostile byte-order-mark       0 "ProfilerStep#4"                    "$R" simulate "$in/bom.json"
hostile byte-order-mark-gzip  0 "ProfilerStep#4"                    "$R" simulate "$in/bom.json.gz"
hostile utf16                 2 "UTF-16 text"                       "$R" simulate "$in/utf16.json"
hostile zip                   2 "ZIP archive"                       "$R" simulate "$in/zip.json"
hostile bzip2                 2 "bzip2 file"                        "$R" simulate "$in/bz2.json"
hostile xz                    2 "xz file"                           "$R" simulate "$in/xz.json"
hostile zstd                  2 "zstd file"                         "$R" simulate "$in/zstd.json"
hostile html-page             2 "HTML page"                         "$R" simulate "$in/page.json"
hostile executable            2 "ELF executable"                    "$R" simulate "$in/binary.json"
hostile tar                   2 "tar archive"                       "$R" simulate "$in/tar.json"
hostile tar-gz                2 "after decompression, it is a tar"  "$R" simulate "$in/tgz.json.gz"
hostile gzip-in-gzip          2 "after decompression, it is a gzip" "$R" simulate "$in/double.json.gz"
hostile directory             2 "is a directory"                    "$R" query "$in" kind=kernel
mkdir -p "$in/no-traces"
hostile folder-without-traces 2 "a folder with no .json"            "$R" simulate "$in/no-traces"
hostile missing-file          2 "No such file"                      "$R" simulate "$in/missing.json"
hostile dev-null              2 "the file is empty"                 "$R" simulate /dev/null
hostile dev-zero              2 "NUL bytes"                         "$R" simulate /dev/zero
hostile truncated-gzip        2 "truncated"                         "$R" simulate "$in/truncated.json.gz"
hostile corrupt-gzip          2 "gzip"                              "$R" simulate "$in/corrupt.json.gz"
hostile gzip-members          0 "ProfilerStep#4"                    "$R" simulate "$in/members.json.gz"
hostile ignored-8mb-string    0 "1 tasks"                           "$R" simulate "$in/ignored-string.json"
hostile ignored-nesting       0 "1 tasks"                           "$R" simulate "$in/ignored-nested.json"
hostile unbalanced-nesting    2 "is incomplete"                     "$R" simulate "$in/unbalanced.json"
hostile deep-event            2 "invalid JSON"                      "$R" simulate "$in/deep-event.json"
hostile huge-key              2 "a key is longer than 64 KiB"       "$R" simulate "$in/huge-key.json"
hostile huge-event            2 "event #1 is longer than"           "$R" simulate "$in/huge-event.json"
hostile max-events            2 "more than 100 events"              "$R" info "$in/thousand.json" --max-events 100
hostile max-bytes             2 "--max-bytes"                       "$R" info "$in/thousand.json" --max-bytes 10KB
hostile gzip-bomb-max-bytes   2 "after decompression"               "$R" info "$in/bomb.json.gz" --max-bytes 20MB
hostile gzip-bomb-max-events  2 "more than 200000 events"           "$R" info "$in/bomb.json.gz" --max-events 200000
hostile limits-raised         0 "tasks: 320001"                     "$R" info "$in/bomb.json.gz" --max-events 1000000
if [ "$sanitize" = none ]; then
    hostile out-of-memory     2 "out of memory"  bash -c 'ulimit -v 400000; exec "$R" info "$W/in/big-bomb.json.gz" --max-events 4000000000 --max-bytes 100GiB'
else
    skip out-of-memory "ulimit -v cannot be used under $sanitize"
fi
hostile durations-overflow    2 "durations add up to more than"     "$R" simulate "$in/max-durations.json"
hostile mtia-only             2 "3 of its events belong to a device backend reverie does not model"  "$R" simulate "$in/mtia-only.json"
hostile mtia-says-ignored     0 "1 of device backends not modelled"  "$R" info "$in/mtia-host.json"
hostile wide-stream           0 "gpu stream 0/1099511627776"  "$R" info "$in/wide-stream.json"
hostile wide-device           2 "field \"device\" is out of range"  "$R" simulate "$in/wide-device.json"
hostile huge-bytes            2 "field \"bytes\" is out of range"   "$R" whatif "$in/huge-bytes.json" --opt network
hostile huge-world-size       2 "world_size = 1000000000"           "$R" simulate "$in/huge-world.json"

# ---- pipes, FIFOs and standard input ----------------------------------------

hostile stdin-plain           0 "<stdin>: 1484 tasks"  bash -c '"$R" simulate - <"$W/in/trace.json"'
hostile stdin-gzip-pipe       0 "<stdin>: 1484 tasks"  bash -c 'cat "$T" | "$R" simulate -'
hostile dev-stdin-pipe        0 "1484 tasks"           bash -c 'zcat "$T" | "$R" simulate /dev/stdin'
hostile stdin-slow-writer     0 "1484 tasks"           bash -c '(sleep 2; cat "$T") | "$R" simulate - --read-timeout 30'
hostile stdin-stalled-writer  2 "no data for 1 s"      bash -c '(sleep 5; cat "$T") | "$R" simulate - --read-timeout 1'
hostile fifo-no-writer        2 "the FIFO has no writer" "$R" simulate "$in/fifo-no-writer" --read-timeout 1
hostile fifo-with-writer      0 "1484 tasks"  bash -c 'mkfifo "$W/scratch/f"; (zcat "$T" >"$W/scratch/f" &); "$R" simulate "$W/scratch/f"; s=$?; rm -f "$W/scratch/f"; exit $s'
hostile no-input-given        1 "give a trace or graph" "$R" simulate
# Nothing lost through a pipe: the same replay as from the file.
hostile pipe-loses-nothing    0 ""  bash -c 'cmp <("$R" simulate "$T" | tail -n +2) <(zcat "$T" | "$R" simulate - | tail -n +2)'
hostile graph-through-pipe    0 "1484 tasks"  bash -c '"$R" import --quiet "$T" -o - | "$R" simulate -'
hostile graph-on-stdin        0 "1484 tasks"  bash -c '"$R" simulate - <"$W/in/graph.rvg"'
hostile graph-max-bytes       2 "--max-bytes"          "$R" simulate "$in/graph.rvg" --max-bytes 1KB
hostile graph-pipe-max-bytes  2 "larger than the limit" bash -c 'cat "$W/in/graph.rvg" | "$R" simulate - --max-bytes 1KB'
hostile rvg-name-gzip-inside  2 "not a reverie graph: it is a gzip file" "$R" simulate "$in/not-a-graph.rvg"

# ---- output hygiene ---------------------------------------------------------

hostile escaped-query         0 '\x1b]0;pwned\x07'  "$R" query "$in/evil-names.json" name~sgemm --group-by name
hostile escaped-whatif        0 'ProfilerStep#2\x1b' "$R" whatif "$in/evil-names.json" --opt scale:factor=0.5
hostile escaped-json          0 '\u001B]0;pwned'    "$R" query "$in/evil-names.json" name~pwned --json --limit 1
hostile escaped-info          0 'ProfilerStep#2\x1b' "$R" info "$in/evil-names.json"
hostile escaped-simulate      0 'ProfilerStep#2\x1b' "$R" simulate "$in/evil-names.json" --explain 50
hostile escaped-breakdown     0 'ProfilerStep#2\x1b' "$R" breakdown "$in/evil-names.json"
hostile escaped-critical-path 0 'ProfilerStep#2\x1b' "$R" critical-path "$in/evil-names.json" --opt amp
hostile escaped-path          2 '\x1b[2J'           "$R" simulate "$in/$(printf 'no\033[2Jsuch.json')"
hostile newline-in-path       2 'bad\nname'         "$R" simulate "$in/$(printf 'bad\nname.json')"
have_python && hostile escaped-graphml 0 ""  bash -c '"$R" export-graph "$W/in/evil-names.json" -o - --format graphml --steps 1 | python3 -c "import sys, xml.dom.minidom as m; m.parse(sys.stdin)"'
if have_python; then
    hostile rvg-with-cycle        2 "has a cycle"         "$R" simulate "$in/cycle.rvg"
    hostile rvg-source-escaped    0 'x1b]0;pwned'         "$R" simulate "$in/evil-source.rvg"
else
    skip rvg-with-cycle "no python3"; skip rvg-source-escaped "no python3"
fi

# ---- output files -----------------------------------------------------------

hostile import-onto-input     1 "is an input of this run" bash -c 'cd "$W/in" && "$R" import trace.json -o ./trace.json'
hostile import-onto-hardlink  1 "is an input of this run" "$R" import "$in/trace.json" -o "$in/hardlink.json" --force
hostile import-onto-symlink   1 "is an input of this run" "$R" import "$in/trace.json" -o "$in/symlink.json" --force
hostile import-existing       1 "already exists; give --force" "$R" import "$trace" -o "$in/existing.rvg"
hostile import-into-directory 1 "is a directory"           "$R" import "$trace" -o "$in"
hostile import-force          0 "wrote"  bash -c 'cp "$W/in/existing.rvg" "$W/scratch/old.rvg" && "$R" import "$T" -o "$W/scratch/old.rvg" --force && "$R" info "$W/scratch/old.rvg" >/dev/null'
hostile import-dev-full       2 "No space left on device"  "$R" import "$trace" -o /dev/full
hostile import-dev-null       0 ""  bash -c '"$R" import --quiet "$T" -o /dev/null && test -c /dev/null'
hostile import-missing-folder 2 "its folder" "$R" import "$trace" -o "$work/scratch/none/g.rvg"
hostile import-stdin-needs-o  1 "give the output with -o"  "$R" import -
hostile import-empty-name     1 "give an output file name" "$R" import "$trace" -o ""
hostile import-stdin          0 "wrote"  bash -c 'zcat "$T" | "$R" import - -o "$W/scratch/stdin.rvg"'
hostile import-size-limit     2 "File too large"  bash -c 'cp "$W/in/existing.rvg" "$W/scratch/kept.rvg"; ulimit -f 16; "$R" import "$T" -o "$W/scratch/kept.rvg" --force; s=$?; cmp -s "$W/scratch/kept.rvg" "$W/in/existing.rvg" || exit 9; exit $s'
hostile import-through-link   0 ""  bash -c 'cp "$W/in/existing.rvg" "$W/scratch/target.rvg" && ln -sf "$W/scratch/target.rvg" "$W/scratch/link.rvg" && "$R" import --quiet "$T" -o "$W/scratch/link.rvg" --force && test -L "$W/scratch/link.rvg" && "$R" info "$W/scratch/target.rvg" >/dev/null'
hostile export-onto-input     1 "is an input of this run" "$R" export-graph "$in/graph.rvg" -o "$in/graph.rvg" --format dot --force
hostile export-existing       1 "already exists; give --force" "$R" export-graph "$trace" -o "$in/existing.graphml" --steps 1
hostile export-dev-full       2 "No space left on device"  "$R" export-graph "$trace" -o /dev/full --format dot --steps 1
hostile export-size-limit     2 "File too large (the existing file is unchanged)"  bash -c 'cp "$W/in/existing.graphml" "$W/scratch/old.graphml"; ulimit -f 8; "$R" export-graph "$T" -o "$W/scratch/old.graphml" --force; s=$?; cmp -s "$W/scratch/old.graphml" "$W/in/existing.graphml" || exit 9; exit $s'
hostile export-stdout         0 "<graphml"  "$R" export-graph "$trace" -o - --format graphml --steps 1
if [ "$(id -u)" = 0 ] && mkdir -p "$work/scratch/tiny" && mount -t tmpfs -o size=32k tmpfs "$work/scratch/tiny" 2>/dev/null; then
    hostile import-full-disk  2 "No space left on device" bash -c 'printf old >"$W/scratch/tiny/g.rvg"; "$R" import "$T" -o "$W/scratch/tiny/g.rvg" --force; s=$?; [ "$(cat "$W/scratch/tiny/g.rvg")" = old ] || exit 9; [ "$(ls -A "$W/scratch/tiny")" = g.rvg ] || exit 8; exit $s'
    hostile export-full-disk  2 "No space left on device" bash -c 'printf old >"$W/scratch/tiny/g.dot"; "$R" export-graph "$T" -o "$W/scratch/tiny/g.dot" --force; s=$?; [ "$(cat "$W/scratch/tiny/g.dot")" = old ] || exit 9; exit $s'
    umount "$work/scratch/tiny"
else
    skip import-full-disk "needs root to mount a tiny tmpfs"; skip export-full-disk "needs root"
fi

# ---- parameters and plugins -------------------------------------------------

hostile scale-1e300           1 "factor=1e300 would make task"      "$R" whatif "$trace" --opt scale:factor=1e300
hostile repeated-parameter    1 "parameter 'factor' is given twice" "$R" whatif "$trace" --opt scale:factor=2,factor=3
hostile amp-1e-300            1 "compute_speedup=1e-300 would make" "$R" whatif "$trace" --opt amp:compute_speedup=1e-300
hostile ddp-world-1e300       1 "\"1e300\" is out of range"         "$R" whatif "$trace" --opt ddp:world=1e300
hostile ddp-world-zero        1 "need 1 <= world"                   "$R" whatif "$trace" --opt ddp:world=0
hostile network-tiny-factor   1 "bandwidth_factor=1e-300"           "$R" whatif "$trace" --opt network:bandwidth_factor=1e-300
hostile network-huge-latency  1 "is out of range (a duration"       "$R" whatif "$trace" --opt network:added_latency=1e9s
hostile bare-so-name          1 "give its path (./scale.so)"        "$R" whatif "$trace" --opt scale.so
hostile missing-plugin-path   1 "no such file"                      "$R" whatif "$trace" --opt ./missing.so
hostile plugin-path-folder    1 "not a regular file"                "$R" whatif "$trace" --opt "$plugins/"
hostile unknown-plugin        1 "no optimization named 'nosuch'"    "$R" whatif "$trace" --opt nosuch
hostile fails-silently        3 "failed without saying why"         "$R" whatif "$trace" --opt "$plugins/hostile_fail_silently.so"
hostile success-with-error    3 "reported success but set an error" "$R" whatif "$trace" --opt "$plugins/hostile_succeed_with_error.so"
hostile edge-to-nowhere       3 "the plugin left the graph broken"  "$R" whatif "$trace" --opt "$plugins/hostile_bad_edge.so"
hostile plugin-cycle          3 "has a cycle"                       "$R" whatif "$trace" --opt "$plugins/hostile_cycle.so"
hostile negative-duration     3 "has a duration of -5 ns"           "$R" whatif "$trace" --opt "$plugins/hostile_negative_duration.so"
hostile huge-duration         3 "9223372036854775807 ns"            "$R" whatif "$trace" --opt "$plugins/hostile_huge_duration.so"
hostile unknown-kind          3 "has an unknown kind (200)"         "$R" whatif "$trace" --opt "$plugins/hostile_bad_kind.so:task=5"
hostile unknown-resource      3 "which does not exist"              "$R" whatif "$trace" --opt "$plugins/hostile_bad_resource.so"
hostile wrong-abi             3 "built for plugin ABI"              "$R" whatif "$trace" --opt "$plugins/hostile_wrong_abi.so"
hostile not-a-plugin          3 "not a reverie plugin"              "$R" whatif "$trace" --opt "$plugins/hostile_not_a_plugin.so"
hostile escaped-plugin-text   0 'note with \x1b]0;pwned'            "$R" whatif "$trace" --opt "$plugins/hostile_escapes.so"
# Listing must not load a .so that is not a plugin (its constructor would
# leave the marker file); it says on stderr what it skipped.
hostile listing-runs-nothing  0 "hostile\\x1b[31m"  bash -c 'REVERIE_PLUGIN_PATH="$P" REVERIE_HOSTILE_MARKER="$W/scratch/marker" "$R" plugins 2>"$W/scratch/skipped"; s=$?; test ! -e "$W/scratch/marker" || exit 9; grep -q "hostile_not_a_plugin.so: not loaded" "$W/scratch/skipped" || exit 8; exit $s'

# ---- options ----------------------------------------------------------------

hostile max-events-not-number 1 "--max-events abc: expected"  "$R" info "$trace" --max-events abc
hostile max-events-zero       1 "--max-events 0: expected"    "$R" info "$trace" --max-events 0
hostile max-bytes-huge        1 "--max-bytes 1e300: expected" "$R" info "$trace" --max-bytes 1e300
hostile read-timeout-negative 1 "--read-timeout -1: expected" "$R" info "$trace" --read-timeout -1
hostile unknown-option        1 "Unknown option"              "$R" info "$trace" --no-such-option
# GLib reads -n5 as -n followed by the next argument: the line says how to write it
hostile attached-short-value  1 "takes its value as the next argument: -n 5, not -n5" "$R" query "$trace" -n5 kind=gpu
hostile attached-output-name  1 "-o $W/scratch/x.txt, not -o$W/scratch/x.txt" "$R" simulate "$trace" -o"$W/scratch/x.txt"

echo "$cases hostile cases run, $skipped skipped, $failures failures"
[ "$failures" -eq 0 ]
