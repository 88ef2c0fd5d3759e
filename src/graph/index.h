/*
 * index.h - the per-graph edge index behind the transform API (private to
 * the library; plugins see only transform.h).
 *
 * Plugins ask "what follows this task on its resource?", "which call
 * launched this kernel?" and splice or remove tasks thousands of times per
 * graph.  Scanning the flat edge array for each question made every plugin
 * quadratic in the graph's size.  The index keeps, per task, its in- and
 * out-edges as linked lists in edge order, so each question costs the
 * task's own degree.
 *
 * Invariants relied on:
 *  - edges change only by being appended (rv_graph_add_edge, or any append
 *    to graph->edges) or through rv_graph_index_set_edge_source or _target; appended
 *    edges and tasks are taken in lazily by the next rv_graph_index_sync.
 *    Anything else (an edge rewritten in place) must be followed by
 *    rv_transform_invalidate(); replaced or shrunk arrays are noticed;
 *  - each list holds its edges in increasing edge index, so "the first edge
 *    that ..." means what it meant when the whole array was scanned;
 *  - a graph is used by one thread at a time (const queries fill the index).
 */
#ifndef REVERIE_GRAPH_INDEX_H
#define REVERIE_GRAPH_INDEX_H

#include "reverie/graph.h"

/* Per-task scratch for one walk over the graph: a new epoch clears it all
 * in O(1). */
typedef struct {
    uint32_t *epoch;   /* per task: the epoch its value belongs to */
    int32_t *value;    /* per task: the walk's own use */
    uint32_t current;
    int32_t capacity;
} rv_task_marks;

typedef struct rv_graph_index {
    const GArray *tasks_array, *edges_array; /* what was indexed; another array means rebuild */
    int32_t tasks;        /* tasks covered */
    int32_t task_capacity;
    guint edges;          /* edges taken in */
    guint edge_capacity;
    int32_t *first[2], *last[2]; /* per task, [0] in-edges, [1] out-edges: list heads and tails, -1 if empty */
    int32_t *next[2];            /* per edge: the next edge of the same list, -1 at the end */
    int64_t launch_ns;           /* cached typical launch for inserted calls; -1: compute again */
    rv_task_marks marks[5];      /* scratch for transform.c's walks */
    rv_task_marks check_marks[2]; /* scratch for cycles.c's searches */
    rv_task_marks calls_seen;    /* scratch for memory.c's rv_memory_effect_add_for_tasks */
    struct rv_order_witness *witness; /* an order of an earlier state of the edges (cycles.h), or NULL;
                                         kept by a reset, shared by copies */
    struct rv_selection_memo *selections; /* rv_graph_remember_selections (select.h), or NULL; kept by a
                                             reset, shared by copies */
} rv_graph_index;

/* The graph's index, brought up to date with appended tasks and edges. */
/* The graph's index as it is (created empty if the graph has none). */
rv_graph_index *rv_graph_index_get(const rv_graph *graph);
/* target's witness becomes source's (cycles.h), and so do its remembered
 * selections (select.h): target was just made a copy of source. */
void rv_graph_index_share_witness(rv_graph *target, const rv_graph *source);
rv_graph_index *rv_graph_index_catch_up(const rv_graph *graph);
/* Mostly the index is up to date: the neighbour questions (order, launch)
 * ask it hundreds of thousands of times in one rewrite, so that case is
 * answered inline and only a change goes through the call. */
static inline rv_graph_index *rv_graph_index_sync(const rv_graph *graph)
{
    rv_graph_index *index = graph->index;
    if (index != NULL && index->tasks_array == graph->tasks && index->edges_array == graph->edges &&
        (guint)index->tasks == graph->tasks->len && index->edges == graph->edges->len)
        return index;
    return rv_graph_index_catch_up(graph);
}
void rv_graph_index_free(rv_graph_index *index);
/* Forget everything; the next sync rebuilds from the arrays. */
void rv_graph_index_reset(const rv_graph *graph);

/* A task's first in-edge (forward FALSE) or out-edge (TRUE), and the edge
 * after `edge` in the same list; -1 at the end:
 *   for (int32_t e = rv_graph_index_first(ix, t, TRUE); e >= 0; e = rv_graph_index_next(ix, e, TRUE)) */
static inline int32_t rv_graph_index_first(const rv_graph_index *index, int32_t task, gboolean forward)
{
    return index->first[forward ? 1 : 0][task];
}
static inline int32_t rv_graph_index_next(const rv_graph_index *index, int32_t edge, gboolean forward)
{
    return index->next[forward ? 1 : 0][edge];
}

/* Move edge `edge` to start at `from`, in the graph and in the lists. */
void rv_graph_index_set_edge_source(rv_graph *graph, int32_t edge, int32_t from);
/* Move edge `edge` to end at `to`, in the graph and in the lists. */
void rv_graph_index_set_edge_target(rv_graph *graph, int32_t edge, int32_t to);

/* Scratch marks: start a new walk over a graph of `tasks` tasks (the
 * arrays grow on first use), and read or set a task's value in it (unset
 * values read as `unset`). */
void rv_task_marks_begin(rv_task_marks *marks, int32_t tasks);
static inline gboolean rv_task_marks_has(const rv_task_marks *marks, int32_t task)
{
    return marks->epoch[task] == marks->current;
}
static inline void rv_task_marks_set(rv_task_marks *marks, int32_t task, int32_t value)
{
    marks->epoch[task] = marks->current;
    marks->value[task] = value;
}
static inline int32_t rv_task_marks_get(const rv_task_marks *marks, int32_t task, int32_t unset)
{
    return marks->epoch[task] == marks->current ? marks->value[task] : unset;
}

/* select.c's memo, counted. */
struct rv_selection_memo *rv_selection_memo_ref(struct rv_selection_memo *memo);
void rv_selection_memo_unref(struct rv_selection_memo *memo);

#endif
