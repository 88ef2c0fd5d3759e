/*
 * validate.c - `reverie validate BASELINE VARIANT --opt ...`: predict the
 * variant recording from the baseline recording and compare.
 *
 * Both files are recordings of one job that differ in one knob (DataLoader
 * workers, GPU model, weight dtype...).  The --opt specs are the what-if
 * that models the knob.  Each side is reduced to its steady step, the
 * median of its steps after the first (a one-step recording is that step),
 * and the prediction's error is (predicted - recorded) / recorded: positive
 * means the prediction is too slow, negative too optimistic.  Both
 * recordings are also replayed as they are, so that the replay error on
 * each side is in view, and "predicting no change" (the baseline's recorded
 * step) is scored too: an error the prediction must beat to be worth
 * anything.
 */
#include "cli.h"
#include "reverie/report.h"
#include <jansson.h>
#include <string.h>

/* One recording's steady step, recorded and replayed. */
typedef struct {
    rv_graph *graph;
    GArray *steps;        /* replayed step times (rv_step_time) */
    int64_t recorded_ns;  /* steady step */
    int64_t simulated_ns;
} side;

typedef struct {
    side baseline, variant;
    GArray *predicted;    /* step times after the --opt */
    int64_t predicted_ns; /* steady step */
    GHashTable *plugins;  /* loaded by the opts */
    GPtrArray *opts;
} comparison;

/* The steady step of a list of step times: the median of the steps after
 * the first (which carries warm-up); a one-step list is that step. */
static gint compare_int64(gconstpointer left, gconstpointer right)
{
    int64_t a = *(const int64_t *)left, b = *(const int64_t *)right;
    return a < b ? -1 : a > b;
}

static int64_t steady_step(const GArray *steps, gboolean simulated)
{
    if (steps->len == 0) return 0;
    GArray *values = g_array_new(FALSE, FALSE, sizeof(int64_t));
    for (guint s = steps->len > 1 ? 1 : 0; s < steps->len; s++) {
        const rv_step_time *step = &g_array_index(steps, rv_step_time, s);
        int64_t value = simulated ? step->simulated_ns : step->recorded_ns;
        g_array_append_val(values, value);
    }
    g_array_sort(values, compare_int64);
    guint n = values->len;
    int64_t steady = n % 2 ? g_array_index(values, int64_t, n / 2)
                           : (g_array_index(values, int64_t, n / 2 - 1) + g_array_index(values, int64_t, n / 2)) / 2;
    g_array_unref(values);
    return steady;
}

static double signed_error(int64_t value, int64_t reference)
{
    return reference ? (double)(value - reference) / (double)reference : 0.0;
}

/* The steps as compared: a job's are its slowest rank's (job.h). */
static GArray *replay_steps(const rv_graph *graph, const rv_policy *policy, GError **error)
{
    rv_cli_replay replay;
    if (!rv_cli_replay_job(graph, policy, &replay, error)) return NULL;
    GArray *steps = g_array_ref(replay.steps);
    rv_cli_replay_clear(&replay);
    return steps;
}

static gboolean load_side(char *path, side *out, GError **error)
{
    out->graph = rv_cli_load_job(&path, 1, TRUE, error);
    if (out->graph == NULL) return FALSE;
    out->steps = replay_steps(out->graph, NULL, error);
    if (out->steps == NULL) return FALSE;
    out->recorded_ns = steady_step(out->steps, FALSE);
    out->simulated_ns = steady_step(out->steps, TRUE);
    return TRUE;
}

static void clear_side(side *s)
{
    if (s->steps) g_array_unref(s->steps);
    rv_graph_free(s->graph);
}

static void print_side(const char *label, const side *s)
{
    char recorded[32], simulated[32];
    rv_cli_format_ms(recorded, sizeof recorded, s->recorded_ns);
    rv_cli_format_ms(simulated, sizeof simulated, s->simulated_ns);
    printf("  %-24s %14s %14s   (replay error %+.2f%%)\n", label, recorded, simulated,
           100 * signed_error(s->simulated_ns, s->recorded_ns));
}

static void print_table(const comparison *c)
{
    printf("baseline  %s (%u steps)\nvariant   %s (%u steps)\n", c->baseline.graph->source, c->baseline.steps->len,
           c->variant.graph->source, c->variant.steps->len);
    for (guint i = 0; i < c->opts->len; i++) {
        const rv_cli_opt *opt = g_ptr_array_index(c->opts, i);
        printf("  optimization %u: %s\n", i + 1, opt->spec);
        if (opt->notes && opt->notes->len) printf("%s", opt->notes->str);
    }
    printf("  %-24s %14s %14s\n", "steady step", "recorded", "simulated");
    print_side("baseline", &c->baseline);
    print_side("variant", &c->variant);
    char predicted[32];
    rv_cli_format_ms(predicted, sizeof predicted, c->predicted_ns);
    printf("  %-24s %14s %14s\n", "variant, predicted", "", predicted);
    printf("  error of the prediction: %+.2f%% (predicted against the variant's recorded steady step)\n",
           100 * signed_error(c->predicted_ns, c->variant.recorded_ns));
    printf("  speedup over the baseline: recorded %.3fx, predicted %.3fx\n",
           (double)c->baseline.recorded_ns / (double)c->variant.recorded_ns,
           (double)c->baseline.simulated_ns / (double)c->predicted_ns);
    printf("  predicting no change would be off by %+.2f%%\n",
           100 * signed_error(c->baseline.recorded_ns, c->variant.recorded_ns));
}

static json_t *json_side(const side *s)
{
    return json_pack("{s:s,s:I,s:f,s:f,s:f}", "source", s->graph->source, "steps", (json_int_t)s->steps->len,
                     "recorded_steady_us", s->recorded_ns / 1e3, "simulated_steady_us", s->simulated_ns / 1e3,
                     "replay_error", signed_error(s->simulated_ns, s->recorded_ns));
}

static void print_json(const comparison *c)
{
    json_t *opts = json_array();
    for (guint i = 0; i < c->opts->len; i++) {
        const rv_cli_opt *opt = g_ptr_array_index(c->opts, i);
        json_array_append_new(opts, json_pack("{s:s,s:s}", "spec", opt->spec, "notes", opt->notes ? opt->notes->str : ""));
    }
    json_t *root = json_pack("{s:o,s:o,s:o,s:f,s:f,s:f,s:f,s:f}", "baseline", json_side(&c->baseline), "variant",
                             json_side(&c->variant), "optimizations", opts, "predicted_steady_us",
                             c->predicted_ns / 1e3, "error", signed_error(c->predicted_ns, c->variant.recorded_ns),
                             "recorded_speedup", (double)c->baseline.recorded_ns / (double)c->variant.recorded_ns,
                             "predicted_speedup", (double)c->baseline.simulated_ns / (double)c->predicted_ns,
                             "no_change_error", signed_error(c->baseline.recorded_ns, c->variant.recorded_ns));
    rv_cli_print_json(root);
}

/* Apply the opts to the baseline and replay it under the last policy. */
static GArray *predict(rv_graph *graph, GPtrArray *opts, GError **error)
{
    rv_plugin_output policy = { { NULL, NULL }, NULL, NULL };
    GArray *predicted = NULL;
    if (rv_cli_apply_opts(graph, opts, TRUE, &policy, error))
        predicted = replay_steps(graph, policy.policy.priority ? &policy.policy : NULL, error);
    rv_cli_policy_clear(&policy);
    return predicted;
}

static int run_validate(char *baseline_path, char *variant_path, char **specs, gboolean as_json)
{
    GError *error = NULL;
    comparison c;
    memset(&c, 0, sizeof c);
    c.plugins = rv_cli_plugins_new();
    c.opts = rv_cli_opts_prepare(c.plugins, specs, &error);
    gboolean ok = c.opts != NULL && load_side(baseline_path, &c.baseline, &error) &&
                  load_side(variant_path, &c.variant, &error);
    if (ok) c.predicted = predict(c.baseline.graph, c.opts, &error);
    int status = RV_EXIT_OK;
    if (c.predicted != NULL) {
        c.predicted_ns = steady_step(c.predicted, TRUE);
        if (as_json) print_json(&c);
        else print_table(&c);
    } else {
        status = rv_cli_fail(error);
    }
    if (c.predicted) g_array_unref(c.predicted);
    clear_side(&c.baseline);
    clear_side(&c.variant);
    if (c.opts) g_ptr_array_unref(c.opts);
    g_hash_table_destroy(c.plugins);
    return status;
}

int rv_cmd_validate(int argc, char **argv)
{
    gboolean as_json = FALSE;
    char **specs = NULL;
    GOptionEntry entries[] = {
        { "opt", 0, 0, G_OPTION_ARG_STRING_ARRAY, &specs, "the what-if that models the knob, applied in order",
          "NAME[:k=v,...]" },
        { "json", 0, 0, G_OPTION_ARG_NONE, &as_json, "print JSON (schema in README)", NULL },
        { NULL }
    };
    GOptionContext *context = g_option_context_new("BASELINE VARIANT [--opt NAME[:k=v,...]]... - predict a recorded "
                                                   "variant and compare");
    g_option_context_add_main_entries(context, entries, NULL);
    g_option_context_set_description(context,
        "BASELINE and VARIANT are two recordings (traces or saved graphs) of one job that differ\n"
        "in one knob. The --opt specs predict VARIANT from BASELINE; the prediction's steady step\n"
        "(the median of the steps after the first) is compared with VARIANT's recorded one.\n"
        "Without --opt the prediction is the baseline replayed: how far 'no change' is off.\n"
        "Either side may be a folder of traces, the ranks of one job: its step is the slowest rank's.\n\n"
        "Example:\n"
        "  reverie validate traces/pairs/dataloader_workers_v100/num_workers_0.json.gz \\\n"
        "                   traces/pairs/dataloader_workers_v100/num_workers_4.json.gz --opt dataloader:workers=4\n");
    int status = RV_EXIT_OK;
    if (!rv_cli_parse(context, &argc, &argv, &status)) goto out;
    if (argc != 3) { status = rv_cli_usage("validate", "give a baseline and a variant recording"); goto out; }
    status = run_validate(argv[1], argv[2], specs, as_json);
out:
    g_strfreev(specs);
    g_option_context_free(context);
    return status;
}
