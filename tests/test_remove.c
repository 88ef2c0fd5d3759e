/*
 * test_remove.c - removing many tasks at once (rv_transform_remove_many)
 * on real traces and on long chains.
 *
 * remove_many joins each live task to the live tasks it reached through
 * the removed ones, with lists that a chain of removed tasks shares.  Here:
 *   - on shipped traces, removing a batch (launch calls of a random subset
 *     of kernels, with a long run of consecutive ones on one thread; or
 *     kernels, which take their launch calls) gives the graph that removing
 *     the same tasks one at a time gives: the same removed tasks, the same
 *     host overheads, the same simulated start of every task and the same
 *     step times; and no edge it adds joins two tasks a live edge joins;
 *   - a chain of 20,000 consecutive removed tasks adds a number of edges
 *     linear in the chain (counted, not timed).
 */
#include <check.h>
#include <glib.h>
#include <stdlib.h>
#include "plugin_harness.h"

static gboolean is_removed(const rv_graph *graph, int32_t task)
{
    return (rv_graph_task((rv_graph *)graph, task)->flags & RV_TASK_FLAG_REMOVED) != 0;
}

/* Live edges from index `first` on that join two tasks a live edge
 * already joins (one before them, or an earlier one of them). */
static guint duplicated_live_edges(const rv_graph *graph, guint first)
{
    GHashTable *pairs = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    guint duplicates = 0;
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        if (is_removed(graph, edge->from) || is_removed(graph, edge->to)) continue;
        gint64 key = ((gint64)edge->from << 32) | (guint32)edge->to;
        if (g_hash_table_contains(pairs, &key)) duplicates += e >= first;
        else g_hash_table_add(pairs, g_memdup2(&key, sizeof key));
    }
    g_hash_table_destroy(pairs);
    return duplicates;
}

/* The launch calls of kernels, in recorded order, and each call's first
 * kernel (call + 1 -> kernel). */
static GArray *launch_calls(const rv_graph *graph, GHashTable *kernel_of)
{
    GArray *calls = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_task *task = rv_graph_task((rv_graph *)graph, t);
        if (!(task->flags & RV_TASK_FLAG_GPU) || task->kind != RV_TASK_KERNEL) continue;
        int32_t call = rv_graph_launch_of(graph, t);
        if (call < 0 || g_hash_table_contains(kernel_of, GINT_TO_POINTER(call + 1))) continue;
        g_hash_table_insert(kernel_of, GINT_TO_POINTER(call + 1), GINT_TO_POINTER(t));
        g_array_append_val(calls, call);
    }
    rv_tasks_sort_recorded(graph, calls);
    return calls;
}

/* The victims: each launch call (or its kernel, with `kernels`: removing
 * it takes the call) with probability `share`, and a run of `run`
 * consecutive launch calls on one thread from a random place. */
static GArray *pick_victims(const rv_graph *graph, GRand *rng, double share, guint run, gboolean kernels)
{
    GHashTable *kernel_of = g_hash_table_new(g_direct_hash, g_direct_equal);
    GArray *calls = launch_calls(graph, kernel_of), *victims = g_array_new(FALSE, FALSE, sizeof(int32_t));
    /* the run: on the thread with the most launch calls */
    GHashTable *per_thread = g_hash_table_new(g_direct_hash, g_direct_equal);
    int32_t thread = -1;
    guint most = 0;
    for (guint i = 0; i < calls->len; i++) {
        gpointer key = GINT_TO_POINTER(rv_graph_task((rv_graph *)graph, g_array_index(calls, int32_t, i))->resource + 1);
        guint count = GPOINTER_TO_UINT(g_hash_table_lookup(per_thread, key)) + 1;
        g_hash_table_insert(per_thread, key, GUINT_TO_POINTER(count));
        if (count > most) { most = count; thread = GPOINTER_TO_INT(key) - 1; }
    }
    g_hash_table_destroy(per_thread);
    ck_assert_uint_gt(most, run);
    guint first = (guint)g_rand_int_range(rng, 0, (gint32)(most - run)), seen = 0, in_run = 0;
    for (guint i = 0; i < calls->len; i++) {
        int32_t call = g_array_index(calls, int32_t, i);
        gboolean on_thread = rv_graph_task((rv_graph *)graph, call)->resource == thread;
        gboolean running = on_thread && seen >= first && in_run < run;
        seen += on_thread;
        in_run += running;
        if (!running && g_rand_double(rng) >= share) continue;
        int32_t victim = kernels ? GPOINTER_TO_INT(g_hash_table_lookup(kernel_of, GINT_TO_POINTER(call + 1))) : call;
        g_array_append_val(victims, victim);
    }
    ck_assert_uint_eq(in_run, run);
    g_array_unref(calls);
    g_hash_table_destroy(kernel_of);
    return victims;
}

static void compare_with_one_by_one(const char *trace, guint32 seed, double share, guint run, gboolean kernels,
                                    rv_remove_mode mode)
{
    rv_graph *batch = load_trace(trace);
    rv_graph *single = rv_graph_copy(batch);
    guint edges_before = batch->edges->len;
    int64_t baseline = step_total(batch);
    GRand *rng = g_rand_new_with_seed(seed);
    GArray *victims = pick_victims(batch, rng, share, run, kernels);
    int removed_batch = rv_transform_remove_many(batch, victims, mode), removed_single = 0;
    for (guint i = 0; i < victims->len; i++)
        removed_single += rv_transform_remove(single, g_array_index(victims, int32_t, i), mode);
    ck_assert_int_eq(removed_batch, removed_single);
    ck_assert_int_ge(removed_batch, (int)victims->len);
    ck_assert_uint_eq(duplicated_live_edges(batch, edges_before), 0);
    rv_sim_result a = { 0 }, b = { 0 };
    GError *error = NULL;
    ck_assert_msg(rv_graph_check_acyclic(batch, &error), "%s", error ? error->message : "");
    ck_assert(rv_simulate(batch, NULL, &a, &error));
    ck_assert(rv_simulate(single, NULL, &b, &error));
    for (int32_t t = 0; t < rv_graph_task_count(batch); t++) {
        ck_assert_int_eq(is_removed(batch, t), is_removed(single, t));
        ck_assert_int_eq(rv_graph_task(batch, t)->host_overhead_ns, rv_graph_task(single, t)->host_overhead_ns);
        ck_assert_msg(a.start_ns[t] == b.start_ns[t], "%s: task %d starts at %" G_GINT64_FORMAT " (batch) and %"
                      G_GINT64_FORMAT " (one by one)", trace, t, a.start_ns[t], b.start_ns[t]);
    }
    int64_t total = step_total(batch);
    ck_assert_int_eq(total, step_total(single));
    ck_assert_int_le(total, baseline); /* removing work never lengthens a step */
    rv_sim_result_clear(&a);
    rv_sim_result_clear(&b);
    g_array_unref(victims);
    g_rand_free(rng);
    rv_graph_free(batch);
    rv_graph_free(single);
}

START_TEST(launch_calls_linear)
{
    compare_with_one_by_one("param_linear_2080ti.json.gz", 11, 0.2, 2000, FALSE, RV_REMOVE_DROP_OVERHEAD);
    compare_with_one_by_one("param_linear_2080ti.json.gz", 12, 0.05, 500, FALSE, RV_REMOVE_KEEP_OVERHEAD);
}
END_TEST

START_TEST(launch_calls_resnet)
{
    compare_with_one_by_one("hta_resnet50_v100.json.gz", 21, 0.3, 1500, FALSE, RV_REMOVE_DROP_OVERHEAD);
    compare_with_one_by_one("hta_resnet50_v100.json.gz", 22, 0.1, 800, FALSE, RV_REMOVE_KEEP_OVERHEAD);
}
END_TEST

START_TEST(kernels_resnet_and_linear)
{
    compare_with_one_by_one("hta_resnet50_v100.json.gz", 31, 0.2, 300, TRUE, RV_REMOVE_DROP_OVERHEAD);
    compare_with_one_by_one("param_linear_2080ti.json.gz", 32, 0.1, 300, TRUE, RV_REMOVE_KEEP_OVERHEAD);
}
END_TEST

START_TEST(launch_calls_transformer_ddp)
{
    compare_with_one_by_one("hta_transformer_ddp_v100_rank1.2steps.json.gz", 41, 0.2, 1000, FALSE,
                            RV_REMOVE_DROP_OVERHEAD);
}
END_TEST

/*
 * A thread: H, then CHAIN launch calls L_i each launching kernel K_i on a
 * stream, then T.  Removing every L_i in one batch joins H to each K_i and
 * to T, and nothing else: CHAIN + 1 edges (joining each removed task's
 * predecessors to its successors once made the work, though not the
 * edges, grow as CHAIN squared; tests/bench/plugins.c times it through
 * cuda-graphs).  Removing the kernels instead (their calls go with them)
 * leaves one edge to add: H -> T on the thread.
 */
enum { CHAIN = 20000 };

static tiny chain_graph(int32_t *head, int32_t *tail, GArray *calls, GArray *kernels)
{
    tiny t = tiny_new();
    *head = tiny_task(&t, t.cpu, RV_TASK_CPU, "H", US(1), RV_PHASE_FORWARD);
    for (int i = 0; i < CHAIN; i++) {
        int32_t kernel = tiny_launch(&t, "K", US(5), US(2), RV_PHASE_FORWARD, RV_TASK_KERNEL);
        int32_t call = rv_graph_launch_of(t.graph, kernel);
        g_array_append_val(calls, call);
        g_array_append_val(kernels, kernel);
    }
    *tail = tiny_task(&t, t.cpu, RV_TASK_CPU, "T", US(1), RV_PHASE_FORWARD);
    return t;
}

START_TEST(long_chain_of_launch_calls)
{
    GArray *calls = g_array_new(FALSE, FALSE, sizeof(int32_t)), *kernels = g_array_new(FALSE, FALSE, sizeof(int32_t));
    int32_t head, tail;
    tiny t = chain_graph(&head, &tail, calls, kernels);
    guint edges_before = t.graph->edges->len;
    ck_assert_int_eq(rv_transform_remove_many(t.graph, calls, RV_REMOVE_DROP_OVERHEAD), CHAIN);
    ck_assert_uint_eq(t.graph->edges->len - edges_before, CHAIN + 1);
    for (guint e = edges_before; e < t.graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(t.graph->edges, rv_edge, e);
        ck_assert_int_eq(edge->from, head);
        ck_assert_int_eq(edge->kind, edge->to == tail ? RV_EDGE_THREAD : RV_EDGE_PLUGIN);
    }
    ck_assert_int_eq(rv_graph_resource_next(t.graph, head), tail);
    /* H 0-1; the kernels back to back from 1 us, T 1-2 us */
    ck_assert_int_eq(makespan(t.graph), US(1) + CHAIN * US(2));
    g_array_unref(calls);
    g_array_unref(kernels);
    rv_graph_free(t.graph);
}
END_TEST

START_TEST(long_chain_of_kernels)
{
    GArray *calls = g_array_new(FALSE, FALSE, sizeof(int32_t)), *kernels = g_array_new(FALSE, FALSE, sizeof(int32_t));
    int32_t head, tail;
    tiny t = chain_graph(&head, &tail, calls, kernels);
    guint edges_before = t.graph->edges->len;
    ck_assert_int_eq(rv_transform_remove_many(t.graph, kernels, RV_REMOVE_DROP_OVERHEAD), 2 * CHAIN);
    ck_assert_uint_eq(t.graph->edges->len - edges_before, 1);
    ck_assert_int_eq(rv_graph_resource_next(t.graph, head), tail);
    ck_assert_int_eq(makespan(t.graph), US(2));
    g_array_unref(calls);
    g_array_unref(kernels);
    rv_graph_free(t.graph);
}
END_TEST

static Suite *remove_suite(void)
{
    Suite *suite = suite_create("remove");
    TCase *real = tcase_create("batch-vs-one-by-one");
    tcase_set_timeout(real, 300);
    tcase_add_test(real, launch_calls_linear);
    tcase_add_test(real, launch_calls_resnet);
    tcase_add_test(real, kernels_resnet_and_linear);
    tcase_add_test(real, launch_calls_transformer_ddp);
    suite_add_tcase(suite, real);
    TCase *chains = tcase_create("long-chains");
    tcase_set_timeout(chains, 60);
    tcase_add_test(chains, long_chain_of_launch_calls);
    tcase_add_test(chains, long_chain_of_kernels);
    suite_add_tcase(suite, chains);
    return suite;
}

int main(void)
{
    static const char *const traces[] = { "param_linear_2080ti.json.gz", "hta_resnet50_v100.json.gz",
                                          "hta_transformer_ddp_v100_rank1.2steps.json.gz", NULL };
    require_project_traces(traces);
    SRunner *runner = srunner_create(remove_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
