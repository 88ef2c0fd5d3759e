/*
 * test_alike.c - a job whose ranks are alike, held once (alike.h): which
 * jobs are alike, and the lockstep replay against rv_simulate's replay of
 * the joint graph, task for task.
 */
#include "plugin_harness.h"
#include "reverie/alike.h"
#include "reverie/job.h"
#include <check.h>
#include <glib/gstdio.h>
#include <string.h>

/* reverie-gentrace --ranks N: ranks with their own jitter, clocks and
 * entry moments, joined. */
static rv_graph *generated_job(int ranks, int steps, const char *skew_us, const char *spread_us)
{
    const char *generator = g_getenv("REVERIE_GENTRACE");
    ck_assert_msg(generator != NULL, "REVERIE_GENTRACE is not set (run through meson test)");
    char *dir = g_dir_make_tmp("rv-alike-XXXXXX", NULL);
    char *folder = g_build_filename(dir, "job", NULL);
    char *rank_text = g_strdup_printf("%d", ranks), *step_text = g_strdup_printf("%d", steps);
    char *argv[] = { (char *)generator, "--ranks", rank_text, "--steps", step_text, "--clock-skew-us", (char *)skew_us,
                     "--entry-spread-us", (char *)spread_us, "-o", folder, NULL };
    int status = -1;
    ck_assert(g_spawn_sync(NULL, argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, NULL, NULL, &status, NULL));
    ck_assert_int_eq(status, 0);
    GPtrArray *graphs = g_ptr_array_new_with_free_func((GDestroyNotify)rv_graph_free);
    for (int r = 0; r < ranks; r++) {
        char *name = g_strdup_printf("rank%d.json.gz", r);
        char *path = g_build_filename(folder, name, NULL);
        g_ptr_array_add(graphs, load_trace_file(path));
        g_unlink(path);
        g_free(path);
        g_free(name);
    }
    rv_graph *joint = join_ranks_ok(graphs);
    g_ptr_array_unref(graphs);
    g_rmdir(folder);
    g_rmdir(dir);
    g_free(folder);
    g_free(dir);
    g_free(rank_text);
    g_free(step_text);
    return joint;
}

/* Every rank's every task, and every job task, ends in the lockstep replay
 * where rv_simulate ends it in the joint graph, and starts there too. */
static void assert_same_replay(const rv_graph *joint, const rv_alike_job *alike)
{
    rv_sim_result flat = { 0 };
    rv_alike_result lock = { 0 };
    GError *error = NULL;
    ck_assert_msg(rv_simulate(joint, NULL, &flat, &error), "simulate: %s", error ? error->message : "");
    ck_assert_msg(rv_alike_simulate(alike, &lock, &error), "lockstep: %s", error ? error->message : "");
    ck_assert_uint_eq(lock.count, (gsize)rv_graph_task_count(joint));
    gsize cells = (gsize)alike->rank_task_count * alike->rank_count;
    for (gsize i = 0; i < lock.count; i++) {
        int32_t t = alike->joint_task[i];
        int64_t duration = i < cells ? alike->duration_ns[i] : 0;
        ck_assert_msg(flat.end_ns[t] == lock.end_ns[i], "task %d (%s): end %" G_GINT64_FORMAT " against %" G_GINT64_FORMAT,
                      t, rv_strings_get(joint->strings, g_array_index(joint->tasks, rv_task, t).name), lock.end_ns[i],
                      flat.end_ns[t]);
        ck_assert_int_eq(flat.start_ns[t], lock.end_ns[i] - duration);
    }
    rv_sim_result_clear(&flat);
    rv_alike_result_clear(&lock);
}

START_TEST(generated_ranks_are_alike_and_replay_alike)
{
    rv_graph *joint = generated_job(4, 3, "2500", "3000");
    GError *error = NULL;
    rv_alike_job *alike = rv_alike_from_job(joint, &error);
    ck_assert_msg(alike != NULL, "not alike: %s", error ? error->message : "");
    ck_assert_uint_eq(alike->rank_count, 4);
    /* one rank's tasks, and the job's rendezvous: a quarter of the job and a little more */
    ck_assert_int_eq(alike->rank_task_count * 4 + (rv_graph_task_count(alike->structure) - alike->rank_task_count),
                     rv_graph_task_count(joint));
    /* the ranks' durations differ (their own jitter): the columns are not one rank's copied */
    gboolean differ = FALSE;
    for (int32_t t = 0; t < alike->rank_task_count && !differ; t++)
        differ = alike->duration_ns[rv_alike_at(alike, t, 0)] != alike->duration_ns[rv_alike_at(alike, t, 3)];
    ck_assert(differ);
    assert_same_replay(joint, alike);
    rv_alike_job_free(alike);
    rv_graph_free(joint);
}
END_TEST

/* A straggler is still alike: only its durations differ. */
START_TEST(straggler_replays_alike)
{
    rv_graph *joint = generated_job(3, 2, "0", "500");
    for (int32_t t = 0; t < rv_graph_task_count(joint); t++) {
        rv_task *task = rv_graph_task(joint, t);
        if (rv_task_rank_index(joint, task) == 1 && task->kind == RV_TASK_KERNEL) task->duration_ns *= 3;
    }
    rv_alike_job *alike = rv_alike_from_job(joint, NULL);
    ck_assert(alike != NULL);
    assert_same_replay(joint, alike);
    rv_alike_job_free(alike);
    rv_graph_free(joint);
}
END_TEST

static void assert_refused(const rv_graph *joint, const char *words)
{
    GError *error = NULL;
    rv_alike_job *alike = rv_alike_from_job(joint, &error);
    ck_assert_msg(alike == NULL, "held as alike");
    ck_assert_msg(error != NULL && strstr(error->message, words) != NULL, "message: %s", error ? error->message : "(none)");
    g_error_free(error);
}

START_TEST(unlike_ranks_are_refused_with_the_difference)
{
    rv_graph *joint = generated_job(3, 2, "0", "500");
    int32_t renamed = -1;
    for (int32_t t = 0; t < rv_graph_task_count(joint) && renamed < 0; t++)
        if (rv_task_rank_index(joint, rv_graph_task(joint, t)) == 2 && rv_graph_task(joint, t)->kind == RV_TASK_KERNEL)
            renamed = t;
    int32_t name = rv_graph_task(joint, renamed)->name;
    rv_graph_task(joint, renamed)->name = rv_strings_intern(joint->strings, "another kernel");
    assert_refused(joint, "rank index 2's task");
    rv_graph_task(joint, renamed)->name = name;
    /* an edge rank index 0 lacks */
    rv_edge extra = { renamed, renamed + 1, RV_EDGE_PLUGIN, 0 };
    g_array_append_val(joint->edges, extra);
    assert_refused(joint, "rank index 2's edges differ");
    g_array_set_size(joint->edges, joint->edges->len - 1);
    /* an edge from one rank to another */
    int32_t other = -1;
    for (int32_t t = 0; t < rv_graph_task_count(joint) && other < 0; t++)
        if (rv_task_rank_index(joint, rv_graph_task(joint, t)) == 1) other = t;
    rv_edge across = { other, renamed, RV_EDGE_PLUGIN, 0 };
    g_array_append_val(joint->edges, across);
    assert_refused(joint, "joins rank indexes 1 and 2");
    rv_graph_free(joint);
}
END_TEST

/* The 8 DLRM ranks the project ships: each rank's model shard differs, so
 * they are not alike, and the reason names the first difference. */
START_TEST(dlrm_ranks_are_not_alike)
{
    rv_graph *joint = load_dlrm_job();
    GError *error = NULL;
    rv_alike_job *alike = rv_alike_from_job(joint, &error);
    if (alike != NULL) { /* if they were, they must replay alike */
        assert_same_replay(joint, alike);
        rv_alike_job_free(alike);
    } else {
        ck_assert(error != NULL && strstr(error->message, "rank index") != NULL);
        g_printerr("DLRM ranks: %s\n", error->message);
        g_error_free(error);
    }
    rv_graph_free(joint);
}
END_TEST

int main(void)
{
    static const char *const traces[] = {
        "param_dlrm_v100_8ranks/rank0.json.gz", "param_dlrm_v100_8ranks/rank1.json.gz",
        "param_dlrm_v100_8ranks/rank2.json.gz", "param_dlrm_v100_8ranks/rank3.json.gz",
        "param_dlrm_v100_8ranks/rank4.json.gz", "param_dlrm_v100_8ranks/rank5.json.gz",
        "param_dlrm_v100_8ranks/rank6.json.gz", "param_dlrm_v100_8ranks/rank7.json.gz", NULL,
    };
    require_project_traces(traces);
    Suite *suite = suite_create("alike");
    TCase *tc = tcase_create("alike");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, generated_ranks_are_alike_and_replay_alike);
    tcase_add_test(tc, straggler_replays_alike);
    tcase_add_test(tc, unlike_ranks_are_refused_with_the_difference);
    tcase_add_test(tc, dlrm_ranks_are_not_alike);
    suite_add_tcase(suite, tc);
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed ? 1 : 0;
}
