/*
 * ddp.c - data-parallel training (PyTorch DDP over NCCL) predicted from a
 * single-GPU trace (Daydream appendix A.4, Algorithm 6).
 *
 *   reverie whatif trace.json.gz --opt 'ddp:world=16,bandwidth=25Gbps'
 *   reverie whatif trace.json.gz --opt 'ddp:world=32,algorithm=hierarchical,gpus_per_node=8'
 *
 * Gradient sizes come from the weight shapes of the forward operators of
 * the first step (task->input_dims of conv / linear / addmm: the 2nd and
 * 3rd inputs are weight and bias; for addmm the 3rd and 1st), 4 bytes per
 * element, or from param_sizes=FILE (a JSON list of byte counts in forward
 * order).  Gradients are bucketed as DDP does: in backward order (reverse
 * forward order), a bucket closes once it holds bucket_cap bytes.
 *
 * Each step's backward GPU work is cut into runs of kernels of weighted
 * layers (ConvolutionBackward, AddmmBackward, ...); gradient k in backward
 * order is produced by run k*runs/gradients.  One all-reduce per bucket is
 * inserted on a "net" channel after the last kernel of the run producing
 * its last gradient, in bucket order; the step's first optimizer task (or
 * its end marker) waits for all of them.  Costs: comm.h's alpha-beta model
 * on nodes = ceil(world / gpus_per_node) nodes of min(world, gpus_per_node)
 * GPUs (NVLink inside a node, `bandwidth`/`latency` between nodes).
 *
 * A trace that already holds NCCL all-reduce kernels is re-costed instead:
 * with a known payload the new cost is computed; otherwise the duration is
 * scaled by the ring bandwidth term 2(p-1)/p of the new over the recorded
 * world size.  world=1 leaves the graph unchanged.
 */
#include "reverie/plugin.h"
#include "reverie/comm.h"
#include "reverie/error.h"
#include "reverie/shapes.h"
#include "reverie/transform.h"
#include "reverie/units.h"
#include <jansson.h>
#include <math.h>
#include <string.h>

static const rv_param_spec ddp_params[] = {
    { "world", RV_PARAM_INTEGER, "8", "GPUs", "number of data-parallel ranks", NULL },
    { "bucket_cap", RV_PARAM_BYTES, "25MiB", "bytes", "DDP bucket size (bucket_cap_mb)", NULL },
    { "bandwidth", RV_PARAM_BANDWIDTH, "100Gbps", "B/s", "inter-node link bandwidth per direction (IB EDR)", NULL },
    { "latency", RV_PARAM_DURATION, "5us", "ns", "inter-node per-message latency", NULL },
    { "algorithm", RV_PARAM_CHOICE, "ring", NULL, "all-reduce algorithm", "ring|tree|hierarchical" },
    { "gpus_per_node", RV_PARAM_INTEGER, "8", "GPUs", "GPUs sharing the intra-node link", NULL },
    { "intra_bandwidth", RV_PARAM_BANDWIDTH, "150GB/s", "B/s", "intra-node bandwidth (NVLink V100: 6 links x 25 GB/s)", NULL },
    { "intra_latency", RV_PARAM_DURATION, "2us", "ns", "intra-node per-message latency", NULL },
    { "efficiency", RV_PARAM_NUMBER, "1", "x", "bandwidth derating in (0,1] (Daydream saw ~0.66 under compute)", NULL },
    { "param_sizes", RV_PARAM_STRING, "", NULL, "JSON file: list of gradient byte counts in forward order", NULL },
    { NULL }
};

typedef struct {
    rv_cluster cluster;
    rv_collective collective;
} cost_model;

static int64_t allreduce_ns(const cost_model *model, int64_t bytes)
{
    return rv_cluster_collective_ns(model->collective, bytes, &model->cluster);
}

static const char *str(const rv_graph *graph, int32_t id) { return id > 0 ? rv_strings_get(graph->strings, id) : ""; }

static gboolean weighted_forward(const char *layer)
{
    char *lower = g_ascii_strdown(layer, -1);
    gboolean yes = strstr(lower, "conv") || strstr(lower, "linear") || strstr(lower, "addmm");
    g_free(lower);
    return yes;
}

static gboolean weighted_backward(const char *layer)
{
    char *lower = g_ascii_strdown(layer, -1);
    gboolean yes = strstr(lower, "convolution") || strstr(lower, "addmmbackward") || strstr(lower, "mmbackward") ||
                   strstr(lower, "linearbackward") || strstr(lower, "conv");
    g_free(lower);
    return yes;
}

/* Weight + bias bytes of one forward operator from its Input Dims
 * (inputs 1 and 2; for addmm(bias, input, weight) inputs 2 and 0). */
static int64_t weight_bytes(const rv_graph *graph, int32_t task, const char *layer)
{
    rv_shapes shapes;
    int64_t elements = 0;
    if (rv_shapes_of_task(graph, task, &shapes)) {
        gboolean addmm = strstr(layer, "addmm") != NULL;
        elements = addmm ? rv_shapes_elements(&shapes, 2) + rv_shapes_elements(&shapes, 0)
                         : rv_shapes_elements(&shapes, 1) + rv_shapes_elements(&shapes, 2);
    }
    rv_shapes_clear(&shapes);
    return 4 * elements;
}

static gint compare_keys(gconstpointer a, gconstpointer b)
{
    int x = GPOINTER_TO_INT(a), y = GPOINTER_TO_INT(b);
    return x < y ? -1 : x > y;
}

static gint by_start(gconstpointer a, gconstpointer b, gpointer data)
{
    rv_graph *graph = data;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    int64_t tx = rv_graph_task(graph, x)->recorded_start_ns, ty = rv_graph_task(graph, y)->recorded_start_ns;
    return tx != ty ? (tx < ty ? -1 : 1) : (x < y ? -1 : x > y);
}

/* Gradient sizes in forward order, from the first step with weighted forward ops. */
static GArray *gradients_from_trace(rv_graph *graph)
{
    GArray *sizes = g_array_new(FALSE, FALSE, sizeof(int64_t));
    int32_t first_step = G_MAXINT32;
    GArray *tasks = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task(graph, id);
        if (task->kind != RV_TASK_CPU || task->phase != RV_PHASE_FORWARD || (task->flags & RV_TASK_FLAG_REMOVED)) continue;
        if (task->input_dims >= 0 && weighted_forward(str(graph, task->layer))) first_step = MIN(first_step, task->step);
        g_array_append_val(tasks, id);
    }
    g_array_sort_with_data(tasks, by_start, graph);
    int32_t last_layer = -1, last_dims = -1, last_resource = -1;
    for (guint i = 0; i < tasks->len; i++) {
        int32_t id = g_array_index(tasks, int32_t, i);
        const rv_task *task = rv_graph_task(graph, id);
        if (task->step != first_step) continue;
        if (task->layer == last_layer && task->input_dims == last_dims && task->resource == last_resource) continue;
        last_layer = task->layer; last_dims = task->input_dims; last_resource = task->resource;
        if (task->input_dims < 0 || !weighted_forward(str(graph, task->layer))) continue;
        int64_t bytes = weight_bytes(graph, id, str(graph, task->layer));
        if (bytes > 0) g_array_append_val(sizes, bytes);
    }
    g_array_unref(tasks);
    return sizes;
}

static GArray *gradients_from_file(const char *path, GError **error)
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
        int64_t bytes = json_is_number(v) ? (int64_t)json_number_value(v) : -1;
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

/* Re-cost the NCCL all-reduces the trace already holds. */
static guint recost_existing(rv_graph *graph, const cost_model *model, int world, GString *notes)
{
    guint count = 0;
    int64_t before = 0, after = 0;
    int old_world = graph->world_size > 1 ? (int)graph->world_size : 2;
    double scale = (2.0 * (world - 1) / world) / (2.0 * (old_world - 1) / old_world);
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        rv_task *task = rv_graph_task(graph, id);
        if ((task->flags & RV_TASK_FLAG_REMOVED) || task->kind != RV_TASK_COMM) continue;
        int c = rv_collective_from_kernel_name(str(graph, task->name));
        if (c != RV_COLL_ALLREDUCE_RING && c != RV_COLL_ALLREDUCE_TREE) continue;
        before += task->duration_ns;
        int64_t now = task->bytes > 0 ? allreduce_ns(model, task->bytes) : (int64_t)llround(task->duration_ns * scale);
        rv_transform_set_duration(graph, id, now);
        after += task->duration_ns;
        count++;
    }
    if (count) {
        char *b = rv_format_duration(before), *a = rv_format_duration(after);
        g_string_append_printf(notes, "    re-costed %u recorded all-reduces for world %d (recorded world %d): %s -> %s\n",
                               count, world, old_world, b, a);
        g_free(b); g_free(a);
    }
    return count;
}

static gboolean ddp_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    int64_t world = rv_params_integer(params, "world"), gpn = rv_params_integer(params, "gpus_per_node");
    int64_t cap = rv_params_bytes(params, "bucket_cap");
    double efficiency = rv_params_number(params, "efficiency");
    if (world < 1 || world > 1000000 || gpn < 1 || cap < 1 || !(efficiency > 0 && efficiency <= 1)) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "need world >= 1, gpus_per_node >= 1, bucket_cap > 0 and 0 < efficiency <= 1");
        return FALSE;
    }
    if (world == 1) {
        g_string_append(output->notes, "    world=1: no gradient to exchange, graph unchanged\n");
        return TRUE;
    }
    cost_model model;
    model.cluster.gpus_per_node = (int)MIN(world, gpn);
    model.cluster.nodes = (int)((world + model.cluster.gpus_per_node - 1) / model.cluster.gpus_per_node);
    model.cluster.inter = rv_link_make(rv_params_bandwidth(params, "bandwidth"), rv_params_duration_ns(params, "latency"), efficiency);
    model.cluster.intra = rv_link_make(rv_params_bandwidth(params, "intra_bandwidth"),
                                       rv_params_duration_ns(params, "intra_latency"), efficiency);
    const char *algorithm = rv_params_string(params, "algorithm");
    model.collective = strcmp(algorithm, "tree") == 0 ? RV_COLL_ALLREDUCE_TREE
                     : strcmp(algorithm, "hierarchical") == 0 ? RV_COLL_ALLREDUCE_HIER : RV_COLL_ALLREDUCE_RING;

    if (recost_existing(graph, &model, (int)world, output->notes) > 0) return TRUE;

    const char *file = rv_params_string(params, "param_sizes");
    GArray *sizes = file && *file ? gradients_from_file(file, error) : gradients_from_trace(graph);
    if (sizes == NULL) return FALSE;
    if (sizes->len == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "no gradient sizes: no conv/linear/addmm forward operator with Input Dims in the trace "
                    "(record with record_shapes=True, or give param_sizes=FILE)");
        g_array_unref(sizes);
        return FALSE;
    }
    /* buckets in backward order: bucket_of[k] for gradient k (k = 0 is the last forward layer) */
    guint n = sizes->len;
    int *bucket_of = g_new(int, n);
    GArray *bucket_bytes = g_array_new(FALSE, FALSE, sizeof(int64_t));
    int64_t fill = 0, total_bytes = 0;
    for (guint k = 0; k < n; k++) {
        int64_t bytes = g_array_index(sizes, int64_t, n - 1 - k);
        if (bucket_bytes->len == 0 || fill >= cap) { int64_t zero = 0; g_array_append_val(bucket_bytes, zero); fill = 0; }
        fill += bytes;
        total_bytes += bytes;
        g_array_index(bucket_bytes, int64_t, bucket_bytes->len - 1) = fill;
        bucket_of[k] = (int)bucket_bytes->len - 1;
    }
    guint buckets = bucket_bytes->len;

    /* per step: backward GPU tasks in time order, and the optimizer's first task */
    GHashTable *backward = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, (GDestroyNotify)g_array_unref);
    GHashTable *optimizer = g_hash_table_new(g_direct_hash, g_direct_equal);
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task(graph, id);
        if (task->flags & RV_TASK_FLAG_REMOVED) continue;
        gpointer key = GINT_TO_POINTER(task->step + 2);
        if (task->phase == RV_PHASE_BACKWARD && (task->flags & RV_TASK_FLAG_GPU)) {
            GArray *list = g_hash_table_lookup(backward, key);
            if (list == NULL) { list = g_array_new(FALSE, FALSE, sizeof(int32_t)); g_hash_table_insert(backward, key, list); }
            g_array_append_val(list, id);
        } else if (task->phase == RV_PHASE_OPTIMIZER && !(task->flags & RV_TASK_FLAG_GPU)) {
            gpointer old = g_hash_table_lookup(optimizer, key);
            if (old == NULL || task->recorded_start_ns < rv_graph_task(graph, GPOINTER_TO_INT(old) - 1)->recorded_start_ns)
                g_hash_table_insert(optimizer, key, GINT_TO_POINTER(id + 1));
        }
    }
    int32_t channel = rv_transform_add_channel(graph, "net");
    int64_t *cost = g_new(int64_t, buckets);
    for (guint b = 0; b < buckets; b++) cost[b] = allreduce_ns(&model, g_array_index(bucket_bytes, int64_t, b));
    guint steps = 0, inserted = 0;
    int32_t previous = -1;
    gboolean ok = TRUE;
    /* launch call of each GPU task: a producer must be launched before the
     * task that waits for its all-reduce, or the new edge closes a cycle */
    int32_t *launch_of = g_new(int32_t, rv_graph_task_count(graph));
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) launch_of[id] = -1;
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        if (edge->kind == RV_EDGE_LAUNCH && edge->to < (int32_t)graph->tasks->len) launch_of[edge->to] = edge->from;
    }
    GList *keys = g_list_sort(g_hash_table_get_keys(backward), compare_keys); /* steps in order: one channel chain */
    for (GList *k = keys; k && ok; k = k->next) {
        GArray *list = g_hash_table_lookup(backward, k->data);
        int step = GPOINTER_TO_INT(k->data) - 2;
        g_array_sort_with_data(list, by_start, graph);
        int32_t waiter = -1;
        gpointer opt = g_hash_table_lookup(optimizer, k->data);
        if (opt) waiter = GPOINTER_TO_INT(opt) - 1;
        else if (step >= 0 && step < (int)graph->steps->len) waiter = g_array_index(graph->steps, rv_step, step).end_marker;
        if (waiter >= 0) {
            int64_t limit = rv_graph_task(graph, waiter)->recorded_start_ns;
            guint kept = 0;
            for (guint i = 0; i < list->len; i++) {
                int32_t id = g_array_index(list, int32_t, i);
                if (launch_of[id] < 0 || rv_graph_task(graph, launch_of[id])->recorded_start_ns > limit) continue;
                g_array_index(list, int32_t, kept++) = id;
            }
            g_array_set_size(list, kept);
            if (kept == 0) continue;
        }
        /* runs of weighted-layer kernels: the last kernel of each */
        GArray *run_ends = g_array_new(FALSE, FALSE, sizeof(int32_t));
        int32_t run_layer = -1;
        for (guint i = 0; i < list->len; i++) {
            int32_t id = g_array_index(list, int32_t, i);
            const rv_task *task = rv_graph_task(graph, id);
            gboolean weighted = weighted_backward(str(graph, task->layer));
            if (weighted && task->layer == run_layer) g_array_index(run_ends, int32_t, run_ends->len - 1) = id;
            else if (weighted) g_array_append_val(run_ends, id);
            run_layer = weighted ? task->layer : -1;
        }
        if (run_ends->len == 0) g_array_append_val(run_ends, g_array_index(list, int32_t, list->len - 1));
        for (guint b = 0; b < buckets && ok; b++) {
            guint last = 0; /* last gradient of bucket b */
            for (guint g = 0; g < n; g++) if (bucket_of[g] == (int)b) last = g;
            guint run = MIN(run_ends->len - 1, (guint)((uint64_t)last * run_ends->len / n));
            int32_t producer = g_array_index(run_ends, int32_t, run);
            rv_task task = *rv_graph_task(graph, producer);
            task.kind = RV_TASK_COMM;
            task.flags = 0;
            task.resource = channel;
            task.name = rv_strings_intern(graph->strings, "ncclAllReduce (ddp bucket)");
            task.duration_ns = cost[b];
            task.gap_ns = task.lag_ns = 0;
            task.bytes = g_array_index(bucket_bytes, int64_t, b);
            task.correlation = -1;
            rv_insert_spec spec = { task, previous, -1 };
            int32_t id = rv_transform_insert(graph, &spec, error);
            if (id < 0) { ok = FALSE; break; }
            rv_transform_add_edge(graph, producer, id);
            if (waiter >= 0) rv_transform_add_edge(graph, id, waiter);
            previous = id;
            inserted++;
        }
        g_array_unref(run_ends);
        steps++;
    }
    g_list_free(keys);
    g_free(launch_of);
    if (ok) {
        char *size = rv_format_bytes(total_bytes), *bw = rv_format_bandwidth(model.cluster.inter.bandwidth_Bps);
        int64_t sum = 0;
        for (guint b = 0; b < buckets; b++) sum += cost[b];
        char *per_step = rv_format_duration(sum);
        g_string_append_printf(output->notes,
                               "    %u gradients, %s in %u buckets; %s all-reduce over %" G_GINT64_FORMAT
                               " GPUs (%d nodes x %d, inter %s): %s per step; inserted %u all-reduces in %u steps\n",
                               n, size, buckets, algorithm, world, model.cluster.nodes, model.cluster.gpus_per_node, bw,
                               per_step, inserted, steps);
        g_free(size); g_free(bw); g_free(per_step);
        if (steps == 0) {
            g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "the trace has no backward-phase GPU work to attach all-reduces to");
            ok = FALSE;
        }
    }
    g_free(cost);
    g_free(bucket_of);
    g_array_unref(bucket_bytes);
    g_array_unref(sizes);
    g_hash_table_destroy(backward);
    g_hash_table_destroy(optimizer);
    return ok;
}

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "ddp", "data-parallel training: bucketed gradient all-reduces from a single-GPU trace",
    ddp_params, ddp_apply,
};
