/*
 * test_edges.c - Check tests for the dependency graph's edge rules, the
 * blocking-call split, layer/phase tags and steps (DESIGN "The dependency
 * graph", "The simulator"), on tiny hand-written traces.
 *
 * Each rule gets two kinds of assertion:
 *   - structure: the expected edge exists (from which task to which, and
 *     of which kind);
 *   - behaviour: after a GPU or CPU task's duration is changed in the built
 *     graph, the replay moves the dependent task to the time the rule
 *     implies.  Without the rule the dependent task would stay where it was
 *     recorded (its lag/gap from the recording alone), so each of these
 *     assertions fails when the rule's code is taken out.
 *
 * Times in comments are microseconds from the trace's first task, which is
 * where the replay puts time zero.  The timing model is graph.h's: a GPU
 * task starts at the latest of its stream's previous task's end plus the
 * stream's idle gap, its launch call's end plus the launch latency, and its
 * other dependencies; a CPU call at its thread's previous task's end (or a
 * later dependency) plus its host overhead.  The latency and gap are
 * typical values of each trace, so every trace here gives all its launches
 * one latency: then the rules explain the recording, and every test checks
 * that the untransformed graph replays it exactly (tt_assert_replay_exact).
 */
#include "tiny_trace.h"

#include <check.h>
#include <string.h>

#define BASE_US 1700000000000000.0 /* an epoch-sized timestamp, as Kineto writes */
#define MAIN 1                     /* the main thread's tid */
#define AUTOGRAD 2                 /* the autograd engine's thread */

/*
 * REVERIE_TEST_TIMING_ONLY=1 skips the structural assertions (edges, counts,
 * build statistics) and keeps only the replay-time ones.  It exists to check
 * that each timing assertion on its own catches a missing rule: take the
 * rule's code out, rebuild, and run with it set.
 */
static gboolean timing_only(void)
{
    const char *value = g_getenv("REVERIE_TEST_TIMING_ONLY");
    return value != NULL && value[0] == '1';
}

/* A structural expectation (skipped in timing-only runs). */
#define expect_eq(actual, expected)                                                                \
    do {                                                                                           \
        if (!timing_only()) ck_assert_int_eq(actual, expected);                                    \
    } while (0)

static void set_duration_us(rv_graph *graph, int32_t id, int64_t us)
{
    rv_graph_task(graph, id)->duration_ns = US(us);
}

/* Replay and return one task's simulated start / end (ns from time zero). */
static int64_t sim_start(const rv_graph *graph, int32_t id)
{
    rv_sim_result result;
    tt_simulate(graph, &result);
    int64_t start = result.start_ns[id];
    rv_sim_result_clear(&result);
    return start;
}

static int64_t sim_end(const rv_graph *graph, int32_t id)
{
    rv_sim_result result;
    tt_simulate(graph, &result);
    int64_t end = result.end_ns[id];
    rv_sim_result_clear(&result);
    return end;
}

/* The SYNC tail of a split blocking call.  In a timing-only run without the
 * split, the unsplit call stands in, so that the timing assertions (not a
 * missing task) are what fails. */
static int32_t find_tail(rv_graph *graph, const char *name)
{
    int32_t tail = tt_find_opt(graph, name, RV_TASK_SYNC);
    if (tail < 0 && timing_only()) return tt_find(graph, name, RV_TASK_CPU);
    return tail >= 0 ? tail : tt_find(graph, name, RV_TASK_SYNC);
}

#define assert_edge(graph, from, to, kind)                                                         \
    do {                                                                                           \
        if (timing_only()) break;                                                                  \
        char *edges_ = tt_describe_edges(graph);                                                   \
        ck_assert_msg(tt_has_edge(graph, from, to, kind), "no %s edge %d -> %d; edges:\n%s",       \
                      rv_edge_kind_name(kind), (int)(from), (int)(to), edges_);                     \
        g_free(edges_);                                                                            \
    } while (0)

#define assert_no_edge(graph, from, to, kind)                                                      \
    do {                                                                                           \
        if (timing_only()) break;                                                                  \
        char *edges_ = tt_describe_edges(graph);                                                   \
        ck_assert_msg(!tt_has_edge(graph, from, to, kind), "unexpected %s edge %d -> %d; edges:\n%s",\
                      rv_edge_kind_name(kind), (int)(from), (int)(to), edges_);                     \
        g_free(edges_);                                                                            \
    } while (0)

#define assert_start_us(graph, id, us)                                                             \
    ck_assert_msg(sim_start(graph, id) == US(us), "task %d starts at %.3f us, expected %d us",       \
                  (int)(id), sim_start(graph, id) / 1e3, (int)(us))

#define assert_end_us(graph, id, us)                                                               \
    ck_assert_msg(sim_end(graph, id) == US(us), "task %d ends at %.3f us, expected %d us",           \
                  (int)(id), sim_end(graph, id) / 1e3, (int)(us))

/* ---- a launch, a stream synchronize and a later call ------------------

   main:   L cudaLaunchKernel [0,5]   S cudaStreamSynchronize [6,102]   C [110,115]
   s7:          K [10,100]
   S is split: head [6,6] (zero length), SYNC tail [100,102] waiting on K. */
static rv_graph *stream_sync_graph(gboolean with_cuda_sync)
{
    tt_trace *trace = tt_new(BASE_US);
    tt_runtime(trace, MAIN, "cudaLaunchKernel", 0, 5, 1);
    tt_flow(trace, MAIN, 0, 7, 10, 1);
    tt_kernel(trace, 7, "k_long", 10, 90, 1);
    tt_runtime(trace, MAIN, "cudaStreamSynchronize", 6, 96, 2);
    if (with_cuda_sync) tt_cuda_sync(trace, "Stream Sync", 7, 100, 2, 2, -1, -1);
    tt_runtime(trace, MAIN, "cudaFuncGetAttributes", 110, 5, 3);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    return graph;
}

/* Rule 1: consecutive CPU tasks on a thread.  The call after a blocking
 * synchronize must wait for the synchronize's tail, which ends late when the
 * kernel it waits for runs long.  (The tail is only reached through a SYNC
 * edge, so without the thread-order edge C would go at its recorded 110.) */
START_TEST(test_thread_order)
{
    rv_graph *graph = stream_sync_graph(FALSE);
    int32_t launch = tt_find(graph, "cudaLaunchKernel", RV_TASK_CPU);
    int32_t head = tt_find(graph, "cudaStreamSynchronize", RV_TASK_CPU);
    int32_t tail = find_tail(graph, "cudaStreamSynchronize");
    int32_t next = tt_find(graph, "cudaFuncGetAttributes", RV_TASK_CPU);
    int32_t kernel = tt_find(graph, "k_long", RV_TASK_KERNEL);
    assert_edge(graph, launch, head, RV_EDGE_THREAD);
    assert_edge(graph, head, tail, RV_EDGE_THREAD);
    assert_edge(graph, tail, next, RV_EDGE_THREAD);
    expect_eq(tt_kind_count(graph, RV_EDGE_THREAD), 3);
    tt_assert_replay_exact(graph);
    assert_start_us(graph, next, 110);

    /* K [10,210]; tail [210,212]; C after the tail plus its recorded 8 us gap: 220. */
    set_duration_us(graph, kernel, 200);
    assert_start_us(graph, tail, 210);
    assert_start_us(graph, next, 220);
    rv_graph_free(graph);
}
END_TEST

/* Rule 2: consecutive GPU tasks on a stream.
 *
 *   thread 1: X cudaMalloc [0,10]  L1 [12,17] -> K1 on s7 [20,40]
 *   thread 2: L2 [25,30] -> K2 on s7 [40,50]
 *
 * Stretch X to 100 us: L1 runs at 102, K1 at 110 (its recorded 8 us lag).
 * K2 was launched at 25 and could start at 30, but it is behind K1 on the
 * stream: it starts when K1 ends, at 130.  Without the stream edge it
 * would start at 30, before K1. */
START_TEST(test_stream_order)
{
    tt_trace *trace = tt_new(BASE_US);
    tt_runtime(trace, MAIN, "cudaMalloc", 0, 10, 1);
    tt_runtime(trace, MAIN, "launch_k1", 12, 5, 2);
    tt_kernel(trace, 7, "k1", 20, 20, 2);
    tt_runtime(trace, AUTOGRAD, "launch_k2", 25, 5, 3);
    tt_kernel(trace, 7, "k2", 40, 10, 3);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    int32_t x = tt_find(graph, "cudaMalloc", RV_TASK_CPU);
    int32_t k1 = tt_find(graph, "k1", RV_TASK_KERNEL);
    int32_t k2 = tt_find(graph, "k2", RV_TASK_KERNEL);
    assert_edge(graph, k1, k2, RV_EDGE_STREAM);
    expect_eq(tt_kind_count(graph, RV_EDGE_STREAM), 1);
    expect_eq(tt_kind_count(graph, RV_EDGE_INTER_THREAD), 0);
    tt_assert_replay_exact(graph);

    set_duration_us(graph, x, 100);
    assert_start_us(graph, k1, 110);
    assert_start_us(graph, k2, 130);
    rv_graph_free(graph);
}
END_TEST

/* Rule 3, modern schema: cuda_runtime + kernel linked by args.correlation.
 *
 *   main: X cudaMalloc [0,10]  L cudaLaunchKernel [12,17]
 *   s7:                               K [20,30]
 *
 * Stretch X to 50 us: L starts at 52 (its 2 us host overhead), ends at 57,
 * and K starts the trace's launch latency (3 us) later, at 60.  Without the
 * launch edge K has no predecessor and starts at 0. */
START_TEST(test_launch_modern)
{
    tt_trace *trace = tt_new(BASE_US);
    tt_runtime(trace, MAIN, "cudaMalloc", 0, 10, 1);
    tt_runtime(trace, MAIN, "cudaLaunchKernel", 12, 5, 7);
    tt_flow(trace, MAIN, 12, 7, 20, 7);
    tt_kernel(trace, 7, "relu_kernel", 20, 10, 7);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    int32_t x = tt_find(graph, "cudaMalloc", RV_TASK_CPU);
    int32_t launch = tt_find(graph, "cudaLaunchKernel", RV_TASK_CPU);
    int32_t kernel = tt_find(graph, "relu_kernel", RV_TASK_KERNEL);
    assert_edge(graph, launch, kernel, RV_EDGE_LAUNCH);
    /* From the call's end: the kernel is ready a launch latency after it. */
    if (!timing_only()) ck_assert(!tt_edge_from_start(graph, launch, kernel, RV_EDGE_LAUNCH));
    expect_eq(tt_kind_count(graph, RV_EDGE_LAUNCH), 1);
    expect_eq(graph->build_stats.unmatched_gpu_tasks, 0);
    ck_assert(!graph->legacy_schema);
    tt_assert_replay_exact(graph);

    set_duration_us(graph, x, 50);
    assert_start_us(graph, launch, 52);
    assert_start_us(graph, kernel, 60);
    rv_graph_free(graph);
}
END_TEST

/* Rule 3, 2021 legacy schema: "Runtime" / "Kernel" / "Operator", the key
 * "external id", string thread ids and "stream 7" as the GPU tid, flows
 * named "launch" in category "async".  Same timeline and expectations as
 * the modern test. */
START_TEST(test_launch_legacy)
{
    const double base = 1623142623460111.0;
    tt_trace *trace = tt_new(base);
    tt_event(trace, "{\"ph\": \"X\", \"cat\": \"Runtime\", \"name\": \"cudaMalloc\", \"pid\": 25738, "
                    "\"tid\": \"25738\", \"ts\": %.0f, \"dur\": 10, \"args\": {\"cbid\": 20, "
                    "\"correlation\": 1, \"external id\": 1}}", base);
    tt_event(trace, "{\"ph\": \"X\", \"cat\": \"Operator\", \"name\": \"aten::relu\", \"pid\": 25738, "
                    "\"tid\": \"25738\", \"ts\": %.0f, \"dur\": 8, \"args\": {\"external id\": 2, "
                    "\"Input Dims\": [[64, 128]]}}", base + 11);
    tt_event(trace, "{\"ph\": \"X\", \"cat\": \"Runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 25738, "
                    "\"tid\": \"25738\", \"ts\": %.0f, \"dur\": 5, \"args\": {\"cbid\": 211, "
                    "\"correlation\": 7, \"external id\": 2, \"external ts\": %.0f}}", base + 12, base + 11);
    tt_event(trace, "{\"ph\": \"s\", \"id\": 7, \"pid\": 25738, \"tid\": 25738, \"ts\": %.0f, "
                    "\"cat\": \"async\", \"name\": \"launch\"}", base + 12);
    tt_event(trace, "{\"ph\": \"X\", \"cat\": \"Kernel\", \"name\": \"relu_kernel\", \"pid\": 0, "
                    "\"tid\": \"stream 7\", \"ts\": %.0f, \"dur\": 10, \"args\": {\"queued\": 0, "
                    "\"device\": 0, \"context\": 1, \"stream\": 7, \"correlation\": 7, "
                    "\"external id\": 2}}", base + 20);
    tt_event(trace, "{\"ph\": \"f\", \"id\": 7, \"pid\": 0, \"tid\": \"stream 7\", \"ts\": %.0f, "
                    "\"cat\": \"async\", \"name\": \"launch\", \"bp\": \"e\"}", base + 20);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    ck_assert(graph->legacy_schema);
    int32_t x = tt_find(graph, "cudaMalloc", RV_TASK_CPU);
    int32_t launch = tt_find(graph, "cudaLaunchKernel", RV_TASK_CPU);
    int32_t kernel = tt_find(graph, "relu_kernel", RV_TASK_KERNEL);
    assert_edge(graph, launch, kernel, RV_EDGE_LAUNCH);
    if (!timing_only()) ck_assert(!tt_edge_from_start(graph, launch, kernel, RV_EDGE_LAUNCH));
    assert_edge(graph, x, launch, RV_EDGE_THREAD);
    tt_assert_replay_exact(graph);
    set_duration_us(graph, x, 50);
    assert_start_us(graph, kernel, 60);
    /* The kernel is tagged through its launch with the enclosing operator. */
    ck_assert_str_eq(rv_strings_get(graph->strings, rv_graph_task(graph, kernel)->layer), "aten::relu");
    ck_assert_str_eq(rv_strings_get(graph->strings, rv_graph_task(graph, kernel)->op), "aten::relu");
    ck_assert_int_ge(rv_graph_task(graph, kernel)->input_dims, 0);
    ck_assert_str_eq(rv_strings_get(graph->strings, rv_graph_task(graph, kernel)->input_dims), "[[64,128]]");
    rv_graph_free(graph);
}
END_TEST

/* A runtime call nested in another on the same thread (a driver call under
 * a runtime call) is not a task of its own; what it launched hangs off the
 * outer call. */
START_TEST(test_launch_nested_driver_call)
{
    tt_trace *trace = tt_new(BASE_US);
    tt_runtime(trace, MAIN, "cudaMalloc", 0, 10, 1);
    tt_runtime(trace, MAIN, "cudaLaunchKernel", 12, 8, 7);
    tt_event(trace, "{\"ph\": \"X\", \"cat\": \"cuda_driver\", \"name\": \"cuLaunchKernel\", \"pid\": %d, "
                    "\"tid\": %d, \"ts\": %.3f, \"dur\": 4, \"args\": {\"correlation\": 8}}",
             TT_PID, MAIN, BASE_US + 13);
    tt_kernel(trace, 7, "driver_kernel", 20, 10, 8);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    expect_eq(graph->build_stats.nested_runtime_calls, 1);
    ck_assert_int_eq(tt_find_opt(graph, "cuLaunchKernel", RV_TASK_CPU), -1);
    int32_t x = tt_find(graph, "cudaMalloc", RV_TASK_CPU);
    int32_t launch = tt_find(graph, "cudaLaunchKernel", RV_TASK_CPU);
    int32_t kernel = tt_find(graph, "driver_kernel", RV_TASK_KERNEL);
    assert_edge(graph, launch, kernel, RV_EDGE_LAUNCH);
    tt_assert_replay_exact(graph);
    set_duration_us(graph, x, 50); /* L 52-60, K 0 us later (latency: 20 - 20) */
    assert_start_us(graph, kernel, 60);
    rv_graph_free(graph);
}
END_TEST

/* ---- rule 4: synchronization and the blocking-call split ------------- */

/* A pure synchronize keeps no head; a blocking copy keeps the cost of
 * issuing it (head_us). */
static void assert_split_with_head(rv_graph *graph, int32_t head, int32_t tail, int64_t head_us,
                                   int64_t tail_start_us, int64_t tail_duration_us)
{
    if (timing_only()) return;
    const rv_task *h = rv_graph_task(graph, head), *t = rv_graph_task(graph, tail);
    ck_assert_int_eq(h->duration_ns, US(head_us));
    ck_assert(h->flags & RV_TASK_FLAG_BLOCKING);
    ck_assert_int_eq(t->kind, RV_TASK_SYNC);
    ck_assert_int_eq(t->resource, h->resource);
    ck_assert_int_eq(t->recorded_start_ns - h->recorded_start_ns,
                     US(tail_start_us) - (h->recorded_start_ns - (int64_t)(BASE_US * 1000)));
    ck_assert_int_eq(t->duration_ns, US(tail_duration_us));
    assert_edge(graph, head, tail, RV_EDGE_THREAD);
}

static void assert_split(rv_graph *graph, int32_t head, int32_t tail, int64_t tail_start_us,
                         int64_t tail_duration_us)
{
    assert_split_with_head(graph, head, tail, 0, tail_start_us, tail_duration_us);
}

/* cudaStreamSynchronize without cuda_sync records: it waits for the stream
 * the thread launched on last.  The head keeps no duration, the tail only the
 * call's own 2 us after the wait; a slower kernel makes the tail (and the
 * next call) later, a faster one earlier. */
START_TEST(test_sync_stream_synchronize)
{
    rv_graph *graph = stream_sync_graph(FALSE);
    int32_t kernel = tt_find(graph, "k_long", RV_TASK_KERNEL);
    int32_t head = tt_find(graph, "cudaStreamSynchronize", RV_TASK_CPU);
    int32_t tail = find_tail(graph, "cudaStreamSynchronize");
    int32_t next = tt_find(graph, "cudaFuncGetAttributes", RV_TASK_CPU);
    assert_split(graph, head, tail, 100, 2);
    assert_edge(graph, kernel, tail, RV_EDGE_SYNC);
    expect_eq(tt_kind_count(graph, RV_EDGE_SYNC), 1);
    expect_eq(graph->build_stats.blocking_calls_split, 1);
    expect_eq(graph->build_stats.sync_events_used, 0);
    tt_assert_replay_exact(graph);

    /* Slower GPU: K [10,210], tail [210,212], C at 212 + 8 = 220. */
    set_duration_us(graph, kernel, 200);
    assert_start_us(graph, tail, 210);
    assert_end_us(graph, tail, 212);
    assert_start_us(graph, next, 220);
    /* Faster GPU: K [10,60], the CPU waits less: tail [60,62], C at 70. */
    set_duration_us(graph, kernel, 50);
    assert_start_us(graph, tail, 60);
    assert_start_us(graph, next, 70);
    rv_graph_free(graph);
}
END_TEST

/* The same with the "Stream Sync" cuda_sync record that names stream 7. */
START_TEST(test_sync_stream_synchronize_cuda_sync)
{
    rv_graph *graph = stream_sync_graph(TRUE);
    int32_t kernel = tt_find(graph, "k_long", RV_TASK_KERNEL);
    int32_t head = tt_find(graph, "cudaStreamSynchronize", RV_TASK_CPU);
    int32_t tail = find_tail(graph, "cudaStreamSynchronize");
    assert_split(graph, head, tail, 100, 2);
    assert_edge(graph, kernel, tail, RV_EDGE_SYNC);
    expect_eq(graph->build_stats.sync_events_used, 1);
    tt_assert_replay_exact(graph);
    set_duration_us(graph, kernel, 200);
    assert_start_us(graph, tail, 210);
    rv_graph_free(graph);
}
END_TEST

/* Two streams, one synchronize: which stream it waited for.
 *
 *   main: L1 [0,5] L2 [6,11] S cudaStreamSynchronize [12,62]  C [70,75]
 *   s7:        K1 [10,55]
 *   s20:           K2 [16,60]
 *
 * With the "Stream Sync" record naming stream 7 the tail waits for K1 and
 * starts at 55 (own cost 7 us); without it, the rule takes the stream the
 * thread launched on last, stream 20: K2, and the tail starts at 60. */
static rv_graph *two_stream_sync_graph(gboolean with_cuda_sync)
{
    tt_trace *trace = tt_new(BASE_US);
    tt_runtime(trace, MAIN, "launch_k1", 0, 5, 1);
    tt_kernel(trace, 7, "k1", 10, 45, 1);
    tt_runtime(trace, MAIN, "launch_k2", 6, 5, 2);
    tt_kernel(trace, 20, "k2", 16, 44, 2);
    tt_runtime(trace, MAIN, "cudaStreamSynchronize", 12, 50, 3);
    if (with_cuda_sync) tt_cuda_sync(trace, "Stream Sync", 7, 55, 7, 3, -1, -1);
    tt_runtime(trace, MAIN, "cudaFuncGetAttributes", 70, 5, 4);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    return graph;
}

START_TEST(test_sync_stream_sync_record_names_stream)
{
    rv_graph *graph = two_stream_sync_graph(TRUE);
    int32_t k1 = tt_find(graph, "k1", RV_TASK_KERNEL), k2 = tt_find(graph, "k2", RV_TASK_KERNEL);
    int32_t head = tt_find(graph, "cudaStreamSynchronize", RV_TASK_CPU);
    int32_t tail = find_tail(graph, "cudaStreamSynchronize");
    int32_t next = tt_find(graph, "cudaFuncGetAttributes", RV_TASK_CPU);
    assert_split(graph, head, tail, 55, 7);
    assert_edge(graph, k1, tail, RV_EDGE_SYNC);
    assert_no_edge(graph, k2, tail, RV_EDGE_SYNC);
    expect_eq(graph->build_stats.sync_events_used, 1);
    tt_assert_replay_exact(graph);
    /* K1 [10,110]: tail [110,117], C at 117 + 8 = 125. */
    set_duration_us(graph, k1, 100);
    assert_start_us(graph, tail, 110);
    assert_start_us(graph, next, 125);
    rv_graph_free(graph);
}
END_TEST

START_TEST(test_sync_stream_sync_without_record)
{
    rv_graph *graph = two_stream_sync_graph(FALSE);
    int32_t k1 = tt_find(graph, "k1", RV_TASK_KERNEL), k2 = tt_find(graph, "k2", RV_TASK_KERNEL);
    int32_t head = tt_find(graph, "cudaStreamSynchronize", RV_TASK_CPU);
    int32_t tail = find_tail(graph, "cudaStreamSynchronize");
    assert_split(graph, head, tail, 60, 2);
    assert_edge(graph, k2, tail, RV_EDGE_SYNC);
    assert_no_edge(graph, k1, tail, RV_EDGE_SYNC);
    expect_eq(graph->build_stats.sync_events_used, 0);
    tt_assert_replay_exact(graph);
    /* K2 [16,116]: tail [116,118]; stretching K1 moves nothing. */
    set_duration_us(graph, k2, 100);
    assert_start_us(graph, tail, 116);
    set_duration_us(graph, k1, 200);
    assert_start_us(graph, tail, 116);
    rv_graph_free(graph);
}
END_TEST

/* cudaDeviceSynchronize waits for every stream, not just the last to finish.
 *
 *   main: L1 [0,5] L2 [6,11] D cudaDeviceSynchronize [12,103]  C [110,115]
 *   s7:        K1 [10,60]
 *   s20:           K2 [16,100]
 *
 * Tail [100,103] with SYNC edges from K1 and K2.  Stretch K1 (which did not
 * release the call) to 150 us: K1 ends at 160, so the tail starts at 160 and
 * C at 163 + 7 = 170. */
START_TEST(test_sync_device_synchronize)
{
    tt_trace *trace = tt_new(BASE_US);
    tt_runtime(trace, MAIN, "launch_k1", 0, 5, 1);
    tt_kernel(trace, 7, "k1", 10, 50, 1);
    tt_runtime(trace, MAIN, "launch_k2", 6, 5, 2);
    tt_kernel(trace, 20, "k2", 16, 84, 2);
    tt_runtime(trace, MAIN, "cudaDeviceSynchronize", 12, 91, 3);
    tt_runtime(trace, MAIN, "cudaFuncGetAttributes", 110, 5, 4);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    int32_t k1 = tt_find(graph, "k1", RV_TASK_KERNEL), k2 = tt_find(graph, "k2", RV_TASK_KERNEL);
    int32_t head = tt_find(graph, "cudaDeviceSynchronize", RV_TASK_CPU);
    int32_t tail = find_tail(graph, "cudaDeviceSynchronize");
    int32_t next = tt_find(graph, "cudaFuncGetAttributes", RV_TASK_CPU);
    assert_split(graph, head, tail, 100, 3);
    assert_edge(graph, k1, tail, RV_EDGE_SYNC);
    assert_edge(graph, k2, tail, RV_EDGE_SYNC);
    tt_assert_replay_exact(graph);
    set_duration_us(graph, k1, 150);
    assert_start_us(graph, tail, 160);
    assert_start_us(graph, next, 170);
    rv_graph_free(graph);
}
END_TEST

/* A device synchronize waits for one device: the one a "Context Sync"
 * record names, or without the record the thread's current device, the one
 * it launched on last.
 *
 *   main: L1 [0,5] L2 [6,11] D cudaDeviceSynchronize [12,63]  C [70,75]
 *   gpu0 s7:   K1 [10,60]
 *   gpu1 s7:       K2 [16,55]
 *
 * The record names GPU 0 (the thread switched back without a recorded
 * call): the tail waits for K1.  Without it, the thread last launched on
 * GPU 1: the tail waits for K2, which ended at 55, so the call's own cost
 * after the wait is 8 us. */
static rv_graph *context_sync_graph(gboolean with_cuda_sync)
{
    tt_trace *trace = tt_new(BASE_US);
    tt_runtime(trace, MAIN, "launch_k1", 0, 5, 1);
    tt_kernel(trace, 7, "k1", 10, 50, 1);
    tt_runtime(trace, MAIN, "launch_k2", 6, 5, 2);
    tt_event(trace, "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k2\", \"pid\": 1, \"tid\": 7, "
                    "\"ts\": %.3f, \"dur\": 39, \"args\": {\"device\": 1, \"stream\": 7, "
                    "\"correlation\": 2, \"External id\": 2}}", BASE_US + 16);
    tt_runtime(trace, MAIN, "cudaDeviceSynchronize", 12, 51, 3);
    if (with_cuda_sync) tt_cuda_sync(trace, "Context Sync", -1, 60, 3, 3, -1, -1);
    tt_runtime(trace, MAIN, "cudaFuncGetAttributes", 70, 5, 4);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    return graph;
}

START_TEST(test_sync_context_sync_record)
{
    rv_graph *graph = context_sync_graph(TRUE);
    int32_t k1 = tt_find(graph, "k1", RV_TASK_KERNEL), k2 = tt_find(graph, "k2", RV_TASK_KERNEL);
    int32_t head = tt_find(graph, "cudaDeviceSynchronize", RV_TASK_CPU);
    int32_t tail = find_tail(graph, "cudaDeviceSynchronize");
    assert_split(graph, head, tail, 60, 3);
    assert_edge(graph, k1, tail, RV_EDGE_SYNC);
    assert_no_edge(graph, k2, tail, RV_EDGE_SYNC);
    expect_eq(graph->build_stats.sync_events_used, 1);
    tt_assert_replay_exact(graph);
    /* GPU 1's kernel does not hold the call: K2 [15,215], tail stays at 60. */
    set_duration_us(graph, k2, 200);
    assert_start_us(graph, tail, 60);
    /* GPU 0's does: K1 [10,110], tail [110,113], C at 113 + 7 = 120. */
    set_duration_us(graph, k1, 100);
    assert_start_us(graph, tail, 110);
    assert_start_us(graph, tt_find(graph, "cudaFuncGetAttributes", RV_TASK_CPU), 120);
    rv_graph_free(graph);
}
END_TEST

START_TEST(test_sync_context_sync_without_record)
{
    rv_graph *graph = context_sync_graph(FALSE);
    int32_t k1 = tt_find(graph, "k1", RV_TASK_KERNEL), k2 = tt_find(graph, "k2", RV_TASK_KERNEL);
    int32_t head = tt_find(graph, "cudaDeviceSynchronize", RV_TASK_CPU);
    int32_t tail = find_tail(graph, "cudaDeviceSynchronize");
    assert_split(graph, head, tail, 55, 8);
    assert_edge(graph, k2, tail, RV_EDGE_SYNC);
    assert_no_edge(graph, k1, tail, RV_EDGE_SYNC);
    expect_eq(graph->build_stats.syncs_by_api, 1);
    tt_assert_replay_exact(graph);
    set_duration_us(graph, k1, 200); /* GPU 0 does not hold it */
    assert_start_us(graph, tail, 55);
    set_duration_us(graph, k2, 200); /* K2 [16,216]: tail [216,224], C at 224 + 7 = 231 */
    assert_start_us(graph, tail, 216);
    assert_start_us(graph, tt_find(graph, "cudaFuncGetAttributes", RV_TASK_CPU), 231);
    rv_graph_free(graph);
}
END_TEST

/* "Event Sync": cudaEventSynchronize waits for what stream 7 had been given
 * when the event was recorded - K1, not K2 launched after the record.
 *
 *   main: L1 [0,5] R cudaEventRecord [6,8] L2 [9,12] E cudaEventSynchronize [13,52] C [60,65]
 *   s7:        K1 [10,50]  K2 [50,80]
 *
 * Tail [50,52] waits on K1.  Without the record no GPU task both precedes
 * the call's start on a stream and ends before the call, so there would be no
 * split at all. */
START_TEST(test_sync_event_sync_record)
{
    tt_trace *trace = tt_new(BASE_US);
    tt_runtime(trace, MAIN, "launch_k1", 0, 5, 1);
    tt_kernel(trace, 7, "k1", 10, 40, 1);
    tt_runtime(trace, MAIN, "cudaEventRecord", 6, 2, 2);
    tt_runtime(trace, MAIN, "launch_k2", 9, 3, 4);
    tt_kernel(trace, 7, "k2", 50, 30, 4);
    tt_runtime(trace, MAIN, "cudaEventSynchronize", 13, 39, 3);
    tt_cuda_sync(trace, "Event Sync", -1, 50, 2, 3, 7, 2);
    tt_runtime(trace, MAIN, "cudaFuncGetAttributes", 60, 5, 5);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    int32_t k1 = tt_find(graph, "k1", RV_TASK_KERNEL), k2 = tt_find(graph, "k2", RV_TASK_KERNEL);
    int32_t head = tt_find(graph, "cudaEventSynchronize", RV_TASK_CPU);
    int32_t tail = find_tail(graph, "cudaEventSynchronize");
    assert_split(graph, head, tail, 50, 2);
    assert_edge(graph, k1, tail, RV_EDGE_SYNC);
    assert_no_edge(graph, k2, tail, RV_EDGE_SYNC);
    tt_assert_replay_exact(graph);
    /* K1 [10,70]; K2 follows on the stream; the tail waits only for K1:
     * tail [70,72], C at 72 + 8 = 80. */
    set_duration_us(graph, k1, 60);
    assert_start_us(graph, tail, 70);
    assert_start_us(graph, k2, 70);
    assert_start_us(graph, tt_find(graph, "cudaFuncGetAttributes", RV_TASK_CPU), 80);
    rv_graph_free(graph);
}
END_TEST

/* A blocking cudaMemcpy: the call returns only after its copy finished, so
 * it waits on its own GPU task.  Its head keeps the cost of issuing it, the
 * trace's typical launch call (L0's 5 us), and the copy is ready the
 * launch latency (3 us) after the head ends.
 *
 *   main: L0 [0,5]  M cudaMemcpy [10,70]                C [75,80]
 *   s7:       K0 [8,9]  copy DtoH [18,58]
 *
 * Head [10,15] launches the copy; tail [58,70] waits for it.  Stretch the
 * copy to 100 us: [18,118], tail [118,130], C at 130 + 5 = 135. */
START_TEST(test_sync_blocking_memcpy)
{
    tt_trace *trace = tt_new(BASE_US);
    tt_runtime(trace, MAIN, "cudaLaunchKernel", 0, 5, 4);
    tt_kernel(trace, 7, "k0", 8, 1, 4);
    tt_runtime(trace, MAIN, "cudaMemcpy", 10, 60, 5);
    tt_memcpy(trace, 7, "Memcpy DtoH (Device -> Pageable)", 18, 40, 5, 4096);
    tt_runtime(trace, MAIN, "cudaFuncGetAttributes", 75, 5, 6);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    int32_t copy = tt_find(graph, "Memcpy DtoH (Device -> Pageable)", RV_TASK_MEMCPY);
    int32_t head = tt_find(graph, "cudaMemcpy", RV_TASK_CPU);
    int32_t tail = find_tail(graph, "cudaMemcpy");
    int32_t next = tt_find(graph, "cudaFuncGetAttributes", RV_TASK_CPU);
    ck_assert_int_eq(rv_graph_task(graph, copy)->bytes, 4096);
    assert_split_with_head(graph, head, tail, 5, 58, 12);
    assert_edge(graph, head, copy, RV_EDGE_LAUNCH);
    assert_edge(graph, copy, tail, RV_EDGE_SYNC);
    tt_assert_replay_exact(graph);
    set_duration_us(graph, copy, 100);
    assert_start_us(graph, tail, 118);
    assert_start_us(graph, next, 135);
    rv_graph_free(graph);
}
END_TEST

/* An asynchronous copy from pinned memory returns before its GPU side
 * ends: not blocking. */
START_TEST(test_sync_async_memcpy_not_split)
{
    tt_trace *trace = tt_new(BASE_US);
    tt_runtime(trace, MAIN, "cudaMemcpyAsync", 0, 5, 5);
    tt_memcpy(trace, 7, "Memcpy HtoD (Pinned -> Device)", 10, 40, 5, 4096);
    tt_runtime(trace, MAIN, "cudaFuncGetAttributes", 20, 5, 6);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    int32_t copy = tt_find(graph, "Memcpy HtoD (Pinned -> Device)", RV_TASK_MEMCPY);
    int32_t next = tt_find(graph, "cudaFuncGetAttributes", RV_TASK_CPU);
    ck_assert_int_eq(tt_find_opt(graph, "cudaMemcpyAsync", RV_TASK_SYNC), -1);
    expect_eq(tt_kind_count(graph, RV_EDGE_SYNC), 0);
    expect_eq(graph->build_stats.blocking_calls_split, 0);
    tt_assert_replay_exact(graph);
    set_duration_us(graph, copy, 100); /* the CPU does not wait */
    assert_start_us(graph, next, 20);
    rv_graph_free(graph);
}
END_TEST

/* A large async copy from pageable memory is staged chunk by chunk: the
 * call stays busy until about the copy's end (RV_STAGED_COPY_BYTES), so it
 * waits on its copy; a small one does not.
 *
 *   main: M cudaMemcpyAsync [0,60] (8 MiB)  C [62,67]
 *   s7:        copy HtoD [7,61]
 *
 * The head keeps the default launch cost (5 us: no plain launch to measure)
 * and the copy is ready the default latency (2 us) later, at 7.  The call
 * returned 1 us before its copy ended, so the tail starts at the copy's end
 * and lasts nothing.  Stretch the copy to 100 us: [7,107], C at 107 + 2. */
START_TEST(test_sync_staged_pageable_copy)
{
    tt_trace *trace = tt_new(BASE_US);
    tt_runtime(trace, MAIN, "cudaMemcpyAsync", 0, 60, 5);
    tt_memcpy(trace, 7, "Memcpy HtoD (Pageable -> Device)", 7, 54, 5, 8 << 20);
    tt_runtime(trace, MAIN, "cudaFuncGetAttributes", 62, 5, 6);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    int32_t copy = tt_find(graph, "Memcpy HtoD (Pageable -> Device)", RV_TASK_MEMCPY);
    int32_t head = tt_find(graph, "cudaMemcpyAsync", RV_TASK_CPU);
    int32_t tail = find_tail(graph, "cudaMemcpyAsync");
    int32_t next = tt_find(graph, "cudaFuncGetAttributes", RV_TASK_CPU);
    assert_split_with_head(graph, head, tail, 5, 60, 0);
    assert_edge(graph, copy, tail, RV_EDGE_SYNC);
    set_duration_us(graph, copy, 100);
    assert_start_us(graph, next, 109);
    rv_graph_free(graph);
}
END_TEST

/* cudaFree synchronizes the device implicitly.
 *
 *   main: L [0,5]  F cudaFree [6,62]  C [70,75]
 *   s7:       K [7,60]
 *
 * The tail [60,62] waits for K; stretch K to 100 us: [7,107], the tail
 * [107,109], C at 109 + 8 = 117. */
/* Every freeing call of the runtime and the driver, the driver's with the
 * version suffix CUPTI records. */
static const char *const FREEING_CALLS[] = { "cudaFree", "hipFree", "cuMemFree_v2", "cudaFreeHost", "hipHostFree" };

START_TEST(test_sync_cuda_free_is_device_sync)
{
    const char *freeing = FREEING_CALLS[_i];
    tt_trace *trace = tt_new(BASE_US);
    tt_runtime(trace, MAIN, "cudaLaunchKernel", 0, 5, 1);
    tt_kernel(trace, 7, "k", 7, 53, 1);
    tt_runtime(trace, MAIN, freeing, 6, 56, 2);
    tt_runtime(trace, MAIN, "cudaFuncGetAttributes", 70, 5, 3);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    int32_t kernel = tt_find(graph, "k", RV_TASK_KERNEL);
    int32_t head = tt_find(graph, freeing, RV_TASK_CPU);
    int32_t tail = find_tail(graph, freeing);
    assert_split(graph, head, tail, 60, 2);
    assert_edge(graph, kernel, tail, RV_EDGE_SYNC);
    tt_assert_replay_exact(graph);
    set_duration_us(graph, kernel, 100);
    assert_start_us(graph, tail, 107);
    assert_start_us(graph, tt_find(graph, "cudaFuncGetAttributes", RV_TASK_CPU), 117);
    rv_graph_free(graph);
}
END_TEST

/* ---- rule 5: cross-stream -------------------------------------------

   main: L1 [0,5] R cudaEventRecord [6,8] W cudaStreamWaitEvent [9,11] L2 [12,17]
   s7:        P [10,100]
   s20:                                          Q [100,110]

   Q was launched at 12 but waited for P through the event.  Stretch P to
   200 us: P [10,210], Q at 210.  Without the edge Q keeps its recorded
   88 us lag after its launch and starts at 100. */
static rv_graph *cross_stream_graph(gboolean with_cuda_sync)
{
    tt_trace *trace = tt_new(BASE_US);
    tt_runtime(trace, MAIN, "launch_p", 0, 5, 1);
    tt_kernel(trace, 7, "producer", 10, 90, 1);
    tt_runtime(trace, MAIN, "cudaEventRecord", 6, 2, 2);
    tt_runtime(trace, MAIN, "cudaStreamWaitEvent", 9, 2, 3);
    if (with_cuda_sync) tt_cuda_sync(trace, "Stream Wait Event", 20, 11, 0, 3, 7, 2);
    tt_runtime(trace, MAIN, "launch_q", 12, 5, 4);
    tt_kernel(trace, 20, "consumer", 100, 10, 4);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    return graph;
}

static void check_cross_stream(rv_graph *graph)
{
    int32_t producer = tt_find(graph, "producer", RV_TASK_KERNEL);
    int32_t consumer = tt_find(graph, "consumer", RV_TASK_KERNEL);
    assert_edge(graph, producer, consumer, RV_EDGE_CROSS_STREAM);
    expect_eq(tt_kind_count(graph, RV_EDGE_CROSS_STREAM), 1);
    /* Neither the record nor the wait blocks the CPU. */
    expect_eq(graph->build_stats.blocking_calls_split, 0);
    tt_assert_replay_exact(graph);
    set_duration_us(graph, producer, 200);
    assert_start_us(graph, consumer, 210);
    set_duration_us(graph, producer, 40); /* P [10,50]: Q only waits for its launch plus a lag */
    ck_assert_int_lt(sim_start(graph, consumer), US(100));
}

START_TEST(test_cross_stream_from_cuda_sync)
{
    rv_graph *graph = cross_stream_graph(TRUE);
    expect_eq(graph->build_stats.waits_by_cuda_sync, 1);
    expect_eq(graph->build_stats.waits_by_call_order, 0);
    check_cross_stream(graph);
    rv_graph_free(graph);
}
END_TEST

START_TEST(test_cross_stream_from_call_order)
{
    rv_graph *graph = cross_stream_graph(FALSE);
    expect_eq(graph->build_stats.waits_by_cuda_sync, 0);
    expect_eq(graph->build_stats.waits_by_call_order, 1);
    check_cross_stream(graph);
    rv_graph_free(graph);
}
END_TEST

/* The cuda_sync record is exact where call order would guess wrong: the
 * event was recorded on stream 20's behalf after two kernels were launched
 * on stream 7 and one on stream 9; the record names stream 9.
 *
 *   main: La [0,3] Lb [4,7] R [8,9] W [10,11] Lq [12,14]
 *   s9:        A [5,100]
 *   s7:             B [9,40]
 *   s20:                                    Q [100,110]
 */
START_TEST(test_cross_stream_record_names_stream)
{
    tt_trace *trace = tt_new(BASE_US);
    tt_runtime(trace, MAIN, "launch_a", 0, 3, 1);
    tt_kernel(trace, 9, "a", 5, 95, 1);
    tt_runtime(trace, MAIN, "launch_b", 4, 3, 2);
    tt_kernel(trace, 7, "b", 9, 31, 2);
    tt_runtime(trace, MAIN, "cudaEventRecord", 8, 1, 3);
    tt_runtime(trace, MAIN, "cudaStreamWaitEvent", 10, 1, 4);
    tt_cuda_sync(trace, "Stream Wait Event", 20, 11, 0, 4, 9, 3);
    tt_runtime(trace, MAIN, "launch_q", 12, 2, 5);
    tt_kernel(trace, 20, "q", 100, 10, 5);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    int32_t a = tt_find(graph, "a", RV_TASK_KERNEL), b = tt_find(graph, "b", RV_TASK_KERNEL);
    int32_t q = tt_find(graph, "q", RV_TASK_KERNEL);
    assert_edge(graph, a, q, RV_EDGE_CROSS_STREAM);
    assert_no_edge(graph, b, q, RV_EDGE_CROSS_STREAM);
    tt_assert_replay_exact(graph);
    set_duration_us(graph, a, 195); /* A [5,200] */
    assert_start_us(graph, q, 200);
    rv_graph_free(graph);
}
END_TEST

/* A wait whose call-order candidate the recording contradicts waits for
 * the awaited stream's last task that ended in time: c10d's wait on a
 * bucket's all-reduce names the collective before the one just launched.
 *
 *   main: La [0,3] Lb [4,6] W cudaStreamWaitEvent [7,8] Lq [9,11]
 *   s4:        A [5,100]  B [100,400]
 *   s7:                        Q [102,110]
 *
 * B was launched last on s4, but Q started 298 us before B ended: Q
 * waited for A.  Stretch A to 195 us: A [5,200], Q at 200. */
START_TEST(test_cross_stream_wait_the_recording_allows)
{
    tt_trace *trace = tt_new(BASE_US);
    tt_runtime(trace, MAIN, "launch_a", 0, 3, 1);
    tt_kernel(trace, 4, "a", 5, 95, 1);
    tt_runtime(trace, MAIN, "launch_b", 4, 2, 2);
    tt_kernel(trace, 4, "b", 100, 300, 2);
    tt_runtime(trace, MAIN, "cudaStreamWaitEvent", 7, 1, 3);
    tt_runtime(trace, MAIN, "launch_q", 9, 2, 4);
    tt_kernel(trace, 7, "q", 102, 8, 4);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    int32_t a = tt_find(graph, "a", RV_TASK_KERNEL), b = tt_find(graph, "b", RV_TASK_KERNEL);
    int32_t q = tt_find(graph, "q", RV_TASK_KERNEL);
    assert_edge(graph, a, q, RV_EDGE_CROSS_STREAM);
    assert_no_edge(graph, b, q, RV_EDGE_CROSS_STREAM);
    expect_eq(graph->build_stats.waits_by_call_order, 1);
    set_duration_us(graph, a, 195);
    assert_start_us(graph, q, 200);
    rv_graph_free(graph);
}
END_TEST

/* ---- rule 6: inter-thread -------------------------------------------

   main:     A [0,10]  ..... idle .....  B [300,305]
   autograd:      X [20,290]

   The main thread resumed 10 us after X ended: it was waiting for X.
   Stretch X to 470 us: X [20,490], B at 500.  Without the edge B would
   start after A plus its recorded 290 us gap, at 300. */
START_TEST(test_inter_thread)
{
    tt_trace *trace = tt_new(BASE_US);
    tt_runtime(trace, MAIN, "cudaMalloc", 0, 10, 1);
    tt_runtime(trace, AUTOGRAD, "cudaHostAlloc", 20, 270, 2);
    tt_runtime(trace, MAIN, "cudaFree", 300, 5, 3);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    int32_t a = tt_find(graph, "cudaMalloc", RV_TASK_CPU);
    int32_t x = tt_find(graph, "cudaHostAlloc", RV_TASK_CPU);
    int32_t b = tt_find(graph, "cudaFree", RV_TASK_CPU);
    assert_edge(graph, x, b, RV_EDGE_INTER_THREAD);
    assert_edge(graph, a, b, RV_EDGE_THREAD);
    expect_eq(tt_kind_count(graph, RV_EDGE_INTER_THREAD), 1);
    expect_eq(graph->build_stats.inter_thread_inferred, 1);
    tt_assert_replay_exact(graph);
    set_duration_us(graph, x, 470);
    assert_start_us(graph, b, 500);
    rv_graph_free(graph);
}
END_TEST

/* A short pause (under the long-gap threshold) is Python overhead, not a wait. */
START_TEST(test_inter_thread_short_gap_is_not_a_wait)
{
    tt_trace *trace = tt_new(BASE_US);
    tt_runtime(trace, MAIN, "cudaMalloc", 0, 10, 1);
    tt_runtime(trace, AUTOGRAD, "cudaHostAlloc", 12, 10, 2);
    tt_runtime(trace, MAIN, "cudaFree", 25, 5, 3);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    expect_eq(tt_kind_count(graph, RV_EDGE_INTER_THREAD), 0);
    tt_assert_replay_exact(graph);
    rv_graph_free(graph);
}
END_TEST

/* ---- rule 6: a backward pass handed to the autograd thread -----------

   main:      M1 [150,550] (forward)  M2 [560,570] (fill the loss's gradient)
              ..... blocked in loss.backward() .....  M3 [1100,1110]
   autograd:  AddBackward0 [0,100] > Y [0,80], AccumulateGrad [100,110]
              ..... idle .....  NllLossBackward0 [900,1050] > X [920,1000]

   The autograd thread starts the second pass when the main thread hands it
   over: X waits for M2, 330 us later (past the wake-up window), so only the
   hand-off rule explains it, and X's host overhead is the 350 us after M2,
   not the 840 us since Y.  (The wake-up rule cannot see this idle stretch
   at all: the accumulation after Y is the thread's first event after it.)
   Shorten the forward by 300 us: M2 ends at 270 and X starts at 620.
   Without the edge X would stay at 920, after Y plus its recorded gap. */
START_TEST(test_backward_hand_off)
{
    tt_trace *trace = tt_new(BASE_US);
    tt_cpu_op(trace, AUTOGRAD, "autograd::engine::evaluate_function: AddBackward0", 0, 100);
    tt_runtime(trace, AUTOGRAD, "cudaHostAlloc", 0, 80, 1);
    tt_cpu_op(trace, AUTOGRAD, "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 100, 10);
    tt_runtime(trace, MAIN, "cudaMalloc", 150, 400, 2);
    tt_runtime(trace, MAIN, "cudaMemsetAsync", 560, 10, 3);
    tt_cpu_op(trace, AUTOGRAD, "autograd::engine::evaluate_function: NllLossBackward0", 900, 150);
    tt_runtime(trace, AUTOGRAD, "cudaMallocHost", 920, 80, 4);
    tt_runtime(trace, MAIN, "cudaFree", 1100, 10, 5);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    int32_t m1 = tt_find(graph, "cudaMalloc", RV_TASK_CPU);
    int32_t m2 = tt_find(graph, "cudaMemsetAsync", RV_TASK_CPU);
    int32_t x = tt_find(graph, "cudaMallocHost", RV_TASK_CPU);
    assert_edge(graph, m2, x, RV_EDGE_INTER_THREAD);
    expect_eq(rv_graph_task(graph, x)->host_overhead_ns, US(350));
    tt_assert_replay_exact(graph);
    set_duration_us(graph, m1, 100);
    assert_start_us(graph, x, 620);
    rv_graph_free(graph);
}
END_TEST

/* ---- rule 7: communication ------------------------------------------

   main: L1 [0,5] L2 [6,11]
   s7:        gemm [10,100]
   s20:            ncclKernel_AllReduce [100,150]

   The all-reduce waits for the compute kernel launched before it on another
   stream (its data).  Stretch gemm to 200 us: the collective starts at 210.
   Without the edge it keeps its recorded lag after its launch: 100. */
START_TEST(test_comm_waits_for_producer)
{
    static const char nccl[] = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)";
    tt_trace *trace = tt_new(BASE_US);
    tt_runtime(trace, MAIN, "launch_gemm", 0, 5, 1);
    tt_kernel(trace, 7, "gemm", 10, 90, 1);
    tt_runtime(trace, MAIN, "launch_nccl", 6, 5, 2);
    tt_kernel(trace, 20, nccl, 100, 50, 2);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    int32_t gemm = tt_find(graph, "gemm", RV_TASK_KERNEL);
    int32_t allreduce = tt_find(graph, nccl, RV_TASK_COMM);
    assert_edge(graph, gemm, allreduce, RV_EDGE_COMM);
    expect_eq(tt_kind_count(graph, RV_EDGE_COMM), 1);
    ck_assert(rv_graph_task(graph, allreduce)->flags & RV_TASK_FLAG_GPU);
    tt_assert_replay_exact(graph);
    set_duration_us(graph, gemm, 200);
    assert_start_us(graph, allreduce, 210);
    rv_graph_free(graph);
}
END_TEST

/* ---- tags: layer and phase -----------------------------------------

   main (tid 1), inside ProfilerStep#1 [0,1000]:
     enumerate(DataLoader)#... [10,110] with a pinned copy call at [80,90]
     nn.Module: Linear_0 [200,300] > aten::linear [210,290] > aten::addmm [220,270]
         > launch [230,235] -> gemm_fwd
     aten::relu [320,350] > launch [325,330] -> relu_fwd
     MulBackward0 [500,550] > launch [510,515] -> mul_bwd
     Optimizer.step#Adam.step [600,700] > launch [610,615] -> adam_kernel
   autograd (tid 2):
     autograd::engine::evaluate_function: AddmmBackward0 [400,500]
         > AddmmBackward0 [405,495] > aten::mm [410,460] > launch [420,425] -> gemm_bwd
   after the step: launch [1100,1105] -> after_step */
static rv_graph *tagged_graph(void)
{
    tt_trace *trace = tt_new(BASE_US);
    tt_annotation(trace, MAIN, "ProfilerStep#1", 0, 1000);
    tt_annotation(trace, MAIN, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 10, 100);
    tt_runtime(trace, MAIN, "cudaMemcpyAsync", 80, 10, 1);
    tt_memcpy(trace, 7, "Memcpy HtoD (Pinned -> Device)", 95, 10, 1, 1 << 20);
    tt_python(trace, MAIN, "nn.Module: Linear_0", 200, 100);
    tt_cpu_op(trace, MAIN, "aten::linear", 210, 80);
    tt_cpu_op(trace, MAIN, "aten::addmm", 220, 50);
    tt_runtime(trace, MAIN, "launch_gemm_fwd", 230, 5, 2);
    tt_kernel(trace, 7, "gemm_fwd", 240, 20, 2);
    tt_cpu_op(trace, MAIN, "aten::relu", 320, 30);
    tt_runtime(trace, MAIN, "launch_relu_fwd", 325, 5, 3);
    tt_kernel(trace, 7, "relu_fwd", 335, 5, 3);
    tt_cpu_op(trace, AUTOGRAD, "autograd::engine::evaluate_function: AddmmBackward0", 400, 100);
    tt_cpu_op(trace, AUTOGRAD, "AddmmBackward0", 405, 90);
    tt_cpu_op(trace, AUTOGRAD, "aten::mm", 410, 50);
    tt_runtime(trace, AUTOGRAD, "launch_gemm_bwd", 420, 5, 4);
    tt_kernel(trace, 7, "gemm_bwd", 430, 20, 4);
    tt_cpu_op(trace, MAIN, "MulBackward0", 500, 50);
    tt_runtime(trace, MAIN, "launch_mul_bwd", 510, 5, 5);
    tt_kernel(trace, 7, "mul_bwd", 520, 5, 5);
    tt_annotation(trace, MAIN, "Optimizer.step#Adam.step", 600, 100);
    tt_runtime(trace, MAIN, "launch_adam", 610, 5, 6);
    tt_kernel(trace, 7, "adam_kernel", 620, 10, 6);
    tt_runtime(trace, MAIN, "launch_after", 1100, 5, 7);
    tt_kernel(trace, 7, "after_step", 1110, 5, 7);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    return graph;
}

static const char *str(rv_graph *graph, int32_t id) { return id > 0 ? rv_strings_get(graph->strings, id) : ""; }

#define assert_tags(graph, name, kind, want_phase, want_layer, want_op, want_step)                  \
    do {                                                                                           \
        const rv_task *t_ = rv_graph_task(graph, tt_find(graph, name, kind));                      \
        ck_assert_msg(t_->phase == (want_phase), "%s: phase %s, expected %s", name,                \
                      rv_phase_name(t_->phase), rv_phase_name(want_phase));                        \
        ck_assert_str_eq(str(graph, t_->layer), want_layer);                                       \
        ck_assert_str_eq(str(graph, t_->op), want_op);                                             \
        ck_assert_int_eq(t_->step, want_step);                                                     \
    } while (0)

START_TEST(test_tags_phase_and_layer)
{
    rv_graph *graph = tagged_graph();
    ck_assert_uint_eq(graph->steps->len, 1);
    /* Forward: the layer is the nn.Module when there is one ... */
    assert_tags(graph, "gemm_fwd", RV_TASK_KERNEL, RV_PHASE_FORWARD, "nn.Module: Linear_0", "aten::addmm", 0);
    assert_tags(graph, "launch_gemm_fwd", RV_TASK_CPU, RV_PHASE_FORWARD, "nn.Module: Linear_0", "aten::addmm", 0);
    /* ... else the outermost operator. */
    assert_tags(graph, "relu_fwd", RV_TASK_KERNEL, RV_PHASE_FORWARD, "aten::relu", "aten::relu", 0);
    /* Backward: on the autograd thread, */
    assert_tags(graph, "gemm_bwd", RV_TASK_KERNEL, RV_PHASE_BACKWARD,
                "autograd::engine::evaluate_function: AddmmBackward0", "aten::mm", 0);
    /* or inside a ...Backward function on the main thread. */
    assert_tags(graph, "mul_bwd", RV_TASK_KERNEL, RV_PHASE_BACKWARD, "MulBackward0", "MulBackward0", 0);
    assert_tags(graph, "adam_kernel", RV_TASK_KERNEL, RV_PHASE_OPTIMIZER, "", "", 0);
    assert_tags(graph, "Memcpy HtoD (Pinned -> Device)", RV_TASK_MEMCPY, RV_PHASE_DATALOAD, "", "", 0);
    assert_tags(graph, "after_step", RV_TASK_KERNEL, RV_PHASE_OTHER, "", "", -1);
    rv_graph_free(graph);
}
END_TEST

/* Data loading becomes a task of its own, up to the first runtime call in it. */
/* Without ProfilerStep annotations forward is inferred (tags.c): from the
 * first fwdbwd flow start of an iteration to its first backward scope;
 * iterations end at Optimizer.step.  Work before the first fwdbwd flow, and
 * a trace with no backward at all, stay "other". */
static void fwdbwd_flow(tt_trace *trace, int id, int from_tid, double from_ts, int to_tid, double to_ts)
{
    tt_event(trace, "{\"ph\": \"s\", \"id\": %d, \"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"cat\": \"fwdbwd\", "
             "\"name\": \"fwdbwd\"}", id, TT_PID, from_tid, tt_base(trace) + from_ts);
    tt_event(trace, "{\"ph\": \"f\", \"id\": %d, \"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"cat\": \"fwdbwd\", "
             "\"name\": \"fwdbwd\", \"bp\": \"e\"}", id, TT_PID, to_tid, tt_base(trace) + to_ts);
}

static void training_iteration(tt_trace *trace, double at, int corr)
{
    tt_cpu_op(trace, MAIN, "aten::linear", at + 10, 20);
    tt_runtime(trace, MAIN, "cudaLaunchKernel", at + 12, 5, corr);
    tt_kernel(trace, 7, "sgemm_fwd", at + 20, 10, corr);
    fwdbwd_flow(trace, corr, MAIN, at + 10, AUTOGRAD, at + 40);
    tt_cpu_op(trace, AUTOGRAD, "autograd::engine::evaluate_function: AddmmBackward0", at + 40, 20);
    tt_runtime(trace, AUTOGRAD, "cudaLaunchKernel", at + 42, 5, corr + 1);
    tt_kernel(trace, 7, "sgemm_bwd", at + 50, 10, corr + 1);
    tt_annotation(trace, MAIN, "Optimizer.step#SGD.step", at + 70, 20);
    tt_runtime(trace, MAIN, "cudaLaunchKernel", at + 72, 5, corr + 2);
    tt_kernel(trace, 7, "sgd_kernel", at + 80, 5, corr + 2);
}

static rv_phase phase_of_kernel(rv_graph *graph, const char *name, int nth)
{
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task(graph, id);
        if (task->kind == RV_TASK_KERNEL && strcmp(rv_strings_get(graph->strings, task->name), name) == 0 && nth-- == 0)
            return (rv_phase)task->phase;
    }
    ck_abort_msg("no kernel %s", name);
    return RV_PHASE_OTHER;
}

START_TEST(test_tags_forward_without_steps)
{
    tt_trace *trace = tt_new(1.7e15);
    tt_runtime(trace, MAIN, "cudaMalloc", 0, 5, -1);   /* set-up before any autograd op */
    training_iteration(trace, 0, 10);
    training_iteration(trace, 100, 20);
    rv_graph *graph = tt_build(trace);
    ck_assert(graph->whole_trace_step);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(phase_of_kernel(graph, "sgemm_fwd", i), RV_PHASE_FORWARD);
        ck_assert_int_eq(phase_of_kernel(graph, "sgemm_bwd", i), RV_PHASE_BACKWARD);
        ck_assert_int_eq(phase_of_kernel(graph, "sgd_kernel", i), RV_PHASE_OPTIMIZER);
    }
    ck_assert_int_eq(rv_graph_task(graph, tt_find(graph, "cudaMalloc", RV_TASK_CPU))->phase, RV_PHASE_OTHER);
    rv_graph_free(graph);
    tt_free(trace);
}
END_TEST

START_TEST(test_tags_inference_only_stays_other)
{
    tt_trace *trace = tt_new(1.7e15);
    tt_cpu_op(trace, MAIN, "aten::linear", 10, 20);
    tt_runtime(trace, MAIN, "cudaLaunchKernel", 12, 5, 1);
    tt_kernel(trace, 7, "sgemm_fwd", 20, 10, 1);
    rv_graph *graph = tt_build(trace);
    ck_assert_int_eq(phase_of_kernel(graph, "sgemm_fwd", 0), RV_PHASE_OTHER);
    rv_graph_free(graph);
    tt_free(trace);
}
END_TEST

START_TEST(test_tags_dataload_task)
{
    rv_graph *graph = tagged_graph();
    int32_t load = tt_find(graph, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                           RV_TASK_DATALOAD);
    const rv_task *task = rv_graph_task(graph, load);
    ck_assert_int_eq(task->duration_ns, US(70));
    ck_assert_int_eq(task->phase, RV_PHASE_DATALOAD);
    ck_assert_int_eq(task->step, 0);
    int32_t copy_call = tt_find(graph, "cudaMemcpyAsync", RV_TASK_CPU);
    assert_edge(graph, load, copy_call, RV_EDGE_THREAD);
    tt_assert_replay_exact(graph);
    /* Loading twice as fast brings the copy 35 us earlier. */
    int64_t before = sim_start(graph, copy_call);
    rv_graph_task(graph, load)->duration_ns = US(35);
    ck_assert_int_eq(sim_start(graph, copy_call), before - US(35));
    rv_graph_free(graph);
}
END_TEST

/* ---- steps -----------------------------------------------------------

   main: ProfilerStep#1 [0,100]   L1 [90,95]
         ProfilerStep#2 [101,250]  L2 [200,205]
   s7:   K1 [96,130] (launched in step 1, ends after its annotation)
         K2 [206,211]
   Step 1 ends at max(100, 130) = 130 and lasts 130 - 0 = 130 us.
   Step 2 ends at max(250, 211) = 250 and lasts 250 - 130 = 120 us. */
static rv_graph *two_step_graph(void)
{
    tt_trace *trace = tt_new(BASE_US);
    tt_annotation(trace, MAIN, "ProfilerStep#1", 0, 100);
    /* The GPU-side copy of the annotation is not a second step. */
    tt_event(trace, "{\"ph\": \"X\", \"cat\": \"gpu_user_annotation\", \"name\": \"ProfilerStep#1\", "
                    "\"pid\": 0, \"tid\": 7, \"ts\": %.3f, \"dur\": 40, \"args\": {}}", BASE_US + 90);
    tt_runtime(trace, MAIN, "launch_k1", 90, 5, 1);
    tt_kernel(trace, 7, "k1", 96, 34, 1);
    tt_annotation(trace, MAIN, "ProfilerStep#2", 101, 149);
    tt_runtime(trace, MAIN, "launch_k2", 200, 5, 2);
    tt_kernel(trace, 7, "k2", 206, 5, 2);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    return graph;
}

START_TEST(test_steps_recorded)
{
    rv_graph *graph = two_step_graph();
    ck_assert(!graph->whole_trace_step);
    ck_assert_uint_eq(graph->steps->len, 2);
    ck_assert_uint_eq(graph->trace_stats.gpu_annotations, 1);
    const rv_step *one = &g_array_index(graph->steps, rv_step, 0);
    const rv_step *two = &g_array_index(graph->steps, rv_step, 1);
    ck_assert_str_eq(rv_strings_get(graph->strings, one->name), "ProfilerStep#1");
    ck_assert_str_eq(rv_strings_get(graph->strings, two->name), "ProfilerStep#2");
    int64_t base = (int64_t)BASE_US * 1000;
    ck_assert_int_eq(one->recorded_begin_ns - base, US(0));
    ck_assert_int_eq(one->recorded_end_ns - base, US(130));
    ck_assert_int_eq(two->recorded_begin_ns - base, US(101));
    ck_assert_int_eq(two->recorded_end_ns - base, US(250));
    ck_assert_int_eq(rv_graph_task(graph, tt_find(graph, "k1", RV_TASK_KERNEL))->step, 0);
    ck_assert_int_eq(rv_graph_task(graph, tt_find(graph, "k2", RV_TASK_KERNEL))->step, 1);

    GArray *times = rv_step_times(graph, NULL);
    ck_assert_uint_eq(times->len, 2);
    ck_assert_int_eq(g_array_index(times, rv_step_time, 0).recorded_ns, US(130));
    ck_assert_int_eq(g_array_index(times, rv_step_time, 1).recorded_ns, US(120));
    g_array_unref(times);
    tt_assert_replay_exact(graph);
    rv_graph_free(graph);
}
END_TEST

/* Simulated step times follow the same rule.  Stretch K1 to 100 us: it ends
 * at 196, so step 1 lasts 196 us; K2 still runs at [206,211] and step 2 ends
 * with its annotation at 250: 250 - 196 = 54 us. */
START_TEST(test_steps_simulated)
{
    rv_graph *graph = two_step_graph();
    set_duration_us(graph, tt_find(graph, "k1", RV_TASK_KERNEL), 100);
    rv_sim_result result;
    tt_simulate(graph, &result);
    GArray *times = rv_step_times(graph, &result);
    ck_assert_int_eq(g_array_index(times, rv_step_time, 0).simulated_ns, US(196));
    ck_assert_int_eq(g_array_index(times, rv_step_time, 1).simulated_ns, US(54));
    ck_assert_int_eq(g_array_index(times, rv_step_time, 0).recorded_ns, US(130));
    g_array_unref(times);
    rv_sim_result_clear(&result);
    rv_graph_free(graph);
}
END_TEST

/* Without ProfilerStep annotations the whole trace is one step. */
START_TEST(test_steps_whole_trace)
{
    tt_trace *trace = tt_new(BASE_US);
    tt_runtime(trace, MAIN, "launch", 0, 5, 1);
    tt_kernel(trace, 7, "k", 10, 30, 1);
    rv_graph *graph = tt_build(trace);
    tt_free(trace);
    ck_assert(graph->whole_trace_step);
    GArray *times = rv_step_times(graph, NULL);
    ck_assert_uint_eq(times->len, 1);
    ck_assert_int_eq(g_array_index(times, rv_step_time, 0).recorded_ns, US(40));
    g_array_unref(times);
    tt_assert_replay_exact(graph);
    rv_graph_free(graph);
}
END_TEST

static Suite *edges_suite(void)
{
    Suite *suite = suite_create("edges");
    TCase *order = tcase_create("order");
    tcase_add_test(order, test_thread_order);
    tcase_add_test(order, test_stream_order);
    suite_add_tcase(suite, order);

    TCase *launch = tcase_create("launch");
    tcase_add_test(launch, test_launch_modern);
    tcase_add_test(launch, test_launch_legacy);
    tcase_add_test(launch, test_launch_nested_driver_call);
    suite_add_tcase(suite, launch);

    TCase *sync = tcase_create("sync");
    tcase_add_test(sync, test_sync_stream_synchronize);
    tcase_add_test(sync, test_sync_stream_synchronize_cuda_sync);
    tcase_add_test(sync, test_sync_stream_sync_record_names_stream);
    tcase_add_test(sync, test_sync_stream_sync_without_record);
    tcase_add_test(sync, test_sync_device_synchronize);
    tcase_add_test(sync, test_sync_context_sync_record);
    tcase_add_test(sync, test_sync_context_sync_without_record);
    tcase_add_test(sync, test_sync_event_sync_record);
    tcase_add_test(sync, test_sync_blocking_memcpy);
    tcase_add_test(sync, test_sync_async_memcpy_not_split);
    tcase_add_test(sync, test_sync_staged_pageable_copy);
    tcase_add_loop_test(sync, test_sync_cuda_free_is_device_sync, 0, G_N_ELEMENTS(FREEING_CALLS));
    suite_add_tcase(suite, sync);

    TCase *cross = tcase_create("cross_stream");
    tcase_add_test(cross, test_cross_stream_from_cuda_sync);
    tcase_add_test(cross, test_cross_stream_from_call_order);
    tcase_add_test(cross, test_cross_stream_record_names_stream);
    tcase_add_test(cross, test_cross_stream_wait_the_recording_allows);
    suite_add_tcase(suite, cross);

    TCase *threads = tcase_create("inter_thread");
    tcase_add_test(threads, test_inter_thread);
    tcase_add_test(threads, test_inter_thread_short_gap_is_not_a_wait);
    tcase_add_test(threads, test_backward_hand_off);
    suite_add_tcase(suite, threads);

    TCase *comm = tcase_create("comm");
    tcase_add_test(comm, test_comm_waits_for_producer);
    suite_add_tcase(suite, comm);

    TCase *tags = tcase_create("tags");
    tcase_add_test(tags, test_tags_phase_and_layer);
    tcase_add_test(tags, test_tags_dataload_task);
    tcase_add_test(tags, test_tags_forward_without_steps);
    tcase_add_test(tags, test_tags_inference_only_stays_other);
    suite_add_tcase(suite, tags);

    TCase *steps = tcase_create("steps");
    tcase_add_test(steps, test_steps_recorded);
    tcase_add_test(steps, test_steps_simulated);
    tcase_add_test(steps, test_steps_whole_trace);
    suite_add_tcase(suite, steps);
    return suite;
}

int main(void)
{
    SRunner *runner = srunner_create(edges_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? 0 : 1;
}
