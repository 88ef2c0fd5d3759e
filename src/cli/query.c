/*
 * query.c - `reverie query GRAPH|TRACE SELECT...`: which tasks a selection
 * picks and how much time they account for, listed or grouped.
 *
 * It is the way to try a selection before handing it to an optimization,
 * so it uses exactly the selection code the plugins use (select.h).
 * Names come from the trace and are escaped before they are printed.
 */
#include "cli.h"
#include "reverie/documents.h"
#include "reverie/escape.h"
#include "reverie/select.h"
#include "reverie/units.h"
#include <jansson.h>
#include <string.h>

typedef enum { GROUP_NONE, GROUP_NAME, GROUP_LAYER, GROUP_OP, GROUP_PHASE, GROUP_KIND, GROUP_RESOURCE, GROUP_STEP } group_by;

static const char *const group_names[] = { "", "name", "layer", "op", "phase", "kind", "resource", "step" };
#define GROUP_LIST "name, layer, op, phase, kind, resource, step"

enum { DEFAULT_LIMIT = 20, KEY_WIDTH = 64, NAME_WIDTH = 60 };

typedef struct {
    const char *key;
    uint64_t count;
    int64_t total_ns;
} query_group;

typedef struct {
    uint64_t count;
    int64_t total_ns;
    int32_t live_tasks;
} query_totals;

static int group_by_from_name(const char *name)
{
    for (gsize g = 1; g < G_N_ELEMENTS(group_names); g++)
        if (strcmp(group_names[g], name) == 0) return (int)g;
    return -1;
}

static const char *or_none(const char *text) { return text && *text ? text : "(none)"; }

static const char *step_name(const rv_graph *graph, int32_t step)
{
    if (step < 0 || (guint)step >= graph->steps->len) return "(none)";
    return rv_strings_get(graph->strings, g_array_index(graph->steps, rv_step, step).name);
}

static const char *resource_name(const rv_graph *graph, int32_t resource)
{
    if (resource < 0 || (guint)resource >= graph->resources->len) return "?";
    return rv_strings_get(graph->strings, g_array_index(graph->resources, rv_resource, resource).name);
}

/* The text a task is grouped under; pointers stay valid as long as the graph. */
static const char *group_key(const rv_graph *graph, const rv_task *task, group_by by)
{
    switch (by) {
    case GROUP_NAME: return or_none(rv_strings_get(graph->strings, task->name));
    case GROUP_LAYER: return or_none(rv_strings_get(graph->strings, task->layer));
    case GROUP_OP: return or_none(rv_strings_get(graph->strings, task->op));
    case GROUP_PHASE: return rv_phase_name(task->phase);
    case GROUP_KIND: return rv_task_kind_name(task->kind);
    case GROUP_RESOURCE: return resource_name(graph, task->resource);
    case GROUP_STEP: return step_name(graph, task->step);
    default: return "";
    }
}

static gint compare_groups(gconstpointer left, gconstpointer right)
{
    const query_group *a = *(query_group *const *)left, *b = *(query_group *const *)right;
    if (a->total_ns != b->total_ns) return a->total_ns > b->total_ns ? -1 : 1;
    if (a->count != b->count) return a->count > b->count ? -1 : 1;
    return strcmp(a->key, b->key);
}

/* Groups of the selected tasks, largest summed duration first. */
static GPtrArray *collect_groups(const rv_graph *graph, const GArray *ids, group_by by)
{
    GHashTable *by_key = g_hash_table_new(g_str_hash, g_str_equal);
    GPtrArray *groups = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < ids->len; i++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, g_array_index(ids, int32_t, i));
        const char *key = group_key(graph, task, by);
        query_group *group = g_hash_table_lookup(by_key, key);
        if (group == NULL) {
            group = g_new0(query_group, 1);
            group->key = key;
            g_hash_table_insert(by_key, (gpointer)key, group);
            g_ptr_array_add(groups, group);
        }
        group->count++;
        group->total_ns += task->duration_ns;
    }
    g_hash_table_destroy(by_key);
    g_ptr_array_sort(groups, compare_groups);
    return groups;
}

static query_totals sum_selection(const rv_graph *graph, const GArray *ids)
{
    query_totals totals = { ids->len, 0, 0 };
    for (guint i = 0; i < ids->len; i++)
        totals.total_ns += g_array_index(graph->tasks, rv_task, g_array_index(ids, int32_t, i)).duration_ns;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++)
        if (!(g_array_index(graph->tasks, rv_task, id).flags & RV_TASK_FLAG_REMOVED)) totals.live_tasks++;
    return totals;
}

static int64_t mean_ns(int64_t total_ns, uint64_t count) { return count ? total_ns / (int64_t)count : 0; }

/* ---- text output -------------------------------------------------------- */

/* text escaped, then cut to at most width characters, ending in "..." when cut. */
static char *truncated(const char *text, glong width)
{
    char *escaped = rv_escape_text(text);
    if (g_utf8_strlen(escaped, -1) <= width) return escaped;
    const char *cut = g_utf8_offset_to_pointer(escaped, width - 3);
    char *shown = g_strdup_printf("%.*s...", (int)(cut - escaped), escaped);
    g_free(escaped);
    return shown;
}

static void print_totals(const rv_graph *graph, const rv_selection *sel, const query_totals *totals)
{
    char *total = rv_format_duration(totals->total_ns), *mean = rv_format_duration(mean_ns(totals->total_ns, totals->count));
    char *source = rv_escape_text(graph->source);
    char *selection = rv_escape_text(rv_selection_is_empty(sel) ? "(all tasks)" : rv_selection_text(sel));
    printf("source: %s\n", source);
    printf("selection: %s\n", selection);
    g_free(source);
    g_free(selection);
    printf("matched: %" G_GUINT64_FORMAT " of %d tasks, total %s, mean %s\n", totals->count, totals->live_tasks, total, mean);
    g_free(total);
    g_free(mean);
}

static void print_more(guint shown, guint all, const char *what)
{
    if (shown < all) printf("  ... %u more %s (--limit N, 0 for all)\n", all - shown, what);
}

/* The key column is as wide as the longest key shown, up to KEY_WIDTH. */
static int key_column_width(const GPtrArray *groups, guint shown)
{
    glong width = 8;
    for (guint g = 0; g < shown; g++)
        width = MAX(width, g_utf8_strlen(((const query_group *)g_ptr_array_index(groups, g))->key, -1));
    return (int)MIN(width, KEY_WIDTH);
}

static void print_groups(const GPtrArray *groups, group_by by, const query_totals *totals, guint limit)
{
    guint shown = limit ? MIN(limit, groups->len) : groups->len;
    int width = key_column_width(groups, shown);
    printf("\n  %-*s %8s %12s %12s %7s\n", width, group_names[by], "count", "total", "mean", "share");
    for (guint g = 0; g < shown; g++) {
        const query_group *group = g_ptr_array_index(groups, g);
        char *key = truncated(group->key, width);
        char *total = rv_format_duration(group->total_ns), *mean = rv_format_duration(mean_ns(group->total_ns, group->count));
        double share = totals->total_ns ? 100.0 * group->total_ns / totals->total_ns : 0.0;
        printf("  %-*s %8" G_GUINT64_FORMAT " %12s %12s %6.1f%%\n", width, key, group->count, total, mean, share);
        g_free(key);
        g_free(total);
        g_free(mean);
    }
    print_more(shown, groups->len, "groups");
}

static void print_task_row(const rv_graph *graph, int32_t id)
{
    const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
    char *duration = rv_format_duration(task->duration_ns);
    char *layer = truncated(or_none(rv_strings_get(graph->strings, task->layer)), 28);
    char *name = truncated(rv_strings_get(graph->strings, task->name), NAME_WIDTH);
    char *resource = rv_escape_text(resource_name(graph, task->resource));
    char step[16];
    if (task->step >= 0) g_snprintf(step, sizeof step, "%d", task->step);
    else g_strlcpy(step, "-", sizeof step);
    printf("  %8d %-8s %-9s %4s %11s  %-18s %-28s %s\n", id, rv_task_kind_name(task->kind), rv_phase_name(task->phase),
           step, duration, resource, layer, name);
    g_free(resource);
    g_free(duration);
    g_free(layer);
    g_free(name);
}

static void print_tasks(const rv_graph *graph, const GArray *ids, guint limit)
{
    if (ids->len == 0) return;
    printf("\n  %8s %-8s %-9s %4s %11s  %-18s %-28s %s\n", "id", "kind", "phase", "step", "duration", "resource", "layer",
           "name");
    guint shown = limit ? MIN(limit, ids->len) : ids->len;
    for (guint i = 0; i < shown; i++) print_task_row(graph, g_array_index(ids, int32_t, i));
    print_more(shown, ids->len, "tasks");
}

/* ---- JSON output -------------------------------------------------------- */

static json_t *json_groups(const GPtrArray *groups, const query_totals *totals, guint limit)
{
    json_t *list = json_array();
    guint shown = limit ? MIN(limit, groups->len) : groups->len;
    for (guint g = 0; g < shown; g++) {
        const query_group *group = g_ptr_array_index(groups, g);
        json_array_append_new(list, json_pack("{s:o,s:I,s:f,s:f,s:f}", "key", rv_json_text(group->key), "count", (json_int_t)group->count,
                                              "total_us", group->total_ns / 1e3,
                                              "mean_us", mean_ns(group->total_ns, group->count) / 1e3, "share",
                                              totals->total_ns ? (double)group->total_ns / totals->total_ns : 0.0));
    }
    return list;
}

/* A name in each task's entry: bounded once per name (rv_cli_bounded), not
 * once per task that carries it. */
static json_t *task_text(const char *text) { return rv_json_text(rv_cli_bounded(text)); }

static json_t *json_task(const rv_graph *graph, int32_t id)
{
    const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
    return json_pack("{s:i,s:s,s:s,s:i,s:o,s:f,s:o,s:o,s:o,s:o}", "id", id, "kind", rv_task_kind_name(task->kind),
                     "phase", rv_phase_name(task->phase), "step", task->step,
                     "step_name", task_text(step_name(graph, task->step)), "duration_us", task->duration_ns / 1e3,
                     "resource", task_text(resource_name(graph, task->resource)),
                     "layer", task_text(rv_strings_get(graph->strings, task->layer)),
                     "op", task_text(rv_strings_get(graph->strings, task->op)),
                     "name", task_text(rv_strings_get(graph->strings, task->name)));
}

static json_t *json_tasks(const rv_graph *graph, const GArray *ids, guint limit)
{
    json_t *list = json_array();
    guint shown = limit ? MIN(limit, ids->len) : ids->len;
    for (guint i = 0; i < shown; i++) json_array_append_new(list, json_task(graph, g_array_index(ids, int32_t, i)));
    return list;
}

static void print_json(const rv_graph *graph, const rv_selection *sel, const GArray *ids, const GPtrArray *groups,
                       group_by by, const query_totals *totals, guint limit)
{
    json_t *root = json_object();
    json_object_set_new(root, "source", rv_json_text(graph->source));
    json_object_set_new(root, "selection", rv_json_text(rv_selection_text(sel)));
    json_object_set_new(root, "count", json_integer((json_int_t)totals->count));
    json_object_set_new(root, "tasks_in_graph", json_integer(totals->live_tasks));
    json_object_set_new(root, "total_us", json_real(totals->total_ns / 1e3));
    json_object_set_new(root, "mean_us", json_real(mean_ns(totals->total_ns, totals->count) / 1e3));
    if (groups) {
        json_object_set_new(root, "group_by", json_string(group_names[by]));
        json_object_set_new(root, "group_count", json_integer(groups->len));
        json_object_set_new(root, "groups", json_groups(groups, totals, limit));
    } else {
        json_object_set_new(root, "tasks", json_tasks(graph, ids, limit));
    }
    rv_cli_print_json(root);
}

/* ---- CSV output --------------------------------------------------------- */

static void print_groups_csv(const GPtrArray *groups, group_by by, const query_totals *totals, guint limit)
{
    const char *header[] = { group_names[by], "count", "total_us", "mean_us", "share" };
    rv_cli_csv_row(header, G_N_ELEMENTS(header));
    guint shown = limit ? MIN(limit, groups->len) : groups->len;
    for (guint g = 0; g < shown; g++) {
        const query_group *group = g_ptr_array_index(groups, g);
        char *count = g_strdup_printf("%" G_GUINT64_FORMAT, group->count);
        char *total = rv_cli_us_text(group->total_ns), *mean = rv_cli_us_text(mean_ns(group->total_ns, group->count));
        char *share = g_strdup_printf("%.6f", totals->total_ns ? (double)group->total_ns / totals->total_ns : 0.0);
        const char *row[] = { rv_cli_shown(group->key), count, total, mean, share };
        rv_cli_csv_row(row, G_N_ELEMENTS(row));
        g_free(count); g_free(total); g_free(mean); g_free(share);
    }
}

static void print_tasks_csv(const rv_graph *graph, const GArray *ids, guint limit)
{
    const char *header[] = { "id", "kind", "phase", "step", "duration_us", "resource", "layer", "op", "name" };
    rv_cli_csv_row(header, G_N_ELEMENTS(header));
    guint shown = limit ? MIN(limit, ids->len) : ids->len;
    for (guint i = 0; i < shown; i++) {
        int32_t id = g_array_index(ids, int32_t, i);
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        char *id_text = g_strdup_printf("%d", id), *step = g_strdup_printf("%d", task->step);
        char *duration = rv_cli_us_text(task->duration_ns);
        const char *row[] = { id_text, rv_task_kind_name(task->kind), rv_phase_name(task->phase), step, duration,
                              rv_cli_shown(resource_name(graph, task->resource)),
                              rv_cli_shown(rv_strings_get(graph->strings, task->layer)),
                              rv_cli_shown(rv_strings_get(graph->strings, task->op)),
                              rv_cli_shown(rv_strings_get(graph->strings, task->name)) };
        rv_cli_csv_row(row, G_N_ELEMENTS(row));
        g_free(id_text); g_free(step); g_free(duration);
    }
}

/* ---- the command -------------------------------------------------------- */

typedef struct {
    char *group_by;
    gboolean as_json, as_csv;
    gint limit;
    char **opts;   /* --opt: query the graph the optimizations leave */
} query_options;

static int run_query(const char *path, const rv_selection *sel, group_by by, const query_options *options)
{
    GError *error = NULL;
    rv_cli_optimized optimized;
    if (!rv_cli_load_optimized(path, options->opts, &optimized, &error)) {
        rv_cli_optimized_clear(&optimized);
        return rv_cli_fail(error);
    }
    const rv_graph *graph = optimized.graph;
    GArray *ids = rv_select(graph, sel);
    query_totals totals = sum_selection(graph, ids);
    GPtrArray *groups = by != GROUP_NONE ? collect_groups(graph, ids, by) : NULL;
    if (options->as_json) {
        print_json(graph, sel, ids, groups, by, &totals, (guint)options->limit);
    } else if (options->as_csv) {
        if (groups) print_groups_csv(groups, by, &totals, (guint)options->limit);
        else print_tasks_csv(graph, ids, (guint)options->limit);
    } else {
        print_totals(graph, sel, &totals);
        if (groups) print_groups(groups, by, &totals, (guint)options->limit);
        else print_tasks(graph, ids, (guint)options->limit);
    }
    if (groups) g_ptr_array_unref(groups);
    g_array_unref(ids);
    rv_cli_optimized_clear(&optimized);
    return RV_EXIT_OK;
}

static int check_options(const query_options *options, int argc, group_by *by)
{
    if (argc < 2) return rv_cli_usage("query", "give a trace or graph, then a selection");
    if (options->limit < 0) return rv_cli_usage("query", "--limit must be 0 (no limit) or more");
    if (options->as_json && options->as_csv) return rv_cli_usage("query", "give --json or --csv, not both");
    *by = GROUP_NONE;
    if (options->group_by == NULL) return RV_EXIT_OK;
    int found = group_by_from_name(options->group_by);
    if (found < 0) {
        char *message = g_strdup_printf("unknown --group-by \"%s\" (" GROUP_LIST ")", options->group_by);
        int status = rv_cli_usage("query", message);
        g_free(message);
        return status;
    }
    *by = (group_by)found;
    return RV_EXIT_OK;
}

int rv_cmd_query(int argc, char **argv)
{
    query_options options = { NULL, FALSE, FALSE, DEFAULT_LIMIT, NULL };
    GOptionEntry entries[] = {
        { "group-by", 'g', 0, G_OPTION_ARG_STRING, &options.group_by, "sum by " GROUP_LIST, "KEY" },
        { "json", 0, 0, G_OPTION_ARG_NONE, &options.as_json, "print JSON", NULL },
        { "csv", 0, 0, G_OPTION_ARG_NONE, &options.as_csv,
          "print the groups or tasks as CSV (durations in us; -n 0 for all rows)", NULL },
        { "limit", 'n', 0, G_OPTION_ARG_INT, &options.limit, "list at most N tasks or groups (default 20, 0: all)", "N" },
        { "opt", 0, 0, G_OPTION_ARG_STRING_ARRAY, &options.opts,
          "query the graph after this optimization (repeatable, applied in order; its inserted tasks included)",
          "NAME[:k=v,...]" },
        { NULL }
    };
    GOptionContext *context = g_option_context_new("GRAPH|TRACE [SELECT...] - tasks a selection picks, with totals");
    rv_cli_add_entries(context, entries);
    g_option_context_set_description(context, RV_SELECTION_HELP
        "\nWithout SELECT every task is selected. Durations are the tasks' own (a blocking\n"
        "call's wait is not included). --json: {source, selection, count, total_us, mean_us,\n"
        "groups: [{key, count, total_us, mean_us, share}] or tasks: [...]}.\n");
    int status = RV_EXIT_OK;
    group_by by = GROUP_NONE;
    if (!rv_cli_parse(context, &argc, &argv, &status)) goto out;
    if ((status = check_options(&options, argc, &by)) != RV_EXIT_OK) goto out;
    GError *error = NULL;
    rv_selection *sel = rv_selection_parse_argv(argv + 2, argc - 2, &error);
    if (sel == NULL) { status = rv_cli_fail(error); goto out; } /* before the slow load */
    status = run_query(argv[1], sel, by, &options);
    rv_selection_free(sel);
out:
    g_free(options.group_by);
    g_strfreev(options.opts);
    g_option_context_free(context);
    return status;
}
