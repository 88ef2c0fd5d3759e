/*
 * test_fast_paths.c - the linear-time machinery against brute-force
 * references on many random graphs:
 *
 *  - the policy replay (sim.c's per-resource waiting queues) against the
 *    rule it implements, written the slow way: repeatedly dispatch the
 *    ready task of least (begin, rank, id), begin = max(max(resource free,
 *    ready) + host overhead, released);
 *  - the replay without a policy in edge order (sim.c's run_in_edge_order,
 *    no heap) against the same rule, on graphs whose channels are chained
 *    or hold only instants, where any order the edges allow gives the
 *    rule's times; and a channel of real tasks with no order between them
 *    still replayed in order of time;
 *  - the transform API's edge index (src/graph/index.c) against scans of
 *    the whole edge array, after random inserts, splices and removals;
 *  - removal's reconnection: after removing a batch, two live tasks are
 *    joined by an edge exactly when the graph before had a path between
 *    them through removed tasks only;
 *  - the median by selection against the median by sorting.
 * The random graphs mix chained resources (threads, a stream with an idle
 * gap) with unordered channels where many tasks queue, which is where the
 * waiting queues matter.
 */
#include <check.h>
#include <glib.h>
#include <stdlib.h>
#include "reverie/graph.h"
#include "reverie/sim.h"
#include "reverie/stats.h"
#include "reverie/transform.h"
#include "plugin_harness.h"

enum { THREAD_A, THREAD_B, STREAM, CHANNEL_A, CHANNEL_B, RESOURCES };

/* What the channels' tasks are: queued with no order between them (where
 * the policy's waiting queues matter), chained by order edges like a
 * thread, or instants (no duration, no overhead: a joint job's rendezvous). */
typedef enum { CHANNELS_QUEUED, CHANNELS_CHAINED, CHANNELS_INSTANT } channel_mode;

typedef struct {
    rv_graph *graph;
    int64_t *rank;
} random_graph;

static int32_t add_random_task(rv_graph *graph, GRand *rng, int resource, channel_mode mode)
{
    rv_task task = { 0 };
    task.resource = resource;
    task.duration_ns = 1000 * g_rand_int_range(rng, 0, 12);
    task.kind = resource == STREAM ? RV_TASK_KERNEL : resource >= CHANNEL_A ? RV_TASK_COMM : RV_TASK_CPU;
    task.flags = resource == STREAM ? RV_TASK_FLAG_GPU : 0;
    task.correlation = -1;
    task.input_dims = -1;
    task.step = -1;
    /* overheads on channels too, so waiting tasks differ in more than rank */
    if (g_rand_int_range(rng, 0, 3) == 0) task.host_overhead_ns = 1000 * g_rand_int_range(rng, 0, 4);
    if (mode == CHANNELS_INSTANT && resource >= CHANNEL_A) task.duration_ns = task.host_overhead_ns = 0;
    return rv_graph_add_task(graph, &task);
}

/* Tasks in id order; threads and the stream chained by order edges, the
 * channels as `mode` says; extra edges only from lower to higher ids (a
 * DAG). */
static random_graph make_random_graph(GRand *rng, int count, channel_mode mode)
{
    random_graph made = { rv_graph_new(NULL, "random"), g_new0(int64_t, count) };
    const char *names[RESOURCES] = { "thread 1/1", "thread 1/2", "gpu 0 stream 7", "net", "pcie" };
    const rv_resource_kind kinds[RESOURCES] = { RV_RES_CPU_THREAD, RV_RES_CPU_THREAD, RV_RES_GPU_STREAM,
                                                RV_RES_CHANNEL, RV_RES_CHANNEL };
    for (int r = 0; r < RESOURCES; r++) rv_graph_add_resource(made.graph, kinds[r], 1, r, names[r]);
    g_array_index(made.graph->resources, rv_resource, STREAM).idle_gap_ns = 500;
    int32_t last[RESOURCES] = { -1, -1, -1, -1, -1 };
    for (int i = 0; i < count; i++) {
        int resource = g_rand_int_range(rng, 0, RESOURCES);
        int32_t id = add_random_task(made.graph, rng, resource, mode);
        made.rank[id] = g_rand_int_range(rng, 0, 4);
        if ((resource < CHANNEL_A || mode == CHANNELS_CHAINED) && last[resource] >= 0)
            rv_graph_add_edge(made.graph, last[resource], id, resource == STREAM ? RV_EDGE_STREAM : RV_EDGE_THREAD, FALSE);
        last[resource] = id;
        for (int k = g_rand_int_range(rng, 0, 3); k > 0 && id > 0; k--)
            rv_graph_add_edge(made.graph, g_rand_int_range(rng, 0, id), id, RV_EDGE_PLUGIN,
                              g_rand_int_range(rng, 0, 5) == 0);
    }
    return made;
}

static int64_t rank_from_table(const rv_graph *graph, int32_t task, void *user_data)
{
    return ((const int64_t *)user_data)[task];
}

/* ---- the policy replay ------------------------------------------------ */

static gboolean sequencing_only(const rv_graph *graph, const rv_edge *edge)
{
    return (edge->kind == RV_EDGE_THREAD || edge->kind == RV_EDGE_STREAM) &&
           rv_graph_task((rv_graph *)graph, edge->from)->resource == rv_graph_task((rv_graph *)graph, edge->to)->resource;
}

/* The rule, O(V^2): no heap, no queue, no lower bounds. */
static void reference_replay(const rv_graph *graph, const int64_t *rank, int64_t *start)
{
    int32_t n = rv_graph_task_count(graph);
    int64_t *end = g_new(int64_t, n), *ready = g_new0(int64_t, n), *free_at = g_new0(int64_t, RESOURCES);
    int32_t *pending = g_new0(int32_t, n);
    for (guint e = 0; e < graph->edges->len; e++) pending[g_array_index(graph->edges, rv_edge, e).to]++;
    for (int32_t t = 0; t < n; t++) start[t] = -1;
    for (int32_t round = 0; round < n; round++) {
        int32_t best = -1;
        int64_t best_begin = 0;
        for (int32_t t = 0; t < n; t++) {
            if (start[t] >= 0 || pending[t] > 0) continue;
            const rv_task *task = rv_graph_task((rv_graph *)graph, t);
            int64_t begin = MAX(free_at[task->resource], ready[t]) + task->host_overhead_ns;
            if (best < 0 || begin < best_begin || (begin == best_begin && rank[t] < rank[best])) {
                best = t;
                best_begin = begin;
            }
        }
        ck_assert_int_ge(best, 0);
        const rv_task *task = rv_graph_task((rv_graph *)graph, best);
        start[best] = best_begin;
        end[best] = best_begin + task->duration_ns;
        free_at[task->resource] = end[best] + g_array_index(graph->resources, rv_resource, task->resource).idle_gap_ns;
        for (guint e = 0; e < graph->edges->len; e++) {
            const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
            if (edge->from != best) continue;
            pending[edge->to]--;
            if (!sequencing_only(graph, edge)) ready[edge->to] = MAX(ready[edge->to], edge->from_start ? start[best] : end[best]);
        }
    }
    g_free(end); g_free(ready); g_free(free_at); g_free(pending);
}

START_TEST(policy_replay_matches_the_rule)
{
    GRand *rng = g_rand_new_with_seed(20240501);
    for (int round = 0; round < 400; round++) {
        random_graph made = make_random_graph(rng, g_rand_int_range(rng, 2, 90), CHANNELS_QUEUED);
        int32_t n = rv_graph_task_count(made.graph);
        int64_t *expected = g_new(int64_t, n);
        reference_replay(made.graph, made.rank, expected);
        rv_policy policy = { rank_from_table, made.rank };
        rv_sim_result sim = { 0 };
        GError *error = NULL;
        ck_assert_msg(rv_simulate(made.graph, &policy, &sim, &error), "%s", error ? error->message : "");
        for (int32_t t = 0; t < n; t++)
            ck_assert_msg(sim.start_ns[t] == expected[t], "round %d task %d: replay %lld, rule %lld", round, t,
                          (long long)sim.start_ns[t], (long long)expected[t]);
        rv_sim_result_clear(&sim);
        g_free(expected);
        g_free(made.rank);
        rv_graph_free(made.graph);
    }
    g_rand_free(rng);
}
END_TEST

/* Without a policy, on graphs where every resource is chained or holds
 * only instants, the replay dispatches in edge order (no heap); its times
 * must be the rule's, whatever order it picked.  Both kinds of channel,
 * since a rendezvous resource is the one a joint job does not chain. */
START_TEST(edge_order_replay_matches_the_rule)
{
    GRand *rng = g_rand_new_with_seed(20261127);
    for (int round = 0; round < 400; round++) {
        channel_mode mode = round % 2 ? CHANNELS_CHAINED : CHANNELS_INSTANT;
        random_graph made = make_random_graph(rng, g_rand_int_range(rng, 2, 90), mode);
        int32_t n = rv_graph_task_count(made.graph);
        int64_t *expected = g_new(int64_t, n), *no_rank = g_new0(int64_t, n);
        reference_replay(made.graph, no_rank, expected);
        rv_sim_result sim = { 0 };
        GError *error = NULL;
        ck_assert_msg(rv_simulate(made.graph, NULL, &sim, &error), "%s", error ? error->message : "");
        for (int32_t t = 0; t < n; t++)
            ck_assert_msg(sim.start_ns[t] == expected[t], "round %d (%s) task %d: replay %lld, rule %lld", round,
                          mode == CHANNELS_CHAINED ? "chained" : "instants", t, (long long)sim.start_ns[t],
                          (long long)expected[t]);
        rv_sim_result_clear(&sim);
        g_free(expected);
        g_free(no_rank);
        g_free(made.rank);
        rv_graph_free(made.graph);
    }
    g_rand_free(rng);
}
END_TEST

/* Two transfers on one channel with no order between them: the one ready
 * first (at 0) takes the channel, the other (ready at 3) waits for it to
 * end at 5.  Task ids are chosen so that an edge-order replay would reach
 * the later one first: it must not be used on such a channel. */
START_TEST(unordered_channel_replays_in_time_order)
{
    rv_graph *graph = rv_graph_new(NULL, "two transfers");
    rv_graph_add_resource(graph, RV_RES_CPU_THREAD, 1, 1, "thread 1/1");
    rv_graph_add_resource(graph, RV_RES_CHANNEL, -1, -1, "net");
    rv_task transfer = { .resource = 1, .duration_ns = 5, .correlation = -1, .input_dims = -1, .step = -1,
                         .kind = RV_TASK_COMM };
    rv_task call = { .resource = 0, .duration_ns = 3, .correlation = -1, .input_dims = -1, .step = -1,
                     .kind = RV_TASK_CPU };
    int32_t first = rv_graph_add_task(graph, &transfer);
    int32_t before = rv_graph_add_task(graph, &call);
    int32_t second = rv_graph_add_task(graph, &transfer);
    rv_graph_add_edge(graph, before, second, RV_EDGE_PLUGIN, FALSE);
    rv_sim_result sim = { 0 };
    GError *error = NULL;
    ck_assert_msg(rv_simulate(graph, NULL, &sim, &error), "%s", error ? error->message : "");
    ck_assert_int_eq(sim.start_ns[first], 0);
    ck_assert_int_eq(sim.start_ns[second], 5);
    rv_sim_result_clear(&sim);
    rv_graph_free(graph);
}
END_TEST

/* ---- the edge index --------------------------------------------------- */

static gboolean removed(const rv_graph *graph, int32_t task)
{
    return (rv_graph_task((rv_graph *)graph, task)->flags & RV_TASK_FLAG_REMOVED) != 0;
}

/* What rv_graph_resource_next/previous meant before the index: the first
 * order edge in the array from (to) the task to a live task of its resource. */
static int32_t scan_neighbour(const rv_graph *graph, int32_t task, gboolean forward)
{
    int32_t resource = rv_graph_task((rv_graph *)graph, task)->resource;
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        if (edge->kind != RV_EDGE_THREAD && edge->kind != RV_EDGE_STREAM) continue;
        int32_t here = forward ? edge->from : edge->to, there = forward ? edge->to : edge->from;
        if (here == task && !removed(graph, there) && rv_graph_task((rv_graph *)graph, there)->resource == resource)
            return there;
    }
    return -1;
}

static int32_t scan_launch(const rv_graph *graph, int32_t task)
{
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        if (edge->kind == RV_EDGE_LAUNCH && edge->to == task) return edge->from;
    }
    return -1;
}

static void check_queries(const rv_graph *graph)
{
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        ck_assert_int_eq(rv_graph_resource_next(graph, t), scan_neighbour(graph, t, TRUE));
        ck_assert_int_eq(rv_graph_resource_previous(graph, t), scan_neighbour(graph, t, FALSE));
        ck_assert_int_eq(rv_graph_launch_of(graph, t), scan_launch(graph, t));
    }
}

/* Can `from` reach `to` along edges? */
static gboolean reaches(const rv_graph *graph, int32_t from, int32_t to)
{
    gboolean *seen = g_new0(gboolean, rv_graph_task_count(graph));
    GArray *stack = g_array_new(FALSE, FALSE, sizeof(int32_t));
    g_array_append_val(stack, from);
    gboolean found = from == to;
    while (stack->len && !found) {
        int32_t u = g_array_index(stack, int32_t, stack->len - 1);
        g_array_set_size(stack, stack->len - 1);
        for (guint e = 0; e < graph->edges->len && !found; e++) {
            const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
            if (edge->from != u || seen[edge->to]) continue;
            seen[edge->to] = TRUE;
            found = edge->to == to;
            g_array_append_val(stack, edge->to);
        }
    }
    g_array_unref(stack);
    g_free(seen);
    return found;
}

/* A random insert: a task spliced after a live anchor; a kernel also gets
 * a launch call after a thread task that the anchor cannot reach (else the
 * new launch edge would close a cycle). */
static void random_insert(rv_graph *graph, GRand *rng)
{
    int32_t n = rv_graph_task_count(graph);
    int32_t anchor = g_rand_int_range(rng, 0, n), call = g_rand_int_range(rng, 0, n);
    const rv_task *at = rv_graph_task(graph, anchor);
    if (removed(graph, anchor)) return;
    rv_insert_spec spec = { *at, anchor, -1 };
    spec.task.flags = 0;
    if (at->resource == STREAM && !removed(graph, call) && rv_graph_task(graph, call)->resource == THREAD_A &&
        !reaches(graph, anchor, call))
        spec.launch_after = call;
    GError *error = NULL;
    ck_assert_msg(rv_transform_insert(graph, &spec, &error) >= 0, "%s", error ? error->message : "");
}

/* live a -> live b through removed tasks only, at least one of them removed
 * by this batch (removed in `after` but not in `before`): the paths the
 * batch cuts.  Paths through tasks removed earlier were reconnected then,
 * and a later splice may have moved those bypass edges on. */
static gboolean path_through_removed(const rv_graph *before, const rv_graph *after, int32_t a, int32_t b)
{
    int32_t n = rv_graph_task_count(before);
    gboolean *seen = g_new0(gboolean, 2 * n); /* (task, passed a new victim) */
    GArray *stack = g_array_new(FALSE, FALSE, sizeof(int32_t) * 2);
    int32_t origin[2] = { a, 0 };
    g_array_append_vals(stack, origin, 1);
    gboolean found = FALSE;
    while (stack->len && !found) {
        int32_t *top = (int32_t *)stack->data + 2 * (stack->len - 1);
        int32_t u = top[0], cut = top[1];
        g_array_set_size(stack, stack->len - 1);
        for (guint e = 0; e < before->edges->len && !found; e++) {
            const rv_edge *edge = &g_array_index(before->edges, rv_edge, e);
            if (edge->from != u) continue;
            if (edge->to == b && cut) found = TRUE;
            if (!removed(after, edge->to)) continue;
            int32_t next[2] = { edge->to, cut || !removed(before, edge->to) };
            if (seen[2 * next[0] + next[1]]) continue;
            seen[2 * next[0] + next[1]] = TRUE;
            g_array_append_vals(stack, next, 1);
        }
    }
    g_array_unref(stack);
    g_free(seen);
    return found;
}

/* After removal: live a and b are joined iff they were, or a path through
 * the removed tasks joined them. */
static void check_reconnection(const rv_graph *before, const rv_graph *after)
{
    int32_t n = rv_graph_task_count(after);
    for (int32_t a = 0; a < n; a++) {
        if (removed(after, a)) continue;
        for (int32_t b = 0; b < n; b++) {
            if (a == b || removed(after, b)) continue;
            gboolean expected = has_edge(before, a, b) || path_through_removed(before, after, a, b);
            ck_assert_msg(has_edge(after, a, b) == expected, "%d -> %d: edge %d, expected %d", a, b,
                          has_edge(after, a, b), expected);
        }
    }
}

static void random_removal(rv_graph *graph, GRand *rng)
{
    rv_graph *before = rv_graph_copy(graph);
    GArray *victims = g_array_new(FALSE, FALSE, sizeof(int32_t));
    int32_t n = rv_graph_task_count(graph);
    /* a run of neighbours now and then, as plugins remove whole regions */
    int32_t from = g_rand_int_range(rng, 0, n), length = g_rand_int_range(rng, 1, 8);
    for (int32_t t = from; t < MIN(n, from + length); t++) g_array_append_val(victims, t);
    rv_transform_remove_many(graph, victims, g_rand_boolean(rng) ? RV_REMOVE_KEEP_OVERHEAD : RV_REMOVE_DROP_OVERHEAD);
    check_reconnection(before, graph);
    g_array_unref(victims);
    rv_graph_free(before);
}

START_TEST(index_matches_scans_through_edits)
{
    GRand *rng = g_rand_new_with_seed(7);
    for (int round = 0; round < 60; round++) {
        random_graph made = make_random_graph(rng, g_rand_int_range(rng, 5, 60), CHANNELS_QUEUED);
        /* launch edges for some kernels, so that launch_of has answers */
        for (int32_t t = 1; t < rv_graph_task_count(made.graph); t++)
            if (rv_graph_task(made.graph, t)->resource == STREAM && g_rand_boolean(rng))
                rv_graph_add_edge(made.graph, g_rand_int_range(rng, 0, t), t, RV_EDGE_LAUNCH, FALSE);
        check_queries(made.graph);
        for (int edit = 0; edit < 12; edit++) {
            if (g_rand_int_range(rng, 0, 3) == 0) random_removal(made.graph, rng);
            else random_insert(made.graph, rng);
            check_queries(made.graph);
            GError *error = NULL;
            ck_assert_msg(rv_graph_check_acyclic(made.graph, &error), "%s", error ? error->message : "");
        }
        g_free(made.rank);
        rv_graph_free(made.graph);
    }
    g_rand_free(rng);
}
END_TEST

/* An edge rewritten by hand is seen after rv_transform_invalidate. */
START_TEST(invalidate_after_hand_edit)
{
    GRand *rng = g_rand_new_with_seed(3);
    random_graph made = make_random_graph(rng, 40, CHANNELS_QUEUED);
    check_queries(made.graph);
    for (guint e = 0; e < made.graph->edges->len; e++) {
        rv_edge *edge = &g_array_index(made.graph->edges, rv_edge, e);
        if (edge->kind == RV_EDGE_THREAD) { edge->kind = RV_EDGE_PLUGIN; break; }
    }
    rv_transform_invalidate(made.graph);
    check_queries(made.graph);
    g_free(made.rank);
    rv_graph_free(made.graph);
    g_rand_free(rng);
}
END_TEST

/* ---- the O(n) median and quantiles ----------------------------------- */

START_TEST(median_by_selection_matches_sorting)
{
    GRand *rng = g_rand_new_with_seed(11);
    for (int round = 0; round < 300; round++) {
        GArray *a = g_array_new(FALSE, FALSE, sizeof(int64_t)), *b = g_array_new(FALSE, FALSE, sizeof(int64_t));
        int count = g_rand_int_range(rng, 0, 200), spread = g_rand_int_range(rng, 1, 50);
        for (int i = 0; i < count; i++) {
            int64_t value = g_rand_int_range(rng, 0, spread); /* many repeats */
            g_array_append_val(a, value);
            g_array_append_val(b, value);
        }
        ck_assert_int_eq(rv_median_int64_select(a, -7), rv_median_int64(b, -7));
        for (int q = 0; q <= 20; q++) { /* b is sorted: the quantile is its element */
            double quantile = q / 20.0;
            int64_t expected = count ? g_array_index(b, int64_t, (guint)(quantile * (count - 1))) : -7;
            ck_assert_int_eq(rv_quantile_int64(a, quantile, -7), expected);
        }
        g_array_unref(a);
        g_array_unref(b);
    }
    g_rand_free(rng);
}
END_TEST

int main(void)
{
    Suite *suite = suite_create("fast-paths");
    TCase *tc = tcase_create("against-references");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, policy_replay_matches_the_rule);
    tcase_add_test(tc, edge_order_replay_matches_the_rule);
    tcase_add_test(tc, unordered_channel_replays_in_time_order);
    tcase_add_test(tc, index_matches_scans_through_edits);
    tcase_add_test(tc, invalidate_after_hand_edit);
    tcase_add_test(tc, median_by_selection_matches_sorting);
    suite_add_tcase(suite, tc);
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
