/*
 * gist.c - Gist (Jain et al., ISCA 2018) as Daydream models it (appendix
 * A.9, Algorithm 11): the feature maps a CNN keeps for backward are stored
 * encoded after the forward layer that makes them and decoded before the
 * backward layer that reads them.  The encodings cost kernels and save
 * memory; the question is how much time for how much memory.
 *
 *   reverie whatif resnet.json.gz --opt gist
 *   reverie whatif resnet.json.gz --opt gist:ssdc=off
 *   reverie memory resnet.json.gz --opt gist:sparsity=0.7
 *
 * WHERE (Algorithm 11's lossless encodings).  Per step, the forward GPU
 * tasks are cut into layer instances (layer_instances.h).  A ReLU instance
 * whose next instance is a pooling layer is Binarized: its output, which
 * only ReLU's backward reads (as a sign mask; max pooling keeps its own
 * indices), is kept as 1 bit per element.  A ReLU instance whose next
 * instance is a convolution gets Sparse Storage Dense Compute (SSDC): its
 * output, which the convolution's backward reads for the weight gradient,
 * is kept in a compressed sparse row form, (1 - sparsity) x (value +
 * index) bytes per element.
 * KERNELS.  An encode kernel right after the ReLU's last GPU task, and a
 * decode kernel right before the first GPU task of the backward layer that
 * reads the map (the ReLU's own backward for Binarize, the convolution's
 * for SSDC; paired in mirror order, layer_instances.h), each with a launch
 * call at the trace's median launch.  Their durations are inferred from
 * the ReLU kernel itself, as Daydream suggests ("estimated using existing
 * element-wise kernels"): ReLU streams its map twice (read B, write B), an
 * encode reads B and writes E, a decode reads E and writes B, so each lasts
 * the ReLU's GPU time x (B + E) / 2B.  No shapes are needed for the time.
 * MEMORY.  Each encoded ReLU call is marked KEPT_SCALE E / B (memory.h), so
 * whatif's peak line and `reverie memory --opt gist` show what it saves
 * (with Input Dims in the trace).
 * ASSUMED, not read from the trace (a profile records no tensor values):
 * the ReLU outputs' sparsity (sparsity=, default 0.6) and the CSR index
 * width (index_bytes=, default 1: Gist narrows its column indices).
 * Not modelled: Gist's lossy Delayed Precision Reduction (every other kept
 * map in fewer bits), its in-place optimisations, and encodings of maps
 * kept by anything but a ReLU.
 * binarize=off,ssdc=off changes nothing (the baseline, tested).
 */
#include "reverie/costmodel.h"
#include "reverie/error.h"
#include "reverie/inserted.h"
#include "reverie/layer_instances.h"
#include "reverie/memory.h"
#include "reverie/plugin.h"
#include "reverie/transform.h"
#include "reverie/units.h"
#include <math.h>
#include <string.h>

static const rv_param_spec gist_params[] = {
    { "binarize", RV_PARAM_CHOICE, "on", NULL, "ReLU -> pool: keep the ReLU output as 1 bit per element", "on|off" },
    { "ssdc", RV_PARAM_CHOICE, "on", NULL, "ReLU -> conv: keep the ReLU output in sparse (CSR) form", "on|off" },
    { "sparsity", RV_PARAM_NUMBER, "0.6", "fraction", "assumed fraction of zeros in ReLU outputs (SSDC's saving)", NULL },
    { "index_bytes", RV_PARAM_INTEGER, "1", "bytes", "bytes per CSR column index (SSDC)", NULL },
    { NULL }
};

typedef enum { ENCODE_BINARIZE, ENCODE_SSDC, ENCODE_COUNT } encoding;

static const char *const encode_names[ENCODE_COUNT] = { "gist: binarize ReLU output (encode)", "gist: SSDC encode (dense to CSR)" };
static const char *const decode_names[ENCODE_COUNT] = { "gist: binarized mask (decode)", "gist: SSDC decode (CSR to dense)" };

typedef struct {
    gboolean enabled[ENCODE_COUNT];
    double sparsity;
    int64_t index_bytes;
} gist_options;

typedef struct {
    guint encoded[ENCODE_COUNT];  /* ReLU instances encoded */
    guint unpaired;               /* candidates whose backward reader was not found */
    guint not_smaller;            /* SSDC candidates whose sparse form would be no smaller */
    int64_t added_ns;             /* GPU time inserted, all steps */
} gist_tally;

/* Bytes per element of a ReLU's kernel (its name's dtype; fp32 if none).
 * The name is read once per distinct name (memo: name id -> bytes): a
 * step repeats its ReLUs, and reading a name is a dozen substring searches. */
static int element_bytes_of(const rv_graph *graph, int32_t task, GHashTable *memo)
{
    int32_t name = g_array_index(graph->tasks, rv_task, task).name;
    gpointer known = g_hash_table_lookup(memo, GINT_TO_POINTER(name));
    if (known != NULL) return GPOINTER_TO_INT(known);
    int bytes = rv_cost_element_bytes_of_name(rv_strings_get(graph->strings, name), 4);
    g_hash_table_insert(memo, GINT_TO_POINTER(name), GINT_TO_POINTER(bytes));
    return bytes;
}

/* E / B: the encoded map's size over the dense one's. */
static double encoded_fraction(const gist_options *o, encoding e, int element_bytes)
{
    if (e == ENCODE_BINARIZE) return 1.0 / (8.0 * element_bytes);
    return (1.0 - o->sparsity) * (double)(element_bytes + o->index_bytes) / element_bytes;
}

/* The GPU tasks of an instance (its slice of the list it was cut from);
 * *gpu_ns gets their time. */
static GArray *instance_tasks(const rv_graph *graph, const rv_layer_instance *instance, const GArray *tasks,
                              int64_t *gpu_ns)
{
    GArray *mine = g_array_new(FALSE, FALSE, sizeof(int32_t));
    g_array_append_vals(mine, &g_array_index(tasks, int32_t, instance->position), instance->count);
    *gpu_ns = 0;
    for (guint i = 0; i < mine->len; i++)
        *gpu_ns += g_array_index(graph->tasks, rv_task, g_array_index(mine, int32_t, i)).duration_ns;
    return mine;
}

/* For each forward instance of `family`, the first GPU task of its
 * backward partner (-1: none): forward index -> task. */
static int32_t *backward_readers(const GArray *forward, const GArray *backward, rv_layer_family family, guint *unpaired)
{
    int32_t *reader = g_new(int32_t, MAX(forward->len, 1));
    for (guint i = 0; i < forward->len; i++) reader[i] = -1;
    GArray *pairs = rv_layer_mirror_pairs(forward, backward, family, unpaired);
    for (guint k = 0; k < pairs->len; k++) {
        const guint *pair = &g_array_index(pairs, guint, 2 * k);
        reader[pair[0]] = g_array_index(backward, rv_layer_instance, pair[1]).first;
    }
    g_array_unref(pairs);
    return reader;
}

/* One planned encoding: where to encode, where to decode, how long each takes. */
typedef struct {
    int32_t relu_last, reader_first;
    GArray *relu_tasks;   /* the ReLU instance's GPU tasks (for the memory effect) */
    int64_t kernel_ns;
    double fraction;
    encoding kind;
} planned;

static void plan_step(const rv_graph *graph, const gist_options *o, rv_layer_family_memo *memo, GHashTable *bytes_memo,
                      const GArray *fwd_tasks, const GArray *bwd_tasks, GArray *plan, gist_tally *tally)
{
    GArray *fwd = rv_layer_instances(graph, memo, fwd_tasks, FALSE);
    GArray *bwd = rv_layer_instances(graph, memo, bwd_tasks, TRUE);
    guint ignored = 0;
    int32_t *relu_reader = backward_readers(fwd, bwd, RV_FAMILY_RELU, &ignored);
    int32_t *conv_reader = backward_readers(fwd, bwd, RV_FAMILY_CONV, &ignored);
    for (guint i = 0; i + 1 < fwd->len; i++) {
        const rv_layer_instance *relu = &g_array_index(fwd, rv_layer_instance, i);
        int next = g_array_index(fwd, rv_layer_instance, i + 1).family;
        if (relu->family != RV_FAMILY_RELU) continue;
        encoding kind;
        int32_t reader;
        if (next == RV_FAMILY_MAX_POOL || next == RV_FAMILY_AVG_POOL) { kind = ENCODE_BINARIZE; reader = relu_reader[i]; }
        else if (next == RV_FAMILY_CONV) { kind = ENCODE_SSDC; reader = conv_reader[i + 1]; }
        else continue;
        if (!o->enabled[kind]) continue;
        if (reader < 0) { tally->unpaired++; continue; }
        double fraction = encoded_fraction(o, kind, element_bytes_of(graph, relu->first, bytes_memo));
        if (fraction >= 1.0) { tally->not_smaller++; continue; } /* Gist keeps such a map dense */
        int64_t relu_ns;
        GArray *tasks = instance_tasks(graph, relu, fwd_tasks, &relu_ns);
        /* ReLU streams 2B; an encode or decode streams B + E */
        planned p = { relu->last, reader, tasks, (int64_t)llround((double)relu_ns * (1.0 + fraction) / 2.0), fraction,
                      kind };
        g_array_append_val(plan, p);
    }
    g_free(relu_reader);
    g_free(conv_reader);
    g_array_unref(fwd);
    g_array_unref(bwd);
}

static void planned_clear(gpointer data) { g_array_unref(((planned *)data)->relu_tasks); }

/* Every step's encodings, planned before anything is inserted. */
static GArray *plan_all(rv_graph *graph, const gist_options *o, gist_tally *tally, guint *steps_with_backward)
{
    GArray *plan = g_array_new(FALSE, FALSE, sizeof(planned));
    g_array_set_clear_func(plan, planned_clear);
    rv_step_lists by_step = rv_gpu_tasks_forward_backward(graph);
    rv_layer_family_memo memo;
    rv_layer_family_memo_init(&memo, graph);
    GHashTable *bytes_memo = g_hash_table_new(g_direct_hash, g_direct_equal); /* a name's element bytes are never 0 */
    for (int32_t step = -1; step < (int32_t)by_step.slots - 1; step++) {
        GArray *fwd = rv_step_lists_get(&by_step, step, RV_LIST_FORWARD);
        GArray *bwd = rv_step_lists_get(&by_step, step, RV_LIST_BACKWARD);
        if (fwd->len == 0 || bwd->len == 0) continue;
        (*steps_with_backward)++;
        plan_step(graph, o, &memo, bytes_memo, fwd, bwd, plan, tally);
    }
    g_hash_table_destroy(bytes_memo);
    rv_layer_family_memo_clear(&memo);
    rv_step_lists_free(&by_step);
    return plan;
}

static gboolean insert_plan(rv_graph *graph, const GArray *plan, gist_tally *tally, GError **error)
{
    rv_kernel_inserter in;
    rv_kernel_inserter_init(&in, graph, NULL, error);
    for (guint i = 0; i < plan->len; i++) {
        const planned *p = &g_array_index(plan, planned, i);
        int32_t encode = rv_kernel_inserter_add_lasting(&in, p->relu_last, FALSE, encode_names[p->kind], p->kernel_ns);
        int32_t decode = encode == -2 ? -2
                                      : rv_kernel_inserter_add_lasting(&in, p->reader_first, TRUE, decode_names[p->kind],
                                                                       p->kernel_ns);
        if (encode == -2 || decode == -2) return FALSE;
        if (encode < 0 || decode < 0) { tally->unpaired++; continue; }
        /* the decode reads what the encode wrote */
        rv_transform_add_edge(graph, encode, decode);
        rv_memory_effect_add_for_tasks(graph, p->relu_tasks, RV_MEM_EFFECT_KEPT_SCALE, p->fraction, 0);
        tally->encoded[p->kind]++;
        tally->added_ns += 2 * p->kernel_ns;
    }
    return TRUE;
}

static gboolean read_options(const rv_params *params, gist_options *o, GError **error)
{
    o->enabled[ENCODE_BINARIZE] = strcmp(rv_params_string(params, "binarize"), "on") == 0;
    o->enabled[ENCODE_SSDC] = strcmp(rv_params_string(params, "ssdc"), "on") == 0;
    o->sparsity = rv_params_number(params, "sparsity");
    o->index_bytes = rv_params_integer(params, "index_bytes");
    if (!(o->sparsity >= 0 && o->sparsity <= 1) || o->index_bytes < 0 || o->index_bytes > 8) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "need 0 <= sparsity <= 1 and 0 <= index_bytes <= 8");
        return FALSE;
    }
    return TRUE;
}

static void write_notes(GString *notes, const gist_options *o, const gist_tally *t, guint steps)
{
    char *added = rv_format_duration(t->added_ns / (int64_t)MAX(steps, 1));
    g_string_append_printf(notes, "    %u ReLU outputs binarized (1 bit per element), %u stored by SSDC "
                                  "(sparsity %.2f assumed, %" G_GINT64_FORMAT "-byte indices) in %u steps: "
                                  "%u encode and %u decode kernels, %s of GPU time a step\n",
                           t->encoded[ENCODE_BINARIZE], t->encoded[ENCODE_SSDC], o->sparsity, o->index_bytes, steps,
                           t->encoded[ENCODE_BINARIZE] + t->encoded[ENCODE_SSDC],
                           t->encoded[ENCODE_BINARIZE] + t->encoded[ENCODE_SSDC], added);
    if (t->not_smaller)
        g_string_append_printf(notes, "    %u ReLU outputs kept dense: at sparsity %.2f their CSR form is no smaller\n",
                               t->not_smaller, o->sparsity);
    if (t->unpaired)
        g_string_append_printf(notes, "    %u candidates left alone: no backward layer found to decode before\n",
                               t->unpaired);
    g_free(added);
}

static gboolean gist_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    gist_options o;
    if (!read_options(params, &o, error)) return FALSE;
    gist_tally tally = { { 0 }, 0, 0, 0 };
    guint steps = 0;
    GArray *plan = plan_all(graph, &o, &tally, &steps);
    gboolean ok = TRUE;
    if (steps == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "the trace has no step with both forward and backward GPU work: Gist encodes what forward keeps "
                    "for backward");
        ok = FALSE;
    } else if (plan->len == 0 && (o.enabled[ENCODE_BINARIZE] || o.enabled[ENCODE_SSDC])) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "no ReLU layer whose output feeds a %s layer, with its backward found%s: nothing for Gist to encode",
                    o.enabled[ENCODE_BINARIZE] && o.enabled[ENCODE_SSDC] ? "pooling or convolution"
                    : o.enabled[ENCODE_BINARIZE] ? "pooling" : "convolution",
                    tally.not_smaller ? " (or SSDC would be no smaller at this sparsity)" : "");
        ok = FALSE;
    }
    ok = ok && insert_plan(graph, plan, &tally, error);
    if (ok) write_notes(output->notes, &o, &tally, steps);
    g_array_unref(plan);
    return ok;
}

/* The composition law (compose.h): encode and decode kernels with launches, lasting a share of the ReLU they
 * follow. */
static const rv_plugin_effects gist_effects = {
    .reads = RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD,
    .reads_time = RV_ASPECT_FORWARD,
    .scales = RV_ASPECT_MEMORY,
    .reprices = 0,
    .rewrites = RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD | RV_ASPECT_HOST,
    .order = RV_ORDER(RV_STAGE_MODEL, 60),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "gist",
    "Gist: ReLU outputs kept for backward stored encoded (Binarize before pooling, SSDC before convolutions); "
    "encode/decode kernels costed from the ReLU kernels",
    gist_params, gist_apply, &gist_effects,
};
