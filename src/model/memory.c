/*
 * memory.c - the memory model of memory.h: the recorded peak from the
 * graph's memory records, and the estimate from shapes, walked over the
 * weighted layers of a step (and moved by inserted offload copies, by what
 * plugins said they did to tensors, and by the recomputation a recording
 * of a checkpointed job shows in its backward).
 */
#include "reverie/memory.h"
#include "reverie/checked.h"
#include "reverie/compose.h"
#include "reverie/costmodel.h"
#include "reverie/error.h"
#include "reverie/gpus.h"
#include "reverie/shapes.h"
#include "reverie/transform.h"
#include "../graph/index.h"
#include <math.h>
#include <stddef.h>
#include <string.h>

/* Sizes are advisory (shapes.h): a product past int64 saturates. */
static int64_t saturating_mul(int64_t a, int64_t b)
{
    int64_t out;
    return rv_checked_mul(a, b, &out) ? out : G_MAXINT64;
}

static const char *const category_names[RV_MEM_CATEGORY_COUNT] = {
    "weights", "gradients", "optimizer_state", "activations", "workspace",
};

const char *rv_memory_category_name(rv_memory_category category)
{
    return category < RV_MEM_CATEGORY_COUNT ? category_names[category] : "?";
}

gboolean rv_memory_recorded_peak(const rv_graph *graph, int64_t *allocated, int64_t *reserved, int32_t *device,
                                 int32_t *rank_index)
{
    const rv_memory_record *best = NULL;
    for (guint i = 0; i < graph->memory->len; i++) {
        const rv_memory_record *record = &g_array_index(graph->memory, rv_memory_record, i);
        if (record->peak_allocated >= 0 && (best == NULL || record->peak_allocated > best->peak_allocated))
            best = record;
    }
    if (best == NULL) return FALSE;
    int64_t most_reserved = -1;
    for (guint i = 0; i < graph->memory->len; i++) {
        const rv_memory_record *record = &g_array_index(graph->memory, rv_memory_record, i);
        if (record->device == best->device && record->rank_index == best->rank_index)
            most_reserved = MAX(most_reserved, record->peak_reserved);
    }
    *allocated = best->peak_allocated;
    *reserved = most_reserved;
    *device = best->device;
    *rank_index = best->rank_index;
    return TRUE;
}

/* ---- one operator call's tensors --------------------------------------- */

typedef struct {
    int64_t params;     /* parameter bytes among its inputs */
    int64_t inputs;     /* the other tensor inputs' bytes */
    int64_t largest;    /* the largest of those */
    int64_t output;     /* its output's bytes (0 if the shapes do not say) */
    int32_t task;       /* its first launch call */
    uint8_t phase;
    gboolean saves;     /* autograd keeps its inputs for backward */
    gboolean saves_output; /* ...or rather its output (ReLU, sigmoid, tanh, softmax) */
    gboolean in_place;  /* writes into an input (name ends in _): makes no tensor */
    double kept_factor; /* what it keeps for backward is stored at this fraction (KEPT_SCALE) */
    int32_t segment;    /* RECOMPUTED: its checkpoint segment; -1: kept through backward */
    int32_t stage;      /* STAGE: its pipeline stage; -1: none */
    gboolean marked;    /* a plugin's effect on one of its launch calls applies */
    gboolean conv;      /* a convolution */
    gboolean conv_unstrided; /* ...whose output was taken at stride 1 (no recorded arguments, Input Dims carry no stride) */
    gboolean fusion;    /* a Triton kernel of a compiled graph: keeps one tensor (walk_forward) */
} op_call;

/* ---- what plugins did (memory.h's effects) ------------------------------- */

void rv_memory_effect_add(rv_graph *graph, int32_t call, rv_memory_effect_kind kind, double factor, int32_t segment)
{
    rv_memory_effect effect = { call < 0 ? -1 : call, (uint8_t)kind, MAX(segment, 0), factor };
    if (kind >= RV_MEM_EFFECT_KIND_COUNT) return;
    gboolean scale = kind != RV_MEM_EFFECT_RECOMPUTED && kind != RV_MEM_EFFECT_STAGE && kind != RV_MEM_EFFECT_MOVED &&
                     kind != RV_MEM_EFFECT_OFFLOAD && kind != RV_MEM_EFFECT_RESIDENT;
    if (kind == RV_MEM_EFFECT_SHARD && (call >= 0 || !(factor <= 1))) return; /* the whole model's states only */
    if (kind == RV_MEM_EFFECT_OFFLOAD && call >= 0) return;
    if (kind == RV_MEM_EFFECT_RESIDENT && (call >= 0 || !(factor <= (double)RV_MAX_BYTES))) return; /* bytes of the step */
    if (scale && !(isfinite(factor) && factor >= 0)) return;
    g_array_append_val(graph->memory_effects, effect);
}

/* Each call once, in the order of the tasks' first launches: the calls
 * already marked are told by the edge index's per-task marks (a store and
 * a compare each), not a hash table - plugins mark every kernel of a
 * phase, hundreds of thousands at a million tasks. */
guint rv_memory_effect_add_for_tasks(rv_graph *graph, const GArray *gpu_tasks, rv_memory_effect_kind kind,
                                     double factor, int32_t segment)
{
    rv_task_marks *seen = &rv_graph_index_get(graph)->calls_seen;
    rv_task_marks_begin(seen, rv_graph_task_count(graph));
    guint marked = 0;
    for (guint i = 0; i < gpu_tasks->len; i++) {
        int32_t call = rv_graph_launch_of(graph, g_array_index(gpu_tasks, int32_t, i));
        if (call < 0 || rv_task_marks_has(seen, call)) continue;
        rv_task_marks_set(seen, call, 0);
        rv_memory_effect_add(graph, call, kind, factor, segment);
        marked++;
    }
    return marked;
}

/* The effects on one call, folded. */
typedef struct {
    double kept, activations, params;
    int32_t segment;  /* -1: not recomputed */
    int32_t stage;    /* -1: no pipeline stage */
    gboolean moved;   /* removed, its work fused into another kernel */
} call_effects;

static const call_effects no_effects = { 1.0, 1.0, 1.0, -1, -1, FALSE };

static void fold_effect(call_effects *into, const rv_memory_effect *effect)
{
    switch ((rv_memory_effect_kind)effect->kind) {
    case RV_MEM_EFFECT_KEPT_SCALE: into->kept *= effect->factor; break;
    case RV_MEM_EFFECT_RECOMPUTED: into->segment = effect->segment; break;
    case RV_MEM_EFFECT_ACTIVATION_SCALE: into->activations *= effect->factor; break;
    case RV_MEM_EFFECT_PARAM_SCALE: into->params *= effect->factor; break;
    case RV_MEM_EFFECT_STAGE: into->stage = effect->segment; break;
    case RV_MEM_EFFECT_MOVED: into->moved = TRUE; break;
    default: break;
    }
}

/* Call id + 1 -> call_effects; key 0 (NULL) holds the effects on every call. */
static GHashTable *effects_by_call(const rv_graph *graph)
{
    GHashTable *by_call = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    for (guint i = 0; i < graph->memory_effects->len; i++) {
        const rv_memory_effect *effect = &g_array_index(graph->memory_effects, rv_memory_effect, i);
        gpointer key = GINT_TO_POINTER(effect->call + 1);
        call_effects *folded = g_hash_table_lookup(by_call, key);
        if (folded == NULL) {
            folded = g_memdup2(&no_effects, sizeof no_effects);
            g_hash_table_insert(by_call, key, folded);
        }
        fold_effect(folded, effect);
    }
    return by_call;
}

static int64_t scaled_bytes(int64_t bytes, double factor)
{
    if (factor == 1.0) return bytes;
    double scaled = (double)bytes * factor;
    return scaled >= (double)G_MAXINT64 ? G_MAXINT64 : (int64_t)(scaled + 0.5);
}

/* The effects on the call's tensors: those on every call, and those a
 * plugin put on launch call `marked` (the call's first launch, or a later
 * launch of the same operator call where the first has none: an operator
 * launches a copy before its GEMM, and a plugin marks the GEMM's call). */
static void apply_effects(GHashTable *effects, op_call *call, int32_t marked)
{
    const call_effects *all = g_hash_table_lookup(effects, NULL);
    const call_effects *mine = g_hash_table_lookup(effects, GINT_TO_POINTER(marked + 1));
    call_effects folded = all ? *all : no_effects;
    if (mine) {
        folded.kept *= mine->kept;
        folded.activations *= mine->activations;
        folded.params *= mine->params;
        if (mine->segment >= 0) folded.segment = mine->segment;
        if (mine->stage >= 0) folded.stage = mine->stage;
    }
    call->params = scaled_bytes(call->params, folded.params);
    call->inputs = scaled_bytes(call->inputs, folded.activations);
    call->largest = scaled_bytes(call->largest, folded.activations);
    call->output = scaled_bytes(call->output, folded.activations);
    call->kept_factor = folded.kept;
    call->segment = folded.segment;
    call->stage = folded.stage;
    call->marked = mine != NULL;
}

/* What of the model's states each rank holds (SHARD effects, multiplied),
 * and which of them are off the GPU (OFFLOAD, RV_SHARD_* bits). */
typedef struct {
    double weights, grads, state;
    int offloaded;      /* RV_SHARD_* bits held off the GPU (OFFLOAD) */
    int64_t resident;   /* RESIDENT bytes, summed */
} model_shard;

static model_shard shard_of(const rv_graph *graph)
{
    model_shard shard = { 1.0, 1.0, 1.0, 0, 0 };
    for (guint i = 0; i < graph->memory_effects->len; i++) {
        const rv_memory_effect *effect = &g_array_index(graph->memory_effects, rv_memory_effect, i);
        if (effect->kind == RV_MEM_EFFECT_OFFLOAD) shard.offloaded |= effect->segment;
        if (effect->kind == RV_MEM_EFFECT_RESIDENT) shard.resident = rv_saturating_add(shard.resident, (int64_t)effect->factor);
        if (effect->kind != RV_MEM_EFFECT_SHARD) continue;
        if (effect->segment & RV_SHARD_WEIGHTS) shard.weights *= effect->factor;
        if (effect->segment & RV_SHARD_GRADIENTS) shard.grads *= effect->factor;
        if (effect->segment & RV_SHARD_OPTIMIZER_STATE) shard.state *= effect->factor;
    }
    return shard;
}

/* The share of a state the GPU holds: its shard, or none when offloaded. */
static double held(const model_shard *shard, int state, double share)
{
    return shard->offloaded & state ? 0.0 : share;
}

/* Was a removed call's work moved (to a pipeline stage, into a fused
 * kernel) rather than dropped? */
static gboolean work_moved(GHashTable *effects, int32_t call)
{
    const call_effects *mine = g_hash_table_lookup(effects, GINT_TO_POINTER(call + 1));
    return mine != NULL && (mine->stage >= 0 || mine->moved);
}

static int64_t extent(const rv_shapes *s, guint input, guint dim) { return rv_shapes_extent(s, input, dim); }
static guint rank_of(const rv_shapes *s, guint input) { return rv_shapes_rank(s, input); }

/* linear(x[..., K], W[N, K], b[N]) */
static gboolean is_linear_form(const rv_shapes *s)
{
    guint xr = rank_of(s, 0);
    return rv_shapes_count(s) >= 2 && xr >= 2 && rank_of(s, 1) == 2 && extent(s, 1, 1) == extent(s, 0, xr - 1) &&
           (rv_shapes_count(s) < 3 || rank_of(s, 2) <= 1);
}

/* addmm(b[N], A[M, K], B[K, N]) */
static gboolean is_addmm_form(const rv_shapes *s)
{
    return rv_shapes_count(s) >= 3 && rank_of(s, 0) >= 1 && rank_of(s, 0) <= 2 && rank_of(s, 1) == 2 &&
           rank_of(s, 2) == 2 && extent(s, 1, 1) == extent(s, 2, 0);
}

/* conv(x[N, C, spatial...], W[O, C/groups, kernel...], b[O]) */
static gboolean is_conv_form(const rv_shapes *s)
{
    guint xr = rank_of(s, 0);
    return rv_shapes_count(s) >= 2 && xr >= 3 && rank_of(s, 1) == xr && extent(s, 1, 1) > 0 &&
           extent(s, 0, 1) % extent(s, 1, 1) == 0;
}

/* matmul's broadcast: A[..., M, K] x B[..., K, N] -> [..., M, N]. */
static int64_t matmul_output(const rv_shapes *s, guint a, guint b)
{
    guint ar = rank_of(s, a), br = rank_of(s, b);
    if (ar < 1 || br < 1) return 0;
    int64_t n = br >= 2 ? extent(s, b, br - 1) : 1;
    int64_t elements = n;
    if (ar >= 2) elements = saturating_mul(elements, extent(s, a, ar - 2));
    guint batch_a = ar > 2 ? ar - 2 : 0, batch_b = br > 2 ? br - 2 : 0;
    guint batch = MAX(batch_a, batch_b);
    for (guint d = 0; d < batch; d++) {
        int64_t ea = d + batch_a >= batch ? extent(s, a, d + batch_a - batch) : 1;
        int64_t eb = d + batch_b >= batch ? extent(s, b, d + batch_b - batch) : 1;
        elements = saturating_mul(elements, MAX(ea, eb));
    }
    return elements;
}

/* With the recorded geometry, PyTorch's output size (a transposed weight
 * is [C, O/groups, kernel...]).  Without it, stride 1 keeps the spatial
 * size, and a patch embedding (kernel = stride, at least 4, dividing the
 * input) divides it. */
static int64_t conv_output(const rv_shapes *s, const rv_conv_geometry *geometry)
{
    guint xr = rank_of(s, 0);
    if (geometry != NULL && geometry->spatial != xr - 2) geometry = NULL; /* arguments of another form */
    int64_t channels = extent(s, 1, 0);
    if (geometry != NULL && geometry->transposed) channels = saturating_mul(extent(s, 1, 1), geometry->groups);
    int64_t elements = saturating_mul(extent(s, 0, 0), channels);
    for (guint d = 2; d < xr; d++) {
        int64_t size = extent(s, 0, d), kernel = extent(s, 1, d);
        gboolean patch = kernel >= 4 && size % kernel == 0;
        int64_t out = geometry != NULL ? rv_conv_output_extent(geometry, d - 2, size, kernel)
                                       : (patch ? size / kernel : size);
        elements = saturating_mul(elements, out);
    }
    return elements;
}

static gboolean name_has(const char *name, const char *part) { return name != NULL && strstr(name, part) != NULL; }

static gboolean is_weighted_name(const char *name)
{
    return name_has(name, "conv") || name_has(name, "addmm") || name_has(name, "linear");
}

static gboolean is_norm(const char *op) { return name_has(op, "_norm") || name_has(op, "norm_"); }

static int64_t largest_input(const rv_shapes *s)
{
    int64_t largest = 0;
    for (guint i = 0; i < rv_shapes_count(s); i++) largest = MAX(largest, rv_shapes_elements(s, i));
    return largest;
}

int64_t rv_memory_output_elements(const char *op, const char *input_dims, const char *op_args)
{
    rv_shapes s;
    if (op == NULL || input_dims == NULL || !rv_shapes_parse(input_dims, &s)) return 0;
    rv_conv_geometry geometry;
    rv_pool_geometry pool;
    gboolean known = rv_conv_geometry_parse(op_args, &geometry);
    int64_t out = 0;
    if (g_str_has_suffix(op, "_") && !name_has(op, "__")) out = 0; /* in place: no new tensor */
    else if (name_has(op, "loss")) out = 1; /* reduction='mean', the default: a scalar */
    else if (rv_pool_geometry_parse(op_args, &pool) && rv_pool_output_elements(&s, &pool) > 0)
        out = rv_pool_output_elements(&s, &pool);
    else if (is_weighted_name(op) && is_conv_form(&s)) out = conv_output(&s, known ? &geometry : NULL);
    else if (is_addmm_form(&s) && (is_weighted_name(op) || name_has(op, "baddbmm"))) out = matmul_output(&s, 1, 2);
    else if (is_linear_form(&s) && is_weighted_name(op))
        out = rv_shapes_elements(&s, 0) / MAX(extent(&s, 0, rank_of(&s, 0) - 1), 1) * extent(&s, 1, 0);
    else if ((name_has(op, "matmul") || name_has(op, "bmm") || g_str_has_suffix(op, "::mm")) && rv_shapes_count(&s) >= 2)
        out = matmul_output(&s, 0, 1);
    else out = largest_input(&s);
    rv_shapes_clear(&s);
    return out;
}

/* Which inputs are parameters, by the shapes' form and the names. */
/* A weighted operator's Input Dims may be its outer operator's (linear's
 * dims under an addmm tag when an nn.Module names the layer): the form of
 * the shapes decides. */
static gboolean input_is_param(const rv_shapes *s, const char *name, guint input)
{
    if (is_weighted_name(name) && is_conv_form(s)) return input == 1 || input == 2;
    if (is_weighted_name(name) && is_addmm_form(s) && !name_has(name, "baddbmm")) return input == 0 || input == 2;
    if (is_weighted_name(name) && is_linear_form(s)) return input == 1 || input == 2;
    if (name_has(name, "embedding")) return input == 0;
    if (is_norm(name)) return input > 0 && rank_of(s, input) == 1;
    return FALSE;
}

/* Operators whose backward reads none of their inputs (or that have no
 * backward of their own): autograd keeps nothing for them. */
/* Operators whose backward reads their result, not their input
 * (ReluBackward0, SigmoidBackward0, TanhBackward0, SoftmaxBackward0 save
 * `result`): the input is not kept on their account. */
static gboolean saves_result(const char *op)
{
    static const char *const result_savers[] = {
        "aten::relu", "aten::relu_", "aten::sigmoid", "aten::sigmoid_", "aten::tanh", "aten::tanh_",
        "aten::softmax", "aten::_softmax", "aten::exp", "aten::exp_",
        /* relu on CUDA runs clamp_min: the innermost name, all the graph
         * keeps when an nn.Module names the layer (a clamp_min of its own
         * saves its input, of the same size) */
        "aten::clamp_min", "aten::clamp_min_",
    };
    for (gsize i = 0; i < G_N_ELEMENTS(result_savers); i++)
        if (strcmp(op, result_savers[i]) == 0) return TRUE;
    return FALSE;
}

static gboolean saves_inputs(const char *op)
{
    static const char *const keep_nothing[] = {
        "aten::add", "aten::add_", "aten::sub", "aten::sub_", "aten::rsub", "aten::copy_", "aten::clone",
        "aten::fill_", "aten::zero_", "aten::to", "aten::_to_copy", "aten::contiguous", "aten::cat", "aten::stack",
        "aten::zeros", "aten::ones", "aten::empty", "aten::zeros_like", "aten::ones_like", "aten::empty_like",
    };
    for (gsize i = 0; i < G_N_ELEMENTS(keep_nothing); i++)
        if (strcmp(op, keep_nothing[i]) == 0) return FALSE;
    return TRUE;
}

/* The name that says what the Input Dims are: the dims belong to the
 * outermost operator, which is the layer tag where no nn.Module is known;
 * otherwise the innermost operator is the best guess. */
static const char *dims_owner(const rv_graph *graph, const rv_task *task)
{
    const char *layer = task->layer > 0 ? rv_strings_get(graph->strings, task->layer) : "";
    if (g_str_has_prefix(layer, "aten::") || g_str_has_prefix(layer, "torch")) return layer;
    return task->op > 0 ? rv_strings_get(graph->strings, task->op) : layer;
}

static void measure_call(const rv_graph *graph, int32_t id, int element_bytes, op_call *call)
{
    const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
    const char *owner = dims_owner(graph, task);
    const char *inner = task->op > 0 ? rv_strings_get(graph->strings, task->op) : owner;
    const char *dims = rv_strings_get(graph->strings, task->input_dims);
    int32_t op_args = rv_task_op_args(graph, id);
    const char *args = op_args > 0 ? rv_strings_get(graph->strings, op_args) : NULL;
    rv_conv_geometry geometry;
    rv_shapes s;
    if (!rv_shapes_parse(dims, &s)) return;
    for (guint i = 0; i < rv_shapes_count(&s); i++) {
        int64_t bytes = saturating_mul(rv_shapes_elements(&s, i), element_bytes);
        if (input_is_param(&s, owner, i) || (owner != inner && input_is_param(&s, inner, i))) {
            call->params = rv_saturating_add(call->params, bytes);
        } else {
            call->inputs = rv_saturating_add(call->inputs, bytes);
            call->largest = MAX(call->largest, bytes);
        }
    }
    call->conv = is_weighted_name(owner) && is_conv_form(&s);
    call->conv_unstrided = call->conv && !rv_conv_geometry_parse(args, &geometry);
    call->fusion = (task->flags & RV_TASK_FLAG_COMPILED) && g_str_has_prefix(inner, "triton_");
    rv_shapes_clear(&s);
    call->output = saturating_mul(rv_memory_output_elements(owner, dims, args), element_bytes);
    call->saves = saves_inputs(inner) && saves_inputs(owner);
    call->saves_output = saves_result(owner) || saves_result(inner);
    /* relu_ launches clamp_min: the outer name says it is in place */
    call->in_place = (g_str_has_suffix(inner, "_") && !g_str_has_suffix(inner, "__")) ||
                     (g_str_has_suffix(owner, "_") && !g_str_has_suffix(owner, "__"));
}

/* ---- the graph's calls ---------------------------------------------------- */

typedef struct {
    const rv_graph *graph;
    int32_t *first_gpu;   /* per CPU task: the first GPU task it launched, -1 */
    int32_t *launcher;    /* per GPU task: its launch call, -1 */
    int usual_bytes;
    rv_string_memo dtypes; /* per kernel name: its rv_dtype (names repeat; lower-casing each is slow) */
    rv_string_memo forward_only; /* per operator name: forward_only_op */
    GPtrArray *calls_by_step; /* per step (one, for a graph without steps): its launch calls, GArray of int32_t */
    GHashTable *measured; /* call_key -> op_call: a step repeats the last one's calls, and parsing their
                             Input Dims is most of the model's time */
    GHashTable *effects;  /* effects_by_call */
} context;

/* What measure_call's answer depends on. */
typedef struct {
    int32_t input_dims, op, layer, element_bytes, op_args;
} call_key;

static guint call_key_hash(gconstpointer data)
{
    const call_key *key = data;
    guint hash = (guint)key->input_dims;
    hash = hash * 31u + (guint)key->op;
    hash = hash * 31u + (guint)key->layer;
    hash = hash * 31u + (guint)key->op_args;
    return hash * 31u + (guint)key->element_bytes;
}

static gboolean call_key_equal(gconstpointer a, gconstpointer b)
{
    const call_key *x = a, *y = b;
    return x->input_dims == y->input_dims && x->op == y->op && x->layer == y->layer &&
           x->element_bytes == y->element_bytes && x->op_args == y->op_args;
}

/* measure_call of the call's task, once per distinct key; the call's task
 * and phase stay the caller's. */
static void measure_call_once(context *ctx, int element_bytes, op_call *call)
{
    const rv_task *task = &g_array_index(ctx->graph->tasks, rv_task, call->task);
    call_key key = { task->input_dims, task->op, task->layer, element_bytes, rv_task_op_args(ctx->graph, call->task) };
    const op_call *known = g_hash_table_lookup(ctx->measured, &key);
    if (known == NULL) {
        op_call *fresh = g_new0(op_call, 1);
        measure_call(ctx->graph, call->task, element_bytes, fresh);
        g_hash_table_insert(ctx->measured, g_memdup2(&key, sizeof key), fresh);
        known = fresh;
    }
    int32_t id = call->task;
    uint8_t phase = call->phase;
    *call = *known;
    call->task = id;
    call->phase = phase;
}

static int dtype_verdict(const char *name)
{
    gboolean integer = FALSE;
    return (int)rv_cost_dtype_of_name(name, &integer);
}

static rv_dtype dtype_of(context *ctx, const rv_task *task)
{
    return (rv_dtype)rv_string_memo_get(&ctx->dtypes, task->name);
}

static int element_bytes_of(context *ctx, int32_t cpu_task)
{
    int32_t gpu = ctx->first_gpu[cpu_task];
    if (gpu < 0) return ctx->usual_bytes;
    rv_dtype dtype = dtype_of(ctx, &g_array_index(ctx->graph->tasks, rv_task, gpu));
    int bytes = dtype == RV_DTYPE_UNKNOWN ? 0 : rv_dtype_bytes(dtype);
    return bytes > 0 ? bytes : ctx->usual_bytes;
}

/* The element size of the dtype named by the most kernels (`kernels` per
 * dtype); 4 bytes (fp32) when no kernel names one. */
static int bytes_of_most_kernels(const guint *kernels)
{
    int best = -1;
    for (int d = 0; d < RV_DTYPE_COUNT; d++)
        if (kernels[d] > 0 && (best < 0 || kernels[d] > kernels[best])) best = d;
    return best < 0 ? 4 : MAX(rv_dtype_bytes((rv_dtype)best), 1);
}

/* The usual dtype of the tensors: the one named by the most forward
 * kernels (by any kernels where no forward kernel names one).  Forward,
 * because the kept activations are forward's outputs: in a job under
 * autocast the optimizer's many fp32 kernels outnumber, and often outlast,
 * the half-precision ones that make the activations.  Counted, not timed:
 * kernel times follow the hardware (a GPU what-if rescales them), the
 * tensors' dtype does not, so no change of durations can move it. */
static int usual_element_bytes(context *ctx)
{
    const rv_graph *graph = ctx->graph;
    guint forward[RV_DTYPE_COUNT + 1] = { 0 }, any[RV_DTYPE_COUNT + 1] = { 0 };
    gboolean named_forward = FALSE;
    for (guint t = 0; t < graph->tasks->len; t++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        if (task->kind != RV_TASK_KERNEL || (task->flags & RV_TASK_FLAG_REMOVED)) continue;
        rv_dtype dtype = dtype_of(ctx, task);
        if (dtype == RV_DTYPE_UNKNOWN || dtype >= RV_DTYPE_COUNT) continue;
        any[dtype]++;
        if (task->phase == RV_PHASE_FORWARD) {
            forward[dtype]++;
            named_forward = TRUE;
        }
    }
    return bytes_of_most_kernels(named_forward ? forward : any);
}

/* Per CPU task the first GPU task it launched, and per GPU task its
 * launch call (-1 where none), from the launch edges. */
static int32_t *first_gpu_of_calls(const rv_graph *graph, int32_t **launcher)
{
    int32_t *first = g_new(int32_t, MAX(graph->tasks->len, 1));
    *launcher = g_new(int32_t, MAX(graph->tasks->len, 1));
    for (guint t = 0; t < graph->tasks->len; t++) first[t] = (*launcher)[t] = -1;
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        if (edge->kind != RV_EDGE_LAUNCH) continue;
        (*launcher)[edge->to] = edge->from;
        if (first[edge->from] < 0 || g_array_index(graph->tasks, rv_task, edge->to).recorded_start_ns <
                                         g_array_index(graph->tasks, rv_task, first[edge->from]).recorded_start_ns)
            first[edge->from] = edge->to;
    }
    return first;
}

static gint compare_by_start(gconstpointer a, gconstpointer b, gpointer data)
{
    const rv_graph *graph = data;
    const rv_task *x = &g_array_index(graph->tasks, rv_task, *(const int32_t *)a);
    const rv_task *y = &g_array_index(graph->tasks, rv_task, *(const int32_t *)b);
    if (x->recorded_start_ns != y->recorded_start_ns) return x->recorded_start_ns < y->recorded_start_ns ? -1 : 1;
    return *(const int32_t *)a - *(const int32_t *)b;
}

/* The launch calls of each of `steps` steps (all in one, for a graph
 * without steps: steps 1, stepped FALSE) in recorded order, in one pass
 * over the tasks: a graph of 100k tasks has a hundred steps. */
static GPtrArray *launch_calls_by_step(const context *ctx, guint steps, gboolean stepped)
{
    GPtrArray *by_step = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    for (guint s = 0; s < steps; s++) g_ptr_array_add(by_step, g_array_new(FALSE, FALSE, sizeof(int32_t)));
    for (guint t = 0; t < ctx->graph->tasks->len; t++) {
        const rv_task *task = &g_array_index(ctx->graph->tasks, rv_task, t);
        if (task->kind != RV_TASK_CPU || ctx->first_gpu[t] < 0) continue;
        /* A removed call whose GPU work stays (cuda-graphs launches it from
         * a graph) or moved (a pipeline stage, a fused kernel) still made
         * its tensors; one removed with its work made none. */
        if ((task->flags & RV_TASK_FLAG_REMOVED) &&
            (g_array_index(ctx->graph->tasks, rv_task, ctx->first_gpu[t]).flags & RV_TASK_FLAG_REMOVED) &&
            !work_moved(ctx->effects, (int32_t)t))
            continue;
        /* A plugin's inserted calls copy a recorded call's shapes (checkpoint's
         * recomputation, amp's casts): counting them again would add
         * tensors no one allocates twice. */
        if (task->flags & RV_TASK_FLAG_INSERTED) continue;
        guint slot = 0;
        if (stepped) {
            if (task->step < 0 || (guint)task->step >= steps) continue;
            slot = (guint)task->step;
        }
        int32_t id = (int32_t)t;
        g_array_append_val(g_ptr_array_index(by_step, slot), id);
    }
    for (guint s = 0; s < steps; s++)
        g_array_sort_with_data(g_ptr_array_index(by_step, s), compare_by_start, (gpointer)ctx->graph);
    return by_step;
}

/* One operator call per run of launches on a thread with the same tags
 * (a cuDNN convolution launches several kernels). */
/* A later launch `id` of the operator call at calls[slot - 1] (slot 0:
 * none, an unshaped call): its effects apply when the first had none. */
static void mark_later_launch(context *ctx, GArray *calls, guint slot, int32_t id)
{
    if (slot == 0) return;
    op_call *call = &g_array_index(calls, op_call, slot - 1);
    if (call->marked || !g_hash_table_contains(ctx->effects, GINT_TO_POINTER(id + 1))) return;
    measure_call_once(ctx, element_bytes_of(ctx, call->task), call);
    apply_effects(ctx->effects, call, id);
}

static GArray *operator_calls(context *ctx, guint slot, guint *unshaped, gboolean *backward)
{
    const GArray *launches = g_ptr_array_index(ctx->calls_by_step, slot);
    GArray *calls = g_array_new(FALSE, TRUE, sizeof(op_call));
    /* per resource (a CPU thread): its last launching task (1 + id, 0 for
     * none) and 1 + the index of that task's call (0 for none); flat
     * arrays, since every launch of every step looks them up */
    guint resources = ctx->graph->resources->len;
    int32_t *last_on = g_new0(int32_t, resources + 1);
    guint *call_on = g_new0(guint, resources + 1);
    for (guint i = 0; i < launches->len; i++) {
        int32_t id = g_array_index(launches, int32_t, i);
        const rv_task *task = &g_array_index(ctx->graph->tasks, rv_task, id);
        /* backward calls often carry no shapes (their outermost operator
         * is the autograd engine's wrapper), but they say it is training */
        if (task->phase == RV_PHASE_BACKWARD) *backward = TRUE;
        guint on = (guint)task->resource; /* validated: below resources */
        int32_t previous = last_on[on];
        last_on[on] = id + 1;
        if (previous != 0) {
            const rv_task *before = &g_array_index(ctx->graph->tasks, rv_task, previous - 1);
            if (before->op == task->op && before->layer == task->layer && before->input_dims == task->input_dims &&
                before->phase == task->phase) {
                mark_later_launch(ctx, calls, call_on[on], id);
                continue;
            }
        }
        call_on[on] = 0;
        if (task->input_dims < 0) {
            (*unshaped)++;
            continue;
        }
        op_call call = { 0 };
        call.task = id;
        /* Without ProfilerStep the whole trace is the step, and what no
         * backward or optimizer scope claims is its forward (the builder
         * tags it "other", since no step encloses it): an inference trace
         * recorded without a schedule is all forward. */
        call.phase = task->phase == RV_PHASE_OTHER && ctx->graph->whole_trace_step ? RV_PHASE_FORWARD : task->phase;
        measure_call_once(ctx, element_bytes_of(ctx, id), &call);
        apply_effects(ctx->effects, &call, id);
        g_array_append_val(calls, call);
        call_on[on] = calls->len;
    }
    g_free(call_on);
    g_free(last_on);
    return calls;
}

/* ---- convolutions' strides ---------------------------------------------------- */

/* The spatial extents of a consumer's first input, if it is a convolution's
 * output at an integer stride of at least 2: [N, O, ceil(D/s)...] for the
 * convolution's input [N, C, D...] and weight [O, ...].  0 if not. */
static int64_t strided_output(const rv_shapes *conv, const rv_shapes *next)
{
    guint rank = rank_of(conv, 0);
    if (rv_shapes_count(next) < 1 || rank_of(next, 0) != rank || extent(next, 0, 0) != extent(conv, 0, 0) ||
        extent(next, 0, 1) != extent(conv, 1, 0))
        return 0;
    int64_t stride = 0, elements = extent(next, 0, 0) * extent(next, 0, 1);
    for (guint d = 2; d < rank; d++) {
        int64_t size = extent(conv, 0, d), out = extent(next, 0, d);
        if (out <= 0 || out >= size) return 0;
        int64_t this = (size + out - 1) / out; /* ceil(size / out): the stride that gives out */
        if ((size + this - 1) / this != out || (stride != 0 && this != stride)) return 0;
        stride = this;
        elements = saturating_mul(elements, out);
    }
    return stride >= 2 ? elements : 0;
}

/* The first forward call on the convolution's thread after it, before
 * the next convolution, whose first input has the convolution input's
 * rank: the norm or activation that reads its output (a batch norm's
 * num_batches_tracked increment, a scalar, comes between).  NULL if none. */
static const op_call *consumer_of(const context *ctx, const GArray *calls, guint at, const rv_shapes *conv,
                                  rv_shapes *consumer)
{
    int32_t thread = g_array_index(ctx->graph->tasks, rv_task, g_array_index(calls, op_call, at).task).resource;
    for (guint j = at + 1; j < calls->len; j++) {
        const op_call *later = &g_array_index(calls, op_call, j);
        const rv_task *task = &g_array_index(ctx->graph->tasks, rv_task, later->task);
        if (task->resource != thread) continue;
        if (later->phase != RV_PHASE_FORWARD || later->conv) return NULL;
        if (!rv_shapes_parse(rv_strings_get(ctx->graph->strings, task->input_dims), consumer)) continue;
        if (rv_shapes_count(consumer) >= 1 && rank_of(consumer, 0) == rank_of(conv, 0)) return later;
        rv_shapes_clear(consumer);
    }
    return NULL;
}

/* Input Dims carry no stride, so without the recorded arguments a
 * convolution's output was taken at stride 1 (conv_output).  The call that
 * reads it next (consumer_of) records its shape: where that is the
 * convolution's output at an integer stride, the output is that. */
static void read_conv_strides(const context *ctx, GArray *calls)
{
    for (guint i = 0; i < calls->len; i++) {
        op_call *call = &g_array_index(calls, op_call, i);
        if (!call->conv_unstrided || call->phase != RV_PHASE_FORWARD || call->output <= 0) continue;
        rv_shapes conv, consumer;
        const rv_task *task = &g_array_index(ctx->graph->tasks, rv_task, call->task);
        if (!rv_shapes_parse(rv_strings_get(ctx->graph->strings, task->input_dims), &conv)) continue;
        if (consumer_of(ctx, calls, i, &conv, &consumer) != NULL) {
            int64_t strided = strided_output(&conv, &consumer), unstrided = conv_output(&conv, NULL);
            if (strided > 0 && unstrided > 0)
                call->output = (int64_t)((double)call->output * (double)strided / (double)unstrided);
            rv_shapes_clear(&consumer);
        }
        rv_shapes_clear(&conv);
    }
}

/* ---- checkpointing the recording did ----------------------------------------- */

/* Operators that only a forward pass runs: no backward formula of
 * derivatives.yaml calls them (a linear's backward runs mm and sum, a
 * convolution's convolution_backward, a norm's native_*_norm_backward,
 * GELU's gelu_backward...).  One of them in a backward phase is a forward
 * operator run again: recomputation (torch.utils.checkpoint). */
static int forward_only_op(const char *op)
{
    static const char *const forward_only[] = {
        "aten::addmm", "aten::linear", "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::convolution",
        "aten::_convolution", "aten::cudnn_convolution", "aten::miopen_convolution", "aten::native_layer_norm",
        "aten::layer_norm", "aten::native_batch_norm", "aten::cudnn_batch_norm", "aten::miopen_batch_norm",
        "aten::_native_batch_norm_legit", "aten::native_group_norm", "aten::gelu", "aten::silu", "aten::embedding",
        "aten::native_dropout", "aten::_efficient_attention_forward", "aten::_flash_attention_forward",
        "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_flash_attention",
        "aten::_scaled_dot_product_cudnn_attention",
    };
    for (gsize i = 0; i < G_N_ELEMENTS(forward_only); i++)
        if (strcmp(op, forward_only[i]) == 0) return TRUE;
    return FALSE;
}

/* Where the recorded step's backward recomputed segments, a segment a
 * recompute burst apart from the plugins' (RECOMPUTED effects). */
#define RECORDED_SEGMENT_BASE (1 << 24)

/* A step's launch calls split by phase: forward and backward, in order. */
typedef struct {
    const rv_graph *graph;
    rv_string_memo *forward_only;  /* forward_only_op per operator name */
    GArray *forward, *backward;  /* int32 task ids */
    gboolean *taken;             /* per forward position: in a matched run already */
    GHashTable *positions;       /* op string id -> GArray of guint forward positions, in order */
} recompute_scan;

static int32_t op_at(const recompute_scan *scan, const GArray *list, guint i)
{
    return g_array_index(scan->graph->tasks, rv_task, g_array_index(list, int32_t, i)).op;
}

/* How far backward launch j and forward position p stay alike, each way
 * (the ops in the same order, none of forward's taken). */
static guint alike_run(const recompute_scan *scan, guint j, guint floor_j, guint p, guint *left)
{
    guint back = 0, ahead = 0;
    while (j - back > floor_j && p > back && !scan->taken[p - back - 1] &&
           op_at(scan, scan->backward, j - back - 1) == op_at(scan, scan->forward, p - back - 1))
        back++;
    while (j + ahead + 1 < scan->backward->len && p + ahead + 1 < scan->forward->len && !scan->taken[p + ahead + 1] &&
           op_at(scan, scan->backward, j + ahead + 1) == op_at(scan, scan->forward, p + ahead + 1))
        ahead++;
    *left = back;
    return back + 1 + ahead;
}

/* The forward run that backward launch j runs again: the longest run of
 * launches alike on both sides, the latest of the longest (backward
 * recomputes the last segment first).  Returns its length, 0 for none. */
static guint best_run(const recompute_scan *scan, guint j, guint floor_j, guint *start, guint *left)
{
    GArray *candidates = g_hash_table_lookup(scan->positions, GINT_TO_POINTER(op_at(scan, scan->backward, j)));
    guint best = 0;
    for (guint c = candidates ? candidates->len : 0; c-- > 0;) {
        guint p = g_array_index(candidates, guint, c), back = 0;
        if (scan->taken[p]) continue;
        guint length = alike_run(scan, j, floor_j, p, &back);
        if (length > best) {
            best = length;
            *start = p - back;
            *left = back;
        }
    }
    return best;
}

/* Every call of the forward run [from, from + length) but the first (its
 * input is the segment's input, which checkpoint keeps) is dropped after
 * forward and rebuilt in the segment's backward. */
static void mark_run(const recompute_scan *scan, GArray *calls, GHashTable *call_of_task, guint from, guint length,
                     int32_t segment)
{
    gboolean first = TRUE;
    for (guint p = from; p < from + length; p++) {
        scan->taken[p] = TRUE;
        gpointer slot = g_hash_table_lookup(call_of_task, GINT_TO_POINTER(g_array_index(scan->forward, int32_t, p) + 1));
        if (slot == NULL) continue;
        op_call *call = &g_array_index(calls, op_call, GPOINTER_TO_UINT(slot) - 1);
        if (!first && call->segment < 0) call->segment = RECORDED_SEGMENT_BASE + segment;
        first = FALSE;
    }
}

static void recompute_scan_init(recompute_scan *scan, const rv_graph *graph, const GArray *launches,
                                rv_string_memo *forward_only)
{
    scan->graph = graph;
    scan->forward_only = forward_only;
    scan->forward = g_array_new(FALSE, FALSE, sizeof(int32_t));
    scan->backward = g_array_new(FALSE, FALSE, sizeof(int32_t));
    scan->positions = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, (GDestroyNotify)g_array_unref);
    for (guint i = 0; i < launches->len; i++) {
        int32_t id = g_array_index(launches, int32_t, i);
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if (task->phase == RV_PHASE_BACKWARD) g_array_append_val(scan->backward, id);
        if (task->phase != RV_PHASE_FORWARD) continue;
        GArray *list = g_hash_table_lookup(scan->positions, GINT_TO_POINTER(task->op));
        if (list == NULL) {
            list = g_array_new(FALSE, FALSE, sizeof(guint));
            g_hash_table_insert(scan->positions, GINT_TO_POINTER(task->op), list);
        }
        g_array_append_val(list, scan->forward->len);
        g_array_append_val(scan->forward, id);
    }
    scan->taken = g_new0(gboolean, scan->forward->len + 1);
}

static void recompute_scan_clear(recompute_scan *scan)
{
    g_array_unref(scan->forward);
    g_array_unref(scan->backward);
    g_hash_table_destroy(scan->positions);
    g_free(scan->taken);
}

/* Backward launch j runs an operator only forward runs. */
static gboolean starts_a_run(const recompute_scan *scan, guint j)
{
    return rv_string_memo_get(scan->forward_only, op_at(scan, scan->backward, j)) != 0;
}

/* Does a backward launch of the step run an operator only forward runs?
 * (Without checkpointing none does: then nothing else is looked at.) */
static gboolean any_rerun(const context *ctx, const GArray *launches, rv_string_memo *forward_only)
{
    for (guint i = 0; i < launches->len; i++) {
        const rv_task *task = &g_array_index(ctx->graph->tasks, rv_task, g_array_index(launches, int32_t, i));
        if (task->phase == RV_PHASE_BACKWARD && rv_string_memo_get(forward_only, task->op)) return TRUE;
    }
    return FALSE;
}

/* A step recorded with checkpointing keeps little of its forward: each
 * segment's activations are dropped after forward and rebuilt in
 * backward, which the recording shows as a run of forward launches run
 * again, in the same order, inside backward.  A run counts where an
 * operator only forward runs starts it (backward calls carry no Input
 * Dims, so operators are matched by name and order); the forward calls of
 * each run are marked as RECOMPUTED would mark them. */
static void mark_recorded_recompute(context *ctx, guint slot, GArray *calls)
{
    const GArray *launches = g_ptr_array_index(ctx->calls_by_step, slot);
    if (!any_rerun(ctx, launches, &ctx->forward_only)) return;
    recompute_scan scan;
    recompute_scan_init(&scan, ctx->graph, launches, &ctx->forward_only);
    GHashTable *call_of_task = g_hash_table_new(g_direct_hash, g_direct_equal);
    for (guint i = 0; i < calls->len; i++)
        g_hash_table_insert(call_of_task, GINT_TO_POINTER(g_array_index(calls, op_call, i).task + 1), GUINT_TO_POINTER(i + 1));
    int32_t segments = 0;
    guint floor_j = 0; /* backward launches before it belong to a matched run */
    for (guint j = 0; j < scan.backward->len; j++) {
        if (!starts_a_run(&scan, j)) continue;
        guint start = 0, left = 0, length = best_run(&scan, j, floor_j, &start, &left);
        if (length == 0) continue;
        mark_run(&scan, calls, call_of_task, start, length, segments++);
        j = j - left + length - 1;
        floor_j = j + 1;
    }
    g_hash_table_destroy(call_of_task);
    recompute_scan_clear(&scan);
}

/* ---- the optimizer --------------------------------------------------------- */

/* The optimizer's state bytes per parameter byte, from the operators of
 * the optimizer phase (the step annotation's name does not reach the
 * graph): Adam's family updates its second moment with addcdiv (or runs
 * a fused Adam kernel): two states; other update work (SGD with momentum,
 * Adagrad, RMSprop): one; no optimizer work: -1. */
static int optimizer_factor(const context *ctx, char *name, gsize size)
{
    const rv_graph *graph = ctx->graph;
    gboolean any = FALSE;
    for (guint t = 0; t < graph->tasks->len; t++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        if (task->phase != RV_PHASE_OPTIMIZER) continue;
        /* fused-adam's removed kernels live on in its fused one */
        if ((task->flags & RV_TASK_FLAG_REMOVED) && !(ctx->launcher[t] >= 0 && work_moved(ctx->effects, ctx->launcher[t])))
            continue;
        any = TRUE;
        const char *op = task->op > 0 ? rv_strings_get(graph->strings, task->op) : "";
        const char *kernel = rv_strings_get(graph->strings, task->name);
        if (name_has(op, "addcdiv") || name_has(op, "adam") || name_has(kernel, "adam") || name_has(kernel, "Adam")) {
            g_strlcpy(name, "Adam-like (addcdiv)", size);
            return 2;
        }
    }
    if (!any) return -1;
    g_strlcpy(name, "SGD-like (one momentum buffer)", size);
    return 1;
}

/* ---- offloads ----------------------------------------------------------------- */

static gboolean is_inserted_copy(const rv_task *task, const rv_graph *graph, const char *prefix)
{
    return task->kind == RV_TASK_MEMCPY && (task->flags & RV_TASK_FLAG_INSERTED) && !(task->flags & RV_TASK_FLAG_REMOVED) &&
           g_str_has_prefix(rv_strings_get(graph->strings, task->name), prefix);
}

/* Offloaded bytes per launch call: an inserted device-to-host copy that
 * leads to an inserted host-to-device copy, started by a GPU task of that
 * call (vdnn.c: "X is ready" when the layer's first task starts). */
static GHashTable *offloads_by_call(const rv_graph *graph)
{
    GHashTable *by_call = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    int32_t *launcher = g_new(int32_t, MAX(graph->tasks->len, 1));
    gboolean *prefetched = g_new0(gboolean, MAX(graph->tasks->len, 1));
    for (guint t = 0; t < graph->tasks->len; t++) launcher[t] = -1;
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        const rv_task *from = &g_array_index(graph->tasks, rv_task, edge->from);
        const rv_task *to = &g_array_index(graph->tasks, rv_task, edge->to);
        if (edge->kind == RV_EDGE_LAUNCH) launcher[edge->to] = edge->from;
        if (is_inserted_copy(from, graph, "Memcpy DtoH") && is_inserted_copy(to, graph, "Memcpy HtoD"))
            prefetched[edge->from] = TRUE;
    }
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        const rv_task *to = &g_array_index(graph->tasks, rv_task, edge->to);
        if (!edge->from_start || !prefetched[edge->to] || !is_inserted_copy(to, graph, "Memcpy DtoH")) continue;
        int32_t call = launcher[edge->from];
        if (call < 0) continue;
        int64_t *bytes = g_hash_table_lookup(by_call, GINT_TO_POINTER(call + 1));
        if (bytes == NULL) {
            bytes = g_new0(int64_t, 1);
            g_hash_table_insert(by_call, GINT_TO_POINTER(call + 1), bytes);
        }
        *bytes = rv_saturating_add(*bytes, to->bytes);
    }
    g_free(launcher);
    g_free(prefetched);
    return by_call;
}

/* ---- the walk over one step ---------------------------------------------------- */

typedef struct {
    GArray *kept;       /* int64 per weighted layer: activations kept from it to the next */
    GArray *offloaded;  /* int64 per weighted layer: of those, offloaded */
    GArray *dropped;    /* int64 per weighted layer: of those, dropped after forward and recomputed */
    GArray *segment;    /* int64 per weighted layer: 1 + the checkpoint segment its dropped bytes belong to */
    GArray *grads;      /* int64 per weighted layer: its gradient bytes */
    GArray *transient;  /* int64 per weighted layer: the largest gradients its backward holds at once */
    int64_t weights;
    int64_t batch;      /* the first forward call's inputs: the step's input, held by the caller */
    int64_t workspace[RV_PHASE_COUNT];
    gboolean training;
} step_walk;

static int64_t sum_of(const GArray *values, guint from, guint to)
{
    int64_t sum = 0;
    for (guint i = from; i < to && i < values->len; i++) sum = rv_saturating_add(sum, g_array_index(values, int64_t, i));
    return sum;
}

static void grow(GArray *values, guint index) { if (values->len <= index) g_array_set_size(values, index + 1); }

static void add_at(GArray *values, guint index, int64_t bytes)
{
    grow(values, index);
    int64_t *slot = &g_array_index(values, int64_t, index);
    *slot = rv_saturating_add(*slot, bytes);
}

static void walk_forward(step_walk *walk, const GArray *calls, GHashTable *offloads)
{
    guint layer = 0;
    gboolean any_weighted = FALSE;
    int64_t counted = 0; /* an in-place call's saved input, which the next call reads again */
    for (guint i = 0; i < calls->len; i++) {
        const op_call *call = &g_array_index(calls, op_call, i);
        if (call->phase != RV_PHASE_FORWARD) continue;
        if (walk->batch == 0) walk->batch = call->inputs;
        if (call->params > 0) {
            if (any_weighted) layer++;
            any_weighted = TRUE;
            walk->weights = rv_saturating_add(walk->weights, call->params);
            add_at(walk->grads, layer, call->params);
        }
        grow(walk->kept, layer);
        grow(walk->offloaded, layer);
        grow(walk->grads, layer);
        /* A tensor is kept once however many operators save it: after an
         * operator that saved its result (or, in place, its input), the
         * next operator reading a tensor of that size reads the same one. */
        int64_t again = counted > 0 && call->largest == counted ? counted : 0;
        int64_t result = call->in_place ? call->largest : call->output;
        /* A compiled graph's Triton kernel fuses a chain of operators; its
         * arguments are their inputs and the buffers it writes.  What
         * AOTAutograd's partitioner keeps of such a chain for backward is
         * a cut of it, not every argument: one tensor, the largest, and
         * backward recomputes the rest of the chain from it. */
        int64_t kept_inputs = call->fusion ? call->largest : call->inputs;
        int64_t saved = !call->saves ? 0 : call->saves_output ? result - MIN(again, result) : kept_inputs - again;
        saved = scaled_bytes(saved, call->kept_factor);
        grow(walk->dropped, layer);
        grow(walk->segment, layer);
        if (walk->training) add_at(walk->kept, layer, saved);
        if (walk->training && call->segment >= 0) {
            add_at(walk->dropped, layer, saved);
            g_array_index(walk->segment, int64_t, layer) = call->segment + 1;
        }
        counted = call->saves && (call->saves_output || call->in_place) ? result : 0;
        int64_t *off = g_hash_table_lookup(offloads, GINT_TO_POINTER(call->task + 1));
        if (walk->training && off != NULL) add_at(walk->offloaded, layer, MIN(*off, call->inputs));
        /* in inference no activations are kept: an operator holds its inputs and output */
        int64_t transient = walk->training ? call->output : rv_saturating_add(call->inputs, call->output);
        walk->workspace[RV_PHASE_FORWARD] = MAX(walk->workspace[RV_PHASE_FORWARD], transient);
        /* its backward takes the gradient of its output and makes that of
         * its (largest) input: backward calls rarely carry shapes of their own (their
         * outermost operator is autograd's wrapper), their forward does */
        if (walk->training) {
            grow(walk->transient, layer);
            int64_t *slot = &g_array_index(walk->transient, int64_t, layer);
            *slot = MAX(*slot, rv_saturating_add(call->output, call->largest));
        }
    }
}

static void other_workspaces(step_walk *walk, const GArray *calls)
{
    for (guint i = 0; i < calls->len; i++) {
        const op_call *call = &g_array_index(calls, op_call, i);
        if (call->phase == RV_PHASE_FORWARD || call->phase >= RV_PHASE_COUNT) continue;
        /* the optimizer's inputs are parameters, gradients and states,
         * all counted already: only what it makes is new */
        int64_t transient = call->phase == RV_PHASE_OPTIMIZER || call->in_place
                                ? call->output : rv_saturating_add(call->largest, call->output);
        walk->workspace[call->phase] = MAX(walk->workspace[call->phase], transient);
    }
}

/* What stays after forward: kept, minus offloaded and recomputed. */
static int64_t resident_after_forward(const step_walk *walk, guint to)
{
    return sum_of(walk->kept, 0, to) - sum_of(walk->offloaded, 0, to) - sum_of(walk->dropped, 0, to);
}

/* Resident activations while backward computes layer j's gradient: the
 * layers below it keep theirs, minus what is offloaded, except layer j and
 * the one below it (prefetched one ahead), minus what is recomputed,
 * except in j's own segment (rebuilt before its backward). */
static int64_t activations_at(const step_walk *walk, guint j)
{
    int64_t kept = resident_after_forward(walk, j + 1);
    kept += g_array_index(walk->offloaded, int64_t, j);
    if (j > 0) kept += g_array_index(walk->offloaded, int64_t, j - 1);
    int64_t segment = g_array_index(walk->segment, int64_t, j);
    for (guint i = 0; segment > 0 && i <= j; i++)
        if (g_array_index(walk->segment, int64_t, i) == segment) kept += g_array_index(walk->dropped, int64_t, i);
    return MAX(kept, 0);
}

static void set_row(rv_memory_estimate *e, rv_phase phase, int64_t weights, int64_t grads, int64_t state,
                    int64_t activations, int64_t workspace)
{
    int64_t *row = e->bytes[phase];
    row[RV_MEM_WEIGHTS] = weights;
    row[RV_MEM_GRADIENTS] = grads;
    row[RV_MEM_OPTIMIZER_STATE] = state;
    row[RV_MEM_ACTIVATIONS] = activations;
    row[RV_MEM_WORKSPACE] = workspace;
    int64_t sum = 0;
    for (int c = 0; c < RV_MEM_CATEGORY_COUNT; c++) sum = rv_saturating_add(sum, row[c]);
    e->phase_peak[phase] = sum;
}

static gboolean has_phase(const GArray *calls, rv_phase phase)
{
    for (guint i = 0; i < calls->len; i++)
        if (g_array_index(calls, op_call, i).phase == phase) return TRUE;
    return FALSE;
}

static void estimate_step(const GArray *calls, gboolean training, GHashTable *offloads, int factor,
                          const model_shard *shard, rv_memory_estimate *e)
{
    step_walk walk = { g_array_new(FALSE, TRUE, sizeof(int64_t)), g_array_new(FALSE, TRUE, sizeof(int64_t)),
                       g_array_new(FALSE, TRUE, sizeof(int64_t)), g_array_new(FALSE, TRUE, sizeof(int64_t)),
                       g_array_new(FALSE, TRUE, sizeof(int64_t)), g_array_new(FALSE, TRUE, sizeof(int64_t)), 0, 0,
                       { 0 }, training };
    walk_forward(&walk, calls, offloads);
    other_workspaces(&walk, calls);
    int64_t full_state = walk.training && factor > 0 ? saturating_mul(walk.weights, factor) : 0;
    int64_t full_grads = walk.training ? walk.weights : 0;
    e->model_states = rv_saturating_add(rv_saturating_add(walk.weights, full_grads), full_state);
    /* offloaded states leave the GPU: this rank's share of them */
    e->offloaded_states = rv_saturating_add(
        rv_saturating_add(shard->offloaded & RV_SHARD_WEIGHTS ? scaled_bytes(walk.weights, shard->weights) : 0,
                          shard->offloaded & RV_SHARD_GRADIENTS ? scaled_bytes(full_grads, shard->grads) : 0),
        shard->offloaded & RV_SHARD_OPTIMIZER_STATE ? scaled_bytes(full_state, shard->state) : 0);
    double weights_held = held(shard, RV_SHARD_WEIGHTS, shard->weights);
    double grads_held = held(shard, RV_SHARD_GRADIENTS, shard->grads);
    /* sharded or offloaded weights: a layer's whole weights come in while it runs (per layer: walk.grads) */
    int64_t largest_layer = 0;
    for (guint j = 0; j < walk.grads->len; j++) largest_layer = MAX(largest_layer, g_array_index(walk.grads, int64_t, j));
    e->gathered = weights_held < 1 ? largest_layer : 0;
    int64_t weights = rv_saturating_add(scaled_bytes(walk.weights, weights_held), e->gathered);
    int64_t state = scaled_bytes(full_state, held(shard, RV_SHARD_OPTIMIZER_STATE, shard->state));
    int64_t grads = scaled_bytes(full_grads, grads_held);
    int64_t kept = MAX(resident_after_forward(&walk, walk.kept->len), 0);
    if (!walk.training) kept = walk.batch; /* inference keeps only its input */
    kept = rv_saturating_add(kept, shard->resident);
    e->resident = shard->resident;
    memset(e->bytes, 0, sizeof e->bytes);
    memset(e->phase_peak, 0, sizeof e->phase_peak);
    set_row(e, RV_PHASE_FORWARD, weights, 0, state, kept, walk.workspace[RV_PHASE_FORWARD]);
    if (walk.training) {
        /* backward: layer j's gradients appear while layers <= j still keep
         * their activations; its transient is the larger of what its own
         * forward calls' shapes say and what shaped backward calls show;
         * sharded gradients are whole for layer j until reduce-scattered */
        int64_t best = -1, best_acts = 0, best_grads = 0, best_work = walk.workspace[RV_PHASE_BACKWARD];
        for (guint j = walk.kept->len; j-- > 0;) {
            int64_t acts = rv_saturating_add(activations_at(&walk, j), shard->resident);
            int64_t g = scaled_bytes(sum_of(walk.grads, j, walk.grads->len), grads_held);
            if (grads_held < 1 && j < walk.grads->len)
                g = rv_saturating_add(g, scaled_bytes(g_array_index(walk.grads, int64_t, j), 1.0 - grads_held));
            int64_t work = walk.workspace[RV_PHASE_BACKWARD];
            if (j < walk.transient->len) work = MAX(work, g_array_index(walk.transient, int64_t, j));
            if (acts + g + work > best) { best = acts + g + work; best_acts = acts; best_grads = g; best_work = work; }
        }
        set_row(e, RV_PHASE_BACKWARD, weights, best_grads, state, best_acts, best_work);
        if (factor > 0 || has_phase(calls, RV_PHASE_OPTIMIZER))
            set_row(e, RV_PHASE_OPTIMIZER, weights, grads, state, shard->resident, walk.workspace[RV_PHASE_OPTIMIZER]);
    }
    e->training = walk.training;
    e->offloaded = sum_of(walk.offloaded, 0, walk.offloaded->len);
    e->recomputed = sum_of(walk.dropped, 0, walk.dropped->len);
    e->peak = 0;
    for (int p = 0; p < RV_PHASE_COUNT; p++)
        if (e->phase_peak[p] > e->peak) { e->peak = e->phase_peak[p]; e->peak_phase = p; }
    g_array_unref(walk.kept);
    g_array_unref(walk.offloaded);
    g_array_unref(walk.dropped);
    g_array_unref(walk.segment);
    g_array_unref(walk.grads);
    g_array_unref(walk.transient);
}

/* A recorded task as the model reads it: everything from recorded_start_ns
 * on (tags, flags, order; and a few fields it does not read, which only
 * make the answer "estimate it" more often), not its duration or host
 * overhead, which reach the model only through the usual dtype, checked
 * apart.  Compared as words: a sweep asks this of every task of every
 * variant. */
G_STATIC_ASSERT(offsetof(rv_task, recorded_start_ns) == 16 && sizeof(rv_task) == 72);
static gboolean same_as_read(const rv_task *a, const rv_task *b)
{
    uint64_t x[7], y[7];
    memcpy(x, (const char *)a + 16, sizeof x);
    memcpy(y, (const char *)b + 16, sizeof y);
    return ((x[0] ^ y[0]) | (x[1] ^ y[1]) | (x[2] ^ y[2]) | (x[3] ^ y[3]) | (x[4] ^ y[4]) | (x[5] ^ y[5]) |
            (x[6] ^ y[6])) == 0;
}

/* Tasks and edges a plugin appended: inserted CPU calls are not read, nor
 * are collectives and syncs; a kernel weighs in the usual dtype, a copy
 * may be an offload, a launch edge from a recorded call changes its
 * first GPU task. */
static gboolean appended_unread(const rv_graph *baseline, const rv_graph *variant)
{
    for (guint t = baseline->tasks->len; t < variant->tasks->len; t++) {
        uint8_t kind = g_array_index(variant->tasks, rv_task, t).kind;
        if (kind == RV_TASK_KERNEL || kind == RV_TASK_MEMCPY) return FALSE;
    }
    for (guint e = baseline->edges->len; e < variant->edges->len; e++) {
        const rv_edge *edge = &g_array_index(variant->edges, rv_edge, e);
        if (edge->kind == RV_EDGE_LAUNCH && (guint)edge->from < baseline->tasks->len) return FALSE;
    }
    return TRUE;
}

gboolean rv_memory_estimate_unchanged(const rv_graph *baseline, const rv_graph *variant, int element_bytes)
{
    if (variant->memory_effects->len != 0 || baseline->memory_effects->len != 0) return FALSE;
    if (variant->tasks->len < baseline->tasks->len || variant->edges->len < baseline->edges->len) return FALSE;
    if (variant->steps->len != baseline->steps->len || variant->whole_trace_step != baseline->whole_trace_step)
        return FALSE;
    if (memcmp(variant->edges->data, baseline->edges->data, (gsize)baseline->edges->len * sizeof(rv_edge)) != 0)
        return FALSE;
    for (guint t = 0; t < baseline->tasks->len; t++)
        if (!same_as_read(&g_array_index(baseline->tasks, rv_task, t), &g_array_index(variant->tasks, rv_task, t)))
            return FALSE;
    /* The usual dtype reads the kernels' names, phases and flags, all
     * compared above: it is the baseline's (element_bytes) too. */
    (void)element_bytes;
    return appended_unread(baseline, variant);
}

/* ---- variants that changed only durations ------------------------- */

struct rv_memory_durations_only {
    int element_bytes;      /* the baseline's usual dtype's bytes */
    guint tasks, edges, steps, applied;
};

rv_memory_durations_only *rv_memory_durations_only_new(const rv_graph *baseline, int element_bytes)
{
    rv_memory_durations_only *kept = g_new0(rv_memory_durations_only, 1);
    kept->element_bytes = element_bytes;
    kept->tasks = baseline->tasks->len;
    kept->edges = baseline->edges->len;
    kept->steps = baseline->steps->len;
    kept->applied = baseline->applied->len;
    return kept;
}

void rv_memory_durations_only_free(rv_memory_durations_only *kept) { g_free(kept); }

/* Did every plugin applied to the variant since the baseline declare that
 * it changes durations at most (scales or reprices; nothing rewritten, the
 * memory model's tensors untouched)?  A plugin that declared nothing
 * (effects NULL) says no.  The counts are checked too, as a net under a
 * plugin that declared less than it did. */
static gboolean durations_only(const rv_memory_durations_only *kept, const rv_graph *variant)
{
    if (variant->applied->len <= kept->applied || variant->memory_effects->len != 0 ||
        variant->tasks->len != kept->tasks || variant->edges->len != kept->edges || variant->steps->len != kept->steps)
        return FALSE;
    for (guint i = kept->applied; i < variant->applied->len; i++) {
        const rv_applied_plugin *done = &g_array_index(variant->applied, rv_applied_plugin, i);
        const rv_plugin_effects *e = &done->effects;
        if (!done->declared || e->rewrites != 0 || ((e->scales | e->reprices) & RV_ASPECT_MEMORY)) return FALSE;
    }
    return TRUE;
}

gboolean rv_memory_durations_only_unchanged(const rv_memory_durations_only *kept, const rv_graph *baseline,
                                            const rv_graph *variant)
{
    /* Durations move no figure of the model, the usual dtype included
     * (usual_element_bytes counts kernels, it does not time them). */
    return baseline->memory_effects->len == 0 && baseline->whole_trace_step == variant->whole_trace_step &&
           durations_only(kept, variant);
}

/* A step's estimate; a pipelined step (calls with a stage) is estimated
 * per stage, from its calls and those of no stage, and the highest wins. */
static void estimate_calls(const GArray *calls, gboolean training, GHashTable *offloads, int factor,
                           const model_shard *shard, rv_memory_estimate *e)
{
    int32_t stages = 0;
    for (guint i = 0; i < calls->len; i++) stages = MAX(stages, g_array_index(calls, op_call, i).stage + 1);
    e->stage = -1;
    e->stages = stages;
    if (stages == 0) {
        estimate_step(calls, training, offloads, factor, shard, e);
        return;
    }
    GArray *mine = g_array_new(FALSE, FALSE, sizeof(op_call));
    rv_memory_estimate best = *e;
    for (int32_t stage = 0; stage < stages; stage++) {
        g_array_set_size(mine, 0);
        for (guint i = 0; i < calls->len; i++) {
            const op_call *call = &g_array_index(calls, op_call, i);
            if (call->stage == stage || call->stage < 0) g_array_append_vals(mine, call, 1);
        }
        rv_memory_estimate this = *e;
        estimate_step(mine, training, offloads, factor, shard, &this);
        this.stage = stage;
        if (stage == 0 || this.peak > best.peak) best = this;
    }
    g_array_unref(mine);
    *e = best;
}

gboolean rv_memory_estimate_graph(const rv_graph *graph, rv_memory_estimate *estimate, GError **error)
{
    memset(estimate, 0, sizeof *estimate);
    estimate->step = -1;
    estimate->stage = -1;
    int32_t *launcher = NULL;
    int32_t *first_gpu = first_gpu_of_calls(graph, &launcher);
    context ctx = { graph, first_gpu, launcher, 0, { 0 }, { 0 }, NULL,
                    g_hash_table_new_full(call_key_hash, call_key_equal, g_free, g_free), effects_by_call(graph) };
    rv_string_memo_init(&ctx.dtypes, graph->strings, dtype_verdict);
    rv_string_memo_init(&ctx.forward_only, graph->strings, forward_only_op);
    ctx.usual_bytes = usual_element_bytes(&ctx);
    estimate->element_bytes = ctx.usual_bytes;
    estimate->optimizer_factor = optimizer_factor(&ctx, estimate->optimizer, sizeof estimate->optimizer);
    GHashTable *offloads = offloads_by_call(graph);
    model_shard shard = shard_of(graph);
    gboolean stepped = graph->steps->len > 0 && !graph->whole_trace_step;
    guint steps = stepped ? graph->steps->len : 1;
    ctx.calls_by_step = launch_calls_by_step(&ctx, steps, stepped);
    for (guint s = 0; s < steps; s++) {
        guint unshaped = 0;
        gboolean backward = FALSE;
        int32_t step = stepped ? (int32_t)s : -1;
        GArray *calls = operator_calls(&ctx, s, &unshaped, &backward);
        read_conv_strides(&ctx, calls);
        if (backward) mark_recorded_recompute(&ctx, s, calls);
        if (calls->len > 0) {
            rv_memory_estimate this = *estimate;
            estimate_calls(calls, backward, offloads, estimate->optimizer_factor, &shard, &this);
            this.step = step;
            this.shaped_ops = calls->len;
            this.unshaped_ops = unshaped;
            if (estimate->shaped_ops == 0 || this.peak > estimate->peak) *estimate = this;
        } else if (estimate->shaped_ops == 0) {
            estimate->unshaped_ops += unshaped;
        }
        g_array_unref(calls);
    }
    g_hash_table_destroy(offloads);
    g_ptr_array_unref(ctx.calls_by_step);
    g_hash_table_destroy(ctx.measured);
    g_hash_table_destroy(ctx.effects);
    rv_string_memo_clear(&ctx.dtypes);
    rv_string_memo_clear(&ctx.forward_only);
    g_free(ctx.first_gpu);
    g_free(ctx.launcher);
    if (estimate->shaped_ops == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                    "%s: no operator that launches GPU work has Input Dims (record with record_shapes=True): "
                    "cannot estimate memory from shapes", graph->source);
        return FALSE;
    }
    return TRUE;
}
