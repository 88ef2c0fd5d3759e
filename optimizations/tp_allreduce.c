/*
 * tp_allreduce.c - Megatron-style tensor parallelism predicted from a
 * single-GPU trace, after "Tale of Two Cs" (Pati et al., equations 1-9).
 *
 *   reverie whatif trace.json.gz --opt 'tp-allreduce:degree=4'
 *   reverie whatif trace.json.gz --opt 'tp-allreduce:degree=8,batch=8,seq=512,hidden=1024'
 *
 * The model (per Transformer block, TP = degree), as Megatron-LM splits it:
 *   - every GEMM of the block - QKV, attention output projection, FC1, FC2
 *     and the attention GEMMs - does 1/TP of the work (eqs 1-3), so its
 *     kernels' durations divide by degree; so do the kernels between the
 *     block's first and last attention GEMM (scaling, masking, softmax,
 *     dropout over 1/TP of the heads), its activations (GeLU over 1/TP of
 *     FC1's columns) and the optimizer's kernels (each rank updates 1/TP of
 *     the weights).  Norms, residual adds and the dropouts after the
 *     row-parallel GEMMs are replicated and stay as they are;
 *   - four serialized all-reduces of B*S*H*dtype_bytes bytes (eq 5): in the
 *     forward after the attention output projection and after FC2, in the
 *     backward after FC1's and after QKV's input gradient.  Each is a ring
 *     all-reduce over `degree` GPUs (comm.h) inserted on the compute stream
 *     right after its GEMM, so the next kernel waits for it;
 *   - with embedding=vocab, the vocabulary split (VocabParallelEmbedding):
 *     kernels of operators named embedding (the lookup and its gradient)
 *     and the output layer (the GEMMs and softmax after the last block in
 *     the forward, before the first in the backward) divide by degree, when
 *     the forward has an embedding lookup before its blocks; an all-reduce
 *     follows the lookup and the head's input gradient.  The parallel
 *     cross-entropy's small all-reduces (a few floats per token) are left out.
 *
 * Finding the blocks: blocks.h, from the repeats of the kernel pattern.
 *
 * Placement inside a block is approximate: a block's linear GEMMs are cut
 * in half (attention part, MLP part) and an all-reduce follows the last
 * linear GEMM of each half.  As all-reduces are serialized on the stream,
 * the position moves the prediction only where the CPU limits the step.
 *
 * B*S*H comes from batch, seq and hidden when all three are given, else
 * from the Input Dims of each block's first linear GEMM (its activation
 * input is B*S x H; addmm's is input 1, the others' input 0), the median
 * over blocks.  degree=1 leaves the graph unchanged.
 *
 * Each inserted all-reduce is a tensor-parallel collective of `degree`
 * ranks (graph.h), so that ddp afterwards leaves it alone and divides the
 * gradients by the degree.  Data-parallel all-reduces already in the graph
 * (recorded, or inserted by ddp before) now move 1/degree of their payload:
 * each is re-costed over this plugin's link (recost.h), time x
 * model(S / degree) / model(S), so either order of ddp and tp-allreduce
 * gives about the same step.  A graph that is tensor parallel already (its
 * own or inserted tensor-parallel collectives) is refused: slicing its
 * GEMMs again would count the degree twice.
 */
#include "reverie/plugin.h"
#include "reverie/blocks.h"
#include "reverie/checked.h"
#include "reverie/validate.h"
#include "reverie/comm.h"
#include "reverie/error.h"
#include "reverie/memory.h"
#include "reverie/recost.h"
#include "reverie/stats.h"
#include "reverie/transform.h"
#include "reverie/units.h"
#include <string.h>

static const rv_param_spec tp_params[] = {
    { "degree", RV_PARAM_INTEGER, "8", "GPUs", "tensor-parallel degree (GPUs sharing each layer)", NULL },
    { "bandwidth", RV_PARAM_BANDWIDTH, "150GB/s", "B/s",
      "per-GPU link bandwidth per direction (NVLink V100: 6 links x 25 GB/s)", NULL },
    { "latency", RV_PARAM_DURATION, "2us", "ns", "per-message latency", NULL },
    { "efficiency", RV_PARAM_NUMBER, "1", "x", "bandwidth derating in (0,1]", NULL },
    { "dtype_bytes", RV_PARAM_INTEGER, "4", "bytes", "bytes per activation element (4: fp32, 2: fp16/bf16)", NULL },
    { "batch", RV_PARAM_INTEGER, "0", "", "B, micro-batch size (0: from the trace's shapes)", NULL },
    { "seq", RV_PARAM_INTEGER, "0", "", "S, sequence length (0: from the trace's shapes)", NULL },
    { "hidden", RV_PARAM_INTEGER, "0", "", "H, hidden size (0: from the trace's shapes)", NULL },
    { "embedding", RV_PARAM_CHOICE, "vocab", NULL,
      "vocab: the embedding and output layer split by vocabulary (Megatron-LM's VocabParallelEmbedding), "
      "an all-reduce after the lookup and after the head's input gradient; replicated: both whole on every GPU",
      "vocab|replicated" },
    { NULL }
};

/* ---- one phase of one step ---------------------------------------------- */

typedef struct {
    int64_t degree;
    int64_t message_bytes;    /* B*S*H*dtype_bytes; 0 until known */
    int64_t allreduce_ns;
    rv_link link;
    GArray *activation_elements; /* per forward block, from shapes */
    guint blocks[2];          /* forward, backward blocks found (all steps) */
    guint steps;
    guint allreduces;
    guint sliced;
    guint between;                        /* sliced kernels of the attention core and activations */
    guint softmax, activation, dropout;   /* of these: softmaxes, activations, dropouts */
    guint embedding, head;                /* vocabulary-parallel: embedding and output-layer kernels */
    gboolean vocabulary;                  /* embedding=vocab */
    gboolean vocabulary_found;            /* this step's forward has an embedding lookup before its blocks */
    rv_block_finder *finder;
} tp_state;

static gboolean insert_allreduce(rv_graph *graph, tp_state *state, int32_t after, GError **error)
{
    rv_task task = *rv_graph_task(graph, after);
    task.kind = RV_TASK_COMM;
    task.flags = 0;
    task.name = rv_strings_intern(graph->strings, "ncclAllReduce (tensor parallel)");
    task.op = task.layer;
    task.duration_ns = state->allreduce_ns;
    task.host_overhead_ns = 0;
    task.bytes = state->message_bytes;
    task.correlation = -1;
    task.input_dims = -1;
    rv_collective_info info = { state->message_bytes, -1, rv_strings_intern(graph->strings, "tensor parallel"),
                                (int32_t)state->degree, -1, -1, 1, RV_COLL_ALLREDUCE_RING, RV_PARALLEL_TENSOR,
                                RV_MATCH_NONE, 1 };
    task.collective = rv_graph_add_collective(graph, &info);
    rv_insert_spec spec = { task, after, rv_graph_launch_of(graph, after) };
    if (rv_transform_insert(graph, &spec, error) < 0) return FALSE;
    state->allreduces++;
    return TRUE;
}

/* What one phase of one step slices, as Megatron-LM splits a block and
 * its vocabulary. */
typedef struct {
    GArray *sliced;       /* kernels whose work divides by the degree */
    GArray *weights;      /* of these, calls whose parameters split: linear GEMMs, the embedding table */
    GArray *activations;  /* of these, calls whose activations split: attention GEMMs, softmax, activation, dropout */
} phase_cut;

/* What a rank holds of what is sliced (memory.h): 1/degree of each linear
 * GEMM's and the embedding's weights (and so of their gradients and
 * optimizer state), and of the activations of the attention GEMMs,
 * softmaxes, attention dropouts and the MLP's activation (each rank has
 * 1/degree of the heads and of FC1's columns).  The linear layers' inputs
 * and the block's norms and other dropouts are replicated on every rank,
 * and stay (Korthikanti et al. 2022 count 10 of a layer's 34 s*b*h
 * activation bytes as replicated; this keeps all of a linear layer's
 * inputs, an upper bound). */
static void shard_tensors(rv_graph *graph, const phase_cut *cut, int64_t degree)
{
    rv_memory_effect_add_for_tasks(graph, cut->weights, RV_MEM_EFFECT_PARAM_SCALE, 1.0 / (double)degree, 0);
    rv_memory_effect_add_for_tasks(graph, cut->activations, RV_MEM_EFFECT_ACTIVATION_SCALE, 1.0 / (double)degree, 0);
}

static void cut_add(phase_cut *cut, int32_t id, gboolean weights)
{
    g_array_append_val(cut->sliced, id);
    g_array_append_val(weights ? cut->weights : cut->activations, id);
}

static void count_sliced(tp_state *state, const rv_task *task, char letter)
{
    state->softmax += letter == 'S';
    state->activation += letter == 'G';
    state->dropout += (rv_block_finder_traits(state->finder, task) & RV_BLOCK_TRAIT_DROPOUT) != 0;
    state->between++;
}

/*
 * A block as Megatron-LM splits it: each GPU has 1/degree of the attention
 * heads and of FC1's columns.  So every GEMM of the block, everything
 * between its first and last attention GEMM (the scores' scaling, masking,
 * softmax and dropout, per head) and its activations (GeLU on FC1's
 * columns) do 1/degree of the work.  The norms, residual adds and the
 * dropouts after the row-parallel GEMMs' all-reduces are replicated and
 * stay.  In the backward the same kernels run in reverse order.  Also
 * notes where the all-reduces go and the first linear GEMM's activation size.
 */
static void cut_blocks(rv_graph *graph, tp_state *state, const rv_blocks *blocks, const GArray *kernels,
                       gboolean forward, phase_cut *cut, GArray *cuts)
{
    const char *letters = blocks->letters->str;
    for (guint b = 0; b < rv_blocks_count(blocks); b++) {
        guint from = rv_blocks_from(blocks, b), to = rv_blocks_to(blocks, b);
        guint first_a = to, last_a = from;
        for (guint i = from; i < to; i++) {
            int32_t id = rv_blocks_token(blocks, i);
            if (letters[i] == 'L' || letters[i] == 'A') cut_add(cut, id, letters[i] == 'L' && !rv_block_gemm_batched(graph, id));
            if (letters[i] == 'G') {
                cut_add(cut, id, FALSE);
                count_sliced(state, rv_graph_task(graph, id), letters[i]);
            }
            if (letters[i] == 'A') { first_a = MIN(first_a, i); last_a = i; }
        }
        guint token = first_a + 1;
        for (guint k = first_a < last_a ? blocks->positions[first_a] + 1 : 1;
             first_a < last_a && k < blocks->positions[last_a]; k++) {
            int32_t id = g_array_index(kernels, int32_t, k);
            gboolean is_token = token < blocks->ids->len && rv_blocks_token(blocks, token) == id;
            char letter = is_token ? letters[token++] : 0;
            if (letter == 'L' || letter == 'A' || letter == 'G') continue; /* counted above */
            cut_add(cut, id, FALSE);
            count_sliced(state, rv_graph_task(graph, id), letter);
        }
        int32_t allreduce[2];
        rv_blocks_cut_points(blocks, b, allreduce);
        for (int h = 0; h < 2; h++) if (allreduce[h] >= 0) g_array_append_val(cuts, allreduce[h]);
        for (guint i = from; forward && i < to; i++) {
            if (letters[i] != 'L') continue;
            rv_gemm_dims dims;
            if (rv_block_gemm_dims(graph, rv_blocks_token(blocks, i), &dims)) {
                int64_t elements = dims.tokens * dims.hidden;
                g_array_append_val(state->activation_elements, elements);
            }
            break;
        }
    }
}

/* The embedding lookup and its gradient work on the rank's 1/degree of the
 * vocabulary.  Returns the forward's last embedding kernel before the
 * first block (its output is all-reduced), or -1. */
static int32_t cut_embedding(rv_graph *graph, tp_state *state, const rv_blocks *blocks, const GArray *kernels,
                             gboolean forward, phase_cut *cut)
{
    int32_t embedding = -1;
    guint next = 0, first_block = rv_blocks_from(blocks, 0);
    for (guint k = 0; k < kernels->len; k++) {
        int32_t id = g_array_index(kernels, int32_t, k);
        if (next < blocks->ids->len && rv_blocks_token(blocks, next) == id) { next++; continue; }
        if (!(rv_block_finder_traits(state->finder, rv_graph_task(graph, id)) & RV_BLOCK_TRAIT_EMBEDDING)) continue;
        cut_add(cut, id, TRUE);
        state->embedding++;
        if (forward && next <= first_block) embedding = id;
    }
    return embedding;
}

/* The output layer, vocabulary-parallel when the embedding is: the GEMMs
 * and softmax after the last block in the forward (logits, the loss's
 * softmax over the vocabulary), before the first in the backward.  The
 * backward's last such GEMM makes the head's input gradient, which is
 * all-reduced: returned, or -1. */
static int32_t cut_head(rv_graph *graph, tp_state *state, const rv_blocks *blocks, gboolean forward, phase_cut *cut)
{
    guint from = forward ? rv_blocks_to(blocks, rv_blocks_count(blocks) - 1) : 0;
    guint to = forward ? (guint)blocks->letters->len : rv_blocks_from(blocks, 0);
    int32_t last = -1;
    for (guint i = from; i < to; i++) {
        char letter = blocks->letters->str[i];
        if (letter != 'L' && letter != 'S') continue;
        int32_t id = rv_blocks_token(blocks, i);
        cut_add(cut, id, letter == 'L' && !rv_block_gemm_batched(graph, id));
        state->head++;
        if (letter == 'L') last = id;
    }
    return forward ? -1 : last;
}

/* Slice the blocks (and the vocabulary) of one phase and note where
 * all-reduces go; returns the blocks found. */
static guint slice_phase(rv_graph *graph, tp_state *state, GArray *kernels, gboolean forward, GArray *cuts)
{
    rv_blocks blocks;
    rv_blocks_find(state->finder, kernels, &blocks);
    phase_cut cut = { g_array_new(FALSE, FALSE, sizeof(int32_t)), g_array_new(FALSE, FALSE, sizeof(int32_t)),
                      g_array_new(FALSE, FALSE, sizeof(int32_t)) };
    if (rv_blocks_count(&blocks) > 0) {
        cut_blocks(graph, state, &blocks, kernels, forward, &cut, cuts);
        int32_t embedding = state->vocabulary ? cut_embedding(graph, state, &blocks, kernels, forward, &cut) : -1;
        /* the backward's gradient kernel follows its own step's forward */
        if (forward) state->vocabulary_found = embedding >= 0;
        if (embedding >= 0) g_array_append_val(cuts, embedding);
        int32_t head = state->vocabulary_found ? cut_head(graph, state, &blocks, forward, &cut) : -1;
        if (head >= 0) g_array_append_val(cuts, head);
    }
    rv_transform_scale(graph, cut.sliced, 1.0 / (double)state->degree);
    if (forward) shard_tensors(graph, &cut, state->degree);
    state->sliced += cut.sliced->len;
    guint found = rv_blocks_count(&blocks);
    g_array_unref(cut.sliced);
    g_array_unref(cut.weights);
    g_array_unref(cut.activations);
    rv_blocks_clear(&blocks);
    return found;
}

/* ---- the plugin --------------------------------------------------------- */

/* B*S*H*dtype from the parameters, else from the blocks' shapes; 0 if
 * unknown, -1 (with error) if larger than any message can be. */
static int64_t message_bytes(const rv_params *params, GArray *elements, GError **error)
{
    int64_t b = rv_params_integer(params, "batch"), s = rv_params_integer(params, "seq");
    int64_t h = rv_params_integer(params, "hidden"), dtype = rv_params_integer(params, "dtype_bytes");
    int64_t bytes = 0;
    gboolean fits = b > 0 && s > 0 && h > 0
                        ? rv_checked_mul(b, s, &bytes) && rv_checked_mul(bytes, h, &bytes) && rv_checked_mul(bytes, dtype, &bytes)
                        : rv_checked_mul(rv_median_int64(elements, 0), dtype, &bytes);
    if (fits && bytes <= RV_MAX_BYTES) return bytes;
    g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "batch * seq * hidden * dtype_bytes is more than 2^53 bytes");
    return -1;
}

static gboolean check_params(const rv_params *params, tp_state *state, GError **error)
{
    state->degree = rv_params_integer(params, "degree");
    double efficiency = rv_params_number(params, "efficiency");
    int64_t dtype = rv_params_integer(params, "dtype_bytes");
    if (state->degree < 1 || state->degree > 4096 || !(efficiency > 0 && efficiency <= 1) || dtype < 1 || dtype > 16 ||
        rv_params_integer(params, "batch") < 0 || rv_params_integer(params, "seq") < 0 ||
        rv_params_integer(params, "hidden") < 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE,
                    "need 1 <= degree <= 4096, 0 < efficiency <= 1, 1 <= dtype_bytes <= 16 and batch, seq, hidden >= 0");
        return FALSE;
    }
    state->vocabulary = strcmp(rv_params_string(params, "embedding"), "vocab") == 0;
    state->link = rv_link_make(rv_params_bandwidth(params, "bandwidth"), rv_params_duration_ns(params, "latency"),
                               efficiency);
    return rv_link_check(&state->link, error);
}

static void write_notes(const tp_state *state, GString *notes)
{
    char *size = rv_format_bytes(state->message_bytes), *each = rv_format_duration(state->allreduce_ns);
    char *bw = rv_format_bandwidth(state->link.bandwidth_Bps);
    g_string_append_printf(notes,
                           "    found %u Transformer blocks per step in the forward, %u in the backward (%u steps)\n"
                           "    sliced %u kernels by 1/%" G_GINT64_FORMAT ": the blocks' GEMMs, the optimizer's, and %u "
                           "of the attention core and activations (%u softmax, %u activation, %u dropout)\n",
                           state->steps ? state->blocks[0] / state->steps : 0,
                           state->steps ? state->blocks[1] / state->steps : 0, state->steps, state->sliced,
                           state->degree, state->between, state->softmax, state->activation, state->dropout);
    if (state->embedding > 0)
        g_string_append_printf(notes, "    vocabulary-parallel: %u embedding and %u output-layer kernels sliced\n",
                               state->embedding, state->head);
    else if (state->vocabulary)
        g_string_append(notes, "    no embedding lookup (an operator named embedding) before the blocks: the "
                               "embedding and output layer stay whole\n");
    g_string_append_printf(notes, "    inserted %u all-reduces of %s, %s each (ring over %" G_GINT64_FORMAT
                           " GPUs at %s)\n", state->allreduces, size, each, state->degree, bw);
    g_free(size); g_free(each); g_free(bw);
}

/* Slice every step, then insert the all-reduces (their size needs every block's shapes). */
static gboolean transform_steps(rv_graph *graph, const rv_params *params, tp_state *state, const rv_step_lists *by_step,
                                GError **error)
{
    GArray *cuts = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (int32_t step = 0; step < (int32_t)by_step->slots - 1; step++) {
        GArray *kernels = rv_step_lists_get(by_step, step, RV_PHASE_FORWARD);
        if (kernels->len == 0) continue;
        guint forward = slice_phase(graph, state, kernels, TRUE, cuts);
        GArray *backward = rv_step_lists_get(by_step, step, RV_PHASE_BACKWARD);
        guint backward_blocks = backward->len && forward ? slice_phase(graph, state, backward, FALSE, cuts) : 0;
        GArray *optimizer = rv_step_lists_get(by_step, step, RV_PHASE_OPTIMIZER);
        if (forward && optimizer->len) {
            rv_transform_scale(graph, optimizer, 1.0 / (double)state->degree);
            state->sliced += optimizer->len;
        }
        state->blocks[0] += forward;
        state->blocks[1] += backward_blocks;
        state->steps += forward > 0;
    }
    gboolean ok = TRUE;
    state->message_bytes = message_bytes(params, state->activation_elements, error);
    if (state->message_bytes < 0) {
        ok = FALSE;
    } else if (state->steps == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "no Transformer block found: no repeated pattern of linear and attention GEMMs in any step's forward");
        ok = FALSE;
    } else if (state->message_bytes <= 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "found %u blocks but the trace has no shapes on their GEMMs: give batch=, seq= and hidden= "
                    "(each all-reduce moves B*S*H*dtype_bytes)", state->blocks[0] / state->steps);
        ok = FALSE;
    }
    if (ok) state->allreduce_ns = rv_collective_time_ns(RV_COLL_ALLREDUCE_RING, state->message_bytes,
                                                        (int)state->degree, &state->link);
    /* rv_collective_time_ns saturates; a saturated time is a parameter out of range. */
    if (ok) ok = rv_task_duration_from(graph, -1, (double)state->allreduce_ns,
                                       "the tp-allreduce parameters (bandwidth, latency, batch, seq, hidden)",
                                       &state->allreduce_ns, error);
    for (guint i = 0; ok && i < cuts->len; i++) ok = insert_allreduce(graph, state, g_array_index(cuts, int32_t, i), error);
    g_array_unref(cuts);
    return ok;
}

/* The collectives of one parallelism the graph has already (inserted ones
 * only, if asked): how many, and their largest group. */
static guint collectives_of(const rv_graph *graph, rv_parallelism parallelism, gboolean inserted_only, int *degree)
{
    guint count = 0;
    *degree = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task((rv_graph *)graph, id);
        const rv_collective_info *info = rv_task_collective(graph, task);
        if (!info || (task->flags & (RV_TASK_FLAG_REMOVED | RV_TASK_FLAG_RENDEZVOUS)) ||
            info->parallelism != parallelism || (inserted_only && !info->inserted))
            continue;
        count++;
        *degree = MAX(*degree, info->group_size);
    }
    return count;
}

/* The data-parallel all-reduces move 1/degree of their payload: same
 * group, same link (this plugin's), smaller message. */
static gboolean shard_data_parallel(rv_graph *graph, const tp_state *state, GString *notes, GError **error)
{
    int data, tensor;
    rv_graph_parallel_sizes(graph, &data, &tensor); /* the same groups: data-parallel ones keep their size */
    rv_recost_plan plan = { data, 1 << 24, state->link, state->link, -1, 1u << RV_PARALLEL_DATA, (int)state->degree, 0 };
    rv_recost_summary summary;
    if (!rv_graph_recost_collectives(graph, &plan, "the tp-allreduce parameters", &summary, error)) return FALSE;
    if (summary.collectives == 0) return TRUE;
    char *before = rv_format_duration(summary.before_ns), *after = rv_format_duration(summary.after_ns);
    g_string_append_printf(notes, "    %u data-parallel all-reduces now move 1/%" G_GINT64_FORMAT " of their payload: %s -> "
                           "%s\n", summary.collectives, state->degree, before, after);
    g_free(before);
    g_free(after);
    return TRUE;
}

static gboolean tp_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    tp_state state = { 0 };
    if (!check_params(params, &state, error)) return FALSE;
    if (state.degree == 1) {
        g_string_append(output->notes, "    degree=1: one GPU holds every layer, graph unchanged\n");
        return TRUE;
    }
    int existing_degree = 0;
    guint existing = collectives_of(graph, RV_PARALLEL_TENSOR, FALSE, &existing_degree);
    if (existing > 0) {
        char degree_text[32] = "";
        if (existing_degree > 0) g_snprintf(degree_text, sizeof degree_text, " of %d ranks", existing_degree);
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "the graph is tensor parallel already (%u all-reduces of a tensor-parallel group%s, recorded or "
                    "inserted): slicing its GEMMs again would count the degree twice", existing, degree_text);
        return FALSE;
    }
    rv_step_lists by_step = rv_step_lists_new(graph, RV_KERNEL_PHASE_LISTS, rv_kernel_by_phase, NULL);
    state.activation_elements = g_array_new(FALSE, FALSE, sizeof(int64_t));
    state.finder = rv_block_finder_new(graph);
    int64_t world = rv_graph_world_size(graph);
    gboolean ok = transform_steps(graph, params, &state, &by_step, error);
    if (ok) graph->world_size = MIN(world * state.degree, 1 << 24); /* each recorded rank is now `degree` GPUs */
    if (ok) write_notes(&state, output->notes);
    if (ok) ok = shard_data_parallel(graph, &state, output->notes, error);
    rv_block_finder_free(state.finder);
    g_array_unref(state.activation_elements);
    rv_step_lists_free(&by_step);
    return ok;
}

/* The composition law (compose.h): block GEMMs and optimizer work divided, tensor-parallel all-reduces inserted
 * on the compute stream, data-parallel payloads sharded. */
static const rv_plugin_effects tp_allreduce_effects = {
    .reads = RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD | RV_ASPECT_OPTIMIZER | RV_ASPECT_DATA_COMM | RV_ASPECT_DEVICE | RV_ASPECT_CLUSTER,
    .reads_time = RV_ASPECT_DATA_COMM,
    .scales = RV_ASPECT_MEMORY,
    .reprices = RV_ASPECT_DATA_COMM,
    .rewrites = RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD | RV_ASPECT_OPTIMIZER | RV_ASPECT_TENSOR_COMM | RV_ASPECT_WEIGHTS | RV_ASPECT_CLUSTER,
    .order = RV_ORDER(RV_STAGE_PARALLEL, 10),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "tp-allreduce",
    "tensor parallelism (Megatron): block GEMMs / degree, four all-reduces per Transformer block",
    tp_params, tp_apply, &tp_allreduce_effects,
};
