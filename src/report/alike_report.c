/*
 * alike_report.c - what `simulate` says of a job held once (alike.h),
 * read from the lockstep replay and the columns without rebuilding the
 * joint graph: each rank's steps, the job's, each rank's waits in its
 * collectives, the unexplained time.  Every figure is the one the reports
 * of the joint graph give (steps.c, ranks.c, explain.c), rule for rule;
 * the test compares them.
 */
#include "reverie/alike.h"
#include "reverie/checked.h"
#include "reverie/explain.h"
#include "reverie/report.h"
#include "../util/columns.h"
#include <string.h>

/* ---- one rank's task: its values in the columns --------------------------------- */

static const rv_task *template_task(const rv_alike_job *alike, int32_t k)
{
    return &g_array_index(alike->structure->tasks, rv_task, k);
}

static gboolean live(const rv_task *task)
{
    return (task->flags & RV_TASK_FLAG_REMOVED) == 0;
}

/* Rank r's own step index of class task k (of its class's steps), or -1. */
static int32_t step_of(const rv_alike_job *alike, int32_t k, guint r)
{
    if (alike->step) return alike->step[rv_alike_rank_cell(alike, k, r)];
    int32_t step = template_task(alike, k)->step;
    return step < 0 ? -1 : step - rv_alike_class_of(alike, k)->first_step;
}

static int32_t collective_of(const rv_alike_job *alike, int32_t k, guint r)
{
    if (k >= alike->class_task_count || alike->collective == NULL) return template_task(alike, k)->collective;
    return alike->collective[rv_alike_rank_cell(alike, k, r)];
}

/* The job's own task k's place in a replay's result. */
static gsize job_cell(const rv_alike_job *alike, int32_t k)
{
    return alike->cell_count + (gsize)(k - alike->class_task_count);
}

/* A task's times in the replay and in the recording, for rank r (the job's
 * own tasks are the same for every rank: instants). */
typedef struct {
    int64_t start, end;                    /* replayed; -1 if not run */
    int64_t recorded_start, recorded_end;
} task_times;

/* sim NULL: the recorded times only. */
static task_times times_of(const rv_alike_job *alike, const rv_alike_result *sim, int32_t k, guint r)
{
    task_times times = { -1, -1, 0, 0 };
    if (k >= alike->class_task_count) {
        const rv_task *task = template_task(alike, k);
        if (sim != NULL) times.end = sim->end_ns[job_cell(alike, k)];
        times.start = times.end < 0 ? -1 : times.end - task->duration_ns;
        times.recorded_start = task->recorded_start_ns;
        times.recorded_end = rv_saturating_add(task->recorded_start_ns, task->duration_ns);
        return times;
    }
    gsize at = rv_alike_rank_cell(alike, k, r);
    if (sim != NULL) times.end = sim->end_ns[at];
    times.start = times.end < 0 ? -1 : times.end - alike->duration_ns[at];
    if (alike->recorded_start_ns == NULL) return times; /* loaded for a replay only: not asked for */
    times.recorded_start = alike->recorded_start_ns[at];
    times.recorded_end = rv_saturating_add(alike->recorded_start_ns[at], alike->duration_ns[at]);
    return times;
}

/* ---- steps (steps.c's rule) ------------------------------------------------------- */

/* Per step of the joint graph (each rank's at its first_step): the end of
 * the step's end marker or of its last GPU task, whichever is later. */
static int64_t *simulated_step_ends(const rv_alike_job *alike, const rv_alike_result *sim)
{
    int64_t *ends = g_new(int64_t, alike->steps->len + 1);
    for (guint r = 0; r < alike->rank_count; r++) {
        const rv_alike_class *cls = rv_alike_rank_class(alike, r);
        for (int32_t s = 0; s < cls->step_count; s++) {
            int32_t marker = g_array_index(alike->structure->steps, rv_step, cls->first_step + s).end_marker;
            ends[alike->ranks[r].first_step + s] = times_of(alike, sim, marker, r).end;
        }
    }
    for (int32_t k = 0; k < alike->class_task_count; k++) {
        const rv_task *task = template_task(alike, k);
        if (!live(task) || !(task->flags & RV_TASK_FLAG_GPU)) continue;
        const rv_alike_class *cls = rv_alike_class_of(alike, k);
        for (guint m = 0; m < cls->member_count; m++) {
            guint r = cls->members[m];
            int32_t step = step_of(alike, k, r);
            if (step < 0) continue;
            int64_t end = sim->end_ns[rv_alike_cell(alike, k, m)];
            int64_t *slot = &ends[alike->ranks[r].first_step + step];
            if (end > *slot) *slot = end;
        }
    }
    return ends;
}

/* Rank r's steps: each from the previous step's end (the first: its own
 * begin) to its end, never negative. */
static GArray *rank_steps(const rv_alike_job *alike, const rv_alike_result *sim, const int64_t *ends, guint r)
{
    GArray *times = g_array_new(FALSE, FALSE, sizeof(rv_step_time));
    const rv_alike_class *cls = rv_alike_rank_class(alike, r);
    const int64_t *own = ends + alike->ranks[r].first_step;
    for (int32_t s = 0; s < cls->step_count; s++) {
        const rv_step *step = rv_alike_rank_step(alike, r, s), *before = s > 0 ? rv_alike_rank_step(alike, r, s - 1) : NULL;
        int64_t recorded_begin = before ? before->recorded_end_ns : step->recorded_begin_ns;
        int32_t marker = g_array_index(alike->structure->steps, rv_step, cls->first_step + s).begin_marker;
        int64_t simulated_begin = s > 0 ? own[s - 1] : times_of(alike, sim, marker, r).start;
        rv_step_time time = { rv_strings_get(alike->structure->strings, step->name),
                              MAX(step->recorded_end_ns, recorded_begin) - recorded_begin,
                              MAX(own[s], simulated_begin) - simulated_begin };
        g_array_append_val(times, time);
    }
    return times;
}

/* A rank without steps: one window over its live tasks but markers. */
static GArray *rank_whole_trace(const rv_alike_job *alike, const rv_alike_result *sim, guint r)
{
    int64_t begin = G_MAXINT64, end = G_MININT64, recorded_begin = G_MAXINT64, recorded_end = G_MININT64;
    const rv_alike_class *cls = rv_alike_rank_class(alike, r);
    for (int32_t k = cls->first_task; k < cls->first_task + cls->task_count; k++) {
        const rv_task *task = template_task(alike, k);
        if (!live(task) || task->kind == RV_TASK_MARKER) continue;
        task_times times = times_of(alike, sim, k, r);
        if (!(task->flags & RV_TASK_FLAG_INSERTED) && times.recorded_start >= 0) {
            recorded_begin = MIN(recorded_begin, times.recorded_start);
            recorded_end = MAX(recorded_end, times.recorded_end);
        }
        if (times.start < 0) continue;
        begin = MIN(begin, times.start);
        end = MAX(end, times.end);
    }
    rv_step_time time = { "(whole trace)", recorded_end > recorded_begin ? recorded_end - recorded_begin : 0,
                          end > begin ? end - begin : 0 };
    GArray *times = g_array_new(FALSE, FALSE, sizeof(rv_step_time));
    g_array_append_val(times, time);
    return times;
}

static GPtrArray *steps_by_rank(const rv_alike_job *alike, const rv_alike_result *sim)
{
    GPtrArray *by_rank = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    int64_t *ends = alike->steps->len > 0 ? simulated_step_ends(alike, sim) : NULL;
    for (guint r = 0; r < alike->rank_count; r++)
        g_ptr_array_add(by_rank, rv_alike_rank_class(alike, r)->step_count > 0 ? rank_steps(alike, sim, ends, r)
                                                                                 : rank_whole_trace(alike, sim, r));
    g_free(ends);
    return by_rank;
}

/* ---- waits in collectives (ranks.c's rule) --------------------------------------- */

static gboolean is_arrival(const rv_task *task)
{
    return (task->flags & RV_TASK_FLAG_RENDEZVOUS) && (task->flags & RV_TASK_FLAG_GPU);
}

/* Per collective, the rank whose arrival ended last (of equals, the first
 * in the joint graph's order: the lowest rank), or -1. */
static int32_t *last_arrivers(const rv_alike_job *alike, const rv_alike_result *sim)
{
    guint count = alike->structure->collectives->len;
    int32_t *last = g_new(int32_t, count + 1);
    int64_t *latest = g_new(int64_t, count + 1);
    for (guint c = 0; c <= count; c++) last[c] = -1;
    for (guint r = 0; r < alike->rank_count; r++) { /* rank by rank: of equal ends, the lowest rank's */
        const rv_alike_class *cls = rv_alike_rank_class(alike, r);
        for (int32_t k = cls->first_task; k < cls->first_task + cls->task_count; k++) {
            if (!is_arrival(template_task(alike, k))) continue;
            int64_t end = sim->end_ns[rv_alike_rank_cell(alike, k, r)];
            int32_t c = collective_of(alike, k, r);
            if (end < 0 || c < 0 || (guint)c > count) continue;
            if (last[c] < 0 || end > latest[c]) {
                last[c] = (int32_t)r;
                latest[c] = end;
            }
        }
    }
    g_free(latest);
    return last;
}

static GArray *rank_waits(const rv_alike_job *alike, const rv_alike_result *sim)
{
    guint ranks = alike->rank_count;
    GArray *waits = g_array_new(FALSE, TRUE, sizeof(rv_rank_wait));
    g_array_set_size(waits, ranks);
    for (guint r = 0; r < ranks; r++) {
        g_array_index(waits, rv_rank_wait, r).rank_index = (int32_t)r;
        g_array_index(waits, rv_rank_wait, r).waited_for_ns = g_new0(int64_t, ranks);
    }
    int32_t *last = last_arrivers(alike, sim);
    GArray *arrivals = g_array_new(FALSE, FALSE, sizeof(const rv_edge *)); /* each arrival's edge to its transfer */
    for (guint e = 0; e < alike->class_edge_count; e++) {
        const rv_edge *edge = &g_array_index(alike->structure->edges, rv_edge, e);
        if (edge->kind == RV_EDGE_STREAM && is_arrival(template_task(alike, edge->from))) g_array_append_val(arrivals, edge);
    }
    for (guint a = 0; a < arrivals->len; a++) {
        const rv_edge *edge = g_array_index(arrivals, const rv_edge *, a);
        const rv_alike_class *cls = rv_alike_class_of(alike, edge->from);
        for (guint m = 0; m < cls->member_count; m++) {
            guint r = cls->members[m];
            int32_t collective = collective_of(alike, edge->from, r);
            task_times arrival = times_of(alike, sim, edge->from, r), transfer = times_of(alike, sim, edge->to, r);
            if (collective_of(alike, edge->to, r) != collective || transfer.start < 0 || arrival.end < 0) continue;
            rv_rank_wait *wait = &g_array_index(waits, rv_rank_wait, r);
            int64_t waited = MAX(0, transfer.start - arrival.end);
            wait->wait_ns += waited;
            wait->collectives++;
            if (last[collective] >= 0) wait->waited_for_ns[last[collective]] += waited;
        }
    }
    g_array_unref(arrivals);
    g_free(last);
    return waits;
}

gboolean rv_alike_replay_run(const rv_alike_job *alike, rv_replay *out, GError **error)
{
    memset(out, 0, sizeof *out);
    rv_alike_result sim = { 0 };
    if (!rv_alike_simulate(alike, &sim, error)) return FALSE;
    out->by_rank = steps_by_rank(alike, &sim);
    out->steps = rv_job_step_times(out->by_rank);
    out->waits = rank_waits(alike, &sim);
    rv_alike_result_clear(&sim);
    return TRUE;
}

/* ---- unexplained time (explain.c's rule, without the detail) ---------------------- */

static gboolean counts(const rv_task *task)
{
    return (task->flags & (RV_TASK_FLAG_GPU | RV_TASK_FLAG_REMOVED | RV_TASK_FLAG_INSERTED)) == RV_TASK_FLAG_GPU;
}

/* The structure's edges of a class into each class task: [first[k],
 * first[k + 1]) of `edge`. */
typedef struct {
    int32_t *first;
    guint *edge;
} edges_in;

static edges_in rank_edges_in(const rv_alike_job *alike)
{
    int32_t n = alike->class_task_count;
    edges_in in = { g_new0(int32_t, (gsize)n + 2), g_new(guint, alike->class_edge_count + 1) };
    for (guint e = 0; e < alike->class_edge_count; e++) {
        int32_t to = g_array_index(alike->structure->edges, rv_edge, e).to;
        if (to < n) in.first[to + 2]++;
    }
    for (int32_t k = 0; k < n; k++) in.first[k + 2] += in.first[k + 1];
    for (guint e = 0; e < alike->class_edge_count; e++) {
        int32_t to = g_array_index(alike->structure->edges, rv_edge, e).to;
        if (to < n) in.edge[in.first[to + 1]++] = e;
    }
    return in;
}

/* What an edge adds to the recorded end (or start) of its source: the
 * stream's idle gap, the launch latency, or nothing. */
enum { AFTER_END, AFTER_END_AND_GAP, AFTER_END_AND_LATENCY, AT_START };

static int rule_of(const rv_alike_job *alike, const rv_edge *edge)
{
    const rv_task *from = template_task(alike, edge->from), *to = template_task(alike, edge->to);
    if (from->resource == to->resource) return AFTER_END_AND_GAP;
    if (edge->kind == RV_EDGE_LAUNCH && !edge->from_start) return AFTER_END_AND_LATENCY;
    return edge->from_start ? AT_START : AFTER_END;
}

/* Each rank's stream delays (rv_alike_stream_delays), read once rather than per edge. */
typedef struct {
    int64_t *latency, *gap;
} stream_delays;

/* The recorded start (at_start) or end of task k for each of `width`
 * members of the class at hand, into `times` (the job's own tasks: the
 * same for all). */
static void recorded_times(const rv_alike_job *alike, int32_t k, gboolean at_start, guint width, int64_t *times)
{
    if (k >= alike->class_task_count) {
        const rv_task *task = template_task(alike, k);
        int64_t at = at_start ? task->recorded_start_ns : rv_saturating_add(task->recorded_start_ns, task->duration_ns);
        for (guint m = 0; m < width; m++) times[m] = at;
        return;
    }
    gsize first = rv_alike_cell(alike, k, 0);
    const int64_t *start = alike->recorded_start_ns + first, *duration = alike->duration_ns + first;
    for (guint m = 0; m < width; m++) times[m] = at_start ? start[m] : rv_saturating_add(start[m], duration[m]);
}

/* Every member's earliest start of class task k by the rules, on the
 * recorded clock (explain.c's rule_starts): into ready[m], G_MININT64
 * where nothing leads to it.  scratch: room for one value per member. */
static void rule_starts(const rv_alike_job *alike, const edges_in *in, const stream_delays *delays, int32_t k,
                        int64_t *ready, int64_t *scratch)
{
    const rv_alike_class *cls = rv_alike_class_of(alike, k);
    guint width = cls->member_count;
    for (guint m = 0; m < width; m++) ready[m] = G_MININT64;
    gsize on = rv_alike_resource_cell(cls, template_task(alike, k)->resource);
    const int64_t *gap = delays->gap + on, *latency = delays->latency + on;
    for (int32_t slot = in->first[k]; slot < in->first[k + 1]; slot++) {
        const rv_edge *edge = &g_array_index(alike->structure->edges, rv_edge, in->edge[slot]);
        if (!live(template_task(alike, edge->from))) continue;
        int rule = rule_of(alike, edge);
        recorded_times(alike, edge->from, rule == AT_START, width, scratch);
        for (guint m = 0; m < width; m++) {
            int64_t at = scratch[m];
            if (rule == AFTER_END_AND_GAP) at = rv_saturating_add(at, gap[m]);
            else if (rule == AFTER_END_AND_LATENCY) at = rv_saturating_add(at, latency[m]);
            ready[m] = MAX(ready[m], at);
        }
    }
}

/* Where a member's unexplained time of class task k goes: the structure's
 * step (its class's), or past them all. */
static int64_t *step_slot(const rv_alike_job *alike, int64_t *by_step, int32_t k, guint r)
{
    int32_t step = step_of(alike, k, r);
    guint at = step >= 0 ? (guint)(rv_alike_class_of(alike, k)->first_step + step) : (guint)alike->class_step_count;
    return &by_step[at];
}

static void explain_gpu(const rv_alike_job *alike, rv_explanation *x)
{
    edges_in in = rank_edges_in(alike);
    stream_delays delays;
    rv_alike_stream_delays(alike, &delays.latency, &delays.gap);
    guint widest = rv_alike_widest_class(alike);
    int64_t *ready = g_new(int64_t, widest + 1), *scratch = g_new(int64_t, widest + 1);
    for (int32_t k = 0; k < alike->class_task_count; k++) {
        if (!counts(template_task(alike, k))) continue;
        rule_starts(alike, &in, &delays, k, ready, scratch);
        const rv_alike_class *cls = rv_alike_class_of(alike, k);
        for (guint m = 0; m < cls->member_count; m++) {
            gsize i = rv_alike_cell(alike, k, m);
            x->gpu_tasks++;
            if (ready[m] == G_MININT64) continue;
            int64_t difference = rv_saturating_sub(alike->recorded_start_ns[i], ready[m]);
            if (difference < -RV_EXPLAIN_TOLERANCE_NS) {
                x->early_tasks++;
                x->early_ns = rv_saturating_sub(x->early_ns, difference);
            }
            if (difference <= 0) continue;
            if (difference > RV_EXPLAIN_TOLERANCE_NS) x->late_tasks++;
            x->total_ns = rv_saturating_add(x->total_ns, difference);
            int64_t *slot = step_slot(alike, x->by_step, k, cls->members[m]);
            *slot = rv_saturating_add(*slot, difference);
        }
    }
    g_free(ready);
    g_free(scratch);
    g_free(delays.gap);
    g_free(delays.latency);
    g_free(in.first);
    g_free(in.edge);
}

static void explain_cpu(const rv_alike_job *alike, rv_explanation *x)
{
    int64_t typical = alike->structure->timing.sync_return.value;
    for (int32_t k = 0; k < alike->class_task_count; k++) {
        const rv_task *task = template_task(alike, k);
        if (task->kind != RV_TASK_SYNC || (task->flags & (RV_TASK_FLAG_GPU | RV_TASK_FLAG_REMOVED | RV_TASK_FLAG_INSERTED)) ||
            rv_call_works_after_wait(rv_strings_get(alike->structure->strings, task->name)))
            continue;
        const rv_alike_class *cls = rv_alike_class_of(alike, k);
        for (guint m = 0; m < cls->member_count; m++) {
            int64_t excess = rv_saturating_sub(alike->duration_ns[rv_alike_cell(alike, k, m)], typical);
            if (excess <= RV_EXPLAIN_TOLERANCE_NS) continue;
            x->cpu_total_ns = rv_saturating_add(x->cpu_total_ns, excess);
            x->cpu_calls++;
            int64_t *slot = step_slot(alike, x->cpu_by_step, k, cls->members[m]);
            *slot = rv_saturating_add(*slot, excess);
        }
    }
}

rv_explanation *rv_alike_explain(const rv_alike_job *alike)
{
    rv_explanation *x = g_new0(rv_explanation, 1);
    guint steps = (guint)alike->class_step_count;
    x->by_step = g_new0(int64_t, steps + 1);
    x->cpu_by_step = g_new0(int64_t, steps + 1);
    x->cpu_sites = g_array_new(FALSE, FALSE, sizeof(rv_unexplained_site));
    x->by_resource = g_new0(int64_t, alike->structure->resources->len + 1);
    x->top = g_array_new(FALSE, FALSE, sizeof(rv_unexplained_task));
    explain_gpu(alike, x);
    explain_cpu(alike, x);
    return x;
}

/* ---- what the job's reports add ------------------------------------------------------ */

/* As rv_job_enter_together does to the joint graph (job.c), in the columns:
 * every rank's start markers without their lag. */
int64_t rv_alike_step_entering_together(const rv_alike_job *alike, const GArray *steps)
{
    if (alike->rank_count <= 1 || steps->len != 1) return -1;
    int32_t name = rv_strings_lookup(alike->structure->strings, "rank enters the recorded window");
    rv_alike_job together = *alike;
    together.host_overhead_ns = rv_column_copy(alike->host_overhead_ns, alike->cell_count, sizeof(int64_t));
    guint markers = 0;
    for (int32_t k = 0; k < alike->class_task_count && name > 0; k++) {
        const rv_task *task = template_task(alike, k);
        if (task->kind != RV_TASK_MARKER || task->name != name || !live(task)) continue;
        for (guint m = 0; m < rv_alike_class_of(alike, k)->member_count; m++)
            together.host_overhead_ns[rv_alike_cell(alike, k, m)] = 0;
        markers++;
    }
    int64_t step = -1;
    rv_replay replay;
    if (markers > 0 && rv_alike_replay_run(&together, &replay, NULL))
        step = g_array_index(replay.steps, rv_step_time, 0).simulated_ns;
    if (markers > 0) rv_replay_clear(&replay);
    rv_column_free(together.host_overhead_ns);
    return step;
}

uint64_t rv_alike_gpu_task_count(const rv_alike_job *alike)
{
    uint64_t count = 0;
    for (int32_t k = 0; k < rv_graph_task_count(alike->structure); k++)
        if (template_task(alike, k)->flags & RV_TASK_FLAG_GPU)
            count += k < alike->class_task_count ? rv_alike_class_of(alike, k)->member_count : 1;
    return count;
}

/* A rank alone's recorded waits for its peers (peers.c): none in a joint
 * graph whose collectives met, but counted as rv_peer_wait_total does. */
int64_t rv_alike_peer_wait_total(const rv_alike_job *alike)
{
    int64_t total = 0;
    for (int32_t k = 0; k < alike->class_task_count; k++) {
        const rv_task *task = template_task(alike, k);
        if (task->kind != RV_TASK_SYNC || !is_arrival(task) || !live(task)) continue;
        const rv_alike_class *cls = rv_alike_class_of(alike, k);
        for (guint m = 0; m < cls->member_count; m++) {
            guint r = cls->members[m];
            int64_t duration = alike->duration_ns[rv_alike_cell(alike, k, m)];
            const rv_collective_info *info =
                collective_of(alike, k, r) > 0 && (guint)collective_of(alike, k, r) <= alike->structure->collectives->len
                    ? &g_array_index(alike->structure->collectives, rv_collective_info, collective_of(alike, k, r) - 1)
                    : NULL;
            if (duration > 0 && info != NULL && info->rendezvous < 0) total += duration;
        }
    }
    return total;
}
