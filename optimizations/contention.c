/*
 * contention.c - turn on the simulator's contention rule (contention.h):
 * communication and compute on one GPU slow each other while they overlap.
 *
 *   reverie whatif trace.json.gz --opt contention
 *   reverie whatif trace.json.gz --opt contention:comm_slowdown=1.34,compute_slowdown=1
 *
 * The graph is not rewritten; the replay follows who runs on each GPU and
 * stretches what overlaps.  A what-if that composes it with other plugins
 * compares a contended prediction with a plain baseline, so its speedup
 * includes the contention itself: apply it alone first to see that part.
 * Both factors 1 leave the graph as it was (the rule stays off).
 */
#include "reverie/plugin.h"
#include "reverie/contention.h"
#include "reverie/error.h"

static const rv_param_spec contention_params[] = {
    { "comm_slowdown", RV_PARAM_NUMBER, "1.34", "x",
      "communication's time factor while compute runs on its GPU (Daydream: NCCL 34% slower under compute)", NULL },
    { "compute_slowdown", RV_PARAM_NUMBER, "1.11", "x",
      "compute's time factor while communication runs on its GPU (NCCL's ~8 of 80 SMs on a V100 node)", NULL },
    { NULL }
};

/* Communication tasks the rule can act on: on a GPU stream, not a rendezvous. */
static guint gpu_communication(const rv_graph *graph)
{
    guint count = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        const rv_resource *res = &g_array_index(graph->resources, rv_resource, task->resource);
        if (task->kind == RV_TASK_COMM && res->kind == RV_RES_GPU_STREAM &&
            !(task->flags & (RV_TASK_FLAG_REMOVED | RV_TASK_FLAG_RENDEZVOUS)))
            count++;
    }
    return count;
}

static gboolean contention_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    double comm = rv_params_number(params, "comm_slowdown"), compute = rv_params_number(params, "compute_slowdown");
    if (!rv_contention_check(comm, compute, error)) return FALSE;
    if (comm == 1.0 && compute == 1.0) {
        g_string_append(output->notes, "    both slowdowns 1: no contention, graph unchanged\n");
        return TRUE;
    }
    guint tasks = gpu_communication(graph);
    if (tasks == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "no communication task on a GPU stream: contention has nothing to slow down");
        return FALSE;
    }
    rv_contention rule = { TRUE, comm, compute };
    graph->contention = rule;
    g_string_append_printf(output->notes,
                           "    %u communication tasks on GPU streams run %gx slower while compute overlaps them on "
                           "their GPU, and compute %gx slower while they run\n", tasks, comm, compute);
    return TRUE;
}

/* The composition law (compose.h): the contention rule turned on. */
static const rv_plugin_effects contention_effects = {
    .reads = RV_ASPECT_COMM,
    .reads_time = 0,
    .scales = 0,
    .reprices = 0,
    .rewrites = RV_ASPECT_CONTENTION,
    .order = RV_ORDER(RV_STAGE_CLUSTER, 40),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "contention",
    "communication and compute on one GPU slow each other while they overlap (a rule of the replay)",
    contention_params, contention_apply, &contention_effects,
};
