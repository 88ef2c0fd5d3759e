/*
 * sim.h - discrete-event replay of a dependency graph (Daydream's Algorithm 1).
 *
 * The simulator implements graph.h's timing model: it reads durations, host
 * overheads, each GPU stream's launch latency, idle gap and launch-queue
 * depth, and the edges - never recorded start times.  Ready tasks wait in a
 * binary heap; by default the task that can start earliest goes first,
 * ties broken by task id (recorded order).  Where that order cannot change
 * any time - no policy, no contention, and every resource's tasks chained
 * by order edges or zero-length instants (every built graph, a joint job's
 * rendezvous included) - the replay skips the heap and dispatches the ready
 * tasks in any order the edges allow, with the same times.
 *
 * A plugin may add a policy (Daydream's overridden Schedule function, e.g.
 * P3's "layers near the input first").  With a policy, a task is dispatched
 * only at the moment it can really start - when its dependencies are met
 * AND its resource is free - and among tasks that can start at the same
 * moment the smaller rank goes first.  So when a network channel frees up,
 * the queued transfer of lowest rank takes it, whatever order the transfers
 * became ready in.  Without a policy the two rules give the same schedule
 * whenever each resource's tasks are chained by order edges (every built
 * graph); the default path skips the re-queueing and is faster.
 *
 * Contention (contention.h): when graph->contention.enabled, communication
 * and compute kernels on one GPU slow each other while they overlap; such a
 * task's end is settled only when nothing can change its speed any more,
 * so it holds its resource and its successors until then (a replay loop of
 * its own, with the policy rule above).  A task's simulated length may then
 * exceed its duration.  Off, the replay is the plain one.
 */
#ifndef REVERIE_SIM_H
#define REVERIE_SIM_H

#include <glib.h>
#include <stdint.h>
#include "reverie/graph.h"

G_BEGIN_DECLS

/*
 * A task's rank under a policy: among tasks that could start at the same
 * moment, smaller goes first (ties: task id).  Called once per time a task
 * is queued, so it should be cheap (a table lookup).
 */
typedef int64_t (*rv_priority_fn)(const rv_graph *graph, int32_t task, void *user_data);

typedef struct {
    rv_priority_fn priority;  /* NULL: no policy, earliest start first */
    void *user_data;
} rv_policy;

/* No simulated time may pass this (2^62 ns, about 146 years); a graph whose
 * durations would is refused rather than allowed to wrap. */
#define RV_SIM_TIME_MAX_NS ((int64_t)1 << 62)

typedef struct {
    int32_t task_count;
    int64_t *start_ns;   /* per task; -1 for removed tasks */
    int64_t *end_ns;
    int64_t makespan_ns; /* latest end minus earliest start */
    gboolean launch_queue_ignored; /* the launch-queue rule would have deadlocked: replayed without it */
    /* Per step of the replayed graph (graph->steps), the latest end of its
     * live GPU tasks, -1 where it has none: noted by the replay from its own
     * packed arrays, so that the step report (report.h) need not read every
     * task again.  NULL (step_count 0) where not noted: a result built
     * elsewhere, or a graph without steps. */
    int64_t *step_gpu_end_ns;
    guint step_count;
} rv_sim_result;

/* Replay the graph.  Fails (RV_ERROR_INPUT) if some task can never run or
 * a time would pass RV_SIM_TIME_MAX_NS.  If only the launch-queue rule
 * keeps tasks from running (its holders and the graph's edges disagree on
 * an order, which a plugin's rewrite can cause), the graph is replayed
 * without that rule and launch_queue_ignored says so. */
gboolean rv_simulate(const rv_graph *graph, const rv_policy *policy, rv_sim_result *result,
                     GError **error);
void rv_sim_result_clear(rv_sim_result *result);

/*
 * What a replay works out from the graph's structure before it starts -
 * which tasks are live, each edge and how it readies its target, the
 * launch-queue holders - kept for many replays of graphs that differ from
 * this one only in durations, host overheads, launch latencies and idle
 * gaps (a sweep of speed factors).  About half a replay's cost.  It also
 * keeps an order of the live tasks that the edges allow: where every
 * resource is a chain (every imported graph), the replay then dispatches
 * in that order, without counting predecessors down or keeping ready
 * tasks, since any order the edges allow gives the same times there.
 * rv_simulate_reusing uses it only after checking that the graph still has
 * it (same live tasks on the same resources, the same edges and queue
 * depths: a few memcmp), and otherwise works it out as rv_simulate does,
 * so the result is always rv_simulate's.  A structure is read only while
 * it is used, so several threads may share one.
 */
typedef struct rv_sim_structure rv_sim_structure;
rv_sim_structure *rv_sim_structure_new(const rv_graph *graph);
void rv_sim_structure_free(rv_sim_structure *structure);
gboolean rv_simulate_reusing(const rv_graph *graph, const rv_sim_structure *structure, const rv_policy *policy,
                             rv_sim_result *result, GError **error);

G_END_DECLS

#endif
