/*
 * layer_instances.c - layer instances, their families and their backward
 * partners (layer_instances.h).
 */
#include "reverie/layer_instances.h"
#include "reverie/transform.h"
#include <string.h>

/* Substrings (lowercase, '|' separated) of a forward layer tag and of its
 * backward layer tag, checked in order. */
typedef struct {
    const char *name;
    const char *forward;
    const char *backward;
} layer_family;

static const layer_family families[RV_FAMILY_COUNT] = {
    { "conv", "conv", "conv" },
    { "linear", "linear|addmm|matmul|aten::mm|aten::bmm", "addmm|mmbackward|linear" },
    { "batch_norm", "batch_norm|batchnorm", "batchnorm" },
    { "layer_norm", "layer_norm|layernorm", "layernorm" },
    { "group_norm", "group_norm|groupnorm", "groupnorm" },
    { "relu", "relu", "relu" },
    { "gelu", "gelu", "gelu" },
    { "max_pool", "max_pool|maxpool", "maxpool" },
    { "avg_pool", "avg_pool|avgpool", "avgpool|meanbackward" },
    { "softmax", "softmax", "softmax" },
    { "dropout", "dropout", "dropout" },
};

const char *rv_layer_family_name(rv_layer_family family)
{
    return family < RV_FAMILY_COUNT ? families[family].name : "?";
}

static gboolean contains_any(const char *lower, const char *alternatives)
{
    gchar **words = g_strsplit(alternatives, "|", -1);
    gboolean found = FALSE;
    for (int i = 0; words[i] && !found; i++) found = strstr(lower, words[i]) != NULL;
    g_strfreev(words);
    return found;
}

int rv_layer_family_of(const char *layer, gboolean backward)
{
    char *lower = g_ascii_strdown(layer, -1);
    int found = -1;
    for (int f = 0; f < RV_FAMILY_COUNT && found < 0; f++)
        if (contains_any(lower, backward ? families[f].backward : families[f].forward)) found = f;
    g_free(lower);
    return found;
}

/* The family + 1 (0: none), as the memo stores it. */
static int forward_family(const char *layer) { return *layer ? rv_layer_family_of(layer, FALSE) + 1 : 0; }
static int backward_family(const char *layer) { return *layer ? rv_layer_family_of(layer, TRUE) + 1 : 0; }

void rv_layer_family_memo_init(rv_layer_family_memo *memo, const rv_graph *graph)
{
    rv_string_memo_init(&memo->phases[0], graph->strings, forward_family);
    rv_string_memo_init(&memo->phases[1], graph->strings, backward_family);
}

void rv_layer_family_memo_clear(rv_layer_family_memo *memo)
{
    rv_string_memo_clear(&memo->phases[0]);
    rv_string_memo_clear(&memo->phases[1]);
}

GArray *rv_layer_instances(const rv_graph *graph, rv_layer_family_memo *memo, const GArray *tasks, gboolean backward)
{
    GArray *instances = g_array_new(FALSE, FALSE, sizeof(rv_layer_instance));
    int32_t layer = -1, dims = -2;
    for (guint i = 0; i < tasks->len; i++) {
        int32_t id = g_array_index(tasks, int32_t, i);
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if (instances->len > 0 && task->layer == layer && task->input_dims == dims) {
            rv_layer_instance *run = &g_array_index(instances, rv_layer_instance, instances->len - 1);
            run->last = id;
            run->count++;
            continue;
        }
        layer = task->layer;
        dims = task->input_dims;
        rv_layer_instance run = { id, id, rv_string_memo_get(&memo->phases[backward ? 1 : 0], task->layer) - 1, i, 1 };
        g_array_append_val(instances, run);
    }
    return instances;
}

GArray *rv_layer_mirror_pairs(const GArray *forward, const GArray *backward, int family, guint *unpaired)
{
    GArray *pairs = g_array_new(FALSE, FALSE, sizeof(guint[2]));
    GArray *mine = g_array_new(FALSE, FALSE, sizeof(guint)), *theirs = g_array_new(FALSE, FALSE, sizeof(guint));
    for (guint i = 0; i < forward->len; i++)
        if (g_array_index(forward, rv_layer_instance, i).family == family) g_array_append_val(mine, i);
    for (guint i = 0; i < backward->len; i++)
        if (g_array_index(backward, rv_layer_instance, i).family == family) g_array_append_val(theirs, i);
    for (guint k = 0; k < mine->len; k++) {
        if (k >= theirs->len) { (*unpaired)++; continue; }
        guint pair[2] = { g_array_index(mine, guint, mine->len - 1 - k), g_array_index(theirs, guint, k) };
        g_array_append_val(pairs, pair);
    }
    g_array_unref(mine);
    g_array_unref(theirs);
    return pairs;
}

static int forward_or_backward_gpu(const rv_graph *graph, int32_t id, const rv_task *task, gpointer data)
{
    (void)graph;
    (void)id;
    (void)data;
    if ((task->flags & RV_TASK_FLAG_REMOVED) || !(task->flags & RV_TASK_FLAG_GPU)) return -1;
    return task->phase == RV_PHASE_FORWARD ? RV_LIST_FORWARD : task->phase == RV_PHASE_BACKWARD ? RV_LIST_BACKWARD : -1;
}

rv_step_lists rv_gpu_tasks_forward_backward(rv_graph *graph)
{
    rv_step_lists lists = rv_step_lists_new(graph, 2, forward_or_backward_gpu, NULL);
    for (gsize i = 0; i < (gsize)lists.slots * lists.list_count; i++)
        g_array_sort_with_data(lists.lists[i], rv_task_compare_recorded, graph);
    return lists;
}
