/*
 * test_single_gpu.c - the single-GPU what-ifs of issue 17: cuda-graphs,
 * batch-size, grad-accumulation, checkpoint and batchnorm-restructure.
 *
 * A hand-built launch-bound graph gives cuda-graphs' prediction worked out
 * by hand; the real traces give the figures (a large gain on the
 * launch-bound 2080 Ti trace, almost none on the GPU-bound ResNet-50),
 * the static-shape check (a step whose shapes change is not captured) and
 * each plugin's refusal of a trace that lacks what it needs.  batch-size
 * and grad-accumulation: neutral parameters give the baseline to the ns;
 * per-step work (the optimizer) keeps its time while per-sample work grows.
 * checkpoint: segments=1 is the baseline; more segments recompute more.
 * batchnorm-restructure: Algorithm 5's halving and removal on ResNet-50.
 * gist: Algorithm 11's encode/decode kernels on ResNet-50.
 */
#include <check.h>
#include <glib.h>
#include <string.h>
#include "reverie/error.h"
#include "reverie/graph.h"
#include "reverie/plugin.h"
#include "reverie/sim.h"
#include "plugin_harness.h"

#define LINEAR "param_linear_2080ti.json.gz"
#define RESNET "hta_resnet50_v100.json.gz"
#define LEGACY "kineto_legacy_resnet50_v100.2steps.json.gz"
#define TRANSFORMER "hta_transformer_ddp_v100_rank1.2steps.json.gz"

/* apply_plugin must fail with one RV_ERROR_PLUGIN line containing `words`. */
static void assert_refused(rv_graph *graph, const char *plugin, const char *text, const char *words)
{
    assert_apply_fails(graph, plugin, text, RV_ERROR_PLUGIN, words);
}

/* The summed duration of the live GPU tasks of one phase. */
static int64_t phase_gpu_ns(const rv_graph *graph, rv_phase phase)
{
    int64_t total = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if (!(task->flags & RV_TASK_FLAG_REMOVED) && (task->flags & RV_TASK_FLAG_GPU) && task->phase == phase)
            total += task->duration_ns;
    }
    return total;
}

/* ---- cuda-graphs ------------------------------------------------------ */

/*
 * One thread: a 1us call, then five 10us launches of 2us kernels (no step
 * annotation: the whole graph is one step).  Launch-bound: kernel k runs
 * 11+10k .. 13+10k, the last ends at 53us.  As one graph: the launch (10us,
 * the median launch) ends at 11us, the five kernels follow back to back:
 * 21us; with gap=1us four gaps more: 25us.
 */
static tiny launch_bound(void)
{
    tiny t = tiny_new();
    tiny_task(&t, t.cpu, RV_TASK_CPU, "python", US(1), RV_PHASE_FORWARD);
    for (int i = 0; i < 5; i++) tiny_launch(&t, "kernel", US(10), US(2), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    tiny_record(t.graph);
    ck_assert_int_eq(makespan(t.graph), US(53));
    return t;
}

START_TEST(cuda_graphs_hand_built)
{
    tiny t = launch_bound();
    apply_ok(t.graph, "cuda-graphs", "static=assume");
    ck_assert_int_eq(makespan(t.graph), US(21));
    int launches = 0;
    for (int32_t id = 0; id < rv_graph_task_count(t.graph); id++) {
        const rv_task *task = rv_graph_task(t.graph, id);
        if (!(task->flags & RV_TASK_FLAG_REMOVED) && task->kind == RV_TASK_CPU) launches++;
    }
    ck_assert_int_eq(launches, 2); /* the python call and one cudaGraphLaunch */
    rv_graph_free(t.graph);

    t = launch_bound();
    apply_ok(t.graph, "cuda-graphs", "static=assume,gap=1us,launch_cost=4us");
    ck_assert_int_eq(makespan(t.graph), US(1 + 4 + 5 * 2 + 4 * 1));
    rv_graph_free(t.graph);
}
END_TEST

/*
 * Three steps on one thread and one stream, each: a call, then launches.
 * Step 0: python, k0, k1, cudaStreamSynchronize (capture cannot hold
 * it), k2 (alone after it: a graph of one kernel is left alone).  Steps 1
 * and 2: python, then three launches; step 2's last kernel has other
 * shapes.  The thread's first call stays (nothing to anchor a graph
 * launch after).
 */
static tiny three_steps(void)
{
    tiny t = tiny_new();
    int32_t shapes[2] = { rv_strings_intern(t.graph->strings, "[[8, 64]]"), rv_strings_intern(t.graph->strings, "[[8, 32]]") };
    const int kernels[3] = { 3, 3, 3 };
    for (int step = 0; step < 3; step++) {
        int32_t first = tiny_task(&t, t.cpu, RV_TASK_CPU, "python", US(1), RV_PHASE_FORWARD);
        for (int k = 0; k < kernels[step]; k++) {
            if (step == 0 && k == 2) tiny_task(&t, t.cpu, RV_TASK_CPU, "cudaStreamSynchronize", US(1), RV_PHASE_FORWARD);
            int32_t gpu = tiny_launch(&t, "kernel", US(10), US(2), RV_PHASE_FORWARD, RV_TASK_KERNEL);
            rv_graph_task(t.graph, gpu)->input_dims = shapes[step == 2 && k == 2];
        }
        rv_step info = { rv_strings_intern(t.graph->strings, step == 0 ? "ProfilerStep#0" : step == 1 ? "ProfilerStep#1"
                                                                                                        : "ProfilerStep#2"),
                         0, 0, first, rv_graph_task_count(t.graph) - 1 };
        for (int32_t id = first; id < rv_graph_task_count(t.graph); id++) rv_graph_task(t.graph, id)->step = step;
        g_array_append_val(t.graph->steps, info);
    }
    tiny_record(t.graph);
    for (guint step = 0; step < t.graph->steps->len; step++) {
        rv_step *info = &g_array_index(t.graph->steps, rv_step, step);
        const rv_task *last = rv_graph_task(t.graph, info->end_marker);
        info->recorded_begin_ns = rv_graph_task(t.graph, info->begin_marker)->recorded_start_ns;
        info->recorded_end_ns = last->recorded_start_ns + last->duration_ns;
    }
    return t;
}

/* Which steps qualify, which calls each graph takes and how many GPU tasks
 * on a captured stream stay outside a graph, counted by hand: static=assume
 * takes all three steps (step 0's lone kernel after the synchronize stays
 * out), the check leaves step 2 (its shapes differ) and, with no twin for
 * it, its kernels stay out as well. */
START_TEST(cuda_graphs_segments_by_hand)
{
    tiny t = three_steps();
    char *notes = apply_notes(t.graph, "cuda-graphs", "static=assume");
    ck_assert_msg(strstr(notes, "region=step: 3 graphs in 3 steps replace 10 CPU calls launching 8 GPU tasks") &&
                  strstr(notes, "; 1 uncaptured GPU tasks there get it too") &&
                  strstr(notes, "no back-to-back sample"), "%s", notes); /* each kernel waited for its launch */
    g_free(notes);
    rv_graph_free(t.graph);
    t = three_steps();
    notes = apply_notes(t.graph, "cuda-graphs", "");
    ck_assert_msg(strstr(notes, "region=step: 2 graphs in 2 steps replace 6 CPU calls launching 5 GPU tasks") &&
                  strstr(notes, "left alone (shapes differ from every other step): ProfilerStep#2\n") &&
                  strstr(notes, "; 4 uncaptured GPU tasks there get it too"), "%s", notes);
    g_free(notes);
    rv_graph_free(t.graph);
}
END_TEST

/* The figures: large on the launch-bound trace (over 25% of a
 * step half of which is two cudaFree calls that stay), almost none on the
 * GPU-bound one. */
START_TEST(cuda_graphs_launch_bound_vs_gpu_bound)
{
    int64_t base, predicted;
    predict_trace(LINEAR, "cuda-graphs", "static=assume", &base, &predicted);
    ck_assert_msg(predicted * 4 < base * 3, "launch-bound: %" G_GINT64_FORMAT " -> %" G_GINT64_FORMAT, base, predicted);
    predict_trace(RESNET, "cuda-graphs", "static=assume", &base, &predicted);
    ck_assert_msg(predicted < base && predicted * 100 > base * 98, "GPU-bound: %" G_GINT64_FORMAT " -> %" G_GINT64_FORMAT,
                  base, predicted);
}
END_TEST

/* Shapes decide which steps qualify: the legacy ResNet-50 records them,
 * its two steps match; change one kernel's shapes in one step and neither
 * has a twin left, so nothing is captured. */
START_TEST(cuda_graphs_static_shapes)
{
    rv_graph *graph = load_trace(LEGACY);
    int64_t base = step_total(graph);
    int64_t predicted;
    apply_and_simulate(graph, "cuda-graphs", "", NULL, &predicted);
    ck_assert(predicted < base);
    rv_graph_free(graph);

    graph = load_trace(LEGACY);
    int32_t other = rv_strings_intern(graph->strings, "[[64, 3, 224, 224]]");
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        rv_task *task = rv_graph_task(graph, id);
        if ((task->flags & RV_TASK_FLAG_GPU) && task->step == 1 && task->input_dims >= 0) {
            task->input_dims = other;
            break;
        }
    }
    assert_refused(graph, "cuda-graphs", "", "no step has static shapes");
    apply_ok(graph, "cuda-graphs", "static=assume");
    rv_graph_free(graph);
}
END_TEST

START_TEST(cuda_graphs_refusals)
{
    rv_graph *graph = load_trace(RESNET);
    assert_refused(graph, "cuda-graphs", "", "static=assume");
    rv_graph_free(graph);
    graph = load_trace("hta_cpu_only.json.gz");
    assert_refused(graph, "cuda-graphs", "static=assume", "no kernel launch calls");
    rv_graph_free(graph);
}
END_TEST

/* ---- batch-size and grad-accumulation --------------------------------- */

START_TEST(batch_neutral)
{
    check_neutral(RESNET, "batch-size", "factor=1");
    check_neutral(LEGACY, "batch-size", "factor=1,batch=32");
    check_neutral(RESNET, "grad-accumulation", "steps=1");
}
END_TEST

/* Twice the batch: forward and backward GPU time about doubles (a kernel's
 * fixed cost does not), the optimizer keeps its time, and the step grows
 * by less than 2x (launches and optimizer are per step). */
START_TEST(batch_size_scales_per_sample_work)
{
    rv_graph *graph = load_trace(LEGACY);
    int64_t base = step_total(graph);
    int64_t forward = phase_gpu_ns(graph, RV_PHASE_FORWARD), optimizer = phase_gpu_ns(graph, RV_PHASE_OPTIMIZER);
    int64_t predicted;
    apply_and_simulate(graph, "batch-size", "factor=2", NULL, &predicted);
    int64_t forward2 = phase_gpu_ns(graph, RV_PHASE_FORWARD);
    ck_assert_int_eq(phase_gpu_ns(graph, RV_PHASE_OPTIMIZER), optimizer);
    ck_assert_msg(forward2 > forward * 3 / 2 && forward2 <= forward * 2, "forward %" G_GINT64_FORMAT " -> %" G_GINT64_FORMAT,
                  forward, forward2);
    ck_assert(predicted > base && predicted < 2 * base);
    rv_graph_free(graph);
    /* half the batch: less work */
    predict_trace(LEGACY, "batch-size", "factor=0.5", &base, &predicted);
    ck_assert(predicted < base);
}
END_TEST

/* In a what-if where batch-size comes first and last, its step line comes
 * from the baseline's and the prediction's replays, and says what its own
 * replays said; after a replay with a policy it must replay without. */
START_TEST(batch_size_steps_from_the_host_replays)
{
    rv_graph *graph = load_trace(LEGACY);
    assert_notes_from_host_replays(graph, "batch-size", "factor=2", "step ");
    assert_notes_from_host_replays(graph, "batch-size", "factor=0.5,batch=32", "step ");
    rv_graph_free(graph);
}
END_TEST

/* Four micro-batches: forward and backward x4, optimizer once. */
START_TEST(grad_accumulation_repeats_passes)
{
    rv_graph *graph = load_trace(RESNET);
    int64_t base = step_total(graph);
    int64_t backward = phase_gpu_ns(graph, RV_PHASE_BACKWARD), optimizer = phase_gpu_ns(graph, RV_PHASE_OPTIMIZER);
    int64_t predicted;
    apply_and_simulate(graph, "grad-accumulation", "steps=4", NULL, &predicted);
    ck_assert_int_eq(phase_gpu_ns(graph, RV_PHASE_BACKWARD), backward * 4);
    ck_assert_int_eq(phase_gpu_ns(graph, RV_PHASE_OPTIMIZER), optimizer);
    ck_assert(predicted > 3 * base && predicted < 4 * base);
    rv_graph_free(graph);
}
END_TEST

/* The same for grad-accumulation's step line: from the host's replays
 * when it comes first and last, its own replay under another policy, and
 * the very line its own replays write. */
START_TEST(grad_accumulation_steps_from_the_host_replays)
{
    rv_graph *graph = load_trace(RESNET);
    assert_notes_from_host_replays(graph, "grad-accumulation", "steps=4", "    step ");
    rv_graph_free(graph);
    graph = load_trace(LEGACY);
    assert_notes_from_host_replays(graph, "grad-accumulation", "steps=2,batch=32", "    step ");
    rv_graph_free(graph);
}
END_TEST

START_TEST(batch_refusals)
{
    rv_graph *graph = load_trace("hta_cpu_only.json.gz");
    assert_refused(graph, "batch-size", "factor=2", "no GPU work in a forward or backward phase");
    rv_graph_free(graph);
    graph = load_trace("hta_simple_add_a100.json.gz");
    assert_refused(graph, "grad-accumulation", "steps=2", "no forward or backward work");
    rv_graph_free(graph);
}
END_TEST

/* ---- checkpoint -------------------------------------------------------- */

static int32_t live_gpu_tasks(const rv_graph *graph)
{
    int32_t count = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if (!(task->flags & RV_TASK_FLAG_REMOVED) && (task->flags & RV_TASK_FLAG_GPU)) count++;
    }
    return count;
}

/* segments=1 recomputes nothing; more segments recompute more of the
 * forward pass (never all of it: the last segment is kept), and the step
 * grows by at most the forward GPU time added. */
START_TEST(checkpoint_recomputes_forward)
{
    check_neutral(TRANSFORMER, "checkpoint", "segments=1");
    int64_t previous_tasks = 0;
    for (int n = 2; n <= 8; n *= 2) {
        rv_graph *graph = load_trace(TRANSFORMER);
        int64_t base = step_total(graph), forward = phase_gpu_ns(graph, RV_PHASE_FORWARD);
        int32_t before = live_gpu_tasks(graph);
        char *text = g_strdup_printf("segments=%d", n);
        int64_t predicted;
        apply_and_simulate(graph, "checkpoint", text, NULL, &predicted);
        int32_t added = live_gpu_tasks(graph) - before;
        ck_assert_int_gt(added, previous_tasks);
        ck_assert(predicted > base && predicted <= base + 2 * forward);
        previous_tasks = added;
        g_free(text);
        rv_graph_free(graph);
    }
}
END_TEST

START_TEST(checkpoint_memory_estimate_and_refusal)
{
    rv_graph *graph = load_trace(LEGACY);
    char *notes = apply_notes(graph, "checkpoint", "segments=4");
    ck_assert_msg(strstr(notes, "launch calls keep no activations past forward") != NULL, "%s", notes);
    ck_assert_uint_gt(graph->memory_effects->len, 0); /* the memory model is told (test_memory checks the peak) */
    g_free(notes);
    rv_graph_free(graph);
    graph = load_trace("hta_simple_add_a100.json.gz");
    assert_refused(graph, "checkpoint", "segments=2", "no step with both forward and backward GPU work");
    rv_graph_free(graph);
}
END_TEST

/* ---- batchnorm-restructure -------------------------------------------- */

/* Summed duration of live kernels whose name contains `word`. */
static int64_t kernels_named(const rv_graph *graph, const char *word, guint *count)
{
    int64_t total = 0;
    *count = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if ((task->flags & RV_TASK_FLAG_REMOVED) || task->kind != RV_TASK_KERNEL) continue;
        if (strstr(rv_strings_get(graph->strings, task->name), word) == NULL) continue;
        total += task->duration_ns;
        (*count)++;
    }
    return total;
}

/* Algorithm 5 on ResNet-50: batch norms halve (model=daydream: exactly, by
 * task), ReLUs go with their launches; the step gains, by less than the
 * GPU time removed; bn_bytes=1,relu=keep is the baseline. */
START_TEST(batchnorm_restructure_resnet)
{
    check_neutral(RESNET, "batchnorm-restructure", "bn_bytes=1,relu=keep");
    rv_graph *graph = load_trace(RESNET);
    int64_t base = step_total(graph), gpu_before = phase_gpu_ns(graph, RV_PHASE_FORWARD) + phase_gpu_ns(graph, RV_PHASE_BACKWARD);
    guint bn_count, bn_after_count;
    int64_t bn = kernels_named(graph, "bn_", &bn_count);
    int64_t predicted;
    apply_and_simulate(graph, "batchnorm-restructure", "model=daydream", NULL, &predicted);
    int64_t bn_after = kernels_named(graph, "bn_", &bn_after_count);
    ck_assert_uint_eq(bn_after_count, bn_count);
    ck_assert(bn_after <= bn / 2 + bn_count && bn_after >= bn / 2 - bn_count); /* halves, rounded per task */
    int64_t gpu_after = phase_gpu_ns(graph, RV_PHASE_FORWARD) + phase_gpu_ns(graph, RV_PHASE_BACKWARD);
    /* the GPU-bound step gains what the GPU loses, give or take the ReLU launches (1%) */
    ck_assert(predicted < base && (base - predicted) * 100 <= (gpu_before - gpu_after) * 101);
    rv_graph_free(graph);
    predict_trace(RESNET, "batchnorm-restructure", "", &base, &predicted);
    ck_assert(predicted * 100 < base * 95 && predicted * 100 > base * 70);
    /* relu=keep: only the batch norms gain */
    int64_t kept;
    predict_trace(RESNET, "batchnorm-restructure", "relu=keep", &base, &kept);
    ck_assert(kept < base && kept > predicted);
}
END_TEST

START_TEST(batchnorm_restructure_refusal)
{
    rv_graph *graph = load_trace(TRANSFORMER);
    assert_refused(graph, "batchnorm-restructure", "", "no batch-norm GPU kernels");
    rv_graph_free(graph);
}
END_TEST

/* ---- gist ------------------------------------------------------------- */

/* Algorithm 11 on ResNet-50: per step, the ReLUs before pooling (the
 * stem's max pool, the head's average pool) binarized and the ReLUs before convolutions stored by SSDC;
 * each encoding adds an encode and a decode kernel lasting the ReLU's time
 * x (1 + E/B) / 2; the step slows by about what the GPU gains in work; the
 * kept activations shrink; binarize=off,ssdc=off is the baseline. */
START_TEST(gist_resnet)
{
    check_neutral(LEGACY, "gist", "binarize=off,ssdc=off");
    rv_graph *graph = load_trace(LEGACY);
    int64_t base = step_total(graph);
    int64_t gpu_before = phase_gpu_ns(graph, RV_PHASE_FORWARD) + phase_gpu_ns(graph, RV_PHASE_BACKWARD);
    int64_t predicted;
    apply_and_simulate(graph, "gist", "", NULL, &predicted);
    guint encodes, decodes, binarized;
    int64_t encode_ns = kernels_named(graph, "encode", &encodes);
    kernels_named(graph, "decode", &decodes);
    kernels_named(graph, "binarize ReLU", &binarized);
    ck_assert_uint_eq(encodes, decodes);
    ck_assert_uint_eq(binarized, 4);      /* the stem's ReLU -> max pool and the last -> avg pool, 2 steps */
    ck_assert_uint_ge(encodes, 2 * 40);   /* ResNet-50: most of its 49 ReLUs feed a convolution */
    int64_t gpu_after = phase_gpu_ns(graph, RV_PHASE_FORWARD) + phase_gpu_ns(graph, RV_PHASE_BACKWARD);
    ck_assert(encode_ns > 0 && gpu_after > gpu_before);
    /* the step slows by no more than the GPU work added (plus launch time) */
    ck_assert(predicted > base && (predicted - base) <= (gpu_after - gpu_before) * 11 / 10);
    ck_assert_uint_gt(graph->memory_effects->len, 0); /* the memory model is told */
    rv_graph_free(graph);
    /* all zeros (sparsity=1) make the SSDC kernels half the ReLU: cheaper than the default */
    int64_t sparse;
    predict_trace(LEGACY, "gist", "sparsity=1", &base, &sparse);
    ck_assert(sparse < predicted && sparse > base);
}
END_TEST

START_TEST(gist_refusals)
{
    rv_graph *graph = load_trace(TRANSFORMER);
    assert_refused(graph, "gist", "", "nothing for Gist to encode");
    rv_graph_free(graph);
    graph = load_trace("hta_simple_add_a100.json.gz");
    assert_refused(graph, "gist", "", "no step with both forward and backward GPU work");
    rv_graph_free(graph);
    graph = load_trace(LEGACY);
    GError *error = NULL;
    ck_assert(!apply_plugin(graph, "gist", "sparsity=1.5", &error));
    ck_assert(g_error_matches(error, RV_ERROR, RV_ERROR_USAGE));
    g_error_free(error);
    rv_graph_free(graph);
}
END_TEST

int main(void)
{
    static const char *const traces[] = { LINEAR, RESNET, LEGACY, TRANSFORMER, "hta_cpu_only.json.gz", "hta_simple_add_a100.json.gz",
                                          NULL };
    require_project_traces(traces);
    Suite *suite = suite_create("single_gpu");
    TCase *graphs = tcase_create("cuda_graphs");
    tcase_set_timeout(graphs, 300);
    tcase_add_test(graphs, cuda_graphs_hand_built);
    tcase_add_test(graphs, cuda_graphs_segments_by_hand);
    tcase_add_test(graphs, cuda_graphs_launch_bound_vs_gpu_bound);
    tcase_add_test(graphs, cuda_graphs_static_shapes);
    tcase_add_test(graphs, cuda_graphs_refusals);
    suite_add_tcase(suite, graphs);
    TCase *batch = tcase_create("batch");
    tcase_set_timeout(batch, 300);
    tcase_add_test(batch, batch_neutral);
    tcase_add_test(batch, batch_size_scales_per_sample_work);
    tcase_add_test(batch, batch_size_steps_from_the_host_replays);
    tcase_add_test(batch, grad_accumulation_steps_from_the_host_replays);
    tcase_add_test(batch, grad_accumulation_repeats_passes);
    tcase_add_test(batch, batch_refusals);
    suite_add_tcase(suite, batch);
    TCase *checkpoint = tcase_create("checkpoint");
    tcase_set_timeout(checkpoint, 300);
    tcase_add_test(checkpoint, checkpoint_recomputes_forward);
    tcase_add_test(checkpoint, checkpoint_memory_estimate_and_refusal);
    suite_add_tcase(suite, checkpoint);
    TCase *batchnorm = tcase_create("batchnorm_restructure");
    tcase_set_timeout(batchnorm, 300);
    tcase_add_test(batchnorm, batchnorm_restructure_resnet);
    tcase_add_test(batchnorm, batchnorm_restructure_refusal);
    tcase_add_test(batchnorm, gist_resnet);
    tcase_add_test(batchnorm, gist_refusals);
    suite_add_tcase(suite, batchnorm);
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed ? 1 : 0;
}
