#!/bin/bash
# python_install.sh SOURCE_DIR REVERIE - the README's Python install line
# in a fresh venv of Debian's python3 (system site packages, offline: pip
# may not reach any index), then the README's snippet: its amp speedup must
# be the command line's (`reverie whatif --opt amp --json`) to 0.1%.
# Run by .ci/run after the suite (pip builds the package: about 2 minutes).
set -euo pipefail
source=$(cd "${1:?usage: python_install.sh SOURCE_DIR REVERIE}" && pwd)
reverie=${2:?usage: python_install.sh SOURCE_DIR REVERIE}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# the README's lines: the one that makes the venv and installs, and the first python block
install=$(awk '/^```sh$/ { block = 1; next } /^```/ { block = 0 } block && /^python3 -m venv/' "$source/README.md")
[ -n "$install" ] || { echo "FAIL: no 'python3 -m venv' line in README.md" >&2; exit 1; }
awk '/^```python$/ { block = 1; next } /^```/ { if (block) exit; block = 0 } block' "$source/README.md" >"$work/snippet.py"
[ -s "$work/snippet.py" ] || { echo "FAIL: no python block in README.md" >&2; exit 1; }

venv="$work/venv"
(cd "$source" && PATH="/usr/bin:$PATH" bash -c "${install//\~\/.venvs\/reverie/$venv}") >"$work/pip.log" 2>&1 ||
    { tail -30 "$work/pip.log" >&2; echo "FAIL: the README's install line failed" >&2; exit 1; }

# the snippet, from the source tree as the README runs it, on the installed package
python_speedup=$(cd "$source" && "$venv/bin/python" "$work/snippet.py" | awk '{ print $1 }')
installed=$(cd "$work" && "$venv/bin/python" -c 'import reverie; print(reverie.__file__)')
case "$installed" in "$venv"/*) ;; *) echo "FAIL: imported $installed, not the venv's package" >&2; exit 1 ;; esac
cli_speedup=$(cd "$source" && "$reverie" whatif traces/hta_resnet50_v100.json.gz --opt amp --json 2>/dev/null |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["speedup"])')
python3 - "$python_speedup" "$cli_speedup" <<'CHECK'
import sys
python, cli = float(sys.argv[1]), float(sys.argv[2])
if abs(python - cli) > 0.001 * cli:
    sys.exit(f"FAIL: the package's amp speedup {python} is not the command line's {cli}")
print(f"python install: the README's snippet gives {python:.6f}x, the command line {cli:.6f}x")
CHECK
