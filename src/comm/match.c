/*
 * match.c - which NCCL kernels of several ranks are one collective (job.h,
 * step 1): by process group and sequence number, by order in a process
 * group, or, for point-to-point, by order per pair of ranks.
 *
 * Only what each rank's own trace says is used - names, sizes, sequence
 * numbers and each rank's order of kernels - never times across ranks,
 * whose clocks are not aligned yet (the common ends of what is matched
 * here are what aligns them).
 */
#include "reverie/job.h"
#include "reverie/comm.h"
#include "reverie/error.h"
#include <string.h>

/* A rank's collective kernels of one process group (or one pair of ranks,
 * for point-to-point), in the order the rank ran them. */
typedef struct {
    GPtrArray *per_rank;   /* per rank index: GArray of int32 kernel ids, or NULL */
    int32_t group;         /* string id of the process group */
    int32_t group_size;    /* largest "Group size" seen, 0 if none */
    gboolean point_to_point;
} kernel_group;

/* A rank's list, or NULL for a rank without kernels of the group. */
static void rank_list_free(gpointer list)
{
    if (list != NULL) g_array_unref(list);
}

static void kernel_group_free(gpointer data)
{
    kernel_group *group = data;
    g_ptr_array_unref(group->per_rank);
    g_free(group);
}

static void free_matched(gpointer data)
{
    rv_matched_collective *matched = data;
    g_array_unref(matched->kernels);
    g_free(matched);
}

static const rv_collective_info *info_of(const rv_graph *graph, int32_t task)
{
    return rv_task_collective(graph, &g_array_index(graph->tasks, rv_task, task));
}

static const char *source_of(const rv_graph *graph, int32_t rank_index)
{
    return rv_strings_get(graph->strings, g_array_index(graph->ranks, rv_rank, rank_index).source);
}

static int64_t rank_number(const rv_graph *graph, int32_t rank_index)
{
    return g_array_index(graph->ranks, rv_rank, rank_index).rank;
}

/* The rank index holding rank number `rank`, or -1. */
static int32_t index_of_rank(const rv_graph *graph, int64_t rank)
{
    for (guint r = 0; r < graph->ranks->len; r++)
        if (g_array_index(graph->ranks, rv_rank, r).rank == rank) return (int32_t)r;
    return -1;
}

static gboolean is_matchable(const rv_graph *graph, const rv_task *task)
{
    return task->kind == RV_TASK_COMM && (task->flags & RV_TASK_FLAG_GPU) &&
           !(task->flags & (RV_TASK_FLAG_REMOVED | RV_TASK_FLAG_RENDEZVOUS)) && rv_task_collective(graph, task);
}

/* Point-to-point kernels are keyed by group and the pair of ranks (as
 * "group|low|high"), collectives by group. */
static char *group_key(const rv_graph *graph, const rv_task *task, const rv_collective_info *info)
{
    const char *group = rv_strings_get(graph->strings, info->group);
    if (info->peer < 0) return g_strdup_printf("c|%s", group);
    int64_t self = rank_number(graph, rv_task_rank_index(graph, task));
    return g_strdup_printf("p|%s|%" G_GINT64_FORMAT "|%" G_GINT64_FORMAT, group, MIN(self, (int64_t)info->peer),
                           MAX(self, (int64_t)info->peer));
}

static gint by_recorded_start(gconstpointer left, gconstpointer right, gpointer data)
{
    const rv_graph *graph = data;
    int32_t a = *(const int32_t *)left, b = *(const int32_t *)right;
    const rv_task *x = &g_array_index(graph->tasks, rv_task, a), *y = &g_array_index(graph->tasks, rv_task, b);
    if (x->recorded_start_ns != y->recorded_start_ns) return x->recorded_start_ns < y->recorded_start_ns ? -1 : 1;
    return a - b;
}

static GPtrArray *group_kernels(const rv_graph *graph, GHashTable **by_key)
{
    guint ranks = graph->ranks->len;
    GPtrArray *groups = g_ptr_array_new_with_free_func(kernel_group_free);
    *by_key = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if (!is_matchable(graph, task)) continue;
        const rv_collective_info *info = rv_task_collective(graph, task);
        int32_t rank = rv_task_rank_index(graph, task);
        if (rank < 0 || (guint)rank >= ranks) continue;
        char *key = group_key(graph, task, info);
        kernel_group *group = g_hash_table_lookup(*by_key, key);
        if (group == NULL) {
            group = g_new0(kernel_group, 1);
            group->per_rank = g_ptr_array_new_full(ranks, rank_list_free);
            g_ptr_array_set_size(group->per_rank, (gint)ranks);
            group->group = info->group;
            group->point_to_point = info->peer >= 0;
            g_hash_table_insert(*by_key, key, group);
            g_ptr_array_add(groups, group);
        } else {
            g_free(key);
        }
        group->group_size = MAX(group->group_size, info->group_size);
        GArray *list = g_ptr_array_index(group->per_rank, rank);
        if (list == NULL) g_ptr_array_index(group->per_rank, rank) = list = g_array_new(FALSE, FALSE, sizeof(int32_t));
        g_array_append_val(list, id);
    }
    for (guint g = 0; g < groups->len; g++) {
        kernel_group *group = g_ptr_array_index(groups, g);
        for (guint r = 0; r < ranks; r++) {
            GArray *list = g_ptr_array_index(group->per_rank, r);
            if (list) g_array_sort_with_data(list, by_recorded_start, (gpointer)graph);
        }
    }
    return groups;
}

/* "ranks 0, 3 and 5 (a.json, b.json, c.json)" for messages. */
static char *describe_ranks(const rv_graph *graph, const GArray *rank_indexes)
{
    GString *numbers = g_string_new(NULL), *files = g_string_new(NULL);
    for (guint i = 0; i < rank_indexes->len; i++) {
        int32_t r = g_array_index(rank_indexes, int32_t, i);
        const char *separator = i == 0 ? "" : i + 1 == rank_indexes->len ? " and " : ", ";
        g_string_append_printf(numbers, "%s%" G_GINT64_FORMAT, separator, rank_number(graph, r));
        if (i < 4) g_string_append_printf(files, "%s%s", i ? ", " : "", source_of(graph, r));
        else if (i == 4) g_string_append(files, ", ...");
    }
    char *text = g_strdup_printf("rank%s %s (%s)", rank_indexes->len > 1 ? "s" : "", numbers->str, files->str);
    g_string_free(numbers, TRUE);
    g_string_free(files, TRUE);
    return text;
}

static const char *group_name(const rv_graph *graph, const kernel_group *group)
{
    return rv_strings_get(graph->strings, group->group);
}

/* The ranks that have kernels in the group; FALSE (error) when the group's
 * size says some are missing. */
static GArray *participants_of(const rv_graph *graph, const kernel_group *group, GError **error)
{
    GArray *present = g_array_new(FALSE, FALSE, sizeof(int32_t));
    GArray *absent = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (guint r = 0; r < group->per_rank->len; r++) {
        int32_t index = (int32_t)r;
        g_array_append_val(g_ptr_array_index(group->per_rank, r) ? present : absent, index);
    }
    gboolean short_of_size = group->group_size > 0 && present->len < (guint)group->group_size;
    /* Unnamed groups (keyed by stream) say nothing of their size: the job's
     * default group spans every rank, so one that some ranks lack is suspect. */
    gboolean unnamed = group->group_size == 0 && !group->point_to_point;
    if (short_of_size || (unnamed && absent->len > 0 && present->len > 1)) {
        char *have = describe_ranks(graph, present);
        if (short_of_size)
            g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                        "process group \"%s\" has %d ranks but only %u of the traces have its collectives, %s: "
                        "give the trace of every rank in it", group_name(graph, group), group->group_size,
                        present->len, have);
        else {
            char *lack = describe_ranks(graph, absent);
            g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                        "collectives do not line up: %s have collectives on \"%s\" but %s have none - "
                        "these traces are not one job", have, group_name(graph, group), lack);
            g_free(lack);
        }
        g_free(have);
        g_array_unref(present);
        present = NULL;
    }
    g_array_unref(absent);
    return present;
}

static gboolean same_operation(const rv_collective_info *a, const rv_collective_info *b)
{
    gboolean reduce_a = a->op == RV_COLL_ALLREDUCE_RING || a->op == RV_COLL_ALLREDUCE_TREE || a->op == RV_COLL_ALLREDUCE_HIER;
    gboolean reduce_b = b->op == RV_COLL_ALLREDUCE_RING || b->op == RV_COLL_ALLREDUCE_TREE || b->op == RV_COLL_ALLREDUCE_HIER;
    return reduce_a && reduce_b ? TRUE : a->op == b->op;
}

static const char *operation_name(const rv_collective_info *info)
{
    const char *name = rv_collective_name((rv_collective)info->op);
    return name ? name : "an unknown collective";
}

static rv_matched_collective *new_match(rv_match_rule rule, guint size)
{
    rv_matched_collective *matched = g_new0(rv_matched_collective, 1);
    matched->kernels = g_array_sized_new(FALSE, FALSE, sizeof(int32_t), size);
    matched->rule = rule;
    return matched;
}

/* Do the ranks of one job agree on a collective?  The same operation (any
 * all-reduce algorithm is an all-reduce) and, where both recorded it, the
 * same payload. */
static gboolean same_collective(const rv_collective_info *a, const rv_collective_info *b)
{
    return same_operation(a, b) && (a->bytes <= 0 || b->bytes <= 0 || a->bytes == b->bytes);
}

/* One line for the first collective two ranks disagree on (`what`: its
 * position, e.g. "collective 3" or "sequence number 17"). */
static void disagree(const rv_graph *graph, const kernel_group *group, const char *what, int32_t rank_a, int32_t kernel_a,
                     int32_t rank_b, int32_t kernel_b, GError **error)
{
    const rv_collective_info *a = info_of(graph, kernel_a), *b = info_of(graph, kernel_b);
    char *detail = same_operation(a, b)
        ? g_strdup_printf("moves %" G_GINT64_FORMAT " bytes on rank %" G_GINT64_FORMAT " (%s) but %" G_GINT64_FORMAT
                          " bytes on rank %" G_GINT64_FORMAT " (%s)", a->bytes, rank_number(graph, rank_a),
                          source_of(graph, rank_a), b->bytes, rank_number(graph, rank_b), source_of(graph, rank_b))
        : g_strdup_printf("is %s on rank %" G_GINT64_FORMAT " (%s) but %s on rank %" G_GINT64_FORMAT " (%s)",
                          operation_name(a), rank_number(graph, rank_a), source_of(graph, rank_a), operation_name(b),
                          rank_number(graph, rank_b), source_of(graph, rank_b));
    g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "collectives do not line up: %s on \"%s\" %s - these traces are not one job",
                what, group_name(graph, group), detail);
    g_free(detail);
}

/* The k-th kernel of the group on every participant. */
static gboolean match_by_order(const rv_graph *graph, const kernel_group *group, const GArray *ranks, GPtrArray *out,
                               GError **error)
{
    int32_t first = g_array_index(ranks, int32_t, 0);
    GArray *reference = g_ptr_array_index(group->per_rank, first);
    for (guint i = 1; i < ranks->len; i++) {
        int32_t r = g_array_index(ranks, int32_t, i);
        GArray *list = g_ptr_array_index(group->per_rank, r);
        if (list->len == reference->len) continue;
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                    "collectives do not line up: rank %" G_GINT64_FORMAT " (%s) has %u collectives on \"%s\" but rank %"
                    G_GINT64_FORMAT " (%s) has %u - these traces are not one job (or not the same steps of it)",
                    rank_number(graph, first), source_of(graph, first), reference->len, group_name(graph, group),
                    rank_number(graph, r), source_of(graph, r), list->len);
        return FALSE;
    }
    for (guint k = 0; k < reference->len; k++) {
        rv_matched_collective *matched = new_match(group->point_to_point ? RV_MATCH_PEER : RV_MATCH_ORDER, ranks->len);
        const rv_collective_info *expected = info_of(graph, g_array_index(reference, int32_t, k));
        for (guint i = 0; i < ranks->len; i++) {
            int32_t r = g_array_index(ranks, int32_t, i);
            int32_t kernel = g_array_index((GArray *)g_ptr_array_index(group->per_rank, r), int32_t, k);
            const rv_collective_info *info = info_of(graph, kernel);
            if (!same_collective(expected, info)) {
                char *what = g_strdup_printf("collective %u", k + 1);
                disagree(graph, group, what, first, g_array_index(reference, int32_t, k), r, kernel, error);
                g_free(what);
                free_matched(matched);
                return FALSE;
            }
            g_array_append_val(matched->kernels, kernel);
        }
        g_ptr_array_add(out, matched);
    }
    return TRUE;
}

/* Every participant has as many collectives in the group as the first. */
static gboolean same_counts(const rv_graph *graph, const kernel_group *group, const GArray *ranks, GError **error)
{
    int32_t first = g_array_index(ranks, int32_t, 0);
    guint expected = ((GArray *)g_ptr_array_index(group->per_rank, first))->len;
    for (guint i = 1; i < ranks->len; i++) {
        int32_t r = g_array_index(ranks, int32_t, i);
        guint count = ((GArray *)g_ptr_array_index(group->per_rank, r))->len;
        if (count == expected) continue;
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                    "collectives do not line up: rank %" G_GINT64_FORMAT " (%s) has %u collectives on \"%s\" but rank %"
                    G_GINT64_FORMAT " (%s) has %u - these traces are not one job (or not the same steps of it)",
                    rank_number(graph, first), source_of(graph, first), expected, group_name(graph, group),
                    rank_number(graph, r), source_of(graph, r), count);
        return FALSE;
    }
    return TRUE;
}

/* Kernels of equal sequence number on every participant.  The ranks of one
 * job run the same collectives: the same number of them per group, and at
 * each sequence number the same operation and payload.  Anything else is
 * ranks of different jobs (a 4-layer and a 6-layer run, an all-gather
 * against an all-reduce, numbers no two ranks share), refused with the
 * first collective that differs. */
static gboolean match_by_sequence(const rv_graph *graph, const kernel_group *group, const GArray *ranks, GPtrArray *out,
                                  GError **error)
{
    if (!same_counts(graph, group, ranks, error)) return FALSE;
    GHashTable *by_seq = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, free_matched);
    GArray *order = g_array_new(FALSE, FALSE, sizeof(int64_t));
    gboolean ok = TRUE;
    for (guint i = 0; i < ranks->len && ok; i++) {
        int32_t r = g_array_index(ranks, int32_t, i);
        GArray *list = g_ptr_array_index(group->per_rank, r);
        for (guint k = 0; k < list->len && ok; k++) {
            int32_t kernel = g_array_index(list, int32_t, k);
            int64_t seq = info_of(graph, kernel)->seq;
            rv_matched_collective *matched = g_hash_table_lookup(by_seq, &seq);
            char *what = g_strdup_printf("the collective with sequence number %" G_GINT64_FORMAT, seq);
            if (matched == NULL && i > 0) {
                int32_t first = g_array_index(ranks, int32_t, 0);
                g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                            "collectives do not line up: rank %" G_GINT64_FORMAT " (%s) has %s on \"%s\" (%s), which rank %"
                            G_GINT64_FORMAT " (%s) does not have - these traces are not one job",
                            rank_number(graph, r), source_of(graph, r), what, group_name(graph, group),
                            operation_name(info_of(graph, kernel)), rank_number(graph, first), source_of(graph, first));
                ok = FALSE;
            } else if (matched == NULL) {
                matched = new_match(RV_MATCH_SEQUENCE, ranks->len);
                g_hash_table_insert(by_seq, g_memdup2(&seq, sizeof seq), matched);
                g_array_append_val(order, seq);
            } else if (!same_collective(info_of(graph, g_array_index(matched->kernels, int32_t, 0)), info_of(graph, kernel))) {
                disagree(graph, group, what, g_array_index(ranks, int32_t, 0), g_array_index(matched->kernels, int32_t, 0),
                         r, kernel, error);
                ok = FALSE;
            }
            g_free(what);
            /* one kernel per rank: a repeated number keeps the first */
            if (ok && matched->kernels->len == i) g_array_append_val(matched->kernels, kernel);
        }
    }
    for (guint s = 0; ok && s < order->len; s++) {
        int64_t seq = g_array_index(order, int64_t, s);
        rv_matched_collective *matched = g_hash_table_lookup(by_seq, &seq);
        if (matched->kernels->len != ranks->len) continue; /* a number repeated on the first rank */
        gpointer key = NULL;
        g_hash_table_steal_extended(by_seq, &seq, &key, NULL);
        g_free(key);
        g_ptr_array_add(out, matched);
    }
    g_array_unref(order);
    g_hash_table_destroy(by_seq);
    return ok;
}

static gboolean has_sequence_numbers(const rv_graph *graph, const kernel_group *group, const GArray *ranks)
{
    for (guint i = 0; i < ranks->len; i++) {
        GArray *list = g_ptr_array_index(group->per_rank, g_array_index(ranks, int32_t, i));
        for (guint k = 0; k < list->len; k++)
            if (info_of(graph, g_array_index(list, int32_t, k))->seq < 0) return FALSE;
    }
    return TRUE;
}

/* A point-to-point group is the kernels between one pair of ranks. */
static gboolean check_peer_present(const rv_graph *graph, const kernel_group *group, GError **error)
{
    for (guint r = 0; r < group->per_rank->len; r++) {
        GArray *list = g_ptr_array_index(group->per_rank, r);
        if (list == NULL) continue;
        int32_t peer = info_of(graph, g_array_index(list, int32_t, 0))->peer;
        if (index_of_rank(graph, peer) >= 0) continue;
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                    "rank %" G_GINT64_FORMAT " (%s) sends to or receives from rank %d, whose trace is not given",
                    rank_number(graph, (int32_t)r), source_of(graph, (int32_t)r), peer);
        return FALSE;
    }
    return TRUE;
}

static gboolean match_group(const rv_graph *graph, const kernel_group *group, GPtrArray *out, GError **error)
{
    if (group->point_to_point && !check_peer_present(graph, group, error)) return FALSE;
    GArray *ranks = participants_of(graph, group, error);
    if (ranks == NULL) return FALSE;
    gboolean ok = TRUE;
    if (ranks->len < 2) {
        /* a group of one rank in this graph: nothing to meet */
    } else if (!group->point_to_point && has_sequence_numbers(graph, group, ranks)) {
        ok = match_by_sequence(graph, group, ranks, out, error);
    } else {
        ok = match_by_order(graph, group, ranks, out, error);
    }
    g_array_unref(ranks);
    return ok;
}

GPtrArray *rv_collectives_match(const rv_graph *graph, GError **error)
{
    GPtrArray *matched = g_ptr_array_new_with_free_func(free_matched);
    if (graph->ranks->len < 2) return matched;
    GHashTable *by_key = NULL;
    GPtrArray *groups = group_kernels(graph, &by_key);
    gboolean ok = TRUE;
    for (guint g = 0; g < groups->len && ok; g++) ok = match_group(graph, g_ptr_array_index(groups, g), matched, error);
    g_hash_table_destroy(by_key);
    g_ptr_array_unref(groups);
    if (!ok) {
        g_ptr_array_unref(matched);
        return NULL;
    }
    return matched;
}
