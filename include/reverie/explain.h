/*
 * explain.h - time the recording shows that the timing rules do not explain.
 *
 * For every GPU task the rules of graph.h give an earliest start, computed
 * from the recorded (clock-corrected) times of its predecessors: the end of
 * the previous task on its stream plus the stream's idle gap, its launch
 * call's end plus the stream's launch latency, and the ends of its
 * cross-stream, synchronization and communication predecessors.  A task
 * recorded later than that waited for something the graph does not know: a
 * missing edge, another rank, another process on the GPU.  That wait is
 * "unexplained".  It is reported here, per step and per resource with the
 * tasks that carry the most, and never replayed: the simulator starts the
 * task by the rules, so the replay error shows the missing time too.
 *
 * A task recorded earlier than its rules allow ("early") points the other
 * way: an edge that should not be there, or a clock the correction missed.
 *
 * CPU: the host time before a call is its host overhead by definition
 * (graph.h), not unexplained.  A blocking call that returned long after
 * the GPU work its rules say it waited for (more than the trace's typical
 * return) waited for something else the graph does not know: that is
 * unexplained CPU wait, kept in the replay as the call's own time and
 * reported per step and per call site.  And a long host overhead that ends
 * just after a GPU task ends looks like a wait the graph has no edge for
 * (the thread was released by the GPU, not done with its Python): those are
 * counted as "suspect" host time, a diagnostic only.  Next to the count is
 * how many to expect by chance at the trace's rate of GPU task ends: only
 * a count well above that points at missing edges.
 */
#ifndef REVERIE_EXPLAIN_H
#define REVERIE_EXPLAIN_H

#include <glib.h>
#include <stdint.h>
#include "reverie/graph.h"

G_BEGIN_DECLS

/* A task recorded more than this before the rules allow counts as early,
 * and more than this after them as late; less is timestamp rounding and the
 * spread around a typical value (the totals still add up every nanosecond). */
#define RV_EXPLAIN_TOLERANCE_NS 2000

typedef struct {
    int32_t task;
    int64_t unexplained_ns;  /* recorded start minus the rules' earliest start */
    int64_t rule_start_ns;   /* that earliest start, on the recorded clock */
    int32_t binding;         /* the predecessor that set it, or -1 (stream order or none) */
} rv_unexplained_task;

typedef struct {
    int64_t total_ns;        /* over every GPU task */
    int64_t *by_step;        /* per step; index steps->len is "outside every step" */
    int64_t *by_resource;    /* per resource */
    uint64_t late_tasks;     /* GPU tasks with more than the tolerance unexplained */
    uint64_t early_tasks;    /* GPU tasks recorded earlier than the rules allow */
    int64_t early_ns;        /* by how much, in all */
    uint64_t gpu_tasks;
    uint64_t suspect_host_gaps;  /* host overheads over 50 us ending within 20 us of a GPU task's end */
    int64_t suspect_host_ns;     /* their total */
    double suspect_by_chance;    /* how many of those to expect if GPU ends fell at random (same rate) */
    GArray *top;             /* rv_unexplained_task, the largest first */
    /* CPU: time blocking calls took to return after what they waited for
     * ended, beyond the trace's typical return (timing.sync_return): a wait
     * the rules found no cause for.  The replay keeps it as the call's own
     * time, so no GPU what-if shrinks it.  Per step as by_step; per call
     * site (rv_unexplained_site), the largest first. */
    int64_t cpu_total_ns;
    int64_t *cpu_by_step;
    uint64_t cpu_calls;
    GArray *cpu_sites;
} rv_explanation;

/* Unexplained CPU wait at one call site: a runtime call under an operator. */
typedef struct {
    int32_t name;            /* string id: the runtime call ("cudaStreamSynchronize") */
    int32_t op;              /* string id: its innermost operator, 0 if none */
    uint64_t calls;
    int64_t total_ns;
} rv_unexplained_site;

/* One line each (no newline) for what the timing model had to assume about
 * this graph and a user should know before trusting a replay: GPU tasks
 * with no launch call, a corrected or inconsistent clock.  Empty when there
 * is nothing to say.  Free with g_ptr_array_unref. */
GPtrArray *rv_timing_notes(const rv_graph *graph);
/* The same, for a graph that stands for `gpu_tasks` GPU tasks (a job held
 * once, alike.h: its structure holds one rank's). */
GPtrArray *rv_timing_notes_counted(const rv_graph *graph, uint64_t gpu_tasks);

/* Explain a graph as built (plugins' inserted tasks have no recording and
 * are skipped).  top: how many tasks to keep in ->top. */
rv_explanation *rv_explain(const rv_graph *graph, guint top);
void rv_explanation_free(rv_explanation *explanation);

/* The recorded GPU time the rules leave unexplained in step `step` as the
 * reports list steps (a job's k-th step: all its ranks' k-th; a graph
 * without steps: all of it). */
int64_t rv_step_unexplained(const rv_graph *graph, const rv_explanation *x, guint step);

G_END_DECLS

#endif
