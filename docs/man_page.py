#!/usr/bin/env python3
"""man_page.py REVERIE VERSION OUTPUT - write reverie(1) with help2man.

The man page is generated from the program's own help: help2man reads
`reverie --help` for the synopsis and the command list, and this script
adds each command's --help-all, the input limits, the exit status, the
environment and the files.  So it cannot say what the program does not.
docs/reverie.1 is its output (regenerate it with `meson compile -C build
man-page && cp build/docs/reverie.1 docs/`); the docs test checks that
they agree."""

import os
import subprocess
import sys
import tempfile


def roff(line):
    """A line of preformatted text, safe for roff."""
    line = line.replace("\\", "\\e")
    if line.startswith((".", "'")):
        line = "\\&" + line
    return line


def commands(reverie):
    text = subprocess.run([reverie, "--help"], capture_output=True, text=True, check=True).stdout
    names, listing = [], False
    for line in text.splitlines():
        if line.startswith("commands:"):
            listing = True
        elif listing and line.startswith("  ") and line.strip():
            names.append(line.split()[0])
        elif listing and not line.strip():
            break
    return names


def command_section(reverie, name):
    text = subprocess.run([reverie, name, "--help-all"], capture_output=True, text=True, check=True).stdout
    lines = text.splitlines()
    # "Usage:" then "  NAME [OPTION?] ARGS - what it does"
    usage = lines[1].strip() if len(lines) > 1 else name
    synopsis, _, summary = usage.partition(" - ")
    synopsis = synopsis.replace("[OPTION?]", "[OPTION...]", 1)
    out = [f'.SS "reverie {roff(synopsis)}"']
    if summary:
        out.append(roff(summary[:1].upper() + summary[1:]) + ".")
    out.append(".nf")
    skipping = False
    for line in lines[2:]:
        # the help options are the same everywhere, the input limits are INPUT LIMITS
        if line.startswith(("Help Options:", "Limits on what is read")):
            skipping = True
            continue
        if skipping and not line.strip():
            skipping = False
            continue
        if not skipping:
            out.append(roff(line))
    while out and not out[-1].strip():
        out.pop()
    while len(out) > 3 and not out[3].strip():
        del out[3]
    out.append(".fi")
    return "\n".join(out)


def input_limits(reverie):
    """The input limits every command that reads a trace takes."""
    text = subprocess.run([reverie, "simulate", "--help-input"], capture_output=True, text=True, check=True).stdout
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Limits on what is read"))
    body = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        body.append(roff(line))
    return "\n".join(["Every command that reads a trace or graph takes these options.", ".nf"] + body + [".fi"])


def include(reverie):
    sections = ["[COMMANDS]", "Each command's options, as `reverie COMMAND --help-all` prints them."]
    for name in commands(reverie):
        sections.append(command_section(reverie, name))
    sections += [
        "[INPUT LIMITS]",
        input_limits(reverie),
        "[EXIT STATUS]",
        ".TP\n0\nsuccess",
        ".TP\n1\nbad usage: an unknown command, option, optimization or parameter, or a value out of range",
        ".TP\n2\nbad input: a file that is not a trace or graph, or an output that cannot be written",
        ".TP\n3\nan optimization plugin failed or found nothing to act on",
        "[ENVIRONMENT]",
        ".TP\n.B REVERIE_PLUGIN_PATH\nFolders (separated by ':') searched for optimization plugins (NAME.so) "
        "before the build tree or the install folder.",
        ".TP\n.B REVERIE_GPU_CATALOGUE\nThe GPU catalogue to read instead of the installed gpus.json.",
        ".TP\n.B REVERIE_SWEEP_FULL_CHECKS\nSet: every variant of a sweep pays the full checks (the memory model's "
        "inputs compared with the baseline's, its own selection matched) instead of the shortcuts a variant that "
        "changes only durations takes; the rows are the same either way.",
        "[FILES]",
        ".TP\n.I $libdir/reverie/*.so\nThe optimization plugins.",
        ".TP\n.I $datadir/reverie/gpus.json\nThe GPU catalogue: each GPU's peaks, with their datasheets.",
        ".TP\n.I $datadir/reverie/metaflow/*.json\nThe metaflow plugin's bundled rules.",
        "[SEE ALSO]",
        "The documentation in the source tree's docs/ folder: docs/commands.md (every command and the JSON "
        "schemas), docs/plugin-reference.md (every optimization's parameters), docs/python.md (the Python "
        "package).",
    ]
    return "\n".join(sections) + "\n"


def main():
    reverie, version, output = sys.argv[1:4]
    with tempfile.NamedTemporaryFile("w", suffix=".h2m", delete=False) as file:
        file.write(include(reverie))
    try:
        page = subprocess.run(["help2man", "--no-info", f"--version-string={version}",
                               "--name=what-if performance simulator for deep-learning training",
                               f"--include={file.name}", reverie],
                              capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(file.name)
    with open(output, "w") as out:
        out.write(page)


if __name__ == "__main__":
    main()
