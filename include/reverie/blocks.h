/*
 * blocks.h - Transformer blocks found from the kernels of one phase of one
 * step, for the what-ifs that split a block (tp-allreduce, expert-parallel).
 *
 * The traces reverie sees rarely say where a block begins: module tags
 * name only the innermost module ("Linear_3"), and compiled or custom
 * models have no fixed operator sequence.  So the phase's GPU kernels, in
 * recorded order, become a token string - L for a linear GEMM (one per
 * GEMM kernel, by kernel name: an operator's epilogue kernels do not
 * count), A for an attention / batched GEMM or a fused attention kernel
 * (FlashAttention), N for a norm, S for a softmax,
 * G for an activation - and the blocks are the repeats of that string: the
 * k-gram (4 <= k <= 48, holding at least one L and one A) whose
 * non-overlapping occurrences are evenly spaced (largest gap <= 1.5x the
 * smallest) and score best: tokens covered times how alike neighbouring
 * blocks are (the overlap of their letter counts, which tells whole blocks
 * from halves); among near-ties (within 5%) more occurrences win, then the
 * longer gram.  Block i runs from occurrence i to occurrence i+1 (the last
 * block is as long as the mean spacing).  A model with no attention GEMM
 * has no block.  Dropouts and embedding lookups are no tokens (they do not
 * shape the pattern); rv_block_finder_traits says which kernels they are.
 *
 * Within a block the linear GEMMs fall in two halves, the first ceil(n/2)
 * of its n linear GEMMs (attention: QKV .. output projection) and the rest
 * (MLP: FC1 .. FC2); in a backward pass the order is reversed, so the
 * first half is the MLP's.  The placement is approximate where a block's
 * GEMMs do not split that way (separate Q, K and V projections).
 */
#ifndef REVERIE_BLOCKS_H
#define REVERIE_BLOCKS_H

#include <glib.h>
#include <stdint.h>
#include "reverie/graph.h"

G_BEGIN_DECLS

/* What kernel and operator names say, memoized, and the block search of
 * each distinct token string (the steps of one model repeat theirs). */
typedef struct rv_block_finder rv_block_finder;

rv_block_finder *rv_block_finder_new(const rv_graph *graph);
void rv_block_finder_free(rv_block_finder *finder);

/* The blocks of one phase of one step. */
typedef struct {
    GString *letters;    /* one letter per token */
    GArray *ids;         /* int32: each token's kernel */
    GArray *ranges;      /* guint pairs [from, to): each block's tokens */
    guint *positions;    /* each token's index in the kernels given, once sorted */
} rv_blocks;

/* Sort `kernels` (int32 GPU task ids of one phase of one step) into
 * recorded order, tokenize them and find the blocks (none: ranges empty). */
void rv_blocks_find(rv_block_finder *finder, GArray *kernels, rv_blocks *out);
void rv_blocks_clear(rv_blocks *blocks);
static inline guint rv_blocks_count(const rv_blocks *blocks) { return blocks->ranges->len / 2; }
static inline guint rv_blocks_from(const rv_blocks *blocks, guint b)
{
    return g_array_index(blocks->ranges, guint, 2 * b);
}
static inline guint rv_blocks_to(const rv_blocks *blocks, guint b)
{
    return g_array_index(blocks->ranges, guint, 2 * b + 1);
}
static inline int32_t rv_blocks_token(const rv_blocks *blocks, guint i) { return g_array_index(blocks->ids, int32_t, i); }

/* Block b's halves as token positions [first, last] of their linear GEMMs;
 * returns how many (0: no linear GEMM, 1: one). */
int rv_blocks_halves(const rv_blocks *blocks, guint b, guint half[2][2]);
/* The last linear GEMM (kernel id) of each half of block b, -1 where none
 * (one linear GEMM: only cut[1]). */
void rv_blocks_cut_points(const rv_blocks *blocks, guint b, int32_t cut[2]);

/* What a kernel that is no token is (bits). */
enum { RV_BLOCK_TRAIT_DROPOUT = 1, RV_BLOCK_TRAIT_EMBEDDING = 2 };
int rv_block_finder_traits(rv_block_finder *finder, const rv_task *task);

/* A batched (attention) GEMM by its operator: bmm, baddbmm, attention. */
gboolean rv_block_gemm_batched(const rv_graph *graph, int32_t task);
/* A linear GEMM's sizes from its Input Dims, by their layout - addmm
 * [bias, x, W[K, N]], linear [x, W[N, K], bias], mm and matmul [x, W[K, N]]
 * - whatever the operator's name (the dims are the launch's outermost
 * operator's).  FALSE when the shapes do not say. */
typedef struct {
    int64_t tokens;       /* rows of the activation x: B*S for a block's first GEMM */
    int64_t hidden;       /* its last extent, K (H for a block's first GEMM) */
    int64_t out;          /* the output width N; 0 where the weight does not say */
    int64_t weights;      /* elements of the weight and bias */
    int64_t batch, seq;   /* x of rank 3, [B, S, H]: B and S; else 0 */
} rv_gemm_dims;
gboolean rv_block_gemm_dims(const rv_graph *graph, int32_t task, rv_gemm_dims *out);

G_END_DECLS

#endif
