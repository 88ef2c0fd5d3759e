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
        /* the join numbers rank r's k-th task r * n + k, the job's after them */
        int32_t t = i < cells ? (int32_t)((i % alike->rank_count) * (gsize)alike->rank_task_count + i / alike->rank_count)
                              : (int32_t)i;
        int64_t duration = i < cells ? alike->duration_ns[i] : 0;
        ck_assert_msg(flat.end_ns[t] == lock.end_ns[i], "task %d (%s): end %" G_GINT64_FORMAT " against %" G_GINT64_FORMAT,
                      t, rv_strings_get(joint->strings, g_array_index(joint->tasks, rv_task, t).name), lock.end_ns[i],
                      flat.end_ns[t]);
        ck_assert_int_eq(flat.start_ns[t], lock.end_ns[i] - duration);
    }
    rv_sim_result_clear(&flat);
    rv_alike_result_clear(&lock);
}


/* Every array of the joint graph that rv_alike_to_job rebuilds, field by field. */
static void assert_same_graph(const rv_graph *a, const rv_graph *b)
{
    ck_assert_int_eq(rv_graph_task_count(a), rv_graph_task_count(b));
    for (int32_t t = 0; t < rv_graph_task_count(a); t++) {
        const rv_task *x = &g_array_index(a->tasks, rv_task, t), *y = &g_array_index(b->tasks, rv_task, t);
        ck_assert_msg(x->duration_ns == y->duration_ns && x->host_overhead_ns == y->host_overhead_ns &&
                      x->recorded_start_ns == y->recorded_start_ns && x->correlation == y->correlation &&
                      x->bytes == y->bytes && x->resource == y->resource && x->name == y->name && x->op == y->op &&
                      x->layer == y->layer && x->input_dims == y->input_dims && x->step == y->step && x->kind == y->kind &&
                      x->phase == y->phase && x->flags == y->flags && x->collective == y->collective,
                      "task %d differs", t);
        const rv_launch *la = rv_task_launch(a, t), *lb = rv_task_launch(b, t);
        ck_assert_int_eq(la ? la->blocks : 0, lb ? lb->blocks : 0);
        ck_assert_int_eq(la ? la->threads : 0, lb ? lb->threads : 0);
        ck_assert_int_eq(rv_task_host_operators(a, t), rv_task_host_operators(b, t));
        ck_assert_int_eq(rv_task_op_args(a, t), rv_task_op_args(b, t));
    }
    ck_assert_uint_eq(a->edges->len, b->edges->len);
    for (guint e = 0; e < a->edges->len; e++) {
        const rv_edge *x = &g_array_index(a->edges, rv_edge, e), *y = &g_array_index(b->edges, rv_edge, e);
        ck_assert_msg(x->from == y->from && x->to == y->to && x->kind == y->kind && x->from_start == y->from_start,
                      "edge %u differs", e);
    }
    ck_assert_uint_eq(a->steps->len, b->steps->len);
    for (guint s = 0; s < a->steps->len; s++) {
        const rv_step *x = &g_array_index(a->steps, rv_step, s), *y = &g_array_index(b->steps, rv_step, s);
        ck_assert(x->name == y->name && x->recorded_begin_ns == y->recorded_begin_ns &&
                  x->recorded_end_ns == y->recorded_end_ns && x->begin_marker == y->begin_marker &&
                  x->end_marker == y->end_marker);
    }
    ck_assert_uint_eq(a->resources->len, b->resources->len);
    for (guint r = 0; r < a->resources->len; r++) {
        const rv_resource *x = &g_array_index(a->resources, rv_resource, r), *y = &g_array_index(b->resources, rv_resource, r);
        ck_assert(x->name == y->name && x->kind == y->kind && x->rank_index == y->rank_index &&
                  x->launch_latency_ns == y->launch_latency_ns && x->idle_gap_ns == y->idle_gap_ns &&
                  x->queue_depth == y->queue_depth && x->process == y->process && x->thread == y->thread);
    }
    ck_assert_uint_eq(a->collectives->len, b->collectives->len);
    for (guint c = 0; c < a->collectives->len; c++)
        ck_assert_int_eq(g_array_index(a->collectives, rv_collective_info, c).rendezvous,
                         g_array_index(b->collectives, rv_collective_info, c).rendezvous);
    ck_assert_uint_eq(a->ranks->len, b->ranks->len);
    ck_assert_uint_eq(a->memory->len, b->memory->len);
    ck_assert_str_eq(a->source, b->source);
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
    rv_graph *back = rv_alike_to_job(alike);
    assert_same_graph(joint, back);
    rv_graph_free(back);
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
    /* an edge of rank index 2 of another kind than rank index 0's */
    guint per_rank = joint->edges->len / 3, i = 2 * per_rank + per_rank / 2;
    rv_edge *edge = &g_array_index(joint->edges, rv_edge, i), kept = *edge;
    edge->kind = edge->kind == RV_EDGE_PLUGIN ? RV_EDGE_THREAD : RV_EDGE_PLUGIN;
    assert_refused(joint, "rank index 2's edge");
    /* an edge from rank index 2 into rank index 1 */
    *edge = kept;
    rv_alike_job *held = rv_alike_from_job(joint, NULL);
    ck_assert(held != NULL);
    int32_t n = held->rank_task_count;
    rv_alike_job_free(held);
    edge->to = edge->to >= 2 * n && edge->to < 3 * n ? edge->to - n : n;
    assert_refused(joint, "joins two ranks");
    *edge = kept;
    /* as it was, alike again */
    rv_alike_job *alike = rv_alike_from_job(joint, NULL);
    ck_assert(alike != NULL);
    rv_alike_job_free(alike);
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
        ck_assert(error != NULL && error->message[0] != '\0');
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
