/*
 * transform.c - the transformation primitives (see transform.h).
 *
 * Questions about a task's neighbours go through the graph's edge index
 * (src/graph/index.h), so each costs the task's own degree and a plugin
 * that splices or removes thousands of tasks stays linear in the graph.
 * Removal joins each live task before a removed region to the live tasks
 * after it that it reached through the region, with lists that a chain of
 * removed tasks shares (see "removal" below).
 */
#include "reverie/transform.h"
#include "reverie/checked.h"
#include "reverie/stats.h"
#include "reverie/error.h"
#include "../graph/index.h"
#include <math.h>
#include <string.h>

static gboolean is_order_kind(uint8_t kind)
{
    return kind == RV_EDGE_THREAD || kind == RV_EDGE_STREAM;
}

static gboolean removed(const rv_graph *graph, int32_t task)
{
    return (g_array_index(graph->tasks, rv_task, task).flags & RV_TASK_FLAG_REMOVED) != 0;
}

static const rv_edge *edge_at(const rv_graph *graph, int32_t edge)
{
    return &g_array_index(graph->edges, rv_edge, edge);
}

/* Durations changed: the typical launch must be worked out again. */
static void durations_changed(rv_graph *graph)
{
    if (graph->index) graph->index->launch_ns = -1;
}

void rv_transform_invalidate(rv_graph *graph)
{
    rv_graph_index_reset(graph);
}

/* ns * factor within 0 .. RV_MAX_DURATION_NS: a plugin is meant to check
 * its factor first (rv_tasks_check_scale), but llround of a value beyond
 * int64 is undefined, so the primitive clamps rather than trusts. */
static int64_t scaled_ns(int64_t ns, double factor)
{
    double scaled = (double)ns * factor;
    if (!(scaled > 0)) return 0; /* also NaN */
    return scaled >= (double)RV_MAX_DURATION_NS ? RV_MAX_DURATION_NS : (int64_t)llround(scaled);
}

/* The duration, the host overhead or both of each task times factor, in
 * one pass over the tasks. */
static void scale_parts(rv_graph *graph, const GArray *tasks, double factor, gboolean duration, gboolean overhead)
{
    for (guint i = 0; i < tasks->len; i++) {
        rv_task *task = rv_graph_task(graph, g_array_index(tasks, int32_t, i));
        if (duration) task->duration_ns = scaled_ns(task->duration_ns, factor);
        if (overhead) task->host_overhead_ns = scaled_ns(task->host_overhead_ns, factor);
    }
    if (duration) durations_changed(graph);
}

void rv_transform_scale(rv_graph *graph, const GArray *tasks, double factor)
{
    scale_parts(graph, tasks, factor, TRUE, FALSE);
}

void rv_transform_scale_host_overhead(rv_graph *graph, const GArray *tasks, double factor)
{
    scale_parts(graph, tasks, factor, FALSE, TRUE);
}

void rv_transform_scale_with_overhead(rv_graph *graph, const GArray *tasks, double factor)
{
    scale_parts(graph, tasks, factor, TRUE, TRUE);
}

void rv_transform_set_duration(rv_graph *graph, int32_t task, int64_t duration_ns)
{
    rv_graph_task(graph, task)->duration_ns = MAX(0, duration_ns);
    durations_changed(graph);
}

/* The first live task on the same resource joined to `task` by an order
 * edge (out-edges when forward, in-edges otherwise), in edge order. */
static int32_t order_neighbour(const rv_graph *graph, int32_t task, gboolean forward)
{
    if (task < 0 || task >= rv_graph_task_count(graph)) return -1;
    const rv_graph_index *index = rv_graph_index_sync(graph);
    int32_t resource = g_array_index(graph->tasks, rv_task, task).resource;
    for (int32_t e = rv_graph_index_first(index, task, forward); e >= 0; e = rv_graph_index_next(index, e, forward)) {
        const rv_edge *edge = edge_at(graph, e);
        if (!is_order_kind(edge->kind)) continue;
        int32_t there = forward ? edge->to : edge->from;
        if (!removed(graph, there) && g_array_index(graph->tasks, rv_task, there).resource == resource)
            return there;
    }
    return -1;
}

int32_t rv_graph_resource_previous(const rv_graph *graph, int32_t task) { return order_neighbour(graph, task, FALSE); }
int32_t rv_graph_resource_next(const rv_graph *graph, int32_t task) { return order_neighbour(graph, task, TRUE); }

int32_t rv_graph_launch_of(const rv_graph *graph, int32_t task)
{
    if (task < 0 || task >= rv_graph_task_count(graph)) return -1;
    const rv_graph_index *index = rv_graph_index_sync(graph);
    for (int32_t e = rv_graph_index_first(index, task, FALSE); e >= 0; e = rv_graph_index_next(index, e, FALSE))
        if (edge_at(graph, e)->kind == RV_EDGE_LAUNCH) return edge_at(graph, e)->from;
    return -1;
}

int32_t *rv_graph_launch_calls(const rv_graph *graph)
{
    int32_t n = rv_graph_task_count(graph);
    int32_t *launcher = g_new(int32_t, MAX(n, 1));
    for (int32_t id = 0; id < n; id++) launcher[id] = -1;
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = edge_at(graph, (int32_t)e);
        if (edge->kind == RV_EDGE_LAUNCH && launcher[edge->to] < 0) launcher[edge->to] = edge->from;
    }
    return launcher;
}

int64_t rv_graph_typical_launch_ns(const rv_graph *graph)
{
    /* room for every edge, written in place and cut to what was found: an
     * append per launch was half of this at a million tasks */
    GArray *durations = g_array_sized_new(FALSE, FALSE, sizeof(int64_t), graph->edges->len);
    g_array_set_size(durations, graph->edges->len);
    guint found = 0;
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = edge_at(graph, (int32_t)e);
        if (edge->kind != RV_EDGE_LAUNCH) continue;
        const rv_task *call = &g_array_index(graph->tasks, rv_task, edge->from);
        if (call->kind == RV_TASK_CPU && !(call->flags & RV_TASK_FLAG_BLOCKING))
            g_array_index(durations, int64_t, found++) = call->duration_ns;
    }
    g_array_set_size(durations, found);
    int64_t typical = rv_median_int64_select(durations, 5000); /* a CUDA launch costs a few microseconds */
    g_array_unref(durations);
    return typical;
}

/* The typical launch for an inserted call, computed once and kept until a
 * duration or a launch edge changes it (index.c says which do). */
static int64_t launch_cost(rv_graph *graph)
{
    rv_graph_index *index = rv_graph_index_sync(graph);
    if (index->launch_ns < 0) index->launch_ns = rv_graph_typical_launch_ns(graph);
    return index->launch_ns;
}

/* ---- removal -------------------------------------------------------- */

/*
 * A batch joins every live task p to every live task s that p reaches
 * through removed tasks only, on a path through one of the batch's victims
 * (tasks removed before count as removed on the way: pipeline removes
 * some by hand).  The pairs are found from the live side, with two lists
 * per removed task r:
 *   reach(r)    the live tasks r reaches through removed tasks only;
 *   through(r)  those of them reached on a path through a victim (for a
 *               victim, reach(r); for any other removed task, the union of
 *               its removed successors' through lists);
 * and each live task feeding a removed r whose through list is not empty
 * is joined to that list, once per pair.
 *
 * The lists are persistent (cells with a next link).  A removed task with
 * one removed successor - a chain, such as a thread's run of launch calls
 * each launching a live kernel - puts its own live successors in front of
 * that successor's list instead of copying it, so a chain of k tasks costs
 * k, where joining each removed task's predecessors to its successors
 * cost k squared.  Where several successors' lists meet, the longest is
 * kept as the tail and the others' new entries go in front (a list that is
 * already the longest's tail costs only the distance to it).  A pair that
 * a live edge already orders at least as strongly (ready at its end) gets
 * no second edge.
 *
 * What stays costly: the pairs themselves (a live task that feeds a
 * region is joined to all it reaches: with many such tasks and many
 * reached, that many edges); removed tasks of earlier batches next to this
 * one, walked again; and lists that meet at every task of a long region
 * while growing (the longest is then marked each time).
 */

/* One entry of a list: a live task reached through removed ones. */
typedef struct {
    int32_t task;
    int32_t kind;    /* the kind of the last edge on the way to it */
    int32_t next;    /* the next cell, -1 at the end */
    int32_t length;  /* cells from this one to the end */
} cell;

/* Values in the walks' marks: a list is a cell's index, or EMPTY. */
enum { EMPTY = -1, IN_PROGRESS = -2, LEADS_TO_VICTIM = -3, UNVISITED = -4 };

/* The index's scratch marks, by use. */
enum { MARK_REACH = 0, MARK_THROUGH = 1, MARK_SCRATCH = 2, MARK_VICTIM = 3, MARK_JOINED = 4 };

/* The walks push and pop once or more per task and edge they pass: plain
 * growable buffers keep that to a store and a count, where a GArray's
 * append and set_size are a call (and a memmove) each - most of the
 * removal's instructions when they were GArrays. */
typedef struct {
    int32_t *at;
    guint len, capacity;
} int_stack;

typedef struct {
    cell *at;
    guint len, capacity;
} cell_stack;

static inline void int_push(int_stack *s, int32_t value)
{
    if (s->len == s->capacity) {
        s->capacity = s->capacity ? 2 * s->capacity : 64;
        s->at = g_renew(int32_t, s->at, s->capacity);
    }
    s->at[s->len++] = value;
}

static inline void cell_push(cell_stack *s, cell value)
{
    if (s->len == s->capacity) {
        s->capacity = s->capacity ? 2 * s->capacity : 64;
        s->at = g_renew(cell, s->at, s->capacity);
    }
    s->at[s->len++] = value;
}

typedef struct {
    rv_graph *graph;
    rv_graph_index *index;
    cell_stack cells;
    int_stack stack;    /* the reach walk */
    int_stack through;  /* the through walk (which calls the reach walk) */
    cell_stack own;     /* one list's own live successors, scratch */
    int_stack lists;    /* one task's successors' lists, scratch */
    int_stack upstream; /* the removed tasks that lead to a victim, as found */
} removal;

static const cell *cell_at(const removal *rm, int32_t list)
{
    return &rm->cells.at[list];
}

static int32_t list_length(const removal *rm, int32_t list)
{
    return list < 0 ? 0 : cell_at(rm, list)->length;
}

static int32_t prepend(removal *rm, int32_t task, int32_t kind, int32_t tail)
{
    cell entry = { task, kind, tail, 1 + list_length(rm, tail) };
    cell_push(&rm->cells, entry);
    return (int32_t)rm->cells.len - 1;
}

/* Is `list` the tail of `longest`?  Costs the difference of their lengths. */
static gboolean is_tail_of(const removal *rm, int32_t list, int32_t longest)
{
    int32_t at = longest;
    for (int32_t skip = list_length(rm, longest) - list_length(rm, list); skip > 0; skip--) at = cell_at(rm, at)->next;
    return at == list;
}

/* The union of rm->own (live successors, in edge order) and rm->lists:
 * the longest list as the tail, the entries of the others that it lacks
 * in front.  Only where no other list remains are own entries left
 * unchecked against the tail (a duplicate costs one cell, never a wrong
 * pair: the joining skips pairs it has made). */
static int32_t join_lists(removal *rm)
{
    rv_task_marks *seen = &rm->index->marks[MARK_SCRATCH];
    rv_task_marks_begin(seen, rv_graph_task_count(rm->graph));
    int32_t longest = EMPTY;
    for (guint i = 0; i < rm->lists.len; i++) {
        int32_t list = rm->lists.at[i];
        if (list_length(rm, list) > list_length(rm, longest)) longest = list;
    }
    guint others = 0;
    for (guint i = 0; i < rm->lists.len; i++) {
        int32_t list = rm->lists.at[i];
        if (list >= 0 && list != longest && !is_tail_of(rm, list, longest))
            rm->lists.at[others++] = list;
    }
    if (others > 0)
        for (int32_t c = longest; c >= 0; c = cell_at(rm, c)->next) rv_task_marks_set(seen, cell_at(rm, c)->task, 0);
    guint fresh = 0; /* rm->own[0 .. fresh) is what goes in front */
    for (guint i = 0; i < rm->own.len; i++) {
        cell entry = rm->own.at[i];
        if (rv_task_marks_has(seen, entry.task)) continue;
        rv_task_marks_set(seen, entry.task, 0);
        rm->own.at[fresh++] = entry;
    }
    rm->own.len = fresh;
    for (guint i = 0; i < others; i++)
        for (int32_t c = rm->lists.at[i]; c >= 0; c = cell_at(rm, c)->next) {
            cell entry = *cell_at(rm, c);
            if (rv_task_marks_has(seen, entry.task)) continue;
            rv_task_marks_set(seen, entry.task, 0);
            cell_push(&rm->own, entry);
        }
    int32_t head = longest;
    for (guint i = rm->own.len; i-- > 0;) {
        const cell *entry = &rm->own.at[i];
        head = prepend(rm, entry->task, entry->kind, head);
    }
    return head;
}

/* reach(task) from its successors' lists (those on a cycle of removed
 * tasks, still in progress, are left out). */
static int32_t reach_from_successors(removal *rm, int32_t task)
{
    const rv_task_marks *memo = &rm->index->marks[MARK_REACH];
    rm->own.len = 0;
    rm->lists.len = 0;
    for (int32_t e = rv_graph_index_first(rm->index, task, TRUE); e >= 0; e = rv_graph_index_next(rm->index, e, TRUE)) {
        const rv_edge *edge = edge_at(rm->graph, e);
        if (!removed(rm->graph, edge->to)) {
            cell entry = { edge->to, edge->kind, EMPTY, 0 };
            cell_push(&rm->own, entry);
            continue;
        }
        int32_t list = rv_task_marks_get(memo, edge->to, UNVISITED);
        if (list >= EMPTY) int_push(&rm->lists, list);
    }
    return join_lists(rm);
}

/* reach(start) for a removed task, depth first without recursion: runs of
 * removed tasks can be long. */
static int32_t reach_list(removal *rm, int32_t start)
{
    rv_task_marks *memo = &rm->index->marks[MARK_REACH];
    rm->stack.len = 0;
    int_push(&rm->stack, start);
    while (rm->stack.len > 0) {
        int32_t task = rm->stack.at[rm->stack.len - 1];
        int32_t state = rv_task_marks_get(memo, task, UNVISITED);
        if (state >= EMPTY) {
            rm->stack.len--;
        } else if (state == IN_PROGRESS) {
            rm->stack.len--;
            rv_task_marks_set(memo, task, reach_from_successors(rm, task));
        } else {
            rv_task_marks_set(memo, task, IN_PROGRESS);
            for (int32_t e = rv_graph_index_first(rm->index, task, TRUE); e >= 0; e = rv_graph_index_next(rm->index, e, TRUE)) {
                int32_t next = edge_at(rm->graph, e)->to;
                if (removed(rm->graph, next) && !rv_task_marks_has(memo, next)) int_push(&rm->stack, next);
            }
        }
    }
    return rv_task_marks_get(memo, start, EMPTY);
}

/* The removed tasks that reach a victim through removed ones (the victims
 * included), marked LEADS_TO_VICTIM in the through marks. */
static void find_upstream(removal *rm, const GArray *victims)
{
    rv_task_marks *through = &rm->index->marks[MARK_THROUGH], *victim = &rm->index->marks[MARK_VICTIM];
    int32_t count = rv_graph_task_count(rm->graph);
    rv_task_marks_begin(through, count);
    rv_task_marks_begin(victim, count);
    for (guint i = 0; i < victims->len; i++) {
        int32_t task = g_array_index(victims, int32_t, i);
        rv_task_marks_set(victim, task, 0);
        if (rv_task_marks_has(through, task)) continue;
        rv_task_marks_set(through, task, LEADS_TO_VICTIM);
        int_push(&rm->upstream, task);
    }
    for (guint i = 0; i < rm->upstream.len; i++) {
        int32_t task = rm->upstream.at[i];
        for (int32_t e = rv_graph_index_first(rm->index, task, FALSE); e >= 0; e = rv_graph_index_next(rm->index, e, FALSE)) {
            int32_t before = edge_at(rm->graph, e)->from;
            if (!removed(rm->graph, before) || rv_task_marks_has(through, before)) continue;
            rv_task_marks_set(through, before, LEADS_TO_VICTIM);
            int_push(&rm->upstream, before);
        }
    }
}

/* through(task) of a task that is not a victim: the union of its removed
 * successors' through lists. */
static int32_t through_from_successors(removal *rm, int32_t task)
{
    const rv_task_marks *through = &rm->index->marks[MARK_THROUGH];
    rm->own.len = 0;
    rm->lists.len = 0;
    for (int32_t e = rv_graph_index_first(rm->index, task, TRUE); e >= 0; e = rv_graph_index_next(rm->index, e, TRUE)) {
        int32_t list = rv_task_marks_get(through, edge_at(rm->graph, e)->to, UNVISITED);
        if (list >= EMPTY) int_push(&rm->lists, list);
    }
    return join_lists(rm);
}

/* through(start) for a task of rm->upstream, depth first like reach_list. */
static void through_list(removal *rm, int32_t start)
{
    rv_task_marks *through = &rm->index->marks[MARK_THROUGH];
    const rv_task_marks *victim = &rm->index->marks[MARK_VICTIM];
    rm->through.len = 0;
    int_push(&rm->through, start);
    while (rm->through.len > 0) {
        int32_t task = rm->through.at[rm->through.len - 1];
        int32_t state = rv_task_marks_get(through, task, UNVISITED);
        if (state >= EMPTY) {
            rm->through.len--;
        } else if (state == IN_PROGRESS) {
            rm->through.len--;
            rv_task_marks_set(through, task, through_from_successors(rm, task));
        } else if (rv_task_marks_has(victim, task)) {
            rm->through.len--;
            rv_task_marks_set(through, task, reach_list(rm, task));
        } else {
            rv_task_marks_set(through, task, IN_PROGRESS);
            for (int32_t e = rv_graph_index_first(rm->index, task, TRUE); e >= 0; e = rv_graph_index_next(rm->index, e, TRUE)) {
                int32_t next = edge_at(rm->graph, e)->to;
                if (rv_task_marks_get(through, next, UNVISITED) == LEADS_TO_VICTIM) int_push(&rm->through, next);
            }
        }
    }
}

/* The kind of a bypass edge: the order of a resource between two of its
 * tasks, otherwise the kind of the last hop (a launch or another
 * resource's order reads as a plugin's dependency). */
static rv_edge_kind bypass_kind(const rv_graph *graph, int32_t from, int32_t to, int32_t kind)
{
    const rv_task *a = &g_array_index(graph->tasks, rv_task, from);
    const rv_task *b = &g_array_index(graph->tasks, rv_task, to);
    if (a->resource == b->resource) return (a->flags & RV_TASK_FLAG_GPU) ? RV_EDGE_STREAM : RV_EDGE_THREAD;
    return is_order_kind((uint8_t)kind) || kind == RV_EDGE_LAUNCH ? RV_EDGE_PLUGIN : (rv_edge_kind)kind;
}

/* Join the live task `from` to every live task in the through lists of its
 * removed successors, except itself and those a live edge of its own
 * already readies at their end. */
static void join_live_task(removal *rm, int32_t from)
{
    rv_task_marks *seen = &rm->index->marks[MARK_SCRATCH];
    const rv_task_marks *through = &rm->index->marks[MARK_THROUGH];
    rv_task_marks_begin(seen, rv_graph_task_count(rm->graph));
    rv_task_marks_set(seen, from, 0);
    for (int32_t e = rv_graph_index_first(rm->index, from, TRUE); e >= 0; e = rv_graph_index_next(rm->index, e, TRUE)) {
        const rv_edge *edge = edge_at(rm->graph, e);
        if (!removed(rm->graph, edge->to) && !edge->from_start) rv_task_marks_set(seen, edge->to, 0);
    }
    for (int32_t e = rv_graph_index_first(rm->index, from, TRUE); e >= 0; e = rv_graph_index_next(rm->index, e, TRUE)) {
        int32_t list = rv_task_marks_get(through, edge_at(rm->graph, e)->to, UNVISITED);
        for (int32_t c = list; c >= 0; c = cell_at(rm, c)->next) {
            cell entry = *cell_at(rm, c);
            if (rv_task_marks_has(seen, entry.task)) continue;
            rv_task_marks_set(seen, entry.task, 0);
            rv_graph_add_edge(rm->graph, from, entry.task, bypass_kind(rm->graph, from, entry.task, entry.kind), FALSE);
        }
    }
}

static void reconnect(removal *rm, const GArray *victims)
{
    find_upstream(rm, victims);
    rv_task_marks_begin(&rm->index->marks[MARK_REACH], rv_graph_task_count(rm->graph));
    for (guint i = 0; i < rm->upstream.len; i++) through_list(rm, rm->upstream.at[i]);
    rv_task_marks *joined = &rm->index->marks[MARK_JOINED];
    rv_task_marks_begin(joined, rv_graph_task_count(rm->graph));
    for (guint i = 0; i < rm->upstream.len; i++) {
        int32_t task = rm->upstream.at[i];
        for (int32_t e = rv_graph_index_first(rm->index, task, FALSE); e >= 0; e = rv_graph_index_next(rm->index, e, FALSE)) {
            int32_t from = edge_at(rm->graph, e)->from;
            if (removed(rm->graph, from) || rv_task_marks_has(joined, from)) continue;
            rv_task_marks_set(joined, from, 0);
            join_live_task(rm, from);
        }
    }
}

/* One step of a resource's order after `task`: its first live successor
 * on the resource by an order edge, else the last removed one, else -1. */
static int32_t order_step(const rv_graph *graph, const rv_graph_index *index, int32_t task)
{
    int32_t resource = g_array_index(graph->tasks, rv_task, task).resource, removed_next = -1;
    for (int32_t e = rv_graph_index_first(index, task, TRUE); e >= 0; e = rv_graph_index_next(index, e, TRUE)) {
        const rv_edge *edge = edge_at(graph, e);
        if (!is_order_kind(edge->kind) || g_array_index(graph->tasks, rv_task, edge->to).resource != resource) continue;
        if (!removed(graph, edge->to)) return edge->to;
        removed_next = edge->to;
    }
    return removed_next;
}

/* The live task after `task` in its resource's order, walking on through
 * removed ones, or -1.  Each walk leaves, on every task it passed, where
 * it ended (marks): a later walk jumps there and goes on only if that task
 * was removed since, so a run of victims is walked about once. */
static int32_t live_next(removal *rm, int32_t task)
{
    rv_task_marks *memo = &rm->index->marks[MARK_REACH];
    int32_t result = -1;
    rm->stack.len = 0;
    for (int32_t current = task; (gsize)rm->stack.len <= (gsize)rv_graph_task_count(rm->graph);) {
        int_push(&rm->stack, current);
        int32_t jump = rv_task_marks_get(memo, current, UNVISITED);
        if (jump == UNVISITED) jump = order_step(rm->graph, rm->index, current);
        if (jump < 0 || !removed(rm->graph, jump)) { result = jump; break; }
        current = jump;
    } /* past the task count: a cycle of removed tasks, -1 */
    for (guint i = 0; i < rm->stack.len; i++) rv_task_marks_set(memo, rm->stack.at[i], result);
    return result;
}

/* Mark the victims removed, in their order; with KEEP_OVERHEAD each one's
 * host overhead goes to the task after it that is live at that moment
 * (a later victim passes it on in turn). */
static int mark_removed(removal *rm, const GArray *victims, rv_remove_mode mode)
{
    rv_task_marks_begin(&rm->index->marks[MARK_REACH], rv_graph_task_count(rm->graph));
    for (guint i = 0; i < victims->len; i++) {
        rv_task *victim = rv_graph_task(rm->graph, g_array_index(victims, int32_t, i));
        victim->flags |= RV_TASK_FLAG_REMOVED;
        if (mode != RV_REMOVE_KEEP_OVERHEAD) continue;
        int32_t next = live_next(rm, g_array_index(victims, int32_t, i));
        if (next >= 0) rv_graph_task(rm->graph, next)->host_overhead_ns += victim->host_overhead_ns;
    }
    return (int)victims->len;
}

/* The tasks to remove: those given that are live, each once, and the
 * launch calls of the GPU ones. */
static GArray *victims_of(rv_graph *graph, const GArray *tasks)
{
    GArray *victims = g_array_new(FALSE, FALSE, sizeof(int32_t));
    rv_task_marks *listed = &rv_graph_index_sync(graph)->marks[MARK_VICTIM];
    rv_task_marks_begin(listed, rv_graph_task_count(graph));
    for (guint i = 0; i < tasks->len; i++) {
        int32_t task = g_array_index(tasks, int32_t, i);
        if (removed(graph, task)) continue;
        int32_t launch = g_array_index(graph->tasks, rv_task, task).flags & RV_TASK_FLAG_GPU ? rv_graph_launch_of(graph, task) : -1;
        int32_t both[2] = { task, launch };
        for (int k = 0; k < 2; k++) {
            if (both[k] < 0 || removed(graph, both[k]) || rv_task_marks_has(listed, both[k])) continue;
            rv_task_marks_set(listed, both[k], 0);
            g_array_append_val(victims, both[k]);
        }
    }
    return victims;
}

/* Remove the tasks `victims_of` chose. */
static int remove_victims(rv_graph *graph, const GArray *victims, rv_remove_mode mode)
{
    removal rm = { graph, rv_graph_index_sync(graph), { 0 }, { 0 }, { 0 }, { 0 }, { 0 }, { 0 } };
    int count = mark_removed(&rm, victims, mode);
    reconnect(&rm, victims);
    g_free(rm.cells.at);
    g_free(rm.stack.at);
    g_free(rm.through.at);
    g_free(rm.own.at);
    g_free(rm.lists.at);
    g_free(rm.upstream.at);
    return count;
}

int rv_transform_remove_many(rv_graph *graph, const GArray *tasks, rv_remove_mode mode)
{
    GArray *victims = victims_of(graph, tasks);
    int count = remove_victims(graph, victims, mode);
    g_array_unref(victims);
    return count;
}

int rv_transform_remove(rv_graph *graph, int32_t task, rv_remove_mode mode)
{
    GArray *one = g_array_new(FALSE, FALSE, sizeof(int32_t));
    g_array_append_val(one, task);
    int count = rv_transform_remove_many(graph, one, mode);
    g_array_unref(one);
    return count;
}

/* ---- replacing regions ------------------------------------------------ */

/* An edge to add, once the pass over the edges is done. */
typedef struct {
    int32_t from, to;
    int32_t kind;
} joining;

static void propose(GArray *joins, int32_t from, int32_t to, rv_edge_kind kind)
{
    if (from < 0 || to < 0 || from == to) return;
    joining j = { from, to, kind };
    g_array_append_val(joins, j);
}

/* Add the proposed edges, each pair once and none that an edge joins
 * already: grouped by source (a counting sort, stable: of two proposals of
 * one pair the first wins), each group against its source's existing
 * out-edges, with a per-task mark.  Linear; no set of pairs to hash. */
static void add_joins(rv_graph *graph, const GArray *joins)
{
    int32_t n = rv_graph_task_count(graph);
    int32_t *first = g_new0(int32_t, (gsize)n + 1), *mark = g_new(int32_t, MAX(n, 1));
    joining *sorted = g_new(joining, MAX(joins->len, 1));
    for (guint k = 0; k < joins->len; k++) first[g_array_index(joins, joining, k).from + 1]++;
    for (int32_t t = 0; t < n; t++) first[t + 1] += first[t];
    for (guint k = 0; k < joins->len; k++) {
        const joining *j = &g_array_index(joins, joining, k);
        sorted[first[j->from]++] = *j;
    }
    /* first[t] now ends t's group; the groups lie in task order */
    for (int32_t t = 0; t < n; t++) mark[t] = -1;
    const rv_graph_index *index = rv_graph_index_sync(graph);
    for (int32_t k = 0, end; k < (int32_t)joins->len; k = end) {
        int32_t from = sorted[k].from;
        end = first[from];
        for (int32_t e = rv_graph_index_first(index, from, TRUE); e >= 0; e = rv_graph_index_next(index, e, TRUE))
            mark[edge_at(graph, e)->to] = from;
        for (int32_t i = k; i < end; i++) {
            if (mark[sorted[i].to] == from) continue;
            mark[sorted[i].to] = from;
            rv_graph_add_edge(graph, from, sorted[i].to, (rv_edge_kind)sorted[i].kind, FALSE);
        }
    }
    g_free(sorted);
    g_free(mark);
    g_free(first);
}

/* Each run of victims on a resource: the live task before it, ordered
 * before the live task after it. */
static void chain_around(rv_graph *graph, const GArray *victims, const int32_t *region, GArray *joins)
{
    for (guint i = 0; i < victims->len; i++) {
        int32_t v = g_array_index(victims, int32_t, i), previous = rv_graph_resource_previous(graph, v);
        if (previous < 0 || region[previous] >= 0) continue; /* not the head of a run */
        int32_t next = rv_graph_resource_next(graph, v);
        while (next >= 0 && region[next] >= 0) next = rv_graph_resource_next(graph, next);
        gboolean gpu = (rv_graph_task(graph, v)->flags & RV_TASK_FLAG_GPU) != 0;
        propose(joins, previous, next, gpu ? RV_EDGE_STREAM : RV_EDGE_THREAD);
    }
}

int rv_transform_replace_regions(rv_graph *graph, const GArray *victims, const GArray *region_of,
                                 const rv_region *regions, const guint8 *after, rv_remove_mode mode)
{
    int32_t n = rv_graph_task_count(graph);
    int32_t *region = g_new(int32_t, MAX(n, 1));
    for (int32_t t = 0; t < n; t++) region[t] = -1;
    GArray *live_victims = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (guint i = 0; i < victims->len; i++) {
        int32_t v = g_array_index(victims, int32_t, i);
        if (removed(graph, v) || region[v] >= 0) continue;
        region[v] = g_array_index(region_of, int32_t, i);
        g_array_append_val(live_victims, v);
    }
    GArray *joins = g_array_new(FALSE, FALSE, sizeof(joining));
    chain_around(graph, live_victims, region, joins);
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = edge_at(graph, (int32_t)e);
        int32_t a = region[edge->from], b = region[edge->to];
        if (a < 0 && b < 0) continue;
        /* the host's order: chained above, and through host calls that stand in */
        if (edge->kind == RV_EDGE_THREAD && !regions[a >= 0 ? a : b].host_calls) continue;
        if (a >= 0 && b >= 0) {
            if (a != b)
                for (int32_t x = 0; x < regions[a].exit_count; x++)
                    propose(joins, regions[a].exits[x], regions[b].entry, RV_EDGE_PLUGIN);
            continue;
        }
        int32_t live = a >= 0 ? edge->to : edge->from;
        if (removed(graph, live)) continue;
        if (a >= 0) {
            for (int32_t x = 0; x < regions[a].exit_count; x++) propose(joins, regions[a].exits[x], edge->to, RV_EDGE_PLUGIN);
        } else if (after == NULL || !after[edge->from]) {
            propose(joins, edge->from, regions[b].entry, RV_EDGE_PLUGIN);
        }
    }
    add_joins(graph, joins);
    g_array_unref(joins);
    g_free(region);
    removal rm = { graph, rv_graph_index_sync(graph), { 0 }, { 0 }, { 0 }, { 0 }, { 0 }, { 0 } };
    int count = mark_removed(&rm, live_victims, mode);
    g_free(rm.stack.at);
    g_array_unref(live_victims);
    durations_changed(graph); /* launch calls went: the typical launch may move */
    return count;
}

/* ---- insertion ------------------------------------------------------ */

/* Put `task` right after `after` in their resource's order. */
static void splice_after(rv_graph *graph, int32_t after, int32_t task)
{
    const rv_task *anchor = &g_array_index(graph->tasks, rv_task, after);
    rv_edge_kind kind = (anchor->flags & RV_TASK_FLAG_GPU) ? RV_EDGE_STREAM : RV_EDGE_THREAD;
    int32_t next = rv_graph_resource_next(graph, after);
    if (next >= 0) {
        const rv_graph_index *index = rv_graph_index_sync(graph);
        for (int32_t e = rv_graph_index_first(index, after, TRUE), following; e >= 0; e = following) {
            following = rv_graph_index_next(index, e, TRUE); /* before e moves to another list */
            const rv_edge *edge = edge_at(graph, e);
            if (edge->to == next && is_order_kind(edge->kind)) rv_graph_index_set_edge_source(graph, e, task);
        }
    }
    rv_graph_add_edge(graph, after, task, kind, FALSE);
}

/* ---- moving a run to another resource -------------------------------- */

/* The order edge from `from` to `to` (same resource), or -1. */
static int32_t order_edge_between(const rv_graph *graph, int32_t from, int32_t to)
{
    const rv_graph_index *index = rv_graph_index_sync(graph);
    for (int32_t e = rv_graph_index_first(index, to, FALSE); e >= 0; e = rv_graph_index_next(index, e, FALSE))
        if (edge_at(graph, e)->from == from && is_order_kind(edge_at(graph, e)->kind)) return e;
    return -1;
}

/* The run first .. last on first's resource, or NULL (its length bounded by the graph's tasks). */
static GArray *run_of(const rv_graph *graph, int32_t first, int32_t last)
{
    GArray *run = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (int32_t t = first; t >= 0 && run->len <= (guint)rv_graph_task_count(graph); t = rv_graph_resource_next(graph, t)) {
        g_array_append_val(run, t);
        if (t == last) return run;
    }
    g_array_unref(run);
    return NULL;
}

static gboolean move_fits(const rv_graph *graph, int32_t first, int32_t last, int32_t resource, int32_t after,
                          int32_t beside, int32_t release, GError **error)
{
    int32_t count = rv_graph_task_count(graph);
    const char *problem = NULL;
    if (first < 0 || first >= count || last < 0 || last >= count || removed(graph, first) || removed(graph, last))
        problem = "the run's ends are not live tasks";
    else if (resource < 0 || resource >= (int32_t)graph->resources->len)
        problem = "no such resource";
    else if (rv_graph_task((rv_graph *)graph, first)->resource == resource)
        problem = "the run is on that resource already";
    else if ((g_array_index(graph->resources, rv_resource, resource).kind == RV_RES_CPU_THREAD) !=
             (g_array_index(graph->resources, rv_resource, rv_graph_task((rv_graph *)graph, first)->resource).kind ==
              RV_RES_CPU_THREAD))
        problem = "a CPU thread's tasks move to threads only, and others never onto one";
    else if (after >= count || (after >= 0 && (removed(graph, after) || rv_graph_task((rv_graph *)graph, after)->resource != resource)))
        problem = "`after` is not a live task of that resource";
    else if (beside >= count || (beside >= 0 && removed(graph, beside)))
        problem = "`beside` is not a live task";
    else if (release >= count || (release >= 0 && removed(graph, release)))
        problem = "`release` is not a live task";
    if (problem) g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "move: %s", problem);
    return problem == NULL;
}

gboolean rv_transform_move_run(rv_graph *graph, int32_t first, int32_t last, int32_t resource, int32_t after,
                               int32_t beside, int32_t release, GError **error)
{
    if (!move_fits(graph, first, last, resource, after, beside, release, error)) return FALSE;
    GArray *run = run_of(graph, first, last);
    if (run == NULL) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "move: task %d does not follow task %d on its resource", last, first);
        return FALSE;
    }
    for (guint i = 0; i < run->len; i++) {
        int32_t t = g_array_index(run, int32_t, i);
        if (t != beside && t != release) continue;
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "move: task %d is in the run it would %s", t,
                    t == beside ? "run beside" : "release");
        g_array_unref(run);
        return FALSE;
    }
    int32_t before = rv_graph_resource_previous(graph, first), behind = rv_graph_resource_next(graph, last);
    int32_t in = before >= 0 ? order_edge_between(graph, before, first) : -1;
    int32_t out = behind >= 0 ? order_edge_between(graph, last, behind) : -1;
    rv_edge_kind old_order = (rv_graph_task(graph, first)->flags & RV_TASK_FLAG_GPU) ? RV_EDGE_STREAM : RV_EDGE_THREAD;
    for (guint i = 0; i < run->len; i++) rv_graph_task(graph, g_array_index(run, int32_t, i))->resource = resource;
    g_array_unref(run);
    /* what the run waited for and what waited for it, as plain dependencies */
    if (in >= 0) {
        rv_edge *edge = &g_array_index(graph->edges, rv_edge, in);
        edge->kind = RV_EDGE_PLUGIN;
        if (beside >= 0) {
            if (beside != before) rv_graph_index_set_edge_source(graph, in, beside);
            g_array_index(graph->edges, rv_edge, in).from_start = 1;
        }
    } else if (beside >= 0) {
        rv_graph_add_edge(graph, beside, first, RV_EDGE_PLUGIN, TRUE);
    }
    if (out >= 0) {
        if (release >= 0 && release != behind) rv_graph_index_set_edge_target(graph, out, release);
        g_array_index(graph->edges, rv_edge, out).kind = RV_EDGE_PLUGIN;
    }
    /* the old resource's order closes over the gap */
    if (before >= 0 && behind >= 0) rv_graph_add_edge(graph, before, behind, old_order, FALSE);
    /* the new one's order takes the run after `after` */
    if (after >= 0) {
        int32_t following = rv_graph_resource_next(graph, after);
        int32_t link = following >= 0 && following != first ? order_edge_between(graph, after, following) : -1;
        if (link >= 0) rv_graph_index_set_edge_source(graph, link, last);
        rv_graph_add_edge(graph, after, first, (rv_graph_task(graph, after)->flags & RV_TASK_FLAG_GPU) ? RV_EDGE_STREAM : RV_EDGE_THREAD,
                          FALSE);
    }
    return TRUE;
}

static int32_t insert_launch(rv_graph *graph, int32_t after, const rv_task *gpu_task)
{
    rv_task call = *gpu_task;
    const rv_task *anchor = rv_graph_task(graph, after);
    call.kind = RV_TASK_CPU;
    call.flags = RV_TASK_FLAG_INSERTED;
    call.resource = anchor->resource;
    call.name = rv_strings_intern(graph->strings, "cudaLaunchKernel");
    call.duration_ns = launch_cost(graph);
    call.host_overhead_ns = 0; /* issued from C++ (a library or the framework): no Python before it */
    call.recorded_start_ns = anchor->recorded_start_ns;
    call.correlation = -1;
    /* the call launches the collective's kernel; it is not one of its participants */
    call.collective = 0;
    call.bytes = 0;
    int32_t id = rv_graph_add_task(graph, &call);
    splice_after(graph, after, id);
    return id;
}

int32_t rv_transform_insert(rv_graph *graph, const rv_insert_spec *spec, GError **error)
{
    int32_t count = rv_graph_task_count(graph);
    if (spec->task.resource < 0 || spec->task.resource >= (int32_t)graph->resources->len ||
        spec->after >= count || spec->launch_after >= count) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "insert: resource or anchor task out of range");
        return -1;
    }
    /* an anchor elsewhere would splice the task into another resource's order */
    if (spec->after >= 0 && rv_graph_task(graph, spec->after)->resource != spec->task.resource) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "insert: `after` task %d is on another resource", spec->after);
        return -1;
    }
    if (spec->launch_after >= 0 &&
        g_array_index(graph->resources, rv_resource, rv_graph_task(graph, spec->launch_after)->resource).kind !=
            RV_RES_CPU_THREAD) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "insert: `launch_after` task %d is not on a CPU thread",
                    spec->launch_after);
        return -1;
    }
    rv_task task = spec->task;
    const rv_resource *resource = &g_array_index(graph->resources, rv_resource, task.resource);
    task.flags = (uint16_t)((task.flags & ~RV_TASK_FLAG_REMOVED) | RV_TASK_FLAG_INSERTED);
    if (resource->kind == RV_RES_GPU_STREAM) task.flags |= RV_TASK_FLAG_GPU;
    if (task.recorded_start_ns == 0 && spec->after >= 0)
        task.recorded_start_ns = rv_graph_task(graph, spec->after)->recorded_start_ns;
    int32_t id = rv_graph_add_task(graph, &task);
    if (spec->after >= 0) splice_after(graph, spec->after, id);
    if ((task.flags & RV_TASK_FLAG_GPU) && spec->launch_after >= 0) {
        int32_t launch = insert_launch(graph, spec->launch_after, &task);
        rv_graph_add_edge(graph, launch, id, RV_EDGE_LAUNCH, FALSE);
    }
    return id;
}

/* ---- replacement ---------------------------------------------------- */

/* The last of `tasks` in `resource`'s order: the latest recorded one there,
 * then on through the tasks marked in `victim` right after it. */
static int32_t last_on_resource(const rv_graph *graph, const GArray *tasks, int32_t resource, const rv_task_marks *victim)
{
    int32_t last = -1;
    for (guint i = 0; i < tasks->len; i++) {
        int32_t id = g_array_index(tasks, int32_t, i);
        if (g_array_index(graph->tasks, rv_task, id).resource != resource || removed(graph, id)) continue;
        if (last < 0 || rv_task_compare_recorded(&id, &last, (gpointer)graph) > 0) last = id;
    }
    for (int32_t next = last >= 0 ? rv_graph_resource_next(graph, last) : -1; next >= 0 && rv_task_marks_has(victim, next);
         next = rv_graph_resource_next(graph, next))
        last = next;
    return last;
}

/* What waited for the replaced tasks: each live task outside them that an
 * edge other than a launch or their own stream's order leads to from one
 * of them, with that edge's kind (pairs, flattened). */
static GArray *waiters_of(const rv_graph *graph, const GArray *gpu_tasks, const rv_task_marks *victim)
{
    const rv_graph_index *index = rv_graph_index_sync(graph);
    GArray *pairs = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (guint i = 0; i < gpu_tasks->len; i++) {
        int32_t task = g_array_index(gpu_tasks, int32_t, i);
        for (int32_t e = rv_graph_index_first(index, task, TRUE); e >= 0; e = rv_graph_index_next(index, e, TRUE)) {
            const rv_edge *edge = edge_at(graph, e);
            if (edge->kind == RV_EDGE_LAUNCH || removed(graph, edge->to) || rv_task_marks_has(victim, edge->to)) continue;
            if (is_order_kind(edge->kind) && g_array_index(graph->tasks, rv_task, edge->to).resource ==
                                                 g_array_index(graph->tasks, rv_task, task).resource)
                continue;
            int32_t pair[2] = { edge->to, edge->kind };
            g_array_append_vals(pairs, pair, 2);
        }
    }
    return pairs;
}

/* Does `from` reach a task marked in `before` (the new task's live
 * predecessors, or the new task itself)?  A walk forward that passes no
 * task starting (recorded) after `limit`, the latest of those: a path that
 * ends at one of them cannot, in a recording whose edges follow its times.
 * At most `budget` tasks: past that the answer is "perhaps", i.e. TRUE. */
static gboolean reaches(const rv_graph *graph, int32_t from, const rv_task_marks *before, int64_t limit, GArray *stack,
                        rv_task_marks *seen, guint budget)
{
    const rv_graph_index *index = rv_graph_index_sync(graph);
    g_array_set_size(stack, 0);
    g_array_append_val(stack, from);
    rv_task_marks_set(seen, from, 0);
    for (guint visited = 0; stack->len > 0; visited++) {
        if (visited > budget) return TRUE;
        int32_t task = g_array_index(stack, int32_t, stack->len - 1);
        g_array_set_size(stack, stack->len - 1);
        if (rv_task_marks_has(before, task)) return TRUE;
        for (int32_t e = rv_graph_index_first(index, task, TRUE); e >= 0; e = rv_graph_index_next(index, e, TRUE)) {
            int32_t next = edge_at(graph, e)->to;
            if (rv_task_marks_has(seen, next) || removed(graph, next)) continue;
            rv_task_marks_set(seen, next, 0);
            if (g_array_index(graph->tasks, rv_task, next).recorded_start_ns <= limit || rv_task_marks_has(before, next))
                g_array_append_val(stack, next);
        }
    }
    return FALSE;
}

/* The new task `id` takes on what waited for the tasks it replaced, except
 * where a waiter leads back to it (a round trip through the host inside
 * the replaced work: fusing it cannot keep both). */
static void hand_on_waiters(rv_graph *graph, int32_t id, const GArray *waiters)
{
    rv_graph_index *index = rv_graph_index_sync(graph);
    rv_task_marks *before = &index->marks[MARK_REACH], *seen = &index->marks[MARK_SCRATCH];
    rv_task_marks_begin(before, rv_graph_task_count(graph));
    rv_task_marks_set(before, id, 0);
    int64_t limit = g_array_index(graph->tasks, rv_task, id).recorded_start_ns;
    for (int32_t e = rv_graph_index_first(index, id, FALSE); e >= 0; e = rv_graph_index_next(index, e, FALSE)) {
        int32_t from = edge_at(graph, e)->from;
        rv_task_marks_set(before, from, 0);
        limit = MAX(limit, g_array_index(graph->tasks, rv_task, from).recorded_start_ns);
    }
    GArray *stack = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (guint i = 0; i + 1 < waiters->len; i += 2) {
        int32_t to = g_array_index(waiters, int32_t, i);
        rv_task_marks_begin(seen, rv_graph_task_count(graph));
        if (!removed(graph, to) && !reaches(graph, to, before, limit, stack, seen, 1u << 16))
            rv_graph_add_edge(graph, id, to, (rv_edge_kind)g_array_index(waiters, int32_t, i + 1), FALSE);
    }
    g_array_unref(stack);
}

int32_t rv_transform_replace(rv_graph *graph, const GArray *gpu_tasks, const rv_insert_spec *spec, rv_remove_mode mode,
                             int *removed_count, GError **error)
{
    if (removed_count) *removed_count = 0;
    GArray *victims = victims_of(graph, gpu_tasks); /* the tasks and their launch calls */
    rv_task_marks *victim = &rv_graph_index_sync(graph)->marks[MARK_VICTIM]; /* victims_of marked them */
    int32_t last = last_on_resource(graph, victims, spec->task.resource, victim), last_call = -1;
    for (guint i = 0; i < victims->len; i++) {
        int32_t id = g_array_index(victims, int32_t, i);
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        const rv_resource *resource = &g_array_index(graph->resources, rv_resource, task->resource);
        if (resource->kind == RV_RES_CPU_THREAD && (last_call < 0 || rv_task_compare_recorded(&id, &last_call, graph) > 0))
            last_call = id;
    }
    if (last_call >= 0) last_call = last_on_resource(graph, victims, rv_graph_task(graph, last_call)->resource, victim);
    if (last < 0) {
        g_array_unref(victims);
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "replace: none of the tasks replaced runs on the new task's resource");
        return -1;
    }
    GArray *waiters = waiters_of(graph, gpu_tasks, victim);
    rv_insert_spec placed = *spec;
    placed.after = last;
    placed.launch_after = last_call;
    int32_t id = rv_transform_insert(graph, &placed, error);
    int count = id >= 0 ? remove_victims(graph, victims, mode) : 0;
    if (id >= 0) hand_on_waiters(graph, id, waiters);
    g_array_unref(waiters);
    g_array_unref(victims);
    if (removed_count) *removed_count = count;
    return id;
}

void rv_transform_add_edge(rv_graph *graph, int32_t from, int32_t to)
{
    rv_graph_add_edge(graph, from, to, RV_EDGE_PLUGIN, FALSE);
}

int32_t rv_transform_add_channel(rv_graph *graph, const char *name)
{
    for (guint r = 0; r < graph->resources->len; r++) {
        const rv_resource *resource = &g_array_index(graph->resources, rv_resource, r);
        if (resource->kind == RV_RES_CHANNEL && strcmp(rv_strings_get(graph->strings, resource->name), name) == 0)
            return (int32_t)r;
    }
    return rv_graph_add_resource(graph, RV_RES_CHANNEL, -1, -1, name);
}

int32_t rv_transform_add_comm_stream(rv_graph *graph, int32_t like, const char *name)
{
    if (like < 0 || like >= rv_graph_task_count(graph)) return -1;
    rv_resource model = g_array_index(graph->resources, rv_resource, rv_graph_task(graph, like)->resource);
    if (model.kind != RV_RES_GPU_STREAM) return -1;
    char *full = g_strdup_printf("gpu %" G_GINT64_FORMAT " %s", model.process, name);
    int32_t id = (int32_t)rv_strings_intern(graph->strings, full);
    g_free(full);
    for (guint r = 0; r < graph->resources->len; r++) {
        const rv_resource *resource = &g_array_index(graph->resources, rv_resource, r);
        if (resource->kind == RV_RES_GPU_STREAM && resource->name == id && resource->process == model.process &&
            resource->rank_index == model.rank_index)
            return (int32_t)r;
    }
    model.name = id;
    model.thread = -1; /* no stream of the trace */
    g_array_append_val(graph->resources, model);
    return (int32_t)graph->resources->len - 1;
}

rv_step_lists rv_step_lists_new(const rv_graph *graph, guint list_count, rv_task_classifier classify, gpointer data)
{
    rv_step_lists lists = { graph->steps->len + 1, list_count, NULL };
    gsize total = (gsize)lists.slots * list_count;
    int32_t n = rv_graph_task_count(graph);
    /* the list of each task (-1: none), then the ids written in place */
    int32_t *slot_of = g_new(int32_t, MAX(n, 1));
    guint *count = g_new0(guint, MAX(total, 1));
    for (int32_t id = 0; id < n; id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        slot_of[id] = -1;
        if (task->step < -1 || task->step >= (int32_t)graph->steps->len) continue;
        int list = classify(graph, id, task, data);
        if (list < 0 || (guint)list >= list_count) continue;
        slot_of[id] = (task->step + 1) * (int32_t)list_count + list;
        count[slot_of[id]]++;
    }
    lists.lists = g_new(GArray *, MAX(total, 1));
    int32_t **fill = g_new(int32_t *, MAX(total, 1));
    for (gsize i = 0; i < total; i++) {
        lists.lists[i] = g_array_sized_new(FALSE, FALSE, sizeof(int32_t), count[i]);
        g_array_set_size(lists.lists[i], count[i]);
        fill[i] = (int32_t *)lists.lists[i]->data;
    }
    for (int32_t id = 0; id < n; id++)
        if (slot_of[id] >= 0) *fill[slot_of[id]]++ = id;
    g_free(fill);
    g_free(count);
    g_free(slot_of);
    return lists;
}

G_STATIC_ASSERT(RV_PHASE_FORWARD == 0 && RV_PHASE_BACKWARD == 1 && RV_PHASE_OPTIMIZER == 2);
int rv_kernel_by_phase(const rv_graph *graph, int32_t id, const rv_task *task, gpointer data)
{
    (void)graph;
    (void)id;
    (void)data;
    if ((task->flags & RV_TASK_FLAG_REMOVED) || task->kind != RV_TASK_KERNEL || task->step < 0) return -1;
    return task->phase <= RV_PHASE_OPTIMIZER ? (int)task->phase : -1;
}

GArray *rv_step_lists_get(const rv_step_lists *lists, int32_t step, guint list)
{
    return lists->lists[(gsize)(step + 1) * lists->list_count + list];
}

void rv_step_lists_free(rv_step_lists *lists)
{
    for (gsize i = 0; i < (gsize)lists->slots * lists->list_count; i++) g_array_unref(lists->lists[i]);
    g_free(lists->lists);
    lists->lists = NULL;
}

gint rv_task_compare_recorded(gconstpointer a, gconstpointer b, gpointer graph)
{
    const rv_task *tasks = (const rv_task *)((const rv_graph *)graph)->tasks->data;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    int64_t tx = tasks[x].recorded_start_ns, ty = tasks[y].recorded_start_ns;
    if (tx != ty) return tx < ty ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Is `tasks` already in recorded order?  Lists gathered by id often are
 * (tasks are numbered as the trace recorded them), and the order is total
 * (ties go by id), so a sorted list is the only answer: one pass instead
 * of a merge sort's n log n calls. */
static gboolean in_recorded_order(const rv_graph *graph, const GArray *tasks)
{
    const int32_t *ids = (const int32_t *)tasks->data;
    for (guint i = 1; i < tasks->len; i++)
        if (rv_task_compare_recorded(&ids[i - 1], &ids[i], (gpointer)graph) > 0) return FALSE;
    return TRUE;
}

/* x before y in recorded order (rv_task_compare_recorded < 0). */
static inline gboolean recorded_before(const rv_task *all, int32_t x, int32_t y)
{
    return all[x].recorded_start_ns != all[y].recorded_start_ns ? all[x].recorded_start_ns < all[y].recorded_start_ns : x < y;
}

enum { MERGED_RUNS_MAX = 16 };

/* Split the list, in list order, into runs already in recorded order, each
 * of one resource: a task joins its resource's latest run if it comes
 * after that run's last task, else opens a new one.  Each task's run in
 * run_of; the runs' lengths; FALSE past MERGED_RUNS_MAX runs. */
static gboolean ascending_runs(const rv_graph *graph, const GArray *tasks, guint8 *run_of, guint *length, int *runs)
{
    const rv_task *all = (const rv_task *)graph->tasks->data;
    const int32_t *ids = (const int32_t *)tasks->data;
    int32_t resource[MERGED_RUNS_MAX], last[MERGED_RUNS_MAX];
    *runs = 0;
    for (guint i = 0; i < tasks->len; i++) {
        int r = *runs - 1;
        while (r >= 0 && resource[r] != all[ids[i]].resource) r--;  /* the resource's latest run */
        if (r < 0 || !recorded_before(all, last[r], ids[i])) {
            if (*runs == MERGED_RUNS_MAX) return FALSE;
            r = (*runs)++;
            resource[r] = all[ids[i]].resource;
            length[r] = 0;
        }
        last[r] = ids[i];
        length[r]++;
        run_of[i] = (guint8)r;
    }
    return TRUE;
}

/* Sort by merging: a step's calls on its threads are in recorded order on
 * each thread (tasks are numbered as each thread recorded them), but for a
 * few the builder added later, and interleaved between threads: a few
 * ascending runs.  The order is total, so merging them gives the list a
 * full sort would, with a few comparisons per task instead of a merge
 * sort's n log n calls through a pointer.  FALSE (list untouched) past
 * MERGED_RUNS_MAX runs. */
static gboolean merge_runs(const rv_graph *graph, GArray *tasks)
{
    guint length[MERGED_RUNS_MAX], head[MERGED_RUNS_MAX], end[MERGED_RUNS_MAX];
    guint8 *run_of = g_new(guint8, MAX(tasks->len, 1));
    int runs;
    if (!ascending_runs(graph, tasks, run_of, length, &runs)) {
        g_free(run_of);
        return FALSE;
    }
    const rv_task *all = (const rv_task *)graph->tasks->data;
    int32_t *ids = (int32_t *)tasks->data, *split = g_new(int32_t, MAX(tasks->len, 1));
    for (int r = 0, at = 0; r < runs; at += (int)length[r], r++) head[r] = end[r] = (guint)at;
    for (guint i = 0; i < tasks->len; i++) split[end[run_of[i]]++] = ids[i];
    for (guint i = 0; i < tasks->len; i++) {
        int best = -1;
        for (int r = 0; r < runs; r++)
            if (head[r] < end[r] && (best < 0 || recorded_before(all, split[head[r]], split[head[best]]))) best = r;
        ids[i] = split[head[best]++];
    }
    g_free(split);
    g_free(run_of);
    return TRUE;
}

void rv_tasks_sort_recorded(const rv_graph *graph, GArray *tasks)
{
    if (in_recorded_order(graph, tasks) || merge_runs(graph, tasks)) return;
    g_array_sort_with_data(tasks, rv_task_compare_recorded, (gpointer)graph);
}

void rv_predecessor_rows(const rv_graph *graph, int32_t **first_out, int32_t **from_out)
{
    int32_t n = rv_graph_task_count(graph);
    const rv_edge *edges = (const rv_edge *)graph->edges->data;
    int32_t *first = g_new0(int32_t, n + 1);
    for (guint e = 0; e < graph->edges->len; e++) first[edges[e].to + 1]++;
    for (int32_t t = 0; t < n; t++) first[t + 1] += first[t];
    int32_t *from = g_new(int32_t, graph->edges->len + 1);
    int32_t *fill = g_memdup2(first, sizeof(int32_t) * (gsize)(n + 1));
    for (guint e = 0; e < graph->edges->len; e++) from[fill[edges[e].to]++] = edges[e].from;
    g_free(fill);
    *first_out = first;
    *from_out = from;
}
