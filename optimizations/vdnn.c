/*
 * vdnn.c - virtualized DNN memory (vDNN, Rhu et al., MICRO 2016) as in
 * Daydream appendix A.8, Algorithm 10: feature maps are offloaded to host
 * memory during forward and prefetched back before the backward layer that
 * needs them.  The question it answers: how much slower is a step when the
 * activations live in host memory between forward and backward?
 *
 *   reverie whatif trace.json.gz --opt vdnn
 *   reverie whatif trace.json.gz --opt 'vdnn:policy=all,pcie_bandwidth=4GB/s'
 *
 * The model, and why:
 *
 * Layers.  A layer instance is a run of consecutive GPU tasks (in recorded
 * order, per step and phase) with the same layer tag and Input Dims, i.e.
 * one call of a top-level operator ("aten::conv2d" forward,
 * "...ConvolutionBackward0" backward).  Instances belong to a family
 * (conv, linear, batch_norm, relu, ...) found by name.  policy=conv (vDNN's
 * vDNN_conv, Daydream's example) offloads the conv family only; policy=all
 * (vDNN_all) every family in the table below: forward operators whose
 * backward reads their input and runs GPU work.  Element-wise adds, copies
 * and views are not offloaded: their backward never reads the input.
 *
 * Pairing.  Within a step and a family, the k-th last forward instance is
 * paired with the k-th backward instance (autograd runs layers in reverse),
 * as ddp.c pairs gradients with backward runs.  If the counts differ the
 * extra instances are left out and the notes say so.
 *
 * Size.  vDNN offloads X, the input feature map that the layer's backward
 * needs: the elements of input 0 of the forward operator's Input Dims
 * (input 1 for addmm(bias, X, W)) times dtype_bytes.  An instance without
 * shapes is not offloaded.  A trace recorded without shapes can be given
 * the sizes instead (feature_map_sizes=FILE: one step's byte counts in
 * forward order, checked against the count of layers found in each step).
 * In-place or shared tensors are counted once per layer that reads them,
 * as vDNN (which knows no aliasing) would copy them.
 *
 * Offload (D2H).  One copy per instance on a "pcie.d2h" channel, chained in
 * forward order.  It starts when the layer's first GPU task starts (X is
 * ready then and is only read by the layer), so it overlaps the layer's
 * compute as in vDNN.  vDNN releases X once the copy is done and
 * synchronizes its compute and memory streams at the end of each layer, so
 * the GPU task that follows the layer waits for the copy: a slow link
 * stalls forward.  That is the memory-safe choice; PyTorch's saved-tensor
 * hooks would not stall, which this plugin does not model.
 *
 * Prefetch (H2D).  One copy per instance on a "pcie.h2d" channel (PCIe is
 * full duplex, so offloads and prefetches do not compete), after its
 * offload.  vDNN's findPrefetchLayer: when the backward of offloaded layer
 * n starts, it prefetches the nearest offloaded layer below n.  So the
 * prefetch of instance i starts no earlier than the start of the backward
 * of offloaded instance i+1; the topmost offloaded instance's prefetch
 * starts with the step's first backward GPU task (the output layers).  The
 * backward's first GPU task waits for its prefetch.  Prefetches are not
 * chained: a replacement priority ranks them so that, when the channel
 * frees, the one nearer the output (earlier step first) goes.  With mirror
 * pairing the triggers already release them in that order (prefetch i is
 * released only after prefetch i+1 has landed); the rank keeps the order
 * where a fallback trigger does not.  A trigger that would not precede the
 * waiting task in the recording falls back to the step's first backward
 * task, then to the end of the GPU task just before the waiter (a network
 * whose last layer is offloaded), so every new edge follows the recorded
 * order and the graph stays acyclic.
 *
 * Memory.  What vDNN is for: the notes give the peak from shapes
 * (memory.h) of the graph as it came and after the copies (the model
 * frees each offloaded feature map between its offload and its prefetch),
 * and the stall it costs: the time the GPU waits for prefetches, from a
 * replay of the graph with the copies (per waiting task, how much later
 * its prefetch lands than its other predecessors and its stream let it
 * start), summed over the steps.  That replay is the prediction's own
 * when vdnn is the last optimization of a what-if (plugin.h: last): the
 * stall line is then written from the host's replay after it ran, rather
 * than from a second replay inside apply(), and the peaks from the
 * what-if's own memory estimates, where it made them (each costs about
 * 1.7 plain replays at 1M tasks).
 *
 * Cost of a copy: latency + bytes / pcie_bandwidth.  The host calls that
 * issue the copies (Daydream's cudaMemcpyAsync launches) and vDNN's
 * cudaMalloc/cudaFree (vDNN uses a memory pool) are not inserted: a few us
 * each on a CPU thread that usually runs ahead of the GPU.
 */
#include "reverie/plugin.h"
#include "reverie/checked.h"
#include "reverie/error.h"
#include "reverie/layer_instances.h"
#include "reverie/memory.h"
#include "reverie/shapes.h"
#include "reverie/transform.h"
#include "reverie/units.h"
#include "reverie/validate.h"
#include <jansson.h>
#include <math.h>
#include <string.h>

static const rv_param_spec vdnn_params[] = {
    { "policy", RV_PARAM_CHOICE, "conv", NULL,
      "which layers to offload: conv = convolutions (vDNN_conv), all = every layer whose backward reads "
      "its input (vDNN_all)", "conv|all" },
    { "pcie_bandwidth", RV_PARAM_BANDWIDTH, "12GB/s", "B/s",
      "effective host<->GPU copy bandwidth per direction; PCIe 3.0 x16 is 15.75 GB/s raw (PCI-SIG), "
      "~12 GB/s measured for pinned memory by CUDA's bandwidthTest sample", NULL },
    { "latency", RV_PARAM_DURATION, "5us", "ns", "fixed cost per copy (DMA setup)", NULL },
    { "dtype_bytes", RV_PARAM_INTEGER, "4", "bytes", "bytes per feature-map element (4: fp32, 2: fp16)", NULL },
    { "feature_map_sizes", RV_PARAM_STRING, "", NULL,
      "JSON file: byte counts of the offloaded feature maps of one step, in forward order (for traces "
      "recorded without record_shapes)", NULL },
    { NULL }
};

static const char *str(const rv_graph *graph, int32_t id) { return id > 0 ? rv_strings_get(graph->strings, id) : ""; }

/* Bytes of the feature map X a forward instance reads (0: no shapes). */
static int64_t feature_map_bytes(const rv_graph *graph, int32_t task, int64_t dtype_bytes)
{
    rv_shapes shapes;
    int64_t elements = 0;
    if (rv_shapes_of_task(graph, task, &shapes)) {
        gboolean addmm = strstr(str(graph, g_array_index(graph->tasks, rv_task, task).layer), "addmm") != NULL;
        elements = rv_shapes_elements(&shapes, addmm ? 1 : 0);
    }
    rv_shapes_clear(&shapes);
    /* Like shapes.c: an impossible size counts as unknown, never as huge. */
    int64_t bytes;
    return rv_checked_mul(elements, dtype_bytes, &bytes) && bytes <= RV_MAX_BYTES ? bytes : 0;
}

/* ---- the plan: which forward instance goes with which backward ----- */

typedef struct {
    int32_t forward_first, forward_last; /* the forward instance */
    int32_t backward_first;              /* the first GPU task of its backward */
    int family;
    int64_t bytes;                       /* 0: unknown (no shapes) */
} offload;

/* What the search found, for the notes and the "nothing to act on" error. */
typedef struct {
    guint forward_found;   /* selected forward instances */
    guint without_shapes;  /* ... of which had no Input Dims */
    guint unpaired;        /* ... of which had no backward partner */
    guint per_family[RV_FAMILY_COUNT];
} survey;

static gboolean family_selected(int family, gboolean all)
{
    return family == RV_FAMILY_CONV || (all && family >= 0);
}

/* Pair one step's forward and backward instances, family by family, in
 * mirror order (sorted into forward order by the caller). */
static GArray *plan_step(rv_graph *graph, GArray *forward, GArray *backward, gboolean all, int64_t dtype_bytes,
                         survey *found)
{
    GArray *plan = g_array_new(FALSE, FALSE, sizeof(offload));
    for (int f = 0; f < RV_FAMILY_COUNT; f++) {
        if (!family_selected(f, all)) continue;
        GArray *pairs = rv_layer_mirror_pairs(forward, backward, f, &found->unpaired);
        for (guint i = 0; i < forward->len; i++) found->forward_found += g_array_index(forward, rv_layer_instance, i).family == f;
        for (guint k = 0; k < pairs->len; k++) {
            const guint *pair = &g_array_index(pairs, guint, 2 * k);
            const rv_layer_instance *fwd = &g_array_index(forward, rv_layer_instance, pair[0]);
            const rv_layer_instance *bwd = &g_array_index(backward, rv_layer_instance, pair[1]);
            offload entry = { fwd->first, fwd->last, bwd->first, f, feature_map_bytes(graph, fwd->first, dtype_bytes) };
            g_array_append_val(plan, entry);
        }
        g_array_unref(pairs);
    }
    return plan;
}

static gint by_forward_start(gconstpointer a, gconstpointer b, gpointer data)
{
    return rv_task_compare_recorded(&((const offload *)a)->forward_first, &((const offload *)b)->forward_first, data);
}

/* ---- the priority: prefetches nearer the output first ---------------- */

typedef struct {
    int32_t count;
    int64_t *rank; /* per task id at apply time; 0 for all but prefetches */
} prefetch_ranks;

static int64_t prefetch_priority(const rv_graph *graph, int32_t task, void *user_data)
{
    (void)graph;
    const prefetch_ranks *ranks = user_data;
    return task >= 0 && task < ranks->count ? ranks->rank[task] : 0;
}

static void prefetch_ranks_free(gpointer data)
{
    prefetch_ranks *ranks = data;
    g_free(ranks->rank);
    g_free(ranks);
}

/* Earlier steps first; within a step the higher forward position first. */
static int64_t prefetch_rank(int32_t step, guint position)
{
    return ((int64_t)step + 1) * ((int64_t)G_MAXUINT32 + 1) - (int64_t)position;
}

/* ---- inserting the copies ------------------------------------------- */

typedef struct {
    int32_t task;
    int64_t rank;
} task_rank;

typedef struct {
    int32_t d2h, h2d;          /* channels */
    double bandwidth;          /* bytes per second */
    int64_t latency_ns;
    int32_t previous_offload;  /* the d2h chain */
    GArray *ranked;            /* task_rank of each prefetch */
    GArray *waits;             /* int32 pairs: a prefetch and the backward task that waits for it */
    GArray *offload_waits;     /* int32 pairs: an offload and the forward task after its layer */
    guint copies;
    int64_t bytes, copy_ns;    /* totals over all steps, one direction */
} inserter;

static double copy_ns(const inserter *ins, int64_t bytes)
{
    return (double)ins->latency_ns + (double)bytes * 1e9 / ins->bandwidth;
}

static int32_t insert_copy(rv_graph *graph, inserter *ins, int32_t like, int32_t channel, const char *name,
                           int64_t bytes, int32_t after, GError **error)
{
    rv_task task = *rv_graph_task(graph, like);
    task.kind = RV_TASK_MEMCPY;
    task.flags = 0;
    task.resource = channel;
    task.name = rv_strings_intern(graph->strings, name);
    if (!rv_task_duration_from(graph, -1, copy_ns(ins, bytes), "the vdnn parameters (pcie_bandwidth, latency)",
                               &task.duration_ns, error))
        return -1;
    task.host_overhead_ns = 0;
    task.bytes = bytes;
    task.correlation = -1;
    rv_insert_spec spec = { task, after, -1 };
    return rv_transform_insert(graph, &spec, error);
}

/* The task whose start releases a prefetch for `waiter`: the preferred
 * trigger if it was recorded before the waiter (so the new edges follow the
 * recording and cannot close a cycle), else the step's first
 * backward task; *from_start is FALSE for the last resort, the GPU task just
 * before the waiter (its end).  -1: none. */
static int32_t prefetch_trigger(rv_graph *graph, int32_t preferred, int32_t backward_start, int32_t waiter,
                                gboolean *from_start)
{
    int64_t limit = rv_graph_task(graph, waiter)->recorded_start_ns;
    int32_t candidates[2] = { preferred, backward_start };
    *from_start = TRUE;
    for (int c = 0; c < 2; c++) {
        int32_t id = candidates[c];
        if (id >= 0 && rv_graph_task(graph, id)->recorded_start_ns < limit) return id;
    }
    *from_start = FALSE;
    return rv_graph_resource_previous(graph, waiter);
}

/* Offload and prefetch every planned instance of one step. */
static gboolean insert_step(rv_graph *graph, inserter *ins, GArray *plan, int32_t step, int32_t backward_start,
                            GError **error)
{
    int32_t *offloads = g_new(int32_t, plan->len);
    for (guint i = 0; i < plan->len; i++) {
        const offload *entry = &g_array_index(plan, offload, i);
        int32_t id = insert_copy(graph, ins, entry->forward_first, ins->d2h, "Memcpy DtoH (vdnn offload)",
                                 entry->bytes, ins->previous_offload, error);
        if (id < 0) { g_free(offloads); return FALSE; }
        rv_graph_add_edge(graph, entry->forward_first, id, RV_EDGE_PLUGIN, TRUE); /* X is ready */
        int32_t next = rv_graph_resource_next(graph, entry->forward_last);
        if (next >= 0) { /* vDNN's end-of-layer sync */
            rv_transform_add_edge(graph, id, next);
            int32_t wait[2] = { id, next };
            g_array_append_vals(ins->offload_waits, wait, 2);
        }
        offloads[i] = ins->previous_offload = id;
        ins->bytes = rv_saturating_add(ins->bytes, entry->bytes);
        ins->copy_ns = rv_saturating_add(ins->copy_ns, rv_graph_task(graph, id)->duration_ns);
    }
    for (guint i = 0; i < plan->len; i++) {
        const offload *entry = &g_array_index(plan, offload, i);
        int32_t id = insert_copy(graph, ins, entry->backward_first, ins->h2d, "Memcpy HtoD (vdnn prefetch)",
                                 entry->bytes, -1, error);
        if (id < 0) { g_free(offloads); return FALSE; }
        rv_graph_task(graph, id)->recorded_start_ns = rv_graph_task(graph, entry->backward_first)->recorded_start_ns;
        rv_transform_add_edge(graph, offloads[i], id);
        int32_t above = i + 1 < plan->len ? g_array_index(plan, offload, i + 1).backward_first : -1;
        gboolean from_start;
        int32_t trigger = prefetch_trigger(graph, above, backward_start, entry->backward_first, &from_start);
        if (trigger >= 0) rv_graph_add_edge(graph, trigger, id, RV_EDGE_PLUGIN, from_start);
        rv_transform_add_edge(graph, id, entry->backward_first);
        int32_t wait[2] = { id, entry->backward_first };
        g_array_append_vals(ins->waits, wait, 2);
        task_rank ranked = { id, prefetch_rank(step, i) };
        g_array_append_val(ins->ranked, ranked);
        ins->copies++;
    }
    g_free(offloads);
    return TRUE;
}

/* ---- apply ---------------------------------------------------------- */

/* feature_map_sizes=FILE: a JSON list of byte counts (NULL and an error if bad). */
static GArray *sizes_from_file(const char *path, GError **error)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    GArray *sizes = json_is_array(root) ? g_array_new(FALSE, FALSE, sizeof(int64_t)) : NULL;
    if (sizes == NULL)
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "feature_map_sizes %s: %s", path,
                    root ? "not a JSON list of byte counts" : jerr.text);
    size_t i;
    json_t *value;
    json_array_foreach(root, i, value) {
        if (sizes == NULL) break;
        double number = json_is_number(value) ? json_number_value(value) : -1;
        int64_t bytes = number >= 1 && number <= (double)RV_MAX_BYTES ? (int64_t)number : -1;
        if (bytes <= 0) {
            g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "feature_map_sizes %s: entry %zu is not a positive byte count",
                        path, i);
            g_clear_pointer(&sizes, g_array_unref);
            break;
        }
        g_array_append_val(sizes, bytes);
    }
    json_decref(root);
    return sizes;
}

/* Size a step's plan from the user's list, which must name every layer. */
static gboolean size_from_list(rv_graph *graph, GArray *plan, const GArray *sizes, int32_t step, GError **error)
{
    if (sizes->len != plan->len) {
        const char *name = step >= 0 && step < (int32_t)graph->steps->len
                               ? str(graph, g_array_index(graph->steps, rv_step, step).name) : "outside the steps";
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "feature_map_sizes lists %u sizes but step %s has %u layers to offload", sizes->len, name, plan->len);
        return FALSE;
    }
    for (guint i = 0; i < plan->len; i++) g_array_index(plan, offload, i).bytes = g_array_index(sizes, int64_t, i);
    return TRUE;
}

/* Drop the layers with no size; count the rest by family. */
static void keep_sized(GArray *plan, survey *found)
{
    guint kept = 0;
    for (guint i = 0; i < plan->len; i++) {
        const offload *entry = &g_array_index(plan, offload, i);
        if (entry->bytes <= 0) { found->without_shapes++; continue; }
        found->per_family[entry->family]++;
        g_array_index(plan, offload, kept++) = *entry;
    }
    g_array_set_size(plan, kept);
}

/* One step's plan: the offloads in forward order, and the step's first backward GPU task. */
typedef struct {
    int32_t step;
    int32_t backward_start;
    GArray *offloads;
} step_plan;

static void step_plan_free(gpointer data)
{
    step_plan *plan = data;
    g_array_unref(plan->offloads);
    g_free(plan);
}

typedef struct {
    gboolean all;
    int64_t dtype_bytes;
    GArray *sizes; /* feature_map_sizes, or NULL: from shapes */
} plan_options;

/* Plan every step before inserting anything, so a failure leaves the graph as it was. */
static GPtrArray *plan_steps(rv_graph *graph, const plan_options *options, survey *found, GError **error)
{
    rv_step_lists by_step = rv_gpu_tasks_forward_backward(graph);
    GPtrArray *plans = g_ptr_array_new_with_free_func(step_plan_free);
    rv_layer_family_memo memo;
    rv_layer_family_memo_init(&memo, graph);
    for (int32_t step = -1; step < (int32_t)by_step.slots - 1 && plans != NULL; step++) {
        /* a step without backward still counts its forward layers, for the error */
        GArray *fwd_tasks = rv_step_lists_get(&by_step, step, RV_LIST_FORWARD);
        GArray *bwd_tasks = rv_step_lists_get(&by_step, step, RV_LIST_BACKWARD);
        if (fwd_tasks->len == 0) continue;
        GArray *fwd = rv_layer_instances(graph, &memo, fwd_tasks, FALSE);
        GArray *bwd = rv_layer_instances(graph, &memo, bwd_tasks, TRUE);
        GArray *offloads = plan_step(graph, fwd, bwd, options->all, options->dtype_bytes, found);
        g_array_unref(fwd);
        g_array_unref(bwd);
        g_array_sort_with_data(offloads, by_forward_start, graph);
        if (offloads->len > 0 && options->sizes && !size_from_list(graph, offloads, options->sizes, step, error)) {
            g_array_unref(offloads);
            g_clear_pointer(&plans, g_ptr_array_unref);
            break;
        }
        keep_sized(offloads, found);
        if (offloads->len == 0) { g_array_unref(offloads); continue; }
        step_plan *plan = g_new(step_plan, 1);
        *plan = (step_plan){ step, g_array_index(bwd_tasks, int32_t, 0), offloads };
        g_ptr_array_add(plans, plan);
    }
    rv_layer_family_memo_clear(&memo);
    rv_step_lists_free(&by_step);
    return plans;
}

static void nothing_to_offload(GError **error, const survey *found, gboolean all)
{
    const char *what = all ? "layers of an offloadable kind (conv, linear, norm, activation, pool, softmax, dropout)"
                           : "convolution layers";
    if (found->forward_found == 0)
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "no %s in the forward phase of any step on the GPU: nothing to offload", what);
    else if (found->without_shapes > 0)
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "found %u forward %s but no Input Dims to size their feature maps "
                    "(record with record_shapes=True, or give feature_map_sizes=FILE)", found->forward_found, what);
    else
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "found %u forward %s but no matching backward layer on the GPU: nothing to prefetch",
                    found->forward_found, what);
}

static void write_notes(GString *notes, const inserter *ins, const survey *found, guint steps, gboolean all)
{
    guint per_step = ins->copies / MAX(steps, 1);
    char *bytes = rv_format_bytes(ins->bytes / MAX(steps, 1)), *time = rv_format_duration(ins->copy_ns / MAX(steps, 1));
    char *bw = rv_format_bandwidth(ins->bandwidth), *latency = rv_format_duration(ins->latency_ns);
    g_string_append_printf(notes,
                           "    policy=%s: offloaded %u layers per step in %u steps, %s per step each way; copy time %s per "
                           "step each way at %s + %s per copy; inserted %u offloads (pcie.d2h) and %u prefetches "
                           "(pcie.h2d)\n",
                           all ? "all" : "conv", per_step, steps, bytes, time, bw, latency, ins->copies, ins->copies);
    if (all) {
        g_string_append(notes, "    by family over all steps:");
        for (int f = 0; f < RV_FAMILY_COUNT; f++)
            if (found->per_family[f])
                g_string_append_printf(notes, " %s %u", rv_layer_family_name((rv_layer_family)f), found->per_family[f]);
        g_string_append_c(notes, '\n');
    }
    if (found->without_shapes || found->unpaired)
        g_string_append_printf(notes, "    left out: %u forward layers without Input Dims, %u without a backward partner\n",
                               found->without_shapes, found->unpaired);
    g_free(bytes); g_free(time); g_free(bw); g_free(latency);
}

/* How long the GPU waits for copies in a replay of the graph with them:
 * per waiting task, how much later its copy ends than the latest of its
 * other predecessors (and the task before it on its stream) lets it start. */
static int64_t copy_stall_ns(const rv_graph *graph, const GArray *waits, const rv_sim_result *replay)
{
    /* flat arrays over the tasks, not hash tables: every edge of the
     * graph is looked up once (a million at 1M tasks) */
    int32_t n = rv_graph_task_count(graph);
    int64_t *other_ready = g_new(int64_t, MAX(n, 1));
    guint8 *is_prefetch = g_new0(guint8, MAX(n, 1));
    guint8 *is_waiter = g_new0(guint8, MAX(n, 1));
    for (guint i = 0; i + 1 < waits->len; i += 2) {
        int32_t waiter = g_array_index(waits, int32_t, i + 1);
        is_prefetch[g_array_index(waits, int32_t, i)] = 1;
        int32_t previous = rv_graph_resource_previous(graph, waiter);
        other_ready[waiter] = previous >= 0 ? replay->end_ns[previous] : 0;
        is_waiter[waiter] = 1;
    }
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        if (!is_waiter[edge->to] || is_prefetch[edge->from]) continue;
        int64_t at = edge->from_start ? replay->start_ns[edge->from] : replay->end_ns[edge->from];
        other_ready[edge->to] = MAX(other_ready[edge->to], at);
    }
    int64_t stall = 0;
    for (guint i = 0; i + 1 < waits->len; i += 2) {
        int32_t prefetch = g_array_index(waits, int32_t, i), waiter = g_array_index(waits, int32_t, i + 1);
        stall = rv_saturating_add(stall, MAX(replay->end_ns[prefetch] - other_ready[waiter], 0));
    }
    g_free(other_ready);
    g_free(is_prefetch);
    g_free(is_waiter);
    return stall;
}

/* The stalls for prefetches (stall[0]) and offloads (stall[1]) in a replay. */
static void stalls_of(const rv_graph *graph, const GArray *waits, const GArray *offload_waits,
                      const rv_sim_result *result, int64_t stall[2])
{
    stall[0] = copy_stall_ns(graph, waits, result);
    stall[1] = copy_stall_ns(graph, offload_waits, result);
}

/* The same from a replay of its own; FALSE if the replay fails (the
 * host's own replay will say why). */
static gboolean copy_stalls(const rv_graph *graph, const GArray *waits, const GArray *offload_waits,
                            const rv_policy *policy, int64_t stall[2])
{
    rv_sim_result result = { 0 };
    GError *error = NULL;
    if (!rv_simulate(graph, policy, &result, &error)) {
        g_error_free(error);
        return FALSE;
    }
    stalls_of(graph, waits, offload_waits, &result, stall);
    rv_sim_result_clear(&result);
    return TRUE;
}

/* The peak with and without the copies; `host_after` is the estimate of
 * the graph with them when the host made it, else NULL (estimated here). */
static void write_peak_notes(GString *notes, gboolean estimated, const rv_memory_estimate *before,
                             const rv_memory_estimate *host_after, const rv_graph *graph)
{
    rv_memory_estimate after;
    if (host_after) after = *host_after;
    if (estimated && (host_after || rv_memory_estimate_graph(graph, &after, NULL))) {
        char *without = rv_format_bytes(before->peak), *with = rv_format_bytes(after.peak);
        char *offloaded = rv_format_bytes(after.offloaded);
        g_string_append_printf(notes, "    peak memory (estimate from shapes): %s without offloading, %s with (%s of "
                               "activations offloaded in the peak step; peak_without_bytes=%" G_GINT64_FORMAT
                               " peak_with_bytes=%" G_GINT64_FORMAT ")\n",
                               without, with, offloaded, before->peak, after.peak);
        g_free(without); g_free(with); g_free(offloaded);
    } else {
        g_string_append(notes, "    peak memory: not estimated (no operator with Input Dims)\n");
    }
}

/* The stall the copies cost (the last line of the notes). */
static void write_stall_notes(GString *notes, const int64_t *stall_ns, guint steps)
{
    char *stall = rv_format_duration(stall_ns[0]), *per_step = rv_format_duration(stall_ns[0] / MAX(steps, 1));
    char *offload = rv_format_duration(stall_ns[1]);
    g_string_append_printf(notes, "    stall: the GPU waits %s for prefetches over %u steps (%s per step; "
                           "prefetch_stall_ns=%" G_GINT64_FORMAT "), and %s for offloads at the ends of layers "
                           "(offload_stall_ns=%" G_GINT64_FORMAT ")\n",
                           stall, steps, per_step, stall_ns[0], offload, stall_ns[1]);
    g_free(stall); g_free(per_step); g_free(offload);
}

/* ---- the memory and stall lines after the host's replay (plugin.h: last) */

typedef struct {
    GArray *waits, *offload_waits;  /* as the inserter left them */
    rv_policy policy;               /* vdnn's own; its ranks belong to the host's copy of the policy */
    guint steps;
    gboolean estimated;             /* the peak before the copies, if estimated */
    rv_memory_estimate before;
} deferred_lines;

static void deferred_lines_free(gpointer data)
{
    deferred_lines *deferred = data;
    g_array_unref(deferred->waits);
    g_array_unref(deferred->offload_waits);
    g_free(deferred);
}

/* The host's replay is the one apply() would have run when it used vdnn's
 * own policy, which it does when vdnn is last: the graph is the one vdnn
 * left.  Any other policy: replay with vdnn's, as apply() would have.  The
 * host's memory estimate, if any, is of that graph too. */
static void lines_after_replay(const rv_graph *graph, const rv_host_replay *replay, GString *notes, void *data)
{
    const deferred_lines *deferred = data;
    write_peak_notes(notes, deferred->estimated, &deferred->before, replay->memory, graph);
    int64_t stall[2];
    gboolean same = replay->policy && replay->policy->priority == deferred->policy.priority &&
                    replay->policy->user_data == deferred->policy.user_data;
    if (same) stalls_of(graph, deferred->waits, deferred->offload_waits, replay->sim, stall);
    if (same || copy_stalls(graph, deferred->waits, deferred->offload_waits, &deferred->policy, stall))
        write_stall_notes(notes, stall, deferred->steps);
}

/* The memory and stall lines: now, from an estimate and a replay of its
 * own, or after the host's (which makes both anyway). */
static void report_lines(const rv_graph *graph, inserter *ins, guint steps, gboolean estimated,
                         const rv_memory_estimate *before, rv_plugin_output *output)
{
    if (output->last) {
        deferred_lines *deferred = g_new(deferred_lines, 1);
        *deferred = (deferred_lines){ g_array_ref(ins->waits), g_array_ref(ins->offload_waits), output->policy,
                                      steps, estimated, *before };
        output->after_replay = lines_after_replay;
        output->after_replay_data = deferred;
        output->free_after_replay_data = deferred_lines_free;
        return;
    }
    write_peak_notes(output->notes, estimated, before, NULL, graph);
    int64_t stall[2];
    if (copy_stalls(graph, ins->waits, ins->offload_waits, &output->policy, stall))
        write_stall_notes(output->notes, stall, steps);
}

/* The rank table handed to the simulator. */
static prefetch_ranks *ranks_from(rv_graph *graph, const GArray *ranked)
{
    prefetch_ranks *ranks = g_new0(prefetch_ranks, 1);
    ranks->count = rv_graph_task_count(graph);
    ranks->rank = g_new0(int64_t, ranks->count);
    for (guint i = 0; i < ranked->len; i++) {
        const task_rank *entry = &g_array_index(ranked, task_rank, i);
        ranks->rank[entry->task] = entry->rank;
    }
    return ranks;
}

/* The memory estimate of the graph as it came: the host's when it lent one. */
static gboolean estimate_before(const rv_graph *graph, const rv_plugin_output *output, rv_memory_estimate *before)
{
    if (output->before_memory) *before = *output->before_memory;
    return output->before_memory || rv_memory_estimate_graph(graph, before, NULL);
}

static gboolean insert_plans(rv_graph *graph, inserter *ins, GPtrArray *plans, GError **error)
{
    ins->d2h = rv_transform_add_channel(graph, "pcie.d2h");
    ins->h2d = rv_transform_add_channel(graph, "pcie.h2d");
    for (guint p = 0; p < plans->len; p++) {
        const step_plan *plan = g_ptr_array_index(plans, p);
        if (!insert_step(graph, ins, plan->offloads, plan->step, plan->backward_start, error)) return FALSE;
    }
    return TRUE;
}

static gboolean vdnn_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    plan_options options = { strcmp(rv_params_string(params, "policy"), "all") == 0,
                             rv_params_integer(params, "dtype_bytes"), NULL };
    if (options.dtype_bytes < 1 || options.dtype_bytes > 16) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "dtype_bytes must be 1 to 16, not %" G_GINT64_FORMAT,
                    options.dtype_bytes);
        return FALSE;
    }
    const char *file = rv_params_string(params, "feature_map_sizes");
    if (file && *file && (options.sizes = sizes_from_file(file, error)) == NULL) return FALSE;
    survey found = { 0 };
    GPtrArray *plans = plan_steps(graph, &options, &found, error);
    if (options.sizes) g_array_unref(options.sizes);
    if (plans == NULL) return FALSE;
    if (plans->len == 0) {
        nothing_to_offload(error, &found, options.all);
        g_ptr_array_unref(plans);
        return FALSE;
    }
    inserter ins = { 0 };
    ins.bandwidth = rv_params_bandwidth(params, "pcie_bandwidth");
    ins.latency_ns = rv_params_duration_ns(params, "latency");
    ins.previous_offload = -1;
    ins.ranked = g_array_new(FALSE, FALSE, sizeof(task_rank));
    ins.waits = g_array_new(FALSE, FALSE, sizeof(int32_t));
    ins.offload_waits = g_array_new(FALSE, FALSE, sizeof(int32_t));
    rv_memory_estimate before = { 0 };
    gboolean estimated = estimate_before(graph, output, &before);
    gboolean ok = insert_plans(graph, &ins, plans, error);
    if (ok) {
        write_notes(output->notes, &ins, &found, plans->len, options.all);
        output->policy.priority = prefetch_priority;
        output->policy.user_data = ranks_from(graph, ins.ranked);
        output->free_policy_data = prefetch_ranks_free;
        report_lines(graph, &ins, plans->len, estimated, &before, output);
    }
    g_array_unref(ins.waits);
    g_array_unref(ins.offload_waits);
    g_array_unref(ins.ranked);
    g_ptr_array_unref(plans);
    return ok;
}

/* The composition law (compose.h): offload and prefetch copies that forward layers wait for; a prefetch
 * priority. */
static const rv_plugin_effects vdnn_effects = {
    .reads = RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD,
    .reads_time = RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD,
    .scales = 0,
    .reprices = 0,
    .rewrites = RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD | RV_ASPECT_SCHEDULE | RV_ASPECT_MEMORY,
    .order = RV_ORDER(RV_STAGE_EXECUTION, 40),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "vdnn",
    "vDNN memory virtualization: offload feature maps to the host in forward, prefetch them for backward",
    vdnn_params, vdnn_apply, &vdnn_effects,
};
