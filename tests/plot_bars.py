#!/usr/bin/env python3
"""plot_bars.py SVG JSON RUN_KEY... - the step bars of a --plot agree with
the --json of the same command.

reverie's plots are cairo SVG: each step bar is stacked filled rectangles
(its breakdown) inside one outlined rectangle from the panel's base (y =
330).  The outlines, left to right, are the steps' groups in order, each
group one bar per run.  Checked: one bar per step and run; every bar's
height in pixels over its JSON value is the same scale (to half a pixel);
the stacked parts fill their bar exactly (nothing short of its value).

RUN_KEY names the JSON step fields drawn, in bar order within a group
(simulate: recorded_us simulated_us; whatif: baseline_us predicted_us)."""

import json
import re
import sys

BASE = 330.0  # plot.c: the step panel's y (value 0)
RECT = re.compile(r'<path style="([^"]*)" d="M ([-0-9.]+) ([-0-9.]+) L ([-0-9.]+) ([-0-9.]+) '
                  r'L ([-0-9.]+) ([-0-9.]+) L ([-0-9.]+) ([-0-9.]+) Z')


def rectangles(svg):
    """(style, left, top, right, bottom) of every axis-aligned rectangle path."""
    for match in RECT.finditer(svg):
        style = match.group(1)
        xs = [float(match.group(i)) for i in (2, 4, 6, 8)]
        ys = [float(match.group(i)) for i in (3, 5, 7, 9)]
        yield style, min(xs), min(ys), max(xs), max(ys)


def main():
    svg = open(sys.argv[1]).read()
    document = json.load(open(sys.argv[2]))
    keys = sys.argv[3:]
    failures = []
    outlines = sorted((left, right, top) for style, left, top, right, bottom in rectangles(svg)
                      if "stroke-width:0.6" in style and "fill:none" in style and abs(bottom - BASE) < 0.01)
    values = [step[key] / 1e3 for step in document["steps"] for key in keys]
    if len(outlines) != len(values):
        failures.append(f"{len(outlines)} bars for {len(values)} values ({len(document['steps'])} steps x {keys})")
    else:
        scales = [(BASE - top) / value for (left, right, top), value in zip(outlines, values) if value > 0]
        scale = max(scales)
        for (left, right, top), value in zip(outlines, values):
            if abs((BASE - top) - value * scale) > 0.5:
                failures.append(f"the bar at x={left} is {BASE - top:.1f} px for {value:.3f} ms "
                                f"(the others: {scale:.3f} px per ms)")
        fills = [(left, top, bottom) for style, left, top, right, bottom in rectangles(svg)
                 if "stroke:none" in style and "fill:rgb" in style and bottom <= BASE + 0.01]
        for left, right, top in outlines:
            parts = sum(bottom - part_top for x, part_top, bottom in fills if abs(x - left) < 0.01 and part_top >= top - 0.01)
            if abs(parts - (BASE - top)) > 0.5:
                failures.append(f"the bar at x={left}: its parts fill {parts:.1f} of {BASE - top:.1f} px")
    for failure in failures:
        print("FAIL: plot:", failure, file=sys.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
