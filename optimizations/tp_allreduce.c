/*
 * tp_allreduce.c - Megatron-style tensor parallelism predicted from a
 * single-GPU trace, after "Tale of Two Cs" (Pati et al., equations 1-9).
 *
 *   reverie whatif trace.json.gz --opt 'tp-allreduce:degree=4'
 *   reverie whatif trace.json.gz --opt 'tp-allreduce:degree=8,batch=8,seq=512,hidden=1024'
 *
 * The model (per Transformer block, TP = degree):
 *   - every GEMM of the block - QKV, attention output projection, FC1, FC2
 *     and the attention GEMMs - does 1/TP of the work (eqs 1-3), so its
 *     kernels' durations divide by degree; so do the optimizer's kernels
 *     (each rank updates 1/TP of the weights).  Elementwise kernels,
 *     LayerNorm and dropout are replicated and stay as they are;
 *   - four serialized all-reduces of B*S*H*dtype_bytes bytes (eq 5): in the
 *     forward after the attention output projection and after FC2, in the
 *     backward after FC1's and after QKV's input gradient.  Each is a ring
 *     all-reduce over `degree` GPUs (comm.h) inserted on the compute stream
 *     right after its GEMM, so the next kernel waits for it.
 *
 * Finding the blocks.  The traces reverie sees rarely say where a block
 * begins: module tags name only the innermost module ("Linear_3"), and
 * compiled or custom models have no fixed operator sequence.  So a step's
 * GPU kernels of one phase become a token string - L for a linear GEMM
 * (one per GEMM kernel, by kernel name: an operator's epilogue kernels
 * do not count, though they are sliced with it), A
 * for an attention / batched GEMM, N for a norm, S for softmax, G for an
 * activation - and the blocks are the repeats of that string: the k-gram
 * (4 <= k <= 48, holding at least one L and one A) whose non-overlapping
 * occurrences are evenly spaced (largest gap <= 1.5x the smallest) and
 * score best: tokens covered times how alike neighbouring blocks are (the
 * overlap of their letter counts, which tells whole blocks from halves);
 * among near-ties (within 5%) more occurrences win, then the longer gram.  Block i runs from occurrence i
 * to occurrence i+1 (the last block is as long as the mean spacing).  A
 * model with no attention GEMM has no block and the plugin says so.
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
#include "reverie/checked.h"
#include "reverie/validate.h"
#include "reverie/comm.h"
#include "reverie/error.h"
#include "reverie/kernels.h"
#include "reverie/memory.h"
#include "reverie/recost.h"
#include "reverie/shapes.h"
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

#define MIN_GRAM 4
#define MAX_GRAM 48

/* ---- tokens ----------------------------------------------------------- */

static const char *text_of(const rv_graph *graph, int32_t id) { return id > 0 ? rv_strings_get(graph->strings, id) : ""; }

static gboolean has_word(const char *text, const char *const *words)
{
    char *lower = g_ascii_strdown(text, -1);
    gboolean yes = FALSE;
    for (; *words && !yes; words++) yes = strstr(lower, *words) != NULL;
    g_free(lower);
    return yes;
}

/* What a kernel name says (bits), and what an operator says (bits). */
enum { NAME_COMPUTE = 1, NAME_ATTENTION = 2, NAME_DROPOUT = 4 };
enum { OP_COMPUTE = 1, OP_ATTENTION = 2, OP_NORM = 4, OP_SOFTMAX = 8, OP_ACTIVATION = 16, OP_DROPOUT = 32,
       OP_EMBEDDING = 64 };

static int kernel_name_bits(const char *name)
{
    static const char *const dropout[] = { "dropout", NULL };
    return (rv_kernel_name_is_compute(name) ? NAME_COMPUTE : 0) | (rv_op_is_attention(name) ? NAME_ATTENTION : 0) |
           (has_word(name, dropout) ? NAME_DROPOUT : 0);
}

static int op_bits(const char *op)
{
    static const char *const norms[] = { "norm", "aten::var", NULL };
    static const char *const softmax[] = { "softmax", NULL };
    static const char *const activations[] = { "gelu", "relu", "tanh", "sigmoid", "silu", NULL };
    static const char *const dropout[] = { "dropout", NULL };
    static const char *const embedding[] = { "embedding", NULL };
    return (rv_op_is_compute(op) ? OP_COMPUTE : 0) | (rv_op_is_attention(op) ? OP_ATTENTION : 0) |
           (has_word(op, norms) ? OP_NORM : 0) | (has_word(op, softmax) ? OP_SOFTMAX : 0) |
           (has_word(op, activations) ? OP_ACTIVATION : 0) | (has_word(op, dropout) ? OP_DROPOUT : 0) |
           (has_word(op, embedding) ? OP_EMBEDDING : 0);
}

/* Each name read once: a step repeats the same few hundred (strings.h). */
typedef struct {
    rv_string_memo names, ops;
    rv_kernel_classifier classes;
} token_memo;

static void token_memo_init(token_memo *memo, const rv_graph *graph)
{
    rv_string_memo_init(&memo->names, graph->strings, kernel_name_bits);
    rv_string_memo_init(&memo->ops, graph->strings, op_bits);
    rv_kernel_classifier_init(&memo->classes, graph);
}

static void token_memo_clear(token_memo *memo)
{
    rv_string_memo_clear(&memo->names);
    rv_string_memo_clear(&memo->ops);
    rv_kernel_classifier_clear(&memo->classes);
}

/* One letter per kernel that shapes a block, 0 for the rest: a GEMM kernel
 * (or a half-precision kernel of a GEMM operator) is A when it or its
 * operator is attention, else L. */
static char token_of(token_memo *memo, const rv_task *task)
{
    int name = rv_string_memo_get(&memo->names, task->name), op = rv_string_memo_get(&memo->ops, task->op);
    if ((name & NAME_COMPUTE) ||
        ((op & OP_COMPUTE) && rv_kernel_classifier_classify(&memo->classes, task) == RV_KERNEL_HALF))
        return (op & OP_ATTENTION) || (name & NAME_ATTENTION) ? 'A' : 'L';
    if (op & (OP_DROPOUT | OP_EMBEDDING)) return 0; /* not part of the block pattern (below) */
    if (op & OP_NORM) return 'N';
    if (op & OP_SOFTMAX) return 'S';
    if (op & OP_ACTIVATION) return 'G';
    return 0;
}

/* ---- block detection ---------------------------------------------------- */

typedef struct {
    GArray *starts;   /* token positions of the occurrences */
    double score;     /* tokens spanned by the blocks x their likeness */
    guint gram;       /* k */
} block_pattern;

#define LETTERS "LANSG"

static double mean_spacing(const GArray *starts)
{
    guint c = starts->len;
    return (double)(g_array_index(starts, guint, c - 1) - g_array_index(starts, guint, 0)) / (c - 1);
}

/* Evenly spaced?  Largest gap at most 1.5x the smallest. */
static gboolean evenly_spaced(const GArray *starts)
{
    guint smallest = G_MAXUINT, largest = 0;
    for (guint i = 1; i < starts->len; i++) {
        guint gap = g_array_index(starts, guint, i) - g_array_index(starts, guint, i - 1);
        smallest = MIN(smallest, gap);
        largest = MAX(largest, gap);
    }
    return largest * 2 <= smallest * 3;
}

/* End of block b: the next occurrence, or one mean spacing on for the last. */
static guint block_end(const GArray *starts, guint b, guint n)
{
    if (b + 1 < starts->len) return g_array_index(starts, guint, b + 1);
    return MIN(n, g_array_index(starts, guint, b) + (guint)(mean_spacing(starts) + 0.5));
}

static void count_letters(const char *tokens, guint from, guint to, guint counts[sizeof LETTERS])
{
    memset(counts, 0, sizeof(guint) * sizeof LETTERS);
    for (guint i = from; i < to; i++) counts[strchr(LETTERS, tokens[i]) - LETTERS]++;
}

/*
 * How alike the blocks are: the worst overlap of the letter counts of two
 * neighbouring blocks.  Half a block (attention half, MLP half) repeats as
 * evenly as a whole one but its halves do not look alike; whole blocks do.
 */
static double likeness(const char *tokens, guint n, const GArray *starts)
{
    double worst = 1.0;
    guint previous[sizeof LETTERS], current[sizeof LETTERS];
    for (guint b = 0; b < starts->len; b++) {
        count_letters(tokens, g_array_index(starts, guint, b), block_end(starts, b, n), current);
        if (b > 0) {
            guint shared = 0, total_a = 0, total_b = 0;
            for (guint x = 0; x < sizeof LETTERS - 1; x++) {
                shared += MIN(previous[x], current[x]);
                total_a += previous[x];
                total_b += current[x];
            }
            worst = MIN(worst, (double)shared / MAX(1, MAX(total_a, total_b)));
        }
        memcpy(previous, current, sizeof current);
    }
    return worst;
}

static gboolean better(const block_pattern *candidate, const block_pattern *best)
{
    if (best->starts == NULL) return TRUE;
    if (candidate->score > best->score * 1.05) return TRUE;
    if (candidate->score < best->score * 0.95) return FALSE;
    if (candidate->starts->len != best->starts->len) return candidate->starts->len > best->starts->len;
    return candidate->gram > best->gram;
}

/* Non-overlapping occurrences of every k-gram holding an L and an A. */
static GHashTable *occurrences(const char *tokens, guint n, guint k)
{
    GHashTable *table = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_array_unref);
    for (guint i = 0; i + k <= n; i++) {
        char *gram = g_strndup(tokens + i, k);
        if (!strchr(gram, 'A') || !strchr(gram, 'L')) { g_free(gram); continue; }
        GArray *starts = g_hash_table_lookup(table, gram);
        if (starts == NULL) {
            starts = g_array_new(FALSE, FALSE, sizeof(guint));
            g_hash_table_insert(table, gram, starts);
        } else {
            g_free(gram);
        }
        if (starts->len == 0 || i - g_array_index(starts, guint, starts->len - 1) >= k) g_array_append_val(starts, i);
    }
    return table;
}

/* The best repeat of the token string, or starts == NULL if there is none. */
static block_pattern find_blocks(const char *tokens, guint n)
{
    block_pattern best = { NULL, 0, 0 };
    for (guint k = MIN_GRAM; k <= MAX_GRAM && 2 * k <= n; k++) {
        GHashTable *table = occurrences(tokens, n, k);
        GHashTableIter iter;
        gpointer key, value;
        g_hash_table_iter_init(&iter, table);
        while (g_hash_table_iter_next(&iter, &key, &value)) {
            GArray *starts = value;
            if (starts->len < 2 || !evenly_spaced(starts)) continue;
            double spacing = mean_spacing(starts);
            double tail = MIN(spacing, (double)(n - g_array_index(starts, guint, starts->len - 1)));
            double coverage = (starts->len - 1) * spacing + tail;
            block_pattern candidate = { starts, coverage * likeness(tokens, n, starts), k };
            if (!better(&candidate, &best)) continue;
            if (best.starts) g_array_unref(best.starts);
            best = candidate;
            best.starts = g_array_ref(starts);
        }
        g_hash_table_destroy(table);
    }
    return best;
}

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
    token_memo tokens;
    GHashTable *ranges_of;    /* token string -> its block ranges: steps repeat */
} tp_state;

/* The kernels that carry a token, in recorded order, and their letters. */
static GArray *tokenize(rv_graph *graph, token_memo *memo, GArray *kernels, GString *letters)
{
    g_array_sort_with_data(kernels, rv_task_compare_recorded, graph);
    GArray *ids = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (guint i = 0; i < kernels->len; i++) {
        int32_t id = g_array_index(kernels, int32_t, i);
        char letter = token_of(memo, rv_graph_task(graph, id));
        if (letter == 0) continue;
        g_string_append_c(letters, letter);
        g_array_append_val(ids, id);
    }
    return ids;
}

/* Activation elements entering a linear GEMM (B*S*H for a block's first). */
static int64_t activation_elements(const rv_graph *graph, int32_t task)
{
    rv_shapes shapes;
    int64_t elements = 0;
    if (rv_shapes_of_task(graph, task, &shapes)) {
        gboolean addmm = strstr(text_of(graph, rv_graph_task((rv_graph *)graph, task)->op), "addmm") != NULL;
        elements = rv_shapes_elements(&shapes, addmm ? 1 : 0);
    }
    rv_shapes_clear(&shapes);
    return elements;
}

/* Linear GEMMs of tokens [from, to): the last of each half gets an all-reduce. */
static void block_cut_points(const GString *letters, const GArray *ids, guint from, guint to, int32_t cut[2])
{
    guint linear = 0, seen = 0;
    for (guint i = from; i < to; i++) linear += letters->str[i] == 'L';
    cut[0] = cut[1] = -1;
    for (guint i = from; i < to; i++) {
        if (letters->str[i] != 'L') continue;
        seen++;
        if (seen == (linear + 1) / 2) cut[0] = g_array_index(ids, int32_t, i);
        if (seen == linear) cut[1] = g_array_index(ids, int32_t, i);
    }
    if (cut[0] == cut[1]) cut[0] = -1;
}

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

/* Block ranges of one phase: pairs [from, to) in token positions.  The
 * search depends on the letters alone, and steps of one model give the same
 * letters, so each distinct string is searched once. */
static GArray *block_ranges(tp_state *state, const GString *letters)
{
    GArray *ranges = g_hash_table_lookup(state->ranges_of, letters->str);
    if (ranges != NULL) return g_array_ref(ranges);
    ranges = g_array_new(FALSE, FALSE, sizeof(guint));
    g_hash_table_insert(state->ranges_of, g_strdup(letters->str), g_array_ref(ranges));
    block_pattern pattern = find_blocks(letters->str, (guint)letters->len);
    if (pattern.starts == NULL) return ranges;
    for (guint b = 0; b < pattern.starts->len; b++) {
        guint from = g_array_index(pattern.starts, guint, b);
        guint to = block_end(pattern.starts, b, (guint)letters->len);
        g_array_append_val(ranges, from);
        g_array_append_val(ranges, to);
    }
    g_array_unref(pattern.starts);
    return ranges;
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

static gboolean batched_gemm(const rv_graph *graph, int32_t id)
{
    const char *op = rv_strings_get(graph->strings, rv_graph_task((rv_graph *)graph, id)->op);
    return op && (strstr(op, "bmm") || strstr(op, "attention") || strstr(op, "baddbmm"));
}

/* Where each token sits in the phase's kernels (sorted). */
static guint *token_positions(const GArray *kernels, const GArray *ids)
{
    guint *position = g_new(guint, MAX(ids->len, 1));
    for (guint k = 0, next = 0; k < kernels->len && next < ids->len; k++)
        if (g_array_index(kernels, int32_t, k) == g_array_index(ids, int32_t, next)) position[next++] = k;
    return position;
}

static void count_sliced(tp_state *state, const rv_task *task, char letter)
{
    int op = rv_string_memo_get(&state->tokens.ops, task->op);
    int name = rv_string_memo_get(&state->tokens.names, task->name);
    state->softmax += letter == 'S';
    state->activation += letter == 'G';
    state->dropout += (op & OP_DROPOUT) || (name & NAME_DROPOUT);
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
static void cut_blocks(rv_graph *graph, tp_state *state, const GString *letters, const GArray *ids,
                       const GArray *kernels, const GArray *ranges, gboolean forward, phase_cut *cut, GArray *cuts)
{
    guint *position = token_positions(kernels, ids);
    for (guint r = 0; r < ranges->len; r += 2) {
        guint from = g_array_index(ranges, guint, r), to = g_array_index(ranges, guint, r + 1);
        guint first_a = to, last_a = from;
        for (guint i = from; i < to; i++) {
            int32_t id = g_array_index(ids, int32_t, i);
            char letter = letters->str[i];
            if (letter == 'L' || letter == 'A') cut_add(cut, id, letter == 'L' && !batched_gemm(graph, id));
            if (letter == 'G') {
                cut_add(cut, id, FALSE);
                count_sliced(state, rv_graph_task(graph, id), letter);
            }
            if (letter == 'A') { first_a = MIN(first_a, i); last_a = i; }
        }
        guint token = first_a + 1;
        for (guint k = first_a < last_a ? position[first_a] + 1 : 1; first_a < last_a && k < position[last_a]; k++) {
            int32_t id = g_array_index(kernels, int32_t, k);
            gboolean is_token = token < ids->len && g_array_index(ids, int32_t, token) == id;
            char letter = is_token ? letters->str[token++] : 0;
            if (letter == 'L' || letter == 'A' || letter == 'G') continue; /* counted above */
            cut_add(cut, id, FALSE);
            count_sliced(state, rv_graph_task(graph, id), letter);
        }
        int32_t allreduce[2];
        block_cut_points(letters, ids, from, to, allreduce);
        for (int h = 0; h < 2; h++) if (allreduce[h] >= 0) g_array_append_val(cuts, allreduce[h]);
        for (guint i = from; forward && i < to; i++) {
            if (letters->str[i] != 'L') continue;
            int64_t elements = activation_elements(graph, g_array_index(ids, int32_t, i));
            if (elements > 0) g_array_append_val(state->activation_elements, elements);
            break;
        }
    }
    g_free(position);
}

/* The embedding lookup and its gradient work on the rank's 1/degree of the
 * vocabulary.  Returns the forward's last embedding kernel before the
 * first block (its output is all-reduced), or -1. */
static int32_t cut_embedding(rv_graph *graph, tp_state *state, const GArray *ids, const GArray *kernels,
                             const GArray *ranges, gboolean forward, phase_cut *cut)
{
    int32_t embedding = -1;
    guint next = 0, first_block = g_array_index(ranges, guint, 0);
    for (guint k = 0; k < kernels->len; k++) {
        int32_t id = g_array_index(kernels, int32_t, k);
        if (next < ids->len && g_array_index(ids, int32_t, next) == id) { next++; continue; }
        const rv_task *task = rv_graph_task(graph, id);
        if (!(rv_string_memo_get(&state->tokens.ops, task->op) & OP_EMBEDDING)) continue;
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
static int32_t cut_head(rv_graph *graph, tp_state *state, const GString *letters, const GArray *ids,
                        const GArray *ranges, gboolean forward, phase_cut *cut)
{
    guint blocks = ranges->len / 2;
    guint from = forward ? g_array_index(ranges, guint, 2 * blocks - 1) : 0;
    guint to = forward ? (guint)letters->len : g_array_index(ranges, guint, 0);
    int32_t last = -1;
    for (guint i = from; i < to; i++) {
        char letter = letters->str[i];
        if (letter != 'L' && letter != 'S') continue;
        int32_t id = g_array_index(ids, int32_t, i);
        cut_add(cut, id, letter == 'L' && !batched_gemm(graph, id));
        state->head++;
        if (letter == 'L') last = id;
    }
    return forward ? -1 : last;
}

/* Slice the blocks (and the vocabulary) of one phase and note where
 * all-reduces go; returns the blocks found. */
static guint slice_phase(rv_graph *graph, tp_state *state, GArray *kernels, gboolean forward, GArray *cuts)
{
    GString *letters = g_string_new(NULL);
    GArray *ids = tokenize(graph, &state->tokens, kernels, letters);
    GArray *ranges = block_ranges(state, letters);
    phase_cut cut = { g_array_new(FALSE, FALSE, sizeof(int32_t)), g_array_new(FALSE, FALSE, sizeof(int32_t)),
                      g_array_new(FALSE, FALSE, sizeof(int32_t)) };
    if (ranges->len > 0) {
        cut_blocks(graph, state, letters, ids, kernels, ranges, forward, &cut, cuts);
        int32_t embedding = state->vocabulary ? cut_embedding(graph, state, ids, kernels, ranges, forward, &cut) : -1;
        /* an embedding of this step's forward, or any: the backward has its own gradient kernel */
        if (forward) state->vocabulary_found = embedding >= 0;
        if (embedding >= 0) g_array_append_val(cuts, embedding);
        int32_t head = state->vocabulary_found ? cut_head(graph, state, letters, ids, ranges, forward, &cut) : -1;
        if (head >= 0) g_array_append_val(cuts, head);
    }
    rv_transform_scale(graph, cut.sliced, 1.0 / (double)state->degree);
    if (forward) shard_tensors(graph, &cut, state->degree);
    state->sliced += cut.sliced->len;
    guint blocks = ranges->len / 2;
    g_array_unref(cut.sliced);
    g_array_unref(cut.weights);
    g_array_unref(cut.activations);
    g_array_unref(ranges);
    g_array_unref(ids);
    g_string_free(letters, TRUE);
    return blocks;
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

/* GPU kernels of the forward, backward and optimizer phases, by step. */
static void group_kernels(rv_graph *graph, GHashTable *by_phase[3])
{
    for (int p = 0; p < 3; p++) by_phase[p] = rv_tasks_by_step_new();
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task(graph, id);
        if ((task->flags & RV_TASK_FLAG_REMOVED) || task->kind != RV_TASK_KERNEL || task->step < 0) continue;
        if (task->phase == RV_PHASE_FORWARD || task->phase == RV_PHASE_BACKWARD || task->phase == RV_PHASE_OPTIMIZER)
            rv_tasks_by_step_add(by_phase[task->phase], task->step, id);
    }
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
static gboolean transform_steps(rv_graph *graph, const rv_params *params, tp_state *state, GHashTable *by_phase[3],
                                GError **error)
{
    GArray *cuts = g_array_new(FALSE, FALSE, sizeof(int32_t));
    GHashTableIter iter;
    gpointer key, value;
    g_hash_table_iter_init(&iter, by_phase[RV_PHASE_FORWARD]);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        guint forward = slice_phase(graph, state, value, TRUE, cuts);
        GArray *backward = g_hash_table_lookup(by_phase[RV_PHASE_BACKWARD], key);
        guint backward_blocks = backward && forward ? slice_phase(graph, state, backward, FALSE, cuts) : 0;
        GArray *optimizer = g_hash_table_lookup(by_phase[RV_PHASE_OPTIMIZER], key);
        if (forward && optimizer) {
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
    GHashTable *by_phase[3];
    group_kernels(graph, by_phase);
    state.activation_elements = g_array_new(FALSE, FALSE, sizeof(int64_t));
    token_memo_init(&state.tokens, graph);
    state.ranges_of = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_array_unref);
    int64_t world = rv_graph_world_size(graph);
    gboolean ok = transform_steps(graph, params, &state, by_phase, error);
    if (ok) graph->world_size = MIN(world * state.degree, 1 << 24); /* each recorded rank is now `degree` GPUs */
    if (ok) write_notes(&state, output->notes);
    if (ok) ok = shard_data_parallel(graph, &state, output->notes, error);
    g_hash_table_destroy(state.ranges_of);
    token_memo_clear(&state.tokens);
    g_array_unref(state.activation_elements);
    for (int p = 0; p < 3; p++) g_hash_table_destroy(by_phase[p]);
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
