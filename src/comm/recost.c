/*
 * recost.c - re-cost a graph's collectives for another world size or
 * cluster (recost.h).
 */
#include "reverie/recost.h"
#include "reverie/error.h"
#include "reverie/transform.h"
#include "reverie/validate.h"
#include <string.h>

int rv_graph_world_size(const rv_graph *graph)
{
    if (graph->world_size > 0) return (int)MIN(graph->world_size, 1 << 24);
    int64_t world = 1;
    for (guint c = 0; c < graph->collectives->len; c++) {
        const rv_collective_info *info = &g_array_index(graph->collectives, rv_collective_info, c);
        if (info->parallelism != RV_PARALLEL_TENSOR) world = MAX(world, info->group_size);
    }
    return (int)CLAMP(world, 1, 1 << 24);
}

/* The process groups (string ids) that hold a tensor-parallel collective. */
static GHashTable *tensor_groups(const rv_graph *graph)
{
    GHashTable *groups = g_hash_table_new(g_direct_hash, g_direct_equal);
    for (guint c = 0; c < graph->collectives->len; c++) {
        const rv_collective_info *info = &g_array_index(graph->collectives, rv_collective_info, c);
        if (info->parallelism == RV_PARALLEL_TENSOR) g_hash_table_add(groups, GINT_TO_POINTER(info->group + 1));
    }
    return groups;
}

static rv_parallelism parallelism_of(const rv_collective_info *info, GHashTable *tensor)
{
    return g_hash_table_contains(tensor, GINT_TO_POINTER(info->group + 1)) ? RV_PARALLEL_TENSOR
                                                                          : (rv_parallelism)info->parallelism;
}

/* A group that may be data parallel: not tensor or pipeline, not a pair. */
static gboolean data_like(const rv_collective_info *info, rv_parallelism parallelism)
{
    return parallelism != RV_PARALLEL_TENSOR && parallelism != RV_PARALLEL_PIPELINE && info->peer < 0;
}

static void sizes_with(const rv_graph *graph, GHashTable *tensor_set, int *data, int *tensor)
{
    int largest_data = 0, largest_tensor = 1;
    for (guint c = 0; c < graph->collectives->len; c++) {
        const rv_collective_info *info = &g_array_index(graph->collectives, rv_collective_info, c);
        rv_parallelism parallelism = parallelism_of(info, tensor_set);
        if (parallelism == RV_PARALLEL_TENSOR) largest_tensor = MAX(largest_tensor, info->group_size);
        else if (data_like(info, parallelism)) largest_data = MAX(largest_data, info->group_size);
    }
    *tensor = largest_tensor;
    *data = largest_data > 0 ? largest_data : MAX(1, rv_graph_world_size(graph) / largest_tensor);
}

void rv_graph_parallel_sizes(const rv_graph *graph, int *data, int *tensor)
{
    GHashTable *tensor_set = tensor_groups(graph);
    sizes_with(graph, tensor_set, data, tensor);
    g_hash_table_destroy(tensor_set);
}

static gboolean is_all_reduce(int op)
{
    return op == RV_COLL_ALLREDUCE_RING || op == RV_COLL_ALLREDUCE_TREE || op == RV_COLL_ALLREDUCE_HIER;
}

/* What one collective becomes: its group's size before and after, and the
 * algorithms that cost it. */
typedef struct {
    gboolean selected;
    int before, after;
    rv_collective recorded_op, wanted_op;
} collective_plan;

/* The recorded degrees the group rule compares with. */
typedef struct {
    int data, tensor;
    GHashTable *tensor_groups;
} recorded_sizes;

static collective_plan plan_collective(const rv_collective_info *info, const rv_recost_plan *plan,
                                       const recorded_sizes *sizes)
{
    collective_plan out = { FALSE, 0, 0, 0, 0 };
    rv_parallelism parallelism = parallelism_of(info, sizes->tensor_groups);
    if (!(plan->parallelism & (1u << parallelism))) return out;
    if (info->op == RV_COLLECTIVE_OP_UNKNOWN || info->op >= RV_COLL_COUNT) return out;
    out.selected = TRUE;
    gboolean tensor = parallelism == RV_PARALLEL_TENSOR;
    out.before = info->group_size > 0 ? info->group_size : tensor ? sizes->tensor : sizes->data;
    /* the data-parallel groups take the new size; tensor-parallel ones only when told; the rest keep theirs */
    if (tensor) out.after = plan->tensor > 0 && out.before == sizes->tensor ? plan->tensor : out.before;
    else out.after = data_like(info, parallelism) && out.before == sizes->data ? plan->world : out.before;
    out.recorded_op = (rv_collective)info->op;
    out.wanted_op = out.recorded_op;
    if (plan->all_reduce >= 0 && is_all_reduce(info->op)) out.wanted_op = (rv_collective)plan->all_reduce;
    return out;
}

/* The task that carries a collective's time: a transfer, not an arrival or a meeting. */
static gboolean is_transfer(const rv_graph *graph, const rv_task *task)
{
    return !(task->flags & (RV_TASK_FLAG_REMOVED | RV_TASK_FLAG_RENDEZVOUS)) && task->collective > 0 &&
           (task->kind == RV_TASK_COMM || g_array_index(graph->resources, rv_resource, task->resource).kind == RV_RES_CHANNEL);
}

static gboolean recost_task(rv_graph *graph, int32_t id, const collective_plan *cp, const rv_recost_plan *plan,
                            const char *cause, int64_t *bytes_used, GError **error)
{
    rv_task *task = rv_graph_task(graph, id);
    const rv_collective_info *info = rv_task_collective(graph, task);
    rv_cluster before = rv_cluster_for_ranks(cp->before, plan->gpus_per_node, &plan->intra, &plan->inter);
    rv_cluster after = rv_cluster_for_ranks(cp->after, plan->gpus_per_node, &plan->intra, &plan->inter);
    int64_t wanted = rv_collective_recost_ns(cp->recorded_op, cp->wanted_op, info->bytes,
                                             MAX(plan->payload_divisor, 1), task->duration_ns, &before, &after,
                                             bytes_used);
    int64_t checked;
    if (wanted < 0) wanted = task->duration_ns; /* the model cannot cost it: left as it was */
    if (!rv_task_duration_from(graph, id, (double)wanted, cause, &checked, error)) return FALSE;
    rv_transform_set_duration(graph, id, checked);
    return TRUE;
}

gboolean rv_graph_recost_collectives(rv_graph *graph, const rv_recost_plan *plan, const char *cause,
                                     rv_recost_summary *summary, GError **error)
{
    memset(summary, 0, sizeof *summary);
    int recorded_world = rv_graph_world_size(graph);
    summary->recorded_world = recorded_world;
    recorded_sizes sizes = { 0, 0, tensor_groups(graph) };
    sizes_with(graph, sizes.tensor_groups, &sizes.data, &sizes.tensor);
    guint count = graph->collectives->len;
    collective_plan *plans = g_new0(collective_plan, count + 1);
    int64_t *payload = g_new0(int64_t, count + 1);
    gboolean *counted = g_new0(gboolean, count + 1);
    for (guint c = 0; c < count; c++) {
        const rv_collective_info *info = &g_array_index(graph->collectives, rv_collective_info, c);
        plans[c + 1] = plan_collective(info, plan, &sizes);
        if (!plans[c + 1].selected && (plan->parallelism & (1u << info->parallelism))) summary->unknown_operation++;
    }
    gboolean ok = TRUE;
    for (int32_t id = 0; id < rv_graph_task_count(graph) && ok; id++) {
        rv_task *task = rv_graph_task(graph, id);
        if (!is_transfer(graph, task) || !plans[task->collective].selected) continue;
        int64_t before = task->duration_ns, bytes_used = 0;
        ok = recost_task(graph, id, &plans[task->collective], plan, cause, &bytes_used, error);
        summary->tasks++;
        summary->before_ns += before;
        summary->after_ns += rv_graph_task(graph, id)->duration_ns;
        if (!counted[task->collective]) {
            counted[task->collective] = TRUE;
            payload[task->collective] = bytes_used;
        }
    }
    for (guint c = 0; c < count && ok; c++) {
        if (!counted[c + 1]) continue;
        rv_collective_info *info = &g_array_index(graph->collectives, rv_collective_info, c);
        summary->collectives++;
        summary->bytes += payload[c + 1];
        if (info->bytes <= 0) summary->inferred_payloads++;
        info->group_size = plans[c + 1].after;
        if (plans[c + 1].wanted_op != plans[c + 1].recorded_op) info->op = (uint8_t)plans[c + 1].wanted_op;
    }
    /* the world grows as its groups do; what lies beyond data x tensor (pipeline stages) stays */
    int tensor_after = plan->tensor > 0 ? plan->tensor : sizes.tensor;
    int64_t world = (int64_t)MAX(1, recorded_world / MAX(1, sizes.data * sizes.tensor)) * plan->world * tensor_after;
    if (ok && summary->collectives > 0) graph->world_size = MIN(world, 1 << 24);
    g_hash_table_destroy(sizes.tensor_groups);
    g_free(plans);
    g_free(payload);
    g_free(counted);
    return ok;
}

gboolean rv_params_cluster_links(const rv_params *params, rv_link *intra, rv_link *inter, GError **error)
{
    *inter = rv_link_make(rv_params_bandwidth(params, "bandwidth"), rv_params_duration_ns(params, "latency"), 1.0);
    *intra = rv_link_make(rv_params_bandwidth(params, "intra_bandwidth"), rv_params_duration_ns(params, "intra_latency"),
                          1.0);
    return rv_link_check(inter, error) && rv_link_check(intra, error);
}
