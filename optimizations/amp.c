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
#include "reverie/kernels.h"
#include "reverie/transform.h"
#include "reverie/validate.h"
#include <string.h>

static const rv_param_spec amp_params[] = {
    { "compute_speedup", RV_PARAM_NUMBER, "3", "x", "speedup of GEMM/convolution kernels (Tensor Cores)", NULL },
    { "memory_speedup", RV_PARAM_NUMBER, "2", "x", "speedup of memory-bound kernels (half the bytes)", NULL },
    { "optimizer", RV_PARAM_CHOICE, "keep", NULL,
      "keep: optimizer kernels stay FP32 (master weights); shrink: treat them like the rest", "keep|shrink" },
    { NULL }
};

typedef enum { CLASS_COMPUTE, CLASS_MEMORY, CLASS_HALF, CLASS_HOST_COPY, CLASS_COMM, CLASS_OPTIMIZER, CLASS_COUNT } amp_class;

/* The kernel class, with the optimizer phase set aside when it stays FP32. */
static amp_class classify(rv_kernel_classifier *classifier, const rv_task *task, gboolean keep_optimizer)
{
    rv_kernel_class kernel = rv_kernel_classifier_classify(classifier, task);
    if (kernel == RV_KERNEL_COMM) return CLASS_COMM;
    if (kernel == RV_KERNEL_HOST_COPY) return CLASS_HOST_COPY;
    if (keep_optimizer && task->phase == RV_PHASE_OPTIMIZER) return CLASS_OPTIMIZER;
    if (kernel == RV_KERNEL_HALF) return CLASS_HALF;
    return kernel == RV_KERNEL_COMPUTE ? CLASS_COMPUTE : CLASS_MEMORY;
}

/* Scale one class by 1 / its speedup.  A speedup so small that a kernel
 * would last past the limits (checked.h) is a parameter out of range;
 * checking after the previous class was scaled makes the total exact. */
static gboolean scale_class(rv_graph *graph, const GArray *tasks, const rv_params *params, const char *name,
                            GError **error)
{
    double factor = 1.0 / rv_params_number(params, name);
    char *cause = g_strdup_printf("%s=%s", name, rv_params_string(params, name));
    gboolean ok = rv_tasks_check_scale(graph, tasks, factor, cause, error);
    g_free(cause);
    if (ok) rv_transform_scale(graph, tasks, factor);
    return ok;
}

static gboolean amp_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    double compute = rv_params_number(params, "compute_speedup");
    double memory = rv_params_number(params, "memory_speedup");
    if (!(compute > 0) || !(memory > 0)) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "speedups must be > 0 (compute_speedup=%g, memory_speedup=%g)",
                    compute, memory);
        return FALSE;
    }
    gboolean keep = strcmp(rv_params_string(params, "optimizer"), "keep") == 0;
    GArray *classes[CLASS_COUNT];
    for (int c = 0; c < CLASS_COUNT; c++) classes[c] = g_array_new(FALSE, FALSE, sizeof(int32_t));
    rv_kernel_classifier classifier;
    rv_kernel_classifier_init(&classifier, graph);
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task(graph, id);
        if ((task->flags & RV_TASK_FLAG_REMOVED) || !(task->flags & RV_TASK_FLAG_GPU)) continue;
        g_array_append_val(classes[classify(&classifier, task, keep)], id);
    }
    rv_kernel_classifier_clear(&classifier);
    gboolean ok = classes[CLASS_COMPUTE]->len + classes[CLASS_MEMORY]->len > 0;
    if (ok)
        ok = scale_class(graph, classes[CLASS_COMPUTE], params, "compute_speedup", error) &&
             scale_class(graph, classes[CLASS_MEMORY], params, "memory_speedup", error);
    else
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "no FP32 GPU kernel to speed up (%u half-precision, %u optimizer, %u host copies, %u collectives)",
                    classes[CLASS_HALF]->len, classes[CLASS_OPTIMIZER]->len, classes[CLASS_HOST_COPY]->len,
                    classes[CLASS_COMM]->len);
    if (ok)
        g_string_append_printf(output->notes,
                               "    scaled %u compute kernels by 1/%g, %u memory-bound GPU tasks by 1/%g; unchanged: "
                               "%u half-precision, %u optimizer, %u host copies, %u collectives\n",
                               classes[CLASS_COMPUTE]->len, compute, classes[CLASS_MEMORY]->len, memory,
                               classes[CLASS_HALF]->len, classes[CLASS_OPTIMIZER]->len,
                               classes[CLASS_HOST_COPY]->len, classes[CLASS_COMM]->len);
    for (int c = 0; c < CLASS_COUNT; c++) g_array_unref(classes[c]);
    return ok;
}

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "amp", "automatic mixed precision: GEMM/conv kernels / compute_speedup, the rest of the GPU / memory_speedup",
    amp_params, amp_apply,
};
