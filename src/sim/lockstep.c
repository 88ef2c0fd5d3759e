/*
 * lockstep.c - the replay of a job held once per class of alike ranks
 * (alike.h), one task for every member of its class at a time.
 *
 * The structure's order (structure.h, find_order in sim.c) is an order its
 * edges allow; every member has its class's edges between the same ids,
 * and the job's own tasks (the rendezvous) come after all of their
 * predecessors in it.  So walking that order and, at each task, working
 * out its times for every member is an order the joint graph's edges allow
 * too, and - every resource a chain, as sim.c's edge-order replay requires
 * - gives rv_simulate's times: graph.h's rules, read from predecessors
 * (each task's edges in, inverted once from the structure's edges out)
 * rather than pushed to successors, so that a rank's task keeps one
 * number, its end, and nothing else per rank and task lives in the replay.
 *
 * Ranks of several classes (alike.h) meet only at the job's own tasks: a
 * class's task is replayed for its members, a job's task reads the ends of
 * its predecessors of every class.
 *
 * Cost: O(order x members + edges x members) time; 8 bytes per rank and
 * task of memory beside the columns, plus the structure's own arrays once.
 */
#include "reverie/alike.h"
#include "reverie/error.h"
#include "structure.h"
#include "../util/columns.h"
#include <string.h>

/* Each live task's edges in: from, and how it readies the task. */
typedef struct {
    int32_t *first;  /* edges into t: [first[t], first[t + 1]) */
    int32_t *from;
    uint8_t *how;
} predecessors;

static void invert(const rv_sim_structure *structure, predecessors *in)
{
    int32_t n = structure->tasks;
    const adjacency *adj = &structure->adj;
    in->first = g_new0(int32_t, (gsize)n + 2);
    for (int32_t slot = 0; slot < adj->first[n]; slot++)
        if (adj->how[slot] != ORDER_ONLY) in->first[adj->targets[slot] + 2]++;
    for (int32_t t = 0; t < n; t++) in->first[t + 2] += in->first[t + 1];
    in->from = g_new(int32_t, (gsize)in->first[n + 1] + 1);
    in->how = g_new(uint8_t, (gsize)in->first[n + 1] + 1);
    for (int32_t t = 0; t < n; t++)
        for (int32_t slot = adj->first[t]; slot < adj->first[t + 1]; slot++) {
            if (adj->how[slot] == ORDER_ONLY) continue;
            int32_t at = in->first[adj->targets[slot] + 1]++;
            in->from[at] = t;
            in->how[at] = adj->how[slot];
        }
}

static void predecessors_clear(predecessors *in)
{
    g_free(in->first);
    g_free(in->from);
    g_free(in->how);
}


typedef struct {
    const rv_alike_job *alike;
    const rv_sim_structure *structure;
    predecessors in;
    int32_t class_tasks;
    int64_t *end;            /* the result's */
    int64_t *job_end;        /* = end + cell_count */
    int64_t *resource_free;  /* per class resource and member (rv_alike_stream_delays' layout) */
    int64_t *latency, *gap;  /* likewise: each rank's stream's own */
    int64_t *ready, *released;  /* per member, of the task at hand */
    gboolean overflow;
} lockstep;

/* What an edge in from p makes of the readiness of each of `width`
 * members of a task on the resource whose cells begin at `on_at`. */
static inline void ready_from(lockstep *l, int32_t p, uint8_t how, gsize on_at, guint width)
{
    const rv_alike_job *alike = l->alike;
    if (p >= l->class_tasks) { /* one of the job's instants: the same for every member */
        int64_t v = l->job_end[p - l->class_tasks];
        for (guint m = 0; m < width; m++) {
            if (how == QUEUE_RELEASE) l->released[m] = v;
            else l->ready[m] = MAX(l->ready[m], v);
        }
        return;
    }
    gsize from = rv_alike_cell(alike, p, 0); /* of the same class: a rank's edges stay within it */
    const int64_t *end = l->end + from, *duration = alike->duration_ns + from;
    switch (how) {
    case READY_AT_END:
        for (guint m = 0; m < width; m++) l->ready[m] = MAX(l->ready[m], end[m]);
        break;
    case READY_AT_START:
        for (guint m = 0; m < width; m++) l->ready[m] = MAX(l->ready[m], end[m] - duration[m]);
        break;
    case READY_AFTER_LAUNCH: {
        const int64_t *latency = l->latency + on_at;
        for (guint m = 0; m < width; m++) l->ready[m] = MAX(l->ready[m], add_time(end[m], latency[m]));
        break;
    }
    case QUEUE_RELEASE:
        for (guint m = 0; m < width; m++) l->released[m] = end[m];
        break;
    default: break;
    }
}

/* Class task t, every member: begin = max(max(free, ready) + overhead,
 * released); end = begin + duration; free = end + idle gap (none after an
 * arrival). */
static void run_class_task(lockstep *l, int32_t t)
{
    const rv_alike_job *alike = l->alike;
    const rv_alike_class *cls = rv_alike_class_of(alike, t);
    guint width = cls->member_count;
    gsize on_at = rv_alike_resource_cell(cls, l->structure->keys[t].resource), at = rv_alike_cell(alike, t, 0);
    memset(l->ready, 0, sizeof(int64_t) * width);
    memset(l->released, 0, sizeof(int64_t) * width);
    for (int32_t slot = l->in.first[t]; slot < l->in.first[t + 1]; slot++)
        ready_from(l, l->in.from[slot], l->in.how[slot], on_at, width);
    gboolean arrival = l->structure->keys[t].arrival;
    for (guint m = 0; m < width; m++) {
        int64_t begin = MAX(add_time(MAX(l->resource_free[on_at + m], l->ready[m]), alike->host_overhead_ns[at + m]),
                            l->released[m]);
        int64_t end = add_time(begin, alike->duration_ns[at + m]);
        l->end[at + m] = end;
        l->resource_free[on_at + m] = add_time(end, arrival ? 0 : l->gap[on_at + m]);
        if (l->resource_free[on_at + m] > RV_SIM_TIME_MAX_NS) l->overflow = TRUE;
    }
}

/* One of the job's instants: when its last predecessor of any rank is
 * through (its resource has no launch latency: alike.c checks). */
static void run_job_task(lockstep *l, int32_t t)
{
    int64_t begin = 0; /* an instant: no host overhead, no duration, no resource to wait for */
    for (int32_t slot = l->in.first[t]; slot < l->in.first[t + 1]; slot++) {
        int32_t p = l->in.from[slot];
        if (l->in.how[slot] == ORDER_ONLY) continue;
        if (p >= l->class_tasks) {
            begin = MAX(begin, l->job_end[p - l->class_tasks]);
            continue;
        }
        const rv_alike_class *cls = rv_alike_class_of(l->alike, p);
        gsize from = rv_alike_cell(l->alike, p, 0);
        gboolean at_start = l->in.how[slot] == READY_AT_START;
        for (guint m = 0; m < cls->member_count; m++)
            begin = MAX(begin, l->end[from + m] - (at_start ? l->alike->duration_ns[from + m] : 0));
    }
    l->job_end[t - l->class_tasks] = begin;
}

/* Every rank resource must be a chain for the edge order to give the
 * heap's times (sim.c, edge_order_allowed); the job's hold only instants. */
static gboolean chained(const lockstep *l, GError **error)
{
    const adjacency *adj = &l->structure->adj;
    for (int32_t i = 0; i < adj->unchained_count; i++) {
        if (adj->unchained[i] >= l->alike->class_resource_count) continue;
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                    "%s: a rank's thread or stream whose tasks are not one chain: replay the joint graph instead",
                    l->alike->structure->source);
        return FALSE;
    }
    if (l->structure->order != NULL) return TRUE;
    g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                "%s: some task is never ready (the launch queue's order and the edges disagree): replay the joint graph "
                "instead", l->alike->structure->source);
    return FALSE;
}

gboolean rv_alike_simulate(const rv_alike_job *alike, rv_alike_result *result, GError **error)
{
    memset(result, 0, sizeof *result);
    lockstep l = { 0 };
    l.alike = alike;
    l.class_tasks = alike->class_task_count;
    rv_sim_structure *structure = rv_sim_structure_new(alike->structure);
    l.structure = structure;
    if (!chained(&l, error)) {
        rv_sim_structure_free(structure);
        return FALSE;
    }
    invert(structure, &l.in);
    gsize job_tasks = (gsize)(structure->tasks - l.class_tasks);
    result->count = alike->cell_count + job_tasks;
    l.end = rv_column_new(result->count, sizeof(int64_t));
    for (gsize i = 0; i < result->count; i++) l.end[i] = -1; /* removed tasks keep -1 */
    l.job_end = l.end + alike->cell_count;
    rv_alike_stream_delays(alike, &l.latency, &l.gap);
    l.resource_free = g_new0(int64_t, alike->resource_cell_count + 1);
    guint widest = rv_alike_widest_class(alike);
    l.ready = g_new(int64_t, widest + 1);
    l.released = g_new(int64_t, widest + 1);
    for (int32_t i = 0; i < structure->order_count && !l.overflow; i++) {
        int32_t t = structure->order[i];
        if (t < l.class_tasks) run_class_task(&l, t);
        else run_job_task(&l, t);
    }
    predecessors_clear(&l.in);
    g_free(l.resource_free);
    g_free(l.latency);
    g_free(l.gap);
    g_free(l.ready);
    g_free(l.released);
    rv_sim_structure_free(structure);
    result->end_ns = l.end;
    if (!l.overflow) return TRUE;
    g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: the replay passes %" G_GINT64_FORMAT " ns (about 146 years)",
                alike->structure->source, (int64_t)RV_SIM_TIME_MAX_NS);
    rv_alike_result_clear(result);
    return FALSE;
}

void rv_alike_result_clear(rv_alike_result *result)
{
    rv_column_free(result->end_ns);
    memset(result, 0, sizeof *result);
}
