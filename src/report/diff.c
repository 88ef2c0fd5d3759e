/*
 * diff.c - baseline against prediction: phases, kernel classes, layers and
 * the critical path (see diff.h for what each figure sums).
 */
#include "reverie/diff.h"
#include "reverie/breakdown.h"
#include "reverie/critical_path.h"
#include "reverie/kernels.h"
#include "reverie/report.h"
#include <stdlib.h>

static const char *const class_names[] = {
    "compute (GEMM/conv)", "memory-bound", "half precision", "host copies", "communication",
};
#define CLASS_COUNT ((int)G_N_ELEMENTS(class_names))

static void add_change(GArray *changes, const char *name, int64_t baseline_ns, int64_t predicted_ns)
{
    rv_change change = { name, baseline_ns, predicted_ns };
    g_array_append_val(changes, change);
}

static gboolean counted(const rv_graph *graph, const rv_sim_result *sim, int32_t id)
{
    const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
    return sim->start_ns[id] >= 0 && !(task->flags & RV_TASK_FLAG_REMOVED) && task->kind != RV_TASK_MARKER &&
           (graph->steps->len == 0 || task->step >= 0);
}

/* Wall time per phase over the steps, and the summed step time. */
static int64_t phase_times(const rv_graph *graph, const rv_sim_result *sim, int64_t *phases)
{
    GArray *windows = rv_step_windows(graph, sim);
    rv_breakdown *breakdown = rv_breakdown_compute(graph, sim, windows);
    int64_t total = 0;
    for (guint s = 0; s < breakdown->steps->len; s++) {
        const rv_step_breakdown *step = &g_array_index(breakdown->steps, rv_step_breakdown, s);
        total += step->end_ns - step->begin_ns;
        for (int p = 0; p < RV_PHASE_COUNT; p++)
            for (int k = 0; k < RV_SPLIT_COUNT; k++) phases[p] += step->phase_split_ns[p][k];
    }
    rv_breakdown_free(breakdown);
    g_array_unref(windows);
    return total;
}

static void class_times(const rv_graph *graph, const rv_sim_result *sim, int64_t *classes)
{
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if (!counted(graph, sim, id) || !(task->flags & RV_TASK_FLAG_GPU)) continue;
        int kind = (int)rv_kernel_classify(graph, task);
        if (kind >= 0 && kind < CLASS_COUNT) classes[kind] += task->duration_ns;
    }
}

static rv_change *layer_entry(GHashTable *layers, const rv_graph *graph, int32_t layer)
{
    rv_change *change = g_hash_table_lookup(layers, GINT_TO_POINTER(layer));
    if (change == NULL) {
        change = g_new0(rv_change, 1);
        change->name = layer ? rv_strings_get(graph->strings, layer) : "(no layer)";
        g_hash_table_insert(layers, GINT_TO_POINTER(layer), change);
    }
    return change;
}

static void layer_times(GHashTable *layers, const rv_graph *graph, const rv_sim_result *sim, gboolean predicted)
{
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        if (!counted(graph, sim, id)) continue;
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        rv_change *change = layer_entry(layers, graph, task->layer);
        *(predicted ? &change->predicted_ns : &change->baseline_ns) += task->duration_ns + task->host_overhead_ns;
    }
}

static gint larger_change_first(gconstpointer left, gconstpointer right)
{
    const rv_change *a = left, *b = right;
    int64_t da = llabs(a->predicted_ns - a->baseline_ns), db = llabs(b->predicted_ns - b->baseline_ns);
    if (da != db) return da > db ? -1 : 1;
    return g_strcmp0(a->name, b->name);
}

static GArray *sorted_changes(GHashTable *table)
{
    GArray *changes = g_array_new(FALSE, FALSE, sizeof(rv_change));
    GHashTableIter iter;
    gpointer value;
    g_hash_table_iter_init(&iter, table);
    while (g_hash_table_iter_next(&iter, NULL, &value)) g_array_append_val(changes, *(rv_change *)value);
    g_array_sort(changes, larger_change_first);
    return changes;
}

static void path_totals(const rv_graph *graph, const rv_sim_result *sim, rv_path_totals *totals)
{
    rv_critical_path *path = rv_critical_path_find(graph, sim);
    rv_path_totals_init(totals);
    for (guint s = 0; s < path->steps->len; s++)
        rv_path_totals_add(totals, graph, &g_array_index(path->steps, rv_step_path, s));
    rv_critical_path_free(path);
}

static void path_changes(rv_diff *diff, const rv_graph *baseline, const rv_sim_result *baseline_sim,
                         const rv_graph *predicted, const rv_sim_result *predicted_sim)
{
    rv_path_totals before, after;
    path_totals(baseline, baseline_sim, &before);
    path_totals(predicted, predicted_sim, &after);
    for (int k = 0; k < RV_TASK_KIND_COUNT; k++)
        if (before.by_kind_ns[k] || after.by_kind_ns[k])
            add_change(diff->path_parts, rv_task_kind_name(k), before.by_kind_ns[k], after.by_kind_ns[k]);
    for (int w = 0; w < RV_WAIT_KIND_COUNT; w++)
        if (before.by_wait_ns[w] || after.by_wait_ns[w])
            add_change(diff->path_parts, rv_wait_kind_name(w), before.by_wait_ns[w], after.by_wait_ns[w]);
    GHashTable *layers = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    const rv_path_totals *sides[2] = { &before, &after };
    for (int side = 0; side < 2; side++) {
        GArray *keys = rv_path_totals_layers(sides[side]);
        for (guint i = 0; i < keys->len; i++) {
            int32_t layer = g_array_index(keys, int32_t, i);
            rv_change *change = layer_entry(layers, predicted, layer);
            change->baseline_ns = rv_path_totals_layer_ns(&before, layer);
            change->predicted_ns = rv_path_totals_layer_ns(&after, layer);
        }
        g_array_unref(keys);
    }
    diff->path_layers = sorted_changes(layers);
    g_hash_table_destroy(layers);
    rv_path_totals_clear(&before);
    rv_path_totals_clear(&after);
}

rv_diff *rv_diff_compute(const rv_graph *baseline, const rv_sim_result *baseline_sim, const rv_graph *predicted,
                         const rv_sim_result *predicted_sim)
{
    rv_diff *diff = g_new0(rv_diff, 1);
    diff->phases = g_array_new(FALSE, FALSE, sizeof(rv_change));
    diff->classes = g_array_new(FALSE, FALSE, sizeof(rv_change));
    diff->path_parts = g_array_new(FALSE, FALSE, sizeof(rv_change));
    int64_t phases[2][RV_PHASE_COUNT] = { { 0 } }, classes[2][CLASS_COUNT] = { { 0 } };
    diff->baseline_ns = phase_times(baseline, baseline_sim, phases[0]);
    diff->predicted_ns = phase_times(predicted, predicted_sim, phases[1]);
    for (int p = 0; p < RV_PHASE_COUNT; p++)
        if (phases[0][p] || phases[1][p]) add_change(diff->phases, rv_phase_name(p), phases[0][p], phases[1][p]);
    class_times(baseline, baseline_sim, classes[0]);
    class_times(predicted, predicted_sim, classes[1]);
    for (int c = 0; c < CLASS_COUNT; c++)
        if (classes[0][c] || classes[1][c]) add_change(diff->classes, class_names[c], classes[0][c], classes[1][c]);
    GHashTable *layers = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    layer_times(layers, baseline, baseline_sim, FALSE);
    layer_times(layers, predicted, predicted_sim, TRUE);
    diff->layers = sorted_changes(layers);
    g_hash_table_destroy(layers);
    path_changes(diff, baseline, baseline_sim, predicted, predicted_sim);
    return diff;
}

void rv_diff_free(rv_diff *diff)
{
    if (diff == NULL) return;
    g_array_unref(diff->phases);
    g_array_unref(diff->classes);
    g_array_unref(diff->layers);
    g_array_unref(diff->path_parts);
    g_array_unref(diff->path_layers);
    g_free(diff);
}
