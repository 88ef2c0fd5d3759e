/*
 * test_hardware.c - the plugins on the kernel cost model: hardware,
 * precision, amp and model-scale, on hand-built graphs and on the recorded
 * pairs in traces/pairs (skipped, exit 77, without them).
 *
 * The bounds on the pairs are the errors measured when the model was built
 * (README, "Hardware and precision projection"), with a margin, so that a
 * change that makes a prediction worse fails here.  No factor of the model
 * is fitted to these pairs.
 */
#include "plugin_harness.h"
#include "reverie/costmodel.h"
#include "reverie/memory.h"
#include "reverie/range.h"
#include <math.h>
#include <string.h>

#define TIMESFORMER "pairs/gpu_h100_vs_mi300x_timesformer/"
#define BERT "pairs/gpu_h100_vs_mi300x_bert_small/"
#define WEIGHTS "pairs/weights_fp32_vs_bf16_a10g/"

static int64_t gpu_kernel_ns(const rv_graph *graph)
{
    int64_t total = 0;
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        if ((task->flags & RV_TASK_FLAG_GPU) && !(task->flags & RV_TASK_FLAG_REMOVED) &&
            (task->kind == RV_TASK_KERNEL || task->kind == RV_TASK_COMM))
            total += task->duration_ns;
    }
    return total;
}

/* GPU kernel time of a graph with every estimate at one end of its range. */
static int64_t gpu_kernel_ns_at(const rv_graph *graph, gboolean high)
{
    rv_graph *copy = rv_graph_copy(graph);
    ck_assert(rv_graph_to_range_end(copy, high, NULL));
    int64_t ns = gpu_kernel_ns(copy);
    rv_graph_free(copy);
    return ns;
}

/* What a prediction of `to` from `from` by `plugin:params` gets right. */
typedef struct {
    double error;            /* signed error of the GPU kernel time */
    double no_change_error;  /* of predicting the baseline's */
    gboolean inside_range;   /* the recorded time lies inside the predicted range */
} kernel_verdict;

static kernel_verdict judge_kernels(const char *from, const char *to, const char *plugin, const char *params)
{
    rv_graph *baseline = load_trace(from), *variant = load_trace(to);
    double before = (double)gpu_kernel_ns(baseline), recorded = (double)gpu_kernel_ns(variant);
    apply_ok(baseline, plugin, params);
    kernel_verdict v = { ((double)gpu_kernel_ns(baseline) - recorded) / recorded, (before - recorded) / recorded, FALSE };
    v.inside_range = gpu_kernel_ns_at(baseline, FALSE) <= recorded && recorded <= gpu_kernel_ns_at(baseline, TRUE);
    g_printerr("%s -> %s with %s:%s: GPU kernel time error %+.2f%% (no change %+.2f%%, %s the range)\n", from, to,
               plugin, params, 100 * v.error, 100 * v.no_change_error, v.inside_range ? "inside" : "outside");
    rv_graph_free(baseline);
    rv_graph_free(variant);
    return v;
}

static double kernel_error(const char *from, const char *to, const char *plugin, const char *params)
{
    return judge_kernels(from, to, plugin, params).error;
}

static double speedup(const char *trace, const char *plugin, const char *params)
{
    int64_t base = 0, predicted = 0;
    predict_trace(trace, plugin, params, &base, &predicted);
    double s = (double)base / (double)predicted;
    g_printerr("%s with %s:%s: %.3fx\n", trace, plugin, params, s);
    return s;
}

/* ---- hardware -------------------------------------------------------------- */

/* Both directions of a recorded GPU pair: within the measured errors (with
 * a margin), better than predicting no change, the direction right, the
 * recorded time inside the range.  The tables leave out both recordings
 * of the pair's job (efficiency.h). */
static void check_gpu_pair(const char *pair, double forward_bound, double back_bound)
{
    char *h100 = g_strconcat(pair, "h100.json.gz", NULL), *mi300x = g_strconcat(pair, "mi300x.json.gz", NULL);
    kernel_verdict forward = judge_kernels(h100, mi300x, "hardware", "gpu=MI300X");
    kernel_verdict back = judge_kernels(mi300x, h100, "hardware", "gpu=H100");
    ck_assert_msg(fabs(forward.error) < forward_bound && fabs(back.error) < back_bound, "%s: errors %+.3f %+.3f", pair,
                  forward.error, back.error);
    ck_assert(fabs(forward.error) < fabs(forward.no_change_error) && fabs(back.error) < fabs(back.no_change_error));
    /* the direction: the prediction moves the way the recording did */
    ck_assert((forward.error - forward.no_change_error) * -forward.no_change_error > 0);
    ck_assert((back.error - back.no_change_error) * -back.no_change_error > 0);
    ck_assert(forward.inside_range && back.inside_range);
    g_free(h100);
    g_free(mi300x);
}

START_TEST(hardware_h100_to_mi300x_and_back)
{
    /* measured: -12.4% and +14.4% (the MI300X runs two small batched GEMMs 10-27x
     * slower than the H100, which no datasheet or other recording says;
     * docs/pairs.md explains) */
    check_gpu_pair(TIMESFORMER, 0.15, 0.17);
    /* measured: -13.0% and -5.0% (microsecond kernels: the fixed cost and waves decide; the
     * MI300X's Triton attention kernel takes 3x the H100's flash kernel, which no other
     * recording shows) */
    check_gpu_pair(BERT, 0.15, 0.07);
}
END_TEST

/* A V100 to a GPU with 5x to 30x its every peak: the projection must not
 * come out slower, whatever kernels with overcounted work (convolutions
 * counted at stride 1) put in the tables or change unit. */
START_TEST(hardware_v100_to_newer_gpus_is_faster)
{
    const char *legacy = "kineto_legacy_resnet50_v100.2steps.json.gz";
    rv_graph *graph = load_trace(legacy);
    int64_t before = gpu_kernel_ns(graph);
    rv_graph_free(graph);
    static const char *const targets[] = { "gpu=MI300X", "gpu=H100-SXM", "gpu=A100-80GB", NULL };
    for (const char *const *target = targets; *target; target++) {
        graph = load_trace(legacy);
        apply_ok(graph, "hardware", *target);
        double speedup = (double)before / (double)gpu_kernel_ns(graph);
        g_printerr("%s with hardware:%s: GPU kernel time %.2fx faster\n", legacy, *target, speedup);
        ck_assert_msg(speedup > 2, "%s: %.2fx", *target, speedup);
        rv_graph_free(graph);
    }
}
END_TEST

START_TEST(hardware_same_gpu_is_neutral)
{
    check_neutral(TIMESFORMER "h100.json.gz", "hardware", "gpu=H100-SXM");
    check_neutral("hta_resnet50_v100.json.gz", "hardware", "");
    check_neutral(WEIGHTS "fp32.json.gz", "hardware", "peaks=datasheet");
}
END_TEST

START_TEST(hardware_faster_gpu_helps_a_gpu_bound_step)
{
    double a100 = speedup("hta_resnet50_v100.json.gz", "hardware", "gpu=A100-80GB");
    double h100 = speedup("hta_resnet50_v100.json.gz", "hardware", "gpu=H100-SXM");
    ck_assert_msg(a100 > 1.1 && h100 > a100, "A100 %.3f, H100 %.3f", a100, h100);
    /* compute and memory 4x faster: a GPU-bound step gains, but less than 4x */
    double scaled = speedup("hta_resnet50_v100.json.gz", "hardware", "flops_scale=4,memory_scale=4");
    ck_assert_msg(scaled > 2 && scaled < 4, "%.3f", scaled);
}
END_TEST

START_TEST(hardware_errors)
{
    rv_graph *graph = load_trace(TIMESFORMER "h100.json.gz");
    GError *error = NULL;
    ck_assert(!apply_plugin(graph, "hardware", "gpu=TPUv5", &error));
    ck_assert(g_error_matches(error, RV_ERROR, RV_ERROR_USAGE) && strstr(error->message, "known: ") &&
              strstr(error->message, "MI300X"));
    g_clear_error(&error);
    ck_assert(!apply_plugin(graph, "hardware", "gpu=A100,flops_scale=0", &error));
    ck_assert(g_error_matches(error, RV_ERROR, RV_ERROR_USAGE));
    g_clear_error(&error);
    rv_graph_free(graph);
    /* no deviceProperties: ask for source_gpu=, then work with it */
    graph = load_trace("pairs/dataloader_workers_v100/num_workers_0.json.gz");
    ck_assert(!apply_plugin(graph, "hardware", "gpu=A100", &error));
    ck_assert_msg(g_error_matches(error, RV_ERROR, RV_ERROR_USAGE) && strstr(error->message, "source_gpu=") &&
                  strstr(error->message, "no deviceProperties"), "%s", error->message);
    g_clear_error(&error);
    apply_ok(graph, "hardware", "gpu=A100,source_gpu=V100");
    rv_graph_free(graph);
    /* the MI250 trace names itself "AMD Radeon Graphics" */
    graph = load_trace("hta_minitoy_mi250.json.gz");
    ck_assert(!apply_plugin(graph, "hardware", "gpu=MI300X", &error));
    ck_assert_msg(strstr(error->message, "AMD Radeon Graphics") && strstr(error->message, "source_gpu="), "%s", error->message);
    g_clear_error(&error);
    apply_ok(graph, "hardware", "gpu=MI300X,source_gpu=MI250");
    rv_graph_free(graph);
}
END_TEST

/* An unknown kernel keeps its time and is counted; a known one moves. */
START_TEST(hardware_unknown_kernels_are_counted_not_scaled)
{
    tiny t = tiny_new();
    int32_t mystery = tiny_launch(&t, "my_custom_fused_thing", US(5), US(100), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    int32_t add = tiny_launch(&t, "void at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add<float>>", US(5), US(100),
                              RV_PHASE_FORWARD, RV_TASK_KERNEL);
    char *notes = apply_notes(t.graph, "hardware", "source_gpu=V100,gpu=H100");
    ck_assert_int_eq(rv_graph_task(t.graph, mystery)->duration_ns, US(100));
    ck_assert_int_lt(rv_graph_task(t.graph, add)->duration_ns, US(50));  /* 900 GB/s -> 3.35 TB/s */
    ck_assert_msg(strstr(notes, "unknown") && strstr(notes, "1 kernels") && strstr(notes, "left as recorded"), "%s", notes);
    g_free(notes);
    rv_graph_free(t.graph);
}
END_TEST

/* ---- precision -------------------------------------------------------------- */

START_TEST(precision_weights_pair)
{
    /* measured: -6.1% (fp32 -> bf16) and +5.9% (bf16 -> fp32); the issue asks for 15% */
    double down = kernel_error(WEIGHTS "fp32.json.gz", WEIGHTS "bf16.json.gz", "precision", "dtype=bf16");
    double up = kernel_error(WEIGHTS "bf16.json.gz", WEIGHTS "fp32.json.gz", "precision", "dtype=fp32");
    ck_assert_msg(fabs(down) < 0.10 && fabs(up) < 0.10, "errors %+.3f %+.3f", down, up);
}
END_TEST

START_TEST(precision_nothing_to_cast)
{
    rv_graph *graph = load_trace(WEIGHTS "bf16.json.gz");
    GError *error = NULL;
    ck_assert(!apply_plugin(graph, "precision", "dtype=bf16", &error));
    ck_assert_msg(g_error_matches(error, RV_ERROR, RV_ERROR_PLUGIN) && strstr(error->message, "already bf16"), "%s",
                  error->message);
    g_error_free(error);
    rv_graph_free(graph);
}
END_TEST

/* GEMM kernels (by name and operator) of the recording, and their time. */
static int64_t gemm_ns(const rv_graph *graph, guint *count)
{
    int64_t total = 0;
    *count = 0;
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        if (!(task->flags & RV_TASK_FLAG_GPU) || (task->flags & (RV_TASK_FLAG_REMOVED | RV_TASK_FLAG_INSERTED))) continue;
        rv_cost_class cls = rv_cost_classify_name(rv_strings_get(graph->strings, task->name),
                                                  task->op > 0 ? rv_strings_get(graph->strings, task->op) : NULL,
                                                  (rv_task_kind)task->kind);
        if (cls != RV_COST_GEMM) continue;
        total += task->duration_ns;
        (*count)++;
    }
    return total;
}

/* fp8 on the H100 TimeSformer (bf16 inference): each GEMM on the fp8
 * Tensor Cores, twice the bf16 datasheet peak and half the bytes, so their
 * time falls by just under 2x (the fixed cost stays); a scaling kernel
 * before each, no scale update (no backward); other kernels as they were.
 * On the MI300X ResNet (training) a scale update per step. */
START_TEST(precision_fp8_matmuls_and_their_scaling)
{
    rv_graph *base = load_trace(TIMESFORMER "h100.json.gz"), *graph = rv_graph_copy(base);
    char *notes = apply_notes(graph, "precision", "dtype=fp8");
    ck_assert_msg(strstr(notes, "H100-SXM's fp8 matrix units (datasheet peaks)") != NULL, "%s", notes);
    g_free(notes);
    guint before_count = 0, after_count = 0;
    double ratio = (double)gemm_ns(base, &before_count) / (double)gemm_ns(graph, &after_count);
    g_printerr("precision:dtype=fp8 on the H100 TimeSformer: %u GEMMs %.3fx faster\n", before_count, ratio);
    ck_assert_uint_eq(before_count, after_count);
    ck_assert_msg(ratio > 1.6 && ratio < 2.0, "%.3fx", ratio);
    ck_assert_uint_eq(count_tasks_named(graph, "fp8 scaling"), before_count);
    ck_assert_uint_eq(count_tasks_named(graph, "scale update"), 0);
    ck_assert_int_lt(gpu_kernel_ns(graph), gpu_kernel_ns(base));  /* scaling included, the GPU does less */
    rv_graph_free(graph);
    rv_graph_free(base);

    graph = load_trace("tracelens_mi300x_resnet_act_checkpoint.json.gz");
    apply_ok(graph, "precision", "dtype=fp8");
    ck_assert_uint_eq(count_tasks_named(graph, "scale update"), graph->steps->len);
    rv_graph_free(graph);
}
END_TEST

/* int8 on the MI300X TimeSformer: GEMMs and convolutions, the weights in
 * one byte (a lower memory peak); refused where the units or an inference
 * trace are missing. */
START_TEST(precision_int8_and_refusals)
{
    rv_graph *base = load_trace(TIMESFORMER "mi300x.json.gz"), *graph = rv_graph_copy(base);
    char *notes = apply_notes(graph, "precision", "dtype=int8");
    ck_assert_msg(strstr(notes, "MI300X's int8 matrix units") != NULL && strstr(notes, "conv") != NULL, "%s", notes);
    g_free(notes);
    rv_memory_estimate before, after;
    ck_assert(rv_memory_estimate_graph(base, &before, NULL) && rv_memory_estimate_graph(graph, &after, NULL));
    ck_assert_int_lt(after.bytes[after.peak_phase][RV_MEM_WEIGHTS], before.bytes[before.peak_phase][RV_MEM_WEIGHTS]);
    rv_graph_free(graph);
    rv_graph_free(base);
    graph = load_trace("hta_resnet50_v100.json.gz");
    assert_apply_fails(graph, "precision", "dtype=fp8", RV_ERROR_PLUGIN, "V100-SXM2 has no fp8 matrix units");
    rv_graph_free(graph);
    graph = load_trace("tracelens_mi300x_resnet_act_checkpoint.json.gz");
    assert_apply_fails(graph, "precision", "dtype=int8", RV_ERROR_PLUGIN, "int8 is for inference");
    rv_graph_free(graph);
}
END_TEST

/* ---- amp ---------------------------------------------------------------------- */

/* A trace already under autocast, eager or compiled, whose GEMMs' names
 * say no dtype (cuBLAS's nvjet kernels) and whose optimizer's fp32 kernels
 * hold most of the named time: no change, no casts counted twice. */
#define ALREADY_BF16 "recorded/h100/vit_b16_amp_bf16.json.gz", "recorded/h200/gpt_amp_bf16.json.gz", \
                     "recorded/h200_compile/gpt_compiled.json.gz"

START_TEST(amp_on_half_precision_traces)
{
    static const char *const traces[] = { WEIGHTS "bf16.json.gz", TIMESFORMER "h100.json.gz", TIMESFORMER "mi300x.json.gz",
                                          ALREADY_BF16 };
    for (gsize i = 0; i < G_N_ELEMENTS(traces); i++) {
        double s = speedup(traces[i], "amp", "dtype=bf16");
        ck_assert_msg(s >= 0.98 && s <= 1.02, "%s: amp %.3fx on a bf16 trace", traces[i], s);
    }
}
END_TEST

START_TEST(amp_on_fp32_traces)
{
    double resnet = speedup("hta_resnet50_v100.json.gz", "amp", "");
    ck_assert_msg(resnet >= 1.2 && resnet <= 3.0, "hta_resnet50_v100 amp %.3fx", resnet);
    /* the A10G fp32 call: its GPU work shrinks, its host-bound step does not */
    rv_graph *graph = load_trace(WEIGHTS "fp32.json.gz");
    int64_t before = gpu_kernel_ns(graph);
    char *notes = apply_notes(graph, "amp", "dtype=bf16");
    ck_assert_msg(strstr(notes, "autocast to bf16 on A10G"), "%s", notes);
    ck_assert_int_lt(gpu_kernel_ns(graph), before * 3 / 4);
    g_free(notes);
    rv_graph_free(graph);
}
END_TEST

/* Autocast adds kernels and launches; fp16 adds GradScaler's, and its sync. */
START_TEST(amp_adds_casts_and_scaler)
{
    rv_graph *graph = load_trace("kineto_legacy_resnet50_v100.2steps.json.gz");
    int32_t before = rv_graph_live_task_count(graph);
    char *notes = apply_notes(graph, "amp", "");
    int32_t added = rv_graph_live_task_count(graph) - before;
    guint syncs = 0;
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++)
        syncs += strstr(rv_strings_get(graph->strings, rv_graph_task(graph, t)->name), "found_inf.item()") != NULL;
    ck_assert_msg(added > 200 && syncs == 2, "added %d tasks, %u syncs: %s", added, syncs, notes);
    g_free(notes);
    rv_graph_free(graph);
    graph = load_trace("kineto_legacy_resnet50_v100.2steps.json.gz");
    before = rv_graph_live_task_count(graph);
    apply_ok(graph, "amp", "dtype=bf16,casts=off");  /* bf16: no GradScaler; casts off: nothing added */
    ck_assert_int_eq(rv_graph_live_task_count(graph), before);
    rv_graph_free(graph);
}
END_TEST

/* ---- model-scale ------------------------------------------------------------ */

static int64_t class_ns(const rv_graph *graph, rv_cost_class cls)
{
    rv_gpu_catalogue *catalogue = rv_gpu_catalogue_load_default(NULL);
    const rv_gpu *gpu = rv_gpu_of_graph(catalogue, graph, NULL, "source_gpu", NULL);
    rv_cost_model *model = rv_cost_model_new(graph, gpu, FALSE);
    int64_t total = 0;
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_kernel_cost *cost = rv_cost_model_kernel(model, t);
        if (cost && cost->cls == cls) total += g_array_index(graph->tasks, rv_task, t).duration_ns;
    }
    rv_cost_model_free(model);
    rv_gpu_catalogue_free(catalogue);
    return total;
}

START_TEST(model_scale_operator_models)
{
    check_neutral(TIMESFORMER "h100.json.gz", "model-scale", "hidden=1,seq=1,batch=1,layers=1,heads=1");
    rv_graph *graph = load_trace(TIMESFORMER "h100.json.gz");
    int64_t gemm = class_ns(graph, RV_COST_GEMM), norm = class_ns(graph, RV_COST_NORM);
    apply_ok(graph, "model-scale", "hidden=2");
    double gemm_growth = (double)class_ns(graph, RV_COST_GEMM) / gemm, norm_growth = (double)class_ns(graph, RV_COST_NORM) / norm;
    /* GEMMs grow with H^2 (4x less what the fixed cost keeps), norms with H (2x) */
    ck_assert_msg(gemm_growth > 3.3 && gemm_growth <= 4.0 && norm_growth > 1.7 && norm_growth <= 2.0, "gemm x%.2f, norm x%.2f",
                  gemm_growth, norm_growth);
    rv_graph_free(graph);
    double layers = speedup(TIMESFORMER "h100.json.gz", "model-scale", "layers=2");
    ck_assert_msg(layers > 0.45 && layers < 0.56, "layers=2: %.3fx", layers);
}
END_TEST

int main(void)
{
    static const char *const traces[] = { TIMESFORMER "h100.json.gz", TIMESFORMER "mi300x.json.gz", BERT "h100.json.gz",
                                          BERT "mi300x.json.gz", WEIGHTS "fp32.json.gz",
                                          WEIGHTS "bf16.json.gz", "hta_resnet50_v100.json.gz",
                                          "kineto_legacy_resnet50_v100.2steps.json.gz",
                                          "pairs/dataloader_workers_v100/num_workers_0.json.gz", "hta_minitoy_mi250.json.gz",
                                          "tracelens_mi300x_resnet_act_checkpoint.json.gz", ALREADY_BF16, NULL };
    require_project_traces(traces);
    Suite *suite = suite_create("hardware");
    TCase *hardware = tcase_create("hardware");
    tcase_set_timeout(hardware, 300);
    tcase_add_test(hardware, hardware_h100_to_mi300x_and_back);
    tcase_add_test(hardware, hardware_v100_to_newer_gpus_is_faster);
    tcase_add_test(hardware, hardware_same_gpu_is_neutral);
    tcase_add_test(hardware, hardware_faster_gpu_helps_a_gpu_bound_step);
    tcase_add_test(hardware, hardware_errors);
    tcase_add_test(hardware, hardware_unknown_kernels_are_counted_not_scaled);
    suite_add_tcase(suite, hardware);
    TCase *precision = tcase_create("precision");
    tcase_set_timeout(precision, 300);
    tcase_add_test(precision, precision_weights_pair);
    tcase_add_test(precision, precision_nothing_to_cast);
    tcase_add_test(precision, precision_fp8_matmuls_and_their_scaling);
    tcase_add_test(precision, precision_int8_and_refusals);
    tcase_add_test(precision, amp_on_half_precision_traces);
    tcase_add_test(precision, amp_on_fp32_traces);
    tcase_add_test(precision, amp_adds_casts_and_scaler);
    tcase_add_test(precision, model_scale_operator_models);
    suite_add_tcase(suite, precision);
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed ? 1 : 0;
}
