/*
 * ranks.c - what a replay says about each rank of a job (report.h): each
 * rank's time waited in its collectives and for whom, and one replay as
 * the reports read it (the job's steps, each rank's steps and waits).
 */
#include "reverie/report.h"
#include "reverie/critical_path.h"
#include "reverie/job.h"
#include <string.h>

/* ---- waits in a replay ----------------------------------------------------- */

GArray *rv_rank_waits(const rv_graph *graph, const rv_sim_result *sim)
{
    guint ranks = rv_graph_rank_count(graph);
    GArray *waits = g_array_new(FALSE, TRUE, sizeof(rv_rank_wait));
    g_array_set_size(waits, ranks);
    for (guint r = 0; r < ranks; r++) {
        rv_rank_wait *wait = &g_array_index(waits, rv_rank_wait, r);
        wait->rank_index = (int32_t)r;
        wait->waited_for_ns = g_new0(int64_t, ranks);
    }
    /* Per collective: its last arrival; then each rank's transfer start minus its own arrival. */
    guint count = graph->collectives->len;
    int32_t *last = g_new(int32_t, count + 1);
    for (guint c = 0; c <= count; c++) last[c] = -1;
    int32_t n = rv_graph_task_count(graph);
    for (int32_t t = 0; t < n; t++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        if (!(task->flags & RV_TASK_FLAG_RENDEZVOUS) || !(task->flags & RV_TASK_FLAG_GPU) || sim->end_ns[t] < 0) continue;
        int32_t *slot = &last[task->collective];
        if (*slot < 0 || sim->end_ns[t] > sim->end_ns[*slot]) *slot = t;
    }
    for (const rv_edge *edge = (const rv_edge *)graph->edges->data, *end = edge + graph->edges->len; edge < end; edge++) {
        /* the stream edge from an arrival to its transfer */
        const rv_task *arrival = &g_array_index(graph->tasks, rv_task, edge->from);
        const rv_task *transfer = &g_array_index(graph->tasks, rv_task, edge->to);
        if (edge->kind != RV_EDGE_STREAM || !(arrival->flags & RV_TASK_FLAG_RENDEZVOUS) ||
            !(arrival->flags & RV_TASK_FLAG_GPU) || transfer->collective != arrival->collective ||
            sim->start_ns[edge->to] < 0 || sim->end_ns[edge->from] < 0)
            continue;
        int32_t r = rv_task_rank_index(graph, arrival);
        if (r < 0 || (guint)r >= ranks) continue;
        rv_rank_wait *wait = &g_array_index(waits, rv_rank_wait, r);
        int64_t waited = MAX(0, sim->start_ns[edge->to] - sim->end_ns[edge->from]);
        wait->wait_ns += waited;
        wait->collectives++;
        int32_t latest = last[arrival->collective];
        if (latest >= 0) {
            int32_t whom = rv_task_rank_index(graph, &g_array_index(graph->tasks, rv_task, latest));
            if (whom >= 0 && (guint)whom < ranks) wait->waited_for_ns[whom] += waited;
        }
    }
    g_free(last);
    return waits;
}

void rv_rank_waits_free(GArray *waits)
{
    if (waits == NULL) return;
    for (guint r = 0; r < waits->len; r++) g_free(g_array_index(waits, rv_rank_wait, r).waited_for_ns);
    g_array_unref(waits);
}

/* ---- one replay as the reports read it ---------------------------------------- */

void rv_replay_read(const rv_graph *graph, const rv_sim_result *sim, rv_replay *out)
{
    memset(out, 0, sizeof *out);
    out->launch_queue_ignored = sim->launch_queue_ignored;
    if (rv_graph_rank_count(graph) > 1) {
        out->by_rank = rv_step_times_by_rank(graph, sim);
        out->steps = rv_job_step_times(out->by_rank);
        out->waits = rv_rank_waits(graph, sim);
    } else {
        out->steps = rv_step_times(graph, sim);
    }
    rv_critical_path *path = rv_critical_path_find(graph, sim);
    rv_critical_path_host_share(path, graph, &out->path_ns, &out->host_path_ns, &out->profiler_path_ns);
    rv_critical_path_free(path);
}

gboolean rv_replay_run(const rv_graph *graph, const rv_policy *policy, rv_replay *out, GError **error)
{
    memset(out, 0, sizeof *out);
    rv_sim_result sim = { 0 };
    if (!rv_simulate(graph, policy, &sim, error)) return FALSE;
    rv_replay_read(graph, &sim, out);
    rv_sim_result_clear(&sim);
    return TRUE;
}

void rv_replay_clear(rv_replay *replay)
{
    if (replay->steps) g_array_unref(replay->steps);
    if (replay->by_rank) g_ptr_array_unref(replay->by_rank);
    rv_rank_waits_free(replay->waits);
    memset(replay, 0, sizeof *replay);
}

GArray *rv_replay_steps(const rv_graph *graph, const rv_sim_structure *structure, const rv_policy *policy,
                        gboolean *launch_queue_ignored, GError **error)
{
    rv_sim_result sim = { 0 };
    if (!rv_simulate_reusing(graph, structure, policy, &sim, error)) return NULL;
    if (launch_queue_ignored) *launch_queue_ignored = sim.launch_queue_ignored;
    GArray *steps;
    if (rv_graph_rank_count(graph) > 1) {
        /* a job's step is its slowest rank's (job.h) */
        GPtrArray *by_rank = rv_step_times_by_rank(graph, &sim);
        steps = rv_job_step_times(by_rank);
        g_ptr_array_unref(by_rank);
    } else {
        steps = rv_step_times(graph, &sim);
    }
    rv_sim_result_clear(&sim);
    return steps;
}
