/*
 * dataloader.c - a faster input pipeline ("what if data loading cost only
 * `remaining` per step?": more workers, pinned memory, DALI, a cache).
 *
 *   reverie whatif trace.json.gz --opt 'dataloader:remaining=1ms'
 *
 * The data-loading CPU time of a step is the duration plus the host overhead
 * of its data-loading tasks: tasks of kind dataload and CPU tasks in the
 * dataload phase (inside an "enumerate(DataLoader)" annotation).  When that
 * exceeds `remaining`, all of them are scaled by remaining / recorded, so
 * the step's loading time becomes `remaining`; otherwise the step is left
 * as it is.  GPU copies launched by the loader are not touched.
 */
#include "reverie/plugin.h"
#include "reverie/error.h"
#include "reverie/transform.h"
#include "reverie/units.h"
#include <math.h>

static const rv_param_spec dataloader_params[] = {
    { "remaining", RV_PARAM_DURATION, "1ms", "ns", "data-loading CPU time left per step", NULL },
    { NULL }
};

static gboolean dataloader_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    int64_t remaining = rv_params_duration_ns(params, "remaining");
    GHashTable *by_step = rv_tasks_by_step_new();
    guint tasks = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task(graph, id);
        if (task->flags & (RV_TASK_FLAG_REMOVED | RV_TASK_FLAG_GPU)) continue;
        if (task->kind != RV_TASK_DATALOAD && !(task->kind == RV_TASK_CPU && task->phase == RV_PHASE_DATALOAD)) continue;
        rv_tasks_by_step_add(by_step, task->step, id);
        tasks++;
    }
    if (tasks == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "the trace has no data-loading tasks (no dataload events or \"enumerate(DataLoader)\" annotations)");
        g_hash_table_destroy(by_step);
        return FALSE;
    }
    GHashTableIter iter;
    gpointer value;
    guint steps = 0, shrunk = 0;
    int64_t before = 0, after = 0;
    g_hash_table_iter_init(&iter, by_step);
    while (g_hash_table_iter_next(&iter, NULL, &value)) {
        GArray *list = value;
        int64_t total = 0;
        for (guint i = 0; i < list->len; i++) {
            const rv_task *task = rv_graph_task(graph, g_array_index(list, int32_t, i));
            total += task->duration_ns + task->host_overhead_ns;
        }
        steps++;
        before += total;
        if (total <= remaining) { after += total; continue; }
        double factor = (double)remaining / (double)total;
        for (guint i = 0; i < list->len; i++) {
            rv_task *task = rv_graph_task(graph, g_array_index(list, int32_t, i));
            rv_transform_set_duration(graph, g_array_index(list, int32_t, i),
                                      (int64_t)llround((double)task->duration_ns * factor));
            task->host_overhead_ns = (int64_t)llround((double)task->host_overhead_ns * factor);
            after += task->duration_ns + task->host_overhead_ns;
        }
        shrunk++;
    }
    g_hash_table_destroy(by_step);
    char *b = rv_format_duration(before / steps), *a = rv_format_duration(after / steps);
    g_string_append_printf(output->notes, "    data loading per step %s -> %s (%u of %u steps shortened, %u tasks)\n", b, a,
                           shrunk, steps, tasks);
    g_free(b); g_free(a);
    return TRUE;
}

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "dataloader", "faster data loading: each step's data-loading CPU time becomes `remaining`",
    dataloader_params, dataloader_apply,
};
