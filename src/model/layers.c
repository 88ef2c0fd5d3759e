/*
 * layers.c - weighted layers, their weight sizes and the backward runs that
 * produce their gradients (see layers.h for the model).
 */
#include "reverie/layers.h"
#include "reverie/error.h"
#include "reverie/shapes.h"
#include "reverie/transform.h"
#include <jansson.h>
#include <string.h>

static const char *name_of(const rv_graph *graph, int32_t id)
{
    return id > 0 ? rv_strings_get(graph->strings, id) : "";
}

static const rv_task *task_at(const rv_graph *graph, int32_t id)
{
    return &g_array_index(graph->tasks, rv_task, id);
}

static gboolean contains_any(const char *text, const char *const *words)
{
    char *lower = g_ascii_strdown(text, -1);
    gboolean found = FALSE;
    for (; *words && !found; words++) found = strstr(lower, *words) != NULL;
    g_free(lower);
    return found;
}

gboolean rv_layer_is_weighted(const char *layer)
{
    static const char *const words[] = { "conv", "linear", "addmm", NULL };
    return contains_any(layer, words);
}

gboolean rv_layer_is_weighted_backward(const char *layer)
{
    static const char *const words[] = { "convolution", "addmmbackward", "mmbackward", "linearbackward", "conv", NULL };
    /* a compiled graph's backward calls the GEMMs themselves (tags.c: no
     * autograd node names them there) */
    return contains_any(layer, words) || g_strcmp0(layer, "aten::mm") == 0 || g_strcmp0(layer, "aten::addmm") == 0;
}

int64_t rv_layer_weight_bytes(const rv_graph *graph, int32_t task)
{
    rv_shapes shapes;
    int64_t elements = 0;
    if (rv_shapes_of_task(graph, task, &shapes)) {
        gboolean addmm = strstr(name_of(graph, task_at(graph, task)->layer), "addmm") != NULL;
        elements = addmm ? rv_shapes_elements(&shapes, 2) + rv_shapes_elements(&shapes, 0)
                         : rv_shapes_elements(&shapes, 1) + rv_shapes_elements(&shapes, 2);
    }
    rv_shapes_clear(&shapes);
    return 4 * elements;
}

/* ---- helpers -------------------------------------------------------- */

static gint by_recorded_start(gconstpointer a, gconstpointer b, gpointer data)
{
    const rv_graph *graph = data;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    int64_t tx = task_at(graph, x)->recorded_start_ns, ty = task_at(graph, y)->recorded_start_ns;
    return tx != ty ? (tx < ty ? -1 : 1) : (x < y ? -1 : x > y);
}

/* One empty GArray per step plus one for "outside every step". */
static GPtrArray *arrays_per_step(const rv_graph *graph, guint element_size)
{
    GPtrArray *arrays = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    for (guint s = 0; s <= graph->steps->len; s++) g_ptr_array_add(arrays, g_array_new(FALSE, FALSE, element_size));
    return arrays;
}

/* The live tasks that `want` accepts, grouped by step, in recorded order. */
static GPtrArray *tasks_by_step(const rv_graph *graph, gboolean (*want)(const rv_task *))
{
    GPtrArray *groups = arrays_per_step(graph, sizeof(int32_t));
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = task_at(graph, id);
        if ((task->flags & RV_TASK_FLAG_REMOVED) || !want(task)) continue;
        if (task->step < -1 || task->step >= (int32_t)graph->steps->len) continue;
        g_array_append_val(g_ptr_array_index(groups, task->step + 1), id);
    }
    for (guint s = 0; s < groups->len; s++)
        g_array_sort_with_data(g_ptr_array_index(groups, s), by_recorded_start, (gpointer)graph);
    return groups;
}

/* For each call, the earliest live GPU task it launched; -1 where none. */
static int32_t *first_launched(const rv_graph *graph)
{
    int32_t n = rv_graph_task_count(graph);
    int32_t *by = g_new(int32_t, n);
    for (int32_t id = 0; id < n; id++) by[id] = -1;
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        if (edge->kind != RV_EDGE_LAUNCH || edge->from >= n || edge->to >= n) continue;
        if (task_at(graph, edge->to)->flags & RV_TASK_FLAG_REMOVED) continue;
        int32_t old = by[edge->from];
        if (old < 0 || task_at(graph, edge->to)->recorded_start_ns < task_at(graph, old)->recorded_start_ns)
            by[edge->from] = edge->to;
    }
    return by;
}

/* ---- forward: weighted layers --------------------------------------- */

static gboolean is_forward_call(const rv_task *task)
{
    return task->kind == RV_TASK_CPU && task->phase == RV_PHASE_FORWARD;
}

static int is_weighted_verdict(const char *layer) { return rv_layer_is_weighted(layer); }
static int is_weighted_backward_verdict(const char *layer) { return rv_layer_is_weighted_backward(layer); }

/* Weight bytes per (Input Dims, addmm or not): every step repeats the
 * model's layers, and parsing the same shapes per step dominated. */
typedef struct {
    rv_string_memo weighted;  /* layer tag -> rv_layer_is_weighted */
    GHashTable *bytes;        /* (dims << 1 | addmm) -> weight bytes, both gint64 */
} forward_memo;

static int64_t weight_bytes_memo(const rv_graph *graph, forward_memo *memo, int32_t task)
{
    const rv_task *call = task_at(graph, task);
    gint64 key = ((gint64)call->input_dims << 1) | (strstr(name_of(graph, call->layer), "addmm") != NULL);
    const gint64 *known = g_hash_table_lookup(memo->bytes, &key);
    if (known) return *known;
    gint64 bytes = rv_layer_weight_bytes(graph, task);
    g_hash_table_insert(memo->bytes, g_memdup2(&key, sizeof key), g_memdup2(&bytes, sizeof bytes));
    return bytes;
}

/* One step's forward calls (recorded order) folded into weighted layers. */
static void fold_layers(const rv_graph *graph, forward_memo *memo, const GArray *calls, const int32_t *launched,
                        GArray *layers)
{
    int32_t last_layer = -1, last_dims = -1, last_resource = -1;
    gboolean in_weighted = FALSE;
    for (guint i = 0; i < calls->len; i++) {
        int32_t id = g_array_index(calls, int32_t, i);
        const rv_task *task = task_at(graph, id);
        if (task->layer == last_layer && task->input_dims == last_dims && task->resource == last_resource) {
            rv_weighted_layer *current = in_weighted ? &g_array_index(layers, rv_weighted_layer, layers->len - 1) : NULL;
            if (current && current->first_gpu < 0) current->first_gpu = launched[id];
            continue;
        }
        last_layer = task->layer; last_dims = task->input_dims; last_resource = task->resource;
        in_weighted = rv_string_memo_get(&memo->weighted, task->layer) != 0;
        if (!in_weighted) continue;
        rv_weighted_layer layer = { task->layer, task->input_dims, id, launched[id],
                                    task->input_dims >= 0 ? weight_bytes_memo(graph, memo, id) : 0 };
        g_array_append_val(layers, layer);
    }
}

GPtrArray *rv_weighted_layers_by_step(const rv_graph *graph)
{
    int32_t *launched = first_launched(graph);
    GPtrArray *calls = tasks_by_step(graph, is_forward_call);
    GPtrArray *layers = arrays_per_step(graph, sizeof(rv_weighted_layer));
    forward_memo memo = { { 0 }, g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free) };
    rv_string_memo_init(&memo.weighted, graph->strings, is_weighted_verdict);
    for (guint s = 0; s < calls->len; s++)
        fold_layers(graph, &memo, g_ptr_array_index(calls, s), launched, g_ptr_array_index(layers, s));
    rv_string_memo_clear(&memo.weighted);
    g_hash_table_destroy(memo.bytes);
    g_ptr_array_unref(calls);
    g_free(launched);
    return layers;
}

/* ---- backward: the runs that produce gradients ----------------------- */

static gboolean is_backward_gpu_task(const rv_task *task)
{
    return task->phase == RV_PHASE_BACKWARD && (task->flags & RV_TASK_FLAG_GPU);
}

GPtrArray *rv_backward_gpu_tasks_by_step(const rv_graph *graph)
{
    return tasks_by_step(graph, is_backward_gpu_task);
}

/* Per task through the transform API's index, not a launch_index() of the
 * whole graph: plugins call this once per step. */
void rv_keep_launched_by(const rv_graph *graph, GArray *tasks, int64_t limit_ns)
{
    guint kept = 0;
    for (guint i = 0; i < tasks->len; i++) {
        int32_t id = g_array_index(tasks, int32_t, i);
        int32_t launch = rv_graph_launch_of(graph, id);
        if (launch < 0 || task_at(graph, launch)->recorded_start_ns > limit_ns) continue;
        g_array_index(tasks, int32_t, kept++) = id;
    }
    g_array_set_size(tasks, kept);
}

void rv_weighted_backward_memo_init(rv_string_memo *memo, const rv_graph *graph)
{
    rv_string_memo_init(memo, graph->strings, is_weighted_backward_verdict);
}

GArray *rv_weighted_backward_runs(const rv_graph *graph, const GArray *tasks)
{
    rv_string_memo memo;
    rv_weighted_backward_memo_init(&memo, graph);
    GArray *runs = rv_weighted_backward_runs_with(graph, tasks, &memo);
    rv_string_memo_clear(&memo);
    return runs;
}

GArray *rv_weighted_backward_runs_with(const rv_graph *graph, const GArray *tasks, rv_string_memo *weighted)
{
    GArray *run_ends = g_array_new(FALSE, FALSE, sizeof(int32_t));
    int32_t run_layer = -1;
    for (guint i = 0; i < tasks->len; i++) {
        int32_t id = g_array_index(tasks, int32_t, i);
        const rv_task *task = task_at(graph, id);
        gboolean is_weighted = rv_string_memo_get(weighted, task->layer) != 0;
        if (is_weighted && task->layer == run_layer) g_array_index(run_ends, int32_t, run_ends->len - 1) = id;
        else if (is_weighted) g_array_append_val(run_ends, id);
        run_layer = is_weighted ? task->layer : -1;
    }
    if (run_ends->len == 0 && tasks->len > 0) g_array_append_val(run_ends, g_array_index(tasks, int32_t, tasks->len - 1));
    return run_ends;
}

guint rv_gradient_run(guint gradient, guint gradients, guint runs)
{
    if (runs == 0 || gradients == 0) return 0;
    return MIN(runs - 1, (guint)((uint64_t)gradient * runs / gradients));
}

/* ---- sizes from a file ---------------------------------------------- */

GArray *rv_weight_sizes_of_first_step(const GPtrArray *layers_by_step)
{
    GArray *sizes = g_array_new(FALSE, FALSE, sizeof(int64_t));
    /* element 0 holds the tasks outside every step: the last resort (a
     * trace or hand-built graph without step annotations) */
    for (guint i = 1; i <= layers_by_step->len && sizes->len == 0; i++) {
        const GArray *layers = g_ptr_array_index(layers_by_step, i % layers_by_step->len);
        int64_t total = 0;
        for (guint j = 0; j < layers->len; j++) total += g_array_index(layers, rv_weighted_layer, j).weight_bytes;
        if (total == 0) continue;
        for (guint j = 0; j < layers->len; j++) g_array_append_val(sizes, g_array_index(layers, rv_weighted_layer, j).weight_bytes);
    }
    return sizes;
}

GArray *rv_weight_sizes_from_file(const char *path, GError **error)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!json_is_array(root)) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "param_sizes %s: %s", path, root ? "not a JSON list" : jerr.text);
        json_decref(root);
        return NULL;
    }
    GArray *sizes = g_array_new(FALSE, FALSE, sizeof(int64_t));
    size_t i;
    json_t *v;
    json_array_foreach(root, i, v) {
        double value = json_is_number(v) ? json_number_value(v) : -1;
        int64_t bytes = value >= 0 && value < 1e18 ? (int64_t)value : -1;
        if (bytes < 0) {
            g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "param_sizes %s: entry %zu is not a byte count", path, i);
            g_array_unref(sizes);
            json_decref(root);
            return NULL;
        }
        g_array_append_val(sizes, bytes);
    }
    json_decref(root);
    return sizes;
}
