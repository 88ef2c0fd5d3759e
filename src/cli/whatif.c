/*
 * whatif.c - `reverie whatif`: apply optimizations in order and compare the
 * predicted step times with the baseline replay and the recording.
 */
#include "cli.h"
#include "reverie/escape.h"
#include "reverie/plugin.h"
#include "reverie/report.h"
#include "reverie/sim.h"
#include <jansson.h>
#include <string.h>

typedef struct {
    rv_loaded_plugin *plugin;
    rv_params *params;
    char *spec;
    GString *notes;
} applied_opt;

static void applied_free(gpointer data)
{
    applied_opt *opt = data;
    rv_params_free(opt->params);
    rv_plugin_unload(opt->plugin);
    g_free(opt->spec);
    if (opt->notes) g_string_free(opt->notes, TRUE);
    g_free(opt);
}

/* "NAME[:k=v,...]" -> loaded plugin with parsed parameters. */
static applied_opt *prepare(const char *spec, GError **error)
{
    const char *colon = strchr(spec, ':');
    char *name = colon ? g_strndup(spec, (gsize)(colon - spec)) : g_strdup(spec);
    applied_opt *opt = g_new0(applied_opt, 1);
    opt->spec = g_strdup(spec);
    opt->plugin = rv_plugin_load(name, error);
    g_free(name);
    if (opt->plugin != NULL)
        opt->params = rv_params_parse(rv_plugin_descriptor_of(opt->plugin), colon ? colon + 1 : "", error);
    if (opt->plugin == NULL || opt->params == NULL) {
        applied_free(opt);
        return NULL;
    }
    return opt;
}

static gboolean apply_all(rv_graph *graph, GPtrArray *opts, rv_plugin_output *last_policy, GError **error)
{
    for (guint i = 0; i < opts->len; i++) {
        applied_opt *opt = g_ptr_array_index(opts, i);
        rv_plugin_output output = { { NULL, NULL }, NULL, g_string_new(NULL) };
        if (!rv_plugin_apply(opt->plugin, graph, opt->params, &output, error)) {
            if (output.free_policy_data) output.free_policy_data(output.policy.user_data);
            g_string_free(output.notes, TRUE);
            return FALSE;
        }
        opt->notes = output.notes;
        if (output.policy.priority != NULL) {
            if (last_policy->free_policy_data) last_policy->free_policy_data(last_policy->policy.user_data);
            *last_policy = output;
            last_policy->notes = NULL;
        }
    }
    return TRUE;
}

/* Notes are lines of text that may quote names from the trace. */
static void print_notes(const GString *notes)
{
    if (notes == NULL || notes->len == 0) return;
    char **lines = g_strsplit(notes->str, "\n", -1);
    for (char **line = lines; *line; line++) {
        if (**line == '\0' && line[1] == NULL) break;
        char *shown = rv_escape_text(*line);
        printf("%s\n", shown);
        g_free(shown);
    }
    g_strfreev(lines);
}

static void print_table(const rv_graph *graph, GPtrArray *opts, GArray *baseline, GArray *predicted)
{
    char recorded[32], base[32], pred[32], *escaped = NULL;
    printf("%s\n", rv_escape_if_needed(graph->source, &escaped));
    for (guint i = 0; i < opts->len; i++) {
        applied_opt *opt = g_ptr_array_index(opts, i);
        printf("  optimization %u: %s\n", i + 1, rv_escape_if_needed(opt->spec, &escaped));
        print_notes(opt->notes);
    }
    printf("  %-20s %14s %14s %14s %9s\n", "step", "recorded", "baseline", "predicted", "speedup");
    int64_t base_total = 0, pred_total = 0, rec_total = 0;
    for (guint s = 0; s < baseline->len; s++) {
        const rv_step_time *b = &g_array_index(baseline, rv_step_time, s);
        const rv_step_time *p = &g_array_index(predicted, rv_step_time, s);
        rv_cli_format_ms(recorded, sizeof recorded, b->recorded_ns);
        rv_cli_format_ms(base, sizeof base, b->simulated_ns);
        rv_cli_format_ms(pred, sizeof pred, p->simulated_ns);
        printf("  %-20s %14s %14s %14s %8.3fx\n", rv_escape_if_needed(b->name, &escaped), recorded, base, pred,
               p->simulated_ns ? (double)b->simulated_ns / p->simulated_ns : 0.0);
        base_total += b->simulated_ns; pred_total += p->simulated_ns; rec_total += b->recorded_ns;
    }
    rv_cli_format_ms(recorded, sizeof recorded, rec_total);
    rv_cli_format_ms(base, sizeof base, base_total);
    rv_cli_format_ms(pred, sizeof pred, pred_total);
    printf("  %-20s %14s %14s %14s %8.3fx\n", "total", recorded, base, pred,
           pred_total ? (double)base_total / pred_total : 0.0);
    g_free(escaped);
}

static void print_json(const rv_graph *graph, GPtrArray *opts, GArray *baseline, GArray *predicted)
{
    json_t *root = json_object(), *list = json_array(), *steps = json_array();
    json_object_set_new(root, "source", rv_cli_json_text(graph->source));
    for (guint i = 0; i < opts->len; i++) {
        applied_opt *opt = g_ptr_array_index(opts, i);
        json_t *params = json_object();
        GPtrArray *described = rv_params_describe(opt->params);
        for (guint k = 0; k < described->len; k++) {
            char **pair = g_strsplit(g_ptr_array_index(described, k), "=", 2);
            json_object_set_new(params, pair[0], rv_cli_json_text(pair[1] ? pair[1] : ""));
            g_strfreev(pair);
        }
        g_ptr_array_free(described, TRUE);
        json_array_append_new(list, json_pack("{s:o,s:o,s:o}", "name", rv_cli_json_text(rv_plugin_descriptor_of(opt->plugin)->name),
                                              "params", params, "notes", rv_cli_json_text(opt->notes ? opt->notes->str : "")));
    }
    json_object_set_new(root, "optimizations", list);
    int64_t base_total = 0, pred_total = 0, rec_total = 0;
    for (guint s = 0; s < baseline->len; s++) {
        const rv_step_time *b = &g_array_index(baseline, rv_step_time, s);
        const rv_step_time *p = &g_array_index(predicted, rv_step_time, s);
        json_array_append_new(steps, json_pack("{s:o,s:f,s:f,s:f}", "name", rv_cli_json_text(b->name), "recorded_us", b->recorded_ns / 1e3,
                                               "baseline_us", b->simulated_ns / 1e3, "predicted_us", p->simulated_ns / 1e3));
        base_total += b->simulated_ns; pred_total += p->simulated_ns; rec_total += b->recorded_ns;
    }
    json_object_set_new(root, "steps", steps);
    json_object_set_new(root, "recorded_us", json_real(rec_total / 1e3));
    json_object_set_new(root, "baseline_us", json_real(base_total / 1e3));
    json_object_set_new(root, "predicted_us", json_real(pred_total / 1e3));
    json_object_set_new(root, "speedup", json_real(pred_total ? (double)base_total / pred_total : 0.0));
    rv_cli_print_json(root);
}

static GArray *replay(rv_graph *graph, const rv_policy *policy, GError **error)
{
    rv_sim_result sim = { 0 };
    if (!rv_simulate(graph, policy, &sim, error)) return NULL;
    GArray *steps = rv_step_times(graph, &sim);
    rv_sim_result_clear(&sim);
    return steps;
}

static int run_whatif(const char *path, char **specs, gboolean as_json)
{
    GError *error = NULL;
    GPtrArray *opts = g_ptr_array_new_with_free_func(applied_free);
    rv_plugin_output policy = { { NULL, NULL }, NULL, NULL };
    rv_graph *graph = NULL;
    GArray *baseline = NULL, *predicted = NULL;
    for (char **spec = specs; *spec && error == NULL; spec++) {
        applied_opt *opt = prepare(*spec, &error);
        if (opt) g_ptr_array_add(opts, opt);
    }
    if (error == NULL) graph = rv_cli_load(path, &error);
    if (graph != NULL) baseline = replay(graph, NULL, &error);
    if (baseline != NULL && apply_all(graph, opts, &policy, &error))
        predicted = replay(graph, policy.policy.priority ? &policy.policy : NULL, &error);
    int status = RV_EXIT_OK;
    if (predicted != NULL) {
        if (as_json) print_json(graph, opts, baseline, predicted);
        else print_table(graph, opts, baseline, predicted);
    } else {
        status = rv_cli_fail(error);
    }
    if (policy.free_policy_data) policy.free_policy_data(policy.policy.user_data);
    if (baseline) g_array_unref(baseline);
    if (predicted) g_array_unref(predicted);
    rv_graph_free(graph);
    g_ptr_array_free(opts, TRUE);
    return status;
}

int rv_cmd_whatif(int argc, char **argv)
{
    gboolean as_json = FALSE;
    char **specs = NULL;
    GOptionEntry entries[] = {
        { "opt", 'o', 0, G_OPTION_ARG_STRING_ARRAY, &specs, "an optimization, applied in the order given", "NAME[:k=v,...]" },
        { "json", 0, 0, G_OPTION_ARG_NONE, &as_json, "print JSON (schema in README)", NULL },
        { NULL }
    };
    GOptionContext *context = g_option_context_new("TRACE|GRAPH --opt NAME[:k=v,...]... - predict an optimization");
    g_option_context_add_main_entries(context, entries, NULL);
    g_option_context_set_description(context,
        "Examples:\n"
        "  reverie whatif trace.json.gz --opt amp\n"
        "  reverie whatif trace.json.gz --opt ddp:world=8,bandwidth=100Gbps --opt fused-adam\n"
        "Values take units: 25GB/s, 100Gbps, 5us, 2ms, 25MiB. 'reverie plugins' lists them.\n"
        "Exit 3 when an optimization fails or finds nothing to act on.\n");
    int status = RV_EXIT_OK;
    if (!rv_cli_parse(context, &argc, &argv, &status)) goto out;
    if (argc != 2) { status = rv_cli_usage("whatif", "give exactly one trace or graph"); goto out; }
    if (specs == NULL || specs[0] == NULL) { status = rv_cli_usage("whatif", "give at least one --opt"); goto out; }
    status = run_whatif(argv[1], specs, as_json);
out:
    g_strfreev(specs);
    g_option_context_free(context);
    return status;
}
