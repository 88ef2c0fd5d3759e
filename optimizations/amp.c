/*
 * amp.c - automatic mixed precision (Daydream appendix A.1, Algorithm 3).
 *
 *   reverie whatif trace.json.gz --opt amp
 *   reverie whatif trace.json.gz --opt 'amp:compute_speedup=2.5,memory_speedup=1.8,optimizer=shrink'
 *
 * Every GPU task is put in one class:
 *   compute-bound  GEMM / convolution kernels, recognised by kernel name
 *                  (gemm, cutlass, cudnn/scudnn conv, winograd, implicit_gemm,
 *                  xmma, wgrad, dgrad) or, when the name says nothing either
 *                  way, by the operator or layer they belong to (conv, linear,
 *                  addmm, mm, bmm, matmul, baddbmm):  duration / compute_speedup
 *   memory-bound   everything else on the GPU - elementwise, reductions,
 *                  norms, softmax, device-to-device copies, memsets:
 *                  duration / memory_speedup
 *   unchanged      kernels already in half precision (fp16/bf16 markers in
 *                  the name), host<->device copies (PCIe bound), collectives
 *                  (kind comm), CPU tasks, and - with optimizer=keep, the
 *                  default - the optimizer phase, whose master weights stay
 *                  FP32 under AMP.
 * A kernel whose name says it is elementwise / a reduction / a norm is
 * memory-bound even inside a conv or linear operator (bias adds, bias-grad
 * reductions), so the operator only decides for kernels with neutral names.
 */
#include "reverie/plugin.h"
#include "reverie/error.h"
#include "reverie/transform.h"
#include <string.h>

static const rv_param_spec amp_params[] = {
    { "compute_speedup", RV_PARAM_NUMBER, "3", "x", "speedup of GEMM/convolution kernels (Tensor Cores)", NULL },
    { "memory_speedup", RV_PARAM_NUMBER, "2", "x", "speedup of memory-bound kernels (half the bytes)", NULL },
    { "optimizer", RV_PARAM_CHOICE, "keep", NULL,
      "keep: optimizer kernels stay FP32 (master weights); shrink: treat them like the rest", "keep|shrink" },
    { NULL }
};

typedef enum { CLASS_COMPUTE, CLASS_MEMORY, CLASS_HALF, CLASS_HOST_COPY, CLASS_COMM, CLASS_OPTIMIZER, CLASS_COUNT } amp_class;

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

/* The operator word after "aten::" (or a module name) names a GEMM / conv. */
static gboolean compute_op(const char *text)
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

static amp_class classify(const rv_graph *graph, const rv_task *task, gboolean keep_optimizer)
{
    if (task->kind == RV_TASK_COMM) return CLASS_COMM;
    const char *name = rv_strings_get(graph->strings, task->name);
    char *lower = g_ascii_strdown(name ? name : "", -1);
    amp_class result;
    if (task->kind == RV_TASK_MEMCPY) {
        gboolean device = strstr(lower, "dtod") != NULL || strstr(lower, "device -> device") != NULL;
        result = device ? CLASS_MEMORY : CLASS_HOST_COPY;
    } else if (keep_optimizer && task->phase == RV_PHASE_OPTIMIZER) {
        result = CLASS_OPTIMIZER;
    } else if (task->kind == RV_TASK_MEMSET) {
        result = CLASS_MEMORY;
    } else if (contains_any(lower, half_markers)) {
        result = CLASS_HALF;
    } else if (contains_any(lower, compute_names)) {
        result = CLASS_COMPUTE;
    } else if (contains_any(lower, memory_names)) {
        result = CLASS_MEMORY;
    } else if (compute_op(task->op ? rv_strings_get(graph->strings, task->op) : NULL) ||
               compute_op(task->layer ? rv_strings_get(graph->strings, task->layer) : NULL)) {
        result = CLASS_COMPUTE;
    } else {
        result = CLASS_MEMORY;
    }
    g_free(lower);
    return result;
}

static gboolean amp_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    double compute = rv_params_number(params, "compute_speedup");
    double memory = rv_params_number(params, "memory_speedup");
    if (!(compute > 0) || !(memory > 0)) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "speedups must be > 0 (compute_speedup=%g, memory_speedup=%g)",
                    compute, memory);
        return FALSE;
    }
    gboolean keep = strcmp(rv_params_string(params, "optimizer"), "keep") == 0;
    GArray *classes[CLASS_COUNT];
    for (int c = 0; c < CLASS_COUNT; c++) classes[c] = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task(graph, id);
        if ((task->flags & RV_TASK_FLAG_REMOVED) || !(task->flags & RV_TASK_FLAG_GPU)) continue;
        g_array_append_val(classes[classify(graph, task, keep)], id);
    }
    gboolean ok = classes[CLASS_COMPUTE]->len + classes[CLASS_MEMORY]->len > 0;
    if (!ok) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "no FP32 GPU kernel to speed up (%u half-precision, %u optimizer, %u host copies, %u collectives)",
                    classes[CLASS_HALF]->len, classes[CLASS_OPTIMIZER]->len, classes[CLASS_HOST_COPY]->len,
                    classes[CLASS_COMM]->len);
    } else {
        rv_transform_scale(graph, classes[CLASS_COMPUTE], 1.0 / compute);
        rv_transform_scale(graph, classes[CLASS_MEMORY], 1.0 / memory);
        g_string_append_printf(output->notes,
                               "    scaled %u compute kernels by 1/%g, %u memory-bound GPU tasks by 1/%g; unchanged: "
                               "%u half-precision, %u optimizer, %u host copies, %u collectives\n",
                               classes[CLASS_COMPUTE]->len, compute, classes[CLASS_MEMORY]->len, memory,
                               classes[CLASS_HALF]->len, classes[CLASS_OPTIMIZER]->len,
                               classes[CLASS_HOST_COPY]->len, classes[CLASS_COMM]->len);
    }
    for (int c = 0; c < CLASS_COUNT; c++) g_array_unref(classes[c]);
    return ok;
}

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "amp", "automatic mixed precision: GEMM/conv kernels / compute_speedup, the rest of the GPU / memory_speedup",
    amp_params, amp_apply,
};
