/*
 * plot.h - step times and their breakdown as an SVG picture (cairo).
 *
 * Top panel: for every step a group of bars, one per run (recorded,
 * baseline, predicted), each as tall as the step time and stacked into
 * breakdown.h's CPU-only / GPU-only / overlap / idle, with the time written
 * above it.  Bottom panel: one bar per run for the mean step, stacked by
 * phase.  Made for a what-if at a glance: where the predicted time went
 * against the baseline.
 *
 * A sweep's curve: the predicted time of each variant of a one-parameter
 * sweep, in the order of its values, against the baseline.
 */
#ifndef REVERIE_PLOT_H
#define REVERIE_PLOT_H

#include <glib.h>
#include "reverie/breakdown.h"
#include "reverie/graph.h"

G_BEGIN_DECLS

typedef struct {
    const char *label;                 /* "recorded", "baseline", "predicted" */
    const rv_breakdown *breakdown;     /* of that run's steps */
} rv_plot_run;

/* Draw the runs (all with the same steps, those of graph) to an SVG file.
 * Fails (RV_ERROR_INPUT) when the file cannot be written. */
gboolean rv_plot_write_svg(const char *path, const char *title, const rv_graph *graph, const rv_plot_run *runs,
                           guint count, GError **error);

/* One variant of a sweep: its parameter value as written ("25Gbps") and
 * its predicted time; ok is FALSE for a variant that failed (no point). */
typedef struct {
    const char *label;
    double predicted_ms;
    gboolean ok;
} rv_plot_point;

/* Draw the points as a curve, evenly spaced along x in the order given
 * (a lo..hi/N sweep is linear, a "log" one log-scaled), with the baseline
 * as a dashed line.  Fails (RV_ERROR_INPUT) when the file cannot be
 * written or no point is ok. */
gboolean rv_plot_curve_svg(const char *path, const char *title, const char *x_label, const rv_plot_point *points,
                           guint count, double baseline_ms, GError **error);

G_END_DECLS

#endif
