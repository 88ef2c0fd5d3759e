/*
 * test_timing.c - the timing model's own rules (graph.h, timing.c, clock.c,
 * explain.h) on tiny hand-made traces, with times worked out in comments
 * (microseconds from the trace's first task):
 *   - the launch queue: its depth measured from blocked launches, their
 *     waits trimmed, and the wait put back by rule when the GPU changes;
 *   - the clock offset: a shifted GPU clock found and corrected;
 *   - a stream wait read from launch order (the c10d pattern);
 *   - host overhead: a CPU call's own host time, not another thread's;
 *   - unexplained time: reported, not replayed;
 *   - the notes a trace without launch correlation gets.
 */
#include "tiny_trace.h"
#include "reverie/explain.h"

#include <check.h>
#include <string.h>

#define BASE_US 1700000000000000.0
#define MAIN 1
#define AUTOGRAD 2

static int64_t replayed(const rv_graph *graph, int32_t id, gboolean end)
{
    rv_sim_result result;
    tt_simulate(graph, &result);
    int64_t at = end ? result.end_ns[id] : result.start_ns[id];
    rv_sim_result_clear(&result);
    return at;
}

/* The task with this name on a CPU thread (launch calls are named per kernel here). */
static int32_t call_named(rv_graph *graph, const char *name)
{
    return tt_find(graph, name, RV_TASK_CPU);
}

/* ---- the launch queue -------------------------------------------------

   One stream, 60 kernels of 100 us, each launched by a 1 us call after
   1 us of host time, with a launch queue of 20:
     call i < 20:  [2i, 2i+1]
     kernel i:     [3 + 100i, 103 + 100i]  (kernel 0 two us after its call)
     call i >= 20: starts 1 us after call i-1 ends, blocks until kernel
                   i-20 ends, returns 1 us later.
   At every blocked return 19 kernels are still in flight: depth 20. */
#define QUEUE_KERNELS 60
#define QUEUE_DEPTH 20

/* `kernels` kernels, of kernel_us, every odd one of short_us instead when
 * that is not 0, recorded from launch `first_call` on (the kernels before
 * it recorded, their launches not: a window that opens while the GPU is
 * busy), every GPU time moved by gpu_shift_us. */
static rv_graph *queue_window(int kernels, int64_t kernel_us, int64_t short_us, int first_call, double gpu_shift_us)
{
    tt_trace *trace = tt_new(BASE_US);
    double *call_end = g_new(double, kernels), *kernel_end = g_new(double, kernels);
    for (int i = 0; i < kernels; i++) {
        double start = i == 0 ? 0 : call_end[i - 1] + 1;
        call_end[i] = start + 1;
        if (i >= QUEUE_DEPTH) call_end[i] = MAX(call_end[i], kernel_end[i - QUEUE_DEPTH] + 1);
        double kernel_start = MAX(i == 0 ? 0 : kernel_end[i - 1], call_end[i] + 2);
        double duration = i % 2 && short_us ? short_us : kernel_us;
        kernel_end[i] = kernel_start + duration;
        char name[32];
        g_snprintf(name, sizeof name, "launch_%d", i);
        if (i >= first_call) tt_runtime(trace, MAIN, name, start, call_end[i] - start, i + 1);
        g_snprintf(name, sizeof name, "k%d", i);
        tt_kernel(trace, 7, name, kernel_start + gpu_shift_us, duration, i >= first_call ? i + 1 : 100000 + i);
    }
    g_free(call_end);
    g_free(kernel_end);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    return graph;
}

static rv_graph *queue_graph(int64_t kernel_us)
{
    return queue_window(QUEUE_KERNELS, kernel_us, 0, 0, 0);
}

START_TEST(test_queue_depth_measured_and_trimmed)
{
    rv_graph *graph = queue_graph(100);
    ck_assert_int_eq(graph->timing.queue_depth.value, QUEUE_DEPTH);
    ck_assert_int_eq(graph->timing.queue_depth.source, RV_SOURCE_MEASURED);
    ck_assert_uint_eq(graph->timing.queue_depth.samples, QUEUE_KERNELS - QUEUE_DEPTH);
    ck_assert_uint_eq(graph->build_stats.queue_blocked_launches, QUEUE_KERNELS - QUEUE_DEPTH);
    /* A blocked call keeps only its own 1 us after the slot freed. */
    ck_assert_int_eq(rv_graph_task(graph, call_named(graph, "launch_30"))->duration_ns, US(1));
    tt_assert_replay_exact(graph);
    rv_graph_free(graph);
}
END_TEST

/* 120 kernels of 400 and 20 us in turn, recorded from launch 20 on, the
 * GPU clock 5 ms behind: no launch finds its stream idle (each waits about
 * 2 ms for the queue), so no launch pins the clocks, and nothing else
 * would move them from 0.  The 50 calls that waited for a 400 us kernel's
 * slot (the others wait 19 us: short) each returned 1 us after their
 * release: they put the offset at -5 ms (within the prior 5 us of a prompt
 * return), and the depth is measured as 20.  Kernels in a period of two
 * bunch as tightly at every even depth; the calls with no task that far
 * back bound it from above, and the driver's 1024 is nearest 20.  (Before
 * releases were read: offset 0, and the queue's depth the prior.) */
START_TEST(test_queue_releases_set_the_clock)
{
    rv_graph *graph = queue_window(120, 400, 20, QUEUE_DEPTH, -5000);
    g_printerr("window: clock offset %+.3f ms (%s), queue depth %" G_GINT64_FORMAT " (%s)\n",
               graph->timing.clock_offset.value / 1e6, rv_clock_status_name(graph->timing.clock_status),
               graph->timing.queue_depth.value, rv_estimate_source_name(graph->timing.queue_depth.source));
    ck_assert_int_le(llabs(graph->timing.clock_offset.value - US(-5000)), US(5));
    ck_assert_int_eq(graph->timing.queue_depth.value, QUEUE_DEPTH);
    ck_assert_int_eq(graph->timing.queue_depth.source, RV_SOURCE_MEASURED);
    rv_graph_free(graph);
}
END_TEST

/* Kernels of 50 us instead: kernel i ends at 3 + 50(i+1).  Call 20 waits
 * for kernel 0 only: it starts at 53, not at its recorded 104; call 59
 * starts when kernel 39 ends, 2003; the last kernel ends at 3003.  Without
 * the queue the CPU would launch everything by 119 us. */
START_TEST(test_queue_wait_follows_the_gpu)
{
    rv_graph *graph = queue_graph(100);
    for (int i = 0; i < QUEUE_KERNELS; i++) {
        char name[32];
        g_snprintf(name, sizeof name, "k%d", i);
        rv_graph_task(graph, tt_find(graph, name, RV_TASK_KERNEL))->duration_ns = US(50);
    }
    ck_assert_int_eq(replayed(graph, call_named(graph, "launch_20"), FALSE), US(53));
    ck_assert_int_eq(replayed(graph, call_named(graph, "launch_59"), FALSE), US(2003));
    ck_assert_int_eq(replayed(graph, tt_find(graph, "k59", RV_TASK_KERNEL), TRUE), US(3003));
    for (guint r = 0; r < graph->resources->len; r++)
        g_array_index(graph->resources, rv_resource, r).queue_depth = 0;
    ck_assert_int_lt(replayed(graph, call_named(graph, "launch_59"), FALSE), US(200));
    rv_graph_free(graph);
}
END_TEST

/* A queue order that contradicts the graph (here an edge from the second
 * launch to the first kernel, with a queue of one) would deadlock: the
 * replay runs without the launch-queue rule and says so.  k0 then waits
 * for launch_1's end (the plugin edge, no launch latency): 11 us. */
START_TEST(test_queue_deadlock_falls_back)
{
    tt_trace *trace = tt_new(BASE_US);
    tt_runtime(trace, MAIN, "launch_0", 0, 5, 1);
    tt_kernel(trace, 7, "k0", 7, 10, 1);
    tt_runtime(trace, MAIN, "launch_1", 6, 5, 2);
    tt_kernel(trace, 7, "k1", 17, 10, 2);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    for (guint r = 0; r < graph->resources->len; r++)
        g_array_index(graph->resources, rv_resource, r).queue_depth = 1;
    rv_graph_add_edge(graph, call_named(graph, "launch_1"), tt_find(graph, "k0", RV_TASK_KERNEL), RV_EDGE_PLUGIN,
                      FALSE);
    rv_sim_result result;
    GError *error = NULL;
    ck_assert_msg(rv_simulate(graph, NULL, &result, &error), "%s", error ? error->message : "");
    ck_assert(result.launch_queue_ignored);
    ck_assert_int_eq(result.start_ns[tt_find(graph, "k0", RV_TASK_KERNEL)], US(11));
    rv_sim_result_clear(&result);
    rv_graph_free(graph);
}
END_TEST

/* A trace whose launches never block gives no depth: CUDA's 1024 is assumed. */
START_TEST(test_queue_depth_assumed)
{
    tt_trace *trace = tt_new(BASE_US);
    tt_runtime(trace, MAIN, "launch", 0, 5, 1);
    tt_kernel(trace, 7, "k", 7, 10, 1);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    ck_assert_int_eq(graph->timing.queue_depth.value, 1024);
    ck_assert_int_eq(graph->timing.queue_depth.source, RV_SOURCE_PRIOR);
    rv_graph_free(graph);
}
END_TEST

/* ---- the clock offset -------------------------------------------------

   main: L [0,5]  S cudaStreamSynchronize [6,60]  C [70,75]
   s7:        K [10,55] on the CPU clock
   Written with the GPU clock `shift` us off.  The launch bounds the offset
   from above (K cannot start before L began: offset <= shift + 10), the
   synchronize from below (S returned after K ended: offset >= shift - 5). */
static rv_graph *shifted_graph(double shift)
{
    tt_trace *trace = tt_new(BASE_US);
    tt_runtime(trace, MAIN, "cudaLaunchKernel", 0, 5, 1);
    tt_kernel(trace, 7, "k", 10 + shift, 45, 1);
    tt_runtime(trace, MAIN, "cudaStreamSynchronize", 6, 54, 2);
    tt_runtime(trace, MAIN, "cudaFuncGetAttributes", 70, 5, 3);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    return graph;
}

START_TEST(test_clock_consistent)
{
    rv_graph *graph = shifted_graph(0);
    ck_assert_int_eq(graph->timing.clock_status, RV_CLOCK_CONSISTENT);
    ck_assert_int_eq(graph->timing.clock_offset.value, 0);
    ck_assert_int_eq(graph->timing.offset_high_ns, US(10));
    ck_assert_int_eq(graph->timing.offset_low_ns, -US(5));
    tt_assert_replay_exact(graph);
    rv_graph_free(graph);
}
END_TEST

/* GPU clock 1 ms ahead: bounds [995, 1010] us, which exclude 0.  The lower
 * end comes from a synchronize that blocked (54 us), which returns a few
 * microseconds after its work: the offset is that end plus the 5 us prior,
 * 1000 us, the true shift (the middle would say 1002.5).  The corrected
 * trace is explained, and C replays at its recorded 70 us. */
START_TEST(test_clock_ahead_corrected)
{
    rv_graph *graph = shifted_graph(1000);
    ck_assert_int_eq(graph->timing.clock_status, RV_CLOCK_CORRECTED);
    ck_assert_int_eq(graph->timing.clock_offset.value, 1000000);
    tt_assert_replay_exact(graph);
    GPtrArray *notes = rv_timing_notes(graph);
    ck_assert_uint_eq(notes->len, 1);
    ck_assert_msg(strstr(g_ptr_array_index(notes, 0), "+1.000 ms"), "%s", (char *)g_ptr_array_index(notes, 0));
    g_ptr_array_unref(notes);
    rv_graph_free(graph);
}
END_TEST

/* GPU clock 1 ms behind (kernels start before their launches): bounds
 * [-1005, -990] us, the lower from the blocked synchronize: corrected by
 * -1005 + 5 = -1000 us, the true shift.  C replays within 10 us of its
 * recorded 70 us. */
START_TEST(test_clock_behind_corrected)
{
    rv_graph *graph = shifted_graph(-1000);
    ck_assert_int_eq(graph->timing.clock_status, RV_CLOCK_CORRECTED);
    ck_assert_int_eq(graph->timing.clock_offset.value, -1000000);
    int64_t c = replayed(graph, call_named(graph, "cudaFuncGetAttributes"), FALSE);
    ck_assert_msg(c >= US(70) && c <= US(80), "C at %.3f us", c / 1e3);
    rv_graph_free(graph);
}
END_TEST

/* ---- a stream wait from launch order (c10d) ---------------------------

   main: L1 [0,5] -> K1 s7 [10,12]
         L2 [6,11] -> N ncclKernel s20 [16,100]   (the collective)
         L3 [12,17] -> K3 s7 [22,30]              (more compute, independent)
         W cudaStreamWaitEvent [18,19]            (s7 waits for the collective)
         L4 [20,25] -> K4 s7 [100,110]
   The thread's last launch before W is on s7, the waiting stream itself;
   the last other stream it launched on is s20: K4 waits for N. */
static rv_graph *c10d_graph(void)
{
    static const char nccl[] = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)";
    tt_trace *trace = tt_new(BASE_US);
    tt_runtime(trace, MAIN, "launch_k1", 0, 5, 1);
    tt_kernel(trace, 7, "k1", 10, 2, 1);
    tt_runtime(trace, MAIN, "launch_nccl", 6, 5, 2);
    tt_kernel(trace, 20, nccl, 16, 84, 2);
    tt_runtime(trace, MAIN, "launch_k3", 12, 5, 3);
    tt_kernel(trace, 7, "k3", 22, 8, 3);
    tt_runtime(trace, MAIN, "cudaStreamWaitEvent", 18, 1, 4);
    tt_runtime(trace, MAIN, "launch_k4", 20, 5, 5);
    tt_kernel(trace, 7, "k4", 100, 10, 5);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    return graph;
}

START_TEST(test_stream_wait_on_last_other_stream)
{
    rv_graph *graph = c10d_graph();
    int32_t collective = tt_find(graph, "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, "
                                        "ncclWork*)", RV_TASK_COMM);
    int32_t k4 = tt_find(graph, "k4", RV_TASK_KERNEL);
    ck_assert(tt_has_edge(graph, collective, k4, RV_EDGE_CROSS_STREAM));
    ck_assert_uint_eq(graph->build_stats.waits_by_call_order, 1);
    ck_assert_uint_eq(graph->build_stats.waits_unresolved, 0);
    tt_assert_replay_exact(graph);
    rv_graph_task(graph, collective)->duration_ns = US(184); /* N [16,200]: K4 at 200 */
    ck_assert_int_eq(replayed(graph, k4, FALSE), US(200));
    rv_graph_free(graph);
}
END_TEST

/* ---- host overhead ------------------------------------------------------

   main:     A [0,10]  ..... waits .....  B [300,305]
   autograd:      X [20,290]
   B waited for X (an inter-thread edge); its own host time is the 10 us
   after X ended.  X is its thread's first task: 20 us from the trace's
   start.  Halving B's host overhead moves it 5 us earlier. */
START_TEST(test_host_overhead_excludes_waits)
{
    tt_trace *trace = tt_new(BASE_US);
    tt_runtime(trace, MAIN, "cudaMalloc", 0, 10, 1);
    tt_runtime(trace, AUTOGRAD, "cudaHostAlloc", 20, 270, 2);
    tt_runtime(trace, MAIN, "cudaGetDevice", 300, 5, 3);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    int32_t a = call_named(graph, "cudaMalloc"), x = call_named(graph, "cudaHostAlloc");
    int32_t b = call_named(graph, "cudaGetDevice");
    ck_assert_int_eq(rv_graph_task(graph, a)->host_overhead_ns, 0);
    ck_assert_int_eq(rv_graph_task(graph, x)->host_overhead_ns, US(20));
    ck_assert_int_eq(rv_graph_task(graph, b)->host_overhead_ns, US(10));
    tt_assert_replay_exact(graph);
    rv_graph_task(graph, b)->host_overhead_ns = US(5);
    ck_assert_int_eq(replayed(graph, b, FALSE), US(295));
    rv_graph_free(graph);
}
END_TEST

/* ---- unexplained time -----------------------------------------------

   Six launches [6i, 6i+5] and kernels of 10 us queued back to back with a
   1 us gap: kernel i at 10 + 11i, except that kernel 4 and the ones after
   it were recorded 40 us later than that, for no reason the trace shows.
   The typical gap stays 1 us (median), so kernel 4 carries 40 us of
   unexplained wait, and the replay starts it by the rules: every kernel
   from 4 on runs 40 us earlier than recorded. */
START_TEST(test_unexplained_reported_not_replayed)
{
    tt_trace *trace = tt_new(BASE_US);
    for (int i = 0; i < 6; i++) {
        char name[16];
        g_snprintf(name, sizeof name, "launch_%d", i);
        tt_runtime(trace, MAIN, name, 6 * i, 5, i + 1);
        g_snprintf(name, sizeof name, "k%d", i);
        tt_kernel(trace, 7, name, 10 + 11 * i + (i >= 4 ? 40 : 0), 10, i + 1);
    }
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    int32_t k4 = tt_find(graph, "k4", RV_TASK_KERNEL), k5 = tt_find(graph, "k5", RV_TASK_KERNEL);
    rv_explanation *x = rv_explain(graph, 3);
    ck_assert_int_eq(x->total_ns, US(40));
    ck_assert_uint_eq(x->late_tasks, 1);
    ck_assert_uint_eq(x->top->len, 1);
    ck_assert_int_eq(g_array_index(x->top, rv_unexplained_task, 0).task, k4);
    ck_assert_int_eq(x->by_step[graph->steps->len], US(40)); /* no steps: all outside */
    rv_explanation_free(x);
    ck_assert_int_eq(replayed(graph, k4, FALSE), US(10 + 44));
    ck_assert_int_eq(replayed(graph, k5, TRUE), US(10 + 55 + 10));
    rv_graph_free(graph);
}
END_TEST

/* ---- what was assumed --------------------------------------------------- */

/* GPU events with no correlation have no launch call: they run as soon as
 * their stream is free, and the notes say so. */
START_TEST(test_no_launch_correlation_is_noted)
{
    tt_trace *trace = tt_new(BASE_US);
    tt_runtime(trace, MAIN, "cudaLaunchKernel", 0, 5, -1);
    tt_kernel(trace, 7, "k", 50, 10, -1);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    ck_assert_uint_eq(graph->build_stats.unmatched_gpu_tasks, 1);
    GPtrArray *notes = rv_timing_notes(graph);
    ck_assert_uint_eq(notes->len, 1);
    ck_assert_msg(strstr(g_ptr_array_index(notes, 0), "1 of 1 GPU tasks have no launch call"), "%s",
                  (char *)g_ptr_array_index(notes, 0));
    g_ptr_array_unref(notes);
    ck_assert_int_eq(replayed(graph, tt_find(graph, "k", RV_TASK_KERNEL), FALSE), 0);
    rv_graph_free(graph);
}
END_TEST

/* ---- the profiler's own cost ------------------------------------------

   One operator calls 40 children of 2 us one after another; 1.5 us
   between them, except 30 us twice (Python, a lock: not the profiler's)
   and once 10 us around a runtime call (not a gap between siblings).  The
   10th percentile of the 38 gaps is 1.5 us.  The call in the middle has
   the outer operator and the first 20 children before it, the last call
   the other 20; the bound on each call's share is its operators x 1.5 us.
   With 10 children there are too few gaps for a bound. */
static rv_graph *siblings_graph(int children)
{
    tt_trace *trace = tt_new(BASE_US);
    tt_runtime(trace, MAIN, "cudaGetDeviceCount", 0, 1, -1); /* the thread's first call: overheads count after it */
    double t = 6;
    for (int k = 0; k < children; k++) {
        tt_cpu_op(trace, MAIN, "aten::child", t, 2);
        t += 2;
        double gap = k % 10 == 9 ? 30 : 1.5;
        if (k == 19) {
            tt_runtime(trace, MAIN, "cudaGetDevice", t + 4, 2, -1);
            gap = 10;
        }
        t += gap;
    }
    tt_cpu_op(trace, MAIN, "aten::outer", 5, t - 4);
    tt_runtime(trace, MAIN, "cudaDeviceSynchronize", t + 5, 2, -1);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    return graph;
}

START_TEST(test_profiler_cost_bound)
{
    rv_graph *graph = siblings_graph(40);
    const rv_estimate *cost = &graph->timing.profiler_op_cost;
    ck_assert_int_eq(cost->source, RV_SOURCE_BOUND);
    ck_assert_uint_eq(cost->samples, 38);
    ck_assert_int_eq(cost->value, 1500);
    ck_assert_uint_eq(graph->timing.profiled_operators, 41);
    int32_t middle = call_named(graph, "cudaGetDevice"), last = call_named(graph, "cudaDeviceSynchronize");
    ck_assert_uint_eq(rv_task_host_operators(graph, middle), 21);
    ck_assert_uint_eq(rv_task_host_operators(graph, last), 20);
    ck_assert_int_eq(rv_task_profiler_overhead_ns(graph, middle), 21 * 1500);
    /* never more than the host overhead itself */
    ck_assert_int_le(rv_task_profiler_overhead_ns(graph, last), rv_graph_task(graph, last)->host_overhead_ns);
    ck_assert_int_eq(rv_graph_profiler_overhead_ns(graph),
                     rv_task_profiler_overhead_ns(graph, middle) + rv_task_profiler_overhead_ns(graph, last));
    rv_graph_free(graph);
    graph = siblings_graph(10);
    ck_assert_int_eq(graph->timing.profiler_op_cost.source, RV_SOURCE_NONE);
    ck_assert_uint_eq(graph->timing.profiler_op_cost.samples, 9);
    ck_assert_int_eq(rv_graph_profiler_overhead_ns(graph), 0);
    rv_graph_free(graph);
}
END_TEST

static Suite *timing_suite(void)
{
    Suite *suite = suite_create("timing");
    TCase *queue = tcase_create("launch queue");
    tcase_add_test(queue, test_queue_depth_measured_and_trimmed);
    tcase_add_test(queue, test_queue_wait_follows_the_gpu);
    tcase_add_test(queue, test_queue_releases_set_the_clock);
    tcase_add_test(queue, test_queue_depth_assumed);
    tcase_add_test(queue, test_queue_deadlock_falls_back);
    suite_add_tcase(suite, queue);
    TCase *clock = tcase_create("clock");
    tcase_add_test(clock, test_clock_consistent);
    tcase_add_test(clock, test_clock_ahead_corrected);
    tcase_add_test(clock, test_clock_behind_corrected);
    suite_add_tcase(suite, clock);
    TCase *rules = tcase_create("rules");
    tcase_add_test(rules, test_stream_wait_on_last_other_stream);
    tcase_add_test(rules, test_host_overhead_excludes_waits);
    tcase_add_test(rules, test_unexplained_reported_not_replayed);
    tcase_add_test(rules, test_no_launch_correlation_is_noted);
    tcase_add_test(rules, test_profiler_cost_bound);
    suite_add_tcase(suite, rules);
    return suite;
}

int main(void)
{
    SRunner *runner = srunner_create(timing_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? 0 : 1;
}
