/*
 * opts.c - what the commands add to optimize.h: a note on stderr for an
 * optimization that changed nothing, and for a replay that had to drop the
 * launch-queue rule.
 */
#include "cli.h"
#include "reverie/escape.h"
#include "reverie/report.h"
#include <stdio.h>

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
    for (guint i = 0; i < lines->len; i++) {
        char *shown = rv_escape_text(g_ptr_array_index(lines, i));
        fprintf(stderr, "reverie: note: %s\n", shown);
        g_free(shown);
    }
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
