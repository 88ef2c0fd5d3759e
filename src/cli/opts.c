/*
 * opts.c - what the commands add to optimize.h: a note on stderr for an
 * optimization that changed nothing, and for a replay that had to drop the
 * launch-queue rule; a graph loaded with its optimizations applied for the
 * commands that look at it rather than replay it.
 */
#include "cli.h"
#include "reverie/report.h"
#include <stdio.h>
#include <string.h>

gboolean rv_cli_apply_opts(rv_graph *graph, GPtrArray *opts, gboolean count_changes, rv_plugin_output *last_policy,
                           GError **error)
{
    gboolean ok = rv_opts_apply(graph, opts, count_changes, last_policy, error);
    rv_cli_note_unchanged(opts);
    return ok;
}

void rv_cli_note_unchanged(const GPtrArray *opts)
{
    GPtrArray *lines = rv_opts_unchanged(opts);
    for (guint i = 0; i < lines->len; i++) rv_cli_note("%s", (const char *)g_ptr_array_index(lines, i));
    g_ptr_array_unref(lines);
}

GArray *rv_cli_replay_steps(const rv_graph *graph, const rv_sim_structure *structure, const rv_policy *policy,
                            GError **error)
{
    gboolean launch_queue_ignored = FALSE;
    GArray *steps = rv_replay_steps(graph, structure, policy, &launch_queue_ignored, error);
    if (steps) rv_cli_note_launch_queue(graph, launch_queue_ignored);
    return steps;
}

gboolean rv_cli_load_optimized(const char *path, char **specs, rv_cli_optimized *out, GError **error)
{
    memset(out, 0, sizeof *out);
    out->plugins = rv_plugin_table_new();
    /* the specs are checked before the (slow) load */
    GPtrArray *opts = rv_opts_prepare(out->plugins, specs, error);
    if (opts == NULL) return FALSE;
    out->graph = rv_cli_load(path, error);
    rv_plugin_output policy = { 0 };
    gboolean ok = out->graph != NULL && rv_cli_apply_opts(out->graph, opts, opts->len > 0, &policy, error);
    rv_opts_policy_clear(&policy);
    g_ptr_array_unref(opts);
    return ok;
}

void rv_cli_optimized_clear(rv_cli_optimized *optimized)
{
    rv_graph_free(optimized->graph);
    if (optimized->plugins) g_hash_table_destroy(optimized->plugins); /* after the graph: plugins made its tasks */
    memset(optimized, 0, sizeof *optimized);
}
