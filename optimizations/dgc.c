/*
 * dgc.c - Deep Gradient Compression (Lin et al., ICLR 2018; Daydream
 * appendix A.10, Algorithm 12): each data-parallel all-reduce replaced by
 * a sparse all-gather of the largest gradients, with compression and
 * decompression kernels around it.
 *
 *   reverie whatif trace.json.gz --opt ddp:world=8 --opt dgc
 *   reverie whatif traces/hta_transformer_ddp_v100_rank1.2steps.json.gz --opt dgc:density=0.01,world=8
 *
 * MODEL.  An all-reduce of S bytes of fp32 gradients on N ranks becomes:
 *   - compression: top-k selection of density x S/4 values - DGC's
 *     momentum correction, accumulation and sampled threshold read and
 *     write the gradient `passes` times - a memory-bound kernel of
 *     passes x S bytes, costed by the kernel cost model
 *     (rv_cost_model_streaming_ns: the trace's own memory efficiency);
 *   - a sparse all-gather: every rank sends its values and their int32
 *     indices, 2 x density x S bytes, and receives all N ranks': comm.h's
 *     all-gather of N x 2 x density x S bytes on ceil(N / gpus_per_node)
 *     nodes, re-costed from the recorded all-reduce (recorded x
 *     model(all-gather) / model(all-reduce));
 *   - decompression: the N sparse parts scattered into a dense gradient,
 *     a memory-bound kernel of S + N x 2 x density x S bytes.
 * Both kernels run on the all-reduce's stream, before and after it; what
 * the all-reduce waited for the compression waits for, and what waited for
 * it waits for the decompression.
 *
 * NEUTRAL.  A ring all-reduce moves 2(N-1)/N x S bytes per rank, the sparse
 * all-gather (N-1) x 2 x density x S: sparse moves less only when density
 * < 1/N.  At density >= 1/N (density=1 among them) DGC sends the gradients
 * dense, as its implementations fall back to, and the graph is unchanged.
 */
#include "reverie/plugin.h"
#include "reverie/comm.h"
#include "reverie/costmodel.h"
#include "reverie/error.h"
#include "reverie/gpus.h"
#include "reverie/recost.h"
#include "reverie/transform.h"
#include "reverie/units.h"
#include "reverie/validate.h"
#include <string.h>

static const rv_param_spec dgc_params[] = {
    { "density", RV_PARAM_NUMBER, "0.001", "x", "share of the gradient values sent (DGC: 0.001)", NULL },
    { "passes", RV_PARAM_NUMBER, "2", "x", "times compression reads and writes the gradient (DGC: top-k selection reads it, the residual update reads and writes it)", NULL },
    { "world", RV_PARAM_INTEGER, "0", "GPUs", "data-parallel ranks N; 0: the trace's world size", NULL },
    { "gpus_per_node", RV_PARAM_INTEGER, "8", "GPUs", "GPUs sharing the intra-node link (an 8-GPU DGX/HGX node)", NULL },
    RV_CLUSTER_LINK_PARAM_SPECS,
    { "source_gpu", RV_PARAM_STRING, "", NULL, "the trace's GPU when its deviceProperties name none the catalogue knows", NULL },
    { NULL }
};

typedef struct {
    double density, passes;
    int world, gpus_per_node;
    rv_link intra, inter;
    const rv_cost_model *model;
} dgc_plan;

typedef struct {
    guint replaced;
    int64_t dense_ns, sparse_ns, kernels_ns, dense_bytes, sparse_bytes;
} dgc_tally;

/* The sparse all-gather's time and the payload S of the recorded all-reduce. */
static gboolean sparse_gather_ns(const rv_graph *graph, const dgc_plan *plan, const rv_task *task, int64_t *ns,
                                 int64_t *dense_bytes, int64_t *gathered_bytes, GError **error)
{
    const rv_collective_info *info = rv_task_collective(graph, task);
    int recorded_world = info->group_size > 0 ? info->group_size : rv_graph_world_size(graph);
    rv_cluster recorded = rv_cluster_for_ranks(recorded_world, plan->gpus_per_node, &plan->intra, &plan->inter);
    rv_cluster wanted = rv_cluster_for_ranks(plan->world, plan->gpus_per_node, &plan->intra, &plan->inter);
    /* the payload: recorded, or solved from the recorded time (the same model and cluster give it back) */
    rv_collective_recost_ns((rv_collective)info->op, (rv_collective)info->op, info->bytes, 1, task->duration_ns,
                            &recorded, &recorded, dense_bytes);
    *gathered_bytes = (int64_t)((double)plan->world * 2.0 * plan->density * (double)*dense_bytes);
    int64_t model_dense = rv_cluster_collective_ns((rv_collective)info->op, *dense_bytes, &recorded);
    int64_t model_sparse = rv_cluster_collective_ns(RV_COLL_ALL_GATHER, *gathered_bytes, &wanted);
    double t = model_dense > 0 ? (double)task->duration_ns * (double)model_sparse / (double)model_dense
                               : (double)model_sparse;
    return rv_task_duration_from(graph, -1, t, "the dgc parameters (density, world, bandwidth)", ns, error);
}

/* A kernel of `bytes` of streaming on the all-reduce's stream, after `after`. */
static int32_t insert_kernel(rv_graph *graph, const dgc_plan *plan, const rv_task *like, const char *name,
                             double bytes, int32_t after, GError **error)
{
    int64_t ns;
    if (!rv_task_duration_from(graph, -1, rv_cost_model_streaming_ns(plan->model, bytes),
                               "the dgc parameters (density, passes)", &ns, error))
        return -1;
    rv_task task = *like;
    task.kind = RV_TASK_KERNEL;
    task.flags = 0;
    task.name = rv_strings_intern(graph->strings, name);
    task.duration_ns = ns;
    task.host_overhead_ns = 0;
    task.correlation = -1;
    task.bytes = (int64_t)bytes;
    task.input_dims = -1;
    task.collective = 0;
    rv_insert_spec spec = { task, after, -1 };
    return rv_transform_insert(graph, &spec, error);
}

/* Per all-reduce (list order): its non-order predecessors and successors. */
static void neighbours(const rv_graph *graph, const GArray *allreduces, GPtrArray **before, GPtrArray **after)
{
    int32_t *slot = g_new(int32_t, MAX(rv_graph_task_count(graph), 1));
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) slot[id] = -1;
    *before = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    *after = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    for (guint i = 0; i < allreduces->len; i++) {
        slot[g_array_index(allreduces, int32_t, i)] = (int32_t)i;
        g_ptr_array_add(*before, g_array_new(FALSE, FALSE, sizeof(int32_t)));
        g_ptr_array_add(*after, g_array_new(FALSE, FALSE, sizeof(int32_t)));
    }
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        if (edge->kind == RV_EDGE_STREAM || edge->kind == RV_EDGE_THREAD) continue;
        if (slot[edge->to] >= 0) g_array_append_val(g_ptr_array_index(*before, slot[edge->to]), edge->from);
        if (slot[edge->from] >= 0) g_array_append_val(g_ptr_array_index(*after, slot[edge->from]), edge->to);
    }
    g_free(slot);
}

static gboolean compress_one(rv_graph *graph, const dgc_plan *plan, int32_t id, const GArray *before,
                             const GArray *after, dgc_tally *tally, GError **error)
{
    rv_task like = *rv_graph_task(graph, id);
    int64_t sparse_ns, dense_bytes, gathered;
    if (!sparse_gather_ns(graph, plan, &like, &sparse_ns, &dense_bytes, &gathered, error)) return FALSE;
    int32_t compress = insert_kernel(graph, plan, &like, "dgc top-k compression (momentum correction, threshold)",
                                     plan->passes * (double)dense_bytes, rv_graph_resource_previous(graph, id), error);
    if (compress < 0) return FALSE;
    int32_t decompress = insert_kernel(graph, plan, &like, "dgc decompression (scatter into the dense gradient)",
                                       (double)dense_bytes + (double)gathered, id, error);
    if (decompress < 0) return FALSE;
    for (guint i = 0; i < before->len; i++) rv_transform_add_edge(graph, g_array_index(before, int32_t, i), compress);
    rv_transform_add_edge(graph, compress, id);
    rv_transform_add_edge(graph, id, decompress);
    for (guint i = 0; i < after->len; i++) rv_transform_add_edge(graph, decompress, g_array_index(after, int32_t, i));
    tally->dense_ns += like.duration_ns;
    tally->sparse_ns += sparse_ns;
    tally->kernels_ns += rv_graph_task(graph, compress)->duration_ns + rv_graph_task(graph, decompress)->duration_ns;
    tally->dense_bytes += dense_bytes;
    tally->sparse_bytes += gathered;
    rv_transform_set_duration(graph, id, sparse_ns);
    rv_task *task = rv_graph_task(graph, id);
    task->name = rv_strings_intern(graph->strings, "ncclKernel_AllGather (dgc sparse gradients)");
    task->bytes = gathered;
    rv_collective_info info = { gathered, -1, rv_strings_intern(graph->strings, "dgc"), plan->world, -1, -1, 1,
                                RV_COLL_ALL_GATHER, RV_PARALLEL_DATA, RV_MATCH_NONE, 1 };
    task->collective = rv_graph_add_collective(graph, &info);
    tally->replaced++;
    return TRUE;
}

static gboolean read_plan(rv_graph *graph, const rv_params *params, dgc_plan *plan, GError **error)
{
    plan->density = rv_params_number(params, "density");
    plan->passes = rv_params_number(params, "passes");
    int64_t world = rv_params_integer(params, "world"), gpn = rv_params_integer(params, "gpus_per_node");
    if (!(plan->density > 0 && plan->density <= 1) || !(plan->passes >= 0 && plan->passes <= 100) || world < 0 ||
        world > 1000000 || gpn < 1 || gpn > 1000000) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE,
                    "need 0 < density <= 1, 0 <= passes <= 100, 0 <= world <= 1000000 and gpus_per_node >= 1");
        return FALSE;
    }
    plan->world = world > 0 ? (int)world : rv_graph_world_size(graph);
    plan->gpus_per_node = (int)gpn;
    return rv_params_cluster_links(params, &plan->intra, &plan->inter, error);
}

static void describe(GString *notes, const dgc_plan *plan, const dgc_tally *t)
{
    char *dense = rv_format_duration(t->dense_ns), *sparse = rv_format_duration(t->sparse_ns);
    char *kernels = rv_format_duration(t->kernels_ns);
    char *db = rv_format_bytes(t->dense_bytes), *sb = rv_format_bytes(t->sparse_bytes);
    g_string_append_printf(notes, "    density %g over %d ranks: %u all-reduces of %s -> sparse all-gathers of %s; "
                           "transfers %s -> %s, plus %s of compression and decompression kernels\n", plan->density,
                           plan->world, t->replaced, db, sb, dense, sparse, kernels);
    g_free(dense); g_free(sparse); g_free(kernels); g_free(db); g_free(sb);
}

static gboolean dgc_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    dgc_plan plan;
    if (!read_plan(graph, params, &plan, error)) return FALSE;
    if (graph->ranks->len > 1) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "dgc compresses one rank's gradients; this job has %u ranks - give it one rank's trace",
                    graph->ranks->len);
        return FALSE;
    }
    GArray *allreduces = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++)
        if (rv_task_is_data_allreduce(graph, rv_graph_task(graph, id))) g_array_append_val(allreduces, id);
    if (allreduces->len == 0) {
        g_array_unref(allreduces);
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "no data-parallel all-reduce to compress: record with DDP, or run ddp first");
        return FALSE;
    }
    if (plan.density * plan.world >= 1) {
        g_array_unref(allreduces);
        g_string_append_printf(output->notes, "    density %g >= 1/%d: a sparse all-gather would move at least the bytes "
                               "of the dense all-reduce; gradients stay dense, graph unchanged\n", plan.density, plan.world);
        return TRUE;
    }
    rv_gpu_catalogue *catalogue = rv_gpu_catalogue_load_default(error);
    const rv_gpu *gpu = catalogue ? rv_gpu_of_graph(catalogue, graph, rv_params_string(params, "source_gpu"), "source_gpu",
                                                    error) : NULL;
    gboolean ok = gpu != NULL;
    rv_cost_model *model = ok ? rv_cost_model_new(graph, gpu, TRUE) : NULL;
    plan.model = model;
    GPtrArray *before = NULL, *after = NULL;
    if (ok) neighbours(graph, allreduces, &before, &after);
    dgc_tally tally = { 0 };
    for (guint i = 0; i < allreduces->len && ok; i++)
        ok = compress_one(graph, &plan, g_array_index(allreduces, int32_t, i), g_ptr_array_index(before, i),
                          g_ptr_array_index(after, i), &tally, error);
    if (ok) describe(output->notes, &plan, &tally);
    if (before) g_ptr_array_unref(before);
    if (after) g_ptr_array_unref(after);
    if (model) rv_cost_model_free(model);
    if (catalogue) rv_gpu_catalogue_free(catalogue);
    g_array_unref(allreduces);
    return ok;
}

/* The composition law (compose.h): data-parallel all-reduces become sparse all-gathers between compression
 * kernels. */
static const rv_plugin_effects dgc_effects = {
    .reads = RV_ASPECT_DATA_COMM | RV_ASPECT_CLUSTER | RV_ASPECT_DEVICE,
    .reads_time = RV_ASPECT_DATA_COMM,
    .scales = 0,
    .reprices = 0,
    .rewrites = RV_ASPECT_DATA_COMM | RV_ASPECT_BACKWARD,
    .order = RV_ORDER(RV_STAGE_PARALLEL, 50),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "dgc",
    "Deep Gradient Compression: data-parallel all-reduces as sparse all-gathers with top-k compression kernels",
    dgc_params, dgc_apply, &dgc_effects,
};
