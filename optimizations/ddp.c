/*
 * ddp.c - data-parallel training (PyTorch DDP over NCCL) predicted from a
 * single-GPU trace (Daydream appendix A.4, Algorithm 6).
 *
 *   reverie whatif trace.json.gz --opt 'ddp:world=16,bandwidth=25Gbps'
 *   reverie whatif trace.json.gz --opt 'ddp:world=32,algorithm=hierarchical,gpus_per_node=8'
 *
 * Gradient sizes are the weight sizes of the weighted layers (layers.h:
 * conv / linear / addmm forward operators and their Input Dims) of the
 * first step that has shapes, or come from param_sizes=FILE (a JSON list of
 * byte counts in forward order).  Gradients are bucketed as DDP does: in
 * backward order (reverse forward order), a bucket closes once it holds
 * bucket_cap bytes.
 *
 * Each step's backward GPU work is cut into runs of kernels of weighted
 * layers (layers.h); gradient k in backward order is produced by run
 * k*runs/gradients.  One all-reduce per bucket is inserted after the last
 * kernel of the run producing its last gradient, in bucket order, on a
 * communication stream of that kernel's GPU (NCCL's own stream,
 * transform.h), so the contention rule and the reports see it as that
 * GPU's communication.  As in NCCL DDP, a stream waits for
 * them, not the host: the step's first optimizer GPU task (else the next
 * step's first GPU task; else, with no GPU work after, the step's end)
 * waits for all of them, so a free network costs nothing.  Costs: comm.h's
 * alpha-beta model on nodes = ceil(world / gpus_per_node) nodes of
 * min(world, gpus_per_node) GPUs (NVLink inside a node,
 * `bandwidth`/`latency` between nodes).  Each inserted all-reduce is a
 * data-parallel collective of `world` ranks (graph.h), so later what-ifs
 * know it.  When tensor parallelism divides the model (tp-allreduce ran
 * first, or the trace's own tensor-parallel collectives say so), each rank
 * holds 1/degree of every gradient: the sizes divide by the degree.
 *
 * A trace that already holds data-parallel collectives (recorded NCCL
 * kernels, or ones an earlier ddp inserted) is re-costed instead, with the
 * model (recost.h): new = recorded x model(world) / model(recorded world),
 * the payload from the trace or solved from the recorded time (tp-allreduce
 * shrinks them for its shards, before or after); tensor-parallel and
 * other collectives are left alone.  A job of several ranks
 * without data-parallel collectives is refused (insert them in one rank's
 * trace).  world=1 leaves the graph unchanged.
 */
#include "reverie/plugin.h"
#include "reverie/checked.h"
#include "reverie/comm.h"
#include "reverie/error.h"
#include "reverie/layers.h"
#include "reverie/recost.h"
#include "reverie/transform.h"
#include "reverie/units.h"
#include "reverie/validate.h"
#include <math.h>
#include <string.h>

static const rv_param_spec ddp_params[] = {
    { "world", RV_PARAM_INTEGER, "8", "GPUs", "number of data-parallel ranks (an example: give yours)", NULL },
    { "bucket_cap", RV_PARAM_BYTES, "25MiB", "bytes", "DDP bucket size (bucket_cap_mb)", NULL },
    { "bandwidth", RV_PARAM_BANDWIDTH, "100Gbps", "B/s", "inter-node link bandwidth per direction (IB EDR)", NULL },
    { "latency", RV_PARAM_DURATION, "5us", "ns", "inter-node per-message latency (the ib-edr link preset: NCCL's per-step cost over InfiniBand, a few us)", NULL },
    { "algorithm", RV_PARAM_CHOICE, "ring", NULL, "all-reduce algorithm", "ring|tree|hierarchical" },
    { "gpus_per_node", RV_PARAM_INTEGER, "8", "GPUs", "GPUs sharing the intra-node link (an 8-GPU DGX/HGX node)", NULL },
    { "intra_bandwidth", RV_PARAM_BANDWIDTH, "150GB/s", "B/s", "intra-node bandwidth (NVLink V100: 6 links x 25 GB/s)", NULL },
    { "intra_latency", RV_PARAM_DURATION, "2us", "ns", "intra-node per-message latency (the nvlink-v100 link preset: NCCL's per-step cost over NVLink)", NULL },
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


/* Gradient sizes in forward order: the weighted layers of the first step
 * whose shapes give any weights (layers.h), layers without one left out. */
static GArray *gradients_from_trace(rv_graph *graph)
{
    GPtrArray *by_step = rv_weighted_layers_by_step(graph);
    GArray *sizes = rv_weight_sizes_of_first_step(by_step);
    g_ptr_array_unref(by_step);
    guint kept = 0;
    for (guint i = 0; i < sizes->len; i++)
        if (g_array_index(sizes, int64_t, i) > 0) g_array_index(sizes, int64_t, kept++) = g_array_index(sizes, int64_t, i);
    g_array_set_size(sizes, kept);
    return sizes;
}

/* Data-parallel collectives the graph already holds (recorded or inserted). */
static gboolean has_data_parallel(const rv_graph *graph)
{
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task((rv_graph *)graph, id);
        const rv_collective_info *info = rv_task_collective(graph, task);
        if (info && !(task->flags & RV_TASK_FLAG_REMOVED) && info->parallelism == RV_PARALLEL_DATA &&
            info->op != RV_COLLECTIVE_OP_UNKNOWN)
            return TRUE;
    }
    return FALSE;
}

/* The tensor-parallel degree a what-if gave the graph (tp-allreduce's
 * inserted collectives), else 1.  A trace recorded tensor parallel has its
 * gradients sharded already: its shapes and payloads say so. */
static int tensor_parallel_degree(const rv_graph *graph)
{
    int degree = 1;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task((rv_graph *)graph, id);
        const rv_collective_info *info = rv_task_collective(graph, task);
        if (info && !(task->flags & RV_TASK_FLAG_REMOVED) && info->parallelism == RV_PARALLEL_TENSOR && info->inserted)
            degree = MAX(degree, info->group_size);
    }
    return degree;
}

/* Re-cost the data-parallel collectives the graph already holds with the model. */
static gboolean recost_existing(rv_graph *graph, const cost_model *model, int world, GString *notes, GError **error)
{
    rv_recost_plan plan = { world, model->cluster.gpus_per_node, model->cluster.intra, model->cluster.inter,
                            model->collective, 1u << RV_PARALLEL_DATA, 1, 0 };
    rv_recost_summary summary;
    if (!rv_graph_recost_collectives(graph, &plan, "the ddp parameters (bandwidth, latency, world)", &summary, error))
        return FALSE;
    char *b = rv_format_duration(summary.before_ns), *a = rv_format_duration(summary.after_ns);
    rv_cluster after = rv_cluster_for_ranks(world, model->cluster.gpus_per_node, &model->cluster.intra,
                                            &model->cluster.inter);
    g_string_append_printf(notes, "    re-costed %u data-parallel collectives (%u transfers) for world %d (recorded world "
                           "%d; %d nodes x %d): %s -> %s\n", summary.collectives, summary.tasks, world,
                           summary.recorded_world, after.nodes, after.gpus_per_node, b, a);

    if (summary.inferred_payloads)
        g_string_append_printf(notes, "    %u have no recorded payload: solved from their recorded time on the recorded "
                               "world's links%s\n", summary.inferred_payloads,
                               graph->ranks->len > 1 ? "" : " (a rank alone: that time also holds its wait for the "
                                                            "others, so the payload is an upper bound)");
    g_free(b); g_free(a);
    return TRUE;
}

static gboolean cost_model_from_params(const rv_params *params, cost_model *model, int64_t *world, GError **error)
{
    int64_t gpn = rv_params_integer(params, "gpus_per_node");
    double efficiency = rv_params_number(params, "efficiency");
    *world = rv_params_integer(params, "world");
    if (*world < 1 || *world > 1000000 || gpn < 1 || rv_params_bytes(params, "bucket_cap") < 1 ||
        !(efficiency > 0 && efficiency <= 1)) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE,
                    "need 1 <= world <= 1000000, gpus_per_node >= 1, bucket_cap > 0 and 0 < efficiency <= 1");
        return FALSE;
    }
    model->cluster.gpus_per_node = (int)MIN(*world, gpn);
    model->cluster.nodes = (int)((*world + model->cluster.gpus_per_node - 1) / model->cluster.gpus_per_node);
    model->cluster.inter = rv_link_make(rv_params_bandwidth(params, "bandwidth"), rv_params_duration_ns(params, "latency"),
                                        efficiency);
    model->cluster.intra = rv_link_make(rv_params_bandwidth(params, "intra_bandwidth"),
                                        rv_params_duration_ns(params, "intra_latency"), efficiency);
    const char *algorithm = rv_params_string(params, "algorithm");
    model->collective = strcmp(algorithm, "tree") == 0 ? RV_COLL_ALLREDUCE_TREE
                      : strcmp(algorithm, "hierarchical") == 0 ? RV_COLL_ALLREDUCE_HIER : RV_COLL_ALLREDUCE_RING;
    return TRUE;
}

/* DDP's buckets: gradients in backward order (k = 0 is the last forward
 * layer), a bucket closes once it holds `cap` bytes. */
typedef struct {
    guint gradients;
    int *bucket_of;        /* per gradient k in backward order */
    GArray *bucket_bytes;  /* int64 per bucket */
    int64_t *cost_ns;      /* all-reduce time per bucket */
    int64_t total_bytes;
} bucket_plan;

/* Sizes come from a file or from shapes: sums saturate rather than wrap,
 * and a bucket too large to transfer is refused by its duration. */
static void plan_buckets(const GArray *sizes, int64_t cap, const cost_model *model, bucket_plan *plan)
{
    guint n = sizes->len;
    plan->gradients = n;
    plan->bucket_of = g_new(int, n);
    plan->bucket_bytes = g_array_new(FALSE, FALSE, sizeof(int64_t));
    plan->total_bytes = 0;
    int64_t fill = 0;
    for (guint k = 0; k < n; k++) {
        int64_t bytes = g_array_index(sizes, int64_t, n - 1 - k);
        if (plan->bucket_bytes->len == 0 || fill >= cap) { int64_t zero = 0; g_array_append_val(plan->bucket_bytes, zero); fill = 0; }
        fill = rv_saturating_add(fill, bytes);
        plan->total_bytes = rv_saturating_add(plan->total_bytes, bytes);
        g_array_index(plan->bucket_bytes, int64_t, plan->bucket_bytes->len - 1) = fill;
        plan->bucket_of[k] = (int)plan->bucket_bytes->len - 1;
    }
    plan->cost_ns = g_new(int64_t, plan->bucket_bytes->len);
    for (guint b = 0; b < plan->bucket_bytes->len; b++)
        plan->cost_ns[b] = allreduce_ns(model, g_array_index(plan->bucket_bytes, int64_t, b));
}

/* Each bucket's all-reduce must fit in a task's duration (checked.h). */
static gboolean plan_is_feasible(const rv_graph *graph, const bucket_plan *plan, GError **error)
{
    for (guint b = 0; b < plan->bucket_bytes->len; b++) {
        int64_t checked;
        if (!rv_task_duration_from(graph, -1, (double)plan->cost_ns[b], "the ddp parameters and gradient sizes",
                                   &checked, error))
            return FALSE;
    }
    return TRUE;
}

static void plan_clear(bucket_plan *plan)
{
    g_free(plan->bucket_of);
    g_free(plan->cost_ns);
    g_array_unref(plan->bucket_bytes);
}

/* The last gradient (backward order) of bucket b. */
static guint last_gradient_of(const bucket_plan *plan, guint b)
{
    guint last = 0;
    for (guint g = 0; g < plan->gradients; g++) if (plan->bucket_of[g] == (int)b) last = g;
    return last;
}

/* Per step (index step + 1): the GPU task that waits for the step's
 * all-reduces - its earliest optimizer GPU task, else the next step's
 * earliest GPU task - or -1 (the step's end marker then waits). */
static int32_t *gradient_waiters(rv_graph *graph)
{
    guint slots = graph->steps->len + 1;
    int32_t *optimizer = g_new(int32_t, slots), *any = g_new(int32_t, slots);
    for (guint s = 0; s < slots; s++) optimizer[s] = any[s] = -1;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task(graph, id);
        if ((task->flags & (RV_TASK_FLAG_REMOVED | RV_TASK_FLAG_RENDEZVOUS)) || !(task->flags & RV_TASK_FLAG_GPU)) continue;
        if (task->step < -1 || task->step >= (int32_t)graph->steps->len) continue;
        int32_t *slots_of[2] = { &any[task->step + 1], task->phase == RV_PHASE_OPTIMIZER ? &optimizer[task->step + 1] : NULL };
        for (int k = 0; k < 2; k++)
            if (slots_of[k] && (*slots_of[k] < 0 || rv_task_compare_recorded(&id, slots_of[k], graph) < 0)) *slots_of[k] = id;
    }
    /* the next step is the next one of the same trace: steps are in order
     * (slot 0, outside every step, has no next) */
    for (guint s = 1; s + 1 < slots; s++)
        if (optimizer[s] < 0) optimizer[s] = any[s + 1];
    g_free(any);
    return optimizer;
}


/* One all-reduce per bucket after the run producing its last gradient, on
 * the communication stream after `*previous`; `waiter` (if any) waits for
 * each.  The stream (*stream) is made on the first producer's GPU. */
static gboolean insert_step_allreduces(rv_graph *graph, const bucket_plan *plan, const GArray *run_ends,
                                       int32_t *stream, int32_t waiter, int32_t *previous, guint *inserted,
                                       const rv_collective_info *kind, GError **error)
{
    for (guint b = 0; b < plan->bucket_bytes->len; b++) {
        guint run = rv_gradient_run(last_gradient_of(plan, b), plan->gradients, run_ends->len);
        int32_t producer = g_array_index(run_ends, int32_t, run);
        if (*stream < 0) *stream = rv_transform_add_comm_stream(graph, producer, "nccl stream (ddp)");
        if (*stream < 0) *stream = rv_transform_add_channel(graph, "net"); /* a producer off the GPU: not expected */
        rv_task task = *rv_graph_task(graph, producer);
        task.kind = RV_TASK_COMM;
        task.flags = 0;
        task.resource = *stream;
        task.name = rv_strings_intern(graph->strings, "ncclAllReduce (ddp bucket)");
        task.duration_ns = plan->cost_ns[b];
        task.host_overhead_ns = 0;
        task.bytes = g_array_index(plan->bucket_bytes, int64_t, b);
        task.correlation = -1;
        rv_collective_info info = *kind;
        info.bytes = task.bytes;
        task.collective = rv_graph_add_collective(graph, &info);
        rv_insert_spec spec = { task, *previous, -1 };
        int32_t id = rv_transform_insert(graph, &spec, error);
        if (id < 0) return FALSE;
        rv_transform_add_edge(graph, producer, id);
        if (waiter >= 0) rv_transform_add_edge(graph, id, waiter);
        *previous = id;
        (*inserted)++;
    }
    return TRUE;
}

/* Every step's all-reduces, chained on one communication stream in step order.
 * Returns the number of steps that got them, or -1 on error. */
static int insert_allreduces(rv_graph *graph, const bucket_plan *plan, const cost_model *model, int world,
                             guint *inserted, GError **error)
{
    GPtrArray *backward = rv_backward_gpu_tasks_by_step(graph);
    int32_t *optimizer = gradient_waiters(graph);
    int32_t stream = -1;
    rv_collective_info kind = { 0, -1, rv_strings_intern(graph->strings, "ddp"), world, -1, -1, 1,
                                (uint8_t)model->collective, RV_PARALLEL_DATA, RV_MATCH_NONE, 1 };
    int32_t previous = -1;
    int steps = 0;
    rv_string_memo weighted;
    rv_weighted_backward_memo_init(&weighted, graph);
    for (guint slot = 0; slot < backward->len && steps >= 0; slot++) {
        GArray *list = g_ptr_array_index(backward, slot);
        int step = (int)slot - 1;
        if (list->len == 0) continue;
        int32_t waiter = optimizer[slot];
        if (waiter < 0 && step >= 0) waiter = g_array_index(graph->steps, rv_step, step).end_marker;
        /* a producer must be launched before the waiter ran, or the new edge may close a cycle */
        if (waiter >= 0) rv_keep_launched_by(graph, list, rv_graph_task(graph, waiter)->recorded_start_ns);
        if (list->len == 0) continue;
        GArray *run_ends = rv_weighted_backward_runs_with(graph, list, &weighted);
        if (!insert_step_allreduces(graph, plan, run_ends, &stream, waiter, &previous, inserted, &kind, error)) steps = -1;
        else steps++;
        g_array_unref(run_ends);
    }
    rv_string_memo_clear(&weighted);
    g_free(optimizer);
    g_ptr_array_unref(backward);
    return steps;
}

static void describe(GString *notes, const bucket_plan *plan, const cost_model *model, const char *algorithm,
                     int64_t world, guint inserted, int steps, int tensor_parallel)
{
    if (tensor_parallel > 1)
        g_string_append_printf(notes, "    tensor parallelism of degree %d: each rank holds 1/%d of every gradient\n",
                               tensor_parallel, tensor_parallel);
    char *size = rv_format_bytes(plan->total_bytes), *bw = rv_format_bandwidth(model->cluster.inter.bandwidth_Bps);
    int64_t sum = 0;
    for (guint b = 0; b < plan->bucket_bytes->len; b++) sum = rv_saturating_add(sum, plan->cost_ns[b]);
    char *per_step = rv_format_duration(sum);
    g_string_append_printf(notes,
                           "    %u gradients, %s in %u buckets; %s all-reduce over %" G_GINT64_FORMAT
                           " GPUs (%d nodes x %d, inter %s): %s per step; inserted %u all-reduces in %d steps\n",
                           plan->gradients, size, plan->bucket_bytes->len, algorithm, world, model->cluster.nodes,
                           model->cluster.gpus_per_node, bw, per_step, inserted, steps);
    g_free(size); g_free(bw); g_free(per_step);
}

static gboolean ddp_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    cost_model model;
    int64_t world;
    if (!cost_model_from_params(params, &model, &world, error)) return FALSE;
    if (world == 1) {
        g_string_append(output->notes, "    world=1: no gradient to exchange, graph unchanged\n");
        return TRUE;
    }
    if (has_data_parallel(graph)) return recost_existing(graph, &model, (int)world, output->notes, error);
    if (graph->ranks->len > 1) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "this job of %u ranks has no data-parallel all-reduce to re-cost; ddp inserts all-reduces into "
                    "one rank's trace - give it one trace", graph->ranks->len);
        return FALSE;
    }

    const char *file = rv_params_string(params, "param_sizes");
    GArray *sizes = file && *file ? rv_weight_sizes_from_file(file, error) : gradients_from_trace(graph);
    if (sizes == NULL) return FALSE;
    if (sizes->len == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "no gradient sizes: no conv/linear/addmm forward operator with Input Dims in the trace "
                    "(record with record_shapes=True, or give param_sizes=FILE)");
        g_array_unref(sizes);
        return FALSE;
    }
    int tensor_parallel = tensor_parallel_degree(graph);
    for (guint i = 0; i < sizes->len; i++) g_array_index(sizes, int64_t, i) /= tensor_parallel;
    bucket_plan plan;
    plan_buckets(sizes, rv_params_bytes(params, "bucket_cap"), &model, &plan);
    g_array_unref(sizes);
    guint inserted = 0;
    int steps = plan_is_feasible(graph, &plan, error)
                    ? insert_allreduces(graph, &plan, &model, (int)world, &inserted, error) : -1;
    if (steps >= 0)
        describe(output->notes, &plan, &model, rv_params_string(params, "algorithm"), world, inserted, steps,
                 tensor_parallel);
    plan_clear(&plan);
    if (steps == 0)
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "the trace has no backward-phase GPU work to attach all-reduces to");
    return steps > 0;
}

/* The composition law (compose.h): one data-parallel all-reduce per bucket after the backward work that produces
 * it, waited for where the optimizer begins; or the recorded ones re-priced. */
static const rv_plugin_effects ddp_effects = {
    .reads = RV_ASPECT_BACKWARD | RV_ASPECT_STEPS | RV_ASPECT_TENSOR_COMM | RV_ASPECT_CLUSTER | RV_ASPECT_WEIGHTS | RV_ASPECT_DATA_COMM,
    .reads_time = RV_ASPECT_DATA_COMM,
    .scales = 0,
    .reprices = RV_ASPECT_DATA_COMM,
    .rewrites = RV_ASPECT_DATA_COMM | RV_ASPECT_CLUSTER,
    .order = RV_ORDER(RV_STAGE_PARALLEL, 30),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "ddp", "data-parallel training: bucketed gradient all-reduces from a single-GPU trace",
    ddp_params, ddp_apply, &ddp_effects,
};
