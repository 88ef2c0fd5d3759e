/*
 * decode.c - generative inference's token phase predicted from a trace of
 * its prefill (T3's prompt phase; the fused-collective paper's token phase
 * of GEMV + all-reduce): each step of the prediction is one token.
 *
 *   reverie whatif prefill.json.gz --opt decode:tokens=128
 *   reverie whatif prefill.json.gz --opt decode:tokens=512,at=last
 *
 * A prefill runs the prompt's S tokens (per sequence, B sequences) through
 * every block at once; a decode step runs one new token per sequence
 * against the keys and values of the L tokens before it (the KV cache).
 * Per kernel of the forward pass, on the kernel cost model (costmodel.h:
 * FLOPs and bytes change, the fixed cost stays):
 *   - linear GEMMs (blocks.h's L tokens, and any GEMM outside a block, the
 *     output layer) see B tokens instead of B x S: FLOPs / S, and their
 *     bytes are the weights, read whole every token, plus the activations
 *     / S - weight-bound, a GEMV at small batch (B <= 8: the kernel is
 *     named a GEMV, as fused-collective's GEMV + all-reduce looks for);
 *   - attention GEMMs (A tokens; batched [.., m, k] x [.., k, n]): the
 *     query length m = S becomes 1 and a key length (k or n) = S becomes L,
 *     so QK^T and AV read the cache: FLOPs and bytes follow m k n and
 *     mk + kn + mn; fused attention (q, k, v of [B, heads, S, d]) the same;
 *   - the kernels between a block's first and last attention GEMM (the
 *     scores' scaling, masking, softmax: B x heads x S x S elements)
 *     work on B x heads x L: x L / S^2;
 *   - every other kernel (norms, residual adds, activations, embedding)
 *     works per token: / S;
 *   - per block a copy appends the new token's key and value to the cache
 *     (2 x B x H elements written, read once);
 *   - the host's calls stay as recorded: a decode step launches the same
 *     kernels, so a small model's token is launch-bound, as it is in
 *     practice (CUDA Graphs' motivation).
 * L is the context of the token modelled: at=mean, S + (N + 1) / 2 (the
 * time of N tokens is then N x the predicted step: every term is linear
 * in L); at=first, S + 1; at=last, S + N.  The memory model keeps the KV
 * cache of S + N tokens (2 x blocks x B x (S + N) x H x dtype bytes) for
 * the whole step, and every other tensor at 1/S.
 * S, B and H: prompt, batch and hidden, else the shapes of the blocks'
 * first attention GEMM (m) and first linear GEMM ([B, S, H], or [B x S, H]
 * with B = rows / S).  The linear GEMMs must carry shapes (record the
 * prefill with record_shapes=True).  A trace that trains (a backward phase)
 * is refused: decode predicts inference.  tokens=0 generates nothing: the
 * prefill as recorded.  After decode, tp-allreduce needs seq=1 (its
 * all-reduces then move B x H, not the prefill's B x S x H).
 */
#include "reverie/plugin.h"
#include "reverie/blocks.h"
#include "reverie/checked.h"
#include "reverie/costmodel.h"
#include "reverie/error.h"
#include "reverie/gpus.h"
#include "reverie/inserted.h"
#include "reverie/memory.h"
#include "reverie/shapes.h"
#include "reverie/transform.h"
#include "reverie/units.h"
#include "reverie/validate.h"
#include <math.h>
#include <string.h>

static const rv_param_spec decode_params[] = {
    { "tokens", RV_PARAM_INTEGER, "128", "tokens", "N, tokens generated per sequence after the prompt (0: none, the "
      "prefill as recorded)", NULL },
    { "at", RV_PARAM_CHOICE, "mean", NULL, "the token modelled: mean (context S + (N+1)/2: N tokens take N x the step), "
      "first (S + 1) or last (S + N)", "mean|first|last" },
    { "prompt", RV_PARAM_INTEGER, "0", "tokens", "S, the prompt's length (0: from the attention GEMMs' shapes)", NULL },
    { "batch", RV_PARAM_INTEGER, "0", "sequences", "B, sequences decoded together (0: from the shapes)", NULL },
    { "hidden", RV_PARAM_INTEGER, "0", "", "H, hidden size (0: from the shapes)", NULL },
    { "dtype_bytes", RV_PARAM_INTEGER, "0", "bytes", "bytes per cached key or value element (0: the linear GEMMs' dtype)",
      NULL },
    { "source_gpu", RV_PARAM_STRING, "", NULL, "the trace's GPU when its deviceProperties name none the catalogue knows", NULL },
    { NULL }
};

/* How each forward kernel changes. */
typedef enum { PER_TOKEN, LINEAR, ATTENTION, SCORES } kernel_role;

typedef struct {
    int64_t tokens, prompt, batch, hidden, dtype_bytes;
    double context;            /* L */
    guint blocks;              /* per step */
    guint steps;
    GHashTable *roles;         /* task id (GINT) -> kernel_role + 1 */
    GArray *qkv;               /* per block: its first linear GEMM (the cache append follows it) */
    guint renamed, appended;
    int64_t cache_bytes;
    rv_block_finder *finder;
} decode_state;

/* ---- roles and sizes ------------------------------------------------------------ */

static void set_role(decode_state *state, int32_t id, kernel_role role)
{
    g_hash_table_insert(state->roles, GINT_TO_POINTER(id), GINT_TO_POINTER(role + 1));
}

/* What the first block's shapes say: the linear GEMM's activation (its
 * rows, H, and [B, S, H] where it has rank 3) and the attention's query
 * length. */
typedef struct {
    rv_gemm_dims linear;
    gboolean linear_known;
    int64_t query;
} prefill_shapes;

/* The query length of an attention GEMM: m of [.., m, k]; of a fused
 * kernel's q (rank 4: [B, heads, S, d] or FlashAttention's [B, S, heads, d])
 * the larger middle extent. */
static int64_t query_length(const rv_graph *graph, int32_t task)
{
    rv_shapes shapes;
    int64_t query = 0;
    if (rv_shapes_of_task(graph, task, &shapes)) {
        guint rank = rv_shapes_rank(&shapes, 0);
        if (rank == 4 && rv_shapes_rank(&shapes, 1) == 4)
            query = MAX(rv_shapes_extent(&shapes, 0, 1), rv_shapes_extent(&shapes, 0, 2));
        else if (rank >= 2)
            query = rv_shapes_extent(&shapes, 0, rank - 2);
    }
    rv_shapes_clear(&shapes);
    return query;
}

/* The blocks' roles in one step's forward; the first block gives S, B, H. */
static void note_step(rv_graph *graph, decode_state *state, GArray *kernels, prefill_shapes *seen)
{
    rv_blocks blocks;
    rv_blocks_find(state->finder, kernels, &blocks);
    guint count = rv_blocks_count(&blocks);
    state->steps += count > 0;
    state->blocks = MAX(state->blocks, count);
    const char *letters = blocks.letters->str;
    for (guint b = 0; b < count; b++) {
        guint from = rv_blocks_from(&blocks, b), to = rv_blocks_to(&blocks, b), first_a = to, last_a = from;
        int32_t first_l = -1;
        for (guint i = from; i < to; i++) {
            if (letters[i] == 'A') { first_a = MIN(first_a, i); last_a = i; }
            if (letters[i] == 'L' && first_l < 0) first_l = rv_blocks_token(&blocks, i);
        }
        for (guint k = first_a < last_a ? blocks.positions[first_a] + 1 : 1; first_a < last_a && k < blocks.positions[last_a];
             k++)
            set_role(state, g_array_index(kernels, int32_t, k), SCORES);
        if (first_l >= 0) g_array_append_val(state->qkv, first_l);
        if (seen->query == 0 && first_a < to) seen->query = query_length(graph, rv_blocks_token(&blocks, first_a));
        if (!seen->linear_known && first_l >= 0) seen->linear_known = rv_block_gemm_dims(graph, first_l, &seen->linear);
    }
    for (guint i = 0; i < blocks.ids->len; i++) {
        int32_t id = rv_blocks_token(&blocks, i);
        if (letters[i] == 'A') set_role(state, id, ATTENTION);
        else if (letters[i] == 'L') set_role(state, id, rv_block_gemm_batched(graph, id) ? ATTENTION : LINEAR);
    }
    rv_blocks_clear(&blocks);
}

/* A live forward kernel (list 0); data notes GPU work that trains. */
static int forward_kernel(const rv_graph *graph, int32_t id, const rv_task *task, gpointer data)
{
    (void)graph;
    (void)id;
    if ((task->flags & RV_TASK_FLAG_REMOVED) || !(task->flags & RV_TASK_FLAG_GPU)) return -1;
    if (task->phase == RV_PHASE_BACKWARD || task->phase == RV_PHASE_OPTIMIZER) *(gboolean *)data = TRUE;
    return task->kind == RV_TASK_KERNEL && task->phase == RV_PHASE_FORWARD ? 0 : -1;
}

static gboolean find_roles(rv_graph *graph, decode_state *state, const rv_params *params, GError **error)
{
    gboolean trains = FALSE;
    rv_step_lists by_step = rv_step_lists_new(graph, 1, forward_kernel, &trains);
    prefill_shapes seen = { { 0 }, FALSE, 0 };
    for (int32_t step = -1; step < (int32_t)by_step.slots - 1 && !trains; step++)
        if (rv_step_lists_get(&by_step, step, 0)->len) note_step(graph, state, rv_step_lists_get(&by_step, step, 0), &seen);
    rv_step_lists_free(&by_step);
    if (trains) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "the trace trains (GPU work in a backward or optimizer phase): decode "
                    "predicts inference from a prefill, a forward pass under torch.no_grad()");
        return FALSE;
    }
    if (state->steps == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "no Transformer block found: no repeated pattern of linear and "
                    "attention GEMMs in the forward, so no prefill to decode from");
        return FALSE;
    }
    /* S: given, else [B, S, H]'s, else the attention's query length */
    state->prompt = rv_params_integer(params, "prompt") ? rv_params_integer(params, "prompt")
                    : seen.linear.seq > 0 ? seen.linear.seq : seen.query;
    state->hidden = rv_params_integer(params, "hidden") ? rv_params_integer(params, "hidden") : seen.linear.hidden;
    int64_t b = rv_params_integer(params, "batch"), rows = seen.linear.tokens;
    if (b == 0) b = seen.linear.batch > 0 && seen.linear.seq == state->prompt ? seen.linear.batch
                    : state->prompt > 0 && rows % state->prompt == 0 ? rows / state->prompt : 0;
    state->batch = b;
    if (state->prompt <= 0 || state->batch <= 0 || state->hidden <= 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "the blocks' GEMMs do not say the prompt's length, the batch and the "
                    "hidden size (%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "): record the prefill with "
                    "record_shapes=True, or give prompt=, batch= and hidden=", state->prompt, state->batch, state->hidden);
        return FALSE;
    }
    return TRUE;
}

/* ---- re-costing ------------------------------------------------------------------ */

/* An attention GEMM's FLOPs and bytes ratios, decode over prefill. */
static gboolean attention_ratios(const rv_graph *graph, int32_t task, const rv_kernel_cost *cost, double s, double l,
                                 double *flops, double *bytes)
{
    rv_shapes shapes;
    if (!rv_shapes_of_task(graph, task, &shapes)) return FALSE;
    guint r0 = rv_shapes_rank(&shapes, 0), r1 = rv_shapes_rank(&shapes, 1);
    gboolean ok = r0 >= 2 && r1 >= 2;
    if (ok && cost->fused) {
        /* q, k, v of [.., S, d]: QK^T and AV over m queries and n keys */
        double m = (double)rv_shapes_extent(&shapes, 0, r0 - 2), n = (double)rv_shapes_extent(&shapes, 1, r1 - 2);
        double m2 = m == s ? 1 : m, n2 = n == s ? l : n;
        *flops = (m2 * n2) / MAX(m * n, 1);
        *bytes = (2 * m2 + 2 * n2) / MAX(2 * m + 2 * n, 1);
    } else if (ok) {
        double m = (double)rv_shapes_extent(&shapes, 0, r0 - 2), k = (double)rv_shapes_extent(&shapes, 0, r0 - 1);
        double n = (double)rv_shapes_extent(&shapes, 1, r1 - 1);
        double m2 = m == s ? 1 : m, n2 = n == s ? l : n, k2 = n2 == n && k == s ? l : k;
        *flops = (m2 * k2 * n2) / MAX(m * k * n, 1);
        *bytes = (m2 * k2 + k2 * n2 + m2 * n2) / MAX(m * k + k * n + m * n, 1);
    }
    rv_shapes_clear(&shapes);
    return ok;
}

static gboolean decode_change(const rv_graph *graph, int32_t task, const rv_kernel_cost *cost, rv_cost_change *change,
                              gpointer data)
{
    const decode_state *state = data;
    const rv_task *t = &g_array_index(graph->tasks, rv_task, task);
    if (t->phase != RV_PHASE_FORWARD || t->kind == RV_TASK_COMM || t->collective > 0 || (t->flags & RV_TASK_FLAG_INSERTED))
        return FALSE;
    if (cost->cls == RV_COST_UNKNOWN) return TRUE; /* counted by the plan, never changed */
    double s = (double)state->prompt, l = state->context;
    kernel_role role = (kernel_role)(GPOINTER_TO_INT(g_hash_table_lookup(state->roles, GINT_TO_POINTER(task))) - 1);
    if ((int)role < 0) role = cost->cls == RV_COST_GEMM ? LINEAR : cost->cls == RV_COST_ATTENTION ? ATTENTION : PER_TOKEN;
    double flops = 1 / s, bytes = 1 / s;
    if (role == SCORES) {
        flops = bytes = l / (s * s);
    } else if (role == ATTENTION) {
        if (!attention_ratios(graph, task, cost, s, l, &flops, &bytes)) flops = bytes = l / (s * s);
    } else if (role == LINEAR && cost->shaped && cost->bytes > 0) {
        int element = rv_cost_element_bytes_of_name(rv_strings_get(graph->strings, t->name), 4);
        rv_gemm_dims dims;
        double weights = rv_block_gemm_dims(graph, task, &dims) ? MIN((double)dims.weights * element, cost->bytes) : 0;
        bytes = (weights + (cost->bytes - weights) / s) / cost->bytes;
    }
    change->flops_factor = flops;
    change->bytes_factor = bytes;
    return TRUE;
}

/* GEMMs of a few tokens are GEMVs (cuBLAS's gemv kernels at one row). */
static void rename_gemvs(rv_graph *graph, decode_state *state)
{
    if (state->batch > 8) return;
    GHashTableIter iter;
    gpointer key, value;
    g_hash_table_iter_init(&iter, state->roles);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        if (GPOINTER_TO_INT(value) - 1 != LINEAR) continue;
        rv_task *task = rv_graph_task(graph, GPOINTER_TO_INT(key));
        char *name = g_strdup_printf("gemv (decode, %" G_GINT64_FORMAT " rows): %s", state->batch,
                                     rv_strings_get(graph->strings, task->name));
        task->name = rv_strings_intern(graph->strings, name);
        g_free(name);
        state->renamed++;
    }
}

/* Per block, the new token's key and value appended to the cache. */
static gboolean append_cache(rv_graph *graph, decode_state *state, const rv_cost_model *model, GError **error)
{
    rv_kernel_inserter in;
    rv_kernel_inserter_init(&in, graph, model, error);
    double bytes = 2.0 * 2.0 * (double)state->batch * (double)state->hidden * (double)state->dtype_bytes;
    for (guint i = 0; i < state->qkv->len; i++) {
        int32_t id = rv_kernel_inserter_add(&in, g_array_index(state->qkv, int32_t, i), FALSE,
                                            "kv cache append (copy of the new key and value)", bytes);
        if (id == -2) return FALSE;
        state->appended += id >= 0;
    }
    return TRUE;
}

/* ---- the plugin --------------------------------------------------------------------- */

static gboolean check_params(const rv_params *params, decode_state *state, GError **error)
{
    state->tokens = rv_params_integer(params, "tokens");
    if (state->tokens < 0 || state->tokens > (G_GINT64_CONSTANT(1) << 30) || rv_params_integer(params, "prompt") < 0 ||
        rv_params_integer(params, "batch") < 0 || rv_params_integer(params, "hidden") < 0 ||
        rv_params_integer(params, "dtype_bytes") < 0 || rv_params_integer(params, "dtype_bytes") > 16) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE,
                    "need 0 <= tokens <= 2^30, prompt, batch, hidden >= 0 and 0 <= dtype_bytes <= 16");
        return FALSE;
    }
    return TRUE;
}

static void write_notes(const decode_state *state, const rv_params *params, const rv_gpu *gpu, GString *notes)
{
    char *cache = rv_format_bytes(state->cache_bytes);
    g_string_append_printf(notes,
                           "    prefill: %u blocks, prompt S = %" G_GINT64_FORMAT ", batch B = %" G_GINT64_FORMAT
                           ", hidden H = %" G_GINT64_FORMAT "; the step is one token at context L = %.1f (%s of %"
                           G_GINT64_FORMAT "), on %s\n"
                           "    linear GEMMs on %" G_GINT64_FORMAT " tokens (weights read whole%s), attention over the "
                           "cache, other kernels per token; %u cache appends inserted\n"
                           "    KV cache of %" G_GINT64_FORMAT " tokens: %s (2 x %u blocks x B x (S + N) x H x %" G_GINT64_FORMAT
                           " bytes), held through the step; %" G_GINT64_FORMAT " tokens take about %" G_GINT64_FORMAT
                           " x the predicted step\n",
                           state->blocks, state->prompt, state->batch, state->hidden, state->context,
                           rv_params_string(params, "at"), state->tokens, gpu->id, state->batch,
                           state->renamed ? ", GEMVs" : "", state->appended, state->prompt + state->tokens, cache,
                           state->blocks, state->dtype_bytes, state->tokens, state->tokens);
    g_free(cache);
}

static gboolean decode_run(rv_graph *graph, const rv_params *params, decode_state *state, rv_plugin_output *output,
                           GError **error)
{
    if (!find_roles(graph, state, params, error)) return FALSE;
    const char *at = rv_params_string(params, "at");
    double s = (double)state->prompt, n = (double)state->tokens;
    state->context = strcmp(at, "first") == 0 ? s + 1 : strcmp(at, "last") == 0 ? s + n : s + (n + 1) / 2;
    rv_gpu_catalogue *catalogue = rv_gpu_catalogue_load_default(error);
    const rv_gpu *gpu = catalogue ? rv_gpu_of_graph(catalogue, graph, rv_params_string(params, "source_gpu"),
                                                    "source_gpu", error) : NULL;
    gboolean ok = gpu != NULL;
    if (ok) {
        rv_cost_model *model = rv_cost_model_new(graph, gpu, TRUE);
        state->dtype_bytes = rv_params_integer(params, "dtype_bytes");
        if (state->dtype_bytes == 0 && state->qkv->len)
            state->dtype_bytes = rv_cost_element_bytes_of_name(
                rv_strings_get(graph->strings, rv_graph_task(graph, g_array_index(state->qkv, int32_t, 0))->name), 4);
        if (state->dtype_bytes == 0) state->dtype_bytes = 4;
        rv_cost_plan *plan = rv_cost_model_plan(model, decode_change, state);
        ok = rv_cost_plan_apply(graph, plan, "the decode parameters (prompt, tokens)", error) &&
             append_cache(graph, state, model, error);
        if (ok) {
            double cache = 2.0 * state->blocks * (double)state->batch * (s + n) * (double)state->hidden * state->dtype_bytes;
            state->cache_bytes = (int64_t)MIN(cache, (double)RV_MAX_BYTES);
            rename_gemvs(graph, state);
            write_notes(state, params, gpu, output->notes);
            rv_cost_plan_describe(plan, "      ", output->notes);
            rv_memory_effect_add(graph, -1, RV_MEM_EFFECT_ACTIVATION_SCALE, 1 / s, 0);
            rv_memory_effect_add(graph, -1, RV_MEM_EFFECT_RESIDENT, (double)state->cache_bytes, 0);
        }
        rv_cost_plan_free(plan);
        rv_cost_model_free(model);
    }
    rv_gpu_catalogue_free(catalogue);
    return ok;
}

static gboolean decode_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    decode_state state = { 0 };
    if (!check_params(params, &state, error)) return FALSE;
    if (state.tokens == 0) {
        g_string_append(output->notes, "    tokens=0: no token generated, the prefill as recorded\n");
        return TRUE;
    }
    state.roles = g_hash_table_new(g_direct_hash, g_direct_equal);
    state.qkv = g_array_new(FALSE, FALSE, sizeof(int32_t));
    state.finder = rv_block_finder_new(graph);
    gboolean ok = decode_run(graph, params, &state, output, error);
    rv_block_finder_free(state.finder);
    g_hash_table_destroy(state.roles);
    g_array_unref(state.qkv);
    return ok;
}

/* The composition law (compose.h): the forward's kernels re-priced per
 * token, cache appends (with launch calls) inserted, GEMMs renamed GEMVs;
 * tensors per token plus the cache. */
static const rv_plugin_effects decode_effects = {
    .reads = RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD | RV_ASPECT_OPTIMIZER | RV_ASPECT_DEVICE,
    .reads_time = RV_ASPECT_FORWARD,
    .scales = RV_ASPECT_MEMORY,
    .reprices = RV_ASPECT_FORWARD,
    .rewrites = RV_ASPECT_FORWARD | RV_ASPECT_HOST | RV_ASPECT_STEPS,
    .order = RV_ORDER(RV_STAGE_MODEL, 15),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "decode",
    "generative inference: a step per token from a prefill trace, attention over the KV cache, GEMVs at small batch",
    decode_params, decode_apply, &decode_effects,
};
