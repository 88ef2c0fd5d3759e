#!/usr/bin/env python3
"""docs_examples.py SOURCE_DIR BUILD_DIR - every example in README.md and
docs/*.md runs from the source tree as a reader would run it.

An example is a line "$ COMMAND" inside a fenced block whose command uses
build/ (build/reverie, build/tests/gen/reverie-gentrace, an output under
build/).  Each runs with bash from SOURCE_DIR, build/ standing for
BUILD_DIR, in the order of its page (a page's later examples may use what
its earlier ones made); pages run side by side, each page that writes
under build/ in a build/ of its own, so that no page sees (or must
--force over) what another page wrote.  It must exit 0, unless
the page shows it failing: an error line ("reverie: ..." that is not a
note) right after it, or a comment "# exit status N" on it.  Afterwards the
source tree holds no new file outside build*/: examples write under build/
or a temporary folder, never beside the docs.

A few examples are skipped, each for the reason in SKIPPED (they take
minutes, or need what a fresh clone cannot give); the rest must take under
TIMEOUT seconds each.  Prints each page's time and the slowest examples.

The output a page shows under an example ("..." marks what it leaves
out) is compared with what the example prints: each example with a shown
line this build no longer prints is listed as STALE, with its first such
line, and counted.  That does not fail the test (outputs carry the
machine's timings, and a change to the model moves figures on many pages
at once); the list is what to refresh before a release."""

import concurrent.futures
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

TIMEOUT = 120
PROGRAMS = ["reverie", "tests/gen/reverie-gentrace"]
# the misbehaving plugins docs/hostile-input.md loads (tests/hostile_plugin.c)
PLUGINS = "tests/hostile_*.so"
# (page, a text of the command): why it does not run here
SKIPPED = {
    ("docs/hostile-input.md", "bomb.json.gz"): "the 22 MB gzip bomb takes 45 s and 3 GB (tests/bench/hostile.sh runs it)",
}
BUILD_WORD = re.compile(r"(?<![\w./-])build/")
EXIT_COMMENT = re.compile(r"#\s*exit status (\d+)")


def shown_output(lines, number):
    """The lines a page shows after the example on line `number` (1-based),
    up to the next example or the end of its block; "..." and blank lines
    (the page's abbreviations) left out."""
    shown = []
    for after in lines[number:]:
        if after.startswith(("$ ", "```")):
            break
        if after.strip() and after.strip() != "...":
            shown.append(after.rstrip())
    return shown


def examples(source):
    """(page, line number, command, expected status or None for 'not 0', the output the page shows)."""
    found = []
    for page in ["README.md"] + sorted(os.path.relpath(p, source) for p in glob.glob(os.path.join(source, "docs", "*.md"))):
        lines = open(os.path.join(source, page), encoding="utf-8").read().split("\n")
        fenced = False
        for number, line in enumerate(lines, 1):
            if line.startswith("```"):
                fenced = not fenced
                continue
            if not (fenced and line.startswith("$ ") and BUILD_WORD.search(line)):
                continue
            command = line[2:]
            status = 0
            comment = EXIT_COMMENT.search(command)
            if comment:
                status = int(comment.group(1))
            else:
                for after in lines[number:]:
                    if after.startswith(("$ ", "```")):
                        break
                    if after.startswith("reverie: ") and not after.startswith("reverie: note:"):
                        status = None
                        break
            found.append((page, number, command, status, shown_output(lines, number)))
    return found


def skip_reason(page, command):
    for (skipped_page, text), reason in SKIPPED.items():
        if page == skipped_page and text in command:
            return reason
    return None


def writes(command):
    """Does the example write under build/ (beyond running a program there)?"""
    return len(BUILD_WORD.findall(command)) > (1 if re.match(r"\(?[^ ]*build/", command.lstrip("(")) else 0)


def units(found):
    """Work that may run side by side: a writing page whole, else one example each."""
    pages = {}
    for item in found:
        pages.setdefault(item[0], []).append(item)
    work = []
    for page, items in pages.items():
        if any(writes(item[2]) for item in items):
            work.append((page, items))
        else:
            work += [(page, [item]) for item in items]
    return work


def run_unit(source, build, page, items):
    """run_examples, in a fresh build/ of its own when the unit writes."""
    if not any(writes(item[2]) for item in items):
        return run_examples(source, build, page, items)
    own = scratch_build(build)
    try:
        return run_examples(source, own, page, items)
    finally:
        shutil.rmtree(own)


def run_examples(source, build, page, items):
    """Run examples in order: (failures, [(seconds, where)], [stale])."""
    failures, times, stale = [], [], []
    for _, number, command, status, shown in items:
        where = f"{page}:{number}: $ {command}"
        reason = skip_reason(page, command)
        if reason:
            print(f"SKIP {where}\n     ({reason})", flush=True)
            continue
        started = time.monotonic()
        try:
            done = subprocess.run(["bash", "-c", BUILD_WORD.sub(build + "/", command)], cwd=source,
                                  capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)
            got = done.returncode
            error = done.stderr.strip().splitlines()[-1:] if done.stderr.strip() else []
            printed = {line.rstrip() for line in (done.stdout + done.stderr).replace(build + "/", "build/").splitlines()}
            missing = [line for line in shown if line not in printed]
            if missing:
                stale.append(f"{where[:150]}\n     {len(missing)} of {len(shown)} lines it shows differ, first: {missing[0][:150]}")
        except subprocess.TimeoutExpired:
            got, error = "timeout", [f"more than {TIMEOUT} s"]
        seconds = time.monotonic() - started
        times.append((seconds, where))
        if (status is None and got in (0, "timeout")) or (status is not None and got != status):
            want = "a failure" if status is None else f"exit {status}"
            failures.append(f"{where}\n     exit {got}, the page shows {want}: {' '.join(error)[:300]}")
    return failures, times, stale


def tree_files(source):
    """Files of the source tree outside build*/ and .git (relative paths)."""
    files = set()
    for top in os.listdir(source):
        if top.startswith("build") or top == ".git":
            continue
        path = os.path.join(source, top)
        if os.path.isfile(path):
            files.add(top)
        for folder, _, names in os.walk(path):
            files.update(os.path.relpath(os.path.join(folder, name), source) for name in names)
    return files


def scratch_build(build):
    """A temporary folder of links to the build folder's programs and
    test plugins (build may itself be such a folder: the links lead to
    the programs)."""
    folder = tempfile.mkdtemp(prefix="reverie-docs-")
    plugins = [os.path.relpath(p, build) for p in glob.glob(os.path.join(build, PLUGINS))]
    for program in PROGRAMS + plugins:
        os.makedirs(os.path.dirname(os.path.join(folder, program)), exist_ok=True)
        os.symlink(os.path.realpath(os.path.join(build, program)), os.path.join(folder, program))
    return folder


def main():
    source = os.path.abspath(sys.argv[1])
    build = scratch_build(os.path.abspath(sys.argv[2]))
    try:
        run(source, build)
    finally:
        shutil.rmtree(build)


def run(source, build):
    found = examples(source)
    before = tree_files(source)
    started = time.monotonic()
    failures, times, stale, by_page = [], [], [], {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        futures = {pool.submit(run_unit, source, build, page, items): page for page, items in units(found)}
        for future in concurrent.futures.as_completed(futures):
            unit_failures, unit_times, unit_stale = future.result()
            failures += unit_failures
            times += unit_times
            stale += unit_stale
            by_page.setdefault(futures[future], []).extend(t for t, _ in unit_times)
    for page, seconds in sorted(by_page.items()):
        print(f"{page}: {len(seconds)} examples, {sum(seconds):.1f} s", flush=True)
    left = sorted(tree_files(source) - before)
    if left:
        failures.append("examples left files in the source tree (write under build/): " + ", ".join(left[:10]))
    print(f"{len(times)} examples ran in {time.monotonic() - started:.1f} s; slowest:")
    for seconds, where in sorted(times, reverse=True)[:5]:
        print(f"  {seconds:6.1f} s  {where[:150]}")
    # Printed, not failed: outputs name the machine's timings and paths,
    # and a model change moves figures the pages quote; a maintainer
    # refreshes the examples this lists.
    for example in sorted(stale):
        print("STALE", example)
    print(f"{len(stale)} of {len(times)} examples show output that this build no longer prints")
    for failure in failures:
        print("FAIL", failure)
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
