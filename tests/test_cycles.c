/*
 * test_cycles.c - the acyclicity checks (src/graph/cycles.c): the whole
 * graph by Kahn's algorithm, and the check after a plugin that looks only
 * around the edges that changed since the order the graph remembers.
 *
 *   - a DAG passes; a cycle is reported with tasks that really form one; an
 *     edge from a task to itself is reported as such, by both checks;
 *   - random graphs, random recorded times (so the remembered order is not
 *     the ids' order), random new tasks and edges, edges rewritten in
 *     place: the check after the change agrees with the whole check every
 *     time, reports only real cycles, and searches around edges instead of
 *     checking the whole graph (counted by rv_cycles_how);
 *   - tasks inserted between two they are ordered by need no search;
 *   - an edge rewritten by hand, behind the index's back, is still seen;
 *   - several threads check copies of one graph at once (no lock to take).
 */
#include <check.h>
#include <glib.h>
#include <string.h>
#include "reverie/error.h"
#include "reverie/graph.h"
#include "reverie/transform.h"
#include "reverie/validate.h"
#include "../src/graph/cycles.h"

/* n CPU tasks on one resource, recorded at the given times (NULL: in id
 * order), no edges. */
static rv_graph *tasks_only(int32_t n, const int64_t *recorded)
{
    rv_graph *graph = rv_graph_new(NULL, "test");
    int32_t resource = rv_graph_add_resource(graph, RV_RES_CPU_THREAD, 1, 1, "thread 1/1");
    for (int32_t i = 0; i < n; i++) {
        rv_task task = { 0 };
        task.resource = resource;
        task.name = rv_strings_intern(graph->strings, "t");
        task.step = -1;
        task.input_dims = -1;
        task.recorded_start_ns = recorded ? recorded[i] : i;
        rv_graph_add_task(graph, &task);
    }
    return graph;
}

/* Every consecutive pair of the reported "#a name -> #b name ..." cycle,
 * and its last back to its first, is an edge of the graph. */
static void assert_real_cycle(const rv_graph *graph, const char *message)
{
    const char *at = strstr(message, "has a cycle: ");
    ck_assert_msg(at != NULL, "%s", message);
    GArray *ids = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (const char *p = at; (p = strchr(p, '#')) != NULL; p++) {
        int32_t id = (int32_t)strtol(p + 1, NULL, 10);
        g_array_append_val(ids, id);
    }
    ck_assert_uint_ge(ids->len, 1);
    if (strstr(message, "(") && strstr(message, "tasks)")) goto out; /* cut short: only the pairs shown */
    for (guint i = 0; i < ids->len; i++) {
        int32_t from = g_array_index(ids, int32_t, i), to = g_array_index(ids, int32_t, (i + 1) % ids->len);
        gboolean found = FALSE;
        for (guint e = 0; e < graph->edges->len && !found; e++) {
            const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
            found = edge->from == from && edge->to == to;
        }
        ck_assert_msg(found, "no edge #%d -> #%d in the reported cycle: %s", from, to, message);
    }
out:
    g_array_unref(ids);
}

START_TEST(whole_graph)
{
    rv_graph *graph = tasks_only(4, NULL);
    GError *error = NULL;
    rv_graph_add_edge(graph, 0, 1, RV_EDGE_THREAD, FALSE);
    rv_graph_add_edge(graph, 1, 2, RV_EDGE_THREAD, FALSE);
    rv_graph_add_edge(graph, 0, 3, RV_EDGE_PLUGIN, FALSE);
    ck_assert(rv_graph_check_acyclic(graph, &error));
    rv_graph_add_edge(graph, 2, 0, RV_EDGE_PLUGIN, FALSE);
    ck_assert(!rv_graph_check_acyclic(graph, &error));
    ck_assert_msg(g_str_has_prefix(error->message, "test: the dependency graph has a cycle: "), "%s", error->message);
    assert_real_cycle(graph, error->message);
    g_clear_error(&error);
    rv_graph_free(graph);

    graph = tasks_only(3, NULL);
    rv_graph_add_edge(graph, 0, 1, RV_EDGE_THREAD, FALSE);
    rv_graph_add_edge(graph, 2, 2, RV_EDGE_PLUGIN, FALSE);
    ck_assert(!rv_graph_check_acyclic(graph, &error));
    ck_assert_msg(strstr(error->message, "edge 1 makes #2 t wait for itself"), "%s", error->message);
    g_clear_error(&error);
    rv_graph_free(graph);
}
END_TEST

/* A random DAG: edges go forward in a random permutation; recorded times
 * follow that permutation only roughly. */
static rv_graph *random_dag(GRand *rng, int32_t n, guint edges, int32_t **rank_out)
{
    int32_t *rank = g_new(int32_t, n); /* rank[task]: its place in the hidden order */
    for (int32_t i = 0; i < n; i++) rank[i] = i;
    for (int32_t i = n - 1; i > 0; i--) {
        int32_t j = g_rand_int_range(rng, 0, i + 1), swap = rank[i];
        rank[i] = rank[j];
        rank[j] = swap;
    }
    int64_t *recorded = g_new(int64_t, n);
    for (int32_t i = 0; i < n; i++) recorded[i] = (int64_t)rank[i] * 10 + g_rand_int_range(rng, -40, 40);
    rv_graph *graph = tasks_only(n, recorded);
    for (guint k = 0; k < edges; k++) {
        int32_t a = g_rand_int_range(rng, 0, n), b = g_rand_int_range(rng, 0, n);
        if (a == b) continue;
        if (rank[a] > rank[b]) { int32_t t = a; a = b; b = t; }
        rv_graph_add_edge(graph, a, b, RV_EDGE_PLUGIN, FALSE);
    }
    g_free(recorded);
    *rank_out = rank;
    return graph;
}

/* Change a copy of graph at random: new tasks, new edges (mostly forward in
 * the hidden order, a few backward), edges rewritten in place through the
 * index (the way an insertion splices) or by hand. */
static void change_at_random(GRand *rng, rv_graph *copy, const int32_t *rank, int32_t n, int backward)
{
    int32_t added = g_rand_int_range(rng, 0, 5);
    for (int32_t i = 0; i < added; i++) {
        rv_task task = g_array_index(copy->tasks, rv_task, 0);
        int32_t id = rv_graph_add_task(copy, &task);
        int32_t before = g_rand_int_range(rng, 0, n), after = g_rand_int_range(rng, 0, n);
        if (rank[before] > rank[after]) { int32_t t = before; before = after; after = t; }
        rv_graph_add_edge(copy, before, id, RV_EDGE_PLUGIN, FALSE);
        if (before != after) rv_graph_add_edge(copy, id, after, RV_EDGE_PLUGIN, FALSE);
    }
    int32_t edges = g_rand_int_range(rng, 0, 12);
    for (int32_t k = 0; k < edges; k++) {
        int32_t a = g_rand_int_range(rng, 0, n), b = g_rand_int_range(rng, 0, n);
        if (a == b) continue;
        if ((rank[a] > rank[b]) != (k < backward)) { int32_t t = a; a = b; b = t; }
        rv_graph_add_edge(copy, a, b, RV_EDGE_PLUGIN, FALSE);
    }
    if (copy->edges->len > 0 && g_rand_boolean(rng)) {
        int32_t e = g_rand_int_range(rng, 0, (gint32)copy->edges->len);
        rv_edge *edge = &g_array_index(copy->edges, rv_edge, e);
        int32_t from = g_rand_int_range(rng, 0, n);
        if (from != edge->to) {
            edge->from = from; /* by hand: the index does not know */
            rv_transform_invalidate(copy);
        }
    }
}

START_TEST(changed_agrees_with_whole)
{
    GRand *rng = g_rand_new_with_seed(26);
    guint cycles = 0, searched = 0, whole = 0;
    for (int round = 0; round < 1000; round++) {
        int32_t n = g_rand_int_range(rng, 2, 120), *rank = NULL;
        rv_graph *graph = random_dag(rng, n, (guint)(n * 2), &rank);
        ck_assert(rv_graph_check_acyclic(graph, NULL));
        rv_graph_remember_order(graph);
        rv_graph *copy = rv_graph_copy(graph);
        rv_graph_resource_next(copy, 0); /* the index, kept up to date from here on */
        change_at_random(rng, copy, rank, n, round % 8);
        GError *whole_error = NULL, *changed_error = NULL;
        gboolean expected = rv_cycles_check_all(copy, &whole_error);
        rv_cycles_how how;
        gboolean got = rv_cycles_check_changed(copy, rv_edges_before_take(copy), &how, &changed_error);
        ck_assert_msg(got == expected, "round %d: whole check %d, after the change %d (%s)", round, expected, got,
                      changed_error ? changed_error->message : "");
        if (!got) {
            assert_real_cycle(copy, changed_error->message);
            cycles++;
        }
        searched += how.against > 0 && !how.whole_graph;
        whole += how.whole_graph;
        g_clear_error(&whole_error);
        g_clear_error(&changed_error);
        rv_graph_free(copy);
        rv_graph_free(graph);
        g_free(rank);
    }
    /* the cases are not all of one kind */
    ck_assert_uint_gt(cycles, 100);
    ck_assert_uint_gt(searched, 300);
    ck_assert_uint_lt(whole, 100);
    g_rand_free(rng);
}
END_TEST

/* A chain 0 -> 1 -> ... -> 99; a task inserted between 40 and 41 by
 * rv_transform_insert (a splice: one edge rewritten, two added) costs no
 * search; an edge from 90 back to 10 is a cycle, found by a search. */
START_TEST(insertion_and_cycle_around_it)
{
    rv_graph *graph = tasks_only(100, NULL);
    for (int32_t i = 0; i + 1 < 100; i++) rv_graph_add_edge(graph, i, i + 1, RV_EDGE_THREAD, FALSE);
    rv_graph_remember_order(graph);
    rv_graph *copy = rv_graph_copy(graph);
    rv_insert_spec spec = { g_array_index(graph->tasks, rv_task, 40), 40, -1 };
    GError *error = NULL;
    int32_t id = rv_transform_insert(copy, &spec, &error);
    ck_assert_int_eq(id, 100);
    rv_cycles_how how;
    ck_assert(rv_cycles_check_changed(copy, rv_edges_before_take(copy), &how, &error));
    ck_assert_uint_eq(how.changed, 2);
    ck_assert_uint_eq(how.against, 0);
    ck_assert(!how.whole_graph);

    rv_graph_add_edge(copy, id, 10, RV_EDGE_PLUGIN, FALSE);
    ck_assert(!rv_cycles_check_changed(copy, rv_edges_before_take(copy), &how, &error));
    ck_assert(!how.whole_graph);
    ck_assert_uint_eq(how.against, 1);
    assert_real_cycle(copy, error->message);
    g_clear_error(&error);

    /* a self-loop among the changes */
    rv_graph *loop = rv_graph_copy(graph);
    rv_graph_add_edge(loop, 7, 7, RV_EDGE_PLUGIN, FALSE);
    ck_assert(!rv_cycles_check_changed(loop, rv_edges_before_take(loop), NULL, &error));
    ck_assert_msg(strstr(error->message, "makes #7 t wait for itself"), "%s", error->message);
    g_clear_error(&error);
    rv_graph_free(loop);
    rv_graph_free(copy);
    rv_graph_free(graph);
}
END_TEST

/* An edge rewritten by hand, the index not told: the check finds it where
 * the index does not list it and rebuilds the index. */
START_TEST(edge_rewritten_behind_the_index)
{
    rv_graph *graph = tasks_only(50, NULL);
    for (int32_t i = 0; i + 1 < 50; i++) rv_graph_add_edge(graph, i, i + 1, RV_EDGE_THREAD, FALSE);
    rv_graph_remember_order(graph);
    rv_graph *copy = rv_graph_copy(graph);
    ck_assert_int_eq(rv_graph_resource_next(copy, 3), 4); /* builds the index */
    g_array_index(copy->edges, rv_edge, 20).from = 45; /* 45 -> 21: closes 21 -> ... -> 45 -> 21 */
    GError *error = NULL;
    rv_cycles_how how;
    ck_assert(!rv_cycles_check_changed(copy, rv_edges_before_take(copy), &how, &error));
    ck_assert(!how.whole_graph);
    assert_real_cycle(copy, error->message);
    g_clear_error(&error);
    rv_graph_free(copy);
    rv_graph_free(graph);
}
END_TEST

/* Copies of one graph checked from several threads at once. */
typedef struct {
    const rv_graph *graph;
    int failures;
} shared;

static gpointer check_copies(gpointer data)
{
    shared *s = data;
    for (int i = 0; i < 50; i++) {
        rv_graph *copy = rv_graph_copy(s->graph);
        int32_t n = rv_graph_task_count(copy);
        rv_graph_add_edge(copy, n - 1, i % 2 ? 0 : n / 2, RV_EDGE_PLUGIN, FALSE); /* closes a cycle */
        GError *error = NULL;
        if (rv_cycles_check_changed(copy, rv_edges_before_take(copy), NULL, &error)) g_atomic_int_inc(&s->failures);
        if (rv_graph_check_acyclic(copy, NULL)) g_atomic_int_inc(&s->failures);
        g_clear_error(&error);
        rv_graph_free(copy);
    }
    return NULL;
}

START_TEST(threads_at_once)
{
    rv_graph *graph = tasks_only(5000, NULL);
    for (int32_t i = 0; i + 1 < 5000; i++) rv_graph_add_edge(graph, i, i + 1, RV_EDGE_THREAD, FALSE);
    rv_graph_remember_order(graph);
    shared s = { graph, 0 };
    GThread *threads[4];
    for (int t = 0; t < 4; t++) threads[t] = g_thread_new("check", check_copies, &s);
    for (int t = 0; t < 4; t++) g_thread_join(threads[t]);
    ck_assert_int_eq(s.failures, 0);
    rv_graph_free(graph);
}
END_TEST

/* The edges' check after a plugin, on a copy of a graph with a witness,
 * looks only at the edges that differ from the witness's: each way an
 * edge can be broken in place, or appended broken, is still refused, with
 * the same message the whole check gives; edges the plugin left alone
 * and good changes pass. */
START_TEST(edges_checked_after_plugin)
{
    rv_graph *graph = tasks_only(100, NULL);
    for (int32_t i = 0; i + 1 < 100; i++) rv_graph_add_edge(graph, i, i + 1, RV_EDGE_THREAD, FALSE);
    rv_graph_remember_order(graph);
    GError *error = NULL;
    rv_graph *copy = rv_graph_copy(graph);
    ck_assert(rv_edges_check_after_plugin(copy, rv_edges_before_take(copy), &error));
    rv_graph_add_edge(copy, 3, 50, RV_EDGE_PLUGIN, FALSE);
    ck_assert(rv_edges_check_after_plugin(copy, rv_edges_before_take(copy), &error));
    rv_graph_free(copy);
    for (int how = 0; how < 5; how++) {
        copy = rv_graph_copy(graph);
        rv_edges_before *before = rv_edges_before_take(copy);
        rv_edge *edge = &g_array_index(copy->edges, rv_edge, 60);
        if (how == 0) edge->to = 100;          /* a task that does not exist */
        if (how == 1) edge->from = -1;
        if (how == 2) edge->kind = 200;        /* a kind alone: no order changed */
        if (how == 3) rv_graph_add_edge(copy, 5, 1000, RV_EDGE_PLUGIN, FALSE);
        if (how == 4) edge->to = 10;           /* a cycle 10 -> ... -> 60 -> 10 */
        GError *whole = NULL;
        gboolean whole_ok = rv_graph_check_edges(copy, &whole) && rv_cycles_check_all(copy, &whole);
        ck_assert(!rv_edges_check_after_plugin(copy, before, &error));
        ck_assert(!whole_ok);
        if (how < 4) ck_assert_str_eq(error->message, whole->message); /* a cycle is named from where it was found */
        g_clear_error(&error);
        g_clear_error(&whole);
        rv_graph_free(copy);
    }
    rv_graph_free(graph);
}
END_TEST

int main(void)
{
    Suite *suite = suite_create("cycles");
    TCase *tc = tcase_create("cycles");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, whole_graph);
    tcase_add_test(tc, changed_agrees_with_whole);
    tcase_add_test(tc, insertion_and_cycle_around_it);
    tcase_add_test(tc, edges_checked_after_plugin);
    tcase_add_test(tc, edge_rewritten_behind_the_index);
    tcase_add_test(tc, threads_at_once);
    suite_add_tcase(suite, tc);
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed ? 1 : 0;
}
