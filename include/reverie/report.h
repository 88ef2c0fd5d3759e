/*
 * report.h - per-step times, recorded and simulated, by DESIGN's step rule.
 *
 * A step ends at the later of its ProfilerStep annotation's end and the end
 * of the last GPU task launched inside the annotation.  A step's time runs
 * from the previous step's end (the first step: from its own start).  The
 * same rule is applied to recorded times (to match tracestat.py) and to
 * simulated times (the annotation's ends are the step's marker tasks).
 */
#ifndef REVERIE_REPORT_H
#define REVERIE_REPORT_H

#include <glib.h>
#include <stdint.h>
#include "reverie/graph.h"
#include "reverie/sim.h"

G_BEGIN_DECLS

typedef struct {
    const char *name;
    int64_t recorded_ns;
    int64_t simulated_ns;
} rv_step_time;

/* One entry per step of the graph.  Free with g_array_unref. */
GArray *rv_step_times(const rv_graph *graph, const rv_sim_result *sim);

/* The same per rank of a graph of several ranks (job.h): a GPtrArray, per
 * rank index, of GArrays of rv_step_time in the rank's order.  A rank
 * without ProfilerStep annotations has one step over its own tasks.  Free
 * with g_ptr_array_unref. */
GPtrArray *rv_step_times_by_rank(const rv_graph *graph, const rv_sim_result *sim);

/* The job's step times: the k-th step of the job is as long as the
 * slowest rank's k-th step, recorded and simulated alike (each the largest
 * over the ranks that have it).  g_array_unref. */
GArray *rv_job_step_times(const GPtrArray *by_rank);

/* A step's interval on a timeline: [begin_ns, end_ns). */
typedef struct {
    int64_t begin_ns, end_ns;
} rv_window;

/*
 * Each step's interval by the step rule: from the previous step's end (the
 * first step: its own start) to its end; in a graph of several ranks
 * (job.h), the previous step of the same rank.  sim NULL: on the recorded clock,
 * from the graph's recorded steps; else on the simulated one.  A graph
 * without steps has one window from its first task's start to its last
 * task's end.  Free with g_array_unref.
 */
GArray *rv_step_windows(const rv_graph *graph, const rv_sim_result *sim);

/*
 * The recording as a result, so that reports read one kind of timeline:
 * each live task's recorded start and end (GPU times clock-corrected);
 * -1 for removed tasks and for tasks a plugin inserted (no recording).
 */
void rv_recorded_result(const rv_graph *graph, rv_sim_result *result);

/* Each resource's live tasks in the order they ran on a timeline (start,
 * then end, then id; sim NULL: the recording).  A GPtrArray of GArrays of
 * int32 task ids, one per resource; free with g_ptr_array_unref. */
GPtrArray *rv_tasks_by_resource(const rv_graph *graph, const rv_sim_result *sim);

/* A task's start on a timeline less its host overhead: when its resource
 * began working on it. */
static inline int64_t rv_busy_from(const rv_graph *graph, const rv_sim_result *sim, int32_t task)
{
    return sim->start_ns[task] - g_array_index(graph->tasks, rv_task, task).host_overhead_ns;
}

/* Over a list of steps: the mean and largest per-step error (relative,
 * rv_relative_error) and the totals. */
typedef struct {
    double mean_error, max_error;
    int64_t recorded_total_ns, simulated_total_ns;
} rv_steps_summary;
rv_steps_summary rv_steps_summarize(const GArray *steps);

/* ---- several ranks (job.h): ranks.c --------------------------------------- */

/* How long one rank waited in its collectives for another. */
typedef struct {
    int32_t rank_index;       /* the rank that waited */
    int64_t wait_ns;          /* its arrivals to its transfers' starts, in all */
    uint32_t collectives;     /* matched collectives it took part in */
    int64_t *waited_for_ns;   /* per rank index: the part of wait_ns spent for that rank, the last to arrive */
} rv_rank_wait;

/*
 * Per rank index, the time its transfers started after its arrivals in a
 * replay (sim), and whom it waited for: the last participant to arrive at
 * each collective.  An array of rv_rank_wait, one per rank; free with
 * rv_rank_waits_free.
 */
GArray *rv_rank_waits(const rv_graph *graph, const rv_sim_result *sim);
void rv_rank_waits_free(GArray *waits);

/* One replay as the reports read it: the steps (a job's: its slowest
 * rank's), and for a graph of several ranks each rank's steps and waits. */
typedef struct {
    GArray *steps;       /* rv_step_time */
    GPtrArray *by_rank;  /* jobs only: per rank index, a GArray of rv_step_time */
    GArray *waits;       /* jobs only: rv_rank_wait per rank index */
    gboolean launch_queue_ignored;  /* the replay dropped the launch-queue rule (sim.h) */
    int64_t path_ns;                /* the steps' critical paths, in all */
    int64_t host_path_ns;           /* the part of them that is recorded host time (critical_path.h) */
    int64_t profiler_path_ns;       /* of that, at most this much the profiler's own (critical_path.h) */
} rv_replay;

/* Replay the graph (policy may be NULL) and read its steps; FALSE with the
 * replay's error.  Clear with rv_replay_clear either way. */
gboolean rv_replay_run(const rv_graph *graph, const rv_policy *policy, rv_replay *out, GError **error);
void rv_replay_clear(rv_replay *replay);
/* What rv_replay_run reads, from a replay already run (sim is left as it is). */
void rv_replay_read(const rv_graph *graph, const rv_sim_result *sim, rv_replay *out);

/* The steps of one replay that reuses a replay structure (sim.h; may be
 * NULL) as rv_replay_run reads them, without the ranks' detail: what a
 * sweep's variants need.  g_array_unref; NULL with the replay's error.
 * *launch_queue_ignored (may be NULL) says whether the replay dropped the
 * launch-queue rule. */
GArray *rv_replay_steps(const rv_graph *graph, const rv_sim_structure *structure, const rv_policy *policy,
                        gboolean *launch_queue_ignored, GError **error);

/* ---- GPU kernel time: gpu_time.c ---------------------------------------------- */

/* The summed duration of live GPU kernels (kernel and comm tasks on GPU
 * streams; copies and sets are not kernels), in all and per step (a
 * kernel belongs to its launch's step; one entry when the graph has no
 * steps, a GArray of int64), and the steady value of a per-step list
 * (int64): the median of the entries after the first, or the one entry. */
int64_t rv_gpu_kernel_ns(const rv_graph *graph);
GArray *rv_gpu_kernel_ns_by_step(const rv_graph *graph);
int64_t rv_steady_ns(const GArray *values);

/* |simulated - recorded| / recorded, or 0 when recorded is 0. */
double rv_relative_error(int64_t recorded_ns, int64_t simulated_ns);

G_END_DECLS

#endif
