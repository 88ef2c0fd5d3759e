/*
 * peers.c - a rank replayed without its peers (job.h): each of its
 * collective kernels becomes a wait for the peers and a transfer.
 *
 * A rank's NCCL/RCCL kernel starts when that rank arrives and ends when the
 * data has moved, after the last peer arrived: its recorded duration holds
 * the wait for the others as well as the transfer.  Alone, the peers'
 * arrivals are not in the graph, so the kernel is split in two on its own
 * stream:
 *   - a wait for the peers (kind SYNC, flagged RV_TASK_FLAG_RENDEZVOUS like
 *     a joint job's arrival, so plugins that re-cost communication leave it
 *     alone), lasting the recorded wait: the peers' lateness stays what it
 *     was unless a plugin says otherwise (straggler);
 *   - the transfer, the kernel itself, lasting what the transfer took.
 * The transfer is the fastest recorded instance of the same collective
 * (same kernel, operation, payload and group size): the time the data took
 * when the peers were there in time.  A collective recorded once has no
 * faster instance to compare with and is all transfer; so is one whose
 * payload the trace does not give (kernels of one name then move anything
 * from a scalar to a bucket of gradients, and their fastest says nothing
 * about the others): `info` counts both.  (The comm model is
 * not used here: the recorded cluster's links and their efficiency are
 * unknown, and a datasheet link would call most of any kernel a wait.)
 * With ten or more instances the 10th percentile stands in for the
 * fastest, so one odd short kernel cannot call every other one a wait.
 *
 * rv_job_join merges the two back before it matches the ranks: joined, the
 * wait comes from the other ranks' replayed arrivals instead.
 */
#include "reverie/job.h"
#include "reverie/stats.h"
#include <string.h>

/* Is the graph one rank of a larger job?  A world size over one, or a
 * collective whose group is larger than one. */
static gboolean has_peers(const rv_graph *graph)
{
    if (graph->world_size > 1) return TRUE;
    if (graph->world_size == 1) return FALSE;
    for (guint c = 0; c < graph->collectives->len; c++)
        if (g_array_index(graph->collectives, rv_collective_info, c).group_size > 1) return TRUE;
    return FALSE;
}

/* A recorded collective kernel whose payload the trace gives: without it,
 * kernels of one name may move anything from a scalar to a bucket of
 * gradients, and the fastest of them says nothing about the others. */
static gboolean is_recorded_collective(const rv_graph *graph, const rv_task *task)
{
    const rv_collective_info *info = rv_task_collective(graph, task);
    return task->kind == RV_TASK_COMM && (task->flags & RV_TASK_FLAG_GPU) &&
           !(task->flags & (RV_TASK_FLAG_REMOVED | RV_TASK_FLAG_RENDEZVOUS | RV_TASK_FLAG_INSERTED)) &&
           info != NULL && info->bytes > 0;
}

/* "name/op/bytes/group": the collectives that should take the same time. */
static char *signature(const rv_graph *graph, const rv_task *task)
{
    const rv_collective_info *info = rv_task_collective(graph, task);
    return g_strdup_printf("%d/%u/%" G_GINT64_FORMAT "/%d", task->name, info->op, info->bytes, info->group_size);
}

/* Per signature, the recorded durations of its kernels. */
static GHashTable *durations_by_signature(const rv_graph *graph)
{
    GHashTable *table = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_array_unref);
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        if (!is_recorded_collective(graph, task)) continue;
        char *key = signature(graph, task);
        GArray *durations = g_hash_table_lookup(table, key);
        if (durations == NULL) {
            durations = g_array_new(FALSE, FALSE, sizeof(int64_t));
            g_hash_table_insert(table, g_strdup(key), durations);
        }
        g_array_append_val(durations, task->duration_ns);
        g_free(key);
    }
    return table;
}

static int64_t transfer_of(GArray *durations)
{
    return rv_quantile_int64(durations, durations->len >= 10 ? 0.1 : 0.0, 0);
}

/* Insert the wait before kernel `id`; what led to the kernel now leads to
 * the wait, which leads to the kernel.  Edges are rewired in place (the
 * caller adds the new ones after its pass over the old ones). */
static int32_t add_wait(rv_graph *graph, int32_t id, int64_t wait_ns, int32_t wait_name)
{
    rv_task wait = *rv_graph_task(graph, id);
    wait.duration_ns = wait_ns;
    wait.correlation = -1;
    wait.bytes = 0;
    wait.name = wait_name;
    wait.kind = RV_TASK_SYNC;
    wait.flags = RV_TASK_FLAG_GPU | RV_TASK_FLAG_RENDEZVOUS;
    int32_t added = rv_graph_add_task(graph, &wait);
    rv_task *kernel = rv_graph_task(graph, id);
    kernel->recorded_start_ns += wait_ns;
    kernel->duration_ns -= wait_ns;
    return added;
}

void rv_graph_split_peer_waits(rv_graph *graph)
{
    if (!has_peers(graph)) return;
    GHashTable *durations = durations_by_signature(graph);
    int32_t count = rv_graph_task_count(graph);
    int32_t *wait_of = g_new(int32_t, MAX(count, 1));
    int32_t wait_name = rv_strings_intern(graph->strings, "wait for peers");
    gboolean any = FALSE;
    for (int32_t t = 0; t < count; t++) {
        wait_of[t] = -1;
        const rv_task *task = rv_graph_task(graph, t);
        if (!is_recorded_collective(graph, task)) continue;
        char *key = signature(graph, task);
        int64_t wait_ns = task->duration_ns - transfer_of(g_hash_table_lookup(durations, key));
        g_free(key);
        if (wait_ns <= 0) continue;
        wait_of[t] = add_wait(graph, t, wait_ns, wait_name);
        any = TRUE;
    }
    if (any) {
        guint original = graph->edges->len;
        for (guint e = 0; e < original; e++) {
            rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
            if (edge->to < count && wait_of[edge->to] >= 0) edge->to = wait_of[edge->to];
        }
        for (int32_t t = 0; t < count; t++)
            if (wait_of[t] >= 0) rv_graph_add_edge(graph, wait_of[t], t, RV_EDGE_STREAM, FALSE);
    }
    g_free(wait_of);
    g_hash_table_destroy(durations);
}

/* The kernel a wait stands before: its stream edge's target. */
static void merge_one(rv_graph *graph, int32_t wait, int32_t kernel)
{
    rv_task *w = rv_graph_task(graph, wait), *k = rv_graph_task(graph, kernel);
    k->recorded_start_ns = w->recorded_start_ns;
    k->duration_ns += w->duration_ns;
    w->duration_ns = 0;
    w->flags |= RV_TASK_FLAG_REMOVED;
    w->collective = 0; /* the joint graph renumbers collectives; a removed task keeps none */
}

static gboolean is_peer_wait(const rv_task *task)
{
    return task->kind == RV_TASK_SYNC && (task->flags & RV_TASK_FLAG_RENDEZVOUS) && (task->flags & RV_TASK_FLAG_GPU) &&
           !(task->flags & RV_TASK_FLAG_REMOVED) && task->duration_ns > 0;
}

void rv_graph_merge_peer_waits(rv_graph *graph)
{
    int32_t count = rv_graph_task_count(graph);
    int32_t *kernel_of = g_new(int32_t, MAX(count, 1));
    for (int32_t t = 0; t < count; t++) kernel_of[t] = -1;
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        const rv_task *from = rv_graph_task(graph, edge->from), *to = rv_graph_task(graph, edge->to);
        if (edge->kind == RV_EDGE_STREAM && is_peer_wait(from) && to->collective == from->collective &&
            to->kind == RV_TASK_COMM)
            kernel_of[edge->from] = edge->to;
    }
    for (int32_t t = 0; t < count; t++)
        if (kernel_of[t] >= 0) merge_one(graph, t, kernel_of[t]);
    /* What led to a wait leads to its kernel again; the wait's own edge goes. */
    guint kept = 0;
    for (guint e = 0; e < graph->edges->len; e++) {
        rv_edge edge = g_array_index(graph->edges, rv_edge, e);
        if (kernel_of[edge.from] >= 0 && edge.to == kernel_of[edge.from]) continue;
        if (kernel_of[edge.to] >= 0) edge.to = kernel_of[edge.to];
        g_array_index(graph->edges, rv_edge, kept++) = edge;
    }
    g_array_set_size(graph->edges, kept);
    g_free(kernel_of);
}

GArray *rv_peer_waits_by_step(const rv_graph *graph)
{
    GArray *waits = g_array_new(FALSE, TRUE, sizeof(int64_t));
    g_array_set_size(waits, graph->steps->len + 1);
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        if (!is_peer_wait(task) || task->collective <= 0) continue;
        const rv_collective_info *info = rv_task_collective(graph, task);
        if (info == NULL || info->rendezvous >= 0) continue; /* a joint job's arrival, not a rank alone's wait */
        guint slot = task->step >= 0 && (guint)task->step < graph->steps->len ? (guint)task->step : graph->steps->len;
        g_array_index(waits, int64_t, slot) += task->duration_ns;
    }
    return waits;
}
