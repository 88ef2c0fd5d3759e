/*
 * sim.c - Daydream's Algorithm 1 over flat arrays and a binary heap.
 *
 * Each task waits until all its predecessors have been dispatched; it then
 * enters the ready heap keyed by the time its dependencies are met plus its
 * lag.  Popping a task dispatches it:
 *   start = max(free[resource], ready + lag);  end = start + duration;
 *   free[resource] = end + gap.
 * With a policy (sim.h) the key is (time, rank), and a popped task whose
 * resource is still busy is queued again at the time the resource frees,
 * so a resource goes to the lowest-ranked task that can use it then.
 * Invariant relied on: popped times never decrease, because a task's
 * successors become ready no earlier than its start.
 * Start times recorded in the trace are not read here.  Removed tasks are
 * skipped as if absent; edges touching them are ignored (transform.c
 * reconnects their neighbours before marking them).
 *
 * Cost: O((V + E) log V) time, O(V + E) memory.
 */
#include "reverie/sim.h"
#include "reverie/error.h"
#include <string.h>

typedef struct {
    int64_t key;   /* when the task can start, as far as is known */
    int64_t rank;  /* the policy's rank; 0 without a policy */
    int32_t task;
} heap_entry;

typedef struct {
    heap_entry *entries;
    int32_t size;
} ready_heap;

static inline gboolean entry_before(const heap_entry *a, const heap_entry *b)
{
    if (a->key != b->key) return a->key < b->key;
    if (a->rank != b->rank) return a->rank < b->rank;
    return a->task < b->task;
}

static void heap_push(ready_heap *heap, int64_t key, int64_t rank, int32_t task)
{
    int32_t i = heap->size++;
    heap_entry entry = { key, rank, task };
    while (i > 0) {
        int32_t parent = (i - 1) / 2;
        if (!entry_before(&entry, &heap->entries[parent])) break;
        heap->entries[i] = heap->entries[parent];
        i = parent;
    }
    heap->entries[i] = entry;
}

static heap_entry heap_pop(ready_heap *heap)
{
    heap_entry top = heap->entries[0];
    heap_entry last = heap->entries[--heap->size];
    int32_t i = 0, size = heap->size;
    for (;;) {
        int32_t child = 2 * i + 1;
        if (child >= size) break;
        if (child + 1 < size && entry_before(&heap->entries[child + 1], &heap->entries[child])) child++;
        if (!entry_before(&heap->entries[child], &last)) break;
        heap->entries[i] = heap->entries[child];
        i = child;
    }
    if (size > 0) heap->entries[i] = last;
    return top;
}

/* How an edge makes its target ready. */
enum { READY_AT_END, READY_AT_START, ORDER_ONLY };

/* Successors in compressed rows: edges out of task t are
 * targets[first[t] .. first[t + 1]). */
typedef struct {
    int32_t *first;
    int32_t *targets;
    uint8_t *how;          /* READY_AT_END, READY_AT_START or ORDER_ONLY */
    int32_t *waiting;      /* predecessors not yet dispatched */
} adjacency;

static gboolean live(const rv_task *tasks, int32_t id)
{
    return (tasks[id].flags & RV_TASK_FLAG_REMOVED) == 0;
}

/*
 * An order edge between two tasks of one resource only sequences them: the
 * resource's free time (end + gap) already says when the second may start,
 * and its lag must not be added on top of the first one's end.
 */
static uint8_t edge_readiness(const rv_task *tasks, const rv_edge *edge)
{
    if ((edge->kind == RV_EDGE_THREAD || edge->kind == RV_EDGE_STREAM) &&
        tasks[edge->from].resource == tasks[edge->to].resource)
        return ORDER_ONLY;
    return edge->from_start ? READY_AT_START : READY_AT_END;
}

static void build_adjacency(const rv_graph *graph, adjacency *adj)
{
    int32_t n = rv_graph_task_count(graph);
    const rv_task *tasks = (const rv_task *)graph->tasks->data;
    const rv_edge *edges = (const rv_edge *)graph->edges->data;
    guint edge_count = graph->edges->len;
    adj->first = g_new0(int32_t, n + 1);
    adj->waiting = g_new0(int32_t, n);
    for (guint e = 0; e < edge_count; e++) {
        if (!live(tasks, edges[e].from) || !live(tasks, edges[e].to)) continue;
        adj->first[edges[e].from + 1]++;
        adj->waiting[edges[e].to]++;
    }
    for (int32_t t = 0; t < n; t++) adj->first[t + 1] += adj->first[t];
    adj->targets = g_new(int32_t, adj->first[n] + 1);
    adj->how = g_new(uint8_t, adj->first[n] + 1);
    int32_t *fill = g_memdup2(adj->first, sizeof(int32_t) * (gsize)n);
    for (guint e = 0; e < edge_count; e++) {
        if (!live(tasks, edges[e].from) || !live(tasks, edges[e].to)) continue;
        int32_t slot = fill[edges[e].from]++;
        adj->targets[slot] = edges[e].to;
        adj->how[slot] = edge_readiness(tasks, &edges[e]);
    }
    g_free(fill);
}

static void free_adjacency(adjacency *adj)
{
    g_free(adj->first);
    g_free(adj->targets);
    g_free(adj->how);
    g_free(adj->waiting);
}

static inline int64_t rank_of(const rv_graph *graph, const rv_policy *policy, int32_t task)
{
    return policy ? policy->priority(graph, task, policy->user_data) : 0;
}

gboolean rv_simulate(const rv_graph *graph, const rv_policy *policy, rv_sim_result *result,
                     GError **error)
{
    int32_t n = rv_graph_task_count(graph);
    const rv_task *tasks = (const rv_task *)graph->tasks->data;
    if (policy && policy->priority == NULL) policy = NULL;
    adjacency adj;
    build_adjacency(graph, &adj);
    int64_t *ready = g_new0(int64_t, n);
    int64_t *start = g_new(int64_t, n);
    int64_t *end = g_new(int64_t, n);
    int64_t *resource_free = g_new0(int64_t, graph->resources->len + 1);
    ready_heap heap = { g_new(heap_entry, n + 1), 0 };
    int32_t live_count = 0, dispatched = 0;
    for (int32_t t = 0; t < n; t++) {
        start[t] = end[t] = -1;
        if (!live(tasks, t)) continue;
        live_count++;
        if (adj.waiting[t] == 0) heap_push(&heap, tasks[t].lag_ns, rank_of(graph, policy, t), t);
    }
    int64_t first_start = G_MAXINT64, last_end = G_MININT64;
    while (heap.size > 0) {
        heap_entry top = heap_pop(&heap);
        int32_t t = top.task;
        const rv_task *task = &tasks[t];
        int64_t begin = MAX(resource_free[task->resource], ready[t] + task->lag_ns);
        if (policy && begin > top.key) {
            /* busy resource: compete again when it frees */
            heap_push(&heap, begin, top.rank, t);
            continue;
        }
        start[t] = begin;
        end[t] = begin + task->duration_ns;
        resource_free[task->resource] = end[t] + task->gap_ns;
        first_start = MIN(first_start, begin);
        last_end = MAX(last_end, end[t]);
        dispatched++;
        for (int32_t slot = adj.first[t]; slot < adj.first[t + 1]; slot++) {
            int32_t next = adj.targets[slot];
            if (adj.how[slot] != ORDER_ONLY) {
                int64_t at = adj.how[slot] == READY_AT_START ? start[t] : end[t];
                if (at > ready[next]) ready[next] = at;
            }
            if (--adj.waiting[next] == 0)
                heap_push(&heap, ready[next] + tasks[next].lag_ns, rank_of(graph, policy, next), next);
        }
    }
    g_free(heap.entries);
    g_free(ready);
    g_free(resource_free);
    free_adjacency(&adj);
    result->task_count = n;
    result->start_ns = start;
    result->end_ns = end;
    result->makespan_ns = dispatched ? last_end - first_start : 0;
    if (dispatched != live_count) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                    "%s: %d of %d tasks could never run (the graph has a cycle)", graph->source,
                    live_count - dispatched, live_count);
        rv_sim_result_clear(result);
        return FALSE;
    }
    return TRUE;
}

void rv_sim_result_clear(rv_sim_result *result)
{
    g_free(result->start_ns);
    g_free(result->end_ns);
    memset(result, 0, sizeof *result);
}
