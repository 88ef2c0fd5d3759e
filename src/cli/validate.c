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
 *
 * The mean of the steps after the first is compared too: where steps
 * alternate between fast and stalled (an input pipeline whose workers fall
 * behind), the median keeps the fast ones and the mean is the throughput.
 *
 * Beside the step, the GPU kernel time of the steady step (the summed
 * durations of its kernels, gpu_time.c) is compared the same way, and each
 * steady step is split into host-only, GPU-only, overlap and idle time
 * (breakdown.h): a step error where the GPU is predicted right but the two
 * hosts differ shows as a host-only share that differs, not as a model to
 * fit.
 *
 * Where the what-if estimates durations with a range (range.h: hardware's
 * projection to another GPU), the prediction is replayed at both ends too,
 * and the report says whether the recorded variant lies inside.
 *
 * Peak memory is judged the same way where the variant recorded one
 * ([memory] events): the memory model's peak after the what-if (what
 * whatif prints) against the variant's recorded peak, and the baseline's
 * recorded peak as "no change".
 */
#include "cli.h"
#include "reverie/whatif.h"
#include "reverie/breakdown.h"
#include "reverie/memory.h"
#include "reverie/report.h"
#include <jansson.h>
#include <string.h>

/* Where a steady step's time goes: host only, GPU only, both, neither. */
typedef struct {
    int64_t split_ns[RV_SPLIT_COUNT];
} shares;

/* One recording's steady step, recorded and replayed. */
typedef struct {
    rv_graph *graph;
    GArray *steps;        /* replayed step times (rv_step_time) */
    int64_t recorded_ns;  /* steady step */
    int64_t simulated_ns;
    int64_t recorded_mean_ns, simulated_mean_ns;  /* mean of the steps after the first */
    int64_t gpu_ns;       /* GPU kernel time of the steady step, recorded */
    shares recorded_shares, simulated_shares;
} side;

typedef struct {
    side baseline, variant;
    GArray *predicted;    /* step times after the --opt */
    int64_t predicted_ns; /* steady step */
    int64_t predicted_mean_ns;
    int64_t predicted_gpu_ns;
    shares predicted_shares;
    rv_prediction_range range;   /* the prediction at both ends of its range, if it has one */
    int64_t range_steady_ns[2];
    int64_t range_mean_ns[2];
    GHashTable *plugins;  /* loaded by the opts */
    GPtrArray *opts;
    rv_plugin_output policy;  /* the last optimization's, for the range's replays */
    rv_memory_peak peak;      /* the model before and after the --opt; the baseline's recorded peak */
    gboolean variant_recorded_peak;
    int64_t variant_peak_bytes;   /* the variant's recorded peak, allocated */
} comparison;

/* The steady step of a list of step times: the median of the steps after
 * the first (which carries warm-up); a one-step list is that step. */
static int64_t steady_step(const GArray *steps, gboolean simulated)
{
    GArray *values = g_array_new(FALSE, FALSE, sizeof(int64_t));
    for (guint s = 0; s < steps->len; s++) {
        const rv_step_time *step = &g_array_index(steps, rv_step_time, s);
        int64_t value = simulated ? step->simulated_ns : step->recorded_ns;
        g_array_append_val(values, value);
    }
    int64_t steady = rv_steady_ns(values);
    g_array_unref(values);
    return steady;
}

/* The mean of the steps after the first (a one-step list: that step). */
static int64_t mean_step(const GArray *steps, gboolean simulated)
{
    guint first = steps->len > 1 ? 1 : 0;
    int64_t sum = 0;
    for (guint s = first; s < steps->len; s++) {
        const rv_step_time *step = &g_array_index(steps, rv_step_time, s);
        sum += simulated ? step->simulated_ns : step->recorded_ns;
    }
    return steps->len > first ? sum / (int64_t)(steps->len - first) : 0;
}

/* The mean split of the steps a steady step is taken from (all but the first). */
static shares steady_shares(const rv_graph *graph, const rv_sim_result *sim, gboolean recorded)
{
    shares out = { { 0 } };
    GArray *windows = rv_step_windows(graph, recorded ? NULL : sim);
    rv_breakdown *breakdown = rv_breakdown_compute(graph, sim, windows);
    guint first = breakdown->steps->len > 1 ? 1 : 0, count = breakdown->steps->len - first;
    for (guint s = first; s < breakdown->steps->len; s++) {
        const rv_step_breakdown *step = &g_array_index(breakdown->steps, rv_step_breakdown, s);
        for (int k = 0; k < RV_SPLIT_COUNT; k++) out.split_ns[k] += step->split_ns[k];
    }
    for (int k = 0; count > 0 && k < RV_SPLIT_COUNT; k++) out.split_ns[k] /= count;
    rv_breakdown_free(breakdown);
    g_array_unref(windows);
    return out;
}

static int64_t steady_gpu(const rv_graph *graph)
{
    GArray *per_step = rv_gpu_kernel_ns_by_step(graph);
    int64_t steady = rv_steady_ns(per_step);
    g_array_unref(per_step);
    return steady;
}

/* The steps as compared: a job's are its slowest rank's (job.h). */
static GArray *compared_steps(const rv_graph *graph, const rv_sim_result *sim)
{
    if (!rv_cli_is_job(graph)) return rv_step_times(graph, sim);
    GPtrArray *by_rank = rv_step_times_by_rank(graph, sim);
    GArray *steps = rv_job_step_times(by_rank);
    g_ptr_array_unref(by_rank);
    return steps;
}

/* Replay a graph (with an optimization's policy or NULL) into step times and shares. */
static GArray *replay(const rv_graph *graph, const rv_policy *policy, shares *simulated, GError **error)
{
    rv_sim_result sim = { 0 };
    if (!rv_simulate(graph, policy, &sim, error)) return NULL;
    rv_cli_note_replay(graph, &sim);
    GArray *steps = compared_steps(graph, &sim);
    *simulated = steady_shares(graph, &sim, FALSE);
    rv_sim_result_clear(&sim);
    return steps;
}

static double signed_error(int64_t value, int64_t reference)
{
    return reference ? (double)(value - reference) / (double)reference : 0.0;
}

static gboolean load_side(char *path, side *out, GError **error)
{
    out->graph = rv_cli_load_job(&path, 1, TRUE, error);
    if (out->graph == NULL) return FALSE;
    out->steps = replay(out->graph, NULL, &out->simulated_shares, error);
    if (out->steps == NULL) return FALSE;
    rv_sim_result recording = { 0 };
    rv_recorded_result(out->graph, &recording);
    out->recorded_shares = steady_shares(out->graph, &recording, TRUE);
    rv_sim_result_clear(&recording);
    out->recorded_ns = steady_step(out->steps, FALSE);
    out->simulated_ns = steady_step(out->steps, TRUE);
    out->recorded_mean_ns = mean_step(out->steps, FALSE);
    out->simulated_mean_ns = mean_step(out->steps, TRUE);
    out->gpu_ns = steady_gpu(out->graph);
    return TRUE;
}

static const rv_policy *policy_of(const comparison *c)
{
    return c->policy.policy.priority ? &c->policy.policy : NULL;
}

/* Apply the --opt specs to the baseline and replay it. */
static gboolean predict(comparison *c, GError **error)
{
    int64_t reserved;
    int32_t device, rank_index;
    c->variant_recorded_peak =
        rv_memory_recorded_peak(c->variant.graph, &c->variant_peak_bytes, &reserved, &device, &rank_index);
    rv_memory_peak_before(&c->peak, c->baseline.graph);
    if (rv_cli_apply_opts(c->baseline.graph, c->opts, TRUE, &c->policy, error))
        c->predicted = replay(c->baseline.graph, policy_of(c), &c->predicted_shares, error);
    if (c->predicted == NULL) return FALSE;
    c->predicted_ns = steady_step(c->predicted, TRUE);
    c->predicted_mean_ns = mean_step(c->predicted, TRUE);
    c->predicted_gpu_ns = steady_gpu(c->baseline.graph);
    rv_memory_peak_after(&c->peak, c->baseline.graph);
    if (!rv_prediction_range_run(c->baseline.graph, policy_of(c), &c->range, error)) return FALSE;
    for (int end = 0; c->range.present && end < 2; end++) {
        const GArray *steps = end ? c->range.high.steps : c->range.low.steps;
        c->range_steady_ns[end] = steady_step(steps, TRUE);
        c->range_mean_ns[end] = mean_step(steps, TRUE);
    }
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

static void print_shares(const char *label, const shares *s)
{
    printf("    %-30s", label);
    for (int k = 0; k < RV_SPLIT_COUNT; k++) printf(" %11.3f", s->split_ns[k] / 1e6);
    printf("\n");
}

static gboolean inside(int64_t value, const int64_t *ends)
{
    return value >= ends[0] && value <= ends[1];
}

static void print_range(const comparison *c)
{
    if (!c->range.present) return;
    char low[32], high[32], gpu_low[32], gpu_high[32];
    rv_cli_format_ms(low, sizeof low, c->range_steady_ns[0]);
    rv_cli_format_ms(high, sizeof high, c->range_steady_ns[1]);
    rv_cli_format_ms(gpu_low, sizeof gpu_low, c->range.steady_gpu_ns[0]);
    rv_cli_format_ms(gpu_high, sizeof gpu_high, c->range.steady_gpu_ns[1]);
    printf("  range of the prediction (each estimate at its low, then its high end): steady step %s to %s (the "
           "recorded variant %s), GPU kernel time %s to %s (recorded %s)\n",
           g_strstrip(low), g_strstrip(high), inside(c->variant.recorded_ns, c->range_steady_ns) ? "inside" : "outside",
           g_strstrip(gpu_low), g_strstrip(gpu_high),
           inside(c->variant.gpu_ns, c->range.steady_gpu_ns) ? "inside" : "outside");
}

/* The mean step after the first: the throughput where steps stall in turns. */
static void print_mean(const comparison *c)
{
    char base[32], variant[32], predicted[32];
    rv_cli_format_ms(base, sizeof base, c->baseline.recorded_mean_ns);
    rv_cli_format_ms(variant, sizeof variant, c->variant.recorded_mean_ns);
    rv_cli_format_ms(predicted, sizeof predicted, c->predicted_mean_ns);
    printf("  mean step after the first: baseline %s, variant %s, predicted %s: %+.2f%% (predicting no change: "
           "%+.2f%%)\n", g_strstrip(base), g_strstrip(variant), g_strstrip(predicted),
           100 * signed_error(c->predicted_mean_ns, c->variant.recorded_mean_ns),
           100 * signed_error(c->baseline.recorded_mean_ns, c->variant.recorded_mean_ns));
    if (!c->range.present) return;
    char low[32], high[32];
    rv_cli_format_ms(low, sizeof low, c->range_mean_ns[0]);
    rv_cli_format_ms(high, sizeof high, c->range_mean_ns[1]);
    printf("    its range: %s to %s (the recorded mean %s)\n", g_strstrip(low), g_strstrip(high),
           inside(c->variant.recorded_mean_ns, c->range_mean_ns) ? "inside" : "outside");
}

/* The predicted peak against the variant's recorded one, or why not. */
static void print_memory(const comparison *c)
{
    const rv_memory_peak *peak = &c->peak;
    if (!peak->estimated) {
        printf("  peak memory: not predicted (%s)\n", peak->missing);
        return;
    }
    printf("  peak memory: baseline estimate %.1f MiB", rv_cli_mib(peak->baseline.peak));
    if (peak->recorded) printf(" (recorded %.1f MiB)", rv_cli_mib(peak->recorded_bytes));
    printf(", predicted %.1f MiB", rv_cli_mib(peak->predicted.peak));
    if (!c->variant_recorded_peak) {
        printf("; the variant recorded no peak ([memory] events: profile_memory=True)\n");
        return;
    }
    printf(", variant recorded %.1f MiB: %+.2f%%", rv_cli_mib(c->variant_peak_bytes),
           100 * signed_error(peak->predicted.peak, c->variant_peak_bytes));
    if (peak->recorded)
        printf(" (predicting no change: %+.2f%%)", 100 * signed_error(peak->recorded_bytes, c->variant_peak_bytes));
    printf("\n");
}

static void print_table(const comparison *c)
{
    printf("baseline  %s (%u steps)\nvariant   %s (%u steps)\n", c->baseline.graph->source, c->baseline.steps->len,
           c->variant.graph->source, c->variant.steps->len);
    for (guint i = 0; i < c->opts->len; i++) {
        const rv_opt *opt = g_ptr_array_index(c->opts, i);
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
    print_mean(c);
    char base_gpu[32], variant_gpu[32], predicted_gpu[32];
    rv_cli_format_ms(base_gpu, sizeof base_gpu, c->baseline.gpu_ns);
    rv_cli_format_ms(variant_gpu, sizeof variant_gpu, c->variant.gpu_ns);
    rv_cli_format_ms(predicted_gpu, sizeof predicted_gpu, c->predicted_gpu_ns);
    printf("  GPU kernel time of the steady step: baseline %s, variant %s, predicted %s\n", base_gpu, variant_gpu,
           predicted_gpu);
    printf("  error of the GPU kernel time: %+.2f%% (predicting no change: %+.2f%%)\n",
           100 * signed_error(c->predicted_gpu_ns, c->variant.gpu_ns),
           100 * signed_error(c->baseline.gpu_ns, c->variant.gpu_ns));
    print_range(c);
    print_memory(c);
    printf("  where the steady step goes (ms)     host only    GPU only     overlap        idle\n");
    print_shares("baseline, recorded", &c->baseline.recorded_shares);
    print_shares("variant, recorded", &c->variant.recorded_shares);
    print_shares("variant, predicted", &c->predicted_shares);
}

static json_t *json_side(const side *s)
{
    return json_pack("{s:s,s:I,s:f,s:f,s:f,s:f,s:f}", "source", s->graph->source, "steps", (json_int_t)s->steps->len,
                     "recorded_steady_us", s->recorded_ns / 1e3, "simulated_steady_us", s->simulated_ns / 1e3,
                     "replay_error", signed_error(s->simulated_ns, s->recorded_ns), "recorded_mean_us",
                     s->recorded_mean_ns / 1e3, "simulated_mean_us", s->simulated_mean_ns / 1e3);
}

static json_t *json_shares(const shares *s)
{
    json_t *object = json_object();
    for (int k = 0; k < RV_SPLIT_COUNT; k++) {
        char *key = g_strconcat(rv_split_name(k), "_us", NULL);
        json_object_set_new(object, key, json_real(s->split_ns[k] / 1e3));
        g_free(key);
    }
    return object;
}

/* One figure's range in `object`: its two ends under low_key and
 * high_key and whether the recorded value lies inside (nulls without a
 * range). */
static void json_set_range(json_t *object, const char *low_key, const char *high_key, gboolean present,
                           const int64_t *ends, int64_t recorded_ns)
{
    json_object_set_new(object, low_key, present ? json_real(ends[0] / 1e3) : json_null());
    json_object_set_new(object, high_key, present ? json_real(ends[1] / 1e3) : json_null());
    json_object_set_new(object, "inside_range", present ? json_boolean(inside(recorded_ns, ends)) : json_null());
}

/* The range's ends beside the step, the mean step and the GPU kernel time. */
static void json_range(json_t *root, json_t *mean, json_t *gpu, const comparison *c)
{
    gboolean present = c->range.present;
    json_set_range(mean, "predicted_low_us", "predicted_high_us", present, c->range_mean_ns, c->variant.recorded_mean_ns);
    json_set_range(root, "predicted_steady_low_us", "predicted_steady_high_us", present, c->range_steady_ns,
                   c->variant.recorded_ns);
    json_set_range(gpu, "predicted_low_us", "predicted_high_us", present, c->range.steady_gpu_ns, c->variant.gpu_ns);
}

static json_t *json_bytes(gboolean known, int64_t bytes) { return known ? json_integer(bytes) : json_null(); }

static json_t *json_error(gboolean known, int64_t value, int64_t reference)
{
    return known ? json_real(signed_error(value, reference)) : json_null();
}

/* The peaks in bytes; null where unknown (no estimate, no [memory] events). */
static json_t *json_memory(const comparison *c)
{
    const rv_memory_peak *peak = &c->peak;
    gboolean judged = peak->estimated && c->variant_recorded_peak;
    json_t *memory = json_object();
    json_object_set_new(memory, "baseline_estimate_bytes", json_bytes(peak->estimated, peak->baseline.peak));
    json_object_set_new(memory, "baseline_recorded_bytes", json_bytes(peak->recorded, peak->recorded_bytes));
    json_object_set_new(memory, "predicted_bytes", json_bytes(peak->estimated, peak->predicted.peak));
    json_object_set_new(memory, "variant_recorded_bytes", json_bytes(c->variant_recorded_peak, c->variant_peak_bytes));
    json_object_set_new(memory, "error", json_error(judged, peak->predicted.peak, c->variant_peak_bytes));
    json_object_set_new(memory, "no_change_error",
                        json_error(peak->recorded && c->variant_recorded_peak, peak->recorded_bytes, c->variant_peak_bytes));
    json_object_set_new(memory, "not_estimated", peak->estimated ? json_null() : json_string(peak->missing));
    return memory;
}

static void print_json(const comparison *c, gboolean as_csv)
{
    json_t *opts = json_array();
    for (guint i = 0; i < c->opts->len; i++) {
        const rv_opt *opt = g_ptr_array_index(c->opts, i);
        json_array_append_new(opts, json_pack("{s:s,s:s}", "spec", opt->spec, "notes", opt->notes ? opt->notes->str : ""));
    }
    json_t *root = json_pack("{s:o,s:o,s:o,s:f,s:f,s:f,s:f,s:f}", "baseline", json_side(&c->baseline), "variant",
                             json_side(&c->variant), "optimizations", opts, "predicted_steady_us",
                             c->predicted_ns / 1e3, "error", signed_error(c->predicted_ns, c->variant.recorded_ns),
                             "recorded_speedup", (double)c->baseline.recorded_ns / (double)c->variant.recorded_ns,
                             "predicted_speedup", (double)c->baseline.simulated_ns / (double)c->predicted_ns,
                             "no_change_error", signed_error(c->baseline.recorded_ns, c->variant.recorded_ns));
    json_t *gpu = json_pack("{s:f,s:f,s:f,s:f,s:f}", "baseline_us", c->baseline.gpu_ns / 1e3, "variant_us",
                            c->variant.gpu_ns / 1e3, "predicted_us", c->predicted_gpu_ns / 1e3, "error",
                            signed_error(c->predicted_gpu_ns, c->variant.gpu_ns), "no_change_error",
                            signed_error(c->baseline.gpu_ns, c->variant.gpu_ns));
    json_t *mean = json_pack("{s:f,s:f,s:f,s:f,s:f}", "baseline_us", c->baseline.recorded_mean_ns / 1e3,
                                                "variant_us", c->variant.recorded_mean_ns / 1e3, "predicted_us",
                                                c->predicted_mean_ns / 1e3, "error",
                                                signed_error(c->predicted_mean_ns, c->variant.recorded_mean_ns),
                                                "no_change_error",
                                                signed_error(c->baseline.recorded_mean_ns, c->variant.recorded_mean_ns));
    json_range(root, mean, gpu, c);
    json_object_set_new(root, "mean", mean);
    json_object_set_new(root, "gpu_kernel", gpu);
    json_object_set_new(root, "memory", json_memory(c));
    json_object_set_new(root, "shares",
                        json_pack("{s:o,s:o,s:o}", "baseline_recorded", json_shares(&c->baseline.recorded_shares),
                                  "variant_recorded", json_shares(&c->variant.recorded_shares), "predicted",
                                  json_shares(&c->predicted_shares)));
    if (as_csv) rv_cli_print_json_as_csv(root);
    else rv_cli_print_json(root);
}

static int run_validate(char *baseline_path, char *variant_path, char **specs, gboolean as_json, gboolean as_csv)
{
    GError *error = NULL;
    comparison c;
    memset(&c, 0, sizeof c);
    c.plugins = rv_plugin_table_new();
    c.opts = rv_opts_prepare(c.plugins, specs, &error);
    gboolean ok = c.opts != NULL && load_side(baseline_path, &c.baseline, &error) &&
                  load_side(variant_path, &c.variant, &error);
    if (ok) ok = predict(&c, &error);
    int status = RV_EXIT_OK;
    if (ok) {
        if (as_json || as_csv) print_json(&c, as_csv);
        else print_table(&c);
    } else {
        status = rv_cli_fail(error);
    }
    if (c.predicted) g_array_unref(c.predicted);
    rv_prediction_range_clear(&c.range);
    rv_memory_peak_clear(&c.peak);
    rv_opts_policy_clear(&c.policy);
    clear_side(&c.baseline);
    clear_side(&c.variant);
    if (c.opts) g_ptr_array_unref(c.opts);
    g_hash_table_destroy(c.plugins);
    return status;
}

int rv_cmd_validate(int argc, char **argv)
{
    gboolean as_json = FALSE, as_csv = FALSE;
    char **specs = NULL;
    GOptionEntry entries[] = {
        { "opt", 0, 0, G_OPTION_ARG_STRING_ARRAY, &specs, "the what-if that models the knob, applied in order",
          "NAME[:k=v,...]" },
        { "json", 0, 0, G_OPTION_ARG_NONE, &as_json, "print JSON (schema in docs/commands.md)", NULL },
        { "csv", 0, 0, G_OPTION_ARG_NONE, &as_csv, "print the JSON's fields as CSV rows: field,value", NULL },
        { NULL }
    };
    GOptionContext *context = g_option_context_new("BASELINE VARIANT [--opt NAME[:k=v,...]]... - predict a recorded "
                                                   "variant and compare");
    rv_cli_add_entries(context, entries);
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
    if (as_json && as_csv) { status = rv_cli_usage("validate", "give --json or --csv, not both"); goto out; }
    status = run_validate(argv[1], argv[2], specs, as_json, as_csv);
out:
    g_strfreev(specs);
    g_option_context_free(context);
    return status;
}
