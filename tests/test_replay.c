/*
 * test_replay.c - replay accuracy on the real traces in ../shared/traces.
 *
 * For every trace with GPU work: the mean per-step error is at most 2% and
 * no step is off by more than 5%; and the recorded step times reverie
 * reports match ../shared/tools/tracestat.py (an independent Python reading
 * of the same rule) to within 0.1%.  Skips when the traces are absent.
 */
#include "reverie/graph.h"
#include "reverie/report.h"
#include "reverie/sim.h"
#include "reverie/trace.h"
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>

static const char *const traces[] = {
    "hta_resnet50_v100.json.gz", "hta_transformer_ddp_v100_rank1.json.gz",
    "kineto_legacy_resnet50_v100.json.gz", "param_linear_2080ti.json.gz", "hta_alexnet_a100.json.gz",
    "param_dlrm_v100_8ranks/rank0.json.gz", "param_dlrm_v100_8ranks/rank1.json.gz",
    "param_dlrm_v100_8ranks/rank2.json.gz", "param_dlrm_v100_8ranks/rank3.json.gz",
    "param_dlrm_v100_8ranks/rank4.json.gz", "param_dlrm_v100_8ranks/rank5.json.gz",
    "param_dlrm_v100_8ranks/rank6.json.gz", "param_dlrm_v100_8ranks/rank7.json.gz",
    "hta_simple_add_a100.json.gz", "hta_event_sync.json.gz", "hta_event_sync_multi_stream.json.gz",
    "hta_minitoy_mi250.json.gz", "hta_triton_a100.json.gz", "hta_simple_add_small_a100.json.gz",
};

static char *shared_path(const char *name)
{
    const char *folder = g_getenv("REVERIE_SHARED_TRACES");
    char *path = g_build_filename(folder ? folder : "../shared/traces", name, NULL);
    if (g_file_test(path, G_FILE_TEST_EXISTS)) return path;
    g_free(path);
    return NULL;
}

/* tracestat.py's step_us values, or NULL if it cannot be run. */
static json_t *tracestat_steps(const char *path)
{
    const char *tool = g_getenv("REVERIE_TRACESTAT");
    if (tool == NULL || !g_file_test(tool, G_FILE_TEST_EXISTS)) return NULL;
    char *argv[] = { "python3", (char *)tool, (char *)path, "--json", NULL };
    char *out = NULL;
    int status = 0;
    if (!g_spawn_sync(NULL, argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &out,
                      NULL, &status, NULL) || status != 0) {
        g_free(out);
        return NULL;
    }
    json_t *root = json_loads(out, 0, NULL);
    g_free(out);
    json_t *steps = json_incref(json_object_get(root, "steps"));
    json_decref(root);
    return steps;
}

START_TEST(replays_within_limits)
{
    char *path = shared_path(traces[_i]);
    if (path == NULL) return; /* skip: no shared traces here */
    GError *error = NULL;
    rv_trace *trace = rv_trace_load(path, NULL, NULL, &error);
    ck_assert_msg(trace != NULL, "%s", error ? error->message : "");
    rv_graph *graph = rv_graph_build(trace, &error);
    ck_assert_msg(graph != NULL, "%s", error ? error->message : "");
    rv_sim_result sim = { 0 };
    ck_assert(rv_simulate(graph, NULL, &sim, &error));
    GArray *steps = rv_step_times(graph, &sim);
    double mean = 0, worst = 0;
    for (guint s = 0; s < steps->len; s++) {
        const rv_step_time *step = &g_array_index(steps, rv_step_time, s);
        double error_s = rv_relative_error(step->recorded_ns, step->simulated_ns);
        mean += error_s / steps->len;
        worst = MAX(worst, error_s);
    }
    ck_assert_msg(mean <= 0.02, "%s: mean step error %.3f%%", traces[_i], 100 * mean);
    ck_assert_msg(worst <= 0.05, "%s: worst step error %.3f%%", traces[_i], 100 * worst);
    json_t *reference = tracestat_steps(path);
    if (reference != NULL && json_array_size(reference) > 0) {
        ck_assert_uint_eq(json_array_size(reference), steps->len);
        for (guint s = 0; s < steps->len; s++) {
            double expected_us = json_number_value(json_object_get(json_array_get(reference, s), "step_us"));
            double got_us = g_array_index(steps, rv_step_time, s).recorded_ns / 1e3;
            ck_assert_msg(fabs(got_us - expected_us) <= 0.001 * expected_us, "%s step %u: %.3f us vs tracestat %.3f us",
                          traces[_i], s, got_us, expected_us);
        }
    }
    json_decref(reference);
    g_array_unref(steps);
    rv_sim_result_clear(&sim);
    rv_graph_free(graph);
    rv_trace_free(trace);
    g_free(path);
}
END_TEST

int main(void)
{
    Suite *suite = suite_create("replay");
    TCase *tcase = tcase_create("real traces");
    tcase_set_timeout(tcase, 120);
    tcase_add_loop_test(tcase, replays_within_limits, 0, (int)G_N_ELEMENTS(traces));
    suite_add_tcase(suite, tcase);
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
