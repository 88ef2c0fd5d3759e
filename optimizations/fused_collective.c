/*
 * fused_collective.c - a producer kernel and the collective that consumes
 * its output replaced by one persistent kernel that sends each slice of the
 * output as soon as it is computed, remote slices first (Punniyamurthy et
 * al., "Optimizing Distributed ML Communication with Fused
 * Computation-Collective Operations").
 *
 *   reverie whatif traces/param_dlrm_v100_8ranks --opt fused-collective
 *   reverie whatif trace.json.gz --opt fused-collective:patterns=gemv,slice_bytes=4KiB
 *
 * PAIRS.  The paper's three fused operators:
 *   embedding pooling + all-to-all (DLRM's forward),
 *   GEMV + all-reduce (token-phase inference, tensor parallel),
 *   GEMM + all-to-all (a mixture of experts' combine).
 * A collective's producer is the GPU kernel its kernel waited for through
 * a cross-stream, stream or communication edge (on a job, each rank's
 * arrival's), the latest recorded one: data dependence through the graph,
 * not names alone.  The producer's class comes from its kernel name
 * (costmodel.h's classes; "embedding" + "forward" for pooling, "gemv" for
 * GEMV).  A collective is fused only when every participant's producer
 * fits the same pattern; every other one is left alone and the notes say
 * why.
 *
 * TIME (overlap.h).  Per participant: C = producer - fixed, T = transfer -
 * fixed (fixed: one kernel's fixed cost on this trace, costmodel.h's rule);
 * an all-to-all overlaps all of T with (p-1)/p of the slices remote; an
 * all-reduce (the paper's two-phase direct algorithm) overlaps its
 * reduce-scatter half and sends its all-gather half after.  Slices: the
 * payload over slice_bytes, by default one logical workgroup's output
 * (1 KiB: a 256-float embedding vector) inside a node, where the kernel
 * stores straight to the peers, and the paper's 32-embedding slice (32 KiB)
 * across nodes; a GEMM's workgroup writes a 128x128 fp16 tile (32 KiB).  Contention slows compute and link while both run.  A pair
 * whose fused time would not be shorter is left alone.
 *
 * REWRITE.  The producer becomes the fused kernel (its duration the fused
 * time); the collective's kernels go, with their launches.  On a job the
 * meeting of the participants stays: it now waits for every rank's fused
 * kernel (each needs its peers' slices) and holds each rank's stream until
 * then, as the persistent kernel polls its peers' flags before it exits.
 * patterns=none changes nothing.
 */
#include "reverie/plugin.h"
#include "reverie/comm.h"
#include "reverie/contention.h"
#include "reverie/costmodel.h"
#include "reverie/error.h"
#include "reverie/overlap.h"
#include "reverie/transform.h"
#include "reverie/units.h"
#include "reverie/validate.h"
#include <math.h>
#include <string.h>

static const rv_param_spec fused_params[] = {
    { "patterns", RV_PARAM_CHOICE, "all", NULL, "which fused operators to build (none: the baseline)",
      "all|embedding|gemv|gemm|none" },
    { "slice_bytes", RV_PARAM_BYTES, "0B", "bytes",
      "output sent per slice (0: one workgroup's output: 1 KiB for embeddings and GEMV, a 128x128 fp16 GEMM tile "
      "of 32 KiB; 32 KiB across nodes)", NULL },
    { "gpus_per_node", RV_PARAM_INTEGER, "8", "GPUs", "GPUs in one node (a larger group crosses nodes)", NULL },
    { "slice_overhead", RV_PARAM_DURATION, "100ns", "ns", "bookkeeping per slice: completion flag, send issue (an assumption: a flag write and a doorbell, ~100 ns)", NULL },
    { "comm_slowdown", RV_PARAM_NUMBER, "1.34", "x", "the link's time factor while compute runs (contention.h)", NULL },
    { "compute_slowdown", RV_PARAM_NUMBER, "1.11", "x", "compute's time factor while the link runs (as contention: NCCL holds ~8 of 80 SMs on a V100)", NULL },
    { NULL }
};

typedef enum { PAIR_EMBEDDING, PAIR_GEMV, PAIR_GEMM, PAIR_KINDS } pair_kind;
static const char *const pair_names[PAIR_KINDS] = { "embedding + all-to-all", "GEMV + all-reduce",
                                                    "GEMM + all-to-all" };
static const char *const pattern_words[PAIR_KINDS] = { "embedding", "gemv", "gemm" };

typedef struct {
    int32_t *first, *from;     /* predecessors in compressed rows: from[first[t] .. first[t + 1]) */
    int64_t fixed_ns;
    int64_t slice_bytes, gpus_per_node, slice_overhead_ns;
    double comm_slowdown, compute_slowdown;
    const char *patterns;
    GHashTable *left_alone;    /* reason -> count (GUINT) */
    GArray *doomed;            /* tasks to remove */
    guint fused[PAIR_KINDS], pairs, collectives;
    double gain_sum, gain_min, gain_max;
    GString *lines;            /* one per fused pair, for the notes */
    guint lines_kept;
} fused_state;

static const char *name_of(const rv_graph *graph, int32_t id) { return id > 0 ? rv_strings_get(graph->strings, id) : ""; }

static gboolean contains_word(const char *text, const char *word)
{
    char *lower = g_ascii_strdown(text, -1);
    gboolean yes = strstr(lower, word) != NULL;
    g_free(lower);
    return yes;
}

/* Predecessors of every task, from the edges as they are now. */
static void index_predecessors(const rv_graph *graph, fused_state *state)
{
    rv_predecessor_rows(graph, &state->first, &state->from);
}

static gboolean live(const rv_task *task) { return !(task->flags & RV_TASK_FLAG_REMOVED); }

/* The kernel a collective's entry waited for: its latest-recorded live GPU
 * kernel predecessor through a data edge (not a launch), or -1. */
static int32_t producer_of(rv_graph *graph, const fused_state *state, int32_t entry)
{
    int32_t best = -1;
    for (int32_t i = state->first[entry]; i < state->first[entry + 1]; i++) {
        int32_t from = state->from[i];
        const rv_task *task = rv_graph_task(graph, from);
        if (!live(task) || task->kind != RV_TASK_KERNEL || !(task->flags & RV_TASK_FLAG_GPU)) continue;
        if (best < 0 || rv_graph_task(graph, best)->recorded_start_ns < task->recorded_start_ns) best = from;
    }
    return best;
}

/* Which pair a producer and a collective make, or -1 with *why. */
static int pair_of(const rv_graph *graph, const rv_task *producer, const rv_collective_info *info, const char **why)
{
    const char *name = name_of(graph, producer->name);
    rv_cost_class cls = rv_cost_classify_name(name, name_of(graph, producer->op), (rv_task_kind)producer->kind);
    gboolean all_to_all = info->op == RV_COLL_ALL_TO_ALL;
    gboolean all_reduce = info->op == RV_COLL_ALLREDUCE_RING || info->op == RV_COLL_ALLREDUCE_TREE;
    if (contains_word(name, "embedding") && contains_word(name, "forward")) {
        if (all_to_all) return PAIR_EMBEDDING;
        *why = "embedding pooling feeds a collective other than an all-to-all";
    } else if (cls == RV_COST_GEMM && contains_word(name, "gemv")) {
        if (all_reduce) return PAIR_GEMV;
        *why = "a GEMV feeds a collective other than an all-reduce";
    } else if (cls == RV_COST_GEMM) {
        if (all_to_all) return PAIR_GEMM;
        *why = all_reduce ? "GEMM + all-reduce is tensor parallelism's pair (see t3), not one of the paper's"
                          : "a GEMM feeds a collective other than an all-to-all";
    } else {
        *why = cls == RV_COST_COPY ? "its producer is a copy (concatenation), not a computation the paper fuses"
               : cls == RV_COST_ELEMENTWISE ? "its producer is elementwise work, not embedding pooling, GEMV or GEMM"
                                            : "its producer is not embedding pooling, GEMV or GEMM";
    }
    return -1;
}

static void leave_alone(fused_state *state, const char *why)
{
    guint count = GPOINTER_TO_UINT(g_hash_table_lookup(state->left_alone, why));
    g_hash_table_insert(state->left_alone, (gpointer)why, GUINT_TO_POINTER(count + 1));
}

/* One participant of a collective: its transfer, the task that entered it
 * (its arrival on a job, else the transfer) and its producer. */
typedef struct {
    int32_t transfer, entry, producer;
    int64_t fused_ns;
} participant;

/* The participants of collective `index` (1-based, as rv_task.collective),
 * from its member tasks. */
static GArray *participants_of(rv_graph *graph, const fused_state *state, int32_t index, int32_t meeting,
                               const GArray *members)
{
    GArray *list = g_array_new(FALSE, FALSE, sizeof(participant));
    for (guint m = 0; m < members->len; m++) {
        int32_t t = g_array_index(members, int32_t, m);
        const rv_task *task = rv_graph_task(graph, t);
        if (!live(task) || (task->flags & RV_TASK_FLAG_RENDEZVOUS)) continue;
        participant p = { t, t, -1, 0 };
        /* on a job the transfer follows its arrival on its stream */
        for (int32_t i = state->first[t]; meeting >= 0 && i < state->first[t + 1]; i++) {
            const rv_task *before = rv_graph_task(graph, state->from[i]);
            if ((before->flags & RV_TASK_FLAG_RENDEZVOUS) && before->collective == index && state->from[i] != meeting)
                p.entry = state->from[i];
        }
        p.producer = producer_of(graph, state, p.entry);
        g_array_append_val(list, p);
    }
    return list;
}

/* The fused time of one participant. */
static double fused_time(const fused_state *state, const rv_graph *graph, const participant *p, pair_kind kind,
                         int ranks, int64_t slices)
{
    double fixed = (double)state->fixed_ns;
    double compute = MAX(0.0, (double)rv_graph_task((rv_graph *)graph, p->producer)->duration_ns - fixed);
    double transfer = MAX(0.0, (double)rv_graph_task((rv_graph *)graph, p->transfer)->duration_ns - fixed);
    double tail = kind == PAIR_GEMV ? transfer / 2 : 0; /* the all-gather half follows the reduction */
    rv_overlap model = { compute, transfer - tail, tail, fixed, (double)state->slice_overhead_ns, slices,
                         ranks > 1 ? (double)(ranks - 1) / ranks : 0.0, state->comm_slowdown,
                         state->compute_slowdown };
    return rv_overlap_time_ns(&model);
}

static int64_t slice_count(const fused_state *state, const rv_collective_info *info, int ranks, pair_kind kind)
{
    int64_t slice = state->slice_bytes > 0                                    ? state->slice_bytes
                    : ranks > state->gpus_per_node || kind == PAIR_GEMM ? 32768
                                                                          : 1024;
    if (info->bytes <= 0) return 0;
    return MIN((info->bytes + slice - 1) / slice, RV_OVERLAP_MAX_SLICES);
}

static void describe_pair(fused_state *state, rv_graph *graph, const participant *p, pair_kind kind, int64_t slices,
                          double separate)
{
    double gain = 1.0 - (double)p->fused_ns / separate;
    state->gain_sum += gain;
    state->gain_min = state->pairs ? MIN(state->gain_min, gain) : gain;
    state->gain_max = state->pairs ? MAX(state->gain_max, gain) : gain;
    state->pairs++;
    if (state->lines_kept++ >= 16) return;
    const rv_task *producer = rv_graph_task(graph, p->producer);
    int32_t rank = rv_task_rank_index(graph, producer);
    char *c = rv_format_duration(producer->duration_ns);
    char *t = rv_format_duration(rv_graph_task(graph, p->transfer)->duration_ns), *f = rv_format_duration(p->fused_ns);
    const char *full = name_of(graph, producer->name);
    char *short_name = g_strndup(g_str_has_prefix(full, "void ") ? full + 5 : full, 40);
    g_string_append_printf(state->lines, "      rank %d: %s %s + %s %s -> %s (%.1f%% less, %" G_GINT64_FORMAT
                           " slices)\n", rank, short_name, c, kind == PAIR_GEMV ? "all-reduce" : "all-to-all", t, f,
                           100 * gain, slices);
    g_free(c); g_free(t); g_free(f); g_free(short_name);
}

static gboolean pattern_selected(const fused_state *state, pair_kind kind)
{
    return strcmp(state->patterns, "all") == 0 || strcmp(state->patterns, pattern_words[kind]) == 0;
}

/* Decide one collective and, if it is fused, rewrite its participants. */
static gboolean consider(rv_graph *graph, fused_state *state, int32_t index, const GArray *members, GError **error)
{
    const rv_collective_info *info = &g_array_index(graph->collectives, rv_collective_info, index - 1);
    GArray *list = participants_of(graph, state, index, info->rendezvous, members);
    if (list->len == 0) { g_array_unref(list); return TRUE; } /* removed already */
    state->collectives++;
    const char *why = NULL;
    int kind = -1;
    for (guint i = 0; i < list->len && why == NULL; i++) {
        const participant *p = &g_array_index(list, participant, i);
        if (p->producer < 0) { why = "no kernel produces its input (it waits on copies or the host)"; break; }
        int this_kind = pair_of(graph, rv_graph_task(graph, p->producer), info, &why);
        if (why == NULL && kind >= 0 && this_kind != kind) why = "its ranks' producers are of different kinds";
        kind = this_kind;
    }
    if (why == NULL && !pattern_selected(state, (pair_kind)kind)) why = "its pattern is not among those asked for";
    int ranks = info->group_size > 0 ? info->group_size : MAX(1, info->participants);
    int64_t slices = why == NULL ? slice_count(state, info, ranks, (pair_kind)kind) : 0;
    if (why == NULL && slices <= 0) why = "its payload is unknown: no slices to cut";
    if (why == NULL && ranks < 2) why = "one rank: nothing travels";
    for (guint i = 0; i < list->len && why == NULL; i++) {
        participant *p = &g_array_index(list, participant, i);
        double separate = (double)(rv_graph_task(graph, p->producer)->duration_ns +
                                   rv_graph_task(graph, p->transfer)->duration_ns);
        double fused = fused_time(state, graph, p, (pair_kind)kind, ranks, slices);
        if (fused >= separate) why = "fused it would not be faster (too few slices, or contention)";
        else if (!rv_task_duration_from(graph, p->producer, fused, "the fused-collective parameters", &p->fused_ns, error)) {
            g_array_unref(list);
            return FALSE;
        }
    }
    if (why != NULL) {
        leave_alone(state, why);
        g_array_unref(list);
        return TRUE;
    }
    for (guint i = 0; i < list->len; i++) {
        participant *p = &g_array_index(list, participant, i);
        rv_task *producer = rv_graph_task(graph, p->producer);
        double separate = (double)(producer->duration_ns + rv_graph_task(graph, p->transfer)->duration_ns);
        describe_pair(state, graph, p, (pair_kind)kind, slices, separate);
        char *fused_name = g_strdup_printf("fused %s: %s", pair_names[kind], name_of(graph, producer->name));
        producer->name = rv_strings_intern(graph->strings, fused_name);
        g_free(fused_name);
        rv_transform_set_duration(graph, p->producer, p->fused_ns);
        g_array_append_val(state->doomed, p->transfer);
        if (p->entry != p->transfer) g_array_append_val(state->doomed, p->entry);
        /* the persistent kernel holds its stream until every peer's slices are in */
        int32_t next = rv_graph_resource_next(graph, p->producer);
        if (info->rendezvous >= 0 && next >= 0) rv_transform_add_edge(graph, info->rendezvous, next);
    }
    state->fused[kind]++;
    g_array_unref(list);
    return TRUE;
}

static gint by_reason(gconstpointer a, gconstpointer b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* The reasons collectives were left alone, sorted, each as
 * "<prefix>N collectives: why", joined by sep. */
static void write_reasons(const fused_state *state, GString *out, const char *prefix, const char *sep)
{
    GList *reasons = g_hash_table_get_keys(state->left_alone);
    GPtrArray *sorted = g_ptr_array_new();
    for (GList *r = reasons; r; r = r->next) g_ptr_array_add(sorted, r->data);
    g_ptr_array_sort(sorted, by_reason);
    for (guint i = 0; i < sorted->len; i++) {
        guint count = GPOINTER_TO_UINT(g_hash_table_lookup(state->left_alone, sorted->pdata[i]));
        g_string_append_printf(out, "%s%s%u collective%s: %s", i ? sep : "", prefix, count, count == 1 ? "" : "s",
                               (const char *)sorted->pdata[i]);
    }
    g_ptr_array_unref(sorted);
    g_list_free(reasons);
}

static void write_notes(const fused_state *state, GString *notes)
{
    g_string_append_printf(notes, "    fused %u of %u collectives (%u kernel pairs): %u %s, %u %s, %u %s\n",
                           state->fused[0] + state->fused[1] + state->fused[2], state->collectives, state->pairs,
                           state->fused[0], pair_names[0], state->fused[1], pair_names[1], state->fused[2],
                           pair_names[2]);
    g_string_append_printf(notes, "    per pair, fused against producer + collective: %.1f%% less on average "
                           "(%.1f%% to %.1f%%)\n", 100 * state->gain_sum / state->pairs, 100 * state->gain_min,
                           100 * state->gain_max);
    g_string_append(notes, state->lines->str);
    if (state->lines_kept > 16) g_string_append_printf(notes, "      ... %u more pairs\n", state->lines_kept - 16);
    if (g_hash_table_size(state->left_alone) == 0) return;
    write_reasons(state, notes, "    left alone: ", "\n");
    g_string_append_c(notes, '\n');
}

/* Per collective, the tasks that belong to it. */
static GPtrArray *members_by_collective(const rv_graph *graph)
{
    GPtrArray *members = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    for (guint c = 0; c < graph->collectives->len; c++) g_ptr_array_add(members, g_array_new(FALSE, FALSE, sizeof(int32_t)));
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        int32_t c = g_array_index(graph->tasks, rv_task, t).collective;
        if (c > 0 && (guint)c <= members->len) g_array_append_val(members->pdata[c - 1], t);
    }
    return members;
}

static gboolean read_params(const rv_params *params, fused_state *state, GError **error)
{
    state->patterns = rv_params_string(params, "patterns");
    state->slice_bytes = rv_params_bytes(params, "slice_bytes");
    state->gpus_per_node = rv_params_integer(params, "gpus_per_node");
    state->slice_overhead_ns = rv_params_duration_ns(params, "slice_overhead");
    state->comm_slowdown = rv_params_number(params, "comm_slowdown");
    state->compute_slowdown = rv_params_number(params, "compute_slowdown");
    if (state->gpus_per_node < 1 || state->slice_bytes < 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "need gpus_per_node >= 1 and slice_bytes >= 0");
        return FALSE;
    }
    return rv_contention_check(state->comm_slowdown, state->compute_slowdown, error);
}

static gboolean fused_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    fused_state state = { 0 };
    if (!read_params(params, &state, error)) return FALSE;
    if (strcmp(state.patterns, "none") == 0) {
        g_string_append(output->notes, "    patterns=none: nothing fused, graph unchanged\n");
        return TRUE;
    }
    if (graph->collectives->len == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "the graph has no collective: nothing to fuse");
        return FALSE;
    }
    index_predecessors(graph, &state);
    state.fixed_ns = rv_overlap_kernel_fixed_ns(graph);
    state.left_alone = g_hash_table_new(g_str_hash, g_str_equal);
    state.doomed = g_array_new(FALSE, FALSE, sizeof(int32_t));
    state.lines = g_string_new(NULL);
    GPtrArray *members = members_by_collective(graph);
    gboolean ok = TRUE;
    for (guint c = 1; ok && c <= graph->collectives->len; c++)
        ok = consider(graph, &state, (int32_t)c, members->pdata[c - 1], error);
    g_ptr_array_unref(members);
    guint fused = state.fused[0] + state.fused[1] + state.fused[2];
    if (ok && fused > 0) rv_transform_remove_many(graph, state.doomed, RV_REMOVE_KEEP_OVERHEAD);
    if (ok && fused == 0) {
        GString *reasons = g_string_new(NULL);
        write_reasons(&state, reasons, "", "; ");
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "no producer + collective pair to fuse (embedding + all-to-all, "
                    "GEMV + all-reduce, GEMM + all-to-all) among %u collectives: %s", state.collectives, reasons->str);
        g_string_free(reasons, TRUE);
        ok = FALSE;
    } else if (ok) {
        write_notes(&state, output->notes);
    }
    g_free(state.first);
    g_free(state.from);
    g_hash_table_destroy(state.left_alone);
    g_array_unref(state.doomed);
    g_string_free(state.lines, TRUE);
    return ok;
}

/* The composition law (compose.h): producer kernels and their collectives fused into one kernel. */
static const rv_plugin_effects fused_collective_effects = {
    .reads = RV_ASPECT_GPU_WORK | RV_ASPECT_COMM,
    .reads_time = RV_ASPECT_GPU_WORK | RV_ASPECT_COMM,
    .scales = 0,
    .reprices = 0,
    .rewrites = RV_ASPECT_GPU_WORK | RV_ASPECT_COMM,
    .order = RV_ORDER(RV_STAGE_PARALLEL, 80),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "fused-collective",
    "a producer kernel and its collective as one kernel that sends each output slice when ready (Punniyamurthy et al.)",
    fused_params, fused_apply, &fused_collective_effects,
};
