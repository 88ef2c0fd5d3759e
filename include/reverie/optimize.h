/*
 * optimize.h - optimizations as users give them: "NAME[:k=v,...]" specs,
 * each a plugin (plugin.h) loaded once by name and its parameters parsed
 * against the plugin's table, applied to a graph in the order given.
 *
 * Loading (once, up front, into a table of plugins by name) and parsing
 * (per list of specs) are apart because a sweep parses thousands of lists
 * from several threads: lookups of names already loaded are thread-safe.
 */
#ifndef REVERIE_OPTIMIZE_H
#define REVERIE_OPTIMIZE_H

#include <glib.h>
#include "reverie/graph.h"
#include "reverie/plugin.h"

G_BEGIN_DECLS

/* One optimization: a plugin and the parameters parsed against its table. */
typedef struct {
    const rv_loaded_plugin *loaded;  /* owned by the plugin table */
    const rv_plugin *plugin;         /* its descriptor */
    rv_params *params;
    char *spec;       /* NAME[:k=v,...] as given */
    GString *notes;   /* what apply() reported; NULL before */
    gboolean counted; /* changed_tasks was counted when it was applied */
    uint64_t changed_tasks;  /* tasks it inserted, removed or retimed, when counted */
    /* What apply() left for after the host's replay (plugin.h: after_replay,
     * its data; notes are the opt's), when applied by rv_opts_apply_before_replay. */
    rv_plugin_output after;
} rv_opt;

/* Loaded plugins by name, each loaded once (free with g_hash_table_destroy,
 * after everything that holds one of its plugins' code or data). */
GHashTable *rv_plugin_table_new(void);
/* The plugin called name (or at that path), loaded into the table if new. */
const rv_loaded_plugin *rv_plugin_table_get(GHashTable *plugins, const char *name, GError **error);

/* The NAME of "NAME[:k=v,...]" (g_free). */
char *rv_opt_spec_name(const char *spec);
/* Parse "NAME[:k=v,...]", loading NAME into `plugins` if it is new. */
rv_opt *rv_opt_parse(GHashTable *plugins, const char *spec, GError **error);
void rv_opt_free(gpointer opt);
/* Parse every spec (a NULL-terminated list), in order, before any work
 * starts: a GPtrArray of rv_opt (g_ptr_array_unref before destroying
 * `plugins`), or NULL with the error of the first bad spec. */
GPtrArray *rv_opts_prepare(GHashTable *plugins, char *const *specs, GError **error);

/*
 * Apply the opts in order; the last policy any of them returns is kept in
 * *last_policy (release it with rv_opts_policy_clear, before the plugins
 * are unloaded: its data may live in one).  A failure is prefixed with the
 * plugin's name.  With count_changes, each opt's changed_tasks is counted
 * (and `counted` set), so that a front end can say when an optimization
 * changed nothing and its prediction repeats the baseline; a sweep's
 * thousands of variants skip that.
 */
gboolean rv_opts_apply(rv_graph *graph, GPtrArray *opts, gboolean count_changes, rv_plugin_output *last_policy,
                       GError **error);
/*
 * rv_opts_apply for a host that replays the graph right after, with the
 * last policy kept in *last_policy, and then calls rv_opts_after_replay
 * with that replay: the last opt is told so (plugin.h's
 * rv_plugin_output.last) and may leave part of its notes to that replay
 * instead of replaying the graph itself; the first is lent `before`, a
 * replay of the graph as it is now without a policy, and `before_memory`,
 * its memory estimate (either NULL: none).  A host that then fails to
 * replay frees what was left with rv_opt_free.
 */
gboolean rv_opts_apply_before_replay(rv_graph *graph, GPtrArray *opts, gboolean count_changes,
                                     const rv_sim_result *before, const rv_memory_estimate *before_memory,
                                     rv_plugin_output *last_policy, GError **error);
/* Hand the replay to every opt that left something for it; each appends to its own notes. */
void rv_opts_after_replay(GPtrArray *opts, const rv_graph *graph, const rv_host_replay *replay);

/* After rv_opts_apply with count_changes: one line (char*, g_free) per
 * optimization that changed no task, "SPEC changed no task: its prediction
 * is the baseline", so that no front end lets a prediction silently
 * repeat the baseline.  g_ptr_array_unref. */
GPtrArray *rv_opts_unchanged(const GPtrArray *opts);

/* Release a policy that rv_opts_apply kept (its notes are the opts'). */
void rv_opts_policy_clear(rv_plugin_output *policy);

G_END_DECLS

#endif
