/*
 * alike.c - find whether a joint graph's ranks are alike, hold them once,
 * and give the joint graph back (alike.h).
 *
 * The join puts each rank's tasks and edges in one block (job.c), so rank
 * r's k-th task is joint task r * n + k and alike ranks number alike.  The
 * comparison walks every rank's block against rank 0's; what may differ
 * goes to a column, everything else must agree, so that rv_alike_to_job
 * rebuilds the joint graph exactly.
 */
#include "reverie/alike.h"
#include "reverie/error.h"
#include "reverie/job.h"
#include "../util/columns.h"
#include <string.h>

/* ---- the blocks -------------------------------------------------------------- */

typedef struct {
    const rv_graph *joint;
    guint ranks;
    int32_t n, m, s;      /* tasks, resources and steps per rank */
    guint rank_edges;     /* edges per rank */
} blocks;

static int32_t task_rank(const rv_graph *joint, int32_t t)
{
    return rv_task_rank_index(joint, &g_array_index(joint->tasks, rv_task, t));
}

/* The length of each rank's block, the same for every rank, and that the
 * blocks come in rank order, the job's last: `rank_of(i)` for i in [0,
 * count).  The error names what differs first: a rank with more or fewer
 * items, or items out of blocks (a graph joined before blocks). */
static gboolean block_length(guint ranks, guint count, int32_t (*rank_of)(const rv_graph *, int32_t),
                             const rv_graph *joint, const char *what, int32_t *length, GError **error)
{
    guint *per_rank = g_new0(guint, ranks + 1);
    for (guint i = 0; i < count; i++) {
        int32_t r = rank_of(joint, (int32_t)i);
        per_rank[r >= 0 && (guint)r < ranks ? (guint)r : ranks]++;
    }
    *length = (int32_t)per_rank[0];
    gboolean ok = TRUE;
    for (guint r = 1; r < ranks && ok; r++)
        if (per_rank[r] != per_rank[0]) {
            g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "rank index %u has %u %s, rank index 0 %u", r, per_rank[r], what,
                        per_rank[0]);
            ok = FALSE;
        }
    for (guint i = 0; i < count && ok; i++) {
        int32_t expected = i < per_rank[0] * ranks ? (int32_t)(i / MAX(per_rank[0], 1)) : -1;
        if (rank_of(joint, (int32_t)i) == expected) continue;
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "the ranks' %s are not in blocks, rank by rank (saved before "
                    "reverie numbered them so: import the traces again)", what);
        ok = FALSE;
    }
    g_free(per_rank);
    return ok;
}

static int32_t resource_rank(const rv_graph *joint, int32_t resource)
{
    return g_array_index(joint->resources, rv_resource, resource).rank_index;
}

static int32_t step_rank(const rv_graph *joint, int32_t step)
{
    return task_rank(joint, g_array_index(joint->steps, rv_step, step).begin_marker);
}

static int32_t edge_rank(const rv_graph *joint, int32_t e)
{
    return rv_edge_rank_index(joint, &g_array_index(joint->edges, rv_edge, e));
}

static gboolean find_blocks(blocks *b, GError **error)
{
    const rv_graph *joint = b->joint;
    int32_t edges_per_rank = 0;
    if (!block_length(b->ranks, (guint)rv_graph_task_count(joint), task_rank, joint, "tasks", &b->n, error) ||
        !block_length(b->ranks, joint->resources->len, resource_rank, joint, "threads and streams", &b->m, error) ||
        !block_length(b->ranks, joint->steps->len, step_rank, joint, "steps", &b->s, error) ||
        !block_length(b->ranks, joint->edges->len, edge_rank, joint, "edges", &edges_per_rank, error))
        return FALSE;
    b->rank_edges = (guint)edges_per_rank;
    return TRUE;
}

/* ---- the comparison ------------------------------------------------------------ */

/* A place in rank 0's numbering: a rank's task or resource shifted to rank
 * 0's block; the job's as they are. */
static int32_t task_place(const blocks *b, int32_t t)
{
    return t < (int32_t)b->ranks * b->n ? t % b->n : t - ((int32_t)b->ranks - 1) * b->n;
}

static int32_t resource_place(const blocks *b, int32_t res)
{
    return res < (int32_t)b->ranks * b->m ? res % b->m : res - ((int32_t)b->ranks - 1) * b->m;
}

static int32_t step_place(const blocks *b, int32_t step)
{
    return step < 0 ? -1 : step % MAX(b->s, 1);
}

/* What must agree between the k-th tasks of two ranks; NULL if all does. */
static const char *task_difference(const blocks *b, const rv_task *a, const rv_task *x)
{
    if (a->kind != x->kind || a->phase != x->phase) return "kind";
    if (a->flags != x->flags) return "flags (GPU, blocking, removed, rendezvous)";
    if (a->name != x->name || a->op != x->op || a->layer != x->layer || a->input_dims != x->input_dims) return "name";
    if (resource_place(b, a->resource) != resource_place(b, x->resource)) return "thread or stream";
    return NULL;
}

/* Per-task side arrays (graph.h) must agree too: the structure keeps rank 0's. */
static gboolean same_side_values(const rv_graph *joint, int32_t a, int32_t x)
{
    const rv_launch *la = rv_task_launch(joint, a), *lx = rv_task_launch(joint, x);
    rv_launch none = { 0 };
    la = la ? la : &none;
    lx = lx ? lx : &none;
    return la->blocks == lx->blocks && la->threads == lx->threads && la->registers == lx->registers &&
           la->shared_bytes == lx->shared_bytes &&
           rv_task_host_operators(joint, a) == rv_task_host_operators(joint, x) &&
           rv_task_op_args(joint, a) == rv_task_op_args(joint, x);
}

/* Which of the optional columns some rank needs. */
typedef struct {
    gboolean correlation, bytes, step, collective;
} varying;

static gboolean compare_tasks(const blocks *b, varying *varies, GError **error)
{
    const rv_task *tasks = (const rv_task *)b->joint->tasks->data;
    for (guint r = 1; r < b->ranks; r++)
        for (int32_t k = 0; k < b->n; k++) {
            int32_t id = (int32_t)r * b->n + k;
            const rv_task *first = &tasks[k], *other = &tasks[id];
            const char *what = task_difference(b, first, other);
            if (what == NULL && !same_side_values(b->joint, k, id)) what = "launch or recorded operators";
            if (what != NULL) {
                g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "rank index %u's task %d (%s) differs from rank index 0's in its %s",
                            r, k, rv_strings_get(b->joint->strings, other->name), what);
                return FALSE;
            }
            varies->correlation |= first->correlation != other->correlation;
            varies->bytes |= first->bytes != other->bytes;
            varies->step |= step_place(b, first->step) != step_place(b, other->step);
            varies->collective |= first->collective != other->collective;
        }
    return TRUE;
}

static gboolean compare_resources(const blocks *b, GError **error)
{
    const rv_resource *resources = (const rv_resource *)b->joint->resources->data;
    for (guint r = 1; r < b->ranks; r++)
        for (int32_t k = 0; k < b->m; k++) {
            const rv_resource *a = &resources[k], *x = &resources[(int32_t)r * b->m + k];
            if (a->kind == x->kind && a->queue_depth == x->queue_depth) continue;
            g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s differs from %s in its kind or launch-queue depth",
                        rv_strings_get(b->joint->strings, x->name), rv_strings_get(b->joint->strings, a->name));
            return FALSE;
        }
    return TRUE;
}

/* Both ends of rank r's edge are rank r's tasks or the job's. */
static gboolean ends_in(const blocks *b, const rv_edge *edge, guint r)
{
    int32_t from = task_rank(b->joint, edge->from), to = task_rank(b->joint, edge->to);
    return (from < 0 || (guint)from == r) && (to < 0 || (guint)to == r);
}

static gboolean compare_edges(const blocks *b, GError **error)
{
    const rv_edge *edges = (const rv_edge *)b->joint->edges->data;
    for (guint r = 0; r < b->ranks; r++)
        for (guint i = 0; i < b->rank_edges; i++) {
            const rv_edge *a = &edges[i], *x = &edges[r * b->rank_edges + i];
            if (task_place(b, a->from) == task_place(b, x->from) && task_place(b, a->to) == task_place(b, x->to) &&
                a->kind == x->kind && a->from_start == x->from_start && ends_in(b, x, r))
                continue;
            g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "rank index %u's edge %u differs from rank index 0's, or joins "
                        "two ranks", r, i);
            return FALSE;
        }
    return TRUE;
}

static gboolean compare_steps(const blocks *b, GError **error)
{
    const rv_step *steps = (const rv_step *)b->joint->steps->data;
    for (guint r = 1; r < b->ranks; r++)
        for (int32_t k = 0; k < b->s; k++) {
            const rv_step *a = &steps[k], *x = &steps[(int32_t)r * b->s + k];
            if (x->begin_marker == a->begin_marker + (int32_t)r * b->n && x->end_marker == a->end_marker + (int32_t)r * b->n)
                continue;
            g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "rank index %u's step %d begins or ends elsewhere than rank index 0's",
                        r, k);
            return FALSE;
        }
    return TRUE;
}

/* The lockstep replay keeps no free time for the job's own resources. */
static gboolean job_tasks_are_instants(const blocks *b, GError **error)
{
    for (int32_t t = (int32_t)b->ranks * b->n; t < rv_graph_task_count(b->joint); t++) {
        const rv_task *task = &g_array_index(b->joint->tasks, rv_task, t);
        const rv_resource *on = &g_array_index(b->joint->resources, rv_resource, task->resource);
        if (task->duration_ns == 0 && task->host_overhead_ns == 0 && on->idle_gap_ns == 0 && task->step < 0) continue;
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "the job's task %s takes time (only instants are shared by the ranks)",
                    rv_strings_get(b->joint->strings, task->name));
        return FALSE;
    }
    return TRUE;
}

static gboolean unchanged_by_plugins(const rv_graph *joint, GError **error)
{
    if (joint->applied->len == 0 && joint->memory_effects->len == 0 && joint->duration_ranges->len == 0 &&
        joint->kernel_demands->len == 0 && !joint->contention.enabled && !joint->sharing.enabled)
        return TRUE;
    g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "a graph an optimization changed is held whole");
    return FALSE;
}

/* A collective's meeting point is one of the job's tasks (or rank 0's): a
 * place the structure can name. */
static gboolean meetings_are_the_jobs(const blocks *b, GError **error)
{
    for (guint c = 0; c < b->joint->collectives->len; c++) {
        int32_t meeting = g_array_index(b->joint->collectives, rv_collective_info, c).rendezvous;
        if (meeting < b->n || meeting >= (int32_t)b->ranks * b->n) continue;
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "collective %u meets at a rank's task", c);
        return FALSE;
    }
    return TRUE;
}

static gboolean compare(blocks *b, varying *varies, GError **error)
{
    return unchanged_by_plugins(b->joint, error) && find_blocks(b, error) && compare_resources(b, error) &&
           compare_steps(b, error) && compare_tasks(b, varies, error) && compare_edges(b, error) &&
           job_tasks_are_instants(b, error) && meetings_are_the_jobs(b, error);
}

/* ---- the structure and the columns -------------------------------------------- */

/* The structure's numbering of a joint graph's resource, step or task:
 * rank 0's as they are, the job's after rank 0's. */
static GArray *rank_zero_and_job(const GArray *joint, guint ranks, guint per_rank)
{
    guint size = g_array_get_element_size((GArray *)joint);
    GArray *kept = g_array_new(FALSE, FALSE, size);
    g_array_append_vals(kept, joint->data, per_rank);
    if (joint->len > ranks * per_rank)
        g_array_append_vals(kept, joint->data + (gsize)ranks * per_rank * size, joint->len - ranks * per_rank);
    return kept;
}

/* The job's metadata, ranks and memory records (a fresh `to`). */
static void copy_metadata(rv_graph *to, const rv_graph *from)
{
    rv_graph_copy_metadata(to, from);
    g_array_append_vals(to->ranks, from->ranks->data, from->ranks->len);
    g_array_append_vals(to->memory, from->memory->data, from->memory->len);
}

/* A task's per-task side values (launch, recorded operators, operator
 * arguments: graph.h) from one graph's task to another's. */
static void copy_side_values(rv_graph *to, int32_t to_task, const rv_graph *from, int32_t from_task)
{
    const rv_launch *launch = rv_task_launch(from, from_task);
    if (launch != NULL && (launch->blocks || launch->threads)) {
        g_array_set_size(to->launches, (guint)to_task + 1);
        g_array_index(to->launches, rv_launch, to_task) = *launch;
    }
    uint32_t operators = rv_task_host_operators(from, from_task);
    if (operators) {
        g_array_set_size(to->host_operators, (guint)to_task + 1);
        g_array_index(to->host_operators, uint32_t, to_task) = operators;
    }
    if (rv_task_op_args(from, from_task)) rv_task_set_op_args(to, to_task, rv_task_op_args(from, from_task));
}

/* The structure's task k (rank 0's, or the job's) from the joint graph's. */
static void fill_structure_tasks(rv_graph *structure, const blocks *b)
{
    int32_t total = rv_graph_task_count(b->joint), ranks = (int32_t)b->ranks;
    for (int32_t t = 0; t < total; t++) {
        if (t >= b->n && t < ranks * b->n) t = ranks * b->n; /* past the other ranks' blocks */
        if (t >= total) break;
        int32_t k = task_place(b, t);
        rv_task task = g_array_index(b->joint->tasks, rv_task, t);
        task.resource = resource_place(b, task.resource);
        task.step = step_place(b, task.step);
        g_array_append_val(structure->tasks, task);
        copy_side_values(structure, k, b->joint, t);
    }
}

static void fill_structure(rv_graph *structure, const blocks *b)
{
    const rv_graph *joint = b->joint;
    g_array_unref(structure->resources);
    structure->resources = rank_zero_and_job(joint->resources, b->ranks, (guint)b->m);
    fill_structure_tasks(structure, b);
    for (guint e = 0; e < joint->edges->len; e++) {
        if (e >= b->rank_edges && e < b->ranks * b->rank_edges) continue;
        rv_edge edge = g_array_index(joint->edges, rv_edge, e);
        edge.from = task_place(b, edge.from);
        edge.to = task_place(b, edge.to);
        g_array_append_val(structure->edges, edge);
    }
    for (int32_t s = 0; s < b->s; s++) g_array_append_val(structure->steps, g_array_index(joint->steps, rv_step, s));
    for (guint c = 0; c < joint->collectives->len; c++) {
        rv_collective_info info = g_array_index(joint->collectives, rv_collective_info, c);
        if (info.rendezvous >= 0) info.rendezvous = task_place(b, info.rendezvous);
        g_array_append_val(structure->collectives, info);
    }
    copy_metadata(structure, joint);
}

static void fill_columns(rv_alike_job *alike, const blocks *b, const varying *varies)
{
    gsize cells = (gsize)b->n * b->ranks;
    alike->duration_ns = rv_column_new(cells, sizeof(int64_t));
    alike->host_overhead_ns = rv_column_new(cells, sizeof(int64_t));
    alike->recorded_start_ns = rv_column_new(cells, sizeof(int64_t));
    if (varies->correlation) alike->correlation = rv_column_new(cells, sizeof(int64_t));
    if (varies->bytes) alike->bytes = rv_column_new(cells, sizeof(int64_t));
    if (varies->step) alike->step = rv_column_new(cells, sizeof(int32_t));
    if (varies->collective) alike->collective = rv_column_new(cells, sizeof(int32_t));
    const rv_task *tasks = (const rv_task *)b->joint->tasks->data;
    for (guint r = 0; r < b->ranks; r++)
        for (int32_t k = 0; k < b->n; k++) {
            const rv_task *task = &tasks[(gsize)r * (guint)b->n + (guint)k];
            gsize at = (gsize)k * b->ranks + r;
            alike->duration_ns[at] = task->duration_ns;
            alike->host_overhead_ns[at] = task->host_overhead_ns;
            alike->recorded_start_ns[at] = task->recorded_start_ns;
            if (alike->correlation) alike->correlation[at] = task->correlation;
            if (alike->bytes) alike->bytes[at] = task->bytes;
            if (alike->step) alike->step[at] = step_place(b, task->step);
            if (alike->collective) alike->collective[at] = task->collective;
        }
}

gboolean rv_alike_check(const rv_graph *joint, GError **error)
{
    blocks b = { joint, rv_graph_rank_count(joint), 0, 0, 0, 0 };
    varying varies = { FALSE, FALSE, FALSE, FALSE };
    return compare(&b, &varies, error);
}

rv_alike_job *rv_alike_from_job(const rv_graph *joint, GError **error)
{
    blocks b = { joint, rv_graph_rank_count(joint), 0, 0, 0, 0 };
    varying varies = { FALSE, FALSE, FALSE, FALSE };
    if (!compare(&b, &varies, error)) return NULL;
    rv_alike_job *alike = g_new0(rv_alike_job, 1);
    alike->structure = rv_graph_new(joint->strings, joint->source);
    alike->rank_count = b.ranks;
    alike->rank_task_count = b.n;
    alike->rank_resource_count = b.m;
    alike->rank_step_count = b.s;
    alike->rank_edge_count = b.rank_edges;
    alike->resources = g_array_copy(joint->resources);
    alike->steps = g_array_copy(joint->steps);
    fill_structure(alike->structure, &b);
    fill_columns(alike, &b, &varies);
    return alike;
}

/* ---- the joint graph back --------------------------------------------------------- */

static void expand_task(const rv_alike_job *alike, int32_t k, guint r, rv_task *task)
{
    *task = g_array_index(alike->structure->tasks, rv_task, k);
    int32_t n = alike->rank_task_count, m = alike->rank_resource_count, ranks = (int32_t)alike->rank_count;
    if (k >= n) { /* one of the job's: only its numbers move */
        task->resource += (ranks - 1) * m;
        return;
    }
    gsize at = rv_alike_at(alike, k, r);
    task->resource += (int32_t)r * m;
    task->duration_ns = alike->duration_ns[at];
    task->host_overhead_ns = alike->host_overhead_ns[at];
    task->recorded_start_ns = alike->recorded_start_ns[at];
    if (alike->correlation) task->correlation = alike->correlation[at];
    if (alike->bytes) task->bytes = alike->bytes[at];
    if (alike->step) task->step = alike->step[at];
    if (task->step >= 0) task->step += (int32_t)r * alike->rank_step_count;
    if (alike->collective) task->collective = alike->collective[at];
}

static int32_t joint_id(const rv_alike_job *alike, int32_t k, guint r)
{
    int32_t n = alike->rank_task_count;
    return k < n ? (int32_t)r * n + k : k + ((int32_t)alike->rank_count - 1) * n;
}

static void expand_tasks(rv_graph *joint, const rv_alike_job *alike)
{
    int32_t n = alike->rank_task_count, total = rv_graph_task_count(alike->structure);
    g_array_set_size(joint->tasks, (guint)(n * (int32_t)alike->rank_count + (total - n)));
    for (guint r = 0; r < alike->rank_count; r++)
        for (int32_t k = 0; k < n; k++) {
            int32_t id = joint_id(alike, k, r);
            expand_task(alike, k, r, &g_array_index(joint->tasks, rv_task, id));
            copy_side_values(joint, id, alike->structure, k);
        }
    for (int32_t k = n; k < total; k++) {
        int32_t id = joint_id(alike, k, 0);
        expand_task(alike, k, 0, &g_array_index(joint->tasks, rv_task, id));
        copy_side_values(joint, id, alike->structure, k);
    }
}

static void expand_edges(rv_graph *joint, const rv_alike_job *alike)
{
    const rv_graph *structure = alike->structure;
    for (guint r = 0; r < alike->rank_count; r++)
        for (guint e = 0; e < alike->rank_edge_count; e++) {
            rv_edge edge = g_array_index(structure->edges, rv_edge, e);
            edge.from = joint_id(alike, edge.from, r);
            edge.to = joint_id(alike, edge.to, r);
            g_array_append_val(joint->edges, edge);
        }
    for (guint e = alike->rank_edge_count; e < structure->edges->len; e++) {
        rv_edge edge = g_array_index(structure->edges, rv_edge, e);
        edge.from = joint_id(alike, edge.from, 0);
        edge.to = joint_id(alike, edge.to, 0);
        g_array_append_val(joint->edges, edge);
    }
}

rv_graph *rv_alike_to_job(const rv_alike_job *alike)
{
    const rv_graph *structure = alike->structure;
    rv_graph *joint = rv_graph_new(structure->strings, structure->source);
    copy_metadata(joint, structure);
    g_array_append_vals(joint->resources, alike->resources->data, alike->resources->len);
    g_array_append_vals(joint->steps, alike->steps->data, alike->steps->len);
    expand_tasks(joint, alike);
    expand_edges(joint, alike);
    for (guint c = 0; c < structure->collectives->len; c++) {
        rv_collective_info info = g_array_index(structure->collectives, rv_collective_info, c);
        if (info.rendezvous >= 0) info.rendezvous = joint_id(alike, info.rendezvous, 0);
        g_array_append_val(joint->collectives, info);
    }
    return joint;
}

/* ---- a saved job ----------------------------------------------------------------- */

rv_alike_shape rv_alike_shape_of(const rv_alike_job *alike)
{
    rv_alike_shape shape = { alike->rank_count, alike->rank_task_count, alike->rank_resource_count,
                             alike->rank_step_count, alike->rank_edge_count };
    return shape;
}

static const char *shape_count_problem(const rv_graph *stored, const rv_alike_shape *shape)
{
    uint64_t ranks = shape->rank_count, n = (uint64_t)MAX(shape->rank_task_count, 0);
    if (shape->rank_count == 0 || shape->rank_count != stored->ranks->len) return "its rank count is not the ranks section's";
    if (shape->rank_task_count < 0 || shape->rank_resource_count < 0 || shape->rank_step_count < 0)
        return "a count is negative";
    if ((uint64_t)stored->tasks->len < n || ranks * n + (stored->tasks->len - n) > G_MAXINT32)
        return "its tasks per rank do not fit the tasks section";
    if (ranks * (uint64_t)shape->rank_resource_count > stored->resources->len)
        return "its threads and streams per rank do not fit the resources section";
    if (ranks * (uint64_t)shape->rank_step_count != stored->steps->len) return "its steps per rank do not fit the steps section";
    if (shape->rank_edge_count > stored->edges->len || shape->rank_edge_count > RV_ALIKE_EDGES_PER_TASK_MAX * (n + 1))
        return "its edges per rank do not fit the edges section";
    return NULL;
}

/* The structure's tasks: a rank's on a rank's thread or stream and in one
 * of its steps; the job's on the job's resources. */
static const char *shape_task_problem(const rv_graph *stored, const rv_alike_shape *shape)
{
    int32_t m = shape->rank_resource_count;
    int32_t places = m + (int32_t)(stored->resources->len - shape->rank_count * (guint)m);
    for (int32_t k = 0; k < rv_graph_task_count(stored); k++) {
        const rv_task *task = &g_array_index(stored->tasks, rv_task, k);
        gboolean rank_task = k < shape->rank_task_count;
        if (task->resource < (rank_task ? 0 : m) || task->resource >= (rank_task ? m : places))
            return "a task's thread or stream is not its rank's (or the job's)";
        if (rank_task && (task->step < -1 || task->step >= shape->rank_step_count)) return "a task's step is not its rank's";
    }
    return NULL;
}

static const char *shape_meeting_problem(const rv_graph *stored, const rv_alike_shape *shape)
{
    int64_t n = shape->rank_task_count, joint_tasks = (int64_t)shape->rank_count * n + (stored->tasks->len - n);
    for (guint c = 0; c < stored->collectives->len; c++) {
        int64_t meeting = g_array_index(stored->collectives, rv_collective_info, c).rendezvous;
        if (meeting < n || (meeting >= (int64_t)shape->rank_count * n && meeting < joint_tasks)) continue;
        return "a collective's meeting point is not one of the job's tasks";
    }
    return NULL;
}

/* The structure's edges join its tasks (the joint graph's numbers are
 * worked out from them before the whole graph is checked). */
static const char *shape_edge_problem(const rv_graph *stored)
{
    for (guint e = 0; e < stored->edges->len; e++) {
        const rv_edge *edge = &g_array_index(stored->edges, rv_edge, e);
        if (edge->from < 0 || edge->to < 0 || edge->from >= rv_graph_task_count(stored) ||
            edge->to >= rv_graph_task_count(stored))
            return "an edge joins tasks the structure does not hold";
    }
    return NULL;
}

const char *rv_alike_shape_problem(const rv_graph *stored, const rv_alike_shape *shape)
{
    const char *problem = shape_count_problem(stored, shape);
    if (problem == NULL) problem = shape_edge_problem(stored);
    if (problem == NULL) problem = shape_task_problem(stored, shape);
    if (problem == NULL) problem = shape_meeting_problem(stored, shape);
    return problem;
}

static GArray *take_array(GArray **slot)
{
    GArray *taken = *slot;
    *slot = g_array_new(FALSE, TRUE, g_array_get_element_size(taken));
    return taken;
}

rv_alike_job *rv_alike_assemble(rv_graph *stored, const rv_alike_shape *shape, int64_t *duration_ns,
                                int64_t *host_overhead_ns, int64_t *recorded_start_ns)
{
    rv_alike_job *alike = g_new0(rv_alike_job, 1);
    alike->rank_count = shape->rank_count;
    alike->rank_task_count = shape->rank_task_count;
    alike->rank_resource_count = shape->rank_resource_count;
    alike->rank_step_count = shape->rank_step_count;
    alike->rank_edge_count = shape->rank_edge_count;
    alike->duration_ns = duration_ns;
    alike->host_overhead_ns = host_overhead_ns;
    alike->recorded_start_ns = recorded_start_ns;
    rv_graph *structure = alike->structure = rv_graph_new(stored->strings, stored->source);
    copy_metadata(structure, stored);
    alike->resources = take_array(&stored->resources);
    alike->steps = take_array(&stored->steps);
    GArray *places = rank_zero_and_job(alike->resources, shape->rank_count, (guint)shape->rank_resource_count);
    g_array_unref(structure->resources);
    structure->resources = places;
    g_array_append_vals(structure->steps, alike->steps->data, (guint)shape->rank_step_count);
    g_array_unref(structure->tasks);
    structure->tasks = take_array(&stored->tasks);
    g_array_unref(structure->edges);
    structure->edges = take_array(&stored->edges);
    g_array_unref(structure->launches);
    structure->launches = take_array(&stored->launches);
    g_array_unref(structure->host_operators);
    structure->host_operators = take_array(&stored->host_operators);
    g_array_unref(structure->op_args);
    structure->op_args = take_array(&stored->op_args);
    int32_t shift = ((int32_t)shape->rank_count - 1) * shape->rank_task_count;
    for (guint c = 0; c < stored->collectives->len; c++) {
        rv_collective_info info = g_array_index(stored->collectives, rv_collective_info, c);
        if (info.rendezvous >= shape->rank_task_count) info.rendezvous -= shift;
        g_array_append_val(structure->collectives, info);
    }
    return alike;
}

/* ---- what the job holds -------------------------------------------------------- */

void rv_alike_stream_delays(const rv_alike_job *alike, int64_t **launch_latency_ns, int64_t **idle_gap_ns)
{
    gsize places = (gsize)alike->rank_resource_count * alike->rank_count;
    *launch_latency_ns = g_new(int64_t, places + 1);
    *idle_gap_ns = g_new(int64_t, places + 1);
    for (int32_t k = 0; k < alike->rank_resource_count; k++)
        for (guint r = 0; r < alike->rank_count; r++) {
            (*launch_latency_ns)[rv_alike_at(alike, k, r)] = rv_alike_resource(alike, k, r)->launch_latency_ns;
            (*idle_gap_ns)[rv_alike_at(alike, k, r)] = rv_alike_resource(alike, k, r)->idle_gap_ns;
        }
}

int32_t rv_alike_live_task_count(const rv_alike_job *alike)
{
    int32_t live = 0;
    for (int32_t k = 0; k < rv_graph_task_count(alike->structure); k++) {
        gboolean removed = (g_array_index(alike->structure->tasks, rv_task, k).flags & RV_TASK_FLAG_REMOVED) != 0;
        if (!removed) live += k < alike->rank_task_count ? (int32_t)alike->rank_count : 1;
    }
    return live;
}

guint rv_alike_edge_count(const rv_alike_job *alike)
{
    return alike->rank_edge_count * alike->rank_count + (alike->structure->edges->len - alike->rank_edge_count);
}

void rv_alike_job_free(rv_alike_job *alike)
{
    if (alike == NULL) return;
    rv_graph_free(alike->structure);
    if (alike->resources) g_array_unref(alike->resources);
    if (alike->steps) g_array_unref(alike->steps);
    rv_column_free(alike->duration_ns);
    rv_column_free(alike->host_overhead_ns);
    rv_column_free(alike->recorded_start_ns);
    rv_column_free(alike->correlation);
    rv_column_free(alike->bytes);
    rv_column_free(alike->step);
    rv_column_free(alike->collective);
    g_free(alike);
}
