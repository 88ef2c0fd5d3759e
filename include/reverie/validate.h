/*
 * validate.h - is a graph safe to simulate?  Checked after every plugin and
 * after every load, because the simulator and the reports trust it.
 *
 * rv_graph_validate checks what the simulator, the step report and the
 * commands index or add up without checking again:
 *   - every resource's kind is a known kind, its name a string id and its
 *     rank index a rank of the graph (or -1, the job's own);
 *   - every task's resource is a resource, its kind and phase known kinds,
 *     its name, operator, layer (and Input Dims, or -1) string ids, its step
 *     a step or -1;
 *   - every task's duration and host overhead lie in [0,
 *     RV_MAX_DURATION_NS], its bytes are not negative, and the durations and
 *     overheads of the tasks that run add up to at most RV_MAX_WORK_NS
 *     (checked.h), so no sum over the graph overflows;
 *   - every edge joins two tasks and has a known kind, and in a graph of
 *     several ranks no edge joins two ranks' tasks directly (they meet at
 *     a collective's rendezvous, a resource of the whole job);
 *   - every step's name is a string id and its markers are tasks;
 *   - every task's collective is one of the graph's, whose process group is
 *     a string id and whose meeting point, if any, a task;
 *   - the edges form no cycle (rv_graph_check_acyclic).
 * The first problem found is reported as one line of RV_ERROR_INPUT that
 * does not start with the graph's source: the caller says whose fault it is
 * (the file's, or a plugin's).
 *
 * Cost: O(V + E).
 */
#ifndef REVERIE_VALIDATE_H
#define REVERIE_VALIDATE_H

#include <glib.h>
#include "reverie/graph.h"

G_BEGIN_DECLS

gboolean rv_graph_validate(const rv_graph *graph, GError **error);

/* Every check above but the last: for a graph whose edges are known to
 * form no cycle (the same edges as a graph that passed rv_graph_validate).
 * A sweep checks thousands of variants whose plugin only retimed tasks. */
gboolean rv_graph_validate_except_cycles(const rv_graph *graph, GError **error);

/*
 * Before many plugins are applied to copies of this graph (a sweep's
 * variants, what-ifs on a graph kept loaded): remember a topological order
 * of its tasks, close to their recorded order, and the edges it is an
 * order of.  Copies made afterwards (rv_graph_copy, rv_graph_assign) share
 * it, and the check after each plugin (rv_plugin_apply) then looks only
 * around the edges that differ from these, instead of at the whole graph.
 * Changing the graph afterwards is safe (the check compares with what was
 * remembered), only slower.  Nothing is remembered for a graph with a
 * cycle.  O(V log V + E) once; 12 bytes per edge and 8 per task, shared.
 */
void rv_graph_remember_order(rv_graph *graph);

/*
 * Before scaling tasks by factor (rv_transform_scale): FALSE with an
 * RV_ERROR_USAGE error naming `parameter` (such as "factor=1e300") when
 * factor is not a finite number >= 0, when it would make one of the tasks
 * last longer than RV_MAX_DURATION_NS, or the graph's tasks together
 * longer than RV_MAX_WORK_NS.  Removed tasks count for nothing.
 */
gboolean rv_tasks_check_scale(const rv_graph *graph, const GArray *tasks, double factor,
                              const char *parameter, GError **error);

/*
 * A duration a plugin computed in floating point for task (or for a new
 * task, task = -1), as whole nanoseconds in *out.  FALSE with an
 * RV_ERROR_USAGE error blaming `cause` (the parameters, such as
 * "bandwidth_factor=1e-300") when it is not in [0, RV_MAX_DURATION_NS].
 */
gboolean rv_task_duration_from(const rv_graph *graph, int32_t task, double ns, const char *cause,
                               int64_t *out, GError **error);

G_END_DECLS

#endif
