/*
 * fused_adam.c - a fused optimizer (Daydream appendix A.2, Algorithm 4):
 * Apex FusedAdam / torch's fused=True run the whole weight update as one
 * kernel instead of a few kernels per parameter.
 *
 *   reverie whatif trace.json.gz --opt fused-adam
 *
 * For each step: every GPU task of the optimizer phase (kernels, memsets,
 * copies; not collectives) is removed together with the call that launched
 * it and the CPU gap after that call (the per-parameter Python loop), then
 * one launch call and one kernel are inserted where the removed region
 * began: the launch after the last surviving CPU task before the first
 * removed launch on that thread, the kernel after the last surviving GPU
 * task before the first removed kernel on its stream.  The fused kernel
 * lasts as long as the removed GPU tasks together (duration=sum, Daydream's
 * estimate: the same bytes move, only the launches and the gaps go).
 * Optimizer CPU tasks that launch nothing stay.  Works for any optimizer
 * (SGD, Adam, ...) that runs inside an "Optimizer.step" annotation.
 */
#include "reverie/plugin.h"
#include "reverie/error.h"
#include "reverie/transform.h"
#include "reverie/units.h"
#include <string.h>

static const rv_param_spec fused_params[] = {
    { "duration", RV_PARAM_CHOICE, "sum", NULL,
      "fused kernel time: sum = the removed GPU tasks' total (Daydream)", "sum" },
    { NULL }
};

static gint by_recorded_start(gconstpointer a, gconstpointer b, gpointer data)
{
    rv_graph *graph = data;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    int64_t tx = rv_graph_task(graph, x)->recorded_start_ns, ty = rv_graph_task(graph, y)->recorded_start_ns;
    if (tx != ty) return tx < ty ? -1 : 1;
    return x < y ? -1 : x > y;
}

static gint compare_keys(gconstpointer a, gconstpointer b)
{
    int x = GPOINTER_TO_INT(a), y = GPOINTER_TO_INT(b);
    return x < y ? -1 : x > y;
}

/* The last task before `task` in its resource's order that is not in `doomed`. */
static int32_t previous_survivor(const rv_graph *graph, int32_t task, GHashTable *doomed)
{
    int32_t previous = rv_graph_resource_previous(graph, task);
    while (previous >= 0 && g_hash_table_contains(doomed, GINT_TO_POINTER(previous + 1)))
        previous = rv_graph_resource_previous(graph, previous);
    return previous;
}

static gboolean fused_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    /* optimizer-phase GPU work, by step (step -1 = outside every step) */
    GHashTable *by_step = rv_tasks_by_step_new();
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task(graph, id);
        if ((task->flags & RV_TASK_FLAG_REMOVED) || !(task->flags & RV_TASK_FLAG_GPU)) continue;
        if (task->phase != RV_PHASE_OPTIMIZER || task->kind == RV_TASK_COMM) continue;
        rv_tasks_by_step_add(by_step, task->step, id);
    }
    if (g_hash_table_size(by_step) == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "the trace has no GPU work in an optimizer phase (no \"Optimizer.step\" annotation "
                    "launching kernels), so there is nothing to fuse");
        g_hash_table_destroy(by_step);
        return FALSE;
    }
    GList *keys = g_list_sort(g_hash_table_get_keys(by_step), compare_keys);
    guint steps = 0, gpu_removed = 0;
    int removed_total = 0;
    int64_t fused_total = 0, cpu_before = 0, cpu_after = 0;
    gboolean ok = TRUE;
    for (GList *k = keys; k != NULL && ok; k = k->next) {
        GArray *victims = g_hash_table_lookup(by_step, k->data);
        g_array_sort_with_data(victims, by_recorded_start, graph);
        GHashTable *doomed = g_hash_table_new(g_direct_hash, g_direct_equal);
        int64_t sum = 0;
        int32_t first = g_array_index(victims, int32_t, 0), first_launch = -1;
        for (guint i = 0; i < victims->len; i++) {
            int32_t id = g_array_index(victims, int32_t, i);
            sum += rv_graph_task(graph, id)->duration_ns;
            g_hash_table_add(doomed, GINT_TO_POINTER(id + 1));
            int32_t launch = rv_graph_launch_of(graph, id);
            if (launch >= 0) {
                const rv_task *call = rv_graph_task(graph, launch);
                cpu_before += call->duration_ns + call->gap_ns;
                g_hash_table_add(doomed, GINT_TO_POINTER(launch + 1));
                if (first_launch < 0 ||
                    call->recorded_start_ns < rv_graph_task(graph, first_launch)->recorded_start_ns)
                    first_launch = launch;
            }
        }
        int32_t after = previous_survivor(graph, first, doomed);
        int32_t launch_after = first_launch >= 0 ? previous_survivor(graph, first_launch, doomed) : -1;
        rv_task fused = *rv_graph_task(graph, first);
        removed_total += rv_transform_remove_many(graph, victims, RV_REMOVE_DROP_GAP);
        gpu_removed += victims->len;
        fused.kind = RV_TASK_KERNEL;
        fused.name = rv_strings_intern(graph->strings, "fused optimizer kernel (multi_tensor_apply)");
        fused.duration_ns = sum;
        fused.gap_ns = 0;
        fused.correlation = -1;
        fused.bytes = 0;
        fused.flags = RV_TASK_FLAG_GPU;
        rv_insert_spec spec = { fused, after, launch_after };
        if (rv_transform_insert(graph, &spec, error) < 0) ok = FALSE;
        if (launch_after >= 0) cpu_after += rv_graph_typical_launch_ns(graph);
        fused_total += sum;
        steps++;
        g_hash_table_destroy(doomed);
    }
    g_list_free(keys);
    g_hash_table_destroy(by_step);
    if (!ok) return FALSE;
    char *mean = rv_format_duration(fused_total / (int64_t)steps);
    char *before = rv_format_duration(cpu_before / (int64_t)steps), *now = rv_format_duration(cpu_after / (int64_t)steps);
    g_string_append_printf(output->notes,
                           "    fused %u optimizer GPU tasks (%d tasks removed with their launches) into %u kernel%s "
                           "of %s each; launch CPU time per step %s -> %s\n",
                           gpu_removed, removed_total, steps, steps == 1 ? "" : "s", mean, before, now);
    g_free(mean); g_free(before); g_free(now);
    return TRUE;
}

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "fused-adam", "fused optimizer: each step's weight-update kernels become one kernel and one launch",
    fused_params, fused_apply,
};
