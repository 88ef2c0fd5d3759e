/*
 * runs.h - the recording, the baseline replay and the prediction of one
 * input, for the commands that report on each side by side.
 */
#ifndef REVERIE_CLI_RUNS_H
#define REVERIE_CLI_RUNS_H

#include "cli.h"
#include "reverie/breakdown.h"
#include "reverie/report.h"
#include "reverie/sim.h"

typedef struct {
    rv_graph *baseline;          /* as built */
    rv_sim_result recorded_sim;  /* the recording, as a result (report.h) */
    rv_sim_result baseline_sim;
    rv_graph *predicted;         /* after the optimizations; NULL without any */
    rv_sim_result predicted_sim;
    GString *notes;              /* what the optimizations said */
    rv_policy policy;            /* while the optimizations are applied */
    GDestroyNotify free_policy_data;
} rv_cli_runs;

/* One run: a label ("recorded", "baseline", "predicted"), its graph and timeline. */
typedef struct {
    const char *label;
    const rv_graph *graph;
    const rv_sim_result *sim;
    gboolean recorded;           /* sim is the recording: steps by the recorded step rule */
} rv_cli_run;

/* Load a trace or graph, replay it, and with specs (NULL-terminated
 * "NAME[:k=v,...]", or NULL) predict the optimizations applied in order.
 * On failure the runs hold what was done; clear them either way. */
gboolean rv_cli_runs_load(const char *path, char **specs, rv_cli_runs *runs, GError **error);
void rv_cli_runs_clear(rv_cli_runs *runs);

/* The runs in order (recorded if asked, baseline, predicted if any) into
 * list (room for 3); returns how many. */
guint rv_cli_runs_list(const rv_cli_runs *runs, gboolean with_recording, rv_cli_run *list);

/* A run's breakdown over its own step windows (rv_breakdown_free). */
rv_breakdown *rv_cli_breakdown_of(const rv_cli_run *run);

/* Draw the runs' breakdowns to an SVG file, titled with the input's name. */
gboolean rv_cli_plot(const char *path, const rv_graph *graph, const rv_cli_run *runs, rv_breakdown *const *breakdowns,
                     guint count, GError **error);

/* Write the runs as a Chrome-trace timeline, each with its critical path
 * marked and, beside another run, what differs from it marked. */
gboolean rv_cli_write_timeline(const char *path, const rv_cli_run *runs, guint count, GError **error);

#endif
