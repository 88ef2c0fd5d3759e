/*
 * test_compose.c - plugins that compose: the composition law's check and
 * messages (compose.h), the replacement primitive that carries a fusion's
 * dependencies (transform.h), inserted collectives that later plugins and
 * reports see, the memory model following the parallel what-ifs, world-size
 * keeping tensor-parallel groups, sizes that need a unit, and the plugins
 * on a ROCm training trace.  test_plugin_pairs holds every pair to the law.
 */
#include "plugin_harness.h"
#include "reverie/breakdown.h"
#include "reverie/compose.h"
#include "reverie/memory.h"
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RESNET "kineto_legacy_resnet50_v100.2steps.json.gz"
#define MI300X "tracelens_mi300x_resnet_act_checkpoint.json.gz"
#define TIMESFORMER "pairs/gpu_h100_vs_mi300x_timesformer/h100.json.gz"

/* ---- the law ------------------------------------------------------------ */

START_TEST(conflicts_follow_the_declarations)
{
    rv_plugin_effects scale_a = { 0, 0, RV_ASPECT_FORWARD, 0, 0, RV_ORDER(RV_STAGE_DEVICE, 1) };
    rv_plugin_effects scale_b = { 0, 0, RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD, 0, 0, RV_ORDER(RV_STAGE_DEVICE, 2) };
    rv_plugin_effects reads_time = { RV_ASPECT_FORWARD, RV_ASPECT_FORWARD, 0, 0, 0, RV_ORDER(RV_STAGE_MODEL, 1) };
    rv_plugin_effects reads_tasks = { RV_ASPECT_FORWARD, 0, 0, 0, 0, RV_ORDER(RV_STAGE_MODEL, 2) };
    rv_plugin_effects prices = { 0, 0, 0, RV_ASPECT_FORWARD, 0, RV_ORDER(RV_STAGE_PRECISION, 1) };
    rv_plugin_effects inserts = { 0, 0, 0, 0, RV_ASPECT_FORWARD, RV_ORDER(RV_STAGE_EXECUTION, 1) };
    rv_plugin_effects elsewhere = { RV_ASPECT_DATA_COMM, 0, 0, 0, RV_ASPECT_DATA_COMM, RV_ORDER(RV_STAGE_PARALLEL, 1) };
    ck_assert_uint_eq(rv_effects_conflict(&scale_a, &scale_b), 0);        /* factors commute */
    ck_assert_uint_eq(rv_effects_conflict(&scale_a, &reads_tasks), 0);    /* a price is not a task */
    ck_assert_uint_eq(rv_effects_conflict(&prices, &reads_tasks), 0);
    ck_assert_uint_eq(rv_effects_conflict(&scale_a, &reads_time), RV_ASPECT_FORWARD);
    ck_assert_uint_eq(rv_effects_conflict(&prices, &scale_a), RV_ASPECT_FORWARD);
    ck_assert_uint_eq(rv_effects_conflict(&prices, &prices), RV_ASPECT_FORWARD);
    ck_assert_uint_eq(rv_effects_conflict(&inserts, &reads_tasks), RV_ASPECT_FORWARD);
    ck_assert_uint_eq(rv_effects_conflict(&reads_tasks, &inserts), RV_ASPECT_FORWARD);
    ck_assert_uint_eq(rv_effects_conflict(&inserts, &elsewhere), 0);
    char *text = rv_aspects_describe(RV_ASPECT_FORWARD | RV_ASPECT_DATA_COMM);
    ck_assert_str_eq(text, "forward GPU work, data-parallel collectives");
    g_free(text);
}
END_TEST

/* The refused order names the earlier plugin, the aspect and the order to
 * use, in one line; the other order works; the same plugin twice and a
 * rebased graph are not refused. */
START_TEST(one_order_is_refused_with_the_order_to_use)
{
    rv_graph *graph = load_trace("small_ddp.json.gz");
    rv_graph *base = rv_graph_copy(graph);
    apply_ok(graph, "network", "bandwidth_factor=2");
    assert_apply_fails(graph, "ddp", "world=16", RV_ERROR_PLUGIN,
                       "refused after network: network re-prices data-parallel collectives");
    GError *error = NULL;
    ck_assert(!apply_plugin(graph, "ddp", "world=16", &error));
    ck_assert_msg(strstr(error->message, "give --opt ddp before --opt network") != NULL, "%s", error->message);
    g_clear_error(&error);
    apply_ok(graph, "network", "bandwidth_factor=2"); /* the same again */
    rv_compose_rebase(graph);
    apply_ok(graph, "ddp", "world=16");
    rv_graph_assign(graph, base);
    apply_ok(graph, "ddp", "world=16");
    apply_ok(graph, "network", "bandwidth_factor=2");
    ck_assert_uint_eq(graph->applied->len, 2);
    rv_graph_free(base);
    rv_graph_free(graph);
}
END_TEST

/* ---- a fusion keeps what its tasks waited for ----------------------------- */

/* Kernels a, b, c on a stream; an outside task x (another stream) feeds b,
 * and b feeds y there.  Replacing a..c by one kernel: x feeds it, it feeds
 * y, it follows the last of them, and one launch call stands for theirs. */
START_TEST(replace_carries_the_dependencies)
{
    tiny t = tiny_new();
    int32_t other = rv_graph_add_resource(t.graph, RV_RES_GPU_STREAM, 0, 9, "gpu 0 stream 9");
    int32_t before = tiny_launch(&t, "before", US(5), US(10), RV_PHASE_BACKWARD, RV_TASK_KERNEL);
    int32_t a = tiny_launch(&t, "a", US(5), US(10), RV_PHASE_OPTIMIZER, RV_TASK_KERNEL);
    int32_t b = tiny_launch(&t, "b", US(5), US(10), RV_PHASE_OPTIMIZER, RV_TASK_KERNEL);
    int32_t c = tiny_launch(&t, "c", US(5), US(10), RV_PHASE_OPTIMIZER, RV_TASK_KERNEL);
    int32_t after = tiny_launch(&t, "after", US(5), US(10), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    int32_t x = tiny_task(&t, other, RV_TASK_COMM, "x", US(500), RV_PHASE_BACKWARD);
    int32_t y = tiny_task(&t, other, RV_TASK_KERNEL, "y", US(10), RV_PHASE_OPTIMIZER);
    rv_graph_add_edge(t.graph, before, x, RV_EDGE_COMM, FALSE);
    rv_graph_add_edge(t.graph, x, b, RV_EDGE_PLUGIN, FALSE);
    rv_graph_add_edge(t.graph, b, y, RV_EDGE_CROSS_STREAM, FALSE);
    tiny_close_one_step(&t);
    tiny_record(t.graph);
    GArray *group = g_array_new(FALSE, FALSE, sizeof(int32_t));
    int32_t ids[] = { a, b, c };
    g_array_append_vals(group, ids, 3);
    rv_task fused = *rv_graph_task(t.graph, a);
    fused.name = rv_strings_intern(t.graph->strings, "fused");
    fused.duration_ns = US(30);
    rv_insert_spec spec = { fused, -1, -1 };
    int removed = 0;
    GError *error = NULL;
    int32_t id = rv_transform_replace(t.graph, group, &spec, RV_REMOVE_DROP_OVERHEAD, &removed, &error);
    ck_assert_msg(id >= 0, "%s", error ? error->message : "");
    ck_assert_int_eq(removed, 6); /* three kernels, three launches */
    ck_assert(rv_graph_check_acyclic(t.graph, &error));
    ck_assert(has_edge(t.graph, x, id));
    ck_assert(has_edge(t.graph, id, y));
    ck_assert_int_eq(rv_graph_resource_previous(t.graph, id), before);
    ck_assert_int_eq(rv_graph_resource_next(t.graph, id), after);
    ck_assert(rv_graph_launch_of(t.graph, id) >= 0);
    rv_sim_result sim = { 0 };
    ck_assert(rv_simulate(t.graph, NULL, &sim, &error));
    ck_assert_int_ge(sim.start_ns[id], sim.end_ns[x]); /* the 500 us wait is kept */
    ck_assert_int_ge(sim.start_ns[y], sim.end_ns[id]);
    rv_sim_result_clear(&sim);
    g_array_unref(group);
    rv_graph_free(t.graph);
}
END_TEST

/* ---- ddp and fused-adam, in either order ---------------------------------- */

static int64_t total_of(const rv_graph *graph, const rv_sim_result *sim)
{
    GArray *steps = rv_step_times(graph, sim);
    int64_t total = 0;
    for (guint s = 0; s < steps->len; s++) total += g_array_index(steps, rv_step_time, s).simulated_ns;
    g_array_unref(steps);
    return total;
}

static gboolean named(const rv_graph *graph, int32_t id, const char *name)
{
    const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
    return !(task->flags & RV_TASK_FLAG_REMOVED) && strcmp(rv_strings_get(graph->strings, task->name), name) == 0;
}

/* Each step's fused optimizer kernel starts after that step's last
 * inserted all-reduce ends. */
static int64_t fused_after_allreduces(const rv_graph *graph, const rv_sim_result *sim)
{
    guint steps = graph->steps->len, fused = 0;
    int64_t *last_end = g_new0(int64_t, steps + 1);
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if (named(graph, id, "ncclAllReduce (ddp bucket)") && task->step >= 0)
            last_end[task->step] = MAX(last_end[task->step], sim->end_ns[id]);
    }
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if (!named(graph, id, "fused optimizer kernel (multi_tensor_apply)") || task->step < 0) continue;
        ck_assert_int_gt(last_end[task->step], 0);
        ck_assert_msg(sim->start_ns[id] >= last_end[task->step], "step %d: the fused kernel starts at %.3f ms, its "
                      "all-reduces end at %.3f ms", task->step, sim->start_ns[id] / 1e6, last_end[task->step] / 1e6);
        fused++;
    }
    g_free(last_end);
    ck_assert_uint_eq(fused, steps);
    return fused;
}

START_TEST(ddp_and_fused_adam_in_either_order)
{
    rv_graph *base = load_trace(RESNET);
    int64_t totals[2];
    for (int order = 0; order < 2; order++) {
        rv_graph *graph = rv_graph_copy(base);
        const char *names[2] = { order ? "fused-adam" : "ddp", order ? "ddp" : "fused-adam" };
        const char *texts[2] = { order ? "" : "world=16,bandwidth=1Gbps", order ? "world=16,bandwidth=1Gbps" : "" };
        for (int k = 0; k < 2; k++) apply_ok(graph, names[k], texts[k]);
        rv_sim_result sim = { 0 };
        GError *error = NULL;
        ck_assert(rv_simulate(graph, NULL, &sim, &error));
        totals[order] = total_of(graph, &sim);
        fused_after_allreduces(graph, &sim);
        rv_sim_result_clear(&sim);
        rv_graph_free(graph);
    }
    g_printerr("ddp then fused-adam %.3f ms, fused-adam then ddp %.3f ms\n", totals[0] / 1e6, totals[1] / 1e6);
    ck_assert_msg(fabs((double)totals[0] - (double)totals[1]) <= 0.01 * (double)totals[1], "%.3f vs %.3f ms",
                  totals[0] / 1e6, totals[1] / 1e6);
    rv_graph_free(base);
}
END_TEST

/* amp's GradScaler reads found_inf on the main thread once backward has
 * returned; ResNet-50's backward launches run on the autograd thread.
 * cuda-graphs, after it, cuts the step into graphs by recorded order: the
 * inserted read must sit after those launches there, or a graph launched
 * behind it would hold work the read waits for (a cycle, refused as a
 * broken graph).  Captured, the step is faster than amp's alone. */
START_TEST(amp_then_cuda_graphs_across_the_autograd_thread)
{
    rv_graph *graph = load_trace(RESNET);
    apply_ok(graph, "amp", "");
    int64_t amp_only = makespan(graph);
    apply_ok(graph, "cuda-graphs", "static=assume");
    int64_t both = makespan(graph);
    g_printerr("amp %.3f ms, then cuda-graphs %.3f ms\n", amp_only / 1e6, both / 1e6);
    ck_assert_int_lt(both, amp_only);
    rv_graph_free(graph);
}
END_TEST

/* ---- inserted collectives are seen -------------------------------------- */

/* Communication time the breakdown reports over the steps. */
static int64_t breakdown_comm(const rv_graph *graph, const rv_sim_result *sim)
{
    GArray *windows = rv_step_windows(graph, sim);
    rv_breakdown *breakdown = rv_breakdown_compute(graph, sim, windows);
    int64_t comm = 0;
    for (guint s = 0; s < breakdown->steps->len; s++) comm += g_array_index(breakdown->steps, rv_step_breakdown, s).comm_ns;
    rv_breakdown_free(breakdown);
    g_array_unref(windows);
    return comm;
}

START_TEST(contention_after_ddp_slows_its_allreduces)
{
    rv_graph *graph = load_trace(RESNET);
    apply_ok(graph, "ddp", "world=16");
    rv_graph *contended = rv_graph_copy(graph);
    apply_ok(contended, "contention", "");
    rv_sim_result plain = { 0 }, slow = { 0 };
    GError *error = NULL;
    ck_assert(rv_simulate(graph, NULL, &plain, &error) && rv_simulate(contended, NULL, &slow, &error));
    int64_t stretched = 0;
    guint allreduces = 0;
    for (int32_t id = 0; id < rv_graph_task_count(contended); id++) {
        if (!named(contended, id, "ncclAllReduce (ddp bucket)")) continue;
        const rv_resource *stream =
            &g_array_index(contended->resources, rv_resource, rv_graph_task(contended, id)->resource);
        ck_assert_int_eq(stream->kind, RV_RES_GPU_STREAM); /* on its GPU, where compute competes */
        stretched += (slow.end_ns[id] - slow.start_ns[id]) - (plain.end_ns[id] - plain.start_ns[id]);
        allreduces++;
    }
    ck_assert_uint_gt(allreduces, 0);
    ck_assert_int_gt(stretched, 0);
    int64_t before = total_of(graph, &plain), after = total_of(contended, &slow);
    int64_t comm_before = breakdown_comm(graph, &plain), comm_after = breakdown_comm(contended, &slow);
    g_printerr("ddp %.3f ms, then contention %.3f ms; all-reduces %.3f ms longer; breakdown communication %.3f -> "
               "%.3f ms\n", before / 1e6, after / 1e6, stretched / 1e6, comm_before / 1e6, comm_after / 1e6);
    ck_assert_int_gt(after, before);
    ck_assert_int_gt(comm_after, comm_before);
    rv_sim_result_clear(&plain);
    rv_sim_result_clear(&slow);
    rv_graph_free(contended);
    rv_graph_free(graph);
}
END_TEST

/* ---- memory follows the plugins ------------------------------------------ */

static void estimate_ok(const rv_graph *graph, rv_memory_estimate *estimate)
{
    GError *error = NULL;
    ck_assert_msg(rv_memory_estimate_graph(graph, estimate, &error), "%s", error ? error->message : "");
}

static int64_t at_peak(const rv_memory_estimate *e, rv_memory_category category)
{
    return e->bytes[e->peak_phase][category];
}

/* The estimate of a shipped trace before and after one plugin, and what
 * one category held at each peak; the figures go to the log. */
static void estimate_around(const char *trace, const char *plugin, const char *text, rv_memory_category category,
                            rv_memory_estimate *before, rv_memory_estimate *after)
{
    rv_graph *graph = load_trace(trace);
    estimate_ok(graph, before);
    apply_ok(graph, plugin, text);
    estimate_ok(graph, after);
    g_printerr("%s:%s: peak %.1f -> %.1f MiB, %s %.1f -> %.1f MiB\n", plugin, text, before->peak / 1048576.0,
               after->peak / 1048576.0, rv_memory_category_name(category), at_peak(before, category) / 1048576.0,
               at_peak(after, category) / 1048576.0);
    rv_graph_free(graph);
}

/* ZeRO-3 over 16 ranks: the peak falls by at least 15/16 of the weights and
 * optimizer state the data-parallel peak held, less the one layer it
 * gathers whole. */
START_TEST(zero_lowers_the_peak_by_the_sharded_states)
{
    rv_graph *graph = load_trace(RESNET);
    apply_ok(graph, "ddp", "world=16");
    rv_memory_estimate before, after;
    estimate_ok(graph, &before);
    apply_ok(graph, "zero", "stage=3,world=16");
    estimate_ok(graph, &after);
    double sharded = (double)(at_peak(&before, RV_MEM_WEIGHTS) + at_peak(&before, RV_MEM_OPTIMIZER_STATE)) * 15.0 / 16.0;
    double least = sharded - (double)after.gathered;
    g_printerr("ZeRO-3 over 16: peak %.1f -> %.1f MiB; sharded states %.1f MiB, one layer gathered %.1f MiB\n",
               before.peak / 1048576.0, after.peak / 1048576.0, sharded / 1048576.0, after.gathered / 1048576.0);
    ck_assert_int_gt(after.gathered, 0);
    ck_assert_msg((double)(before.peak - after.peak) >= least - 1.0, "the peak fell by %.1f MiB, not %.1f",
                  (before.peak - after.peak) / 1048576.0, least / 1048576.0);
    ck_assert_int_eq(after.bytes[RV_PHASE_OPTIMIZER][RV_MEM_OPTIMIZER_STATE],
                     llround(before.bytes[RV_PHASE_OPTIMIZER][RV_MEM_OPTIMIZER_STATE] / 16.0));
    rv_graph_free(graph);
}
END_TEST

/* Checkpointing drops the recomputed activations from the peak. */
START_TEST(checkpoint_lowers_the_peak)
{
    rv_memory_estimate before, after;
    estimate_around(RESNET, "checkpoint", "segments=4", RV_MEM_ACTIVATIONS, &before, &after);
    ck_assert_int_gt(after.recomputed, 0);
    ck_assert_int_lt(after.peak, before.peak);
    ck_assert_int_lt(at_peak(&after, RV_MEM_ACTIVATIONS), at_peak(&before, RV_MEM_ACTIVATIONS));
}
END_TEST

/* Tensor parallelism of degree 8: the weights a rank holds fall to about
 * 1/8 of the linear layers', and the peak by at least that. */
START_TEST(tensor_parallelism_lowers_the_peak)
{
    rv_memory_estimate before, after;
    estimate_around(TIMESFORMER, "tp-allreduce", "degree=8", RV_MEM_WEIGHTS, &before, &after);
    int64_t weights_before = at_peak(&before, RV_MEM_WEIGHTS), weights_after = at_peak(&after, RV_MEM_WEIGHTS);
    ck_assert_int_lt(weights_after, weights_before / 4);
    ck_assert_int_ge(weights_after, weights_before / 8);
    ck_assert_int_le(after.peak, before.peak - (weights_before - weights_after));
}
END_TEST

/* Twice the batch: the kept activations double, and the peak grows by them. */
START_TEST(batch_size_raises_the_peak)
{
    rv_memory_estimate before, after;
    estimate_around(RESNET, "batch-size", "factor=2", RV_MEM_ACTIVATIONS, &before, &after);
    int64_t kept_before = at_peak(&before, RV_MEM_ACTIVATIONS), kept_after = at_peak(&after, RV_MEM_ACTIVATIONS);
    ck_assert(fabs((double)kept_after - 2.0 * (double)kept_before) <= 0.01 * (double)kept_after);
    ck_assert_int_ge(after.peak, before.peak + kept_before - before.peak / 100);
}
END_TEST

/* ---- world-size keeps tensor-parallel groups --------------------------- */

START_TEST(world_size_keeps_tensor_parallel_groups)
{
    rv_graph *graph = load_trace(TIMESFORMER);
    apply_ok(graph, "tp-allreduce", "degree=8");
    int64_t tensor_only = step_total(graph);
    rv_graph *grown = rv_graph_copy(graph);
    char *notes = apply_notes(grown, "world-size", "world=64");
    int64_t world_64 = step_total(grown);
    g_printerr("tensor parallel 8: %.3f ms; world-size:world=64 %.3f ms\n", tensor_only / 1e6, world_64 / 1e6);
    ck_assert_msg(strstr(notes, "data parallel 1 -> 8, tensor parallel 8 -> 8") != NULL, "%s", notes);
    ck_assert(fabs((double)world_64 - (double)tensor_only) < 0.02 * (double)tensor_only);
    g_free(notes);
    rv_graph_assign(grown, graph);
    apply_ok(grown, "world-size", "world=64,tensor=16"); /* told: the tensor-parallel groups grow */
    ck_assert((double)step_total(grown) > 1.02 * (double)tensor_only);
    rv_graph_assign(grown, graph);
    assert_apply_fails(grown, "world-size", "world=60", RV_ERROR_USAGE, "not a whole number of model replicas");
    rv_graph_free(grown);
    rv_graph_free(graph);
}
END_TEST

/* ---- what plugins say about a trace they cannot act on ------------------- */

START_TEST(sizes_need_a_unit)
{
    char *path = plugin_path("ddp");
    GError *error = NULL;
    rv_loaded_plugin *plugin = rv_plugin_load(path, &error);
    ck_assert_msg(plugin != NULL, "%s", error ? error->message : "");
    rv_params *params = rv_params_parse(rv_plugin_descriptor_of(plugin), "bucket_cap=25", &error);
    ck_assert(params == NULL);
    ck_assert_msg(strstr(error->message, "missing size unit") != NULL, "%s", error->message);
    g_clear_error(&error);
    params = rv_params_parse(rv_plugin_descriptor_of(plugin), "bucket_cap=25MB", &error);
    ck_assert(params != NULL);
    ck_assert_int_eq(rv_params_bytes(params, "bucket_cap"), 25000000);
    rv_params_free(params);
    rv_plugin_unload(plugin);
    g_free(path);
}
END_TEST

START_TEST(model_scale_on_a_cnn_says_so)
{
    rv_graph *graph = load_trace(RESNET);
    assert_apply_fails(graph, "model-scale", "hidden=2", RV_ERROR_PLUGIN, "no Transformer layer");
    apply_ok(graph, "model-scale", "batch=2"); /* the batch is any model's */
    rv_graph_free(graph);
}
END_TEST

/* gist, vdnn and pipeline on a ROCm training trace (MI300X, hipFree device
 * syncs, multi_tensor_apply optimizer kernels): a prediction and a valid
 * graph, never a cycle. */
START_TEST(memory_plugins_on_a_rocm_training_trace)
{
    static const char *const plugins[][2] = { { "gist", "" }, { "vdnn", "" }, { "pipeline", "stages=2,microbatches=4" },
                                              { "checkpoint", "segments=4" }, { "fused-adam", "" } };
    rv_graph *base = load_trace(MI300X);
    int64_t baseline = step_total(base);
    for (gsize i = 0; i < G_N_ELEMENTS(plugins); i++) {
        rv_graph *graph = rv_graph_copy(base);
        int64_t predicted = 0;
        apply_and_simulate(graph, plugins[i][0], plugins[i][1], NULL, &predicted);
        g_printerr("MI300X %s: %.3f -> %.3f ms\n", plugins[i][0], baseline / 1e6, predicted / 1e6);
        ck_assert_int_gt(predicted, 0);
        rv_graph_free(graph);
    }
    rv_graph_free(base);
}
END_TEST

/* A ROCm backward pass with a hipFree that waits for one backward kernel
 * and comes before the launch of a multi_tensor_apply kernel on another
 * stream, which the next backward kernel waits for: the kernel depends on
 * the pipelined work through the host, so it cannot feed the pipeline's
 * start (that closed a cycle: tails -> hipFree -> launch -> kernel ->
 * start). */
START_TEST(pipeline_around_a_round_trip_through_the_host)
{
    tiny t = tiny_new();
    int32_t other = rv_graph_add_resource(t.graph, RV_RES_GPU_STREAM, 0, 9, "gpu 0 stream 9");
    int32_t begin = tiny_task(&t, t.cpu, RV_TASK_MARKER, "ProfilerStep#0", 0, RV_PHASE_OTHER);
    rv_graph_task(t.graph, begin)->flags |= RV_TASK_FLAG_STEP_BEGIN;
    tiny_launch(&t, "fwd_a", US(5), US(100), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    tiny_launch(&t, "fwd_b", US(5), US(100), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    int32_t b1 = tiny_launch(&t, "bwd_a", US(5), US(100), RV_PHASE_BACKWARD, RV_TASK_KERNEL);
    int32_t free_call = tiny_task(&t, t.cpu, RV_TASK_CPU, "hipFree", US(3), RV_PHASE_OTHER);
    rv_graph_add_edge(t.graph, b1, free_call, RV_EDGE_SYNC, FALSE);
    int32_t call = tiny_task(&t, t.cpu, RV_TASK_CPU, "hipLaunchKernel", US(5), RV_PHASE_OTHER);
    int32_t apply = tiny_task(&t, other, RV_TASK_KERNEL, "multi_tensor_apply_kernel", US(20), RV_PHASE_OTHER);
    rv_graph_add_edge(t.graph, call, apply, RV_EDGE_LAUNCH, FALSE);
    int32_t b2 = tiny_launch(&t, "bwd_b", US(5), US(100), RV_PHASE_BACKWARD, RV_TASK_KERNEL);
    rv_graph_add_edge(t.graph, apply, b2, RV_EDGE_CROSS_STREAM, FALSE);
    int32_t end = tiny_task(&t, t.cpu, RV_TASK_MARKER, "ProfilerStep#0", 0, RV_PHASE_OTHER);
    rv_graph_task(t.graph, end)->flags |= RV_TASK_FLAG_STEP_END;
    tiny_close_one_step(&t);
    tiny_record(t.graph);
    apply_ok(t.graph, "pipeline", "stages=2,microbatches=2");
    ck_assert_int_gt(step_total(t.graph), 0);
    rv_graph_free(t.graph);
}
END_TEST

int main(void)
{
    static const char *const traces[] = { RESNET, MI300X, TIMESFORMER, "small_ddp.json.gz", NULL };
    require_project_traces(traces);
    Suite *suite = suite_create("compose");
    TCase *law = tcase_create("law");
    tcase_add_test(law, conflicts_follow_the_declarations);
    tcase_add_test(law, one_order_is_refused_with_the_order_to_use);
    tcase_add_test(law, replace_carries_the_dependencies);
    tcase_add_test(law, amp_then_cuda_graphs_across_the_autograd_thread);
    tcase_add_test(law, ddp_and_fused_adam_in_either_order);
    tcase_add_test(law, contention_after_ddp_slows_its_allreduces);
    tcase_set_timeout(law, 300);
    suite_add_tcase(suite, law);
    TCase *memory = tcase_create("memory");
    tcase_add_test(memory, zero_lowers_the_peak_by_the_sharded_states);
    tcase_add_test(memory, checkpoint_lowers_the_peak);
    tcase_add_test(memory, tensor_parallelism_lowers_the_peak);
    tcase_add_test(memory, batch_size_raises_the_peak);
    tcase_set_timeout(memory, 300);
    suite_add_tcase(suite, memory);
    TCase *plugins = tcase_create("plugins");
    tcase_add_test(plugins, world_size_keeps_tensor_parallel_groups);
    tcase_add_test(plugins, sizes_need_a_unit);
    tcase_add_test(plugins, model_scale_on_a_cnn_says_so);
    tcase_add_test(plugins, memory_plugins_on_a_rocm_training_trace);
    tcase_add_test(plugins, pipeline_around_a_round_trip_through_the_host);
    tcase_set_timeout(plugins, 300);
    suite_add_tcase(suite, plugins);
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
