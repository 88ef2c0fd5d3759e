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
#include "reverie/costmodel.h"
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
    "conv2d", "convolve", "cudnn::detail::conv", "fprop", "gemv", "cijk_", "nvjet", NULL };
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

static gboolean names_half(const char *name, const char *lower)
{
    rv_dtype dtype = rv_cost_dtype_of_name(name, NULL);
    return dtype == RV_DTYPE_FP16 || dtype == RV_DTYPE_BF16 || dtype == RV_DTYPE_FP8 || contains_any(lower, half_markers);
}

gboolean rv_kernel_name_is_compute(const char *kernel_name)
{
    char *lower = g_ascii_strdown(kernel_name ? kernel_name : "", -1);
    gboolean yes = contains_any(lower, compute_names) && !names_half(kernel_name, lower);
    g_free(lower);
    return yes;
}

/* What a kernel name alone says, as bits. */
enum { NAME_HALF = 1, NAME_COMPUTE = 2, NAME_MEMORY = 4, NAME_DEVICE_COPY = 8 };

static int name_bits(const char *name)
{
    char *lower = g_ascii_strdown(name ? name : "", -1);
    int bits = (names_half(name, lower) ? NAME_HALF : 0) |
               (contains_any(lower, compute_names) ? NAME_COMPUTE : 0) |
               (contains_any(lower, memory_names) ? NAME_MEMORY : 0) |
               (strstr(lower, "dtod") != NULL || strstr(lower, "device -> device") != NULL ? NAME_DEVICE_COPY : 0);
    g_free(lower);
    return bits;
}

static int names_compute(const char *text) { return rv_op_is_compute(text); }

/* The rule, given the name's bits and a way to ask about the operator and
 * layer (only for names that say nothing). */
static rv_kernel_class classify_with(const rv_task *task, int bits, gboolean (*tag_is_compute)(void *, int32_t),
                                     void *context)
{
    if (task->kind == RV_TASK_COMM) return RV_KERNEL_COMM;
    if (task->kind == RV_TASK_MEMCPY) return (bits & NAME_DEVICE_COPY) ? RV_KERNEL_MEMORY : RV_KERNEL_HOST_COPY;
    if (task->kind == RV_TASK_MEMSET) return RV_KERNEL_MEMORY;
    if (bits & NAME_HALF) return RV_KERNEL_HALF;
    if (bits & NAME_COMPUTE) return RV_KERNEL_COMPUTE;
    if (bits & NAME_MEMORY) return RV_KERNEL_MEMORY;
    if ((task->op > 0 && tag_is_compute(context, task->op)) || (task->layer > 0 && tag_is_compute(context, task->layer)))
        return RV_KERNEL_COMPUTE;
    return RV_KERNEL_MEMORY;
}

static gboolean tag_is_compute_now(void *graph, int32_t id)
{
    return rv_op_is_compute(rv_strings_get(((const rv_graph *)graph)->strings, id));
}

rv_kernel_class rv_kernel_classify(const rv_graph *graph, const rv_task *task)
{
    const char *name = task->name > 0 ? rv_strings_get(graph->strings, task->name) : NULL;
    return classify_with(task, name_bits(name), tag_is_compute_now, (void *)graph);
}

static gboolean tag_is_compute_memo(void *classifier, int32_t id)
{
    return rv_string_memo_get(&((rv_kernel_classifier *)classifier)->tags, id) != 0;
}

void rv_kernel_classifier_init(rv_kernel_classifier *classifier, const rv_graph *graph)
{
    rv_string_memo_init(&classifier->names, graph->strings, name_bits);
    rv_string_memo_init(&classifier->tags, graph->strings, names_compute);
}

rv_kernel_class rv_kernel_classifier_classify(rv_kernel_classifier *classifier, const rv_task *task)
{
    return classify_with(task, rv_string_memo_get(&classifier->names, task->name), tag_is_compute_memo, classifier);
}

void rv_kernel_classifier_clear(rv_kernel_classifier *classifier)
{
    rv_string_memo_clear(&classifier->names);
    rv_string_memo_clear(&classifier->tags);
}
