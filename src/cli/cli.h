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
int rv_cmd_sweep(int argc, char **argv);

/* Load a trace or a saved graph, told apart by content.  Progress goes to
 * stderr only when it is a terminal. */
rv_graph *rv_cli_load(const char *path, GError **error);

/* Print, one line each on stderr, what the timing model had to assume about
 * the graph (explain.h's rv_timing_notes); nothing when there is nothing. */
void rv_cli_print_notes(const rv_graph *graph);

/* Parse options; on failure prints one line and returns FALSE with *status set. */
gboolean rv_cli_parse(GOptionContext *context, int *argc, char ***argv, int *status);
/* Print "reverie: message" and return the exit status for the error. */
int rv_cli_fail(GError *error);
/* Print a usage error and return exit status 1. */
int rv_cli_usage(const char *command, const char *message);

/* Print a JSON document to stdout (indented, 12 significant digits) and
 * release it.  Takes jansson's json_t as void so this header needs no jansson. */
void rv_cli_print_json(void *root);

/* ---- optimizations (opts.c), shared by whatif and sweep ---- */

/* One --opt: a plugin and the parameters parsed against its table. */
typedef struct {
    const rv_plugin *plugin;
    rv_params *params;
    char *spec;       /* NAME[:k=v,...] as given */
    GString *notes;   /* what apply() reported; NULL before */
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
/* Apply the opts in order; the last policy any of them returns is kept in
 * *last_policy (release it with rv_cli_policy_clear).  A failure is
 * prefixed with the plugin's name. */
gboolean rv_cli_apply_opts(rv_graph *graph, GPtrArray *opts, rv_plugin_output *last_policy, GError **error);
void rv_cli_policy_clear(rv_plugin_output *policy);
/* Replay and measure the steps (report.h's rv_step_time; g_array_unref);
 * `structure` (sim.h) may be NULL. */
GArray *rv_cli_replay_steps(const rv_graph *graph, const rv_sim_structure *structure, const rv_policy *policy,
                            GError **error);

/* "12.345 ms" style formatting with units, for tables. */
void rv_cli_format_ms(char *buffer, gsize size, int64_t ns);

#endif
