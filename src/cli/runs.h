/*
 * runs.h - the recording, the baseline replay and the prediction of one
 * input, for the commands that report on each side by side.
 */
#ifndef REVERIE_CLI_RUNS_H
#define REVERIE_CLI_RUNS_H

#include "cli.h"
#include "reverie/breakdown.h"
#include "reverie/diff.h"
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

/* What breakdown and critical-path do once their options are parsed:
 * check for one input and not both --json and --csv, load and replay the
 * runs, report them, clear them.  Returns the exit status. */
typedef int (*rv_cli_report_fn)(const rv_cli_runs *runs, const void *options);
int rv_cli_report_runs(const char *command, int argc, char **argv, char **specs, gboolean as_json, gboolean as_csv,
                       rv_cli_report_fn report, const void *options);

/* A run's breakdown over its own step windows (rv_breakdown_free). */
rv_breakdown *rv_cli_breakdown_of(const rv_cli_run *run);

/* Draw the runs' breakdowns to an SVG file, titled with the input's name. */
gboolean rv_cli_plot(const char *path, const rv_graph *graph, const rv_cli_run *runs, rv_breakdown *const *breakdowns,
                     guint count, GError **error);

/* Write the runs as a Chrome-trace timeline, each with its critical path
 * marked and, beside another run, what differs from it marked. */
gboolean rv_cli_write_timeline(const char *path, const rv_cli_run *runs, guint count, GError **error);

/* ---- what simulate and whatif add: --timeline, --plot, --diff, --csv ---- */

typedef struct {
    char *timeline;   /* --timeline FILE */
    char *plot;       /* --plot FILE.svg */
    gboolean diff;    /* --diff (whatif) */
    gboolean csv;     /* --csv */
} rv_cli_extras;

/* Does the command need the baseline graph kept before optimizations? */
gboolean rv_cli_extras_need_baseline(const rv_cli_extras *extras);
void rv_cli_extras_clear(rv_cli_extras *extras);
/* Check --timeline and --plot before any slow work (rv_cli_check_output). */
gboolean rv_cli_extras_check(const rv_cli_extras *extras, GError **error);

/* simulate: the replay's timeline, and the recording against it in a plot.
 * Returns the exit status. */
int rv_cli_simulate_extras(const rv_graph *graph, const rv_cli_extras *extras);
/* simulate --csv: the per-step table. */
void rv_cli_print_simulate_csv(const rv_graph *graph, const GArray *steps);

/* whatif: baseline (kept before the optimizations) and prediction side by
 * side in the timeline and the plot; with --diff, *diff gets what changed
 * (rv_diff_free).  Both are replayed again here (a replay is cheap).
 * Returns the exit status. */
int rv_cli_whatif_extras(const rv_graph *baseline, const rv_graph *predicted, const rv_policy *policy,
                         const rv_cli_extras *extras, rv_diff **diff);
/* whatif --csv: the per-step table. */
void rv_cli_print_whatif_csv(const GArray *baseline_steps, const GArray *predicted_steps);
/* whatif --diff: as a table, or as a JSON object (json_t *, as void). */
void rv_cli_print_diff(const rv_diff *diff, int top);
void *rv_cli_diff_json(const rv_diff *diff);

#endif
