/*
 * shapes.h - tensor sizes from the profiler's "Input Dims" record, and a
 * convolution's geometry from its "Concrete Inputs".
 *
 * With record_shapes=True every operator carries the shapes of its inputs
 * as JSON text, e.g. [[32, 3, 224, 224], [64, 3, 7, 7], [], []]; the graph
 * keeps that text per task (rv_task.input_dims).  Plugins size gradients,
 * activations and messages from it.  A missing or malformed record, or an
 * input that is not a tensor (a scalar, a list of tensors), counts as 0
 * elements, never as an error: shapes are advisory.
 */
#ifndef REVERIE_SHAPES_H
#define REVERIE_SHAPES_H

#include <glib.h>
#include <stdint.h>
#include "reverie/graph.h"

G_BEGIN_DECLS

/* The parsed shapes of one Input Dims record: shapes->len inputs, each a
 * GArray of int64 extents (empty for a non-tensor input). */
typedef struct {
    GPtrArray *inputs;
} rv_shapes;

/* Parse the task's Input Dims (FALSE if it has none or it is malformed). */
gboolean rv_shapes_of_task(const rv_graph *graph, int32_t task, rv_shapes *shapes);
gboolean rv_shapes_parse(const char *input_dims_json, rv_shapes *shapes);
void rv_shapes_clear(rv_shapes *shapes);

/* Number of inputs, rank of input i, extent d of input i (0 when absent). */
guint rv_shapes_count(const rv_shapes *shapes);
guint rv_shapes_rank(const rv_shapes *shapes, guint input);
int64_t rv_shapes_extent(const rv_shapes *shapes, guint input, guint dim);
/* Elements of input i (the product of its extents; 0 when absent or empty). */
int64_t rv_shapes_elements(const rv_shapes *shapes, guint input);

/*
 * A convolution's geometry, from the profiler's "Concrete Inputs" (PyTorch
 * 2.x with record_shapes=True; rv_task_op_args, graph.h): Input Dims alone
 * give the input and the weight, not the stride.  `spatial` lists have
 * one entry per spatial dimension (1 to 3).
 */
#define RV_CONV_MAX_SPATIAL 3
typedef struct {
    guint spatial;
    int64_t stride[RV_CONV_MAX_SPATIAL], padding[RV_CONV_MAX_SPATIAL], dilation[RV_CONV_MAX_SPATIAL];
    int64_t output_padding[RV_CONV_MAX_SPATIAL]; /* transposed only */
    int64_t groups;
    gboolean same_padding;  /* padding='same': the output keeps the input's size */
    gboolean transposed;    /* a transposed convolution (its weight is [C, O/groups, kernel...]) */
} rv_conv_geometry;

/* Parse the task's operator arguments (FALSE if it has none, or they are
 * not a convolution's). */
gboolean rv_conv_geometry_of_task(const rv_graph *graph, int32_t task, rv_conv_geometry *geometry);
gboolean rv_conv_geometry_parse(const char *op_args_json, rv_conv_geometry *geometry);
/* The output's extent along spatial dimension d for an input extent `in`
 * and a kernel extent `kernel` (PyTorch's Conv and ConvTranspose formulas);
 * 0 when d is past the geometry's dimensions or the output would be empty. */
int64_t rv_conv_output_extent(const rv_conv_geometry *geometry, guint d, int64_t in, int64_t kernel);

/* A pool's window (max_pool, avg_pool), or an adaptive pool's output size,
 * from the same record: Input Dims give only the input. */
typedef struct {
    guint spatial;
    gboolean adaptive;      /* output_size holds the output; the window fields are unused */
    int64_t kernel[RV_CONV_MAX_SPATIAL], stride[RV_CONV_MAX_SPATIAL], padding[RV_CONV_MAX_SPATIAL];
    int64_t dilation[RV_CONV_MAX_SPATIAL], output_size[RV_CONV_MAX_SPATIAL];
    gboolean ceil_mode;
} rv_pool_geometry;

gboolean rv_pool_geometry_parse(const char *op_args_json, rv_pool_geometry *geometry);
/* The output's extent along spatial dimension d for an input extent `in`
 * (PyTorch's pooling formula, ceil_mode included); 0 when d is past the
 * geometry's dimensions or the output would be empty. */
int64_t rv_pool_output_extent(const rv_pool_geometry *geometry, guint d, int64_t in);
/* Elements of the pool's output for its first input ([N, C, spatial...]
 * or [C, spatial...]); 0 when that input does not fit the geometry. */
int64_t rv_pool_output_elements(const rv_shapes *shapes, const rv_pool_geometry *geometry);

G_END_DECLS

#endif
