/*
 * layers.h - the weighted layers of the traced model, as the trace shows them.
 *
 * Communication plugins (data-parallel all-reduce, parameter servers) need
 * to know which layers hold parameters, how many bytes each holds, where
 * each step's forward pass first uses them and where the backward pass
 * produces their gradients.  The trace says all this only indirectly:
 *
 *  - A weighted layer is a run of forward-phase CPU calls of one step whose
 *    layer tag names a conv, linear or addmm operator, in recorded order
 *    (under torch.compile the tag is the operator inside the compiled
 *    graph's wrappers, whose backward calls aten::mm and aten::addmm
 *    without autograd nodes to name them).
 *    Consecutive calls with the same layer, Input Dims and thread are one
 *    layer (a cuDNN convolution launches several kernels).  Its weight +
 *    bias bytes come from the operator's Input Dims (shapes.h), 4 bytes per
 *    element: inputs 1 and 2 (conv(input, weight, bias), linear(input,
 *    weight, bias)); for addmm(bias, input, weight) inputs 2 and 0.
 *  - A step's backward GPU tasks, in recorded order, fall into runs of
 *    kernels of weighted layers (ConvolutionBackward, AddmmBackward, ...).
 *    Gradients appear in reverse forward order, and gradient k of n (k = 0:
 *    the layer nearest the output) is taken to be produced by the last
 *    kernel of run k * runs / n.  Without per-kernel gradient records this
 *    is an estimate; with one run per weighted layer it is exact.
 *
 * Layers are matched across steps by position (the j-th weighted layer of
 * one step is the j-th of the next), not by name: legacy traces tag every
 * convolution "aten::conv2d".
 */
#ifndef REVERIE_LAYERS_H
#define REVERIE_LAYERS_H

#include <glib.h>
#include <stdint.h>
#include "reverie/graph.h"

G_BEGIN_DECLS

typedef struct {
    int32_t layer;         /* string id of the layer tag ("aten::conv2d") */
    int32_t input_dims;    /* string id of its Input Dims, -1 if the trace has none */
    int32_t first_call;    /* its first forward CPU call */
    int32_t first_gpu;     /* the first GPU task its calls launched, -1 if none */
    int64_t weight_bytes;  /* weight + bias bytes from the Input Dims; 0 if unknown */
} rv_weighted_layer;

/* Does a layer tag name a weighted forward operator (conv, linear, addmm)? */
gboolean rv_layer_is_weighted(const char *layer);
/* Does a layer tag name the backward of one (ConvolutionBackward, AddmmBackward, ...)? */
gboolean rv_layer_is_weighted_backward(const char *layer);
/* Weight + bias bytes of a weighted forward task from its Input Dims (0 if none). */
int64_t rv_layer_weight_bytes(const rv_graph *graph, int32_t task);

/*
 * The weighted layers of every step's forward phase, in forward order.
 * Element step + 1 (element 0: tasks outside every step) is a GArray of
 * rv_weighted_layer; the array has graph->steps->len + 1 elements.
 * Free with g_ptr_array_unref.
 */
GPtrArray *rv_weighted_layers_by_step(const rv_graph *graph);

/* Each step's backward-phase GPU tasks in recorded order, indexed like
 * rv_weighted_layers_by_step (GArrays of int32 task ids). */
GPtrArray *rv_backward_gpu_tasks_by_step(const rv_graph *graph);

/* Drop from `tasks` those whose launch call is unknown or began after
 * limit_ns (recorded time).  A plugin that makes a task wait for a gradient
 * must not pick a producer launched after that task, or it closes a cycle. */
void rv_keep_launched_by(const rv_graph *graph, GArray *tasks, int64_t limit_ns);

/* The last task of each run of weighted-layer kernels among `tasks` (in
 * recorded order); the last task of all when none is weighted; empty only
 * when `tasks` is.  GArray of int32 task ids. */
GArray *rv_weighted_backward_runs(const rv_graph *graph, const GArray *tasks);
/* The same with a memo of which layer tags are weighted backward layers,
 * kept across the steps of one plugin call (strings.h; init it with
 * rv_weighted_backward_memo_init, free with rv_string_memo_clear). */
void rv_weighted_backward_memo_init(rv_string_memo *memo, const rv_graph *graph);
GArray *rv_weighted_backward_runs_with(const rv_graph *graph, const GArray *tasks, rv_string_memo *weighted);

/* Which run produces gradient k (backward order) of n: k * runs / n. */
guint rv_gradient_run(guint gradient, guint gradients, guint runs);

/* Weight bytes of each weighted layer (0 where unknown), in forward order,
 * of the first step whose layers have any (element i matches layer i of
 * that step), else of the tasks outside every step; empty when none has
 * shapes.  layers_by_step is
 * rv_weighted_layers_by_step's result. */
GArray *rv_weight_sizes_of_first_step(const GPtrArray *layers_by_step);

/* Weight byte counts per weighted layer from a JSON list in forward order
 * (for traces recorded without shapes).  RV_ERROR_PLUGIN on a bad file. */
GArray *rv_weight_sizes_from_file(const char *path, GError **error);

G_END_DECLS

#endif
