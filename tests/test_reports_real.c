/*
 * test_reports_real.c - the reports on the real traces the project ships
 * (traces/; the whole program reports SKIPPED, exit 77, when one of them or
 * HTA's answer key is missing):
 *   - the critical path of hta_simple_add_a100 against HTA's answer key
 *     (events with args.critical = 1): ours covers at least 90% of the
 *     key's time, and at least 80% of ours is in the key, both measured
 *     on the recorded clock over the union of intervals;
 *   - on every trace, recorded and replayed, the breakdown's parts and the
 *     critical path's links add up to each step's time (within 1%);
 *   - hta_resnet50_v100 with amp: the timeline's predicted process spans
 *     the predicted time within 2%.
 */
#include "plugin_harness.h"
#include "reverie/breakdown.h"
#include "reverie/critical_path.h"
#include "reverie/timeline.h"
#include <glib/gstdio.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <zlib.h>


static const char *const traces[] = {
    "hta_resnet50_v100.json.gz", "hta_transformer_ddp_v100_rank1.2steps.json.gz",
    "kineto_legacy_resnet50_v100.2steps.json.gz",
    "param_linear_2080ti.json.gz", "hta_alexnet_a100.json.gz", "param_dlrm_v100_8ranks/rank0.json.gz",
    "hta_simple_add_a100.json.gz", "hta_event_sync.json.gz", "hta_event_sync_multi_stream.json.gz",
    "hta_minitoy_mi250.json.gz", "hta_triton_a100.json.gz",
};

/* ---- intervals on the recorded clock, in ns ---------------------------- */

typedef struct { int64_t begin, end; } span;

static gint by_begin(gconstpointer a, gconstpointer b)
{
    const span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* Sort and merge overlapping intervals in place. */
static void merge(GArray *spans)
{
    g_array_sort(spans, by_begin);
    guint out = 0;
    for (guint i = 0; i < spans->len; i++) {
        span s = g_array_index(spans, span, i);
        if (out > 0 && s.begin <= g_array_index(spans, span, out - 1).end) {
            span *last = &g_array_index(spans, span, out - 1);
            last->end = MAX(last->end, s.end);
        } else {
            g_array_index(spans, span, out++) = s;
        }
    }
    g_array_set_size(spans, out);
}

static int64_t total(const GArray *spans)
{
    int64_t sum = 0;
    for (guint i = 0; i < spans->len; i++) sum += g_array_index(spans, span, i).end - g_array_index(spans, span, i).begin;
    return sum;
}

static int64_t overlap(const GArray *a, const GArray *b)
{
    int64_t sum = 0;
    for (guint i = 0, j = 0; i < a->len && j < b->len;) {
        const span *x = &g_array_index(a, span, i), *y = &g_array_index(b, span, j);
        sum += MAX(0, MIN(x->end, y->end) - MAX(x->begin, y->begin));
        if (x->end < y->end) i++; else j++;
    }
    return sum;
}

static json_t *load_gzip_json(const char *path)
{
    gzFile file = gzopen(path, "rb");
    ck_assert_msg(file != NULL, "%s", path);
    GString *text = g_string_new(NULL);
    char buffer[65536];
    int got;
    while ((got = gzread(file, buffer, sizeof buffer)) > 0) g_string_append_len(text, buffer, got);
    gzclose(file);
    json_error_t problem;
    json_t *root = json_loads(text->str, 0, &problem);
    ck_assert_msg(root != NULL, "%s: %s", path, problem.text);
    g_string_free(text, TRUE);
    return root;
}

/* HTA's critical events, as recorded intervals (their ts are the trace's). */
static GArray *key_spans(const char *path)
{
    json_t *root = load_gzip_json(path), *event;
    GArray *spans = g_array_new(FALSE, FALSE, sizeof(span));
    size_t i;
    json_array_foreach(json_object_get(root, "traceEvents"), i, event) {
        json_t *args = json_object_get(event, "args");
        if (g_strcmp0(json_string_value(json_object_get(event, "ph")), "X") != 0 ||
            json_integer_value(json_object_get(args, "critical")) != 1)
            continue;
        double ts = json_number_value(json_object_get(event, "ts")), dur = json_number_value(json_object_get(event, "dur"));
        span s = { llround(ts * 1e3), llround((ts + dur) * 1e3) };
        g_array_append_val(spans, s);
    }
    json_decref(root);
    merge(spans);
    return spans;
}

/* Our path's tasks on the recorded clock, each with its host overhead. */
static GArray *path_spans(const rv_graph *graph, const rv_critical_path *path)
{
    GArray *spans = g_array_new(FALSE, FALSE, sizeof(span));
    for (guint s = 0; s < path->steps->len; s++) {
        GArray *links = g_array_index(path->steps, rv_step_path, s).links;
        for (guint i = 0; i < links->len; i++) {
            const rv_path_link *link = &g_array_index(links, rv_path_link, i);
            const rv_task *task = &g_array_index(graph->tasks, rv_task, link->task);
            span one = { task->recorded_start_ns - link->host_overhead_ns, task->recorded_start_ns + task->duration_ns };
            g_array_append_val(spans, one);
        }
    }
    merge(spans);
    return spans;
}

START_TEST(critical_path_matches_hta_answer_key)
{
    rv_graph *graph = load_trace("hta_simple_add_a100.json.gz");
    char *key_path = project_trace_path("hta_simple_add_a100.critical_path.json.gz");
    ck_assert(graph != NULL && key_path != NULL);
    ck_assert_int_eq(graph->timing.clock_offset.value, 0); /* else recorded GPU times would not be the key's */
    rv_sim_result sim = { 0 };
    GError *error = NULL;
    ck_assert(rv_simulate(graph, NULL, &sim, &error));
    rv_critical_path *path = rv_critical_path_find(graph, &sim);
    GArray *key = key_spans(key_path), *ours = path_spans(graph, path);
    int64_t common = overlap(key, ours);
    double covers = (double)common / total(key), inside = (double)common / total(ours);
    printf("hta_simple_add_a100: key %.3f ms, ours %.3f ms, common %.3f ms: ours covers %.2f%% of the key, "
           "%.2f%% of ours is in the key\n", total(key) / 1e6, total(ours) / 1e6, common / 1e6, 100 * covers, 100 * inside);
    ck_assert_msg(covers >= 0.90, "the path covers %.2f%% of HTA's key", 100 * covers);
    ck_assert_msg(inside >= 0.80, "%.2f%% of the path is in HTA's key", 100 * inside);
    g_array_unref(key);
    g_array_unref(ours);
    g_free(key_path);
    rv_critical_path_free(path);
    rv_sim_result_clear(&sim);
    rv_graph_free(graph);
}
END_TEST

static void check_breakdown_adds_up(const char *name, const char *run, const rv_graph *graph, const rv_sim_result *sim,
                                    const GArray *windows)
{
    rv_breakdown *breakdown = rv_breakdown_compute(graph, sim, windows);
    for (guint s = 0; s < breakdown->steps->len; s++) {
        const rv_step_breakdown *step = &g_array_index(breakdown->steps, rv_step_breakdown, s);
        int64_t time = step->end_ns - step->begin_ns, parts = 0, phases = 0;
        for (int k = 0; k < RV_SPLIT_COUNT; k++) parts += step->split_ns[k];
        for (int p = 0; p < RV_PHASE_COUNT; p++)
            for (int k = 0; k < RV_SPLIT_COUNT; k++) phases += step->phase_split_ns[p][k];
        ck_assert_msg(llabs(parts - time) <= time / 100, "%s %s step %u: parts %" G_GINT64_FORMAT " of %" G_GINT64_FORMAT,
                      name, run, s, parts, time);
        ck_assert_msg(llabs(phases - time) <= time / 100, "%s %s step %u: phases", name, run, s);
        for (guint r = 0; r < breakdown->resource_count; r++) {
            if (!rv_breakdown_has_uses(graph, (int32_t)r)) continue;
            int64_t uses = 0;
            for (int u = 0; u < RV_USE_COUNT; u++) uses += step->use_ns[r * RV_USE_COUNT + u];
            ck_assert_msg(llabs(uses - time) <= time / 100, "%s %s step %u stream %u", name, run, s, r);
        }
    }
    rv_breakdown_free(breakdown);
}

START_TEST(parts_add_up_to_each_step)
{
    rv_graph *graph = load_trace(traces[_i]);
    ck_assert_msg(graph != NULL, "%s missing", traces[_i]);
    rv_sim_result sim = { 0 }, recorded = { 0 };
    GError *error = NULL;
    ck_assert(rv_simulate(graph, NULL, &sim, &error));
    rv_recorded_result(graph, &recorded);
    GArray *recorded_windows = rv_step_windows(graph, NULL), *windows = rv_step_windows(graph, &sim);
    check_breakdown_adds_up(traces[_i], "recorded", graph, &recorded, recorded_windows);
    check_breakdown_adds_up(traces[_i], "baseline", graph, &sim, windows);
    rv_critical_path *path = rv_critical_path_find(graph, &sim);
    for (guint s = 0; s < path->steps->len; s++) {
        const rv_step_path *step = &g_array_index(path->steps, rv_step_path, s);
        int64_t sum = step->before_chain_ns, time = step->end_ns - step->begin_ns;
        for (guint i = 0; i < step->links->len; i++) sum += rv_path_link_ns(&g_array_index(step->links, rv_path_link, i));
        ck_assert_msg(llabs(sum - time) <= time / 100, "%s step %u: path %" G_GINT64_FORMAT " ns of %" G_GINT64_FORMAT,
                      traces[_i], s, sum, time);
        ck_assert_msg(step->before_chain_ns <= time / 100, "%s step %u: the chain starts late", traces[_i], s);
    }
    rv_critical_path_free(path);
    g_array_unref(recorded_windows);
    g_array_unref(windows);
    rv_sim_result_clear(&sim);
    rv_sim_result_clear(&recorded);
    rv_graph_free(graph);
}
END_TEST

/* The step ends the replay notes (sim.h) are the ones a pass over every
 * task finds: on each trace as recorded, after a plugin that removes tasks
 * (cuda-graphs: its graph launches are live GPU work, the captured kernels
 * are not), and on the joint DLRM job, whose ranks' steps interleave. */
static void assert_noted_step_ends(const char *label, rv_graph *graph)
{
    rv_sim_result sim = { 0 };
    GError *error = NULL;
    ck_assert_msg(rv_simulate(graph, NULL, &sim, &error), "%s: %s", label, error ? error->message : "");
    ck_assert_msg((sim.step_gpu_end_ns != NULL) == (graph->steps->len > 0), "%s: step ends noted: %d", label,
                  sim.step_gpu_end_ns != NULL);
    GArray *noted = rv_step_times(graph, &sim);
    rv_sim_result unnoted = sim;
    unnoted.step_gpu_end_ns = NULL;
    unnoted.step_count = 0;
    GArray *scanned = rv_step_times(graph, &unnoted);
    ck_assert_uint_eq(noted->len, scanned->len);
    for (guint s = 0; s < noted->len; s++)
        ck_assert_msg(g_array_index(noted, rv_step_time, s).simulated_ns == g_array_index(scanned, rv_step_time, s).simulated_ns,
                      "%s step %u: %" G_GINT64_FORMAT " ns noted, %" G_GINT64_FORMAT " ns by a pass", label, s,
                      g_array_index(noted, rv_step_time, s).simulated_ns,
                      g_array_index(scanned, rv_step_time, s).simulated_ns);
    g_array_unref(noted);
    g_array_unref(scanned);
    rv_sim_result_clear(&sim);
}

START_TEST(replay_notes_the_step_ends_a_pass_finds)
{
    rv_graph *graph = load_trace(traces[_i]);
    assert_noted_step_ends(traces[_i], graph);
    GError *error = NULL;
    if (apply_plugin(graph, "cuda-graphs", "static=assume", &error)) assert_noted_step_ends("cuda-graphs", graph);
    g_clear_error(&error);
    rv_graph_free(graph);
}
END_TEST

START_TEST(replay_notes_the_step_ends_of_a_job)
{
    rv_graph *job = load_dlrm_job();
    assert_noted_step_ends("DLRM job", job);
    rv_graph_free(job);
}
END_TEST

/* The span of a process's complete events in a timeline file, in us. */
static double process_span_us(json_t *events, json_int_t pid)
{
    double first = HUGE_VAL, last = -HUGE_VAL;
    size_t i;
    json_t *event;
    json_array_foreach(events, i, event) {
        if (g_strcmp0(json_string_value(json_object_get(event, "ph")), "X") != 0 ||
            json_integer_value(json_object_get(event, "pid")) != pid)
            continue;
        double ts = json_number_value(json_object_get(event, "ts"));
        first = MIN(first, ts);
        last = MAX(last, ts + json_number_value(json_object_get(event, "dur")));
    }
    return last - first;
}

START_TEST(amp_timeline_spans_the_prediction)
{
    rv_graph *baseline = load_trace("hta_resnet50_v100.json.gz");
    ck_assert(baseline != NULL);
    rv_graph *predicted = rv_graph_copy(baseline);
    rv_sim_result before = { 0 }, after = { 0 };
    GError *error = NULL;
    ck_assert(rv_simulate(baseline, NULL, &before, &error));
    apply_and_replay(predicted, "amp", "", &after, NULL);
    GArray *steps = rv_step_times(predicted, &after);
    int64_t predicted_ns = 0;
    for (guint s = 0; s < steps->len; s++) predicted_ns += g_array_index(steps, rv_step_time, s).simulated_ns;
    g_array_unref(steps);
    rv_timeline_run runs[2] = {
        { "baseline", baseline, &before, predicted, NULL, "predicted" },
        { "predicted", predicted, &after, baseline, NULL, "baseline" },
    };
    char *folder = g_dir_make_tmp("reverie-reports-XXXXXX", NULL);
    char *file = g_build_filename(folder, "amp.json", NULL);
    ck_assert_msg(rv_timeline_write(file, runs, 2, &error), "%s", error ? error->message : "");
    json_error_t problem;
    json_t *root = json_load_file(file, 0, &problem);
    ck_assert_msg(root != NULL, "%s", problem.text);
    double span = process_span_us(json_object_get(root, "traceEvents"), 2);
    double error_share = fabs(span * 1e3 - predicted_ns) / predicted_ns;
    printf("hta_resnet50_v100 + amp: timeline span %.3f ms, predicted %.3f ms (%.3f%% apart)\n", span / 1e3,
           predicted_ns / 1e6, 100 * error_share);
    ck_assert_msg(error_share <= 0.02, "span %.3f ms against %.3f ms", span / 1e3, predicted_ns / 1e6);
    json_decref(root);
    g_unlink(file);
    g_rmdir(folder);
    g_free(file);
    g_free(folder);
    rv_sim_result_clear(&before);
    rv_sim_result_clear(&after);
    rv_graph_free(predicted);
    rv_graph_free(baseline);
}
END_TEST

int main(void)
{
    const char *needed[G_N_ELEMENTS(traces) + 2];
    for (gsize i = 0; i < G_N_ELEMENTS(traces); i++) needed[i] = traces[i];
    needed[G_N_ELEMENTS(traces)] = "hta_simple_add_a100.critical_path.json.gz";
    needed[G_N_ELEMENTS(traces) + 1] = NULL;
    require_project_traces(needed);
    Suite *suite = suite_create("reports on real traces");
    TCase *c = tcase_create("real");
    tcase_set_timeout(c, 300);
    tcase_add_test(c, critical_path_matches_hta_answer_key);
    tcase_add_loop_test(c, parts_add_up_to_each_step, 0, G_N_ELEMENTS(traces));
    tcase_add_test(c, amp_timeline_spans_the_prediction);
    tcase_add_loop_test(c, replay_notes_the_step_ends_a_pass_finds, 0, G_N_ELEMENTS(traces));
    tcase_add_test(c, replay_notes_the_step_ends_of_a_job);
    suite_add_tcase(suite, c);
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed ? 1 : 0;
}
