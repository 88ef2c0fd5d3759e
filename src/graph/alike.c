/*
 * alike.c - find a joint graph's classes of alike ranks, hold the job once
 * per class, and give the joint graph back (alike.h).
 *
 * The join puts each rank's tasks, threads and streams, steps and edges in
 * one block each (job.c), ranks in order, the job's own last.  Each rank
 * is compared with the first member of every class found so far, and
 * joins the first it agrees with; else it starts a class.  What may differ
 * between members goes to a column, everything else must agree, so that
 * rv_alike_to_job rebuilds the joint graph exactly.
 */
#include "reverie/alike.h"
#include "reverie/error.h"
#include "reverie/job.h"
#include "../util/columns.h"
#include <string.h>

/* A rank compared in full with this many classes' first members without
 * agreeing with any is held as a class of its own, unmatched with the
 * rest: a job of very many unlike ranks costs ranks x 64 comparisons, not
 * ranks squared.  Comparing two ranks' counts first is cheap and not
 * counted; two unlike programs differ within their first tasks. */
#define CLASSES_COMPARED_MAX 64

/* ---- the blocks -------------------------------------------------------------- */

typedef struct {
    int32_t first, count;
} span;

/* Each rank's blocks of tasks, resources, steps and edges, and where the
 * job's own begin. */
typedef struct {
    const rv_graph *joint;
    guint ranks;
    span *tasks, *resources, *steps, *edges;  /* per rank */
    int32_t job_tasks, job_resources, job_edges; /* the first of the job's */
} blocks;

static int32_t task_rank(const rv_graph *joint, int32_t t)
{
    return rv_task_rank_index(joint, &g_array_index(joint->tasks, rv_task, t));
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

/* Each rank's span of items [0, count) by `rank_of`, which must come in
 * rank order, each rank's together, the job's (-1) last; *job_first: where
 * the job's begin.  FALSE where they do not (a graph joined before blocks). */
static gboolean find_spans(guint ranks, guint count, int32_t (*rank_of)(const rv_graph *, int32_t), const rv_graph *joint,
                           const char *what, span *spans, int32_t *job_first, GError **error)
{
    int32_t previous = 0;
    for (guint r = 0; r < ranks; r++) spans[r] = (span){ 0, 0 };
    *job_first = (int32_t)count;
    for (guint i = 0; i < count; i++) {
        int32_t r = rank_of(joint, (int32_t)i);
        gboolean in_order = r >= previous && (guint)r < ranks;
        if (r < 0 && *job_first == (int32_t)count) *job_first = (int32_t)i;
        if (r < 0) previous = G_MAXINT32; /* nothing of a rank's after the job's */
        else if (in_order && spans[r].count++ == 0) spans[r].first = (int32_t)i;
        if (in_order) previous = r;
        if (in_order || r < 0) continue;
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "the ranks' %s are not in blocks, rank by rank (saved before "
                    "reverie numbered them so: import the traces again)", what);
        return FALSE;
    }
    return TRUE;
}

static gboolean find_blocks(blocks *b, GError **error)
{
    const rv_graph *joint = b->joint;
    int32_t job_steps;
    return find_spans(b->ranks, (guint)rv_graph_task_count(joint), task_rank, joint, "tasks", b->tasks, &b->job_tasks, error) &&
           find_spans(b->ranks, joint->resources->len, resource_rank, joint, "threads and streams", b->resources,
                      &b->job_resources, error) &&
           find_spans(b->ranks, joint->steps->len, step_rank, joint, "steps", b->steps, &job_steps, error) &&
           find_spans(b->ranks, joint->edges->len, edge_rank, joint, "edges", b->edges, &b->job_edges, error) &&
           (job_steps == (int32_t)joint->steps->len ||
            (g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "a step begins at one of the job's own tasks"), FALSE));
}

static void blocks_init(blocks *b, const rv_graph *joint)
{
    b->joint = joint;
    b->ranks = rv_graph_rank_count(joint);
    b->tasks = g_new0(span, b->ranks);
    b->resources = g_new0(span, b->ranks);
    b->steps = g_new0(span, b->ranks);
    b->edges = g_new0(span, b->ranks);
}

static void blocks_clear(blocks *b)
{
    g_free(b->tasks);
    g_free(b->resources);
    g_free(b->steps);
    g_free(b->edges);
}

/* ---- one rank against another ---------------------------------------------------- */

/* A task's place as seen from rank r: its offset in r's block, the job's
 * task j as -1 - j, and another rank's as G_MININT64 (which no edge of
 * alike ranks has: ends_in refuses it). */
static int64_t task_place(const blocks *b, int32_t t, guint r)
{
    const span *own = &b->tasks[r];
    if (t >= own->first && t < own->first + own->count) return t - own->first;
    return t >= b->job_tasks ? -1 - (int64_t)(t - b->job_tasks) : G_MININT64;
}

static int32_t resource_place(const blocks *b, int32_t res, guint r)
{
    return res - b->resources[r].first;
}

static int32_t step_place(const blocks *b, int32_t step, guint r)
{
    return step < 0 ? -1 : step - b->steps[r].first;
}

/* Which of the optional columns some member needs. */
typedef struct {
    gboolean correlation, bytes, step, collective;
} varying;

/* Ranks a (a class's first member) and x, compared; why is set to the
 * first difference. */
typedef struct {
    const blocks *b;
    guint a, x;
    char *why;
} pair;

static gboolean differ(pair *p, char *why)
{
    p->why = why;
    return FALSE;
}

static gboolean same_counts(pair *p)
{
    const blocks *b = p->b;
    static const char *const what[] = { "tasks", "threads and streams", "steps", "edges" };
    const span *spans[] = { b->tasks, b->resources, b->steps, b->edges };
    for (guint i = 0; i < G_N_ELEMENTS(spans); i++)
        if (spans[i][p->x].count != spans[i][p->a].count)
            return differ(p, g_strdup_printf("rank index %u has %d %s, rank index %u %d", p->x, spans[i][p->x].count,
                                              what[i], p->a, spans[i][p->a].count));
    return TRUE;
}

/* What must agree between the k-th tasks of two ranks; NULL if all does. */
static const char *task_difference(const pair *p, const rv_task *a, const rv_task *x)
{
    if (a->kind != x->kind || a->phase != x->phase) return "kind";
    if (a->flags != x->flags) return "flags (GPU, blocking, removed, rendezvous)";
    if (a->name != x->name || a->op != x->op || a->layer != x->layer || a->input_dims != x->input_dims) return "name";
    if (resource_place(p->b, a->resource, p->a) != resource_place(p->b, x->resource, p->x)) return "thread or stream";
    return NULL;
}

/* Per-task side arrays (graph.h) must agree too: the structure keeps the
 * first member's. */
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

static gboolean same_tasks(pair *p, varying *varies)
{
    const blocks *b = p->b;
    const rv_task *tasks = (const rv_task *)b->joint->tasks->data;
    for (int32_t k = 0; k < b->tasks[p->a].count; k++) {
        int32_t ia = b->tasks[p->a].first + k, ix = b->tasks[p->x].first + k;
        const rv_task *first = &tasks[ia], *other = &tasks[ix];
        const char *what = task_difference(p, first, other);
        if (what == NULL && !same_side_values(b->joint, ia, ix)) what = "launch or recorded operators";
        if (what != NULL)
            return differ(p, g_strdup_printf("rank index %u's task %d (%s) differs from rank index %u's in its %s", p->x, k,
                                             rv_strings_get(b->joint->strings, other->name), p->a, what));
        varies->correlation |= first->correlation != other->correlation;
        varies->bytes |= first->bytes != other->bytes;
        varies->step |= step_place(b, first->step, p->a) != step_place(b, other->step, p->x);
        varies->collective |= first->collective != other->collective;
    }
    return TRUE;
}

static gboolean same_resources(pair *p)
{
    const blocks *b = p->b;
    const rv_resource *resources = (const rv_resource *)b->joint->resources->data;
    for (int32_t k = 0; k < b->resources[p->a].count; k++) {
        const rv_resource *a = &resources[b->resources[p->a].first + k], *x = &resources[b->resources[p->x].first + k];
        if (a->kind == x->kind && a->queue_depth == x->queue_depth) continue;
        return differ(p, g_strdup_printf("%s differs from %s in its kind or launch-queue depth",
                                         rv_strings_get(b->joint->strings, x->name), rv_strings_get(b->joint->strings, a->name)));
    }
    return TRUE;
}

/* Both ends of rank r's edge are rank r's tasks or the job's. */
static gboolean ends_in(const blocks *b, const rv_edge *edge, guint r)
{
    return task_place(b, edge->from, r) != G_MININT64 && task_place(b, edge->to, r) != G_MININT64;
}

static gboolean same_edges(pair *p)
{
    const blocks *b = p->b;
    const rv_edge *edges = (const rv_edge *)b->joint->edges->data;
    for (int32_t i = 0; i < b->edges[p->a].count; i++) {
        const rv_edge *a = &edges[b->edges[p->a].first + i], *x = &edges[b->edges[p->x].first + i];
        if (task_place(b, a->from, p->a) == task_place(b, x->from, p->x) && task_place(b, a->to, p->a) == task_place(b, x->to, p->x) &&
            a->kind == x->kind && a->from_start == x->from_start && ends_in(b, x, p->x) && ends_in(b, a, p->a))
            continue;
        return differ(p, g_strdup_printf("rank index %u's edge %d differs from rank index %u's, or joins two ranks", p->x,
                                         i, p->a));
    }
    return TRUE;
}

static gboolean same_steps(pair *p)
{
    const blocks *b = p->b;
    const rv_step *steps = (const rv_step *)b->joint->steps->data;
    for (int32_t k = 0; k < b->steps[p->a].count; k++) {
        const rv_step *a = &steps[b->steps[p->a].first + k], *x = &steps[b->steps[p->x].first + k];
        if (task_place(b, x->begin_marker, p->x) == task_place(b, a->begin_marker, p->a) &&
            task_place(b, x->end_marker, p->x) == task_place(b, a->end_marker, p->a) &&
            task_place(b, x->begin_marker, p->x) >= 0 && task_place(b, x->end_marker, p->x) >= 0)
            continue;
        return differ(p, g_strdup_printf("rank index %u's step %d begins or ends elsewhere than rank index %u's", p->x, k,
                                         p->a));
    }
    return TRUE;
}

/* Are ranks a and x alike?  The columns x needs beyond a's go to varies. */
static gboolean alike_ranks(pair *p, varying *varies)
{
    varying seen = { FALSE, FALSE, FALSE, FALSE };
    if (!same_counts(p) || !same_resources(p) || !same_steps(p) || !same_tasks(p, &seen) || !same_edges(p)) return FALSE;
    varies->correlation |= seen.correlation;
    varies->bytes |= seen.bytes;
    varies->step |= seen.step;
    varies->collective |= seen.collective;
    return TRUE;
}

/* ---- what the whole job must be -------------------------------------------------- */

/* The lockstep replay keeps no free time for the job's own resources. */
static gboolean job_tasks_are_instants(const blocks *b, GError **error)
{
    for (int32_t t = b->job_tasks; t < rv_graph_task_count(b->joint); t++) {
        const rv_task *task = &g_array_index(b->joint->tasks, rv_task, t);
        const rv_resource *on = &g_array_index(b->joint->resources, rv_resource, task->resource);
        if (task->duration_ns == 0 && task->host_overhead_ns == 0 && on->idle_gap_ns == 0 && on->launch_latency_ns == 0 &&
            task->step < 0)
            continue;
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

/* A collective's meeting point is one of the job's tasks (or rank index
 * 0's, which the structure holds as it is): a place the structure can
 * name. */
static gboolean meetings_are_the_jobs(const blocks *b, GError **error)
{
    for (guint c = 0; c < b->joint->collectives->len; c++) {
        int32_t meeting = g_array_index(b->joint->collectives, rv_collective_info, c).rendezvous;
        if (meeting < b->tasks[0].count || meeting >= b->job_tasks) continue;
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "collective %u meets at a rank's task", c);
        return FALSE;
    }
    return TRUE;
}

/* A rank's edges join its own tasks or the job's, its steps begin and end
 * at its own tasks, its tasks belong to its own steps: what a class of one,
 * compared with no other, must hold too. */
static gboolean ranks_keep_to_themselves(const blocks *b, GError **error)
{
    const rv_graph *joint = b->joint;
    for (guint r = 0; r < b->ranks; r++) {
        const char *what = NULL;
        for (int32_t e = b->edges[r].first; e < b->edges[r].first + b->edges[r].count && !what; e++)
            if (!ends_in(b, &g_array_index(joint->edges, rv_edge, e), r)) what = "an edge joins it to another rank";
        for (int32_t s = b->steps[r].first; s < b->steps[r].first + b->steps[r].count && !what; s++) {
            const rv_step *step = &g_array_index(joint->steps, rv_step, s);
            if (task_place(b, step->begin_marker, r) < 0 || task_place(b, step->end_marker, r) < 0)
                what = "a step of its begins or ends at another's task";
        }
        for (int32_t t = b->tasks[r].first; t < b->tasks[r].first + b->tasks[r].count && !what; t++) {
            int32_t step = step_place(b, g_array_index(joint->tasks, rv_task, t).step, r);
            if (step < -1 || step >= b->steps[r].count) what = "a task of its belongs to another's step";
        }
        if (what == NULL) continue;
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "rank index %u is not one block: %s", r, what);
        return FALSE;
    }
    return TRUE;
}

/* ---- the classes ------------------------------------------------------------------ */

/* A class being found: its members, in rank order. */
typedef struct {
    GArray *members;  /* guint */
} found_class;

/* Put every rank in a class: the first whose first member it agrees with.
 * verdict->unlike_because: rank index 0's first difference with a rank
 * that did not join it. */
static GArray *find_classes(const blocks *b, varying *varies, rv_alike_verdict *verdict)
{
    GArray *classes = g_array_new(FALSE, FALSE, sizeof(found_class));
    for (guint r = 0; r < b->ranks; r++) {
        guint c = 0, compared = 0;
        gboolean joined = FALSE;
        for (; c < classes->len && compared < CLASSES_COMPARED_MAX && !joined; c++) {
            found_class *cls = &g_array_index(classes, found_class, c);
            pair p = { b, g_array_index(cls->members, guint, 0), r, NULL };
            gboolean counts_agree = same_counts(&p);
            if (counts_agree) compared++;
            joined = counts_agree && alike_ranks(&p, varies);
            if (!joined && c == 0 && verdict->unlike_because == NULL) verdict->unlike_because = g_strdup(p.why);
            g_free(p.why);
        }
        if (joined) c--;
        else {
            found_class fresh = { g_array_new(FALSE, FALSE, sizeof(guint)) };
            g_array_append_val(classes, fresh);
            c = classes->len - 1;
        }
        g_array_append_val(g_array_index(classes, found_class, c).members, r);
    }
    return classes;
}

static void found_classes_free(GArray *classes)
{
    for (guint c = 0; c < classes->len; c++) g_array_unref(g_array_index(classes, found_class, c).members);
    g_array_unref(classes);
}

static void fill_verdict(rv_alike_verdict *verdict, const GArray *classes, guint ranks)
{
    verdict->class_count = classes->len;
    verdict->largest_class = 0;
    verdict->rank_class = g_new0(guint, ranks + 1);
    for (guint c = 0; c < classes->len; c++) {
        const GArray *members = g_array_index(classes, found_class, c).members;
        verdict->largest_class = MAX(verdict->largest_class, members->len);
        for (guint m = 0; m < members->len; m++) verdict->rank_class[g_array_index(members, guint, m)] = c;
    }
}

/* The whole job's checks, then the classes; FALSE where it cannot be held
 * once (no two ranks alike included). */
static gboolean classify(blocks *b, varying *varies, rv_alike_verdict *verdict, GArray **classes, GError **error)
{
    *classes = NULL;
    if (!unchanged_by_plugins(b->joint, error) || !find_blocks(b, error) || !ranks_keep_to_themselves(b, error) ||
        !job_tasks_are_instants(b, error) || !meetings_are_the_jobs(b, error))
        return FALSE;
    *classes = find_classes(b, varies, verdict);
    fill_verdict(verdict, *classes, b->ranks);
    if (verdict->largest_class > 1) return TRUE;
    g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s", verdict->unlike_because ? verdict->unlike_because : "one rank");
    found_classes_free(*classes);
    *classes = NULL;
    return FALSE;
}

void rv_alike_verdict_clear(rv_alike_verdict *verdict)
{
    if (verdict == NULL) return;
    g_free(verdict->rank_class);
    g_free(verdict->unlike_because);
    memset(verdict, 0, sizeof *verdict);
}

/* A joint graph's blocks and classes (b cleared again where it cannot be
 * held once). */
static gboolean examine(const rv_graph *joint, blocks *b, varying *varies, rv_alike_verdict *verdict, GArray **classes,
                        GError **error)
{
    blocks_init(b, joint);
    memset(varies, 0, sizeof *varies);
    memset(verdict, 0, sizeof *verdict);
    if (classify(b, varies, verdict, classes, error)) return TRUE;
    blocks_clear(b);
    rv_alike_verdict_clear(verdict);
    return FALSE;
}

gboolean rv_alike_check(const rv_graph *joint, rv_alike_verdict *verdict, GError **error)
{
    blocks b;
    varying varies;
    rv_alike_verdict found;
    GArray *classes = NULL;
    if (!examine(joint, &b, &varies, &found, &classes, error)) return FALSE;
    found_classes_free(classes);
    blocks_clear(&b);
    if (verdict) *verdict = found;
    else rv_alike_verdict_clear(&found);
    return TRUE;
}

/* ---- the layout: where each class and rank lies ------------------------------------ */

/* From each class's counts and members: the classes' places in the
 * structure and in the columns, each rank's class and member, its blocks
 * in the joint graph, and the class of every class task. */
static void lay_out(rv_alike_job *alike)
{
    int32_t task = 0, resource = 0, step = 0;
    guint edge = 0;
    gsize cell = 0, resource_cell = 0;
    alike->ranks = g_new0(rv_alike_rank, alike->rank_count);
    for (guint c = 0; c < alike->class_count; c++) {
        rv_alike_class *cls = &alike->classes[c];
        cls->first_task = task;
        cls->first_resource = resource;
        cls->first_step = step;
        cls->first_edge = edge;
        cls->first_cell = cell;
        cls->first_resource_cell = resource_cell;
        task += cls->task_count;
        resource += cls->resource_count;
        step += cls->step_count;
        edge += cls->edge_count;
        cell += (gsize)cls->task_count * cls->member_count;
        resource_cell += (gsize)cls->resource_count * cls->member_count;
        for (guint m = 0; m < cls->member_count; m++)
            alike->ranks[cls->members[m]] = (rv_alike_rank){ c, m, 0, 0, 0, 0 };
    }
    alike->class_task_count = task;
    alike->class_resource_count = resource;
    alike->class_step_count = step;
    alike->class_edge_count = edge;
    alike->cell_count = cell;
    alike->resource_cell_count = resource_cell;
    rv_alike_rank joint = { 0, 0, 0, 0, 0, 0 };
    for (guint r = 0; r < alike->rank_count; r++) {
        const rv_alike_class *cls = rv_alike_rank_class(alike, r);
        alike->ranks[r].first_task = joint.first_task;
        alike->ranks[r].first_resource = joint.first_resource;
        alike->ranks[r].first_step = joint.first_step;
        alike->ranks[r].first_edge = joint.first_edge;
        joint.first_task += cls->task_count;
        joint.first_resource += cls->resource_count;
        joint.first_step += cls->step_count;
        joint.first_edge += cls->edge_count;
    }
    alike->task_class = g_new(int32_t, (gsize)task + 1);
    for (guint c = 0; c < alike->class_count; c++)
        for (int32_t k = 0; k < alike->classes[c].task_count; k++) alike->task_class[alike->classes[c].first_task + k] = (int32_t)c;
}

/* The joint graph's first task of the job's own: after every rank's. */
static int32_t joint_job_task(const rv_alike_job *alike)
{
    return (int32_t)alike->cell_count;
}

/* The joint graph's first resource of the job's own: after every rank's. */
static int32_t joint_job_resource(const rv_alike_job *alike)
{
    return (int32_t)alike->resource_cell_count;
}

/* The joint graph's id of the structure's task t for rank index r (the
 * job's tasks: r is ignored). */
static int32_t joint_task(const rv_alike_job *alike, int32_t t, guint r)
{
    if (t >= alike->class_task_count) return joint_job_task(alike) + (t - alike->class_task_count);
    return alike->ranks[r].first_task + (t - rv_alike_class_of(alike, t)->first_task);
}

/* ---- the structure and the columns -------------------------------------------- */

/* The structure's id of joint task t: rank r's (r the first member of its
 * class) or the job's. */
static int32_t structure_task(const rv_alike_job *alike, const blocks *b, int32_t t, guint r)
{
    if (t >= b->job_tasks) return alike->class_task_count + (t - b->job_tasks);
    return rv_alike_rank_class(alike, r)->first_task + (t - b->tasks[r].first);
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

/* Each class's first member's tasks, then the job's, renumbered. */
static void fill_structure_tasks(rv_graph *structure, const rv_alike_job *alike, const blocks *b)
{
    const rv_graph *joint = b->joint;
    for (guint c = 0; c < alike->class_count; c++) {
        const rv_alike_class *cls = &alike->classes[c];
        guint a = cls->members[0];
        for (int32_t k = 0; k < cls->task_count; k++) {
            int32_t t = b->tasks[a].first + k;
            rv_task task = g_array_index(joint->tasks, rv_task, t);
            task.resource = cls->first_resource + resource_place(b, task.resource, a);
            task.step = task.step < 0 ? -1 : cls->first_step + step_place(b, task.step, a);
            g_array_append_val(structure->tasks, task);
            copy_side_values(structure, cls->first_task + k, joint, t);
        }
    }
    for (int32_t t = b->job_tasks; t < rv_graph_task_count(joint); t++) {
        rv_task task = g_array_index(joint->tasks, rv_task, t);
        task.resource = alike->class_resource_count + (task.resource - b->job_resources);
        g_array_append_val(structure->tasks, task);
        copy_side_values(structure, structure_task(alike, b, t, 0), joint, t);
    }
}

static void append_edge(rv_graph *structure, const rv_alike_job *alike, const blocks *b, int32_t e, guint r)
{
    rv_edge edge = g_array_index(b->joint->edges, rv_edge, e);
    edge.from = structure_task(alike, b, edge.from, r);
    edge.to = structure_task(alike, b, edge.to, r);
    g_array_append_val(structure->edges, edge);
}

/* A joint task id of rank r's block as the structure's (an id a forged
 * file gives outside the block is out of the structure's range, which its
 * checks refuse). */
static int32_t joint_to_structure(const rv_alike_job *alike, int32_t t, guint r)
{
    int64_t id = (int64_t)t - alike->ranks[r].first_task + rv_alike_rank_class(alike, r)->first_task;
    return id >= 0 && id < rv_graph_task_count(alike->structure) ? (int32_t)id : -1;
}

/* The structure's threads and streams and steps: each class's first
 * member's, then the job's resources (from the joint graph's, which
 * alike->resources and alike->steps hold; the structure's tasks already
 * there, for the steps' markers). */
static void fill_places(rv_alike_job *alike)
{
    rv_graph *structure = alike->structure;
    for (guint c = 0; c < alike->class_count; c++) {
        const rv_alike_class *cls = &alike->classes[c];
        guint a = cls->members[0];
        g_array_append_vals(structure->resources, &g_array_index(alike->resources, rv_resource, alike->ranks[a].first_resource),
                            (guint)cls->resource_count);
        for (int32_t s = 0; s < cls->step_count; s++) {
            rv_step step = *rv_alike_rank_step(alike, a, s);
            step.begin_marker = joint_to_structure(alike, step.begin_marker, a);
            step.end_marker = joint_to_structure(alike, step.end_marker, a);
            g_array_append_val(structure->steps, step);
        }
    }
    guint job = (guint)joint_job_resource(alike);
    if (job < alike->resources->len)
        g_array_append_vals(structure->resources, &g_array_index(alike->resources, rv_resource, job), alike->resources->len - job);
}

static void fill_structure(rv_alike_job *alike, const blocks *b)
{
    const rv_graph *joint = b->joint;
    rv_graph *structure = alike->structure;
    fill_structure_tasks(structure, alike, b);
    fill_places(alike);
    for (guint c = 0; c < alike->class_count; c++) {
        const rv_alike_class *cls = &alike->classes[c];
        for (guint i = 0; i < cls->edge_count; i++) append_edge(structure, alike, b, b->edges[cls->members[0]].first + (int32_t)i, cls->members[0]);
    }
    for (guint e = (guint)b->job_edges; e < joint->edges->len; e++) append_edge(structure, alike, b, (int32_t)e, 0);
    for (guint c = 0; c < joint->collectives->len; c++) {
        rv_collective_info info = g_array_index(joint->collectives, rv_collective_info, c);
        if (info.rendezvous >= 0) info.rendezvous = structure_task(alike, b, info.rendezvous, 0);
        g_array_append_val(structure->collectives, info);
    }
    copy_metadata(structure, joint);
}

static void fill_columns(rv_alike_job *alike, const blocks *b, const varying *varies)
{
    gsize cells = alike->cell_count;
    alike->duration_ns = rv_column_new(cells, sizeof(int64_t));
    alike->host_overhead_ns = rv_column_new(cells, sizeof(int64_t));
    alike->recorded_start_ns = rv_column_new(cells, sizeof(int64_t));
    if (varies->correlation) alike->correlation = rv_column_new(cells, sizeof(int64_t));
    if (varies->bytes) alike->bytes = rv_column_new(cells, sizeof(int64_t));
    if (varies->step) alike->step = rv_column_new(cells, sizeof(int32_t));
    if (varies->collective) alike->collective = rv_column_new(cells, sizeof(int32_t));
    const rv_task *tasks = (const rv_task *)b->joint->tasks->data;
    for (guint r = 0; r < alike->rank_count; r++) {
        const rv_alike_class *cls = rv_alike_rank_class(alike, r);
        for (int32_t k = 0; k < cls->task_count; k++) {
            const rv_task *task = &tasks[b->tasks[r].first + k];
            gsize at = rv_alike_rank_cell(alike, cls->first_task + k, r);
            alike->duration_ns[at] = task->duration_ns;
            alike->host_overhead_ns[at] = task->host_overhead_ns;
            alike->recorded_start_ns[at] = task->recorded_start_ns;
            if (alike->correlation) alike->correlation[at] = task->correlation;
            if (alike->bytes) alike->bytes[at] = task->bytes;
            if (alike->step) alike->step[at] = step_place(b, task->step, r);
            if (alike->collective) alike->collective[at] = task->collective;
        }
    }
}

/* The classes found, with their blocks' sizes from their first members. */
static void take_classes(rv_alike_job *alike, const blocks *b, GArray *found)
{
    alike->class_count = found->len;
    alike->classes = g_new0(rv_alike_class, found->len);
    for (guint c = 0; c < found->len; c++) {
        GArray *members = g_array_index(found, found_class, c).members;
        rv_alike_class *cls = &alike->classes[c];
        guint a = g_array_index(members, guint, 0);
        cls->task_count = b->tasks[a].count;
        cls->resource_count = b->resources[a].count;
        cls->step_count = b->steps[a].count;
        cls->edge_count = (guint)b->edges[a].count;
        cls->member_count = members->len;
        cls->members = (guint *)g_array_free(members, FALSE);
    }
    g_array_unref(found);
}

rv_alike_job *rv_alike_from_job(const rv_graph *joint, GError **error)
{
    blocks b;
    varying varies;
    rv_alike_verdict verdict;
    GArray *found = NULL;
    if (!examine(joint, &b, &varies, &verdict, &found, error)) return NULL;
    rv_alike_verdict_clear(&verdict);
    rv_alike_job *alike = g_new0(rv_alike_job, 1);
    alike->structure = rv_graph_new(joint->strings, joint->source);
    alike->rank_count = b.ranks;
    take_classes(alike, &b, found);
    lay_out(alike);
    alike->resources = g_array_copy(joint->resources);
    alike->steps = g_array_copy(joint->steps);
    fill_structure(alike, &b);
    fill_columns(alike, &b, &varies);
    blocks_clear(&b);
    return alike;
}

/* ---- the joint graph back --------------------------------------------------------- */

/* Rank r's own step index of its class's task t, or -1. */
static int32_t own_step(const rv_alike_job *alike, int32_t t, gsize at)
{
    if (alike->step) return alike->step[at];
    int32_t step = g_array_index(alike->structure->tasks, rv_task, t).step;
    return step < 0 ? -1 : step - rv_alike_class_of(alike, t)->first_step;
}

static void expand_task(const rv_alike_job *alike, int32_t t, guint r, rv_task *task)
{
    *task = g_array_index(alike->structure->tasks, rv_task, t);
    if (t >= alike->class_task_count) { /* one of the job's: only its numbers move */
        task->resource = joint_job_resource(alike) + (task->resource - alike->class_resource_count);
        return;
    }
    gsize at = rv_alike_rank_cell(alike, t, r);
    int32_t step = own_step(alike, t, at);
    task->resource = alike->ranks[r].first_resource + (task->resource - rv_alike_class_of(alike, t)->first_resource);
    task->duration_ns = alike->duration_ns[at];
    task->host_overhead_ns = alike->host_overhead_ns[at];
    task->recorded_start_ns = alike->recorded_start_ns[at];
    if (alike->correlation) task->correlation = alike->correlation[at];
    if (alike->bytes) task->bytes = alike->bytes[at];
    task->step = step < 0 ? -1 : alike->ranks[r].first_step + step;
    if (alike->collective) task->collective = alike->collective[at];
}

static void expand_tasks(rv_graph *joint, const rv_alike_job *alike)
{
    int32_t total = rv_graph_task_count(alike->structure);
    g_array_set_size(joint->tasks, (guint)(joint_job_task(alike) + (total - alike->class_task_count)));
    for (guint r = 0; r < alike->rank_count; r++) {
        const rv_alike_class *cls = rv_alike_rank_class(alike, r);
        for (int32_t t = cls->first_task; t < cls->first_task + cls->task_count; t++) {
            int32_t id = joint_task(alike, t, r);
            expand_task(alike, t, r, &g_array_index(joint->tasks, rv_task, id));
            copy_side_values(joint, id, alike->structure, t);
        }
    }
    for (int32_t t = alike->class_task_count; t < total; t++) {
        int32_t id = joint_task(alike, t, 0);
        expand_task(alike, t, 0, &g_array_index(joint->tasks, rv_task, id));
        copy_side_values(joint, id, alike->structure, t);
    }
}

static void expand_edge(rv_graph *joint, const rv_alike_job *alike, guint e, guint r)
{
    rv_edge edge = g_array_index(alike->structure->edges, rv_edge, e);
    edge.from = joint_task(alike, edge.from, r);
    edge.to = joint_task(alike, edge.to, r);
    g_array_append_val(joint->edges, edge);
}

static void expand_edges(rv_graph *joint, const rv_alike_job *alike)
{
    for (guint r = 0; r < alike->rank_count; r++) {
        const rv_alike_class *cls = rv_alike_rank_class(alike, r);
        for (guint e = cls->first_edge; e < cls->first_edge + cls->edge_count; e++) expand_edge(joint, alike, e, r);
    }
    for (guint e = alike->class_edge_count; e < alike->structure->edges->len; e++) expand_edge(joint, alike, e, 0);
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
        if (info.rendezvous >= 0) info.rendezvous = joint_task(alike, info.rendezvous, 0);
        g_array_append_val(joint->collectives, info);
    }
    return joint;
}

/* ---- a saved job ----------------------------------------------------------------- */

rv_alike_shape rv_alike_shape_of(const rv_alike_job *alike)
{
    rv_alike_shape shape = { alike->rank_count, alike->class_count, g_new0(rv_alike_class_shape, alike->class_count) };
    for (guint c = 0; c < alike->class_count; c++) {
        const rv_alike_class *cls = &alike->classes[c];
        shape.classes[c] = (rv_alike_class_shape){ cls->task_count, cls->resource_count, cls->step_count, cls->edge_count,
                                                   cls->member_count, cls->members };
    }
    return shape;
}

void rv_alike_shape_clear(rv_alike_shape *shape)
{
    g_free(shape->classes);
    memset(shape, 0, sizeof *shape);
}

/* A shape's sums over its classes (64 bits: a forged file's counts must
 * not wrap before they are compared with what it holds). */
typedef struct {
    uint64_t tasks, cells, resources, resource_cells, step_cells, edges, members;
} shape_totals;

static shape_totals totals_of(const rv_alike_shape *shape)
{
    shape_totals sum = { 0, 0, 0, 0, 0, 0, 0 };
    for (guint c = 0; c < shape->class_count; c++) {
        const rv_alike_class_shape *cls = &shape->classes[c];
        uint64_t members = cls->member_count;
        sum.tasks += (uint64_t)MAX(cls->task_count, 0);
        sum.cells += (uint64_t)MAX(cls->task_count, 0) * members;
        sum.resources += (uint64_t)MAX(cls->resource_count, 0);
        sum.resource_cells += (uint64_t)MAX(cls->resource_count, 0) * members;
        sum.step_cells += (uint64_t)MAX(cls->step_count, 0) * members;
        sum.edges += cls->edge_count;
        sum.members += members;
    }
    return sum;
}

gsize rv_alike_shape_cells(const rv_alike_shape *shape)
{
    return (gsize)totals_of(shape).cells;
}

/* Every rank in one class, members ascending, classes in the order of
 * their first members (so rank index 0's is the first). */
static const char *shape_member_problem(const rv_alike_shape *shape, const shape_totals *sum)
{
    if (shape->class_count == 0 || shape->class_count > shape->rank_count) return "its class count is not between 1 and its ranks";
    if (sum->members != shape->rank_count) return "its classes' members are not its ranks";
    guint8 *seen = g_new0(guint8, shape->rank_count);
    const char *problem = NULL;
    for (guint c = 0; c < shape->class_count && problem == NULL; c++) {
        const rv_alike_class_shape *cls = &shape->classes[c];
        if (cls->member_count == 0) problem = "a class has no members";
        else if (c > 0 && cls->members[0] <= shape->classes[c - 1].members[0]) problem = "its classes are out of order";
        for (guint m = 0; m < cls->member_count && problem == NULL; m++) {
            guint r = cls->members[m];
            if (r >= shape->rank_count || seen[r]++ || (m > 0 && r <= cls->members[m - 1]))
                problem = "a class's members are not ranks, in order, each once";
        }
    }
    g_free(seen);
    return problem;
}

static const char *shape_count_problem(const rv_graph *stored, const rv_alike_shape *shape, const shape_totals *sum)
{
    for (guint c = 0; c < shape->class_count; c++) {
        const rv_alike_class_shape *cls = &shape->classes[c];
        if (cls->task_count < 0 || cls->resource_count < 0 || cls->step_count < 0) return "a count is negative";
        if (cls->edge_count > RV_ALIKE_EDGES_PER_TASK_MAX * ((uint64_t)cls->task_count + 1))
            return "its edges per rank do not fit the edges section";
    }
    if ((uint64_t)stored->tasks->len < sum->tasks || sum->cells + (stored->tasks->len - sum->tasks) > G_MAXINT32)
        return "its tasks per rank do not fit the tasks section";
    if (sum->resource_cells > stored->resources->len) return "its threads and streams per rank do not fit the resources section";
    if (sum->step_cells != stored->steps->len) return "its steps per rank do not fit the steps section";
    if (sum->edges > stored->edges->len) return "its edges per rank do not fit the edges section";
    return NULL;
}

/* Class c's block in the structure: from `first`, which then moves past
 * it (the classes are walked in order, so each block's place is a running
 * sum, not a sum over the classes before it). */
static rv_alike_class_shape next_block(const rv_alike_shape *shape, guint c, rv_alike_class_shape *first)
{
    rv_alike_class_shape block = *first;
    first->task_count += shape->classes[c].task_count;
    first->resource_count += shape->classes[c].resource_count;
    first->step_count += shape->classes[c].step_count;
    first->edge_count += shape->classes[c].edge_count;
    return block;
}

/* The structure's tasks: a class's on its class's threads and streams and
 * in one of its steps; the job's on the job's resources. */
static const char *shape_task_problem(const rv_graph *stored, const rv_alike_shape *shape, const shape_totals *sum)
{
    int32_t places = (int32_t)(sum->resources + (stored->resources->len - sum->resource_cells));
    const rv_task *tasks = (const rv_task *)stored->tasks->data;
    rv_alike_class_shape running = { 0, 0, 0, 0, 0, NULL };
    for (guint c = 0; c < shape->class_count; c++) {
        rv_alike_class_shape first = next_block(shape, c, &running);
        const rv_alike_class_shape *cls = &shape->classes[c];
        for (int32_t k = first.task_count; k < first.task_count + cls->task_count; k++) {
            if (tasks[k].resource < first.resource_count || tasks[k].resource >= first.resource_count + cls->resource_count)
                return "a task's thread or stream is not its rank's (or the job's)";
            if (tasks[k].step != -1 && (tasks[k].step < first.step_count || tasks[k].step >= first.step_count + cls->step_count))
                return "a task's step is not its rank's";
        }
    }
    for (guint k = (guint)sum->tasks; k < stored->tasks->len; k++)
        if (tasks[k].resource < (int32_t)sum->resources || tasks[k].resource >= places)
            return "a task's thread or stream is not its rank's (or the job's)";
    return NULL;
}

/* Does edge e join tasks of [low, high) or the job's (from `job` on)? */
static gboolean edge_within(const rv_edge *edge, int32_t low, int32_t high, int32_t job, int32_t total)
{
    int32_t ends[2] = { edge->from, edge->to };
    for (int i = 0; i < 2; i++)
        if (ends[i] < 0 || ends[i] >= total || (ends[i] < job && (ends[i] < low || ends[i] >= high))) return FALSE;
    return TRUE;
}

/* A class's edges join its tasks or the job's; the job's join the job's. */
static const char *shape_edge_problem(const rv_graph *stored, const rv_alike_shape *shape, const shape_totals *sum)
{
    int32_t total = rv_graph_task_count(stored), job = (int32_t)sum->tasks;
    const rv_edge *edges = (const rv_edge *)stored->edges->data;
    rv_alike_class_shape running = { 0, 0, 0, 0, 0, NULL };
    guint e = 0;
    for (guint c = 0; c < shape->class_count; c++) {
        rv_alike_class_shape first = next_block(shape, c, &running);
        for (; e < running.edge_count; e++)
            if (!edge_within(&edges[e], first.task_count, running.task_count, job, total))
                return "an edge joins tasks the structure does not hold, or two ranks";
    }
    for (; e < stored->edges->len; e++)
        if (!edge_within(&edges[e], job, job, job, total)) return "an edge joins tasks the structure does not hold, or two ranks";
    return NULL;
}

/* A collective meets at a job's task (or rank index 0's), joint ids. */
static const char *shape_meeting_problem(const rv_graph *stored, const rv_alike_shape *shape, const shape_totals *sum)
{
    int64_t joint_tasks = (int64_t)sum->cells + (stored->tasks->len - (int64_t)sum->tasks);
    for (guint c = 0; c < stored->collectives->len; c++) {
        int64_t meeting = g_array_index(stored->collectives, rv_collective_info, c).rendezvous;
        if (meeting < shape->classes[0].task_count || (meeting >= (int64_t)sum->cells && meeting < joint_tasks)) continue;
        return "a collective's meeting point is not one of the job's tasks";
    }
    return NULL;
}

const char *rv_alike_shape_problem(const rv_graph *stored, const rv_alike_shape *shape)
{
    if (shape->rank_count == 0 || shape->rank_count != stored->ranks->len) return "its rank count is not the ranks section's";
    shape_totals sum = totals_of(shape);
    const char *problem = shape_member_problem(shape, &sum);
    if (problem == NULL) problem = shape_count_problem(stored, shape, &sum);
    if (problem == NULL) problem = shape_edge_problem(stored, shape, &sum);
    if (problem == NULL) problem = shape_task_problem(stored, shape, &sum);
    if (problem == NULL) problem = shape_meeting_problem(stored, shape, &sum);
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
    alike->class_count = shape->class_count;
    alike->classes = g_new0(rv_alike_class, shape->class_count);
    for (guint c = 0; c < shape->class_count; c++) {
        const rv_alike_class_shape *from = &shape->classes[c];
        alike->classes[c] = (rv_alike_class){ .task_count = from->task_count, .resource_count = from->resource_count,
                                              .step_count = from->step_count, .edge_count = from->edge_count,
                                              .member_count = from->member_count,
                                              .members = g_memdup2(from->members, sizeof(guint) * from->member_count) };
    }
    lay_out(alike);
    alike->duration_ns = duration_ns;
    alike->host_overhead_ns = host_overhead_ns;
    alike->recorded_start_ns = recorded_start_ns;
    rv_graph *structure = alike->structure = rv_graph_new(stored->strings, stored->source);
    copy_metadata(structure, stored);
    alike->resources = take_array(&stored->resources);
    alike->steps = take_array(&stored->steps);
    g_array_unref(structure->tasks);
    structure->tasks = take_array(&stored->tasks);
    fill_places(alike);
    g_array_unref(structure->edges);
    structure->edges = take_array(&stored->edges);
    g_array_unref(structure->launches);
    structure->launches = take_array(&stored->launches);
    g_array_unref(structure->host_operators);
    structure->host_operators = take_array(&stored->host_operators);
    g_array_unref(structure->op_args);
    structure->op_args = take_array(&stored->op_args);
    for (guint c = 0; c < stored->collectives->len; c++) {
        rv_collective_info info = g_array_index(stored->collectives, rv_collective_info, c);
        if (info.rendezvous >= joint_job_task(alike)) info.rendezvous += alike->class_task_count - joint_job_task(alike);
        g_array_append_val(structure->collectives, info);
    }
    return alike;
}

/* ---- what the job holds -------------------------------------------------------- */

void rv_alike_stream_delays(const rv_alike_job *alike, int64_t **launch_latency_ns, int64_t **idle_gap_ns)
{
    gsize places = alike->resource_cell_count;
    *launch_latency_ns = g_new(int64_t, places + 1);
    *idle_gap_ns = g_new(int64_t, places + 1);
    for (guint c = 0; c < alike->class_count; c++) {
        const rv_alike_class *cls = &alike->classes[c];
        for (int32_t k = 0; k < cls->resource_count; k++)
            for (guint m = 0; m < cls->member_count; m++) {
                gsize at = rv_alike_resource_cell(cls, cls->first_resource + k) + m;
                const rv_resource *resource = rv_alike_resource(alike, cls->first_resource + k, cls->members[m]);
                (*launch_latency_ns)[at] = resource->launch_latency_ns;
                (*idle_gap_ns)[at] = resource->idle_gap_ns;
            }
    }
}

guint rv_alike_widest_class(const rv_alike_job *alike)
{
    guint widest = 0;
    for (guint c = 0; c < alike->class_count; c++) widest = MAX(widest, alike->classes[c].member_count);
    return widest;
}

int32_t rv_alike_live_task_count(const rv_alike_job *alike)
{
    int32_t live = 0;
    for (int32_t t = 0; t < rv_graph_task_count(alike->structure); t++) {
        gboolean removed = (g_array_index(alike->structure->tasks, rv_task, t).flags & RV_TASK_FLAG_REMOVED) != 0;
        if (!removed) live += t < alike->class_task_count ? (int32_t)rv_alike_class_of(alike, t)->member_count : 1;
    }
    return live;
}

guint rv_alike_edge_count(const rv_alike_job *alike)
{
    guint edges = alike->structure->edges->len - alike->class_edge_count;
    for (guint c = 0; c < alike->class_count; c++) edges += alike->classes[c].edge_count * alike->classes[c].member_count;
    return edges;
}

void rv_alike_job_free(rv_alike_job *alike)
{
    if (alike == NULL) return;
    rv_graph_free(alike->structure);
    if (alike->resources) g_array_unref(alike->resources);
    if (alike->steps) g_array_unref(alike->steps);
    for (guint c = 0; c < alike->class_count && alike->classes; c++) g_free(alike->classes[c].members);
    g_free(alike->classes);
    g_free(alike->ranks);
    g_free(alike->task_class);
    rv_column_free(alike->duration_ns);
    rv_column_free(alike->host_overhead_ns);
    rv_column_free(alike->recorded_start_ns);
    rv_column_free(alike->correlation);
    rv_column_free(alike->bytes);
    rv_column_free(alike->step);
    rv_column_free(alike->collective);
    g_free(alike);
}
