/*
 * shapes.h - tensor sizes from the profiler's "Input Dims" record.
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

G_END_DECLS

#endif
