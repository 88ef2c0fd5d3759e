/*
 * blueconnect.c - BlueConnect (Cho et al., SysML 2019; Daydream appendix
 * A.6, Algorithm 8): each data-parallel all-reduce decomposed into
 * reduce-scatters and all-gathers over a hierarchy of links, so that the
 * intra-node and inter-node links work at the same time.
 *
 *   reverie whatif trace.json.gz --opt ddp:world=32 --opt blueconnect
 *   reverie whatif traces/hta_transformer_ddp_v100_rank1.2steps.json.gz --opt blueconnect:world=32,gpus_per_node=8
 *
 * MODEL.  world = p1 x p2 ranks: p1 = gpus_per_node GPUs in each of p2
 * nodes (Algorithm 8's factorization, two levels).  An all-reduce of S
 * bytes becomes, in order:
 *   RS(p1) of S      on the intra-node link (where the all-reduce ran);
 *   RS(p2) of S/p1   on the inter-node link;
 *   AG(p2) of S/p1   on the inter-node link;
 *   AG(p1) of S      on the intra-node link.
 * The inserted parts run on two communication streams of the all-reduce's
 * GPU, one per level (transform.h; the contention rule and the reports see
 * them as that GPU's communication).
 * Whatever waited for the all-reduce waits for the last all-gather; the
 * all-reduce's stream is free after the first reduce-scatter, so the next
 * bucket's reduce-scatter overlaps this one's inter-node steps: the
 * parallel channels of the paper.  Each part is re-costed from the recorded
 * all-reduce with comm.h's model (rv_collective_recost_ns): recorded x
 * model(part) / model(recorded all-reduce on the recorded world, ring over
 * the slower link when it spans nodes), so on one node (p2 = 1) the parts
 * add up to the recorded time.  The parts are data-parallel collectives of
 * p1 or p2 ranks.  world=1 leaves the graph unchanged.
 */
#include "reverie/plugin.h"
#include "reverie/comm.h"
#include "reverie/error.h"
#include "reverie/recost.h"
#include "reverie/transform.h"
#include "reverie/units.h"
#include "reverie/validate.h"
#include <string.h>

static const rv_param_spec blueconnect_params[] = {
    { "world", RV_PARAM_INTEGER, "0", "GPUs", "data-parallel ranks (gpus_per_node x nodes); 0: the trace's world size", NULL },
    { "gpus_per_node", RV_PARAM_INTEGER, "8", "GPUs", "first level of the factorization: GPUs on the intra-node link (an 8-GPU DGX/HGX node)", NULL },
    RV_CLUSTER_LINK_PARAM_SPECS,
    { NULL }
};

typedef struct {
    int world, per_node, nodes;
    rv_link intra, inter;
    int32_t intra_channel, inter_channel;
    int32_t tails[2];   /* last task inserted on each channel */
} hierarchy;

typedef struct {
    rv_collective op;
    int level;          /* 0 intra (p1 ranks), 1 inter (p2 ranks) */
    const char *name;
} part;

static const part parts[4] = {
    { RV_COLL_REDUCE_SCATTER, 0, "ncclKernel_ReduceScatter (blueconnect intra)" },
    { RV_COLL_REDUCE_SCATTER, 1, "ncclKernel_ReduceScatter (blueconnect inter)" },
    { RV_COLL_ALL_GATHER, 1, "ncclKernel_AllGather (blueconnect inter)" },
    { RV_COLL_ALL_GATHER, 0, "ncclKernel_AllGather (blueconnect intra)" },
};

/* The time of one part, from the recorded all-reduce's. */
static gboolean part_ns(const rv_graph *graph, const hierarchy *h, const rv_task *task, const rv_collective_info *info,
                        const part *p, int64_t *ns, int64_t *bytes, GError **error)
{
    int recorded_world = info->group_size > 0 ? info->group_size : rv_graph_world_size(graph);
    rv_cluster recorded = rv_cluster_for_ranks(recorded_world, h->per_node, &h->intra, &h->inter);
    /* one level: p1 GPUs on one node's link, or p2 nodes with one GPU each on the inter-node link */
    rv_cluster level = { 1, p->level == 0 ? h->per_node : h->nodes, p->level == 0 ? h->intra : h->inter,
                         p->level == 0 ? h->intra : h->inter };
    int64_t t = rv_collective_recost_ns((rv_collective)info->op, p->op, info->bytes, p->level == 0 ? 1 : h->per_node,
                                        task->duration_ns, &recorded, &level, bytes);
    if (p->level == 1 && *bytes > 0) *bytes /= h->per_node;
    return rv_task_duration_from(graph, -1, (double)t, "the blueconnect links (bandwidth, latency, world)", ns, error);
}

static int32_t add_part_collective(rv_graph *graph, const hierarchy *h, const part *p, int64_t bytes)
{
    rv_collective_info info = { bytes, -1, rv_strings_intern(graph->strings, p->level == 0 ? "blueconnect intra"
                                                                                            : "blueconnect inter"),
                                p->level == 0 ? h->per_node : h->nodes, -1, -1, 1, (uint8_t)p->op,
                                RV_PARALLEL_DATA, RV_MATCH_NONE, 1 };
    return rv_graph_add_collective(graph, &info);
}

/* Per all-reduce (in list order), the live tasks that waited for it other
 * than through its stream's order: one pass over the edges. */
static GPtrArray *waiters_of(const rv_graph *graph, const GArray *allreduces)
{
    int32_t *slot = g_new(int32_t, MAX(rv_graph_task_count(graph), 1));
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) slot[id] = -1;
    GPtrArray *lists = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    int32_t *next_on_stream = g_new(int32_t, allreduces->len + 1);
    for (guint i = 0; i < allreduces->len; i++) {
        int32_t id = g_array_index(allreduces, int32_t, i);
        slot[id] = (int32_t)i;
        next_on_stream[i] = rv_graph_resource_next(graph, id);
        g_ptr_array_add(lists, g_array_new(FALSE, FALSE, sizeof(int32_t)));
    }
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        int32_t i = slot[edge->from];
        if (i < 0 || edge->to == next_on_stream[i]) continue;
        if (rv_graph_task((rv_graph *)graph, edge->to)->flags & RV_TASK_FLAG_REMOVED) continue;
        g_array_append_val(g_ptr_array_index(lists, i), edge->to);
    }
    g_free(slot);
    g_free(next_on_stream);
    return lists;
}

/* One all-reduce decomposed: it becomes the first part, the others follow
 * on the channels, and its waiters wait for the last. */
static gboolean decompose(rv_graph *graph, hierarchy *h, int32_t id, const GArray *waiters, int64_t *moved,
                          GError **error)
{
    rv_task like = *rv_graph_task(graph, id);
    rv_collective_info info = *rv_task_collective(graph, &like);
    int64_t ns[4], bytes[4];
    for (int k = 0; k < 4; k++)
        if (!part_ns(graph, h, &like, &info, &parts[k], &ns[k], &bytes[k], error)) return FALSE;
    rv_transform_set_duration(graph, id, ns[0]);
    rv_task *first = rv_graph_task(graph, id);
    first->name = rv_strings_intern(graph->strings, parts[0].name);
    first->bytes = bytes[0];
    first->collective = add_part_collective(graph, h, &parts[0], bytes[0]);
    int32_t previous = id;
    for (int k = 1; k < 4; k++) {
        int32_t channel = parts[k].level == 0 ? h->intra_channel : h->inter_channel;
        rv_task task = like;
        task.kind = RV_TASK_COMM;
        task.flags = 0;
        task.resource = channel;
        task.name = rv_strings_intern(graph->strings, parts[k].name);
        task.duration_ns = ns[k];
        task.host_overhead_ns = 0;
        task.correlation = -1;
        task.bytes = bytes[k];
        task.collective = add_part_collective(graph, h, &parts[k], bytes[k]);
        int32_t *tail = &h->tails[parts[k].level == 0 ? 0 : 1];
        rv_insert_spec spec = { task, *tail, -1 };
        int32_t inserted = rv_transform_insert(graph, &spec, error);
        if (inserted < 0) return FALSE;
        *tail = inserted;
        rv_transform_add_edge(graph, previous, inserted);
        previous = inserted;
    }
    for (guint i = 0; i < waiters->len; i++) rv_transform_add_edge(graph, previous, g_array_index(waiters, int32_t, i));
    for (int k = 0; k < 4; k++) *moved += ns[k];
    return TRUE;
}

static gboolean read_hierarchy(rv_graph *graph, const rv_params *params, hierarchy *h, GError **error)
{
    int64_t world = rv_params_integer(params, "world"), per_node = rv_params_integer(params, "gpus_per_node");
    if (world < 0 || world > 1000000 || per_node < 1 || per_node > 1000000) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "need 0 <= world <= 1000000 and gpus_per_node >= 1");
        return FALSE;
    }
    h->world = world > 0 ? (int)world : rv_graph_world_size(graph);
    h->per_node = (int)MIN(per_node, h->world);
    if (h->world % h->per_node != 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "world=%d is not a whole number of nodes of gpus_per_node=%d GPUs",
                    h->world, h->per_node);
        return FALSE;
    }
    h->nodes = h->world / h->per_node;
    h->tails[0] = h->tails[1] = -1;
    return rv_params_cluster_links(params, &h->intra, &h->inter, error);
}

static gboolean blueconnect_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    hierarchy h;
    if (!read_hierarchy(graph, params, &h, error)) return FALSE;
    if (graph->ranks->len > 1) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "blueconnect decomposes one rank's all-reduces; this job has %u ranks - give it one rank's trace",
                    graph->ranks->len);
        return FALSE;
    }
    GArray *allreduces = g_array_new(FALSE, FALSE, sizeof(int32_t));
    int64_t before = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++)
        if (rv_task_is_data_allreduce(graph, rv_graph_task(graph, id))) {
            g_array_append_val(allreduces, id);
            before += rv_graph_task(graph, id)->duration_ns;
        }
    /* the channels take the parts in the order the all-reduces ran (ids need not follow it) */
    rv_tasks_sort_recorded(graph, allreduces);
    if (allreduces->len == 0) {
        g_array_unref(allreduces);
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "no data-parallel all-reduce to decompose: record with DDP, or run ddp first");
        return FALSE;
    }
    if (h.world == 1) {
        g_array_unref(allreduces);
        g_string_append(output->notes, "    world=1: no all-reduce to decompose, graph unchanged\n");
        return TRUE;
    }
    /* the waiters first: the inserted parts add edges of their own */
    GPtrArray *waiters = waiters_of(graph, allreduces);
    /* the parts are NCCL kernels on the all-reduces' GPU, a stream per level */
    int32_t first = g_array_index(allreduces, int32_t, 0);
    h.intra_channel = rv_transform_add_comm_stream(graph, first, "nccl stream (blueconnect intra)");
    h.inter_channel = rv_transform_add_comm_stream(graph, first, "nccl stream (blueconnect inter)");
    if (h.intra_channel < 0) h.intra_channel = rv_transform_add_channel(graph, "blueconnect intra");
    if (h.inter_channel < 0) h.inter_channel = rv_transform_add_channel(graph, "blueconnect inter");
    int64_t after = 0;
    gboolean ok = TRUE;
    for (guint i = 0; i < allreduces->len && ok; i++)
        ok = decompose(graph, &h, g_array_index(allreduces, int32_t, i), g_ptr_array_index(waiters, i), &after, error);
    if (ok) {
        char *b = rv_format_duration(before), *a = rv_format_duration(after);
        g_string_append_printf(output->notes, "    %u data-parallel all-reduces over %d = %d GPUs x %d nodes -> "
                               "reduce-scatter, reduce-scatter, all-gather, all-gather: %s -> %s of transfers "
                               "(on two links at once)\n", allreduces->len, h.world, h.per_node, h.nodes, b, a);
        g_free(b); g_free(a);
    }
    g_ptr_array_unref(waiters);
    g_array_unref(allreduces);
    return ok;
}

/* The composition law (compose.h): data-parallel all-reduces become reduce-scatters and all-gathers over two
 * levels of links. */
static const rv_plugin_effects blueconnect_effects = {
    .reads = RV_ASPECT_DATA_COMM | RV_ASPECT_CLUSTER,
    .reads_time = RV_ASPECT_DATA_COMM,
    .scales = 0,
    .reprices = 0,
    .rewrites = RV_ASPECT_DATA_COMM,
    .order = RV_ORDER(RV_STAGE_PARALLEL, 60),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "blueconnect",
    "BlueConnect: data-parallel all-reduces as reduce-scatters and all-gathers over intra- and inter-node links",
    blueconnect_params, blueconnect_apply, &blueconnect_effects,
};
