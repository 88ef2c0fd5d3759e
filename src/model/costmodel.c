/*
 * costmodel.c - the kernel cost model (costmodel.h): every GPU task's
 * class, dtype, unit and work, the efficiency calibrated on the trace, and
 * plans that re-cost tasks for another device, dtype or size.
 */
#include "reverie/costmodel.h"
#include "reverie/comm.h"
#include "reverie/error.h"
#include "reverie/units.h"
#include "reverie/validate.h"
#include "reverie/transform.h"
#include <math.h>
#include <string.h>

#define NOT_GPU 255            /* rv_kernel_cost.cls of tasks the model does not cost */
#define FIXED_PERCENTILE 0.05  /* the trace's shortest kernels: what doing nothing costs */
#define FIXED_CAP_NS 3000
#define EFFICIENCY_MIN 0.005
#define MATRIX_EFFICIENCY_DEFAULT 0.8  /* a matmul's share of the peak when nothing better is known */
#define MATRIX_GAIN_MAX 3.0    /* Daydream: AMP gains at most 3x on compute-bound kernels (Volta, Turing) */
#define CALIBRATION_MIN_SAMPLES 3
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

static gboolean class_is_costed(rv_cost_class cls)
{
    return cls != RV_COST_COMM && cls != RV_COST_HOST_COPY && cls != RV_COST_UNKNOWN;
}

struct rv_cost_model {
    const rv_graph *graph;
    const rv_gpu *source;
    gboolean achievable;
    GArray *kernels;             /* rv_kernel_cost per task; cls NOT_GPU for the others */
    int64_t fixed_ns;
    rv_dtype usual;
    double calibrated_roofline[RV_COST_CLASS_COUNT][2];
    double calibrated_time[RV_COST_CLASS_COUNT][2];
    guint calibrated_samples[RV_COST_CLASS_COUNT][2];
};

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
static gboolean use_achievable(const rv_cost_model *model, const rv_gpu *target)
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
    uint8_t cls, dtype, integer, autocast_fp32;
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
                             (uint8_t)autocast_keeps_fp32(op) };
    gint64 *stored_key = g_new(gint64, 1);
    *stored_key = key;
    g_hash_table_insert(memo, stored_key, g_memdup2(&verdict, sizeof verdict));
    return verdict;
}

static gboolean is_costed_task(const rv_task *task)
{
    return (task->flags & RV_TASK_FLAG_GPU) && !(task->flags & RV_TASK_FLAG_REMOVED);
}

/* The floating dtype of most of the named kernel time. */
static rv_dtype usual_dtype(const rv_cost_model *model)
{
    double time[RV_DTYPE_COUNT] = { 0 };
    for (int32_t t = 0; t < rv_graph_task_count(model->graph); t++) {
        const rv_kernel_cost *cost = &g_array_index(model->kernels, rv_kernel_cost, t);
        if (cost->cls == NOT_GPU || !class_is_costed(cost->cls) || cost->dtype_assumed) continue;
        time[cost->dtype] += (double)g_array_index(model->graph->tasks, rv_task, t).duration_ns;
    }
    rv_dtype best = RV_DTYPE_UNKNOWN;
    for (int d = 1; d < RV_DTYPE_COUNT; d++)
        if (d != RV_DTYPE_INT8 && time[d] > time[best]) best = (rv_dtype)d;
    return best;
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
    gboolean ok, aligned;
    double flops, bytes;
} work_verdict;

/* The work of (class, element size) from the shapes of (op, dims); the memo
 * maps (op, dims) to the few (class, size) verdicts asked of it. */
static const work_verdict *work_of(const rv_graph *graph, const rv_task *task, uint8_t cls, uint8_t element,
                                   GHashTable *memo)
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
        if (v->cls == cls && v->element == element) return v;
    }
    work_verdict v = { cls, element, FALSE, TRUE, 0, 0 };
    v.ok = rv_cost_work_of(cls, rv_strings_get(graph->strings, task->op), rv_strings_get(graph->strings, task->input_dims),
                           element, &v.flops, &v.bytes, &v.aligned);
    g_array_append_val(verdicts, v);
    return &g_array_index(verdicts, work_verdict, verdicts->len - 1);
}

static void measure_work(const rv_graph *graph, const rv_task *task, rv_kernel_cost *cost, GHashTable *memo)
{
    if (copy_work(task, &cost->bytes)) {
        cost->shaped = TRUE;
        cost->aligned = TRUE;
        return;
    }
    if (task->input_dims < 0 || !class_is_costed(cost->cls)) return;
    uint8_t element = (uint8_t)(rv_dtype_bytes(cost->dtype) ? rv_dtype_bytes(cost->dtype) : 4);
    const work_verdict *work = work_of(graph, task, cost->cls, element, memo);
    cost->shaped = (uint8_t)work->ok;
    cost->flops = work->flops;
    cost->bytes = work->bytes;
    cost->aligned = (uint8_t)work->aligned;
}

static void classify_tasks(rv_cost_model *model)
{
    GHashTable *names = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
    const rv_kernel_cost none = { NOT_GPU, 0, 0, 0, 0, 0, 0, 0, 0 };
    for (int32_t t = 0; t < rv_graph_task_count(model->graph); t++) {
        const rv_task *task = &g_array_index(model->graph->tasks, rv_task, t);
        rv_kernel_cost cost = none;
        if (is_costed_task(task)) {
            name_verdict verdict = verdict_of(model->graph, task, names);
            cost = (rv_kernel_cost){ verdict.cls, verdict.dtype, 0, RV_UNIT_VECTOR, 1, verdict.autocast_fp32, 0, 0, 0 };
            cost.dtype_assumed = verdict.dtype == RV_DTYPE_UNKNOWN && !verdict.integer;
        }
        g_array_append_val(model->kernels, cost);
    }
    g_hash_table_destroy(names);
}

/* Assumed dtypes, units and work, once the usual dtype is known. */
static void complete_tasks(rv_cost_model *model)
{
    GHashTable *work = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, (GDestroyNotify)g_array_unref);
    for (int32_t t = 0; t < rv_graph_task_count(model->graph); t++) {
        rv_kernel_cost *cost = &g_array_index(model->kernels, rv_kernel_cost, t);
        if (cost->cls == NOT_GPU) continue;
        if (cost->dtype_assumed) cost->dtype = (uint8_t)model->usual;
        measure_work(model->graph, &g_array_index(model->graph->tasks, rv_task, t), cost, work);
        cost->unit = (uint8_t)rv_cost_unit_on(model->source, cost->cls, cost->dtype, cost->aligned);
    }
    g_hash_table_destroy(work);
}

static gint compare_int64(gconstpointer a, gconstpointer b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int64_t fixed_cost(const rv_cost_model *model)
{
    GArray *durations = g_array_new(FALSE, FALSE, sizeof(int64_t));
    for (int32_t t = 0; t < rv_graph_task_count(model->graph); t++) {
        const rv_task *task = &g_array_index(model->graph->tasks, rv_task, t);
        /* a zero is a profiler's rounding, not a kernel that costs nothing */
        if (is_costed_task(task) && task->kind == RV_TASK_KERNEL && task->duration_ns > 0)
            g_array_append_val(durations, task->duration_ns);
    }
    int64_t fixed = 0;
    if (durations->len > 0) {
        g_array_sort(durations, compare_int64);
        fixed = g_array_index(durations, int64_t, (guint)(FIXED_PERCENTILE * (durations->len - 1)));
    }
    g_array_unref(durations);
    return fixed < FIXED_CAP_NS ? fixed : FIXED_CAP_NS;
}

static void calibrate(rv_cost_model *model)
{
    for (int32_t t = 0; t < rv_graph_task_count(model->graph); t++) {
        const rv_kernel_cost *cost = &g_array_index(model->kernels, rv_kernel_cost, t);
        int64_t variable = g_array_index(model->graph->tasks, rv_task, t).duration_ns - model->fixed_ns;
        if (cost->cls == NOT_GPU || !cost->shaped || !class_is_costed(cost->cls) || variable <= 0) continue;
        double roofline = rv_cost_roofline_s(model->source, cost->unit, cost->dtype, cost->flops, cost->bytes, FALSE, 1, 1);
        model->calibrated_roofline[cost->cls][cost->unit] += roofline * 1e9;
        model->calibrated_time[cost->cls][cost->unit] += (double)variable;
        model->calibrated_samples[cost->cls][cost->unit]++;
    }
}

rv_cost_model *rv_cost_model_new(const rv_graph *graph, const rv_gpu *source, gboolean achievable)
{
    rv_cost_model *model = g_new0(rv_cost_model, 1);
    model->graph = graph;
    model->source = source;
    model->achievable = achievable;
    model->kernels = g_array_sized_new(FALSE, FALSE, sizeof(rv_kernel_cost), (guint)rv_graph_task_count(graph));
    classify_tasks(model);
    model->usual = usual_dtype(model);
    complete_tasks(model);
    model->fixed_ns = fixed_cost(model);
    calibrate(model);
    return model;
}

void rv_cost_model_free(rv_cost_model *model)
{
    if (model == NULL) return;
    g_array_unref(model->kernels);
    g_free(model);
}

const rv_kernel_cost *rv_cost_model_kernel(const rv_cost_model *model, int32_t task)
{
    if (task < 0 || (guint)task >= model->kernels->len) return NULL;
    const rv_kernel_cost *cost = &g_array_index(model->kernels, rv_kernel_cost, task);
    return cost->cls == NOT_GPU ? NULL : cost;
}

const rv_gpu *rv_cost_model_source(const rv_cost_model *model) { return model->source; }
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

double rv_cost_model_streaming_ns(const rv_cost_model *model, double bytes)
{
    guint samples = 0;
    double efficiency = rv_cost_model_efficiency(model, RV_COST_ELEMENTWISE, RV_UNIT_VECTOR, &samples);
    if (samples < CALIBRATION_MIN_SAMPLES) efficiency = rv_cost_model_efficiency(model, RV_COST_COPY, RV_UNIT_VECTOR, &samples);
    if (samples < CALIBRATION_MIN_SAMPLES) efficiency = STREAMING_EFFICIENCY_DEFAULT;
    return (double)model->fixed_ns + (bytes > 0 ? bytes / (model->source->memory_Bps * efficiency) * 1e9 : 0);
}

/* ---- plans ----------------------------------------------------------- */

rv_cost_change rv_cost_change_none(const rv_cost_model *model)
{
    return (rv_cost_change){ model->source, RV_DTYPE_UNKNOWN, 1, 1, 1, 1, 1, 1, 0 };
}

typedef struct {
    const rv_cost_model *model;
    rv_cost_plan *plan;
    GArray *pending;                       /* unshaped tasks, costed after the shaped ones */
    GArray *changes;                       /* rv_cost_change per pending task */
    double shaped_before[RV_COST_CLASS_COUNT], shaped_after[RV_COST_CLASS_COUNT];
} planning;

static rv_dtype target_dtype(const rv_kernel_cost *cost, const rv_cost_change *change)
{
    if (change->dtype == RV_DTYPE_UNKNOWN || cost->dtype == RV_DTYPE_UNKNOWN) return (rv_dtype)cost->dtype;
    return change->dtype;
}

static double size_ratio(rv_dtype from, rv_dtype to)
{
    int a = rv_dtype_bytes(from), b = rv_dtype_bytes(to);
    return a > 0 && b > 0 ? (double)b / a : 1.0;
}

/* The efficiency a kernel may reach on a unit it did not run on. */
static double efficiency_cap(const rv_cost_model *model, const rv_gpu *target, rv_cost_class cls, rv_unit unit,
                             rv_dtype dtype)
{
    guint samples = 0;
    double calibrated = rv_cost_model_efficiency(model, cls, unit, &samples);
    if (target == model->source && samples >= CALIBRATION_MIN_SAMPLES) return calibrated;
    if (unit == RV_UNIT_MATRIX && target->matrix_flops[dtype] > 0 && rv_gpu_matrix_peak(target, dtype, TRUE) <
                                                                     target->matrix_flops[dtype])
        return rv_gpu_matrix_peak(target, dtype, TRUE) / target->matrix_flops[dtype];
    return MATRIX_EFFICIENCY_DEFAULT;
}

/* Variable time of a shaped kernel after the change. */
static double shaped_variable_ns(const rv_cost_model *model, const rv_kernel_cost *cost, const rv_cost_change *change,
                                 double variable_ns, gboolean *unit_changed)
{
    rv_dtype to = target_dtype(cost, change);
    rv_unit unit = rv_cost_unit_on(change->gpu, cost->cls, to, cost->aligned);
    gboolean achievable = use_achievable(model, change->gpu);
    double before = rv_cost_roofline_s(model->source, cost->unit, cost->dtype, cost->flops, cost->bytes, achievable, 1, 1);
    double after = rv_cost_roofline_s(change->gpu, unit, to, cost->flops * change->flops_factor,
                                      cost->bytes * change->bytes_factor * size_ratio(cost->dtype, to), achievable,
                                      change->flops_scale, change->memory_scale);
    *unit_changed = unit != cost->unit;
    if (before <= 0) return variable_ns;
    if (!*unit_changed || variable_ns <= 0) return variable_ns * after / before;
    double efficiency = before * 1e9 / variable_ns;
    double cap = efficiency_cap(model, change->gpu, cost->cls, unit, to);
    return after * 1e9 / (efficiency < cap ? efficiency : cap);
}

/* The peak ratio for a kernel no shapes describe and whose class has no shaped kernels. */
static double peak_ratio(const rv_cost_model *model, const rv_kernel_cost *cost, const rv_cost_change *change)
{
    rv_dtype to = target_dtype(cost, change);
    const rv_gpu *source = model->source, *target = change->gpu;
    if (!rv_cost_class_is_matmul(cost->cls)) {
        double bandwidth = source->memory_Bps / (target->memory_Bps * change->memory_scale);
        return bandwidth * size_ratio(cost->dtype, to) * change->bytes_factor;
    }
    rv_unit unit = rv_cost_unit_on(target, cost->cls, to, cost->aligned);
    gboolean achievable = use_achievable(model, target);
    double from_peak = cost->unit == RV_UNIT_MATRIX ? rv_gpu_matrix_peak(source, cost->dtype, achievable)
                                                    : rv_gpu_vector_peak(source, cost->dtype);
    double to_peak = unit == RV_UNIT_MATRIX ? rv_gpu_matrix_peak(target, to, achievable) : rv_gpu_vector_peak(target, to);
    double ratio = from_peak / (to_peak * change->flops_scale);
    if (unit == RV_UNIT_MATRIX && cost->unit == RV_UNIT_VECTOR) {
        /* onto matrix units: at most MATRIX_GAIN_MAX faster than the target's own vector units */
        double vector = from_peak / (rv_gpu_vector_peak(target, to) * change->flops_scale);
        ratio = MIN(vector, MAX(ratio, vector / MATRIX_GAIN_MAX));
    }
    return ratio * change->flops_factor;
}

/* A collective: the bandwidth part scales with its bytes and the link; the
 * latency part (comm.h's model for zero bytes) stays. */
static double comm_ns(const rv_cost_model *model, const rv_task *task, const rv_cost_change *change)
{
    const rv_gpu *source = model->source, *target = change->gpu;
    double from = source->link_Bps > 0 ? source->link_Bps : source->pcie_Bps;
    double to = (target->link_Bps > 0 ? target->link_Bps : target->pcie_Bps) * change->link_scale;
    int ranks = change->comm_ranks > 1 ? change->comm_ranks
                : model->graph->world_size > 1 ? (int)model->graph->world_size : 2;
    const char *name = rv_strings_get(model->graph->strings, task->name);
    int collective = rv_collective_from_kernel_name(name);
    rv_link link = rv_link_make(from / 2, rv_link_preset_find("nvlink-h100")->latency_ns, 1.0);
    int64_t latency = rv_collective_time_ns(collective >= 0 ? (rv_collective)collective : RV_COLL_ALLREDUCE_RING, 0,
                                            ranks, &link);
    double fixed = latency > 0 && latency < task->duration_ns ? (double)latency : 0;
    return fixed + ((double)task->duration_ns - fixed) * change->comm_bytes_factor * from / to;
}

static void count(rv_cost_plan *plan, rv_cost_class cls, const rv_task *task, double new_ns)
{
    rv_cost_class_stats *stats = &plan->classes[cls];
    stats->tasks++;
    stats->recorded_ns += task->duration_ns;
    stats->predicted_ns += (int64_t)llround(new_ns);
}

static void plan_task(planning *p, int32_t id, const rv_kernel_cost *cost, const rv_cost_change *change)
{
    const rv_cost_model *model = p->model;
    const rv_task *task = &g_array_index(model->graph->tasks, rv_task, id);
    double *new_ns = &g_array_index(p->plan->new_ns, double, id);
    if (cost->cls == RV_COST_UNKNOWN) {
        p->plan->unknown_tasks++;
        p->plan->unknown_ns += task->duration_ns;
        return;
    }
    if (cost->cls == RV_COST_COMM) {
        *new_ns = comm_ns(model, task, change);
    } else if (cost->cls == RV_COST_HOST_COPY) {
        *new_ns = (double)task->duration_ns * change->bytes_factor * model->source->pcie_Bps / change->gpu->pcie_Bps;
    } else if (!cost->shaped) {
        g_array_append_val(p->pending, id);
        g_array_append_vals(p->changes, change, 1);
        return;
    } else {
        double fixed = (double)MIN(task->duration_ns, model->fixed_ns), variable = (double)task->duration_ns - fixed;
        gboolean unit_changed = FALSE;
        double after = shaped_variable_ns(model, cost, change, variable, &unit_changed);
        p->shaped_before[cost->cls] += variable;
        p->shaped_after[cost->cls] += after;
        *new_ns = fixed + after;
        p->plan->classes[cost->cls].shaped++;
        p->plan->classes[cost->cls].unit_changes += unit_changed;
        if (variable <= 0) p->plan->classes[cost->cls].at_floor++;
    }
    if (cost->dtype_assumed && change->dtype != RV_DTYPE_UNKNOWN) p->plan->assumed_dtype++;
    count(p->plan, cost->cls, task, *new_ns);
}

/* Unshaped kernels: like their class's shaped ones, else by the peak ratio. */
static void plan_pending(planning *p)
{
    for (guint i = 0; i < p->pending->len; i++) {
        int32_t id = g_array_index(p->pending, int32_t, i);
        const rv_cost_change *change = &g_array_index(p->changes, rv_cost_change, i);
        const rv_kernel_cost *cost = rv_cost_model_kernel(p->model, id);
        const rv_task *task = &g_array_index(p->model->graph->tasks, rv_task, id);
        double fixed = (double)MIN(task->duration_ns, p->model->fixed_ns), variable = (double)task->duration_ns - fixed;
        double ratio;
        if (p->shaped_before[cost->cls] > 0) {
            ratio = p->shaped_after[cost->cls] / p->shaped_before[cost->cls];
            p->plan->classes[cost->cls].by_class_ratio++;
        } else {
            ratio = peak_ratio(p->model, cost, change);
            p->plan->classes[cost->cls].by_peak_ratio++;
        }
        double *new_ns = &g_array_index(p->plan->new_ns, double, id);
        *new_ns = fixed + variable * ratio;
        if (cost->dtype_assumed && change->dtype != RV_DTYPE_UNKNOWN) p->plan->assumed_dtype++;
        count(p->plan, cost->cls, task, *new_ns);
    }
}

rv_cost_plan *rv_cost_model_plan(const rv_cost_model *model, rv_cost_change_fn decide, gpointer data)
{
    rv_cost_plan *plan = g_new0(rv_cost_plan, 1);
    guint tasks = (guint)rv_graph_task_count(model->graph);
    plan->new_ns = g_array_sized_new(FALSE, FALSE, sizeof(double), tasks);
    g_array_set_size(plan->new_ns, tasks);
    for (guint t = 0; t < tasks; t++) g_array_index(plan->new_ns, double, t) = -1;
    planning p = { model, plan, g_array_new(FALSE, FALSE, sizeof(int32_t)), g_array_new(FALSE, FALSE, sizeof(rv_cost_change)),
                   { 0 }, { 0 } };
    for (int32_t id = 0; id < (int32_t)tasks; id++) {
        const rv_kernel_cost *cost = rv_cost_model_kernel(model, id);
        rv_cost_change change = rv_cost_change_none(model);
        if (cost != NULL && decide(model->graph, id, cost, &change, data)) plan_task(&p, id, cost, &change);
    }
    plan_pending(&p);
    g_array_unref(p.pending);
    g_array_unref(p.changes);
    return plan;
}

void rv_cost_plan_free(rv_cost_plan *plan)
{
    if (plan == NULL) return;
    g_array_unref(plan->new_ns);
    g_free(plan);
}

guint rv_cost_plan_changed(const rv_cost_plan *plan)
{
    guint changed = 0;
    for (guint t = 0; t < plan->new_ns->len; t++) changed += g_array_index(plan->new_ns, double, t) >= 0;
    return changed;
}

gboolean rv_cost_plan_apply(rv_graph *graph, const rv_cost_plan *plan, const char *cause, GError **error)
{
    GArray *durations = g_array_new(FALSE, FALSE, sizeof(int64_t));
    gboolean ok = TRUE;
    for (guint t = 0; ok && t < plan->new_ns->len; t++) {
        double ns = g_array_index(plan->new_ns, double, t);
        int64_t duration = -1;
        if (ns >= 0) ok = rv_task_duration_from(graph, (int32_t)t, ns, cause, &duration, error);
        g_array_append_val(durations, duration);
    }
    for (guint t = 0; ok && t < durations->len; t++) {
        int64_t duration = g_array_index(durations, int64_t, t);
        if (duration >= 0) rv_transform_set_duration(graph, (int32_t)t, duration);
    }
    g_array_unref(durations);
    return ok;
}

void rv_cost_plan_describe(const rv_cost_plan *plan, const char *indent, GString *out)
{
    for (int c = 0; c < RV_COST_CLASS_COUNT; c++) {
        const rv_cost_class_stats *s = &plan->classes[c];
        if (s->tasks == 0) continue;
        char *before = rv_format_duration(s->recorded_ns), *after = rv_format_duration(s->predicted_ns);
        g_string_append_printf(out, "%s%-11s %6u tasks %12s -> %-12s", indent, class_names[c], s->tasks, before, after);
        if (c == RV_COST_COMM || c == RV_COST_HOST_COPY) g_string_append(out, " (link ratio)");
        else g_string_append_printf(out, " (%u by shapes, %u like their class, %u by peak ratio%s)", s->shaped,
                                    s->by_class_ratio, s->by_peak_ratio, s->unit_changes ? ", some change unit" : "");
        g_string_append_c(out, '\n');
        g_free(before);
        g_free(after);
    }
    if (plan->unknown_tasks) {
        char *time = rv_format_duration(plan->unknown_ns);
        g_string_append_printf(out, "%sunknown     %6u kernels %s the classifier does not know: left as recorded\n",
                               indent, plan->unknown_tasks, time);
        g_free(time);
    }
}
