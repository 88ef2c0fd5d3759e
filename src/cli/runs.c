/*
 * runs.c - what breakdown and critical-path share (runs.h): one input
 * loaded, its --opt specs checked before the (slow) load as whatif does,
 * the runs replayed (reverie/runs.h), reported and cleared.
 */
#include "runs.h"
#include "reverie/optimize.h"

static void note_runs(const rv_runs *runs, GPtrArray *opts)
{
    rv_cli_note_replay(runs->baseline, &runs->baseline_sim);
    if (runs->predicted) rv_cli_note_replay(runs->predicted, &runs->predicted_sim);
    if (opts) rv_cli_note_unchanged(opts);
}

int rv_cli_report_runs(const char *command, int argc, char **argv, char **specs, gboolean as_json, gboolean as_csv,
                       rv_cli_report_fn report, const void *options)
{
    if (argc != 2) return rv_cli_usage(command, "give exactly one trace or graph");
    if (as_json && as_csv) return rv_cli_usage(command, "give --json or --csv, not both");
    GError *error = NULL;
    GHashTable *plugins = rv_plugin_table_new();
    GPtrArray *opts = specs && specs[0] ? rv_opts_prepare(plugins, specs, &error) : NULL;
    rv_graph *graph = opts != NULL || !(specs && specs[0]) ? rv_cli_load(argv[1], &error) : NULL;
    if (graph) rv_cli_print_notes(graph);
    rv_runs runs = { 0 };
    int status;
    if (graph && rv_runs_replay(&runs, graph, opts, &error)) {
        note_runs(&runs, opts);
        status = report(&runs, options);
    } else {
        status = rv_cli_fail(error);
    }
    rv_runs_clear(&runs);
    rv_graph_free(graph);
    if (opts) g_ptr_array_unref(opts);
    g_hash_table_destroy(plugins); /* after the runs: a policy's code lives in its plugin */
    return status;
}
