/*
 * job.c - the graphs of several ranks' traces become one graph of the job
 * (job.h: which ranks, side by side, matched collectives, clocks,
 * rendezvous, the job's origin).
 */
#include "reverie/job.h"
#include "reverie/error.h"
#include "reverie/stats.h"
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

/* ---- which ranks ---------------------------------------------------------- */

typedef struct {
    const rv_graph *graph;
    int64_t rank;
    guint slot;  /* its index in the caller's array */
} rank_input;

static gint by_rank(gconstpointer left, gconstpointer right)
{
    const rank_input *a = left, *b = right;
    return a->rank < b->rank ? -1 : a->rank > b->rank;
}

/* The rank of each input (distributedInfo's, else its position), sorted;
 * NULL with an error for two traces of one rank or different world sizes. */
static GArray *order_ranks(GPtrArray *graphs, int64_t *world_size, GError **error)
{
    GArray *inputs = g_array_new(FALSE, FALSE, sizeof(rank_input));
    const rv_graph *sized = NULL;
    *world_size = -1;
    for (guint i = 0; i < graphs->len; i++) {
        const rv_graph *graph = g_ptr_array_index(graphs, i);
        rank_input input = { graph, graph->rank >= 0 ? graph->rank : (int64_t)i, i };
        g_array_append_val(inputs, input);
        if (graph->world_size <= 0) continue;
        if (sized != NULL && graph->world_size != *world_size) {
            g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                        "ranks from different jobs: %s is rank %" G_GINT64_FORMAT " of %" G_GINT64_FORMAT " but %s is rank %"
                        G_GINT64_FORMAT " of %" G_GINT64_FORMAT, sized->source, sized->rank, *world_size, graph->source,
                        graph->rank, graph->world_size);
            g_array_unref(inputs);
            return NULL;
        }
        sized = graph;
        *world_size = graph->world_size;
    }
    g_array_sort(inputs, by_rank);
    for (guint i = 1; i < inputs->len; i++) {
        const rank_input *a = &g_array_index(inputs, rank_input, i - 1), *b = &g_array_index(inputs, rank_input, i);
        if (a->rank != b->rank) continue;
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "rank %" G_GINT64_FORMAT " is given twice: %s and %s", a->rank,
                    a->graph->source, b->graph->source);
        g_array_unref(inputs);
        return NULL;
    }
    return inputs;
}

/* Every rank of the world must be there: a missing one's collectives
 * would have nobody to wait for. */
static gboolean check_complete(const GArray *inputs, int64_t world_size, GError **error)
{
    if (world_size <= 0 || inputs->len == 1) return TRUE;
    const rank_input *last = &g_array_index(inputs, rank_input, inputs->len - 1);
    if (last->rank >= world_size) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s is rank %" G_GINT64_FORMAT " but the world has %" G_GINT64_FORMAT
                    " ranks (0 to %" G_GINT64_FORMAT ")", last->graph->source, last->rank, world_size, world_size - 1);
        return FALSE;
    }
    if ((int64_t)inputs->len == world_size) return TRUE;
    GString *missing = g_string_new(NULL);
    int64_t next = 0, count = 0;
    for (guint i = 0; i <= inputs->len; i++) {
        int64_t upto = i < inputs->len ? g_array_index(inputs, rank_input, i).rank : world_size;
        for (; next < upto; next++, count++)
            if (count < 8) g_string_append_printf(missing, "%s%" G_GINT64_FORMAT, count ? ", " : "", next);
        next = upto + 1;
    }
    if (count > 8) g_string_append(missing, ", ...");
    g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                "%" G_GINT64_FORMAT " of %" G_GINT64_FORMAT " ranks are missing (rank%s %s; the traces say world size %"
                G_GINT64_FORMAT "): give every rank's trace, or one trace alone to replay that rank by itself", count,
                world_size, count > 1 ? "s" : "", missing->str, world_size);
    g_string_free(missing, TRUE);
    return FALSE;
}

/* ---- side by side ------------------------------------------------------- */

/* String ids of one input in the joint table, interned on first use. */
typedef struct {
    const rv_strings *from;
    rv_strings *to;
    int32_t *map;
} string_map;

static int32_t mapped(string_map *m, int32_t id)
{
    if (id <= 0) return id; /* 0: "", -1: none */
    if (m->map[id] < 0) m->map[id] = rv_strings_intern(m->to, rv_strings_get(m->from, id));
    return m->map[id];
}

static void append_resources(rv_graph *joint, const rv_graph *graph, string_map *m, int32_t rank_index, int64_t rank)
{
    for (guint r = 0; r < graph->resources->len; r++) {
        rv_resource resource = g_array_index(graph->resources, rv_resource, r);
        char *name = g_strdup_printf("rank %" G_GINT64_FORMAT " %s", rank, rv_strings_get(graph->strings, resource.name));
        resource.name = rv_strings_intern(joint->strings, name);
        resource.rank_index = resource.rank_index < 0 ? -1 : rank_index;
        g_free(name);
        g_array_append_val(joint->resources, resource);
    }
}

typedef struct {
    int32_t task, resource, step, collective;  /* where the input's arrays start in the joint graph */
} offsets;

static void append_tasks(rv_graph *joint, const rv_graph *graph, string_map *m, const offsets *at)
{
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        rv_task task = g_array_index(graph->tasks, rv_task, t);
        task.resource += at->resource;
        task.name = mapped(m, task.name);
        task.op = mapped(m, task.op);
        task.layer = mapped(m, task.layer);
        task.input_dims = mapped(m, task.input_dims);
        if (task.step >= 0) task.step += at->step;
        if (task.collective > 0) task.collective += at->collective;
        g_array_append_val(joint->tasks, task);
    }
    if (graph->launches->len > 0) { /* zeros (no launch) up to this rank's first task */
        g_array_set_size(joint->launches, (guint)at->task);
        g_array_append_vals(joint->launches, graph->launches->data, graph->launches->len);
    }
    for (guint t = 0; t < graph->op_args->len; t++) /* likewise: 0, no arguments */
        rv_task_set_op_args(joint, at->task + (int32_t)t, mapped(m, g_array_index(graph->op_args, int32_t, t)));
    if (graph->host_operators->len > 0) { /* likewise: zeros, no operators */
        g_array_set_size(joint->host_operators, (guint)at->task);
        g_array_append_vals(joint->host_operators, graph->host_operators->data, graph->host_operators->len);
    }
    for (guint e = 0; e < graph->edges->len; e++) {
        rv_edge edge = g_array_index(graph->edges, rv_edge, e);
        edge.from += at->task;
        edge.to += at->task;
        g_array_append_val(joint->edges, edge);
    }
    for (guint s = 0; s < graph->steps->len; s++) {
        rv_step step = g_array_index(graph->steps, rv_step, s);
        step.name = mapped(m, step.name);
        step.begin_marker += at->task;
        step.end_marker += at->task;
        g_array_append_val(joint->steps, step);
    }
    for (guint c = 0; c < graph->collectives->len; c++) {
        rv_collective_info info = g_array_index(graph->collectives, rv_collective_info, c);
        info.group = mapped(m, info.group);
        if (info.rendezvous >= 0) info.rendezvous += at->task;
        g_array_append_val(joint->collectives, info);
    }
}

static void add_counters(uint64_t *sum, const uint64_t *more, gsize count)
{
    for (gsize i = 0; i < count; i++) sum[i] += more[i];
}

static void append_rank(rv_graph *joint, const rv_graph *graph, int64_t rank)
{
    int32_t rank_index = (int32_t)joint->ranks->len;
    offsets at = { rv_graph_task_count(joint), (int32_t)joint->resources->len, (int32_t)joint->steps->len,
                   (int32_t)joint->collectives->len };
    string_map m = { graph->strings, joint->strings, g_new(int32_t, rv_strings_count(graph->strings) + 1) };
    for (int32_t i = 0; i <= rv_strings_count(graph->strings); i++) m.map[i] = -1;
    append_resources(joint, graph, &m, rank_index, rank);
    append_tasks(joint, graph, &m, &at);
    g_free(m.map);
    rv_rank entry = { rank, graph->world_size, 0, rv_strings_intern(joint->strings, graph->source), 0 };
    g_array_append_val(joint->ranks, entry);
    for (guint i = 0; i < graph->memory->len; i++) {
        rv_memory_record record = g_array_index(graph->memory, rv_memory_record, i);
        record.rank_index = rank_index;
        if (record.step >= 0) record.step += at.step;
        g_array_append_val(joint->memory, record);
    }
    add_counters((uint64_t *)&joint->trace_stats, (const uint64_t *)&graph->trace_stats,
                 sizeof graph->trace_stats / sizeof(uint64_t));
    add_counters((uint64_t *)&joint->build_stats, (const uint64_t *)&graph->build_stats,
                 sizeof graph->build_stats / sizeof(uint64_t));
    joint->legacy_schema |= graph->legacy_schema;
}

/* Hand the memory of the ranks freed so far back to the system.  They were
 * built on the import's worker threads, whose malloc arenas the joint
 * graph, grown on this thread, never reuses, and the command keeps freed
 * blocks by default (src/cli/main.c): without this the job would hold its
 * ranks twice after all. */
static void release_free_memory(void)
{
#ifdef __GLIBC__
    (void)malloc_trim(0);
#endif
}

/* With `owned` (the caller's array of the inputs), each input is freed
 * once it is copied, and its slot set to NULL. */
static rv_graph *side_by_side(const GArray *inputs, int64_t world_size, const char *source, GPtrArray *owned)
{
    rv_graph *joint = rv_graph_new(NULL, source);
    const rv_graph *first = g_array_index(inputs, rank_input, 0).graph;
    for (guint d = 0; d < first->device_names->len; d++)
        g_ptr_array_add(joint->device_names, g_strdup(g_ptr_array_index(first->device_names, d)));
    joint->rank = inputs->len == 1 ? g_array_index(inputs, rank_input, 0).rank : -1;
    joint->world_size = world_size > 0 ? world_size : (int64_t)inputs->len;
    joint->backend = g_strdup(first->backend);
    joint->timing = first->timing;
    joint->whole_trace_step = TRUE;
    for (guint i = 0; i < inputs->len; i++) {
        const rank_input *input = &g_array_index(inputs, rank_input, i);
        append_rank(joint, input->graph, input->rank);
        joint->whole_trace_step &= input->graph->whole_trace_step;
        if (owned == NULL) continue; /* (the first one's metadata above is copied, not kept) */
        rv_graph_free(owned->pdata[input->slot]);
        owned->pdata[input->slot] = NULL;
        if (i % 16 == 15) release_free_memory();
    }
    if (owned != NULL) release_free_memory();
    return joint;
}

/* ---- clocks ----------------------------------------------------------------- */

static int64_t recorded_end(const rv_graph *graph, int32_t task)
{
    const rv_task *t = &g_array_index(graph->tasks, rv_task, task);
    return t->recorded_start_ns + t->duration_ns;
}

/* Each rank's clock minus rank index 0's: the median difference of the ends
 * of the collectives they share (they end together on every participant). */
static void estimate_offsets(rv_graph *joint, const GPtrArray *matched)
{
    guint ranks = joint->ranks->len;
    GPtrArray *differences = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    for (guint r = 0; r < ranks; r++) g_ptr_array_add(differences, g_array_new(FALSE, FALSE, sizeof(int64_t)));
    for (guint m = 0; m < matched->len; m++) {
        const rv_matched_collective *collective = g_ptr_array_index(matched, m);
        int32_t first = g_array_index(collective->kernels, int32_t, 0);
        if (rv_task_rank_index(joint, &g_array_index(joint->tasks, rv_task, first)) != 0) continue;
        for (guint k = 1; k < collective->kernels->len; k++) {
            int32_t kernel = g_array_index(collective->kernels, int32_t, k);
            int32_t r = rv_task_rank_index(joint, &g_array_index(joint->tasks, rv_task, kernel));
            int64_t difference = recorded_end(joint, kernel) - recorded_end(joint, first);
            g_array_append_val(g_ptr_array_index(differences, r), difference);
        }
    }
    for (guint r = 1; r < ranks; r++) {
        GArray *samples = g_ptr_array_index(differences, r);
        rv_rank *rank = &g_array_index(joint->ranks, rv_rank, r);
        rank->offset_samples = (int32_t)MIN(samples->len, (guint)G_MAXINT32);
        rank->clock_offset_ns = rv_median_int64(samples, 0);
    }
    g_ptr_array_unref(differences);
}

/* Every recorded time of a rank moves onto the first rank's clock. */
static void correct_clocks(rv_graph *joint)
{
    for (int32_t t = 0; t < rv_graph_task_count(joint); t++) {
        rv_task *task = rv_graph_task(joint, t);
        int32_t r = rv_task_rank_index(joint, task);
        if (r >= 0) task->recorded_start_ns -= g_array_index(joint->ranks, rv_rank, r).clock_offset_ns;
    }
    for (guint s = 0; s < joint->steps->len; s++) {
        rv_step *step = &g_array_index(joint->steps, rv_step, s);
        const rv_task *marker = rv_graph_task(joint, step->begin_marker);
        int64_t offset = g_array_index(joint->ranks, rv_rank, rv_task_rank_index(joint, marker)).clock_offset_ns;
        step->recorded_begin_ns -= offset;
        step->recorded_end_ns -= offset;
    }
}

/* ---- the job's start ----------------------------------------------------------- */

/* Each rank entered the recorded window at its own moment (its previous,
 * unrecorded step ended then).  That moment, on the corrected clock, is
 * the one per-rank value the join takes from recorded times: a zero-length
 * marker opens each of the rank's threads, its host overhead the rank's
 * lag behind the job's first rank.  The threads' own tasks keep the host
 * overheads their trace gave them, so a what-if that speeds up the host
 * leaves the lag alone.  A GPU stream whose first task has no launch call
 * waits for the rank's start too. */
typedef struct {
    int64_t origin;        /* per rank: its first recorded start */
    int32_t marker;        /* per rank: its first start marker, -1 */
} rank_start;

static void find_firsts(const rv_graph *joint, int32_t *first, rank_start *starts, int64_t *job_origin)
{
    *job_origin = G_MAXINT64;
    for (int32_t t = 0; t < rv_graph_task_count(joint); t++) {
        const rv_task *task = rv_graph_task((rv_graph *)joint, t);
        if (task->flags & RV_TASK_FLAG_REMOVED) continue;
        int32_t rank = rv_task_rank_index(joint, task);
        if (rank < 0) continue;
        *job_origin = MIN(*job_origin, task->recorded_start_ns);
        starts[rank].origin = MIN(starts[rank].origin, task->recorded_start_ns);
        int32_t *slot = &first[task->resource];
        if (*slot < 0 || task->recorded_start_ns < rv_graph_task((rv_graph *)joint, *slot)->recorded_start_ns) *slot = t;
    }
}

static int32_t add_start_marker(rv_graph *joint, int32_t resource, const rank_start *start, int64_t job_origin)
{
    rv_task marker = { 0 };
    marker.host_overhead_ns = start->origin - job_origin;
    marker.recorded_start_ns = start->origin;
    marker.correlation = -1;
    marker.resource = resource;
    marker.name = rv_strings_intern(joint->strings, "rank enters the recorded window");
    marker.input_dims = -1;
    marker.step = -1;
    marker.kind = RV_TASK_MARKER;
    marker.phase = RV_PHASE_OTHER;
    return rv_graph_add_task(joint, &marker);
}

/* Does anything lead to the task (a launch, another stream)? */
static gboolean *has_predecessor(const rv_graph *joint)
{
    gboolean *led = g_new0(gboolean, rv_graph_task_count(joint));
    for (guint e = 0; e < joint->edges->len; e++) led[g_array_index(joint->edges, rv_edge, e).to] = TRUE;
    return led;
}

static void add_rank_starts(rv_graph *joint)
{
    guint resources = joint->resources->len, ranks = joint->ranks->len;
    int32_t *first = g_new(int32_t, resources);
    rank_start *starts = g_new(rank_start, ranks);
    for (guint r = 0; r < resources; r++) first[r] = -1;
    for (guint r = 0; r < ranks; r++) starts[r] = (rank_start){ G_MAXINT64, -1 };
    int64_t job_origin;
    find_firsts(joint, first, starts, &job_origin);
    gboolean *led = has_predecessor(joint);
    for (int pass = 0; pass < 2; pass++) /* threads first: the streams need their rank's marker */
        for (guint r = 0; r < resources; r++) {
            const rv_resource *resource = &g_array_index(joint->resources, rv_resource, r);
            if (first[r] < 0 || resource->rank_index < 0) continue;
            rank_start *start = &starts[resource->rank_index];
            if (pass == 0 && resource->kind == RV_RES_CPU_THREAD) {
                int32_t marker = add_start_marker(joint, (int32_t)r, start, job_origin);
                rv_graph_add_edge(joint, marker, first[r], RV_EDGE_THREAD, FALSE);
                if (start->marker < 0) start->marker = marker;
            } else if (pass == 1 && resource->kind == RV_RES_GPU_STREAM && !led[first[r]] && start->marker >= 0) {
                rv_graph_add_edge(joint, start->marker, first[r], RV_EDGE_INTER_THREAD, FALSE);
            }
        }
    g_free(led);
    g_free(first);
    g_free(starts);
}

/* ---- rendezvous ---------------------------------------------------------------- */

/* The participant that arrived last (latest start on the corrected clocks;
 * of equals, the shortest kernel): its kernel is all transfer. */
static int32_t last_arriver(const rv_graph *joint, const GArray *kernels)
{
    int32_t last = g_array_index(kernels, int32_t, 0);
    for (guint k = 1; k < kernels->len; k++) {
        int32_t kernel = g_array_index(kernels, int32_t, k);
        const rv_task *a = &g_array_index(joint->tasks, rv_task, kernel), *b = &g_array_index(joint->tasks, rv_task, last);
        if (a->recorded_start_ns > b->recorded_start_ns ||
            (a->recorded_start_ns == b->recorded_start_ns && a->duration_ns < b->duration_ns))
            last = kernel;
    }
    return last;
}

static int32_t add_meeting(rv_graph *joint, int32_t channel, const rv_task *last, int32_t collective)
{
    rv_task meeting = { 0 };
    meeting.recorded_start_ns = last->recorded_start_ns;
    meeting.correlation = -1;
    meeting.resource = channel;
    meeting.name = rv_strings_intern(joint->strings, "all participants arrived");
    meeting.input_dims = -1;
    meeting.step = -1;
    meeting.kind = RV_TASK_SYNC;
    meeting.phase = last->phase;
    meeting.flags = RV_TASK_FLAG_RENDEZVOUS;
    meeting.collective = collective;
    return rv_graph_add_task(joint, &meeting);
}

/* The kernel's arrival: zero length where the kernel began on its stream. */
static int32_t add_arrival(rv_graph *joint, int32_t kernel, int32_t collective)
{
    rv_task arrival = *rv_graph_task(joint, kernel);
    arrival.duration_ns = 0;
    arrival.correlation = -1;
    arrival.bytes = 0;
    arrival.name = rv_strings_intern(joint->strings, "arrival at collective");
    arrival.kind = RV_TASK_SYNC;
    arrival.flags = RV_TASK_FLAG_GPU | RV_TASK_FLAG_RENDEZVOUS;
    arrival.collective = collective;
    return rv_graph_add_task(joint, &arrival);
}

/* The record the participants share: the first's, with the group's size,
 * the largest payload any rank reports, and how it was matched. */
static rv_collective_info shared_record(const rv_graph *joint, const rv_matched_collective *matched, int32_t meeting)
{
    int32_t first = g_array_index(matched->kernels, int32_t, 0);
    rv_collective_info info = *rv_task_collective(joint, &g_array_index(joint->tasks, rv_task, first));
    for (guint k = 1; k < matched->kernels->len; k++) {
        const rv_task *kernel = &g_array_index(joint->tasks, rv_task, g_array_index(matched->kernels, int32_t, k));
        const rv_collective_info *other = rv_task_collective(joint, kernel);
        info.bytes = MAX(info.bytes, other->bytes);
        info.group_size = MAX(info.group_size, other->group_size);
    }
    info.participants = (int32_t)matched->kernels->len;
    info.group_size = MAX(info.group_size, info.participants);
    info.matched_by = (uint8_t)matched->rule;
    info.rendezvous = meeting;
    return info;
}

typedef struct {
    int32_t *arrival_of;   /* per original task: its arrival, or -1 */
    GArray *records;       /* the new collectives array */
    int32_t *new_index;    /* per old collective (1-based value): the new value, or 0 */
} split_state;

static void split_one(rv_graph *joint, split_state *state, const rv_matched_collective *matched, int32_t channel)
{
    int32_t last = last_arriver(joint, matched->kernels);
    int64_t transfer = rv_graph_task(joint, last)->duration_ns;
    int32_t collective = (int32_t)state->records->len + 1;
    rv_task last_copy = *rv_graph_task(joint, last);
    int32_t meeting = add_meeting(joint, channel, &last_copy, collective);
    rv_collective_info info = shared_record(joint, matched, meeting);
    g_array_append_val(state->records, info);
    for (guint k = 0; k < matched->kernels->len; k++) {
        int32_t kernel = g_array_index(matched->kernels, int32_t, k);
        int32_t arrival = add_arrival(joint, kernel, collective);
        state->arrival_of[kernel] = arrival;
        rv_task *task = rv_graph_task(joint, kernel);
        task->recorded_start_ns += task->duration_ns - transfer;
        task->duration_ns = transfer;
        task->collective = collective;
        rv_graph_add_edge(joint, arrival, meeting, RV_EDGE_COMM, FALSE);
        rv_graph_add_edge(joint, meeting, kernel, RV_EDGE_COMM, FALSE);
    }
}

/* Unmatched kernels keep a record of their own. */
static void keep_unmatched(rv_graph *joint, split_state *state, const GArray *old_records)
{
    for (int32_t t = 0; t < rv_graph_task_count(joint); t++) {
        rv_task *task = rv_graph_task(joint, t);
        if (task->collective <= 0 || (task->flags & RV_TASK_FLAG_RENDEZVOUS) || state->arrival_of[t] >= 0) continue;
        int32_t *slot = &state->new_index[task->collective];
        if (*slot == 0) {
            g_array_append_val(state->records, g_array_index(old_records, rv_collective_info, task->collective - 1));
            *slot = (int32_t)state->records->len;
        }
        task->collective = *slot;
    }
}

static void meet_at_rendezvous(rv_graph *joint, const GPtrArray *matched)
{
    int32_t n = rv_graph_task_count(joint);
    guint original_edges = joint->edges->len;
    split_state state = { g_new(int32_t, n), g_array_new(FALSE, FALSE, sizeof(rv_collective_info)),
                          g_new0(int32_t, joint->collectives->len + 1) };
    for (int32_t t = 0; t < n; t++) state.arrival_of[t] = -1;
    int32_t channel = -1;
    if (matched->len > 0) {
        channel = rv_graph_add_resource(joint, RV_RES_CHANNEL, -1, -1, "rendezvous");
        g_array_index(joint->resources, rv_resource, channel).rank_index = -1;
    }
    for (guint m = 0; m < matched->len; m++) split_one(joint, &state, g_ptr_array_index(matched, m), channel);
    /* What waited for a kernel's start now waits for its arrival. */
    for (guint e = 0; e < original_edges; e++) {
        rv_edge *edge = &g_array_index(joint->edges, rv_edge, e);
        if (edge->to < n && state.arrival_of[edge->to] >= 0) edge->to = state.arrival_of[edge->to];
    }
    for (int32_t t = 0; t < n; t++)
        if (state.arrival_of[t] >= 0) rv_graph_add_edge(joint, state.arrival_of[t], t, RV_EDGE_STREAM, FALSE);
    GArray *old_records = joint->collectives;
    joint->collectives = state.records;
    keep_unmatched(joint, &state, old_records);
    g_array_unref(old_records);
    g_free(state.arrival_of);
    g_free(state.new_index);
}

/* ---- each rank in one block ------------------------------------------------------ */

/* A per-task-id array (shorter than tasks where the last tasks have none)
 * in the new order. */
static void permute_per_task(GArray **values, const int32_t *old_of, int32_t n)
{
    if (*values == NULL || (*values)->len == 0) return;
    GArray *old = *values;
    guint size = g_array_get_element_size(old);
    GArray *moved = g_array_sized_new(FALSE, TRUE, size, (guint)n);
    g_array_set_size(moved, (guint)n);
    guint last = 0;
    for (int32_t t = 0; t < n; t++) {
        if ((guint)old_of[t] >= old->len) continue;
        memcpy(moved->data + (gsize)t * size, old->data + (gsize)old_of[t] * size, size);
        last = (guint)t + 1;
    }
    g_array_set_size(moved, last);
    g_array_unref(old);
    *values = moved;
}

/* Move each element i of the array to position destination[i] (a
 * permutation; destroyed), in place: a job's arrays are most of the
 * import's memory, and a second copy of them would be its peak. */
static void permute_in_place(GArray *array, int32_t *destination)
{
    guint size = g_array_get_element_size(array);
    guint8 *held = g_malloc(size), *data = (guint8 *)array->data;
    for (guint i = 0; i < array->len; i++)
        while ((guint)destination[i] != i) { /* put element i where it goes, take what was there */
            guint to = (guint)destination[i];
            memcpy(held, data + (gsize)to * size, size);
            memcpy(data + (gsize)to * size, data + (gsize)i * size, size);
            memcpy(data + (gsize)i * size, held, size);
            destination[i] = destination[to];
            destination[to] = (int32_t)to;
        }
    g_free(held);
}

/* Each item's place when the items of block 0 come first, then block 1's,
 * and so on, each block in its items' order; items of block `dropped`
 * (none if it is past every block) last.  Returns how many are kept. */
static guint place_by_block(const guint *block, guint count, guint blocks, guint dropped, int32_t *place)
{
    guint *next = g_new0(guint, blocks + 2);
    for (guint i = 0; i < count; i++) next[block[i] + 1]++;
    for (guint b = 0; b <= blocks; b++) next[b + 1] += next[b];
    guint kept = count - (dropped <= blocks ? next[dropped + 1] - next[dropped] : 0);
    for (guint i = 0; i < count; i++) place[i] = (int32_t)next[block[i]]++;
    g_free(next);
    return kept;
}

/*
 * Renumber the joint graph so that each rank's tasks - its trace's, its
 * start markers and its arrivals - are one block, ranks in order, and the
 * job's own tasks (the rendezvous) come last; edges likewise, each rank's
 * (those touching its tasks) in one block.  Within a block the join's order
 * is kept.  Ranks that run the same program then number alike, task for
 * task and edge for edge: what lets a job of alike ranks be held and saved
 * once (alike.h).  The ranks' waits for their peers, merged back into their
 * kernels (peers.c) and left removed with no edge, are dropped: a rank that
 * arrived last at a collective recorded no wait there, and would otherwise
 * differ from the others by a task that does nothing.  Nothing the replay
 * reads depends on the numbering.  O(tasks + edges) time, in place.
 */
static void put_ranks_in_blocks(rv_graph *joint)
{
    guint n = joint->tasks->len, ranks = rv_graph_rank_count(joint), removed_block = ranks + 1;
    guint *block = g_new(guint, MAX(n, joint->edges->len) + 1);
    for (guint t = 0; t < n; t++) {
        const rv_task *task = &g_array_index(joint->tasks, rv_task, t);
        int32_t r = rv_task_rank_index(joint, task);
        block[t] = (task->flags & RV_TASK_FLAG_REMOVED) ? removed_block : r >= 0 ? (guint)r : ranks;
    }
    int32_t *new_of = g_new(int32_t, n + 1), *destination = g_new(int32_t, MAX(n, joint->edges->len) + 1);
    guint kept = place_by_block(block, n, removed_block, removed_block, new_of);
    for (guint e = 0; e < joint->edges->len; e++) { /* the edges' blocks, while the tasks are where they were */
        const rv_edge *edge = &g_array_index(joint->edges, rv_edge, e);
        gboolean dead = block[edge->from] == removed_block || block[edge->to] == removed_block;
        int32_t r = rv_edge_rank_index(joint, edge);
        destination[e] = dead ? (int32_t)removed_block : r >= 0 ? r : (int32_t)ranks;
    }
    for (guint e = 0; e < joint->edges->len; e++) block[e] = (guint)destination[e];
    guint edges_kept = place_by_block(block, joint->edges->len, removed_block, removed_block, destination);
    permute_in_place(joint->edges, destination);
    g_array_set_size(joint->edges, edges_kept);
    for (guint e = 0; e < edges_kept; e++) {
        rv_edge *edge = &g_array_index(joint->edges, rv_edge, e);
        edge->from = new_of[edge->from];
        edge->to = new_of[edge->to];
    }
    memcpy(destination, new_of, sizeof(int32_t) * n);
    permute_in_place(joint->tasks, destination);
    g_array_set_size(joint->tasks, kept);
    g_free(block);
    g_free(destination);
    for (guint s = 0; s < joint->steps->len; s++) {
        rv_step *step = &g_array_index(joint->steps, rv_step, s);
        step->begin_marker = new_of[step->begin_marker];
        step->end_marker = new_of[step->end_marker];
    }
    for (guint c = 0; c < joint->collectives->len; c++) {
        rv_collective_info *info = &g_array_index(joint->collectives, rv_collective_info, c);
        if (info->rendezvous >= 0) info->rendezvous = new_of[info->rendezvous];
    }
    int32_t *old_of = g_new(int32_t, kept + 1);
    for (guint t = 0; t < n; t++)
        if ((guint)new_of[t] < kept) old_of[new_of[t]] = (int32_t)t;
    g_free(new_of);
    permute_per_task(&joint->launches, old_of, (int32_t)kept);
    permute_per_task(&joint->host_operators, old_of, (int32_t)kept);
    permute_per_task(&joint->op_args, old_of, (int32_t)kept);
    permute_per_task(&joint->kernel_demands, old_of, (int32_t)kept);
    permute_per_task(&joint->duration_ranges, old_of, (int32_t)kept);
    g_free(old_of);
}

static rv_graph *join(GPtrArray *graphs, const char *source, gboolean freeing, GError **error)
{
    g_return_val_if_fail(graphs != NULL && graphs->len > 0, NULL);
    int64_t world_size = -1;
    GArray *inputs = order_ranks(graphs, &world_size, error);
    if (inputs == NULL) return NULL;
    if (!check_complete(inputs, world_size, error)) {
        g_array_unref(inputs);
        return NULL;
    }
    rv_graph *joint = side_by_side(inputs, world_size, source, freeing ? graphs : NULL);
    g_array_unref(inputs);
    rv_graph_merge_peer_waits(joint); /* joined, the peers' arrivals replace each rank's recorded wait */
    GPtrArray *matched = rv_collectives_match(joint, error);
    if (matched == NULL) {
        rv_graph_free(joint);
        return NULL;
    }
    estimate_offsets(joint, matched);
    correct_clocks(joint);
    add_rank_starts(joint);
    meet_at_rendezvous(joint, matched);
    g_ptr_array_unref(matched);
    put_ranks_in_blocks(joint);
    if (!rv_graph_check_acyclic(joint, error)) {
        rv_graph_free(joint);
        return NULL;
    }
    return joint;
}

rv_graph *rv_job_join(GPtrArray *graphs, const char *source, GError **error)
{
    return join(graphs, source, FALSE, error);
}

rv_graph *rv_job_join_freeing(GPtrArray *graphs, const char *source, GError **error)
{
    return join(graphs, source, TRUE, error);
}

guint rv_job_enter_together(rv_graph *graph)
{
    int32_t name = rv_strings_intern(graph->strings, "rank enters the recorded window");
    guint count = 0;
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        rv_task *task = rv_graph_task(graph, t);
        if (task->kind != RV_TASK_MARKER || task->name != name || (task->flags & RV_TASK_FLAG_REMOVED)) continue;
        task->host_overhead_ns = 0;
        count++;
    }
    return count;
}
