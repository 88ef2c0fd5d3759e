/*
 * cycles.h - the acyclicity checks behind rv_graph_check_acyclic and
 * rv_graph_validate, and the one after a plugin (private to the library).
 *
 * A plugin's rewrite is checked against the graph it was given: only when
 * its edges changed, and where the graph remembers an order of an earlier
 * state of its edges (rv_graph_remember_order, validate.h), only around the
 * edges that differ from that state (cycles.c says how).
 *
 * Messages are one line of RV_ERROR_INPUT that does not start with the
 * graph's source (validate.h's convention).
 */
#ifndef REVERIE_GRAPH_CYCLES_H
#define REVERIE_GRAPH_CYCLES_H

#include "reverie/graph.h"

/* A topological order of a graph's edges as they were, shared by the copies
 * of that graph (rv_graph_assign). */
typedef struct rv_order_witness rv_order_witness;
rv_order_witness *rv_order_witness_ref(rv_order_witness *witness);
void rv_order_witness_unref(rv_order_witness *witness);

/* The whole graph, Kahn's algorithm over its edge array: O(V + E). */
gboolean rv_cycles_check_all(const rv_graph *graph, GError **error);

/* What a later rv_cycles_check_changed compares with: the graph's witness
 * when it has one (nothing copied), else a copy of its edges. */
typedef struct rv_edges_before rv_edges_before;
rv_edges_before *rv_edges_before_take(const rv_graph *graph);

/* How a check went, for tests and benchmarks. */
typedef struct {
    guint changed;        /* edges that differ from before (or the witness) */
    guint against;        /* of those, edges against the order, searched around */
    int64_t searched;     /* tasks and edges those searches visited */
    gboolean whole_graph; /* the whole graph was checked instead */
} rv_cycles_how;

/* Is the graph acyclic, given that it was when `before` was taken (or, with
 * a witness, when the witness was made)?  Every edge must name a task
 * (rv_graph_validate_except_cycles first).  `how` may be NULL.  Frees
 * `before`. */
gboolean rv_cycles_check_changed(const rv_graph *graph, rv_edges_before *before, rv_cycles_how *how,
                                 GError **error);
void rv_edges_before_free(rv_edges_before *before);

/* After a plugin: the edges' checks of validate.c and the cycle check of
 * rv_cycles_check_changed, together (rv_graph_validate_except_edges
 * first).  Where the graph has a witness whose edges were all valid when it
 * was made, the graph has at least its tasks and one rank, an edge byte for
 * byte the witness's names tasks that exist, with a known kind, and crosses
 * no rank (one has none to cross): only the others are checked, and the one
 * comparison serves both checks.  Otherwise every edge is checked.  Frees
 * `before`. */
gboolean rv_edges_check_after_plugin(const rv_graph *graph, rv_edges_before *before, GError **error);

/* validate.c: every check but the edges' and the cycles'; one edge's check
 * (its tasks exist, its kind is known, it crosses no rank); every edge's. */
gboolean rv_graph_validate_except_edges(const rv_graph *graph, GError **error);
gboolean rv_graph_check_edge(const rv_graph *graph, guint e, GError **error);
gboolean rv_graph_check_edges(const rv_graph *graph, GError **error);

#endif
