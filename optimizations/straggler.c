/*
 * straggler.c - one rank slower than the others: a throttled GPU, a noisy
 * host.  Its compute takes `factor` times as long; in a job of several
 * ranks the others then wait for it in their collectives, and the report
 * names who waited for whom.
 *
 *   reverie whatif traces/param_dlrm_v100_8ranks --opt straggler:rank=3,factor=1.5
 *   reverie whatif job/ --opt 'straggler:rank=0,factor=2,part=cpu'
 *
 * part=all (the default: a slower node) scales both of what follows;
 * part=gpu the rank's kernels, copies and sets but not its collectives,
 * whose transfer the network sets; part=cpu its CPU calls, the host time
 * before them and its data loading.  What the rank waited for (blocking
 * calls' waits, its lag into the recorded window) is not its work and
 * stays.
 */
#include "reverie/plugin.h"
#include "reverie/error.h"
#include "reverie/transform.h"
#include "reverie/validate.h"
#include <string.h>

static const rv_param_spec straggler_params[] = {
    { "rank", RV_PARAM_INTEGER, NULL, "", "the slow rank (its distributedInfo rank; required)", NULL },
    { "factor", RV_PARAM_NUMBER, "2", "x", "its compute takes this many times as long (an example: give yours)", NULL },
    { "part", RV_PARAM_CHOICE, "all", NULL, "what is slower: the GPU, the host, or both (a slower node)", "all|gpu|cpu" },
    { NULL }
};

/* The rank index (into graph->ranks) of rank number `rank`, or -1. */
static int32_t rank_index_of(const rv_graph *graph, int64_t rank)
{
    if (graph->ranks->len == 0) return rank == MAX(graph->rank, 0) ? 0 : -1;
    for (guint r = 0; r < graph->ranks->len; r++)
        if (g_array_index(graph->ranks, rv_rank, r).rank == rank) return (int32_t)r;
    return -1;
}

static char *ranks_held(const rv_graph *graph)
{
    GString *text = g_string_new(NULL);
    for (guint r = 0; r < graph->ranks->len && r < 16; r++)
        g_string_append_printf(text, "%s%" G_GINT64_FORMAT, r ? ", " : "", g_array_index(graph->ranks, rv_rank, r).rank);
    if (graph->ranks->len > 16) g_string_append(text, ", ...");
    if (graph->ranks->len == 0) g_string_append_printf(text, "%" G_GINT64_FORMAT, MAX(graph->rank, 0));
    return g_string_free(text, FALSE);
}

static gboolean is_compute(const rv_task *task, const char *part)
{
    if (task->flags & (RV_TASK_FLAG_REMOVED | RV_TASK_FLAG_RENDEZVOUS)) return FALSE;
    gboolean gpu = (task->flags & RV_TASK_FLAG_GPU) && task->kind != RV_TASK_COMM;
    gboolean cpu = task->kind == RV_TASK_CPU || task->kind == RV_TASK_SYNC || task->kind == RV_TASK_DATALOAD;
    /* a blocking call's wait (its tail) is not the host's work: its edge sets it */
    if (task->kind == RV_TASK_SYNC) cpu = FALSE;
    if (strcmp(part, "gpu") == 0) return gpu;
    if (strcmp(part, "cpu") == 0) return cpu;
    return gpu || cpu;
}

static gboolean straggler_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    int64_t rank = rv_params_integer(params, "rank");
    double factor = rv_params_number(params, "factor");
    const char *part = rv_params_string(params, "part");
    int32_t index = rank_index_of(graph, rank);
    if (index < 0) {
        char *held = ranks_held(graph);
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "rank=%" G_GINT64_FORMAT ": the graph holds rank%s %s", rank,
                    graph->ranks->len > 1 ? "s" : "", held);
        g_free(held);
        return FALSE;
    }
    GArray *tasks = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task(graph, id);
        if (rv_task_rank_index(graph, task) == index && is_compute(task, part)) g_array_append_val(tasks, id);
    }
    char *cause = g_strdup_printf("factor=%s", rv_params_string(params, "factor"));
    gboolean ok = tasks->len > 0 && rv_tasks_check_scale(graph, tasks, factor, cause, error);
    g_free(cause);
    if (tasks->len == 0)
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "rank %" G_GINT64_FORMAT " has no %s work to slow down", rank,
                    strcmp(part, "all") == 0 ? "CPU or GPU" : strcmp(part, "gpu") == 0 ? "GPU" : "CPU");
    if (ok) {
        rv_transform_scale(graph, tasks, factor);
        if (strcmp(part, "gpu") != 0) rv_transform_scale_host_overhead(graph, tasks, factor);
        g_string_append_printf(output->notes, "    rank %" G_GINT64_FORMAT ": %u %s tasks take %gx as long%s\n", rank,
                               tasks->len, strcmp(part, "all") == 0 ? "CPU and GPU" : strcmp(part, "gpu") == 0 ? "GPU" : "CPU",
                               factor,
                               rv_graph_task_count(graph) > 0 && graph->ranks->len <= 1
                                   ? " (a rank alone: nobody waits for it here)" : "");
    }
    g_array_unref(tasks);
    return ok;
}

/* The composition law (compose.h): one rank's compute times a factor. */
static const rv_plugin_effects straggler_effects = {
    .reads = RV_ASPECT_CLUSTER,
    .reads_time = 0,
    .scales = RV_ASPECT_HOST | RV_ASPECT_GPU_WORK,
    .reprices = 0,
    .rewrites = 0,
    .order = RV_ORDER(RV_STAGE_CLUSTER, 30),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "straggler", "one rank's compute factor times slower: the others wait for it in collectives",
    straggler_params, straggler_apply, &straggler_effects,
};
