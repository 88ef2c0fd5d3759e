/*
 * kernels.c - `reverie kernels`: how the kernel cost model (costmodel.h)
 * sees a trace, and how well its operator models hold inside it.
 *
 * The table: per class, the kernels, their time, how many have shapes,
 * their dtypes and units, and the efficiency the trace shows (summed
 * roofline over summed variable time).  Unknown kernels are listed by name:
 * the plugins that re-cost kernels leave them as recorded.
 *
 * --scaling checks the operator models the way Tale of Two Cs checks
 * theirs (section 4.3.8): the same operator at different shapes in one
 * trace on one GPU.  Per class and operator, the shape called most often is
 * the base; every other shape whose work lies within 64x of the base's (a
 * sweep of H and SL by up to 4x each, as the paper's) has its mean time
 * predicted from the base's
 * by (a) the paper's model, time in proportion to the work (FLOPs for
 * GEMMs and attention, bytes for the rest), and (b) reverie's, the fixed
 * cost plus the variable time in proportion to the roofline.  The error of
 * a class is the geometric mean of |predicted / measured| - 1 over its
 * shapes.  Collectives would need their message sizes, which the graph
 * does not keep.
 *
 * --target GPU projects every kernel to another GPU as hardware:gpu= does
 * (costmodel.h, ANOTHER GPU: the target's fixed cost, waves, the two GPUs'
 * efficiency tables without recordings of this job) and lists, per class,
 * the time before and after with its range, and the term that decided the
 * most of the time after (fixed, peak, waves, bandwidth, cache, class,
 * link), so that a user sees why a model is projected faster or slower.
 */
#include "cli.h"
#include "reverie/checked.h"
#include "reverie/documents.h"
#include "reverie/costmodel.h"
#include "reverie/efficiency.h"
#include <jansson.h>
#include <math.h>
#include <string.h>

typedef struct {
    guint kernels, shaped, matrix;
    guint with_arguments;  /* shaped ones whose operator recorded its arguments (a convolution's stride) */
    int64_t time_ns, matrix_ns;
    int64_t dtype_ns[RV_DTYPE_COUNT];
} class_row;

typedef struct {
    const rv_graph *graph;
    const rv_gpu *gpu;
    rv_cost_model *model;
    class_row rows[RV_COST_CLASS_COUNT];
    GHashTable *unknown;   /* name id -> int64 ns */
    int64_t total_ns;
} kernel_view;

static void tally(kernel_view *v)
{
    v->unknown = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    for (int32_t t = 0; t < rv_graph_task_count(v->graph); t++) {
        const rv_kernel_cost *cost = rv_cost_model_kernel(v->model, t);
        if (cost == NULL) continue;
        const rv_task *task = &g_array_index(v->graph->tasks, rv_task, t);
        class_row *row = &v->rows[cost->cls];
        row->kernels++;
        row->shaped += cost->shaped;
        row->with_arguments += cost->shaped && rv_task_op_args(v->graph, t) > 0;
        row->matrix += cost->unit == RV_UNIT_MATRIX;
        if (cost->unit == RV_UNIT_MATRIX) row->matrix_ns += task->duration_ns;
        row->time_ns += task->duration_ns;
        row->dtype_ns[cost->dtype] += task->duration_ns;
        v->total_ns += task->duration_ns;
        if (cost->cls != RV_COST_UNKNOWN) continue;
        int64_t *ns = g_hash_table_lookup(v->unknown, GINT_TO_POINTER(task->name));
        if (ns == NULL) g_hash_table_insert(v->unknown, GINT_TO_POINTER(task->name), ns = g_new0(int64_t, 1));
        *ns += task->duration_ns;
    }
}

static rv_dtype main_dtype(const class_row *row)
{
    rv_dtype best = RV_DTYPE_UNKNOWN;
    for (int d = 1; d < RV_DTYPE_COUNT; d++)
        if (row->dtype_ns[d] > row->dtype_ns[best]) best = (rv_dtype)d;
    return best;
}

/* A class's calibrated efficiency on the unit that ran most of its time
 * (samples 0: none calibrated it): by time, as its dtype, since a few long
 * Tensor Core GEMMs and as many short helpers are a matrix class. */
static double class_efficiency(const kernel_view *v, int c, rv_unit *unit, guint *samples)
{
    const class_row *row = &v->rows[c];
    *unit = row->matrix_ns * 2 > row->time_ns ? RV_UNIT_MATRIX : RV_UNIT_VECTOR;
    return rv_cost_model_efficiency(v->model, (rv_cost_class)c, *unit, samples);
}

/* Where the usual dtype came from the GEMMs' speed rather than names. */
static void print_unnamed_gemms(const kernel_view *v)
{
    double flops = rv_cost_model_unnamed_gemm_flops(v->model);
    if (flops <= 0) return;
    double limit = rv_cost_fastest_32bit_flops(v->gpu);
    printf("  GEMMs whose names say no dtype ran at %.0f TFLOPS all together (32-bit types reach %.0f TFLOPS here)%s\n",
           flops / 1e12, limit / 1e12, flops > limit ? ": half precision" : "");
}

static void print_classes(const kernel_view *v)
{
    printf("  %-12s %8s %12s %7s %8s %7s %7s %12s\n", "class", "kernels", "time (ms)", "share", "shaped", "dtype",
           "matrix", "efficiency");
    for (int c = 0; c < RV_COST_CLASS_COUNT; c++) {
        const class_row *row = &v->rows[c];
        if (row->kernels == 0) continue;
        guint samples = 0;
        rv_unit unit;
        double efficiency = class_efficiency(v, c, &unit, &samples);
        char eff[32] = "";
        if (samples) g_snprintf(eff, sizeof eff, "%.3f %s", efficiency, unit == RV_UNIT_MATRIX ? "mx" : "vec");
        printf("  %-12s %8u %12.3f %6.1f%% %7.0f%% %7s %7u %12s\n", rv_cost_class_name((rv_cost_class)c), row->kernels,
               row->time_ns / 1e6, v->total_ns ? 100.0 * row->time_ns / v->total_ns : 0.0,
               100.0 * row->shaped / row->kernels, rv_dtype_name(main_dtype(row)), row->matrix, eff);
    }
}

/* Whether the convolutions were costed at the stride they recorded, or at
 * stride 1 for want of it (work.c). */
static void print_conv_strides(const kernel_view *v)
{
    const class_row *conv = &v->rows[RV_COST_CONV];
    if (conv->shaped == 0) return;
    if (conv->with_arguments == conv->shaped)
        printf("  conv: every shaped convolution recorded its stride, padding and dilation (Concrete Inputs)\n");
    else if (conv->with_arguments == 0)
        printf("  conv: no convolution recorded its stride (Concrete Inputs, written by PyTorch 2.x with record_shapes=True):\n"
               "  all %u shaped ones are taken at stride 1, a strided one at up to 4x its work\n", conv->shaped);
    else
        printf("  conv: %u of %u shaped convolutions recorded their stride (Concrete Inputs); the other %u are taken at\n"
               "  stride 1\n", conv->with_arguments, conv->shaped, conv->shaped - conv->with_arguments);
}

static gint by_time(gconstpointer a, gconstpointer b, gpointer table)
{
    int64_t x = *(int64_t *)g_hash_table_lookup(table, *(gpointer *)a);
    int64_t y = *(int64_t *)g_hash_table_lookup(table, *(gpointer *)b);
    return x > y ? -1 : x < y;
}

static GPtrArray *unknown_by_time(const kernel_view *v)
{
    GPtrArray *names = g_ptr_array_new();
    GHashTableIter iter;
    gpointer key;
    g_hash_table_iter_init(&iter, v->unknown);
    while (g_hash_table_iter_next(&iter, &key, NULL)) g_ptr_array_add(names, key);
    g_ptr_array_sort_with_data(names, by_time, v->unknown);
    return names;
}

static void print_unknown(const kernel_view *v, int top)
{
    if (v->rows[RV_COST_UNKNOWN].kernels == 0) {
        printf("  every kernel is classified\n");
        return;
    }
    GPtrArray *names = unknown_by_time(v);
    printf("  %u kernels (%u names) the classifier does not know; the hardware, precision, amp and model-scale\n"
           "  what-ifs leave them as recorded. Largest:\n", v->rows[RV_COST_UNKNOWN].kernels, names->len);
    for (guint i = 0; i < names->len && (int)i < top; i++) {
        gpointer name = g_ptr_array_index(names, i);
        printf("    %10.3f ms  %s\n", *(int64_t *)g_hash_table_lookup(v->unknown, name) / 1e6,
               rv_cli_short_name(rv_strings_get(v->graph->strings, GPOINTER_TO_INT(name))));
    }
    g_ptr_array_free(names, TRUE);
}

/* ---- --scaling ------------------------------------------------------------ */

#define SWEEP_MAX 64.0  /* shapes whose work is within this factor of the base's */

typedef struct {
    int32_t dims;
    guint calls;
    double time_ns, flops, bytes;
    rv_kernel_cost cost;
} shape_row;

typedef struct {
    double log_paper, log_reverie;   /* sums of |ln(predicted / measured)| */
    guint shapes, operators;
} scaling_row;

/* Shapes per (class, operator): key "class/op" -> GArray of shape_row. */
static GHashTable *group_shapes(const kernel_view *v)
{
    GHashTable *groups = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_array_unref);
    for (int32_t t = 0; t < rv_graph_task_count(v->graph); t++) {
        const rv_kernel_cost *cost = rv_cost_model_kernel(v->model, t);
        const rv_task *task = &g_array_index(v->graph->tasks, rv_task, t);
        if (cost == NULL || !cost->shaped || task->input_dims < 0 || task->kind != RV_TASK_KERNEL) continue;
        /* a GEMM's kernel follows its shape (part of what is measured); another
         * class's kernel name tells apart what one operator does (copy_ as a
         * transpose or as a plain copy) */
        char *key = g_strdup_printf("%d/%d/%d", cost->cls, task->op, rv_cost_class_is_matmul(cost->cls) ? 0 : task->name);
        GArray *rows = g_hash_table_lookup(groups, key);
        if (rows == NULL) g_hash_table_insert(groups, g_strdup(key), rows = g_array_new(FALSE, TRUE, sizeof(shape_row)));
        g_free(key);
        shape_row *row = NULL;
        for (guint i = 0; i < rows->len && row == NULL; i++)
            if (g_array_index(rows, shape_row, i).dims == task->input_dims) row = &g_array_index(rows, shape_row, i);
        if (row == NULL) {
            shape_row fresh = { task->input_dims, 0, 0, cost->flops, cost->bytes, *cost };
            g_array_append_val(rows, fresh);
            row = &g_array_index(rows, shape_row, rows->len - 1);
        }
        row->calls++;
        row->time_ns += (double)task->duration_ns;
    }
    return groups;
}

static double work_of(const shape_row *row)
{
    return rv_cost_class_is_matmul(row->cost.cls) ? row->flops : row->bytes;
}

static void score_group(const kernel_view *v, GArray *rows, scaling_row *out)
{
    if (rows->len < 2) return;
    const shape_row *base = &g_array_index(rows, shape_row, 0);
    for (guint i = 1; i < rows->len; i++)
        if (g_array_index(rows, shape_row, i).calls > base->calls) base = &g_array_index(rows, shape_row, i);
    double base_ns = base->time_ns / base->calls, fixed = (double)MIN(rv_cost_model_fixed_ns(v->model), base_ns);
    if (base_ns <= 0) return;
    double base_roofline = rv_cost_roofline_s(v->gpu, base->cost.unit, base->cost.dtype, base->flops, base->bytes, FALSE, 1, 1);
    guint scored = 0;
    for (guint i = 0; i < rows->len; i++) {
        const shape_row *row = &g_array_index(rows, shape_row, i);
        double ratio = work_of(base) > 0 ? work_of(row) / work_of(base) : 0;
        double measured = row->time_ns / row->calls;
        /* a hyperparameter sweep, as the paper's: up to 64x the work either way */
        if (row == base || ratio == 1 || ratio < 1.0 / SWEEP_MAX || ratio > SWEEP_MAX || measured <= 0) continue;
        double paper = base_ns * work_of(row) / work_of(base);
        double roofline = rv_cost_roofline_s(v->gpu, row->cost.unit, row->cost.dtype, row->flops, row->bytes, FALSE, 1, 1);
        double reverie = fixed + (base_ns - fixed) * roofline / base_roofline;
        if (!(paper > 0) || !(reverie > 0)) continue;
        out->log_paper += fabs(log(paper / measured));
        out->log_reverie += fabs(log(reverie / measured));
        out->shapes++;
        scored++;
    }
    out->operators += scored > 0;
}

static void score_scaling(const kernel_view *v, scaling_row *rows)
{
    GHashTable *groups = group_shapes(v);
    GHashTableIter iter;
    gpointer key, value;
    g_hash_table_iter_init(&iter, groups);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        int cls = atoi(key);
        score_group(v, value, &rows[cls]);
    }
    g_hash_table_destroy(groups);
}

static double geomean_error(double log_sum, guint count) { return count ? exp(log_sum / count) - 1 : 0; }

static const char *paper_error(int cls)
{
    return cls == RV_COST_GEMM ? "~15%" : cls == RV_COST_NORM ? "~7% (LayerNorm)" : "";
}

static void print_scaling(const scaling_row *rows)
{
    printf("\noperator models against the shapes that vary inside this trace (geometric mean of |predicted/measured| - 1):\n");
    printf("  %-12s %10s %8s %16s %16s %16s\n", "class", "operators", "shapes", "work-proportional", "reverie",
           "Tale of Two Cs");
    for (int c = 0; c < RV_COST_CLASS_COUNT; c++) {
        const scaling_row *r = &rows[c];
        if (r->shapes == 0) continue;
        printf("  %-12s %10u %8u %15.1f%% %15.1f%% %16s\n", rv_cost_class_name((rv_cost_class)c), r->operators, r->shapes,
               100 * geomean_error(r->log_paper, r->shapes), 100 * geomean_error(r->log_reverie, r->shapes), paper_error(c));
    }
    printf("  %-12s %10s %8s %16s %16s %16s\n", "comm", "", "", "n/a", "n/a", "~11% (all-reduce)");
    printf("  (collectives: the graph keeps no message sizes to compare against)\n");
}

/* ---- --target --------------------------------------------------------------- */

typedef struct {
    const rv_gpu *source, *target;
    const rv_efficiency_views *views;
} projection;

static gboolean to_target(const rv_graph *graph, int32_t task, const rv_kernel_cost *cost, rv_cost_change *change,
                          gpointer data)
{
    const projection *p = data;
    change->gpu = p->target;
    if (rv_cost_gains_tf32(p->source, p->target, cost, "conv")) change->dtype = RV_DTYPE_TF32;
    change->source_efficiency = p->views->source;
    change->target_efficiency = p->views->target;
    return TRUE;
}

/* The term that decided the most of a class's time after. */
static rv_cost_term main_term(const rv_cost_class_stats *s)
{
    rv_cost_term best = RV_TERM_NONE;
    for (int t = 1; t < RV_TERM_COUNT; t++)
        if (s->term_ns[t] > s->term_ns[best]) best = (rv_cost_term)t;
    return best;
}

static void print_target(const rv_cost_plan *plan, const rv_gpu *source, const rv_gpu *target,
                         const rv_efficiency_views *views)
{
    printf("\nprojected to %s (as hardware:gpu=%s with its defaults; each time with its range, and the term that "
           "decided most of it):\n",
           target->id, target->id);
    guint recordings_source = rv_gpu_efficiency_recordings(views->source), recordings_target =
                                                                              rv_gpu_efficiency_recordings(views->target);
    printf("  efficiency tables: %u recording%s of %s, %u of %s (%u left out as this job's)\n", recordings_source,
           recordings_source == 1 ? "" : "s", source->id, recordings_target, target->id,
           views->excluded ? views->excluded->len : 0);
    printf("  %-12s %8s %12s %12s %23s %9s %10s\n", "class", "kernels", "before (ms)", "after (ms)", "range (ms)",
           "by table", "decided by");
    int64_t before = 0, after = 0, low = 0, high = 0;
    for (int c = 0; c < RV_COST_CLASS_COUNT; c++) {
        const rv_cost_class_stats *s = &plan->classes[c];
        if (s->tasks == 0) continue;
        char range[48];
        g_snprintf(range, sizeof range, "%.3f - %.3f", s->predicted_low_ns / 1e6, s->predicted_high_ns / 1e6);
        printf("  %-12s %8u %12.3f %12.3f %23s %9u %10s\n", rv_cost_class_name((rv_cost_class)c), s->tasks,
               s->recorded_ns / 1e6, s->predicted_ns / 1e6, range, s->by_table, rv_cost_term_name(main_term(s)));
        /* saturating: a table of tiny efficiencies projects a class to
         * int64's limit (plan.c's totals saturate there), and one more
         * class overflowed */
        before = rv_saturating_add(before, s->recorded_ns);
        after = rv_saturating_add(after, s->predicted_ns);
        low = rv_saturating_add(low, s->predicted_low_ns);
        high = rv_saturating_add(high, s->predicted_high_ns);
    }
    char range[48];
    g_snprintf(range, sizeof range, "%.3f - %.3f", low / 1e6, high / 1e6);
    printf("  %-12s %8s %12.3f %12.3f %23s\n", "total", "", before / 1e6, after / 1e6, range);
    if (plan->library_helpers)
        printf("  %u kernels (%.3f ms recorded) that library convolutions launched under other names (layout "
               "transposes, workspace setup) are counted as conv: on another vendor's GPU they follow the "
               "convolutions, whose library there runs helpers of its own or none\n",
               plan->library_helpers, plan->library_helpers_ns / 1e6);
    if (plan->unknown_tasks)
        printf("  %u unknown kernels (%.3f ms) stay as recorded\n", plan->unknown_tasks, plan->unknown_ns / 1e6);
}

static json_t *json_target(const rv_cost_plan *plan, const rv_gpu *target, const rv_efficiency_views *views)
{
    json_t *classes = json_object();
    for (int c = 0; c < RV_COST_CLASS_COUNT; c++) {
        const rv_cost_class_stats *s = &plan->classes[c];
        if (s->tasks == 0) continue;
        json_t *terms = json_object();
        for (int t = 1; t < RV_TERM_COUNT; t++)
            if (s->term_ns[t]) json_object_set_new(terms, rv_cost_term_name((rv_cost_term)t), json_real(s->term_ns[t] / 1e3));
        json_object_set_new(classes, rv_cost_class_name((rv_cost_class)c),
                            json_pack("{s:I,s:f,s:f,s:f,s:f,s:I,s:s,s:o}", "kernels", (json_int_t)s->tasks, "before_us",
                                      s->recorded_ns / 1e3, "after_us", s->predicted_ns / 1e3, "low_us",
                                      s->predicted_low_ns / 1e3, "high_us", s->predicted_high_ns / 1e3, "by_table",
                                      (json_int_t)s->by_table, "decided_by", rv_cost_term_name(main_term(s)),
                                      "terms_us", terms));
    }
    json_t *excluded = json_array();
    for (guint i = 0; views->excluded && i < views->excluded->len; i++)
        json_array_append_new(excluded, rv_json_text(g_ptr_array_index(views->excluded, i)));
    json_t *helpers = json_pack("{s:I,s:f}", "kernels", (json_int_t)plan->library_helpers, "recorded_us",
                                plan->library_helpers_ns / 1e3);
    return json_pack("{s:s,s:I,s:I,s:o,s:o,s:o}", "gpu", target->id, "source_recordings",
                     (json_int_t)rv_gpu_efficiency_recordings(views->source), "target_recordings",
                     (json_int_t)rv_gpu_efficiency_recordings(views->target), "left_out", excluded, "classes", classes,
                     "library_helpers", helpers);
}

/* ---- JSON ------------------------------------------------------------------- */

static json_t *json_view(const kernel_view *v, const scaling_row *scaling, json_t *target)
{
    json_t *classes = json_object();
    for (int c = 0; c < RV_COST_CLASS_COUNT; c++) {
        const class_row *row = &v->rows[c];
        if (row->kernels == 0) continue;
        guint samples = 0;
        rv_unit unit;
        double efficiency = class_efficiency(v, c, &unit, &samples);
        json_t *entry = json_pack("{s:I,s:f,s:I,s:I,s:s,s:s}", "kernels", (json_int_t)row->kernels, "time_us",
                                  row->time_ns / 1e3, "shaped", (json_int_t)row->shaped, "matrix", (json_int_t)row->matrix,
                                  "dtype", rv_dtype_name(main_dtype(row)), "unit", unit == RV_UNIT_MATRIX ? "matrix" : "vector");
        json_object_set_new(entry, "efficiency", samples ? json_real(efficiency) : json_null());
        if (c == RV_COST_CONV) json_object_set_new(entry, "with_arguments", json_integer(row->with_arguments));
        if (scaling && scaling[c].shapes) {
            json_object_set_new(entry, "scaling_shapes", json_integer(scaling[c].shapes));
            json_object_set_new(entry, "scaling_error_work", json_real(geomean_error(scaling[c].log_paper, scaling[c].shapes)));
            json_object_set_new(entry, "scaling_error_reverie",
                                json_real(geomean_error(scaling[c].log_reverie, scaling[c].shapes)));
        }
        json_object_set_new(classes, rv_cost_class_name((rv_cost_class)c), entry);
    }
    json_t *unknown = json_array();
    GPtrArray *names = unknown_by_time(v);
    for (guint i = 0; i < names->len; i++) {
        gpointer name = g_ptr_array_index(names, i);
        json_array_append_new(unknown, json_pack("{s:o,s:f}", "name",
                                                 rv_json_text(rv_strings_get(v->graph->strings, GPOINTER_TO_INT(name))),
                                                 "time_us", *(int64_t *)g_hash_table_lookup(v->unknown, name) / 1e3));
    }
    g_ptr_array_free(names, TRUE);
    json_t *root = json_object();
    json_object_set_new(root, "source", rv_json_text(v->graph->source));
    json_object_set_new(root, "gpu", json_string(v->gpu->id));
    json_object_set_new(root, "fixed_us", json_real(rv_cost_model_fixed_ns(v->model) / 1e3));
    json_object_set_new(root, "usual_dtype", json_string(rv_dtype_name(rv_cost_model_usual_dtype(v->model))));
    json_object_set_new(root, "unnamed_gemm_tflops", json_real(rv_cost_model_unnamed_gemm_flops(v->model) / 1e12));
    json_object_set_new(root, "classes", classes);
    json_object_set_new(root, "unknown", unknown);
    if (target) json_object_set_new(root, "target", target);
    return root;
}

typedef struct {
    const char *source_gpu, *target, *efficiency;
    gboolean scaling, as_json, as_csv;
    int top;
} kernels_options;

static int report(const char *path, const kernels_options *o)
{
    GError *error = NULL;
    rv_gpu_catalogue *catalogue = rv_gpu_catalogue_load_default(&error);
    const rv_gpu *target = NULL;
    if (catalogue && o->target) target = rv_gpu_find(catalogue, o->target, &error);
    rv_graph *graph = catalogue && (o->target == NULL || target) ? rv_cli_load(path, &error) : NULL;
    const rv_gpu *gpu = graph ? rv_gpu_of_graph(catalogue, graph, o->source_gpu, "--source-gpu", &error) : NULL;
    rv_efficiency_views views = { NULL, NULL, NULL, NULL };
    if (gpu && target && !rv_efficiency_views_open(&views, o->efficiency, graph, gpu, target, &error)) gpu = NULL;
    if (gpu == NULL) {
        rv_efficiency_views_clear(&views);
        rv_graph_free(graph);
        rv_gpu_catalogue_free(catalogue);
        return rv_cli_fail(error);
    }
    rv_cli_print_notes(graph);
    kernel_view v = { graph, gpu, rv_cost_model_new(graph, gpu, FALSE), { { 0 } }, NULL, 0 };
    tally(&v);
    scaling_row rows[RV_COST_CLASS_COUNT] = { { 0 } };
    if (o->scaling) score_scaling(&v, rows);
    rv_cost_plan *plan = NULL;
    rv_cost_model *projecting = NULL;
    if (target) {
        projection p = { gpu, target, &views };
        projecting = rv_cost_model_new(graph, gpu, TRUE); /* achievable peaks, as hardware's default */
        plan = rv_cost_model_plan(projecting, to_target, &p);
    }
    if (o->as_json) {
        rv_cli_print_json(json_view(&v, o->scaling ? rows : NULL, plan ? json_target(plan, target, &views) : NULL));
    } else if (o->as_csv) {
        rv_cli_print_json_as_csv(json_view(&v, o->scaling ? rows : NULL, plan ? json_target(plan, target, &views) : NULL));
    } else {
        printf("%s: %s (%s), kernel fixed cost %.1f us, usual dtype %s, datasheet peaks\n", rv_cli_shown(graph->source),
               gpu->id, gpu->name, rv_cost_model_fixed_ns(v.model) / 1e3,
               rv_dtype_name(rv_cost_model_usual_dtype(v.model)));
        print_unnamed_gemms(&v);
        print_classes(&v);
        print_conv_strides(&v);
        print_unknown(&v, o->top);
        if (o->scaling) print_scaling(rows);
        if (plan) print_target(plan, gpu, target, &views);
    }
    rv_cost_plan_free(plan);
    rv_cost_model_free(projecting);
    rv_efficiency_views_clear(&views);
    g_hash_table_destroy(v.unknown);
    rv_cost_model_free(v.model);
    rv_graph_free(graph);
    rv_gpu_catalogue_free(catalogue);
    return RV_EXIT_OK;
}

int rv_cmd_kernels(int argc, char **argv)
{
    gboolean as_json = FALSE, as_csv = FALSE, scaling = FALSE;
    char *source_gpu = NULL, *target = NULL, *efficiency = NULL;
    int top = 10;
    GOptionEntry entries[] = {
        { "source-gpu", 0, 0, G_OPTION_ARG_STRING, &source_gpu, "the trace's GPU, when its deviceProperties name none "
          "the catalogue knows", "NAME" },
        { "scaling", 0, 0, G_OPTION_ARG_NONE, &scaling, "check the operator models on the shapes that vary in the trace", NULL },
        { "target", 0, 0, G_OPTION_ARG_STRING, &target, "project every kernel to this GPU (as hardware:gpu=) and say, per "
          "class, the time before and after, its range and which term decided it", "GPU" },
        { "efficiency", 0, 0, G_OPTION_ARG_STRING, &efficiency, "with --target: the efficiency tables to read (a file "
          "from reverie calibrate, or none; default the shipped data/efficiency.json)", "FILE|none" },
        { "unknown", 0, 0, G_OPTION_ARG_INT, &top, "list this many unknown kernel names (default 10)", "N" },
        { "json", 0, 0, G_OPTION_ARG_NONE, &as_json, "print JSON (schema in docs/commands.md)", NULL },
        { "csv", 0, 0, G_OPTION_ARG_NONE, &as_csv, "print what --json holds as CSV rows of field,value", NULL },
        { NULL }
    };
    GOptionContext *context = g_option_context_new("TRACE|GRAPH - the kernel cost model's view of a trace");
    rv_cli_add_entries(context, entries);
    g_option_context_set_description(context,
        "Per class (gemm, conv, attention, elementwise, reduction, norm, copy, host_copy, comm,\n"
        "other, unknown): kernels, time, how many have shapes, the main dtype, how many run on\n"
        "matrix units, and the efficiency the trace shows (roofline / measured, datasheet peaks).\n"
        "--scaling compares the operator models with the trace's own shapes. --target GPU projects\n"
        "the kernels to another GPU: per class the time before and after, its range, how many\n"
        "kernels both GPUs' efficiency tables covered, and the term that decided most of the time\n"
        "after: fixed (the target's fixed per-kernel cost), peak (FLOP/s), waves (wave quantization\n"
        "moved it by more than 25%), bandwidth (memory, at the share its size achieves), cache (a\n"
        "working set in the last-level cache), class (unshaped, like its class), link.\n\n"
        "Examples:\n  reverie kernels traces/pairs/weights_fp32_vs_bf16_a10g/fp32.json.gz --scaling\n"
        "  reverie kernels traces/pairs/gpu_h100_vs_mi300x_bert_small/h100.json.gz --target MI300X\n"
        "  reverie kernels traces/pairs/dataloader_workers_v100/num_workers_0.json.gz --source-gpu V100\n");
    int status = RV_EXIT_OK;
    if (!rv_cli_parse(context, &argc, &argv, &status)) goto out;
    if (argc != 2) { status = rv_cli_usage("kernels", "give exactly one trace or graph"); goto out; }
    if (top < 0) { status = rv_cli_usage("kernels", "--unknown takes a count of 0 or more"); goto out; }
    if (efficiency && !target) { status = rv_cli_usage("kernels", "--efficiency goes with --target"); goto out; }
    if (as_json && as_csv) { status = rv_cli_usage("kernels", "give --json or --csv, not both"); goto out; }
    kernels_options options = { source_gpu, target, efficiency ? efficiency : "", scaling, as_json, as_csv, top };
    status = report(argv[1], &options);
out:
    g_free(source_gpu);
    g_free(target);
    g_free(efficiency);
    g_option_context_free(context);
    return status;
}
