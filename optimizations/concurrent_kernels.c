/*
 * concurrent_kernels.c - GOLDYLOC (Pati's thesis, ch. 7): independent GEMMs
 * run concurrently on one GPU, each on a stream of its own, and the GPU is
 * shared by the kernels that overlap (the sharing rule, contention.h).
 *
 *   reverie whatif bert.json.gz --opt concurrent-kernels
 *   reverie whatif bert.json.gz --opt concurrent-kernels:degree=2,tiles=tuned
 *   reverie whatif trace.json.gz --opt concurrent-kernels:degree=1     (the rule alone)
 *
 * INDEPENDENT GEMMS, as a trace shows them (it records no tensor
 * addresses, so independence comes from what the operators compute):
 *  - backward: the kernels of a matmul's backward come in pairs, the
 *    gradient of each input computed from the incoming gradient and the
 *    other input (PyTorch's derivative formulas of mm, addmm, bmm, matmul
 *    and linear; a convolution's data and weight gradients), never from
 *    each other.  Pairs: consecutive GEMM kernels of those operators in
 *    the backward phase on one stream, paired from the start of each run;
 *    a convolution's data-gradient kernel next to its weight-gradient one
 *    (the kernel names say which: dgrad, wgrad; MIOpen's bwd, wrw).  A
 *    kernel that is one step of an algorithm's chain (Winograd's
 *    transforms and their GEMM), or that no name places, joins no pair;
 *  - forward: consecutive GEMM kernels whose operators have the same
 *    Input Dims: the projections of one input (Q, K and V).
 * A GEMM's auxiliary kernels (cuBLAS epilogues, split-K reductions,
 * Tensile's PostGSU) go with it.  What this misses or misreads: a layer
 * whose backward computes one gradient (frozen weights) shifts the
 * pairing of its run, and two chained linear layers of equal shapes with
 * nothing between them would be taken for projections of one input.
 *
 * PLACEMENT.  A group's i-th GEMM runs on stream i mod degree of its GPU
 * (0: the stream it was on; the others are new streams with that stream's
 * timing); each may start as soon as the group's first GEMM starts (it
 * then waits for whatever that one waits for), and the task after the
 * group waits for all of them (rv_transform_move_run).  The launch calls
 * stay where they were.
 *
 * SHARING.  rule=on turns the replay's sharing rule on: kernels that
 * overlap share the GPU's SMs by occupancy and its memory bandwidth and
 * compute throughput (contention.h).  What each kernel asks:
 *  - occupancy from its recorded launch (blocks, threads, registers,
 *    shared memory) against the catalogue's per-SM limits
 *    (rv_cost_occupancy_shares); tiles=tuned: GOLDYLOC's concurrency-aware
 *    GEMMs, whose tiles are chosen for the group, ask for no occupancy of
 *    their own, only bandwidth and compute;
 *  - bandwidth and compute from its bytes and FLOPs (the cost model, its
 *    shapes) at the GPU's memory bandwidth and the peak of its unit
 *    (measured maximum where published); a kernel without shapes streams
 *    for its time above the fixed cost at the trace's streaming efficiency
 *    (memory-bound classes), or computes for it at its class's efficiency
 *    (matmuls: rv_cost_model_matmul_efficiency);
 *  - a kernel of unknown class, or without a recorded launch, the whole
 *    GPU (it shares nothing: the conservative answer).
 * rule=off: the moved GEMMs overlap at full speed, as the replay has
 * kernels of different streams do without the rule: the upper bound.
 *
 * degree=1 with rule=off leaves the graph as it was.  The GPU figures are
 * those of the recorded GPU, so the plugin refuses to follow hardware.
 */
#include "reverie/contention.h"
#include "reverie/costmodel.h"
#include "reverie/error.h"
#include "reverie/plugin.h"
#include "reverie/transform.h"
#include <string.h>

static const rv_param_spec concurrent_params[] = {
    { "degree", RV_PARAM_INTEGER, "16", "GEMMs",
      "independent GEMMs of a group run at once, each on a stream (1: none moved; 16: the thesis's largest)", NULL },
    { "tiles", RV_PARAM_CHOICE, "recorded", NULL,
      "recorded: the GEMMs keep their launches (default concurrency); tuned: GOLDYLOC's concurrency-aware tiles, "
      "only bandwidth and compute shared", "recorded|tuned" },
    { "rule", RV_PARAM_CHOICE, "on", NULL,
      "on: kernels that overlap share the GPU (occupancy, bandwidth, compute); off: they overlap at full speed",
      "on|off" },
    { "source_gpu", RV_PARAM_STRING, "", NULL, "the trace's GPU when its deviceProperties name none the catalogue knows",
      NULL },
    { NULL }
};

#define MAX_DEGREE 64

/* ---- finding independent GEMMs ------------------------------------------- */

/* A GEMM and the auxiliary kernels that follow it: tasks first .. last,
 * consecutive on their stream. */
typedef struct {
    int32_t first, last;
    int kind;   /* unit_kind */
} unit;

/* Units that may run at once: consecutive on one stream, followed by
 * the task `after` there (-1: none). */
typedef struct {
    GArray *units;
    int32_t after;
    uint8_t phase;
} group;

static void group_clear(gpointer data)
{
    g_array_unref(((group *)data)->units);
}

/* A cuBLAS epilogue, a split-K reduction, Tensile's PostGSU: part of the GEMM before it. */
static gboolean is_auxiliary(const char *name)
{
    return strstr(name, "epilogue") || strstr(name, "splitKreduce") || strstr(name, "ReduceSplitK") ||
           strstr(name, "PostGSU") || strstr(name, "reduction::");
}

/* What a kernel is to the grouping: nothing, a GEMM, or one of a
 * convolution's two gradients. */
typedef enum { NOT_A_UNIT, UNIT_GEMM, UNIT_DATA_GRADIENT, UNIT_WEIGHT_GRADIENT } unit_kind;

/* The operators whose backward is a pair of independent GEMMs. */
static gboolean is_matmul_operator(const char *op)
{
    static const char *const names[] = { "mm", "bmm", "addmm", "baddbmm", "matmul", "linear", NULL };
    if (op == NULL) return FALSE;
    if (g_str_has_prefix(op, "aten::")) op += 6;
    for (int i = 0; names[i]; i++)
        if (strcmp(op, names[i]) == 0) return TRUE;
    return FALSE;
}

/* A convolution backward kernel's gradient, from its name (cuDNN's dgrad
 * and wgrad, MIOpen's bwd and wrw); NOT_A_UNIT when the name does not say
 * or names a step of a chain (Winograd's transforms). */
static unit_kind convolution_gradient(const char *name)
{
    if (strstr(name, "winograd")) return NOT_A_UNIT;
    if (strstr(name, "wgrad") || strstr(name, "Wgrad") || strstr(name, "_wrw_") || strstr(name, "bwd_filter") ||
        strstr(name, "BwdFilter") || strstr(name, "bwd_weight"))
        return UNIT_WEIGHT_GRADIENT;
    if (strstr(name, "dgrad") || strstr(name, "Dgrad") || strstr(name, "igemm_bwd") || strstr(name, "bwd_data") ||
        strstr(name, "BwdData"))
        return UNIT_DATA_GRADIENT;
    return NOT_A_UNIT;
}

/* What the grouping reads of a kernel's name and operator, worked out
 * once per distinct pair: the names are a few hundred, the kernels a
 * million, and classifying a name is a dozen substring searches. */
typedef struct {
    gboolean auxiliary;
    gboolean forward_gemm;  /* a GEMM (in forward, a unit when its operands are shaped) */
    unit_kind backward;     /* the unit it starts in backward */
} kernel_traits;

static kernel_traits traits_of_name(const char *name, const char *op, rv_task_kind kind)
{
    kernel_traits traits = { is_auxiliary(name), FALSE, NOT_A_UNIT };
    rv_cost_class cls = rv_cost_classify_name(name, op, kind);
    traits.forward_gemm = cls == RV_COST_GEMM;
    if (cls == RV_COST_CONV) traits.backward = convolution_gradient(name);
    else if ((cls == RV_COST_GEMM || cls == RV_COST_ATTENTION) && is_matmul_operator(op) &&
             !rv_cost_name_is_fused_attention(name))
        traits.backward = UNIT_GEMM;
    return traits;
}

/* Traits by (name, operator): a hash table, and in front of it the entry
 * each name id last found - a name mostly comes with one operator, and a
 * lookup per kernel and phase was a sixth of the apply. */
typedef struct {
    gint64 key;            /* name id << 32 | operator id */
    kernel_traits traits;
} traits_entry;

typedef struct {
    GHashTable *table;     /* &traits_entry.key -> traits_entry (owned) */
    GPtrArray *recent;     /* by name id: the traits_entry it last found, or NULL */
} traits_memo;

static void traits_memo_init(traits_memo *memo, const rv_graph *graph)
{
    memo->table = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, g_free);
    memo->recent = g_ptr_array_new();
    g_ptr_array_set_size(memo->recent, rv_strings_count(graph->strings));
}

static void traits_memo_clear(traits_memo *memo)
{
    g_hash_table_destroy(memo->table);
    g_ptr_array_unref(memo->recent);
}

/* The traits of a kernel task, from `memo`. */
static const kernel_traits *traits_of(traits_memo *memo, const rv_graph *graph, const rv_task *task)
{
    gint64 key = ((gint64)task->name << 32) | (guint32)MAX(task->op, 0);
    gboolean named = task->name >= 0 && (guint)task->name < memo->recent->len;
    traits_entry *entry = named ? g_ptr_array_index(memo->recent, task->name) : NULL;
    if (entry && entry->key == key) return &entry->traits;
    entry = g_hash_table_lookup(memo->table, &key);
    if (entry == NULL) {
        const char *op = task->op > 0 ? rv_strings_get(graph->strings, task->op) : NULL;
        entry = g_new(traits_entry, 1);
        entry->key = key;
        entry->traits = traits_of_name(rv_strings_get(graph->strings, task->name), op, (rv_task_kind)task->kind);
        g_hash_table_insert(memo->table, &entry->key, entry);
    }
    if (named) g_ptr_array_index(memo->recent, task->name) = entry;
    return &entry->traits;
}

/* Does the kernel start a unit in this phase: a GEMM of a matmul
 * operator or a convolution gradient in backward (not a fused attention
 * kernel, one kernel for all its gradients), a GEMM on shaped operands in
 * forward? */
static unit_kind unit_of(traits_memo *memo, const rv_graph *graph, const rv_task *task, rv_phase phase)
{
    if (task->kind != RV_TASK_KERNEL || task->phase != phase) return NOT_A_UNIT;
    const kernel_traits *traits = traits_of(memo, graph, task);
    if (traits->auxiliary) return NOT_A_UNIT;
    if (phase == RV_PHASE_FORWARD) return traits->forward_gemm && task->input_dims >= 0 ? UNIT_GEMM : NOT_A_UNIT;
    return traits->backward;
}

/* Do two forward GEMMs read the same input (the same operator and Input Dims)? */
static gboolean same_input(const rv_task *a, const rv_task *b)
{
    return a->op == b->op && a->input_dims == b->input_dims && a->step == b->step;
}

/* The live GPU tasks of each GPU stream, in their order there. */
static GPtrArray *stream_orders(const rv_graph *graph)
{
    GPtrArray *orders = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    for (guint r = 0; r < graph->resources->len; r++) g_ptr_array_add(orders, g_array_new(FALSE, FALSE, sizeof(int32_t)));
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        if (task->flags & RV_TASK_FLAG_REMOVED) continue;
        if (g_array_index(graph->resources, rv_resource, task->resource).kind != RV_RES_GPU_STREAM) continue;
        g_array_append_val(g_ptr_array_index(orders, task->resource), t);
    }
    for (guint r = 0; r < orders->len; r++) rv_tasks_sort_recorded(graph, g_ptr_array_index(orders, r));
    return orders;
}

/* The unit of one stream's order that starts at position *at (a GEMM and
 * its auxiliary kernels, each next to the one before on the stream), *at
 * moved past it; FALSE when the task at *at starts none. */
static gboolean next_unit(traits_memo *memo, const rv_graph *graph, const GArray *order, guint *at, rv_phase phase,
                          unit *found)
{
    int32_t t = g_array_index(order, int32_t, *at);
    found->kind = unit_of(memo, graph, &g_array_index(graph->tasks, rv_task, t), phase);
    if (found->kind == NOT_A_UNIT) return FALSE;
    found->first = found->last = t;
    for (*at += 1; *at < order->len; *at += 1) {
        int32_t next = g_array_index(order, int32_t, *at);
        const rv_task *task = &g_array_index(graph->tasks, rv_task, next);
        if (rv_graph_resource_next(graph, found->last) != next || task->kind != RV_TASK_KERNEL ||
            !traits_of(memo, graph, task)->auxiliary)
            break;
        found->last = next;
    }
    return TRUE;
}

/* Do units a and b (b right after a) belong to one group of `phase`? */
static gboolean joins(const rv_graph *graph, const group *g, const unit *b, rv_phase phase)
{
    const unit *a = &g_array_index(g->units, unit, g->units->len - 1);
    if (rv_graph_resource_next(graph, a->last) != b->first) return FALSE;
    const rv_task *x = &g_array_index(graph->tasks, rv_task, a->first), *y = &g_array_index(graph->tasks, rv_task, b->first);
    if (phase == RV_PHASE_FORWARD) return same_input(x, y);
    /* pairs: two GEMMs, or a convolution's two gradients */
    gboolean pair = a->kind == UNIT_GEMM ? b->kind == UNIT_GEMM : b->kind != UNIT_GEMM && b->kind != a->kind;
    return g->units->len < 2 && x->step == y->step && pair;
}

static void close_group(const rv_graph *graph, group *g, GArray *groups)
{
    if (g->units->len >= 2) {
        g->after = rv_graph_resource_next(graph, g_array_index(g->units, unit, g->units->len - 1).last);
        g_array_append_val(groups, *g);
    } else {
        g_array_unref(g->units);
    }
    g->units = NULL;
}

/* The groups of one phase on one stream's order. */
static void find_groups_on(traits_memo *memo, const rv_graph *graph, const GArray *order, rv_phase phase,
                           GArray *groups)
{
    group current = { NULL, -1, (uint8_t)phase };
    for (guint at = 0; at < order->len;) {
        unit u;
        if (!next_unit(memo, graph, order, &at, phase, &u)) {
            if (current.units) close_group(graph, &current, groups);
            at++;
            continue;
        }
        if (current.units && !joins(graph, &current, &u, phase)) close_group(graph, &current, groups);
        if (current.units == NULL) current.units = g_array_new(FALSE, FALSE, sizeof(unit));
        g_array_append_val(current.units, u);
    }
    if (current.units) close_group(graph, &current, groups);
}

static GArray *find_groups(const rv_graph *graph)
{
    GArray *groups = g_array_new(FALSE, FALSE, sizeof(group));
    g_array_set_clear_func(groups, group_clear);
    GPtrArray *orders = stream_orders(graph);
    traits_memo memo;
    traits_memo_init(&memo, graph);
    for (guint r = 0; r < orders->len; r++) {
        find_groups_on(&memo, graph, g_ptr_array_index(orders, r), RV_PHASE_FORWARD, groups);
        find_groups_on(&memo, graph, g_ptr_array_index(orders, r), RV_PHASE_BACKWARD, groups);
    }
    traits_memo_clear(&memo);
    g_ptr_array_unref(orders);
    return groups;
}

/* ---- running them concurrently ---------------------------------------------- */

/* The stream of slot k (1..degree-1) beside the stream of task `like`:
 * made once per stream and slot; *tail is its last task so far. */
typedef struct {
    int32_t stream, tail;
} extra_stream;

static extra_stream *extra_for(rv_graph *graph, GHashTable *extras, int32_t like, int slot)
{
    int32_t resource = rv_graph_task(graph, like)->resource;
    gpointer key = GINT_TO_POINTER(resource * MAX_DEGREE + slot + 1);
    extra_stream *extra = g_hash_table_lookup(extras, key);
    if (extra) return extra;
    const rv_resource *res = &g_array_index(graph->resources, rv_resource, resource);
    char *name = g_strdup_printf("stream %" G_GINT64_FORMAT " concurrent %d", res->thread, slot);
    extra = g_new(extra_stream, 1);
    extra->stream = rv_transform_add_comm_stream(graph, like, name);
    extra->tail = -1;
    g_free(name);
    g_hash_table_insert(extras, key, extra);
    return extra;
}

/* Move every group's units past the first onto their slots' streams. */
static gboolean place_groups(rv_graph *graph, const GArray *groups, int degree, guint *moved, guint *streams,
                             GError **error)
{
    GHashTable *extras = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    gboolean ok = TRUE;
    for (guint g = 0; g < groups->len && ok; g++) {
        const group *each = &g_array_index(groups, group, g);
        for (guint i = 0; i < each->units->len && ok; i++) {
            int slot = (int)(i % (guint)degree);
            if (slot == 0) continue;
            const unit *u = &g_array_index(each->units, unit, i);
            extra_stream *extra = extra_for(graph, extras, u->first, slot);
            int32_t first = g_array_index(each->units, unit, 0).first;
            ok = rv_transform_move_run(graph, u->first, u->last, extra->stream, extra->tail, first, each->after, error);
            extra->tail = u->last;
            *moved += ok;
        }
    }
    *streams = g_hash_table_size(extras);
    g_hash_table_destroy(extras);
    return ok;
}

/* ---- what each kernel asks of its GPU ------------------------------------------ */

typedef struct {
    const rv_gpu *gpu;
    const rv_cost_model *model;
    gboolean tuned;
    GHashTable *grouped;   /* task + 1 of the grouped GEMMs' kernels */
    guint whole, launched;
    GHashTable *shares;    /* rv_launch -> occupancy_memo: see occupancy_of */
} demand_context;

/* A launch's occupancy shares on the context's GPU, or none (ok FALSE). */
typedef struct {
    rv_launch launch;
    gboolean ok;
    double shares[RV_SHARE_OCCUPANCY_COUNT];
} occupancy_memo;

static guint launch_hash(gconstpointer key)
{
    const rv_launch *l = key;
    return ((l->blocks * 31u + l->threads) * 31u + l->registers) * 31u + l->shared_bytes;
}

static gboolean launch_equal(gconstpointer a, gconstpointer b)
{
    const rv_launch *x = a, *y = b;
    return x->blocks == y->blocks && x->threads == y->threads && x->registers == y->registers &&
           x->shared_bytes == y->shared_bytes;
}

/* The shares depend on the GPU and the launch alone, and a model repeats a
 * few launch shapes over every step: worked out once per distinct launch
 * (the same function on the same inputs, so the same doubles). */
static const occupancy_memo *occupancy_of(demand_context *ctx, const rv_launch *launch)
{
    occupancy_memo *memo = g_hash_table_lookup(ctx->shares, launch);
    if (memo == NULL) {
        memo = g_new0(occupancy_memo, 1);
        memo->launch = *launch;
        memo->ok = rv_cost_occupancy_shares(ctx->gpu, launch, memo->shares);
        g_hash_table_insert(ctx->shares, &memo->launch, memo);
    }
    return memo;
}

static double unit_peak(const rv_gpu *gpu, const rv_kernel_cost *cost)
{
    return cost->unit == RV_UNIT_MATRIX ? rv_gpu_matrix_peak(gpu, (rv_dtype)cost->dtype, TRUE)
                                        : rv_gpu_vector_peak(gpu, (rv_dtype)cost->dtype);
}

/* Bandwidth and compute (contention.h's bandwidth_ns and compute_ns). */
static void throughput_demand(const demand_context *ctx, const rv_kernel_cost *cost, int64_t duration,
                              rv_kernel_demand *demand)
{
    double peak = unit_peak(ctx->gpu, cost);
    if (cost->shaped) {
        demand->bandwidth_ns = (float)(cost->bytes / ctx->gpu->memory_Bps * 1e9);
        demand->compute_ns = peak > 0 ? (float)(cost->flops / peak * 1e9) : 0;
        return;
    }
    double variable = (double)MAX(0, duration - rv_cost_model_fixed_ns(ctx->model));
    if (rv_cost_class_is_matmul((rv_cost_class)cost->cls))
        demand->compute_ns = (float)(variable * rv_cost_model_matmul_efficiency(ctx->model, (rv_cost_class)cost->cls,
                                                                                (rv_unit)cost->unit, (rv_dtype)cost->dtype));
    else
        demand->bandwidth_ns = (float)(variable * rv_cost_model_streaming_efficiency(ctx->model));
}

static rv_kernel_demand demand_of(demand_context *ctx, const rv_graph *graph, int32_t t)
{
    const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
    const rv_kernel_cost *cost = rv_cost_model_kernel(ctx->model, t);
    const rv_launch *launch = rv_task_launch(graph, t);
    const occupancy_memo *occupancy = cost == NULL || cost->cls == RV_COST_UNKNOWN || launch == NULL
                                          ? NULL : occupancy_of(ctx, launch);
    if (occupancy == NULL || !occupancy->ok) {
        ctx->whole++;
        return rv_kernel_demand_whole(task->duration_ns);
    }
    ctx->launched++;
    rv_kernel_demand demand = { { 0, 0, 0, 0 }, 0, 0 };
    gboolean tuned = ctx->tuned && g_hash_table_contains(ctx->grouped, GINT_TO_POINTER(t + 1));
    for (int r = 0; r < RV_SHARE_OCCUPANCY_COUNT; r++) demand.occupancy[r] = tuned ? 0 : (float)occupancy->shares[r];
    throughput_demand(ctx, cost, task->duration_ns, &demand);
    return demand;
}

/* Every compute kernel's demand, into graph->kernel_demands. */
static void record_demands(rv_graph *graph, demand_context *ctx)
{
    g_array_set_size(graph->kernel_demands, (guint)rv_graph_task_count(graph));
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_task *task = rv_graph_task(graph, t);
        rv_kernel_demand *slot = &g_array_index(graph->kernel_demands, rv_kernel_demand, t);
        *slot = rv_kernel_demand_whole(task->duration_ns);
        if (task->kind == RV_TASK_KERNEL && (task->flags & RV_TASK_FLAG_GPU) && !(task->flags & RV_TASK_FLAG_REMOVED))
            *slot = demand_of(ctx, graph, t);
    }
}

static GHashTable *grouped_tasks(const rv_graph *graph, const GArray *groups)
{
    GHashTable *set = g_hash_table_new(g_direct_hash, g_direct_equal);
    for (guint g = 0; g < groups->len; g++) {
        const GArray *units = g_array_index(groups, group, g).units;
        for (guint i = 0; i < units->len; i++)
            for (int32_t t = g_array_index(units, unit, i).first; t >= 0; t = rv_graph_resource_next(graph, t)) {
                g_hash_table_add(set, GINT_TO_POINTER(t + 1));
                if (t == g_array_index(units, unit, i).last) break;
            }
    }
    return set;
}

/* Recorded compute kernels that overlapped a compute kernel of another
 * stream of their GPU (recorded times, for the note only): their durations
 * already hold that sharing.  Kernels in recorded order; the latest end
 * seen per GPU and stream is enough to tell. */
static guint recorded_overlaps(const rv_graph *graph, gboolean *several_streams)
{
    GArray *kernels = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        if (task->kind == RV_TASK_KERNEL && (task->flags & RV_TASK_FLAG_GPU) && !(task->flags & RV_TASK_FLAG_REMOVED))
            g_array_append_val(kernels, t);
    }
    rv_tasks_sort_recorded(graph, kernels);
    GHashTable *busy = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free); /* gpu -> {stream, end} */
    guint overlaps = 0;
    *several_streams = FALSE;
    for (guint i = 0; i < kernels->len; i++) {
        const rv_task *task = rv_graph_task((rv_graph *)graph, g_array_index(kernels, int32_t, i));
        const rv_resource *res = &g_array_index(graph->resources, rv_resource, task->resource);
        int64_t gpu = ((int64_t)(res->rank_index + 1) << 40) ^ res->process;
        int64_t *last = g_hash_table_lookup(busy, &gpu);  /* [0]: stream of the latest end, [1]: that end */
        if (last == NULL) {
            last = g_new0(int64_t, 2);
            last[0] = task->resource;
            g_hash_table_insert(busy, g_memdup2(&gpu, sizeof gpu), last);
        }
        if (last[0] != task->resource) *several_streams = TRUE;
        if (last[0] != task->resource && task->recorded_start_ns < last[1]) overlaps++;
        if (task->recorded_start_ns + task->duration_ns >= last[1]) {
            last[0] = task->resource;
            last[1] = task->recorded_start_ns + task->duration_ns;
        }
    }
    g_hash_table_destroy(busy);
    g_array_unref(kernels);
    return overlaps;
}

/* ---- apply ------------------------------------------------------------------------ */

static gboolean after_hardware(const rv_graph *graph)
{
    for (guint i = 0; i < graph->applied->len; i++)
        if (strcmp(rv_strings_get(graph->strings, g_array_index(graph->applied, rv_applied_plugin, i).name), "hardware") == 0)
            return TRUE;
    return FALSE;
}

static gboolean turn_rule_on(rv_graph *graph, const rv_params *params, const GArray *groups, int degree,
                             GString *notes, GError **error)
{
    if (after_hardware(graph)) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "the sharing rule reads each kernel's launch on the GPU it runs on, "
                    "which hardware does not record: run it on a trace of that GPU, or give rule=off");
        return FALSE;
    }
    gboolean several = FALSE;
    guint overlaps = recorded_overlaps(graph, &several);
    if (degree == 1 && !several) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "every GPU runs its compute kernels on one stream: nothing shares "
                    "a GPU (give degree= above 1 to run independent GEMMs concurrently)");
        return FALSE;
    }
    rv_gpu_catalogue *catalogue = rv_gpu_catalogue_load_default(error);
    if (catalogue == NULL) return FALSE;
    const rv_gpu *gpu = rv_gpu_of_graph(catalogue, graph, rv_params_string(params, "source_gpu"), "source_gpu", error);
    if (gpu == NULL) {
        rv_gpu_catalogue_free(catalogue);
        return FALSE;
    }
    rv_cost_model *model = rv_cost_model_new(graph, gpu, TRUE);
    demand_context ctx = { gpu, model, strcmp(rv_params_string(params, "tiles"), "tuned") == 0,
                           grouped_tasks(graph, groups), 0, 0,
                           g_hash_table_new_full(launch_hash, launch_equal, NULL, g_free) };
    record_demands(graph, &ctx);
    g_hash_table_destroy(ctx.shares);
    graph->sharing.enabled = TRUE;
    g_string_append_printf(notes, "    sharing rule on %s: %u kernels share by their launches (occupancy) and by bandwidth "
                           "and compute; %u without a launch or class take the whole GPU%s\n", gpu->id, ctx.launched,
                           ctx.whole, ctx.tuned ? "; grouped GEMMs have tuned tiles (no occupancy of their own)" : "");
    if (overlaps)
        g_string_append_printf(notes, "    %u recorded kernels overlapped compute on another stream: their durations "
                               "already hold that sharing, which the rule counts again\n", overlaps);
    g_hash_table_destroy(ctx.grouped);
    rv_cost_model_free(model);
    rv_gpu_catalogue_free(catalogue);
    return TRUE;
}

static void describe_groups(const GArray *groups, guint moved, guint streams, int degree, GString *notes)
{
    guint sizes[2] = { 0, 0 }, counts[2] = { 0, 0 }, largest = 0;
    for (guint g = 0; g < groups->len; g++) {
        const group *each = &g_array_index(groups, group, g);
        int k = each->phase == RV_PHASE_BACKWARD;
        counts[k]++;
        sizes[k] += each->units->len;
        largest = MAX(largest, each->units->len);
    }
    g_string_append_printf(notes, "    independent GEMMs: %u forward groups (%u GEMMs on one input), %u backward pairs "
                           "(%u GEMMs); largest group %u\n", counts[0], sizes[0], counts[1], sizes[1], largest);
    g_string_append_printf(notes, "    degree %d: %u GEMMs moved onto %u stream%s beside their own\n", degree, moved, streams,
                           streams == 1 ? "" : "s");
}

static gboolean concurrent_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    int64_t degree = rv_params_integer(params, "degree");
    if (degree < 1 || degree > MAX_DEGREE) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "degree must be 1 to %d (GEMMs at once), got %" G_GINT64_FORMAT,
                    MAX_DEGREE, degree);
        return FALSE;
    }
    gboolean rule = strcmp(rv_params_string(params, "rule"), "on") == 0;
    if (degree == 1 && !rule) {
        g_string_append(output->notes, "    degree=1, rule=off: nothing runs concurrently, graph unchanged\n");
        return TRUE;
    }
    GArray *groups = degree > 1 ? find_groups(graph) : g_array_new(FALSE, FALSE, sizeof(group));
    gboolean ok = degree == 1 || groups->len > 0;
    if (!ok)
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "no independent GEMMs: no two consecutive matmul kernels in a "
                    "backward pass, nor consecutive GEMMs on one input in a forward pass (Input Dims: record_shapes=True)");
    guint moved = 0, streams = 0;
    if (ok && rule) ok = turn_rule_on(graph, params, groups, (int)degree, output->notes, error);
    if (ok && groups->len) {
        ok = place_groups(graph, groups, (int)degree, &moved, &streams, error);
        if (ok) describe_groups(groups, moved, streams, (int)degree, output->notes);
    }
    g_array_unref(groups);
    return ok;
}

/* The composition law (compose.h): GEMMs of the forward and backward moved onto streams of their own; the sharing
 * rule reads every kernel's duration and the device; placed after what re-prices kernels (the device, the
 * parallel split) and before a last adjustment. */
static const rv_plugin_effects concurrent_effects = {
    .reads = RV_ASPECT_GPU_WORK | RV_ASPECT_DEVICE,
    .reads_time = RV_ASPECT_GPU_WORK,
    .scales = 0,
    .reprices = 0,
    .rewrites = RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD,
    .order = RV_ORDER(RV_STAGE_CLUSTER, 35),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "concurrent-kernels",
    "GOLDYLOC: independent GEMMs on streams of their own, sharing the GPU by occupancy, bandwidth and compute (a rule of the replay)",
    concurrent_params, concurrent_apply, &concurrent_effects,
};
