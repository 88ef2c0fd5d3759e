/*
 * alike.c - find whether a joint graph's ranks are alike and hold them once
 * (alike.h: one structure, per-rank columns).
 *
 * Each rank's tasks, in task-id order, are its local tasks 0, 1, ...; the
 * join (job.c) appends every rank's tasks, markers and arrivals in the
 * same pattern, so alike ranks number alike.  Two ranks are alike when
 * their k-th tasks agree in everything but times, and their edges, in
 * local numbers, are the same set.
 */
#include "reverie/alike.h"
#include "reverie/error.h"
#include "reverie/job.h"
#include <stdlib.h>
#include <string.h>

/* Where each joint task and resource sits in the structure. */
typedef struct {
    const rv_graph *joint;
    guint ranks;
    int32_t *task_local;      /* per joint task: its rank-local id, or for a job task rank_task_count + j */
    int32_t *resource_local;  /* per joint resource: likewise */
    int32_t *step_local;      /* per joint step: its index among its rank's steps */
    int32_t rank_tasks, rank_resources, job_tasks, job_resources;
    int32_t rank_steps;
    int32_t *joint_task;      /* alike.h's column of joint ids */
    int32_t *job_task;        /* per job task j: its joint id */
} numbering;

static int32_t rank_of_task(const rv_graph *joint, int32_t t)
{
    return rv_task_rank_index(joint, &g_array_index(joint->tasks, rv_task, t));
}

static int32_t rank_of_resource(const rv_graph *joint, int32_t resource)
{
    return g_array_index(joint->resources, rv_resource, resource).rank_index;
}

/* Count within each rank (and the job) in id order; every rank the same
 * count, or an error naming the first that differs. */
static gboolean number_resources(numbering *at, GError **error)
{
    const rv_graph *joint = at->joint;
    int32_t *count = g_new0(int32_t, at->ranks);
    at->resource_local = g_new(int32_t, joint->resources->len + 1);
    for (guint res = 0; res < joint->resources->len; res++) {
        int32_t r = rank_of_resource(joint, (int32_t)res);
        at->resource_local[res] = r >= 0 ? count[r]++ : -1 - at->job_resources++;
    }
    at->rank_resources = count[0];
    gboolean same = TRUE;
    for (guint r = 1; r < at->ranks && same; r++)
        if (count[r] != count[0]) {
            g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "rank index %u has %d threads and streams, rank index 0 %d", r,
                        count[r], count[0]);
            same = FALSE;
        }
    g_free(count);
    for (guint res = 0; res < joint->resources->len; res++)
        if (at->resource_local[res] < 0) at->resource_local[res] = at->rank_resources + (-1 - at->resource_local[res]);
    return same;
}

static gboolean number_tasks(numbering *at, GError **error)
{
    const rv_graph *joint = at->joint;
    int32_t n = rv_graph_task_count(joint);
    int32_t *count = g_new0(int32_t, at->ranks);
    at->task_local = g_new(int32_t, (gsize)n + 1);
    for (int32_t t = 0; t < n; t++) {
        int32_t r = rank_of_task(joint, t);
        at->task_local[t] = r >= 0 ? count[r]++ : -1 - at->job_tasks++;
    }
    at->rank_tasks = count[0];
    for (guint r = 1; r < at->ranks; r++)
        if (count[r] != count[0]) {
            g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "rank index %u has %d tasks, rank index 0 %d", r, count[r], count[0]);
            g_free(count);
            return FALSE;
        }
    g_free(count);
    at->joint_task = g_new(int32_t, (gsize)at->rank_tasks * at->ranks + (gsize)at->job_tasks + 1);
    at->job_task = at->joint_task + (gsize)at->rank_tasks * at->ranks;
    for (int32_t t = 0; t < n; t++) {
        int32_t r = rank_of_task(joint, t);
        if (r >= 0) {
            at->joint_task[(gsize)at->task_local[t] * at->ranks + (guint)r] = t;
        } else {
            at->job_task[-1 - at->task_local[t]] = t;
            at->task_local[t] = at->rank_tasks + (-1 - at->task_local[t]);
        }
    }
    return TRUE;
}

static gboolean number_steps(numbering *at, GError **error)
{
    const rv_graph *joint = at->joint;
    int32_t *count = g_new0(int32_t, at->ranks);
    at->step_local = g_new(int32_t, joint->steps->len + 1);
    for (guint s = 0; s < joint->steps->len; s++) {
        int32_t r = rank_of_task(joint, g_array_index(joint->steps, rv_step, s).begin_marker);
        at->step_local[s] = r >= 0 ? count[r]++ : -1;
    }
    at->rank_steps = count[0];
    gboolean same = TRUE;
    for (guint r = 1; r < at->ranks && same; r++)
        if (count[r] != count[0]) {
            g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "rank index %u has %d steps, rank index 0 %d", r, count[r], count[0]);
            same = FALSE;
        }
    g_free(count);
    return same;
}

/* ---- the comparison ------------------------------------------------------------ */

static gboolean unmatched(const rv_graph *joint, const rv_task *task)
{
    const rv_collective_info *info = rv_task_collective(joint, task);
    return info != NULL && info->matched_by == RV_MATCH_NONE;
}

/* What must agree between the k-th tasks of two ranks; NULL if all does. */
static const char *task_difference(const numbering *at, const rv_task *a, const rv_task *b)
{
    const rv_graph *joint = at->joint;
    if (a->kind != b->kind || a->phase != b->phase) return "kind";
    if (a->flags != b->flags) return "flags (GPU, blocking, removed, rendezvous)";
    if (a->flags & RV_TASK_FLAG_REMOVED) return NULL; /* never replayed: its step or name decides nothing */
    if (a->name != b->name || a->op != b->op || a->layer != b->layer || a->input_dims != b->input_dims) return "name";
    if (at->resource_local[a->resource] != at->resource_local[b->resource]) return "thread or stream";
    if ((a->step < 0) != (b->step < 0) || (a->step >= 0 && at->step_local[a->step] != at->step_local[b->step]))
        return "step";
    if (a->collective != b->collective && !(unmatched(joint, a) && unmatched(joint, b))) return "collective";
    return NULL;
}

static gboolean compare_tasks(const numbering *at, GError **error)
{
    for (int32_t k = 0; k < at->rank_tasks; k++) {
        const rv_task *first = &g_array_index(at->joint->tasks, rv_task, at->joint_task[(gsize)k * at->ranks]);
        for (guint r = 1; r < at->ranks; r++) {
            const rv_task *other = &g_array_index(at->joint->tasks, rv_task, at->joint_task[(gsize)k * at->ranks + r]);
            const char *what = task_difference(at, first, other);
            if (what == NULL) continue;
            g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "rank index %u's task %d (%s) differs from rank index 0's in its %s",
                        r, k, rv_strings_get(at->joint->strings, other->name), what);
            return FALSE;
        }
    }
    return TRUE;
}

static gboolean compare_resources(const numbering *at, GError **error)
{
    const rv_resource *resources = (const rv_resource *)at->joint->resources->data;
    int32_t *first = g_new(int32_t, (gsize)at->rank_resources + 1);
    for (guint res = 0; res < at->joint->resources->len; res++)
        if (resources[res].rank_index == 0) first[at->resource_local[res]] = (int32_t)res;
    gboolean same = TRUE;
    for (guint res = 0; res < at->joint->resources->len && same; res++) {
        if (resources[res].rank_index <= 0) continue;
        const rv_resource *a = &resources[first[at->resource_local[res]]], *b = &resources[res];
        if (a->kind == b->kind && a->queue_depth == b->queue_depth) continue;
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s differs from %s in its kind or launch-queue depth",
                    rv_strings_get(at->joint->strings, b->name), rv_strings_get(at->joint->strings, a->name));
        same = FALSE;
    }
    g_free(first);
    return same;
}

/* An edge in structure numbers, comparable with memcmp (no padding). */
typedef struct {
    int32_t from, to;
    int32_t kind_and_start;
} local_edge;

static gint by_local_edge(gconstpointer left, gconstpointer right)
{
    return memcmp(left, right, sizeof(local_edge));
}

/* Per rank, and last for the job's own, its edges in structure numbers,
 * sorted; NULL with an error for an edge between two ranks. */
static GArray **local_edges(const numbering *at, GError **error)
{
    const rv_graph *joint = at->joint;
    GArray **lists = g_new(GArray *, at->ranks + 1);
    for (guint r = 0; r <= at->ranks; r++) lists[r] = g_array_new(FALSE, FALSE, sizeof(local_edge));
    for (guint e = 0; e < joint->edges->len; e++) {
        const rv_edge *edge = &g_array_index(joint->edges, rv_edge, e);
        int32_t from = rank_of_task(joint, edge->from), to = rank_of_task(joint, edge->to);
        if (from >= 0 && to >= 0 && from != to) {
            g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "an edge joins rank indexes %d and %d directly (%s -> %s)", from, to,
                        rv_strings_get(joint->strings, g_array_index(joint->tasks, rv_task, edge->from).name),
                        rv_strings_get(joint->strings, g_array_index(joint->tasks, rv_task, edge->to).name));
            for (guint r = 0; r <= at->ranks; r++) g_array_unref(lists[r]);
            g_free(lists);
            return NULL;
        }
        int32_t owner = from >= 0 ? from : to >= 0 ? to : (int32_t)at->ranks;
        local_edge item = { at->task_local[edge->from], at->task_local[edge->to], edge->kind * 2 + (edge->from_start != 0) };
        g_array_append_val(lists[owner], item);
    }
    for (guint r = 0; r <= at->ranks; r++) g_array_sort(lists[r], by_local_edge);
    return lists;
}

static gboolean compare_edges(GArray **lists, guint ranks, GError **error)
{
    for (guint r = 1; r < ranks; r++) {
        if (lists[r]->len == lists[0]->len &&
            (lists[r]->len == 0 || memcmp(lists[r]->data, lists[0]->data, lists[0]->len * sizeof(local_edge)) == 0))
            continue;
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "rank index %u's edges differ from rank index 0's (%u against %u)", r,
                    lists[r]->len, lists[0]->len);
        return FALSE;
    }
    return TRUE;
}

/* The lockstep replay keeps no free time for the job's own resources. */
static gboolean job_tasks_are_instants(const numbering *at, GError **error)
{
    for (int32_t j = 0; j < at->job_tasks; j++) {
        const rv_task *task = &g_array_index(at->joint->tasks, rv_task, at->job_task[j]);
        const rv_resource *on = &g_array_index(at->joint->resources, rv_resource, task->resource);
        if (task->duration_ns == 0 && task->host_overhead_ns == 0 && on->idle_gap_ns == 0 &&
            !(task->flags & RV_TASK_FLAG_REMOVED))
            continue;
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "the job's task %s takes time (only instants are shared by the ranks)",
                    rv_strings_get(at->joint->strings, task->name));
        return FALSE;
    }
    return TRUE;
}

/* ---- the structure and the columns -------------------------------------------- */

static void copy_metadata(rv_graph *structure, const rv_graph *joint)
{
    for (guint d = 0; d < joint->device_names->len; d++)
        g_ptr_array_add(structure->device_names, g_strdup(g_ptr_array_index(joint->device_names, d)));
    structure->rank = joint->rank;
    structure->world_size = joint->world_size;
    structure->backend = g_strdup(joint->backend);
    structure->legacy_schema = joint->legacy_schema;
    structure->whole_trace_step = joint->whole_trace_step;
    structure->trace_stats = joint->trace_stats;
    structure->build_stats = joint->build_stats;
    structure->timing = joint->timing;
    g_array_append_vals(structure->ranks, joint->ranks->data, joint->ranks->len);
}

/* Rank 0's resources, tasks and steps and the job's, in structure numbers. */
static void fill_structure(rv_graph *structure, const numbering *at, GArray **edges)
{
    const rv_graph *joint = at->joint;
    g_array_set_size(structure->resources, (guint)(at->rank_resources + at->job_resources));
    for (guint res = 0; res < joint->resources->len; res++)
        if (rank_of_resource(joint, (int32_t)res) <= 0)
            g_array_index(structure->resources, rv_resource, at->resource_local[res]) =
                g_array_index(joint->resources, rv_resource, res);
    for (int32_t k = 0; k < at->rank_tasks + at->job_tasks; k++) {
        int32_t from = k < at->rank_tasks ? at->joint_task[(gsize)k * at->ranks] : at->job_task[k - at->rank_tasks];
        rv_task task = g_array_index(joint->tasks, rv_task, from);
        task.resource = at->resource_local[task.resource];
        if (task.step >= 0) task.step = at->step_local[task.step];
        g_array_append_val(structure->tasks, task);
    }
    for (guint s = 0; s < joint->steps->len; s++) {
        rv_step step = g_array_index(joint->steps, rv_step, s);
        if (rank_of_task(joint, step.begin_marker) != 0) continue;
        step.begin_marker = at->task_local[step.begin_marker];
        step.end_marker = at->task_local[step.end_marker];
        g_array_append_val(structure->steps, step);
    }
    for (guint c = 0; c < joint->collectives->len; c++) {
        rv_collective_info info = g_array_index(joint->collectives, rv_collective_info, c);
        if (info.rendezvous >= 0) info.rendezvous = at->task_local[info.rendezvous];
        g_array_append_val(structure->collectives, info);
    }
    for (guint r = 0; r <= at->ranks; r += at->ranks) /* rank 0's, then the job's */
        for (guint e = 0; e < edges[r]->len; e++) {
            const local_edge *edge = &g_array_index(edges[r], local_edge, e);
            rv_edge out = { edge->from, edge->to, (uint8_t)(edge->kind_and_start / 2), (uint8_t)(edge->kind_and_start % 2) };
            g_array_append_val(structure->edges, out);
        }
}

static void fill_columns(rv_alike_job *alike, const numbering *at)
{
    const rv_graph *joint = at->joint;
    gsize cells = (gsize)at->rank_tasks * at->ranks;
    alike->duration_ns = g_new(int64_t, cells + 1);
    alike->host_overhead_ns = g_new(int64_t, cells + 1);
    alike->recorded_start_ns = g_new(int64_t, cells + 1);
    for (gsize i = 0; i < cells; i++) {
        const rv_task *task = &g_array_index(joint->tasks, rv_task, at->joint_task[i]);
        alike->duration_ns[i] = task->duration_ns;
        alike->host_overhead_ns[i] = task->host_overhead_ns;
        alike->recorded_start_ns[i] = task->recorded_start_ns;
    }
    gsize resource_cells = (gsize)at->rank_resources * at->ranks;
    alike->launch_latency_ns = g_new0(int64_t, resource_cells + 1);
    alike->idle_gap_ns = g_new0(int64_t, resource_cells + 1);
    for (guint res = 0; res < joint->resources->len; res++) {
        const rv_resource *resource = &g_array_index(joint->resources, rv_resource, res);
        if (resource->rank_index < 0) continue;
        gsize i = (gsize)at->resource_local[res] * at->ranks + (guint)resource->rank_index;
        alike->launch_latency_ns[i] = resource->launch_latency_ns;
        alike->idle_gap_ns[i] = resource->idle_gap_ns;
    }
}

static gboolean number_and_compare(numbering *at, GArray ***edges, GError **error)
{
    if (!number_resources(at, error) || !number_tasks(at, error) || !number_steps(at, error) ||
        !compare_resources(at, error) || !compare_tasks(at, error) || !job_tasks_are_instants(at, error))
        return FALSE;
    *edges = local_edges(at, error);
    return *edges != NULL && compare_edges(*edges, at->ranks, error);
}

rv_alike_job *rv_alike_from_job(const rv_graph *joint, GError **error)
{
    numbering at = { 0 };
    at.joint = joint;
    at.ranks = rv_graph_rank_count(joint);
    GArray **edges = NULL;
    rv_alike_job *alike = NULL;
    if (number_and_compare(&at, &edges, error)) {
        alike = g_new0(rv_alike_job, 1);
        alike->structure = rv_graph_new(joint->strings, joint->source);
        alike->rank_count = at.ranks;
        alike->rank_task_count = at.rank_tasks;
        alike->rank_resource_count = at.rank_resources;
        copy_metadata(alike->structure, joint);
        fill_structure(alike->structure, &at, edges);
        fill_columns(alike, &at);
        alike->joint_task = at.joint_task;
        at.joint_task = NULL;
    }
    if (edges)
        for (guint r = 0; r <= at.ranks; r++) g_array_unref(edges[r]);
    g_free(edges);
    g_free(at.task_local);
    g_free(at.resource_local);
    g_free(at.step_local);
    g_free(at.joint_task);
    return alike;
}

void rv_alike_job_free(rv_alike_job *alike)
{
    if (alike == NULL) return;
    rv_graph_free(alike->structure);
    g_free(alike->duration_ns);
    g_free(alike->host_overhead_ns);
    g_free(alike->recorded_start_ns);
    g_free(alike->launch_latency_ns);
    g_free(alike->idle_gap_ns);
    g_free(alike->joint_task);
    g_free(alike);
}
