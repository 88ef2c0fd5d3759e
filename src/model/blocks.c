/*
 * blocks.c - Transformer blocks from the kernel pattern (blocks.h): tokens,
 * the search for the evenly spaced repeat that covers most, halves and
 * cut points, and the activation entering a block's first GEMM.
 */
#include "reverie/blocks.h"
#include "reverie/costmodel.h"
#include "reverie/kernels.h"
#include "reverie/shapes.h"
#include "reverie/strings.h"
#include "reverie/transform.h"
#include <string.h>

#define MIN_GRAM 4
#define MAX_GRAM 48

/* ---- tokens ----------------------------------------------------------- */

static gboolean has_word(const char *text, const char *const *words)
{
    char *lower = g_ascii_strdown(text, -1);
    gboolean yes = FALSE;
    for (; *words && !yes; words++) yes = strstr(lower, *words) != NULL;
    g_free(lower);
    return yes;
}

/* What a kernel name says (bits), and what an operator says (bits). */
enum { NAME_COMPUTE = 1, NAME_ATTENTION = 2, NAME_DROPOUT = 4, NAME_FUSED_ATTENTION = 8 };
enum { OP_COMPUTE = 1, OP_ATTENTION = 2, OP_NORM = 4, OP_SOFTMAX = 8, OP_ACTIVATION = 16, OP_DROPOUT = 32,
       OP_EMBEDDING = 64 };

static int kernel_name_bits(const char *name)
{
    static const char *const dropout[] = { "dropout", NULL };
    return (rv_kernel_name_is_compute(name) ? NAME_COMPUTE : 0) | (rv_op_is_attention(name) ? NAME_ATTENTION : 0) |
           (has_word(name, dropout) ? NAME_DROPOUT : 0) | (rv_cost_name_is_fused_attention(name) ? NAME_FUSED_ATTENTION : 0);
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
struct rv_block_finder {
    const rv_graph *graph;
    rv_string_memo names, ops;
    rv_kernel_classifier classes;
    GHashTable *ranges_of;    /* token string -> its block ranges: steps repeat */
};
typedef struct rv_block_finder token_memo;

rv_block_finder *rv_block_finder_new(const rv_graph *graph)
{
    rv_block_finder *memo = g_new0(rv_block_finder, 1);
    memo->graph = graph;
    rv_string_memo_init(&memo->names, graph->strings, kernel_name_bits);
    rv_string_memo_init(&memo->ops, graph->strings, op_bits);
    rv_kernel_classifier_init(&memo->classes, graph);
    memo->ranges_of = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_array_unref);
    return memo;
}

void rv_block_finder_free(rv_block_finder *memo)
{
    if (memo == NULL) return;
    rv_string_memo_clear(&memo->names);
    rv_string_memo_clear(&memo->ops);
    rv_kernel_classifier_clear(&memo->classes);
    g_hash_table_destroy(memo->ranges_of);
    g_free(memo);
}

int rv_block_finder_traits(rv_block_finder *memo, const rv_task *task)
{
    int op = rv_string_memo_get(&memo->ops, task->op), name = rv_string_memo_get(&memo->names, task->name);
    /* the layer is the innermost module, or without one the outermost
     * operator (aten::embedding over an index_select): torch.nn.Embedding
     * or the operator counts, not a module that holds an embedding among
     * norms and dropouts (BertEmbeddings) */
    const char *layer = task->layer > 0 ? rv_strings_get(memo->graph->strings, task->layer) : "";
    gboolean embedding = (op & OP_EMBEDDING) || g_str_has_prefix(layer, "nn.Module: Embedding") ||
                         (g_str_has_prefix(layer, "aten::") && (rv_string_memo_get(&memo->ops, task->layer) & OP_EMBEDDING));
    return ((op & OP_DROPOUT) || (name & NAME_DROPOUT) ? RV_BLOCK_TRAIT_DROPOUT : 0) |
           (embedding ? RV_BLOCK_TRAIT_EMBEDDING : 0);
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
    if (name & NAME_FUSED_ATTENTION) return 'A'; /* FlashAttention and the like: the block's attention in one kernel */
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

gboolean rv_block_gemm_batched(const rv_graph *graph, int32_t task)
{
    const char *op = rv_strings_get(graph->strings, g_array_index(graph->tasks, rv_task, task).op);
    return op && (strstr(op, "bmm") || strstr(op, "attention") || strstr(op, "baddbmm"));
}

/* The layout is read from the shapes, not the operator's name: a launch's
 * Input Dims are its outermost operator's (aten::linear), its op the
 * innermost (aten::addmm), and they need not agree. */
gboolean rv_block_gemm_dims(const rv_graph *graph, int32_t task, rv_gemm_dims *out)
{
    memset(out, 0, sizeof *out);
    rv_shapes shapes;
    if (!rv_shapes_of_task(graph, task, &shapes)) {
        rv_shapes_clear(&shapes);
        return FALSE;
    }
    gboolean addmm = rv_shapes_rank(&shapes, 0) == 1 && rv_shapes_rank(&shapes, 1) == 2 && rv_shapes_rank(&shapes, 2) == 2;
    guint x = addmm ? 1 : 0, w = addmm ? 2 : 1, bias = addmm ? 0 : 2;
    guint rank = rv_shapes_rank(&shapes, x);
    gboolean ok = rank >= 2 && rv_shapes_rank(&shapes, w) == 2;
    if (ok) {
        out->hidden = rv_shapes_extent(&shapes, x, rank - 1);
        out->tokens = rv_shapes_elements(&shapes, x) / MAX(out->hidden, 1);
        if (rank == 3) {
            out->batch = rv_shapes_extent(&shapes, x, 0);
            out->seq = rv_shapes_extent(&shapes, x, 1);
        }
        int64_t w0 = rv_shapes_extent(&shapes, w, 0), w1 = rv_shapes_extent(&shapes, w, 1);
        /* addmm and mm take W as [K, N]; linear as [N, K] */
        out->out = !addmm && w1 == out->hidden ? w0 : w0 == out->hidden ? w1 : 0;
        out->weights = rv_shapes_elements(&shapes, w) + (rv_shapes_rank(&shapes, bias) == 1 ? rv_shapes_elements(&shapes, bias) : 0);
        ok = out->hidden > 0 && out->tokens > 0;
    }
    rv_shapes_clear(&shapes);
    return ok;
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

/* Block ranges of one phase: pairs [from, to) in token positions.  The
 * search depends on the letters alone, and steps of one model give the same
 * letters, so each distinct string is searched once. */
static GArray *block_ranges(rv_block_finder *state, const GString *letters)
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


/* Where each token sits in the phase's kernels (sorted). */
static guint *token_positions(const GArray *kernels, const GArray *ids)
{
    guint *position = g_new(guint, MAX(ids->len, 1));
    for (guint k = 0, next = 0; k < kernels->len && next < ids->len; k++)
        if (g_array_index(kernels, int32_t, k) == g_array_index(ids, int32_t, next)) position[next++] = k;
    return position;
}

void rv_blocks_find(rv_block_finder *finder, GArray *kernels, rv_blocks *out)
{
    out->letters = g_string_new(NULL);
    out->ids = tokenize((rv_graph *)finder->graph, finder, kernels, out->letters);
    out->ranges = block_ranges(finder, out->letters);
    out->positions = token_positions(kernels, out->ids);
}

void rv_blocks_clear(rv_blocks *blocks)
{
    if (blocks->letters) g_string_free(blocks->letters, TRUE);
    if (blocks->ids) g_array_unref(blocks->ids);
    if (blocks->ranges) g_array_unref(blocks->ranges);
    g_free(blocks->positions);
    memset(blocks, 0, sizeof *blocks);
}

int rv_blocks_halves(const rv_blocks *blocks, guint b, guint half[2][2])
{
    guint from = rv_blocks_from(blocks, b), to = rv_blocks_to(blocks, b), linear = 0, seen = 0;
    const char *letters = blocks->letters->str;
    for (guint i = from; i < to; i++) linear += letters[i] == 'L';
    int halves = linear >= 2 ? 2 : (int)linear;
    for (guint i = from; i < to; i++) {
        if (letters[i] != 'L') continue;
        seen++;
        int h = halves == 2 && seen > (linear + 1) / 2;
        if (seen == 1 || (h == 1 && seen == (linear + 1) / 2 + 1)) half[h][0] = i;
        half[h][1] = i;
    }
    return halves;
}

void rv_blocks_cut_points(const rv_blocks *blocks, guint b, int32_t cut[2])
{
    block_cut_points(blocks->letters, blocks->ids, rv_blocks_from(blocks, b), rv_blocks_to(blocks, b), cut);
}
