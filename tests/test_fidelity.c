/*
 * test_fidelity.c - the timing model on evidence it did not expect: each
 * estimate falls back to its prior when the trace shows too little, waits
 * keep their causes, threads start from theirs, and a rank replayed
 * without its peers keeps their lateness while what-ifs move its transfers.
 *
 * Hand-made traces (tiny_trace.h) where one rule alone decides; shipped
 * real traces (traces/) for the rank alone and for amp's GradScaler.  The
 * accuracy corpus (tests/accuracy/) checks the same rules over every
 * shipped trace under perturbation.
 */
#include <check.h>
#include <math.h>
#include <string.h>
#include "plugin_harness.h"
#include "tiny_trace.h"
#include "reverie/explain.h"
#include "reverie/job.h"

#define MAIN 1
#define OTHER 2

/* ---- the launch queue ------------------------------------------------- */

/* Every other launch call is long (300 us and more, against 5 us for the
 * others) and returns at a moment no kernel ends: they blocked on something
 * else (the GIL, an allocation), not on the queue.  Forty of them agree on
 * no depth: CUDA's 1024 is assumed, and no call is trimmed. */
START_TEST(queue_depth_falls_back_to_the_prior)
{
    tt_trace *trace = tt_new(1700000000000000.0);
    double t = 0;
    for (int i = 0; i < 80; i++) {
        double call = i % 2 ? 300 + 37 * (i % 7) : 5;
        tt_runtime(trace, MAIN, "cudaLaunchKernel", t, call, i + 1);
        tt_kernel(trace, 7, "k", t + call + 3, 20, i + 1);
        t += call + 100;
    }
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    ck_assert_int_eq(graph->timing.queue_depth.value, 1024);
    ck_assert_int_eq(graph->timing.queue_depth.source, RV_SOURCE_PRIOR);
    ck_assert_uint_eq(graph->timing.queue_depth.samples, 40);
    ck_assert_uint_eq(graph->build_stats.queue_blocked_launches, 0);
    rv_graph_free(graph);
}
END_TEST

/* 1100 short launches far ahead of a GPU that runs 50 us kernels: more in
 * flight than CUDA's 1024 while no call blocked, so the queue is deeper
 * than the prior says: unbounded, from the trace's own bound. */
START_TEST(queue_unbounded_when_more_fly_than_the_prior)
{
    tt_trace *trace = tt_new(1700000000000000.0);
    for (int i = 0; i < 1100; i++) {
        tt_runtime(trace, MAIN, "cudaLaunchKernel", 2.0 * i, 1, i + 1);
        tt_kernel(trace, 7, "k", 10 + 50.0 * i, 50, i + 1);
    }
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    ck_assert_int_eq(graph->timing.queue_depth.value, 0);
    ck_assert_int_eq(graph->timing.queue_depth.source, RV_SOURCE_BOUND);
    ck_assert_uint_ge(graph->timing.queue_unblocked_in_flight, 1025);
    rv_graph_free(graph);
}
END_TEST

/* ROCm queues launches in software: no limit is assumed. */
START_TEST(queue_unbounded_on_rocm)
{
    tt_trace *trace = tt_new(1700000000000000.0);
    tt_runtime(trace, MAIN, "hipLaunchKernel", 0, 5, 1);
    tt_kernel(trace, 7, "k", 7, 10, 1);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    ck_assert_int_eq(graph->timing.queue_depth.value, 0);
    ck_assert_int_eq(graph->timing.queue_depth.source, RV_SOURCE_PRIOR);
    rv_graph_free(graph);
}
END_TEST

/* ---- the clock offset ---------------------------------------------------- */

/* Thirty launches agree with clocks that agree (kernels start 3 us after
 * their calls began); one synchronize at the end is recorded returning
 * 20 ms before its kernel ended (a stretch of GPU time shifted against the
 * host).  The offset the fewest pairs contradict is 0: one contradicted
 * pair, counted, and the synchronize still waits for its kernel. */
START_TEST(clock_outvotes_a_shifted_stretch)
{
    tt_trace *trace = tt_new(1700000000000000.0);
    for (int i = 0; i < 30; i++) {
        tt_runtime(trace, MAIN, "cudaLaunchKernel", 100.0 * i, 5, i + 1);
        tt_kernel(trace, 7, "k", 100.0 * i + 3, 20, i + 1);
    }
    tt_runtime(trace, MAIN, "cudaLaunchKernel", 3000, 5, 31);
    tt_kernel(trace, 7, "late", 23003, 20, 31);
    tt_runtime(trace, MAIN, "cudaDeviceSynchronize", 3010, 20, 32);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    ck_assert_int_eq(graph->timing.clock_offset.value, 0);
    ck_assert_int_eq(graph->timing.clock_status, RV_CLOCK_INCONSISTENT);
    ck_assert_uint_eq(graph->timing.offset_contradicted, 1); /* the sync: a late kernel contradicts nothing */
    ck_assert_uint_eq(graph->build_stats.syncs_contradicted, 1);
    int32_t late = tt_find(graph, "late", RV_TASK_KERNEL);
    int32_t tail = -1;
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++)
        if (rv_graph_task(graph, t)->kind == RV_TASK_SYNC) tail = t;
    ck_assert(tt_has_edge(graph, late, tail, RV_EDGE_SYNC));
    rv_graph_free(graph);
}
END_TEST

/* ---- waits with causes --------------------------------------------------- */

/* A stream synchronize returns 300 us after the kernel it waited for: the
 * trace's typical return is the 5 us prior (fewer than eight blocked
 * calls), so 295 us are unexplained CPU wait at that call site, kept as the
 * call's own time. */
START_TEST(late_return_is_unexplained_cpu_wait)
{
    tt_trace *trace = tt_new(1700000000000000.0);
    tt_runtime(trace, MAIN, "cudaLaunchKernel", 0, 5, 1);
    tt_kernel(trace, 7, "k", 7, 100, 1);
    tt_runtime(trace, MAIN, "cudaStreamSynchronize", 10, 397, 2);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    rv_explanation *x = rv_explain(graph, 0);
    ck_assert_int_eq(graph->timing.sync_return.source, RV_SOURCE_PRIOR);
    ck_assert_int_eq(x->cpu_total_ns, US(300) - graph->timing.sync_return.value);
    ck_assert_uint_eq(x->cpu_calls, 1);
    const rv_unexplained_site *site = &g_array_index(x->cpu_sites, rv_unexplained_site, 0);
    ck_assert_str_eq(rv_strings_get(graph->strings, site->name), "cudaStreamSynchronize");
    rv_explanation_free(x);
    rv_graph_free(graph);
}
END_TEST

/* cudaFree synchronizes the device, then releases memory: its 2 ms after
 * the wait is its own work, not an unexplained wait. */
START_TEST(a_free_works_after_its_wait)
{
    tt_trace *trace = tt_new(1700000000000000.0);
    tt_runtime(trace, MAIN, "cudaLaunchKernel", 0, 5, 1);
    tt_kernel(trace, 7, "k", 7, 100, 1);
    tt_runtime(trace, MAIN, "cudaFree", 10, 2097, 2);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    rv_explanation *x = rv_explain(graph, 0);
    ck_assert_int_eq(x->cpu_total_ns, 0);
    rv_explanation_free(x);
    rv_graph_free(graph);
}
END_TEST

/* ---- where threads start ----------------------------------------------- */

/* Two steps on the main thread; a second thread's first call comes 400 us
 * into step 2.  It starts from step 2's begin marker (an edge), with 400 us
 * of host time, not 1.4 ms from the trace's start. */
START_TEST(thread_starts_from_its_step)
{
    tt_trace *trace = tt_new(1700000000000000.0);
    tt_annotation(trace, MAIN, "ProfilerStep#1", 0, 1000);
    tt_runtime(trace, MAIN, "cudaLaunchKernel", 10, 5, 1);
    tt_kernel(trace, 7, "k1", 20, 900, 1);
    tt_annotation(trace, MAIN, "ProfilerStep#2", 1000, 1000);
    tt_runtime(trace, MAIN, "cudaLaunchKernel", 1010, 5, 2);
    tt_kernel(trace, 7, "k2", 1020, 900, 2);
    tt_runtime(trace, OTHER, "cudaMemsetAsync", 1400, 5, 3);
    tt_kernel(trace, 8, "set", 1410, 5, 3);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    int32_t first = tt_find(graph, "cudaMemsetAsync", RV_TASK_CPU);
    int32_t marker = g_array_index(graph->steps, rv_step, 1).begin_marker;
    ck_assert(tt_has_edge(graph, marker, first, RV_EDGE_INTER_THREAD));
    ck_assert_int_eq(rv_graph_task(graph, first)->host_overhead_ns, US(400));
    ck_assert_uint_eq(graph->build_stats.threads_started_by_step, 1);
    rv_graph_free(graph);
}
END_TEST

/* A thread that only polls (cudaEventQuery) ends a query just before the
 * main thread resumes after a long idle: nothing waits for a poller, so no
 * inter-thread edge comes from it. */
START_TEST(a_poller_wakes_nobody)
{
    tt_trace *trace = tt_new(1700000000000000.0);
    tt_runtime(trace, MAIN, "cudaLaunchKernel", 0, 5, 1);
    tt_kernel(trace, 7, "k", 10, 20, 1);
    for (int i = 0; i < 20; i++) tt_runtime(trace, OTHER, "cudaEventQuery", 10 + 49.0 * i, 1, -1);
    tt_runtime(trace, MAIN, "cudaLaunchKernel", 1000, 5, 2);
    tt_kernel(trace, 7, "k2", 1010, 20, 2);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    ck_assert_int_eq(tt_kind_count(graph, RV_EDGE_INTER_THREAD), 0);
    ck_assert_uint_eq(graph->build_stats.inter_thread_inferred, 0);
    rv_graph_free(graph);
}
END_TEST

/* ---- a rank without its peers -------------------------------------------- */

static int64_t peer_wait_total(const rv_graph *graph)
{
    GArray *waits = rv_peer_waits_by_step(graph);
    int64_t total = 0;
    for (guint s = 0; s < waits->len; s++) total += g_array_index(waits, int64_t, s);
    g_array_unref(waits);
    return total;
}

static int64_t transfer_total(const rv_graph *graph)
{
    int64_t total = 0;
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        if (task->kind == RV_TASK_COMM && !(task->flags & RV_TASK_FLAG_REMOVED)) total += task->duration_ns;
    }
    return total;
}

/* The MI300X checkpointing rank (rank 0 of 8): world-size and network move
 * the transfers and leave the waits for the peers as recorded. */
START_TEST(world_size_and_network_keep_the_peer_wait)
{
    static const char *const opts[][2] = { { "world-size", "world=64" }, { "network", "bandwidth_factor=0.1" } };
    rv_graph *base = load_trace("tracelens_mi300x_resnet_act_checkpoint.json.gz");
    int64_t waited = peer_wait_total(base), moved = transfer_total(base);
    ck_assert_int_gt(waited, 0);
    for (gsize i = 0; i < G_N_ELEMENTS(opts); i++) {
        rv_graph *graph = rv_graph_copy(base);
        apply_ok(graph, opts[i][0], opts[i][1]);
        ck_assert_msg(peer_wait_total(graph) == waited, "%s changed the waits for peers", opts[i][0]);
        ck_assert_msg(transfer_total(graph) > moved, "%s left the transfers alone", opts[i][0]);
        rv_graph_free(graph);
    }
    rv_graph_free(base);
}
END_TEST

/* Joined, the ranks wait for each other's replayed arrivals instead: the
 * recorded waits are merged back into the kernels. */
START_TEST(a_joined_job_has_no_recorded_peer_wait)
{
    rv_graph *joint = load_dlrm_job();
    ck_assert_int_eq(peer_wait_total(joint), 0);
    rv_graph_free(joint);
}
END_TEST

/* ---- GradScaler ------------------------------------------------------------ */

/* amp on the recommendation rank: the kernels get faster, and GradScaler's
 * sync before the optimizer step does not make the step slower. */
START_TEST(amp_on_the_recommendation_rank_is_no_slower)
{
    int64_t baseline = 0, predicted = 0;
    predict_trace("hta_recsys_v100_rank1.json.gz", "amp", "", &baseline, &predicted);
    ck_assert_msg(predicted <= baseline, "amp: %.3f ms against %.3f ms", predicted / 1e6, baseline / 1e6);
}
END_TEST

int main(void)
{
    static const char *const needed[] = { "tracelens_mi300x_resnet_act_checkpoint.json.gz",
                                          "hta_recsys_v100_rank1.json.gz", "param_dlrm_v100_8ranks/rank0.json.gz", NULL };
    require_project_traces(needed);
    Suite *suite = suite_create("fidelity");
    TCase *estimates = tcase_create("estimates");
    tcase_add_test(estimates, queue_depth_falls_back_to_the_prior);
    tcase_add_test(estimates, queue_unbounded_when_more_fly_than_the_prior);
    tcase_add_test(estimates, queue_unbounded_on_rocm);
    tcase_add_test(estimates, clock_outvotes_a_shifted_stretch);
    suite_add_tcase(suite, estimates);
    TCase *waits = tcase_create("waits");
    tcase_add_test(waits, late_return_is_unexplained_cpu_wait);
    tcase_add_test(waits, a_free_works_after_its_wait);
    tcase_add_test(waits, thread_starts_from_its_step);
    tcase_add_test(waits, a_poller_wakes_nobody);
    suite_add_tcase(suite, waits);
    TCase *ranks = tcase_create("ranks");
    tcase_set_timeout(ranks, 120);
    tcase_add_test(ranks, world_size_and_network_keep_the_peer_wait);
    tcase_add_test(ranks, a_joined_job_has_no_recorded_peer_wait);
    tcase_add_test(ranks, amp_on_the_recommendation_rank_is_no_slower);
    suite_add_tcase(suite, ranks);
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed ? 1 : 0;
}
