#!/bin/sh
# cli_query.sh - command-line tests for `reverie query` and `reverie
# export-graph`: exit codes for bad selections and options, the text and JSON
# output, and GraphML / DOT files that standard parsers accept.
#
# usage: cli_query.sh REVERIE SOURCE_ROOT
# Uses two traces the project ships: traces/small_ddp.json.gz and a real
# ResNet-50 profile; exits 77 (skipped) if one is missing.
set -u

reverie=$1
root=$2
trace="$root/traces/small_ddp.json.gz"
real="$root/traces/hta_resnet50_v100.json.gz"
for needed in "$trace" "$real"; do
    if [ ! -f "$needed" ]; then
        echo "SKIP: $needed is missing"
        exit 77
    fi
done
. "$(dirname "$0")/cli_lib.sh"


[ -f "$trace" ] || { echo "missing $trace" >&2; exit 1; }

# --- bad usage: exit 1 with one line naming the problem -------------------
expect_status 1 "$reverie" query "$trace" knd=kernel
expect_in "$work/err" 'unknown selection key "knd"'
expect_status 1 "$reverie" query "$trace" kind=kernel phase=bakward
expect_in "$work/err" 'phase=bakward: unknown phase "bakward"'
expect_status 1 "$reverie" query "$trace" step=3..1
expect_in "$work/err" 'empty step range'
expect_status 1 "$reverie" query "$trace" kind=kernel --group-by colour
expect_in "$work/err" 'unknown --group-by "colour"'
expect_status 1 "$reverie" query
expect_status 1 "$reverie" export-graph "$trace" -o "$work/g.png"
expect_in "$work/err" '.graphml, .dot or .gv'
expect_status 1 "$reverie" export-graph "$trace"
expect_status 1 "$reverie" export-graph "$trace" -o "$work/g.dot" --select kind=kernal
expect_in "$work/err" '"kernal"'
expect_status 2 "$reverie" query "$work/does-not-exist.json" kind=kernel

# --- query: totals, task list, groups, JSON ------------------------------
expect_status 0 "$reverie" query "$trace" kind=kernel phase=backward
expect_in "$work/out" 'selection: kind=kernel phase=backward'
expect_in "$work/out" 'matched: '
expect_status 0 "$reverie" query "$trace" "kind=kernel phase=backward" --json
python3 - "$work/out" <<'EOF' || fail "query --json"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["selection"] == "kind=kernel phase=backward", d["selection"]
assert d["count"] > 0 and d["total_us"] > 0
assert all(t["kind"] == "kernel" and t["phase"] == "backward" for t in d["tasks"])
assert len(d["tasks"]) == min(20, d["count"])
EOF
expect_status 0 "$reverie" query "$trace" kind=kernel --group-by phase --json --limit 0
python3 - "$work/out" <<'EOF' || fail "query --group-by --json"
import json, sys
d = json.load(open(sys.argv[1]))
groups = d["groups"]
assert sum(g["count"] for g in groups) == d["count"], "groups do not add up"
assert abs(sum(g["total_us"] for g in groups) - d["total_us"]) < 1e-3 * max(1, d["total_us"])
assert [g["total_us"] for g in groups] == sorted((g["total_us"] for g in groups), reverse=True)
EOF
expect_status 0 "$reverie" query "$trace" kind=gpu --group-by kind
expect_in "$work/out" 'share'

# --- export-graph: GraphML and DOT ------------------------------------------
expect_status 0 "$reverie" export-graph "$trace" -o "$work/g.graphml" --steps 1
python3 - "$work/g.graphml" <<'EOF' || fail "GraphML does not parse"
import sys, xml.dom.minidom
d = xml.dom.minidom.parse(sys.argv[1])
keys = {k.getAttribute("attr.name") for k in d.getElementsByTagName("key")}
for want in ("name", "kind", "phase", "layer", "resource", "duration_us", "step"):
    assert want in keys, want
assert len(d.getElementsByTagName("node")) > 10
assert len(d.getElementsByTagName("edge")) > 10
EOF
expect_status 0 "$reverie" export-graph "$trace" -o "$work/g.dot" --select kind=gpu
head -c 200 "$work/g.dot" | grep -v '^/\*' | head -n 1 | grep -q '^digraph' || fail "DOT does not start with digraph"
expect_status 0 "$reverie" export-graph "$trace" -o - --format dot --select "kind=kernel" phase=backward
expect_in "$work/out" 'digraph'
expect_in "$work/out" 'kind=kernel'

# --- a real trace ---------------------------------------------------------
expect_status 0 "$reverie" query "$real" kind=kernel phase=backward --group-by layer
expect_in "$work/out" 'ConvolutionBackward'

# --- CSV: the same rows as JSON -------------------------------------------
expect_status 0 "$reverie" query "$trace" kind=kernel --group-by name --csv -n 0
cp "$work/out" "$work/groups.csv"
expect_status 0 "$reverie" query "$trace" kind=kernel --group-by name --json -n 0
python3 - "$work/groups.csv" "$work/out" <<'EOF' || fail "query --csv groups differ from --json"
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
groups = json.load(open(sys.argv[2]))["groups"]
assert [r["name"] for r in rows] == [g["key"] for g in groups], "keys"
assert all(int(r["count"]) == g["count"] and abs(float(r["total_us"]) - g["total_us"]) < 1e-3
           for r, g in zip(rows, groups)), "counts or totals"
EOF
expect_status 0 "$reverie" query "$trace" kind=kernel --csv -n 3
head -1 "$work/out" | grep -qx 'id,kind,phase,step,duration_us,resource,layer,op,name' || fail "query --csv header"
[ "$(wc -l < "$work/out")" -eq 4 ] || fail "query --csv -n 3: expected 3 rows"
expect_status 1 "$reverie" query "$trace" kind=kernel --csv --json

# --- plugins --csv: one row per parameter ---------------------------------
expect_status 0 "$reverie" plugins --csv
cp "$work/out" "$work/plugins.csv"
expect_status 0 "$reverie" plugins --json
python3 - "$work/plugins.csv" "$work/out" <<'EOF' || fail "plugins --csv differs from --json"
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
plugins = json.load(open(sys.argv[2]))
want = sum(max(1, len(p["params"])) for p in plugins)
assert len(rows) == want, (len(rows), want)
assert {r["plugin"] for r in rows} == {p["name"] for p in plugins}
# every shipped plugin declares its effects: a place in the order and what it touches
for p in plugins:
    e = p["effects"]
    assert e is not None and 100 <= e["order"] < 800 and e["stage"], p["name"]
    assert any(e[w] for w in ("scales", "reprices", "rewrites")), p["name"]
EOF

# --- info --csv and validate --csv: the JSON's scalars, one row each --------
csv_matches_json() { # CSV JSON WHAT
    python3 - "$1" "$2" <<'EOF' || fail "$3 --csv differs from --json"
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
def flat(value, path=""):
    if isinstance(value, dict):
        for key, member in value.items():
            yield from flat(member, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for i, member in enumerate(value):
            yield from flat(member, f"{path}[{i}]")
    else:
        yield path, value
want = list(flat(json.load(open(sys.argv[2]))))
assert [r["field"] for r in rows] == [f for f, _ in want], "fields differ"
for row, (field, value) in zip(rows, want):
    if isinstance(value, str):
        assert row["value"] == value, (field, row["value"], value)
    elif isinstance(value, bool) or value is None:
        assert row["value"] == ("" if value is None else str(value).lower()), field
    else:
        assert abs(float(row["value"]) - value) <= 1e-9 * max(1.0, abs(value)), (field, row["value"], value)
EOF
}
expect_status 0 "$reverie" info "$real" --csv
cp "$work/out" "$work/info.csv"
expect_status 0 "$reverie" info "$real" --json
csv_matches_json "$work/info.csv" "$work/out" "info"
expect_status 1 "$reverie" info "$real" --csv --json
expect_status 0 "$reverie" validate "$trace" "$trace" --opt scale:factor=0.5 --csv
cp "$work/out" "$work/validate.csv"
expect_status 0 "$reverie" validate "$trace" "$trace" --opt scale:factor=0.5 --json
csv_matches_json "$work/validate.csv" "$work/out" "validate"
expect_status 1 "$reverie" validate "$trace" "$trace" --csv --json

if [ "$failures" -ne 0 ]; then
    echo "$failures failure(s)" >&2
    exit 1
fi
echo "all cli_query checks passed"
