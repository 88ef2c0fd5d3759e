/*
 * test_transform.c - the transformation primitives (transform.h), the
 * simulator's scheduling policy (sim.h) and the Input Dims parser (shapes.h),
 * one primitive at a time on small hand-built graphs.
 *
 * Each test states the schedule it expects in the comment above it, worked
 * out by hand from the timing model in graph.h:
 *   start = max(resource free, ready + lag), end = start + duration,
 *   resource free = end + gap; a launch edge readies its kernel at the
 *   launch call's start.
 * Every transform is followed by rv_graph_check_acyclic.  One test replays a
 * real trace from REVERIE_SHARED_TRACES and skips when it is absent.
 */
#include <check.h>
#include <glib.h>
#include <stdlib.h>
#include <string.h>
#include "reverie/error.h"
#include "reverie/graph.h"
#include "reverie/shapes.h"
#include "reverie/sim.h"
#include "reverie/transform.h"
#include "plugin_harness.h"

/* ---- helpers -------------------------------------------------------- */

static void assert_acyclic(const rv_graph *graph)
{
    GError *error = NULL;
    ck_assert_msg(rv_graph_check_acyclic(graph, &error), "cycle: %s", error ? error->message : "");
}

/* Replay with a policy (NULL: the default); the caller clears the result. */
static rv_sim_result replay_with(const rv_graph *graph, const rv_policy *policy)
{
    rv_sim_result sim = { 0 };
    GError *error = NULL;
    assert_acyclic(graph);
    ck_assert_msg(rv_simulate(graph, policy, &sim, &error), "simulate: %s", error ? error->message : "");
    return sim;
}

static int64_t start_of(const rv_graph *graph, int32_t task)
{
    rv_sim_result sim = replay_with(graph, NULL);
    int64_t start = sim.start_ns[task];
    rv_sim_result_clear(&sim);
    return start;
}

/* A CPU task chained after the previous one on its thread, with the host
 * overhead (Python time) before it. */
static int32_t task_with_overhead(tiny *t, const char *name, int64_t duration_ns, int64_t overhead_ns)
{
    int32_t id = tiny_task(t, t->cpu, RV_TASK_CPU, name, duration_ns, RV_PHASE_FORWARD);
    rv_graph_task(t->graph, id)->host_overhead_ns = overhead_ns;
    return id;
}

static GArray *ids(int count, const int32_t *list)
{
    GArray *array = g_array_new(FALSE, FALSE, sizeof(int32_t));
    g_array_append_vals(array, list, (guint)count);
    return array;
}

static gboolean is_removed(rv_graph *graph, int32_t task)
{
    return (rv_graph_task(graph, task)->flags & RV_TASK_FLAG_REMOVED) != 0;
}

/* An insert spec for a plain task on a resource. */
static rv_insert_spec spec_for(rv_graph *graph, int32_t resource, rv_task_kind kind, const char *name,
                               int64_t duration_ns, int32_t after, int32_t launch_after)
{
    rv_insert_spec spec = { { 0 }, after, launch_after };
    spec.task.duration_ns = duration_ns;
    spec.task.correlation = -1;
    spec.task.resource = resource;
    spec.task.name = rv_strings_intern(graph->strings, name);
    spec.task.input_dims = -1;
    spec.task.step = -1;
    spec.task.kind = (uint8_t)kind;
    spec.task.phase = RV_PHASE_FORWARD;
    return spec;
}

static int32_t insert_ok(rv_graph *graph, const rv_insert_spec *spec)
{
    GError *error = NULL;
    int32_t id = rv_transform_insert(graph, spec, &error);
    ck_assert_msg(id >= 0, "insert: %s", error ? error->message : "(no error set)");
    assert_acyclic(graph);
    return id;
}

/*
 * Three launches and their kernels (as in test_plugins' amp graph):
 * CPU:  L0 5us | L1 5us | L2 5us
 * GPU:  K0 300us | K1 100us | K2 40us
 * Each kernel is ready when its launch ends (the hand-built stream has no
 * launch latency): K0 5-305, K1 305-405, K2 405-445 -> 445us.
 */
static tiny three_kernels(int32_t kernel[3])
{
    tiny t = tiny_new();
    kernel[0] = tiny_launch(&t, "K0", US(5), US(300), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    kernel[1] = tiny_launch(&t, "K1", US(5), US(100), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    kernel[2] = tiny_launch(&t, "K2", US(5), US(40), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    return t;
}

/* ---- scale and set duration ----------------------------------------- */

/*
 * three_kernels: 445us.  Scale K0, K1 by 0.5: 5 + 150 + 50 + 40 -> 245us.
 * Scale by 1: still 245us.  Scale all three by 0: each kernel takes 0 at its
 * launch's end (5, 10, 15); the CPU runs 0-15 -> 15us.
 */
START_TEST(scale_kernels)
{
    int32_t k[3];
    tiny t = three_kernels(k);
    ck_assert_int_eq(makespan(t.graph), US(445));
    GArray *first_two = ids(2, k);
    rv_transform_scale(t.graph, first_two, 0.5);
    assert_acyclic(t.graph);
    ck_assert_int_eq(rv_graph_task(t.graph, k[0])->duration_ns, US(150));
    ck_assert_int_eq(makespan(t.graph), US(245));
    rv_transform_scale(t.graph, first_two, 1.0);
    ck_assert_int_eq(makespan(t.graph), US(245));
    GArray *all = ids(3, k);
    rv_transform_scale(t.graph, all, 0.0);
    assert_acyclic(t.graph);
    ck_assert_int_eq(makespan(t.graph), US(15));
    g_array_unref(first_two);
    g_array_unref(all);
    rv_graph_free(t.graph);
}
END_TEST

/* Durations are whole nanoseconds, rounded to nearest: 1001ns x 0.5 -> 501ns
 * (half away from zero), 1000ns x (1/3) -> 333ns. */
START_TEST(scale_rounds_to_nearest)
{
    tiny t = tiny_new();
    int32_t a = tiny_task(&t, t.cpu, RV_TASK_CPU, "a", 1001, RV_PHASE_FORWARD);
    int32_t b = tiny_task(&t, t.cpu, RV_TASK_CPU, "b", 1000, RV_PHASE_FORWARD);
    GArray *just_a = ids(1, &a), *just_b = ids(1, &b);
    rv_transform_scale(t.graph, just_a, 0.5);
    rv_transform_scale(t.graph, just_b, 1.0 / 3.0);
    ck_assert_int_eq(rv_graph_task(t.graph, a)->duration_ns, 501);
    ck_assert_int_eq(rv_graph_task(t.graph, b)->duration_ns, 333);
    ck_assert_int_eq(makespan(t.graph), 834);
    g_array_unref(just_a);
    g_array_unref(just_b);
    rv_graph_free(t.graph);
}
END_TEST

/*
 * three_kernels with K1 set to 10us: 5 + 300 + 10 + 40 -> 355us.
 * A negative duration is clamped to 0: 5 + 300 + 0 + 40 -> 345us.
 */
START_TEST(set_duration)
{
    int32_t k[3];
    tiny t = three_kernels(k);
    rv_transform_set_duration(t.graph, k[1], US(10));
    assert_acyclic(t.graph);
    ck_assert_int_eq(makespan(t.graph), US(355));
    rv_transform_set_duration(t.graph, k[1], -US(5));
    ck_assert_int_eq(rv_graph_task(t.graph, k[1])->duration_ns, 0);
    ck_assert_int_eq(makespan(t.graph), US(345));
    rv_graph_free(t.graph);
}
END_TEST

/* ---- remove --------------------------------------------------------- */

/*
 * A dependency across a removed task still holds, across resources:
 * thread 1: A 10us;  stream: X 20us;  thread 2: B 5us;  A -> X -> B.
 * Before: A 0-10, X 10-30, B 30-35 -> 35us.
 * Remove X (a kernel with no launch call: 1 task): B still waits for A:
 * A 0-10, B 10-15 -> 15us (without the bypass edge B would run at 0).
 */
START_TEST(remove_reconnects_across_resources)
{
    tiny t = tiny_new();
    int32_t other_thread = rv_graph_add_resource(t.graph, RV_RES_CPU_THREAD, 1, 2, "thread 1/2");
    int32_t a = tiny_task(&t, t.cpu, RV_TASK_CPU, "A", US(10), RV_PHASE_FORWARD);
    int32_t x = tiny_task(&t, t.gpu, RV_TASK_KERNEL, "X", US(20), RV_PHASE_FORWARD);
    int32_t b = tiny_task(&t, other_thread, RV_TASK_CPU, "B", US(5), RV_PHASE_FORWARD);
    rv_graph_add_edge(t.graph, a, x, RV_EDGE_PLUGIN, FALSE);
    rv_graph_add_edge(t.graph, x, b, RV_EDGE_SYNC, FALSE);
    ck_assert_int_eq(makespan(t.graph), US(35));
    ck_assert_int_eq(rv_transform_remove(t.graph, x, RV_REMOVE_DROP_OVERHEAD), 1);
    assert_acyclic(t.graph);
    ck_assert(is_removed(t.graph, x));
    ck_assert(has_edge(t.graph, a, b));
    rv_sim_result sim = replay_with(t.graph, NULL);
    ck_assert_int_eq(sim.start_ns[x], -1);
    ck_assert_int_eq(sim.start_ns[b], US(10));
    ck_assert_int_eq(sim.makespan_ns, US(15));
    rv_sim_result_clear(&sim);
    rv_graph_free(t.graph);
}
END_TEST

/*
 * three_kernels plus a CPU task E 5us after the launches:
 * CPU L0 0-5, L1 5-10, L2 10-15, E 15-20; GPU 5-305, 305-405, 405-445 -> 445us.
 * Remove K1: its launch L1 goes too (2 tasks).  L0 0-5, L2 5-10, E 10-15;
 * K0 5-305, K2 305-345 -> 345us.  L0 is now followed by L2 on the thread.
 */
START_TEST(remove_gpu_task_takes_launch)
{
    int32_t k[3];
    tiny t = three_kernels(k);
    int32_t e = tiny_task(&t, t.cpu, RV_TASK_CPU, "E", US(5), RV_PHASE_FORWARD);
    int32_t launch[3];
    for (int i = 0; i < 3; i++) launch[i] = rv_graph_launch_of(t.graph, k[i]);
    ck_assert_int_eq(start_of(t.graph, e), US(15));
    ck_assert_int_eq(rv_transform_remove(t.graph, k[1], RV_REMOVE_DROP_OVERHEAD), 2);
    assert_acyclic(t.graph);
    ck_assert(is_removed(t.graph, k[1]));
    ck_assert(is_removed(t.graph, launch[1]));
    ck_assert_int_eq(rv_graph_resource_next(t.graph, launch[0]), launch[2]);
    ck_assert_int_eq(rv_graph_resource_previous(t.graph, k[2]), k[0]);
    rv_sim_result sim = replay_with(t.graph, NULL);
    ck_assert_int_eq(sim.start_ns[launch[1]], -1);
    ck_assert_int_eq(sim.start_ns[launch[2]], US(5));
    ck_assert_int_eq(sim.start_ns[e], US(10));
    ck_assert_int_eq(sim.start_ns[k[2]], US(305));
    ck_assert_int_eq(sim.makespan_ns, US(345));
    rv_sim_result_clear(&sim);
    rv_graph_free(t.graph);
}
END_TEST

/*
 * CPU: A 10us | 5us host overhead, X 10us | 20us host overhead, B 10us.
 * Before: A 0-10, X 15-25, B 45-55 -> 55us.
 * Remove X, dropping its overhead: A 0-10, B 30-40 -> 40us.
 * Remove X, keeping it: B's overhead becomes 25us: A 0-10, B 35-45 -> 45us.
 */
static tiny overhead_graph(int32_t *a, int32_t *x, int32_t *b)
{
    tiny t = tiny_new();
    *a = task_with_overhead(&t, "A", US(10), 0);
    *x = task_with_overhead(&t, "X", US(10), US(5));
    *b = task_with_overhead(&t, "B", US(10), US(20));
    return t;
}

START_TEST(remove_drop_overhead_vs_keep_overhead)
{
    int32_t a, x, b;
    tiny t = overhead_graph(&a, &x, &b);
    ck_assert_int_eq(makespan(t.graph), US(55));
    ck_assert_int_eq(rv_transform_remove(t.graph, x, RV_REMOVE_DROP_OVERHEAD), 1);
    assert_acyclic(t.graph);
    ck_assert_int_eq(rv_graph_task(t.graph, b)->host_overhead_ns, US(20));
    ck_assert_int_eq(start_of(t.graph, b), US(30));
    ck_assert_int_eq(makespan(t.graph), US(40));
    rv_graph_free(t.graph);

    t = overhead_graph(&a, &x, &b);
    ck_assert_int_eq(rv_transform_remove(t.graph, x, RV_REMOVE_KEEP_OVERHEAD), 1);
    assert_acyclic(t.graph);
    ck_assert_int_eq(rv_graph_task(t.graph, a)->host_overhead_ns, 0);
    ck_assert_int_eq(rv_graph_task(t.graph, b)->host_overhead_ns, US(25));
    ck_assert_int_eq(start_of(t.graph, b), US(35));
    ck_assert_int_eq(makespan(t.graph), US(45));
    rv_graph_free(t.graph);
}
END_TEST

/*
 * Removing a removed task does nothing and returns 0; removing a kernel
 * whose launch is already gone returns 1; a CPU task alone returns 1.
 * three_kernels, remove K1 (2), K1 again (0), launch L2 (1), K2 (1).
 * Left: L0 0-5, K0 5-305 -> 305us.
 */
START_TEST(remove_counts)
{
    int32_t k[3];
    tiny t = three_kernels(k);
    int32_t launch2 = rv_graph_launch_of(t.graph, k[2]);
    ck_assert_int_eq(rv_transform_remove(t.graph, k[1], RV_REMOVE_DROP_OVERHEAD), 2);
    guint edges = t.graph->edges->len;
    ck_assert_int_eq(rv_transform_remove(t.graph, k[1], RV_REMOVE_DROP_OVERHEAD), 0);
    ck_assert_int_eq(rv_transform_remove(t.graph, k[1], RV_REMOVE_KEEP_OVERHEAD), 0);
    ck_assert_uint_eq(t.graph->edges->len, edges);
    ck_assert_int_eq(rv_transform_remove(t.graph, launch2, RV_REMOVE_DROP_OVERHEAD), 1);
    assert_acyclic(t.graph);
    ck_assert_int_eq(rv_transform_remove(t.graph, k[2], RV_REMOVE_DROP_OVERHEAD), 1);
    assert_acyclic(t.graph);
    ck_assert_int_eq(makespan(t.graph), US(305));
    rv_graph_free(t.graph);
}
END_TEST

/*
 * Several removals, adjacent on both resources (host overhead before each
 * call in brackets):
 * CPU:  L0 5us | [1] L1 5us | [2] L2 5us | [3] D 10us     (L_i launches K_i)
 * GPU:  K0 2us | K1 2us | K2 2us
 * Before: L0 0-5, L1 6-11, L2 13-18, D 21-31 -> 31us.
 * Remove K1 and K2 (and so L1, L2):
 *   dropping their overhead: L0 0-5, D 8-18 -> 18us;
 *   keeping it: D's overhead becomes 1+2+3 = 6, D 11-21 -> 21us.
 * remove_many on {K1, K2} must give the same start times, overheads and
 * edges' effect as removing K1 then K2.
 */
static tiny adjacent_graph(int32_t kernel[3], int32_t *d)
{
    tiny t = tiny_new();
    for (int i = 0; i < 3; i++) {
        char name[8];
        g_snprintf(name, sizeof name, "K%d", i);
        kernel[i] = tiny_launch(&t, name, US(5), US(2), RV_PHASE_FORWARD, RV_TASK_KERNEL);
        rv_graph_task(t.graph, rv_graph_launch_of(t.graph, kernel[i]))->host_overhead_ns = US(i);
    }
    *d = task_with_overhead(&t, "D", US(10), US(3));
    return t;
}

static void check_batch_matches_one_by_one(rv_remove_mode mode, int64_t expected_span, int64_t expected_d)
{
    int32_t k_one[3], k_many[3], d;
    tiny one = adjacent_graph(k_one, &d);
    tiny many = adjacent_graph(k_many, &d);
    ck_assert_int_eq(makespan(one.graph), US(31));
    int removed_one = rv_transform_remove(one.graph, k_one[1], mode);
    assert_acyclic(one.graph);
    removed_one += rv_transform_remove(one.graph, k_one[2], mode);
    assert_acyclic(one.graph);
    GArray *victims = ids(2, &k_many[1]);
    int removed_many = rv_transform_remove_many(many.graph, victims, mode);
    assert_acyclic(many.graph);
    g_array_unref(victims);
    ck_assert_int_eq(removed_one, 4);
    ck_assert_int_eq(removed_many, 4);
    rv_sim_result a = replay_with(one.graph, NULL), b = replay_with(many.graph, NULL);
    for (int32_t task = 0; task < rv_graph_task_count(one.graph); task++) {
        ck_assert_int_eq(rv_graph_task(one.graph, task)->host_overhead_ns,
                         rv_graph_task(many.graph, task)->host_overhead_ns);
        ck_assert_int_eq(is_removed(one.graph, task), is_removed(many.graph, task));
        ck_assert_msg(a.start_ns[task] == b.start_ns[task], "task %d: one by one %" G_GINT64_FORMAT
                      ", batch %" G_GINT64_FORMAT, task, a.start_ns[task], b.start_ns[task]);
    }
    ck_assert_int_eq(a.start_ns[d], expected_d);
    ck_assert_int_eq(a.makespan_ns, expected_span);
    ck_assert_int_eq(b.makespan_ns, expected_span);
    rv_sim_result_clear(&a);
    rv_sim_result_clear(&b);
    rv_graph_free(one.graph);
    rv_graph_free(many.graph);
}

START_TEST(remove_many_drop_overhead_matches_one_by_one)
{
    check_batch_matches_one_by_one(RV_REMOVE_DROP_OVERHEAD, US(18), US(8));
}
END_TEST

START_TEST(remove_many_keep_overhead_matches_one_by_one)
{
    check_batch_matches_one_by_one(RV_REMOVE_KEEP_OVERHEAD, US(21), US(11));
}
END_TEST

/*
 * A chain removed from the middle in one batch, listed in any order:
 * thread 1: A 10us;  stream: X 20us, Y 30us;  thread 2: B 5us;
 * A -> X (plugin), X -> Y (stream order), Y -> B (sync).
 * Before: A 0-10, X 10-30, Y 30-60, B 60-65 -> 65us.
 * remove_many {Y, X}: B waits for A through both: A 0-10, B 10-15 -> 15us.
 */
START_TEST(remove_many_chain)
{
    tiny t = tiny_new();
    int32_t other_thread = rv_graph_add_resource(t.graph, RV_RES_CPU_THREAD, 1, 2, "thread 1/2");
    int32_t a = tiny_task(&t, t.cpu, RV_TASK_CPU, "A", US(10), RV_PHASE_FORWARD);
    int32_t x = tiny_task(&t, t.gpu, RV_TASK_KERNEL, "X", US(20), RV_PHASE_FORWARD);
    int32_t y = tiny_task(&t, t.gpu, RV_TASK_KERNEL, "Y", US(30), RV_PHASE_FORWARD);
    int32_t b = tiny_task(&t, other_thread, RV_TASK_CPU, "B", US(5), RV_PHASE_FORWARD);
    rv_graph_add_edge(t.graph, a, x, RV_EDGE_PLUGIN, FALSE);
    rv_graph_add_edge(t.graph, y, b, RV_EDGE_SYNC, FALSE);
    ck_assert_int_eq(makespan(t.graph), US(65));
    int32_t victims_list[2] = { y, x };
    GArray *victims = ids(2, victims_list);
    ck_assert_int_eq(rv_transform_remove_many(t.graph, victims, RV_REMOVE_DROP_OVERHEAD), 2);
    g_array_unref(victims);
    assert_acyclic(t.graph);
    ck_assert_int_eq(start_of(t.graph, b), US(10));
    ck_assert_int_eq(makespan(t.graph), US(15));
    rv_graph_free(t.graph);
}
END_TEST

/* ---- replace regions ------------------------------------------------ */

/* How many edges join from -> to (any kind). */
static int edges_between(const rv_graph *graph, int32_t from, int32_t to)
{
    int count = 0;
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        count += edge->from == from && edge->to == to;
    }
    return count;
}

/* No pair of tasks joined by two edges. */
static void assert_no_duplicate_edges(const rv_graph *graph)
{
    GHashTable *seen = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        gint64 pair = ((gint64)edge->from << 32) | (guint32)edge->to;
        ck_assert_msg(!g_hash_table_contains(seen, &pair), "edge %d -> %d twice", edge->from, edge->to);
        g_hash_table_add(seen, g_memdup2(&pair, sizeof pair));
    }
    g_hash_table_destroy(seen);
}

/* A GPU task on `stream`, chained after the previous one there. */
static int32_t stream_task(tiny *t, int32_t stream, const char *name, int64_t duration_ns)
{
    int32_t id = tiny_task(t, stream, RV_TASK_KERNEL, name, duration_ns, RV_PHASE_FORWARD);
    rv_graph_task(t->graph, id)->flags |= RV_TASK_FLAG_GPU;
    return id;
}

/*
 * CPU:       A 10 | X 5 | Y 5 | B 10
 * stream 7:  K0 20 | V1 30 | V2 30 | K3 20 | W1 10 | K4 10
 * stream 8:  E0 40 | F0 40 | E1 10   (what stands for the regions)
 * Edges: A -> V1 (A feeds region 0), V1 -> X -> V2 (a host call in the
 * middle of the region: `after` marks X), V2 -> B (B waits for region 0),
 * V2 -> W1 (region 0 feeds region 1).  Region 0 = {V1, V2}: entry E0,
 * exits E0 and F0; region 1 = {W1}: entry and exit E1.  F0 -> E1 is there
 * already (stream 8's order).
 * Expected edges: K0 -> K3 and K3 -> K4 (stream 7 stays chained); A -> E0
 * and K0 -> E0 (fed by an edge and by the stream's order); E0, F0 -> X, B,
 * K3 (waited); no X -> E0 (X only waits); E0 -> E1 (one region feeds the
 * next) and F0 -> E1 not twice; K3 -> E1, E1 -> K4.
 * Schedule: K0 0-20, E0 20-60, F0 60-100, K3 100-120, E1 120-130,
 * K4 130-140; A 0-10, X 100-105, Y 105-110, B 110-120 -> 140us.
 */
START_TEST(replace_regions_stand_in)
{
    tiny t = tiny_new();
    int32_t stand_ins = rv_graph_add_resource(t.graph, RV_RES_GPU_STREAM, 0, 8, "gpu 0 stream 8");
    int32_t a = tiny_task(&t, t.cpu, RV_TASK_CPU, "A", US(10), RV_PHASE_FORWARD);
    int32_t x = tiny_task(&t, t.cpu, RV_TASK_CPU, "X", US(5), RV_PHASE_FORWARD);
    int32_t y = tiny_task(&t, t.cpu, RV_TASK_CPU, "Y", US(5), RV_PHASE_FORWARD);
    int32_t b = tiny_task(&t, t.cpu, RV_TASK_CPU, "B", US(10), RV_PHASE_FORWARD);
    int32_t k0 = stream_task(&t, t.gpu, "K0", US(20)), v1 = stream_task(&t, t.gpu, "V1", US(30));
    int32_t v2 = stream_task(&t, t.gpu, "V2", US(30)), k3 = stream_task(&t, t.gpu, "K3", US(20));
    int32_t w1 = stream_task(&t, t.gpu, "W1", US(10)), k4 = stream_task(&t, t.gpu, "K4", US(10));
    rv_graph_add_edge(t.graph, a, v1, RV_EDGE_PLUGIN, FALSE);
    rv_graph_add_edge(t.graph, v1, x, RV_EDGE_SYNC, FALSE);
    rv_graph_add_edge(t.graph, x, v2, RV_EDGE_PLUGIN, FALSE);
    rv_graph_add_edge(t.graph, v2, b, RV_EDGE_SYNC, FALSE);
    rv_graph_add_edge(t.graph, v2, w1, RV_EDGE_PLUGIN, FALSE);
    int32_t e0 = stream_task(&t, stand_ins, "E0", US(40)), f0 = stream_task(&t, stand_ins, "F0", US(40));
    int32_t e1 = stream_task(&t, stand_ins, "E1", US(10));
    assert_acyclic(t.graph);

    int32_t victims_list[3] = { v1, v2, w1 }, region_list[3] = { 0, 0, 1 };
    int32_t exits0[2] = { e0, f0 }, exits1[1] = { e1 };
    rv_region regions[2] = { { e0, exits0, 2, FALSE }, { e1, exits1, 1, FALSE } };
    guint8 *after = g_new0(guint8, rv_graph_task_count(t.graph));
    after[x] = 1;
    GArray *victims = ids(3, victims_list), *region_of = ids(3, region_list);
    ck_assert_int_eq(rv_transform_replace_regions(t.graph, victims, region_of, regions, after, RV_REMOVE_DROP_OVERHEAD), 3);
    g_array_unref(victims);
    g_array_unref(region_of);
    g_free(after);

    ck_assert(is_removed(t.graph, v1) && is_removed(t.graph, v2) && is_removed(t.graph, w1));
    ck_assert(!is_removed(t.graph, k3) && !is_removed(t.graph, e0));
    assert_acyclic(t.graph);
    assert_no_duplicate_edges(t.graph);
    ck_assert_int_eq(edges_between(t.graph, k0, k3), 1);
    ck_assert_int_eq(edges_between(t.graph, k3, k4), 1);
    ck_assert_int_eq(edges_between(t.graph, a, e0), 1);
    ck_assert_int_eq(edges_between(t.graph, k0, e0), 1);
    ck_assert_int_eq(edges_between(t.graph, x, e0), 0);
    int32_t waiters[3] = { x, b, k3 };
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(edges_between(t.graph, e0, waiters[i]), 1);
        ck_assert_int_eq(edges_between(t.graph, f0, waiters[i]), 1);
        ck_assert_int_eq(edges_between(t.graph, e1, waiters[i]), 0);
    }
    ck_assert_int_eq(edges_between(t.graph, e0, e1), 1);
    ck_assert_int_eq(edges_between(t.graph, f0, e1), 1);
    ck_assert_int_eq(edges_between(t.graph, k3, e1), 1);
    ck_assert_int_eq(edges_between(t.graph, e1, k4), 1);

    rv_sim_result sim = replay_with(t.graph, NULL);
    int32_t order[] = { k0, e0, f0, k3, e1, k4, a, x, y, b };
    int64_t starts[] = { 0, 20, 60, 100, 120, 130, 0, 100, 105, 110 };
    for (guint i = 0; i < G_N_ELEMENTS(order); i++)
        ck_assert_msg(sim.start_ns[order[i]] == US(starts[i]), "%s starts at %" G_GINT64_FORMAT " ns, not %" G_GINT64_FORMAT " us",
                      rv_strings_get(t.graph->strings, rv_graph_task(t.graph, order[i])->name), sim.start_ns[order[i]],
                      starts[i]);
    ck_assert_int_eq(sim.makespan_ns, US(140));
    rv_sim_result_clear(&sim);
    rv_graph_free(t.graph);
}
END_TEST

/*
 * A graph launch (host_calls): CPU  P 10 | c1 5 | c2 5 | Q 10, stream 7:
 * K1 20 (launched by c1) | K2 20 (by c2).  Region {c1, c2} stands in for
 * by G 3, inserted after P on the thread.  The thread's order through the
 * calls goes through G (P -> G there already, G -> Q), and the kernels
 * wait for G instead of their launches: P 0-10, G 10-13, Q 13-23,
 * K1 13-33, K2 33-53 -> 53us.  Removing with KEEP_OVERHEAD hands the
 * calls' host overhead to Q.
 */
START_TEST(replace_regions_host_calls)
{
    tiny t = tiny_new();
    int32_t p = tiny_task(&t, t.cpu, RV_TASK_CPU, "P", US(10), RV_PHASE_FORWARD);
    int32_t k1 = tiny_launch(&t, "K1", US(5), US(20), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    int32_t k2 = tiny_launch(&t, "K2", US(5), US(20), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    int32_t q = tiny_task(&t, t.cpu, RV_TASK_CPU, "Q", US(10), RV_PHASE_FORWARD);
    int32_t c1 = rv_graph_launch_of(t.graph, k1), c2 = rv_graph_launch_of(t.graph, k2);
    rv_graph_task(t.graph, c1)->host_overhead_ns = US(1);
    rv_graph_task(t.graph, c2)->host_overhead_ns = US(2);
    rv_insert_spec spec = spec_for(t.graph, t.cpu, RV_TASK_CPU, "cudaGraphLaunch", US(3), p, -1);
    int32_t g = insert_ok(t.graph, &spec);

    int32_t victims_list[2] = { c1, c2 }, region_list[2] = { 0, 0 };
    rv_region region = { g, &g, 1, TRUE };
    GArray *victims = ids(2, victims_list), *region_of = ids(2, region_list);
    ck_assert_int_eq(rv_transform_replace_regions(t.graph, victims, region_of, &region, NULL, RV_REMOVE_KEEP_OVERHEAD), 2);
    g_array_unref(victims);
    g_array_unref(region_of);
    assert_acyclic(t.graph);
    assert_no_duplicate_edges(t.graph);
    ck_assert_int_eq(edges_between(t.graph, p, g), 1);
    ck_assert_int_eq(edges_between(t.graph, g, q), 1);
    ck_assert_int_eq(edges_between(t.graph, g, k1), 1);
    ck_assert_int_eq(edges_between(t.graph, g, k2), 1);
    ck_assert_int_eq(rv_graph_task(t.graph, q)->host_overhead_ns, US(3));
    rv_graph_task(t.graph, q)->host_overhead_ns = 0; /* the schedule below without it */
    rv_sim_result sim = replay_with(t.graph, NULL);
    ck_assert_int_eq(sim.start_ns[g], US(10));
    ck_assert_int_eq(sim.start_ns[q], US(13));
    ck_assert_int_eq(sim.start_ns[k1], US(13));
    ck_assert_int_eq(sim.start_ns[k2], US(33));
    ck_assert_int_eq(sim.makespan_ns, US(53));
    rv_sim_result_clear(&sim);
    rv_graph_free(t.graph);
}
END_TEST

/* ---- insert --------------------------------------------------------- */

/*
 * CPU: A 10us | B 10us.  Insert T 5us with after = -1: it joins no order
 * (no previous, no next on the thread).  With an edge B -> T it runs after
 * B: A 0-10, B 10-20, T 20-25 -> 25us.
 */
START_TEST(insert_unordered)
{
    tiny t = tiny_new();
    tiny_task(&t, t.cpu, RV_TASK_CPU, "A", US(10), RV_PHASE_FORWARD);
    int32_t b = tiny_task(&t, t.cpu, RV_TASK_CPU, "B", US(10), RV_PHASE_FORWARD);
    rv_insert_spec spec = spec_for(t.graph, t.cpu, RV_TASK_CPU, "T", US(5), -1, -1);
    spec.task.flags = RV_TASK_FLAG_REMOVED;  /* cleared by insert */
    int32_t inserted = insert_ok(t.graph, &spec);
    const rv_task *task = rv_graph_task(t.graph, inserted);
    ck_assert(task->flags & RV_TASK_FLAG_INSERTED);
    ck_assert(!(task->flags & RV_TASK_FLAG_REMOVED));
    ck_assert(!(task->flags & RV_TASK_FLAG_GPU));
    ck_assert_int_eq(rv_graph_resource_previous(t.graph, inserted), -1);
    ck_assert_int_eq(rv_graph_resource_next(t.graph, inserted), -1);
    ck_assert_int_eq(rv_graph_resource_next(t.graph, b), -1);
    rv_transform_add_edge(t.graph, b, inserted);
    assert_acyclic(t.graph);
    ck_assert_int_eq(start_of(t.graph, inserted), US(20));
    ck_assert_int_eq(makespan(t.graph), US(25));
    rv_graph_free(t.graph);
}
END_TEST

/*
 * CPU: A 10us | 2us host overhead, B 10us | C 10us  (0-10, 12-22, 22-32 -> 32us).
 * Insert T 5us after A: the overhead stays with B, whose Python it is:
 * A 0-10, T 10-15, B 17-27, C 27-37 -> 37us.
 * Insert U 1us after C (the end of the order): U 37-38 -> 38us.
 */
START_TEST(insert_after_splices_order)
{
    tiny t = tiny_new();
    int32_t a = task_with_overhead(&t, "A", US(10), 0);
    int32_t b = task_with_overhead(&t, "B", US(10), US(2));
    int32_t c = task_with_overhead(&t, "C", US(10), 0);
    ck_assert_int_eq(makespan(t.graph), US(32));
    rv_insert_spec spec = spec_for(t.graph, t.cpu, RV_TASK_CPU, "T", US(5), a, -1);
    int32_t inserted = insert_ok(t.graph, &spec);
    ck_assert_int_eq(rv_graph_resource_next(t.graph, a), inserted);
    ck_assert_int_eq(rv_graph_resource_previous(t.graph, inserted), a);
    ck_assert_int_eq(rv_graph_resource_next(t.graph, inserted), b);
    ck_assert_int_eq(rv_graph_resource_previous(t.graph, b), inserted);
    rv_sim_result sim = replay_with(t.graph, NULL);
    ck_assert_int_eq(sim.start_ns[inserted], US(10));
    ck_assert_int_eq(sim.start_ns[b], US(17));
    ck_assert_int_eq(sim.start_ns[c], US(27));
    ck_assert_int_eq(sim.makespan_ns, US(37));
    rv_sim_result_clear(&sim);
    spec = spec_for(t.graph, t.cpu, RV_TASK_CPU, "U", US(1), c, -1);
    int32_t last = insert_ok(t.graph, &spec);
    ck_assert_int_eq(rv_graph_resource_next(t.graph, c), last);
    ck_assert_int_eq(rv_graph_resource_next(t.graph, last), -1);
    ck_assert_int_eq(makespan(t.graph), US(38));
    rv_graph_free(t.graph);
}
END_TEST

/*
 * CPU:  L0 5us | L1 7us | L2 9us;  GPU: K0 2us | K1 50us | K2 10us.
 * Typical launch = median of 5, 7, 9 = 7us.
 * Insert N 20us on the stream after K0, launched after L0: a
 * "cudaLaunchKernel" of 7us goes between L0 and L1.
 * CPU: L0 0-5, launch 5-12, L1 12-19, L2 19-28.
 * GPU: K0 5-7, N ready at 12 (its launch's end) 12-32, K1 32-82, K2 82-92
 * -> 92us.
 */
START_TEST(insert_gpu_task_with_launch)
{
    tiny t = tiny_new();
    int32_t k0 = tiny_launch(&t, "K0", US(5), US(2), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    int32_t k1 = tiny_launch(&t, "K1", US(7), US(50), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    int32_t k2 = tiny_launch(&t, "K2", US(9), US(10), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    int32_t l0 = rv_graph_launch_of(t.graph, k0), l1 = rv_graph_launch_of(t.graph, k1);
    ck_assert_int_eq(rv_graph_typical_launch_ns(t.graph), US(7));
    int32_t tasks_before = rv_graph_task_count(t.graph);
    rv_insert_spec spec = spec_for(t.graph, t.gpu, RV_TASK_KERNEL, "N", US(20), k0, l0);
    int32_t inserted = insert_ok(t.graph, &spec);
    ck_assert_int_eq(rv_graph_task_count(t.graph), tasks_before + 2);
    ck_assert(rv_graph_task(t.graph, inserted)->flags & RV_TASK_FLAG_GPU);
    int32_t launch = rv_graph_launch_of(t.graph, inserted);
    ck_assert_int_ge(launch, 0);
    const rv_task *call = rv_graph_task(t.graph, launch);
    ck_assert_str_eq(rv_strings_get(t.graph->strings, call->name), "cudaLaunchKernel");
    ck_assert_int_eq(call->kind, RV_TASK_CPU);
    ck_assert_int_eq(call->resource, t.cpu);
    ck_assert_int_eq(call->duration_ns, US(7));
    ck_assert(call->flags & RV_TASK_FLAG_INSERTED);
    ck_assert_int_eq(rv_graph_resource_next(t.graph, l0), launch);
    ck_assert_int_eq(rv_graph_resource_next(t.graph, launch), l1);
    ck_assert_int_eq(rv_graph_resource_next(t.graph, k0), inserted);
    ck_assert_int_eq(rv_graph_resource_next(t.graph, inserted), k1);
    rv_sim_result sim = replay_with(t.graph, NULL);
    ck_assert_int_eq(sim.start_ns[launch], US(5));
    ck_assert_int_eq(sim.start_ns[l1], US(12));
    ck_assert_int_eq(sim.start_ns[inserted], US(12));
    ck_assert_int_eq(sim.start_ns[k1], US(32));
    ck_assert_int_eq(sim.start_ns[k2], US(82));
    ck_assert_int_eq(sim.makespan_ns, US(92));
    rv_sim_result_clear(&sim);
    rv_graph_free(t.graph);
}
END_TEST

/* A bad resource or anchor: -1, the error set, the graph unchanged. */
START_TEST(insert_errors)
{
    tiny t = tiny_new();
    tiny_task(&t, t.cpu, RV_TASK_CPU, "A", US(10), RV_PHASE_FORWARD);
    int32_t resources[] = { 99, -1 };
    for (int i = 0; i < 2; i++) {
        rv_insert_spec spec = spec_for(t.graph, resources[i], RV_TASK_CPU, "T", US(5), -1, -1);
        GError *error = NULL;
        ck_assert_int_eq(rv_transform_insert(t.graph, &spec, &error), -1);
        ck_assert(error != NULL);
        ck_assert(g_error_matches(error, RV_ERROR, RV_ERROR_PLUGIN));
        g_error_free(error);
    }
    /* anchors out of range, on another resource, or a launch anchor off the CPU */
    int32_t kernel = tiny_task(&t, t.gpu, RV_TASK_KERNEL, "K", US(10), RV_PHASE_FORWARD);
    rv_insert_spec bad[] = {
        spec_for(t.graph, t.cpu, RV_TASK_CPU, "T", US(5), 42, -1),
        spec_for(t.graph, t.cpu, RV_TASK_CPU, "T", US(5), kernel, -1),
        spec_for(t.graph, t.gpu, RV_TASK_KERNEL, "T", US(5), kernel, kernel),
    };
    for (int i = 0; i < 3; i++) {
        GError *error = NULL;
        ck_assert_int_eq(rv_transform_insert(t.graph, &bad[i], &error), -1);
        ck_assert(error != NULL);
        g_error_free(error);
    }
    ck_assert_int_eq(rv_graph_task_count(t.graph), 2);
    ck_assert_uint_eq(t.graph->edges->len, 0);
    assert_acyclic(t.graph);
    rv_graph_free(t.graph);
}
END_TEST

/* ---- edges and channels --------------------------------------------- */

/*
 * CPU: A 10us;  GPU: K 20us with no launch.  Unrelated: 0-10 and 0-20 -> 20us.
 * Edge A -> K: K 10-30 -> 30us.  A further edge K -> A closes a cycle, which
 * rv_graph_check_acyclic reports and rv_simulate refuses.
 */
START_TEST(add_edge)
{
    tiny t = tiny_new();
    int32_t a = tiny_task(&t, t.cpu, RV_TASK_CPU, "A", US(10), RV_PHASE_FORWARD);
    int32_t k = tiny_task(&t, t.gpu, RV_TASK_KERNEL, "K", US(20), RV_PHASE_FORWARD);
    ck_assert_int_eq(makespan(t.graph), US(20));
    rv_transform_add_edge(t.graph, a, k);
    assert_acyclic(t.graph);
    ck_assert_int_eq(start_of(t.graph, k), US(10));
    ck_assert_int_eq(makespan(t.graph), US(30));
    const rv_edge *edge = &g_array_index(t.graph->edges, rv_edge, t.graph->edges->len - 1);
    ck_assert_int_eq(edge->kind, RV_EDGE_PLUGIN);
    ck_assert_int_eq(edge->from_start, 0);
    rv_transform_add_edge(t.graph, k, a);
    GError *error = NULL;
    ck_assert(!rv_graph_check_acyclic(t.graph, &error));
    g_clear_error(&error);
    rv_sim_result sim = { 0 };
    ck_assert(!rv_simulate(t.graph, NULL, &sim, &error));
    ck_assert(g_error_matches(error, RV_ERROR, RV_ERROR_INPUT));
    g_error_free(error);
    rv_graph_free(t.graph);
}
END_TEST

/*
 * A new channel "net" with two transfers in order, T1 30us then T2 20us.
 * CPU: A 10us | B 5us;  GPU: K 50us (no launch).
 * Edges A -> T1, K -> T2, T2 -> B.
 * A 0-10, K 0-50; T1 ready 10: 10-40; T2 ready at 50 (K), channel free at
 * 40: 50-70; B waits for T2: 70-75 -> 75us.
 */
START_TEST(add_channel_with_transfers)
{
    tiny t = tiny_new();
    int32_t a = tiny_task(&t, t.cpu, RV_TASK_CPU, "A", US(10), RV_PHASE_FORWARD);
    int32_t b = tiny_task(&t, t.cpu, RV_TASK_CPU, "B", US(5), RV_PHASE_FORWARD);
    int32_t k = tiny_task(&t, t.gpu, RV_TASK_KERNEL, "K", US(50), RV_PHASE_FORWARD);
    int32_t net = rv_transform_add_channel(t.graph, "net");
    ck_assert_int_eq(net, 2);
    ck_assert_int_eq(rv_transform_add_channel(t.graph, "net"), net);
    ck_assert_int_eq(rv_transform_add_channel(t.graph, "pcie.d2h"), 3);
    const rv_resource *resource = &g_array_index(t.graph->resources, rv_resource, net);
    ck_assert_int_eq(resource->kind, RV_RES_CHANNEL);
    ck_assert_str_eq(rv_strings_get(t.graph->strings, resource->name), "net");
    rv_insert_spec spec = spec_for(t.graph, net, RV_TASK_COMM, "T1", US(30), -1, -1);
    int32_t t1 = insert_ok(t.graph, &spec);
    spec = spec_for(t.graph, net, RV_TASK_COMM, "T2", US(20), t1, -1);
    int32_t t2 = insert_ok(t.graph, &spec);
    ck_assert(!(rv_graph_task(t.graph, t2)->flags & RV_TASK_FLAG_GPU));
    ck_assert_int_eq(rv_graph_resource_next(t.graph, t1), t2);
    rv_transform_add_edge(t.graph, a, t1);
    rv_transform_add_edge(t.graph, k, t2);
    rv_transform_add_edge(t.graph, t2, b);
    assert_acyclic(t.graph);
    rv_sim_result sim = replay_with(t.graph, NULL);
    ck_assert_int_eq(sim.start_ns[t1], US(10));
    ck_assert_int_eq(sim.start_ns[t2], US(50));
    ck_assert_int_eq(sim.start_ns[b], US(70));
    ck_assert_int_eq(sim.makespan_ns, US(75));
    rv_sim_result_clear(&sim);
    rv_graph_free(t.graph);
}
END_TEST

/* ---- queries -------------------------------------------------------- */

/* Step -1 (outside every step) is a key of its own: GINT_TO_POINTER(1). */
/* Kernels to list 0, other live tasks to list 1, removed ones nowhere. */
static int kernel_or_other(const rv_graph *graph, int32_t id, const rv_task *task, gpointer data)
{
    (void)graph;
    (void)id;
    (*(guint *)data)++;
    if (task->flags & RV_TASK_FLAG_REMOVED) return -1;
    return task->kind == RV_TASK_KERNEL ? 0 : 1;
}

/* The flat lists hold, list by list, the tasks that classify sends there,
 * in id order (every task once, counted from scratch here); a task outside
 * graph->steps is in none, and classify never sees it. */
START_TEST(step_lists_are_the_grouping)
{
    rv_graph *graph = load_trace("hta_resnet50_v100.json.gz");
    rv_graph_task(graph, 5)->flags |= RV_TASK_FLAG_REMOVED;
    rv_graph_task(graph, 6)->step = (int32_t)graph->steps->len; /* outside every step */
    guint calls = 0;
    rv_step_lists lists = rv_step_lists_new(graph, 2, kernel_or_other, &calls);
    ck_assert_uint_eq(lists.slots, graph->steps->len + 1);
    ck_assert_uint_eq(calls, (guint)rv_graph_task_count(graph) - 1);
    guint *seen = g_new0(guint, rv_graph_task_count(graph)), listed = 0;
    for (int32_t step = -1; step < (int32_t)graph->steps->len; step++)
        for (guint list = 0; list < 2; list++) {
            GArray *got = rv_step_lists_get(&lists, step, list);
            for (guint i = 0; i < got->len; i++) {
                int32_t id = g_array_index(got, int32_t, i);
                const rv_task *task = rv_graph_task(graph, id);
                ck_assert_int_eq(task->step, step);
                ck_assert_uint_eq(task->kind == RV_TASK_KERNEL ? 0 : 1, list);
                ck_assert(!(task->flags & RV_TASK_FLAG_REMOVED));
                if (i > 0) ck_assert_int_lt(g_array_index(got, int32_t, i - 1), id);
                seen[id]++;
            }
            listed += got->len;
        }
    guint expected = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task(graph, id);
        gboolean listable = !(task->flags & RV_TASK_FLAG_REMOVED) && task->step < (int32_t)graph->steps->len;
        ck_assert_uint_eq(seen[id], listable ? 1 : 0);
        expected += listable;
    }
    ck_assert_uint_eq(listed, expected);
    ck_assert_uint_gt(listed, 20000);
    g_free(seen);
    rv_step_lists_free(&lists);
    ck_assert_ptr_null(lists.lists);
    rv_graph_free(graph);
}
END_TEST

/* A graph of `resources` resources (alternating threads and streams) with
 * `per` tasks each at random recorded starts, ascending on each resource
 * or not, many of them tied. */
static rv_graph *recorded_tasks(GRand *rand, int resources, int per, gboolean ascending)
{
    rv_graph *graph = rv_graph_new(NULL, "sort");
    for (int r = 0; r < resources; r++) {
        char *name = g_strdup_printf("resource %d", r);
        rv_graph_add_resource(graph, r % 2 ? RV_RES_GPU_STREAM : RV_RES_CPU_THREAD, 0, r, name);
        g_free(name);
    }
    int64_t *at = g_new0(int64_t, resources);
    for (int i = 0; i < resources * per; i++) {
        int r = g_rand_int_range(rand, 0, resources);
        at[r] = ascending ? at[r] + g_rand_int_range(rand, 0, 3) : g_rand_int_range(rand, 0, 40);
        rv_task task = { 0 };
        task.resource = r;
        task.recorded_start_ns = at[r];
        task.correlation = -1;
        task.input_dims = -1;
        task.step = -1;
        rv_graph_add_task(graph, &task);
    }
    g_free(at);
    return graph;
}

/* rv_tasks_sort_recorded gives the list a full sort by
 * rv_task_compare_recorded gives, whichever way it takes: in order
 * already, a few runs in order (each of one resource) merged, or sorted
 * (too many runs: many resources, or out of order on one; an id twice). */
START_TEST(sort_recorded_is_the_full_sort)
{
    GRand *rand = g_rand_new_with_seed(11);
    for (int round = 0; round < 200; round++) {
        int resources = 1 + round % 11;
        rv_graph *graph = recorded_tasks(rand, resources, 1 + g_rand_int_range(rand, 0, 30), round % 3 != 0);
        GArray *list = g_array_new(FALSE, FALSE, sizeof(int32_t));
        for (int32_t id = 0; id < rv_graph_task_count(graph); id++)
            if (g_rand_int_range(rand, 0, 4)) g_array_append_val(list, id);
        int32_t twice = list->len ? g_array_index(list, int32_t, 0) : -1;
        if (round % 7 == 0 && twice >= 0) g_array_append_val(list, twice);
        for (int late = 0; round % 5 == 1 && late < 3 && list->len > 1; late++) {
            /* a task out of place on its resource, as the builder's late ones are */
            int32_t moved = g_array_index(list, int32_t, 0);
            g_array_remove_index(list, 0);
            g_array_append_val(list, moved);
        }
        GArray *expected = g_array_copy(list);
        g_array_sort_with_data(expected, rv_task_compare_recorded, graph);
        rv_tasks_sort_recorded(graph, list);
        ck_assert_uint_eq(list->len, expected->len);
        for (guint i = 0; i < list->len; i++)
            ck_assert_msg(g_array_index(list, int32_t, i) == g_array_index(expected, int32_t, i), "round %d, at %u", round, i);
        g_array_unref(list);
        g_array_unref(expected);
        rv_graph_free(graph);
    }
    g_rand_free(rand);
}
END_TEST

/* Order neighbours follow thread/stream edges only, and skip removed tasks;
 * launch edges are not order. */
START_TEST(resource_neighbours_and_launch_of)
{
    int32_t k[3];
    tiny t = three_kernels(k);
    int32_t launch[3];
    for (int i = 0; i < 3; i++) launch[i] = rv_graph_launch_of(t.graph, k[i]);
    int32_t loose = tiny_task(&t, t.gpu, RV_TASK_KERNEL, "no launch", US(1), RV_PHASE_FORWARD);
    ck_assert_int_eq(launch[0], 0);
    ck_assert_int_eq(launch[1], 2);
    ck_assert_int_eq(launch[2], 4);
    ck_assert_int_eq(rv_graph_launch_of(t.graph, loose), -1);
    ck_assert_int_eq(rv_graph_launch_of(t.graph, launch[0]), -1);
    ck_assert_int_eq(rv_graph_resource_previous(t.graph, launch[0]), -1);
    ck_assert_int_eq(rv_graph_resource_next(t.graph, launch[0]), launch[1]);
    ck_assert_int_eq(rv_graph_resource_previous(t.graph, launch[2]), launch[1]);
    ck_assert_int_eq(rv_graph_resource_next(t.graph, launch[2]), -1);
    ck_assert_int_eq(rv_graph_resource_next(t.graph, k[0]), k[1]);
    ck_assert_int_eq(rv_graph_resource_previous(t.graph, k[0]), -1);
    ck_assert_int_eq(rv_graph_resource_next(t.graph, k[2]), loose);
    ck_assert_int_eq(rv_graph_resource_previous(t.graph, loose), k[2]);
    ck_assert_int_eq(rv_transform_remove(t.graph, k[1], RV_REMOVE_DROP_OVERHEAD), 2);
    assert_acyclic(t.graph);
    ck_assert_int_eq(rv_graph_resource_next(t.graph, k[0]), k[2]);
    ck_assert_int_eq(rv_graph_resource_previous(t.graph, k[2]), k[0]);
    ck_assert_int_eq(rv_graph_resource_next(t.graph, launch[0]), launch[2]);
    rv_graph_free(t.graph);
}
END_TEST

/* The median of the non-blocking launch calls: 5, 9, 7 -> 7us.  A blocking
 * call with a launch edge (a copy) and CPU work without one do not count.
 * No launches at all: the 5us default. */
START_TEST(typical_launch)
{
    tiny t = tiny_new();
    ck_assert_int_eq(rv_graph_typical_launch_ns(t.graph), US(5));
    tiny_launch(&t, "K0", US(5), US(1), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    tiny_launch(&t, "K1", US(9), US(1), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    tiny_launch(&t, "K2", US(7), US(1), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    tiny_task(&t, t.cpu, RV_TASK_CPU, "aten::add", US(100), RV_PHASE_FORWARD);
    ck_assert_int_eq(rv_graph_typical_launch_ns(t.graph), US(7));
    int32_t copy = tiny_launch(&t, "Memcpy DtoH", US(400), US(1), RV_PHASE_FORWARD, RV_TASK_MEMCPY);
    int32_t copy_call = rv_graph_launch_of(t.graph, copy);
    ck_assert_int_eq(rv_graph_typical_launch_ns(t.graph), US(9));  /* 5, 7, 9, 400: the upper median */
    rv_graph_task(t.graph, copy_call)->flags |= RV_TASK_FLAG_BLOCKING;
    ck_assert_int_eq(rv_graph_typical_launch_ns(t.graph), US(7));
    rv_graph_free(t.graph);
}
END_TEST

/* ---- simulator policy ----------------------------------------------- */

typedef struct {
    int32_t first, second;  /* ranked 0 and 1; everything else 2 */
} ranking;

static int64_t rank_by_table(const rv_graph *graph, int32_t task, void *user_data)
{
    const ranking *order = user_data;
    return task == order->first ? 0 : task == order->second ? 1 : 2;
}

static int64_t constant_rank(const rv_graph *graph, int32_t task, void *user_data)
{
    return 7;
}

/*
 * A contended channel with no order between its transfers:
 * CPU: P1 10us | P2 40us (0-10, 10-50).  Channel: T0 100us (no predecessor),
 * A 20us (after P1: ready at 10), B 30us (after P2: ready at 50).
 * No policy (earliest ready first): T0 0-100, A 100-120, B 120-150.
 * A policy ranking B before A: both wait for the channel, which frees at
 * 100; B takes it 100-130, then A 130-150.  Ranking A first: as no policy.
 * Makespan 150us every time.
 */
static tiny contended_channel(int32_t *a, int32_t *b, int32_t *t0)
{
    tiny t = tiny_new();
    int32_t p1 = tiny_task(&t, t.cpu, RV_TASK_CPU, "P1", US(10), RV_PHASE_FORWARD);
    int32_t p2 = tiny_task(&t, t.cpu, RV_TASK_CPU, "P2", US(40), RV_PHASE_FORWARD);
    int32_t net = rv_transform_add_channel(t.graph, "net");
    rv_insert_spec spec = spec_for(t.graph, net, RV_TASK_COMM, "T0", US(100), -1, -1);
    *t0 = insert_ok(t.graph, &spec);
    spec = spec_for(t.graph, net, RV_TASK_COMM, "A", US(20), -1, -1);
    *a = insert_ok(t.graph, &spec);
    spec = spec_for(t.graph, net, RV_TASK_COMM, "B", US(30), -1, -1);
    *b = insert_ok(t.graph, &spec);
    rv_transform_add_edge(t.graph, p1, *a);
    rv_transform_add_edge(t.graph, p2, *b);
    assert_acyclic(t.graph);
    return t;
}

static void check_channel_order(const rv_graph *graph, const rv_policy *policy, int32_t first, int64_t first_start,
                                int32_t second, int64_t second_start)
{
    rv_sim_result sim = replay_with(graph, policy);
    ck_assert_int_eq(sim.start_ns[first], first_start);
    ck_assert_int_eq(sim.start_ns[second], second_start);
    ck_assert_int_eq(sim.makespan_ns, US(150));
    rv_sim_result_clear(&sim);
}

START_TEST(policy_rank_decides_contended_resource)
{
    int32_t a, b, t0;
    tiny t = contended_channel(&a, &b, &t0);
    ck_assert_int_eq(start_of(t.graph, t0), 0);
    check_channel_order(t.graph, NULL, a, US(100), b, US(120));
    ranking b_first = { b, a };
    rv_policy policy = { rank_by_table, &b_first };
    check_channel_order(t.graph, &policy, b, US(100), a, US(130));
    ranking a_first = { a, b };
    policy.user_data = &a_first;
    check_channel_order(t.graph, &policy, a, US(100), b, US(120));
    rv_policy no_function = { NULL, &b_first };  /* a policy without a function is no policy */
    check_channel_order(t.graph, &no_function, a, US(100), b, US(120));
    rv_graph_free(t.graph);
}
END_TEST

/* A constant rank changes nothing on a built graph: every task starts at
 * the same nanosecond as in the default replay. */
START_TEST(policy_constant_rank_reproduces_default_real)
{
    rv_graph *graph = load_trace("hta_resnet50_v100.json.gz");
    rv_sim_result plain = replay_with(graph, NULL);
    rv_policy policy = { constant_rank, NULL };
    rv_sim_result ranked = replay_with(graph, &policy);
    ck_assert_int_eq(plain.task_count, ranked.task_count);
    int32_t differing = 0, first_differing = -1;
    for (int32_t task = 0; task < plain.task_count; task++) {
        if (plain.start_ns[task] == ranked.start_ns[task] && plain.end_ns[task] == ranked.end_ns[task]) continue;
        if (first_differing < 0) first_differing = task;
        differing++;
    }
    ck_assert_msg(differing == 0, "%d of %d tasks start elsewhere under a constant rank (first: task %d)", differing,
                  plain.task_count, first_differing);
    ck_assert_int_eq(plain.makespan_ns, ranked.makespan_ns);
    ck_assert_int_gt(plain.task_count, 1000);
    g_printerr("hta_resnet50_v100: %d tasks start at the same time under a constant rank\n", plain.task_count);
    rv_sim_result_clear(&plain);
    rv_sim_result_clear(&ranked);
    rv_graph_free(graph);
}
END_TEST

/* ---- shapes --------------------------------------------------------- */

START_TEST(shapes_conv_record)
{
    rv_shapes shapes;
    ck_assert(rv_shapes_parse("[[32, 3, 224, 224], [64, 3, 7, 7], [], []]", &shapes));
    ck_assert_uint_eq(rv_shapes_count(&shapes), 4);
    ck_assert_uint_eq(rv_shapes_rank(&shapes, 0), 4);
    ck_assert_uint_eq(rv_shapes_rank(&shapes, 2), 0);
    ck_assert_int_eq(rv_shapes_extent(&shapes, 0, 0), 32);
    ck_assert_int_eq(rv_shapes_extent(&shapes, 0, 3), 224);
    ck_assert_int_eq(rv_shapes_extent(&shapes, 0, 4), 0);
    ck_assert_int_eq(rv_shapes_extent(&shapes, 7, 0), 0);
    ck_assert_int_eq(rv_shapes_elements(&shapes, 0), 32 * 3 * 224 * 224);
    ck_assert_int_eq(rv_shapes_elements(&shapes, 1), 64 * 3 * 7 * 7);
    ck_assert_int_eq(rv_shapes_elements(&shapes, 2), 0);
    ck_assert_int_eq(rv_shapes_elements(&shapes, 3), 0);
    ck_assert_int_eq(rv_shapes_elements(&shapes, 4), 0);
    rv_shapes_clear(&shapes);
    ck_assert_uint_eq(rv_shapes_count(&shapes), 0);
    rv_shapes_clear(&shapes);  /* twice is harmless */
}
END_TEST

/* Not a list of inputs: FALSE and no inputs, never a crash. */
START_TEST(shapes_malformed)
{
    const char *bad[] = { "[[32, 3", "", "{\"a\": 1}", "7", "not json", "[[1, 2]] trailing" };
    for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
        rv_shapes shapes;
        ck_assert_msg(!rv_shapes_parse(bad[i], &shapes), "accepted: %s", bad[i]);
        ck_assert_uint_eq(rv_shapes_count(&shapes), 0);
        ck_assert_int_eq(rv_shapes_elements(&shapes, 0), 0);
        rv_shapes_clear(&shapes);
    }
    rv_shapes shapes;
    ck_assert(!rv_shapes_parse(NULL, &shapes));
    ck_assert_uint_eq(rv_shapes_count(&shapes), 0);
    rv_shapes_clear(&shapes);
}
END_TEST

/* A negative or fractional extent makes that input count as 0 elements,
 * the other inputs are unaffected; a zero extent is a real empty tensor. */
START_TEST(shapes_negative_extents)
{
    rv_shapes shapes;
    ck_assert(rv_shapes_parse("[[2, -3], [4, 5], [1.5, 2], [0, 8]]", &shapes));
    ck_assert_uint_eq(rv_shapes_count(&shapes), 4);
    ck_assert_int_eq(rv_shapes_elements(&shapes, 0), 0);
    ck_assert_uint_eq(rv_shapes_rank(&shapes, 0), 0);
    ck_assert_int_eq(rv_shapes_elements(&shapes, 1), 20);
    ck_assert_int_eq(rv_shapes_elements(&shapes, 2), 0);
    ck_assert_uint_eq(rv_shapes_rank(&shapes, 3), 2);
    ck_assert_int_eq(rv_shapes_elements(&shapes, 3), 0);
    rv_shapes_clear(&shapes);
}
END_TEST

/* Products past int64 count as 0 elements, not as a wrapped number; the
 * largest product that fits is kept. */
START_TEST(shapes_overflow)
{
    rv_shapes shapes;
    ck_assert(rv_shapes_parse("[[4294967296, 4294967296], [9223372036854775807, 2], [9223372036854775807, 1],"
                              " [3037000499, 3037000499], [3037000500, 3037000500, 0]]", &shapes));
    ck_assert_int_eq(rv_shapes_elements(&shapes, 0), 0);
    ck_assert_int_eq(rv_shapes_elements(&shapes, 1), 0);
    ck_assert_int_eq(rv_shapes_elements(&shapes, 2), G_MAXINT64);
    ck_assert_int_eq(rv_shapes_elements(&shapes, 3), (int64_t)3037000499 * 3037000499);
    ck_assert_int_eq(rv_shapes_elements(&shapes, 4), 0);
    rv_shapes_clear(&shapes);
    /* An extent past int64 is not even valid JSON for jansson. */
    ck_assert(!rv_shapes_parse("[[18446744073709551616]]", &shapes));
    ck_assert_int_eq(rv_shapes_elements(&shapes, 0), 0);
    rv_shapes_clear(&shapes);
}
END_TEST

/* Scalars ([] or a bare number), strings and lists of tensors are inputs of
 * 0 elements; they still count as inputs. */
START_TEST(shapes_scalars)
{
    rv_shapes shapes;
    ck_assert(rv_shapes_parse("[[], 7, \"alpha\", [[2, 3], [4]], [6]]", &shapes));
    ck_assert_uint_eq(rv_shapes_count(&shapes), 5);
    for (guint input = 0; input < 4; input++) {
        ck_assert_uint_eq(rv_shapes_rank(&shapes, input), 0);
        ck_assert_int_eq(rv_shapes_elements(&shapes, input), 0);
    }
    ck_assert_int_eq(rv_shapes_elements(&shapes, 4), 6);
    rv_shapes_clear(&shapes);
    ck_assert(rv_shapes_parse("[]", &shapes));
    ck_assert_uint_eq(rv_shapes_count(&shapes), 0);
    rv_shapes_clear(&shapes);
}
END_TEST

/* A task's own record, through the graph's strings; none -> FALSE. */
START_TEST(shapes_of_task)
{
    tiny t = tiny_new();
    int32_t with = tiny_task(&t, t.cpu, RV_TASK_CPU, "aten::mm", US(1), RV_PHASE_FORWARD);
    int32_t without = tiny_task(&t, t.cpu, RV_TASK_CPU, "aten::add", US(1), RV_PHASE_FORWARD);
    rv_graph_task(t.graph, with)->input_dims = rv_strings_intern(t.graph->strings, "[[128, 256], [256, 64]]");
    rv_shapes shapes;
    ck_assert(rv_shapes_of_task(t.graph, with, &shapes));
    ck_assert_int_eq(rv_shapes_elements(&shapes, 0), 128 * 256);
    ck_assert_int_eq(rv_shapes_elements(&shapes, 1), 256 * 64);
    rv_shapes_clear(&shapes);
    ck_assert(!rv_shapes_of_task(t.graph, without, &shapes));
    ck_assert_uint_eq(rv_shapes_count(&shapes), 0);
    rv_shapes_clear(&shapes);
    rv_graph_free(t.graph);
}
END_TEST

/* ---- suite ---------------------------------------------------------- */

static void add_case(Suite *suite, const char *name, const TTest *const *tests, guint count)
{
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, 60);
    for (guint i = 0; i < count; i++) tcase_add_test(tc, tests[i]);
    suite_add_tcase(suite, tc);
}

static Suite *transform_suite(void)
{
    Suite *suite = suite_create("transform");
    const TTest *durations[] = { scale_kernels, scale_rounds_to_nearest, set_duration };
    const TTest *removal[] = { remove_reconnects_across_resources, remove_gpu_task_takes_launch,
                               remove_drop_overhead_vs_keep_overhead, remove_counts, remove_many_drop_overhead_matches_one_by_one,
                               remove_many_keep_overhead_matches_one_by_one, remove_many_chain,
                               replace_regions_stand_in, replace_regions_host_calls };
    const TTest *insertion[] = { insert_unordered, insert_after_splices_order, insert_gpu_task_with_launch,
                                 insert_errors };
    const TTest *structure[] = { add_edge, add_channel_with_transfers, step_lists_are_the_grouping,
                                 sort_recorded_is_the_full_sort,
                                 resource_neighbours_and_launch_of, typical_launch };
    const TTest *policy[] = { policy_rank_decides_contended_resource, policy_constant_rank_reproduces_default_real };
    const TTest *shapes[] = { shapes_conv_record, shapes_malformed, shapes_negative_extents, shapes_overflow,
                              shapes_scalars, shapes_of_task };
    add_case(suite, "scale", durations, G_N_ELEMENTS(durations));
    add_case(suite, "remove", removal, G_N_ELEMENTS(removal));
    add_case(suite, "insert", insertion, G_N_ELEMENTS(insertion));
    add_case(suite, "edges-and-queries", structure, G_N_ELEMENTS(structure));
    add_case(suite, "policy", policy, G_N_ELEMENTS(policy));
    add_case(suite, "shapes", shapes, G_N_ELEMENTS(shapes));
    return suite;
}

int main(void)
{
    static const char *const traces[] = { "hta_resnet50_v100.json.gz", NULL };
    require_project_traces(traces);
    SRunner *runner = srunner_create(transform_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
