/*
 * optimize.c - optimizations as users give them (optimize.h): a plugin
 * loaded once by name, a spec parsed against its parameter table, a list
 * applied in order.  whatif applies one list; sweep applies thousands of
 * lists from several threads, which is why loading (once, up front) and
 * parsing (per list) are apart.
 */
#include "reverie/optimize.h"
#include "reverie/contention.h"
#include <string.h>

GHashTable *rv_plugin_table_new(void)
{
    return g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)rv_plugin_unload);
}

const rv_loaded_plugin *rv_plugin_table_get(GHashTable *plugins, const char *name, GError **error)
{
    rv_loaded_plugin *plugin = g_hash_table_lookup(plugins, name);
    if (plugin == NULL) {
        plugin = rv_plugin_load(name, error);
        if (plugin == NULL) return NULL;
        g_hash_table_insert(plugins, g_strdup(name), plugin);
    }
    return plugin;
}

char *rv_opt_spec_name(const char *spec)
{
    const char *colon = strchr(spec, ':');
    return colon ? g_strndup(spec, (gsize)(colon - spec)) : g_strdup(spec);
}

rv_opt *rv_opt_parse(GHashTable *plugins, const char *spec, GError **error)
{
    char *name = rv_opt_spec_name(spec);
    const rv_loaded_plugin *loaded = rv_plugin_table_get(plugins, name, error);
    g_free(name);
    if (loaded == NULL) return NULL;
    const char *colon = strchr(spec, ':');
    rv_params *params = rv_params_parse(rv_plugin_descriptor_of(loaded), colon ? colon + 1 : "", error);
    if (params == NULL) return NULL;
    rv_opt *opt = g_new0(rv_opt, 1);
    opt->loaded = loaded;
    opt->plugin = rv_plugin_descriptor_of(loaded);
    opt->params = params;
    opt->spec = g_strdup(spec);
    return opt;
}

GPtrArray *rv_opts_prepare(GHashTable *plugins, char *const *specs, GError **error)
{
    GPtrArray *opts = g_ptr_array_new_with_free_func(rv_opt_free);
    for (char *const *spec = specs; spec != NULL && *spec != NULL; spec++) {
        rv_opt *opt = rv_opt_parse(plugins, *spec, error);
        if (opt == NULL) {
            g_ptr_array_unref(opts);
            return NULL;
        }
        g_ptr_array_add(opts, opt);
    }
    return opts;
}

void rv_opt_free(gpointer data)
{
    rv_opt *opt = data;
    rv_params_free(opt->params);
    g_free(opt->spec);
    rv_plugin_output_drop_after_replay(&opt->after);
    if (opt->notes) g_string_free(opt->notes, TRUE);
    g_free(opt);
}

GPtrArray *rv_opts_unchanged(const GPtrArray *opts)
{
    GPtrArray *lines = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < opts->len; i++) {
        const rv_opt *opt = g_ptr_array_index(opts, i);
        if (opt->counted && opt->changed_tasks == 0)
            g_ptr_array_add(lines, g_strdup_printf("%s changed no task: its prediction is the baseline", opt->spec));
    }
    return lines;
}

void rv_opts_policy_clear(rv_plugin_output *policy)
{
    if (policy->free_policy_data) policy->free_policy_data(policy->policy.user_data);
    memset(policy, 0, sizeof *policy);
}

/* What an optimization may change about a task: how long it takes,
 * whether it is there and where it runs. */
typedef struct {
    int64_t duration_ns, host_overhead_ns;
    int32_t resource;
    uint16_t flags;
} task_timing;

static GArray *snapshot(const rv_graph *graph)
{
    GArray *tasks = g_array_sized_new(FALSE, FALSE, sizeof(task_timing), graph->tasks->len);
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        task_timing timing = { task->duration_ns, task->host_overhead_ns, task->resource, task->flags };
        g_array_append_val(tasks, timing);
    }
    return tasks;
}

/* Tasks added, retimed, moved or removed since the snapshot; a new
 * policy, or contention or sharing turned on or changed (contention.h),
 * counts as a change of every task (reported as the whole graph), and a
 * change of edges alone as one. */
static uint64_t changed_since(const rv_graph *graph, const GArray *before, guint edges_before, gboolean new_policy)
{
    if (new_policy) return (uint64_t)rv_graph_task_count(graph);
    uint64_t changed = (uint64_t)(rv_graph_task_count(graph) - (int32_t)before->len);
    for (guint t = 0; t < before->len; t++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        const task_timing *was = &g_array_index(before, task_timing, t);
        if (task->duration_ns != was->duration_ns || task->host_overhead_ns != was->host_overhead_ns ||
            task->resource != was->resource || task->flags != was->flags)
            changed++;
    }
    return changed == 0 && graph->edges->len != edges_before ? 1 : changed;
}

/* Did apply() turn the contention or sharing rule on or change it (contention.h)? */
static gboolean rule_changed(const rv_graph *graph, const rv_contention *contention_before, gboolean sharing_before)
{
    return contention_before->enabled != graph->contention.enabled ||
           contention_before->comm_slowdown != graph->contention.comm_slowdown ||
           contention_before->compute_slowdown != graph->contention.compute_slowdown ||
           sharing_before != graph->sharing.enabled;
}

/* Keep what apply() handed back: its notes and after_replay in the opt,
 * its policy (if any) as the last one. */
static void keep_output(rv_opt *opt, rv_plugin_output *output, rv_plugin_output *last_policy)
{
    opt->notes = output->notes;
    if (output->last && output->after_replay) {
        opt->after.after_replay = output->after_replay;
        opt->after.after_replay_data = output->after_replay_data;
        opt->after.free_after_replay_data = output->free_after_replay_data;
        opt->after.notes = opt->notes;
        output->after_replay = NULL;
        output->after_replay_data = NULL;
        output->free_after_replay_data = NULL;
    }
    rv_plugin_output_drop_after_replay(output); /* set without `last`: nothing will call it */
    if (output->policy.priority != NULL) {
        rv_opts_policy_clear(last_policy);
        *last_policy = *output;
        last_policy->notes = NULL;
        last_policy->last = FALSE;
        last_policy->before = NULL;
        last_policy->before_memory = NULL;
    }
}

/* What the host lends the first optimization (plugin.h): the graph's replay and memory estimate. */
typedef struct {
    const rv_sim_result *sim;
    const rv_memory_estimate *memory;
} lent;

/* Apply opts[i], told `last` and lent what `before` holds (plugin.h). */
static gboolean apply_one(rv_graph *graph, rv_opt *opt, gboolean count_changes, gboolean last, lent before,
                          rv_plugin_output *last_policy, GError **error)
{
    rv_plugin_output output = { .notes = g_string_new(NULL), .last = last, .before = before.sim,
                                .before_memory = before.memory };
    GArray *snap = count_changes ? snapshot(graph) : NULL;
    guint edges_before = graph->edges->len;
    rv_contention contention_before = graph->contention;
    gboolean sharing_before = graph->sharing.enabled;
    /* rv_plugin_apply also checks the graph the plugin left */
    if (!rv_plugin_apply(opt->loaded, graph, opt->params, &output, error)) {
        if (output.free_policy_data) output.free_policy_data(output.policy.user_data);
        rv_plugin_output_drop_after_replay(&output);
        g_string_free(output.notes, TRUE);
        if (snap) g_array_unref(snap);
        return FALSE;
    }
    if (snap) {
        gboolean new_rule = rule_changed(graph, &contention_before, sharing_before);
        opt->changed_tasks = changed_since(graph, snap, edges_before, output.policy.priority != NULL || new_rule);
        opt->counted = TRUE;
        g_array_unref(snap);
    }
    keep_output(opt, &output, last_policy);
    return TRUE;
}

static gboolean apply_all(rv_graph *graph, GPtrArray *opts, gboolean count_changes, gboolean replay_follows,
                          lent before, rv_plugin_output *last_policy, GError **error)
{
    lent nothing = { NULL, NULL };
    for (guint i = 0; i < opts->len; i++) {
        gboolean last = replay_follows && i + 1 == opts->len;
        if (!apply_one(graph, g_ptr_array_index(opts, i), count_changes, last, i == 0 ? before : nothing, last_policy,
                       error))
            return FALSE;
    }
    return TRUE;
}

gboolean rv_opts_apply(rv_graph *graph, GPtrArray *opts, gboolean count_changes, rv_plugin_output *last_policy,
                       GError **error)
{
    lent nothing = { NULL, NULL };
    return apply_all(graph, opts, count_changes, FALSE, nothing, last_policy, error);
}

gboolean rv_opts_apply_before_replay(rv_graph *graph, GPtrArray *opts, gboolean count_changes,
                                     const rv_sim_result *before, const rv_memory_estimate *before_memory,
                                     rv_plugin_output *last_policy, GError **error)
{
    lent lend = { before, before_memory };
    return apply_all(graph, opts, count_changes, TRUE, lend, last_policy, error);
}

void rv_opts_after_replay(GPtrArray *opts, const rv_graph *graph, const rv_host_replay *replay)
{
    for (guint i = 0; i < opts->len; i++) {
        rv_opt *opt = g_ptr_array_index(opts, i);
        rv_plugin_after_replay(opt->loaded, &opt->after, graph, replay);
    }
}
