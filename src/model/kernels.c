/*
 * kernels.c - GPU task classes by kernel name and operator (see kernels.h).
 *
 * The name lists come from the kernels seen in the shared V100 / A100 /
 * MI250 traces (cuBLAS volta_sgemm_*, cutlass, cuDNN implicit_gemm and
 * winograd, at::native elementwise / reduce kernels).  A kernel whose name
 * says it is elementwise / a reduction / a norm is memory-bound even inside
 * a conv or linear operator (bias adds, bias-grad reductions).
 */
#include "reverie/kernels.h"
#include <string.h>

static gboolean contains_any(const char *lower, const char *const *words)
{
    for (; *words != NULL; words++)
        if (strstr(lower, *words) != NULL) return TRUE;
    return FALSE;
}

static const char *const half_markers[] = { "fp16", "bf16", "half", "h884", "h1688", "h16816", "hgemm", "f16", NULL };
static const char *const compute_names[] = {
    "gemm", "cutlass", "scudnn", "winograd", "implicit_gemm", "xmma", "wgrad", "dgrad",
    "conv2d", "convolve", "cudnn::detail::conv", "fprop", "gemv", NULL };
static const char *const memory_names[] = {
    "elementwise", "reduce", "norm", "softmax", "pointwise", "vectorized", "copy", "fill",
    "relu", "pool", "index", "cat_", "unrolled", "bias", NULL };

gboolean rv_op_is_compute(const char *text)
{
    if (text == NULL || *text == '\0') return FALSE;
    char *lower = g_ascii_strdown(text, -1);
    gboolean yes = strstr(lower, "conv") != NULL || strstr(lower, "linear") != NULL ||
                   strstr(lower, "matmul") != NULL;
    /* mm / addmm / bmm / baddbmm as whole operator words, not "comm" or "summary" */
    static const char *const mm_ops[] = { "mm", "addmm", "bmm", "baddbmm", "addbmm", "addmv", "mv", NULL };
    const char *word = strstr(lower, "::");
    word = word ? word + 2 : lower;
    for (int i = 0; !yes && mm_ops[i]; i++)
        if (strcmp(word, mm_ops[i]) == 0 || (g_str_has_prefix(word, mm_ops[i]) && !g_ascii_isalpha(word[strlen(mm_ops[i])])))
            yes = TRUE;
    /* autograd names: "AddmmBackward0", "MmBackward0", "BmmBackward0" */
    if (!yes && (strstr(lower, "addmmbackward") || strstr(lower, "evaluate_function: mmbackward") ||
                 strstr(lower, "bmmbackward")))
        yes = TRUE;
    g_free(lower);
    return yes;
}

gboolean rv_op_is_attention(const char *text)
{
    if (text == NULL || *text == '\0') return FALSE;
    char *lower = g_ascii_strdown(text, -1);
    static const char *const words[] = { "bmm", "attention", "sdpa", "flash", "fmha", "scaled_dot_product", NULL };
    gboolean yes = contains_any(lower, words);
    g_free(lower);
    return yes;
}

gboolean rv_kernel_name_is_compute(const char *kernel_name)
{
    char *lower = g_ascii_strdown(kernel_name ? kernel_name : "", -1);
    gboolean yes = contains_any(lower, compute_names) && !contains_any(lower, half_markers);
    g_free(lower);
    return yes;
}

static const char *text_of(const rv_graph *graph, int32_t id)
{
    return id > 0 ? rv_strings_get(graph->strings, id) : NULL;
}

rv_kernel_class rv_kernel_classify(const rv_graph *graph, const rv_task *task)
{
    if (task->kind == RV_TASK_COMM) return RV_KERNEL_COMM;
    const char *name = text_of(graph, task->name);
    char *lower = g_ascii_strdown(name ? name : "", -1);
    rv_kernel_class result;
    if (task->kind == RV_TASK_MEMCPY) {
        gboolean device = strstr(lower, "dtod") != NULL || strstr(lower, "device -> device") != NULL;
        result = device ? RV_KERNEL_MEMORY : RV_KERNEL_HOST_COPY;
    } else if (task->kind == RV_TASK_MEMSET) {
        result = RV_KERNEL_MEMORY;
    } else if (contains_any(lower, half_markers)) {
        result = RV_KERNEL_HALF;
    } else if (contains_any(lower, compute_names)) {
        result = RV_KERNEL_COMPUTE;
    } else if (contains_any(lower, memory_names)) {
        result = RV_KERNEL_MEMORY;
    } else if (rv_op_is_compute(text_of(graph, task->op)) || rv_op_is_compute(text_of(graph, task->layer))) {
        result = RV_KERNEL_COMPUTE;
    } else {
        result = RV_KERNEL_MEMORY;
    }
    g_free(lower);
    return result;
}
