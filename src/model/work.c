/*
 * work.c - FLOPs and bytes of a kernel from its operator's Input Dims
 * (costmodel.h's rv_cost_work_of).
 *
 * The graph keeps the Input Dims of the OUTERMOST operator around a launch
 * (aten::linear around aten::addmm, aten::matmul around aten::bmm,
 * aten::conv2d around aten::cudnn_convolution), and the name of the
 * innermost, so the shapes are read by their structure rather than by the
 * operator that recorded them:
 *   matmul class   [bias(N), X(M,K), W(K,N)]   addmm
 *                  [X(...,K), W(N,K), bias?]    linear
 *                  [A(...,M,K), B(...,K,N)]     mm, bmm, matmul (batch dims broadcast)
 *                  [C, A(b,M,K), B(b,K,N)]      baddbmm
 *                  [Q(B,H,S,D), K(B,H,T,D), V]  scaled-dot-product attention: 4*B*H*S*T*D
 *   conv           [X(N,C,H,W...), W(O,C/g,kh,kw...)]: 2*N*O*(C/g)*prod(k)*prod(out),
 *                  out from the stride, padding and dilation the profiler
 *                  recorded (Concrete Inputs: rv_conv_geometry); without them
 *                  the input's spatial size (stride 1), or input / k for a
 *                  patch embedding (square kernel of 4 or more dividing the input)
 *   everything else: bytes = every tensor input read once + the largest written once
 *                  (a pool: its output, from the window it recorded)
 * A GEMM moves its operands and its result once (a lower bound: tiles are
 * re-read from L2, which the per-kernel efficiency absorbs).
 */
#include "reverie/costmodel.h"
#include "reverie/shapes.h"
#include <string.h>

typedef struct {
    double m, n, k, batch;   /* batch: of the product (broadcast) */
    double a_batch, b_batch; /* copies of each operand in memory (1 for a shared weight) */
} gemm_shape;

static double elements(const rv_shapes *s, guint input) { return (double)rv_shapes_elements(s, input); }
/* Extent `from_end` places from the end (-1: the last); 0 when absent. */
static int64_t extent(const rv_shapes *s, guint input, int from_end)
{
    int rank = (int)rv_shapes_rank(s, input);
    if (from_end >= 0 || rank + from_end < 0) return 0;
    return rv_shapes_extent(s, input, (guint)(rank + from_end));
}

/* Product of the dimensions before the last `keep` ones (1 for none). */
static double leading(const rv_shapes *s, guint input, guint keep)
{
    guint rank = rv_shapes_rank(s, input);
    double product = 1;
    for (guint d = 0; d + keep < rank; d++) product *= (double)rv_shapes_extent(s, input, d);
    return product;
}

static gboolean gemm_flops(const gemm_shape *g, double *flops, gboolean *aligned)
{
    if (g->m <= 0 || g->n <= 0 || g->k <= 0 || g->batch <= 0) return FALSE;
    *flops = 2.0 * g->batch * g->m * g->n * g->k;
    /* The libraries load 16 bytes at a time from rows whose length (the
     * leading dimension: K of A, N of B and of the result, row-major) is a
     * multiple of 8 half-precision elements; the count of rows, M, does not
     * matter.  Shapes alone cannot show a transposed view, whose leading
     * dimension is M (the trace's Input Strides would; they are not kept). */
    *aligned = (int64_t)g->n % 8 == 0 && (int64_t)g->k % 8 == 0;
    return TRUE;
}

/* addmm(bias, X, W): X (M,K), W (K,N). */
static gboolean as_addmm(const rv_shapes *s, gemm_shape *g)
{
    if (rv_shapes_count(s) < 3 || rv_shapes_rank(s, 1) != 2 || rv_shapes_rank(s, 2) != 2) return FALSE;
    if (extent(s, 1, -1) != extent(s, 2, -2)) return FALSE;
    *g = (gemm_shape){ (double)extent(s, 1, -2), (double)extent(s, 2, -1), (double)extent(s, 1, -1), 1, 1, 1 };
    return TRUE;
}

/* linear(X, W, bias?): X (..., K), W (N, K). */
static gboolean as_linear(const rv_shapes *s, gemm_shape *g)
{
    if (rv_shapes_count(s) < 2 || rv_shapes_rank(s, 0) < 1 || rv_shapes_rank(s, 1) != 2) return FALSE;
    if (extent(s, 0, -1) != extent(s, 1, -1)) return FALSE;
    *g = (gemm_shape){ leading(s, 0, 1), (double)extent(s, 1, -2), (double)extent(s, 0, -1), 1, 1, 1 };
    return TRUE;
}

/* mm / bmm / matmul (A, B), or baddbmm (C, A, B) with `first` = 1. */
static gboolean as_matmul(const rv_shapes *s, guint first, gemm_shape *g)
{
    if (rv_shapes_count(s) < first + 2) return FALSE;
    guint a = first, b = first + 1;
    guint rank_a = rv_shapes_rank(s, a), rank_b = rv_shapes_rank(s, b);
    if (rank_a < 2 || rank_b < 2 || extent(s, a, -1) != extent(s, b, -2)) return FALSE;
    double batch_a = leading(s, a, 2), batch_b = leading(s, b, 2);
    *g = (gemm_shape){ (double)extent(s, a, -2), (double)extent(s, b, -1), (double)extent(s, a, -1),
                       batch_a > batch_b ? batch_a : batch_b, batch_a, batch_b };
    /* A batch against one matrix (x [B, S, K] @ W [K, N]) is one GEMM of
     * B*S rows: PyTorch folds it so, and the rows' count is what the
     * libraries see (for alignment; the work is the same). */
    if (rank_b == 2 && batch_a > 1) *g = (gemm_shape){ batch_a * g->m, g->n, g->k, 1, 1, 1 };
    return TRUE;
}

static double tensor_bytes(const rv_shapes *s, int element_bytes)
{
    double total = 0;
    for (guint i = 0; i < rv_shapes_count(s); i++) total += elements(s, i);
    return total * element_bytes;
}

static gboolean matmul_work(const rv_shapes *s, int element_bytes, double *flops, double *bytes, gboolean *aligned)
{
    gemm_shape g;
    gboolean found = as_addmm(s, &g) || as_matmul(s, 0, &g) || as_matmul(s, 1, &g) || as_linear(s, &g);
    if (!found || !gemm_flops(&g, flops, aligned)) return FALSE;
    *bytes = (g.a_batch * g.m * g.k + g.batch * g.m * g.n + g.b_batch * g.k * g.n) * element_bytes;
    return TRUE;
}

/* Q (B,H,S,D), K (B,H,T,D), V (B,H,T,Dv): two GEMMs of B*H*S*T*D each. */
static gboolean attention_work(const rv_shapes *s, int element_bytes, double *flops, double *bytes, gboolean *aligned)
{
    if (rv_shapes_count(s) < 3 || rv_shapes_rank(s, 0) < 3 || rv_shapes_rank(s, 1) != rv_shapes_rank(s, 0) ||
        extent(s, 0, -1) != extent(s, 1, -1))
        return FALSE;
    double heads_batch = leading(s, 0, 2), q = (double)extent(s, 0, -2), kv = (double)extent(s, 1, -2);
    double d = (double)extent(s, 0, -1);
    if (heads_batch <= 0 || q <= 0 || kv <= 0 || d <= 0) return FALSE;
    *flops = 4.0 * heads_batch * q * kv * d;
    *bytes = (elements(s, 0) * 2 + elements(s, 1) + elements(s, 2)) * element_bytes;
    *aligned = (int64_t)d % 8 == 0;
    return TRUE;
}

/* The output's spatial size without the operator's arguments: the
 * input's (stride 1, 'same' padding), or input / k for a patch embedding
 * (a square kernel of 4 or more dividing the input). */
static double unstrided_spatial(const rv_shapes *s, guint rank)
{
    gboolean patchify = TRUE;
    for (guint d = 2; d < rank; d++) {
        int64_t in = rv_shapes_extent(s, 0, d), k = rv_shapes_extent(s, 1, d);
        patchify = patchify && k >= 4 && k == rv_shapes_extent(s, 1, 2) && in % k == 0;
    }
    double out_spatial = 1;
    for (guint d = 2; d < rank; d++) {
        int64_t in = rv_shapes_extent(s, 0, d), k = rv_shapes_extent(s, 1, d);
        out_spatial *= (double)(patchify && k > 0 ? in / k : in);
    }
    return out_spatial;
}

/* X (N, C, spatial...), W (O, C/g, kernel...); transposed, W (C, O/g,
 * kernel...), and every input element meets the whole kernel. */
static gboolean conv_work(const rv_shapes *s, const rv_conv_geometry *geometry, int element_bytes, double *flops,
                          double *bytes, gboolean *aligned)
{
    guint rank = rv_shapes_rank(s, 0);
    if (rv_shapes_count(s) < 2 || rank < 3 || rv_shapes_rank(s, 1) != rank) return FALSE;
    if (geometry != NULL && geometry->spatial != rank - 2) geometry = NULL; /* arguments of another form */
    double batch = (double)rv_shapes_extent(s, 0, 0), out_channels = (double)rv_shapes_extent(s, 1, 0);
    double per_output = (double)rv_shapes_extent(s, 1, 1), kernel = 1, in_spatial = 1, out_spatial = 1;
    for (guint d = 2; d < rank; d++) {
        int64_t in = rv_shapes_extent(s, 0, d), k = rv_shapes_extent(s, 1, d);
        kernel *= (double)k;
        in_spatial *= (double)in;
        if (geometry != NULL) out_spatial *= (double)rv_conv_output_extent(geometry, d - 2, in, k);
    }
    if (geometry == NULL) out_spatial = unstrided_spatial(s, rank);
    double written = out_spatial;
    if (geometry != NULL && geometry->transposed) {
        /* weight [C, O/g]: per input position, C x O/g x kernel products */
        written = out_spatial * per_output * (double)geometry->groups / MAX(out_channels, 1);
        out_spatial = in_spatial;
    }
    if (batch <= 0 || out_channels <= 0 || per_output <= 0 || kernel <= 0 || out_spatial <= 0) return FALSE;
    *flops = 2.0 * batch * out_channels * per_output * kernel * out_spatial;
    *bytes = (elements(s, 0) + elements(s, 1) + batch * out_channels * written) * element_bytes;
    *aligned = (int64_t)out_channels % 8 == 0 && (int64_t)rv_shapes_extent(s, 0, 1) % 8 == 0;
    return TRUE;
}

/* Memory-bound work: every tensor input read once, the largest written
 * once, or a pool's output (its recorded window). */
static gboolean streaming_work(const rv_shapes *s, const char *op_args, int element_bytes, double *flops,
                               double *bytes)
{
    double largest = 0;
    for (guint i = 0; i < rv_shapes_count(s); i++)
        if (elements(s, i) > largest) largest = elements(s, i);
    if (largest <= 0) return FALSE;
    rv_pool_geometry pool;
    double written = largest;
    if (rv_pool_geometry_parse(op_args, &pool) && rv_pool_output_elements(s, &pool) > 0)
        written = (double)rv_pool_output_elements(s, &pool);
    *bytes = tensor_bytes(s, element_bytes) + written * element_bytes;
    *flops = largest;
    return TRUE;
}

gboolean rv_cost_work_of(rv_cost_class cls, const char *op, const char *dims, const char *op_args, int element_bytes,
                         double *flops, double *bytes, gboolean *aligned)
{
    *flops = *bytes = 0;
    *aligned = TRUE;
    if (dims == NULL || element_bytes <= 0) return FALSE;
    rv_shapes shapes;
    gboolean ok = rv_shapes_parse(dims, &shapes);
    if (ok) {
        switch (cls) {
        case RV_COST_GEMM: ok = matmul_work(&shapes, element_bytes, flops, bytes, aligned); break;
        case RV_COST_ATTENTION:
            ok = (op && (strstr(op, "attention") || strstr(op, "sdpa")) &&
                  attention_work(&shapes, element_bytes, flops, bytes, aligned)) ||
                 matmul_work(&shapes, element_bytes, flops, bytes, aligned);
            break;
        /* a convolution's backward reads (grad, input, weight) and runs
         * several kernels: the forward's layout would misread it */
        case RV_COST_CONV: {
            rv_conv_geometry geometry;
            gboolean known = rv_conv_geometry_parse(op_args, &geometry);
            ok = !(op && strstr(op, "backward")) &&
                 conv_work(&shapes, known ? &geometry : NULL, element_bytes, flops, bytes, aligned);
            break;
        }
        case RV_COST_COMM: case RV_COST_HOST_COPY: case RV_COST_UNKNOWN: ok = FALSE; break;
        default: ok = streaming_work(&shapes, op_args, element_bytes, flops, bytes); break;
        }
    }
    rv_shapes_clear(&shapes);
    return ok && *bytes > 0;
}
