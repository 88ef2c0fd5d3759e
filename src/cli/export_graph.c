/*
 * export_graph.c - `reverie export-graph`: write the dependency graph (or a
 * part of it) as GraphML or DOT, so it opens in Gephi, yEd, Cytoscape,
 * networkx or Graphviz.
 *
 * igraph does the writing (DESIGN "Libraries"): we copy the kept tasks and
 * the edges between them into an igraph_t with C attributes and call its
 * GraphML or DOT writer.  Whole traces have hundreds of thousands of tasks,
 * which few viewers can open, hence --steps, --select and the size limit.
 *
 * Names come from the trace: they are escaped (escape.h) before they reach
 * the file, because XML 1.0 cannot hold most control characters at all.
 * The file is written by the one output writer (reverie/output.h: atomic,
 * never an input of the run, an existing file only with --force).
 */
#include "cli.h"
#include "reverie/escape.h"
#include "reverie/output.h"
#include "reverie/select.h"
#include <igraph.h>
#include <string.h>

enum { MAX_VERTICES = 200000, DOT_LABEL_WIDTH = 40 };

typedef enum { FORMAT_GRAPHML, FORMAT_DOT } export_format;

typedef struct {
    const char *output;   /* -o (shared: output.c) */
    char *format;
    char **select;
    char **opts;          /* --opt: export the graph the optimizations leave */
    gint steps; /* -1: all */
    gboolean force;       /* --force (shared) */
} export_options;

/* Which tasks are written, and each one's vertex number (-1: left out). */
typedef struct {
    int32_t *vertex_of_task;
    GArray *tasks; /* int32_t task ids, in vertex order */
} export_subset;

/* ---- choosing the format ------------------------------------------------- */

static gboolean format_from_name(const char *name, export_format *format)
{
    if (g_ascii_strcasecmp(name, "graphml") == 0) *format = FORMAT_GRAPHML;
    else if (g_ascii_strcasecmp(name, "dot") == 0 || g_ascii_strcasecmp(name, "gv") == 0) *format = FORMAT_DOT;
    else return FALSE;
    return TRUE;
}

static gboolean choose_format(const export_options *options, export_format *format, GError **error)
{
    if (options->format) {
        if (format_from_name(options->format, format)) return TRUE;
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "unknown --format \"%s\" (graphml, dot)", options->format);
        return FALSE;
    }
    const char *dot = strrchr(options->output, '.');
    if (dot && format_from_name(dot + 1, format)) return TRUE;
    g_set_error(error, RV_ERROR, RV_ERROR_USAGE,
                "cannot tell the format from \"%s\": name it .graphml, .dot or .gv, or give --format", options->output);
    return FALSE;
}

/* ---- choosing the tasks ------------------------------------------------- */

/* --steps N keeps the first N steps; tasks outside every step only when N
 * covers all of them, so "--steps 1" is one clean iteration. */
static gboolean in_first_steps(const rv_graph *graph, const rv_task *task, gint steps)
{
    if (steps < 0) return TRUE;
    if (task->step < 0) return (guint)steps >= graph->steps->len;
    return task->step < steps;
}

static export_subset choose_tasks(const rv_graph *graph, const rv_selection *sel, gint steps)
{
    export_subset subset;
    int32_t n = rv_graph_task_count(graph);
    subset.vertex_of_task = g_new(int32_t, n > 0 ? n : 1);
    for (int32_t id = 0; id < n; id++) subset.vertex_of_task[id] = -1;
    GArray *selected = rv_select(graph, sel);
    subset.tasks = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (guint i = 0; i < selected->len; i++) {
        int32_t id = g_array_index(selected, int32_t, i);
        if (!in_first_steps(graph, &g_array_index(graph->tasks, rv_task, id), steps)) continue;
        subset.vertex_of_task[id] = (int32_t)subset.tasks->len;
        g_array_append_val(subset.tasks, id);
    }
    g_array_unref(selected);
    return subset;
}

static void subset_clear(export_subset *subset)
{
    g_free(subset->vertex_of_task);
    g_array_unref(subset->tasks);
}

/* ---- building the igraph graph ------------------------------------------ */

static gboolean igraph_ok(igraph_error_t code, const char *what, GError **error)
{
    if (code == IGRAPH_SUCCESS) return TRUE;
    g_set_error(error, RV_ERROR, RV_ERROR_INTERNAL, "igraph could not %s: %s", what, igraph_strerror(code));
    return FALSE;
}

/* Edges whose both ends are kept, renumbered; their kinds in edge_kinds. */
static void kept_edges(const rv_graph *graph, const export_subset *subset, igraph_vector_int_t *ends, GArray *edge_kinds)
{
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        int32_t from = subset->vertex_of_task[edge->from], to = subset->vertex_of_task[edge->to];
        if (from < 0 || to < 0) continue;
        igraph_vector_int_push_back(ends, from);
        igraph_vector_int_push_back(ends, to);
        const char *kind = rv_edge_kind_name(edge->kind);
        g_array_append_val(edge_kinds, kind);
    }
}

typedef const char *(*vertex_text_fn)(const rv_graph *graph, const rv_task *task);

static const char *task_name(const rv_graph *g, const rv_task *t) { return rv_strings_get(g->strings, t->name); }
static const char *task_kind(const rv_graph *g, const rv_task *t) { return rv_task_kind_name(t->kind); }
static const char *task_phase(const rv_graph *g, const rv_task *t) { return rv_phase_name(t->phase); }
static const char *task_layer(const rv_graph *g, const rv_task *t) { return rv_strings_get(g->strings, t->layer); }
static const char *task_resource(const rv_graph *g, const rv_task *t)
{
    if (t->resource < 0 || (guint)t->resource >= g->resources->len) return "";
    return rv_strings_get(g->strings, g_array_index(g->resources, rv_resource, t->resource).name);
}

static igraph_error_t set_vertex_text(igraph_t *ig, const char *attribute, const rv_graph *graph,
                                      const export_subset *subset, vertex_text_fn text_of)
{
    igraph_strvector_t values;
    char *escaped = NULL;
    igraph_error_t code = igraph_strvector_init(&values, subset->tasks->len);
    for (guint v = 0; code == IGRAPH_SUCCESS && v < subset->tasks->len; v++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, g_array_index(subset->tasks, int32_t, v));
        code = igraph_strvector_set(&values, v, rv_escape_if_needed(rv_cli_bounded(text_of(graph, task)), &escaped));
    }
    g_free(escaped);
    if (code == IGRAPH_SUCCESS) code = SETVASV(ig, attribute, &values);
    igraph_strvector_destroy(&values);
    return code;
}

typedef enum { NUMBER_DURATION_US, NUMBER_STEP, NUMBER_TASK_ID } vertex_number;

static igraph_error_t set_vertex_number(igraph_t *ig, const char *attribute, const rv_graph *graph,
                                        const export_subset *subset, vertex_number which)
{
    igraph_vector_t values;
    igraph_error_t code = igraph_vector_init(&values, subset->tasks->len);
    for (guint v = 0; code == IGRAPH_SUCCESS && v < subset->tasks->len; v++) {
        int32_t id = g_array_index(subset->tasks, int32_t, v);
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        VECTOR(values)[v] = which == NUMBER_DURATION_US ? task->duration_ns / 1e3 : which == NUMBER_STEP ? task->step : id;
    }
    if (code == IGRAPH_SUCCESS) code = SETVANV(ig, attribute, &values);
    igraph_vector_destroy(&values);
    return code;
}

/* Graphviz shows "label"; full names are thousands of characters long.
 * The static buffer is safe: igraph_strvector_set copies it at once. */
static const char *short_name(const rv_graph *g, const rv_task *t)
{
    static char buffer[DOT_LABEL_WIDTH + 4];
    const char *name = task_name(g, t);
    if (strlen(name) <= DOT_LABEL_WIDTH) return name;
    g_snprintf(buffer, sizeof buffer, "%.*s...", DOT_LABEL_WIDTH, name);
    return buffer;
}

static igraph_error_t set_vertex_attributes(igraph_t *ig, const rv_graph *graph, const export_subset *subset,
                                            export_format format)
{
    static const struct { const char *attribute; vertex_text_fn text_of; } texts[] = {
        { "name", task_name }, { "kind", task_kind }, { "phase", task_phase },
        { "layer", task_layer }, { "resource", task_resource },
    };
    igraph_error_t code = IGRAPH_SUCCESS;
    for (gsize i = 0; code == IGRAPH_SUCCESS && i < G_N_ELEMENTS(texts); i++)
        code = set_vertex_text(ig, texts[i].attribute, graph, subset, texts[i].text_of);
    if (code == IGRAPH_SUCCESS) code = set_vertex_number(ig, "duration_us", graph, subset, NUMBER_DURATION_US);
    if (code == IGRAPH_SUCCESS) code = set_vertex_number(ig, "step", graph, subset, NUMBER_STEP);
    if (code == IGRAPH_SUCCESS) code = set_vertex_number(ig, "task", graph, subset, NUMBER_TASK_ID);
    if (code == IGRAPH_SUCCESS && format == FORMAT_DOT) code = set_vertex_text(ig, "label", graph, subset, short_name);
    return code;
}

static igraph_error_t set_edge_kinds(igraph_t *ig, const GArray *edge_kinds)
{
    igraph_strvector_t values;
    igraph_error_t code = igraph_strvector_init(&values, edge_kinds->len);
    for (guint e = 0; code == IGRAPH_SUCCESS && e < edge_kinds->len; e++)
        code = igraph_strvector_set(&values, e, g_array_index(edge_kinds, const char *, e));
    if (code == IGRAPH_SUCCESS) code = SETEASV(ig, "kind", &values);
    igraph_strvector_destroy(&values);
    return code;
}

static gboolean build_igraph(igraph_t *ig, const rv_graph *graph, const export_subset *subset, export_format format,
                             GError **error)
{
    igraph_vector_int_t ends;
    GArray *edge_kinds = g_array_new(FALSE, FALSE, sizeof(const char *));
    igraph_vector_int_init(&ends, 0);
    kept_edges(graph, subset, &ends, edge_kinds);
    gboolean ok = igraph_ok(igraph_create(ig, &ends, subset->tasks->len, IGRAPH_DIRECTED), "create the graph", error);
    if (ok) {
        ok = igraph_ok(set_vertex_attributes(ig, graph, subset, format), "set vertex attributes", error) &&
             igraph_ok(set_edge_kinds(ig, edge_kinds), "set edge attributes", error);
        if (!ok) igraph_destroy(ig);
    }
    igraph_vector_int_destroy(&ends);
    g_array_unref(edge_kinds);
    return ok;
}

/* ---- writing ------------------------------------------------------------ */

typedef struct {
    const igraph_t *ig;
    export_format format;
} igraph_file;

static gboolean write_igraph(FILE *file, gpointer data, GError **error)
{
    const igraph_file *what = data;
    igraph_error_t code = what->format == FORMAT_GRAPHML ? igraph_write_graph_graphml(what->ig, file, TRUE)
                                                         : igraph_write_graph_dot(what->ig, file);
    return igraph_ok(code, "write the file", error);
}

static gboolean check_size(const export_subset *subset, const export_options *options, GError **error)
{
    if (subset->tasks->len <= MAX_VERTICES || options->force) return TRUE;
    g_set_error(error, RV_ERROR, RV_ERROR_USAGE,
                "%u tasks to write, more than %d vertices that graph viewers handle well; "
                "keep fewer with --steps 1 or --select, or insist with --force", subset->tasks->len, MAX_VERTICES);
    return FALSE;
}

static gboolean export_graph(const rv_graph *graph, const rv_selection *sel, const export_options *options,
                             export_format format, GError **error)
{
    export_subset subset = choose_tasks(graph, sel, options->steps);
    gboolean ok = check_size(&subset, options, error);
    igraph_t ig;
    if (ok) ok = build_igraph(&ig, graph, &subset, format, error);
    if (ok) {
        igraph_file file = { &ig, format };
        ok = rv_output_write(options->output, rv_cli_output_flags(), write_igraph, &file, error);
        if (ok && strcmp(options->output, "-") != 0) {
            char *shown = rv_escape_text(options->output);
            fprintf(stderr, "wrote %s: %" G_GINT64_FORMAT " vertices, %" G_GINT64_FORMAT " edges\n", shown,
                    (gint64)igraph_vcount(&ig), (gint64)igraph_ecount(&ig));
            g_free(shown);
        }
        igraph_destroy(&ig);
    }
    subset_clear(&subset);
    return ok;
}

/* ---- the command -------------------------------------------------------- */

/* --select values and any words after GRAPH, as one selection. */
static rv_selection *parse_selection(const export_options *options, int argc, char **argv, GError **error)
{
    GPtrArray *pieces = g_ptr_array_new();
    for (char **s = options->select; s && *s; s++) g_ptr_array_add(pieces, *s);
    for (int i = 2; i < argc; i++) g_ptr_array_add(pieces, argv[i]);
    rv_selection *sel = rv_selection_parse_argv((char **)pieces->pdata, (int)pieces->len, error);
    g_ptr_array_free(pieces, TRUE);
    return sel;
}

/* igraph aborts on errors by default; here they become GErrors instead. */
static void prepare_igraph(void)
{
    igraph_set_error_handler(igraph_error_handler_ignore);
    igraph_set_warning_handler(igraph_warning_handler_ignore);
    igraph_set_attribute_table(&igraph_cattribute_table);
}

static int run_export(const export_options *options, int argc, char **argv)
{
    if (argc < 2) return rv_cli_usage("export-graph", "give a trace or graph");
    if (options->output == NULL) return rv_cli_usage("export-graph", "give the output file with -o FILE");
    if (options->steps == 0) return rv_cli_usage("export-graph", "--steps must be 1 or more");
    GError *error = NULL;
    export_format format;
    rv_selection *sel = NULL;
    /* -o was checked with the options, before the (slow) load. */
    if (!choose_format(options, &format, &error)) return rv_cli_fail(error);
    rv_cli_optimized optimized = { 0 };
    int status = RV_EXIT_OK;
    if (!(sel = parse_selection(options, argc, argv, &error)) ||
        !rv_cli_load_optimized(argv[1], options->opts, &optimized, &error) ||
        !export_graph(optimized.graph, sel, options, format, &error))
        status = rv_cli_fail(error);
    rv_cli_optimized_clear(&optimized);
    rv_selection_free(sel);
    return status;
}

int rv_cmd_export_graph(int argc, char **argv)
{
    export_options options = { NULL, NULL, NULL, NULL, -1, FALSE };
    GOptionEntry entries[] = {
        { "format", 'f', 0, G_OPTION_ARG_STRING, &options.format, "graphml or dot (default: from the file name)", "FORMAT" },
        { "steps", 0, 0, G_OPTION_ARG_INT, &options.steps, "keep only the tasks of the first N steps", "N" },
        { "select", 's', 0, G_OPTION_ARG_STRING_ARRAY, &options.select, "keep only matching tasks (repeatable)", "SELECT" },
        { "opt", 0, 0, G_OPTION_ARG_STRING_ARRAY, &options.opts,
          "export the graph after this optimization (repeatable, applied in order)", "NAME[:k=v,...]" },
        { NULL }
    };
    GOptionContext *context = g_option_context_new("GRAPH|TRACE -o FILE [SELECT...] - write the dependency graph");
    rv_cli_add_entries(context, entries);
    g_option_context_set_description(context,
        "Writes GraphML (.graphml) or Graphviz DOT (.dot, .gv) with igraph. Vertices carry\n"
        "name, kind, phase, layer, resource, duration_us, step and task (the task id);\n"
        "edges carry kind. Only edges between written tasks are kept. Words after GRAPH\n"
        "are added to the selection. GRAPH may be - (standard input). With --opt, the graph\n"
        "the optimizations leave is written (their inserted tasks included).\n\n"
        "FILE is written to a temporary file beside it and renamed when complete, so a\n"
        "failure leaves an existing FILE as it was; FILE is never an input of the run, and an\n"
        "existing FILE is replaced only with --force (which also allows more than 200000\n"
        "vertices).\n\n" RV_SELECTION_HELP);
    int status = RV_EXIT_OK;
    if (rv_cli_parse(context, &argc, &argv, &status)) {
        options.output = rv_cli_output_path();
        options.force = rv_cli_force();
        prepare_igraph();
        status = run_export(&options, argc, argv);
    }
    g_free(options.format);
    g_strfreev(options.select);
    g_strfreev(options.opts);
    g_option_context_free(context);
    return status;
}
