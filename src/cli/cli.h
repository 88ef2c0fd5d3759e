/*
 * cli.h - what the subcommands (one file each) share: loading an input,
 * option parsing with GOptionContext, and reporting errors.
 */
#ifndef REVERIE_CLI_H
#define REVERIE_CLI_H

#include <glib.h>
#include <stdio.h>
#include "reverie/error.h"
#include "reverie/graph.h"
#include "reverie/sim.h"
#include "reverie/plugin.h"

typedef struct {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} rv_command;

int rv_cmd_info(int argc, char **argv);
int rv_cmd_simulate(int argc, char **argv);
int rv_cmd_import(int argc, char **argv);
int rv_cmd_query(int argc, char **argv);
int rv_cmd_export_graph(int argc, char **argv);
int rv_cmd_whatif(int argc, char **argv);
int rv_cmd_plugins(int argc, char **argv);
int rv_cmd_validate(int argc, char **argv);
int rv_cmd_breakdown(int argc, char **argv);
int rv_cmd_critical_path(int argc, char **argv);
int rv_cmd_sweep(int argc, char **argv);

/* Load a trace or a saved graph, told apart by content.  Progress goes to
 * stderr only when it is a terminal. */
rv_graph *rv_cli_load(const char *path, GError **error);

/* Print, one line each on stderr, what the timing model had to assume about
 * the graph (explain.h's rv_timing_notes); nothing when there is nothing. */
void rv_cli_print_notes(const rv_graph *graph);

/* One stderr note when a replay had to drop the launch-queue rule (sim.h). */
void rv_cli_note_replay(const rv_graph *graph, const rv_sim_result *sim);

/* Parse options; on failure prints one line and returns FALSE with *status set. */
gboolean rv_cli_parse(GOptionContext *context, int *argc, char ***argv, int *status);
/* Print "reverie: message" and return the exit status for the error. */
int rv_cli_fail(GError *error);
/* Print a usage error and return exit status 1. */
int rv_cli_usage(const char *command, const char *message);

/* Print a JSON document to stdout (indented, 12 significant digits) and
 * release it.  Takes jansson's json_t as void so this header needs no jansson. */
void rv_cli_print_json(void *root);
/* The same with more digits, for absolute trace timestamps (16 digits:
 * microseconds since the epoch to the microsecond). */
void rv_cli_print_json_digits(void *root, int digits);

/* A layer or operator name for a table column: the autograd engine's
 * "autograd::engine::evaluate_function: " prefix dropped (the rest,
 * "ConvolutionBackward0", says what it is). */
const char *rv_cli_short_name(const char *name);

/* ---- optimizations (opts.c), shared by whatif and sweep ---- */

/* One --opt: a plugin and the parameters parsed against its table. */
typedef struct {
    const rv_plugin *plugin;
    rv_params *params;
    char *spec;       /* NAME[:k=v,...] as given */
    GString *notes;   /* what apply() reported; NULL before */
    uint64_t changed_tasks;  /* tasks it inserted, removed or retimed, when counted (0: the baseline) */
} rv_cli_opt;

/* Loaded plugins by name, each loaded once (free with g_hash_table_destroy).
 * Lookups of names already loaded may come from several threads. */
GHashTable *rv_cli_plugins_new(void);
const rv_plugin *rv_cli_plugin(GHashTable *plugins, const char *name, GError **error);
/* The NAME of "NAME[:k=v,...]" (g_free). */
char *rv_cli_spec_name(const char *spec);
/* Parse "NAME[:k=v,...]", loading NAME into `plugins` if it is new. */
rv_cli_opt *rv_cli_opt_parse(GHashTable *plugins, const char *spec, GError **error);
void rv_cli_opt_free(gpointer opt);
/* Parse every spec, in order, before any work starts: a GPtrArray of
 * rv_cli_opt (g_ptr_array_unref before destroying `plugins`), or NULL with
 * the error of the first bad spec. */
GPtrArray *rv_cli_opts_prepare(GHashTable *plugins, char **specs, GError **error);
/* Apply the opts in order; the last policy any of them returns is kept in
 * *last_policy (release it with rv_cli_policy_clear, before the plugins are
 * unloaded: its data may live in one).  A failure is prefixed with the
 * plugin's name.  With count_changes, each opt's changed_tasks is counted
 * and an opt that changed nothing gets a note on stderr, so that no
 * prediction silently repeats the baseline; a sweep's thousands of
 * variants skip that. */
gboolean rv_cli_apply_opts(rv_graph *graph, GPtrArray *opts, gboolean count_changes, rv_plugin_output *last_policy,
                           GError **error);
void rv_cli_policy_clear(rv_plugin_output *policy);
/* Replay and measure the steps (report.h's rv_step_time; g_array_unref);
 * `structure` (sim.h) may be NULL.  A replay that had to drop the
 * launch-queue rule says so once per run on stderr. */
GArray *rv_cli_replay_steps(const rv_graph *graph, const rv_sim_structure *structure, const rv_policy *policy,
                            GError **error);
/* Apply the opts (counting changes) to `graph` and replay under the last
 * policy: the predicted step times, or NULL with an error. */
GArray *rv_cli_predict(rv_graph *graph, GPtrArray *opts, GError **error);

/* "12.345 ms" style formatting with units, for tables. */
void rv_cli_format_ms(char *buffer, gsize size, int64_t ns);

/* One CSV row on stdout: fields quoted where they hold a comma, a quote or
 * a line break (RFC 4180). */
void rv_cli_csv_row(const char *const *fields, int count);
/* A number for a CSV or JSON field: microseconds with 3 decimals. */
char *rv_cli_us_text(int64_t ns);

#endif
