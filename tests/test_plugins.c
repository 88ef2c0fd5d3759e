/*
 * test_plugins.c - the optimization plugins (optimizations/NAME.c), loaded
 * through rv_plugin_load by path exactly as `reverie whatif --opt` does.
 *
 * REVERIE_TEST_PLUGIN_DIR (set by tests/meson.build) is the build folder of
 * the plugins; REVERIE_TRACES (traces/, set by tests/meson.build) holds the
 * real traces, and the tests that need one skip when it is absent.
 *
 * Each plugin is checked three ways: neutral parameters reproduce the
 * baseline exactly, a small hand-built graph gives the prediction worked out
 * by hand in the comments, and a real trace gives a believable answer.
 */
#include <check.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "reverie/error.h"
#include "reverie/graph.h"
#include "reverie/plugin.h"
#include "reverie/range.h"
#include "reverie/report.h"
#include "reverie/sim.h"
#include "reverie/trace.h"
#include "reverie/transform.h"
#include "plugin_harness.h"
#include <math.h>

static gint compare_int64_values(gconstpointer left, gconstpointer right)
{
    int64_t a = *(const int64_t *)left, b = *(const int64_t *)right;
    return a < b ? -1 : a > b;
}

/* ---- amp ------------------------------------------------------------ */

/*
 * CPU:  launch A 5us | launch B 5us | launch C 5us
 * GPU:  sgemm 300us (from A) | elementwise 100us (from B) | fp16 gemm 40us (from C)
 * A kernel is ready when its launch ends (the hand-built stream has no launch
 * latency) and queues on the stream: 5-305, 305-405, 405-445 -> 445us.
 * amp (3x / 2x): sgemm 100, elementwise 50, fp16 kernel unchanged 40
 * -> 5-105, 105-155, 155-195 -> 195us.
 */
static tiny amp_graph(void)
{
    tiny t = tiny_new();
    tiny_launch(&t, "volta_sgemm_128x64_nn", US(5), US(300), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    tiny_launch(&t, "void at::native::vectorized_elementwise_kernel<4>", US(5), US(100), RV_PHASE_FORWARD,
                RV_TASK_KERNEL);
    tiny_launch(&t, "volta_fp16_s884gemm_fp16_128x128_nn", US(5), US(40), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    return t;
}

START_TEST(amp_hand_built)
{
    tiny t = amp_graph();
    ck_assert_int_eq(makespan(t.graph), US(445));
    apply_ok(t.graph, "amp", "");
    ck_assert_int_eq(makespan(t.graph), US(195));
    rv_graph_free(t.graph);
}
END_TEST

START_TEST(amp_neutral_hand_built)
{
    tiny t = amp_graph();
    apply_ok(t.graph, "amp", "compute_speedup=1,memory_speedup=1");
    ck_assert_int_eq(makespan(t.graph), US(445));
    rv_graph_free(t.graph);
}
END_TEST

/* The optimizer phase stays FP32 unless optimizer=shrink; host copies and
 * CPU tasks never change.  CPU: launch 5us, copy call 5us, launch 5us.
 * GPU: elementwise 100 (forward), HtoD copy 60, optimizer kernel 80.
 * The first kernel starts when its launch ends, at 5us.
 * baseline: 5 + 100 + 60 + 80 = 245us;
 * keep:     5 + 50 + 60 + 80 = 195us;  shrink: 5 + 50 + 60 + 40 = 155us. */
static tiny amp_optimizer_graph(void)
{
    tiny t = tiny_new();
    tiny_launch(&t, "elementwise_kernel", US(5), US(100), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    tiny_launch(&t, "Memcpy HtoD (Pageable -> Device)", US(5), US(60), RV_PHASE_FORWARD, RV_TASK_MEMCPY);
    tiny_launch(&t, "multi_tensor_apply_kernel", US(5), US(80), RV_PHASE_OPTIMIZER, RV_TASK_KERNEL);
    return t;
}

START_TEST(amp_optimizer_modes)
{
    tiny t = amp_optimizer_graph();
    ck_assert_int_eq(makespan(t.graph), US(245));
    apply_ok(t.graph, "amp", "");
    ck_assert_int_eq(makespan(t.graph), US(195));
    rv_graph_free(t.graph);
    t = amp_optimizer_graph();
    apply_ok(t.graph, "amp", "optimizer=shrink");
    ck_assert_int_eq(makespan(t.graph), US(155));
    rv_graph_free(t.graph);
}
END_TEST

START_TEST(amp_nothing_to_do)
{
    tiny t = tiny_new();
    tiny_task(&t, t.cpu, RV_TASK_CPU, "aten::add", US(10), RV_PHASE_FORWARD);
    GError *error = NULL;
    ck_assert(!apply_plugin(t.graph, "amp", "", &error));
    ck_assert(g_error_matches(error, RV_ERROR, RV_ERROR_PLUGIN));
    g_error_free(error);
    rv_graph_free(t.graph);
}
END_TEST

START_TEST(amp_neutral_real)
{
    check_neutral("hta_resnet50_v100.json.gz", "amp", "compute_speedup=1,memory_speedup=1,optimizer=shrink");
}
END_TEST

START_TEST(amp_real)
{
    int64_t base, pred;
    predict_trace("hta_resnet50_v100.json.gz", "amp", "", &base, &pred);
    double gpu_bound = (double)base / (double)pred;
    ck_assert_msg(gpu_bound >= 1.3 && gpu_bound <= 3.0, "resnet50 amp speedup %.3f", gpu_bound);
    /* Host-bound traces gain far less; autocast's cast kernels and their
     * launches may even make them slower (a recorded fp32 -> AMP pair of a
     * small MLP on a T4 ran 1.48x slower), but not by much here. */
    const char *cpu_bound_traces[] = { "param_linear_2080ti.json.gz", "kineto_legacy_resnet50_v100.2steps.json.gz" };
    for (int i = 0; i < 2; i++) {
        predict_trace(cpu_bound_traces[i], "amp", "", &base, &pred);
        double speedup = (double)base / (double)pred;
        ck_assert_msg(speedup >= 0.9 && speedup < 1.1 && speedup < gpu_bound, "%s: amp speedup %.3f (resnet50: %.3f)",
                      cpu_bound_traces[i], speedup, gpu_bound);
    }
}
END_TEST


/* ---- fused-adam ----------------------------------------------------- */

/*
 * CPU:  L0 5us | 10us host overhead, L1 5us | 10, L2 5us | 10, L3 5us | E 5us (not a launch)
 * GPU:  K0 10us (forward, from L0) | O1, O2, O3 2us each (optimizer, from L1-L3)
 * The stream has no launch latency or gap, so a kernel is ready when its
 * launch call ends.
 * Baseline: L0 0-5, L1 15-20, L2 30-35, L3 45-50, E 50-55; K0 5-15,
 * O1 20-22, O2 35-37, O3 50-52 -> 55us (the Python loop before each launch
 * dominates).
 * Fused: L1-L3 and their host overheads go; one launch (the median launch,
 * 5us) is spliced after L0: L0 0-5, Lf 5-10, E 10-15; the fused kernel
 * (6us, the sum) is ready at 10, the stream is free at 15 -> 15-21.
 * -> 21us.
 */
static tiny fused_graph(void)
{
    tiny t = tiny_new();
    tiny_launch(&t, "elementwise_kernel", US(5), US(10), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    for (int i = 0; i < 3; i++) {
        int32_t kernel = tiny_launch(&t, "multi_tensor_apply_kernel", US(5), US(2), RV_PHASE_OPTIMIZER, RV_TASK_KERNEL);
        rv_graph_task(t.graph, rv_graph_launch_of(t.graph, kernel))->host_overhead_ns = US(10);
    }
    tiny_task(&t, t.cpu, RV_TASK_CPU, "cudaStreamSynchronize", US(5), RV_PHASE_OTHER);
    return t;
}

START_TEST(fused_hand_built)
{
    tiny t = fused_graph();
    ck_assert_int_eq(makespan(t.graph), US(55));
    apply_ok(t.graph, "fused-adam", "");
    ck_assert_int_eq(makespan(t.graph), US(21));
    int live_kernels = 0;
    for (int32_t id = 0; id < rv_graph_task_count(t.graph); id++) {
        const rv_task *task = rv_graph_task(t.graph, id);
        if (!(task->flags & RV_TASK_FLAG_REMOVED) && task->kind == RV_TASK_KERNEL) live_kernels++;
    }
    ck_assert_int_eq(live_kernels, 2);
    rv_graph_free(t.graph);
}
END_TEST

/*
 * duration=bytes: 1000 fp32 parameters (4000 B) x 28 B of Adam traffic each
 * = 28,000 B at 1 GB/s x efficiency 1 = 28us.  As above the fused kernel is
 * ready at 10 and the stream free at 15: 15-43 -> 43us.  Without param_bytes
 * the graph has no weighted forward layer to count parameters from.
 */
START_TEST(fused_bytes_hand_built)
{
    tiny t = fused_graph();
    apply_ok(t.graph, "fused-adam", "duration=bytes,param_bytes=4000B,memory_bandwidth=1GB/s,efficiency=1");
    ck_assert_int_eq(makespan(t.graph), US(43));
    rv_graph_free(t.graph);
    t = fused_graph();
    GError *error = NULL;
    ck_assert(!apply_plugin(t.graph, "fused-adam", "duration=bytes", &error));
    ck_assert_msg(strstr(error->message, "param_bytes=") != NULL, "%s", error->message);
    g_error_free(error);
    rv_graph_free(t.graph);
}
END_TEST

/* On the legacy ResNet-50 (V100, shapes recorded) the parameters come from
 * the weight shapes and the bandwidth from the device name. */
START_TEST(fused_bytes_real)
{
    rv_graph *graph = load_trace("kineto_legacy_resnet50_v100.2steps.json.gz");
    char *notes = apply_notes(graph, "fused-adam", "duration=bytes");
    ck_assert_msg(strstr(notes, "97.29 MiB of parameters") && strstr(notes, "900.00 GB/s"), "%s", notes);
    ck_assert_msg(strstr(notes, "V100"), "%s", notes);
    g_free(notes);
    rv_graph_free(graph);
}
END_TEST

START_TEST(fused_no_optimizer)
{
    tiny t = amp_graph(); /* forward kernels only */
    GError *error = NULL;
    ck_assert(!apply_plugin(t.graph, "fused-adam", "", &error));
    ck_assert(g_error_matches(error, RV_ERROR, RV_ERROR_PLUGIN));
    g_clear_error(&error);
    rv_graph_free(t.graph);
    rv_graph *graph = load_trace("hta_simple_add_a100.json.gz");
    ck_assert(!apply_plugin(graph, "fused-adam", "", &error));
    ck_assert(g_error_matches(error, RV_ERROR, RV_ERROR_PLUGIN));
    g_clear_error(&error);
    rv_graph_free(graph);
}
END_TEST

/* The legacy ResNet-50 trace runs a per-parameter optimizer (2898 kernels
 * in 6 steps): fusing them must help, and never hurt. */
START_TEST(fused_real)
{
    int64_t base, pred;
    predict_trace("kineto_legacy_resnet50_v100.2steps.json.gz", "fused-adam", "", &base, &pred);
        ck_assert_msg(pred < base && pred > base / 2, "%" G_GINT64_FORMAT " vs %" G_GINT64_FORMAT, pred, base);
    predict_trace("hta_resnet50_v100.json.gz", "fused-adam", "", &base, &pred);
        ck_assert_msg(pred <= base, "%" G_GINT64_FORMAT " vs %" G_GINT64_FORMAT, pred, base);
}
END_TEST


/* ---- dataloader ----------------------------------------------------- */

/*
 * CPU:  D dataload 100us | L launch 5us       GPU: K 50us (from L)
 * Baseline: D 0-100, L 100-105, K 105-155 -> 155us.
 * remaining=10us: D 0-10, L 10-15, K 15-65 -> 65us.
 * remaining=100us or more: unchanged, 155us.
 */
static tiny dataloader_graph(void)
{
    tiny t = tiny_new();
    tiny_task(&t, t.cpu, RV_TASK_DATALOAD, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", US(100),
              RV_PHASE_DATALOAD);
    tiny_launch(&t, "elementwise_kernel", US(5), US(50), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    return t;
}

START_TEST(dataloader_hand_built)
{
    tiny t = dataloader_graph();
    ck_assert_int_eq(makespan(t.graph), US(155));
    apply_ok(t.graph, "dataloader", "remaining=10us");
    ck_assert_int_eq(makespan(t.graph), US(65));
    rv_graph_free(t.graph);
    const char *neutral[] = { "remaining=100us", "remaining=1s" };
    for (int i = 0; i < 2; i++) {
        t = dataloader_graph();
        apply_ok(t.graph, "dataloader", neutral[i]);
        ck_assert_int_eq(makespan(t.graph), US(155));
        rv_graph_free(t.graph);
    }
}
END_TEST

/*
 * Two steps, each: D loading 100us (step i) | L launch 5us -> K 50us.
 * Baseline: D0 0-100, L0 100-105, K0 105-155; D1 105-205, L1 205-210,
 * K1 210-260 -> 260us.
 * workers=2 (hand-off 10us, no page faults, no interference): both batches
 * load at once on two workers, 0-100.  D0' waits for its batch: 100-110,
 * L0 110-115, K0 115-165; D1' 115-125, L1 125-130, K1 165-215 -> 215us.
 * workers=1: the one worker loads them in turn, 0-100 and 100-200, so the
 * second step waits: D1' 200-210, L1 210-215, K1 215-265 -> 265us, slower
 * than the baseline (the hand-off is extra work).
 * These are start=cold (both workers start at the first instant).  With
 * start=steady (the default) the window is a sample of a running pipeline:
 * worker 0's first batch has 1/2 of its loading left and worker 1's 2/2, so
 * batches arrive every load / N from the start: workers=2, batch 0 at 50,
 * D0' 50-60, L0 60-65, K0 65-115; batch 1 at 100, D1' 100-110, L1 110-115,
 * K1 115-165 -> 165us; workers=1 has nothing to stagger: 265us.
 */
static tiny loading_graph_with(uint32_t operators_inside)
{
    tiny t = tiny_new();
    for (int step = 0; step < 2; step++) {
        int32_t load = tiny_task(&t, t.cpu, RV_TASK_DATALOAD, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                                 US(100), RV_PHASE_DATALOAD);
        if (operators_inside > 0) {
            /* a call inside the loading (pin_memory's), after the
             * operators of the transform: the profiler's count lands on it */
            int32_t inside = tiny_task(&t, t.cpu, RV_TASK_CPU, "cudaPointerGetAttributes", 0, RV_PHASE_DATALOAD);
            rv_graph_task(t.graph, inside)->step = step;
            g_array_set_size(t.graph->host_operators, (guint)rv_graph_task_count(t.graph));
            g_array_index(t.graph->host_operators, uint32_t, inside) = operators_inside;
        }
        int32_t kernel = tiny_launch(&t, "elementwise_kernel", US(5), US(50), RV_PHASE_FORWARD, RV_TASK_KERNEL);
        rv_graph_task(t.graph, load)->step = step;
        rv_graph_task(t.graph, kernel)->step = step;
        rv_graph_task(t.graph, rv_graph_launch_of(t.graph, kernel))->step = step;
        /* the steps the tasks name must exist (validate.h) */
        char *name = g_strdup_printf("ProfilerStep#%d", step);
        rv_step marks = { rv_strings_intern(t.graph->strings, name), 0, 0, load, kernel };
        g_array_append_val(t.graph->steps, marks);
        g_free(name);
    }
    return t;
}

static tiny two_step_loading_graph(void)
{
    return loading_graph_with(0);
}

START_TEST(dataloader_workers_hand_built)
{
    const char *mechanics = "handoff=10us,page_fault=0us,interference=0";
    /* worker_slowdown 2: one worker's two 200 us loads in a row, then the
     * hand-off, the launch and the kernel: 400 + 10 + 50 + 5 us. */
    const struct { int workers; const char *start; const char *slowdown; int64_t expected; } cases[] = {
        { 2, "cold", "1", US(215) }, { 1, "cold", "1", US(265) }, { 2, "steady", "1", US(165) },
        { 1, "steady", "1", US(265) }, { 1, "cold", "2", US(465) } };
    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        tiny t = two_step_loading_graph();
        ck_assert_int_eq(makespan(t.graph), US(260));
        char *text = g_strdup_printf("workers=%d,start=%s,worker_slowdown=%s,%s", cases[i].workers, cases[i].start,
                                     cases[i].slowdown, mechanics);
        int64_t span;
        apply_and_simulate(t.graph, "dataloader", text, &span, NULL);
        ck_assert_msg(span == cases[i].expected, "%s: %" G_GINT64_FORMAT, text, span);
        g_free(text);
        rv_graph_free(t.graph);
    }
}
END_TEST

/* pin_memory: the hand-off (30 us) runs on the pin_memory thread after each
 * load, and the loop keeps only the take from its queue (1 us).  One worker,
 * start=cold: loads 0-100 and 100-200; pins 100-130 and 200-230; D0' 130-131,
 * L0 131-136, K0 136-186; D1' 230-231, L1 231-236, K1 236-286 -> 286 us
 * (285 with the hand-off in the loop).  `auto` pins when the steps' batch
 * copies read pinned memory, and not when they read pageable memory. */
START_TEST(dataloader_workers_pin_memory)
{
    const char *mechanics = "workers=1,start=cold,handoff=30us,pinned_get=1us,page_fault=0us,interference=0,"
                            "worker_slowdown_high=1";
    const struct { const char *pin_memory; int64_t expected; } cases[] = { { "on", US(286) }, { "off", US(285) } };
    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        tiny t = two_step_loading_graph();
        char *text = g_strdup_printf("%s,pin_memory=%s", mechanics, cases[i].pin_memory);
        int64_t span;
        apply_and_simulate(t.graph, "dataloader", text, &span, NULL);
        ck_assert_msg(span == cases[i].expected, "%s: %" G_GINT64_FORMAT, text, span);
        g_free(text);
        rv_graph_free(t.graph);
    }
    const char *copies[] = { "Memcpy HtoD (Pinned -> Device)", "Memcpy HtoD (Pageable -> Device)" };
    for (guint i = 0; i < G_N_ELEMENTS(copies); i++) {
        tiny t = two_step_loading_graph();
        int32_t copy = tiny_launch(&t, copies[i], US(5), US(20), RV_PHASE_FORWARD, RV_TASK_MEMCPY);
        rv_graph_task(t.graph, copy)->bytes = 1 << 20;
        rv_graph_task(t.graph, copy)->step = 1;
        rv_graph_task(t.graph, rv_graph_launch_of(t.graph, copy))->step = 1;
        char *notes = apply_notes(t.graph, "dataloader", "workers=2");
        ck_assert_msg((strstr(notes, "pin_memory thread") != NULL) == (i == 0), "%s: %s", copies[i], notes);
        g_free(notes);
        rv_graph_free(t.graph);
    }
}
END_TEST

/* What the trace cannot show of a worker's batch (the threads it had in the
 * recorded process) is a range: at its high end each load takes
 * worker_slowdown_high times as long, two 150 us loads in a row on one
 * worker (300 + 10 + 50 + 5 us); worker_slowdown_high=1 gives none. */
START_TEST(dataloader_workers_range)
{
    tiny t = two_step_loading_graph();
    int64_t span;
    apply_and_simulate(t.graph, "dataloader", "workers=1,start=cold,handoff=10us,page_fault=0us,interference=0", &span,
                       NULL);
    ck_assert_int_eq(span, US(265));
    ck_assert(rv_graph_has_duration_ranges(t.graph));
    GError *error = NULL;
    ck_assert_msg(rv_graph_to_range_end(t.graph, TRUE, &error), "%s", error ? error->message : "");
    ck_assert_int_eq(makespan(t.graph), US(365));
    rv_graph_free(t.graph);

    t = two_step_loading_graph();
    apply_and_simulate(t.graph, "dataloader",
                       "workers=1,worker_slowdown_high=1,handoff=10us,page_fault=0us,interference=0", &span, NULL);
    ck_assert(!rv_graph_has_duration_ranges(t.graph));
    rv_graph_free(t.graph);
}
END_TEST

/* The profiler's share of the recorded loading is the range's low end:
 * 40 operators at 1 us (a bound of 0.5 us x profiler_whole_cost 2) in each
 * 100 us load, so each load is 60 us at the low end: 120 + 10 + 50 + 5 us.
 * Operators counted before the loader itself are the training loop's: a
 * count there moves nothing. */
START_TEST(dataloader_workers_profiler_share)
{
    tiny t = loading_graph_with(40);
    t.graph->timing.profiler_op_cost = (rv_estimate){ .value = 500, .spread = 0, .samples = 100,
                                                      .source = RV_SOURCE_BOUND };
    for (int32_t id = 0; id < rv_graph_task_count(t.graph); id++)
        if (rv_graph_task(t.graph, id)->kind == RV_TASK_DATALOAD) g_array_index(t.graph->host_operators, uint32_t, id) = 1000;
    int64_t span;
    apply_and_simulate(t.graph, "dataloader",
                       "workers=1,start=cold,handoff=10us,page_fault=0us,worker_slowdown_high=1,profiler_whole_cost=2,"
                       "interference=0",
                       &span, NULL);
    ck_assert_int_eq(span, US(265));
    GError *error = NULL;
    ck_assert_msg(rv_graph_to_range_end(t.graph, FALSE, &error), "%s", error ? error->message : "");
    ck_assert_int_eq(makespan(t.graph), US(185));
    rv_graph_free(t.graph);
}
END_TEST

/* The median of the steps after the first (the steady step). */
static int64_t steady_step(const GArray *steps, gboolean simulated)
{
    GArray *values = g_array_new(FALSE, FALSE, sizeof(int64_t));
    for (guint s = 1; s < steps->len; s++) {
        const rv_step_time *step = &g_array_index(steps, rv_step_time, s);
        int64_t value = simulated ? step->simulated_ns : step->recorded_ns;
        g_array_append_val(values, value);
    }
    g_array_sort(values, compare_int64_values);
    int64_t median = g_array_index(values, int64_t, values->len / 2);
    if (values->len % 2 == 0) median = (median + g_array_index(values, int64_t, values->len / 2 - 1)) / 2;
    g_array_unref(values);
    return median;
}

static int64_t predicted_steady_step(const char *trace, const char *text)
{
    rv_graph *graph = load_trace(trace);
    rv_sim_result sim = { 0 };
    apply_and_replay(graph, "dataloader", text, &sim, NULL);
    GArray *steps = rv_step_times(graph, &sim);
    int64_t steady = steady_step(steps, TRUE);
    g_array_unref(steps);
    rv_sim_result_clear(&sim);
    rv_graph_free(graph);
    return steady;
}

/* The recorded pair: ResNet-50 with num_workers 0 and 4.  The default model
 * (host interference at the prior measured on other hosts' recordings, not
 * on this pair) predicts the variant's steady step within 5%; more
 * interference slows the prediction, as it should, and none (free cores)
 * makes it faster, too fast for the recording (the variant's host did
 * slow beside its workers). */
START_TEST(dataloader_workers_pair)
{
    const char *baseline = "pairs/dataloader_workers_v100/num_workers_0.json.gz";
    rv_graph *variant = load_trace("pairs/dataloader_workers_v100/num_workers_4.json.gz");
    GArray *recorded_steps = rv_step_times(variant, NULL);
    int64_t recorded = steady_step(recorded_steps, FALSE);
    g_array_unref(recorded_steps);
    rv_graph_free(variant);
    int64_t predicted = predicted_steady_step(baseline, "workers=4");
    int64_t contended = predicted_steady_step(baseline, "workers=4,interference=0.4");
    int64_t free_cores = predicted_steady_step(baseline, "workers=4,interference=0");
    double error = (double)(predicted - recorded) / (double)recorded;
    g_printerr("dataloader workers=4: recorded %.3f ms, predicted %.3f ms (%+.2f%%), with interference 0.4 %.3f ms, "
               "0 %.3f ms\n", recorded / 1e6, predicted / 1e6, 100 * error, contended / 1e6, free_cores / 1e6);
    ck_assert_msg(fabs(error) <= 0.05, "predicted %.3f ms, recorded %.3f ms", predicted / 1e6, recorded / 1e6);
    ck_assert_int_gt(contended, predicted);
    ck_assert_int_lt(free_cores, predicted);
    ck_assert_int_lt(free_cores, recorded);
}
END_TEST

/* A model of three repeated layers between an embedding and a head:
 * forward  embed | (mm gelu add) x 3 | head
 * backward head' | (add' gelu' mm') x 3 | embed'
 * Each kernel's op is its ATen operator, for the early stop. */
static tiny three_layer_graph_with(gboolean host_calls)
{
    tiny t = tiny_new();
    static const char *const layer[][2] = { { "gemm_kernel", "aten::addmm" }, { "gelu_kernel", "aten::gelu" },
                                            { "add_kernel", "aten::add" } };
    static const char *const layer_backward[] = { "add_backward", "gelu_backward", "gemm_backward" };
    tiny_launch(&t, "embedding_kernel", US(5), US(10), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    for (int l = 0; l < 3; l++)
        for (int k = 0; k < 3; k++) {
            if (host_calls && k == 2) /* a call that launches nothing, between gelu and add */
                rv_graph_task(t.graph, tiny_task(&t, t.cpu, RV_TASK_CPU, "cudaStreamIsCapturing", US(2),
                                                 RV_PHASE_FORWARD))->host_overhead_ns = US(3);
            int32_t id = tiny_launch(&t, layer[k][0], US(5), US(10 * (k + 1)), RV_PHASE_FORWARD, RV_TASK_KERNEL);
            rv_graph_task(t.graph, id)->op = rv_strings_intern(t.graph->strings, layer[k][1]);
            if (host_calls) rv_graph_task(t.graph, id - 1)->host_overhead_ns = US(10); /* its launch */
        }
    tiny_launch(&t, "head_kernel", US(5), US(40), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    tiny_launch(&t, "head_backward", US(5), US(40), RV_PHASE_BACKWARD, RV_TASK_KERNEL);
    for (int l = 0; l < 3; l++)
        for (int k = 0; k < 3; k++) tiny_launch(&t, layer_backward[k], US(5), US(10), RV_PHASE_BACKWARD, RV_TASK_KERNEL);
    tiny_launch(&t, "embedding_backward", US(5), US(10), RV_PHASE_BACKWARD, RV_TASK_KERNEL);
    tiny_close_one_step(&t);
    tiny_record(t.graph);
    return t;
}

static tiny three_layer_graph(void)
{
    return three_layer_graph_with(FALSE);
}

static int64_t total_host_overhead(const rv_graph *graph)
{
    int64_t total_ns = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if (!(task->flags & RV_TASK_FLAG_REMOVED)) total_ns += task->host_overhead_ns;
    }
    return total_ns;
}

/* The host time checkpointing adds, on the layers of three_layer_graph_with
 * host calls: each layer's launches carry 10 us of host time and a call
 * that launches nothing (2 us, after 3 us) sits before the add's launch.
 * use_reentrant=true recomputes the whole layer: 10 + 10 + (10 + 3 + 2) us
 * of host time a layer, the call between included.  use_reentrant=false
 * recomputes the product alone, and with hook_cost=1 the layer's forward
 * host time (10 + 10 + 3 + 10 us) doubles, the product's copy carries its
 * doubled 20 us, and the backward's unpacking pays the forward's 33 us
 * again: 86 us a layer. */
START_TEST(checkpoint_host_time_hand_built)
{
    const struct { const char *text; int64_t added_ns; } cases[] = {
        { "cut=blocks", 3 * US(35) },
        { "cut=blocks,use_reentrant=false,hook_cost=0", 3 * US(10) },
        { "cut=blocks,use_reentrant=false,hook_cost=1", 3 * US(33 + 20 + 33) },
        { "cut=blocks,hook_cost=1", 3 * US(35) }, /* no hooks in the reentrant checkpoint */
    };
    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        tiny t = three_layer_graph_with(TRUE);
        int64_t before_ns = total_host_overhead(t.graph);
        GError *error = NULL;
        ck_assert_msg(apply_plugin(t.graph, "checkpoint", cases[i].text, &error), "%s: %s", cases[i].text,
                      error ? error->message : "");
        ck_assert_msg(total_host_overhead(t.graph) - before_ns == cases[i].added_ns, "%s: %" G_GINT64_FORMAT " ns added",
                      cases[i].text, total_host_overhead(t.graph) - before_ns);
        rv_graph_free(t.graph);
    }
    tiny t = three_layer_graph_with(TRUE);
    assert_apply_fails(t.graph, "checkpoint", "cut=blocks,hook_cost=-1", RV_ERROR_USAGE, "hook_cost");
    rv_graph_free(t.graph);
}
END_TEST

/* Four layers of eight kernels between an embedding and a head, the
 * backward likewise in reverse; the first layer (the backward's last)
 * unlike the rest: with `first_kernels` 8 one of its kernels differs, with
 * 6 it runs six, the last another kernel (a stage's first block). */
static void launch_layer(tiny *t, guint layer, guint first_kernels, const char *kind, rv_phase phase)
{
    char name[40];
    guint kernels = layer == 0 ? first_kernels : 8;
    for (guint k = 0; k < kernels; k++) {
        gboolean unlike = layer == 0 && (first_kernels == 8 ? k == 3 : k == kernels - 1);
        g_snprintf(name, sizeof name, "%slayer_%s_%u", unlike ? "first_" : "", kind, k);
        tiny_launch(t, name, US(5), US(10), phase, RV_TASK_KERNEL);
    }
}

static tiny unlike_first_layer_graph(guint first_kernels)
{
    tiny t = tiny_new();
    tiny_launch(&t, "embedding_kernel", US(5), US(10), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    for (guint layer = 0; layer < 4; layer++) launch_layer(&t, layer, first_kernels, "kernel", RV_PHASE_FORWARD);
    tiny_launch(&t, "head_kernel", US(5), US(40), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    tiny_launch(&t, "head_backward", US(5), US(40), RV_PHASE_BACKWARD, RV_TASK_KERNEL);
    for (guint layer = 4; layer-- > 0;) launch_layer(&t, layer, first_kernels, "backward", RV_PHASE_BACKWARD);
    tiny_launch(&t, "embedding_backward", US(5), US(10), RV_PHASE_BACKWARD, RV_TASK_KERNEL);
    tiny_close_one_step(&t);
    tiny_record(t.graph);
    return t;
}

/* cut=blocks finds every layer when the first differs from the rest in
 * one kernel (the repetition tolerates it) or in length (an unlike first
 * instance beside the run), and recomputes nothing outside them. */
START_TEST(checkpoint_blocks_unlike_first)
{
    const struct { guint first_kernels, copies; } cases[] = { { 8, 32 }, { 6, 30 } };
    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        tiny t = unlike_first_layer_graph(cases[i].first_kernels);
        guint before = count_tasks_named(t.graph, "layer_kernel_");
        GError *error = NULL;
        ck_assert_msg(apply_plugin(t.graph, "checkpoint", "cut=blocks", &error), "%s", error ? error->message : "");
        ck_assert_uint_eq(count_tasks_named(t.graph, "layer_kernel_") - before, cases[i].copies);
        ck_assert_uint_eq(count_tasks_named(t.graph, "head_kernel"), 1);
        ck_assert_uint_eq(count_tasks_named(t.graph, "embedding_kernel"), 1);
        rv_graph_free(t.graph);
    }
}
END_TEST

/* cut=blocks recomputes each repeated layer, none of the embedding or the
 * head; a layer's copy goes before that layer's backward; early stop
 * leaves out what nothing in the layer saves (gelu saves the product, the
 * add nothing: only the product runs again). */
START_TEST(checkpoint_blocks_hand_built)
{
    const struct { const char *text; guint gemms, gelus, adds; } cases[] = {
        { "cut=blocks", 6, 6, 6 }, { "cut=blocks,use_reentrant=false", 6, 3, 3 } };
    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        tiny t = three_layer_graph();
        GError *error = NULL;
        ck_assert_msg(apply_plugin(t.graph, "checkpoint", cases[i].text, &error), "%s: %s", cases[i].text,
                      error ? error->message : "");
        ck_assert_uint_eq(count_tasks_named(t.graph, "gemm_kernel"), cases[i].gemms);
        ck_assert_uint_eq(count_tasks_named(t.graph, "gelu_kernel"), cases[i].gelus);
        ck_assert_uint_eq(count_tasks_named(t.graph, "add_kernel"), cases[i].adds);
        ck_assert_uint_eq(count_tasks_named(t.graph, "head_kernel"), 1);
        ck_assert_uint_eq(count_tasks_named(t.graph, "embedding_kernel"), 1);
        /* the first layer's copy ends right before its backward, the last
         * backward layer: its GEMM copy follows the second layer's */
        rv_sim_result sim = { 0 };
        ck_assert(rv_simulate(t.graph, NULL, &sim, NULL));
        int64_t last_copy_end = 0, first_layer_backward = INT64_MAX;
        for (int32_t id = 0; id < rv_graph_task_count(t.graph); id++) {
            const rv_task *task = rv_graph_task(t.graph, id);
            const char *name = rv_strings_get(t.graph->strings, task->name);
            if (task->phase == RV_PHASE_BACKWARD && strcmp(name, "gemm_kernel") == 0)
                last_copy_end = MAX(last_copy_end, sim.end_ns[id]);
            if (strcmp(name, "gemm_backward") == 0) first_layer_backward = MAX(first_layer_backward == INT64_MAX ? 0 : first_layer_backward, sim.start_ns[id]);
        }
        ck_assert_int_le(last_copy_end, first_layer_backward);
        rv_sim_result_clear(&sim);
        rv_graph_free(t.graph);
    }
    /* forward and backward that repeat nothing: a clear refusal */
    tiny t = tiny_new();
    tiny_launch(&t, "a_kernel", US(5), US(10), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    tiny_launch(&t, "b_kernel", US(5), US(10), RV_PHASE_BACKWARD, RV_TASK_KERNEL);
    tiny_close_one_step(&t);
    assert_apply_fails(t.graph, "checkpoint", "cut=blocks", RV_ERROR_PLUGIN, "repeat no block");
    rv_graph_free(t.graph);
}
END_TEST

/* A job of several ranks: each rank's DataLoader feeds that rank alone, so
 * its batches go to worker channels of its own, on its rank (an edge across
 * ranks outside a collective breaks the job: validate.h). */
START_TEST(dataloader_workers_per_rank)
{
    rv_graph *job = load_dlrm_job();
    GError *error = NULL;
    ck_assert_msg(apply_plugin(job, "dataloader", "workers=2", &error), "%s", error ? error->message : "");
    guint channels = 0;
    for (guint r = 0; r < job->resources->len; r++) {
        const rv_resource *resource = &g_array_index(job->resources, rv_resource, r);
        const char *name = rv_strings_get(job->strings, resource->name);
        if (resource->kind != RV_RES_CHANNEL || strstr(name, "dataloader worker") == NULL) continue;
        channels++;
        ck_assert_int_ge(resource->rank_index, 0);
        char *want = g_strdup_printf("rank %" G_GINT64_FORMAT " dataloader worker",
                                     g_array_index(job->ranks, rv_rank, resource->rank_index).rank);
        ck_assert_msg(g_str_has_prefix(name, want), "%s on rank index %d", name, resource->rank_index);
        g_free(want);
    }
    ck_assert_uint_eq(channels, 2 * job->ranks->len);
    rv_sim_result sim = { 0 };
    ck_assert(rv_simulate(job, NULL, &sim, NULL));
    rv_sim_result_clear(&sim);
    rv_graph_free(job);
}
END_TEST

START_TEST(dataloader_nothing)
{
    tiny t = amp_graph();
    GError *error = NULL;
    ck_assert(!apply_plugin(t.graph, "dataloader", "", &error));
    ck_assert(g_error_matches(error, RV_ERROR, RV_ERROR_PLUGIN));
    g_error_free(error);
    rv_graph_free(t.graph);
}
END_TEST

/* kineto_legacy_resnet50_v100 loads data in the main thread (~69 ms a step). */
START_TEST(dataloader_real)
{
    check_neutral("kineto_legacy_resnet50_v100.2steps.json.gz", "dataloader", "remaining=10s");
    int64_t base, pred;
    predict_trace("kineto_legacy_resnet50_v100.2steps.json.gz", "dataloader", "", &base, &pred);
    ck_assert_msg(pred < base * 0.8, "%" G_GINT64_FORMAT " vs %" G_GINT64_FORMAT, pred, base);
}
END_TEST


/* ---- network -------------------------------------------------------- */

/*
 * CPU:  L 5us | L2 5us        GPU: K 100us (from L) | C all-reduce 200us (comm, from L2)
 * Baseline: K 5-105, C ready at 10, stream free at 105: 105-305 -> 305us.
 * bandwidth_factor=2: C 100us -> 205us.
 * bandwidth_factor=2, added_latency=10us: C 110 -> 215us.
 * bandwidth_factor=2, fixed_latency=40us: C 40 + 160/2 = 120 -> 225us.
 */
static tiny network_graph(void)
{
    tiny t = tiny_new();
    tiny_launch(&t, "volta_sgemm_128x64_nn", US(5), US(100), RV_PHASE_BACKWARD, RV_TASK_KERNEL);
    tiny_launch(&t, "ncclKernel_AllReduce_RING_LL_Sum_float", US(5), US(200), RV_PHASE_BACKWARD, RV_TASK_COMM);
    return t;
}

START_TEST(network_hand_built)
{
    const struct { const char *text; int64_t expected; } cases[] = {
        { "bandwidth_factor=1", US(305) },
        { "bandwidth_factor=2", US(205) },
        { "bandwidth_factor=2,added_latency=10us", US(215) },
        { "bandwidth_factor=2,fixed_latency=40us", US(225) },
        { "bandwidth_factor=0.5", US(505) },
    };
    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        tiny t = network_graph();
        apply_ok(t.graph, "network", cases[i].text);
        ck_assert_msg(makespan(t.graph) == cases[i].expected, "%s: %" G_GINT64_FORMAT, cases[i].text, makespan(t.graph));
        rv_graph_free(t.graph);
    }
    tiny t = amp_graph();
    GError *error = NULL;
    ck_assert(!apply_plugin(t.graph, "network", "", &error));
    ck_assert(g_error_matches(error, RV_ERROR, RV_ERROR_PLUGIN));
    g_error_free(error);
    rv_graph_free(t.graph);
}
END_TEST

START_TEST(network_real)
{
    /* Its small all-reduces overlap a host-bound backward pass: a faster
     * network gains nothing, half the bandwidth stays hidden (never faster),
     * a tenth of it shows up. */
    const char *trace = "hta_transformer_ddp_v100_rank1.2steps.json.gz";
    check_neutral(trace, "network", "bandwidth_factor=1");
    int64_t base, fast, half, tenth;
    predict_trace(trace, "network", "bandwidth_factor=4", &base, &fast);
    predict_trace(trace, "network", "bandwidth_factor=0.5", &base, &half);
    predict_trace(trace, "network", "bandwidth_factor=0.1", &base, &tenth);
    ck_assert_msg(fast <= base && base <= half && half < tenth && tenth > base * 1.2,
                  "fast %" G_GINT64_FORMAT " base %" G_GINT64_FORMAT " half %" G_GINT64_FORMAT " tenth %" G_GINT64_FORMAT,
                  fast, base, half, tenth);
}
END_TEST


/* ---- ddp ------------------------------------------------------------ */

/*
 * CPU:  Lf 5us (aten::linear, dims [[32,1024],[1024,1024],[1024]]) | Lb 5us (AddmmBackward0) | Lo 5us (optimizer)
 * GPU:  Kf 100us | Kb 100us | Ko 10us (from Lf, Lb, Lo)
 * Baseline: Kf 5-105, Kb 105-205, Lo 10-15, Ko 205-215 -> 215us.
 * Gradient: 4 * (1024*1024 + 1024) = 4198400 B, one bucket.  world=2 with
 * gpus_per_node=1: ring over 2 nodes = 2*(p-1)*5us + 2(p-1)/p * S/B with
 * B = 41.984 GB/s -> 10 + 100 = 110us.  The all-reduce follows Kb
 * (205-315); as in NCCL DDP the optimizer's kernel waits for it, not its
 * launch call: Lo runs 10-15, Ko 315-325 -> 325us.
 */
static tiny ddp_graph(void)
{
    tiny t = tiny_new();
    int32_t kf = tiny_launch(&t, "volta_sgemm_128x64_nn", US(5), US(100), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    int32_t layer = rv_strings_intern(t.graph->strings, "aten::linear");
    int32_t dims = rv_strings_intern(t.graph->strings, "[[32,1024],[1024,1024],[1024]]");
    rv_task *call = rv_graph_task(t.graph, rv_graph_launch_of(t.graph, kf));
    call->layer = layer;
    call->input_dims = dims;
    rv_graph_task(t.graph, kf)->layer = layer;
    int32_t kb = tiny_launch(&t, "volta_sgemm_128x64_nt", US(5), US(100), RV_PHASE_BACKWARD, RV_TASK_KERNEL);
    rv_graph_task(t.graph, kb)->layer = rv_strings_intern(t.graph->strings, "autograd::engine::evaluate_function: AddmmBackward0");
    tiny_launch(&t, "multi_tensor_apply_kernel", US(5), US(10), RV_PHASE_OPTIMIZER, RV_TASK_KERNEL);
    return t;
}

START_TEST(ddp_hand_built)
{
    tiny t = ddp_graph();
    ck_assert_int_eq(makespan(t.graph), US(215));
    apply_ok(t.graph, "ddp", "world=1");
    ck_assert_int_eq(makespan(t.graph), US(215));
    rv_graph_free(t.graph);
    t = ddp_graph();
    apply_ok(t.graph, "ddp", "world=2,gpus_per_node=1,bandwidth=41984MB/s,latency=5us");
    ck_assert_int_eq(makespan(t.graph), US(325));
    rv_graph_free(t.graph);
}
END_TEST

/* hta_resnet50_v100 has no Input Dims: gradient sizes come from a file,
 * 50 tensors of 2 MiB (about ResNet-50's 97.5 MiB). */
START_TEST(ddp_real)
{
    check_neutral("hta_resnet50_v100.json.gz", "ddp", "world=1");
    GString *list = g_string_new("[");
    for (int i = 0; i < 50; i++) g_string_append_printf(list, "%s2097152", i ? "," : "");
    g_string_append_c(list, ']');
    char *path = NULL;
    int fd = g_file_open_tmp("rv-params-XXXXXX.json", &path, NULL);
    ck_assert_int_ge(fd, 0);
    ck_assert(write(fd, list->str, list->len) == (ssize_t)list->len);
    close(fd);
    int64_t base, previous = 0;
    const char *bandwidths[] = { "100Gbps", "25Gbps", "10Gbps" };
    for (int i = 0; i < 3; i++) {
        char *text = g_strdup_printf("world=16,bandwidth=%s,param_sizes=%s", bandwidths[i], path);
        int64_t pred;
        predict_trace("hta_resnet50_v100.json.gz", "ddp", text, &base, &pred);
        g_free(text);
        ck_assert_msg(pred >= base && pred > previous, "%s: %" G_GINT64_FORMAT " after %" G_GINT64_FORMAT,
                      bandwidths[i], pred, previous);
        previous = pred;
    }
    g_unlink(path);
    g_free(path);
    g_string_free(list, TRUE);
}
END_TEST

/* ---- suite ---------------------------------------------------------- */

/* ---- unprofiled ----------------------------------------------------------- */

/* With whole_cost=1 each call's host overhead loses exactly its bounded
 * profiler share (the operators before it x the trace's bound, at most the
 * overhead); by default the operators x the bound x 4.1, at most the
 * overhead, so the steps shrink further.  The reports then see no profiler
 * time left. */
START_TEST(unprofiled_real)
{
    rv_graph *graph = load_trace("kineto_legacy_resnet50_v100.2steps.json.gz");
    ck_assert_int_eq(graph->timing.profiler_op_cost.source, RV_SOURCE_BOUND);
    int32_t n = rv_graph_task_count(graph);
    int64_t *expected = g_new(int64_t, n), *expected_whole = g_new(int64_t, n);
    int64_t whole_cost_ns = llround((double)graph->timing.profiler_op_cost.value * 4.1);
    for (int32_t id = 0; id < n; id++) {
        int64_t overhead_ns = rv_graph_task(graph, id)->host_overhead_ns;
        expected[id] = overhead_ns - rv_task_profiler_overhead_ns(graph, id);
        expected_whole[id] = MAX(0, overhead_ns - (int64_t)rv_task_host_operators(graph, id) * whole_cost_ns);
    }
    int64_t share = rv_graph_profiler_overhead_ns(graph), before = step_total(graph);
    ck_assert_int_gt(share, 0);
    rv_graph *same = rv_graph_copy(graph), *whole = rv_graph_copy(graph);
    apply_ok(same, "unprofiled", "op_cost=0us");
    ck_assert_int_eq(step_total(same), before);
    rv_graph_free(same);
    apply_ok(graph, "unprofiled", "whole_cost=1");
    apply_ok(whole, "unprofiled", "");
    for (int32_t id = 0; id < n; id++) {
        ck_assert_msg(rv_graph_task(graph, id)->host_overhead_ns == expected[id], "task %d", id);
        ck_assert_msg(rv_graph_task(whole, id)->host_overhead_ns == expected_whole[id], "task %d, default", id);
    }
    ck_assert_int_eq(rv_graph_profiler_overhead_ns(graph), 0);
    int64_t after = step_total(graph), after_whole = step_total(whole);
    g_printerr("unprofiled: %.3f ms of host time out by the bound, steps %.3f -> %.3f ms (default: %.3f ms)\n",
               share / 1e6, before / 1e6, after / 1e6, after_whole / 1e6);
    ck_assert_int_le(after, before);
    ck_assert_int_ge(after, before - share);
    ck_assert_int_lt(after_whole, after);
    g_free(expected);
    g_free(expected_whole);
    rv_graph_free(whole);
    rv_graph_free(graph);
}
END_TEST

START_TEST(unprofiled_refusals)
{
    rv_graph *graph = load_trace("hta_resnet50_v100.json.gz");
    assert_apply_fails(graph, "unprofiled", "op_cost=fast", RV_ERROR_USAGE, "op_cost must be auto or a duration");
    assert_apply_fails(graph, "unprofiled", "op_cost=-1us", RV_ERROR_USAGE, "op_cost must be auto or a duration");
    assert_apply_fails(graph, "unprofiled", "whole_cost=0.5", RV_ERROR_USAGE, "whole_cost must be a number from 1");
    graph->timing.profiler_op_cost.source = RV_SOURCE_NONE; /* as in a trace with too few sibling gaps */
    assert_apply_fails(graph, "unprofiled", "", RV_ERROR_PLUGIN, "give op_cost=DURATION");
    apply_ok(graph, "unprofiled", "op_cost=1us");
    rv_graph_free(graph);
}
END_TEST

static Suite *plugins_suite(void)
{
    Suite *suite = suite_create("plugins");
    TCase *tc = tcase_create("amp");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, amp_hand_built);
    tcase_add_test(tc, amp_neutral_hand_built);
    tcase_add_test(tc, amp_optimizer_modes);
    tcase_add_test(tc, amp_nothing_to_do);
    tcase_add_test(tc, amp_neutral_real);
    tcase_add_test(tc, amp_real);
    suite_add_tcase(suite, tc);
    tc = tcase_create("fused-adam");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, fused_hand_built);
    tcase_add_test(tc, fused_no_optimizer);
    tcase_add_test(tc, fused_bytes_hand_built);
    tcase_add_test(tc, fused_bytes_real);
    tcase_add_test(tc, fused_real);
    suite_add_tcase(suite, tc);
    tc = tcase_create("dataloader");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, dataloader_hand_built);
    tcase_add_test(tc, dataloader_workers_hand_built);
    tcase_add_test(tc, dataloader_workers_range);
    tcase_add_test(tc, dataloader_workers_pin_memory);
    tcase_add_test(tc, dataloader_workers_profiler_share);
    tcase_add_test(tc, dataloader_workers_pair);
    tcase_add_test(tc, dataloader_nothing);
    tcase_add_test(tc, dataloader_workers_per_rank);
    tcase_add_test(tc, checkpoint_blocks_hand_built);
    tcase_add_test(tc, checkpoint_host_time_hand_built);
    tcase_add_test(tc, checkpoint_blocks_unlike_first);
    tcase_add_test(tc, dataloader_real);
    suite_add_tcase(suite, tc);
    tc = tcase_create("network");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, network_hand_built);
    tcase_add_test(tc, network_real);
    suite_add_tcase(suite, tc);
    tc = tcase_create("ddp");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, ddp_hand_built);
    tcase_add_test(tc, ddp_real);
    suite_add_tcase(suite, tc);
    tc = tcase_create("unprofiled");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, unprofiled_real);
    tcase_add_test(tc, unprofiled_refusals);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void)
{
    static const char *const traces[] = { "hta_resnet50_v100.json.gz", "hta_simple_add_a100.json.gz", "hta_transformer_ddp_v100_rank1.2steps.json.gz", "kineto_legacy_resnet50_v100.2steps.json.gz", "param_linear_2080ti.json.gz","pairs/dataloader_workers_v100/num_workers_0.json.gz", "pairs/dataloader_workers_v100/num_workers_4.json.gz", NULL };
    require_project_traces(traces);
    SRunner *runner = srunner_create(plugins_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
