/*
 * test_replay.c - replay accuracy of the rule-based timing model on the real
 * traces the project ships (traces/).
 *
 * The replay starts every task by the timing rules of graph.h, never at a
 * recorded time, so its error is a measurement: the recorded time the rules
 * do not explain.  Limits (issue "causal timing model"): mean per-step error
 * at most 3% on every single-process trace, at most 5% on a rank of a
 * multi-rank job replayed alone (its collectives' recorded durations hold
 * waits for other ranks).  No step may be off by more than twice that.
 * The recorded step times reverie reports must match tests/tracestat.py (an
 * independent Python reading of the same step rule) to within 0.1%.  A
 * replay that reuses the graph's structure (sim.h, what a sweep does) must
 * give every task the times a fresh replay gives, on the graph and on a
 * copy whose GPU work is halved.
 */
#include "reverie/graph.h"
#include "reverie/report.h"
#include "reverie/sim.h"
#include "reverie/trace.h"
#include "project_traces.h"
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>

typedef struct {
    const char *name;
    double mean_limit;   /* largest mean per-step error allowed */
} replay_case;

static const replay_case cases[] = {
    { "hta_resnet50_v100.json.gz", 0.03 },
    { "kineto_legacy_resnet50_v100.2steps.json.gz", 0.03 },
    { "param_linear_2080ti.json.gz", 0.03 },
    { "hta_alexnet_a100.json.gz", 0.03 },
    { "hta_simple_add_a100.json.gz", 0.03 },
    { "hta_event_sync.json.gz", 0.03 },
    { "hta_event_sync_multi_stream.json.gz", 0.03 },
    { "hta_minitoy_mi250.json.gz", 0.03 },
    { "hta_triton_a100.json.gz", 0.03 },
    { "hta_simple_add_small_a100.json.gz", 0.03 },
    { "pairs/dataloader_workers_v100/num_workers_0.json.gz", 0.03 },
    { "pairs/dataloader_workers_v100/num_workers_4.json.gz", 0.03 },
    { "pairs/weights_fp32_vs_bf16_a10g/fp32.json.gz", 0.03 },
    { "pairs/weights_fp32_vs_bf16_a10g/bf16.json.gz", 0.03 },
    { "hta_transformer_ddp_v100_rank1.2steps.json.gz", 0.05 },
    { "param_dlrm_v100_8ranks/rank0.json.gz", 0.05 },
    { "param_dlrm_v100_8ranks/rank1.json.gz", 0.05 },
    { "param_dlrm_v100_8ranks/rank2.json.gz", 0.05 },
    { "param_dlrm_v100_8ranks/rank3.json.gz", 0.05 },
    { "param_dlrm_v100_8ranks/rank4.json.gz", 0.05 },
    { "param_dlrm_v100_8ranks/rank5.json.gz", 0.05 },
    { "param_dlrm_v100_8ranks/rank6.json.gz", 0.05 },
    { "param_dlrm_v100_8ranks/rank7.json.gz", 0.05 },
};

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

static void check_recorded_against_tracestat(const char *name, const char *path, const GArray *steps)
{
    json_t *reference = tracestat_steps(path);
    if (reference == NULL || json_array_size(reference) == 0) {
        json_decref(reference);
        return; /* no ProfilerStep: tracestat has no steps to compare */
    }
    ck_assert_uint_eq(json_array_size(reference), steps->len);
    for (guint s = 0; s < steps->len; s++) {
        double expected_us = json_number_value(json_object_get(json_array_get(reference, s), "step_us"));
        double got_us = g_array_index(steps, rv_step_time, s).recorded_ns / 1e3;
        ck_assert_msg(fabs(got_us - expected_us) <= 0.001 * expected_us, "%s step %u: %.3f us vs tracestat %.3f us",
                      name, s, got_us, expected_us);
    }
    json_decref(reference);
}

static void assert_same_times(const char *name, const rv_sim_result *a, const rv_sim_result *b)
{
    ck_assert_int_eq(a->task_count, b->task_count);
    ck_assert_int_eq(a->makespan_ns, b->makespan_ns);
    for (int32_t t = 0; t < a->task_count; t++)
        ck_assert_msg(a->start_ns[t] == b->start_ns[t] && a->end_ns[t] == b->end_ns[t],
                      "%s: task #%d replayed at %" G_GINT64_FORMAT "..%" G_GINT64_FORMAT " ns reusing the structure, "
                      "%" G_GINT64_FORMAT "..%" G_GINT64_FORMAT " ns afresh", name, t, a->start_ns[t], a->end_ns[t],
                      b->start_ns[t], b->end_ns[t]);
}

/* rv_simulate_reusing against rv_simulate on `graph`, with the structure
 * of `structure_of` (the graph itself, or the one it was copied from). */
static void check_reuse_on(const char *name, const rv_graph *graph, const rv_sim_structure *structure)
{
    GError *error = NULL;
    rv_sim_result fresh = { 0 }, reused = { 0 };
    ck_assert(rv_simulate(graph, NULL, &fresh, &error));
    ck_assert_msg(rv_simulate_reusing(graph, structure, NULL, &reused, &error), "%s", error ? error->message : "");
    assert_same_times(name, &reused, &fresh);
    rv_sim_result_clear(&fresh);
    rv_sim_result_clear(&reused);
}

static void check_structure_reuse(const char *name, const rv_graph *graph)
{
    rv_sim_structure *structure = rv_sim_structure_new(graph);
    check_reuse_on(name, graph, structure);
    rv_graph *halved = rv_graph_copy(graph);
    for (int32_t t = 0; t < rv_graph_task_count(halved); t++) {
        rv_task *task = &g_array_index(halved->tasks, rv_task, t);
        if (task->flags & RV_TASK_FLAG_GPU) task->duration_ns /= 2;
    }
    check_reuse_on(name, halved, structure);
    rv_graph_free(halved);
    rv_sim_structure_free(structure);
}

START_TEST(replays_within_limits)
{
    const replay_case *c = &cases[_i];
    char *path = project_trace_path(c->name);
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
    g_printerr("%-55s mean %.3f%%  max %.3f%%\n", c->name, 100 * mean, 100 * worst);
    ck_assert_msg(mean <= c->mean_limit, "%s: mean step error %.3f%% > %.0f%%", c->name, 100 * mean,
                  100 * c->mean_limit);
    ck_assert_msg(worst <= 2 * c->mean_limit, "%s: worst step error %.3f%%", c->name, 100 * worst);
    check_recorded_against_tracestat(c->name, path, steps);
    check_structure_reuse(c->name, graph);
    g_array_unref(steps);
    rv_sim_result_clear(&sim);
    rv_graph_free(graph);
    rv_trace_free(trace);
    g_free(path);
}
END_TEST

int main(void)
{
    const char *names[G_N_ELEMENTS(cases) + 1];
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) names[i] = cases[i].name;
    names[G_N_ELEMENTS(cases)] = NULL;
    require_project_traces(names);
    Suite *suite = suite_create("replay");
    TCase *tcase = tcase_create("real traces");
    tcase_set_timeout(tcase, 120);
    tcase_add_loop_test(tcase, replays_within_limits, 0, (int)G_N_ELEMENTS(cases));
    suite_add_tcase(suite, tcase);
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
