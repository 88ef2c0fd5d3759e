/*
 * validate.c - the checks a graph passes before it is simulated (see
 * include/reverie/validate.h): after a load and after every plugin.
 *
 * A plugin is foreign code with write access to the graph's arrays, and a
 * saved graph is a file anyone can forge; the simulator indexes arrays with
 * the ids they hold and adds up their durations without checking again.
 */
#include "reverie/validate.h"
#include "reverie/checked.h"
#include "reverie/error.h"
#include "reverie/escape.h"
#include "cycles.h"
#include <math.h>
#include <string.h>

static gboolean invalid(GError **error, const char *format, ...) G_GNUC_PRINTF(2, 3);

static gboolean invalid(GError **error, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *message = g_strdup_vprintf(format, args);
    va_end(args);
    g_set_error_literal(error, RV_ERROR, RV_ERROR_INPUT, message);
    g_free(message);
    return FALSE;
}

static gboolean is_string_id(const rv_graph *graph, int32_t id)
{
    return id >= 0 && id < rv_strings_count(graph->strings);
}

static gboolean is_task_id(const rv_graph *graph, int32_t id)
{
    return id >= 0 && id < rv_graph_task_count(graph);
}

static gboolean check_resources(const rv_graph *graph, GError **error)
{
    for (guint r = 0; r < graph->resources->len; r++) {
        const rv_resource *resource = &g_array_index(graph->resources, rv_resource, r);
        if (resource->kind >= RV_RES_KIND_COUNT)
            return invalid(error, "resource %u has an unknown kind (%u)", r, resource->kind);
        if (!is_string_id(graph, resource->name))
            return invalid(error, "resource %u names string %d, which does not exist", r, resource->name);
        /* A graph with no rank list (built by hand) has the one rank 0. */
        guint ranks = MAX(graph->ranks->len, 1);
        if (resource->rank_index < -1 || (resource->rank_index >= 0 && (guint)resource->rank_index >= ranks))
            return invalid(error, "resource %u belongs to rank index %d, which does not exist (%u ranks)", r,
                           resource->rank_index, ranks);
    }
    return TRUE;
}

static gboolean check_collectives(const rv_graph *graph, GError **error)
{
    for (guint c = 0; c < graph->collectives->len; c++) {
        const rv_collective_info *info = &g_array_index(graph->collectives, rv_collective_info, c);
        if (!is_string_id(graph, info->group))
            return invalid(error, "collective %u names a process group string that does not exist", c);
        if (info->rendezvous != -1 && !is_task_id(graph, info->rendezvous))
            return invalid(error, "collective %u meets at task #%d, which does not exist", c, info->rendezvous);
        if (info->parallelism >= RV_PARALLEL_COUNT || info->matched_by >= RV_MATCH_COUNT || info->bytes < 0 ||
            info->group_size < 0 || info->participants < 0)
            return invalid(error, "collective %u has an impossible description", c);
    }
    for (guint r = 0; r < graph->ranks->len; r++)
        if (!is_string_id(graph, g_array_index(graph->ranks, rv_rank, r).source))
            return invalid(error, "rank index %u names a source string that does not exist", r);
    for (guint t = 0; t < graph->op_args->len; t++)
        if (!is_string_id(graph, g_array_index(graph->op_args, int32_t, t)))
            return invalid(error, "task #%u names an operator-arguments string that does not exist", t);
    return TRUE;
}

static gboolean check_task_ids(const rv_graph *graph, int32_t id, const rv_task *task, GError **error)
{
    if (task->resource < 0 || (guint)task->resource >= graph->resources->len)
        return invalid(error, "task #%d is on resource %d, which does not exist (%u resources)", id,
                       task->resource, graph->resources->len);
    if (task->kind >= RV_TASK_KIND_COUNT) return invalid(error, "task #%d has an unknown kind (%u)", id, task->kind);
    if (task->phase >= RV_PHASE_COUNT) return invalid(error, "task #%d has an unknown phase (%u)", id, task->phase);
    if (!is_string_id(graph, task->name) || !is_string_id(graph, task->op) || !is_string_id(graph, task->layer) ||
        (task->input_dims != -1 && !is_string_id(graph, task->input_dims)))
        return invalid(error, "task #%d names a string that does not exist", id);
    if (task->step != -1 && (task->step < 0 || (guint)task->step >= graph->steps->len))
        return invalid(error, "task #%d is in step %d, which does not exist (%u steps)", id, task->step,
                       graph->steps->len);
    if (task->collective < 0 || (guint)task->collective > graph->collectives->len)
        return invalid(error, "task #%d belongs to collective %" G_GINT64_FORMAT ", which does not exist (%u collectives)",
                       id, (int64_t)task->collective - 1, graph->collectives->len);
    return TRUE;
}

/* A task's name for a one-line message: names come from the trace (or a
 * forged file) and may hold line breaks or terminal escapes (g_free). */
static char *task_label(const rv_graph *graph, int32_t id)
{
    return rv_escape_text(rv_strings_get(graph->strings, g_array_index(graph->tasks, rv_task, id).name));
}

static gboolean amount_out_of_range(GError **error, const rv_graph *graph, int32_t id, const char *what,
                                    int64_t value)
{
    char *limit = rv_describe_long_duration((double)RV_MAX_DURATION_NS), *name = task_label(graph, id);
    gboolean ok = invalid(error, "task #%d (%s) has a %s of %" G_GINT64_FORMAT " ns, outside 0 .. %s", id, name, what,
                          value, limit);
    g_free(limit);
    g_free(name);
    return ok;
}

static gboolean check_task_amounts(const rv_graph *graph, int32_t id, const rv_task *task, GError **error)
{
    if (task->duration_ns < 0 || task->duration_ns > RV_MAX_DURATION_NS)
        return amount_out_of_range(error, graph, id, "duration", task->duration_ns);
    if (task->host_overhead_ns < 0 || task->host_overhead_ns > RV_MAX_DURATION_NS)
        return amount_out_of_range(error, graph, id, "host overhead", task->host_overhead_ns);
    if (task->bytes < 0) return invalid(error, "task #%d has a negative byte count", id);
    return TRUE;
}

/* How many of each thing a task may name, read once per check. */
typedef struct {
    guint strings, resources, steps, collectives;
} id_limits;

static id_limits limits_of(const rv_graph *graph)
{
    id_limits limits = { (guint)MAX(rv_strings_count(graph->strings), 0), graph->resources->len, graph->steps->len,
                         graph->collectives->len };
    return limits;
}

/* Every check of check_task_ids and check_task_amounts in one expression
 * (an id of -1 is a huge unsigned number): a sweep checks every task after
 * every variant, and only a task that fails needs the slow path that says
 * why. */
static inline gboolean task_plainly_valid(const id_limits *limits, const rv_task *task)
{
    return (guint)task->resource < limits->resources && task->kind < RV_TASK_KIND_COUNT &&
           task->phase < RV_PHASE_COUNT && (guint)task->name < limits->strings && (guint)task->op < limits->strings &&
           (guint)task->layer < limits->strings &&
           (task->input_dims == -1 || (guint)task->input_dims < limits->strings) &&
           (task->step == -1 || (guint)task->step < limits->steps) && (guint)task->collective <= limits->collectives &&
           task->duration_ns >= 0 && task->duration_ns <= RV_MAX_DURATION_NS && task->host_overhead_ns >= 0 &&
           task->host_overhead_ns <= RV_MAX_DURATION_NS && task->bytes >= 0;
}

static gboolean check_tasks(const rv_graph *graph, GError **error)
{
    int64_t work = 0;
    id_limits limits = limits_of(graph);
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if (!task_plainly_valid(&limits, task) &&
            (!check_task_ids(graph, id, task, error) || !check_task_amounts(graph, id, task, error)))
            return FALSE;
        if (task->flags & RV_TASK_FLAG_REMOVED) continue;
        /* Cannot overflow: work <= 2^61 and each duration and overhead <= 10^15
         * before the test.  The host overhead counts: the replay adds it too. */
        work += task->duration_ns + task->host_overhead_ns;
        if (work > RV_MAX_WORK_NS) {
            char *limit = rv_describe_long_duration((double)RV_MAX_WORK_NS);
            gboolean ok = invalid(error, "the tasks' durations add up to more than %s (2^61 ns) by task #%d: "
                                  "these are not real times", limit, id);
            g_free(limit);
            return ok;
        }
    }
    return TRUE;
}

/* Ranks meet only in collectives (job.h): through a resource of the whole
 * job (rank index -1), never by an edge from one rank's task to another's.
 * A plugin that puts several ranks' transfers on one channel breaks this. */
static gboolean check_rank_crossing(const rv_graph *graph, guint e, const rv_edge *edge, GError **error)
{
    const rv_task *from = &g_array_index(graph->tasks, rv_task, edge->from);
    const rv_task *to = &g_array_index(graph->tasks, rv_task, edge->to);
    int32_t a = rv_task_rank_index(graph, from), b = rv_task_rank_index(graph, to);
    if (a < 0 || b < 0 || a == b || (from->flags & RV_TASK_FLAG_REMOVED) || (to->flags & RV_TASK_FLAG_REMOVED))
        return TRUE;
    return invalid(error, "edge %u joins rank %" G_GINT64_FORMAT "'s task #%d (%s) to rank %" G_GINT64_FORMAT "'s task #%d "
                   "(%s): ranks meet only in a collective's rendezvous, so this does not support a job of several ranks",
                   e, g_array_index(graph->ranks, rv_rank, a).rank, edge->from,
                   rv_strings_get(graph->strings, from->name), g_array_index(graph->ranks, rv_rank, b).rank, edge->to,
                   rv_strings_get(graph->strings, to->name));
}

gboolean rv_graph_check_edge(const rv_graph *graph, guint e, GError **error)
{
    const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
    if (!is_task_id(graph, edge->from) || !is_task_id(graph, edge->to))
        return invalid(error, "edge %u joins task #%d to task #%d, but the tasks are #0 .. #%d", e, edge->from,
                       edge->to, rv_graph_task_count(graph) - 1);
    if (edge->kind >= RV_EDGE_KIND_COUNT) return invalid(error, "edge %u has an unknown kind (%u)", e, edge->kind);
    if (graph->ranks->len > 1 && !check_rank_crossing(graph, e, edge, error)) return FALSE;
    return TRUE;
}

/* Does an edge of a graph of several ranks (ids and kind already checked)
 * stay within one rank, or touch the job's own resources or a removed
 * task?  check_rank_crossing's rule, inline. */
static inline gboolean stays_in_rank(const rv_task *tasks, const rv_resource *resources, const rv_edge *edge)
{
    const rv_task *from = &tasks[edge->from], *to = &tasks[edge->to];
    int32_t a = resources[from->resource].rank_index, b = resources[to->resource].rank_index;
    return a < 0 || b < 0 || a == b || ((from->flags | to->flags) & RV_TASK_FLAG_REMOVED);
}

/* Every plugin's rewrite and every load end with this over all the edges:
 * an edge is checked inline, and only one that fails goes through
 * rv_graph_check_edge, for the same first error as before.  (The tasks'
 * resources were checked before this runs.) */
gboolean rv_graph_check_edges(const rv_graph *graph, GError **error)
{
    const rv_edge *edges = (const rv_edge *)graph->edges->data;
    const rv_task *task_array = (const rv_task *)graph->tasks->data;
    const rv_resource *resources = (const rv_resource *)graph->resources->data;
    int32_t tasks = rv_graph_task_count(graph);
    gboolean one_rank = graph->ranks->len <= 1;
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = &edges[e];
        gboolean plain = edge->from >= 0 && edge->from < tasks && edge->to >= 0 && edge->to < tasks &&
                         edge->kind < RV_EDGE_KIND_COUNT && (one_rank || stays_in_rank(task_array, resources, edge));
        if (!plain && !rv_graph_check_edge(graph, e, error)) return FALSE;
    }
    return TRUE;
}

/* Where a step's annotation ends: its end marker's recorded time. */
static int64_t annotation_end(const rv_graph *graph, const rv_step *step)
{
    return g_array_index(graph->tasks, rv_task, step->end_marker).recorded_start_ns;
}

/* The reports time a step from the previous step's end to its own (one
 * rank's steps in order): a ProfilerStep inside another, or two that
 * overlap, would give a negative or meaningless step time. */
static gboolean check_step_order(const rv_graph *graph, guint s, int32_t previous, GError **error)
{
    const rv_step *step = &g_array_index(graph->steps, rv_step, s);
    const rv_step *before = &g_array_index(graph->steps, rv_step, previous);
    int64_t before_end = annotation_end(graph, before);
    if (step->recorded_begin_ns >= before_end && annotation_end(graph, step) >= step->recorded_begin_ns) return TRUE;
    char *name = rv_escape_text(rv_strings_get(graph->strings, step->name));
    char *outer = rv_escape_text(rv_strings_get(graph->strings, before->name));
    gboolean ok;
    if (annotation_end(graph, step) < step->recorded_begin_ns)
        ok = invalid(error, "step %u (%s) ends before it begins", s, name);
    else if (annotation_end(graph, step) <= before_end)
        ok = invalid(error, "step %u (%s, at %.3f us) is nested inside step %d (%s, %.3f .. %.3f us): nested "
                     "ProfilerStep annotations are not steps of one loop - profile one loop, or remove the inner ones",
                     s, name, step->recorded_begin_ns / 1e3, previous, outer, before->recorded_begin_ns / 1e3,
                     before_end / 1e3);
    else
        ok = invalid(error, "step %u (%s) begins at %.3f us, before step %d (%s) ends at %.3f us: ProfilerStep "
                     "annotations that overlap are not steps of one loop", s, name, step->recorded_begin_ns / 1e3,
                     previous, outer, before_end / 1e3);
    g_free(name);
    g_free(outer);
    return ok;
}

static gboolean check_steps(const rv_graph *graph, GError **error)
{
    for (guint s = 0; s < graph->steps->len; s++) {
        const rv_step *step = &g_array_index(graph->steps, rv_step, s);
        if (!is_string_id(graph, step->name)) return invalid(error, "step %u names a string that does not exist", s);
        if (!is_task_id(graph, step->begin_marker) || !is_task_id(graph, step->end_marker))
            return invalid(error, "step %u has a marker task that does not exist (#%d, #%d)", s, step->begin_marker,
                           step->end_marker);
    }
    /* each rank's steps one after the other (the markers' resources, checked
     * before this runs, say the rank) */
    guint ranks = MAX(graph->ranks->len, 1);
    int32_t *last = g_new(int32_t, ranks + 1);
    for (guint r = 0; r <= ranks; r++) last[r] = -1;
    gboolean ok = TRUE;
    for (guint s = 0; s < graph->steps->len && ok; s++) {
        const rv_task *marker = &g_array_index(graph->tasks, rv_task, g_array_index(graph->steps, rv_step, s).begin_marker);
        int32_t rank = rv_task_rank_index(graph, marker);
        guint slot = rank >= 0 && (guint)rank < ranks ? (guint)rank : ranks;
        if (last[slot] >= 0) ok = check_step_order(graph, s, last[slot], error);
        last[slot] = (int32_t)s;
    }
    g_free(last);
    return ok;
}

gboolean rv_graph_validate_except_edges(const rv_graph *graph, GError **error)
{
    /* Order matters: later checks index with ids the earlier ones vouched for
     * (the steps' order reads their markers' resources; the edges' rank
     * check, after this, their tasks' resources). */
    return check_resources(graph, error) && check_tasks(graph, error) && check_steps(graph, error) &&
           check_collectives(graph, error);
}

gboolean rv_graph_validate_except_cycles(const rv_graph *graph, GError **error)
{
    return rv_graph_validate_except_edges(graph, error) && rv_graph_check_edges(graph, error);
}

gboolean rv_graph_validate(const rv_graph *graph, GError **error)
{
    return rv_graph_validate_except_cycles(graph, error) && rv_cycles_check_all(graph, error);
}

static gboolean out_of_range(GError **error, const rv_graph *graph, int32_t task, double ns, const char *cause)
{
    char *wanted = rv_describe_long_duration(ns), *limit = rv_describe_long_duration((double)RV_MAX_DURATION_NS);
    if (task >= 0) {
        char *name = task_label(graph, task);
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "%s would make task #%d (%s) last %s, outside 0 .. %s", cause, task,
                    name, wanted, limit);
        g_free(name);
    } else
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "%s would make a new task last %s, outside 0 .. %s", cause, wanted,
                    limit);
    g_free(wanted);
    g_free(limit);
    return FALSE;
}

gboolean rv_task_duration_from(const rv_graph *graph, int32_t task, double ns, const char *cause, int64_t *out,
                               GError **error)
{
    if (rv_checked_duration(ns, out)) return TRUE;
    return out_of_range(error, graph, task, ns, cause);
}

/* The sum, in double, of the durations and host overheads of the live
 * tasks of the graph. */
static double live_work_ns(const rv_graph *graph)
{
    double work = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if (!(task->flags & RV_TASK_FLAG_REMOVED)) work += (double)task->duration_ns + (double)task->host_overhead_ns;
    }
    return work;
}

gboolean rv_tasks_check_scale(const rv_graph *graph, const GArray *tasks, double factor, const char *parameter,
                              GError **error)
{
    if (!isfinite(factor) || factor < 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "%s: the factor must be a finite number >= 0", parameter);
        return FALSE;
    }
    /* A factor of at most 1 lengthens nothing: a task or the total can pass
     * its limit only if it already had, which the check after every plugin
     * refuses (the graph given was valid, or the same check blames the
     * plugin).  A sweep of scale factors below 1 thereby skips two passes
     * per variant. */
    if (factor <= 1.0) return TRUE;
    double selected = 0;
    for (guint i = 0; i < tasks->len; i++) {
        int32_t id = g_array_index(tasks, int32_t, i);
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if (task->flags & RV_TASK_FLAG_REMOVED) continue;
        /* the callers scale the duration, the host overhead or both */
        double scaled = (double)MAX(task->duration_ns, task->host_overhead_ns) * factor;
        if (scaled > (double)RV_MAX_DURATION_NS) return out_of_range(error, graph, id, scaled, parameter);
        selected += (double)task->duration_ns + (double)task->host_overhead_ns;
    }
    /* Tasks may be listed twice; counting them twice only makes this stricter. */
    double work = live_work_ns(graph) + selected * (factor - 1.0);
    if (work > (double)RV_MAX_WORK_NS) {
        char *wanted = rv_describe_long_duration(work), *limit = rv_describe_long_duration((double)RV_MAX_WORK_NS);
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "%s would make the tasks add up to %s, more than %s", parameter,
                    wanted, limit);
        g_free(wanted);
        g_free(limit);
        return FALSE;
    }
    return TRUE;
}
