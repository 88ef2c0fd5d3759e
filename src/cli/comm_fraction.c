/*
 * comm_fraction.c - `reverie comm-fraction`: Tale of Two Cs' question on
 * any graph and any what-if: how much of a step is communication, how much
 * of it compute hides, today and on hardware whose compute grows faster
 * than its links.
 *
 * For each scenario the graph (after the --opt what-ifs) is replayed: the
 * first row as it is, then one row per --scale F:B, where the hardware
 * plugin makes compute (peaks and memory bandwidth) F times faster and the
 * links B times faster (hardware:flops_scale=F,memory_scale=F,
 * bandwidth_scale=B).  Over the steps it reports:
 *   compute        time any GPU kernel that is not a collective runs;
 *   communication  time any collective runs (NCCL kernels, inserted transfers);
 *   exposed        communication while no compute runs: on the critical
 *                  path (the paper's serialized communication), as a share
 *                  of the step;
 *   overlapped     communication while compute runs, as a share of compute
 *                  (the paper's "overlapped communication as % of compute").
 */
#include "cli.h"
#include "reverie/documents.h"
#include "reverie/breakdown.h"
#include "reverie/report.h"
#include "reverie/sim.h"
#include <jansson.h>
#include <string.h>

typedef struct {
    char *label;          /* "today", "compute x2, links x1" */
    double flops, links;  /* 0 for today */
    int64_t step_ns, compute_ns, comm_ns, exposed_ns;
} scenario;

/* ---- measuring one replay ------------------------------------------------ */

typedef struct {
    int64_t begin, end;
} span;

static gint compare_spans(gconstpointer a, gconstpointer b)
{
    const span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* Length of the union of the spans, clipped to [from, to). */
static int64_t union_within(GArray *spans, int64_t from, int64_t to)
{
    g_array_sort(spans, compare_spans);
    int64_t total = 0, reach = from;
    for (guint i = 0; i < spans->len; i++) {
        const span *s = &g_array_index(spans, span, i);
        int64_t begin = MAX(s->begin, reach), end = MIN(s->end, to);
        if (end > begin) {
            total += end - begin;
            reach = end;
        }
    }
    return total;
}

static int64_t compute_time(const rv_graph *graph, const rv_sim_result *sim, const GArray *windows)
{
    GArray *spans = g_array_new(FALSE, FALSE, sizeof(span));
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        if (!(task->flags & RV_TASK_FLAG_GPU) || (task->flags & RV_TASK_FLAG_REMOVED) || task->kind != RV_TASK_KERNEL ||
            sim->start_ns[t] < 0)
            continue;
        span s = { sim->start_ns[t], sim->start_ns[t] + task->duration_ns };
        g_array_append_val(spans, s);
    }
    int64_t total = 0;
    for (guint w = 0; w < windows->len; w++) {
        const rv_window *window = &g_array_index(windows, rv_window, w);
        total += union_within(spans, window->begin_ns, window->end_ns);
    }
    g_array_unref(spans);
    return total;
}

static gboolean measure(const rv_graph *graph, const rv_policy *policy, scenario *row, GError **error)
{
    rv_sim_result sim = { 0 };
    if (!rv_simulate(graph, policy, &sim, error)) return FALSE;
    rv_cli_note_replay(graph, &sim);
    GArray *windows = rv_step_windows(graph, &sim);
    rv_breakdown *breakdown = rv_breakdown_compute(graph, &sim, windows);
    for (guint s = 0; s < breakdown->steps->len; s++) {
        const rv_step_breakdown *step = &g_array_index(breakdown->steps, rv_step_breakdown, s);
        row->step_ns += step->end_ns - step->begin_ns;
        row->comm_ns += step->comm_ns;
        row->exposed_ns += step->exposed_comm_ns;
    }
    row->compute_ns = compute_time(graph, &sim, windows);
    rv_breakdown_free(breakdown);
    g_array_unref(windows);
    rv_sim_result_clear(&sim);
    return TRUE;
}

/* ---- scenarios ------------------------------------------------------------ */

static gboolean parse_scale(const char *text, scenario *row, GError **error)
{
    char **parts = g_strsplit(text, ":", 3);
    char *end_f = NULL, *end_b = NULL;
    gboolean ok = parts[0] && parts[1] && !parts[2];
    if (ok) {
        row->flops = g_ascii_strtod(parts[0], &end_f);
        row->links = g_ascii_strtod(parts[1], &end_b);
        ok = *parts[0] && *parts[1] && *end_f == '\0' && *end_b == '\0' && row->flops > 0 && row->flops < 1e9 &&
             row->links > 0 && row->links < 1e9;
    }
    g_strfreev(parts);
    if (!ok) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE,
                    "--scale %s: expected COMPUTE:LINKS, two factors in (0, 1e9) such as 4:1", text);
        return FALSE;
    }
    row->label = g_strdup_printf("compute x%g, links x%g", row->flops, row->links);
    return TRUE;
}

static GArray *plan_scenarios(char **scales, GError **error)
{
    static char *defaults[] = { (char *)"2:1", (char *)"4:1", NULL };
    GArray *rows = g_array_new(FALSE, TRUE, sizeof(scenario));
    scenario today = { g_strdup("today"), 0, 0, 0, 0, 0, 0 };
    g_array_append_val(rows, today);
    for (char **s = scales ? scales : defaults; *s; s++) {
        scenario row = { 0 };
        if (!parse_scale(*s, &row, error)) return rows;
        g_array_append_val(rows, row);
    }
    return rows;
}

static void free_scenarios(GArray *rows)
{
    for (guint i = 0; i < rows->len; i++) g_free(g_array_index(rows, scenario, i).label);
    g_array_unref(rows);
}

/* The graph of one scenario: the --opt list, then the hardware scaling of
 * what they made (the composition law's check starts afresh there: the
 * scaling is this command's question about the result, not another
 * what-if in the chain). */
static gboolean run_scenario(const rv_graph *graph, GHashTable *plugins, char **specs, scenario *row, GError **error)
{
    GPtrArray *opts = rv_opts_prepare(plugins, specs, error);
    if (opts == NULL) return FALSE;
    GPtrArray *scaling = g_ptr_array_new_with_free_func(rv_opt_free);
    if (row->flops > 0) {
        char *spec = g_strdup_printf("hardware:flops_scale=%.17g,memory_scale=%.17g,bandwidth_scale=%.17g", row->flops,
                                     row->flops, row->links);
        rv_opt *opt = rv_opt_parse(plugins, spec, error);
        g_free(spec);
        if (opt == NULL) {
            g_ptr_array_unref(opts);
            g_ptr_array_unref(scaling);
            return FALSE;
        }
        g_ptr_array_add(scaling, opt);
    }
    rv_graph *copy = rv_graph_copy(graph);
    rv_plugin_output policy = { 0 };
    gboolean ok = rv_cli_apply_opts(copy, opts, FALSE, &policy, error);
    if (ok) rv_compose_rebase(copy);
    ok = ok && rv_cli_apply_opts(copy, scaling, FALSE, &policy, error) &&
         measure(copy, policy.policy.priority ? &policy.policy : NULL, row, error);
    rv_opts_policy_clear(&policy);
    rv_graph_free(copy);
    g_ptr_array_unref(opts);
    g_ptr_array_unref(scaling);
    return ok;
}

/* ---- output ----------------------------------------------------------------- */

static double percent(int64_t part, int64_t whole) { return whole > 0 ? 100.0 * (double)part / (double)whole : 0.0; }

static void print_table(const rv_graph *graph, const GArray *rows)
{
    printf("%s: communication against compute, over %u step%s\n", rv_cli_shown(graph->source),
           graph->steps->len ? graph->steps->len : 1, graph->steps->len == 1 ? "" : "s");
    printf("  %-28s %12s %12s %12s %20s %22s\n", "scenario", "step (ms)", "compute", "comm", "exposed (% of step)",
           "overlapped (% of comp)");
    for (guint i = 0; i < rows->len; i++) {
        const scenario *r = &g_array_index(rows, scenario, i);
        int64_t overlapped = r->comm_ns - r->exposed_ns;
        printf("  %-28s %12.3f %12.3f %12.3f %12.3f %6.1f%% %14.3f %6.1f%%\n", r->label, r->step_ns / 1e6,
               r->compute_ns / 1e6, r->comm_ns / 1e6, r->exposed_ns / 1e6, percent(r->exposed_ns, r->step_ns),
               overlapped / 1e6, percent(overlapped, r->compute_ns));
    }
    if (g_array_index(rows, scenario, 0).comm_ns == 0)
        printf("  (no communication in this graph: add some with --opt ddp:... or --opt tp-allreduce:...)\n");
}

static void print_json(const rv_graph *graph, const GArray *rows, gboolean as_csv)
{
    json_t *list = json_array();
    for (guint i = 0; i < rows->len; i++) {
        const scenario *r = &g_array_index(rows, scenario, i);
        int64_t overlapped = r->comm_ns - r->exposed_ns;
        json_array_append_new(list, json_pack("{s:o,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "scenario",
                                              rv_json_text(r->label), "compute_scale", r->flops > 0 ? r->flops : 1.0,
                                              "link_scale", r->links > 0 ? r->links : 1.0, "step_us", r->step_ns / 1e3,
                                              "compute_us", r->compute_ns / 1e3, "comm_us", r->comm_ns / 1e3,
                                              "exposed_comm_us", r->exposed_ns / 1e3, "overlapped_comm_us",
                                              overlapped / 1e3, "exposed_fraction",
                                              percent(r->exposed_ns, r->step_ns) / 100));
    }
    json_t *root = json_object();
    json_object_set_new(root, "source", rv_json_text(graph->source));
    json_object_set_new(root, "scenarios", list);
    if (as_csv) rv_cli_print_json_as_csv(root);
    else rv_cli_print_json(root);
}

static int run(const char *path, char **specs, char **scales, gboolean as_json, gboolean as_csv)
{
    GError *error = NULL;
    GArray *rows = plan_scenarios(scales, &error);
    GHashTable *plugins = rv_plugin_table_new();
    rv_graph *graph = error ? NULL : rv_cli_load(path, &error);
    if (graph) rv_cli_print_notes(graph);
    for (guint i = 0; graph && !error && i < rows->len; i++)
        run_scenario(graph, plugins, specs, &g_array_index(rows, scenario, i), &error);
    int status = RV_EXIT_OK;
    if (error) status = rv_cli_fail(error);
    else if (as_json || as_csv) print_json(graph, rows, as_csv);
    else print_table(graph, rows);
    rv_graph_free(graph);
    free_scenarios(rows);
    g_hash_table_destroy(plugins);
    return status;
}

int rv_cmd_comm_fraction(int argc, char **argv)
{
    gboolean as_json = FALSE, as_csv = FALSE;
    char **specs = NULL, **scales = NULL;
    GOptionEntry entries[] = {
        { "opt", 0, 0, G_OPTION_ARG_STRING_ARRAY, &specs, "a what-if applied first, in the order given", "NAME[:k=v,...]" },
        { "scale", 0, 0, G_OPTION_ARG_STRING_ARRAY, &scales,
          "a scenario: compute (peaks and memory bandwidth) COMPUTE times faster, links LINKS times faster "
          "(default: 2:1 and 4:1, the paper's flop-vs-bw ratios)", "COMPUTE:LINKS" },
        { "json", 0, 0, G_OPTION_ARG_NONE, &as_json, "print JSON (schema in docs/commands.md)", NULL },
        { "csv", 0, 0, G_OPTION_ARG_NONE, &as_csv, "print what --json holds as CSV rows of field,value", NULL },
        { NULL }
    };
    GOptionContext *context = g_option_context_new("TRACE|GRAPH [--opt ...] [--scale F:B]... - communication's share of "
                                                   "the step, today and on faster hardware");
    rv_cli_add_entries(context, entries);
    g_option_context_set_description(context,
        "Tale of Two Cs' report: per scenario the step, compute (GPU kernels that are not\n"
        "collectives), communication, exposed communication (no compute runs: on the\n"
        "critical path) as a share of the step, and overlapped communication as a share of\n"
        "compute. The first row is the graph as it is (after --opt); each --scale F:B\n"
        "applies hardware:flops_scale=F,memory_scale=F,bandwidth_scale=B on top.\n\n"
        "Examples:\n"
        "  reverie comm-fraction traces/hta_transformer_ddp_v100_rank1.2steps.json.gz\n"
        "  reverie comm-fraction trace.json.gz --opt ddp:world=64,bandwidth=100Gbps --scale 4:1 --scale 4:2\n");
    int status = RV_EXIT_OK;
    if (!rv_cli_parse(context, &argc, &argv, &status)) goto out;
    if (argc != 2) { status = rv_cli_usage("comm-fraction", "give exactly one trace or graph"); goto out; }
    if (as_json && as_csv) { status = rv_cli_usage("comm-fraction", "give --json or --csv, not both"); goto out; }
    status = run(argv[1], specs, scales, as_json, as_csv);
out:
    g_strfreev(specs);
    g_strfreev(scales);
    g_option_context_free(context);
    return status;
}
