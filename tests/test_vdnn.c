/*
 * test_vdnn.c - the vdnn plugin (optimizations/vdnn.c): feature maps
 * offloaded on pcie.d2h in forward, prefetched on pcie.h2d for backward by
 * vDNN's findPrefetchLayer rule, with the plugin's own priority.
 *
 * A hand-built two-conv network gives predictions worked out by hand (fast,
 * slow and latency-bound links, the prefetch's start time, policy=all);
 * graphs with nothing to offload must fail with one RV_ERROR_PLUGIN line;
 * the two real ResNet-50 traces must have their 53 convolutions offloaded
 * and slow down more as the link gets slower; the stall line is the same
 * whether vdnn replays the graph itself or a what-if lends it its replay.
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
#include "reverie/sim.h"
#include "reverie/transform.h"
#include "plugin_harness.h"

/* ---- helpers -------------------------------------------------------- */

/* A launch and its kernel, tagged as one layer instance of step 0. */
static int32_t layer_kernel(tiny *t, const char *layer, const char *input_dims, int64_t kernel_us, rv_phase phase)
{
    int32_t gpu = tiny_launch(t, "kernel", US(5), US(kernel_us), phase, RV_TASK_KERNEL);
    int32_t call = gpu - 1; /* tiny_launch adds the call, then the kernel */
    int32_t layer_id = rv_strings_intern(t->graph->strings, layer);
    int32_t dims_id = input_dims ? rv_strings_intern(t->graph->strings, input_dims) : -1;
    int32_t both[2] = { call, gpu };
    for (int i = 0; i < 2; i++) {
        rv_task *task = rv_graph_task(t->graph, both[i]);
        task->layer = layer_id;
        task->input_dims = dims_id;
        task->step = 0;
    }
    return gpu;
}

/*
 * The network, one step, launches of 5us each on one CPU thread (0-40us),
 * each kernel starting when its launch ends or when the stream frees, so
 * the stream runs without a break from 5us, when the first launch ends:
 *
 *   forward   conv A 100us  X_A = 25000 floats = 100000 B     5-105
 *             relu    50us                                   105-155
 *             conv B 100us  X_B = 12500 floats =  50000 B    155-255
 *             linear  50us                                   255-305
 *   backward  AddmmBackward0        50us                     305-355
 *             ConvolutionBackward0 100us  (conv B)           355-455
 *             ReluBackward0         50us                     455-505
 *             ConvolutionBackward0 100us  (conv A)           505-605
 *
 * Baseline makespan 605us.  Every schedule below is GPU-bound from 5us on.
 */
typedef struct {
    tiny t;
    int32_t conv_a, relu, conv_b, linear, addmm_bw, conv_b_bw, relu_bw, conv_a_bw;
} two_convs;

static two_convs two_convs_graph(void)
{
    two_convs n;
    n.t = tiny_new();
    n.conv_a = layer_kernel(&n.t, "aten::conv2d", "[[25000], [1], [], []]", 100, RV_PHASE_FORWARD);
    n.relu = layer_kernel(&n.t, "aten::relu_", "[[25000]]", 50, RV_PHASE_FORWARD);
    n.conv_b = layer_kernel(&n.t, "aten::conv2d", "[[12500], [1], [], []]", 100, RV_PHASE_FORWARD);
    n.linear = layer_kernel(&n.t, "aten::linear", "[[100], [10, 10], [10]]", 50, RV_PHASE_FORWARD);
    n.addmm_bw = layer_kernel(&n.t, "autograd::engine::evaluate_function: AddmmBackward0", NULL, 50,
                              RV_PHASE_BACKWARD);
    n.conv_b_bw = layer_kernel(&n.t, "autograd::engine::evaluate_function: ConvolutionBackward0", NULL, 100,
                               RV_PHASE_BACKWARD);
    n.relu_bw = layer_kernel(&n.t, "autograd::engine::evaluate_function: ReluBackward0", NULL, 50,
                             RV_PHASE_BACKWARD);
    n.conv_a_bw = layer_kernel(&n.t, "autograd::engine::evaluate_function: ConvolutionBackward0", NULL, 100,
                               RV_PHASE_BACKWARD);
    tiny_close_step(&n.t);
    tiny_record(n.t.graph);
    ck_assert_int_eq(makespan(n.t.graph), US(605));
    return n;
}

/* Inserted tasks on a channel ("pcie.d2h"), and the one with `bytes`. */
static guint inserted_on(const rv_graph *graph, const char *channel, int64_t bytes, int32_t *found)
{
    guint count = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        const rv_resource *resource = &g_array_index(graph->resources, rv_resource, task->resource);
        if (!(task->flags & RV_TASK_FLAG_INSERTED) || strcmp(rv_strings_get(graph->strings, resource->name), channel))
            continue;
        count++;
        if (found && task->bytes == bytes) *found = id;
    }
    return count;
}

/* apply_plugin must fail with one RV_ERROR_PLUGIN line containing `words`,
 * leaving the graph's task count as it was. */
static void assert_refused(rv_graph *graph, const char *text, const char *words)
{
    int32_t before = rv_graph_task_count(graph);
    GError *error = NULL;
    ck_assert(!apply_plugin(graph, "vdnn", text, &error));
    ck_assert_msg(g_error_matches(error, RV_ERROR, RV_ERROR_PLUGIN), "wrong error: %s", error ? error->message : "none");
    ck_assert_msg(strstr(error->message, words) != NULL, "'%s' lacks '%s'", error->message, words);
    ck_assert_msg(strchr(error->message, '\n') == NULL, "not one line: %s", error->message);
    ck_assert_int_eq(rv_graph_task_count(graph), before);
    g_error_free(error);
}

/* ---- hand-built ----------------------------------------------------- */

/*
 * 1 GB/s, no latency: a copy takes 1ns per byte, X_A 100us, X_B 50us.
 *   d2h  O_A starts with conv A: 5-105; relu waits for it: 105, as before.
 *        O_B starts with conv B: 155-205; linear at 255, as before.
 *   h2d  P_B (topmost conv): released by the first backward task
 *        (AddmmBackward, 305): 305-355; conv B's backward starts 355.
 *        P_A: released when conv B's backward starts (355): 355-455;
 *        conv A's backward starts at 505 anyway.
 * Nothing waits: 605us, the baseline to the ns.
 */
START_TEST(hand_fast_link_hides_copies)
{
    two_convs n = two_convs_graph();
    int64_t span;
    apply_and_simulate(n.t.graph, "vdnn", "pcie_bandwidth=1GB/s,latency=0us", &span, NULL);
    ck_assert_int_eq(span, US(605));
    ck_assert_uint_eq(inserted_on(n.t.graph, "pcie.d2h", 0, NULL), 2);
    ck_assert_uint_eq(inserted_on(n.t.graph, "pcie.h2d", 0, NULL), 2);
    rv_graph_free(n.t.graph);
}
END_TEST

/*
 * 500 MB/s, no latency: X_A takes 200us, X_B 100us.
 *   O_A 5-205; relu waits: 205-255; conv B 255-355; O_B 255-355;
 *   linear waits: 355-405; AddmmBackward 405-455.
 *   P_B released at 405: 405-505; conv B backward waits: 505-605;
 *   ReluBackward 605-655.  P_A released when conv B backward starts
 *   (505): 505-705; conv A backward waits: 705-805.  Makespan 805us.
 */
START_TEST(hand_slow_link_stalls)
{
    two_convs n = two_convs_graph();
    int64_t span;
    apply_and_simulate(n.t.graph, "vdnn", "pcie_bandwidth=500MB/s,latency=0us", &span, NULL);
    ck_assert_int_eq(span, US(805));
    rv_graph_free(n.t.graph);
}
END_TEST

/*
 * findPrefetchLayer: in the slow case above the h2d channel is idle from
 * 0 to 405us and X_A is on the host at 205us, yet P_A starts only when
 * conv B's backward starts (505us); P_B starts with the first backward task.
 * The priority ranks P_B (nearer the output) before P_A.
 */
START_TEST(hand_prefetch_waits_for_layer_above)
{
    two_convs n = two_convs_graph();
    rv_sim_result sim = { 0 };
    int64_t *ranks = NULL;
    apply_and_replay(n.t.graph, "vdnn", "pcie_bandwidth=500MB/s,latency=0us", &sim, &ranks);
    int32_t prefetch_a = -1, prefetch_b = -1, offload_a = -1;
    inserted_on(n.t.graph, "pcie.h2d", 100000, &prefetch_a);
    inserted_on(n.t.graph, "pcie.h2d", 50000, &prefetch_b);
    inserted_on(n.t.graph, "pcie.d2h", 100000, &offload_a);
    ck_assert(prefetch_a >= 0 && prefetch_b >= 0 && offload_a >= 0);
    ck_assert_int_eq(sim.start_ns[offload_a], sim.start_ns[n.conv_a]);
    ck_assert_int_eq(sim.end_ns[offload_a], US(205));
    ck_assert_int_eq(sim.start_ns[prefetch_b], sim.start_ns[n.addmm_bw]);
    ck_assert_int_eq(sim.start_ns[prefetch_b], US(405));
    ck_assert_int_eq(sim.start_ns[prefetch_a], sim.start_ns[n.conv_b_bw]);
    ck_assert_int_eq(sim.start_ns[prefetch_a], US(505));
    ck_assert_int_eq(sim.start_ns[n.conv_a_bw], sim.end_ns[prefetch_a]);
    ck_assert_int_eq(sim.end_ns[n.conv_a_bw], US(805));
    ck_assert_msg(ranks[prefetch_b] < ranks[prefetch_a], "rank %" G_GINT64_FORMAT " !< %" G_GINT64_FORMAT,
                  ranks[prefetch_b], ranks[prefetch_a]);
    g_free(ranks);
    rv_sim_result_clear(&sim);
    rv_graph_free(n.t.graph);
}
END_TEST

/*
 * 1 GB/s with 10us per copy: X_A 110us, X_B 60us.
 *   O_A 5-115; relu 115-165; conv B 165-265; O_B 165-225; linear 265-315;
 *   AddmmBackward 315-365; P_B 315-375; conv B backward waits: 375-475;
 *   ReluBackward 475-525; P_A 375-485; conv A backward 525-625.
 */
START_TEST(hand_latency_counts)
{
    two_convs n = two_convs_graph();
    int64_t span;
    apply_and_simulate(n.t.graph, "vdnn", "pcie_bandwidth=1GB/s,latency=10us", &span, NULL);
    ck_assert_int_eq(span, US(625));
    rv_graph_free(n.t.graph);
}
END_TEST

/*
 * policy=all also offloads relu's input (100000 B, paired with
 * ReluBackward0) and linear's (100 floats = 400 B, with AddmmBackward0):
 * four copies each way.  At 1 GB/s, no latency:
 *   O_A 5-105; relu waits: 105-155.  O_relu starts with relu: 105-205;
 *   conv B waits: 205-305.  O_B 205-255; linear 305-355 (O_B done).
 *   O_lin starts with linear: 305-305.4.
 *   Prefetches: the topmost (linear) would be released by the first
 *   backward task, but that is linear's own backward, so the GPU task
 *   before it releases it: linear's end, 355: P_lin 355-355.4;
 *   AddmmBackward waits: 355.4-405.4.  P_B released by AddmmBackward's
 *   start: 355.4-405.4; conv B backward 405.4-505.4.  P_relu released at
 *   405.4: -505.4; ReluBackward 505.4-555.4.  P_A released at 505.4:
 *   -605.4; conv A backward waits: 605.4-705.4.
 */
START_TEST(hand_policy_all)
{
    two_convs n = two_convs_graph();
    int64_t span;
    apply_and_simulate(n.t.graph, "vdnn", "policy=all,pcie_bandwidth=1GB/s,latency=0us", &span, NULL);
    ck_assert_uint_eq(inserted_on(n.t.graph, "pcie.d2h", 0, NULL), 4);
    ck_assert_uint_eq(inserted_on(n.t.graph, "pcie.h2d", 0, NULL), 4);
    ck_assert_int_eq(span, US(705) + 400);
    rv_graph_free(n.t.graph);
}
END_TEST

/* dtype_bytes=2 halves every copy: the 500 MB/s case becomes the 1 GB/s one. */
START_TEST(hand_dtype_bytes)
{
    two_convs n = two_convs_graph();
    int64_t span;
    apply_and_simulate(n.t.graph, "vdnn", "pcie_bandwidth=500MB/s,latency=0us,dtype_bytes=2", &span, NULL);
    ck_assert_int_eq(span, US(605));
    rv_graph_free(n.t.graph);
}
END_TEST

/* ---- nothing to act on ---------------------------------------------- */

START_TEST(refuses_without_conv)
{
    tiny t = tiny_new();
    layer_kernel(&t, "aten::relu_", "[[1000]]", 50, RV_PHASE_FORWARD);
    layer_kernel(&t, "autograd::engine::evaluate_function: ReluBackward0", NULL, 50, RV_PHASE_BACKWARD);
    tiny_record(t.graph);
    assert_refused(t.graph, "", "no convolution layers");
    rv_graph_free(t.graph);
}
END_TEST

START_TEST(refuses_without_shapes)
{
    tiny t = tiny_new();
    layer_kernel(&t, "aten::conv2d", NULL, 100, RV_PHASE_FORWARD);
    layer_kernel(&t, "autograd::engine::evaluate_function: ConvolutionBackward0", NULL, 100, RV_PHASE_BACKWARD);
    tiny_close_step(&t); /* the step the kernels name exists, as in a built graph */
    tiny_record(t.graph);
    assert_refused(t.graph, "", "record_shapes");
    rv_graph_free(t.graph);
}
END_TEST

START_TEST(refuses_without_backward)
{
    tiny t = tiny_new();
    layer_kernel(&t, "aten::conv2d", "[[1000], [1]]", 100, RV_PHASE_FORWARD);
    tiny_close_step(&t);
    tiny_record(t.graph);
    assert_refused(t.graph, "", "no matching backward");
    rv_graph_free(t.graph);
}
END_TEST

/* A sizes file must list exactly the layers to offload (two here). */
START_TEST(refuses_wrong_sizes_file)
{
    two_convs n = two_convs_graph();
    char *path = NULL;
    int fd = g_file_open_tmp("vdnn-sizes-XXXXXX.json", &path, NULL);
    ck_assert(fd >= 0);
    close(fd);
    ck_assert(g_file_set_contents(path, "[1000, 2000, 3000]", -1, NULL));
    char *text = g_strdup_printf("feature_map_sizes=%s", path);
    assert_refused(n.t.graph, text, "lists 3 sizes");
    ck_assert(g_file_set_contents(path, "[1000, \"big\"]", -1, NULL));
    assert_refused(n.t.graph, text, "entry 1");
    g_free(text);
    g_unlink(path);
    g_free(path);
    rv_graph_free(n.t.graph);
}
END_TEST

/* ---- real traces ---------------------------------------------------- */

/*
 * ResNet-50 (torchvision v1.5) at batch 32, fp32: the input feature map of
 * each of its 53 convolutions in forward order (conv1, then per bottleneck
 * conv1, conv2, conv3 and, in the first block of a stage, the downsample).
 * The legacy trace recorded these shapes; the test checks that the plugin
 * reads the same total from them, and feeds the list to the HTA trace,
 * which was recorded without shapes (its batch size is not known; 32 is an
 * assumption).
 */
static GArray *resnet50_conv_inputs(int64_t batch)
{
    GArray *sizes = g_array_new(FALSE, FALSE, sizeof(int64_t));
    static const int64_t widths[] = { 64, 128, 256, 512 }, sides[] = { 56, 28, 14, 7 }, blocks[] = { 3, 4, 6, 3 };
    int64_t elements = 3 * 224 * 224, inplanes = 64, side_in = 56;
    g_array_append_val(sizes, elements);
    for (int s = 0; s < 4; s++) {
        int64_t w = widths[s], side = sides[s];
        int64_t first[4] = { inplanes * side_in * side_in, w * side_in * side_in, w * side * side,
                             inplanes * side_in * side_in };
        g_array_append_vals(sizes, first, 4);
        inplanes = 4 * w;
        for (int b = 1; b < blocks[s]; b++) {
            int64_t rest[3] = { inplanes * side * side, w * side * side, w * side * side };
            g_array_append_vals(sizes, rest, 3);
        }
        side_in = side;
    }
    for (guint i = 0; i < sizes->len; i++) g_array_index(sizes, int64_t, i) *= 4 * batch;
    return sizes;
}

static char *write_sizes_file(const GArray *sizes)
{
    GString *json = g_string_new("[");
    for (guint i = 0; i < sizes->len; i++)
        g_string_append_printf(json, "%s%" G_GINT64_FORMAT, i ? ", " : "", g_array_index(sizes, int64_t, i));
    g_string_append(json, "]");
    char *path = NULL;
    int fd = g_file_open_tmp("vdnn-resnet50-XXXXXX.json", &path, NULL);
    ck_assert(fd >= 0);
    close(fd);
    ck_assert(g_file_set_contents(path, json->str, -1, NULL));
    g_string_free(json, TRUE);
    return path;
}

/* The bytes of the inserted copies on a channel. */
static int64_t channel_bytes(const rv_graph *graph, const char *channel)
{
    int64_t total = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        const rv_resource *resource = &g_array_index(graph->resources, rv_resource, task->resource);
        if ((task->flags & RV_TASK_FLAG_INSERTED) && !strcmp(rv_strings_get(graph->strings, resource->name), channel))
            total += task->bytes;
    }
    return total;
}

/* Slower links, longer steps: >= baseline at 32 GB/s, and strictly more
 * at 12 and 4 GB/s.  `extra` is prefixed to the parameters. */
static void check_slowdown_grows(const char *trace, const char *extra)
{
    static const char *bandwidths[] = { "32GB/s", "12GB/s", "4GB/s" };
    int64_t previous = 0;
    for (guint i = 0; i < G_N_ELEMENTS(bandwidths); i++) {
        char *text = g_strdup_printf("%spcie_bandwidth=%s", extra, bandwidths[i]);
        int64_t base, predicted;
        predict_trace(trace, "vdnn", text, &base, &predicted);
        g_free(text);
        ck_assert_msg(predicted >= base, "%s at %s: %" G_GINT64_FORMAT " < baseline %" G_GINT64_FORMAT, trace,
                      bandwidths[i], predicted, base);
        ck_assert_msg(predicted > previous, "%s at %s: %" G_GINT64_FORMAT " not above %" G_GINT64_FORMAT, trace,
                      bandwidths[i], predicted, previous);
        previous = predicted;
    }
}

/* The legacy trace has shapes: 53 convolutions in each of its steps (the
 * project ships its first 2), sized exactly as the architecture says. */
START_TEST(legacy_resnet50_offloads_every_conv)
{
    rv_graph *graph = load_trace("kineto_legacy_resnet50_v100.2steps.json.gz");
    guint steps = graph->steps->len;
    ck_assert_uint_eq(steps, 2);
    apply_and_simulate(graph, "vdnn", "", NULL, NULL);
    ck_assert_uint_eq(inserted_on(graph, "pcie.d2h", 0, NULL), 53 * steps);
    ck_assert_uint_eq(inserted_on(graph, "pcie.h2d", 0, NULL), 53 * steps);
    GArray *sizes = resnet50_conv_inputs(32);
    int64_t per_step = 0;
    for (guint i = 0; i < sizes->len; i++) per_step += g_array_index(sizes, int64_t, i);
    ck_assert_int_eq(channel_bytes(graph, "pcie.d2h"), per_step * steps);
    ck_assert_int_eq(channel_bytes(graph, "pcie.h2d"), per_step * steps);
    g_array_unref(sizes);
    rv_graph_free(graph);
}
END_TEST

START_TEST(legacy_resnet50_slowdown)
{
    check_slowdown_grows("kineto_legacy_resnet50_v100.2steps.json.gz", "");
    check_slowdown_grows("kineto_legacy_resnet50_v100.2steps.json.gz", "policy=all,");
}
END_TEST

/* A link fast enough to hide every copy changes nothing, to the ns. */
START_TEST(legacy_resnet50_neutral)
{
    check_neutral("kineto_legacy_resnet50_v100.2steps.json.gz", "vdnn", "pcie_bandwidth=100TB/s,latency=0us");
    check_neutral("kineto_legacy_resnet50_v100.2steps.json.gz", "vdnn", "policy=all,pcie_bandwidth=100TB/s,latency=0us");
}
END_TEST

/* The HTA trace has no Input Dims: refused with a hint, then sized from a file. */
START_TEST(hta_resnet50_needs_sizes)
{
    rv_graph *graph = load_trace("hta_resnet50_v100.json.gz");
    assert_refused(graph, "", "feature_map_sizes");
    GArray *sizes = resnet50_conv_inputs(32);
    char *path = write_sizes_file(sizes);
    char *text = g_strdup_printf("feature_map_sizes=%s", path);
    apply_and_simulate(graph, "vdnn", text, NULL, NULL);
    ck_assert_uint_eq(inserted_on(graph, "pcie.d2h", 0, NULL), 53 * graph->steps->len);
    ck_assert_uint_eq(inserted_on(graph, "pcie.h2d", 0, NULL), 53 * graph->steps->len);
    char *extra = g_strdup_printf("%s,", text);
    check_slowdown_grows("hta_resnet50_v100.json.gz", extra);
    g_free(extra);
    g_free(text);
    g_unlink(path);
    g_free(path);
    g_array_unref(sizes);
    rv_graph_free(graph);
}
END_TEST

/* In a what-if where vdnn comes last, its stall line comes from the
 * prediction's own replay, and says what its own replay said. */
START_TEST(stalls_from_the_host_replay)
{
    two_convs n = two_convs_graph();
    assert_notes_from_host_replays(n.t.graph, "vdnn", "pcie_bandwidth=500MB/s,latency=0us", "stall:");
    rv_graph_free(n.t.graph);
    rv_graph *graph = load_trace("kineto_legacy_resnet50_v100.2steps.json.gz");
    assert_notes_from_host_replays(graph, "vdnn", "", "stall:");
    assert_notes_from_host_replays(graph, "vdnn", "policy=all,pcie_bandwidth=4GB/s", "stall:");
    rv_graph_free(graph);
}
END_TEST

/* ---- suite ---------------------------------------------------------- */

static Suite *vdnn_suite(void)
{
    Suite *suite = suite_create("vdnn");
    TCase *tc = tcase_create("hand-built");
    tcase_add_test(tc, hand_fast_link_hides_copies);
    tcase_add_test(tc, hand_slow_link_stalls);
    tcase_add_test(tc, hand_prefetch_waits_for_layer_above);
    tcase_add_test(tc, hand_latency_counts);
    tcase_add_test(tc, hand_policy_all);
    tcase_add_test(tc, hand_dtype_bytes);
    suite_add_tcase(suite, tc);
    tc = tcase_create("nothing to act on");
    tcase_add_test(tc, refuses_without_conv);
    tcase_add_test(tc, refuses_without_shapes);
    tcase_add_test(tc, refuses_without_backward);
    tcase_add_test(tc, refuses_wrong_sizes_file);
    suite_add_tcase(suite, tc);
    tc = tcase_create("real traces");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, legacy_resnet50_offloads_every_conv);
    tcase_add_test(tc, legacy_resnet50_slowdown);
    tcase_add_test(tc, legacy_resnet50_neutral);
    tcase_add_test(tc, hta_resnet50_needs_sizes);
    tcase_add_test(tc, stalls_from_the_host_replay);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void)
{
    static const char *const traces[] = { "hta_resnet50_v100.json.gz", "kineto_legacy_resnet50_v100.2steps.json.gz", NULL };
    require_project_traces(traces);
    SRunner *runner = srunner_create(vdnn_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
