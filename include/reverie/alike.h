/*
 * alike.h - a job whose ranks are alike, held once.
 *
 * The ranks of a data-parallel job run the same program: their graphs have
 * the same tasks, kinds, names, edges and streams, and differ only in
 * durations, host overheads, recorded times, correlation ids and each
 * stream's measured latency and gap.  The join (job.h) numbers each rank's
 * tasks - its trace's, its start markers, its arrivals - as one block,
 * ranks in order, then the job's own tasks (the rendezvous); each rank's
 * edges likewise.  A job whose blocks agree in everything but those values
 * is held as one structure and columns:
 *
 *   structure   rank index 0's block of tasks (template ids 0 ..
 *               rank_task_count - 1), then the job's own tasks; rank 0's
 *               threads and streams, then the job's resources; rank 0's
 *               steps; rank 0's edges (the first rank_edge_count), then
 *               the job's own; the collectives, the ranks, the memory
 *               records and the metadata of the whole job.
 *   resources   every rank's threads and streams and the job's, as the
 *               joint graph holds them (names, clocks, each stream's
 *               launch latency and idle gap).
 *   steps       every rank's steps, as the joint graph holds them.
 *   columns     per rank-local task and rank: duration, host overhead and
 *               recorded start, and where some rank's differs from rank
 *               0's, correlation id, payload, step and collective.
 *
 * Invariants relied on (rv_alike_from_job checks them): rank r's k-th task
 * is joint task r * rank_task_count + k and agrees with the structure's
 * k-th in kind, phase, flags, names and its thread or stream's place; rank
 * r's i-th edge is the structure's i-th between the same places; the
 * job's tasks are instants (no duration, no host overhead, on a resource
 * with no idle gap).  So one order of the structure's tasks is an order
 * every rank's edges allow, the k-th task can be replayed for every rank
 * at once (rv_alike_simulate), and the joint graph comes back exactly
 * (rv_alike_to_job).
 *
 * A column is laid out rank-minor, [task * rank_count + rank]: the
 * lockstep replay reads one task's values for every rank in one sweep.
 */
#ifndef REVERIE_ALIKE_H
#define REVERIE_ALIKE_H

#include <glib.h>
#include "reverie/explain.h"
#include "reverie/graph.h"
#include "reverie/report.h"

G_BEGIN_DECLS

typedef struct {
    rv_graph *structure;
    guint rank_count;
    int32_t rank_task_count;      /* template ids below this are a rank's, at or above the job's */
    int32_t rank_resource_count;  /* likewise for resources */
    int32_t rank_step_count;      /* steps per rank */
    guint rank_edge_count;        /* the structure's first edges: a rank's; the rest the job's */
    GArray *resources;            /* rv_resource, the joint graph's */
    GArray *steps;                /* rv_step, the joint graph's */
    /* per rank-local task t and rank index r, at [t * rank_count + r] */
    int64_t *duration_ns;
    int64_t *host_overhead_ns;
    int64_t *recorded_start_ns;   /* NULL where loaded for a replay only (rv_store_load_alike) */
    int64_t *correlation;         /* NULL: every rank's is the structure's (or loaded for a replay only) */
    int64_t *bytes;               /* NULL: likewise */
    int32_t *step;                /* NULL: likewise; else the rank's own step index, or -1 */
    int32_t *collective;          /* NULL: likewise */
} rv_alike_job;

/*
 * Hold a joint graph (job.h) whose ranks are alike once, or NULL with
 * RV_ERROR_INPUT naming the first difference (a rank with another count of
 * tasks, a task of another kind or name, an edge the others lack, a job
 * task that is not an instant, tasks not in rank blocks, a plugin's
 * changes).  The joint graph is left as it was.
 */
rv_alike_job *rv_alike_from_job(const rv_graph *joint, GError **error);
/* rv_alike_from_job's verdict alone, without building the structure and
 * the columns (what `info` and `import` say). */
gboolean rv_alike_check(const rv_graph *joint, GError **error);
/* The joint graph back, exactly as rv_alike_from_job was given it. */
rv_graph *rv_alike_to_job(const rv_alike_job *alike);
void rv_alike_job_free(rv_alike_job *alike);

/* ---- a saved job of alike ranks (store.c) ------------------------------------- */

/* What a saved file says of its job's shape; checked against the arrays
 * it holds before anything is indexed with it. */
typedef struct {
    guint rank_count;
    int32_t rank_task_count, rank_resource_count, rank_step_count;
    guint rank_edge_count;
} rv_alike_shape;

/* A rank's edges per task are few (about 1.5 in built graphs); a file that
 * gave a rank far more would expand to far more than it holds. */
#define RV_ALIKE_EDGES_PER_TASK_MAX 16

/* The shape of a job (to be saved). */
rv_alike_shape rv_alike_shape_of(const rv_alike_job *alike);
/*
 * Does the shape fit `stored`, a graph as a saved file of alike ranks
 * holds it: the joint graph's resources, steps, collectives and ranks, the
 * structure's tasks, edges and per-task side arrays?  NULL if it does,
 * else what is wrong (static text).
 */
const char *rv_alike_shape_problem(const rv_graph *stored, const rv_alike_shape *shape);
/* The job from `stored` (checked with rv_alike_shape_problem; its arrays
 * are taken, the graph is left empty) and the columns (taken; see
 * rv_alike_job). */
rv_alike_job *rv_alike_assemble(rv_graph *stored, const rv_alike_shape *shape, int64_t *duration_ns,
                                int64_t *host_overhead_ns, int64_t *recorded_start_ns);

/* The column index of rank-local task t of rank index r. */
static inline gsize rv_alike_at(const rv_alike_job *alike, int32_t t, guint r)
{
    return (gsize)t * alike->rank_count + r;
}
/* Rank index r's thread or stream at rank-local place `resource`. */
static inline const rv_resource *rv_alike_resource(const rv_alike_job *alike, int32_t resource, guint r)
{
    return &g_array_index(alike->resources, rv_resource, (gsize)r * (guint)alike->rank_resource_count + (guint)resource);
}
/* Every rank's stream delays, laid out like the columns: per rank-local
 * resource and rank, at [resource * rank_count + r], the launch latency
 * and the idle gap (0 off GPU streams).  g_free both. */
void rv_alike_stream_delays(const rv_alike_job *alike, int64_t **launch_latency_ns, int64_t **idle_gap_ns);
/* Live tasks and edges of the whole job. */
int32_t rv_alike_live_task_count(const rv_alike_job *alike);
guint rv_alike_edge_count(const rv_alike_job *alike);

/* A replay in lockstep: the end of rank-local task t of rank r at
 * [t * rank_count + r], the job's tasks after them (one each, at
 * rank_task_count * rank_count + j); -1 for removed tasks.  A task's start
 * is its end less its duration. */
typedef struct {
    int64_t *end_ns;
    gsize count;
} rv_alike_result;

/*
 * Replay the job by graph.h's timing model, every rank of the k-th task of
 * the structure's order at once.  The times are those rv_simulate gives the
 * joint graph, task for task (the test shows it).  FALSE with
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
/* rv_explain's totals, per step (the structure's steps: rank 0's, each the
 * sum over the ranks' like steps, as rv_step_unexplained reads them) and
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
