/*
 * job.c - the per-rank tables and JSON that simulate and whatif print for
 * a job of several ranks (job.h; a replay's per-rank figures: report.h).
 */
#include "cli.h"
#include "reverie/alike.h"
#include "reverie/documents.h"
#include "reverie/explain.h"
#include "reverie/job.h"
#include "reverie/report.h"
#include <jansson.h>
#include <string.h>

/* ---- per-rank reports ------------------------------------------------------ */

gboolean rv_cli_is_job(const rv_graph *graph)
{
    return graph->ranks->len > 1;
}

static int64_t rank_number(const rv_graph *graph, guint rank_index)
{
    return g_array_index(graph->ranks, rv_rank, rank_index).rank;
}

/* "rank 7 6.9 ms, rank 3 0.2 ms": the ranks it waited for, most first. */
static char *waited_for_text(const rv_graph *graph, const rv_rank_wait *wait)
{
    GString *text = g_string_new(NULL);
    guint ranks = rv_graph_rank_count(graph);
    gboolean *shown = g_new0(gboolean, ranks);
    for (int listed = 0; listed < 2; listed++) {
        int32_t best = -1;
        for (guint r = 0; r < ranks; r++)
            if (!shown[r] && wait->waited_for_ns[r] > 0 && (best < 0 || wait->waited_for_ns[r] > wait->waited_for_ns[best]))
                best = (int32_t)r;
        if (best < 0 || wait->waited_for_ns[best] < 1000) break;
        shown[best] = TRUE;
        g_string_append_printf(text, "%srank %" G_GINT64_FORMAT " %.3f ms", listed ? ", " : "",
                               rank_number(graph, (guint)best), wait->waited_for_ns[best] / 1e6);
    }
    g_free(shown);
    return g_string_free(text, FALSE);
}

static void print_rank_row(const rv_graph *graph, guint r, const rv_step_time *step, const char *extra)
{
    char recorded[32], simulated[32];
    rv_cli_format_ms(recorded, sizeof recorded, step->recorded_ns);
    rv_cli_format_ms(simulated, sizeof simulated, step->simulated_ns);
    printf("  %-5" G_GINT64_FORMAT " %-20s %14s %14s %8.2f%%  %s\n", rank_number(graph, r), rv_cli_shown(step->name),
           recorded, simulated, 100.0 * rv_relative_error(step->recorded_ns, step->simulated_ns), extra);
}

gboolean rv_cli_replay_job(const rv_graph *graph, const rv_policy *policy, rv_replay *out, GError **error)
{
    if (!rv_replay_run(graph, policy, out, error)) return FALSE;
    rv_cli_note_launch_queue(graph, out->launch_queue_ignored);
    return TRUE;
}

static char *wait_text(const rv_graph *graph, const rv_rank_wait *wait)
{
    char *whom = waited_for_text(graph, wait);
    char *text = g_strdup_printf("%.3f ms in %u%s%s%s", wait->wait_ns / 1e6, wait->collectives, *whom ? " (" : "", whom,
                                 *whom ? ")" : "");
    g_free(whom);
    return text;
}

void rv_cli_print_rank_table(const rv_graph *graph, const rv_replay *replay)
{
    printf("  %-5s %-20s %14s %14s %9s  %s\n", "rank", "step", "recorded", "simulated", "error",
           "waited in collectives (mostly for)");
    double worst_mean = 0, worst_max = 0;
    for (guint r = 0; r < replay->by_rank->len; r++) {
        const GArray *steps = g_ptr_array_index(replay->by_rank, r);
        char *extra = wait_text(graph, &g_array_index(replay->waits, rv_rank_wait, r));
        double mean = 0;
        for (guint s = 0; s < steps->len; s++) {
            const rv_step_time *step = &g_array_index(steps, rv_step_time, s);
            double error = rv_relative_error(step->recorded_ns, step->simulated_ns);
            mean += error / steps->len;
            worst_max = MAX(worst_max, error);
            print_rank_row(graph, r, step, s == 0 ? extra : "");
        }
        worst_mean = MAX(worst_mean, mean);
        g_free(extra);
    }
    for (guint s = 0; s < replay->steps->len; s++) {
        const rv_step_time *step = &g_array_index(replay->steps, rv_step_time, s);
        char recorded[32], simulated[32];
        rv_cli_format_ms(recorded, sizeof recorded, step->recorded_ns);
        rv_cli_format_ms(simulated, sizeof simulated, step->simulated_ns);
        printf("  %-5s %-20s %14s %14s %8.2f%%  (the slowest rank)\n", "job", rv_cli_shown(step->name), recorded,
               simulated, 100.0 * rv_relative_error(step->recorded_ns, step->simulated_ns));
    }
    printf("  per-step error: mean %.2f%% on the worst rank, max %.2f%%\n", 100 * worst_mean, 100 * worst_max);
}

static void print_whatif_row(const char *rank, const rv_step_time *base, const rv_step_time *predicted, const char *extra)
{
    char recorded[32], baseline[32], prediction[32];
    rv_cli_format_ms(recorded, sizeof recorded, base->recorded_ns);
    rv_cli_format_ms(baseline, sizeof baseline, base->simulated_ns);
    rv_cli_format_ms(prediction, sizeof prediction, predicted->simulated_ns);
    printf("  %-5s %-20s %14s %14s %14s %8.3fx  %s\n", rank, rv_cli_shown(base->name), recorded, baseline, prediction,
           predicted->simulated_ns ? (double)base->simulated_ns / predicted->simulated_ns : 0.0, extra);
}

void rv_cli_print_rank_whatif(const rv_graph *graph, const rv_replay *baseline, const rv_replay *predicted)
{
    printf("  %-5s %-20s %14s %14s %14s %9s  %s\n", "rank", "step", "recorded", "baseline", "predicted", "speedup",
           "predicted wait in collectives (mostly for)");
    for (guint r = 0; r < baseline->by_rank->len; r++) {
        const GArray *base = g_ptr_array_index(baseline->by_rank, r), *after = g_ptr_array_index(predicted->by_rank, r);
        char *extra = wait_text(graph, &g_array_index(predicted->waits, rv_rank_wait, r));
        char rank[24];
        g_snprintf(rank, sizeof rank, "%" G_GINT64_FORMAT, rank_number(graph, r));
        for (guint s = 0; s < base->len && s < after->len; s++)
            print_whatif_row(rank, &g_array_index(base, rv_step_time, s), &g_array_index(after, rv_step_time, s),
                             s == 0 ? extra : "");
        g_free(extra);
    }
    for (guint s = 0; s < baseline->steps->len && s < predicted->steps->len; s++)
        print_whatif_row("job", &g_array_index(baseline->steps, rv_step_time, s),
                         &g_array_index(predicted->steps, rv_step_time, s), "(the slowest rank)");
}

/* ---- what the join found, for info -------------------------------------- */

guint rv_cli_rank_classes(const rv_graph *graph, rv_alike_verdict *verdict, char **why)
{
    GError *error = NULL;
    memset(verdict, 0, sizeof *verdict);
    guint classes = rv_alike_check(graph, verdict, &error) ? verdict->class_count : 0;
    *why = error ? g_strdup(error->message) : g_strdup(verdict->unlike_because);
    g_clear_error(&error);
    return classes;
}

/* The classes shown in a line: past this many, how many more. */
#define CLASSES_SHOWN_MAX 8

/* Class c's members as runs of rank indices: "0 2-5 9". */
static void append_members(GString *out, const rv_alike_verdict *verdict, guint ranks, guint c)
{
    const char *gap = "";
    for (guint r = 0; r < ranks; r++) {
        if (verdict->rank_class[r] != c) continue;
        guint last = r;
        while (last + 1 < ranks && verdict->rank_class[last + 1] == c) last++;
        g_string_append_printf(out, last > r ? "%s%u-%u" : "%s%u", gap, r, last);
        gap = " ";
        r = last;
    }
}

char *rv_cli_rank_classes_text(const rv_graph *graph)
{
    rv_alike_verdict verdict;
    char *why = NULL;
    guint classes = rv_cli_rank_classes(graph, &verdict, &why);
    GString *text = g_string_new(NULL);
    if (classes == 1)
        g_string_append(text, "yes (one program, times of their own): saved once, replayed in lockstep");
    else if (classes > 1) {
        g_string_append_printf(text, "%u classes, the largest of %u ranks:", classes, verdict.largest_class);
        for (guint c = 0; c < MIN(classes, CLASSES_SHOWN_MAX); c++) {
            g_string_append(text, " {");
            append_members(text, &verdict, graph->ranks->len, c);
            g_string_append(text, "}");
        }
        if (classes > CLASSES_SHOWN_MAX) g_string_append_printf(text, " and %u more", classes - CLASSES_SHOWN_MAX);
        g_string_append_printf(text, " (%s): each class saved once, replayed in lockstep", rv_cli_shown(why));
    } else
        g_string_append_printf(text, "no (%s): saved and replayed rank by rank", rv_cli_shown(why));
    g_free(why);
    rv_alike_verdict_clear(&verdict);
    return g_string_free(text, FALSE);
}

static void print_alike(const rv_graph *graph)
{
    char *text = rv_cli_rank_classes_text(graph);
    printf("ranks alike: %s\n", text);
    g_free(text);
}

void rv_cli_print_job_summary(const rv_graph *graph)
{
    uint64_t by_rule[RV_MATCH_COUNT] = { 0 }, by_parallelism[RV_PARALLEL_COUNT] = { 0 }, kernels_unmatched = 0;
    for (guint c = 0; c < graph->collectives->len; c++) {
        const rv_collective_info *info = &g_array_index(graph->collectives, rv_collective_info, c);
        if (info->inserted) continue;
        by_rule[info->matched_by]++;
        by_parallelism[info->parallelism]++;
        if (info->matched_by == RV_MATCH_NONE) kernels_unmatched++;
    }
    printf("ranks: %u (world size %" G_GINT64_FORMAT ")\n", graph->ranks->len, graph->world_size);
    for (guint r = 0; r < graph->ranks->len; r++) {
        const rv_rank *rank = &g_array_index(graph->ranks, rv_rank, r);
        printf("  rank %-4" G_GINT64_FORMAT " %-48s ", rank->rank, rv_cli_shown(rv_strings_get(graph->strings, rank->source)));
        if (r == 0) printf("the reference clock\n");
        else if (rank->offset_samples == 0) printf("clock offset unknown (no collective in common with the reference): 0 assumed\n");
        else printf("clock offset %+.3f ms (median of %d common collective ends)\n", rank->clock_offset_ns / 1e6,
                    rank->offset_samples);
    }
    uint64_t sized = 0;
    for (guint c = 0; c < graph->collectives->len; c++) sized += g_array_index(graph->collectives, rv_collective_info, c).bytes > 0;
    printf("collectives: %" G_GUINT64_FORMAT " matched across ranks (%" G_GUINT64_FORMAT " with a known payload)",
           graph->collectives->len - kernels_unmatched, sized);
    for (int rule = 1; rule < RV_MATCH_COUNT; rule++)
        if (by_rule[rule]) printf(", %" G_GUINT64_FORMAT " by %s", by_rule[rule], rv_match_rule_name(rule));
    printf("; %" G_GUINT64_FORMAT " kernels unmatched (replayed with their recorded wait)\n", kernels_unmatched);
    printf("             by parallelism:");
    for (int p = 0; p < RV_PARALLEL_COUNT; p++)
        if (by_parallelism[p]) printf(" %s %" G_GUINT64_FORMAT, rv_parallelism_name(p), by_parallelism[p]);
    printf("\n");
    print_alike(graph);
}

void *rv_cli_json_job_summary(const rv_graph *graph)
{
    json_t *rules = json_object(), *parallelism = json_object(), *ranks = json_array();
    uint64_t unmatched = 0, matched = 0;
    for (guint c = 0; c < graph->collectives->len; c++) {
        const rv_collective_info *info = &g_array_index(graph->collectives, rv_collective_info, c);
        if (info->inserted) continue;
        if (info->matched_by == RV_MATCH_NONE) unmatched++;
        else matched++;
        const char *rule = info->matched_by == RV_MATCH_NONE ? "unmatched" : rv_match_rule_name(info->matched_by);
        json_object_set_new(rules, rule, json_integer(json_integer_value(json_object_get(rules, rule)) + 1));
        const char *kind = rv_parallelism_name(info->parallelism);
        json_object_set_new(parallelism, kind, json_integer(json_integer_value(json_object_get(parallelism, kind)) + 1));
    }
    for (guint r = 0; r < graph->ranks->len; r++) {
        const rv_rank *rank = &g_array_index(graph->ranks, rv_rank, r);
        json_array_append_new(ranks, json_pack("{s:I,s:o,s:f,s:i}", "rank", (json_int_t)rank->rank, "source",
                                               rv_json_text(rv_strings_get(graph->strings, rank->source)),
                                               "clock_offset_us", rank->clock_offset_ns / 1e3, "clock_offset_samples",
                                               rank->offset_samples));
    }
    char *why = NULL;
    rv_alike_verdict verdict;
    guint classes = rv_cli_rank_classes(graph, &verdict, &why);
    json_t *rank_class = classes > 0 ? json_array() : json_null();
    for (guint r = 0; classes > 0 && r < graph->ranks->len; r++)
        json_array_append_new(rank_class, json_integer(verdict.rank_class[r]));
    rv_alike_verdict_clear(&verdict);
    json_t *summary = json_pack("{s:o,s:I,s:I,s:I,s:o,s:o,s:b,s:I,s:o,s:o}", "ranks", ranks, "world_size",
                                (json_int_t)graph->world_size, "collectives_matched", (json_int_t)matched,
                                "kernels_unmatched", (json_int_t)unmatched, "matched_by", rules, "parallelism",
                                parallelism, "ranks_alike", classes == 1, "rank_classes", (json_int_t)classes,
                                "rank_class", rank_class, "unlike_because", why ? rv_json_text(why) : json_null());
    g_free(why);
    return summary;
}
