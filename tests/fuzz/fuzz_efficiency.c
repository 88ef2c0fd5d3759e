/*
 * fuzz_efficiency.c - libFuzzer harness for the GPU efficiency tables
 * (src/model/efficiency.c): the files `reverie calibrate` writes and
 * hardware:gpu=NAME,efficiency=FILE (or REVERIE_EFFICIENCY) reads.
 *
 * Each input is written to a file and read the two ways the tool reads a
 * table: rv_efficiency_table_load (calibrate --from), and
 * rv_efficiency_views_open (the hardware projection, `kernels --target`),
 * for four moves between GPUs of data/gpus.json chosen so that every rule
 * of the projection runs: H100-SXM to H200 (the same SMs), to MI300X
 * (another vendor), MI300X back to H100-SXM, and A100-40GB to V100-SXM2
 * (one vendor, other SMs).  On a table that is accepted it does what a
 * projection and a listing do: the listing and the file written back
 * (which must be read again as the same table), each view's fixed cost,
 * pair ratio and idle gap, both GPUs' efficiencies for every bucket
 * (class, unit, variant, decade), and the cost plan of a small job (nine
 * shaped kernels of seven classes, built at start-up) applied to a copy
 * of it.
 *
 * It aborts on any sanitizer report and when a promise breaks:
 *   - a refused table fails with anything but one RV_ERROR_INPUT line,
 *     free of control characters, that names the file (the two entries
 *     must agree on refusing);
 *   - an accepted table, written back, is refused or reads differently;
 *   - a figure a view gives is not finite, or lies outside its own range
 *     (a fixed cost or idle gap below 0, an efficiency or pair ratio not
 *     above 0);
 *   - a planned time is NaN, or a re-costed one is not finite or lies
 *     outside its range; applying the plan fails other than in one line.
 *
 * Byte mutations rarely turn a table's 532 into 1e12 without breaking
 * the JSON (300 s of them found none of the bugs in figures), so half the
 * mutations parse the input and change one value as a careless or hostile
 * writer would: a number to an extreme (0, a denormal, 2^32, 10^15, a
 * fraction, a sign), a value to another type, a key or element dropped or
 * repeated (duplicate recordings and GPUs), two elements swapped
 * (unsorted job_members), a recording moved to another GPU or given
 * another's job signature (new pairs).  replay.c runs the inputs alone.
 * The GPU catalogue is REVERIE_GPU_CATALOGUE's (run_all.sh and meson set
 * it to data/gpus.json).  Build and run: tests/fuzz/run_all.sh.
 */
#include "reverie/costmodel.h"
#include "reverie/efficiency.h"
#include "reverie/error.h"
#include "reverie/escape.h"
#include "reverie/gpus.h"
#include "reverie/graph.h"
#include "reverie/trace.h"

#include <glib.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The decades a bucket lookup tries: the loader takes 0 to 60. */
#define DECADES 62

static void fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_efficiency: %s: %s\n", what, detail ? detail : "");
    abort();
}

/* ---- the job projected: nine kernels of an H100 recording ------------- */

/* Operator, its Input Dims and Input type, the kernel, its duration (us)
 * and grid: a small and a large GEMM, a convolution, fused attention, two
 * additions (in and out of the H100's cache), a layer norm, a sum and a
 * copy, so that the plan looks up buckets of most classes and sizes. */
static const struct {
    const char *op, *dims, *types, *kernel;
    double us;
    int grid;
} job_kernels[] = {
    { "aten::addmm", "[[512],[141,512],[512,512],[],[]]", "[\"c10::BFloat16\",\"c10::BFloat16\",\"c10::BFloat16\"]",
      "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
      9, 30 },
    { "aten::addmm", "[[30522],[141,512],[512,30522],[],[]]",
      "[\"c10::BFloat16\",\"c10::BFloat16\",\"c10::BFloat16\"]",
      "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
      35, 478 },
    { "aten::cudnn_convolution", "[[32,64,56,56],[64,64,3,3],[],[],[],[],[]]",
      "[\"c10::BFloat16\",\"c10::BFloat16\"]",
      "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_g1_"
      "execute_kernel__5x_cudnn", 60, 392 },
    { "aten::_flash_attention_forward", "[[1,141,8,64],[1,141,8,64],[1,141,8,64]]",
      "[\"c10::BFloat16\",\"c10::BFloat16\",\"c10::BFloat16\"]",
      "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, "
      "cutlass::bfloat16_t> >(pytorch_flash::Flash_fwd_params)", 10, 16 },
    { "aten::add", "[[1,141,512],[1,141,512],[]]", "[\"c10::BFloat16\",\"c10::BFloat16\",\"Scalar\"]",
      "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
      "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)", 2, 141 },
    { "aten::add", "[[64,1024,1024],[64,1024,1024],[]]", "[\"c10::BFloat16\",\"c10::BFloat16\",\"Scalar\"]",
      "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
      "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)", 300, 65536 },
    { "aten::native_layer_norm", "[[1,141,512],[],[512],[512],[]]", "[\"c10::BFloat16\"]",
      "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, "
      "c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)", 3.2, 141 },
    { "aten::sum", "[[64,1024,1024],[],[],[]]", "[\"float\"]",
      "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
      "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
      "unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
      "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
      "unsigned int, float, 4>)", 150, 132 },
    { "aten::copy_", "[[1,141,512],[1,141,512],[]]", "[\"float\",\"c10::BFloat16\",\"Scalar\"]",
      "void at::native::vectorized_elementwise_kernel<4, at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)"
      "::{lambda()#1}::operator()() const::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, "
      "std::array<char*, 2ul> >(int, at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#1}"
      "::operator()() const::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)",
      2.5, 141 },
};

static char *job_trace(void)
{
    GString *json = g_string_new("{\"deviceProperties\": [{\"id\": 0, \"name\": \"NVIDIA H100 80GB HBM3\"}], "
                                 "\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": "
                                 "\"ProfilerStep#1\", \"pid\": 1, \"tid\": 1, \"ts\": 0, \"dur\": 2000}");
    int ts = 10;
    for (guint i = 0; i < G_N_ELEMENTS(job_kernels); i++) {
        g_string_append_printf(json, ", {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"%s\", \"pid\": 1, \"tid\": 1, "
                               "\"ts\": %d, \"dur\": 20, \"args\": {\"External id\": %u, \"Input Dims\": %s, "
                               "\"Input type\": %s}}", job_kernels[i].op, ts, i + 1, job_kernels[i].dims,
                               job_kernels[i].types);
        g_string_append_printf(json, ", {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", "
                               "\"pid\": 1, \"tid\": 1, \"ts\": %d, \"dur\": 5, \"args\": {\"correlation\": %u, "
                               "\"External id\": %u}}", ts + 5, 100 + i, i + 1);
        g_string_append_printf(json, ", {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"%s\", \"pid\": 0, \"tid\": 7, "
                               "\"ts\": %d, \"dur\": %.1f, \"args\": {\"stream\": 7, \"device\": 0, \"correlation\": %u, "
                               "\"External id\": %u, \"grid\": [%d, 1, 1], \"block\": [128, 1, 1]}}",
                               job_kernels[i].kernel, ts + 12, job_kernels[i].us, 100 + i, i + 1, job_kernels[i].grid);
        ts += (int)job_kernels[i].us + 30;
    }
    g_string_append(json, "]}");
    return g_string_free(json, FALSE);
}

/* ---- start-up: the catalogue, the job, one cost model per move ---------- */

typedef struct {
    const char *from, *to;
    const rv_gpu *source, *target;
    rv_cost_model *model;
} move;

static move moves[] = {
    { "H100-SXM", "H200", NULL, NULL, NULL },
    { "H100-SXM", "MI300X", NULL, NULL, NULL },
    { "MI300X", "H100-SXM", NULL, NULL, NULL },
    { "A100-40GB", "V100-SXM2", NULL, NULL, NULL },
};

static char *table_file, *written_file;
static rv_gpu_catalogue *catalogue;
static rv_graph *job;

static char *temporary_file(const char *pattern)
{
    char *path = NULL;
    int fd = g_file_open_tmp(pattern, &path, NULL);
    if (fd < 0) fail("no temporary file", pattern);
    close(fd);
    return path;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    GError *error = NULL;
    catalogue = rv_gpu_catalogue_load_default(&error);
    if (catalogue == NULL) fail("no GPU catalogue (set REVERIE_GPU_CATALOGUE to data/gpus.json)", error->message);
    char *trace_file = temporary_file("fuzz-efficiency-job-XXXXXX.json"), *text = job_trace();
    if (!g_file_set_contents(trace_file, text, -1, NULL)) fail("cannot write", trace_file);
    rv_trace *trace = rv_trace_load(trace_file, NULL, NULL, &error);
    job = trace ? rv_graph_build(trace, &error) : NULL;
    if (job == NULL) fail("the job", error ? error->message : NULL);
    rv_trace_free(trace);
    unlink(trace_file);
    g_free(trace_file);
    g_free(text);
    for (guint m = 0; m < G_N_ELEMENTS(moves); m++) {
        moves[m].source = rv_gpu_find(catalogue, moves[m].from, &error);
        moves[m].target = rv_gpu_find(catalogue, moves[m].to, &error);
        if (moves[m].source == NULL || moves[m].target == NULL) fail("a GPU the catalogue lacks", error->message);
        moves[m].model = rv_cost_model_new(job, moves[m].source, FALSE);
    }
    table_file = temporary_file("fuzz-efficiency-XXXXXX.json");
    written_file = temporary_file("fuzz-efficiency-written-XXXXXX.json");
    return 0;
}

/* Write the bytes (g_file_set_contents would fsync each input: a fifth of the time). */
static void write_file(const char *path, const void *data, size_t size)
{
    FILE *file = fopen(path, "wb");
    if (file == NULL || fwrite(data, 1, size, file) != size || fclose(file) != 0) fail("cannot write", path);
}

/* ---- the promises -------------------------------------------------------- */

/* One RV_ERROR_INPUT line with no control character, naming the file. */
static void check_refusal(const GError *error, const char *path, const char *entry)
{
    if (error == NULL) fail(entry, "refused without an error");
    if (error->domain != RV_ERROR || error->code != RV_ERROR_INPUT) fail(entry, "refused without RV_ERROR_INPUT");
    if (rv_text_needs_escape(error->message)) fail("refused in more than one clean line", error->message);
    if (strstr(error->message, path) == NULL) fail("refused without naming the file", error->message);
}

/* value finite and inside its finite range [low, high], low at least 0;
 * above 0 where it divides or multiplies a time (`positive`). */
static void check_range(const char *what, double value, double low, double high, gboolean positive)
{
    if (!isfinite(value) || !isfinite(low) || !isfinite(high) || low > value || value > high || low < 0 ||
        (positive && value <= 0)) {
        char *detail = g_strdup_printf("%g in [%g, %g]", value, low, high);
        fail(what, detail);
    }
}

/* What a listing (calibrate) reads, and the file it writes, read back as the same table. */
static void check_table(rv_efficiency_table *table)
{
    for (guint i = 0; i < rv_efficiency_table_count(table); i++) {
        rv_efficiency_recording r = rv_efficiency_table_recording(table, i);
        if (r.gpu == NULL || r.label == NULL || r.sha256 == NULL) fail("a recording without its names", NULL);
        if (!isfinite(r.kernel_ns) || !isfinite(r.fixed_ns) || !isfinite(r.gap_ns)) fail("a listing not finite", r.label);
    }
    char *text = rv_efficiency_table_to_json(table);
    write_file(written_file, text, strlen(text));
    GError *error = NULL;
    rv_efficiency_table *again = rv_efficiency_table_load(written_file, &error);
    if (again == NULL) fail("the table written back is refused", error->message);
    char *text_again = rv_efficiency_table_to_json(again);
    if (strcmp(text, text_again) != 0) fail("the table written back reads differently", text_again);
    g_free(text_again);
    rv_efficiency_table_free(again);
    g_free(text);
}

static void check_views(const rv_efficiency_views *views)
{
    char *labels = rv_gpu_efficiency_labels(views->target);
    g_free(labels);
    double value, low, high;
    guint pairs = 0;
    if (rv_gpu_efficiency_fixed(views->target, &value, &low, &high)) check_range("a fixed cost", value, low, high, FALSE);
    if (rv_efficiency_fixed_ratio(views->source, views->target, &value, &low, &high, &pairs))
        check_range("a pair ratio of fixed costs", value, low, high, TRUE);
    if (rv_gpu_efficiency_gap(views->target, &value)) check_range("an idle gap", value, value, value, FALSE);
    for (int cls = 0; cls < RV_COST_CLASS_COUNT; cls++)
        for (int unit = 0; unit <= RV_UNIT_MATRIX; unit++)
            for (int variant = 0; variant < RV_BUCKET_VARIANT_COUNT; variant++)
                for (int decade = 0; decade < DECADES; decade++) {
                    rv_cost_bucket bucket = { (uint8_t)cls, (uint8_t)unit, (uint8_t)variant, (int8_t)decade };
                    rv_efficiency_pair pair;
                    if (!rv_efficiency_bucket_ratio(views->source, views->target, bucket, bucket, &pair)) continue;
                    check_range("a source efficiency", pair.source, pair.source_low, pair.source_high, TRUE);
                    check_range("a target efficiency", pair.target, pair.target_low, pair.target_high, TRUE);
                }
}

/* The hardware plugin's change (optimizations/hardware.c), at scale 1. */
static gboolean retarget(const rv_graph *graph, int32_t task, const rv_kernel_cost *cost, rv_cost_change *change,
                         gpointer data)
{
    (void)graph;
    (void)task;
    const move *m = ((const void **)data)[0];
    const rv_efficiency_views *views = ((const void **)data)[1];
    change->gpu = m->target;
    if (rv_cost_gains_tf32(m->source, m->target, cost, "conv")) change->dtype = RV_DTYPE_TF32;
    change->source_efficiency = views->source;
    change->target_efficiency = views->target;
    return TRUE;
}

static void check_plan(const move *m, const rv_efficiency_views *views)
{
    const void *data[] = { m, views };
    rv_cost_plan *plan = rv_cost_model_plan(m->model, retarget, data);
    for (guint t = 0; t < plan->new_ns->len; t++) {
        double ns = g_array_index(plan->new_ns, double, t);
        if (isnan(ns)) fail("a planned time is NaN", m->to);
        if (ns >= 0) check_range("a planned time", ns, g_array_index(plan->low_ns, double, t),
                                 g_array_index(plan->high_ns, double, t), FALSE);
    }
    GString *described = g_string_new(NULL);
    rv_cost_plan_describe(plan, "  ", described);
    g_string_free(described, TRUE);
    rv_graph *copy = rv_graph_copy(job);
    GError *error = NULL;
    if (!rv_cost_plan_apply(copy, plan, "the hardware parameters", &error) &&
        (error == NULL || strchr(error->message, '\n') != NULL))
        fail("a plan applied without one line", error ? error->message : "(no error)");
    g_clear_error(&error);
    rv_graph_free(copy);
    rv_cost_plan_free(plan);
}

/* Each move's views: the first through rv_efficiency_views_open, as the
 * hardware plugin opens them (which reads the file again and must agree
 * with rv_efficiency_table_load); the others from the table already read,
 * as views_open makes them (a view per GPU without this job, then paired),
 * so that an input is parsed three times, not six. */
static gboolean open_views(guint m, rv_efficiency_table *table, rv_efficiency_views *views)
{
    if (m == 0) {
        GError *error = NULL;
        gboolean opened = rv_efficiency_views_open(views, table_file, job, moves[m].source, moves[m].target, &error);
        if (opened != (table != NULL)) fail("the two entries disagree on the table", table_file);
        if (!opened) check_refusal(error, table_file, "rv_efficiency_views_open");
        g_clear_error(&error);
        return opened;
    }
    memset(views, 0, sizeof *views);
    views->excluded = g_ptr_array_new_with_free_func(g_free);
    views->source = rv_efficiency_for_gpu(table, moves[m].source->id, job, views->excluded);
    views->target = rv_efficiency_for_gpu(table, moves[m].target->id, job, views->excluded);
    rv_efficiency_pair_views(views->source, views->target);
    return TRUE;
}

/* ---- mutations that keep the JSON --------------------------------------- */

/* libFuzzer's own mutation; absent (NULL) in replay.c's builds, which never mutate. */
__attribute__((weak)) size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

typedef struct {
    json_t *parent;  /* an object or an array */
    char *key;       /* in an object; NULL in an array */
    size_t index;    /* in an array */
    json_t *value;
} node;

static void node_free(gpointer data)
{
    node *n = data;
    g_free(n->key);
    g_free(n);
}

static void collect(json_t *value, GPtrArray *nodes)
{
    const char *key;
    size_t index;
    json_t *child;
    if (json_is_object(value)) json_object_foreach(value, key, child) {
            node *n = g_new0(node, 1);
            *n = (node){ value, g_strdup(key), 0, child };
            g_ptr_array_add(nodes, n);
            collect(child, nodes);
        }
    if (json_is_array(value)) json_array_foreach(value, index, child) {
            node *n = g_new0(node, 1);
            *n = (node){ value, NULL, index, child };
            g_ptr_array_add(nodes, n);
            collect(child, nodes);
        }
}

static void replace(const node *n, json_t *value)
{
    if (n->key) json_object_set_new(n->parent, n->key, value);
    else json_array_set_new(n->parent, n->index, value);
}

/* A node whose key is `key`, or NULL. */
static const node *node_with_key(GPtrArray *nodes, const char *key, GRand *rand)
{
    GPtrArray *found = g_ptr_array_new();
    for (guint i = 0; i < nodes->len; i++) {
        const node *n = g_ptr_array_index(nodes, i);
        if (n->key && strcmp(n->key, key) == 0) g_ptr_array_add(found, (gpointer)n);
    }
    const node *n = found->len ? g_ptr_array_index(found, g_rand_int_range(rand, 0, (gint32)found->len)) : NULL;
    g_ptr_array_free(found, TRUE);
    return n;
}

/* Change one value of the table; FALSE when there was nothing to change. */
static gboolean mutate_table(json_t *root, GRand *rand)
{
    static const double extremes[] = { 0, -0.0, -1, 5e-324, 1e-320, 1e-300, 9.99e-13, 1e-12, 1e-3, 0.5, 1, 1.0000001,
                                       2.5, 3, 4, 4.000001, 60, 61, 1e6, 1e9, 4294967295.0, 4294967296.0, 1e12, 1e15,
                                       1.1e15, 1e300, 1.7e308 };
    static const char *const gpus[] = { "H100-SXM", "H200", "MI300X", "A100-40GB", "V100-SXM2", "B200" };
    GPtrArray *nodes = g_ptr_array_new_with_free_func(node_free);
    collect(root, nodes);
    gboolean changed = nodes->len > 0;
    if (changed) {
        const node *n = g_ptr_array_index(nodes, g_rand_int_range(rand, 0, (gint32)nodes->len));
        const node *other;
        size_t size = json_is_array(n->parent) ? json_array_size(n->parent) : 0;
        switch (g_rand_int_range(rand, 0, 8)) {
        case 0: /* a number to an extreme, or scaled by a power of ten */
            if (g_rand_boolean(rand)) replace(n, json_real(extremes[g_rand_int_range(rand, 0, G_N_ELEMENTS(extremes))]));
            else if (json_is_number(n->value))
                replace(n, json_real(json_number_value(n->value) * pow(10, g_rand_int_range(rand, -15, 16))));
            break;
        case 1: { /* a whole number at a limit */
            static const json_int_t whole[] = { 0, 1, 2, 3, -1, 1000000000, 4294967295LL, 4294967296LL, INT64_MAX };
            replace(n, json_integer(whole[g_rand_int_range(rand, 0, G_N_ELEMENTS(whole))]));
            break;
        }
        case 2: { /* another type */
            json_t *others[] = { json_null(), json_true(), json_array(), json_object(), json_string(""),
                                 json_string("x\n\033[2J") };
            int pick = g_rand_int_range(rand, 0, G_N_ELEMENTS(others));
            for (int i = 0; i < (int)G_N_ELEMENTS(others); i++)
                if (i == pick) replace(n, others[i]);
                else json_decref(others[i]);
            break;
        }
        case 3: /* dropped */
            if (n->key) json_object_del(n->parent, n->key);
            else json_array_remove(n->parent, n->index);
            break;
        case 4: /* repeated: two recordings of one GPU or one file, a bucket twice */
            if (size) json_array_insert_new(n->parent, n->index, json_deep_copy(n->value));
            break;
        case 5: /* swapped with a neighbour: unsorted members */
            if (size >= 2) {
                size_t to = (n->index + 1) % size;
                json_t *moved = json_incref(n->value);
                json_array_set(n->parent, n->index, json_array_get(n->parent, to));
                json_array_set_new(n->parent, to, moved);
            }
            break;
        case 6: /* a recording on another GPU */
            if ((other = node_with_key(nodes, "gpu", rand)) != NULL)
                replace(other, json_string(gpus[g_rand_int_range(rand, 0, G_N_ELEMENTS(gpus))]));
            break;
        default: /* a recording given another's job: a new pair, or a job left out */
            if ((other = node_with_key(nodes, "job", rand)) != NULL && (n = node_with_key(nodes, "job", rand)) != NULL)
                replace(n, json_deep_copy(other->value));
            break;
        }
    }
    g_ptr_array_free(nodes, TRUE);
    return changed;
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    GRand *rand = g_rand_new_with_seed(seed);
    json_t *root = g_rand_boolean(rand) ? json_loadb((const char *)data, size, 0, NULL) : NULL;
    size_t out = 0;
    if (root && mutate_table(root, rand)) {
        char *text = json_dumps(root, (g_rand_boolean(rand) ? JSON_COMPACT : JSON_INDENT(1)) | JSON_REAL_PRECISION(17));
        size_t length = text ? strlen(text) : 0;
        if (length > 0 && length <= max_size) {
            memcpy(data, text, length);
            out = length;
        }
        free(text);
    }
    json_decref(root);
    g_rand_free(rand);
    return out ? out : LLVMFuzzerMutate(data, size, max_size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (table_file == NULL) LLVMFuzzerInitialize(NULL, NULL);
    write_file(table_file, data, size);
    GError *error = NULL;
    rv_efficiency_table *table = rv_efficiency_table_load(table_file, &error);
    if (table == NULL) check_refusal(error, table_file, "rv_efficiency_table_load");
    else check_table(table);
    g_clear_error(&error);
    for (guint m = 0; m < G_N_ELEMENTS(moves); m++) {
        rv_efficiency_views views;
        gboolean opened = open_views(m, table, &views);
        if (opened) {
            check_views(&views);
            check_plan(&moves[m], &views);
        }
        rv_efficiency_views_clear(&views);
        if (!opened) break; /* refused: nothing more to look at */
    }
    rv_efficiency_table_free(table);
    return 0;
}
