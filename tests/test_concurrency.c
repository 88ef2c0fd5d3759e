/*
 * test_concurrency.c - kernels sharing a GPU: the replay's sharing rule
 * (contention.h), the transform API's move of a run to another resource
 * (transform.h), and the concurrent-kernels plugin (GOLDYLOC) on
 * hand-built graphs and on the shipped Transformer rank.
 *
 * The rule: kernels that overlap on one GPU progress at 1 / the highest
 * load among the resources they ask for, so hand-built overlaps have
 * exact answers; a kernel alone runs at its duration.  The plugin: the
 * backward pass of the V100 Transformer rank has ~300 pairs of independent
 * GEMMs (each linear layer's data and weight gradients); the thesis
 * measures default concurrency of 2 independent GEMMs at +10% over
 * running them one after the other (geometric mean), tuned GOLDYLOC
 * kernels higher, and nothing can beat free overlap.
 */
#include "plugin_harness.h"
#include "reverie/contention.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A GPU kernel on `resource`, after `previous` on it (-1: first). */
static int32_t kernel(rv_graph *graph, int32_t resource, const char *name, const char *op, rv_phase phase, int64_t ns,
                      int32_t previous)
{
    rv_task task = { 0 };
    task.duration_ns = ns;
    task.correlation = -1;
    task.resource = resource;
    task.name = rv_strings_intern(graph->strings, name);
    task.op = op ? rv_strings_intern(graph->strings, op) : 0;
    task.input_dims = -1;
    task.step = 0;
    task.kind = RV_TASK_KERNEL;
    task.phase = (uint8_t)phase;
    task.flags = RV_TASK_FLAG_GPU;
    task.recorded_start_ns = previous >= 0 ? rv_graph_task(graph, previous)->recorded_start_ns + 1000 : 0;
    int32_t id = rv_graph_add_task(graph, &task);
    if (previous >= 0) rv_graph_add_edge(graph, previous, id, RV_EDGE_STREAM, FALSE);
    return id;
}

static void replay(const rv_graph *graph, rv_sim_result *sim)
{
    GError *error = NULL;
    ck_assert_msg(rv_simulate(graph, NULL, sim, &error), "simulate: %s", error ? error->message : "");
}

/* Demands by hand: a kernel asks `threads` of the threads, `others` of
 * the other occupancy resources and `bandwidth` of the bandwidth. */
static void ask(rv_graph *graph, int32_t task, double threads, double others, double bandwidth)
{
    if (graph->kernel_demands->len <= (guint)task) g_array_set_size(graph->kernel_demands, (guint)task + 1);
    rv_kernel_demand demand = { { (float)threads, (float)others, (float)others, (float)others }, 0, 0 };
    demand.bandwidth_ns = (float)(bandwidth * (double)rv_graph_task(graph, task)->duration_ns);
    g_array_index(graph->kernel_demands, rv_kernel_demand, task) = demand;
}

/* ---- the rule ---------------------------------------------------------------- */

/*
 * GPU 0: A (100 us) on stream 7, B (100 us) on stream 8, both at 0; GPU 1:
 * C (100 us) alone.  Threads 0.6 + 0.6 = 1.2: both run at 1/1.2 and end
 * at 120 us; at 0.6 + 0.3 nothing is over capacity: 100 us.  Bandwidth
 * 0.7 + 0.6 = 1.3 with threads light: 130 us.  C keeps 100 us throughout.
 */
START_TEST(overlapping_kernels_share_by_the_most_loaded_resource)
{
    rv_graph *graph = rv_graph_new(NULL, "sharing");
    int32_t s7 = rv_graph_add_resource(graph, RV_RES_GPU_STREAM, 0, 7, "gpu 0 stream 7");
    int32_t s8 = rv_graph_add_resource(graph, RV_RES_GPU_STREAM, 0, 8, "gpu 0 stream 8");
    int32_t other = rv_graph_add_resource(graph, RV_RES_GPU_STREAM, 1, 7, "gpu 1 stream 7");
    int32_t a = kernel(graph, s7, "gemm_a", NULL, RV_PHASE_FORWARD, US(100), -1);
    int32_t b = kernel(graph, s8, "gemm_b", NULL, RV_PHASE_FORWARD, US(100), -1);
    int32_t c = kernel(graph, other, "gemm_c", NULL, RV_PHASE_FORWARD, US(100), -1);
    rv_sim_result sim = { 0 };
    replay(graph, &sim);  /* the rule off: full speed */
    ck_assert_int_eq(sim.end_ns[a], US(100));
    ck_assert_int_eq(sim.end_ns[b], US(100));
    rv_sim_result_clear(&sim);

    graph->sharing.enabled = TRUE;
    double cases[3][4] = { { 0.6, 0.6, 0, 0 }, { 0.6, 0.3, 0, 0 }, { 0.1, 0.1, 0.7, 0.6 } };
    int64_t expected[3] = { US(120), US(100), US(130) };
    for (int k = 0; k < 3; k++) {
        ask(graph, a, cases[k][0], 0.05, cases[k][2]);
        ask(graph, b, cases[k][1], 0.05, cases[k][3]);
        ask(graph, c, 1.0, 1.0, 1.0);
        replay(graph, &sim);
        ck_assert_int_eq(sim.end_ns[a], expected[k]);
        ck_assert_int_eq(sim.end_ns[b], expected[k]);
        ck_assert_int_eq(sim.end_ns[c], US(100));
        rv_sim_result_clear(&sim);
    }
    rv_graph_free(graph);
}
END_TEST

/* A kernel that joins later slows the first only while they overlap:
 * A (100 us) from 0; B (50 us) from 40 us behind a kernel that asks for
 * nothing.  Threads 0.6 + 0.6: from 40 both at 1/1.2, so B's 50 us of work
 * takes 60 us (ends at 100) while A does 50 of its last 60; A's last 10
 * run alone: A ends at 110. */
START_TEST(a_kernel_joining_later_costs_only_its_overlap)
{
    rv_graph *graph = rv_graph_new(NULL, "sharing");
    int32_t s7 = rv_graph_add_resource(graph, RV_RES_GPU_STREAM, 0, 7, "gpu 0 stream 7");
    int32_t s8 = rv_graph_add_resource(graph, RV_RES_GPU_STREAM, 0, 8, "gpu 0 stream 8");
    int32_t a = kernel(graph, s7, "gemm_a", NULL, RV_PHASE_FORWARD, US(100), -1);
    int32_t lead = kernel(graph, s8, "tiny", NULL, RV_PHASE_FORWARD, US(40), -1);
    int32_t b = kernel(graph, s8, "gemm_b", NULL, RV_PHASE_FORWARD, US(50), lead);
    graph->sharing.enabled = TRUE;
    ask(graph, a, 0.6, 0.05, 0);
    ask(graph, lead, 0, 0, 0);
    ask(graph, b, 0.6, 0.05, 0);
    rv_sim_result sim = { 0 };
    replay(graph, &sim);
    ck_assert_int_eq(sim.start_ns[b], US(40));
    ck_assert_int_eq(sim.end_ns[b], US(100));
    ck_assert_int_eq(sim.end_ns[a], US(110));
    rv_sim_result_clear(&sim);
    rv_graph_free(graph);
}
END_TEST

/* On a trace whose compute runs on one stream the rule has nothing to
 * share: every task's start and end are the plain replay's, even with
 * every kernel asking for the whole GPU. */
START_TEST(the_rule_without_overlap_is_the_plain_replay)
{
    rv_graph *graph = load_trace("hta_transformer_ddp_v100_rank1.2steps.json.gz");
    rv_sim_result plain = { 0 }, shared = { 0 };
    ck_assert(!graph->sharing.enabled);
    replay(graph, &plain);
    graph->sharing.enabled = TRUE;
    replay(graph, &shared);
    int32_t differ = 0;
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++)
        differ += plain.start_ns[t] != shared.start_ns[t] || plain.end_ns[t] != shared.end_ns[t];
    ck_assert_int_eq(differ, 0);
    rv_sim_result_clear(&plain);
    rv_sim_result_clear(&shared);
    rv_graph_free(graph);
}
END_TEST

/* ---- moving a run ------------------------------------------------------------------- */

/* p (10) -> a (20) -> b (30) -> n (5) on one stream.  b moved beside a
 * onto another stream, releasing n: b starts with a (10), n waits for
 * both (40) instead of 65; the stream's order is p -> a -> n. */
START_TEST(a_moved_run_runs_beside_and_releases)
{
    rv_graph *graph = rv_graph_new(NULL, "move");
    int32_t s = rv_graph_add_resource(graph, RV_RES_GPU_STREAM, 0, 7, "gpu 0 stream 7");
    int32_t t = rv_graph_add_resource(graph, RV_RES_GPU_STREAM, 0, 8, "gpu 0 stream 8");
    int32_t cpu = rv_graph_add_resource(graph, RV_RES_CPU_THREAD, 1, 1, "thread 1/1");
    int32_t p = kernel(graph, s, "p", NULL, RV_PHASE_FORWARD, US(10), -1);
    int32_t a = kernel(graph, s, "a", NULL, RV_PHASE_FORWARD, US(20), p);
    int32_t b = kernel(graph, s, "b", NULL, RV_PHASE_FORWARD, US(30), a);
    int32_t n = kernel(graph, s, "n", NULL, RV_PHASE_FORWARD, US(5), b);
    rv_sim_result sim = { 0 };
    replay(graph, &sim);
    ck_assert_int_eq(sim.start_ns[n], US(60));
    rv_sim_result_clear(&sim);

    GError *error = NULL;
    ck_assert(!rv_transform_move_run(graph, b, b, s, -1, a, n, &error));   /* already there */
    g_clear_error(&error);
    ck_assert(!rv_transform_move_run(graph, b, b, cpu, -1, a, n, &error)); /* a kernel onto a thread */
    g_clear_error(&error);
    ck_assert(!rv_transform_move_run(graph, a, b, t, -1, b, n, &error));   /* beside its own task */
    g_clear_error(&error);
    ck_assert(!rv_transform_move_run(graph, n, a, t, -1, -1, -1, &error)); /* not a run */
    g_clear_error(&error);
    ck_assert_msg(rv_transform_move_run(graph, b, b, t, -1, a, n, &error), "%s", error ? error->message : "");
    ck_assert_int_eq(rv_graph_task(graph, b)->resource, t);
    ck_assert_int_eq(rv_graph_resource_next(graph, a), n);
    ck_assert_int_eq(rv_graph_resource_previous(graph, b), -1);
    ck_assert(has_edge(graph, b, n));
    ck_assert(!has_edge(graph, a, b) || !has_edge(graph, b, a));
    replay(graph, &sim);
    ck_assert_int_eq(sim.start_ns[b], US(10));
    ck_assert_int_eq(sim.end_ns[a], US(30));
    ck_assert_int_eq(sim.start_ns[n], US(40));
    rv_sim_result_clear(&sim);
    ck_assert(rv_graph_check_acyclic(graph, &error));
    rv_graph_free(graph);
}
END_TEST

/* ---- finding independent GEMMs ---------------------------------------------------------- */

/*
 * One backward pass: mm, mm | sum | mm + epilogue, mm, mm | dgrad, wgrad |
 * winograd wgrad data, winograd wgrad delta | an RNN's GEMMs.  Pairs:
 * (1, 2), (4 with its epilogue, 6), (8, 9): 3 GEMMs move; 7 is alone in
 * its run's second pair, the Winograd transforms are one algorithm's
 * chain, the RNN's GEMMs are not a matmul operator's.
 */
START_TEST(pairs_of_a_hand_built_backward)
{
    rv_graph *graph = rv_graph_new(NULL, "pairs");
    int32_t s = rv_graph_add_resource(graph, RV_RES_GPU_STREAM, 0, 7, "gpu 0 stream 7");
    struct { const char *name, *op; } k[] = {
        { "volta_sgemm_128x32_nn", "aten::mm" }, { "volta_sgemm_128x32_nt", "aten::mm" },
        { "reduce_kernel", "aten::sum" },
        { "volta_sgemm_64x64_nn", "aten::mm" }, { "void epilogue::impl::globalKernel", "aten::mm" },
        { "volta_sgemm_64x64_nt", "aten::mm" }, { "volta_sgemm_32x32_nn", "aten::mm" },
        { "cudnn::detail::dgrad_engine", "aten::convolution_backward" },
        { "cudnn::cnn::wgrad_alg0_engine", "aten::convolution_backward" },
        { "cudnn::winograd_nonfused::winogradWgradData4x4", "aten::convolution_backward" },
        { "cudnn::winograd_nonfused::winogradWgradDelta4x4", "aten::convolution_backward" },
        { "volta_sgemm_128x64_nn", "aten::_cudnn_rnn_backward" }, { "volta_sgemm_128x64_nt", "aten::_cudnn_rnn_backward" },
    };
    int32_t ids[G_N_ELEMENTS(k)], previous = -1;
    for (gsize i = 0; i < G_N_ELEMENTS(k); i++)
        previous = ids[i] = kernel(graph, s, k[i].name, k[i].op, RV_PHASE_BACKWARD, US(10), previous);
    tiny_close_step(&(tiny){ graph, -1, s });
    char *notes = apply_notes(graph, "concurrent-kernels", "rule=off");
    ck_assert_msg(strstr(notes, "3 backward pairs") != NULL, "%s", notes);
    g_free(notes);
    gsize moved[] = { 1, 5, 8 };
    for (gsize i = 0; i < G_N_ELEMENTS(k); i++) {
        gboolean should = i == moved[0] || i == moved[1] || i == moved[2];
        ck_assert_msg((rv_graph_task(graph, ids[i])->resource != s) == should, "kernel %zu (%s)", i, k[i].name);
    }
    rv_graph_free(graph);
}
END_TEST

/* ---- GOLDYLOC on a real trace -------------------------------------------------------- */

/* For the groups the plugin made (a moved GEMM runs beside its group's
 * first, a from-start edge), the time from the first's start to the last
 * end, summed over groups, in the baseline and the prediction: their ratio
 * is the groups' speedup.  *groups counts them. */
static double group_speedup(const rv_graph *base, const rv_graph *after, guint *groups, double *before_ms, double *after_ms)
{
    rv_sim_result a = { 0 }, b = { 0 };
    replay(base, &a);
    replay(after, &b);
    int32_t n = rv_graph_task_count(base);
    int64_t *end_a = g_new0(int64_t, n), *end_b = g_new0(int64_t, n);
    *groups = 0;
    for (guint e = 0; e < after->edges->len; e++) {
        const rv_edge *edge = &g_array_index(after->edges, rv_edge, e);
        if (!edge->from_start || edge->kind != RV_EDGE_PLUGIN || edge->from >= n || edge->to >= n) continue;
        int32_t first = edge->from, moved = edge->to;
        *groups += end_a[first] == 0;
        end_a[first] = MAX(MAX(end_a[first], a.end_ns[first]), a.end_ns[moved]);
        end_b[first] = MAX(MAX(end_b[first], b.end_ns[first]), b.end_ns[moved]);
    }
    double before = 0, now = 0;
    for (int32_t t = 0; t < n; t++) {
        if (end_a[t] == 0) continue;
        before += (double)(end_a[t] - a.start_ns[t]);
        now += (double)(end_b[t] - b.start_ns[t]);
    }
    g_free(end_a);
    g_free(end_b);
    rv_sim_result_clear(&a);
    rv_sim_result_clear(&b);
    *before_ms = before / 1e6;
    *after_ms = now / 1e6;
    return now > 0 ? before / now : 0;
}

START_TEST(goldyloc_on_the_transformer_backward)
{
    rv_graph *base = load_trace("hta_transformer_ddp_v100_rank1.2steps.json.gz");
    const char *settings[] = { "", "tiles=tuned", "rule=off" };
    double speedup[3];
    int64_t baseline = step_total(base);
    for (int k = 0; k < 3; k++) {
        rv_graph *graph = rv_graph_copy(base);
        apply_ok(graph, "concurrent-kernels", settings[k]);
        guint groups = 0;
        double before_ms, after_ms;
        speedup[k] = group_speedup(base, graph, &groups, &before_ms, &after_ms);
        int64_t total = step_total(graph);
        g_printerr("concurrent-kernels:%s on the Transformer rank: %u GEMM pairs %.3f -> %.3f ms (%.3fx), step total "
                   "%.3f -> %.3f ms\n", settings[k], groups, before_ms, after_ms, speedup[k], baseline / 1e6, total / 1e6);
        ck_assert_uint_ge(groups, 250);
        /* the step is host-bound (its GPU idles half the time): the pairs' gain does not reach it */
        ck_assert(fabs((double)(total - baseline)) <= 0.005 * (double)baseline);
        rv_graph_free(graph);
    }
    /* the thesis: default concurrency of 2 GEMMs +10% (geomean), within a few points */
    ck_assert_msg(speedup[0] >= 1.05 && speedup[0] <= 1.15, "default %.3fx", speedup[0]);
    ck_assert_msg(speedup[1] >= speedup[0] + 0.03, "tuned %.3fx, default %.3fx", speedup[1], speedup[0]);
    ck_assert_msg(speedup[2] > speedup[1] && speedup[2] <= 2.0, "free %.3fx, tuned %.3fx", speedup[2], speedup[1]);
    rv_graph_free(base);
}
END_TEST

START_TEST(neutral_and_refusals)
{
    check_neutral("hta_transformer_ddp_v100_rank1.2steps.json.gz", "concurrent-kernels", "degree=1,rule=off");
    rv_graph *graph = load_trace("hta_transformer_ddp_v100_rank1.2steps.json.gz");
    assert_apply_fails(graph, "concurrent-kernels", "degree=0", RV_ERROR_USAGE, "degree must be 1 to 64");
    assert_apply_fails(graph, "concurrent-kernels", "degree=1", RV_ERROR_PLUGIN, "one stream");
    rv_graph *projected = rv_graph_copy(graph);
    apply_ok(projected, "hardware", "gpu=A100-80GB");
    assert_apply_fails(projected, "concurrent-kernels", "", RV_ERROR_PLUGIN, "hardware does not record");
    rv_graph_free(projected);
    rv_graph_free(graph);
    graph = load_trace("pairs/gpu_h100_vs_mi300x_timesformer/h100.json.gz");
    assert_apply_fails(graph, "concurrent-kernels", "", RV_ERROR_PLUGIN, "no independent GEMMs");
    rv_graph_free(graph);
    graph = load_trace("small_ddp.json.gz");
    assert_apply_fails(graph, "concurrent-kernels", "", RV_ERROR_USAGE, "source_gpu");
    rv_graph_free(graph);
}
END_TEST

int main(void)
{
    static const char *const traces[] = { "hta_transformer_ddp_v100_rank1.2steps.json.gz",
                                          "pairs/gpu_h100_vs_mi300x_timesformer/h100.json.gz", "small_ddp.json.gz", NULL };
    require_project_traces(traces);
    Suite *suite = suite_create("concurrency");
    TCase *rule = tcase_create("rule");
    tcase_set_timeout(rule, 120);
    tcase_add_test(rule, overlapping_kernels_share_by_the_most_loaded_resource);
    tcase_add_test(rule, a_kernel_joining_later_costs_only_its_overlap);
    tcase_add_test(rule, the_rule_without_overlap_is_the_plain_replay);
    tcase_add_test(rule, a_moved_run_runs_beside_and_releases);
    suite_add_tcase(suite, rule);
    TCase *plugin = tcase_create("concurrent-kernels");
    tcase_set_timeout(plugin, 300);
    tcase_add_test(plugin, pairs_of_a_hand_built_backward);
    tcase_add_test(plugin, goldyloc_on_the_transformer_backward);
    tcase_add_test(plugin, neutral_and_refusals);
    suite_add_tcase(suite, plugin);
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
