/*
 * alike.h - a job whose ranks are alike, held once per kind of rank.
 *
 * The ranks of a data-parallel job run the same program: their graphs have
 * the same tasks, kinds, names, edges and streams, and differ only in
 * durations, host overheads, recorded times, correlation ids and each
 * stream's measured latency and gap.  Some ranks may run another program
 * (rank 0 logging, a pipeline's last stage).  The join (job.h) numbers
 * each rank's tasks - its trace's, its start markers, its arrivals - as
 * one block, ranks in order, then the job's own tasks (the rendezvous);
 * each rank's edges likewise.  Ranks whose blocks agree in everything but
 * those values form a class; a job of fewer classes than ranks is held as
 * one structure and columns:
 *
 *   structure   each class's block of tasks, taken from its first member
 *               (class by class, classes in the order of their first
 *               members: rank index 0's class first), then the job's own
 *               tasks; the same for threads and streams, steps and edges;
 *               the collectives, the ranks, the memory records and the
 *               metadata of the whole job.
 *   classes     per class: where its block lies in the structure and its
 *               members (rank indices, ascending).  A rank unlike every
 *               other is a class of one: held as it is.
 *   resources   every rank's threads and streams and the job's, as the
 *               joint graph holds them (names, clocks, each stream's
 *               launch latency and idle gap).
 *   steps       every rank's steps, as the joint graph holds them.
 *   columns     per class task and member: duration, host overhead and
 *               recorded start, and where some rank's differs from its
 *               class's first member's, correlation id, payload, step and
 *               collective.
 *
 * Invariants relied on (rv_alike_from_job checks them): a member's k-th
 * task agrees with its class's k-th in kind, phase, flags, names and its
 * thread or stream's place; its i-th edge is the class's i-th between the
 * same places (a rank's edges join its own tasks or the job's); the job's
 * tasks are instants (no duration, no host overhead, on a resource with no
 * idle gap or launch latency).  So one order of the structure's tasks is
 * an order every rank's edges allow, a class's k-th task can be replayed
 * for all of its members at once (rv_alike_simulate), and the joint graph
 * comes back exactly (rv_alike_to_job).
 *
 * A column is laid out class by class and, within a class, member-minor:
 * class task k's value for member m is at first_cell + (k - first_task) *
 * member_count + m, so the lockstep replay reads one task's values for
 * every member in one sweep.  A job of one class has the layout [k * R +
 * r].
 */
#ifndef REVERIE_ALIKE_H
#define REVERIE_ALIKE_H

#include <glib.h>
#include "reverie/explain.h"
#include "reverie/graph.h"
#include "reverie/report.h"

G_BEGIN_DECLS

/* Ranks that run one program. */
typedef struct {
    int32_t first_task, task_count;          /* its block in the structure's tasks */
    int32_t first_resource, resource_count;  /* ... threads and streams */
    int32_t first_step, step_count;          /* ... steps */
    guint first_edge, edge_count;            /* ... edges */
    guint member_count;
    guint *members;                          /* rank indices, ascending */
    gsize first_cell;                        /* the columns' index of its first task's first member */
    gsize first_resource_cell;               /* likewise in per-resource tables (rv_alike_stream_delays) */
} rv_alike_class;

/* Where a rank lies: its class and place there, and its blocks in the
 * joint graph. */
typedef struct {
    guint class_index, member;
    int32_t first_task, first_resource, first_step;
    guint first_edge;
} rv_alike_rank;

typedef struct {
    rv_graph *structure;
    guint rank_count;
    guint class_count;
    rv_alike_class *classes;
    rv_alike_rank *ranks;         /* per rank index */
    int32_t *task_class;          /* per class task of the structure: its class */
    int32_t class_task_count;     /* the structure's tasks below this are the classes', at or above the job's */
    int32_t class_resource_count; /* likewise for resources */
    int32_t class_step_count;     /* the structure's steps: all the classes' */
    guint class_edge_count;       /* the structure's first edges: the classes'; the rest the job's */
    gsize cell_count;             /* cells per column: every rank's tasks */
    gsize resource_cell_count;    /* cells per resource table (rv_alike_stream_delays): every rank's threads and streams */
    GArray *resources;            /* rv_resource, the joint graph's */
    GArray *steps;                /* rv_step, the joint graph's */
    /* per class task and member (see above) */
    int64_t *duration_ns;
    int64_t *host_overhead_ns;
    int64_t *recorded_start_ns;   /* NULL where loaded for a replay only (rv_store_load_alike) */
    int64_t *correlation;         /* NULL: every member's is its class's (or loaded for a replay only) */
    int64_t *bytes;               /* NULL: likewise */
    int32_t *step;                /* NULL: likewise; else the rank's own step index, or -1 */
    int32_t *collective;          /* NULL: likewise */
} rv_alike_job;

/* What the comparison of a joint graph's ranks found. */
typedef struct {
    guint class_count;
    guint largest_class;    /* members of the largest class */
    guint *rank_class;      /* per rank index, its class (classes in the order of their first members); g_free */
    char *unlike_because;   /* the first difference found between rank index 0 and a rank, or NULL; g_free */
} rv_alike_verdict;

/*
 * Hold a joint graph (job.h) once per class of alike ranks, or NULL with
 * RV_ERROR_INPUT where it cannot be (no two ranks alike: the first
 * difference between rank index 0 and another rank; a job task that is
 * not an instant, tasks not in rank blocks, a plugin's changes).  The
 * joint graph is left as it was.
 */
rv_alike_job *rv_alike_from_job(const rv_graph *joint, GError **error);
/* rv_alike_from_job's verdict alone, without building the structure and
 * the columns (what `info` and `import` say): FALSE with the reason where
 * the job cannot be held so, else TRUE and `verdict` (may be NULL; clear
 * it with rv_alike_verdict_clear). */
gboolean rv_alike_check(const rv_graph *joint, rv_alike_verdict *verdict, GError **error);
void rv_alike_verdict_clear(rv_alike_verdict *verdict);
/* The joint graph back, exactly as rv_alike_from_job was given it. */
rv_graph *rv_alike_to_job(const rv_alike_job *alike);
void rv_alike_job_free(rv_alike_job *alike);

/* ---- a saved job of alike ranks (store.c) ------------------------------------- */

/* What a saved file says of one class: its block's sizes and members. */
typedef struct {
    int32_t task_count, resource_count, step_count;
    guint edge_count;
    guint member_count;
    guint *members;  /* borrowed */
} rv_alike_class_shape;

/* What a saved file says of its job's shape; checked against the arrays
 * it holds before anything is indexed with it. */
typedef struct {
    guint rank_count;
    guint class_count;
    rv_alike_class_shape *classes;  /* borrowed */
} rv_alike_shape;

/* A rank's edges per task are few (about 1.5 in built graphs); a file that
 * gave a rank far more would expand to far more than it holds. */
#define RV_ALIKE_EDGES_PER_TASK_MAX 16

/* The shape of a job (to be saved); its arrays are the job's. */
rv_alike_shape rv_alike_shape_of(const rv_alike_job *alike);
void rv_alike_shape_clear(rv_alike_shape *shape);
/* Cells per column of a shape (checked by rv_alike_shape_problem). */
gsize rv_alike_shape_cells(const rv_alike_shape *shape);
/*
 * Does the shape fit `stored`, a graph as a saved file of alike ranks
 * holds it: the joint graph's resources, steps, collectives and ranks, the
 * structure's tasks, edges and per-task side arrays, every rank in one
 * class?  NULL if it does, else what is wrong (static text).
 */
const char *rv_alike_shape_problem(const rv_graph *stored, const rv_alike_shape *shape);
/* The job from `stored` (checked with rv_alike_shape_problem; its arrays
 * are taken, the graph is left empty) and the columns (taken; see
 * rv_alike_job). */
rv_alike_job *rv_alike_assemble(rv_graph *stored, const rv_alike_shape *shape, int64_t *duration_ns,
                                int64_t *host_overhead_ns, int64_t *recorded_start_ns);

/* The class of the structure's class task t. */
static inline const rv_alike_class *rv_alike_class_of(const rv_alike_job *alike, int32_t t)
{
    return &alike->classes[alike->task_class[t]];
}
/* Where the structure's resource `resource`, one of class cls's, has its
 * first member's cell in a per-resource table (rv_alike_stream_delays). */
static inline gsize rv_alike_resource_cell(const rv_alike_class *cls, int32_t resource)
{
    return cls->first_resource_cell + (gsize)(resource - cls->first_resource) * cls->member_count;
}
/* The column index of class task t for the m-th member of its class. */
static inline gsize rv_alike_cell(const rv_alike_job *alike, int32_t t, guint member)
{
    const rv_alike_class *c = rv_alike_class_of(alike, t);
    return c->first_cell + (gsize)(t - c->first_task) * c->member_count + member;
}
/* The same for rank index r, a member of t's class. */
static inline gsize rv_alike_rank_cell(const rv_alike_job *alike, int32_t t, guint r)
{
    return rv_alike_cell(alike, t, alike->ranks[r].member);
}
/* The class of rank index r. */
static inline const rv_alike_class *rv_alike_rank_class(const rv_alike_job *alike, guint r)
{
    return &alike->classes[alike->ranks[r].class_index];
}
/* Rank index r's thread or stream at the structure's place `resource`, one
 * of r's class's. */
static inline const rv_resource *rv_alike_resource(const rv_alike_job *alike, int32_t resource, guint r)
{
    const rv_alike_class *c = rv_alike_rank_class(alike, r);
    return &g_array_index(alike->resources, rv_resource, (guint)alike->ranks[r].first_resource + (guint)(resource - c->first_resource));
}
/* Rank index r's own step index of its class's s-th step. */
static inline const rv_step *rv_alike_rank_step(const rv_alike_job *alike, guint r, int32_t s)
{
    return &g_array_index(alike->steps, rv_step, (guint)(alike->ranks[r].first_step + s));
}
/* Every rank's stream delays, laid out like the columns: per class
 * resource and member, at first_resource_cell + (resource -
 * first_resource) * member_count + m, the launch latency and the idle gap
 * (0 off GPU streams).  g_free both. */
void rv_alike_stream_delays(const rv_alike_job *alike, int64_t **launch_latency_ns, int64_t **idle_gap_ns);
/* Members of the largest class (the lockstep replay's scratch per task). */
guint rv_alike_widest_class(const rv_alike_job *alike);
/* Live tasks and edges of the whole job. */
int32_t rv_alike_live_task_count(const rv_alike_job *alike);
guint rv_alike_edge_count(const rv_alike_job *alike);

/* A replay in lockstep: the end of class task t of its m-th member at
 * rv_alike_cell(t, m), the job's tasks after them (one each, at cell_count
 * + j); -1 for removed tasks.  A task's start is its end less its
 * duration. */
typedef struct {
    int64_t *end_ns;
    gsize count;
} rv_alike_result;

/*
 * Replay the job by graph.h's timing model, the k-th task of the
 * structure's order for every member of its class at once.  The times are
 * those rv_simulate gives the joint graph, task for task (the test shows
 * it).  FALSE with
 * RV_ERROR_INPUT where the replay could not finish (some task never ready,
 * a time past RV_SIM_TIME_MAX_NS), where the launch-queue rule would
 * deadlock (rv_simulate then replays without it), or where a rank's thread
 * or stream is not one chain: replay rv_alike_to_job's graph instead.
 */
gboolean rv_alike_simulate(const rv_alike_job *alike, rv_alike_result *result, GError **error);
void rv_alike_result_clear(rv_alike_result *result);

/* ---- what simulate reports of it (alike_report.c) -------------------------------- */

/* The replay as rv_replay_run reads the joint graph's - each rank's steps,
 * the job's, each rank's waits in its collectives and for whom - without
 * the critical path (path_ns and its parts stay 0). */
gboolean rv_alike_replay_run(const rv_alike_job *alike, rv_replay *out, GError **error);
/* rv_explain's totals, per step (the structure's steps: each class's, each
 * the sum over its members' like steps, as rv_step_unexplained reads
 * them) and
 * of the blocking calls; no detail (by resource, the largest, call sites,
 * suspect host time). */
rv_explanation *rv_alike_explain(const rv_alike_job *alike);
/* rv_job_step_entering_together's figure: -1 unless one step. */
int64_t rv_alike_step_entering_together(const rv_alike_job *alike, const GArray *steps);
/* GPU tasks of the whole job, and rv_peer_wait_total's figure. */
uint64_t rv_alike_gpu_task_count(const rv_alike_job *alike);
int64_t rv_alike_peer_wait_total(const rv_alike_job *alike);

G_END_DECLS

#endif
