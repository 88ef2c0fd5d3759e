/*
 * alike.h - a job whose ranks are alike, held once.
 *
 * The ranks of a data-parallel job run the same program: their graphs have
 * the same tasks, kinds, names, edges and streams, and differ only in
 * durations, host overheads, recorded times and each stream's measured
 * latency and gap.  Such a job is held as one structure and columns:
 *
 *   structure   rank index 0's tasks (template ids 0 .. rank_task_count-1),
 *               then the job's own tasks (the rendezvous where a
 *               collective's participants meet, job.h); rank 0's
 *               resources, then the job's; the edges among them.
 *   columns     per rank-local task and rank: duration, host overhead,
 *               recorded start; per rank-local resource and rank: the GPU
 *               stream's launch latency and idle gap.
 *
 * Invariant relied on by the lockstep replay: every rank's edges are rank
 * 0's, between the same template ids (a rank's task to the same rank's, or
 * to one of the job's tasks, never to another rank's), and every job task
 * is an instant (no duration, no host overhead, on a resource with no idle
 * gap).  So one order of the structure's tasks is an order every rank's
 * edges allow, and the k-th task can be replayed for all ranks at once.
 *
 * A column is laid out rank-minor, [task * rank_count + rank]: the
 * lockstep replay reads a task's value for every rank in one sweep.
 */
#ifndef REVERIE_ALIKE_H
#define REVERIE_ALIKE_H

#include <glib.h>
#include "reverie/graph.h"

G_BEGIN_DECLS

typedef struct {
    rv_graph *structure;          /* the template (above); its ranks: all of the job's, in rank-index order */
    guint rank_count;
    int32_t rank_task_count;      /* template ids below this are a rank's, at or above the job's */
    int32_t rank_resource_count;  /* likewise for resources */
    /* per rank-local task t and rank index r, at [t * rank_count + r] */
    int64_t *duration_ns;
    int64_t *host_overhead_ns;
    int64_t *recorded_start_ns;
    /* per rank-local resource and rank index, at [resource * rank_count + r] */
    int64_t *launch_latency_ns;
    int64_t *idle_gap_ns;
    /* per rank-local task and rank (same layout), then per job task: the
     * task id it came from in the joint graph (rv_alike_from_job) */
    int32_t *joint_task;
} rv_alike_job;

/*
 * Hold a joint graph (job.h) whose ranks are alike once, or NULL with
 * RV_ERROR_INPUT naming the first difference (a rank with another count of
 * tasks, a task of another kind or name, an edge the others lack, an edge
 * between two ranks, a job task that is not an instant).  Removed tasks
 * (a rank's merged waits for its peers, job.h) must be removed on every
 * rank; their other fields may differ.  The joint graph is left as it was.
 */
rv_alike_job *rv_alike_from_job(const rv_graph *joint, GError **error);
void rv_alike_job_free(rv_alike_job *alike);

/* The column index of rank-local task t of rank r. */
static inline gsize rv_alike_at(const rv_alike_job *alike, int32_t t, guint r)
{
    return (gsize)t * alike->rank_count + r;
}

/* A replay in lockstep: every time of rank-local task t of rank r at
 * [t * rank_count + r], the job's tasks after them (one each, at
 * rank_task_count * rank_count + j).  Starts follow from ends: a task's
 * start is its end less its duration. */
typedef struct {
    int64_t *end_ns;
    gsize count;
} rv_alike_result;

/*
 * Replay the job by graph.h's timing model, every rank of the k-th task of
 * the structure's order at once.  The times are those rv_simulate gives the
 * joint graph the job came from, task for task (the test shows it).  FALSE
 * with RV_ERROR_INPUT where the replay could not finish (some task never
 * ready, a time past RV_SIM_TIME_MAX_NS), or where the launch-queue rule
 * would deadlock (rv_simulate then replays without it; replay the joint
 * graph instead).
 */
gboolean rv_alike_simulate(const rv_alike_job *alike, rv_alike_result *result, GError **error);
void rv_alike_result_clear(rv_alike_result *result);

G_END_DECLS

#endif
