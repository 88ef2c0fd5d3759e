/*
 * test_reports.c - the reports on hand-built graphs whose schedules are
 * worked out by hand: the critical path (which rule bound each start, and
 * that the links tile the step), the breakdown (each part, per phase and
 * per stream), the timeline file (categories, flows, marks), the diff and
 * the plot.
 *
 * The graph used by most tests, times in microseconds (stream: launch
 * latency 3, idle gap 1):
 *   CPU:    A [5,15) host overhead 5 (from 0)   B [17,27) host overhead 2 (from 15)   S [169,173) sync tail
 *   stream: K1 [18,118) = A's end + 3            K2 [119,169) = K1's end + 1
 * S waits for K2 through a sync edge.  Without steps the window is the
 * first start to the last end: [5, 173).
 */
#include "plugin_harness.h"
#include "reverie/breakdown.h"
#include "reverie/critical_path.h"
#include "reverie/diff.h"
#include "reverie/plot.h"
#include "reverie/timeline.h"
#include <glib/gstdio.h>
#include <jansson.h>
#include <string.h>

typedef struct {
    tiny t;
    int32_t a, b, k1, k2, s;
} worked;

static int32_t launch_pair(tiny *t, const char *kernel, int64_t call_ns, int64_t overhead_ns, int64_t kernel_ns,
                           rv_phase phase, int64_t correlation)
{
    int32_t gpu = tiny_launch(t, kernel, call_ns, kernel_ns, phase, RV_TASK_KERNEL);
    int32_t call = rv_graph_launch_of(t->graph, gpu);
    rv_task *c = rv_graph_task(t->graph, call), *g = rv_graph_task(t->graph, gpu);
    c->host_overhead_ns = overhead_ns;
    c->op = c->layer = g->op = g->layer = rv_strings_intern(t->graph->strings, phase == RV_PHASE_FORWARD ? "conv1" : "conv1.backward");
    c->correlation = g->correlation = correlation;
    return gpu;
}

static worked worked_graph(int32_t queue_depth)
{
    worked w;
    w.t = tiny_new();
    rv_resource *stream = &g_array_index(w.t.graph->resources, rv_resource, w.t.gpu);
    stream->launch_latency_ns = US(3);
    stream->idle_gap_ns = US(1);
    stream->queue_depth = queue_depth;
    w.k1 = launch_pair(&w.t, "sgemm_kernel", US(10), US(5), US(100), RV_PHASE_FORWARD, 11);
    w.a = rv_graph_launch_of(w.t.graph, w.k1);
    w.k2 = launch_pair(&w.t, "elementwise_kernel", US(10), US(2), US(50), RV_PHASE_BACKWARD, 12);
    w.b = rv_graph_launch_of(w.t.graph, w.k2);
    w.s = tiny_task(&w.t, w.t.cpu, RV_TASK_SYNC, "cudaDeviceSynchronize", US(4), RV_PHASE_BACKWARD);
    rv_graph_add_edge(w.t.graph, w.k2, w.s, RV_EDGE_SYNC, FALSE);
    return w;
}

/* A path in a new temporary folder; remove_temp removes both. */
static char *temp_path(const char *name)
{
    char *folder = g_dir_make_tmp("reverie-reports-XXXXXX", NULL);
    ck_assert(folder != NULL);
    char *path = g_build_filename(folder, name, NULL);
    g_free(folder);
    return path;
}

static void remove_temp(char *path)
{
    char *folder = g_path_get_dirname(path);
    g_unlink(path);
    g_rmdir(folder);
    g_free(folder);
    g_free(path);
}

static void replay_ok(const rv_graph *graph, rv_sim_result *sim)
{
    GError *error = NULL;
    ck_assert_msg(rv_simulate(graph, NULL, sim, &error), "%s", error ? error->message : "");
}

static const rv_path_link *link_at(const rv_step_path *path, guint i)
{
    return &g_array_index(path->links, rv_path_link, i);
}

static int64_t path_sum(const rv_step_path *path)
{
    int64_t sum = path->before_chain_ns;
    for (guint i = 0; i < path->links->len; i++) sum += rv_path_link_ns(link_at(path, i));
    return sum;
}

START_TEST(critical_path_names_each_binding_rule)
{
    worked w = worked_graph(0);
    rv_sim_result sim = { 0 };
    replay_ok(w.t.graph, &sim);
    ck_assert_int_eq(sim.start_ns[w.k2], US(119));
    rv_critical_path *path = rv_critical_path_find(w.t.graph, &sim);
    ck_assert_uint_eq(path->steps->len, 1);
    const rv_step_path *step = &g_array_index(path->steps, rv_step_path, 0);
    ck_assert_int_eq(step->begin_ns, US(5));
    ck_assert_int_eq(step->end_ns, US(173));
    ck_assert_uint_eq(step->links->len, 4);
    int32_t expected[] = { w.a, w.k1, w.k2, w.s };
    for (guint i = 0; i < 4; i++) ck_assert_int_eq(link_at(step, i)->task, expected[i]);
    ck_assert_int_eq(link_at(step, 0)->via, RV_VIA_NOTHING);
    ck_assert_int_eq(link_at(step, 0)->host_overhead_ns, 0); /* before the window */
    ck_assert_int_eq(link_at(step, 1)->via, RV_VIA_EDGE);
    ck_assert_int_eq(link_at(step, 1)->edge_kind, RV_EDGE_LAUNCH);
    ck_assert_int_eq(link_at(step, 1)->wait_kind, RV_WAIT_LAUNCH_LATENCY);
    ck_assert_int_eq(link_at(step, 1)->wait_ns, US(3));
    ck_assert_int_eq(link_at(step, 2)->via, RV_VIA_RESOURCE);
    ck_assert_int_eq(link_at(step, 2)->predecessor, w.k1);
    ck_assert_int_eq(link_at(step, 2)->wait_kind, RV_WAIT_IDLE_GAP);
    ck_assert_int_eq(link_at(step, 2)->wait_ns, US(1));
    ck_assert_int_eq(link_at(step, 3)->via, RV_VIA_EDGE);
    ck_assert_int_eq(link_at(step, 3)->edge_kind, RV_EDGE_SYNC);
    ck_assert_int_eq(path_sum(step), US(168));
    rv_path_totals totals;
    rv_path_totals_init(&totals);
    rv_path_totals_add(&totals, w.t.graph, step);
    ck_assert_int_eq(totals.by_kind_ns[RV_TASK_KERNEL], US(150));
    ck_assert_int_eq(totals.by_phase_ns[RV_PHASE_FORWARD], US(113));  /* A 10 + K1 103 */
    ck_assert_int_eq(rv_path_totals_layer_ns(&totals, rv_strings_lookup(w.t.graph->strings, "conv1")), US(113));
    rv_path_totals_clear(&totals);
    rv_critical_path_free(path);
    rv_sim_result_clear(&sim);
    rv_graph_free(w.t.graph);
}
END_TEST

/* With a launch queue of one, B cannot submit K2 until K1 ends: B's start
 * is bound by the queue, with no host overhead on the path. */
START_TEST(critical_path_through_the_launch_queue)
{
    worked w = worked_graph(1);
    rv_sim_result sim = { 0 };
    replay_ok(w.t.graph, &sim);
    ck_assert_int_eq(sim.start_ns[w.b], US(118));
    rv_critical_path *path = rv_critical_path_find(w.t.graph, &sim);
    const rv_step_path *step = &g_array_index(path->steps, rv_step_path, 0);
    ck_assert_uint_eq(step->links->len, 5);
    const rv_path_link *held = link_at(step, 2);
    ck_assert_int_eq(held->task, w.b);
    ck_assert_int_eq(held->via, RV_VIA_QUEUE);
    ck_assert_int_eq(held->predecessor, w.k1);
    ck_assert_int_eq(held->host_overhead_ns, 0);
    ck_assert_int_eq(path_sum(step), step->end_ns - step->begin_ns);
    ck_assert_int_eq(step->end_ns - step->begin_ns, US(180));
    rv_critical_path_free(path);
    rv_sim_result_clear(&sim);
    rv_graph_free(w.t.graph);
}
END_TEST

/* A prediction with K1 twice as fast, both replayed. */
static rv_graph *halve_k1(worked *w, rv_sim_result *before, rv_sim_result *after)
{
    rv_graph *predicted = rv_graph_copy(w->t.graph);
    GArray *one = g_array_new(FALSE, FALSE, sizeof(int32_t));
    g_array_append_val(one, w->k1);
    rv_transform_scale(predicted, one, 0.5);
    g_array_unref(one);
    replay_ok(w->t.graph, before);
    replay_ok(predicted, after);
    return predicted;
}

static void free_pair(worked *w, rv_graph *predicted, rv_sim_result *before, rv_sim_result *after)
{
    rv_sim_result_clear(before);
    rv_sim_result_clear(after);
    rv_graph_free(predicted);
    rv_graph_free(w->t.graph);
}

static rv_breakdown *breakdown_of(const rv_graph *graph, const rv_sim_result *sim)
{
    GArray *windows = rv_step_windows(graph, sim);
    rv_breakdown *breakdown = rv_breakdown_compute(graph, sim, windows);
    g_array_unref(windows);
    return breakdown;
}

START_TEST(breakdown_by_hand)
{
    worked w = worked_graph(0);
    rv_sim_result sim = { 0 };
    replay_ok(w.t.graph, &sim);
    rv_breakdown *breakdown = breakdown_of(w.t.graph, &sim);
    const rv_step_breakdown *step = &g_array_index(breakdown->steps, rv_step_breakdown, 0);
    ck_assert_int_eq(step->split_ns[RV_SPLIT_CPU_ONLY], US(17));
    ck_assert_int_eq(step->split_ns[RV_SPLIT_OVERLAP], US(9));
    ck_assert_int_eq(step->split_ns[RV_SPLIT_GPU_ONLY], US(141));
    ck_assert_int_eq(step->split_ns[RV_SPLIT_IDLE], US(1));
    const int64_t *forward = step->phase_split_ns[RV_PHASE_FORWARD], *backward = step->phase_split_ns[RV_PHASE_BACKWARD];
    ck_assert_int_eq(forward[RV_SPLIT_CPU_ONLY], US(10));
    ck_assert_int_eq(forward[RV_SPLIT_OVERLAP], US(9));
    ck_assert_int_eq(forward[RV_SPLIT_GPU_ONLY], US(91));
    ck_assert_int_eq(forward[RV_SPLIT_IDLE], US(1));
    ck_assert_int_eq(backward[RV_SPLIT_CPU_ONLY], US(7));
    ck_assert_int_eq(backward[RV_SPLIT_GPU_ONLY], US(50));
    ck_assert_int_eq(step->use_ns[w.t.gpu * RV_USE_COUNT + RV_USE_COMPUTE], US(150));
    ck_assert_int_eq(step->use_ns[w.t.gpu * RV_USE_COUNT + RV_USE_IDLE], US(18));
    ck_assert_int_eq(step->comm_ns, 0);
    rv_breakdown_free(breakdown);
    rv_sim_result_clear(&sim);
    rv_graph_free(w.t.graph);
}
END_TEST

/* A collective [0,40) on its own stream beside compute [0,30): 10 us exposed. */
START_TEST(breakdown_exposed_communication)
{
    tiny t = tiny_new();
    int32_t comm_stream = rv_graph_add_resource(t.graph, RV_RES_GPU_STREAM, 0, 20, "gpu 0 stream 20");
    tiny_task(&t, t.gpu, RV_TASK_KERNEL, "k0", US(10), RV_PHASE_BACKWARD);
    tiny_task(&t, t.gpu, RV_TASK_KERNEL, "k1", US(20), RV_PHASE_BACKWARD);
    int32_t comm = tiny_task(&t, comm_stream, RV_TASK_COMM, "ncclAllReduce", US(40), RV_PHASE_BACKWARD);
    rv_graph_task(t.graph, comm)->flags |= RV_TASK_FLAG_GPU;
    rv_sim_result sim = { 0 };
    replay_ok(t.graph, &sim);
    rv_breakdown *breakdown = breakdown_of(t.graph, &sim);
    const rv_step_breakdown *step = &g_array_index(breakdown->steps, rv_step_breakdown, 0);
    ck_assert_int_eq(step->comm_ns, US(40));
    ck_assert_int_eq(step->exposed_comm_ns, US(10));
    ck_assert_int_eq(step->phase_exposed_comm_ns[RV_PHASE_BACKWARD], US(10));
    ck_assert_int_eq(step->split_ns[RV_SPLIT_GPU_ONLY], US(40));
    ck_assert_int_eq(step->use_ns[comm_stream * RV_USE_COUNT + RV_USE_COMMUNICATION], US(40));
    rv_breakdown_free(breakdown);
    rv_sim_result_clear(&sim);
    rv_graph_free(t.graph);
}
END_TEST

static json_t *load_json(const char *path)
{
    json_error_t problem;
    json_t *root = json_load_file(path, 0, &problem);
    ck_assert_msg(root != NULL, "%s: %s at line %d", path, problem.text, problem.line);
    return root;
}

/* Events of one phase and category (NULL: any) in process pid (0: any). */
static int count_events(json_t *events, const char *ph, const char *category, json_int_t pid)
{
    int count = 0;
    size_t i;
    json_t *event;
    json_array_foreach(events, i, event) {
        if (g_strcmp0(json_string_value(json_object_get(event, "ph")), ph) != 0) continue;
        if (category && g_strcmp0(json_string_value(json_object_get(event, "cat")), category) != 0) continue;
        if (pid && json_integer_value(json_object_get(event, "pid")) != pid) continue;
        count++;
    }
    return count;
}

static json_t *find_event(json_t *events, json_int_t pid, const char *name)
{
    size_t i;
    json_t *event;
    json_array_foreach(events, i, event)
        if (json_integer_value(json_object_get(event, "pid")) == pid &&
            g_strcmp0(json_string_value(json_object_get(event, "ph")), "X") == 0 &&
            g_strcmp0(json_string_value(json_object_get(event, "name")), name) == 0)
            return event;
    return NULL;
}

START_TEST(timeline_reads_like_kineto)
{
    worked w = worked_graph(0);
    rv_sim_result before = { 0 }, after = { 0 };
    rv_graph *predicted = halve_k1(&w, &before, &after);
    rv_critical_path *path = rv_critical_path_find(w.t.graph, &before);
    rv_timeline_run runs[2] = {
        { "baseline", w.t.graph, &before, predicted, path, "predicted" },
        { "predicted", predicted, &after, w.t.graph, NULL, "baseline" },
    };
    char *file = temp_path("timeline.json");
    GError *error = NULL;
    ck_assert_msg(rv_timeline_write(file, runs, 2, &error), "%s", error ? error->message : "");
    json_t *root = load_json(file), *events = json_object_get(root, "traceEvents");
    ck_assert_int_eq(count_events(events, "X", "cuda_runtime", 1), 3);
    ck_assert_int_eq(count_events(events, "X", "kernel", 1), 2);
    ck_assert_int_eq(count_events(events, "X", "cpu_op", 1), 2);
    ck_assert_int_eq(count_events(events, "s", "ac2g", 0), 4);
    ck_assert_int_eq(count_events(events, "f", "ac2g", 0), 4);
    ck_assert_int_eq(count_events(events, "s", "sync", 1), 1);
    size_t i;
    json_t *event;
    int named = 0;
    json_array_foreach(events, i, event) {
        if (g_strcmp0(json_string_value(json_object_get(event, "name")), "process_name") != 0) continue;
        const char *name = json_string_value(json_object_get(json_object_get(event, "args"), "name"));
        ck_assert(g_str_has_prefix(name, json_integer_value(json_object_get(event, "pid")) == 1 ? "baseline" : "predicted"));
        named++;
    }
    ck_assert_int_eq(named, 2);
    json_t *k1 = find_event(events, 1, "sgemm_kernel"), *k1_predicted = find_event(events, 2, "sgemm_kernel");
    json_t *args = json_object_get(k1, "args");
    ck_assert_int_eq(json_integer_value(json_object_get(args, "correlation")), 11);
    ck_assert_int_eq(json_integer_value(json_object_get(args, "critical")), 1);
    ck_assert_str_eq(json_string_value(json_object_get(args, "phase")), "forward");
    ck_assert_str_eq(json_string_value(json_object_get(args, "layer")), "conv1");
    ck_assert_str_eq(json_string_value(json_object_get(args, "change")), "changed");
    ck_assert(json_real_value(json_object_get(k1_predicted, "dur")) == 50.0);
    ck_assert(json_real_value(json_object_get(json_object_get(k1_predicted, "args"), "baseline_dur_us")) == 100.0);
    ck_assert_ptr_null(json_object_get(json_object_get(find_event(events, 2, "elementwise_kernel"), "args"), "change"));
    json_decref(root);
    remove_temp(file);
    rv_critical_path_free(path);
    free_pair(&w, predicted, &before, &after);
}
END_TEST

START_TEST(timeline_unwritable_is_an_error)
{
    worked w = worked_graph(0);
    rv_sim_result sim = { 0 };
    replay_ok(w.t.graph, &sim);
    rv_timeline_run run = { "baseline", w.t.graph, &sim, NULL, NULL, NULL };
    GError *error = NULL;
    ck_assert(!rv_timeline_write("/nonexistent-folder/t.json", &run, 1, &error));
    ck_assert(g_error_matches(error, RV_ERROR, RV_ERROR_INPUT));
    g_clear_error(&error);
    rv_sim_result_clear(&sim);
    rv_graph_free(w.t.graph);
}
END_TEST

START_TEST(diff_finds_the_scaled_class_and_layer)
{
    worked w = worked_graph(0);
    rv_sim_result before = { 0 }, after = { 0 };
    rv_graph *predicted = halve_k1(&w, &before, &after);
    rv_diff *diff = rv_diff_compute(w.t.graph, &before, predicted, &after);
    ck_assert_int_eq(diff->baseline_ns, US(168));
    ck_assert_int_eq(diff->predicted_ns, US(118));
    const rv_change *compute = &g_array_index(diff->classes, rv_change, 0);
    ck_assert_str_eq(compute->name, "compute (GEMM/conv)");
    ck_assert_int_eq(compute->baseline_ns, US(100));
    ck_assert_int_eq(compute->predicted_ns, US(50));
    const rv_change *layer = &g_array_index(diff->layers, rv_change, 0);
    ck_assert_str_eq(layer->name, "conv1");
    ck_assert_int_eq(layer->baseline_ns - layer->predicted_ns, US(50));
    rv_diff_free(diff);
    free_pair(&w, predicted, &before, &after);
}
END_TEST

START_TEST(plot_writes_svg)
{
    worked w = worked_graph(0);
    rv_sim_result sim = { 0 };
    replay_ok(w.t.graph, &sim);
    rv_breakdown *breakdown = breakdown_of(w.t.graph, &sim);
    rv_plot_run run = { "baseline", breakdown };
    char *file = temp_path("plot.svg");
    GError *error = NULL;
    ck_assert_msg(rv_plot_write_svg(file, "hand-built", w.t.graph, &run, 1, &error), "%s", error ? error->message : "");
    char *text = NULL;
    ck_assert(g_file_get_contents(file, &text, NULL, NULL));
    ck_assert(strstr(text, "<svg") != NULL);
    g_free(text);
    ck_assert(!rv_plot_write_svg("/nonexistent-folder/p.svg", "x", w.t.graph, &run, 1, &error));
    ck_assert(g_error_matches(error, RV_ERROR, RV_ERROR_INPUT));
    g_clear_error(&error);
    remove_temp(file);
    rv_breakdown_free(breakdown);
    rv_sim_result_clear(&sim);
    rv_graph_free(w.t.graph);
}
END_TEST

int main(void)
{
    Suite *suite = suite_create("reports");
    TCase *c = tcase_create("hand-built");
    tcase_add_test(c, critical_path_names_each_binding_rule);
    tcase_add_test(c, critical_path_through_the_launch_queue);
    tcase_add_test(c, breakdown_by_hand);
    tcase_add_test(c, breakdown_exposed_communication);
    tcase_add_test(c, timeline_reads_like_kineto);
    tcase_add_test(c, timeline_unwritable_is_an_error);
    tcase_add_test(c, diff_finds_the_scaled_class_and_layer);
    tcase_add_test(c, plot_writes_svg);
    suite_add_tcase(suite, c);
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed ? 1 : 0;
}
