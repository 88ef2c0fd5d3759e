/*
 * layer_instances.h - calls of a model's top-level operators as the GPU
 * runs them, and which backward call goes with which forward one.
 *
 * A layer instance is a run of consecutive GPU tasks (in recorded order,
 * within one step and phase) with the same layer tag and Input Dims: one
 * call of a top-level operator ("aten::conv2d" forward,
 * "...ConvolutionBackward0" backward).  Its family (conv, linear,
 * batch_norm, relu, max_pool...) comes from the tag, in its forward or
 * backward spelling.  Within a step and a family the k-th last forward
 * instance goes with the k-th backward instance, since autograd runs the
 * layers in reverse.  vdnn offloads the feature maps of such pairs; gist
 * encodes them.
 */
#ifndef REVERIE_LAYER_INSTANCES_H
#define REVERIE_LAYER_INSTANCES_H

#include <glib.h>
#include "reverie/graph.h"
#include "reverie/transform.h"
#include "reverie/strings.h"

G_BEGIN_DECLS

typedef enum {
    RV_FAMILY_CONV,   /* first, so vdnn's policy=conv is family 0 */
    RV_FAMILY_LINEAR,
    RV_FAMILY_BATCH_NORM,
    RV_FAMILY_LAYER_NORM,
    RV_FAMILY_GROUP_NORM,
    RV_FAMILY_RELU,
    RV_FAMILY_GELU,
    RV_FAMILY_MAX_POOL,
    RV_FAMILY_AVG_POOL,
    RV_FAMILY_SOFTMAX,
    RV_FAMILY_DROPOUT,
    RV_FAMILY_COUNT
} rv_layer_family;

/* "conv", "linear", "batch_norm", ... */
const char *rv_layer_family_name(rv_layer_family family);
/* The family of a layer tag in forward or backward spelling, or -1. */
int rv_layer_family_of(const char *layer, gboolean backward);

typedef struct {
    int32_t first, last;  /* first and last GPU task, in recorded order */
    int family;           /* rv_layer_family, -1: none known */
    guint position, count; /* its tasks are tasks[position .. position + count) of the list it was cut from */
} rv_layer_instance;

/* Families of layer tags remembered per string id, for one plugin call
 * (strings.h: a step repeats the same tags). */
typedef struct {
    rv_string_memo phases[2];  /* forward, backward */
} rv_layer_family_memo;
void rv_layer_family_memo_init(rv_layer_family_memo *memo, const rv_graph *graph);
void rv_layer_family_memo_clear(rv_layer_family_memo *memo);

/* Cut one step's GPU tasks of one phase (int32 ids, sorted in recorded
 * order) into instances (GArray of rv_layer_instance). */
GArray *rv_layer_instances(const rv_graph *graph, rv_layer_family_memo *memo, const GArray *tasks, gboolean backward);

/* Pair the instances of one family: element k is { forward index,
 * backward index } of the k-th last forward instance and the k-th backward
 * one (GArray of guint[2]).  *unpaired counts forward instances without a
 * partner. */
GArray *rv_layer_mirror_pairs(const GArray *forward, const GArray *backward, int family, guint *unpaired);

/* The live GPU tasks of the forward (list RV_LIST_FORWARD) and backward
 * (RV_LIST_BACKWARD) phases by step (rv_step_lists, transform.h), each
 * list in recorded order. */
enum { RV_LIST_FORWARD, RV_LIST_BACKWARD };
rv_step_lists rv_gpu_tasks_forward_backward(rv_graph *graph);

G_END_DECLS

#endif
