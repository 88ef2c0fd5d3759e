/*
 * runs.h - what the reports compare side by side: the recording, the
 * baseline replay and, after optimizations, the prediction of one graph.
 *
 * The baseline graph is the caller's and is only read; the optimizations
 * transform a copy, so each run's timeline is read against its own graph.
 * Breakdowns (breakdown.h), critical paths (critical_path.h), timelines
 * (timeline.h) and plots (plot.h) of the runs are made here, the same for
 * the command line and the Python package.
 */
#ifndef REVERIE_RUNS_H
#define REVERIE_RUNS_H

#include <glib.h>
#include "reverie/breakdown.h"
#include "reverie/graph.h"
#include "reverie/sim.h"

G_BEGIN_DECLS

typedef struct {
    const rv_graph *baseline;    /* the caller's */
    rv_sim_result recorded_sim;  /* the recording, as a result (report.h) */
    rv_sim_result baseline_sim;
    rv_graph *predicted;         /* after the optimizations; NULL without any */
    rv_sim_result predicted_sim;
    GString *notes;              /* what the optimizations said */
} rv_runs;

/* One run: a label ("recorded", "baseline", "predicted"), its graph and timeline. */
typedef struct {
    const char *label;
    const rv_graph *graph;
    const rv_sim_result *sim;
    gboolean recorded;           /* sim is the recording: steps by the recorded step rule */
} rv_run;

/* Read the recording of `baseline`, replay it, and with opts (optimize.h's
 * rv_opt list, or NULL) predict them applied in order to a copy.  On
 * failure the runs hold what was done; clear them either way (before the
 * opts' plugin table is destroyed). */
gboolean rv_runs_replay(rv_runs *runs, const rv_graph *baseline, GPtrArray *opts, GError **error);
void rv_runs_clear(rv_runs *runs);

/* The runs in order (recorded if asked, baseline, predicted if any) into
 * list (room for 3); returns how many. */
guint rv_runs_list(const rv_runs *runs, gboolean with_recording, rv_run *list);

/* A run's breakdown over its own step windows (rv_breakdown_free). */
rv_breakdown *rv_run_breakdown(const rv_run *run);

/* Draw the runs' breakdowns to an SVG file, titled with the graph's name. */
gboolean rv_runs_plot(const char *path, const rv_graph *graph, const rv_run *runs, rv_breakdown *const *breakdowns,
                      guint count, GError **error);

/* Write the runs (at most 3) as one Chrome-trace timeline, each with its
 * critical path marked and, beside one other run, what differs from it
 * marked. */
gboolean rv_runs_write_timeline(const char *path, const rv_run *runs, guint count, GError **error);

G_END_DECLS

#endif
