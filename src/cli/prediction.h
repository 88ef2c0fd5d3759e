/*
 * prediction.h - what `whatif` and `validate` share: parse --opt specs,
 * apply them to a graph in order, and replay the baseline and the
 * prediction into per-step times (not public; the CLI's own).
 */
#ifndef REVERIE_CLI_PREDICTION_H
#define REVERIE_CLI_PREDICTION_H

#include <glib.h>
#include "reverie/graph.h"
#include "reverie/plugin.h"

/* One --opt: the loaded plugin, its parsed parameters, and the notes its
 * apply() left. */
typedef struct {
    rv_loaded_plugin *plugin;
    rv_params *params;
    char *spec;
    GString *notes;
    uint64_t changed_tasks;  /* tasks it inserted, removed or retimed (0: it predicted the baseline) */
} rv_cli_opt;

/* Load every "NAME[:k=v,...]" spec, in order, before any work starts: a
 * GPtrArray of rv_cli_opt (free with g_ptr_array_unref), or NULL with the
 * error of the first bad spec. */
GPtrArray *rv_cli_opts_prepare(char **specs, GError **error);

/* A replay's step times (rv_step_time); the graph's policy-free baseline
 * when policy is NULL. */
GArray *rv_cli_replay_steps(rv_graph *graph, const rv_policy *policy, GError **error);

/* Apply the options in order (each one's notes and changed-task count go
 * to its rv_cli_opt; an option that changed nothing gets a note on stderr,
 * so that no prediction silently repeats the baseline).  The
 * last replacement scheduling policy a plugin returned is left in *policy;
 * the caller runs policy->free_policy_data, before the options are freed
 * (the policy's data may live in a plugin).  FALSE with an error prefixed
 * by the failing plugin's name. */
gboolean rv_cli_apply(rv_graph *graph, GPtrArray *opts, rv_plugin_output *policy, GError **error);

/* Apply the options in order and replay under the last policy: the
 * predicted step times, or NULL with an error. */
GArray *rv_cli_predict(rv_graph *graph, GPtrArray *opts, GError **error);

/* The steady step of a list of step times: the median of the steps after
 * the first (which carries warm-up); a one-step list is that step. */
int64_t rv_cli_steady_step(const GArray *steps, gboolean simulated);

#endif
