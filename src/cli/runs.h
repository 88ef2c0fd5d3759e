/*
 * runs.h - the commands that report on the recording, the baseline replay
 * and the prediction of one input side by side (reverie/runs.h).
 */
#ifndef REVERIE_CLI_RUNS_H
#define REVERIE_CLI_RUNS_H

#include "cli.h"
#include "reverie/breakdown.h"
#include "reverie/diff.h"
#include "reverie/explain.h"
#include "reverie/report.h"
#include "reverie/runs.h"
#include "reverie/sim.h"

/* What breakdown and critical-path do once their options are parsed:
 * check for one input and not both --json and --csv, load and replay the
 * runs, report them, clear them.  Returns the exit status. */
typedef int (*rv_cli_report_fn)(const rv_runs *runs, const void *options);
int rv_cli_report_runs(const char *command, int argc, char **argv, char **specs, gboolean as_json, gboolean as_csv,
                       rv_cli_report_fn report, const void *options);

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
void rv_cli_print_simulate_csv(const rv_graph *graph, const GArray *steps, const rv_explanation *x);

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
