/*
 * kernel_names.c - the cost model's class and dtype of a kernel, from its
 * name and its operator (costmodel.h).
 *
 * The word lists come from the kernels of the shared traces: cuBLAS
 * (volta_sgemm, ampere_bf16_s16816gemm, sm90_xmma_gemm, gemmSN, gemv2T,
 * nvjet), cuDNN (implicit_convolve_sgemm, scudnn, dgrad_engine,
 * wgrad_alg0_engine, cutlass fprop/dgrad, nchwToNhwc), CUTLASS, hipBLASLt
 * and Tensile (Cijk_Ailk_Bljk_B_BS_...), MIOpen (igemm_fwd_gtcx3,
 * batched_transpose, SubTensorOpWithScalar), ATen (vectorized_elementwise,
 * reduce_kernel, cunn_SoftMaxForward, vectorized_layer_norm,
 * CatArrayBatchedCopy), Triton (triton_poi / triton_red / triton_per /
 * triton_tem) and NCCL/RCCL.  The order of the tests matters: "Bias" in a
 * hipBLASLt GEMM is not an elementwise bias kernel, "normal" (a random
 * distribution) is not a norm, "convert" is not a convolution.
 */
#include "reverie/costmodel.h"
#include <string.h>

static gboolean has_any(const char *lower, const char *const *words)
{
    for (; *words != NULL; words++)
        if (strstr(lower, *words) != NULL) return TRUE;
    return FALSE;
}

/* "conv" as a convolution, not "convert" or "conversion". */
static gboolean says_conv(const char *lower)
{
    for (const char *at = strstr(lower, "conv"); at != NULL; at = strstr(at + 4, "conv"))
        if (strncmp(at, "convert", 7) != 0 && strncmp(at, "conversion", 10) != 0) return TRUE;
    return FALSE;
}

static const char *const comm_words[] = {
    "nccl", "rccl", "allreduce", "all_reduce", "allgather", "all_gather", "reducescatter", "reduce_scatter",
    "alltoall", "all_to_all", "sendrecv", "cross_device_reduce", "one_shot_all", "two_shot_all", NULL };
static const char *const attention_words[] = {
    "flash", "fmha", "attention", "attn", "sdpa", "mha_fwd", "mha_bwd", "fused_multi_head", NULL };
static const char *const conv_words[] = {
    "winograd", "implicit_gemm", "implicit_convolve", "explicit_convolve", "fprop", "dgrad", "wgrad",
    "igemm_fwd", "igemm_bwd", "igemm_wrw", "scudnn", "dgrad_engine", "wgrad_alg", "fft2d", "fft_r2c", NULL };
static const char *const gemm_words[] = {
    "gemm", "gemv", "cijk_", "matmul", "nvjet", "wmma", "tensorop", "dot_kernel", "rocblas", "hipblaslt",
    "triton_tem", "triton_mm", "cutlass", NULL };
static const char *const norm_words[] = {
    "layer_norm", "layernorm", "batch_norm", "batchnorm", "group_norm", "groupnorm", "rms_norm", "rmsnorm",
    "bn_fw", "bn_bw", "cudnn::bn_", "welford", "instance_norm", "norm_kernel", "_norm", NULL };
static const char *const reduction_words[] = {
    "splitkreduce", "reduce", "softmax", "triton_red", "triton_per", "cross_entropy", "nll_loss", "argmax",
    "argmin", "pool", "cub::device", "sum_kernel", "mean_kernel", NULL };
static const char *const copy_words[] = {
    "copy", "transpose", "permute", "nchwtonhwc", "nhwctonchw", "catarray", "concat", "subtensorop", "im2col",
    "col2im", "memcpy", "memset", "reflection_pad", "constant_pad", NULL };
static const char *const elementwise_words[] = {
    "elementwise", "vectorized", "unrolled", "pointwise", "triton_poi", "relu", "gelu", "silu", "sigmoid",
    "tanh", "dropout", "activation", "fill", "arange", "where", "clamp", "multi_tensor_apply", "adam", "sgd",
    "lamb", "upsample", "bias", "add", "mul", NULL };
static const char *const other_words[] = {
    "sort", "radix", "topk", "scan", "cumsum", "nonzero", "unique", "histogram", "embedding", "index", "gather",
    "scatter", "distribution", "philox", "curand", "rng", "normal", "uniform", "bernoulli", "randperm", "masked", "one_hot", "grid_sample", "roi_align", "nms",
    NULL };

/* The helpers a fused attention's backward launches around its kernel
 * (FlashAttention-2's and cuDNN's): the rowwise dot of dO and O, and dQ's
 * cast to 16 bits.  They stream their operands; named like attention, or
 * named nothing inside an attention operator, they would take its FLOPs. */
static const char *const attention_reduction_words[] = { "dot_do_o", NULL };
static const char *const attention_copy_words[] = { "convert_dq", NULL };

/* What the kernel name alone says; RV_COST_UNKNOWN when nothing. */
static rv_cost_class class_of_name(const char *lower)
{
    if (has_any(lower, comm_words)) return RV_COST_COMM;
    if (has_any(lower, attention_reduction_words)) return RV_COST_REDUCTION;
    if (has_any(lower, attention_copy_words)) return RV_COST_COPY;
    if (has_any(lower, attention_words)) return RV_COST_ATTENTION;
    if (says_conv(lower) || has_any(lower, conv_words)) return RV_COST_CONV;
    if (has_any(lower, gemm_words)) return RV_COST_GEMM;
    if (strstr(lower, "normal") == NULL && has_any(lower, norm_words)) return RV_COST_NORM;
    if (has_any(lower, reduction_words)) return RV_COST_REDUCTION;
    if (has_any(lower, copy_words)) return RV_COST_COPY;
    if (has_any(lower, other_words)) return RV_COST_OTHER;
    if (has_any(lower, elementwise_words)) return RV_COST_ELEMENTWISE;
    return RV_COST_UNKNOWN;
}

/* The operator's word after "::" ("aten::addmm" -> "addmm"), lower case. */
static char *op_word(const char *op)
{
    const char *colon = op ? strrchr(op, ':') : NULL;
    return g_ascii_strdown(colon ? colon + 1 : (op ? op : ""), -1);
}

static gboolean word_is(const char *word, const char *const *names)
{
    for (; *names; names++)
        if (strcmp(word, *names) == 0) return TRUE;
    return FALSE;
}

static const char *const matmul_ops[] = { "mm", "addmm", "matmul", "linear", "addmv", "mv", "einsum", "dot", NULL };
static const char *const batched_ops[] = { "bmm", "baddbmm", NULL };
static const char *const pointwise_ops[] = {
    "add", "add_", "mul", "mul_", "div", "div_", "sub", "sub_", "relu", "relu_", "gelu", "silu", "sigmoid", "tanh",
    "exp", "log", "pow", "sqrt", "rsqrt", "neg", "abs", "clamp", "clamp_min", "where", "fill_", "zero_",
    "dropout", "native_dropout", "threshold_backward", "gelu_backward", "addcmul_", "addcdiv_", "lerp_", NULL };

/* What the operator says, for a kernel whose name says nothing. */
static rv_cost_class class_of_op(const char *op)
{
    char *word = op_word(op);
    rv_cost_class cls = RV_COST_UNKNOWN;
    if (word_is(word, batched_ops)) cls = RV_COST_ATTENTION;
    else if (word_is(word, matmul_ops)) cls = RV_COST_GEMM;
    else if (says_conv(word)) cls = RV_COST_CONV;
    else if (strstr(word, "attention") || strstr(word, "sdpa")) cls = RV_COST_ATTENTION;
    else if (strstr(word, "norm") && !strstr(word, "normal")) cls = RV_COST_NORM;
    else if (strstr(word, "softmax") || strstr(word, "sum") || strstr(word, "mean") || strstr(word, "loss"))
        cls = RV_COST_REDUCTION;
    else if (strstr(word, "copy") || strcmp(word, "cat") == 0 || strcmp(word, "contiguous") == 0 ||
             strcmp(word, "clone") == 0 || strcmp(word, "to") == 0)
        cls = RV_COST_COPY;
    else if (word_is(word, pointwise_ops)) cls = RV_COST_ELEMENTWISE;
    g_free(word);
    return cls;
}

/* A GEMM kernel inside a convolution or an attention operator is that. */
static rv_cost_class refine_by_op(rv_cost_class cls, const char *op)
{
    if (cls != RV_COST_GEMM || op == NULL) return cls;
    rv_cost_class by_op = class_of_op(op);
    return by_op == RV_COST_CONV || by_op == RV_COST_ATTENTION ? by_op : cls;
}

rv_cost_class rv_cost_classify_name(const char *kernel_name, const char *op_name, rv_task_kind kind)
{
    char *lower = g_ascii_strdown(kernel_name ? kernel_name : "", -1);
    rv_cost_class cls;
    if (kind == RV_TASK_COMM) cls = RV_COST_COMM;
    else if (kind == RV_TASK_MEMCPY)
        cls = strstr(lower, "dtod") || strstr(lower, "device -> device") ? RV_COST_COPY : RV_COST_HOST_COPY;
    else if (kind == RV_TASK_MEMSET) cls = RV_COST_COPY;
    else {
        cls = class_of_name(lower);
        if (cls == RV_COST_UNKNOWN) cls = class_of_op(op_name);
        cls = refine_by_op(cls, op_name);
    }
    g_free(lower);
    return cls;
}

/* ---- dtypes ----------------------------------------------------------- */

/* Tensile / hipBLASLt names spell the types after the index letters:
 * Cijk_Ailk_Bljk_BBS_..., Cijk_Alik_Bljk_B_BS_BH_..., Cijk_Ailk_Bljk_SB_... */
static rv_dtype tensile_dtype(const char *lower)
{
    const char *at = strstr(lower, "cijk_");
    if (at == NULL) return RV_DTYPE_UNKNOWN;
    for (int underscores = 0; *at && underscores < 3; at++)
        if (*at == '_') underscores++;
    if (g_str_has_prefix(at, "f8") || g_str_has_prefix(at, "fp8")) return RV_DTYPE_FP8;
    if (g_str_has_prefix(at, "i8")) return RV_DTYPE_INT8;
    switch (*at) {
    case 'b': return RV_DTYPE_BF16;
    case 'h': return RV_DTYPE_FP16;
    case 's': return RV_DTYPE_FP32;
    case 'd': return RV_DTYPE_FP64;
    default: return RV_DTYPE_UNKNOWN;
    }
}

static const char *const fp8_words[] = { "fp8", "e4m3", "e5m2", "float8", NULL };
static const char *const bf16_words[] = { "bf16", "bfloat16", "bfloat", NULL };
static const char *const fp16_words[] = { "fp16", "f16", "half", "h884", "h1688", "h16816", "hgemm", "hmma", NULL };
static const char *const tf32_words[] = { "tf32", "tensorop_s1688", "xf32", NULL };
static const char *const fp64_words[] = { "double", "dgemm", "fp64", "f64", "zgemm", NULL };
static const char *const fp32_words[] = { "float", "sgemm", "fp32", "f32", "scudnn", "sgemv", "ssyrk", NULL };
static const char *const integer_words[] = { "long", "int64", "bool", "unsigned char", "int>", "int,", "int32",
                                             "uint8", "signed char", NULL };

rv_dtype rv_cost_dtype_of_name(const char *kernel_name, gboolean *integer)
{
    char *lower = g_ascii_strdown(kernel_name ? kernel_name : "", -1);
    rv_dtype dtype = tensile_dtype(lower);
    if (dtype == RV_DTYPE_UNKNOWN) {
        if (has_any(lower, fp8_words)) dtype = RV_DTYPE_FP8;
        else if (has_any(lower, bf16_words)) dtype = RV_DTYPE_BF16;
        else if (has_any(lower, fp16_words)) dtype = RV_DTYPE_FP16;
        else if (has_any(lower, tf32_words)) dtype = RV_DTYPE_TF32;
        else if (has_any(lower, fp64_words)) dtype = RV_DTYPE_FP64;
        else if (has_any(lower, fp32_words)) dtype = RV_DTYPE_FP32;
    }
    if (integer) *integer = dtype == RV_DTYPE_UNKNOWN && has_any(lower, integer_words);
    g_free(lower);
    return dtype;
}

int rv_cost_element_bytes_of_name(const char *kernel_name, int fallback)
{
    rv_dtype dtype = rv_cost_dtype_of_name(kernel_name, NULL);
    int bytes = dtype == RV_DTYPE_UNKNOWN ? 0 : rv_dtype_bytes(dtype);
    return bytes > 0 ? bytes : fallback;
}

/* ---- kernel families ---------------------------------------------------- */

/* ATen's own kernels and Triton's size their grid from the problem; so do
 * the fused attention kernels (a block per query tile and head). */
static gboolean grid_from_problem(const char *lower)
{
    return g_str_has_prefix(lower, "void at::native") || g_str_has_prefix(lower, "at::native") ||
           strstr(lower, "triton") != NULL || has_any(lower, attention_words);
}

gboolean rv_cost_name_is_library(const char *kernel_name)
{
    static const char *const library_words[] = {
        "cutlass", "cublas", "xmma", "cijk_", "rocblas", "hipblaslt", "nvjet", "gemm", "gemv", "cudnn", "miopen",
        "igemm", "naive_conv", "winograd", "implicit_convolve", "fprop", "dgrad", "wgrad", "sm80_", "sm90_",
        "ampere_", "volta_", "turing_", "hopper_", NULL };
    char *lower = g_ascii_strdown(kernel_name ? kernel_name : "", -1);
    gboolean library = !grid_from_problem(lower) && has_any(lower, library_words);
    g_free(lower);
    return library;
}

gboolean rv_cost_name_is_cudnn_batch_norm(const char *kernel_name)
{
    return kernel_name != NULL && strstr(kernel_name, "cudnn::bn_") != NULL;
}

gboolean rv_cost_op_is_library_convolution(const char *op)
{
    char *word = op_word(op);
    gboolean library = strstr(word, "cudnn_conv") != NULL || strstr(word, "miopen_conv") != NULL ||
                       strstr(word, "miopen_depthwise_conv") != NULL || strcmp(word, "convolution_backward") == 0;
    g_free(word);
    return library;
}

gboolean rv_cost_name_is_fused_attention(const char *kernel_name)
{
    char *lower = g_ascii_strdown(kernel_name ? kernel_name : "", -1);
    gboolean fused = has_any(lower, attention_words);
    g_free(lower);
    return fused;
}
