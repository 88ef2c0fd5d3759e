/*
 * costmodel.c - the kernel cost model (costmodel.h): every GPU task's
 * class, dtype, unit and work, and the efficiency calibrated on the trace.
 * plan.c re-costs tasks with it.
 */
#include "costmodel_private.h"
#include "reverie/error.h"
#include "reverie/stats.h"
#include <math.h>
#include <string.h>

#define FIXED_PERCENTILE 0.05  /* the trace's shortest kernels: what doing nothing costs */
#define FIXED_CAP_NS 3000
#define EFFICIENCY_MIN 0.005
#define STREAMING_EFFICIENCY_DEFAULT 0.7  /* a streaming kernel's share of the memory bandwidth, when unmeasured */

static const char *const class_names[RV_COST_CLASS_COUNT] = {
    "gemm", "conv", "attention", "elementwise", "reduction", "norm", "copy", "host_copy", "comm", "other", "unknown" };

const char *rv_cost_class_name(rv_cost_class cls) { return cls < RV_COST_CLASS_COUNT ? class_names[cls] : "?"; }

int rv_cost_class_from_name(const char *name)
{
    for (int c = 0; name && c < RV_COST_CLASS_COUNT; c++)
        if (strcmp(name, class_names[c]) == 0) return c;
    return -1;
}

gboolean rv_cost_class_is_matmul(rv_cost_class cls)
{
    return cls == RV_COST_GEMM || cls == RV_COST_CONV || cls == RV_COST_ATTENTION;
}

/* ---- rooflines ------------------------------------------------------- */

rv_unit rv_cost_unit_on(const rv_gpu *gpu, rv_cost_class cls, rv_dtype dtype, gboolean aligned)
{
    if (!rv_cost_class_is_matmul(cls) || dtype == RV_DTYPE_UNKNOWN || dtype >= RV_DTYPE_COUNT) return RV_UNIT_VECTOR;
    if (gpu->matrix_flops[dtype] <= 0) return RV_UNIT_VECTOR;
    if (dtype == RV_DTYPE_FP32 || dtype == RV_DTYPE_FP64) return RV_UNIT_MATRIX;  /* CDNA's fp32/fp64 matrix cores */
    return gpu->matrix_any_shape || aligned ? RV_UNIT_MATRIX : RV_UNIT_VECTOR;
}

double rv_cost_roofline_s(const rv_gpu *gpu, rv_unit unit, rv_dtype dtype, double flops, double bytes,
                          gboolean achievable, double flops_scale, double memory_scale)
{
    double peak = unit == RV_UNIT_MATRIX ? rv_gpu_matrix_peak(gpu, dtype, achievable) : rv_gpu_vector_peak(gpu, dtype);
    if (peak <= 0) peak = rv_gpu_vector_peak(gpu, dtype);
    double compute = flops / (peak * flops_scale), memory = bytes / (gpu->memory_Bps * memory_scale);
    return compute > memory ? compute : memory;
}

/* Achievable peaks only where both GPUs publish one: a ratio never mixes kinds. */
gboolean rv_cost_model_use_achievable(const rv_cost_model *model, const rv_gpu *target)
{
    if (!model->achievable) return FALSE;
    gboolean source_has = FALSE, target_has = FALSE;
    for (int d = 0; d < RV_DTYPE_COUNT; d++) {
        source_has |= model->source->achievable_matrix_flops[d] > 0;
        target_has |= target->achievable_matrix_flops[d] > 0;
    }
    return source_has && target_has;
}

/* ---- classifying the trace's tasks ------------------------------------ */

typedef struct {
    uint8_t cls, dtype, integer, autocast_fp32, library, fused;
} name_verdict;

/* Operators autocast runs in fp32 whatever its inputs (torch.amp's fp32 list). */
static gboolean autocast_keeps_fp32(const char *op)
{
    static const char *const words[] = { "softmax", "layer_norm", "group_norm", "aten::norm", "loss", "nll",
                                         "cross_entropy", "aten::exp", "aten::log", "aten::pow", "aten::sum",
                                         "cumsum", "cumprod", "aten::prod", "rsqrt", "logsumexp", "cdist", NULL };
    for (const char *const *w = words; op && *w; w++)
        if (strstr(op, *w)) return TRUE;
    return FALSE;
}

static name_verdict verdict_of(const rv_graph *graph, const rv_task *task, GHashTable *memo)
{
    /* kind in the top 3 bits, then 29 bits of name id, then the op id */
    gint64 key = (gint64)(((guint64)task->kind << 61) | ((guint64)(task->name & 0x1fffffff) << 32) | (guint32)task->op);
    gpointer found = g_hash_table_lookup(memo, &key);
    if (found) return *(name_verdict *)found;
    const char *name = rv_strings_get(graph->strings, task->name), *op = rv_strings_get(graph->strings, task->op);
    gboolean integer = FALSE;
    name_verdict verdict = { (uint8_t)rv_cost_classify_name(name, op, (rv_task_kind)task->kind),
                             (uint8_t)rv_cost_dtype_of_name(name, &integer), (uint8_t)integer,
                             (uint8_t)autocast_keeps_fp32(op), 0, (uint8_t)rv_cost_name_is_fused_attention(name) };
    verdict.library = rv_cost_class_is_matmul((rv_cost_class)verdict.cls) && rv_cost_name_is_library(name);
    gint64 *stored_key = g_new(gint64, 1);
    *stored_key = key;
    g_hash_table_insert(memo, stored_key, g_memdup2(&verdict, sizeof verdict));
    return verdict;
}

static gboolean is_costed_task(const rv_task *task)
{
    return (task->flags & RV_TASK_FLAG_GPU) && !(task->flags & RV_TASK_FLAG_REMOVED);
}

/* Work from the recorded bytes of a copy or set (a device copy reads and writes them). */
static gboolean copy_work(const rv_task *task, double *bytes)
{
    if (task->bytes <= 0 || (task->kind != RV_TASK_MEMCPY && task->kind != RV_TASK_MEMSET)) return FALSE;
    *bytes = (double)task->bytes * (task->kind == RV_TASK_MEMCPY ? 2 : 1);
    return TRUE;
}

typedef struct {
    uint8_t cls, element;
    int32_t op_args;
    gboolean ok, aligned;
    double flops, bytes;
} work_verdict;

/* The work of (class, element size, arguments) from the shapes of (op,
 * dims); the memo maps (op, dims) to the few (class, size, arguments)
 * verdicts asked of it. */
static const work_verdict *work_of(const rv_graph *graph, const rv_task *task, int32_t op_args, uint8_t cls,
                                   uint8_t element, GHashTable *memo)
{
    gint64 key = (gint64)(((guint64)(guint32)task->op << 32) | (guint32)task->input_dims);
    GArray *verdicts = g_hash_table_lookup(memo, &key);
    if (verdicts == NULL) {
        gint64 *stored = g_new(gint64, 1);
        *stored = key;
        verdicts = g_array_new(FALSE, FALSE, sizeof(work_verdict));
        g_hash_table_insert(memo, stored, verdicts);
    }
    for (guint i = 0; i < verdicts->len; i++) {
        const work_verdict *v = &g_array_index(verdicts, work_verdict, i);
        if (v->cls == cls && v->element == element && v->op_args == op_args) return v;
    }
    work_verdict v = { cls, element, op_args, FALSE, TRUE, 0, 0 };
    v.ok = rv_cost_work_of(cls, rv_strings_get(graph->strings, task->op), rv_strings_get(graph->strings, task->input_dims),
                           op_args > 0 ? rv_strings_get(graph->strings, op_args) : NULL, element, &v.flops, &v.bytes,
                           &v.aligned);
    g_array_append_val(verdicts, v);
    return &g_array_index(verdicts, work_verdict, verdicts->len - 1);
}

static void measure_work(const rv_graph *graph, int32_t id, rv_kernel_cost *cost, GHashTable *memo)
{
    const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
    if (copy_work(task, &cost->bytes)) {
        cost->shaped = TRUE;
        cost->aligned = TRUE;
        return;
    }
    if (task->input_dims < 0 || !rv_cost_class_is_costed(cost->cls)) return;
    uint8_t element = (uint8_t)(rv_dtype_bytes(cost->dtype) ? rv_dtype_bytes(cost->dtype) : 4);
    const work_verdict *work = work_of(graph, task, rv_task_op_args(graph, id), cost->cls, element, memo);
    cost->shaped = (uint8_t)work->ok;
    cost->flops = work->flops;
    cost->bytes = work->bytes;
    /* Inductor pads a compiled graph's half-precision GEMMs to aligned
     * shapes (torch._inductor.config.shape_padding, on by default): the
     * project's fp32 and bf16 recordings of one compiled decoder multiply
     * by a 50,257-wide vocabulary and a 50,264-wide one. */
    gboolean padded = (task->flags & RV_TASK_FLAG_COMPILED) && cost->cls == RV_COST_GEMM;
    cost->aligned = (uint8_t)(work->aligned || padded);
}

/* work_of's memo, shared by a model's two passes over the same tasks. */
static GHashTable *work_memo_new(void)
{
    return g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, (GDestroyNotify)g_array_unref);
}

/* A GEMM whose name gives no dtype: its FLOPs (any element size gives the
 * same; 2 bytes, the size a half-precision verdict finds in the memo again
 * when measured) and time go to usual_dtype's evidence. */
static void count_unnamed_gemm(rv_cost_model *model, const rv_task *task, GHashTable *work)
{
    if (task->input_dims < 0) return;
    const work_verdict *gemm = work_of(model->graph, task, 0, RV_COST_GEMM, 2, work); /* a GEMM reads no arguments */
    if (!gemm->ok || gemm->flops <= 0) return;
    model->unnamed_gemm_flops += gemm->flops;
    model->unnamed_gemm_ns += (double)task->duration_ns;
}

/* The first pass over tasks [from, to): each kernel's class, and, in the
 * model, the named kernel time per dtype (for the usual dtype) and the
 * durations the fixed cost is a percentile of.  One pass, not three: at a
 * million tasks each pass over them is a large share of a plugin's cost. */
static void classify_tasks(rv_cost_model *model, int32_t from, int32_t to, GHashTable *work)
{
    GHashTable *names = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
    const rv_kernel_cost none = { NOT_GPU, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
    /* sized once and written in place: an append is a call per task */
    g_array_set_size(model->kernels, (guint)to);
    for (int32_t t = from; t < to; t++) {
        const rv_task *task = &g_array_index(model->graph->tasks, rv_task, t);
        rv_kernel_cost cost = none;
        if (is_costed_task(task)) {
            name_verdict verdict = verdict_of(model->graph, task, names);
            cost = (rv_kernel_cost){ verdict.cls, verdict.dtype, 0, RV_UNIT_VECTOR, 1, verdict.autocast_fp32, 0,
                                     verdict.library, verdict.fused, 0, 0 };
            cost.dtype_assumed = verdict.dtype == RV_DTYPE_UNKNOWN && !verdict.integer;
            if (rv_cost_class_is_costed(cost.cls) && !cost.dtype_assumed) model->named_time[cost.dtype] += (double)task->duration_ns;
            if (cost.cls == RV_COST_GEMM && cost.dtype_assumed && task->duration_ns > 0)
                count_unnamed_gemm(model, task, work);
            /* a zero is a profiler's rounding, not a kernel that costs nothing */
            if (task->kind == RV_TASK_KERNEL && task->duration_ns > 0) g_array_append_val(model->durations, task->duration_ns);
        }
        g_array_index(model->kernels, rv_kernel_cost, t) = cost;
    }
    g_hash_table_destroy(names);
}

double rv_cost_model_unnamed_gemm_flops(const rv_cost_model *model)
{
    return model->unnamed_gemm_ns > 0 ? model->unnamed_gemm_flops / (model->unnamed_gemm_ns * 1e-9) : 0;
}

double rv_cost_fastest_32bit_flops(const rv_gpu *gpu)
{
    return MAX(MAX(gpu->matrix_flops[RV_DTYPE_TF32], gpu->matrix_flops[RV_DTYPE_FP32]), gpu->vector_flops[RV_DTYPE_FP32]);
}

/* The floating dtype of most of the named kernel time - unless the GEMMs
 * whose names say none ran, all together, faster than the datasheet lets
 * any 32-bit type run (a compiled graph's GEMMs, cuBLAS's nvjet kernels:
 * their names carry no dtype, and an optimizer's fp32 kernels can hold
 * most of the named time): they were in half precision, autocast's bf16
 * where the GPU has it, unless the names say fp16 more often. */
static rv_dtype usual_dtype(const rv_cost_model *model)
{
    rv_dtype best = RV_DTYPE_UNKNOWN;
    for (int d = 1; d < RV_DTYPE_COUNT; d++)
        if (d != RV_DTYPE_INT8 && model->named_time[d] > model->named_time[best]) best = (rv_dtype)d;
    double limit = model->source ? rv_cost_fastest_32bit_flops(model->source) : 0;
    if ((best == RV_DTYPE_FP32 || best == RV_DTYPE_UNKNOWN) && limit > 0 &&
        rv_cost_model_unnamed_gemm_flops(model) > limit) {
        gboolean bf16 = model->source->matrix_flops[RV_DTYPE_BF16] > 0 &&
                        model->named_time[RV_DTYPE_BF16] >= model->named_time[RV_DTYPE_FP16];
        best = bf16 ? RV_DTYPE_BF16 : RV_DTYPE_FP16;
    }
    return best;
}

/* A percentile by selection: it reorders the durations, and depends on
 * which they are, not on their order. */
static int64_t fixed_cost(const rv_cost_model *model)
{
    int64_t fixed = rv_quantile_int64(model->durations, FIXED_PERCENTILE, 0);
    return fixed < FIXED_CAP_NS ? fixed : FIXED_CAP_NS;
}

/* A kernel's share of the calibration: its roofline and its time above the fixed cost. */
static void calibrate(rv_cost_model *model, const rv_kernel_cost *cost, const rv_task *task)
{
    int64_t variable = task->duration_ns - model->fixed_ns;
    if (!cost->shaped || !rv_cost_class_is_costed(cost->cls) || variable <= 0) return;
    double roofline = rv_cost_roofline_s(model->source, cost->unit, cost->dtype, cost->flops, cost->bytes, FALSE, 1, 1);
    model->calibrated_roofline[cost->cls][cost->unit] += roofline * 1e9;
    model->calibrated_time[cost->cls][cost->unit] += (double)variable;
    model->calibrated_samples[cost->cls][cost->unit]++;
}

/* Assumed dtypes, units and work of tasks [from, to), once the usual
 * dtype is known, and their share of the calibration, once the fixed cost
 * is: the second and last pass. */
static void complete_tasks(rv_cost_model *model, int32_t from, int32_t to, GHashTable *work)
{
    for (int32_t t = from; t < to; t++) {
        rv_kernel_cost *cost = &g_array_index(model->kernels, rv_kernel_cost, t);
        if (cost->cls == NOT_GPU) continue;
        const rv_task *task = &g_array_index(model->graph->tasks, rv_task, t);
        if (cost->dtype_assumed) cost->dtype = (uint8_t)model->usual;
        measure_work(model->graph, t, cost, work);
        cost->unit = (uint8_t)rv_cost_unit_on(model->source, cost->cls, cost->dtype, cost->aligned);
        calibrate(model, cost, task);
    }
}

/* No task counted in the calibration yet. */
static void clear_calibration(rv_cost_model *model)
{
    memset(model->calibrated_roofline, 0, sizeof model->calibrated_roofline);
    memset(model->calibrated_time, 0, sizeof model->calibrated_time);
    memset(model->calibrated_samples, 0, sizeof model->calibrated_samples);
}

/* Classify, measure and calibrate the graph's tasks from scratch. */
static void build(rv_cost_model *model)
{
    g_array_set_size(model->kernels, 0);
    g_array_set_size(model->durations, 0);
    memset(model->named_time, 0, sizeof model->named_time);
    model->unnamed_gemm_flops = model->unnamed_gemm_ns = 0;
    clear_calibration(model);
    GHashTable *work = work_memo_new();
    classify_tasks(model, 0, rv_graph_task_count(model->graph), work);
    model->usual = usual_dtype(model);
    model->fixed_ns = fixed_cost(model);
    complete_tasks(model, 0, rv_graph_task_count(model->graph), work);
    g_hash_table_destroy(work);
}

rv_cost_model *rv_cost_model_new(const rv_graph *graph, const rv_gpu *source, gboolean achievable)
{
    rv_cost_model *model = g_new0(rv_cost_model, 1);
    model->graph = graph;
    model->source = source;
    model->achievable = achievable;
    model->kernels = g_array_sized_new(FALSE, FALSE, sizeof(rv_kernel_cost), (guint)rv_graph_task_count(graph));
    model->durations = g_array_new(FALSE, FALSE, sizeof(int64_t));
    build(model);
    return model;
}

/* The calibration again, over every task, for another fixed cost. */
static void recalibrate(rv_cost_model *model)
{
    clear_calibration(model);
    for (int32_t t = 0; t < (int32_t)model->kernels->len; t++) {
        const rv_kernel_cost *cost = &g_array_index(model->kernels, rv_kernel_cost, t);
        if (cost->cls != NOT_GPU) calibrate(model, cost, &g_array_index(model->graph->tasks, rv_task, t));
    }
}

/*
 * Exactly what rv_cost_model_new would build now, for a graph that only
 * gained tasks (and edges) since.  The new tasks are classified after the
 * old ones, so the per-dtype sums add in the same order as one pass would;
 * the fixed cost is a percentile of the same durations; a kernel's class,
 * dtype, work and unit depend on its own fields and the usual dtype only.
 * So where the usual dtype stays, only the new tasks are measured, and the
 * calibration, a sum in task order, goes on with them - or, where the fixed
 * cost moved, is summed again over every kernel (its inputs are kept).
 * Where the usual dtype changes (a kernel whose dtype was assumed is
 * measured anew) the model is built from scratch.
 */
void rv_cost_model_extend(rv_cost_model *model)
{
    int32_t from = (int32_t)model->kernels->len, to = rv_graph_task_count(model->graph);
    if (to == from) return;
    rv_dtype usual = model->usual;
    int64_t fixed = model->fixed_ns;
    GHashTable *work = work_memo_new();
    classify_tasks(model, from, to, work);
    if (usual_dtype(model) != usual) {
        build(model);
    } else {
        model->fixed_ns = fixed_cost(model);
        complete_tasks(model, from, to, work);
        if (model->fixed_ns != fixed) recalibrate(model);
    }
    g_hash_table_destroy(work);
}

void rv_cost_model_free(rv_cost_model *model)
{
    if (model == NULL) return;
    g_array_unref(model->kernels);
    g_array_unref(model->durations);
    g_free(model);
}

const rv_kernel_cost *rv_cost_model_kernel(const rv_cost_model *model, int32_t task)
{
    if (task < 0 || (guint)task >= model->kernels->len) return NULL;
    const rv_kernel_cost *cost = &g_array_index(model->kernels, rv_kernel_cost, task);
    return cost->cls == NOT_GPU ? NULL : cost;
}

const rv_gpu *rv_cost_model_source(const rv_cost_model *model) { return model->source; }
const rv_graph *rv_cost_model_graph(const rv_cost_model *model) { return model->graph; }

/* The utilization a launch of task gets on its own GPU (registers count:
 * the trace's own compiler). */
static double source_utilization(const rv_cost_model *model, int32_t task)
{
    return rv_cost_wave_utilization(model->source, rv_task_launch(model->graph, task), TRUE);
}

gboolean rv_cost_model_sample(const rv_cost_model *model, int32_t task, rv_cost_bucket *bucket, double *roofline_ns,
                              double *variable_ns)
{
    const rv_kernel_cost *cost = rv_cost_model_kernel(model, task);
    if (cost == NULL || !cost->shaped || !rv_cost_class_is_costed((rv_cost_class)cost->cls)) return FALSE;
    int64_t variable = g_array_index(model->graph->tasks, rv_task, task).duration_ns - model->fixed_ns;
    double roofline = rv_cost_wave_roofline_s(model->source, cost->unit, cost->dtype, cost->flops, cost->bytes,
                                              source_utilization(model, task), FALSE, 1, 1) * 1e9;
    if (variable <= 0 || !(roofline > 0)) return FALSE;
    *bucket = rv_cost_bucket_of(cost, model->source);
    *roofline_ns = roofline;
    *variable_ns = (double)variable;
    return TRUE;
}
int64_t rv_cost_model_fixed_ns(const rv_cost_model *model) { return model->fixed_ns; }
rv_dtype rv_cost_model_usual_dtype(const rv_cost_model *model) { return model->usual; }

double rv_cost_model_efficiency(const rv_cost_model *model, rv_cost_class cls, rv_unit unit, guint *samples)
{
    if (cls >= RV_COST_CLASS_COUNT || unit > RV_UNIT_MATRIX) return 0;
    if (samples) *samples = model->calibrated_samples[cls][unit];
    double time = model->calibrated_time[cls][unit];
    if (time <= 0) return 0;
    double efficiency = model->calibrated_roofline[cls][unit] / time;
    return efficiency < EFFICIENCY_MIN ? EFFICIENCY_MIN : efficiency > 1 ? 1 : efficiency;
}

double rv_cost_model_streaming_efficiency(const rv_cost_model *model)
{
    guint samples = 0;
    double efficiency = rv_cost_model_efficiency(model, RV_COST_ELEMENTWISE, RV_UNIT_VECTOR, &samples);
    if (samples < CALIBRATION_MIN_SAMPLES) efficiency = rv_cost_model_efficiency(model, RV_COST_COPY, RV_UNIT_VECTOR, &samples);
    if (samples < CALIBRATION_MIN_SAMPLES) efficiency = STREAMING_EFFICIENCY_DEFAULT;
    return efficiency;
}

double rv_cost_model_streaming_ns(const rv_cost_model *model, double bytes)
{
    double efficiency = rv_cost_model_streaming_efficiency(model);
    return (double)model->fixed_ns + (bytes > 0 ? bytes / (model->source->memory_Bps * efficiency) * 1e9 : 0);
}

