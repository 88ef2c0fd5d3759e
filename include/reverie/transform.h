/*
 * transform.h - Daydream's transformation primitives over a graph.
 *
 * Every optimization plugin is written with these and nothing else.  Each
 * primitive keeps the graph valid: tasks of a resource stay chained by order
 * edges, removed tasks are bypassed by edges from their predecessors to
 * their successors, and inserted GPU work brings its launch call.
 * Selection ("which tasks?") lives in select.h; scheduling priority in sim.h.
 *
 * Removal is logical (RV_TASK_FLAG_REMOVED): ids stay stable while a plugin
 * works, and the simulator skips removed tasks and their edges.
 *
 * Cost: the neighbour and launch questions below, and splicing, cost the
 * task's own number of edges; removing k tasks costs about k plus the edges
 * around them and the edges it adds (a chain of removed tasks, such as a
 * run of launch calls, shares one list of what it reaches; tasks removed
 * earlier next to them are walked again); so a plugin that inserts or
 * removes a task per layer is linear in the graph.  This rests on an index the library keeps with the
 * graph, built by the first question in O(tasks + edges).  It sees tasks and edges appended (rv_graph_add_task,
 * rv_graph_add_edge) and every change made through this API; a plugin that
 * rewrites an edge in place, or changes a launch call's duration or flags
 * by hand before inserting GPU work, calls rv_transform_invalidate first.
 */
#ifndef REVERIE_TRANSFORM_H
#define REVERIE_TRANSFORM_H

#include <glib.h>
#include "reverie/graph.h"

G_BEGIN_DECLS

/* Multiply the duration of each task by factor; the result is clamped to
 * 0 .. RV_MAX_DURATION_NS (checked.h), so check the factor first
 * (validate.h's rv_tasks_check_scale) to report it instead. */
void rv_transform_scale(rv_graph *graph, const GArray *tasks, double factor);
/* Multiply the host overhead of each task by factor: the Python and
 * framework time before a CPU call (graph.h); GPU tasks have none. */
void rv_transform_scale_host_overhead(rv_graph *graph, const GArray *tasks, double factor);
/* Both of the above in one pass over the tasks (a sweep of scale factors
 * runs it once per variant). */
void rv_transform_scale_with_overhead(rv_graph *graph, const GArray *tasks, double factor);
void rv_transform_set_duration(rv_graph *graph, int32_t task, int64_t duration_ns);

typedef enum {
    RV_REMOVE_DROP_OVERHEAD = 0,  /* the host overhead before the task goes with it */
    RV_REMOVE_KEEP_OVERHEAD = 1   /* the next task on the resource inherits it */
} rv_remove_mode;

/*
 * Remove a task.  Its predecessors are reconnected to its successors.
 * Removing a GPU task also removes the CPU call that launched it (found
 * through its launch edge).  Returns how many tasks were removed.
 */
int rv_transform_remove(rv_graph *graph, int32_t task, rv_remove_mode mode);
/* The same for many tasks at once: each live task is joined to every live
 * task it reached through removed ones (at least one of this batch), once,
 * and not where a live edge of its own already readies that task at its
 * end. */
int rv_transform_remove_many(rv_graph *graph, const GArray *tasks, rv_remove_mode mode);

/* What stands for a region of removed tasks (rv_transform_replace_regions). */
typedef struct {
    int32_t entry;          /* live tasks that fed the region feed this task instead; -1: none */
    const int32_t *exits;   /* live tasks that waited for the region wait for each of these */
    int32_t exit_count;
    /* The stand-ins are host calls (a graph launch): a thread's order
     * through a victim goes through them as well, like any other edge.
     * FALSE: they are GPU work, which the host does not wait for, and the
     * host's order only closes over the run (the first rule below). */
    gboolean host_calls;
} rv_region;

/*
 * Remove tasks that new tasks stand for (a graph launch for the calls it
 * replaces, a pipeline's stages for the passes they rebuild), in one pass
 * over the edges: victims[i] belongs to regions[region_of[i]].  Unlike
 * rv_transform_remove_many, which joins each live task to everything it
 * reached through removed ones (for a long run of removed tasks with many
 * ways out, edges quadratic in the run), the region's own tasks carry its
 * dependencies:
 *   - each resource stays chained: the live task before a run of victims
 *     on a resource is ordered before the live task after it;
 *   - a live task that fed a victim (by any edge but a thread's order,
 *     unless host_calls) feeds the region's entry - unless `after` (per task id, may be NULL)
 *     marks it as depending on that region's work itself: it cannot come
 *     before the region, and only waits;
 *   - a live task that waited for a victim (the same kinds) waits for each
 *     of the region's exits;
 *   - a victim that fed a victim of another region: that region's entry
 *     waits for this one's exits.
 * No pair of tasks already joined (by an edge there before, or one added
 * here) is joined again.  Removing a GPU task does not remove its launch
 * call here: list both.  `mode` as for rv_transform_remove.  Returns how
 * many tasks were removed.  O(victims + edges).
 */
int rv_transform_replace_regions(rv_graph *graph, const GArray *victims, const GArray *region_of,
                                 const rv_region *regions, const guint8 *after, rv_remove_mode mode);

typedef struct {
    rv_task task;           /* kind, name, resource, duration, tags; flags are set for you */
    int32_t after;          /* place it after this task (on the same resource) in that order; -1: unordered */
    int32_t launch_after;   /* GPU tasks: insert a launch call after this CPU task (-1: no launch) */
} rv_insert_spec;

/*
 * Insert a task.  If spec->after >= 0 the task is spliced into its
 * resource's order right after that task.  For a GPU task with
 * launch_after >= 0 a "cudaLaunchKernel" call is inserted on that task's
 * thread, costed at the median launch call of the trace, with a launch
 * edge to the new task.  Returns the new task's id, or -1 with error set.
 */
int32_t rv_transform_insert(rv_graph *graph, const rv_insert_spec *spec, GError **error);

/*
 * Replace GPU tasks by one new GPU task (a fusion: fused-adam's optimizer
 * kernel).  The new task spec->task goes right after the last of them on
 * its own stream and, if they had launch calls, a new launch call (the
 * trace's median launch) right after the last of those on its thread;
 * spec->after and spec->launch_after are not read.  Then they are removed
 * with their launch calls (rv_transform_remove_many, in `mode`), so that
 * removal's reconnection hands the new task every dependency they had on
 * other work: what any of them waited for - an optimizer's wait for its
 * gradients' all-reduces, a forward's wait for a parameter gather - it
 * waits for.  What waited for any of them (a synchronize, another
 * stream) then waits for it, with the same kind of edge, except a waiter
 * that leads back to the new task: a round trip through the host inside
 * the replaced work, which one task cannot keep (found by a walk over the
 * tasks recorded up to the new task's latest predecessor).  No cycle can
 * come of it.  Returns the new task's id, or -1 with error set (nothing
 * removed); *removed (may be NULL) gets the number of tasks removed.
 */
int32_t rv_transform_replace(rv_graph *graph, const GArray *gpu_tasks, const rv_insert_spec *spec, rv_remove_mode mode,
                             int *removed, GError **error);

/*
 * Move a run of tasks - `first` .. `last`, consecutive in their resource's
 * order - onto another resource (GPU kernels onto another stream of their
 * GPU, to run beside the ones they followed: concurrent-kernels; or onto a
 * channel: nmc-optimizer's memory-side compute), right after `after` in
 * that resource's order (-1: the run begins its order there).  A CPU
 * thread's tasks stay on threads, others off them.  The run leaves its old
 * resource's order: the task before it there is followed by the task after
 * it.  What the run waited for there, and what waited for it, stay as
 * dependencies (it keeps waiting for the end of the task before it, and
 * the task after it for its end), except where the caller says:
 *   beside   the run may start as soon as this task starts, instead of
 *            after the task before it ended (-1: no change): it runs
 *            beside that task and waits, through it, for all it waits for;
 *   release  this task, instead of the task after it, waits for the run's
 *            end (-1: no change), so that the tasks in between need not.
 * Its other edges (launch, sync, cross-stream, plugin) and its flags stay.
 * FALSE with RV_ERROR_PLUGIN when the tasks are no such run, or
 * `resource`, `after`, `beside` or `release` do not fit (one of the run's
 * own tasks).  A release ordered before the run closes a cycle, which the
 * host's check after the plugin reports.
 */
gboolean rv_transform_move_run(rv_graph *graph, int32_t first, int32_t last, int32_t resource, int32_t after,
                               int32_t beside, int32_t release, GError **error);

/* An extra dependency: `to` may not start before `from` ends. */
void rv_transform_add_edge(rv_graph *graph, int32_t from, int32_t to);

/* Tell the API that edges or launch calls were edited by hand (above). */
void rv_transform_invalidate(rv_graph *graph);

/* A new resource, e.g. a network channel ("net") or a copy engine ("pcie.d2h"). */
int32_t rv_transform_add_channel(rv_graph *graph, const char *name);

/*
 * A stream of its own on the GPU that runs `like` (a GPU task): for the
 * collectives a plugin inserts (NCCL runs its kernels on a stream of its
 * own, so they overlap compute on the same GPU, and the contention rule,
 * contention.h, and every report see them as that GPU's communication),
 * or for kernels a plugin runs beside the others (concurrent-kernels).  The stream is named "gpu D NAME" (D: like's device), has
 * the timing of like's stream (launch latency, idle gap, launch queue) and
 * its rank; the same name on the same device and rank gives the same
 * stream.  -1 when `like` does not run on a GPU stream.
 */
int32_t rv_transform_add_comm_stream(rv_graph *graph, int32_t like, const char *name);

/*
 * Tasks sorted into lists by step, flat, for plugins that walk every task
 * of a large graph: list `list` of step s (-1: outside every step) is
 * rv_step_lists_get(lists, s, list), its ids in ascending order, possibly
 * empty.  Each list is sized once and written in place: a hash lookup and
 * an append per task were a sixth of a plugin's apply at 100k tasks.
 * classify gives a task's list, in [0, list_count), or -1 to leave it
 * out; it is called once per task in id order, so it may also gather
 * (data).  Tasks whose step is not in graph->steps are left out.
 */
typedef int (*rv_task_classifier)(const rv_graph *graph, int32_t id, const rv_task *task, gpointer data);
typedef struct {
    guint slots;            /* graph->steps->len + 1: step s at s + 1 */
    guint list_count;
    GArray **lists;         /* slots x list_count */
} rv_step_lists;

rv_step_lists rv_step_lists_new(const rv_graph *graph, guint list_count, rv_task_classifier classify, gpointer data);
/* A classifier: a live kernel inside a step goes to the list of its phase
 * (RV_PHASE_FORWARD, RV_PHASE_BACKWARD or RV_PHASE_OPTIMIZER: list_count
 * RV_KERNEL_PHASE_LISTS), any other task to none. */
#define RV_KERNEL_PHASE_LISTS (RV_PHASE_OPTIMIZER + 1)
int rv_kernel_by_phase(const rv_graph *graph, int32_t id, const rv_task *task, gpointer data);
GArray *rv_step_lists_get(const rv_step_lists *lists, int32_t step, guint list);
void rv_step_lists_free(rv_step_lists *lists);

/*
 * Compare two task ids (pointers to int32) by recorded start, ties by id:
 * the order the trace shows, for plugins that pair or group tasks (the
 * simulator never reads recorded times).  user_data is the graph; use
 * with g_array_sort_with_data, or rv_tasks_sort_recorded (which costs one
 * pass over a list already in that order, as lists gathered by id often are,
 * and a merge where the list is a few runs in that order, each of one
 * resource: a step's calls on its threads; the same list either way).
 */
gint rv_task_compare_recorded(gconstpointer a, gconstpointer b, gpointer graph);
void rv_tasks_sort_recorded(const rv_graph *graph, GArray *tasks);

/* The median duration of the trace's kernel-launch calls (for inserted
 * launches; the heads of blocking calls, whose length the builder set, are
 * left out).  Computed afresh on each call, in O(launches). */
int64_t rv_graph_typical_launch_ns(const rv_graph *graph);

/* Predecessor / successor of a task in its resource's order, or -1. */
int32_t rv_graph_resource_previous(const rv_graph *graph, int32_t task);
int32_t rv_graph_resource_next(const rv_graph *graph, int32_t task);
/* The CPU call that launched a GPU task, or -1. */
int32_t rv_graph_launch_of(const rv_graph *graph, int32_t task);
/* rv_graph_launch_of for every task at once, in one pass over the edges
 * (each task's first launch edge, in edge order): an array of one entry
 * per task, -1 where none (g_free).  For a plugin that asks of most tasks. */
int32_t *rv_graph_launch_calls(const rv_graph *graph);

/* The predecessors of every task, from the edges as they are now, in
 * compressed rows: those of task t are from[first[t] .. first[t + 1]).
 * g_free both. */
void rv_predecessor_rows(const rv_graph *graph, int32_t **first, int32_t **from);

G_END_DECLS

#endif
