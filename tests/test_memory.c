/*
 * test_memory.c - the memory model (memory.h) and the [memory] events it
 * reads.
 *
 * The recorded peaks are checked against a count this file makes itself
 * from the trace's JSON (jansson, not the importer); the estimate from
 * shapes against the recorded peak within the error measured on each
 * trace plus a margin (README, "Memory"); the output-shape rules on
 * worked examples; and absent or bad input must give one clear error.
 */
#include <check.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "reverie/error.h"
#include "reverie/graph.h"
#include "reverie/memory.h"
#include "reverie/compose.h"
#include "reverie/store.h"
#include "reverie/trace.h"
#include "plugin_harness.h"

static const char *const traces[] = {
    "pairs/gpu_h100_vs_mi300x_timesformer/h100.json.gz", "pairs/gpu_h100_vs_mi300x_timesformer/mi300x.json.gz",
    "gen_mlp_memory.json.gz", "hta_transformer_ddp_v100_rank1.2steps.json.gz", "hta_simple_add_small_a100.json.gz",
    "kineto_legacy_resnet50_v100.2steps.json.gz", "recorded/h200/gpt_checkpoint.json.gz",
    "recorded/h200/gpt_fp32.json.gz", "recorded/h200/convnext_tiny_checkpoint.json.gz",
    "recorded/h200/convnext_tiny_amp_bf16.json.gz", "recorded/h100/gpt_amp_bf16.json.gz",
    "recorded/h200/gpt_amp_bf16.json.gz", "recorded/h200/loader_workers0.json.gz", "recorded/h200_compile/gpt_compiled.json.gz",
    "recorded/h200_compile/resnet50_compiled.json.gz", NULL,
};

/* The trace's JSON, read with zlib and jansson only. */
static json_t *read_json(const char *name)
{
    char *path = project_trace_path(name);
    gzFile file = gzopen(path, "rb");
    ck_assert_ptr_nonnull(file);
    GString *text = g_string_new(NULL);
    char buffer[1 << 16];
    int got;
    while ((got = gzread(file, buffer, sizeof buffer)) > 0) g_string_append_len(text, buffer, got);
    gzclose(file);
    json_error_t json_error;
    json_t *root = json_loads(text->str, 0, &json_error);
    ck_assert_msg(root != NULL, "%s: %s", path, json_error.text);
    g_string_free(text, TRUE);
    g_free(path);
    return root;
}

typedef struct {
    int64_t allocated, reserved, events;
} independent_peak;

/* The highest totals of every device [memory] event (Device Type not 0). */
static independent_peak count_peak(const char *name)
{
    json_t *root = read_json(name);
    independent_peak peak = { -1, -1, 0 };
    json_t *events = json_object_get(root, "traceEvents"), *event;
    size_t i;
    json_array_foreach(events, i, event) {
        const char *event_name = json_string_value(json_object_get(event, "name"));
        if (event_name == NULL || strcmp(event_name, "[memory]") != 0) continue;
        json_t *args = json_object_get(event, "args");
        if (json_integer_value(json_object_get(args, "Device Type")) == 0) continue;
        peak.events++;
        peak.allocated = MAX(peak.allocated, json_integer_value(json_object_get(args, "Total Allocated")));
        peak.reserved = MAX(peak.reserved, json_integer_value(json_object_get(args, "Total Reserved")));
    }
    json_decref(root);
    return peak;
}

static void check_recorded(const char *name)
{
    rv_graph *graph = load_trace(name);
    independent_peak expected = count_peak(name);
    ck_assert_int_gt(expected.events, 0);
    int64_t allocated, reserved, events = 0;
    int32_t device, rank_index;
    ck_assert(rv_memory_recorded_peak(graph, &allocated, &reserved, &device, &rank_index));
    ck_assert_int_eq(allocated, expected.allocated);
    ck_assert_int_eq(reserved, expected.reserved);
    for (guint r = 0; r < graph->memory->len; r++)
        events += g_array_index(graph->memory, rv_memory_record, r).events;
    ck_assert_int_eq(events, expected.events);
    rv_graph_free(graph);
}

START_TEST(recorded_peak_matches_an_independent_count)
{
    check_recorded("pairs/gpu_h100_vs_mi300x_timesformer/h100.json.gz");
    check_recorded("pairs/gpu_h100_vs_mi300x_timesformer/mi300x.json.gz"); /* ROCm: Device Type 6 */
    check_recorded("hta_transformer_ddp_v100_rank1.2steps.json.gz");
    check_recorded("gen_mlp_memory.json.gz");
}
END_TEST

typedef struct {
    double ts;
    int64_t bytes;
} timed_bytes;

static gint by_time(gconstpointer a, gconstpointer b)
{
    const timed_bytes *x = a, *y = b;
    return (x->ts > y->ts) - (x->ts < y->ts);
}

/* The highest running sum of Bytes of the device events inside each
 * ProfilerStep annotation, in time order: what the step allocated above
 * its start (the legacy trace writes no totals). */
static int64_t count_above_start(const char *name)
{
    json_t *root = read_json(name);
    json_t *events = json_object_get(root, "traceEvents"), *event, *step;
    size_t i, k;
    int64_t most = 0;
    json_array_foreach(events, k, step) {
        const char *step_name = json_string_value(json_object_get(step, "name"));
        if (step_name == NULL || !g_str_has_prefix(step_name, "ProfilerStep#")) continue;
        double begin = json_number_value(json_object_get(step, "ts"));
        double end = begin + json_number_value(json_object_get(step, "dur"));
        GArray *samples = g_array_new(FALSE, FALSE, sizeof(timed_bytes));
        json_array_foreach(events, i, event) {
            const char *event_name = json_string_value(json_object_get(event, "name"));
            if (event_name == NULL || strcmp(event_name, "[memory]") != 0) continue;
            json_t *args = json_object_get(event, "args");
            double ts = json_number_value(json_object_get(event, "ts"));
            if (json_integer_value(json_object_get(args, "Device Type")) == 0 || ts < begin || ts > end) continue;
            timed_bytes sample = { ts, json_integer_value(json_object_get(args, "Bytes")) };
            g_array_append_val(samples, sample);
        }
        g_array_sort(samples, by_time);
        int64_t sum = 0;
        for (guint s = 0; s < samples->len; s++) {
            sum += g_array_index(samples, timed_bytes, s).bytes;
            most = MAX(most, sum);
        }
        g_array_unref(samples);
    }
    json_decref(root);
    return most;
}

/* A legacy trace: events without totals.  No absolute peak, but what each
 * step allocated above its start, against the count above. */
START_TEST(recorded_without_totals)
{
    const char *name = "kineto_legacy_resnet50_v100.2steps.json.gz";
    rv_graph *graph = load_trace(name);
    int64_t allocated, reserved, most = 0;
    int32_t device, rank_index;
    ck_assert(!rv_memory_recorded_peak(graph, &allocated, &reserved, &device, &rank_index));
    ck_assert_uint_gt(graph->memory->len, 0);
    for (guint r = 0; r < graph->memory->len; r++) {
        const rv_memory_record *record = &g_array_index(graph->memory, rv_memory_record, r);
        ck_assert_int_eq(record->peak_allocated, -1);
        if (record->step >= 0) most = MAX(most, record->peak_above_start);
    }
    int64_t expected = count_above_start(name);
    ck_assert_int_gt(expected, 0);
    ck_assert_int_eq(most, expected);
    /* the estimate's activations and workspace against it: measured +11.4% */
    rv_memory_estimate estimate;
    ck_assert(rv_memory_estimate_graph(graph, &estimate, NULL));
    ck_assert(estimate.training);
    int64_t own = estimate.bytes[estimate.peak_phase][RV_MEM_ACTIVATIONS] +
                  estimate.bytes[estimate.peak_phase][RV_MEM_WORKSPACE];
    double error = (double)own / (double)expected - 1.0;
    ck_assert_msg(error > 0 && error < 0.13, "ResNet-50 above-start error %.3f", error);
    rv_graph_free(graph);
}
END_TEST

/* The generator's weights exist before the first step: the records must
 * say so (allocated before step 1 = the weights, the outside-steps peak). */
START_TEST(recorded_per_step)
{
    rv_graph *graph = load_trace("gen_mlp_memory.json.gz");
    ck_assert_uint_eq(graph->steps->len, 3);
    int64_t outside = -1, before_first = -2;
    for (guint r = 0; r < graph->memory->len; r++) {
        const rv_memory_record *record = &g_array_index(graph->memory, rv_memory_record, r);
        if (record->step < 0) outside = record->peak_allocated;
        if (record->step == 0) before_first = record->allocated_before;
        ck_assert_int_ge(record->peak_reserved, record->peak_allocated);
    }
    ck_assert_int_gt(outside, 0);
    ck_assert_int_eq(outside, before_first);
    rv_graph_free(graph);
}
END_TEST

/* The estimate (into *estimate) against the trace's recorded peak. */
static double estimate_error(const char *name, rv_memory_estimate *estimate)
{
    rv_graph *graph = load_trace(name);
    GError *error = NULL;
    ck_assert_msg(rv_memory_estimate_graph(graph, estimate, &error), "%s", error ? error->message : "");
    int64_t allocated, reserved;
    int32_t device, rank_index;
    ck_assert(rv_memory_recorded_peak(graph, &allocated, &reserved, &device, &rank_index));
    int64_t sum = 0;
    for (int c = 0; c < RV_MEM_CATEGORY_COUNT; c++) sum += estimate->bytes[estimate->peak_phase][c];
    ck_assert_int_eq(sum, estimate->peak); /* the breakdown adds up */
    rv_graph_free(graph);
    return (double)estimate->peak / (double)allocated - 1.0;
}

/* Measured (README): -9.6% on H100 and -11.5% on MI300X (inference: the
 * peak is the weights, the input and the largest operator's tensors, and
 * the model misses the other tensors alive at that moment); the bound is
 * that plus 1.5 points.  The issue's target is 10%: MI300X misses it. */
START_TEST(estimate_on_the_real_pair)
{
    rv_memory_estimate estimate;
    double h100 = estimate_error("pairs/gpu_h100_vs_mi300x_timesformer/h100.json.gz", &estimate);
    ck_assert(!estimate.training);
    ck_assert_msg(h100 < 0 && h100 > -0.11, "H100 estimate error %.3f", h100);
    double mi300x = estimate_error("pairs/gpu_h100_vs_mi300x_timesformer/mi300x.json.gz", &estimate);
    ck_assert_msg(mi300x < 0 && mi300x > -0.13, "MI300X estimate error %.3f", mi300x);
}
END_TEST

/* Measured +2.2% on the generated training job (batch 8192: its peak is
 * in backward, with activations, gradients and Adam's states). */
START_TEST(estimate_on_the_generated_training_job)
{
    rv_memory_estimate estimate;
    double error = estimate_error("gen_mlp_memory.json.gz", &estimate);
    ck_assert(estimate.training);
    ck_assert_msg(error > 0 && error < 0.035, "generated estimate error %.3f", error);
}
END_TEST

/* Recorded arguments (Concrete Inputs, as op_args.c keeps them). */
#define STRIDE_2 "{\"stride\":[2,2],\"padding\":[1,1],\"dilation\":[1,1],\"transposed\":false,\"groups\":1}"
#define STEM "{\"stride\":[2,2],\"padding\":[3,3],\"dilation\":[1,1],\"transposed\":false,\"groups\":1}"
#define TRANSPOSED "{\"stride\":[2,2],\"padding\":[1,1],\"dilation\":[1,1],\"transposed\":true,\"output_padding\":[1,1],\"groups\":1}"
#define ONE_D "{\"stride\":[2],\"padding\":[1],\"dilation\":[1],\"transposed\":false,\"groups\":1}"
#define MAX_POOL "{\"pool\":\"window\",\"kernel\":[3,3],\"stride\":[2,2],\"padding\":[1,1],\"dilation\":[1,1],\"ceil_mode\":false}"
#define AVG_POOL_CEIL "{\"pool\":\"window\",\"kernel\":[2,2],\"stride\":[2,2],\"padding\":[0,0],\"dilation\":[1,1],\"ceil_mode\":true}"

START_TEST(output_shapes)
{
    static const struct { const char *op, *dims, *args; int64_t elements; } cases[] = {
        { "aten::linear", "[[8,16],[32,16],[32]]", NULL, 8 * 32 },
        { "aten::linear", "[[3136,8,768],[2304,768],[2304]]", NULL, (int64_t)3136 * 8 * 2304 },
        { "aten::addmm", "[[2304],[25096,768],[768,2304],[],[]]", NULL, (int64_t)25096 * 2304 },
        { "aten::matmul", "[[8,12,3137,64],[8,12,64,3137]]", NULL, (int64_t)8 * 12 * 3137 * 3137 },
        { "aten::matmul", "[[12,3137,64],[8,1,64,3137]]", NULL, (int64_t)8 * 12 * 3137 * 3137 }, /* broadcast */
        { "aten::conv2d", "[[128,3,224,224],[768,3,16,16],[768],[],[],[],[]]", NULL, (int64_t)128 * 768 * 14 * 14 }, /* patch embedding */
        { "aten::conv2d", "[[32,64,56,56],[64,64,3,3],[],[],[],[],[]]", NULL, (int64_t)32 * 64 * 56 * 56 }, /* stride 1 */
        /* with the recorded arguments: a stride-2 3x3 convolution halves
         * each side, a 7x7 stem with padding 3 likewise, a transposed one
         * doubles it; arguments for another number of dimensions are
         * ignored (stride 1) */
        { "aten::conv2d", "[[32,64,56,56],[128,64,3,3],[],[],[],[],[]]", STRIDE_2, 32 * 128 * 28 * 28 },
        { "aten::conv2d", "[[8,3,224,224],[64,3,7,7],[],[],[],[],[]]", STEM, 8 * 64 * 112 * 112 },
        { "aten::convolution", "[[4,64,16,16],[64,32,3,3],[],[],[],[],[],[],[]]", TRANSPOSED, 4 * 32 * 32 * 32 },
        { "aten::conv2d", "[[32,64,56,56],[64,64,3,3],[],[],[],[],[]]", ONE_D, 32 * 64 * 56 * 56 },
        /* a pool's recorded window: ResNet's 3x3 max pool at stride 2, its
         * final adaptive pool, and an avg_pool whose stride ([]) is its
         * kernel, in ceil mode (5 -> 3), batched and not; without the
         * record, the input's size */
        { "aten::max_pool2d", "[[32,64,112,112],[],[],[],[],[]]", MAX_POOL, 32 * 64 * 56 * 56 },
        { "aten::adaptive_avg_pool2d", "[[32,2048,7,7],[]]", "{\"pool\":\"adaptive\",\"output_size\":[1,1]}", 32 * 2048 },
        { "aten::avg_pool2d", "[[8,16,5,5],[],[],[],[],[],[]]", AVG_POOL_CEIL, 8 * 16 * 3 * 3 },
        { "aten::avg_pool2d", "[[16,5,5],[],[],[],[],[],[]]", AVG_POOL_CEIL, 16 * 3 * 3 },
        { "aten::max_pool2d", "[[32,64,112,112],[],[],[],[],[]]", NULL, 32 * 64 * 112 * 112 },
        { "aten::add_", "[[4,4],[4,4],[]]", NULL, 0 }, /* in place */
        { "aten::gelu", "[[4,5],[]]", NULL, 20 },
        { "aten::gelu", "not json", NULL, 0 },
        { NULL, "[[4]]", NULL, 0 },
    };
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++)
        ck_assert_msg(rv_memory_output_elements(cases[i].op, cases[i].dims, cases[i].args) == cases[i].elements,
                      "case %zu (%s %s): %" G_GINT64_FORMAT ", expected %" G_GINT64_FORMAT, i, cases[i].op ? cases[i].op : "(none)",
                      cases[i].dims, rv_memory_output_elements(cases[i].op, cases[i].dims, cases[i].args),
                      cases[i].elements);
}
END_TEST

START_TEST(absent_input)
{
    /* recorded without shapes: no estimate, one line saying why */
    rv_graph *graph = load_trace("hta_transformer_ddp_v100_rank1.2steps.json.gz");
    rv_memory_estimate estimate;
    GError *error = NULL;
    ck_assert(!rv_memory_estimate_graph(graph, &estimate, &error));
    ck_assert(error && error->domain == RV_ERROR && error->code == RV_ERROR_INPUT);
    ck_assert(strstr(error->message, "record_shapes=True") != NULL);
    ck_assert(strchr(error->message, '\n') == NULL);
    g_clear_error(&error);
    rv_graph_free(graph);
    /* recorded without profile_memory: no recorded peak */
    graph = load_trace("hta_simple_add_small_a100.json.gz");
    int64_t allocated = 0, reserved = 0;
    int32_t device = 0, rank_index = 0;
    ck_assert(!rv_memory_recorded_peak(graph, &allocated, &reserved, &device, &rank_index));
    ck_assert_uint_eq(graph->memory->len, 0);
    rv_graph_free(graph);
}
END_TEST

static void expect_import_error(const char *memory_args, const char *expected)
{
    char *text = g_strdup_printf(
        "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 1, "
        "\"tid\": 1, \"ts\": 10, \"dur\": 5, \"args\": {\"correlation\": 1}}, {\"ph\": \"i\", \"cat\": "
        "\"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\", \"pid\": 1, \"tid\": 1, \"ts\": 12, \"args\": {%s}}]}",
        memory_args);
    char *dir = g_dir_make_tmp("reverie-memory-XXXXXX", NULL);
    char *path = g_build_filename(dir, "bad.json", NULL);
    ck_assert(g_file_set_contents(path, text, -1, NULL));
    GError *error = NULL;
    rv_trace *trace = rv_trace_load(path, NULL, NULL, &error);
    ck_assert_ptr_null(trace);
    ck_assert(error && error->code == RV_ERROR_INPUT);
    ck_assert_msg(strstr(error->message, expected) != NULL, "%s", error->message);
    ck_assert(strchr(error->message, '\n') == NULL);
    g_error_free(error);
    g_unlink(path);
    g_rmdir(dir);
    g_free(path);
    g_free(dir);
    g_free(text);
}

START_TEST(bad_memory_events)
{
    expect_import_error("\"Device Type\": 1, \"Device Id\": 0, \"Bytes\": 4, \"Total Allocated\": {}",
                        "field \"Total Allocated\" must be an integer");
    expect_import_error("\"Device Type\": 1, \"Device Id\": 99999, \"Bytes\": 4", "\"Device Id\" is out of range");
    expect_import_error("\"Device Type\": 1, \"Device Id\": 0, \"Bytes\": 4, \"Total Reserved\": -7",
                        "\"Total Reserved\" is out of range");
}
END_TEST

/* What the records hold survives a save and a load. */
START_TEST(records_survive_the_store)
{
    rv_graph *graph = load_trace("pairs/gpu_h100_vs_mi300x_timesformer/mi300x.json.gz");
    char *dir = g_dir_make_tmp("reverie-memory-XXXXXX", NULL);
    char *path = g_build_filename(dir, "g.rvg", NULL);
    GError *error = NULL;
    ck_assert_msg(rv_store_save(graph, path, &error), "%s", error ? error->message : "");
    rv_graph *loaded = rv_store_load(path, &error);
    ck_assert_msg(loaded != NULL, "%s", error ? error->message : "");
    ck_assert_uint_eq(loaded->memory->len, graph->memory->len);
    ck_assert_uint_gt(loaded->memory->len, 0);
    for (guint i = 0; i < graph->memory->len; i++) { /* field by field: padding is not saved */
        const rv_memory_record *x = &g_array_index(graph->memory, rv_memory_record, i);
        const rv_memory_record *y = &g_array_index(loaded->memory, rv_memory_record, i);
        ck_assert(x->peak_allocated == y->peak_allocated && x->peak_reserved == y->peak_reserved &&
                  x->allocated_before == y->allocated_before && x->events == y->events &&
                  x->peak_above_start == y->peak_above_start && x->device == y->device && x->step == y->step &&
                  x->rank_index == y->rank_index);
    }
    rv_graph_free(loaded);
    rv_graph_free(graph);
    g_unlink(path);
    g_rmdir(dir);
    g_free(path);
    g_free(dir);
}
END_TEST

/* ---- what plugins did (memory.h's effects) ---------------------------------- */

#define RESNET "kineto_legacy_resnet50_v100.2steps.json.gz"

static rv_memory_estimate estimate_after(const char *trace, const char *plugin, const char *text)
{
    rv_graph *graph = load_trace(trace);
    if (plugin != NULL) apply_ok(graph, plugin, text);
    rv_memory_estimate estimate;
    GError *error = NULL;
    ck_assert_msg(rv_memory_estimate_graph(graph, &estimate, &error), "%s", error ? error->message : "");
    rv_graph_free(graph);
    return estimate;
}

static int64_t category_at_peak(const rv_memory_estimate *e, rv_memory_category c) { return e->bytes[e->peak_phase][c]; }

/* Checkpointing keeps fewer activations the more segments it recomputes,
 * and segments=1 recomputes nothing; weights and gradients do not move. */
START_TEST(checkpoint_lowers_the_peak)
{
    rv_memory_estimate base = estimate_after(RESNET, NULL, NULL);
    rv_memory_estimate one = estimate_after(RESNET, "checkpoint", "segments=1");
    ck_assert_int_eq(one.peak, base.peak);
    ck_assert_int_eq(one.recomputed, 0);
    int64_t previous = base.peak;
    static const char *const segments[] = { "segments=2", "segments=4", "segments=8", NULL };
    for (int i = 0; segments[i]; i++) {
        rv_memory_estimate cut = estimate_after(RESNET, "checkpoint", segments[i]);
        ck_assert_msg(cut.peak < previous, "%s: peak %" G_GINT64_FORMAT " not below %" G_GINT64_FORMAT, segments[i],
                      cut.peak, previous);
        ck_assert_int_gt(cut.recomputed, 0);
        ck_assert_int_eq(cut.bytes[RV_PHASE_BACKWARD][RV_MEM_WEIGHTS], base.bytes[RV_PHASE_BACKWARD][RV_MEM_WEIGHTS]);
        previous = cut.peak;
    }
}
END_TEST

/* A job recorded with checkpointing (torch.utils.checkpoint per block,
 * use_reentrant=False) keeps little of its forward; its backward shows the
 * recomputation, which the model reads.  Measured (docs/accuracy.md):
 * +4.7% on the decoder and -19.9% on ConvNeXt-Tiny, where reading it not
 * gave +34.5% and +160.8%; the bounds are those +-5 points.  The same jobs
 * recorded without checkpointing show no recomputation. */
START_TEST(recorded_checkpointing_is_read)
{
    static const struct { const char *checkpointed, *plain; double measured; } cases[] = {
        { "recorded/h200/gpt_checkpoint.json.gz", "recorded/h200/gpt_fp32.json.gz", 0.047 },
        { "recorded/h200/convnext_tiny_checkpoint.json.gz", "recorded/h200/convnext_tiny_amp_bf16.json.gz", -0.199 },
    };
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        rv_memory_estimate checkpointed, plain;
        double error = estimate_error(cases[i].checkpointed, &checkpointed);
        ck_assert_msg(checkpointed.recomputed > 0, "%s: no recomputation read", cases[i].checkpointed);
        ck_assert_msg(fabs(error - cases[i].measured) <= 0.05, "%s: estimate %+.1f%% of the recorded peak, measured %+.1f%%",
                      cases[i].checkpointed, 100 * error, 100 * cases[i].measured);
        estimate_error(cases[i].plain, &plain);
        ck_assert_msg(plain.recomputed == 0, "%s: recomputation read where there is none", cases[i].plain);
    }
}
END_TEST

/* The usual dtype is the forward kernels' by count: the decoder under
 * bf16 autocast holds bf16 activations on either GPU, though on the H100
 * its optimizer's fp32 kernels outlast the bf16 ones (a vote by kernel
 * time said fp32 there, +28.7% off the recorded peak); and a GPU what-if,
 * which rescales kernel times, moves neither the dtype nor the peak. */
START_TEST(usual_dtype_from_forward_kernels)
{
    rv_memory_estimate h100, h200;
    double error = estimate_error("recorded/h100/gpt_amp_bf16.json.gz", &h100);
    estimate_error("recorded/h200/gpt_amp_bf16.json.gz", &h200);
    ck_assert_int_eq(h100.element_bytes, 2);
    ck_assert_int_eq(h200.element_bytes, 2);
    ck_assert_msg(fabs(error) < 0.05, "H100 decoder: %+.1f%% of the recorded peak", 100 * error);
    rv_memory_estimate projected = estimate_after("recorded/h100/gpt_amp_bf16.json.gz", "hardware", "gpu=H200");
    ck_assert_int_eq(projected.element_bytes, h100.element_bytes);
    ck_assert_int_eq(projected.peak, h100.peak);
}
END_TEST

/* Input Dims carry no stride: ResNet-18's 7x7 stem convolution (input
 * [64, 3, 128, 128]) taken at stride 1 made the forward's largest
 * workspace [64, 64, 128, 128] fp32, 256 MiB, and the estimate +19.3%.
 * The batch norm after it reads [64, 64, 64, 64]: stride 2, 64 MiB, and
 * the estimate -9.9% (measured; bound +-5 points). */
START_TEST(conv_strides_from_their_consumers)
{
    rv_memory_estimate estimate;
    double error = estimate_error("recorded/h200/loader_workers0.json.gz", &estimate);
    ck_assert_int_eq(estimate.bytes[RV_PHASE_FORWARD][RV_MEM_WORKSPACE], (int64_t)64 * 64 * 64 * 64 * 4);
    ck_assert_msg(fabs(error + 0.099) <= 0.05, "estimate %+.1f%% of the recorded peak, measured -9.9%%", 100 * error);
}
END_TEST

/* Under torch.compile a Triton kernel's arguments are a fused chain's
 * inputs and outputs; the partitioner keeps one tensor of such a chain,
 * not all.  Counting every argument put the decoder at +8.1% and
 * ResNet-50 at +79.2% of their recorded peaks; one tensor per fusion gives
 * -1.7% and +23.8% (measured; bounds +-5 points). */
START_TEST(compiled_fusions_keep_one_tensor)
{
    static const struct { const char *trace; double measured; } cases[] = {
        { "recorded/h200_compile/gpt_compiled.json.gz", -0.017 },
        { "recorded/h200_compile/resnet50_compiled.json.gz", 0.238 },
    };
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        rv_memory_estimate estimate;
        double error = estimate_error(cases[i].trace, &estimate);
        ck_assert_msg(fabs(error - cases[i].measured) <= 0.05, "%s: estimate %+.1f%% of the recorded peak, measured %+.1f%%",
                      cases[i].trace, 100 * error, 100 * cases[i].measured);
    }
}
END_TEST

/* A batch twice as large doubles what is not a parameter, to rounding. */
START_TEST(batch_size_scales_activations)
{
    rv_memory_estimate base = estimate_after(RESNET, NULL, NULL);
    rv_memory_estimate twice = estimate_after(RESNET, "batch-size", "factor=2");
    for (int p = 0; p < RV_PHASE_COUNT; p++) {
        ck_assert_int_eq(twice.bytes[p][RV_MEM_WEIGHTS], base.bytes[p][RV_MEM_WEIGHTS]);
        ck_assert_int_eq(twice.bytes[p][RV_MEM_OPTIMIZER_STATE], base.bytes[p][RV_MEM_OPTIMIZER_STATE]);
    }
    int64_t before = base.bytes[RV_PHASE_FORWARD][RV_MEM_ACTIVATIONS];
    int64_t after = twice.bytes[RV_PHASE_FORWARD][RV_MEM_ACTIVATIONS];
    ck_assert_int_gt(before, 0);
    ck_assert_msg(llabs(after - 2 * before) <= 2 * (int64_t)base.shaped_ops, "activations %" G_GINT64_FORMAT
                  " -> %" G_GINT64_FORMAT, before, after);
    rv_memory_estimate same = estimate_after(RESNET, "grad-accumulation", "steps=4");
    ck_assert_int_eq(same.peak, base.peak); /* one micro-batch's tensors at a time */
}
END_TEST

/* A model cast to bf16 holds every tensor in half the bytes; amp halves
 * what its cast kernels' calls hold and keeps the fp32 weights. */
START_TEST(dtype_changes_the_bytes)
{
    rv_memory_estimate base = estimate_after(RESNET, NULL, NULL);
    rv_memory_estimate bf16 = estimate_after(RESNET, "precision", "dtype=bf16");
    ck_assert_msg(llabs(2 * bf16.peak - base.peak) <= 16 * (int64_t)base.shaped_ops, "peak %" G_GINT64_FORMAT
                  " -> %" G_GINT64_FORMAT, base.peak, bf16.peak);
    rv_memory_estimate amp = estimate_after(RESNET, "amp", "");
    ck_assert_int_lt(amp.peak, base.peak);
    ck_assert_int_gt(amp.peak, bf16.peak);
    ck_assert_int_eq(category_at_peak(&amp, RV_MEM_WEIGHTS), category_at_peak(&base, RV_MEM_WEIGHTS));
}
END_TEST

/* Gist keeps the ReLU outputs it encodes at their encoded size: the more
 * sparse, the lower the peak; binarize alone saves less than with SSDC. */
START_TEST(gist_lowers_the_peak)
{
    rv_memory_estimate base = estimate_after(RESNET, NULL, NULL);
    rv_memory_estimate gist = estimate_after(RESNET, "gist", "");
    rv_memory_estimate sparse = estimate_after(RESNET, "gist", "sparsity=0.9");
    rv_memory_estimate binarized = estimate_after(RESNET, "gist", "ssdc=off");
    ck_assert_int_lt(gist.peak, base.peak);
    ck_assert_int_lt(sparse.peak, gist.peak);
    ck_assert(binarized.peak < base.peak && binarized.peak > gist.peak);
    ck_assert_int_eq(category_at_peak(&gist, RV_MEM_WEIGHTS), category_at_peak(&base, RV_MEM_WEIGHTS));
}
END_TEST

/* Pipeline parallelism: each stage's GPU holds its layers' weights and the
 * activations of the micro-batches in flight there; 1F1B keeps fewer than
 * GPipe, more stages hold less each, and one stage keeps every
 * micro-batch's activations (the whole batch's) with a micro-batch's
 * workspace. */
START_TEST(pipeline_estimates_the_busiest_stage)
{
    rv_memory_estimate base = estimate_after(RESNET, NULL, NULL);
    rv_memory_estimate gpipe = estimate_after(RESNET, "pipeline", "stages=4,microbatches=8");
    rv_memory_estimate ofob = estimate_after(RESNET, "pipeline", "stages=4,microbatches=8,schedule=1f1b");
    rv_memory_estimate two = estimate_after(RESNET, "pipeline", "stages=2,microbatches=8");
    rv_memory_estimate one = estimate_after(RESNET, "pipeline", "stages=1,microbatches=4");
    ck_assert_int_eq(base.stages, 0);
    ck_assert_int_eq(base.stage, -1);
    ck_assert_int_eq(gpipe.stages, 4);
    ck_assert(gpipe.stage >= 0 && gpipe.stage < 4);
    ck_assert_uint_eq(gpipe.shaped_ops, base.shaped_ops); /* the moved calls are still read */
    ck_assert_int_lt(gpipe.peak, base.peak);
    ck_assert_int_lt(ofob.peak, gpipe.peak);
    ck_assert_int_lt(gpipe.peak, two.peak);
    ck_assert_int_lt(two.peak, base.peak);
    int64_t kept = base.bytes[RV_PHASE_FORWARD][RV_MEM_ACTIVATIONS];
    ck_assert_msg(llabs(one.bytes[RV_PHASE_FORWARD][RV_MEM_ACTIVATIONS] - kept) <= kept / 1000,
                  "one stage, 4 micro-batches in flight: %" G_GINT64_FORMAT " vs %" G_GINT64_FORMAT,
                  one.bytes[RV_PHASE_FORWARD][RV_MEM_ACTIVATIONS], kept);
    ck_assert_int_lt(one.bytes[RV_PHASE_FORWARD][RV_MEM_WORKSPACE], base.bytes[RV_PHASE_FORWARD][RV_MEM_WORKSPACE]);
}
END_TEST

/* CUDA Graphs removes the launch calls, not the kernels: the tensors stay. */
START_TEST(graph_launch_keeps_the_tensors)
{
    rv_memory_estimate base = estimate_after(RESNET, NULL, NULL);
    rv_memory_estimate graphed = estimate_after(RESNET, "cuda-graphs", "");
    ck_assert_int_eq(graphed.peak, base.peak);
    ck_assert_uint_eq(graphed.shaped_ops, base.shaped_ops);
}
END_TEST

/* A fusion moves work into another kernel: the fused operators' tensors
 * are still made and kept (metaflow's fuse, batchnorm-restructure's
 * ReLUs, fused-adam's optimizer kernels: its state stays), so the peak stays; cuda-graphs keeps it too (launches go, not
 * kernels). */
START_TEST(fusion_keeps_the_tensors)
{
    rv_memory_estimate base = estimate_after(RESNET, NULL, NULL);
    static const char *const plugins[][2] = { { "metaflow", "rules=conv-bn-relu" },
                                              { "metaflow", "rules=conv-bn-relu-train" },
                                              { "batchnorm-restructure", "" },
                                              { "fused-adam", "" } };
    for (gsize i = 0; i < G_N_ELEMENTS(plugins); i++) {
        rv_memory_estimate fused = estimate_after(RESNET, plugins[i][0], plugins[i][1]);
        ck_assert_msg(fused.peak == base.peak, "%s:%s moved the peak", plugins[i][0], plugins[i][1]);
        ck_assert_uint_eq(fused.shaped_ops, base.shaped_ops);
    }
}
END_TEST

/* rv_memory_estimate_unchanged is a shortcut, never a different answer:
 * where it says unchanged the full estimate is the baseline's; it says so
 * for time-only what-ifs and not for those that move tensors. */
START_TEST(unchanged_is_exact)
{
    static const struct { const char *plugin, *params; gboolean unchanged; } cases[] = {
        { "scale", "factor=0.5", TRUE },
        { "hardware", "gpu=H100", TRUE },
        { "amp", "model=daydream,compute_speedup=2,memory_speedup=1", FALSE },
        { "checkpoint", "segments=4", FALSE },
        { "gist", "", FALSE },
        { "vdnn", "", FALSE },
        { "batch-size", "factor=2", FALSE },
        { "cuda-graphs", "", FALSE },
    };
    rv_graph *baseline = load_trace(RESNET);
    rv_memory_estimate base;
    ck_assert(rv_memory_estimate_graph(baseline, &base, NULL));
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        rv_graph *variant = rv_graph_copy(baseline);
        apply_ok(variant, cases[i].plugin, cases[i].params);
        gboolean unchanged = rv_memory_estimate_unchanged(baseline, variant, base.element_bytes);
        ck_assert_msg(unchanged == cases[i].unchanged, "%s: unchanged %d", cases[i].plugin, unchanged);
        rv_memory_estimate full;
        ck_assert(rv_memory_estimate_graph(variant, &full, NULL));
        if (unchanged) ck_assert_int_eq(full.peak, base.peak);
        rv_graph_free(variant);
    }
    rv_graph_free(baseline);
}
END_TEST

/* rv_memory_durations_only_unchanged, the sweep's shortcut from the
 * plugins' declarations, is never a different answer either: where it says
 * unchanged the full estimate is the baseline's.  The baseline names two
 * dtypes (every other kernel renamed to a half-precision one), and one
 * dtype's kernels made 1000 times as long must not move the usual dtype
 * (it is the tensors', not the kernels' time: a GPU what-if rescales
 * kernel times); a plugin that declared nothing or one that rewrites never
 * takes the shortcut. */
static void scale_kernels(rv_graph *graph, gboolean half, int64_t factor, GHashTable *renamed)
{
    for (guint t = 0; t < graph->tasks->len; t++) {
        rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        if (task->kind == RV_TASK_KERNEL && (g_hash_table_contains(renamed, GUINT_TO_POINTER(t + 1)) == half))
            task->duration_ns *= factor;
    }
}

START_TEST(durations_only_is_exact)
{
    static const rv_plugin_effects scales = { .scales = RV_ASPECT_TASKS, .order = RV_ORDER(RV_STAGE_ADJUST, 10) };
    rv_graph *baseline = load_trace(RESNET);
    GHashTable *renamed = g_hash_table_new(g_direct_hash, g_direct_equal);
    int32_t half_name = rv_strings_intern(baseline->strings, "volta_fp16_hgemm_half_kernel");
    guint kernels = 0;
    for (guint t = 0; t < baseline->tasks->len; t++) {
        rv_task *task = &g_array_index(baseline->tasks, rv_task, t);
        if (task->kind != RV_TASK_KERNEL || kernels++ % 2) continue;
        task->name = half_name;
        g_hash_table_add(renamed, GUINT_TO_POINTER(t + 1));
    }
    rv_memory_estimate base;
    ck_assert(rv_memory_estimate_graph(baseline, &base, NULL));
    rv_memory_durations_only *kept = rv_memory_durations_only_new(baseline, base.element_bytes);
    for (int c = 0; c < 6; c++) {
        rv_graph *variant = rv_graph_copy(baseline);
        if (c == 0) apply_ok(variant, "scale", "factor=0.5");
        if (c == 1 || c == 2) { /* one dtype's kernels 1000 times as long: the usual dtype stays */
            scale_kernels(variant, c == 1, 1000, renamed);
            rv_compose_record(variant, "scale", &scales);
        }
        if (c == 3) { /* the same change, declared by no one */
            scale_kernels(variant, TRUE, 2, renamed);
            rv_compose_record(variant, "undeclared", NULL);
        }
        if (c == 4) apply_ok(variant, "checkpoint", "segments=4");
        if (c == 5) { apply_ok(variant, "batch-size", "factor=2"); apply_ok(variant, "scale", "factor=0.5"); }
        gboolean shortcut = rv_memory_durations_only_unchanged(kept, baseline, variant);
        rv_memory_estimate full;
        ck_assert(rv_memory_estimate_graph(variant, &full, NULL));
        if (c <= 2) ck_assert_msg(shortcut, "case %d (durations only) should take the shortcut", c);
        if (c >= 3) ck_assert_msg(!shortcut, "case %d should not take the shortcut", c);
        if (shortcut) {
            ck_assert_int_eq(full.peak, base.peak);
            ck_assert_int_eq(full.element_bytes, base.element_bytes);
        }
        rv_graph_free(variant);
    }
    rv_memory_durations_only_free(kept);
    g_hash_table_destroy(renamed);
    rv_graph_free(baseline);
}
END_TEST

/* Effects by hand: a kept-activation scale of 0 on every call leaves no
 * activation after forward; a recomputed call holds its bytes again only
 * in its own segment. */
START_TEST(effects_by_hand)
{
    rv_graph *graph = load_trace(RESNET);
    rv_memory_estimate base, none;
    ck_assert(rv_memory_estimate_graph(graph, &base, NULL));
    rv_memory_effect_add(graph, -1, RV_MEM_EFFECT_KEPT_SCALE, 0.0, 0);
    rv_memory_effect_add(graph, -1, RV_MEM_EFFECT_KEPT_SCALE, NAN, 0);  /* ignored */
    ck_assert_uint_eq(graph->memory_effects->len, 1);
    ck_assert(rv_memory_estimate_graph(graph, &none, NULL));
    ck_assert_int_gt(base.bytes[RV_PHASE_FORWARD][RV_MEM_ACTIVATIONS], 0);
    ck_assert_int_eq(none.bytes[RV_PHASE_FORWARD][RV_MEM_ACTIVATIONS], 0);
    ck_assert_int_lt(none.peak, base.peak);
    rv_graph *copy = rv_graph_copy(graph); /* effects travel with a copy */
    ck_assert_uint_eq(copy->memory_effects->len, 1);
    rv_graph_free(copy);
    rv_graph_free(graph);
}
END_TEST

int main(void)
{
    require_project_traces(traces);
    Suite *suite = suite_create("memory");
    TCase *recorded = tcase_create("recorded");
    tcase_set_timeout(recorded, 300);
    tcase_add_test(recorded, recorded_peak_matches_an_independent_count);
    tcase_add_test(recorded, recorded_per_step);
    tcase_add_test(recorded, recorded_without_totals);
    tcase_add_test(recorded, records_survive_the_store);
    tcase_add_test(recorded, bad_memory_events);
    suite_add_tcase(suite, recorded);
    TCase *estimate = tcase_create("estimate");
    tcase_set_timeout(estimate, 300);
    tcase_add_test(estimate, estimate_on_the_real_pair);
    tcase_add_test(estimate, estimate_on_the_generated_training_job);
    tcase_add_test(estimate, output_shapes);
    tcase_add_test(estimate, absent_input);
    tcase_add_test(estimate, recorded_checkpointing_is_read);
    tcase_add_test(estimate, usual_dtype_from_forward_kernels);
    tcase_add_test(estimate, conv_strides_from_their_consumers);
    tcase_add_test(estimate, compiled_fusions_keep_one_tensor);
    suite_add_tcase(suite, estimate);
    TCase *effects = tcase_create("effects");
    tcase_set_timeout(effects, 300);
    tcase_add_test(effects, checkpoint_lowers_the_peak);
    tcase_add_test(effects, batch_size_scales_activations);
    tcase_add_test(effects, dtype_changes_the_bytes);
    tcase_add_test(effects, graph_launch_keeps_the_tensors);
    tcase_add_test(effects, gist_lowers_the_peak);
    tcase_add_test(effects, pipeline_estimates_the_busiest_stage);
    tcase_add_test(effects, effects_by_hand);
    tcase_add_test(effects, unchanged_is_exact);
    tcase_add_test(effects, durations_only_is_exact);
    tcase_add_test(effects, fusion_keeps_the_tensors);
    suite_add_tcase(suite, effects);
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed ? 1 : 0;
}
