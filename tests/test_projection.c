/*
 * test_projection.c - the terms of the projection to another GPU
 * (costmodel.h, ANOTHER GPU), each on a synthetic kernel mix where it alone
 * decides: waves (a grid of SMs + 1 blocks), the fixed per-kernel cost
 * (1 us kernels), the cache (a working set under and over the target's
 * last-level cache); occupancy; the efficiency tables (efficiency.h):
 * measuring, the file and its refusals, views that leave out recordings of
 * the projected job; ranges (range.h); and how launches are read from a
 * trace (grid, block, registers, shared memory, ROCm's work-item grids).
 *
 * The GPUs are made up in the test, so that exactly one figure differs
 * between source and target in each case.
 */
#include <check.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include "plugin_harness.h"
#include "tiny_trace.h"
#include "reverie/costmodel.h"
#include "reverie/efficiency.h"
#include "reverie/error.h"
#include "reverie/escape.h"
#include "reverie/range.h"
#include <jansson.h>

/* A made-up GPU: `sms` SMs of one block each, 1 TFLOP/s of bf16 matrix
 * math per SM, `bandwidth` bytes/s of memory and `cache` bytes of last-level cache. */
static rv_gpu make_gpu(const char *id, const char *vendor, int sms, double bandwidth, double cache)
{
    rv_gpu gpu;
    memset(&gpu, 0, sizeof gpu);
    gpu.id = (char *)id;
    gpu.name = (char *)id;
    gpu.vendor = (char *)vendor;
    gpu.matrix_flops[RV_DTYPE_BF16] = sms * 1e12;
    gpu.vector_flops[RV_DTYPE_FP32] = sms * 0.1e12;
    gpu.matrix_any_shape = TRUE;
    gpu.memory_Bps = bandwidth;
    gpu.pcie_Bps = 32e9;
    gpu.sm_count = sms;
    gpu.sm_max_threads = 2048;
    gpu.sm_max_blocks = 1;
    gpu.sm_registers = 65536;
    gpu.sm_shared_bytes = 228 * 1024;
    gpu.warp_size = 32;
    gpu.cache_bytes = cache;
    return gpu;
}

/* One kernel launched from the CPU, with its operator, shapes and launch. */
static int32_t add_kernel(tiny *t, const char *name, const char *op, const char *dims, int64_t ns, uint32_t blocks)
{
    int32_t id = tiny_launch(t, name, 1000, ns, RV_PHASE_FORWARD, RV_TASK_KERNEL);
    rv_task *task = rv_graph_task(t->graph, id);
    task->op = rv_strings_intern(t->graph->strings, op);
    task->input_dims = rv_strings_intern(t->graph->strings, dims);
    if (blocks > 0) {
        if (t->graph->launches->len <= (guint)id) g_array_set_size(t->graph->launches, (guint)id + 1);
        g_array_index(t->graph->launches, rv_launch, id) = (rv_launch){ blocks, 128, 32, 0 };
    }
    return id;
}

typedef struct {
    const rv_gpu *target;
    const rv_gpu_efficiency *source_efficiency, *target_efficiency;
} move;

static gboolean move_to(const rv_graph *graph, int32_t task, const rv_kernel_cost *cost, rv_cost_change *change,
                        gpointer data)
{
    const move *m = data;
    change->gpu = m->target;
    change->source_efficiency = m->source_efficiency;
    change->target_efficiency = m->target_efficiency;
    return TRUE;
}

static rv_cost_plan *project(const rv_graph *graph, const rv_gpu *source, const move *m, rv_cost_model **model)
{
    *model = rv_cost_model_new(graph, source, FALSE);
    return rv_cost_model_plan(*model, move_to, (gpointer)m);
}

static double planned(const rv_cost_plan *plan, int32_t task) { return g_array_index(plan->new_ns, double, task); }
static rv_cost_term term_of(const rv_cost_plan *plan, int32_t task)
{
    return (rv_cost_term)g_array_index(plan->terms, uint8_t, task);
}

/* ---- waves ------------------------------------------------------------------ */

/* A compute-bound kernel whose grid comes from the problem (a Triton GEMM)
 * with SMs + 1 blocks of one block per SM: two waves on the source, one on
 * a target with one more SM of the same speed.  The roofline alone says 1%
 * faster; waves say twice as fast. */
START_TEST(waves_decide_a_grid_of_sms_plus_one)
{
    rv_gpu a = make_gpu("A", "nvidia", 100, 1e18, 0), b = make_gpu("B", "nvidia", 101, 1e18, 0);
    tiny t = tiny_new();
    const char *dims = "[[1024,1024],[1024,1024]]";
    int32_t two_waves = add_kernel(&t, "triton_mm_bf16_kernel", "aten::mm", dims, US(1000), 101);
    int32_t one_wave = add_kernel(&t, "triton_mm_bf16_kernel", "aten::mm", dims, US(1000), 50);
    ck_assert_double_eq_tol(rv_cost_wave_utilization(&a, rv_task_launch(t.graph, two_waves), TRUE), 101.0 / 200, 1e-9);
    ck_assert_double_eq_tol(rv_cost_wave_utilization(&b, rv_task_launch(t.graph, two_waves), TRUE), 1.0, 1e-9);
    move m = { &b, NULL, NULL };
    rv_cost_model *model;
    rv_cost_plan *plan = project(t.graph, &a, &m, &model);
    double fixed = (double)rv_cost_model_fixed_ns(model);
    double variable = US(1000) - fixed;
    /* two waves -> one: the variable time halves (0.505 of the slots busy before, 1.01x the peak after) */
    ck_assert_double_eq_tol(planned(plan, two_waves), fixed + variable * (101.0 / 200) / 1.01, 1);
    ck_assert_int_eq(term_of(plan, two_waves), RV_TERM_WAVES);
    /* one wave on both: only the peak ratio (50/100 busy before, 50/101 after at 1.01x the peak) */
    ck_assert_double_eq_tol(planned(plan, one_wave), fixed + variable, 1);
    ck_assert_int_eq(term_of(plan, one_wave), RV_TERM_PEAK);
    rv_cost_plan_free(plan);
    rv_cost_model_free(model);
    rv_graph_free(t.graph);
}
END_TEST

/* Another vendor's GEMM library picks its own tiles: its utilization stays. */
START_TEST(waves_leave_a_library_gemm_to_its_library)
{
    rv_gpu a = make_gpu("A", "nvidia", 100, 1e18, 0), b = make_gpu("B", "amd", 101, 1e18, 0);
    tiny t = tiny_new();
    int32_t gemm = add_kernel(&t, "sm90_xmma_gemm_bf16bf16_bf16f32", "aten::mm", "[[1024,1024],[1024,1024]]", US(1000), 101);
    move m = { &b, NULL, NULL };
    rv_cost_model *model;
    rv_cost_plan *plan = project(t.graph, &a, &m, &model);
    ck_assert(rv_cost_model_kernel(model, gemm)->library);
    double fixed = (double)rv_cost_model_fixed_ns(model);
    ck_assert_double_eq_tol(planned(plan, gemm), fixed + (US(1000) - fixed) / 1.01, 1);
    rv_cost_plan_free(plan);
    rv_cost_model_free(model);
    rv_graph_free(t.graph);
}
END_TEST

/* A fused attention kernel of 16 blocks (128 threads, 255 registers a
 * thread, 48 KiB of shared memory: two blocks fit an SM of the first GPU
 * by registers; its 48 KiB would fit one in a CU of the second, 64 KiB)
 * moves between GPUs of two vendors with the same throughput per SM, 132
 * SMs and 304.  Each spreads the 16 blocks one to an SM, holding as many
 * a SM as the source did, so the kernel takes as long on both, both ways.
 * Counting the source's shared memory against the target's limits had
 * made it twice as fast on the second GPU one way and as fast the other. */
START_TEST(waves_across_vendors_keep_the_blocks_an_sm_held)
{
    rv_gpu nvidia = make_gpu("N", "nvidia", 132, 1e18, 0), amd = make_gpu("M", "amd", 304, 1e18, 0);
    nvidia.sm_max_blocks = amd.sm_max_blocks = 32;
    amd.sm_shared_bytes = 64 * 1024;
    const rv_gpu *gpus[2] = { &nvidia, &amd };
    for (int from = 0; from < 2; from++) {
        tiny t = tiny_new();
        int32_t attention = add_kernel(&t, "flash_fwd_kernel_bf16", "aten::_scaled_dot_product_flash_attention",
                                       "[[1,8,128,64],[1,8,128,64],[1,8,128,64]]", US(100), 16);
        g_array_index(t.graph->launches, rv_launch, attention) = (rv_launch){ 16, 128, 255, 48 * 1024 };
        move m = { gpus[1 - from], NULL, NULL };
        rv_cost_model *model;
        rv_cost_plan *plan = project(t.graph, gpus[from], &m, &model);
        double fixed = (double)rv_cost_model_fixed_ns(model);
        double fixed_b = plan->target_fixed_ns < 0 ? fixed : plan->target_fixed_ns;
        double ratio = (planned(plan, attention) - fixed_b) / (US(100) - fixed);
        ck_assert_msg(fabs(ratio - 1) < 0.01, "from %s: %f", gpus[from]->id, ratio);
        rv_cost_plan_free(plan);
        rv_cost_model_free(model);
        rv_graph_free(t.graph);
    }
}
END_TEST

START_TEST(occupancy_from_threads_registers_and_shared_memory)
{
    rv_gpu h = make_gpu("H", "nvidia", 132, 3.35e12, 50e6);
    h.sm_max_blocks = 32;
    rv_launch plain = { 264, 256, 0, 0 }, registers = { 264, 256, 128, 0 }, shared = { 264, 256, 0, 100 * 1024 };
    ck_assert_int_eq(rv_cost_blocks_per_sm(&h, &plain, TRUE), 8);      /* 2048 threads / 256 */
    ck_assert_int_eq(rv_cost_blocks_per_sm(&h, &registers, TRUE), 2);  /* 65536 / (128 x 256) */
    ck_assert_int_eq(rv_cost_blocks_per_sm(&h, &registers, FALSE), 8); /* another compiler's registers */
    ck_assert_int_eq(rv_cost_blocks_per_sm(&h, &shared, TRUE), 2);     /* 228 KiB / 100 KiB */
    rv_launch odd = { 10, 33, 0, 0 };                                  /* 33 threads take two warps */
    ck_assert_int_eq(rv_cost_blocks_per_sm(&h, &odd, TRUE), 32);
    ck_assert(rv_cost_wave_utilization(&h, NULL, TRUE) == 1);
}
END_TEST

/* ---- efficiency tables built from synthetic recordings ---------------------- */

/* A recording of a job ("op", with shapes of n elements) on gpu: `count`
 * elementwise kernels of each of the sizes given, each taking
 * fixed + roofline / efficiency, efficiency depending on whether the
 * working set fits the GPU's cache. */
typedef struct {
    const char *op;
    int64_t fixed_ns;
    double efficiency, in_cache_efficiency;
} recording_spec;

static rv_graph *synthetic_recording(const rv_gpu *gpu, const recording_spec *spec, const int64_t *elements, int sizes,
                                     int count)
{
    tiny t = tiny_new();
    for (int s = 0; s < sizes; s++)
        for (int i = 0; i < count; i++) {
            char *dims = g_strdup_printf("[[%" G_GINT64_FORMAT "],[%" G_GINT64_FORMAT "]]", elements[s], elements[s]);
            double bytes = 3.0 * elements[s] * 2; /* two bf16 inputs read, one written */
            double efficiency = bytes <= gpu->cache_bytes ? spec->in_cache_efficiency : spec->efficiency;
            int64_t ns = spec->fixed_ns + (int64_t)llround(bytes / gpu->memory_Bps * 1e9 / efficiency);
            add_kernel(&t, "vectorized_elementwise_kernel<BFloat16 add>", spec->op, dims, ns, 0);
            g_free(dims);
        }
    return t.graph;
}

static void add_recording(rv_efficiency_table *table, const rv_gpu *gpu, const recording_spec *spec,
                          const int64_t *elements, int sizes, const char *label)
{
    rv_graph *graph = synthetic_recording(gpu, spec, elements, sizes, 4);
    rv_cost_model *model = rv_cost_model_new(graph, gpu, FALSE);
    GError *error = NULL;
    gboolean replaced = TRUE;
    ck_assert_msg(rv_efficiency_table_add(table, model, label, label, &replaced, &error), "%s",
                  error ? error->message : "");
    ck_assert(!replaced);
    rv_cost_model_free(model);
    rv_graph_free(graph);
}

/* The fixed cost alone decides 1 us kernels: a pair (the same job on both
 * GPUs) shows B's shortest kernels lasting twice A's, so another job's 1 us
 * kernels take 2 us on B; without tables, or onto a GPU with A's SMs, they
 * keep A's microsecond. */
START_TEST(fixed_cost_decides_one_microsecond_kernels)
{
    rv_gpu a = make_gpu("A", "nvidia", 100, 1e12, 0), b = make_gpu("B", "amd", 100, 1e12, 0);
    const int64_t tiny_sizes[] = { 16 };
    recording_spec on_a = { "aten::add", US(1), 0.5, 0.5 }, on_b = { "aten::add", US(2), 0.5, 0.5 };
    rv_efficiency_table *table = rv_efficiency_table_new();
    add_recording(table, &a, &on_a, tiny_sizes, 1, "job X on A");
    add_recording(table, &b, &on_b, tiny_sizes, 1, "job X on B");
    /* another job: 1 us kernels doing nothing */
    recording_spec job_y = { "aten::mul", US(1), 0.5, 0.5 };
    rv_graph *y = synthetic_recording(&a, &job_y, tiny_sizes, 1, 8);
    rv_gpu_efficiency *va = rv_efficiency_for_gpu(table, "A", y, NULL), *vb = rv_efficiency_for_gpu(table, "B", y, NULL);
    double ratio, low, high;
    guint pairs = 0;
    ck_assert(rv_efficiency_fixed_ratio(va, vb, &ratio, &low, &high, &pairs));
    ck_assert_uint_eq(pairs, 1);
    ck_assert_double_eq_tol(ratio, 2.0, 0.01);
    move m = { &b, va, vb };
    rv_cost_model *model;
    rv_cost_plan *plan = project(y, &a, &m, &model);
    for (int32_t id = 0; id < rv_graph_task_count(y); id++) {
        if (rv_cost_model_kernel(model, id) == NULL) continue;
        ck_assert_double_eq_tol(planned(plan, id), US(2), 20);
        ck_assert_int_eq(term_of(plan, id), RV_TERM_FIXED);
        ck_assert(g_array_index(plan->low_ns, double, id) < US(2) && g_array_index(plan->high_ns, double, id) > US(2));
    }
    rv_cost_plan_free(plan);
    rv_cost_model_free(model);
    /* no tables, or a B of A's vendor with A's SMs and peaks (only its
     * memory differs): the source's own fixed cost stays, whatever the pair says */
    rv_gpu same_sms = make_gpu("B", "nvidia", 100, 2e12, 0);
    move bare = { &b, NULL, NULL }, same = { &same_sms, va, vb };
    const move *keeping[] = { &bare, &same };
    for (guint k = 0; k < G_N_ELEMENTS(keeping); k++) {
        plan = project(y, &a, keeping[k], &model);
        ck_assert(plan->target_fixed_same_sms == (keeping[k] == &same));
        for (int32_t id = 0; id < rv_graph_task_count(y); id++)
            if (rv_cost_model_kernel(model, id) != NULL) ck_assert_double_eq_tol(planned(plan, id), US(1), 20);
        rv_cost_plan_free(plan);
        rv_cost_model_free(model);
    }
    rv_gpu_efficiency_free(va);
    rv_gpu_efficiency_free(vb);
    rv_efficiency_table_free(table);
    rv_graph_free(y);
}
END_TEST

/* The cache alone decides: B's recordings serve working sets that fit its
 * last-level cache 5x faster than its memory bandwidth, A (no cache)
 * serves everything from memory; the two GPUs have the same bandwidth.  A
 * 12 MB working set gets 5x faster on B, a 1.2 GB one does not move. */
START_TEST(cache_decides_working_sets_under_and_over_it)
{
    rv_gpu a = make_gpu("A", "nvidia", 100, 1e12, 0), b = make_gpu("B", "amd", 100, 1e12, 100e6);
    /* do-nothing kernels (so that the fixed cost is 2 us), 12 MB and 1.2 GB of traffic in bf16 */
    const int64_t sizes[] = { 16, 2000000, 200000000 };
    recording_spec on_a = { "aten::add", US(2), 0.8, 0.8 }, on_b = { "aten::add", US(2), 0.8, 4.0 };
    rv_efficiency_table *table = rv_efficiency_table_new();
    add_recording(table, &a, &on_a, sizes, 3, "recording on A");
    add_recording(table, &b, &on_b, sizes, 3, "recording on B");
    recording_spec job = { "aten::mul", US(2), 0.8, 0.8 };
    rv_graph *y = synthetic_recording(&a, &job, sizes, 3, 2);
    int32_t small = -1, large = -1;
    for (int32_t id = 0; id < rv_graph_task_count(y); id++)
        if (rv_graph_task(y, id)->kind == RV_TASK_KERNEL) {
            int64_t ns = rv_graph_task(y, id)->duration_ns;
            if (ns > US(10) && ns < US(100)) small = id;
            if (ns > US(1000)) large = id;
        }
    ck_assert(small >= 0 && large >= 0);
    rv_gpu_efficiency *va = rv_efficiency_for_gpu(table, "A", y, NULL), *vb = rv_efficiency_for_gpu(table, "B", y, NULL);
    move m = { &b, va, vb };
    rv_cost_model *model;
    rv_cost_plan *plan = project(y, &a, &m, &model);
    double fixed_a = (double)rv_cost_model_fixed_ns(model), fixed_b = plan->target_fixed_ns;
    ck_assert(fixed_b > 0);
    double small_variable = (double)rv_graph_task(y, small)->duration_ns - fixed_a;
    double large_variable = (double)rv_graph_task(y, large)->duration_ns - fixed_a;
    ck_assert_double_eq_tol((planned(plan, small) - fixed_b) / small_variable, 0.8 / 4.0, 0.01);
    ck_assert_double_eq_tol((planned(plan, large) - fixed_b) / large_variable, 1.0, 0.01);
    ck_assert_int_eq(term_of(plan, small), RV_TERM_CACHE);
    ck_assert_int_eq(term_of(plan, large), RV_TERM_BANDWIDTH);
    ck_assert_uint_eq(plan->classes[RV_COST_ELEMENTWISE].by_table, 4);
    rv_cost_plan_free(plan);
    rv_cost_model_free(model);
    rv_gpu_efficiency_free(va);
    rv_gpu_efficiency_free(vb);
    rv_efficiency_table_free(table);
    rv_graph_free(y);
}
END_TEST

/* A view never reads a recording of the job it projects. */
START_TEST(views_leave_out_the_projected_job)
{
    rv_gpu a = make_gpu("A", "nvidia", 100, 1e12, 0), b = make_gpu("B", "amd", 100, 1e12, 0);
    const int64_t sizes[] = { 1000000 };
    recording_spec x = { "aten::add", US(2), 0.8, 0.8 }, other = { "aten::mul", US(2), 0.5, 0.5 };
    rv_efficiency_table *table = rv_efficiency_table_new();
    add_recording(table, &a, &x, sizes, 1, "job X on A");
    add_recording(table, &b, &x, sizes, 1, "job X on B");
    add_recording(table, &b, &other, sizes, 1, "job Y on B");
    rv_graph *job_x = synthetic_recording(&a, &x, sizes, 1, 2);
    GPtrArray *excluded = g_ptr_array_new_with_free_func(g_free);
    rv_gpu_efficiency *vb = rv_efficiency_for_gpu(table, "B", job_x, excluded);
    ck_assert_uint_eq(rv_gpu_efficiency_recordings(vb), 1);
    ck_assert_uint_eq(excluded->len, 1);
    ck_assert_str_eq(g_ptr_array_index(excluded, 0), "job X on B");
    char *labels = rv_gpu_efficiency_labels(vb);
    ck_assert_str_eq(labels, "job Y on B");
    ck_assert(rv_efficiency_job_similarity(job_x, job_x) == 1.0);
    g_free(labels);
    g_ptr_array_unref(excluded);
    rv_gpu_efficiency_free(vb);
    rv_efficiency_table_free(table);
    rv_graph_free(job_x);
}
END_TEST

/* A job whose operators all lie inside another's (the same network with
 * fewer optimizer operators) is that job: left out although the sets'
 * Jaccard similarity is 0.4; a job of other operators stays, and so does
 * a trace of too few operators to say (three shapes inside the job). */
START_TEST(a_job_inside_another_is_the_same_job)
{
    rv_gpu a = make_gpu("A", "nvidia", 100, 1e12, 0);
    int64_t sizes[20];
    for (int i = 0; i < 20; i++) sizes[i] = 1000000 + 1000 * i;
    recording_spec x = { "aten::add", US(2), 0.8, 0.8 }, other = { "aten::sub", US(2), 0.8, 0.8 };
    rv_efficiency_table *table = rv_efficiency_table_new();
    add_recording(table, &a, &x, sizes, 20, "job X");
    add_recording(table, &a, &other, sizes, 20, "job W");
    add_recording(table, &a, &x, sizes, 3, "three of X's shapes");
    tiny t = tiny_new();
    for (int i = 0; i < 50; i++) {  /* X's twenty shapes, and thirty of another operator */
        char *dims = i < 20 ? g_strdup_printf("[[%" G_GINT64_FORMAT "],[%" G_GINT64_FORMAT "]]", sizes[i], sizes[i])
                            : g_strdup_printf("[[%d]]", 1000 + i);
        add_kernel(&t, "vectorized_elementwise_kernel<float op>", i < 20 ? "aten::add" : "aten::mul", dims, US(3), 0);
        g_free(dims);
    }
    rv_graph *larger = t.graph;
    GPtrArray *excluded = g_ptr_array_new_with_free_func(g_free);
    rv_gpu_efficiency *view = rv_efficiency_for_gpu(table, "A", larger, excluded);
    ck_assert_uint_eq(excluded->len, 1);
    ck_assert_str_eq(g_ptr_array_index(excluded, 0), "job X");
    ck_assert_uint_eq(rv_gpu_efficiency_recordings(view), 2);
    g_ptr_array_unref(excluded);
    rv_gpu_efficiency_free(view);
    rv_efficiency_table_free(table);
    rv_graph_free(larger);
}
END_TEST

/* Where both GPUs recorded some of the same jobs, their efficiencies are
 * compared on those jobs alone: job X ran at 0.8 of its roofline on A and
 * 0.4 on B, so another job's kernels take twice their roofline ratio on
 * B, whatever job Z (on B only, at 0.9) says.  Without the pair, A's and
 * B's tables are all there is (0.8 against Z's 0.9). */
START_TEST(pairs_decide_where_the_gpus_share_jobs)
{
    rv_gpu a = make_gpu("A", "nvidia", 100, 1e12, 0), b = make_gpu("B", "amd", 100, 1e12, 0);
    const int64_t sizes[] = { 200000000 };
    recording_spec x_on_a = { "aten::add", US(2), 0.8, 0.8 }, x_on_b = { "aten::add", US(2), 0.4, 0.4 };
    recording_spec z_on_b = { "aten::sub", US(2), 0.9, 0.9 }, y = { "aten::mul", US(2), 0.8, 0.8 };
    for (int paired = 1; paired >= 0; paired--) {
        rv_efficiency_table *table = rv_efficiency_table_new();
        add_recording(table, &a, &x_on_a, sizes, 1, "job X on A");
        if (paired) add_recording(table, &b, &x_on_b, sizes, 1, "job X on B");
        add_recording(table, &b, &z_on_b, sizes, 1, "job Z on B");
        rv_graph *job_y = synthetic_recording(&a, &y, sizes, 1, 2);
        rv_gpu_efficiency *va = rv_efficiency_for_gpu(table, "A", job_y, NULL);
        rv_gpu_efficiency *vb = rv_efficiency_for_gpu(table, "B", job_y, NULL);
        rv_efficiency_pair_views(va, vb);
        move m = { &b, va, vb };
        rv_cost_model *model;
        rv_cost_plan *plan = project(job_y, &a, &m, &model);
        double fixed_a = (double)rv_cost_model_fixed_ns(model), fixed_b = plan->target_fixed_ns;
        for (int32_t id = 0; id < rv_graph_task_count(job_y); id++) {
            if (rv_cost_model_kernel(model, id) == NULL) continue;
            double ratio = (planned(plan, id) - fixed_b) / ((double)rv_graph_task(job_y, id)->duration_ns - fixed_a);
            ck_assert_double_eq_tol(ratio, paired ? 0.8 / 0.4 : 0.8 / 0.9, 0.01);
        }
        rv_cost_plan_free(plan);
        rv_cost_model_free(model);
        rv_gpu_efficiency_free(va);
        rv_gpu_efficiency_free(vb);
        rv_efficiency_table_free(table);
        rv_graph_free(job_y);
    }
}
END_TEST

/* A memory-bound kernel moved to a GPU of the same vendor and SMs with
 * 1.43x the bandwidth, no tables: a kernel at its full bandwidth moves
 * wholly (1 / 1.43); one at 0.4 of it moves 0.4 of its time with the
 * bandwidth and keeps the rest, which its SMs held.  Onto another
 * vendor's GPU the SMs do not compare and the kernel keeps its own
 * efficiency (the bandwidth ratio).  A 12 MB working set inside the 100
 * MB cache both GPUs share does not wait on the memory: it stays. */
START_TEST(bandwidth_moves_only_the_share_it_held)
{
    rv_gpu a = make_gpu("A", "nvidia", 100, 1e12, 0), b = make_gpu("B", "nvidia", 100, 1.43e12, 0);
    rv_gpu other_vendor = make_gpu("C", "amd", 100, 1.43e12, 0);
    rv_gpu cached_a = make_gpu("A", "nvidia", 100, 1e12, 100e6), cached_b = make_gpu("B", "nvidia", 100, 1.43e12, 100e6);
    const struct { const rv_gpu *source, *target; int64_t elements; double efficiency, expected; } cases[] = {
        { &a, &b, 200000000, 1.0, 1 / 1.43 },
        { &a, &b, 200000000, 0.4, 0.4 / 1.43 + 0.6 },
        { &a, &other_vendor, 200000000, 0.4, 1 / 1.43 },
        { &cached_a, &cached_b, 2000000, 1.0, 1.0 },
        { &cached_a, &cached_b, 200000000, 1.0, 1 / 1.43 },
    };
    for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
        recording_spec spec = { "aten::add", US(2), cases[c].efficiency, cases[c].efficiency };
        rv_graph *job = synthetic_recording(cases[c].source, &spec, &cases[c].elements, 1, 2);
        move m = { cases[c].target, NULL, NULL };
        rv_cost_model *model;
        rv_cost_plan *plan = project(job, cases[c].source, &m, &model);
        double fixed = (double)rv_cost_model_fixed_ns(model);
        for (int32_t id = 0; id < rv_graph_task_count(job); id++) {
            if (rv_cost_model_kernel(model, id) == NULL) continue;
            double ratio = (planned(plan, id) - fixed) / ((double)rv_graph_task(job, id)->duration_ns - fixed);
            ck_assert_msg(fabs(ratio - cases[c].expected) < 0.01, "case %u: %f, expected %f", c, ratio,
                          cases[c].expected);
        }
        rv_cost_plan_free(plan);
        rv_cost_model_free(model);
        rv_graph_free(job);
    }
}
END_TEST

/* A convolution handed to MIOpen launches its kernel and a layout
 * transpose (MIOpen's batched_transpose, a copy by its name).  Onto
 * another vendor's GPU with twice the matrix peak and the same bandwidth,
 * the transpose follows the convolution (about half the time: the target's
 * library runs its own helpers or none), and is counted as one; a copy
 * that no convolution launched keeps the bandwidth ratio (1).  Onto a GPU
 * of the same vendor (twice the SMs) the same library runs the same
 * transpose, costed as the copy it is. */
START_TEST(library_helpers_follow_their_convolutions)
{
    rv_gpu a = make_gpu("A", "amd", 100, 1e12, 0), other_vendor = make_gpu("B", "nvidia", 200, 1e12, 0);
    rv_gpu same_vendor = make_gpu("C", "amd", 200, 1e12, 0);
    tiny t = tiny_new();
    const char *dims = "[[8, 64, 56, 56], [64, 64, 3, 3]]";
    int32_t conv = add_kernel(&t, "igemm_fwd_gtcx3_nhwc_bf16_bx0", "aten::miopen_convolution", dims, US(100), 0);
    int32_t helper = add_kernel(&t, "batched_transpose_32x32_half", "aten::miopen_convolution", dims, US(20), 0);
    int32_t copy = add_kernel(&t, "batched_transpose_32x32_half", "aten::copy_", dims, US(20), 0); /* no convolution's */
    for (int other = 1; other >= 0; other--) {
        move m = { other ? &other_vendor : &same_vendor, NULL, NULL };
        rv_cost_model *model;
        rv_cost_plan *plan = project(t.graph, &a, &m, &model);
        double fixed = (double)rv_cost_model_fixed_ns(model);
        double fixed_b = plan->target_fixed_ns < 0 ? fixed : plan->target_fixed_ns; /* < 0: the source's kept */
        double conv_ratio = (planned(plan, conv) - fixed_b) / (US(100) - fixed);
        double helper_ratio = (planned(plan, helper) - fixed_b) / (US(20) - fixed);
        double copy_ratio = (planned(plan, copy) - fixed_b) / (US(20) - fixed);
        ck_assert_msg(conv_ratio > 0.45 && conv_ratio < 0.6, "%f", conv_ratio); /* the matrix peak's 2x, less its bytes */
        if (other) ck_assert_double_eq_tol(copy_ratio, 1.0, 0.01); /* one vendor: the SMs' share moves too */
        ck_assert_double_eq_tol(helper_ratio, (other ? conv_ratio : copy_ratio), 0.01);
        ck_assert_uint_eq(plan->library_helpers, other ? 1 : 0);
        ck_assert_uint_eq(plan->classes[RV_COST_CONV].tasks, other ? 2 : 1);
        ck_assert_uint_eq(plan->classes[RV_COST_COPY].tasks, other ? 1 : 2);
        rv_cost_plan_free(plan);
        rv_cost_model_free(model);
    }
    ck_assert(rv_cost_op_is_library_convolution("aten::cudnn_convolution"));
    ck_assert(rv_cost_op_is_library_convolution("aten::convolution_backward"));
    ck_assert(!rv_cost_op_is_library_convolution("aten::convolution"));
    ck_assert(!rv_cost_op_is_library_convolution("aten::add_"));
    rv_graph_free(t.graph);
}
END_TEST

/* A table.json in a fresh temporary folder (both g_free'd by scratch_remove). */
static char *scratch_table_path(char **folder)
{
    *folder = g_dir_make_tmp("reverie-efficiency-XXXXXX", NULL);
    ck_assert(*folder != NULL);
    return g_build_filename(*folder, "table.json", NULL);
}

static void scratch_remove(char *folder, char *path)
{
    g_unlink(path);
    g_rmdir(folder);
    g_free(path);
    g_free(folder);
}

/* ---- the table file ------------------------------------------------------- */

START_TEST(table_file_round_trip_and_refusals)
{
    rv_gpu a = make_gpu("A", "nvidia", 100, 1e12, 0);
    const int64_t sizes[] = { 1000000, 100 };
    recording_spec x = { "aten::add", US(2), 0.8, 0.8 };
    rv_efficiency_table *table = rv_efficiency_table_new();
    add_recording(table, &a, &x, sizes, 2, "x");
    char *text = rv_efficiency_table_to_json(table);
    char *folder, *path = scratch_table_path(&folder);
    ck_assert(g_file_set_contents(path, text, -1, NULL));
    GError *error = NULL;
    rv_efficiency_table *loaded = rv_efficiency_table_load(path, &error);
    ck_assert_msg(loaded != NULL, "%s", error ? error->message : "");
    char *again = rv_efficiency_table_to_json(loaded);
    ck_assert_str_eq(text, again);
    rv_efficiency_recording r = rv_efficiency_table_recording(loaded, 0);
    ck_assert_str_eq(r.gpu, "A");
    ck_assert_uint_eq(r.kernels, 8);
    rv_efficiency_table_free(loaded);
    static const char *const cases[][3] = {
        { "\"fixed_us\"", "\"fixed_seconds\"", "unknown key 'fixed_seconds'" },
        { "\"class\": \"elementwise\"", "\"class\": \"comm\"", "a re-costed kernel class" },
        { "\"unit\": \"vector\"", "\"unit\": \"scalar\"", "'unit' must be vector or matrix" },
        { "\"format\": \"reverie-efficiency\"", "\"format\": \"other\"", "not an efficiency table" },
        { "\"version\": 1", "\"version\": 2", "efficiency table version" },
        { "\"kernels\": 4", "\"kernels\": -4", "'kernels' must be a number" },
        { "\"job_members\": [", "\"job_members\": [-1, ", "'job_members' must be ascending integers" },
        { "\"job_members\": [", "\"job_members\": [4294967295, ", "'job_members' must be ascending integers" },
    };
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        char **parts = g_strsplit(text, cases[i][0], 2);
        ck_assert_msg(parts[1] != NULL, "%s not in the table", cases[i][0]);
        char *bad = g_strconcat(parts[0], cases[i][1], parts[1], NULL);
        ck_assert(g_file_set_contents(path, bad, -1, NULL));
        g_clear_error(&error);
        ck_assert(rv_efficiency_table_load(path, &error) == NULL);
        ck_assert_msg(strstr(error->message, cases[i][2]) && strstr(error->message, path) &&
                          !strchr(error->message, '\n'), "case %zu: %s", i, error->message);
        g_free(bad);
        g_strfreev(parts);
    }
    /* the same file twice */
    json_t *root = json_loads(text, 0, NULL), *recordings = json_object_get(root, "recordings");
    json_array_append_new(recordings, json_deep_copy(json_array_get(recordings, 0)));
    ck_assert(json_dump_file(root, path, 0) == 0);
    json_decref(root);
    g_clear_error(&error);
    ck_assert(rv_efficiency_table_load(path, &error) == NULL);
    ck_assert_msg(strstr(error->message, "recording 2: the same file"), "%s", error->message);
    g_clear_error(&error);
    scratch_remove(folder, path);
    g_free(again);
    g_free(text);
    rv_efficiency_table_free(table);
}
END_TEST

/* A one-recording table's text (g_free), for the refusals below. */
static char *small_table_text(void)
{
    rv_gpu a = make_gpu("A", "nvidia", 100, 1e12, 0);
    const int64_t sizes[] = { 1000000, 100 };
    recording_spec x = { "aten::add", US(2), 0.8, 0.8 };
    rv_efficiency_table *table = rv_efficiency_table_new();
    add_recording(table, &a, &x, sizes, 2, "x");
    char *text = rv_efficiency_table_to_json(table);
    rv_efficiency_table_free(table);
    return text;
}

/* text with its first `old` replaced by `new`, loaded from path: the
 * refusal's message (g_free); fails the test if the table is accepted. */
static char *refusal_of(const char *text, const char *old, const char *new, const char *path)
{
    char **parts = g_strsplit(text, old, 2);
    ck_assert_msg(parts[1] != NULL, "%s not in the table", old);
    char *bad = g_strconcat(parts[0], new, parts[1], NULL);
    ck_assert(g_file_set_contents(path, bad, -1, NULL));
    GError *error = NULL;
    rv_efficiency_table *table = rv_efficiency_table_load(path, &error);
    ck_assert_msg(table == NULL, "accepted with %s", new);
    ck_assert(error->domain == RV_ERROR && error->code == RV_ERROR_INPUT);
    char *message = g_strdup(error->message);
    g_error_free(error);
    g_free(bad);
    g_strfreev(parts);
    return message;
}

/* Found by fuzz_efficiency: a refusal quoted what the file held as it
 * was, so a key or SHA-256 holding a newline (a JSON escape), or a raw
 * control byte in jansson's excerpt, made it two lines or sent terminal
 * controls.  Each refusal is one line with no control character, names
 * the file, and says where: the line and column of a syntax error (a
 * table without indentation is one line), the recording and the bucket. */
START_TEST(a_refused_table_is_one_clean_line)
{
    char *text = small_table_text();
    char *folder, *path = scratch_table_path(&folder);
    static const char *const cases[][3] = {
        { "\"fixed_us\"", "\"fixed\\n\\u001b[2J\"", "unknown key 'fixed\\n\\x1b[2J'" },
        { "\"buckets\"", "\001", ", column " },
        { "\"unit\": \"vector\"", "\"unit\": \"scalar\\r\"", "recording 1, bucket 1: a bucket's 'unit'" },
    };
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        char *message = refusal_of(text, cases[i][0], cases[i][1], path);
        ck_assert_msg(strstr(message, cases[i][2]) && strstr(message, path) && !rv_text_needs_escape(message),
                      "case %zu: %s", i, message);
        g_free(message);
    }
    /* the same file twice, under a SHA-256 holding a newline */
    json_t *root = json_loads(text, 0, NULL), *recordings = json_object_get(root, "recordings");
    json_object_set_new(json_array_get(recordings, 0), "sha256", json_string("x\ny"));
    json_array_append_new(recordings, json_deep_copy(json_array_get(recordings, 0)));
    char *twice = json_dumps(root, 0);
    char *message = refusal_of(twice, "{", "{", path);
    ck_assert_msg(strstr(message, "recording 2: the same file (sha256 x\\ny)") && !rv_text_needs_escape(message),
                  "%s", message);
    g_free(message);
    free(twice);
    json_decref(root);
    scratch_remove(folder, path);
    g_free(text);
}
END_TEST

/* The table's text with its first recording's `key` set to `value`
 * (stolen), refused when loaded from path: the message (g_free). */
static char *refusal_with(const char *text, const char *key, json_t *value, const char *path)
{
    json_t *root = json_loads(text, 0, NULL);
    json_object_set_new(json_array_get(json_object_get(root, "recordings"), 0), key, value);
    char *changed = json_dumps(root, 0);
    char *message = refusal_of(changed, "{", "{", path);
    free(changed);
    json_decref(root);
    return message;
}

/* Found by fuzz_efficiency (UBSan): a recording's kernels, rejected and
 * gap_samples were taken up to 10^12 and cast to guint, undefined beyond
 * 2^32 - 1, and a fraction (8.5 kernels) was cut silently.  They are
 * whole numbers that fit a guint, as a bucket's kernels already were. */
START_TEST(a_recording_counts_whole_numbers_that_fit)
{
    char *text = small_table_text();
    char *folder, *path = scratch_table_path(&folder);
    static const char *const keys[] = { "kernels", "rejected", "gap_samples" };
    for (gsize k = 0; k < G_N_ELEMENTS(keys); k++) {
        char *message = refusal_with(text, keys[k], json_real(1e12), path);
        char *expected = g_strdup_printf("'%s' must be a number in [%d, 4.29497e+09]", keys[k], k == 0);
        ck_assert_msg(strstr(message, expected), "%s", message);
        g_free(expected);
        g_free(message);
        message = refusal_with(text, keys[k], json_real(8.5), path);
        expected = g_strdup_printf("'%s' must be a whole number", keys[k]);
        ck_assert_msg(strstr(message, expected), "%s", message);
        g_free(expected);
        g_free(message);
    }
    /* the largest count is kept as it is */
    json_t *root = json_loads(text, 0, NULL);
    json_object_set_new(json_array_get(json_object_get(root, "recordings"), 0), "kernels", json_integer(G_MAXUINT));
    ck_assert(json_dump_file(root, path, 0) == 0);
    json_decref(root);
    GError *error = NULL;
    rv_efficiency_table *table = rv_efficiency_table_load(path, &error);
    ck_assert_msg(table != NULL, "%s", error ? error->message : "");
    ck_assert_uint_eq(rv_efficiency_table_recording(table, 0).kernels, G_MAXUINT);
    rv_efficiency_table_free(table);
    scratch_remove(folder, path);
    g_free(text);
}
END_TEST

/* Found by fuzz_efficiency: a pair's ratio of fixed costs divides the
 * two recordings' shortest kernels, and a denormal shortest_us (5e-324)
 * made it infinite (or 0 the other way round), and every kernel's fixed
 * cost with it.  A kernel lasts whole nanoseconds: shortest_us is 0 or at
 * least 0.001, and the most extreme pair left gives a finite 10^9. */
START_TEST(a_pair_ratio_of_fixed_costs_stays_finite)
{
    rv_gpu a = make_gpu("A", "nvidia", 100, 1e12, 0), b = make_gpu("B", "amd", 100, 1e12, 0);
    const int64_t sizes[] = { 16 };
    recording_spec on_a = { "aten::add", US(1), 0.5, 0.5 }, on_b = { "aten::add", US(2), 0.5, 0.5 };
    rv_efficiency_table *table = rv_efficiency_table_new();
    add_recording(table, &a, &on_a, sizes, 1, "job X on A");
    add_recording(table, &b, &on_b, sizes, 1, "job X on B");
    char *text = rv_efficiency_table_to_json(table);
    rv_efficiency_table_free(table);
    char *folder, *path = scratch_table_path(&folder);
    char *message = refusal_with(text, "shortest_us", json_real(5e-324), path);
    ck_assert_msg(strstr(message, "recording 1: 'shortest_us' must be 0 (no kernel measured) or at least 0.001"), "%s",
                  message);
    g_free(message);
    json_t *root = json_loads(text, 0, NULL), *recordings = json_object_get(root, "recordings");
    json_object_set_new(json_array_get(recordings, 0), "shortest_us", json_real(1e-3));
    json_object_set_new(json_array_get(recordings, 1), "shortest_us", json_real(1e6));
    ck_assert(json_dump_file(root, path, 0) == 0);
    json_decref(root);
    GError *error = NULL;
    table = rv_efficiency_table_load(path, &error);
    ck_assert_msg(table != NULL, "%s", error ? error->message : "");
    rv_gpu_efficiency *va = rv_efficiency_for_gpu(table, "A", NULL, NULL), *vb = rv_efficiency_for_gpu(table, "B", NULL, NULL);
    double ratio = 0, low = 0, high = 0;
    guint pairs = 0;
    ck_assert(rv_efficiency_fixed_ratio(va, vb, &ratio, &low, &high, &pairs));
    ck_assert_uint_eq(pairs, 1);
    ck_assert_double_eq_tol(ratio, 1e9, 1);
    ck_assert(isfinite(low) && isfinite(high) && low <= ratio && ratio <= high);
    rv_gpu_efficiency_free(va);
    rv_gpu_efficiency_free(vb);
    rv_efficiency_table_free(table);
    scratch_remove(folder, path);
    g_free(text);
}
END_TEST

/* Found by fuzz_efficiency (UBSan): a table may say a GPU reaches a tiny
 * share of its roofline (a bucket of 1e-12 us over 1e15 us, 10^-27), and
 * the kernels projected onto it then last far beyond int64: each class's
 * totals added llround of them (unspecified, LLONG_MIN on x86) and
 * overflowed.  The totals saturate; applying the plan refuses the
 * durations in one line. */
START_TEST(a_table_of_tiny_efficiencies_saturates_the_totals)
{
    rv_gpu a = make_gpu("A", "nvidia", 100, 1e12, 0), b = make_gpu("B", "amd", 100, 1e12, 0);
    const int64_t sizes[] = { 200000000 };
    recording_spec x_on_a = { "aten::add", US(2), 0.8, 0.8 }, x_on_b = { "aten::add", US(2), 0.4, 0.4 };
    recording_spec y = { "aten::mul", US(2), 0.8, 0.8 };
    rv_efficiency_table *table = rv_efficiency_table_new();
    add_recording(table, &a, &x_on_a, sizes, 1, "job X on A");
    add_recording(table, &b, &x_on_b, sizes, 1, "job X on B");
    char *text = rv_efficiency_table_to_json(table);
    rv_efficiency_table_free(table);
    json_t *root = json_loads(text, 0, NULL);
    json_t *buckets = json_object_get(json_array_get(json_object_get(root, "recordings"), 1), "buckets");
    for (size_t i = 0; i < json_array_size(buckets); i++) {
        json_object_set_new(json_array_get(buckets, i), "roofline_us", json_real(1e-12));
        json_object_set_new(json_array_get(buckets, i), "variable_us", json_real(1e15));
    }
    char *folder, *path = scratch_table_path(&folder);
    ck_assert(json_dump_file(root, path, 0) == 0);
    json_decref(root);
    GError *error = NULL;
    table = rv_efficiency_table_load(path, &error);
    ck_assert_msg(table != NULL, "%s", error ? error->message : "");
    rv_graph *job_y = synthetic_recording(&a, &y, sizes, 1, 2);
    rv_gpu_efficiency *va = rv_efficiency_for_gpu(table, "A", job_y, NULL), *vb = rv_efficiency_for_gpu(table, "B", job_y, NULL);
    rv_efficiency_pair_views(va, vb);
    move m = { &b, va, vb };
    rv_cost_model *model;
    rv_cost_plan *plan = project(job_y, &a, &m, &model);
    const rv_cost_class_stats *elementwise = &plan->classes[RV_COST_ELEMENTWISE];
    ck_assert_uint_eq(elementwise->by_table, 2);
    /* 1.2e33 ns each, up to 1.2e48 at the range's top; the range's bottom
     * (B's quartiles say 0.4) stays a few milliseconds */
    ck_assert(elementwise->predicted_ns == INT64_MAX && elementwise->predicted_high_ns == INT64_MAX &&
              elementwise->term_ns[RV_TERM_BANDWIDTH] == INT64_MAX);
    ck_assert(elementwise->predicted_low_ns > 0 && elementwise->predicted_low_ns < INT64_MAX);
    ck_assert(!rv_cost_plan_apply(job_y, plan, "test", &error));
    ck_assert_msg(error->code == RV_ERROR_USAGE && !strchr(error->message, '\n'), "%s", error->message);
    g_clear_error(&error);
    rv_cost_plan_free(plan);
    rv_cost_model_free(model);
    rv_gpu_efficiency_free(va);
    rv_gpu_efficiency_free(vb);
    rv_efficiency_table_free(table);
    rv_graph_free(job_y);
    scratch_remove(folder, path);
    g_free(text);
}
END_TEST

/* Found by fuzz_efficiency: a bucket's efficiency (roofline over time)
 * was not bounded, only its quartiles, so a bucket of 1e15 us of roofline
 * in 1e-12 us (10^27) was accepted, and projected a target's kernels to
 * their fixed cost alone.  calibrate leaves out every sample above its
 * bound (1, or 4 from the cache), so no bucket it writes passes it. */
START_TEST(a_bucket_above_its_bound_is_refused)
{
    char *text = small_table_text();
    char *folder, *path = scratch_table_path(&folder);
    json_t *root = json_loads(text, 0, NULL);
    json_t *bucket = json_array_get(json_object_get(json_array_get(json_object_get(root, "recordings"), 0), "buckets"), 0);
    ck_assert(json_object_get(bucket, "variant") == NULL);
    const struct { const char *variant; double roofline_us; const char *refused; } cases[] = {
        { NULL, 1e15, "recording 1, bucket 1: a bucket's efficiency ('roofline_us' / 'variable_us') is 1e+15, "
                      "above its bound of 1" },
        { NULL, 1.01, "is 1.01, above its bound of 1" },
        { "in_cache", 4.01, "is 4.01, above its bound of 4" },
        { NULL, 1.0, NULL },
        { "in_cache", 4.0, NULL },
    };
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        if (cases[i].variant) json_object_set_new(bucket, "variant", json_string(cases[i].variant));
        else json_object_del(bucket, "variant");
        json_object_set_new(bucket, "roofline_us", json_real(cases[i].roofline_us));
        json_object_set_new(bucket, "variable_us", json_real(1.0));
        ck_assert(json_dump_file(root, path, 0) == 0);
        GError *error = NULL;
        rv_efficiency_table *table = rv_efficiency_table_load(path, &error);
        if (cases[i].refused)
            ck_assert_msg(table == NULL && strstr(error->message, cases[i].refused), "case %zu: %s", i,
                          error ? error->message : "accepted");
        else
            ck_assert_msg(table != NULL, "case %zu: %s", i, error ? error->message : "");
        g_clear_error(&error);
        rv_efficiency_table_free(table);
    }
    json_decref(root);
    scratch_remove(folder, path);
    g_free(text);
}
END_TEST

/* A bucket of `kernels` elementwise vector kernels of `decade` at `efficiency`. */
static json_t *bucket_of(int decade, double kernels, double efficiency)
{
    return json_pack("{s:s,s:s,s:i,s:f,s:f,s:f,s:f,s:f}", "class", "elementwise", "unit", "vector", "decade", decade,
                     "kernels", kernels, "roofline_us", efficiency * 1000, "variable_us", 1000.0, "q25", efficiency,
                     "q75", efficiency);
}

/* Found reading the views that fuzz_efficiency exercises: a bucket may
 * hold 10^9 kernels in each recording, and the view's and the listing's
 * guint sums wrapped past 2^32.  Five recordings of 10^9 kernels at 0.5
 * in decade 5 against one of 10^9 at 0.25 in decade 7: a kernel of decade
 * 6 takes the neighbour with more kernels, decade 5 (its 5 x 10^9 had
 * wrapped to 705,032,704, fewer); the listing's samples stop at 2^32 - 1. */
START_TEST(huge_bucket_counts_do_not_wrap)
{
    char *text = small_table_text();
    json_t *root = json_loads(text, 0, NULL), *recordings = json_object_get(root, "recordings");
    json_t *model = json_deep_copy(json_array_get(recordings, 0));
    json_array_clear(recordings);
    for (int i = 0; i < 5; i++) {
        json_t *r = json_deep_copy(model), *buckets = json_array();
        json_array_append_new(buckets, bucket_of(5, 1e9, 0.5));
        if (i == 0) json_array_append_new(buckets, bucket_of(7, 1e9, 0.25));
        if (i == 1)
            for (int extra = 0; extra < 4; extra++) json_array_append_new(buckets, bucket_of(10 + extra, 1e9, 0.5));
        json_object_set_new(r, "buckets", buckets);
        json_object_set_new(r, "sha256", json_sprintf("recording %d", i));
        json_array_append_new(recordings, r);
    }
    json_decref(model);
    char *folder, *path = scratch_table_path(&folder);
    ck_assert(json_dump_file(root, path, 0) == 0);
    json_decref(root);
    GError *error = NULL;
    rv_efficiency_table *table = rv_efficiency_table_load(path, &error);
    ck_assert_msg(table != NULL, "%s", error ? error->message : "");
    ck_assert_uint_eq(rv_efficiency_table_recording(table, 1).samples, G_MAXUINT); /* 5 x 10^9 */
    rv_gpu_efficiency *view = rv_efficiency_for_gpu(table, "A", NULL, NULL);
    rv_cost_bucket six = { RV_COST_ELEMENTWISE, RV_UNIT_VECTOR, RV_BUCKET_PLAIN, 6 };
    rv_efficiency_pair pair;
    ck_assert(rv_efficiency_bucket_ratio(view, view, six, six, &pair));
    ck_assert_double_eq_tol(pair.source, 0.5, 1e-9);
    rv_gpu_efficiency_free(view);
    rv_efficiency_table_free(table);
    scratch_remove(folder, path);
    g_free(text);
}
END_TEST

/* Two GPUs' efficiencies are compared at one size.  GPU A recorded
 * decade 5 at 0.06 (10 kernels); GPU B decade 5 at 0.03 (10) and decade 7
 * at 0.25 (37).  A kernel of decade 6, which neither has, reads decade 5
 * on both (ratio 2), not A's 5 against B's 7 (0.24, B's larger kernels).
 * Found on an MI300X ResNet, whose batch norms projected to an H100 ran
 * 4.5x slower for that alone.  With B's decade 5 gone, no size is shared
 * and the kernel keeps its own efficiency (no ratio). */
START_TEST(neighbouring_decades_are_the_same_on_both_sides)
{
    char *text = small_table_text();
    json_t *root = json_loads(text, 0, NULL), *recordings = json_object_get(root, "recordings");
    json_t *model = json_deep_copy(json_array_get(recordings, 0));
    json_array_clear(recordings);
    for (int with_five = 1; with_five >= 0; with_five--) {
        json_array_clear(recordings);
        const char *gpus[] = { "A", "B" };
        for (int i = 0; i < 2; i++) {
            json_t *r = json_deep_copy(model), *buckets = json_array();
            if (i == 0 || with_five) json_array_append_new(buckets, bucket_of(5, 10, i == 0 ? 0.06 : 0.03));
            if (i == 1) json_array_append_new(buckets, bucket_of(7, 37, 0.25));
            json_object_set_new(r, "buckets", buckets);
            json_object_set_new(r, "gpu", json_string(gpus[i]));
            json_object_set_new(r, "sha256", json_sprintf("recording %d", i));
            json_array_append_new(recordings, r);
        }
        char *folder, *path = scratch_table_path(&folder);
        ck_assert(json_dump_file(root, path, 0) == 0);
        GError *error = NULL;
        rv_efficiency_table *table = rv_efficiency_table_load(path, &error);
        ck_assert_msg(table != NULL, "%s", error ? error->message : "");
        rv_gpu_efficiency *a = rv_efficiency_for_gpu(table, "A", NULL, NULL);
        rv_gpu_efficiency *b = rv_efficiency_for_gpu(table, "B", NULL, NULL);
        rv_cost_bucket six = { RV_COST_ELEMENTWISE, RV_UNIT_VECTOR, RV_BUCKET_PLAIN, 6 };
        rv_efficiency_pair pair;
        gboolean found = rv_efficiency_bucket_ratio(a, b, six, six, &pair);
        ck_assert(found == with_five);
        if (found) ck_assert_double_eq_tol(pair.source / pair.target, 2.0, 1e-9);
        rv_gpu_efficiency_free(a);
        rv_gpu_efficiency_free(b);
        rv_efficiency_table_free(table);
        scratch_remove(folder, path);
    }
    json_decref(model);
    json_decref(root);
    g_free(text);
}
END_TEST

/* Found by fuzz_efficiency (a table written back and read again): the
 * writer packed a recording's kernels, a json_int_t, with json_pack's
 * "i" (an int), so 2^31 kernels or more were written as a negative
 * number and the table calibrate wrote was refused when read back. */
START_TEST(the_largest_counts_are_written_back)
{
    char *text = small_table_text();
    json_t *root = json_loads(text, 0, NULL);
    json_t *recording = json_array_get(json_object_get(root, "recordings"), 0);
    json_object_set_new(recording, "kernels", json_integer(G_MAXUINT));
    json_object_set_new(recording, "rejected", json_integer(G_MAXUINT));
    json_object_set_new(recording, "gap_samples", json_integer(G_MAXUINT));
    char *folder, *path = scratch_table_path(&folder);
    ck_assert(json_dump_file(root, path, 0) == 0);
    json_decref(root);
    GError *error = NULL;
    rv_efficiency_table *table = rv_efficiency_table_load(path, &error);
    ck_assert_msg(table != NULL, "%s", error ? error->message : "");
    char *written = rv_efficiency_table_to_json(table);
    ck_assert(g_file_set_contents(path, written, -1, NULL));
    rv_efficiency_table *again = rv_efficiency_table_load(path, &error);
    ck_assert_msg(again != NULL, "%s", error ? error->message : "");
    rv_efficiency_recording r = rv_efficiency_table_recording(again, 0);
    ck_assert(r.kernels == G_MAXUINT && r.rejected == G_MAXUINT);
    rv_efficiency_table_free(again);
    rv_efficiency_table_free(table);
    g_free(written);
    scratch_remove(folder, path);
    g_free(text);
}
END_TEST

START_TEST(a_recording_of_the_same_file_is_replaced)
{
    rv_gpu a = make_gpu("A", "nvidia", 100, 1e12, 0);
    const int64_t sizes[] = { 1000000 };
    recording_spec x = { "aten::add", US(2), 0.8, 0.8 };
    rv_efficiency_table *table = rv_efficiency_table_new();
    add_recording(table, &a, &x, sizes, 1, "x");
    rv_graph *graph = synthetic_recording(&a, &x, sizes, 1, 7);
    rv_cost_model *model = rv_cost_model_new(graph, &a, FALSE);
    gboolean replaced = FALSE;
    ck_assert(rv_efficiency_table_add(table, model, "x again", "x", &replaced, NULL));
    ck_assert(replaced);
    ck_assert_uint_eq(rv_efficiency_table_count(table), 1);
    ck_assert_uint_eq(rv_efficiency_table_recording(table, 0).kernels, 7);
    rv_cost_model_free(model);
    rv_graph_free(graph);
    /* a recording with nothing to measure is refused */
    tiny t = tiny_new();
    tiny_task(&t, t.cpu, RV_TASK_CPU, "cudaMalloc", US(5), RV_PHASE_OTHER);
    model = rv_cost_model_new(t.graph, &a, FALSE);
    GError *error = NULL;
    ck_assert(!rv_efficiency_table_add(table, model, "empty", "e", NULL, &error));
    ck_assert(strstr(error->message, "no GPU kernel to calibrate on"));
    g_error_free(error);
    rv_cost_model_free(model);
    rv_graph_free(t.graph);
    rv_efficiency_table_free(table);
}
END_TEST

/* ---- ranges ---------------------------------------------------------------- */

START_TEST(ranges_compound_and_move_durations)
{
    tiny t = tiny_new();
    int32_t k = tiny_launch(&t, "kernel", 1000, US(100), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    int32_t exact = tiny_launch(&t, "other", 1000, US(10), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    tiny_close_step(&t);
    ck_assert(!rv_graph_has_duration_ranges(t.graph));
    rv_duration_range_set(t.graph, k, 0.5, 2.0);
    rv_duration_range_set(t.graph, k, 0.8, 1.5);
    rv_duration_range r = rv_duration_range_of(t.graph, k);
    ck_assert_double_eq_tol(r.low, 0.4, 1e-6);
    ck_assert_double_eq_tol(r.high, 3.0, 1e-6);
    ck_assert(rv_graph_has_duration_ranges(t.graph));
    rv_graph *low = rv_graph_copy(t.graph), *high = rv_graph_copy(t.graph);
    ck_assert(rv_graph_to_range_end(low, FALSE, NULL) && rv_graph_to_range_end(high, TRUE, NULL));
    ck_assert_int_eq(rv_graph_task(low, k)->duration_ns, US(40));
    ck_assert_int_eq(rv_graph_task(high, k)->duration_ns, US(300));
    ck_assert_int_eq(rv_graph_task(low, exact)->duration_ns, US(10));
    ck_assert_int_eq(rv_graph_task(high, exact)->duration_ns, US(10));
    rv_graph_free(low);
    rv_graph_free(high);
    rv_graph_free(t.graph);
}
END_TEST

/* A plan's range holds its value, and applying it records the range. */
START_TEST(a_projection_carries_its_range_into_the_graph)
{
    rv_gpu a = make_gpu("A", "nvidia", 100, 1e12, 0), b = make_gpu("B", "amd", 100, 2e12, 0);
    tiny t = tiny_new();
    int32_t k = add_kernel(&t, "vectorized_elementwise_kernel<BFloat16 add>", "aten::add", "[[1000000],[1000000]]",
                           US(50), 0);
    tiny_close_step(&t);
    move m = { &b, NULL, NULL };
    rv_cost_model *model;
    rv_cost_plan *plan = project(t.graph, &a, &m, &model);
    double ns = planned(plan, k), low = g_array_index(plan->low_ns, double, k), high = g_array_index(plan->high_ns, double, k);
    ck_assert(low < ns && ns < high);
    ck_assert(rv_cost_plan_apply(t.graph, plan, "test", NULL));
    rv_duration_range r = rv_duration_range_of(t.graph, k);
    ck_assert_double_eq_tol(r.low, low / ns, 1e-3);
    ck_assert_double_eq_tol(r.high, high / ns, 1e-3);
    rv_cost_plan_free(plan);
    rv_cost_model_free(model);
    rv_graph_free(t.graph);
}
END_TEST

/* ---- launches from a trace ---------------------------------------------------- */

START_TEST(launches_are_read_from_the_trace)
{
    tt_trace *trace = tt_new(1.7e15);
    tt_runtime(trace, 1, "cudaLaunchKernel", 0, 5, 11);
    tt_event(trace, "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k1\", \"pid\": 0, \"tid\": 7, \"ts\": %.3f, "
                    "\"dur\": 4, \"args\": {\"correlation\": 11, \"stream\": 7, \"grid\": [4, 2, 1], \"block\": [128, 1, 1], "
                    "\"registers per thread\": 40, \"shared memory\": 8192}}", tt_base(trace) + 10);
    tt_runtime(trace, 1, "hipExtModuleLaunchKernel", 20, 5, 12);
    tt_event(trace, "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"Cijk_Alik_Bljk_BBS\", \"pid\": 0, \"tid\": 7, "
                    "\"ts\": %.3f, \"dur\": 4, \"args\": {\"correlation\": 12, \"stream\": 7, \"grid\": [73728, 1, 1], "
                    "\"block\": [256, 1, 1]}}", tt_base(trace) + 30);
    tt_event(trace, "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k3\", \"pid\": 0, \"tid\": 7, \"ts\": %.3f, "
                    "\"dur\": 4, \"args\": {\"stream\": 7, \"grid\": \"big\", \"block\": [0, 1, 1]}}", tt_base(trace) + 40);
    rv_graph *graph = tt_build(trace);
    int found = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task(graph, id);
        const char *name = rv_strings_get(graph->strings, task->name);
        const rv_launch *launch = rv_task_launch(graph, id);
        if (strcmp(name, "k1") == 0) {
            ck_assert(launch && launch->blocks == 8 && launch->threads == 128 && launch->registers == 40 &&
                      launch->shared_bytes == 8192);
            found++;
        } else if (strcmp(name, "Cijk_Alik_Bljk_BBS") == 0) {
            ck_assert(launch && launch->blocks == 288 && launch->threads == 256 && launch->registers == 0);
            found++;
        } else if (strcmp(name, "k3") == 0) {
            ck_assert(launch == NULL); /* a grid that is not three numbers is no launch */
            found++;
        }
    }
    ck_assert_int_eq(found, 3);
    rv_graph_free(graph);
    tt_free(trace);
}
END_TEST

int main(void)
{
    Suite *suite = suite_create("projection");
    TCase *terms = tcase_create("terms");
    tcase_add_test(terms, waves_decide_a_grid_of_sms_plus_one);
    tcase_add_test(terms, waves_leave_a_library_gemm_to_its_library);
    tcase_add_test(terms, occupancy_from_threads_registers_and_shared_memory);
    tcase_add_test(terms, fixed_cost_decides_one_microsecond_kernels);
    tcase_add_test(terms, cache_decides_working_sets_under_and_over_it);
    tcase_add_test(terms, bandwidth_moves_only_the_share_it_held);
    tcase_add_test(terms, library_helpers_follow_their_convolutions);
    tcase_add_test(terms, waves_across_vendors_keep_the_blocks_an_sm_held);
    suite_add_tcase(suite, terms);
    TCase *tables = tcase_create("tables");
    tcase_add_test(tables, views_leave_out_the_projected_job);
    tcase_add_test(tables, a_job_inside_another_is_the_same_job);
    tcase_add_test(tables, pairs_decide_where_the_gpus_share_jobs);
    tcase_add_test(tables, table_file_round_trip_and_refusals);
    tcase_add_test(tables, a_recording_of_the_same_file_is_replaced);
    tcase_add_test(tables, a_refused_table_is_one_clean_line);
    tcase_add_test(tables, a_recording_counts_whole_numbers_that_fit);
    tcase_add_test(tables, a_pair_ratio_of_fixed_costs_stays_finite);
    tcase_add_test(tables, a_table_of_tiny_efficiencies_saturates_the_totals);
    tcase_add_test(tables, a_bucket_above_its_bound_is_refused);
    tcase_add_test(tables, huge_bucket_counts_do_not_wrap);
    tcase_add_test(tables, neighbouring_decades_are_the_same_on_both_sides);
    tcase_add_test(tables, the_largest_counts_are_written_back);
    suite_add_tcase(suite, tables);
    TCase *ranges = tcase_create("ranges");
    tcase_add_test(ranges, ranges_compound_and_move_durations);
    tcase_add_test(ranges, a_projection_carries_its_range_into_the_graph);
    tcase_add_test(ranges, launches_are_read_from_the_trace);
    suite_add_tcase(suite, ranges);
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? 0 : 1;
}
