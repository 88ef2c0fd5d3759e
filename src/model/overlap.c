/*
 * overlap.c - the time of a fused compute-and-send kernel (overlap.h).
 *
 * A two-stage pipeline followed event by event: the compute units work
 * through the slices in order, the link through the remote ones as they
 * become ready.  Between two events both rates are constant, so each step
 * advances to whichever of the current slice and the current transfer ends
 * first.  O(slices).
 */
#include "reverie/overlap.h"
#include "reverie/stats.h"
#include <math.h>

typedef struct {
    double compute_left, transfer_left;  /* of the current slice and transfer */
    int64_t computed, ready, sent;       /* slices computed; remote slices computed; transfers done */
    gboolean sending;
} pipeline;

/* Advance to the next event: the end of the current slice or of the current transfer. */
static double step(pipeline *p, const rv_overlap *o, int64_t slices, double per_slice)
{
    gboolean computing = p->computed < slices;
    double compute_rate = p->sending ? 1.0 / o->compute_slowdown : 1.0;
    double link_rate = computing ? 1.0 / o->comm_slowdown : 1.0;
    double until_slice = computing ? p->compute_left / compute_rate : INFINITY;
    double until_sent = p->sending ? p->transfer_left / link_rate : INFINITY;
    double dt = MIN(until_slice, until_sent);
    if (computing) p->compute_left -= dt * compute_rate;
    if (p->sending) p->transfer_left -= dt * link_rate;
    if (computing && until_slice <= until_sent) {
        p->computed++;
        p->compute_left = per_slice;
    }
    if (p->sending && until_sent <= until_slice) {
        p->sending = FALSE;
        p->sent++;
    }
    return dt;
}

double rv_overlap_time_ns(const rv_overlap *o)
{
    int64_t slices = CLAMP(o->slices, 1, RV_OVERLAP_MAX_SLICES);
    double fraction = CLAMP(o->remote_fraction, 0.0, 1.0);
    int64_t remote = (int64_t)llround(fraction * (double)slices);
    if (fraction > 0 && remote == 0) remote = 1;
    double per_slice = o->compute_ns / (double)slices + o->slice_overhead_ns;
    double per_transfer = remote > 0 ? o->transfer_ns / (double)remote : 0;
    pipeline p = { per_slice, 0, 0, 0, 0, FALSE };
    double now = 0;
    while (p.computed < slices || p.sent < remote) {
        p.ready = MIN(p.computed, remote);
        if (!p.sending && p.sent < p.ready) {
            p.sending = TRUE;
            p.transfer_left = per_transfer;
        }
        now += step(&p, o, slices, per_slice);
    }
    return o->startup_ns + now + o->tail_ns;
}

int64_t rv_overlap_kernel_fixed_ns(const rv_graph *graph)
{
    GArray *durations = g_array_new(FALSE, FALSE, sizeof(int64_t));
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        if (task->kind == RV_TASK_KERNEL && task->duration_ns > 0 && !(task->flags & RV_TASK_FLAG_REMOVED))
            g_array_append_val(durations, task->duration_ns);
    }
    int64_t fixed = rv_quantile_int64(durations, 0.05, 0);
    g_array_unref(durations);
    return MIN(fixed, 3000);
}
