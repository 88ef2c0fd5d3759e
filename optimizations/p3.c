/*
 * p3.c - priority-based parameter propagation (P3: Jayarajan et al.,
 * "Priority-based Parameter Propagation for Distributed DNN Training",
 * SysML 2019) on a parameter server, predicted from a single-GPU trace as
 * Daydream does it (appendix A.5, Algorithm 7).
 *
 *   reverie whatif trace.json.gz --opt 'p3:bandwidth=10Gbps'
 *   reverie whatif trace.json.gz --opt 'p3:bandwidth=10Gbps,priority=off'
 *
 * The model.  Each weighted layer's gradient (layers.h: conv / linear /
 * addmm, weight + bias bytes from the Input Dims, or param_sizes=FILE for
 * traces recorded without shapes) is cut into slices of at most slice_size
 * bytes.  In every step, after the backward kernel run that produces the
 * layer's gradient (layers.h), each slice is
 *   pushed to its server on the worker's "ps.send" channel, then
 *   pulled back, updated, on the worker's "ps.recv" channel,
 * each transfer taking latency + bytes / bandwidth.  The first forward GPU
 * task of that layer in the next step waits for all the layer's pulls.
 * Slices are not chained on their channel, so the scheduler orders them.
 *
 * priority=on replaces the scheduler's priority (Daydream's Schedule
 * override, sim.h): when a channel frees, the waiting slice of the layer
 * nearest the input takes it.  A slice's rank is its layer's index in
 * forward order; every other task has rank 0, which only ever competes
 * with tasks of its own resource, so their schedule is unchanged.  A slice
 * in flight is not preempted; slices of one layer go in slice order.
 * priority=off returns no policy: each channel serves slices in the order
 * they became ready (first come, first served), which is the plain
 * parameter server, so the gain of P3 itself is the difference of the two.
 * There, when p3 is the last optimization of a what-if, a layer's slices
 * go in as three transfers that the replay gives the same times as the
 * 2k slices (coalescing, below); the notes still count slices.
 *
 * Simplifications, each a choice:
 *  - slices are spread over as many servers as workers (round-robin, as
 *    MXNet's kvstore does), so the worker's own link is the bottleneck:
 *    server compute, aggregation and the wait for the other (identical)
 *    workers are not modelled; a pull follows its push at once;
 *  - the worker keeps its local optimizer step, as Daydream leaves the
 *    worker's graph otherwise alone.  A real parameter server applies the
 *    update itself, so this is slightly pessimistic for both settings;
 *  - the last step's pulls would gate the next, unrecorded, step.  Its end
 *    marker waits for the pulls of the first weighted layer, the ones that
 *    step's first forward kernel would wait for.  So each step pays about
 *    one communication stall (the first step pays none, the last pays its
 *    successor's), but stalls of later layers in that unrecorded step are
 *    not counted;
 *  - layers are matched across steps by position (layers.h); a step with
 *    fewer weighted layers than the model gates only those it has.
 */
#include "reverie/plugin.h"
#include "reverie/checked.h"
#include "reverie/validate.h"
#include "reverie/error.h"
#include "reverie/layers.h"
#include "reverie/transform.h"
#include "reverie/units.h"
#include <math.h>

/* 40,000 fp32 parameters: MXNET_KVSTORE_SLICE_THRESHOLD, the slice size of
 * P3's kvstore (dist_p3) in MXNet.  10 Gbps: P3's and Daydream's cluster. */
static const rv_param_spec p3_params[] = {
    { "slice_size", RV_PARAM_BYTES, "160KB", "bytes", "largest slice (40,000 fp32 parameters, P3's MXNet default)", NULL },
    { "bandwidth", RV_PARAM_BANDWIDTH, "10Gbps", "B/s", "worker link bandwidth per direction (P3's evaluation: 10 Gbps Ethernet)", NULL },
    { "latency", RV_PARAM_DURATION, "5us", "ns", "per-slice message latency (the ib-edr link preset, a few us per message)", NULL },
    { "priority", RV_PARAM_CHOICE, "on", NULL, "on: layers nearer the input first (P3); off: first come first served",
      "on|off" },
    { "param_sizes", RV_PARAM_STRING, "", NULL, "JSON file: weight bytes per weighted layer in forward order", NULL },
    { NULL }
};

#define MAX_SLICES_PER_STEP 100000

typedef struct {
    int64_t slice_bytes;
    int64_t latency_ns;
    double bandwidth_Bps;
} link_model;

static int64_t transfer_ns(const link_model *link, int64_t bytes)
{
    double ns = (double)link->latency_ns + (double)bytes * 1e9 / link->bandwidth_Bps;
    return ns < 1e18 ? (int64_t)llround(ns) : (int64_t)1e18;  /* absurd inputs must not overflow */
}

/* ---- the policy: rank = layer index of a slice, 0 for anything else ---- */

static int64_t slice_rank(const rv_graph *graph, int32_t task, void *data)
{
    const GArray *ranks = data;
    return task >= 0 && (guint)task < ranks->len ? g_array_index(ranks, int64_t, task) : 0;
}

static void set_rank(GArray *ranks, int32_t task, int64_t rank)
{
    if ((guint)task >= ranks->len) g_array_set_size(ranks, (guint)task + 1);
    g_array_index(ranks, int64_t, task) = rank;
}

/* ---- what the model holds ------------------------------------------- */

/* Weight bytes per weighted layer in forward order: from the file, or from
 * the first step whose layers have shapes. */
static GArray *layer_sizes(const GPtrArray *layers_by_step, const char *file, GError **error)
{
    if (file && *file) return rv_weight_sizes_from_file(file, error);
    return rv_weight_sizes_of_first_step(layers_by_step);
}

typedef struct {
    int64_t bytes;    /* per step */
    int64_t slices;   /* per step */
    int64_t busy_ns;  /* per step and channel */
    int64_t largest;  /* the largest slice */
    int first_layer;  /* the first layer with a gradient, -1 if none */
} model_totals;

static model_totals totals_of(const GArray *sizes, const link_model *link)
{
    model_totals totals = { 0, 0, 0, 0, -1 };
    for (guint j = 0; j < sizes->len; j++) {
        int64_t left = g_array_index(sizes, int64_t, j);
        if (left > 0 && totals.first_layer < 0) totals.first_layer = (int)j;
        totals.bytes = rv_saturating_add(totals.bytes, left);
        totals.largest = MAX(totals.largest, MIN(left, link->slice_bytes));
        for (; left > 0 && totals.slices <= MAX_SLICES_PER_STEP; left -= link->slice_bytes) {
            totals.slices++;
            totals.busy_ns = rv_saturating_add(totals.busy_ns, transfer_ns(link, MIN(left, link->slice_bytes)));
        }
    }
    return totals;
}

/* ---- inserting the transfers ---------------------------------------- */

typedef struct {
    rv_graph *graph;
    const link_model *link;
    const GArray *sizes;   /* bytes per layer, forward order */
    int first_layer;       /* what the last step's end waits for */
    int32_t send, recv;    /* the two channels */
    int32_t push_name, pull_name; /* interned once: a million inserts would look them up a million times */
    GArray *ranks;         /* NULL with priority=off */
    gboolean coalesce;     /* may a layer's slices go in as three transfers (coalescing, below)? */
    rv_string_memo weighted; /* layer tags of weighted backward layers (layers.h) */
    guint pushes, steps, mismatched_steps;
} p3_builder;

/* One transfer of `bytes` taking `ns` on `channel` after task `after`; tagged like it. */
static int32_t insert_transfer(p3_builder *b, int32_t after, int32_t channel, int32_t name, int64_t bytes, int64_t ns,
                               guint layer, GError **error)
{
    rv_task task = *rv_graph_task(b->graph, after);
    task.kind = RV_TASK_COMM;
    task.flags = 0;
    task.resource = channel;
    task.name = name;
    task.duration_ns = ns;
    task.host_overhead_ns = 0;
    task.bytes = bytes;
    task.correlation = -1;
    task.input_dims = -1;
    rv_insert_spec spec = { task, -1, -1 };  /* unordered on its channel */
    int32_t id = rv_transform_insert(b->graph, &spec, error);
    if (id < 0) return -1;
    rv_transform_add_edge(b->graph, after, id);
    if (b->ranks) set_rank(b->ranks, id, layer);
    return id;
}

/*
 * Push and pull every slice of layer j after `producer`; `waiter` (if
 * any) waits for the pulls.  It waits on the last pull alone: a layer's
 * slices leave in slice order on each channel (one rank, ids ascending,
 * and a pull is ready only after its push), so the last pull ends last
 * and the other edges could never decide the waiter's start.
 */
static gboolean insert_layer(p3_builder *b, guint j, int32_t producer, int32_t waiter, GError **error)
{
    int64_t left = g_array_index(b->sizes, int64_t, j), full = b->link->slice_bytes;
    int64_t full_ns = transfer_ns(b->link, full);
    int32_t pull = -1;
    for (; left > 0; left -= full) {
        int64_t bytes = MIN(left, full), ns = bytes == full ? full_ns : transfer_ns(b->link, bytes);
        int32_t push = insert_transfer(b, producer, b->send, b->push_name, bytes, ns, j, error);
        pull = push < 0 ? -1 : insert_transfer(b, push, b->recv, b->pull_name, bytes, ns, j, error);
        if (pull < 0) return FALSE;
        b->pushes++;
    }
    if (waiter >= 0 && pull >= 0) rv_transform_add_edge(b->graph, pull, waiter);
    return TRUE;
}

/* ---- coalescing ------------------------------------------------------ */

/*
 * With priority=off, and nothing after p3 to re-cost or re-rank its
 * transfers, the replay cannot tell a layer's k slices apart, so they go
 * in as three transfers instead of 2k:
 *   P1  the first slice's push, after the producer (as before);
 *   P'  the other slices' pushes as one, after the producer;
 *   Q   every pull as one, after P1; the waiter waits for Q.
 * Each keeps its slices' latencies: P' lasts the sum of their times, each
 * rounded as its own transfer would be, and Q the sum of all k.  Why the
 * times of every other task stay the same, to the ns:
 *  - no policy: the replay dispatches tasks in order of (ready time, id).
 *    The k pushes are ready at once (the producer's end) with ids of their
 *    own (their pulls in between, not yet ready), so they run back to back
 *    from the send channel's free time s: s + S, S the sum of their times,
 *    as P1 and P' do (P' is P1's successor in id, ready with it);
 *  - pull i is ready when push i ends; every other transfer on these
 *    channels (p3's own: new channels) ends before s or after s + S, so
 *    nothing else on the receive channel becomes ready between the
 *    layer's first pull and its last.  The first slice is the largest,
 *    so each pull is ready by the time the one before it ends: the pulls
 *    run back to back from max(free, s + time of slice 1), as Q does,
 *    and end when Q ends;
 *  - the waiter waits for the last pull, as for Q; both channels are free
 *    again at the same times.
 * Conditions (coalescable): priority=off; p3 is the last optimization of
 * a what-if (plugin.h: last), so no later plugin re-costs a transfer per
 * message (network's latencies) or sets a policy; no earlier plugin may
 * have set one (a policy breaks ties by id, and with it a later layer
 * nearer the input would cut in between a layer's slices); no contention
 * or sharing rule (its replay dispatches as a policy replay does); the
 * channels are new; every transfer takes at least 1 ns (a zero-length
 * transfer would tie with the layer's last pull).  With priority=on
 * nothing is coalesced: the gradient of a layer nearer the input arrives
 * while the replay runs and takes the channel at the next slice boundary,
 * which only the replay knows.
 */

/* May a policy be in force: an earlier plugin that may set one (or says nothing of what it does)? */
static gboolean earlier_policy_possible(const rv_graph *graph)
{
    for (guint i = 0; i < graph->applied->len; i++) {
        const rv_applied_plugin *applied = &g_array_index(graph->applied, rv_applied_plugin, i);
        if (!applied->declared || (applied->effects.rewrites & RV_ASPECT_SCHEDULE)) return TRUE;
    }
    return FALSE;
}

static gboolean coalescable(const rv_graph *graph, const rv_plugin_output *output, const link_model *link,
                            gboolean priority, gboolean new_channels)
{
    return !priority && output->last && new_channels && !earlier_policy_possible(graph) &&
           !graph->contention.enabled && !graph->sharing.enabled && transfer_ns(link, 1) > 0;
}

/* Layer j's slices as P1, P' and Q (above), *done TRUE; *done FALSE with
 * nothing inserted when it has one slice or their sum would not fit a
 * task (then they go in one by one).  FALSE only with an error. */
static gboolean insert_layer_coalesced(p3_builder *b, guint j, int32_t producer, int32_t waiter, gboolean *done,
                                       GError **error)
{
    int64_t bytes = g_array_index(b->sizes, int64_t, j), full = b->link->slice_bytes;
    int64_t k = (bytes + full - 1) / full, first_ns = transfer_ns(b->link, full);
    int64_t last_ns = transfer_ns(b->link, bytes - (k - 1) * full), rest_ns = 0;
    *done = k >= 2 && rv_checked_mul(k - 2, first_ns, &rest_ns) &&
            (rest_ns = rv_saturating_add(rest_ns, last_ns)) <= RV_MAX_DURATION_NS - first_ns;
    if (!*done) return TRUE;
    int32_t first = insert_transfer(b, producer, b->send, b->push_name, full, first_ns, j, error);
    int32_t rest = first < 0 ? -1 : insert_transfer(b, producer, b->send, b->push_name, bytes - full, rest_ns, j, error);
    int32_t pulls = rest < 0 ? -1 : insert_transfer(b, first, b->recv, b->pull_name, bytes, first_ns + rest_ns, j, error);
    if (pulls < 0) return FALSE;
    if (waiter >= 0) rv_transform_add_edge(b->graph, pulls, waiter);
    b->pushes += (guint)k;
    return TRUE;
}

/* Layer j's transfers: coalesced where they may be, else slice by slice. */
static gboolean insert_layer_transfers(p3_builder *b, guint j, int32_t producer, int32_t waiter, GError **error)
{
    gboolean done = FALSE;
    if (b->coalesce && !insert_layer_coalesced(b, j, producer, waiter, &done, error)) return FALSE;
    return done || insert_layer(b, j, producer, waiter, error);
}

/* What waits for layer j's pulls: its first forward GPU task in the next
 * step; in the last step (next == NULL) the step's end, for the first layer. */
static int32_t waiter_of(const p3_builder *b, const GArray *next, guint j, int step)
{
    if (next == NULL)
        return (int)j == b->first_layer ? g_array_index(b->graph->steps, rv_step, step).end_marker : -1;
    if (j >= next->len) return -1;
    const rv_weighted_layer *layer = &g_array_index(next, rv_weighted_layer, j);
    return layer->first_gpu >= 0 ? layer->first_gpu : layer->first_call;
}

/* One step: every layer's slices after the backward run producing its gradient. */
static gboolean insert_step(p3_builder *b, int step, GArray *backward, const GArray *next, GError **error)
{
    if (next == NULL) /* the end marker will wait: its producers must be launched before it */
        rv_keep_launched_by(b->graph, backward,
                            rv_graph_task(b->graph, g_array_index(b->graph->steps, rv_step, step).end_marker)->recorded_start_ns);
    if (backward->len == 0) return TRUE;
    GArray *runs = rv_weighted_backward_runs_with(b->graph, backward, &b->weighted);
    guint n = b->sizes->len;
    gboolean ok = TRUE;
    for (guint j = 0; j < n && ok; j++) {
        if (g_array_index(b->sizes, int64_t, j) <= 0) continue;
        int32_t producer = g_array_index(runs, int32_t, rv_gradient_run(n - 1 - j, n, runs->len));
        ok = insert_layer_transfers(b, j, producer, waiter_of(b, next, j, step), error);
    }
    g_array_unref(runs);
    if (next && next->len != n) b->mismatched_steps++;
    b->steps++;
    return ok;
}

/* Room in `array` for `extra` more elements, taken at once: grown by
 * doubling, a task array of millions is copied again at every step. */
static void make_room(GArray *array, guint64 extra)
{
    guint len = array->len;
    if (extra > G_MAXUINT - len) return; /* the inserts will fail on their own */
    g_array_set_size(array, len + (guint)extra);
    g_array_set_size(array, len);
}

/* The channels, names and ranks the transfers need, whether they may be
 * coalesced, and room for them all. */
static void start_insertion(p3_builder *b, const rv_plugin_output *output, const model_totals *totals,
                            gboolean priority)
{
    rv_graph *graph = b->graph;
    int32_t resources = (int32_t)graph->resources->len;
    b->send = rv_transform_add_channel(graph, "ps.send");
    b->recv = rv_transform_add_channel(graph, "ps.recv");
    b->coalesce = coalescable(graph, output, b->link, priority, b->send >= resources && b->recv >= resources);
    b->push_name = rv_strings_intern(graph->strings, "ps push");
    b->pull_name = rv_strings_intern(graph->strings, "ps pull");
    if (priority) b->ranks = g_array_sized_new(FALSE, TRUE, sizeof(int64_t), (guint)rv_graph_task_count(graph));
    guint64 transfers = (guint64)graph->steps->len * (guint64)totals->slices * 2; /* at most: none coalesced */
    make_room(graph->tasks, transfers);
    make_room(graph->edges, transfers + (guint64)graph->steps->len * b->sizes->len);
    if (b->ranks) make_room(b->ranks, (guint64)rv_graph_task_count(graph) + transfers);
}

static gboolean insert_all_steps(p3_builder *b, const GPtrArray *layers_by_step, GError **error)
{
    GPtrArray *backward = rv_backward_gpu_tasks_by_step(b->graph);
    guint step_count = b->graph->steps->len;
    gboolean ok = TRUE;
    for (guint step = 0; step < step_count && ok; step++) {
        const GArray *next = step + 1 < step_count ? g_ptr_array_index(layers_by_step, step + 2) : NULL;
        ok = insert_step(b, (int)step, g_ptr_array_index(backward, step + 1), next, error);
    }
    g_ptr_array_unref(backward);
    return ok;
}

/* ---- apply ---------------------------------------------------------- */

static gboolean any_weighted_layer(const GPtrArray *layers_by_step)
{
    for (guint slot = 1; slot < layers_by_step->len; slot++)
        if (((const GArray *)g_ptr_array_index(layers_by_step, slot))->len > 0) return TRUE;
    return FALSE;
}

/* Why there is nothing to act on, or NULL when there is something. */
static const char *nothing_to_do(const GPtrArray *layers_by_step, const GArray *sizes, const model_totals *totals)
{
    if (!any_weighted_layer(layers_by_step))
        return "no conv/linear/addmm forward layer in the trace's steps: no parameter to push";
    if (totals->bytes == 0)
        return "no gradient sizes: no conv/linear/addmm forward operator with Input Dims in the trace "
               "(record with record_shapes=True, or give param_sizes=FILE)";
    if (totals->slices > MAX_SLICES_PER_STEP) return "slice_size too small: more than 100,000 slices per step";
    return NULL;
}

static void describe(GString *notes, const p3_builder *b, const model_totals *totals, gboolean priority)
{
    char *bytes = rv_format_bytes(totals->bytes), *slice = rv_format_bytes(totals->largest);
    char *bw = rv_format_bandwidth(b->link->bandwidth_Bps), *latency = rv_format_duration(b->link->latency_ns);
    char *full = rv_format_duration(transfer_ns(b->link, totals->largest)), *busy = rv_format_duration(totals->busy_ns);
    g_string_append_printf(notes,
                           "    %u weighted layers, %s per step in %" G_GINT64_FORMAT " slices of at most %s; such a slice "
                           "takes %s each way (%s, latency %s): each channel busy %s per step\n",
                           b->sizes->len, bytes, totals->slices, slice, full, bw, latency, busy);
    g_string_append_printf(notes,
                           "    %s; %u pushes + %u pulls in %u steps; a layer's next forward waits for its pulls, "
                           "the last step's end for layer %d's; server compute not modelled, local optimizer kept\n",
                           priority ? "priority on: slices of layers nearer the input first"
                                    : "priority off: slices first come first served (plain parameter server)",
                           b->pushes, b->pushes, b->steps, totals->first_layer + 1);
    if (b->mismatched_steps)
        g_string_append_printf(notes, "    warning: %u steps have a different number of weighted layers than the %u "
                                      "sizes; matched by position\n", b->mismatched_steps, b->sizes->len);
    g_free(bytes); g_free(slice); g_free(bw); g_free(latency); g_free(full); g_free(busy);
}

static gboolean link_from_params(const rv_params *params, link_model *link, GError **error)
{
    link->slice_bytes = rv_params_bytes(params, "slice_size");
    link->latency_ns = rv_params_duration_ns(params, "latency");
    link->bandwidth_Bps = rv_params_bandwidth(params, "bandwidth");
    if (link->slice_bytes < 1 || link->latency_ns < 0 || !(link->bandwidth_Bps > 0)) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "need slice_size > 0, latency >= 0 and bandwidth > 0");
        return FALSE;
    }
    return TRUE;
}

static gboolean p3_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    link_model link;
    if (!link_from_params(params, &link, error)) return FALSE;
    GPtrArray *layers_by_step = rv_weighted_layers_by_step(graph);
    GArray *sizes = layer_sizes(layers_by_step, rv_params_string(params, "param_sizes"), error);
    if (sizes == NULL) { g_ptr_array_unref(layers_by_step); return FALSE; }
    model_totals totals = totals_of(sizes, &link);
    int64_t longest;
    /* The largest slice gives the longest transfer: it must fit a task (checked.h). */
    if (!rv_task_duration_from(graph, -1, (double)link.latency_ns + (double)totals.largest * 1e9 / link.bandwidth_Bps,
                               "the p3 parameters (slice_size, bandwidth, latency)", &longest, error)) {
        g_array_unref(sizes);
        g_ptr_array_unref(layers_by_step);
        return FALSE;
    }
    const char *why = nothing_to_do(layers_by_step, sizes, &totals);
    gboolean priority = g_strcmp0(rv_params_string(params, "priority"), "on") == 0;
    p3_builder b = { graph, &link, sizes, totals.first_layer, -1, -1, 0, 0, NULL, FALSE, { 0 }, 0, 0, 0 };
    rv_weighted_backward_memo_init(&b.weighted, graph);
    gboolean ok = why == NULL;
    if (ok) {
        start_insertion(&b, output, &totals, priority);
        ok = insert_all_steps(&b, layers_by_step, error);
        if (ok && b.pushes == 0) why = "the trace has no backward-phase GPU work to attach pushes to";
        ok = ok && why == NULL;
    }
    if (why) g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "%s", why);
    if (ok) describe(output->notes, &b, &totals, priority);
    if (ok && b.ranks) {
        output->policy.priority = slice_rank;
        output->policy.user_data = b.ranks;
        output->free_policy_data = (GDestroyNotify)g_array_unref;
    } else if (b.ranks) {
        g_array_unref(b.ranks);
    }
    rv_string_memo_clear(&b.weighted);
    g_array_unref(sizes);
    g_ptr_array_unref(layers_by_step);
    return ok;
}

/* The composition law (compose.h): data-parallel all-reduces sliced, and a priority by layer. */
static const rv_plugin_effects p3_effects = {
    .reads = RV_ASPECT_DATA_COMM | RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD,
    .reads_time = RV_ASPECT_DATA_COMM,
    .scales = 0,
    .reprices = 0,
    .rewrites = RV_ASPECT_DATA_COMM | RV_ASPECT_SCHEDULE,
    .order = RV_ORDER(RV_STAGE_PARALLEL, 70),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "p3", "priority-based parameter propagation: sliced push/pull to a parameter server, "
    "layers near the input first",
    p3_params, p3_apply, &p3_effects,
};
