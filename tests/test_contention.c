/*
 * test_contention.c - the contention rule of the replay (contention.h) and
 * the `contention` plugin that turns it on.
 *
 * Off, the replay is the plain one; on with both factors 1, its own replay
 * (sim.c's run_contended) must give every task the plain start and end on
 * real traces; on, an overlapped collective on a hand-built GPU takes
 * exactly the rule's extra time, and work that overlaps nothing is
 * unaffected.
 */
#include "plugin_harness.h"
#include "reverie/contention.h"
#include "reverie/job.h"
#include <stdlib.h>
#include <string.h>

/* A GPU task on `resource`, after `previous` on it (-1: first), ready at 0. */
static int32_t gpu_task(rv_graph *graph, int32_t resource, rv_task_kind kind, const char *name, int64_t ns,
                        int32_t previous)
{
    rv_task task = { 0 };
    task.duration_ns = ns;
    task.correlation = -1;
    task.resource = resource;
    task.name = rv_strings_intern(graph->strings, name);
    task.input_dims = -1;
    task.step = 0;
    task.kind = (uint8_t)kind;
    task.flags = RV_TASK_FLAG_GPU;
    int32_t id = rv_graph_add_task(graph, &task);
    if (previous >= 0) rv_graph_add_edge(graph, previous, id, RV_EDGE_STREAM, FALSE);
    return id;
}

static void replay(const rv_graph *graph, rv_sim_result *sim)
{
    GError *error = NULL;
    ck_assert_msg(rv_simulate(graph, NULL, sim, &error), "simulate: %s", error ? error->message : "");
}

/* Every task's start and end, with the rule on at factors 1, equal the plain replay's. */
static void check_machinery_neutral(rv_graph *graph, const char *what)
{
    rv_sim_result plain = { 0 }, ruled = { 0 };
    ck_assert(!graph->contention.enabled);
    replay(graph, &plain);
    rv_contention neutral = { TRUE, 1.0, 1.0 };
    graph->contention = neutral;
    replay(graph, &ruled);
    int32_t differ = 0;
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++)
        differ += plain.start_ns[t] != ruled.start_ns[t] || plain.end_ns[t] != ruled.end_ns[t];
    g_printerr("%s: %d of %d tasks differ with the rule at factors 1\n", what, differ, rv_graph_task_count(graph));
    ck_assert_int_eq(differ, 0);
    ck_assert_int_eq(plain.makespan_ns, ruled.makespan_ns);
    rv_sim_result_clear(&plain);
    rv_sim_result_clear(&ruled);
}

START_TEST(neutral_rule_replays_real_traces_exactly)
{
    static const char *const names[] = { "hta_transformer_ddp_v100_rank1.2steps.json.gz", "hta_resnet50_v100.json.gz",
                                         "small_ddp.json.gz", "kineto_legacy_resnet50_v100.2steps.json.gz" };
    for (gsize i = 0; i < G_N_ELEMENTS(names); i++) {
        rv_graph *graph = load_trace(names[i]);
        check_machinery_neutral(graph, names[i]);
        rv_graph_free(graph);
    }
    rv_graph *job = load_dlrm_job();
    check_machinery_neutral(job, "param_dlrm_v100_8ranks (joint)");
    rv_graph_free(job);
}
END_TEST

/* The plugin with both factors 1 leaves the graph and its replay as they were. */
START_TEST(neutral_plugin_is_the_baseline)
{
    check_neutral("small_ddp.json.gz", "contention", "comm_slowdown=1,compute_slowdown=1");
    check_neutral("hta_transformer_ddp_v100_rank1.2steps.json.gz", "contention", "comm_slowdown=1,compute_slowdown=1");
}
END_TEST

/*
 * GPU 0: a 40 us compute kernel on stream 7, a 100 us collective on stream
 * 14, both ready at 0, and a 30 us kernel after the collective on stream
 * 14.  GPU 1: a 40 us kernel alone.  With comm x2 and compute x1.25 the
 * kernel runs at 0.8 and ends at 50 us; the collective has done 25 us of
 * its work by then and the rest at full speed: it ends at 125 us, 25 us
 * late = 50 us overlapped x (1 - 1/2).  The kernel after it starts at 125
 * and lasts 30 (nothing overlaps it); GPU 1's kernel keeps its 40.
 */
START_TEST(overlapped_collective_takes_the_rules_time)
{
    rv_graph *graph = rv_graph_new(NULL, "contention");
    int32_t compute = rv_graph_add_resource(graph, RV_RES_GPU_STREAM, 0, 7, "gpu 0 stream 7");
    int32_t nccl = rv_graph_add_resource(graph, RV_RES_GPU_STREAM, 0, 14, "gpu 0 stream 14");
    int32_t other = rv_graph_add_resource(graph, RV_RES_GPU_STREAM, 1, 7, "gpu 1 stream 7");
    int32_t kernel = gpu_task(graph, compute, RV_TASK_KERNEL, "gemm", US(40), -1);
    int32_t collective = gpu_task(graph, nccl, RV_TASK_COMM, "ncclKernel_AllReduce", US(100), -1);
    int32_t after = gpu_task(graph, nccl, RV_TASK_KERNEL, "elementwise", US(30), collective);
    int32_t alone = gpu_task(graph, other, RV_TASK_KERNEL, "gemm", US(40), -1);
    rv_sim_result sim = { 0 };
    replay(graph, &sim);
    ck_assert_int_eq(sim.end_ns[collective], US(100));
    ck_assert_int_eq(sim.end_ns[after], US(130));
    rv_sim_result_clear(&sim);

    rv_contention rule = { TRUE, 2.0, 1.25 };
    graph->contention = rule;
    replay(graph, &sim);
    ck_assert_int_eq(sim.start_ns[kernel], 0);
    ck_assert_int_eq(sim.end_ns[kernel], US(50));                 /* 40 us of work at 0.8 */
    ck_assert_int_eq(sim.end_ns[collective], US(100) + US(50) / 2); /* 50 us overlapped at half speed */
    ck_assert_int_eq(sim.start_ns[after], US(125));
    ck_assert_int_eq(sim.end_ns[after] - sim.start_ns[after], US(30));
    ck_assert_int_eq(sim.start_ns[alone], 0);
    ck_assert_int_eq(sim.end_ns[alone], US(40));
    rv_sim_result_clear(&sim);
    rv_graph_free(graph);
}
END_TEST

/* A kernel that starts while the collective runs slows it from then on,
 * and speeds it up again when it ends: 100 us collective, 20 us kernel
 * starting at 30 us behind a 30 us kernel on its stream.  At x1.5 / x1.0
 * the collective loses 20 x (1 - 1/1.5) = 6.667 us: it ends at 106.667. */
START_TEST(a_kernel_in_the_middle_costs_its_overlap)
{
    rv_graph *graph = rv_graph_new(NULL, "contention");
    int32_t compute = rv_graph_add_resource(graph, RV_RES_GPU_STREAM, 0, 7, "gpu 0 stream 7");
    int32_t nccl = rv_graph_add_resource(graph, RV_RES_GPU_STREAM, 0, 14, "gpu 0 stream 14");
    int32_t collective = gpu_task(graph, nccl, RV_TASK_COMM, "ncclKernel_AllToAll", US(100), -1);
    int32_t copy = gpu_task(graph, compute, RV_TASK_MEMCPY, "Memcpy DtoD", US(30), -1);
    int32_t kernel = gpu_task(graph, compute, RV_TASK_KERNEL, "gemm", US(20), copy);
    rv_contention rule = { TRUE, 1.5, 1.0 };
    graph->contention = rule;
    rv_sim_result sim = { 0 };
    replay(graph, &sim);
    ck_assert_int_eq(sim.end_ns[copy], US(30)); /* a copy is outside the rule */
    ck_assert_int_eq(sim.start_ns[kernel], US(30));
    ck_assert_int_eq(sim.end_ns[kernel], US(50));
    ck_assert_int_eq(sim.end_ns[collective], 106667);
    rv_sim_result_clear(&sim);
    rv_graph_free(graph);
}
END_TEST

/* On the generated DDP trace (all-reduces on their own stream during the
 * backward) the rule stretches collectives and kernels that overlap, and
 * only those; nothing gets shorter.  (Its step is host-bound: the step
 * times do not move.) */
START_TEST(plugin_stretches_only_overlapping_work)
{
    rv_graph *graph = load_trace("small_ddp.json.gz");
    rv_sim_result sim = { 0 };
    apply_and_replay(graph, "contention", "", &sim, NULL);
    guint stretched[RV_TASK_KIND_COUNT] = { 0 };
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_task *task = rv_graph_task(graph, t);
        int64_t length = sim.end_ns[t] - sim.start_ns[t];
        ck_assert_int_ge(length, task->duration_ns);
        if (length > task->duration_ns) stretched[task->kind]++;
    }
    g_printerr("small_ddp with contention: %u collectives and %u kernels stretched\n", stretched[RV_TASK_COMM],
               stretched[RV_TASK_KERNEL]);
    ck_assert_uint_gt(stretched[RV_TASK_COMM], 0);
    ck_assert_uint_gt(stretched[RV_TASK_KERNEL], 0);
    for (int k = 0; k < RV_TASK_KIND_COUNT; k++)
        if (k != RV_TASK_COMM && k != RV_TASK_KERNEL) ck_assert_uint_eq(stretched[k], 0);
    rv_sim_result_clear(&sim);
    rv_graph_free(graph);
}
END_TEST

START_TEST(bad_factors_and_no_communication_are_refused)
{
    rv_graph *graph = load_trace("hta_resnet50_v100.json.gz");
    GError *error = NULL;
    ck_assert(!apply_plugin(graph, "contention", "comm_slowdown=0.5", &error));
    ck_assert(g_error_matches(error, RV_ERROR, RV_ERROR_USAGE));
    g_clear_error(&error);
    ck_assert(!apply_plugin(graph, "contention", "", &error));
    ck_assert(g_error_matches(error, RV_ERROR, RV_ERROR_PLUGIN));
    ck_assert_msg(strstr(error->message, "no communication task") != NULL, "%s", error->message);
    g_clear_error(&error);
    ck_assert(!graph->contention.enabled);
    rv_graph_free(graph);
}
END_TEST

static Suite *contention_suite(void)
{
    Suite *suite = suite_create("contention");
    TCase *rule = tcase_create("rule");
    tcase_set_timeout(rule, 600);
    tcase_add_test(rule, neutral_rule_replays_real_traces_exactly);
    tcase_add_test(rule, neutral_plugin_is_the_baseline);
    tcase_add_test(rule, overlapped_collective_takes_the_rules_time);
    tcase_add_test(rule, a_kernel_in_the_middle_costs_its_overlap);
    tcase_add_test(rule, plugin_stretches_only_overlapping_work);
    tcase_add_test(rule, bad_factors_and_no_communication_are_refused);
    suite_add_tcase(suite, rule);
    return suite;
}

int main(void)
{
    static const char *const traces[] = { "hta_transformer_ddp_v100_rank1.2steps.json.gz", "hta_resnet50_v100.json.gz",
                                          "small_ddp.json.gz", "kineto_legacy_resnet50_v100.2steps.json.gz",
                                          "param_dlrm_v100_8ranks/rank0.json.gz", NULL };
    require_project_traces(traces);
    SRunner *runner = srunner_create(contention_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
