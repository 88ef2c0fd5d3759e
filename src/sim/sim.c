/*
 * sim.c - Daydream's Algorithm 1 over flat arrays and a binary heap.
 *
 * Implements the timing model of graph.h.  Each task waits until all its
 * predecessors have been dispatched; it then enters the ready heap keyed by
 * the earliest it could start.  Popping a task dispatches it:
 *   begin = max(free[resource], ready) + host_overhead, and not before
 *           its launch-queue holder ended (below);
 *   end = begin + duration;  free[resource] = end + idle_gap(resource),
 *   except after a rank's arrival at a collective (job.h): the transfer
 *   that follows is the same kernel, so no gap lies between them.
 * A launch edge makes its GPU task ready launch_latency(stream) after the
 * call ends.
 * Launch queue: a stream runs its tasks in the order they were submitted,
 * so the stream's order edges are its submission order.  The call that
 * launches the k-th task of a stream's order cannot finish submitting while
 * queue_depth earlier tasks are unfinished: it waits for the task at
 * position k - queue_depth to end.  That task is the call's "holder", an
 * extra predecessor fixed before the replay starts.  (Counting launches in
 * the order the replay dispatches calls instead would let two threads that
 * launch onto one stream disagree with the stream's own order.)
 * With a policy (sim.h) the key is (time, rank) and a task is dispatched
 * only when it can really start: the replay always dispatches the ready
 * task of least (begin, rank, id), begin computed with its resource's
 * current free time.  Heap keys are lower bounds of begin, refreshed when
 * popped.  A popped task whose resource is busy (begin > key) waits in its
 * resource's waiting queue: free(r) only grows, so it stays blocked and
 * its begin stays free(r) + host_overhead; among its resource's waiting
 * tasks the order (host_overhead, rank, id) is fixed, and only the first
 * of them (the resource's representative) needs an entry in the heap.  So
 * a channel with a thousand queued transfers costs O(log) per dispatch,
 * not a thousand re-queues.  Entries carry the task's version; an entry
 * whose version is old was superseded and is dropped when popped.
 * Invariant relied on: popped times never decrease, because a task's
 * successors become ready no earlier than its start.
 * Start times recorded in the trace are not read here.  Removed tasks are
 * skipped as if absent; edges touching them are ignored (transform.c
 * reconnects their neighbours before marking them).
 * Every time is checked against RV_SIM_TIME_MAX_NS, so a graph whose
 * durations add up past it fails with an error instead of wrapping.
 * Edge order: without a policy or contention, where every resource is one
 * chain of order edges (or holds only instants), a task's begin depends
 * only on its predecessors' times, so the heap is skipped and the ready
 * tasks are dispatched from a stack (run_in_edge_order, find_unchained).
 * Contention and sharing (contention.h), when the graph turns either on,
 * are a replay of their own (run_contended below): the plain replays above
 * are not touched.
 *
 * Cost: O((V + E) log V) time (O(V + E) in edge order), O(V + E) memory.
 */
#include "reverie/sim.h"
#include "reverie/error.h"
#include "structure.h"
#include <math.h>
#include <string.h>

typedef struct {
    int64_t key;     /* when the task can start, as far as is known */
    int64_t rank;    /* the policy's rank; 0 without a policy */
    int32_t task;
    int32_t version; /* with a policy: valid while it equals the task's version */
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

static void heap_push(ready_heap *heap, int64_t key, int64_t rank, int32_t task, int32_t version)
{
    int32_t i = heap->size++;
    heap_entry entry = { key, rank, task, version };
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

enum { DEAD_EDGE = 0xFF };

/*
 * How an edge readies its target, or DEAD_EDGE when an end is removed.  An
 * order edge between two tasks of one resource only sequences them: the
 * resource's free time already says when the second may start.
 */
static uint8_t edge_readiness(const task_key *keys, const rv_edge *edge)
{
    const task_key *from = &keys[edge->from], *to = &keys[edge->to];
    if (!from->live || !to->live) return DEAD_EDGE;
    if ((edge->kind == RV_EDGE_THREAD || edge->kind == RV_EDGE_STREAM) && from->resource == to->resource)
        return ORDER_ONLY;
    if (edge->kind == RV_EDGE_LAUNCH && !edge->from_start && to->gpu) return READY_AFTER_LAUNCH;
    return edge->from_start ? READY_AT_START : READY_AT_END;
}

/* Each launch call's holder: walk every stream's order chain and pair the
 * task at position k with the launch of the task at k + depth.  next[t] is
 * t's successor on its stream, launch[t] the call that launched t. */
static void find_queue_holders(const rv_graph *graph, const task_key *keys, const int32_t *next,
                               const int32_t *launch, const uint8_t *has_previous, int32_t *holder)
{
    int32_t n = rv_graph_task_count(graph);
    const rv_resource *resources = (const rv_resource *)graph->resources->data;
    GArray *chain = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (int32_t t = 0; t < n; t++) {
        if (!keys[t].live || !keys[t].gpu || has_previous[t]) continue;
        int32_t depth = resources[keys[t].resource].queue_depth;
        if (depth <= 0) continue;
        g_array_set_size(chain, 0);
        for (int32_t k = t; k >= 0 && chain->len <= (guint)n; k = next[k]) {
            g_array_append_val(chain, k);
            int32_t call = launch[k];
            if (call >= 0 && chain->len > (guint)depth && holder[call] < 0)
                holder[call] = g_array_index(chain, int32_t, chain->len - 1 - (guint)depth);
        }
    }
    g_array_unref(chain);
}

/* The keys of every task; when times is not NULL their times, and when
 * gpu_step is not NULL and the graph has steps, each live GPU task's step
 * (-1 for every other task, and for a step that does not exist). */
static inline task_key key_of(const rv_task *task)
{
    task_key key = { task->resource, (task->flags & RV_TASK_FLAG_REMOVED) == 0, (task->flags & RV_TASK_FLAG_GPU) != 0,
                     (task->flags & RV_TASK_FLAG_RENDEZVOUS) != 0, 0 };
    return key;
}

static inline gboolean same_key(task_key a, task_key b)
{
    return a.resource == b.resource && a.live == b.live && a.gpu == b.gpu && a.arrival == b.arrival;
}

/* The keys of every task, or when `expected` is not NULL none, and whether
 * every task's key is expected's (the scan stops at the first that is not);
 * when times is not NULL their times, and when gpu_step is not NULL and the
 * graph has steps, each live GPU task's step (-1 for every other task, and
 * for a step that does not exist). */
static task_key *scan_tasks_against(const rv_graph *graph, const task_key *expected, gboolean *as_expected,
                                    task_time **times, int32_t **gpu_step)
{
    int32_t n = rv_graph_task_count(graph);
    const rv_task *tasks = (const rv_task *)graph->tasks->data;
    task_key *keys = expected ? NULL : g_new(task_key, n); /* every byte written below (task_key has no padding) */
    task_time *time = times ? (*times = g_new(task_time, n)) : NULL;
    guint steps = graph->steps->len;
    int32_t *step = gpu_step && steps > 0 ? (*gpu_step = g_new(int32_t, n)) : NULL;
    if (as_expected) *as_expected = TRUE;
    for (int32_t t = 0; t < n; t++) {
        task_key key = key_of(&tasks[t]);
        if (expected && !same_key(key, expected[t])) {
            *as_expected = FALSE;
            break;
        }
        if (keys) keys[t] = key;
        if (time) {
            time[t].duration = tasks[t].duration_ns;
            time[t].overhead = tasks[t].host_overhead_ns;
        }
        if (step) step[t] = key.live && key.gpu && (guint)tasks[t].step < steps ? tasks[t].step : -1;
    }
    return keys;
}

static task_key *scan_tasks(const rv_graph *graph, task_time **times, int32_t **gpu_step)
{
    return scan_tasks_against(graph, NULL, NULL, times, gpu_step);
}

/* One pass over the edges: how each readies its target, the counts of the
 * compressed rows, and the stream chains and launches for the holders. */
static uint8_t *classify_edges(const rv_graph *graph, const task_key *keys, adjacency *adj, int32_t *next,
                               int32_t *launch, uint8_t *has_previous, uint8_t *order_in, uint8_t *order_out)
{
    const rv_edge *edges = (const rv_edge *)graph->edges->data;
    guint edge_count = graph->edges->len;
    uint8_t *how = g_new(uint8_t, edge_count + 1);
    for (guint e = 0; e < edge_count; e++) {
        const rv_edge *edge = &edges[e];
        how[e] = edge_readiness(keys, edge);
        if (how[e] == DEAD_EDGE) continue;
        adj->first[edge->from + 1]++;
        adj->waiting[edge->to]++;
        if (how[e] == ORDER_ONLY) {
            order_in[edge->to] = (uint8_t)MIN(order_in[edge->to] + 1, 2);
            order_out[edge->from] = (uint8_t)MIN(order_out[edge->from] + 1, 2);
        }
        if (how[e] == ORDER_ONLY && keys[edge->to].gpu) {
            next[edge->from] = edge->to;
            has_previous[edge->to] = 1;
        } else if (how[e] == READY_AFTER_LAUNCH && launch[edge->to] < 0) {
            launch[edge->to] = edge->from;
        }
    }
    return how;
}

/*
 * The resources whose live tasks are not one chain of order edges (each
 * task at most one order edge in and one out, one task per resource without
 * a predecessor).  On a chained resource the task before t is one of t's
 * predecessors and no other task of it can run between them, so free(r)
 * when t is dispatched is the same whatever order the ready tasks are
 * dispatched in.  Every resource of a built graph of one trace is chained;
 * a joint job's rendezvous resource is not (see edge_order_allowed), and a
 * plugin's rewrite may leave one that is not (two transfers on one channel
 * with no order between them), where the heap decides who goes first.
 */
static void find_unchained(const rv_graph *graph, const task_key *keys, const uint8_t *order_in,
                           const uint8_t *order_out, adjacency *adj)
{
    int32_t n = rv_graph_task_count(graph);
    guint resources = graph->resources->len;
    uint8_t *has_head = g_new0(uint8_t, resources + 1), *unchained = g_new0(uint8_t, resources + 1);
    for (int32_t t = 0; t < n; t++) {
        if (!keys[t].live) continue;
        int32_t on = keys[t].resource;
        if (order_in[t] > 1 || order_out[t] > 1 || (order_in[t] == 0 && has_head[on])) unchained[on] = 1;
        if (order_in[t] == 0) has_head[on] = 1;
    }
    adj->unchained = g_new(int32_t, resources + 1);
    adj->unchained_count = 0;
    for (guint r = 0; r < resources; r++)
        if (unchained[r]) adj->unchained[adj->unchained_count++] = (int32_t)r;
    g_free(has_head);
    g_free(unchained);
}

/* Without the queue (with_queue FALSE) no launch call has a holder: the
 * fallback replay of rv_simulate_reusing. */
static void build_adjacency(const rv_graph *graph, const task_key *keys, adjacency *adj, gboolean with_queue)
{
    int32_t n = rv_graph_task_count(graph);
    const rv_edge *edges = (const rv_edge *)graph->edges->data;
    guint edge_count = graph->edges->len;
    int32_t *next = g_new(int32_t, n), *launch = g_new(int32_t, n);
    uint8_t *has_previous = g_new0(uint8_t, n), *order_in = g_new0(uint8_t, n), *order_out = g_new0(uint8_t, n);
    adj->first = g_new0(int32_t, n + 1);
    adj->waiting = g_new0(int32_t, n);
    adj->holder = g_new(int32_t, n);
    for (int32_t t = 0; t < n; t++) next[t] = launch[t] = adj->holder[t] = -1;
    uint8_t *how = classify_edges(graph, keys, adj, next, launch, has_previous, order_in, order_out);
    find_unchained(graph, keys, order_in, order_out, adj);
    g_free(order_in);
    g_free(order_out);
    if (with_queue) find_queue_holders(graph, keys, next, launch, has_previous, adj->holder);
    for (int32_t t = 0; t < n; t++) {
        if (adj->holder[t] < 0) continue;
        adj->first[adj->holder[t] + 1]++;
        adj->waiting[t]++;
    }
    for (int32_t t = 0; t < n; t++) adj->first[t + 1] += adj->first[t];
    adj->targets = g_new(int32_t, adj->first[n] + 1);
    adj->how = g_new(uint8_t, adj->first[n] + 1);
    int32_t *fill = next; /* reused: the chains are walked */
    if (n > 0) memcpy(fill, adj->first, sizeof(int32_t) * (gsize)n);
    for (guint e = 0; e < edge_count; e++) {
        if (how[e] == DEAD_EDGE) continue;
        int32_t slot = fill[edges[e].from]++;
        adj->targets[slot] = edges[e].to;
        adj->how[slot] = how[e];
    }
    for (int32_t t = 0; t < n; t++) {
        if (adj->holder[t] < 0) continue;
        int32_t slot = fill[adj->holder[t]]++;
        adj->targets[slot] = t;
        adj->how[slot] = QUEUE_RELEASE;
    }
    g_free(how);
    g_free(next);
    g_free(launch);
    g_free(has_previous);
}

static int32_t *queue_depths(const rv_graph *graph)
{
    int32_t *depths = g_new(int32_t, graph->resources->len + 1);
    for (guint r = 0; r < graph->resources->len; r++) depths[r] = g_array_index(graph->resources, rv_resource, r).queue_depth;
    return depths;
}

/* The structure's order: the live tasks in the order run_in_edge_order
 * would dispatch them (each readied task on a stack; those ready at the
 * start pushed by id), and the tasks that are not live.  None where some
 * live task is never readied: the replay must then find out why.  Any
 * order the edges allow gives the same times there. */
static void find_order(rv_sim_structure *structure)
{
    int32_t n = structure->tasks, done = 0, pending_count = 0, removed_count = 0;
    const adjacency *adj = &structure->adj;
    int32_t *waiting = g_memdup2(adj->waiting, sizeof(int32_t) * (gsize)n);
    int32_t *pending = g_new(int32_t, (gsize)n + 1), *order = g_new(int32_t, (gsize)n + 1);
    int32_t *removed = g_new(int32_t, (gsize)n + 1);
    for (int32_t t = 0; t < n; t++) {
        if (!structure->keys[t].live) removed[removed_count++] = t;
        else if (waiting[t] == 0) pending[pending_count++] = t;
    }
    while (pending_count > 0) {
        int32_t t = pending[--pending_count];
        order[done++] = t;
        for (int32_t slot = adj->first[t]; slot < adj->first[t + 1]; slot++)
            if (--waiting[adj->targets[slot]] == 0) pending[pending_count++] = adj->targets[slot];
    }
    g_free(waiting);
    g_free(pending);
    if (done + removed_count == n) {
        structure->order = order;
        structure->order_count = done;
        structure->removed = removed;
        structure->removed_count = removed_count;
    } else {
        g_free(order);
        g_free(removed);
    }
}

rv_sim_structure *rv_sim_structure_new(const rv_graph *graph)
{
    rv_sim_structure *structure = g_new0(rv_sim_structure, 1);
    structure->tasks = rv_graph_task_count(graph);
    structure->edge_count = graph->edges->len;
    structure->resource_count = graph->resources->len;
    structure->edges = g_memdup2(graph->edges->data, sizeof(rv_edge) * (gsize)graph->edges->len);
    structure->queue_depths = queue_depths(graph);
    structure->keys = scan_tasks(graph, NULL, NULL);
    build_adjacency(graph, structure->keys, &structure->adj, TRUE);
    find_order(structure);
    return structure;
}

/* memcmp, for arrays that may be empty (and then NULL). */
static gboolean same_bytes(const void *a, const void *b, gsize size)
{
    return size == 0 || memcmp(a, b, size) == 0;
}

/* Does the graph still have this structure, as far as its resources and
 * edges say?  (Its tasks' keys are compared while they are read:
 * replay_init.)  The cheap checks first. */
static gboolean structure_fits(const rv_sim_structure *structure, const rv_graph *graph)
{
    if (rv_graph_task_count(graph) != structure->tasks || graph->edges->len != structure->edge_count ||
        graph->resources->len != structure->resource_count)
        return FALSE;
    int32_t *depths = queue_depths(graph);
    gboolean same = same_bytes(depths, structure->queue_depths, sizeof(int32_t) * structure->resource_count) &&
                    same_bytes(graph->edges->data, structure->edges, sizeof(rv_edge) * structure->edge_count);
    g_free(depths);
    return same;
}

static void free_adjacency(adjacency *adj)
{
    g_free(adj->first);
    g_free(adj->targets);
    g_free(adj->how);
    g_free(adj->waiting);
    g_free(adj->holder);
    g_free(adj->unchained);
}

static inline int64_t rank_of(const rv_graph *graph, const rv_policy *policy, int32_t task)
{
    return policy ? policy->priority(graph, task, policy->user_data) : 0;
}


/* ---- a resource's waiting queue (policy replays) -------------------- */

/* Tasks blocked by a busy resource, least (host overhead, rank, id) first:
 * their order while they wait (see the header comment). */
typedef struct {
    int64_t overhead, rank;
    int32_t task;
} waiting_entry;

typedef struct {
    waiting_entry *entries;
    int32_t size, capacity;
} waiting_queue;

static inline gboolean waits_before(const waiting_entry *a, const waiting_entry *b)
{
    if (a->overhead != b->overhead) return a->overhead < b->overhead;
    if (a->rank != b->rank) return a->rank < b->rank;
    return a->task < b->task;
}

static void waiting_push(waiting_queue *queue, waiting_entry entry)
{
    if (queue->size == queue->capacity) {
        queue->capacity = MAX(16, queue->capacity * 2);
        queue->entries = g_renew(waiting_entry, queue->entries, queue->capacity);
    }
    int32_t i = queue->size++;
    while (i > 0 && waits_before(&entry, &queue->entries[(i - 1) / 2])) {
        queue->entries[i] = queue->entries[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    queue->entries[i] = entry;
}

static void waiting_pop(waiting_queue *queue)
{
    waiting_entry last = queue->entries[--queue->size];
    int32_t i = 0;
    for (;;) {
        int32_t child = 2 * i + 1;
        if (child >= queue->size) break;
        if (child + 1 < queue->size && waits_before(&queue->entries[child + 1], &queue->entries[child])) child++;
        if (!waits_before(&queue->entries[child], &last)) break;
        queue->entries[i] = queue->entries[child];
        i = child;
    }
    if (queue->size > 0) queue->entries[i] = last;
}

/* Everything the replay keeps while it runs. */
typedef struct {
    const rv_graph *graph;
    const rv_policy *policy;
    const rv_resource *resources;
    const task_key *keys; /* the structure's where one is borrowed */
    task_time *times;
    int32_t *gpu_step;    /* scan_tasks: a live GPU task's step, else -1; NULL: the graph has no steps */
    adjacency adj;
    ready_heap heap;
    int64_t *ready;       /* when the task's dependencies are met */
    int64_t *released;    /* launch calls: when their queue holder ended */
    int64_t *start, *end;
    int64_t *resource_free;
    int32_t dispatched;
    gboolean overflow;
    /* run_in_edge_order only: ready tasks not yet dispatched, a stack (any
     * order gives the same times there, and the last readied is the one
     * whose data is still in cache) */
    int32_t *pending;
    int32_t pending_count;
    uint8_t *free_ignored;  /* per resource: one of instants (edge_order_allowed); NULL: none */
    /* with a policy only */
    int32_t *version;       /* per task: the version of its valid heap entry */
    waiting_queue *waiting; /* per resource: tasks blocked by it */
    gboolean *is_waiting;   /* per task: in its resource's waiting queue */
    /* The structure whose keys, adjacency and order this replay borrows
     * (read only; the counts down are its own), or NULL: all its own. */
    const rv_sim_structure *structure;
    struct contended *contended; /* with contention or sharing only (contention.h) */
} replay;

typedef struct contended contended;
static contended *contended_new(const rv_graph *graph, const task_key *keys, const task_time *times);
static void contended_free(contended *c);

static void replay_init(replay *r, const rv_graph *graph, const rv_policy *policy, const rv_sim_structure *structure,
                        gboolean with_queue)
{
    int32_t n = rv_graph_task_count(graph);
    memset(r, 0, sizeof *r);
    r->graph = graph;
    r->policy = policy;
    r->resources = (const rv_resource *)graph->resources->data;
    gboolean fits = with_queue && structure != NULL && structure_fits(structure, graph);
    if (fits) {
        scan_tasks_against(graph, structure->keys, &fits, &r->times, &r->gpu_step);
        if (!fits) { /* read again, keys and all */
            g_clear_pointer(&r->times, g_free);
            g_clear_pointer(&r->gpu_step, g_free);
        }
    }
    if (fits) {
        r->keys = structure->keys;
        r->adj = structure->adj;
        r->adj.waiting = NULL; /* count_down_from_structure */
        r->structure = structure;
    } else {
        r->keys = scan_tasks(graph, &r->times, &r->gpu_step);
        build_adjacency(graph, r->keys, &r->adj, with_queue);
    }
    /* With a policy a task can also leave one superseded entry behind (run_policy). */
    gboolean rules = graph->contention.enabled || graph->sharing.enabled;
    gboolean queues = policy != NULL || rules;
    r->heap.entries = g_new(heap_entry, queues ? 2 * (gsize)n + 1 : (gsize)n + 1);
    if (queues) {
        r->version = g_new0(int32_t, n);
        r->waiting = g_new0(waiting_queue, graph->resources->len + 1);
        r->is_waiting = g_new0(gboolean, n);
    }
    r->ready = g_new0(int64_t, n);
    r->released = g_new0(int64_t, n);
    r->start = g_new(int64_t, n); /* -1 for every task not dispatched: set by unstarted() */
    r->end = g_new(int64_t, n);
    r->resource_free = g_new0(int64_t, graph->resources->len + 1);
    if (rules) r->contended = contended_new(graph, r->keys, r->times);
}

static void replay_clear(replay *r)
{
    if (r->structure) {
        g_free(r->adj.waiting);
    } else {
        free_adjacency(&r->adj);
        g_free((task_key *)r->keys); /* its own without a structure */
    }
    g_free(r->times);
    g_free(r->gpu_step);
    g_free(r->heap.entries);
    g_free(r->pending);
    g_free(r->free_ignored);
    g_free(r->ready);
    g_free(r->released);
    g_free(r->resource_free);
    if (r->waiting)
        for (guint q = 0; q <= r->graph->resources->len; q++) g_free(r->waiting[q].entries);
    g_free(r->waiting);
    g_free(r->version);
    g_free(r->is_waiting);
    contended_free(r->contended);
}

/* The earliest a task could start, as far as its dependencies say. */
static inline int64_t earliest(const replay *r, int32_t t)
{
    return MAX(add_time(r->ready[t], r->times[t].overhead), r->released[t]);
}

static void push(replay *r, int32_t task)
{
    if (r->pending) {
        r->pending[r->pending_count++] = task;
        return;
    }
    heap_push(&r->heap, earliest(r, task), rank_of(r->graph, r->policy, task), task, r->version ? r->version[task] : 0);
}

/* What the edge in `slot` out of t, dispatched, does to its target; when
 * counting, the target is pushed once its last predecessor is through. */
static inline void ready_through_counting(replay *r, int32_t t, int32_t slot, gboolean counting)
{
    int32_t next = r->adj.targets[slot];
    switch (r->adj.how[slot]) {
    case READY_AFTER_LAUNCH:
        r->ready[next] = MAX(r->ready[next], add_time(r->end[t], r->resources[r->keys[next].resource].launch_latency_ns));
        break;
    case READY_AT_END: r->ready[next] = MAX(r->ready[next], r->end[t]); break;
    case READY_AT_START: r->ready[next] = MAX(r->ready[next], r->start[t]); break;
    case QUEUE_RELEASE: r->released[next] = r->end[t]; break;
    default: break;
    }
    if (counting && --r->adj.waiting[next] == 0) push(r, next);
}

static inline void ready_through(replay *r, int32_t t, int32_t slot)
{
    ready_through_counting(r, t, slot, TRUE);
}

/* Mark a task done at [begin, begin + duration) and ready its successors
 * (pushing those it frees when counting). */
static inline void dispatch_counting(replay *r, int32_t t, int64_t begin, gboolean counting)
{
    int32_t on = r->keys[t].resource;
    r->start[t] = begin;
    r->end[t] = add_time(begin, r->times[t].duration);
    r->resource_free[on] = add_time(r->end[t], r->keys[t].arrival ? 0 : r->resources[on].idle_gap_ns);
    if (r->resource_free[on] > RV_SIM_TIME_MAX_NS) r->overflow = TRUE;
    r->dispatched++;
    for (int32_t slot = r->adj.first[t]; slot < r->adj.first[t + 1]; slot++) ready_through_counting(r, t, slot, counting);
}

static void dispatch(replay *r, int32_t t, int64_t begin)
{
    dispatch_counting(r, t, begin, TRUE);
}

/* When a popped task can start, with its resource's current free time. */
static inline int64_t begin_of(const replay *r, int32_t t)
{
    return MAX(add_time(MAX(r->resource_free[r->keys[t].resource], r->ready[t]), r->times[t].overhead), r->released[t]);
}

static void push_all_ready(replay *r)
{
    int32_t n = rv_graph_task_count(r->graph);
    for (int32_t t = 0; t < n; t++)
        if (r->keys[t].live && r->adj.waiting[t] == 0) push(r, t);
}

/* No policy: the popped task starts as soon as its resource allows. */
static void run_default(replay *r)
{
    push_all_ready(r);
    while (r->heap.size > 0 && !r->overflow) {
        heap_entry top = heap_pop(&r->heap);
        int64_t begin = begin_of(r, top.task);
        if (begin > RV_SIM_TIME_MAX_NS) {
            r->overflow = TRUE;
            break;
        }
        dispatch(r, top.task, begin);
    }
}

/*
 * May the replay dispatch in edge order (run_in_edge_order)?  Yes when
 * every resource is chained (find_unchained), and also when the only
 * unchained resources hold nothing but instants - tasks of no duration and
 * no host overhead on a resource with no idle gap, as a joint job's
 * rendezvous, where each collective's participants meet.  The heap replay
 * pops tasks in order of nondecreasing earliest start, so such a resource
 * is free again (its last task ended at its own start, no later than this
 * task's earliest) before its next task is ready: it never delays anything,
 * and the edge-order replay ignores its free time.  The caller has ruled
 * out a policy and contention, which choose among ready tasks.
 */
static gboolean edge_order_allowed(replay *r)
{
    if (r->adj.unchained_count == 0) return TRUE;
    r->free_ignored = g_new0(uint8_t, r->graph->resources->len + 1);
    for (int32_t i = 0; i < r->adj.unchained_count; i++) {
        int32_t on = r->adj.unchained[i];
        if (r->resources[on].idle_gap_ns != 0) return FALSE;
        r->free_ignored[on] = 1;
    }
    for (int32_t t = 0; t < rv_graph_task_count(r->graph); t++)
        if (r->keys[t].live && r->free_ignored[r->keys[t].resource] &&
            (r->times[t].duration != 0 || r->times[t].overhead != 0))
            return FALSE;
    return TRUE;
}

/* No policy, no contention, edge_order_allowed: dispatch the ready tasks in
 * any order the edges allow (the times are the heap replay's), without the
 * heap's O(log V) a task. */
static void run_in_edge_order(replay *r)
{
    r->pending = g_new(int32_t, (gsize)rv_graph_task_count(r->graph) + 1);
    push_all_ready(r);
    while (r->pending_count > 0 && !r->overflow) {
        int32_t t = r->pending[--r->pending_count];
        int64_t begin = begin_of(r, t);
        if (begin > RV_SIM_TIME_MAX_NS) {
            r->overflow = TRUE;
            break;
        }
        dispatch(r, t, begin);
        if (r->free_ignored && r->free_ignored[r->keys[t].resource]) r->resource_free[r->keys[t].resource] = 0;
    }
}

/* What the result says of the whole replay: how many tasks are live, when
 * the dispatched ones started first and ended last, and each step's last
 * GPU end (rv_sim_result). */
typedef struct {
    int32_t live_count;
    int64_t first_start, last_end;
    int64_t *step_end;  /* NULL: the graph has no steps */
} replay_summary;

static void summary_init(replay_summary *summary, const replay *r)
{
    guint steps = r->graph->steps->len;
    summary->live_count = 0;
    summary->first_start = G_MAXINT64;
    summary->last_end = G_MININT64;
    summary->step_end = r->gpu_step ? g_new(int64_t, steps) : NULL;
    for (guint s = 0; summary->step_end && s < steps; s++) summary->step_end[s] = -1;
}

/* Count dispatched task t in. */
static inline void summary_add(replay_summary *summary, const replay *r, int32_t t)
{
    summary->first_start = MIN(summary->first_start, r->start[t]);
    summary->last_end = MAX(summary->last_end, r->end[t]);
    if (summary->step_end && r->gpu_step[t] >= 0)
        summary->step_end[r->gpu_step[t]] = MAX(summary->step_end[r->gpu_step[t]], r->end[t]);
}

/* The summary of a replay run by counting down (every task read again). */
static void summarize(const replay *r, replay_summary *summary)
{
    for (int32_t t = 0; t < rv_graph_task_count(r->graph); t++) {
        if (!r->keys[t].live) continue;
        summary->live_count++;
        if (r->start[t] >= 0) summary_add(summary, r, t);
    }
}

/* Before a replay that counts down: no task has started. */
static void unstarted(replay *r)
{
    for (int32_t t = 0; t < rv_graph_task_count(r->graph); t++) r->start[t] = r->end[t] = -1;
}

/* run_in_edge_order along the order the structure worked out once
 * (rv_sim_structure): the same dispatches, without counting each task's
 * predecessors down or keeping the ready ones on a stack. */
static void run_in_structure_order(replay *r, replay_summary *summary)
{
    /* A task after an overflow keeps no time: the caller discards them all. */
    const rv_sim_structure *structure = r->structure;
    for (int32_t i = 0; i < structure->removed_count; i++)
        r->start[structure->removed[i]] = r->end[structure->removed[i]] = -1;
    summary->live_count = structure->order_count;
    for (int32_t i = 0; i < structure->order_count; i++) {
        int32_t t = structure->order[i];
        int64_t begin = begin_of(r, t);
        if (begin > RV_SIM_TIME_MAX_NS) {
            r->overflow = TRUE;
            break;
        }
        dispatch_counting(r, t, begin, FALSE);
        summary_add(summary, r, t);
        if (r->overflow) break;
        if (r->free_ignored && r->free_ignored[r->keys[t].resource]) r->resource_free[r->keys[t].resource] = 0;
    }
}

/* The replay's own count of each task's predecessors not yet dispatched,
 * for the replays that count them down (a borrowed structure's stay as
 * they are, for the next replay). */
static void count_down_from_structure(replay *r)
{
    if (r->structure == NULL || r->adj.waiting != NULL) return;
    r->adj.waiting = g_memdup2(r->structure->adj.waiting, sizeof(int32_t) * (gsize)rv_graph_task_count(r->graph));
}

/* Give the first waiting task of `resource`, if any, the heap entry that
 * speaks for the queue. */
static void push_representative(replay *r, int32_t resource)
{
    const waiting_queue *queue = &r->waiting[resource];
    if (queue->size == 0) return;
    int32_t t = queue->entries[0].task;
    heap_push(&r->heap, begin_of(r, t), queue->entries[0].rank, t, ++r->version[t]);
}

/* A popped task found its resource busy: it joins the resource's queue,
 * and takes over the heap entry if it now comes first. */
static void start_waiting(replay *r, int32_t t, int64_t rank)
{
    waiting_queue *queue = &r->waiting[r->keys[t].resource];
    int32_t first = queue->size ? queue->entries[0].task : -1;
    waiting_entry entry = { r->times[t].overhead, rank, t };
    waiting_push(queue, entry);
    r->is_waiting[t] = TRUE;
    r->version[t]++; /* its popped entry is gone; it has none until it comes first */
    if (queue->entries[0].task != t) return;
    if (first >= 0) r->version[first]++; /* its entry is superseded */
    push_representative(r, r->keys[t].resource);
}

/* With a policy: dispatch the ready task of least (begin, rank, id). */
static void run_policy(replay *r)
{
    push_all_ready(r);
    while (r->heap.size > 0 && !r->overflow) {
        heap_entry top = heap_pop(&r->heap);
        int32_t t = top.task;
        if (top.version != r->version[t]) continue; /* superseded */
        int64_t begin = begin_of(r, t);
        if (begin > top.key) {
            /* busy resource: a representative competes again when it frees */
            if (r->is_waiting[t]) heap_push(&r->heap, begin, top.rank, t, r->version[t]);
            else start_waiting(r, t, top.rank);
            continue;
        }
        if (begin > RV_SIM_TIME_MAX_NS) {
            r->overflow = TRUE;
            break;
        }
        dispatch(r, t, begin);
        if (r->is_waiting[t]) { /* it was its queue's first */
            r->is_waiting[t] = FALSE;
            waiting_pop(&r->waiting[r->keys[t].resource]);
            push_representative(r, r->keys[t].resource);
        }
    }
}

/* ---- contention and sharing (contention.h) ------------------------------ */

/*
 * With contention or sharing a GPU task's end is not known when it starts:
 * a kernel that starts later on the same GPU can slow it down.  So a task under the
 * rule holds its resource and its successors until it really ends; it
 * waits in a heap of tentative ends, which every change of who runs on its
 * GPU revises.  Starts and ends are taken in time order (an end first when
 * they tie: what ends at t does not overlap what starts at t), starts with
 * run_policy's rule (dispatched only when they can really start), so a
 * start never lands before an end already taken.  Each task carries its
 * work left at full speed since its last change of rate: exact in ns while
 * its rate stays 1, rounded to the ns at each change otherwise.
 */
enum { ROLE_NONE, ROLE_COMM, ROLE_COMPUTE };

typedef struct {
    int32_t *running;         /* tasks under the rule running on this GPU */
    int32_t count, capacity;
    int32_t comm, compute;    /* how many of each */
    double load[RV_SHARE_COUNT]; /* sharing: the running compute kernels' demands, summed */
} gpu_load;

struct contended {
    double comm_rate, compute_rate; /* 1 / slowdown; 1 without contention */
    gboolean sharing;         /* the sharing rule is on */
    float *demand;            /* sharing: per task, RV_SHARE_COUNT shares of its GPU */
    int32_t *gpu_of;          /* per resource: its GPU, -1 outside the rule */
    uint8_t *role;            /* per task */
    gpu_load *gpus;
    int32_t gpu_count;
    double *work;             /* per task: work left at full speed (ns) as of since */
    int64_t *since;
    double *rate;
    int32_t *version;         /* per task: the version of its valid tentative end */
    ready_heap ends;          /* tentative ends */
    int32_t ends_capacity;
};

/* A GPU is a rank's device: GPU streams with the same rank and device. */
static int32_t *map_gpus(const rv_graph *graph, int32_t *count)
{
    guint resources = graph->resources->len;
    int32_t *gpu_of = g_new(int32_t, resources + 1);
    GHashTable *ids = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    *count = 0;
    for (guint q = 0; q < resources; q++) {
        const rv_resource *res = &g_array_index(graph->resources, rv_resource, q);
        gpu_of[q] = -1;
        if (res->kind != RV_RES_GPU_STREAM) continue;
        int64_t key = ((int64_t)(res->rank_index + 1) << 40) ^ res->process;
        gpointer found = g_hash_table_lookup(ids, &key);
        if (found == NULL) {
            found = GINT_TO_POINTER(++*count);
            g_hash_table_insert(ids, g_memdup2(&key, sizeof key), found);
        }
        gpu_of[q] = GPOINTER_TO_INT(found) - 1;
    }
    g_hash_table_destroy(ids);
    return gpu_of;
}

/* Each compute kernel's shares of its GPU (contention.h), from the
 * demands the plugin recorded and the durations the replay runs. */
static float *share_demands(const rv_graph *graph, const uint8_t *role, const task_time *times)
{
    int32_t n = rv_graph_task_count(graph);
    float *demand = g_new0(float, (gsize)(n + 1) * RV_SHARE_COUNT);
    for (int32_t t = 0; t < n; t++) {
        if (role[t] != ROLE_COMPUTE) continue;
        rv_kernel_demand asked = (guint)t < graph->kernel_demands->len
                                     ? g_array_index(graph->kernel_demands, rv_kernel_demand, t)
                                     : rv_kernel_demand_whole(times[t].duration);
        for (int d = 0; d < RV_SHARE_COUNT; d++)
            demand[(gsize)t * RV_SHARE_COUNT + d] = (float)rv_kernel_demand_share(&asked, d, times[t].duration);
    }
    return demand;
}

static contended *contended_new(const rv_graph *graph, const task_key *keys, const task_time *times)
{
    int32_t n = rv_graph_task_count(graph), gpus = 0;
    struct contended *c = g_new0(struct contended, 1);
    gboolean contention = graph->contention.enabled;
    c->comm_rate = contention ? 1.0 / MAX(1.0, graph->contention.comm_slowdown) : 1.0;
    c->compute_rate = contention ? 1.0 / MAX(1.0, graph->contention.compute_slowdown) : 1.0;
    c->sharing = graph->sharing.enabled;
    c->gpu_of = map_gpus(graph, &gpus);
    c->gpus = g_new0(gpu_load, gpus + 1);
    c->gpu_count = gpus;
    c->role = g_new0(uint8_t, n + 1);
    const rv_task *tasks = (const rv_task *)graph->tasks->data;
    for (int32_t t = 0; t < n; t++) {
        if (!keys[t].live || c->gpu_of[keys[t].resource] < 0 || (tasks[t].flags & RV_TASK_FLAG_RENDEZVOUS)) continue;
        /* without contention communication runs as in the plain replay */
        if (tasks[t].kind == RV_TASK_COMM && contention) c->role[t] = ROLE_COMM;
        else if (tasks[t].kind == RV_TASK_KERNEL) c->role[t] = ROLE_COMPUTE;
    }
    if (c->sharing) c->demand = share_demands(graph, c->role, times);
    c->work = g_new0(double, n + 1);
    c->since = g_new0(int64_t, n + 1);
    c->rate = g_new0(double, n + 1);
    c->version = g_new0(int32_t, n + 1);
    c->ends_capacity = 64;
    c->ends.entries = g_new(heap_entry, c->ends_capacity);
    return c;
}

static void contended_free(contended *c)
{
    if (c == NULL) return;
    for (int32_t g = 0; g < c->gpu_count; g++) g_free(c->gpus[g].running);
    g_free(c->gpus);
    g_free(c->gpu_of);
    g_free(c->role);
    g_free(c->demand);
    g_free(c->work);
    g_free(c->since);
    g_free(c->rate);
    g_free(c->version);
    g_free(c->ends.entries);
    g_free(c);
}

/* Sharing: how far the most loaded resource that t asks for is over
 * the GPU's capacity (1: not at all). */
static inline double sharing_pressure(const struct contended *c, const gpu_load *load, int32_t t)
{
    const float *mine = &c->demand[(gsize)t * RV_SHARE_COUNT];
    double worst = 1.0;
    for (int d = 0; d < RV_SHARE_COUNT; d++)
        if (mine[d] > 0 && load->load[d] > worst) worst = load->load[d];
    return worst;
}

/* The speed of task t on a GPU with this load. */
static inline double rate_on(const struct contended *c, const gpu_load *load, int32_t t)
{
    if (c->role[t] == ROLE_COMM) return load->compute > 0 ? c->comm_rate : 1.0;
    double rate = load->comm > 0 ? c->compute_rate : 1.0;
    return c->sharing ? rate / sharing_pressure(c, load, t) : rate;
}

/* Sharing: the loads of a GPU, summed afresh over what runs on it (a few
 * kernels), so that no rounding accumulates over a long replay. */
static void sum_loads(const struct contended *c, gpu_load *load)
{
    if (!c->sharing) return;
    memset(load->load, 0, sizeof load->load);
    for (int32_t i = 0; i < load->count; i++) {
        int32_t t = load->running[i];
        if (c->role[t] != ROLE_COMPUTE) continue;
        for (int d = 0; d < RV_SHARE_COUNT; d++) load->load[d] += c->demand[(gsize)t * RV_SHARE_COUNT + d];
    }
}

/* File t's tentative end: since + work / rate. */
static void push_end(struct contended *c, int32_t t)
{
    double left = c->work[t] / c->rate[t];
    int64_t end = left >= (double)RV_SIM_TIME_MAX_NS ? RV_SIM_TIME_MAX_NS + 1 : add_time(c->since[t], llround(left));
    if (c->ends.size == c->ends_capacity) {
        c->ends_capacity *= 2;
        c->ends.entries = g_renew(heap_entry, c->ends.entries, c->ends_capacity);
    }
    heap_push(&c->ends, end, 0, t, ++c->version[t]);
}

/* t runs at `rate` from `now` on: its work so far is counted at the old one. */
static void change_rate(struct contended *c, int32_t t, double rate, int64_t now)
{
    c->work[t] = MAX(0.0, c->work[t] - (double)(now - c->since[t]) * c->rate[t]);
    c->since[t] = now;
    c->rate[t] = rate;
    push_end(c, t);
}

/* The counts of a GPU changed at `now`: re-rate the tasks whose speed changes. */
static void rerate(struct contended *c, const gpu_load *load, int64_t now)
{
    for (int32_t i = 0; i < load->count; i++) {
        int32_t t = load->running[i];
        double rate = rate_on(c, load, t);
        if (rate != c->rate[t]) change_rate(c, t, rate, now);
    }
}

/* t starts at `begin` under the rule: it holds its resource until it ends;
 * only its from-start edges act now. */
static void start_contended(replay *r, int32_t t, int64_t begin)
{
    struct contended *c = r->contended;
    int32_t on = r->keys[t].resource;
    gpu_load *load = &c->gpus[c->gpu_of[on]];
    r->start[t] = begin;
    r->resource_free[on] = RV_SIM_TIME_MAX_NS; /* busy until it ends */
    r->dispatched++;
    for (int32_t slot = r->adj.first[t]; slot < r->adj.first[t + 1]; slot++)
        if (r->adj.how[slot] == READY_AT_START) ready_through(r, t, slot);
    if (load->count == load->capacity) {
        load->capacity = MAX(8, 2 * load->capacity);
        load->running = g_renew(int32_t, load->running, load->capacity);
    }
    load->running[load->count++] = t;
    if (c->role[t] == ROLE_COMM) load->comm++;
    else load->compute++;
    sum_loads(c, load);
    c->work[t] = (double)r->times[t].duration;
    c->since[t] = begin;
    c->rate[t] = rate_on(c, load, t);
    rerate(c, load, begin);
    push_end(c, t);
}

/* t ends at `now`: its GPU's others may speed up, its successors go on. */
static void finish_contended(replay *r, int32_t t, int64_t now)
{
    struct contended *c = r->contended;
    int32_t on = r->keys[t].resource;
    gpu_load *load = &c->gpus[c->gpu_of[on]];
    r->end[t] = now;
    r->resource_free[on] = add_time(now, r->keys[t].arrival ? 0 : r->resources[on].idle_gap_ns);
    if (r->resource_free[on] > RV_SIM_TIME_MAX_NS) r->overflow = TRUE;
    for (int32_t i = 0; i < load->count; i++)
        if (load->running[i] == t) {
            load->running[i] = load->running[--load->count];
            break;
        }
    if (c->role[t] == ROLE_COMM) load->comm--;
    else load->compute--;
    sum_loads(c, load);
    rerate(c, load, now);
    for (int32_t slot = r->adj.first[t]; slot < r->adj.first[t + 1]; slot++)
        if (r->adj.how[slot] != READY_AT_START) ready_through(r, t, slot);
    push_representative(r, on); /* its waiting tasks may start now */
}

/* The earliest valid tentative end, or G_MAXINT64 (stale entries dropped). */
static int64_t next_end(replay *r)
{
    struct contended *c = r->contended;
    while (c->ends.size > 0 && c->ends.entries[0].version != c->version[c->ends.entries[0].task]) heap_pop(&c->ends);
    return c->ends.size > 0 ? c->ends.entries[0].key : G_MAXINT64;
}

/* run_policy's step for one popped start, with tasks under the rule started as such. */
static void contended_start_step(replay *r, heap_entry top)
{
    int32_t t = top.task;
    if (top.version != r->version[t]) return; /* superseded */
    int64_t begin = begin_of(r, t);
    if (begin > top.key) {
        if (r->is_waiting[t]) heap_push(&r->heap, begin, top.rank, t, r->version[t]);
        else start_waiting(r, t, top.rank);
        return;
    }
    if (begin > RV_SIM_TIME_MAX_NS) {
        r->overflow = TRUE;
        return;
    }
    if (r->contended->role[t] != ROLE_NONE) start_contended(r, t, begin);
    else dispatch(r, t, begin);
    if (r->is_waiting[t]) {
        r->is_waiting[t] = FALSE;
        waiting_pop(&r->waiting[r->keys[t].resource]);
        push_representative(r, r->keys[t].resource);
    }
}

/* Starts and ends in time order (the header of this section). */
static void run_contended(replay *r)
{
    push_all_ready(r);
    while (!r->overflow) {
        int64_t end = next_end(r);
        if (r->heap.size == 0 && end == G_MAXINT64) break;
        if (end != G_MAXINT64 && (r->heap.size == 0 || end <= r->heap.entries[0].key)) {
            heap_entry done = heap_pop(&r->contended->ends);
            if (end > RV_SIM_TIME_MAX_NS) r->overflow = TRUE;
            else finish_contended(r, done.task, end);
            continue;
        }
        contended_start_step(r, heap_pop(&r->heap));
    }
}

/* Undispatched launch calls held by the launch queue: a hint for the message. */
static int32_t stuck_in_queue(const replay *r)
{
    int32_t count = 0;
    for (int32_t t = 0; t < rv_graph_task_count(r->graph); t++)
        if (r->adj.holder[t] >= 0 && r->start[t] < 0 && r->start[r->adj.holder[t]] < 0) count++;
    return count;
}

static gboolean replay_error(const replay *r, int32_t live_count, GError **error)
{
    if (r->overflow) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                    "%s: the replay runs past %.0f days of simulated time: durations in the graph are out of range",
                    r->graph->source, RV_SIM_TIME_MAX_NS / 8.64e13);
        return TRUE;
    }
    if (r->dispatched == live_count) return FALSE;
    int32_t queued = stuck_in_queue(r);
    if (queued > 0)
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                    "%s: %d of %d tasks could never run: %d launch calls wait for a full launch queue whose "
                    "tasks wait for them (a stream's order contradicts its launch order)", r->graph->source,
                    live_count - r->dispatched, live_count, queued);
    else
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: %d of %d tasks could never run (the graph has a cycle)",
                    r->graph->source, live_count - r->dispatched, live_count);
    return TRUE;
}

gboolean rv_simulate(const rv_graph *graph, const rv_policy *policy, rv_sim_result *result,
                     GError **error)
{
    return rv_simulate_reusing(graph, NULL, policy, result, error);
}

/* One replay; *stuck says whether it failed only because launch calls
 * wait for a full queue whose tasks wait for them. */
static gboolean replay_once(const rv_graph *graph, const rv_sim_structure *structure, const rv_policy *policy,
                            gboolean with_queue, rv_sim_result *result, gboolean *stuck, GError **error)
{
    replay r;
    replay_summary summary;
    replay_init(&r, graph, policy, structure, with_queue);
    summary_init(&summary, &r);
    gboolean in_edge_order = r.contended == NULL && policy == NULL && edge_order_allowed(&r);
    if (in_edge_order && r.structure != NULL && r.structure->order != NULL) {
        run_in_structure_order(&r, &summary);
    } else {
        unstarted(&r);
        count_down_from_structure(&r);
        if (r.contended) run_contended(&r);
        else if (policy) run_policy(&r);
        else if (in_edge_order) run_in_edge_order(&r);
        else run_default(&r);
        summarize(&r, &summary);
    }
    *stuck = !r.overflow && r.dispatched != summary.live_count && stuck_in_queue(&r) > 0;
    gboolean failed = replay_error(&r, summary.live_count, error);
    memset(result, 0, sizeof *result);
    result->task_count = rv_graph_task_count(graph);
    result->start_ns = r.start;
    result->end_ns = r.end;
    result->makespan_ns = r.dispatched ? summary.last_end - summary.first_start : 0;
    result->step_gpu_end_ns = summary.step_end;
    result->step_count = summary.step_end ? graph->steps->len : 0;
    replay_clear(&r);
    if (failed) rv_sim_result_clear(result);
    return !failed;
}

/* A plugin's rewrite can leave a stream's queue order contradicting the
 * edges (a task moved before the launch that frees its queue slot): the
 * queue rule then deadlocks.  Rather than refuse the prediction, replay
 * without the rule and say so (result->launch_queue_ignored). */
gboolean rv_simulate_reusing(const rv_graph *graph, const rv_sim_structure *structure, const rv_policy *policy,
                             rv_sim_result *result, GError **error)
{
    if (policy && policy->priority == NULL) policy = NULL;
    gboolean stuck = FALSE;
    GError *queue_error = NULL;
    if (replay_once(graph, structure, policy, TRUE, result, &stuck, &queue_error)) return TRUE;
    if (!stuck) {
        g_propagate_error(error, queue_error);
        return FALSE;
    }
    g_clear_error(&queue_error);
    if (!replay_once(graph, NULL, policy, FALSE, result, &stuck, error)) return FALSE;
    result->launch_queue_ignored = TRUE;
    return TRUE;
}

void rv_sim_structure_free(rv_sim_structure *structure)
{
    if (structure == NULL) return;
    free_adjacency(&structure->adj);
    g_free(structure->order);
    g_free(structure->removed);
    g_free(structure->keys);
    g_free(structure->edges);
    g_free(structure->queue_depths);
    g_free(structure);
}

void rv_sim_result_clear(rv_sim_result *result)
{
    g_free(result->start_ns);
    g_free(result->end_ns);
    g_free(result->step_gpu_end_ns);
    memset(result, 0, sizeof *result);
}
