/*
 * test_costmodel.c - the GPU catalogue (gpus.h) and the kernel cost model
 * (costmodel.h): loading and refusing catalogues, finding GPUs by name and
 * by deviceProperties, classifying kernel names of NVIDIA and AMD
 * libraries, reading dtypes, FLOPs and bytes from Input Dims, and the
 * model's promise that re-costing for the same GPU and dtype gives the
 * recorded time back.  Catalogue from REVERIE_GPU_CATALOGUE (the source
 * tree's data/gpus.json); real traces from traces/ (skipped when absent).
 */
#include <check.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include "plugin_harness.h"
#include "reverie/costmodel.h"
#include "reverie/efficiency.h"
#include "reverie/error.h"
#include "reverie/inserted.h"
#include "reverie/layers.h"
#include "reverie/shapes.h"
#include "reverie/trace.h"

static rv_gpu_catalogue *catalogue(void)
{
    GError *error = NULL;
    rv_gpu_catalogue *c = rv_gpu_catalogue_load_default(&error);
    ck_assert_msg(c != NULL, "%s", error ? error->message : "");
    return c;
}

/* ---- the catalogue -------------------------------------------------------- */

START_TEST(catalogue_covers_the_issue)
{
    rv_gpu_catalogue *c = catalogue();
    static const char *const ids[] = { "V100-SXM2", "T4", "A10G", "RTX-2080-Ti", "A100-40GB", "A100-80GB", "H100-SXM",
                                       "H100-PCIe", "H200", "B200", "MI250X", "MI300X", NULL };
    for (const char *const *id = ids; *id; id++) {
        const rv_gpu *gpu = rv_gpu_find(c, *id, NULL);
        ck_assert_msg(gpu != NULL, "%s missing", *id);
        ck_assert_msg(gpu->memory_Bps > 0 && gpu->pcie_Bps > 0 && gpu->vector_flops[RV_DTYPE_FP32] > 0, "%s", *id);
        ck_assert_msg(g_hash_table_contains(gpu->sources, "memory_GBps"), "%s: no memory source", *id);
    }
    /* a few datasheet figures, so that a typo in the file is caught */
    ck_assert_double_eq_tol(rv_gpu_find(c, "H100-SXM", NULL)->memory_Bps, 3.35e12, 1e6);
    ck_assert_double_eq_tol(rv_gpu_find(c, "MI300X", NULL)->matrix_flops[RV_DTYPE_BF16], 1307.4e12, 1e9);
    ck_assert_double_eq_tol(rv_gpu_find(c, "V100", NULL)->matrix_flops[RV_DTYPE_FP16], 125e12, 1e9);
    ck_assert_double_eq_tol(rv_gpu_find(c, "A10G", NULL)->matrix_flops[RV_DTYPE_BF16], 70e12, 1e9);
    ck_assert(rv_gpu_find(c, "V100", NULL)->matrix_flops[RV_DTYPE_BF16] == 0);  /* no bf16 Tensor Cores */
    rv_gpu_catalogue_free(c);
}
END_TEST

START_TEST(names_and_aliases)
{
    rv_gpu_catalogue *c = catalogue();
    ck_assert_str_eq(rv_gpu_find(c, "h100", NULL)->id, "H100-SXM");
    ck_assert_str_eq(rv_gpu_find(c, "mi300x_vf", NULL)->id, "MI300X");
    ck_assert_str_eq(rv_gpu_find(c, "rtx 2080 ti", NULL)->id, "RTX-2080-Ti");
    GError *error = NULL;
    ck_assert(rv_gpu_find(c, "TPUv5", &error) == NULL);
    ck_assert(g_error_matches(error, RV_ERROR, RV_ERROR_USAGE));
    ck_assert_msg(strstr(error->message, "unknown GPU 'TPUv5'") && strstr(error->message, "MI300X") &&
                  strstr(error->message, "A10G") && !strchr(error->message, '\n'), "%s", error->message);
    g_error_free(error);
    rv_gpu_catalogue_free(c);
}
END_TEST

START_TEST(device_properties_names)
{
    rv_gpu_catalogue *c = catalogue();
    static const char *const pairs[][2] = {
        { "NVIDIA H100 80GB HBM3", "H100-SXM" }, { "NVIDIA H100 PCIe", "H100-PCIe" },
        { "AMD Instinct MI300X VF", "MI300X" }, { "Tesla V100-SXM2-32GB", "V100-SXM2" },
        { "Tesla V100-DGXS-32GB", "V100-SXM2" }, { "Tesla V100-PCIE-16GB", "V100-PCIe" }, { "NVIDIA A10G", "A10G" },
        { "NVIDIA A100-PG509-200", "A100-40GB" }, { "NVIDIA A100-SXM4-80GB", "A100-80GB" },
        { "NVIDIA GeForce RTX 2080 Ti", "RTX-2080-Ti" }, { "Tesla T4", "T4" }, { "NVIDIA H200", "H200" },
        { "AMD Instinct MI250X/MI250", "MI250X" }, { "NVIDIA B200", "B200" },
    };
    for (gsize i = 0; i < G_N_ELEMENTS(pairs); i++) {
        const rv_gpu *gpu = rv_gpu_match_device(c, pairs[i][0]);
        ck_assert_msg(gpu && strcmp(gpu->id, pairs[i][1]) == 0, "%s -> %s", pairs[i][0], gpu ? gpu->id : "none");
    }
    ck_assert(rv_gpu_match_device(c, "AMD Radeon Graphics") == NULL);
    ck_assert(rv_gpu_match_device(c, "Synthetic GPU") == NULL);
    rv_gpu_catalogue_free(c);
}
END_TEST

/* A catalogue file with one entry whose JSON is `entry`. */
static char *write_catalogue(const char *folder, const char *entry)
{
    char *path = g_build_filename(folder, "gpus.json", NULL);
    char *text = g_strdup_printf("{\"format\": \"reverie-gpu-catalogue\", \"gpus\": [%s]}", entry);
    ck_assert(g_file_set_contents(path, text, -1, NULL));
    g_free(text);
    return path;
}

#define GOOD_ENTRY "\"id\": \"X1\", \"name\": \"X\", \"vendor\": \"nvidia\", \"vector_tflops\": {\"fp32\": 10}, " \
                   "\"memory_GBps\": 100, \"pcie_GBps\": 32, \"sources\": {\"vector_tflops\": \"d\", " \
                   "\"memory_GBps\": \"d\", \"pcie_GBps\": \"d\"}"

START_TEST(bad_catalogues_are_refused)
{
    char *folder = g_dir_make_tmp("reverie-gpus-XXXXXX", NULL);
    static const char *const cases[][2] = {
        { "{" GOOD_ENTRY "}", NULL },
        { "{" GOOD_ENTRY ", \"sm_count\": 80}", "'sm_count' has no source" },
        { "{" GOOD_ENTRY ", \"speed\": 3}", "unknown key 'speed'" },
        { "{\"id\": \"X1\", \"name\": \"X\", \"vendor\": \"nvidia\", \"vector_tflops\": {\"fp32\": -1}, \"memory_GBps\": 100, "
          "\"pcie_GBps\": 32, \"sources\": {\"vector_tflops\": \"d\", \"memory_GBps\": \"d\", \"pcie_GBps\": \"d\"}}",
          "'vector_tflops' must be a positive number" },
        { "{" GOOD_ENTRY "}, {" GOOD_ENTRY "}", "both answer to 'X1'" },
        { "{" GOOD_ENTRY ", \"matrix_tflops\": {\"fp16\": 3}}", "'matrix_tflops' has no source" },
        { "{\"id\": \"X1\", \"name\": \"X\", \"vendor\": \"nvidia\", \"vector_tflops\": {\"fp32\": 1}, \"memory_GBps\": 100, "
          "\"pcie_GBps\": 32, \"matrix_tflops\": {\"fp12\": 3}, \"sources\": {\"vector_tflops\": \"d\", \"memory_GBps\": \"d\", "
          "\"pcie_GBps\": \"d\", \"matrix_tflops\": \"d\"}}", "unknown dtype 'fp12'" },
        { "[]", "not an object" },
    };
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        char *path = write_catalogue(folder, cases[i][0]);
        GError *error = NULL;
        rv_gpu_catalogue *c = rv_gpu_catalogue_load(path, &error);
        if (cases[i][1] == NULL) {
            ck_assert_msg(c != NULL, "%s", error ? error->message : "");
        } else {
            ck_assert_msg(c == NULL && g_error_matches(error, RV_ERROR, RV_ERROR_INPUT) && strstr(error->message, cases[i][1]),
                          "case %zu: %s", i, error ? error->message : "loaded");
            ck_assert(strchr(error->message, '\n') == NULL);
            g_error_free(error);
        }
        rv_gpu_catalogue_free(c);
        g_unlink(path);
        g_free(path);
    }
    GError *error = NULL;
    char *missing = g_build_filename(folder, "none.json", NULL);
    ck_assert(rv_gpu_catalogue_load(missing, &error) == NULL && g_error_matches(error, RV_ERROR, RV_ERROR_INPUT));
    g_error_free(error);
    g_free(missing);
    g_rmdir(folder);
    g_free(folder);
}
END_TEST

/* ---- names, dtypes and work --------------------------------------------- */

START_TEST(kernel_classes)
{
    static const struct { const char *name, *op; rv_task_kind kind; rv_cost_class cls; } cases[] = {
        { "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "aten::addmm", RV_TASK_KERNEL, RV_COST_GEMM },
        { "Cijk_Ailk_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT128x256x32", "aten::addmm", RV_TASK_KERNEL, RV_COST_GEMM },
        { "Cijk_Ailk_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT16x448x64", "aten::bmm", RV_TASK_KERNEL, RV_COST_ATTENTION },
        { "void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_nn_align1>", "aten::bmm", RV_TASK_KERNEL,
          RV_COST_ATTENTION },
        { "volta_sgemm_128x64_nn", "aten::cudnn_convolution", RV_TASK_KERNEL, RV_COST_CONV },
        { "void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, true, false, true>", "aten::cudnn_convolution",
          RV_TASK_KERNEL, RV_COST_CONV },
        { "igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt256x64x8", "aten::miopen_convolution", RV_TASK_KERNEL, RV_COST_CONV },
        { "void cudnn::engines_precompiled::nchwToNhwcKernel<__nv_bfloat16>", "aten::cudnn_convolution", RV_TASK_KERNEL,
          RV_COST_COPY },
        { "flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64>>", "aten::_flash_attention_forward", RV_TASK_KERNEL,
          RV_COST_ATTENTION },
        { "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>>", "aten::add",
          RV_TASK_KERNEL, RV_COST_ELEMENTWISE },
        { "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float>", "aten::_softmax",
          RV_TASK_KERNEL, RV_COST_REDUCTION },
        { "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>",
          "aten::native_layer_norm", RV_TASK_KERNEL, RV_COST_NORM },
        { "void at::native::normal_kernel<float>", "aten::normal_", RV_TASK_KERNEL, RV_COST_OTHER },
        { "void at::native::(anonymous namespace)::CatArrayBatchedCopy_contig<c10::BFloat16>", "aten::cat",
          RV_TASK_KERNEL, RV_COST_COPY },
        { "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "record_param_comms", RV_TASK_COMM, RV_COST_COMM },
        { "Memcpy HtoD (Pageable -> Device)", "aten::copy_", RV_TASK_MEMCPY, RV_COST_HOST_COPY },
        { "Memcpy DtoD (Device -> Device)", "aten::copy_", RV_TASK_MEMCPY, RV_COST_COPY },
        { "void cudnn::fusion::compute_dot_do_o_specialized<true, 64>(void const*, void const*, void*)",
          "aten::_cudnn_attention_backward", RV_TASK_KERNEL, RV_COST_REDUCTION },
        { "void cudnn::fusion::convert_dq_to_16bits<true>(void const*, void*, unsigned int)",
          "aten::_cudnn_attention_backward", RV_TASK_KERNEL, RV_COST_COPY },
        { "void flash_bwd_dot_do_o_kernel<true, Flash_bwd_kernel_traits<64, 128>>", "aten::_flash_attention_backward",
          RV_TASK_KERNEL, RV_COST_REDUCTION },
        { "triton_poi_fused_add_mul_0", "", RV_TASK_KERNEL, RV_COST_ELEMENTWISE },
        { "my_custom_kernel_v2", "myext::op", RV_TASK_KERNEL, RV_COST_UNKNOWN },
        { "convert_kernel_v2", "", RV_TASK_KERNEL, RV_COST_UNKNOWN },
        { "mystery", "aten::addmm", RV_TASK_KERNEL, RV_COST_GEMM },
    };
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        rv_cost_class cls = rv_cost_classify_name(cases[i].name, cases[i].op, cases[i].kind);
        ck_assert_msg(cls == cases[i].cls, "%s: %s, expected %s", cases[i].name, rv_cost_class_name(cls),
                      rv_cost_class_name(cases[i].cls));
    }
}
END_TEST

START_TEST(kernel_dtypes)
{
    static const struct { const char *name; rv_dtype dtype; gboolean integer; } cases[] = {
        { "ampere_sgemm_32x128_tn", RV_DTYPE_FP32, FALSE },
        { "ampere_bf16_s16816gemm_bf16_128x64_ldg8_relu_f2f_stages_64x4_tn", RV_DTYPE_BF16, FALSE },
        { "volta_fp16_s884gemm_fp16_128x128_ldg8_f2f_nn", RV_DTYPE_FP16, FALSE },
        { "void cutlass_cudnn::Kernel<cutlass_tensorop_s1688dgrad_optimized_tf32_64x64>", RV_DTYPE_TF32, FALSE },
        { "Cijk_Ailk_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs", RV_DTYPE_BF16, FALSE },
        { "Cijk_Ailk_Bljk_HHS_BH_MT128x128", RV_DTYPE_FP16, FALSE },
        { "Cijk_Ailk_Bljk_SB_MT64x64", RV_DTYPE_FP32, FALSE },
        { "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float>", RV_DTYPE_BF16, FALSE },
        { "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>", RV_DTYPE_FP32, FALSE },
        { "void at::native::index_elementwise_kernel<128, 4, long>", RV_DTYPE_UNKNOWN, TRUE },
        { "sm90_xmma_gemm_e4m3e4m3_bf16f32_f32_tn", RV_DTYPE_FP8, FALSE },
        { "volta_dgemm_64x64_nn", RV_DTYPE_FP64, FALSE },
        { "mystery_kernel", RV_DTYPE_UNKNOWN, FALSE },
    };
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        gboolean integer = FALSE;
        rv_dtype dtype = rv_cost_dtype_of_name(cases[i].name, &integer);
        ck_assert_msg(dtype == cases[i].dtype && integer == cases[i].integer, "%s: %s%s", cases[i].name,
                      rv_dtype_name(dtype), integer ? " (integer)" : "");
    }
}
END_TEST

static void check_work_with(rv_cost_class cls, const char *op, const char *dims, const char *op_args, double flops,
                            double bytes)
{
    double f = 0, b = 0;
    gboolean aligned = FALSE;
    ck_assert_msg(rv_cost_work_of(cls, op, dims, op_args, 2, &f, &b, &aligned), "%s %s: no work", op, dims);
    ck_assert_msg(fabs(f - flops) <= 1e-9 * flops, "%s %s: %.6g FLOPs, expected %.6g", op, dims, f, flops);
    if (bytes > 0) ck_assert_msg(fabs(b - bytes) <= 1e-9 * bytes, "%s %s: %.6g bytes, expected %.6g", op, dims, b, bytes);
}

static void check_work(rv_cost_class cls, const char *op, const char *dims, double flops, double bytes)
{
    check_work_with(cls, op, dims, NULL, flops, bytes);
}

START_TEST(work_from_shapes)
{
    /* linear(X (1,25089,768), W (3072,768), b): 2*25089*768*3072 */
    check_work(RV_COST_GEMM, "aten::addmm", "[[1,25089,768],[3072,768],[3072]]", 2.0 * 25089 * 768 * 3072,
               2.0 * (25089.0 * 768 + 25089.0 * 3072 + 768.0 * 3072));
    /* addmm(bias, X (4096,256), W (256,128)) */
    check_work(RV_COST_GEMM, "aten::addmm", "[[128],[4096,256],[256,128],[],[]]", 2.0 * 4096 * 256 * 128, 0);
    /* a shared weight is read once, not once per leading row */
    check_work(RV_COST_GEMM, "aten::addmm", "[[3136,8,768],[768,768],[768]]", 2.0 * 3136 * 8 * 768 * 768,
               2.0 * (3136.0 * 8 * 768 * 2 + 768.0 * 768));
    /* bmm (96,3137,64) x (96,64,3137) */
    check_work(RV_COST_ATTENTION, "aten::bmm", "[[96,3137,64],[96,64,3137]]", 2.0 * 96 * 3137 * 3137 * 64, 0);
    /* matmul with broadcast batch dims (8,12,S,64) x (8,12,64,S) */
    check_work(RV_COST_ATTENTION, "aten::bmm", "[[8,12,197,64],[8,12,64,197]]", 2.0 * 96 * 197 * 197 * 64, 0);
    /* scaled dot-product attention: 4*B*H*S*T*D */
    check_work(RV_COST_ATTENTION, "aten::_scaled_dot_product_flash_attention", "[[2,16,1024,64],[2,16,1024,64],[2,16,1024,64]]",
               4.0 * 32 * 1024 * 1024 * 64, 0);
    /* convolution, stride 1 assumed: 2*N*O*C*kh*kw*H*W */
    check_work(RV_COST_CONV, "aten::cudnn_convolution", "[[32,64,56,56],[64,64,3,3],[],[],[],[],[]]",
               2.0 * 32 * 64 * 64 * 9 * 56 * 56, 0);
    /* a patch embedding: kernel = stride */
    check_work(RV_COST_CONV, "aten::cudnn_convolution", "[[128,3,224,224],[768,3,16,16],[],[]]",
               2.0 * 128 * 768 * 3 * 256 * 14 * 14, 0);
    /* with the recorded geometry (Concrete Inputs): a stride-2 3x3
     * convolution computes a quarter of the outputs, and writes a quarter */
    const char *stride2 = "{\"stride\":[2,2],\"padding\":[1,1],\"dilation\":[1,1],\"transposed\":false,\"groups\":1}";
    check_work_with(RV_COST_CONV, "aten::cudnn_convolution", "[[32,64,56,56],[128,64,3,3],[],[],[],[],[]]", stride2,
                    2.0 * 32 * 128 * 64 * 9 * 28 * 28,
                    2.0 * (32.0 * 64 * 56 * 56 + 128.0 * 64 * 9 + 32.0 * 128 * 28 * 28));
    /* a 1x1 projection at stride 2, no padding */
    const char *project = "{\"stride\":[2,2],\"padding\":[0,0],\"dilation\":[1,1],\"transposed\":false,\"groups\":1}";
    check_work_with(RV_COST_CONV, "aten::conv2d", "[[32,256,56,56],[512,256,1,1],[],[],[],[],[]]", project,
                    2.0 * 32 * 512 * 256 * 28 * 28, 0);
    /* a transposed convolution (weight [C, O/g, k]): every input position
     * meets the whole kernel; its output is (16-1)*2 - 2 + 3 + 1 = 32 a side */
    const char *up = "{\"stride\":[2,2],\"padding\":[1,1],\"dilation\":[1,1],\"transposed\":true,"
                     "\"output_padding\":[1,1],\"groups\":1}";
    check_work_with(RV_COST_CONV, "aten::convolution", "[[4,64,16,16],[64,32,3,3],[],[],[],[],[],[],[]]", up,
                    2.0 * 4 * 64 * 32 * 9 * 16 * 16, 2.0 * (4.0 * 64 * 256 + 64.0 * 32 * 9 + 4.0 * 32 * 32 * 32));
    /* elementwise: inputs once, the largest written once */
    check_work(RV_COST_ELEMENTWISE, "aten::add", "[[1,4096,256],[1,4096,256],[]]", 4096.0 * 256, 3.0 * 4096 * 256 * 2);
    double f, b;
    gboolean aligned;
    ck_assert(!rv_cost_work_of(RV_COST_GEMM, "aten::addmm", "[[3],[4,5],[6,7]]", NULL, 2, &f, &b, &aligned));
    ck_assert(!rv_cost_work_of(RV_COST_GEMM, "aten::mm", "not json", NULL, 2, &f, &b, &aligned));
    ck_assert(!rv_cost_work_of(RV_COST_GEMM, "aten::mm", "[[-1,5],[5,3]]", NULL, 2, &f, &b, &aligned));
    ck_assert(!rv_cost_work_of(RV_COST_UNKNOWN, "x", "[[4]]", NULL, 2, &f, &b, &aligned));
}
END_TEST

static gboolean aligned_of(const char *op, const char *dims)
{
    double f, b;
    gboolean aligned = FALSE;
    ck_assert_msg(rv_cost_work_of(RV_COST_GEMM, op, dims, NULL, 2, &f, &b, &aligned), "%s %s: no work", op, dims);
    return aligned;
}

/* Alignment is the rows' length (K of the left operand, N of the right one
 * and of the result), not their count: a 50,257-word vocabulary makes a
 * GEMM unaligned, 511 rows a sequence do not, batched or folded. */
START_TEST(alignment_of_folded_rows)
{
    ck_assert(aligned_of("aten::matmul", "[[8,511,768],[768,768]]"));
    ck_assert(aligned_of("aten::linear", "[[8,511,768],[768,768],[768]]"));
    ck_assert(!aligned_of("aten::matmul", "[[8,511,768],[768,50257]]"));
    ck_assert(!aligned_of("aten::linear", "[[8,511,768],[50257,768],[]]"));
    ck_assert(aligned_of("aten::bmm", "[[8,511,64],[8,64,512]]"));
    ck_assert(!aligned_of("aten::bmm", "[[8,512,63],[8,63,512]]"));
    ck_assert(!aligned_of("aten::bmm", "[[8,512,64],[8,64,511]]"));
}
END_TEST

/* ---- the model on real traces ---------------------------------------------- */

static gboolean keep_everything(const rv_graph *graph, int32_t task, const rv_kernel_cost *cost, rv_cost_change *change,
                                gpointer data)
{
    return TRUE;
}

/* The same GPU, dtype and sizes give every kernel its recorded time back. */
static void check_identity(const char *name, const char *gpu_id)
{
    rv_gpu_catalogue *c = catalogue();
    rv_graph *graph = load_trace(name);
    const rv_gpu *gpu = rv_gpu_of_graph(c, graph, gpu_id, "source_gpu", NULL);
    ck_assert(gpu != NULL);
    rv_cost_model *model = rv_cost_model_new(graph, gpu, TRUE);
    rv_cost_plan *plan = rv_cost_model_plan(model, keep_everything, NULL);
    guint checked = 0;
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        double ns = g_array_index(plan->new_ns, double, t);
        if (ns < 0) continue;
        int64_t recorded = g_array_index(graph->tasks, rv_task, t).duration_ns;
        ck_assert_msg(fabs(ns - (double)recorded) < 0.5 + 1e-9 * recorded, "%s task %d: %.1f ns, recorded %" G_GINT64_FORMAT,
                      name, t, ns, recorded);
        checked++;
    }
    ck_assert_uint_gt(checked, 100);
    rv_cost_plan_free(plan);
    rv_cost_model_free(model);
    rv_graph_free(graph);
    rv_gpu_catalogue_free(c);
}

START_TEST(identity_on_real_traces)
{
    check_identity("pairs/weights_fp32_vs_bf16_a10g/fp32.json.gz", NULL);
    check_identity("pairs/gpu_h100_vs_mi300x_timesformer/mi300x.json.gz", NULL);
    check_identity("hta_resnet50_v100.json.gz", NULL);
    check_identity("pairs/dataloader_workers_v100/num_workers_0.json.gz", "V100");
}
END_TEST

/* What the model sees in two traces: classes, dtypes, shapes, efficiencies in (0, 1]. */
START_TEST(model_reads_the_traces)
{
    rv_gpu_catalogue *c = catalogue();
    rv_graph *graph = load_trace("pairs/gpu_h100_vs_mi300x_timesformer/h100.json.gz");
    const rv_gpu *gpu = rv_gpu_of_graph(c, graph, NULL, "source_gpu", NULL);
    ck_assert_str_eq(gpu->id, "H100-SXM");
    rv_cost_model *model = rv_cost_model_new(graph, gpu, FALSE);
    ck_assert_int_eq(rv_cost_model_usual_dtype(model), RV_DTYPE_BF16);
    guint gemm = 0, shaped = 0, unknown = 0;
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_kernel_cost *cost = rv_cost_model_kernel(model, t);
        if (cost == NULL) continue;
        gemm += cost->cls == RV_COST_GEMM;
        shaped += cost->shaped;
        unknown += cost->cls == RV_COST_UNKNOWN;
        if (cost->cls == RV_COST_GEMM) ck_assert_int_eq(cost->unit, RV_UNIT_MATRIX);
    }
    ck_assert_uint_eq(gemm, 85);
    ck_assert_uint_eq(unknown, 0);
    ck_assert_uint_gt(shaped, 400);
    guint samples = 0;
    double gemm_efficiency = rv_cost_model_efficiency(model, RV_COST_GEMM, RV_UNIT_MATRIX, &samples);
    ck_assert_msg(samples == 85 && gemm_efficiency > 0.3 && gemm_efficiency <= 1, "gemm %.3f over %u", gemm_efficiency, samples);
    ck_assert(rv_cost_model_fixed_ns(model) > 0 && rv_cost_model_fixed_ns(model) <= 3000);
    rv_cost_model_free(model);
    rv_graph_free(graph);
    rv_gpu_catalogue_free(c);
}
END_TEST

/* A shipped trace with the cost model of its own GPU (datasheet peaks). */
typedef struct {
    rv_gpu_catalogue *catalogue;
    rv_graph *graph;
    const rv_gpu *gpu;
    rv_cost_model *model;
} modelled_trace;

static modelled_trace model_trace(const char *name)
{
    modelled_trace m = { catalogue(), load_trace(name), NULL, NULL };
    m.gpu = rv_gpu_of_graph(m.catalogue, m.graph, NULL, "source_gpu", NULL);
    m.model = rv_cost_model_new(m.graph, m.gpu, FALSE);
    return m;
}

static void modelled_trace_clear(modelled_trace *m)
{
    rv_cost_model_free(m->model);
    rv_graph_free(m->graph);
    rv_gpu_catalogue_free(m->catalogue);
}

/* The GEMMs of a bf16 autocast job are cuBLAS's nvjet kernels, whose names
 * say no dtype, while the optimizer's fp32 kernels hold most of the named
 * time: the GEMMs' speed, past anything 32-bit on an H100, says half
 * precision.  The same GEMMs 4x slower (165 TFLOPS) could be TF32: fp32. */
START_TEST(usual_dtype_from_unnamed_gemms)
{
    modelled_trace m = model_trace("recorded/h100/vit_b16_amp_bf16.json.gz");
    rv_graph *graph = m.graph;
    const rv_gpu *gpu = m.gpu;
    rv_cost_model *model = m.model;
    double fast = rv_cost_model_unnamed_gemm_flops(model);
    ck_assert_msg(fast > gpu->matrix_flops[RV_DTYPE_TF32], "%.0f TFLOPS", fast / 1e12);
    ck_assert_int_eq(rv_cost_model_usual_dtype(model), RV_DTYPE_BF16);
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_kernel_cost *cost = rv_cost_model_kernel(model, t);
        if (cost && cost->cls == RV_COST_GEMM && cost->shaped) ck_assert_int_eq(cost->unit, RV_UNIT_MATRIX);
    }
    GArray *gemms = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_kernel_cost *cost = rv_cost_model_kernel(model, t);
        if (cost && cost->cls == RV_COST_GEMM && cost->dtype_assumed) g_array_append_val(gemms, t);
    }
    rv_cost_model_free(model);
    for (guint i = 0; i < gemms->len; i++) g_array_index(graph->tasks, rv_task, g_array_index(gemms, int32_t, i)).duration_ns *= 4;
    model = m.model = rv_cost_model_new(graph, gpu, FALSE);
    ck_assert_msg(rv_cost_model_unnamed_gemm_flops(model) < gpu->matrix_flops[RV_DTYPE_TF32], "%.0f TFLOPS",
                  rv_cost_model_unnamed_gemm_flops(model) / 1e12);
    ck_assert_int_eq(rv_cost_model_usual_dtype(model), RV_DTYPE_FP32);
    g_array_unref(gemms);
    modelled_trace_clear(&m);
}
END_TEST

/* Under torch.compile every kernel runs inside the compiled graph's
 * wrappers (Torch-Compiled Region, CompiledFunction, its backward), whose
 * Input Dims are the graph's inputs: the kernels' shapes and layers come
 * from the operators inside (aten::mm with its out= operand, a Triton
 * kernel's own record).  Every GEMM of the compiled decoder is shaped and
 * marked compiled; its 48 linear layers a step are found (layers.h). */
START_TEST(compiled_graphs_shapes_inside_wrappers)
{
    modelled_trace m = model_trace("recorded/h200_compile/gpt_compiled.json.gz");
    rv_graph *graph = m.graph;
    const rv_cost_model *model = m.model;
    guint gemms = 0, shaped = 0;
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_kernel_cost *cost = rv_cost_model_kernel(model, t);
        if (cost == NULL || cost->cls != RV_COST_GEMM) continue;
        gemms++;
        shaped += cost->shaped;
        ck_assert(rv_graph_task(graph, t)->flags & RV_TASK_FLAG_COMPILED);
    }
    ck_assert_uint_gt(gemms, 700);
    ck_assert_uint_eq(shaped, gemms);
    ck_assert_int_ne(rv_cost_model_usual_dtype(model), RV_DTYPE_FP32);
    GPtrArray *layers = rv_weighted_layers_by_step(graph), *backward = rv_backward_gpu_tasks_by_step(graph);
    for (guint step = 1; step < layers->len; step++) {
        ck_assert_uint_eq(((GArray *)g_ptr_array_index(layers, step))->len, 48);
        GArray *runs = rv_weighted_backward_runs(graph, g_ptr_array_index(backward, step));
        ck_assert_uint_ge(runs->len, 24); /* the backward's GEMMs, called without autograd nodes */
        g_array_unref(runs);
    }
    g_ptr_array_unref(layers);
    g_ptr_array_unref(backward);
    modelled_trace_clear(&m);
}
END_TEST

/* Inductor pads a compiled graph's half-precision GEMMs to aligned shapes:
 * the compiled fp32 decoder's 50,257-wide vocabulary GEMMs are taken as
 * aligned (its bf16 recording multiplies by 50,264), the eager decoder's
 * are not (its bf16 recording ran them unaligned). */
static guint vocabulary_gemms(const char *name, gboolean aligned)
{
    modelled_trace m = model_trace(name);
    rv_graph *graph = m.graph;
    guint count = 0;
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_kernel_cost *cost = rv_cost_model_kernel(m.model, t);
        const rv_task *task = rv_graph_task(graph, t);
        if (cost == NULL || cost->cls != RV_COST_GEMM || task->input_dims < 0 ||
            strstr(rv_strings_get(graph->strings, task->input_dims), "50257") == NULL)
            continue;
        ck_assert_msg(cost->aligned == aligned, "%s: task %d", name, t);
        count++;
    }
    modelled_trace_clear(&m);
    return count;
}

START_TEST(compiled_half_gemms_are_padded)
{
    ck_assert_uint_ge(vocabulary_gemms("recorded/h200_compile_amp/gpt_compiled_fp32.json.gz", TRUE), 15);
    ck_assert_uint_ge(vocabulary_gemms("recorded/h200/gpt_fp32.json.gz", FALSE), 5);
}
END_TEST

/* ---- extending a model ------------------------------------------------------ */

/* The two models know the same of every task and of the trace, to the bit. */
static void assert_same_model(const rv_cost_model *a, const rv_cost_model *b, int32_t tasks)
{
    for (int32_t t = 0; t < tasks; t++) {
        const rv_kernel_cost *x = rv_cost_model_kernel(a, t), *y = rv_cost_model_kernel(b, t);
        ck_assert_msg((x == NULL) == (y == NULL), "task %d", t);
        if (x == NULL) continue;
        ck_assert_msg(x->cls == y->cls && x->dtype == y->dtype && x->dtype_assumed == y->dtype_assumed &&
                      x->unit == y->unit && x->aligned == y->aligned && x->autocast_fp32 == y->autocast_fp32 &&
                      x->shaped == y->shaped && x->library == y->library && x->fused == y->fused &&
                      x->flops == y->flops && x->bytes == y->bytes, "task %d", t);
    }
    ck_assert_int_eq(rv_cost_model_fixed_ns(a), rv_cost_model_fixed_ns(b));
    ck_assert_int_eq(rv_cost_model_usual_dtype(a), rv_cost_model_usual_dtype(b));
    for (int cls = 0; cls < RV_COST_CLASS_COUNT; cls++)
        for (int unit = RV_UNIT_VECTOR; unit <= RV_UNIT_MATRIX; unit++) {
            guint m = 0, n = 0;
            double e = rv_cost_model_efficiency(a, (rv_cost_class)cls, (rv_unit)unit, &m);
            ck_assert_msg(e == rv_cost_model_efficiency(b, (rv_cost_class)cls, (rv_unit)unit, &n) && m == n, "class %d", cls);
        }
    ck_assert(rv_cost_model_streaming_ns(a, 1e6) == rv_cost_model_streaming_ns(b, 1e6));
}

/* Insert `count` kernels named `name` lasting `ns`, after every `every`-th
 * GPU kernel of the recorded ones, then extend the model; it must be the
 * model built anew.  Returns what moved: 1 the fixed cost, 2 the usual dtype. */
static int extend_and_compare(const char *name, int64_t ns, int every, int count)
{
    rv_gpu_catalogue *c = catalogue();
    rv_graph *graph = load_trace("pairs/weights_fp32_vs_bf16_a10g/fp32.json.gz");
    const rv_gpu *gpu = rv_gpu_of_graph(c, graph, NULL, "source_gpu", NULL);
    rv_cost_model *model = rv_cost_model_new(graph, gpu, TRUE);
    int64_t fixed = rv_cost_model_fixed_ns(model);
    rv_dtype usual = rv_cost_model_usual_dtype(model);
    rv_kernel_inserter in;
    rv_kernel_inserter_init(&in, graph, model, NULL);
    int32_t recorded = rv_graph_task_count(graph);
    int inserted = 0;
    for (int32_t t = 0, seen = 0; t < recorded && inserted < count; t++) {
        const rv_task *task = rv_graph_task(graph, t);
        if (task->kind != RV_TASK_KERNEL || seen++ % every != 0) continue;
        inserted += rv_kernel_inserter_add_lasting(&in, t, FALSE, name, ns) >= 0;
    }
    ck_assert_int_eq(inserted, count);
    rv_cost_model_extend(model);
    rv_cost_model *anew = rv_cost_model_new(graph, gpu, TRUE);
    assert_same_model(model, anew, rv_graph_task_count(graph));
    int moved = (rv_cost_model_fixed_ns(anew) != fixed) | (rv_cost_model_usual_dtype(anew) != usual) << 1;
    rv_cost_model_free(anew);
    rv_cost_model_free(model);
    rv_graph_free(graph);
    rv_gpu_catalogue_free(c);
    return moved;
}

/* rv_cost_model_extend is a rebuild, whichever way it goes: a few short
 * kernels inserted (the fixed cost and the dtype stay: the calibration goes
 * on), many very short ones (the fixed cost moves: recalibrated), long bf16
 * GEMMs (the usual dtype moves: built again). */
START_TEST(extend_is_a_rebuild)
{
    ck_assert_int_eq(extend_and_compare("moe permute", 2000, 50, 4), 0);
    ck_assert_int_eq(extend_and_compare("moe router", 100, 1, 150), 1);
    ck_assert_int_eq(extend_and_compare("ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_tn", 900000000, 5, 30) & 2, 2);
}
END_TEST

/* ResNet-50's stride-2 convolutions (the 7x7 stem, the first 3x3 and the
 * 1x1 projection of stages 2-4) read their stride from the profiler's
 * Concrete Inputs, so the model counts the work they did: none of the
 * forward convolutions with a recorded geometry beats the roofline, as the
 * 3x3 and 1x1 ones did at stride 1 (4x their work). */
START_TEST(strided_convolutions_read_their_geometry)
{
    modelled_trace m = model_trace("recorded/h100/resnet50_fp32.json.gz");
    guint with_geometry = 0, strided = 0, over_roofline = 0, misread = 0;
    for (int32_t t = 0; t < rv_graph_task_count(m.graph); t++) {
        const rv_kernel_cost *cost = rv_cost_model_kernel(m.model, t);
        if (cost == NULL || cost->cls != RV_COST_CONV || !cost->shaped) continue;
        rv_conv_geometry geometry;
        if (!rv_conv_geometry_of_task(m.graph, t, &geometry)) continue;
        with_geometry++;
        strided += geometry.stride[0] == 2 && geometry.stride[1] == 2;
        rv_cost_bucket key;
        double roofline, variable;
        if (!rv_cost_model_sample(m.model, t, &key, &roofline, &variable)) continue;
        /* cuDNN's few-us helpers (workspace set-up) carry their operator's
         * whole work, a limit of their own: the convolutions proper */
        if (rv_graph_task(m.graph, t)->duration_ns >= 20000) over_roofline += roofline / variable > RV_EFFICIENCY_PLAIN_MAX;
        /* the same kernel's work without the record: 4x at stride 1, and
         * the stem's 7x7 kernel, which divides 224, read as a patch
         * embedding (a twelfth) */
        double flops, bytes;
        gboolean aligned;
        const rv_task *task = rv_graph_task(m.graph, t);
        ck_assert(rv_cost_work_of(RV_COST_CONV, rv_strings_get(m.graph->strings, task->op),
                                  rv_strings_get(m.graph->strings, task->input_dims), NULL, 4, &flops, &bytes, &aligned));
        misread += geometry.stride[0] == 2 && (flops > cost->flops * 3.9 || flops < cost->flops / 10);
    }
    guint pools = 0;
    for (int32_t t = 0; t < rv_graph_task_count(m.graph); t++) {
        rv_pool_geometry pool;
        pools += rv_graph_task(m.graph, t)->kind == RV_TASK_KERNEL &&
                 rv_pool_geometry_parse(rv_strings_get(m.graph->strings, rv_task_op_args(m.graph, t)), &pool);
    }
    ck_assert_uint_ge(pools, 2 * 5); /* the stem's max pool and the head's adaptive pool, each step */
    ck_assert_uint_gt(with_geometry, 100);
    ck_assert_uint_ge(strided, 7 * 5); /* 7 a forward, in each of the recorded steps */
    ck_assert_uint_eq(misread, strided);
    ck_assert_msg(over_roofline == 0, "%u of %u forward convolutions beat the roofline", over_roofline, with_geometry);
    modelled_trace_clear(&m);
}
END_TEST

int main(void)
{
    static const char *const traces[] = { "pairs/weights_fp32_vs_bf16_a10g/fp32.json.gz",
                                          "pairs/gpu_h100_vs_mi300x_timesformer/h100.json.gz",
                                          "pairs/gpu_h100_vs_mi300x_timesformer/mi300x.json.gz",
                                          "hta_resnet50_v100.json.gz", "pairs/dataloader_workers_v100/num_workers_0.json.gz",
                                          "recorded/h100/vit_b16_amp_bf16.json.gz",
                                          "recorded/h200_compile/gpt_compiled.json.gz",
                                          "recorded/h200_compile_amp/gpt_compiled_fp32.json.gz",
                                          "recorded/h200/gpt_fp32.json.gz", "recorded/h100/resnet50_fp32.json.gz", NULL };
    Suite *suite = suite_create("costmodel");
    TCase *catalogue_case = tcase_create("catalogue");
    tcase_add_test(catalogue_case, catalogue_covers_the_issue);
    tcase_add_test(catalogue_case, names_and_aliases);
    tcase_add_test(catalogue_case, device_properties_names);
    tcase_add_test(catalogue_case, bad_catalogues_are_refused);
    suite_add_tcase(suite, catalogue_case);
    TCase *names = tcase_create("names");
    tcase_add_test(names, kernel_classes);
    tcase_add_test(names, alignment_of_folded_rows);
    tcase_add_test(names, kernel_dtypes);
    tcase_add_test(names, work_from_shapes);
    suite_add_tcase(suite, names);
    require_project_traces(traces);
    TCase *real = tcase_create("real");
    tcase_set_timeout(real, 300);
    tcase_add_test(real, identity_on_real_traces);
    tcase_add_test(real, model_reads_the_traces);
    tcase_add_test(real, usual_dtype_from_unnamed_gemms);
    tcase_add_test(real, compiled_graphs_shapes_inside_wrappers);
    tcase_add_test(real, compiled_half_gemms_are_padded);
    tcase_add_test(real, extend_is_a_rebuild);
    tcase_add_test(real, strided_convolutions_read_their_geometry);
    suite_add_tcase(suite, real);
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed ? 1 : 0;
}
