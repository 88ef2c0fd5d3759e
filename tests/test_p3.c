/*
 * test_p3.c - the p3 plugin (optimizations/p3.c: priority-based parameter
 * propagation on a parameter server) and the weighted-layer model it shares
 * with ddp (layers.h).
 *
 * A hand-built two-step graph gives the schedule worked out by hand below,
 * with and without P3's priority; error cases say "nothing to act on" in
 * one line; the real ResNet-50 traces give believable trends (P3 no slower
 * than the plain parameter server, both slower than one GPU, and slower
 * still on a slower network).  Plugins are loaded from
 * REVERIE_TEST_PLUGIN_DIR, real traces from REVERIE_SHARED_TRACES (skipped
 * when absent), as in test_plugins.c.
 */
#include <check.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "reverie/compose.h"
#include "reverie/contention.h"
#include "reverie/error.h"
#include "reverie/graph.h"
#include "reverie/layers.h"
#include "reverie/plugin.h"
#include "reverie/report.h"
#include "reverie/sim.h"
#include "reverie/transform.h"
#include "plugin_harness.h"

/* ---- the hand-built graph ------------------------------------------- */

/*
 * Two steps, one CPU thread, one GPU stream.  Each step:
 *   CPU: begin marker | Fa 1us | Fb 1us | Gb 1us | Ga 1us | end marker
 *   GPU: Ka 10us (aten::conv2d, layer A, near the input)
 *        Kb 10us (aten::linear, layer B, near the output)
 *        KGb 10us (AddmmBackward0: B's gradient, produced first)
 *        KGa 10us (ConvolutionBackward0: A's gradient)
 * Each kernel is launched by the call of the same letter.  Weights: A is
 * conv [2500,1,1,1] = 10,000 B, B is linear [1,7500] = 30,000 B.
 *
 * A kernel is ready when its launch call ends (the hand-built stream has
 * no launch latency or gap).
 *
 * Baseline: the CPU runs 0-4 and 4-8; the kernels queue on the stream:
 * step 0 Ka 1-11, Kb 11-21, KGb 21-31, KGa 31-41; step 1 41-51 ... 71-81.
 * Steps end at 41 and 81: total 81us, makespan 81us.
 *
 * p3 with slice_size=10000B, bandwidth=1GB/s, latency=1us: every slice is
 * 10,000 B and takes 1 + 10 = 11us each way.  B has 3 slices (B0 B1 B2),
 * A has 1.  Pushes go on ps.send after the gradient's kernel, pulls on
 * ps.recv after their push; step 1's Ka waits for A's pulls, Kb for B's;
 * step 1's end marker (the last step) waits for A's pulls.
 *
 * priority=off (first come, first served):
 *   step 0 pushes: B0 31-42, B1 42-53, B2 53-64, A 64-75 (A ready at 41 but
 *     queued behind B's slices)
 *   pulls: B0 42-53, B1 53-64, B2 64-75, A 75-86
 *   step 1: Ka waits for pull A: 86-96; Kb 96-106; KGb 106-116; KGa 116-126
 *   pushes: B0' 116-127, B1' 127-138, B2' 138-149, A' 149-160
 *   pulls:  B0' 127-138, B1' 138-149, B2' 149-160, A' 160-171
 *   end marker at 171: steps 41 + 130 = 171us, makespan 171us.
 * priority=on (layer A outranks B once the channel frees):
 *   step 0 pushes: B0 31-42, A 42-53 (overtakes B1 and B2), B1 53-64, B2 64-75
 *   pulls: B0 42-53, A 53-64, B1 64-75, B2 75-86
 *   step 1: Ka waits for pull A: 64-74; Kb waits for pull B2: 86-96;
 *     KGb 96-106; KGa 106-116
 *   pushes: B0' 106-117, A' 117-128, B1' 128-139, B2' 139-150
 *   pulls:  B0' 117-128, A' 128-139, B1' 139-150, B2' 150-161
 *   end marker at 139: steps 41 + 98 = 139us, makespan 161us.
 */
#define DIMS_A "[[1,1,1,1],[2500,1,1,1],[]]"
#define DIMS_B "[[1,7500],[1,7500],[]]"
#define HAND_PARAMS "slice_size=10000B,bandwidth=1GB/s,latency=1us"

static void tag(tiny *t, int32_t task, const char *layer, const char *dims, int32_t step)
{
    rv_task *task_ptr = rv_graph_task(t->graph, task);
    if (layer) task_ptr->layer = rv_strings_intern(t->graph->strings, layer);
    if (dims) task_ptr->input_dims = rv_strings_intern(t->graph->strings, dims);
    task_ptr->step = step;
}

/* A kernel and its launch call, both tagged. */
static int32_t layer_kernel(tiny *t, const char *layer, const char *dims, rv_phase phase, int32_t step)
{
    int32_t kernel = tiny_launch(t, "kernel", US(1), US(10), phase, RV_TASK_KERNEL);
    tag(t, kernel, layer, dims, step);
    tag(t, rv_graph_launch_of(t->graph, kernel), layer, dims, step);
    return kernel;
}

static int32_t marker(tiny *t, int32_t step, uint16_t flag)
{
    int32_t id = tiny_task(t, t->cpu, RV_TASK_MARKER, "ProfilerStep", 0, RV_PHASE_OTHER);
    tag(t, id, NULL, NULL, step);
    rv_graph_task(t->graph, id)->flags |= flag;
    return id;
}

/* The graph above; with_dims FALSE leaves out the Input Dims; with
 * backward FALSE leaves out the backward kernels. */
static tiny p3_graph(gboolean with_dims, gboolean backward)
{
    tiny t = tiny_new();
    for (int32_t s = 0; s < 2; s++) {
        rv_step step = { rv_strings_intern(t.graph->strings, s ? "ProfilerStep#1" : "ProfilerStep#0"), 0, 0, -1, -1 };
        step.begin_marker = marker(&t, s, RV_TASK_FLAG_STEP_BEGIN);
        layer_kernel(&t, "aten::conv2d", with_dims ? DIMS_A : NULL, RV_PHASE_FORWARD, s);
        layer_kernel(&t, "aten::linear", with_dims ? DIMS_B : NULL, RV_PHASE_FORWARD, s);
        if (backward) {
            layer_kernel(&t, "autograd::engine::evaluate_function: AddmmBackward0", NULL, RV_PHASE_BACKWARD, s);
            layer_kernel(&t, "autograd::engine::evaluate_function: ConvolutionBackward0", NULL, RV_PHASE_BACKWARD, s);
        }
        step.end_marker = marker(&t, s, RV_TASK_FLAG_STEP_END);
        g_array_append_val(t.graph->steps, step);
    }
    return t;
}

/* Apply p3 and replay with its policy, keeping the per-task times.  The
 * caller clears the result. */
static rv_sim_result p3_replay(rv_graph *graph, const char *text)
{
    rv_sim_result sim = { 0 };
    apply_and_replay(graph, "p3", text, &sim, NULL);
    return sim;
}

/* The n-th inserted task called `name` of a step whose producer's layer contains `layer`. */
static int32_t transfer(const rv_graph *graph, const char *name, const char *layer, int32_t step, int n)
{
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if (!(task->flags & RV_TASK_FLAG_INSERTED) || task->step != step) continue;
        if (strcmp(rv_strings_get(graph->strings, task->name), name) != 0) continue;
        if (strstr(rv_strings_get(graph->strings, task->layer), layer) && n-- == 0) return id;
    }
    ck_abort_msg("no %s of %s in step %d", name, layer, step);
    return -1;
}

START_TEST(p3_hand_baseline)
{
    tiny t = p3_graph(TRUE, TRUE);
    ck_assert_int_eq(makespan(t.graph), US(81));
    ck_assert_int_eq(step_total(t.graph), US(81));
    rv_graph_free(t.graph);
}
END_TEST

START_TEST(p3_hand_priority_off)
{
    tiny t = p3_graph(TRUE, TRUE);
    int64_t span, total;
    apply_and_simulate(t.graph, "p3", HAND_PARAMS ",priority=off", &span, &total);
    ck_assert_int_eq(span, US(171));
    ck_assert_int_eq(total, US(171));
    rv_graph_free(t.graph);

    t = p3_graph(TRUE, TRUE);
    rv_sim_result sim = p3_replay(t.graph, HAND_PARAMS ",priority=off");
    ck_assert_int_eq(sim.start_ns[transfer(t.graph, "ps push", "Addmm", 0, 2)], US(53)); /* B2 */
    ck_assert_int_eq(sim.start_ns[transfer(t.graph, "ps push", "Convolution", 0, 0)], US(64)); /* A waits */
    ck_assert_int_eq(sim.end_ns[transfer(t.graph, "ps pull", "Convolution", 0, 0)], US(86));
    ck_assert_int_eq(sim.end_ns[transfer(t.graph, "ps pull", "Convolution", 1, 0)], US(171));
    rv_sim_result_clear(&sim);
    rv_graph_free(t.graph);
}
END_TEST

START_TEST(p3_hand_priority_on)
{
    tiny t = p3_graph(TRUE, TRUE);
    int64_t span, total;
    apply_and_simulate(t.graph, "p3", HAND_PARAMS, &span, &total);  /* priority=on is the default */
    ck_assert_int_eq(span, US(161));
    ck_assert_int_eq(total, US(139));
    rv_graph_free(t.graph);

    t = p3_graph(TRUE, TRUE);
    rv_sim_result sim = p3_replay(t.graph, HAND_PARAMS ",priority=on");
    ck_assert_int_eq(sim.start_ns[transfer(t.graph, "ps push", "Addmm", 0, 0)], US(31));       /* B0 */
    ck_assert_int_eq(sim.start_ns[transfer(t.graph, "ps push", "Convolution", 0, 0)], US(42)); /* A overtakes */
    ck_assert_int_eq(sim.start_ns[transfer(t.graph, "ps push", "Addmm", 0, 1)], US(53));       /* B1 */
    ck_assert_int_eq(sim.end_ns[transfer(t.graph, "ps pull", "Convolution", 0, 0)], US(64));
    ck_assert_int_eq(sim.start_ns[transfer(t.graph, "ps pull", "Addmm", 1, 2)], US(150));     /* B2' */
    rv_sim_result_clear(&sim);
    rv_graph_free(t.graph);
}
END_TEST

static char *write_temp(const char *text)
{
    char *path = NULL;
    int fd = g_file_open_tmp("rv-p3-XXXXXX.json", &path, NULL);
    ck_assert_int_ge(fd, 0);
    ck_assert(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    return path;
}

/* Without Input Dims the sizes come from param_sizes=FILE: the same answer. */
START_TEST(p3_hand_param_sizes)
{
    char *path = write_temp("[10000, 30000]");
    char *text = g_strdup_printf(HAND_PARAMS ",param_sizes=%s", path);
    tiny t = p3_graph(FALSE, TRUE);
    int64_t span, total;
    apply_and_simulate(t.graph, "p3", text, &span, &total);
    ck_assert_int_eq(span, US(161));
    ck_assert_int_eq(total, US(139));
    rv_graph_free(t.graph);
    g_unlink(path);
    g_free(path);
    g_free(text);
}
END_TEST

/* ---- coalescing (p3.c): only where the replay cannot tell ------------ */

/* Every task the graph had before p3 (ids below `count`) starts and ends
 * at the same ns in both replays, and the steps and makespans agree. */
static void assert_same_times(const rv_graph *graph, const rv_sim_result *a, const rv_sim_result *b, int32_t count,
                              const char *what)
{
    for (int32_t t = 0; t < count; t++)
        ck_assert_msg(a->start_ns[t] == b->start_ns[t] && a->end_ns[t] == b->end_ns[t],
                      "%s: task %d at %" G_GINT64_FORMAT "-%" G_GINT64_FORMAT " instead of %" G_GINT64_FORMAT
                      "-%" G_GINT64_FORMAT, what, t, a->start_ns[t], a->end_ns[t], b->start_ns[t], b->end_ns[t]);
    ck_assert_msg(a->makespan_ns == b->makespan_ns, "%s: makespan", what);
    GArray *steps_a = rv_step_times(graph, a), *steps_b = rv_step_times(graph, b);
    ck_assert_int_eq(steps_a->len, steps_b->len);
    for (guint i = 0; i < steps_a->len; i++)
        ck_assert_int_eq(g_array_index(steps_a, rv_step_time, i).simulated_ns,
                         g_array_index(steps_b, rv_step_time, i).simulated_ns);
    g_array_unref(steps_a);
    g_array_unref(steps_b);
}

/* p3 as a what-if's last optimization, where it may coalesce, against p3
 * slice by slice (as a host that tells it nothing gets it), on copies of
 * graph replayed with p3's policy, else `earlier`.  The original tasks'
 * times must agree; returns how many tasks fewer the first inserted. */
static int32_t compare_coalesced(const rv_graph *graph, const char *text, const rv_policy *earlier, const char *what)
{
    rv_graph *coalesced = rv_graph_copy(graph), *sliced = rv_graph_copy(graph);
    rv_sim_result a = { 0 }, b = { 0 };
    g_free(apply_whatif(coalesced, "p3", text, TRUE, earlier, &a));
    g_free(apply_whatif(sliced, "p3", text, FALSE, earlier, &b));
    assert_same_times(graph, &a, &b, rv_graph_task_count(graph), what);
    int32_t fewer = rv_graph_task_count(sliced) - rv_graph_task_count(coalesced);
    ck_assert_int_ge(fewer, 0);
    rv_sim_result_clear(&a);
    rv_sim_result_clear(&b);
    rv_graph_free(coalesced);
    rv_graph_free(sliced);
    return fewer;
}

/* With priority=off the replay cannot tell a layer's slices apart: on the
 * hand-built graph B's three slices a step become three transfers (A has
 * one slice: nothing to coalesce), and every task keeps its times. */
START_TEST(p3_coalesced_agrees)
{
    tiny t = p3_graph(TRUE, TRUE);
    ck_assert_int_eq(compare_coalesced(t.graph, HAND_PARAMS ",priority=off", NULL, "priority=off"), 2 * (6 - 3));
    rv_graph_free(t.graph);
}
END_TEST

static int64_t same_rank(const rv_graph *graph, int32_t task, void *data)
{
    (void)graph; (void)task; (void)data;
    return 0;
}

/*
 * Where the replay could tell the slices apart, p3 must not coalesce:
 * the times must agree all the same (and do only if it did not).  On the
 * hand-built graph A's gradient arrives while B's slices wait, and
 *  - priority=on: A takes the channel at B's next slice boundary;
 *  - an earlier optimization's policy (ties broken by id: A was inserted
 *    first) or the contention rule (whose replay dispatches likewise)
 *    does the same with priority=off;
 *  - channels that other transfers use already are not p3's to reason about.
 */
START_TEST(p3_coalesces_only_what_replay_cannot_tell)
{
    tiny t = p3_graph(TRUE, TRUE);
    compare_coalesced(t.graph, HAND_PARAMS ",priority=on", NULL, "priority=on");

    rv_plugin_effects scheduler = { .rewrites = RV_ASPECT_SCHEDULE, .order = RV_ORDER(RV_STAGE_EXECUTION, 99) };
    rv_graph *ranked = rv_graph_copy(t.graph);
    rv_compose_record(ranked, "a-scheduler", &scheduler);
    rv_policy policy = { same_rank, NULL };
    compare_coalesced(ranked, HAND_PARAMS ",priority=off", &policy, "an earlier policy");
    rv_graph_free(ranked);

    rv_graph *contended = rv_graph_copy(t.graph);
    contended->contention = rv_contention_default();
    compare_coalesced(contended, HAND_PARAMS ",priority=off", NULL, "contention");
    rv_graph_free(contended);

    /* channels that already carry transfers (p3 twice): p3 cannot know what waits on them */
    rv_graph *twice = rv_graph_copy(t.graph);
    apply_ok(twice, "p3", HAND_PARAMS ",priority=off");
    ck_assert_int_eq(compare_coalesced(twice, HAND_PARAMS ",priority=off", NULL, "p3 twice"), 0);
    rv_graph_free(twice);
    rv_graph_free(t.graph);
}
END_TEST

/* The same on real traces: ResNet-50's 54 layers (recorded shapes), and
 * the generated MLP of gen_mlp_memory; slices of 40 KB so that most layers
 * have several. */
START_TEST(p3_coalesced_agrees_real)
{
    const char *traces[] = { "kineto_legacy_resnet50_v100.2steps.json.gz", "gen_mlp_memory.json.gz" };
    for (guint i = 0; i < G_N_ELEMENTS(traces); i++) {
        rv_graph *graph = load_trace(traces[i]);
        ck_assert_int_gt(compare_coalesced(graph, "slice_size=40KB,priority=off", NULL, traces[i]), 0);
        compare_coalesced(graph, "slice_size=40KB,priority=on", NULL, traces[i]);
        rv_graph_free(graph);
    }
}
END_TEST

/* ---- nothing to act on ---------------------------------------------- */

static void expect_error(rv_graph *graph, const char *text, const char *words)
{
    GError *error = NULL;
    ck_assert(!apply_plugin(graph, "p3", text, &error));
    ck_assert_msg(g_error_matches(error, RV_ERROR, RV_ERROR_PLUGIN), "%s", error ? error->message : "(no error)");
    ck_assert_msg(strstr(error->message, words) && !strchr(error->message, '\n'), "%s", error->message);
    g_error_free(error);
}

START_TEST(p3_nothing_to_act_on)
{
    tiny t = tiny_new();  /* no weighted layer at all */
    layer_kernel(&t, "aten::relu", NULL, RV_PHASE_FORWARD, -1);
    expect_error(t.graph, "", "no conv/linear/addmm forward layer");
    rv_graph_free(t.graph);

    t = p3_graph(FALSE, TRUE);  /* weighted layers without shapes */
    expect_error(t.graph, "", "no gradient sizes");
    rv_graph_free(t.graph);

    t = p3_graph(TRUE, FALSE);  /* no backward pass */
    expect_error(t.graph, "", "no backward-phase GPU work");
    rv_graph_free(t.graph);

    char *path = write_temp("{\"not\": \"a list\"}");
    char *text = g_strdup_printf("param_sizes=%s", path);
    t = p3_graph(TRUE, TRUE);
    expect_error(t.graph, text, "not a JSON list");
    rv_graph_free(t.graph);
    g_unlink(path);
    g_free(path);
    g_free(text);
}
END_TEST

/* ---- the weighted-layer model on a real trace ------------------------ */

/* torchvision ResNet-50's weighted layers in forward order, weight + bias
 * bytes: conv1, then per bottleneck conv 1x1, 3x3, 1x1 (and the downsample
 * conv in the first block of a stage), then fc. */
static GArray *resnet50_sizes(void)
{
    GArray *sizes = g_array_new(FALSE, FALSE, sizeof(int64_t));
    int64_t first = 4 * 64 * 3 * 7 * 7;
    g_array_append_val(sizes, first);
    int64_t in = 64;
    const int64_t widths[] = { 64, 128, 256, 512 }, blocks[] = { 3, 4, 6, 3 };
    for (int stage = 0; stage < 4; stage++) {
        int64_t w = widths[stage];
        for (int b = 0; b < blocks[stage]; b++) {
            int64_t convs[] = { 4 * in * w, 4 * w * w * 9, 4 * w * 4 * w, 4 * in * 4 * w };
            g_array_append_vals(sizes, convs, b == 0 ? 4 : 3);
            in = 4 * w;
        }
    }
    int64_t fc = 4 * (2048 * 1000 + 1000);
    g_array_append_val(sizes, fc);
    return sizes;
}

/* The legacy ResNet-50 trace records shapes: every step has ResNet-50's
 * 54 weighted layers with its exact sizes, each with a forward kernel, and
 * its backward pass has one run of weighted-layer kernels per layer. */
START_TEST(layers_resnet50)
{
    rv_graph *graph = load_trace("kineto_legacy_resnet50_v100.2steps.json.gz");
    GArray *expected = resnet50_sizes();
    ck_assert_int_eq(expected->len, 54);
    GPtrArray *layers = rv_weighted_layers_by_step(graph);
    GPtrArray *backward = rv_backward_gpu_tasks_by_step(graph);
    ck_assert_int_eq(layers->len, graph->steps->len + 1);
    for (guint slot = 1; slot < layers->len; slot++) {
        GArray *step = g_ptr_array_index(layers, slot);
        ck_assert_int_eq(step->len, expected->len);
        for (guint j = 0; j < step->len; j++) {
            const rv_weighted_layer *layer = &g_array_index(step, rv_weighted_layer, j);
            ck_assert_msg(layer->weight_bytes == g_array_index(expected, int64_t, j), "step %u layer %u: %" G_GINT64_FORMAT,
                          slot - 1, j, layer->weight_bytes);
            ck_assert_int_ge(layer->first_gpu, 0);
            ck_assert(rv_graph_task(graph, layer->first_gpu)->flags & RV_TASK_FLAG_GPU);
        }
        GArray *runs = rv_weighted_backward_runs(graph, g_ptr_array_index(backward, slot));
        ck_assert_int_eq(runs->len, expected->len);
        g_array_unref(runs);
    }
    g_ptr_array_unref(backward);
    g_ptr_array_unref(layers);
    g_array_unref(expected);
    rv_graph_free(graph);
}
END_TEST

/* ---- real traces ---------------------------------------------------- */

/* hta_resnet50_v100 has no Input Dims: it gets ResNet-50's sizes from a file. */
static char *resnet50_param_file(void)
{
    GArray *sizes = resnet50_sizes();
    GString *list = g_string_new("[");
    for (guint i = 0; i < sizes->len; i++)
        g_string_append_printf(list, "%s%" G_GINT64_FORMAT, i ? "," : "", g_array_index(sizes, int64_t, i));
    g_string_append_c(list, ']');
    char *path = write_temp(list->str);
    g_string_free(list, TRUE);
    g_array_unref(sizes);
    return path;
}

/*
 * From fast to slow networks: both settings cost nothing on a fast one,
 * more on each slower one, and P3's priority is never slower than first
 * come, first served.  On 2.5 and 1 Gbps both are slower than one GPU.
 */
static void check_trends(const char *trace, const char *extra)
{
    const char *bandwidths[] = { "1000Gbps", "10Gbps", "2.5Gbps", "1Gbps" };
    int64_t previous[2] = { 0, 0 };
    for (int i = 0; i < 4; i++) {
        int64_t base = 0, predicted[2];
        for (int p = 0; p < 2; p++) {
            char *text = g_strdup_printf("bandwidth=%s,priority=%s%s", bandwidths[i], p ? "off" : "on", extra);
            predict_trace(trace, "p3", text, &base, &predicted[p]);
            g_free(text);
            if (i == 0) ck_assert_msg(predicted[p] == base, "%s: a fast network should cost nothing", trace);
            if (i >= 2) ck_assert_msg(predicted[p] > base, "%s %s: %" G_GINT64_FORMAT " not above %" G_GINT64_FORMAT,
                                      trace, bandwidths[i], predicted[p], base);
            ck_assert_msg(predicted[p] >= previous[p], "%s %s: faster on a slower network", trace, bandwidths[i]);
            if (i >= 2) ck_assert_msg(predicted[p] > previous[p], "%s %s: no slower than on a faster network", trace,
                                      bandwidths[i]);
            previous[p] = predicted[p];
        }
        ck_assert_msg(predicted[0] <= predicted[1], "%s %s: priority on %" G_GINT64_FORMAT " > off %" G_GINT64_FORMAT,
                      trace, bandwidths[i], predicted[0], predicted[1]);
        if (i >= 2) ck_assert_msg(predicted[0] < predicted[1], "%s %s: P3's priority gains nothing", trace, bandwidths[i]);
    }
}

START_TEST(p3_real_legacy)
{
    check_trends("kineto_legacy_resnet50_v100.2steps.json.gz", "");
}
END_TEST

START_TEST(p3_real_hta)
{
    char *path = resnet50_param_file();
    char *extra = g_strdup_printf(",param_sizes=%s", path);
    check_trends("hta_resnet50_v100.json.gz", extra);
    g_unlink(path);
    g_free(path);
    g_free(extra);
}
END_TEST

/* ---- suite ---------------------------------------------------------- */

static Suite *p3_suite(void)
{
    Suite *suite = suite_create("p3");
    TCase *tc = tcase_create("hand-built");
    tcase_add_test(tc, p3_hand_baseline);
    tcase_add_test(tc, p3_hand_priority_off);
    tcase_add_test(tc, p3_hand_priority_on);
    tcase_add_test(tc, p3_hand_param_sizes);
    tcase_add_test(tc, p3_nothing_to_act_on);
    tcase_add_test(tc, p3_coalesced_agrees);
    tcase_add_test(tc, p3_coalesces_only_what_replay_cannot_tell);
    suite_add_tcase(suite, tc);
    tc = tcase_create("real traces");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, layers_resnet50);
    tcase_add_test(tc, p3_real_legacy);
    tcase_add_test(tc, p3_real_hta);
    tcase_add_test(tc, p3_coalesced_agrees_real);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void)
{
    static const char *const traces[] = { "hta_resnet50_v100.json.gz", "kineto_legacy_resnet50_v100.2steps.json.gz",
                                          "gen_mlp_memory.json.gz", NULL };
    require_project_traces(traces);
    SRunner *runner = srunner_create(p3_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
