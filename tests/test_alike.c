/*
 * test_alike.c - a job whose ranks are alike, held once (alike.h): which
 * jobs are alike, and the lockstep replay against rv_simulate's replay of
 * the joint graph, task for task.
 */
#include "plugin_harness.h"
#include "reverie/alike.h"
#include "reverie/documents.h"
#include "reverie/explain.h"
#include "reverie/job.h"
#include "reverie/store.h"
#include <check.h>
#include <glib/gstdio.h>
#include <string.h>

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
    /* the joint id of each cell: rank r's k-th task of its class, the job's after every rank's */
    int32_t *joint_of = g_new(int32_t, lock.count + 1);
    for (guint r = 0; r < alike->rank_count; r++) {
        const rv_alike_class *cls = rv_alike_rank_class(alike, r);
        for (int32_t k = 0; k < cls->task_count; k++)
            joint_of[rv_alike_rank_cell(alike, cls->first_task + k, r)] = alike->ranks[r].first_task + k;
    }
    for (gsize i = alike->cell_count; i < lock.count; i++) joint_of[i] = (int32_t)i;
    for (gsize i = 0; i < lock.count; i++) {
        int32_t t = joint_of[i];
        int64_t duration = i < alike->cell_count ? alike->duration_ns[i] : 0;
        ck_assert_msg(flat.end_ns[t] == lock.end_ns[i], "task %d (%s): end %" G_GINT64_FORMAT " against %" G_GINT64_FORMAT,
                      t, rv_strings_get(joint->strings, g_array_index(joint->tasks, rv_task, t).name), lock.end_ns[i],
                      flat.end_ns[t]);
        ck_assert_int_eq(flat.start_ns[t], lock.end_ns[i] - duration);
    }
    g_free(joint_of);
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


static void assert_same_step_times(const GArray *a, const GArray *b)
{
    ck_assert_uint_eq(a->len, b->len);
    for (guint s = 0; s < a->len; s++) {
        const rv_step_time *x = &g_array_index(a, rv_step_time, s), *y = &g_array_index(b, rv_step_time, s);
        ck_assert_str_eq(x->name, y->name);
        ck_assert_int_eq(x->recorded_ns, y->recorded_ns);
        ck_assert_int_eq(x->simulated_ns, y->simulated_ns);
    }
}

static uint64_t gpu_tasks(const rv_graph *graph)
{
    uint64_t count = 0;
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) count += (g_array_index(graph->tasks, rv_task, t).flags & RV_TASK_FLAG_GPU) != 0;
    return count;
}

/* What simulate reports of the job held once is what the joint graph's
 * reports say: every rank's steps, the job's, the waits and for whom, the
 * unexplained time (where the recorded starts were kept), the counts. */
static void assert_same_reports(const rv_graph *joint, const rv_alike_job *alike)
{
    rv_replay flat, lock;
    GError *error = NULL;
    ck_assert_msg(rv_replay_run(joint, NULL, &flat, &error), "replay: %s", error ? error->message : "");
    ck_assert_msg(rv_alike_replay_run(alike, &lock, &error), "lockstep: %s", error ? error->message : "");
    assert_same_step_times(flat.steps, lock.steps);
    ck_assert_uint_eq(flat.by_rank->len, lock.by_rank->len);
    for (guint r = 0; r < flat.by_rank->len; r++)
        assert_same_step_times(g_ptr_array_index(flat.by_rank, r), g_ptr_array_index(lock.by_rank, r));
    int64_t waited = 0;
    for (guint r = 0; r < flat.waits->len; r++) {
        const rv_rank_wait *x = &g_array_index(flat.waits, rv_rank_wait, r), *y = &g_array_index(lock.waits, rv_rank_wait, r);
        ck_assert_int_eq(x->wait_ns, y->wait_ns);
        ck_assert_uint_eq(x->collectives, y->collectives);
        for (guint whom = 0; whom < flat.waits->len; whom++) ck_assert_int_eq(x->waited_for_ns[whom], y->waited_for_ns[whom]);
        waited += x->wait_ns;
    }
    ck_assert_int_gt(waited, 0); /* the ranks did wait for one another: the comparison saw something */
    ck_assert_int_eq(rv_job_step_entering_together(joint, flat.steps), rv_alike_step_entering_together(alike, lock.steps));
    ck_assert_int_eq(rv_graph_live_task_count(joint), rv_alike_live_task_count(alike));
    ck_assert_uint_eq(joint->edges->len, rv_alike_edge_count(alike));
    ck_assert_uint_eq(gpu_tasks(joint), rv_alike_gpu_task_count(alike));
    ck_assert_int_eq(rv_peer_wait_total(joint), rv_alike_peer_wait_total(alike));
    if (alike->recorded_start_ns != NULL) {
        rv_explanation *x = rv_explain(joint, 0), *y = rv_alike_explain(alike);
        ck_assert_int_eq(x->total_ns, y->total_ns);
        ck_assert_uint_eq(x->late_tasks, y->late_tasks);
        ck_assert_uint_eq(x->early_tasks, y->early_tasks);
        ck_assert_uint_eq(x->gpu_tasks, y->gpu_tasks);
        ck_assert_int_eq(x->cpu_total_ns, y->cpu_total_ns);
        ck_assert_uint_eq(x->cpu_calls, y->cpu_calls);
        for (guint s = 0; s < flat.steps->len; s++)
            ck_assert_int_eq(rv_step_unexplained(joint, x, s), rv_step_unexplained(alike->structure, y, s));
        rv_explanation_free(x);
        rv_explanation_free(y);
    }
    rv_replay_clear(&flat);
    rv_replay_clear(&lock);
}

/* The job saved and loaded as it is held (rv_store_load_alike). */
static rv_alike_job *saved_and_held(const rv_graph *joint, gboolean recorded_starts)
{
    char *dir = g_dir_make_tmp("rv-alike-store-XXXXXX", NULL);
    char *path = g_build_filename(dir, "job.rvg", NULL);
    GError *error = NULL;
    ck_assert_msg(rv_store_save(joint, path, &error), "save: %s", error ? error->message : "");
    gboolean held = FALSE;
    rv_alike_job *alike = rv_store_load_alike(path, recorded_starts, &held, &error);
    ck_assert_msg(alike != NULL && held, "load: %s", error ? error->message : "not held once");
    ck_assert(recorded_starts || alike->recorded_start_ns == NULL || alike->class_step_count == 0);
    g_unlink(path);
    g_rmdir(dir);
    g_free(path);
    g_free(dir);
    return alike;
}

START_TEST(generated_ranks_are_alike_and_replay_alike)
{
    rv_graph *joint = generated_job(4, 3, "2500", "3000");
    GError *error = NULL;
    rv_alike_job *alike = rv_alike_from_job(joint, &error);
    ck_assert_msg(alike != NULL, "not alike: %s", error ? error->message : "");
    rv_alike_verdict verdict;
    ck_assert(rv_alike_check(joint, &verdict, NULL));
    ck_assert_uint_eq(verdict.class_count, 1);
    ck_assert_uint_eq(verdict.largest_class, 4);
    ck_assert(verdict.unlike_because == NULL);
    ck_assert_uint_eq(alike->rank_count, 4);
    ck_assert_uint_eq(alike->class_count, 1);
    /* one rank's tasks, and the job's rendezvous: a quarter of the job and a little more */
    ck_assert_int_eq(alike->class_task_count * 4 + (rv_graph_task_count(alike->structure) - alike->class_task_count),
                     rv_graph_task_count(joint));
    /* the ranks' durations differ (their own jitter): the columns are not one rank's copied */
    gboolean differ = FALSE;
    for (int32_t t = 0; t < alike->class_task_count && !differ; t++)
        differ = alike->duration_ns[rv_alike_cell(alike, t, 0)] != alike->duration_ns[rv_alike_cell(alike, t, 3)];
    ck_assert(differ);
    assert_same_replay(joint, alike);
    rv_graph *back = rv_alike_to_job(alike);
    assert_same_graph(joint, back);
    rv_graph_free(back);
    assert_same_reports(joint, alike);
    rv_alike_job_free(alike);
    for (int recorded = 0; recorded < 2; recorded++) {
        rv_alike_job *held = saved_and_held(joint, recorded);
        assert_same_reports(joint, held);
        rv_alike_job_free(held);
    }
    rv_graph_free(joint);
}
END_TEST

/* One recorded step: the entry moments' figure, worked out in the columns. */
START_TEST(one_step_job_enters_together_alike)
{
    rv_graph *joint = generated_job(3, 1, "0", "4000");
    rv_alike_job *alike = rv_alike_from_job(joint, NULL);
    ck_assert(alike != NULL);
    assert_same_reports(joint, alike);
    rv_replay lock;
    ck_assert(rv_alike_replay_run(alike, &lock, NULL));
    int64_t together = rv_alike_step_entering_together(alike, lock.steps);
    ck_assert_int_gt(together, 0);
    ck_assert_int_le(together, g_array_index(lock.steps, rv_step_time, 0).simulated_ns); /* entering together is never later */
    rv_replay_clear(&lock);
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
    assert_same_reports(joint, alike);
    rv_alike_job_free(alike);
    rv_graph_free(joint);
}
END_TEST

/* A job without ProfilerStep annotations: each rank one window over its
 * tasks, read from the columns as from the joint graph. */
START_TEST(job_without_steps_replays_alike)
{
    rv_graph *joint = generated_job(3, 2, "700", "1500");
    g_array_set_size(joint->steps, 0);
    joint->whole_trace_step = TRUE;
    for (int32_t t = 0; t < rv_graph_task_count(joint); t++) rv_graph_task(joint, t)->step = -1;
    rv_alike_job *alike = rv_alike_from_job(joint, NULL);
    ck_assert(alike != NULL);
    ck_assert_int_eq(alike->class_step_count, 0);
    assert_same_reports(joint, alike);
    rv_alike_job_free(alike);
    rv_alike_job *held = saved_and_held(joint, FALSE); /* the recorded starts are kept: the windows need them */
    ck_assert(held->recorded_start_ns != NULL);
    assert_same_reports(joint, held);
    rv_alike_job_free(held);
    rv_graph_free(joint);
}
END_TEST

static void assert_refused(const rv_graph *joint, const char *words)
{
    GError *error = NULL;
    rv_alike_job *alike = rv_alike_from_job(joint, &error);
    ck_assert_msg(alike == NULL, "held as alike");
    ck_assert(!rv_alike_check(joint, NULL, NULL));
    ck_assert_msg(error != NULL && strstr(error->message, words) != NULL, "message: %s", error ? error->message : "(none)");
    g_error_free(error);
}

/* Everything a job held in classes must give: the joint graph back, the
 * replay and the reports, also after a save and a load. */
static void assert_held_faithfully(const rv_graph *joint, const rv_alike_job *alike)
{
    assert_same_replay(joint, alike);
    rv_graph *back = rv_alike_to_job(alike);
    assert_same_graph(joint, back);
    rv_graph_free(back);
    assert_same_reports(joint, alike);
    for (int recorded = 0; recorded < 2; recorded++) {
        rv_alike_job *held = saved_and_held(joint, recorded);
        ck_assert_uint_eq(held->class_count, alike->class_count);
        assert_same_reports(joint, held);
        rv_alike_job_free(held);
    }
}

/* The held job's classes, as "0 1 | 2". */
static char *classes_text(const rv_alike_job *alike)
{
    GString *text = g_string_new(NULL);
    for (guint c = 0; c < alike->class_count; c++)
        for (guint m = 0; m < alike->classes[c].member_count; m++)
            g_string_append_printf(text, "%s%u", c > 0 && m == 0 ? " | " : m > 0 ? " " : "", alike->classes[c].members[m]);
    return g_string_free(text, FALSE);
}

static void assert_classes(const rv_graph *joint, const char *expected, const char *because)
{
    GError *error = NULL;
    rv_alike_job *alike = rv_alike_from_job(joint, &error);
    ck_assert_msg(alike != NULL, "not held: %s", error ? error->message : "");
    char *found = classes_text(alike);
    ck_assert_str_eq(found, expected);
    g_free(found);
    rv_alike_verdict verdict;
    ck_assert(rv_alike_check(joint, &verdict, NULL));
    ck_assert_uint_eq(verdict.class_count, alike->class_count);
    for (guint r = 0; r < alike->rank_count; r++) ck_assert_uint_eq(verdict.rank_class[r], alike->ranks[r].class_index);
    ck_assert_msg(verdict.unlike_because && strstr(verdict.unlike_because, because), "verdict: %s",
                  verdict.unlike_because ? verdict.unlike_because : "(none)");
    rv_alike_verdict_clear(&verdict);
    assert_held_faithfully(joint, alike);
    rv_alike_job_free(alike);
}

/* The first kernel of rank index `rank`. */
static int32_t first_kernel(const rv_graph *joint, int32_t rank)
{
    for (int32_t t = 0; t < rv_graph_task_count(joint); t++)
    {
        const rv_task *task = &g_array_index(joint->tasks, rv_task, t);
        if (rv_task_rank_index(joint, task) == rank && task->kind == RV_TASK_KERNEL) return t;
    }
    return -1;
}

/* A rank unlike the others (rank 0 logging, say) is a class of its own;
 * the others are still held once, and everything comes out as the joint
 * graph's. */
START_TEST(unlike_rank_is_a_class_of_its_own)
{
    rv_graph *joint = generated_job(3, 2, "0", "500");
    int32_t renamed = first_kernel(joint, 2), name = rv_graph_task(joint, renamed)->name;
    rv_graph_task(joint, renamed)->name = rv_strings_intern(joint->strings, "another kernel");
    assert_classes(joint, "0 1 | 2", "rank index 2's task");
    rv_graph_task(joint, renamed)->name = name;
    /* rank index 0 another program (it logs, say) */
    renamed = first_kernel(joint, 0);
    rv_graph_task(joint, renamed)->name = rv_strings_intern(joint->strings, "rank 0's own kernel");
    assert_classes(joint, "0 | 1 2", "rank index 1's task");
    rv_graph_free(joint);
}
END_TEST

/* Two programs taking turns (ranks 0 and 2 one, 1 and 3 the other): two
 * classes whose members are not neighbours. */
START_TEST(classes_take_turns)
{
    rv_graph *joint = generated_job(4, 2, "300", "800");
    int32_t other = rv_strings_intern(joint->strings, "the other stage's kernel");
    rv_graph_task(joint, first_kernel(joint, 1))->name = other;
    rv_graph_task(joint, first_kernel(joint, 3))->name = other;
    assert_classes(joint, "0 2 | 1 3", "rank index 1's task");
    rv_graph_free(joint);
}
END_TEST

START_TEST(ranks_that_cannot_be_held_are_refused)
{
    rv_graph *joint = generated_job(3, 2, "0", "500");
    /* an edge from rank index 2 into rank index 1 */
    guint per_rank = joint->edges->len / 3, i = 2 * per_rank + per_rank / 2;
    rv_edge *edge = &g_array_index(joint->edges, rv_edge, i), kept = *edge;
    edge->to = first_kernel(joint, 1);
    assert_refused(joint, "rank index 2 is not one block: an edge joins it to another rank");
    *edge = kept;
    rv_graph_free(joint);
    /* no two ranks alike */
    joint = generated_job(2, 2, "0", "500");
    rv_graph_task(joint, first_kernel(joint, 1))->name = rv_strings_intern(joint->strings, "another kernel");
    assert_refused(joint, "rank index 1's task");
    rv_graph_free(joint);
}
END_TEST

/* The 8 DLRM ranks the project ships: each rank's model shard differs, so
 * most are unlike; where some are alike they are held in classes and must
 * replay as the joint graph does, else the reason names the first
 * difference. */
START_TEST(dlrm_ranks_are_held_faithfully)
{
    rv_graph *joint = load_dlrm_job();
    GError *error = NULL;
    rv_alike_job *alike = rv_alike_from_job(joint, &error);
    if (alike != NULL) {
        char *found = classes_text(alike);
        g_printerr("DLRM ranks' classes: %s\n", found);
        g_free(found);
        assert_same_replay(joint, alike);
        rv_graph *back = rv_alike_to_job(alike);
        assert_same_graph(joint, back);
        rv_graph_free(back);
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
        DLRM_RANK_TRACES, NULL,
    };
    require_project_traces(traces);
    Suite *suite = suite_create("alike");
    TCase *tc = tcase_create("alike");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, generated_ranks_are_alike_and_replay_alike);
    tcase_add_test(tc, straggler_replays_alike);
    tcase_add_test(tc, one_step_job_enters_together_alike);
    tcase_add_test(tc, job_without_steps_replays_alike);
    tcase_add_test(tc, unlike_rank_is_a_class_of_its_own);
    tcase_add_test(tc, classes_take_turns);
    tcase_add_test(tc, ranks_that_cannot_be_held_are_refused);
    tcase_add_test(tc, dlrm_ranks_are_held_faithfully);
    suite_add_tcase(suite, tc);
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed ? 1 : 0;
}
