/*
 * expert_parallel.c - a mixture of experts (GShard, Switch Transformer; the
 * MLSys memo's expert parallelism, the fused-collective paper's GEMM +
 * all-to-all) predicted from a dense Transformer's trace: each block's
 * FFN becomes E experts spread over G GPUs.
 *
 *   reverie whatif trace.json.gz --opt expert-parallel:experts=64,gpus=8
 *   reverie whatif trace.json.gz --opt expert-parallel:experts=8,gpus=8,top_k=1 --opt fused-collective
 *
 * MODEL.  The blocks are found as tp-allreduce finds them (blocks.h); a
 * block's FFN is its last two linear GEMMs, FC1 .. FC2, with every kernel
 * between (in the backward their gradients, reversed, open the block).  A
 * gated FFN (SwiGLU: gate, up, down) is taken as its last two.  Each GPU keeps
 * its T tokens (data parallel over the G GPUs) and holds E/G experts, each
 * the size of the dense FFN.  A router sends each token to its top_k
 * experts, each expert taking at most capacity x its fair share (tokens
 * over that are dropped, fewer are padded: buffers are sized so), so in a
 * balanced step a GPU's experts process T x top_k x capacity tokens:
 *   - the FFN's kernels are re-costed for top_k x capacity times the
 *     tokens on the kernel cost model (costmodel.h: FLOPs and bytes grow,
 *     the fixed cost stays);
 *   - before FC1: the router's GEMM (T x H x E: FC1's time above the fixed
 *     cost x E / F, F the FFN's width, plus the fixed cost), the permute
 *     that lays the tokens out by expert (a copy of their k x c x T x H
 *     elements, costed as streaming them in and out), then the dispatch
 *     all-to-all; after FC2: the combine all-to-all, then the un-permute
 *     (the top_k outputs weighted and summed: streaming them);
 *   - in the backward, the combine's gradient all-to-all before the FFN's
 *     gradients (after the un-permute's gradient) and the dispatch's after
 *     them (then the permute's and the router's gradients, two GEMMs);
 *   - each all-to-all moves k x c x T x H x dtype_bytes per GPU over G
 *     GPUs (comm.h: (G-1) alpha + (G-1)/G x bytes / B), on the NVLink of
 *     one node when G <= gpus_per_node, else at the inter-node bandwidth
 *     (the bottleneck of a flat all-to-all across nodes).  They are expert
 *     collectives of G ranks on the compute stream: the FFN waits for its
 *     tokens.  Combine follows FC2, so fused-collective then fuses it as
 *     GEMM + all-to-all;
 *   - memory (memory.h): a GPU holds E/G experts' FFN weights (with their
 *     gradients and optimizer state), and its FFN activations grow by
 *     top_k x capacity.
 * T x H comes from batch, seq and hidden when given, else from the
 * blocks' first linear GEMM's Input Dims (as tp-allreduce); F from
 * ffn_hidden, else FC1's shapes, else 4H (the Transformer's FFN width).
 * The router's and the permutes' gradients are costed like their forward
 * (the router's twice: two GEMMs).  Load imbalance beyond the capacity's
 * padding, dropped tokens and the all-to-all's dependence on how tokens
 * spread over nodes are not modelled.  The dense layers' data-parallel
 * all-reduce is ddp's to add (it would count the experts' gradients too,
 * an overestimate).  experts=1,gpus=1,top_k=1 (one expert: the dense FFN)
 * leaves the graph unchanged.
 */
#include "reverie/plugin.h"
#include "reverie/blocks.h"
#include "reverie/checked.h"
#include "reverie/comm.h"
#include "reverie/costmodel.h"
#include "reverie/error.h"
#include "reverie/gpus.h"
#include "reverie/inserted.h"
#include "reverie/memory.h"
#include "reverie/recost.h"
#include "reverie/stats.h"
#include "reverie/transform.h"
#include "reverie/units.h"
#include "reverie/validate.h"
#include <math.h>
#include <string.h>

static const rv_param_spec expert_params[] = {
    { "experts", RV_PARAM_INTEGER, "8", "experts", "E, experts per MoE layer, each the size of the dense FFN", NULL },
    { "gpus", RV_PARAM_INTEGER, "8", "GPUs", "G, GPUs the experts are spread over (E/G each; E a multiple of G)", NULL },
    { "top_k", RV_PARAM_INTEGER, "2", "experts", "experts each token goes to (GShard 2, Switch Transformer 1)", NULL },
    { "capacity", RV_PARAM_NUMBER, "1.25", "x", "capacity factor: an expert's buffer over its fair share of tokens "
      "(Switch Transformer trains at 1.25)", NULL },
    { "bandwidth", RV_PARAM_BANDWIDTH, "100Gbps", "B/s", "inter-node bandwidth per GPU and direction (IB EDR)", NULL },
    { "latency", RV_PARAM_DURATION, "5us", "ns", "inter-node per-message latency", NULL },
    { "intra_bandwidth", RV_PARAM_BANDWIDTH, "150GB/s", "B/s", "intra-node bandwidth (NVLink V100: 6 links x 25 GB/s)", NULL },
    { "intra_latency", RV_PARAM_DURATION, "2us", "ns", "intra-node per-message latency", NULL },
    { "gpus_per_node", RV_PARAM_INTEGER, "8", "GPUs", "GPUs sharing the intra-node link", NULL },
    { "efficiency", RV_PARAM_NUMBER, "1", "x", "bandwidth derating in (0,1]", NULL },
    { "dtype_bytes", RV_PARAM_INTEGER, "4", "bytes", "bytes per activation element (4: fp32, 2: fp16/bf16)", NULL },
    { "batch", RV_PARAM_INTEGER, "0", "", "B, micro-batch size (0: from the trace's shapes)", NULL },
    { "seq", RV_PARAM_INTEGER, "0", "", "S, sequence length (0: from the trace's shapes)", NULL },
    { "hidden", RV_PARAM_INTEGER, "0", "", "H, hidden size (0: from the trace's shapes)", NULL },
    { "ffn_hidden", RV_PARAM_INTEGER, "0", "", "F, the FFN's width (0: FC1's shapes, else 4H)", NULL },
    { "source_gpu", RV_PARAM_STRING, "", NULL, "the trace's GPU when its deviceProperties name none the catalogue knows", NULL },
    { NULL }
};

/* Where each inserted piece goes and how it is costed. */
typedef struct {
    int32_t first, last;   /* the FFN's first and last kernel in its phase's order (forward: FC1, FC2) */
    int32_t phase;         /* RV_PHASE_FORWARD or RV_PHASE_BACKWARD */
} ffn_span;

typedef struct {
    int64_t experts, gpus, top_k, dtype_bytes;
    double capacity;
    rv_link link;
    int64_t tokens_x_hidden;   /* T x H */
    int64_t hidden, ffn_width; /* H, F */
    int64_t message_bytes;     /* per GPU per all-to-all */
    int64_t all_to_all_ns;
    GArray *spans;             /* ffn_span */
    GHashTable *expert_work;   /* task ids (GINT) of the FFNs' kernels */
    GArray *forward_calls;     /* the forward FFN kernels (memory effects) */
    GArray *forward_weights;   /* of these, the linear GEMMs */
    GArray *inputs, *hiddens;  /* int64 per block, from shapes */
    GArray *widths;            /* int64 per block: FC1's output width, from shapes */
    guint blocks[2], steps, inserted_kernels, all_to_alls;
    guint forward_linear;      /* linear GEMMs of a forward block */
    rv_block_finder *finder;
    GHashTable *dims;          /* Input Dims string id + 1 -> its rv_gemm_dims, or NULL where they give none */
} expert_state;

/* ---- finding the FFNs --------------------------------------------------------- */

/* Block b's linear GEMMs (token positions), in order. */
static GArray *linear_tokens(const rv_blocks *blocks, guint b)
{
    GArray *linear = g_array_new(FALSE, FALSE, sizeof(guint));
    for (guint i = rv_blocks_from(blocks, b); i < rv_blocks_to(blocks, b); i++)
        if (blocks->letters->str[i] == 'L') g_array_append_val(linear, i);
    return linear;
}

/*
 * The FFN of block b, as token positions [*from, *to]: in the forward its
 * last two linear GEMMs (FC1, FC2); in the backward, which runs the MLP's
 * gradients first, its first linear GEMMs, as many as the forward's two
 * make there (each linear layer's gradients are one or two GEMM kernels:
 * the backward's linear GEMMs over the forward's).  FALSE for a block of
 * fewer than three linear GEMMs (no attention projection besides an MLP).
 */
static gboolean ffn_tokens(const rv_blocks *blocks, guint b, gboolean forward, expert_state *state, guint *from,
                           guint *to)
{
    GArray *linear = linear_tokens(blocks, b);
    gboolean ok = FALSE;
    if (forward && linear->len >= 3) {
        state->forward_linear = linear->len;
        *from = g_array_index(linear, guint, linear->len - 2);
        *to = g_array_index(linear, guint, linear->len - 1);
        ok = TRUE;
    } else if (!forward && state->forward_linear >= 3) {
        guint per_layer = MAX(1, (linear->len + state->forward_linear / 2) / state->forward_linear);
        guint take = MIN(2 * per_layer, linear->len);
        ok = take >= 2;
        if (ok) {
            *from = g_array_index(linear, guint, 0);
            *to = g_array_index(linear, guint, take - 1);
        }
    }
    g_array_unref(linear);
    return ok;
}

/* rv_block_gemm_dims of a task, worked out once per distinct Input Dims
 * (they are all it reads): every step's blocks repeat the same few
 * shapes, and parsing them was a twelfth of the rewrite. */
static gboolean gemm_dims(const rv_graph *graph, expert_state *state, int32_t task, rv_gemm_dims *dims)
{
    gpointer key = GINT_TO_POINTER(g_array_index(graph->tasks, rv_task, task).input_dims + 1);
    rv_gemm_dims *known;
    if (!g_hash_table_lookup_extended(state->dims, key, NULL, (gpointer *)&known)) {
        rv_gemm_dims found;
        known = rv_block_gemm_dims(graph, task, &found) ? g_memdup2(&found, sizeof found) : NULL;
        g_hash_table_insert(state->dims, key, known);
    }
    if (known) *dims = *known;
    else memset(dims, 0, sizeof *dims);
    return known != NULL;
}

/* Note the FFN of block b in one phase: its kernels, FC1 .. FC2 and every one between. */
static void note_ffn(rv_graph *graph, expert_state *state, const rv_blocks *blocks, const GArray *kernels, guint b,
                     gboolean forward)
{
    guint from, to;
    if (!ffn_tokens(blocks, b, forward, state, &from, &to)) return;
    guint first = blocks->positions[from], last = blocks->positions[to];
    ffn_span span = { g_array_index(kernels, int32_t, first), g_array_index(kernels, int32_t, last),
                      forward ? RV_PHASE_FORWARD : RV_PHASE_BACKWARD };
    g_array_append_val(state->spans, span);
    for (guint k = first; k <= last; k++) {
        int32_t id = g_array_index(kernels, int32_t, k);
        g_hash_table_add(state->expert_work, GINT_TO_POINTER(id));
        if (!forward) continue;
        g_array_append_val(state->forward_calls, id);
        gboolean token = FALSE;
        for (guint i = from; i <= to; i++) token = token || (blocks->letters->str[i] == 'L' && rv_blocks_token(blocks, i) == id);
        if (token && !rv_block_gemm_batched(graph, id)) g_array_append_val(state->forward_weights, id);
    }
    if (!forward) return;
    rv_gemm_dims dims;
    if (!gemm_dims(graph, state, span.first, &dims)) return;
    int64_t elements = dims.tokens * dims.hidden;
    g_array_append_val(state->inputs, elements);
    g_array_append_val(state->hiddens, dims.hidden);
    if (dims.out > 0) g_array_append_val(state->widths, dims.out);
}

static void find_ffns(rv_graph *graph, expert_state *state)
{
    rv_step_lists by_step = rv_step_lists_new(graph, RV_KERNEL_PHASE_LISTS, rv_kernel_by_phase, NULL);
    for (int32_t step = 0; step < (int32_t)by_step.slots - 1; step++) {
        if (rv_step_lists_get(&by_step, step, RV_PHASE_FORWARD)->len == 0) continue;
        guint found[2] = { 0, 0 };
        for (int p = 0; p < 2; p++) {
            GArray *kernels = rv_step_lists_get(&by_step, step, (guint)p);
            if (kernels->len == 0 || (p == 1 && found[0] == 0)) continue;
            rv_blocks blocks;
            rv_blocks_find(state->finder, kernels, &blocks);
            found[p] = rv_blocks_count(&blocks);
            for (guint b = 0; b < found[p]; b++) note_ffn(graph, state, &blocks, kernels, b, p == 0);
            rv_blocks_clear(&blocks);
        }
        state->blocks[0] += found[0];
        state->blocks[1] += found[1];
        state->steps += found[0] > 0;
    }
    rv_step_lists_free(&by_step);
}

/* ---- sizes and costs ---------------------------------------------------------------- */

static gboolean check_params(const rv_params *params, expert_state *state, GError **error)
{
    state->experts = rv_params_integer(params, "experts");
    state->gpus = rv_params_integer(params, "gpus");
    state->top_k = rv_params_integer(params, "top_k");
    state->capacity = rv_params_number(params, "capacity");
    state->dtype_bytes = rv_params_integer(params, "dtype_bytes");
    double efficiency = rv_params_number(params, "efficiency");
    int64_t per_node = rv_params_integer(params, "gpus_per_node");
    if (state->experts < 1 || state->experts > 65536 || state->gpus < 1 || state->gpus > 65536 || state->top_k < 1 ||
        state->top_k > state->experts || !(state->capacity > 0 && state->capacity <= 64) || state->dtype_bytes < 1 ||
        state->dtype_bytes > 16 || !(efficiency > 0 && efficiency <= 1) || per_node < 1 || per_node > 65536 ||
        rv_params_integer(params, "batch") < 0 || rv_params_integer(params, "seq") < 0 ||
        rv_params_integer(params, "hidden") < 0 || rv_params_integer(params, "ffn_hidden") < 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE,
                    "need 1 <= experts, gpus <= 65536, 1 <= top_k <= experts, 0 < capacity <= 64, 1 <= dtype_bytes <= 16, "
                    "0 < efficiency <= 1, gpus_per_node >= 1 and batch, seq, hidden, ffn_hidden >= 0");
        return FALSE;
    }
    if (state->experts % state->gpus != 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE,
                    "experts=%" G_GINT64_FORMAT " cannot be spread evenly over gpus=%" G_GINT64_FORMAT
                    ": give a number of experts that is a multiple of the GPUs", state->experts, state->gpus);
        return FALSE;
    }
    gboolean inside = state->gpus <= per_node;
    state->link = rv_link_make(rv_params_bandwidth(params, inside ? "intra_bandwidth" : "bandwidth"),
                               rv_params_duration_ns(params, inside ? "intra_latency" : "latency"), efficiency);
    return rv_link_check(&state->link, error);
}

/* T x H, H and F from the parameters, else from the FFNs' shapes. */
static gboolean sizes(const rv_graph *graph, const rv_params *params, expert_state *state, GError **error)
{
    int64_t b = rv_params_integer(params, "batch"), s = rv_params_integer(params, "seq");
    int64_t h = rv_params_integer(params, "hidden"), f = rv_params_integer(params, "ffn_hidden");
    gboolean given = b > 0 && s > 0 && h > 0;
    int64_t elements = 0;
    gboolean fits = given ? rv_checked_mul(b, s, &elements) && rv_checked_mul(elements, h, &elements) : TRUE;
    if (!given) elements = rv_median_int64(state->inputs, 0);
    state->tokens_x_hidden = elements;
    state->hidden = h > 0 ? h : rv_median_int64(state->hiddens, 0);
    state->ffn_width = f > 0 ? f : state->widths->len ? rv_median_int64(state->widths, 0) : 4 * state->hidden;
    double bytes = (double)elements * (double)state->top_k * state->capacity * (double)state->dtype_bytes;
    if (!fits || bytes > (double)RV_MAX_BYTES) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "tokens x hidden x top_k x capacity x dtype_bytes is more than 2^53 bytes");
        return FALSE;
    }
    if (elements <= 0 || state->hidden <= 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "found %u blocks but the trace has no shapes on their FFN's GEMMs: give batch=, seq= and hidden= "
                    "(each all-to-all moves B*S*H*top_k*capacity*dtype_bytes)", state->blocks[0] / MAX(state->steps, 1));
        return FALSE;
    }
    state->message_bytes = (int64_t)llround(bytes);
    state->all_to_all_ns = rv_collective_time_ns(RV_COLL_ALL_TO_ALL, state->message_bytes, (int)state->gpus, &state->link);
    return rv_task_duration_from(graph, -1, (double)state->all_to_all_ns,
                                 "the expert-parallel parameters (bandwidth, latency, batch, seq, hidden)",
                                 &state->all_to_all_ns, error);
}

static gboolean tokens_grow(const rv_graph *graph, int32_t task, const rv_kernel_cost *cost, rv_cost_change *change,
                            gpointer data)
{
    const expert_state *state = data;
    (void)graph;
    if (!g_hash_table_contains(state->expert_work, GINT_TO_POINTER(task))) return FALSE;
    if (cost->cls == RV_COST_UNKNOWN) return TRUE; /* counted by the plan: like its class */
    change->flops_factor = change->bytes_factor = (double)state->top_k * state->capacity;
    return TRUE;
}

/* The FFNs' kernels re-costed for top_k x capacity times the tokens, on
 * the model of the graph as it now is (the inserted pieces counted in its
 * fixed cost and calibration). */
static gboolean recost_ffns(rv_graph *graph, expert_state *state, const rv_cost_model *model, GString *notes,
                            GError **error)
{
    const rv_gpu *gpu = rv_cost_model_source(model);
    rv_cost_plan *plan = rv_cost_model_plan(model, tokens_grow, state);
    gboolean ok = rv_cost_plan_apply(graph, plan, "the expert-parallel top_k and capacity", error);
    if (ok) {
        g_string_append_printf(notes, "    FFN kernels re-costed for %.3g x the tokens on %s:\n",
                               (double)state->top_k * state->capacity, gpu->id);
        rv_cost_plan_describe(plan, "      ", notes);
    }
    rv_cost_plan_free(plan);
    return ok;
}

/* ---- inserting the router, permutes and all-to-alls --------------------------------------- */

static int32_t insert_all_to_all(rv_graph *graph, expert_state *state, int32_t after, const char *name, GError **error)
{
    rv_task task = *rv_graph_task(graph, after);
    task.kind = RV_TASK_COMM;
    task.flags = 0;
    task.name = rv_strings_intern(graph->strings, name);
    task.op = task.layer;
    task.duration_ns = state->all_to_all_ns;
    task.host_overhead_ns = 0;
    task.bytes = state->message_bytes;
    task.correlation = -1;
    task.input_dims = -1;
    rv_collective_info info = { state->message_bytes, -1, rv_strings_intern(graph->strings, "expert parallel"),
                                (int32_t)state->gpus, -1, -1, 1, RV_COLL_ALL_TO_ALL, RV_PARALLEL_EXPERT,
                                RV_MATCH_NONE, 1 };
    task.collective = rv_graph_add_collective(graph, &info);
    rv_insert_spec spec = { task, after, rv_graph_launch_of(graph, after) };
    int32_t id = rv_transform_insert(graph, &spec, error);
    if (id >= 0) state->all_to_alls++;
    return id;
}

/* A kernel next to `at` (before or after), or -1 with *error on failure. */
static int32_t add_kernel(rv_kernel_inserter *in, expert_state *state, int32_t at, gboolean before, const char *name,
                          int64_t duration_ns)
{
    int32_t id = rv_kernel_inserter_add_lasting(in, at, before, name, duration_ns);
    if (id >= 0) state->inserted_kernels++;
    return id == -1 ? -3 : id;  /* -1: no place (no launch call): a failure here too */
}

typedef struct {
    int64_t router_ns, permute_ns;
} piece_costs;

/* Router before FC1, then the permute and the dispatch; combine and the
 * un-permute after FC2.  Kernels go next to kernels (an inserted kernel
 * takes its neighbour's tags, a collective's included), and an all-to-all
 * is spliced in after its producer, ahead of what was put there. */
static gboolean insert_forward(rv_graph *graph, expert_state *state, rv_kernel_inserter *in, const ffn_span *span,
                               const piece_costs *costs, GError **error)
{
    if (add_kernel(in, state, span->first, TRUE, "moe router (gate GEMM, softmax, top-k)", costs->router_ns) < 0) return FALSE;
    int32_t permute = add_kernel(in, state, span->first, TRUE, "moe permute (tokens by expert)", costs->permute_ns);
    if (permute < 0 || insert_all_to_all(graph, state, permute, "all-to-all (moe dispatch)", error) < 0) return FALSE;
    if (add_kernel(in, state, span->last, FALSE, "moe unpermute (weighted sum of top-k)", costs->permute_ns) < 0)
        return FALSE;
    return insert_all_to_all(graph, state, span->last, "all-to-all (moe combine)", error) >= 0;
}

/* The same in reverse: the un-permute's gradient and the combine's before
 * the FFN's gradients; the dispatch's, the permute's and the router's after. */
static gboolean insert_backward(rv_graph *graph, expert_state *state, rv_kernel_inserter *in, const ffn_span *span,
                                const piece_costs *costs, GError **error)
{
    int32_t unpermute = add_kernel(in, state, span->first, TRUE, "moe unpermute backward", costs->permute_ns);
    if (unpermute < 0 || insert_all_to_all(graph, state, unpermute, "all-to-all (moe combine backward)", error) < 0)
        return FALSE;
    if (add_kernel(in, state, span->last, FALSE, "moe router backward", 2 * costs->router_ns) < 0 ||
        add_kernel(in, state, span->last, FALSE, "moe permute backward", costs->permute_ns) < 0)
        return FALSE;
    return insert_all_to_all(graph, state, span->last, "all-to-all (moe dispatch backward)", error) >= 0;
}

/* The router: FC1's time above the fixed cost (its median over the
 * forward FFNs) x E / F, plus the fixed cost; the permutes: k x c x T x H
 * elements in and out. */
static gboolean cost_pieces(rv_graph *graph, const expert_state *state, const rv_cost_model *model, piece_costs *costs,
                            GError **error)
{
    GArray *fc1 = g_array_new(FALSE, FALSE, sizeof(int64_t));
    for (guint i = 0; i < state->spans->len; i++) {
        const ffn_span *span = &g_array_index(state->spans, ffn_span, i);
        if (span->phase == RV_PHASE_FORWARD) g_array_append_val(fc1, rv_graph_task(graph, span->first)->duration_ns);
    }
    double fixed = (double)rv_cost_model_fixed_ns(model), fc1_ns = (double)rv_median_int64(fc1, 0);
    g_array_unref(fc1);
    double router = fixed + MAX(0.0, fc1_ns - fixed) * (double)state->experts / (double)MAX(state->ffn_width, 1);
    double elements = (double)state->tokens_x_hidden * (double)state->top_k * state->capacity;
    double permute = rv_cost_model_streaming_ns(model, 2 * elements * (double)state->dtype_bytes);
    return rv_task_duration_from(graph, -1, router, "the expert-parallel router (experts, ffn_hidden)", &costs->router_ns,
                                 error) &&
           rv_task_duration_from(graph, -1, permute, "the expert-parallel permute (batch, seq, hidden, top_k, capacity)",
                                 &costs->permute_ns, error);
}

static gboolean insert_pieces(rv_graph *graph, expert_state *state, const rv_cost_model *model, GError **error)
{
    rv_kernel_inserter in;
    rv_kernel_inserter_init(&in, graph, model, error);
    piece_costs costs;
    gboolean ok = cost_pieces(graph, state, model, &costs, error);
    for (guint i = 0; ok && i < state->spans->len; i++) {
        const ffn_span *span = &g_array_index(state->spans, ffn_span, i);
        ok = span->phase == RV_PHASE_FORWARD ? insert_forward(graph, state, &in, span, &costs, error)
                                             : insert_backward(graph, state, &in, span, &costs, error);
        if (!ok && error && *error == NULL)
            g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "an FFN's kernel has no launch call to put the router's next to");
    }
    return ok;
}

/* The router, permutes and all-to-alls inserted, costed on the model of
 * the graph as recorded; then the FFNs re-costed on the model of the graph
 * with them.  Inserting only adds tasks and edges, so that second model is
 * the first extended (costmodel.h), not built again: the same model. */
static gboolean insert_and_recost(rv_graph *graph, expert_state *state, const rv_gpu *gpu, GString *notes,
                                  GError **error)
{
    rv_cost_model *model = rv_cost_model_new(graph, gpu, TRUE);
    gboolean ok = insert_pieces(graph, state, model, error);
    if (ok) rv_cost_model_extend(model);
    ok = ok && recost_ffns(graph, state, model, notes, error);
    rv_cost_model_free(model);
    return ok;
}

/* ---- the plugin ----------------------------------------------------------------------- */

static void write_notes(const expert_state *state, const rv_gpu *gpu, GString *notes)
{
    char *size = rv_format_bytes(state->message_bytes), *each = rv_format_duration(state->all_to_all_ns);
    char *bw = rv_format_bandwidth(state->link.bandwidth_Bps);
    g_string_append_printf(notes,
                           "    found %u Transformer blocks per step in the forward, %u in the backward (%u steps): "
                           "each FFN becomes %" G_GINT64_FORMAT " experts over %" G_GINT64_FORMAT " GPUs (%" G_GINT64_FORMAT
                           " each), top-%" G_GINT64_FORMAT ", capacity %.3g; F = %" G_GINT64_FORMAT ", on %s\n"
                           "    inserted %u router, permute and un-permute kernels and %u all-to-alls of %s, %s each "
                           "(over %" G_GINT64_FORMAT " GPUs at %s)\n",
                           state->steps ? state->blocks[0] / state->steps : 0,
                           state->steps ? state->blocks[1] / state->steps : 0, state->steps, state->experts,
                           state->gpus, state->experts / state->gpus, state->top_k, state->capacity, state->ffn_width,
                           gpu->id, state->inserted_kernels, state->all_to_alls, size, each, state->gpus, bw);
    g_free(size); g_free(each); g_free(bw);
}

/* What a GPU holds (memory.h): E/G experts' weights, k x c the FFN's activations. */
static void note_memory(rv_graph *graph, const expert_state *state)
{
    rv_memory_effect_add_for_tasks(graph, state->forward_weights, RV_MEM_EFFECT_PARAM_SCALE,
                                   (double)state->experts / (double)state->gpus, 0);
    rv_memory_effect_add_for_tasks(graph, state->forward_calls, RV_MEM_EFFECT_ACTIVATION_SCALE,
                                   (double)state->top_k * state->capacity, 0);
}

static gboolean expert_run(rv_graph *graph, const rv_params *params, expert_state *state, rv_plugin_output *output,
                           GError **error)
{
    find_ffns(graph, state);
    if (state->steps == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "no Transformer block found: no repeated pattern of linear and attention GEMMs in any step's forward, "
                    "so no FFN to split into experts");
        return FALSE;
    }
    if (state->spans->len == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "the blocks found have fewer than three linear GEMMs each: no "
                    "FFN (FC1 .. FC2) beside the attention's projections to split into experts");
        return FALSE;
    }
    if (!sizes(graph, params, state, error)) return FALSE;
    rv_gpu_catalogue *catalogue = rv_gpu_catalogue_load_default(error);
    const rv_gpu *gpu = catalogue ? rv_gpu_of_graph(catalogue, graph, rv_params_string(params, "source_gpu"),
                                                    "source_gpu", error) : NULL;
    gboolean ok = gpu != NULL && insert_and_recost(graph, state, gpu, output->notes, error);
    if (ok) {
        note_memory(graph, state);
        graph->world_size = MAX(rv_graph_world_size(graph), state->gpus);
        GString *head = g_string_new(NULL);
        write_notes(state, gpu, head);
        g_string_prepend(output->notes, head->str);
        g_string_free(head, TRUE);
    }
    rv_gpu_catalogue_free(catalogue);
    return ok;
}

static gboolean expert_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    expert_state state = { 0 };
    if (!check_params(params, &state, error)) return FALSE;
    if (state.experts == 1 && state.gpus == 1) {
        g_string_append(output->notes, "    experts=1, gpus=1: the dense FFN as it is, graph unchanged\n");
        return TRUE;
    }
    state.spans = g_array_new(FALSE, FALSE, sizeof(ffn_span));
    state.expert_work = g_hash_table_new(g_direct_hash, g_direct_equal);
    state.forward_calls = g_array_new(FALSE, FALSE, sizeof(int32_t));
    state.forward_weights = g_array_new(FALSE, FALSE, sizeof(int32_t));
    state.inputs = g_array_new(FALSE, FALSE, sizeof(int64_t));
    state.hiddens = g_array_new(FALSE, FALSE, sizeof(int64_t));
    state.widths = g_array_new(FALSE, FALSE, sizeof(int64_t));
    state.finder = rv_block_finder_new(graph);
    state.dims = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    gboolean ok = expert_run(graph, params, &state, output, error);
    rv_block_finder_free(state.finder);
    g_hash_table_destroy(state.dims);
    g_array_unref(state.spans);
    g_hash_table_destroy(state.expert_work);
    g_array_unref(state.forward_calls);
    g_array_unref(state.forward_weights);
    g_array_unref(state.inputs);
    g_array_unref(state.hiddens);
    g_array_unref(state.widths);
    return ok;
}

/* The composition law (compose.h): the FFNs' kernels re-costed and routers,
 * permutes and expert all-to-alls inserted around them (with launch calls);
 * experts' weights spread; the world at least the expert group. */
static const rv_plugin_effects expert_parallel_effects = {
    .reads = RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD | RV_ASPECT_DEVICE | RV_ASPECT_CLUSTER,
    .reads_time = RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD,
    .scales = RV_ASPECT_MEMORY,
    .reprices = RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD,
    .rewrites = RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD | RV_ASPECT_HOST | RV_ASPECT_OTHER_COMM | RV_ASPECT_WEIGHTS |
                RV_ASPECT_CLUSTER,
    .order = RV_ORDER(RV_STAGE_PARALLEL, 15),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "expert-parallel",
    "mixture of experts: each block's FFN becomes E experts over G GPUs, router, dispatch and combine all-to-alls",
    expert_params, expert_apply, &expert_parallel_effects,
};
