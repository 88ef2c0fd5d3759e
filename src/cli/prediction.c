/*
 * prediction.c - load, apply and replay optimizations for `whatif` and
 * `validate` (see prediction.h).
 */
#include "prediction.h"
#include "cli.h"
#include "reverie/report.h"
#include "reverie/sim.h"
#include <stdio.h>
#include <string.h>

static void opt_free(gpointer data)
{
    rv_cli_opt *opt = data;
    rv_params_free(opt->params);
    rv_plugin_unload(opt->plugin);
    g_free(opt->spec);
    if (opt->notes) g_string_free(opt->notes, TRUE);
    g_free(opt);
}

/* "NAME[:k=v,...]" -> loaded plugin with parsed parameters. */
static rv_cli_opt *prepare(const char *spec, GError **error)
{
    const char *colon = strchr(spec, ':');
    char *name = colon ? g_strndup(spec, (gsize)(colon - spec)) : g_strdup(spec);
    rv_cli_opt *opt = g_new0(rv_cli_opt, 1);
    opt->spec = g_strdup(spec);
    opt->plugin = rv_plugin_load(name, error);
    g_free(name);
    if (opt->plugin != NULL)
        opt->params = rv_params_parse(rv_plugin_descriptor_of(opt->plugin), colon ? colon + 1 : "", error);
    if (opt->plugin == NULL || opt->params == NULL) {
        opt_free(opt);
        return NULL;
    }
    return opt;
}

GPtrArray *rv_cli_opts_prepare(char **specs, GError **error)
{
    GPtrArray *opts = g_ptr_array_new_with_free_func(opt_free);
    for (char **spec = specs; spec != NULL && *spec != NULL; spec++) {
        rv_cli_opt *opt = prepare(*spec, error);
        if (opt == NULL) {
            g_ptr_array_unref(opts);
            return NULL;
        }
        g_ptr_array_add(opts, opt);
    }
    return opts;
}

/* What an optimization may change about a task: how long it takes and
 * whether it is there. */
typedef struct {
    int64_t duration_ns, host_overhead_ns;
    uint16_t flags;
} task_timing;

static GArray *snapshot(const rv_graph *graph)
{
    GArray *tasks = g_array_sized_new(FALSE, FALSE, sizeof(task_timing), graph->tasks->len);
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        task_timing timing = { task->duration_ns, task->host_overhead_ns, task->flags };
        g_array_append_val(tasks, timing);
    }
    return tasks;
}

/* Tasks added, or retimed or removed since the snapshot; a new policy
 * counts as a change of every task it ranks (reported as the whole graph). */
static uint64_t changed_since(const rv_graph *graph, const GArray *before, gboolean new_policy)
{
    if (new_policy) return (uint64_t)rv_graph_task_count(graph);
    uint64_t changed = (uint64_t)(rv_graph_task_count(graph) - (int32_t)before->len);
    for (guint t = 0; t < before->len; t++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        const task_timing *was = &g_array_index(before, task_timing, t);
        if (task->duration_ns != was->duration_ns || task->host_overhead_ns != was->host_overhead_ns ||
            task->flags != was->flags)
            changed++;
    }
    return changed;
}

gboolean rv_cli_apply(rv_graph *graph, GPtrArray *opts, rv_plugin_output *policy, GError **error)
{
    for (guint i = 0; i < opts->len; i++) {
        rv_cli_opt *opt = g_ptr_array_index(opts, i);
        const rv_plugin *plugin = rv_plugin_descriptor_of(opt->plugin);
        rv_plugin_output output = { { NULL, NULL }, NULL, g_string_new(NULL) };
        GArray *before = snapshot(graph);
        guint edges_before = graph->edges->len;
        gboolean ok = plugin->apply(graph, opt->params, &output, error);
        if (!ok) {
            g_prefix_error(error, "%s: ", plugin->name);
            g_string_free(output.notes, TRUE);
            g_array_unref(before);
            return FALSE;
        }
        opt->changed_tasks = changed_since(graph, before, output.policy.priority != NULL);
        if (opt->changed_tasks == 0 && graph->edges->len != edges_before) opt->changed_tasks = 1;
        g_array_unref(before);
        if (opt->changed_tasks == 0)
            fprintf(stderr, "reverie: note: %s changed no task: its prediction is the baseline\n", opt->spec);
        opt->notes = output.notes;
        if (output.policy.priority != NULL) {
            if (policy->free_policy_data) policy->free_policy_data(policy->policy.user_data);
            *policy = output;
            policy->notes = NULL;
        }
    }
    return TRUE;
}

GArray *rv_cli_replay_steps(rv_graph *graph, const rv_policy *policy, GError **error)
{
    rv_sim_result sim = { 0 };
    if (!rv_simulate(graph, policy, &sim, error)) return NULL;
    rv_cli_note_replay(graph, &sim);
    GArray *steps = rv_step_times(graph, &sim);
    rv_sim_result_clear(&sim);
    return steps;
}

GArray *rv_cli_predict(rv_graph *graph, GPtrArray *opts, GError **error)
{
    rv_plugin_output policy = { { NULL, NULL }, NULL, NULL };
    GArray *predicted = NULL;
    if (rv_cli_apply(graph, opts, &policy, error))
        predicted = rv_cli_replay_steps(graph, policy.policy.priority ? &policy.policy : NULL, error);
    if (policy.free_policy_data) policy.free_policy_data(policy.policy.user_data);
    return predicted;
}

static gint compare_int64(gconstpointer left, gconstpointer right)
{
    int64_t a = *(const int64_t *)left, b = *(const int64_t *)right;
    return a < b ? -1 : a > b;
}

int64_t rv_cli_steady_step(const GArray *steps, gboolean simulated)
{
    if (steps->len == 0) return 0;
    GArray *values = g_array_new(FALSE, FALSE, sizeof(int64_t));
    for (guint s = steps->len > 1 ? 1 : 0; s < steps->len; s++) {
        const rv_step_time *step = &g_array_index(steps, rv_step_time, s);
        int64_t value = simulated ? step->simulated_ns : step->recorded_ns;
        g_array_append_val(values, value);
    }
    g_array_sort(values, compare_int64);
    guint n = values->len;
    int64_t steady = n % 2 ? g_array_index(values, int64_t, n / 2)
                           : (g_array_index(values, int64_t, n / 2 - 1) + g_array_index(values, int64_t, n / 2)) / 2;
    g_array_unref(values);
    return steady;
}
