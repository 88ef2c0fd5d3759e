/*
 * index.c - the per-graph edge index (see index.h): per-task in- and
 * out-edge lists kept in edge order, filled in lazily as tasks and edges
 * are appended.
 */
#include "index.h"
#include "cycles.h"
#include <string.h>

enum { IN = 0, OUT = 1 };

/* Room for `count` and some more: plugins insert tasks one at a time. */
static gsize capacity_for(gsize count, gsize old_capacity)
{
    return MAX(count + count / 4 + 1024, old_capacity + old_capacity / 2);
}

static void cover_tasks(rv_graph_index *index, int32_t count)
{
    if (count > index->task_capacity) {
        int32_t capacity = (int32_t)capacity_for((gsize)count, (gsize)index->task_capacity);
        for (int d = 0; d < 2; d++) {
            index->first[d] = g_renew(int32_t, index->first[d], capacity);
            index->last[d] = g_renew(int32_t, index->last[d], capacity);
        }
        index->task_capacity = capacity;
    }
    for (int32_t t = index->tasks; t < count; t++)
        index->first[IN][t] = index->last[IN][t] = index->first[OUT][t] = index->last[OUT][t] = -1;
    index->tasks = count;
}

static void append_to_list(rv_graph_index *index, int d, int32_t task, int32_t edge)
{
    index->next[d][edge] = -1;
    if (index->last[d][task] < 0) index->first[d][task] = edge;
    else index->next[d][index->last[d][task]] = edge;
    index->last[d][task] = edge;
}

/* An inserted launch call costs the cached typical launch, and a copy of
 * the median added to a list leaves its median unchanged (the upper median
 * of a sorted list stays put when an equal value joins it), so such a
 * launch edge keeps the cache; any other launch edge may move it. */
static gboolean launch_keeps_typical(const rv_graph_index *index, const GArray *edges, guint e)
{
    const rv_edge *edge = &g_array_index(edges, rv_edge, e);
    const rv_task *call = &g_array_index(index->tasks_array, rv_task, edge->from);
    return index->launch_ns >= 0 && (call->flags & RV_TASK_FLAG_INSERTED) && call->duration_ns == index->launch_ns;
}

static void take_edges(rv_graph_index *index, const GArray *edges)
{
    if (edges->len > index->edge_capacity) {
        guint capacity = (guint)capacity_for(edges->len, index->edge_capacity);
        for (int d = 0; d < 2; d++) index->next[d] = g_renew(int32_t, index->next[d], capacity);
        index->edge_capacity = capacity;
    }
    for (guint e = index->edges; e < edges->len; e++) {
        const rv_edge *edge = &g_array_index(edges, rv_edge, e);
        index->next[IN][e] = index->next[OUT][e] = -1;
        /* an edge naming no task is left out rather than indexed out of bounds */
        if (edge->from < 0 || edge->from >= index->tasks || edge->to < 0 || edge->to >= index->tasks) continue;
        append_to_list(index, OUT, edge->from, (int32_t)e);
        append_to_list(index, IN, edge->to, (int32_t)e);
        if (edge->kind == RV_EDGE_LAUNCH && !launch_keeps_typical(index, edges, e)) index->launch_ns = -1;
    }
    index->edges = edges->len;
}

rv_graph_index *rv_graph_index_get(const rv_graph *graph)
{
    rv_graph *mutable_graph = (rv_graph *)graph; /* the index is a cache */
    if (mutable_graph->index == NULL) {
        mutable_graph->index = g_new0(rv_graph_index, 1);
        mutable_graph->index->launch_ns = -1;
    }
    return mutable_graph->index;
}

void rv_graph_index_share_witness(rv_graph *target, const rv_graph *source)
{
    rv_order_witness *witness = source->index ? source->index->witness : NULL;
    struct rv_selection_memo *selections = source->index ? source->index->selections : NULL;
    if (target->index == NULL && witness == NULL && selections == NULL) return;
    rv_graph_index *index = rv_graph_index_get(target);
    rv_order_witness_ref(witness);
    rv_order_witness_unref(index->witness);
    index->witness = witness;
    rv_selection_memo_ref(selections);
    rv_selection_memo_unref(index->selections);
    index->selections = selections;
}

rv_graph_index *rv_graph_index_catch_up(const rv_graph *graph)
{
    rv_graph_index *index = rv_graph_index_get(graph);
    if (index->tasks_array != graph->tasks || index->edges_array != graph->edges ||
        graph->tasks->len < (guint)index->tasks || graph->edges->len < index->edges) {
        index->tasks_array = graph->tasks;
        index->edges_array = graph->edges;
        index->tasks = 0;
        index->edges = 0;
        index->launch_ns = -1;
    }
    if ((int32_t)graph->tasks->len > index->tasks) {
        /* a new task may gain edges to the old ones: take the edges in after */
        cover_tasks(index, (int32_t)graph->tasks->len);
    }
    if (graph->edges->len > index->edges) take_edges(index, graph->edges);
    return index;
}

void rv_graph_index_reset(const rv_graph *graph)
{
    rv_graph_index *index = graph->index;
    if (index == NULL) return;
    index->tasks = 0;
    index->edges = 0;
    index->launch_ns = -1;
}

void rv_graph_index_free(rv_graph_index *index)
{
    if (index == NULL) return;
    for (int d = 0; d < 2; d++) {
        g_free(index->first[d]);
        g_free(index->last[d]);
        g_free(index->next[d]);
    }
    for (gsize m = 0; m < G_N_ELEMENTS(index->marks); m++) {
        g_free(index->marks[m].epoch);
        g_free(index->marks[m].value);
    }
    for (gsize m = 0; m < G_N_ELEMENTS(index->check_marks); m++) {
        g_free(index->check_marks[m].epoch);
        g_free(index->check_marks[m].value);
    }
    g_free(index->calls_seen.epoch);
    g_free(index->calls_seen.value);
    rv_order_witness_unref(index->witness);
    rv_selection_memo_unref(index->selections);
    g_free(index);
}

static void unlink_from_list(rv_graph_index *index, int d, int32_t task, int32_t edge)
{
    int32_t previous = -1;
    for (int32_t e = index->first[d][task]; e >= 0; previous = e, e = index->next[d][e]) {
        if (e != edge) continue;
        if (previous < 0) index->first[d][task] = index->next[d][e];
        else index->next[d][previous] = index->next[d][e];
        if (index->last[d][task] == e) index->last[d][task] = previous;
        return;
    }
}

/* Put `edge` into `task`'s list at its place in edge order. */
static void insert_in_order(rv_graph_index *index, int d, int32_t task, int32_t edge)
{
    int32_t previous = -1, e = index->first[d][task];
    while (e >= 0 && e < edge) { previous = e; e = index->next[d][e]; }
    index->next[d][edge] = e;
    if (previous < 0) index->first[d][task] = edge;
    else index->next[d][previous] = edge;
    if (e < 0) index->last[d][task] = edge;
}

/* Move one end of an edge (OUT: its source, IN: its target) to `task`. */
static void move_edge_end(rv_graph *graph, int32_t edge, int d, int32_t task)
{
    rv_graph_index *index = rv_graph_index_sync(graph);
    rv_edge *changed = &g_array_index(graph->edges, rv_edge, edge);
    int32_t *end = d == OUT ? &changed->from : &changed->to;
    unlink_from_list(index, d, *end, edge);
    *end = task;
    insert_in_order(index, d, task, edge);
}

void rv_graph_index_set_edge_source(rv_graph *graph, int32_t edge, int32_t from)
{
    move_edge_end(graph, edge, OUT, from);
}

void rv_graph_index_set_edge_target(rv_graph *graph, int32_t edge, int32_t to)
{
    move_edge_end(graph, edge, IN, to);
}

void rv_task_marks_begin(rv_task_marks *marks, int32_t tasks)
{
    if (tasks > marks->capacity) {
        int32_t capacity = (int32_t)capacity_for((gsize)tasks, (gsize)marks->capacity);
        marks->epoch = g_renew(uint32_t, marks->epoch, capacity);
        marks->value = g_renew(int32_t, marks->value, capacity);
        /* epoch 0 is never current (current starts at 1) */
        memset(marks->epoch + marks->capacity, 0, sizeof(uint32_t) * (gsize)(capacity - marks->capacity));
        marks->capacity = capacity;
    }
    if (++marks->current == 0) {
        /* wrapped after 2^32 walks: an old epoch could look current */
        memset(marks->epoch, 0, sizeof(uint32_t) * (gsize)marks->capacity);
        marks->current = 1;
    }
}
