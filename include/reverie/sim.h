/*
 * sim.h - discrete-event replay of a dependency graph (Daydream's Algorithm 1).
 *
 * The simulator reads durations, gaps, lags and edges, never recorded start
 * times.  Ready tasks wait in a binary heap ordered by the policy's
 * priority; by default the task that can start earliest goes first, ties
 * broken by task id (recorded order).  A plugin may replace the priority,
 * for example to favour layers near the input (P3).
 */
#ifndef REVERIE_SIM_H
#define REVERIE_SIM_H

#include <glib.h>
#include <stdint.h>
#include "reverie/graph.h"

G_BEGIN_DECLS

/*
 * A replacement priority: smaller goes first.  ready_ns is when the task's
 * dependencies are met (plus its lag).  The default is ready_ns itself.
 */
typedef int64_t (*rv_priority_fn)(const rv_graph *graph, int32_t task, int64_t ready_ns,
                                  void *user_data);

typedef struct {
    rv_priority_fn priority;  /* NULL: earliest start first */
    void *user_data;
} rv_policy;

typedef struct {
    int32_t task_count;
    int64_t *start_ns;   /* per task; -1 for removed tasks */
    int64_t *end_ns;
    int64_t makespan_ns; /* latest end minus earliest start */
} rv_sim_result;

/* Replay the graph.  Fails (RV_ERROR_INPUT) if some task can never run. */
gboolean rv_simulate(const rv_graph *graph, const rv_policy *policy, rv_sim_result *result,
                     GError **error);
void rv_sim_result_clear(rv_sim_result *result);

G_END_DECLS

#endif
