/*
 * seqpoint.c - `reverie seqpoint`: SeqPoint (seqpoint.h) on a trace of a
 * sequence model whose iterations differ by input length: which few
 * iterations stand for the epoch, how they were chosen, and the epoch
 * projected from them - from the recorded times, from the replay and, with
 * --opt, from a what-if - against the same figure over every iteration.
 */
#include "cli.h"
#include "reverie/seqpoint.h"
#include "reverie/whatif.h"
#include <jansson.h>
#include <math.h>
#include <string.h>

typedef struct {
    char *lengths_file, *epoch_file;
    int points;
    double tolerance_percent;
    char **specs;
    gboolean as_json;
} seqpoint_options;

/* One kind of time per step (recorded, replayed, predicted) and the epoch
 * projected with it. */
typedef struct {
    const char *label;
    int64_t *step_ns;
    int64_t projected_ns, reference_ns;
} timing;

typedef struct {
    const rv_graph *graph;
    GArray *step_lengths, *epoch;
    GString *lengths_from;
    const char *epoch_from;     /* NULL: the traced steps */
    rv_seqpoints points;
    double tolerance;
    timing times[3];
    guint time_count;
    char *optimized;            /* the --opt specs joined, or NULL */
} seqpoint_view;

static double error_of(const timing *t)
{
    return t->reference_ns > 0 ? (double)t->projected_ns / (double)t->reference_ns - 1.0 : 0.0;
}

static const char *step_name(const rv_graph *graph, int32_t step)
{
    return rv_strings_get(graph->strings, g_array_index(graph->steps, rv_step, step).name);
}

static void epoch_range(const GArray *epoch, int64_t *low, int64_t *high)
{
    *low = G_MAXINT64;
    *high = 0;
    for (guint i = 0; i < epoch->len; i++) {
        *low = MIN(*low, g_array_index(epoch, int64_t, i));
        *high = MAX(*high, g_array_index(epoch, int64_t, i));
    }
}

static void print_table(const seqpoint_view *v)
{
    const rv_seqpoints *p = &v->points;
    int64_t low, high;
    epoch_range(v->epoch, &low, &high);
    printf("%s: %u steps; input lengths from %s\n", rv_cli_shown(v->graph->source), v->step_lengths->len,
           rv_cli_shown(v->lengths_from->str));
    printf("epoch: %" G_GUINT64_FORMAT " iterations (%s), %u distinct lengths from %" G_GINT64_FORMAT " to %"
           G_GINT64_FORMAT "\n", p->iterations, v->epoch_from ? rv_cli_shown(v->epoch_from) : "the traced steps",
           p->distinct, low, high);
    if (p->chosen)
        printf("SeqPoint: %u bin%s of input length (exact 1-D k-means, each iteration weighted alike): the fewest whose "
               "projection of the recorded steps, and whose noise, are within %.2f%% of every iteration's%s\n", p->points,
               p->points == 1 ? "" : "s", 100 * v->tolerance, p->met ? "" : " (not met: the most bins tried)");
    else
        printf("SeqPoint: %u bin%s of input length (exact 1-D k-means, each iteration weighted alike), as --points "
               "asked\n", p->points, p->points == 1 ? "" : "s");
    if (p->noise >= 0)
        printf("  one iteration of a length varies by %.2f%% (pooled over the %u traced lengths of two or more steps): "
               "these bins carry +-%.2f%% (one standard deviation)\n", 100 * p->noise, p->noise_lengths, 100 * p->spread);
    else
        printf("  no two traced steps share a length: how much one iteration varies is unknown\n");
    printf("  %-4s %-21s %10s %12s  %-24s %10s %14s\n", "bin", "lengths", "iterations", "mean length",
           "representative step", "its length", "its recorded");
    for (guint b = 0; b < p->bins->len; b++) {
        const rv_seqpoint_bin *bin = &g_array_index(p->bins, rv_seqpoint_bin, b);
        char range[48], recorded[32];
        g_snprintf(range, sizeof range, "%" G_GINT64_FORMAT "-%" G_GINT64_FORMAT, bin->low, bin->high);
        rv_cli_format_ms(recorded, sizeof recorded, v->times[0].step_ns[bin->step]);
        printf("  %-4u %-21s %10" G_GUINT64_FORMAT " %12.1f  %-24s %10" G_GINT64_FORMAT " %14s\n", b + 1, range,
               bin->iterations, bin->mean_length, rv_cli_shown(step_name(v->graph, bin->step)),
               g_array_index(v->step_lengths, int64_t, bin->step), recorded);
    }
    printf("  profile %u of %" G_GUINT64_FORMAT " iterations (%.1fx fewer)\n", p->points, p->iterations,
           (double)p->iterations / p->points);
    printf("  %-28s %16s %22s %9s\n", "times", "projected epoch", v->epoch_from ? "every iteration (*)" : "every iteration",
           "error");
    for (guint i = 0; i < v->time_count; i++) {
        const timing *t = &v->times[i];
        char projected[32], reference[32];
        rv_cli_format_ms(projected, sizeof projected, t->projected_ns);
        rv_cli_format_ms(reference, sizeof reference, t->reference_ns);
        printf("  %-28s %16s %22s %+8.2f%%\n", t->label, projected, reference, 100 * error_of(t));
    }
    if (v->optimized) printf("  (predicted: after %s)\n", rv_cli_shown(v->optimized));
    if (v->epoch_from)
        printf("  (*) each epoch iteration timed by the traced steps of its length, or of the nearest traced length\n");
}

static json_t *bin_json(const seqpoint_view *v, const rv_seqpoint_bin *bin)
{
    json_t *rep = json_object();
    json_object_set_new(rep, "step", json_integer(bin->step));
    json_object_set_new(rep, "name", json_string(step_name(v->graph, bin->step)));
    json_object_set_new(rep, "length", json_integer(g_array_index(v->step_lengths, int64_t, bin->step)));
    for (guint i = 0; i < v->time_count; i++) {
        char *key = g_strdup_printf("%s_us", i == 0 ? "recorded" : i == 1 ? "simulated" : "predicted");
        json_object_set_new(rep, key, json_real(v->times[i].step_ns[bin->step] / 1e3));
        g_free(key);
    }
    json_t *item = json_object();
    json_object_set_new(item, "low", json_integer(bin->low));
    json_object_set_new(item, "high", json_integer(bin->high));
    json_object_set_new(item, "iterations", json_integer((json_int_t)bin->iterations));
    json_object_set_new(item, "mean_length", json_real(bin->mean_length));
    json_object_set_new(item, "representative", rep);
    return item;
}

static void print_json(const seqpoint_view *v)
{
    const rv_seqpoints *p = &v->points;
    int64_t low, high;
    epoch_range(v->epoch, &low, &high);
    json_t *root = json_object();
    json_object_set_new(root, "source", json_string(v->graph->source));
    json_object_set_new(root, "steps", json_integer(v->step_lengths->len));
    json_object_set_new(root, "lengths_from", json_string(v->lengths_from->str));
    json_t *epoch = json_object();
    json_object_set_new(epoch, "from", v->epoch_from ? json_string(v->epoch_from) : json_string("trace"));
    json_object_set_new(epoch, "iterations", json_integer((json_int_t)p->iterations));
    json_object_set_new(epoch, "distinct_lengths", json_integer(p->distinct));
    json_object_set_new(epoch, "min_length", json_integer(low));
    json_object_set_new(epoch, "max_length", json_integer(high));
    json_object_set_new(root, "epoch", epoch);
    json_object_set_new(root, "points", json_integer(p->points));
    json_object_set_new(root, "chosen_by", json_string(p->chosen ? "tolerance" : "points"));
    json_object_set_new(root, "tolerance", json_real(v->tolerance));
    json_object_set_new(root, "tolerance_met", json_boolean(p->met));
    json_object_set_new(root, "noise", p->noise >= 0 ? json_real(p->noise) : json_null());
    json_object_set_new(root, "noise_lengths", json_integer(p->noise_lengths));
    json_object_set_new(root, "spread", p->spread >= 0 ? json_real(p->spread) : json_null());
    json_t *bins = json_array();
    for (guint b = 0; b < p->bins->len; b++)
        json_array_append_new(bins, bin_json(v, &g_array_index(p->bins, rv_seqpoint_bin, b)));
    json_object_set_new(root, "bins", bins);
    json_t *projection = json_object();
    for (guint i = 0; i < v->time_count; i++) {
        const timing *t = &v->times[i];
        json_t *item = json_object();
        json_object_set_new(item, "projected_us", json_real(t->projected_ns / 1e3));
        json_object_set_new(item, "every_iteration_us", json_real(t->reference_ns / 1e3));
        json_object_set_new(item, "error", json_real(error_of(t)));
        json_object_set_new(projection, i == 0 ? "recorded" : i == 1 ? "simulated" : "predicted", item);
    }
    json_object_set_new(root, "projection", projection);
    json_object_set_new(root, "optimizations", v->optimized ? json_string(v->optimized) : json_null());
    rv_cli_print_json(root);
}

/* ---- the run ------------------------------------------------------------------------ */

static gboolean read_step_lengths(const seqpoint_options *o, seqpoint_view *v, GError **error)
{
    if (o->lengths_file == NULL) return rv_seqpoint_lengths_from_shapes(v->graph, v->step_lengths, v->lengths_from, error);
    if (!rv_seqpoint_lengths_read(o->lengths_file, v->step_lengths, error)) return FALSE;
    g_string_append_printf(v->lengths_from, "%s", o->lengths_file);
    if (v->step_lengths->len != v->graph->steps->len) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: %u lengths for %u traced steps: give one length per step, in "
                    "order (--epoch takes the epoch's)", o->lengths_file, v->step_lengths->len, v->graph->steps->len);
        return FALSE;
    }
    return TRUE;
}

static int64_t *times_of(const GArray *steps, gboolean recorded)
{
    int64_t *ns = g_new(int64_t, steps->len);
    for (guint s = 0; s < steps->len; s++) {
        const rv_step_time *t = &g_array_index(steps, rv_step_time, s);
        ns[s] = recorded ? t->recorded_ns : t->simulated_ns;
    }
    return ns;
}

static void add_timing(seqpoint_view *v, const char *label, int64_t *step_ns)
{
    timing *t = &v->times[v->time_count++];
    t->label = label;
    t->step_ns = step_ns;
    t->projected_ns = rv_seqpoint_project(&v->points, step_ns);
    t->reference_ns = rv_seqpoint_reference(v->epoch, v->step_lengths, step_ns);
}

/* Choose on the recorded times and project each kind of time: the
 * baseline's steps, and with --opt the what-if's. */
static gboolean project_steps(const seqpoint_options *o, seqpoint_view *v, const GArray *baseline,
                              const GArray *predicted, GError **error)
{
    if (baseline->len != v->step_lengths->len) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: the replay has %u steps, the trace %u", v->graph->source,
                    baseline->len, v->step_lengths->len);
        return FALSE;
    }
    int64_t *recorded = times_of(baseline, TRUE);
    if (!rv_seqpoint_choose(v->epoch, v->step_lengths, recorded, (guint)o->points, v->tolerance, &v->points, error)) {
        g_free(recorded);
        return FALSE;
    }
    add_timing(v, "recorded", recorded);
    add_timing(v, "simulated (replay)", times_of(baseline, FALSE));
    if (predicted) add_timing(v, "predicted (what-if)", times_of(predicted, FALSE));
    return TRUE;
}

/* Replay (and with --opt, the what-if) and project. */
static gboolean project(rv_graph *graph, const seqpoint_options *o, seqpoint_view *v, GError **error)
{
    if (o->specs == NULL) {
        rv_replay replay = { 0 };
        gboolean ok = rv_cli_replay_job(graph, NULL, &replay, error) &&
                      project_steps(o, v, replay.steps, NULL, error);
        rv_replay_clear(&replay);
        return ok;
    }
    GHashTable *plugins = rv_plugin_table_new();
    GPtrArray *opts = rv_opts_prepare(plugins, o->specs, error);
    rv_whatif whatif = { 0 };
    gboolean ok = opts != NULL && rv_whatif_run(&whatif, graph, opts, error);
    if (opts) rv_cli_note_unchanged(opts);
    ok = ok && project_steps(o, v, whatif.baseline.steps, whatif.predicted.steps, error);
    if (ok) v->optimized = g_strjoinv(" ", o->specs);
    rv_whatif_clear(&whatif);
    if (opts) g_ptr_array_unref(opts);
    g_hash_table_destroy(plugins);
    return ok;
}

static int run(const char *path, const seqpoint_options *o)
{
    GError *error = NULL;
    seqpoint_view v = { 0 };
    v.step_lengths = g_array_new(FALSE, FALSE, sizeof(int64_t));
    v.lengths_from = g_string_new(NULL);
    v.tolerance = o->tolerance_percent / 100;
    char *paths[] = { (char *)path };
    rv_graph *graph = rv_cli_load_job(paths, 1, TRUE, &error);
    v.graph = graph;
    gboolean ok = graph != NULL && read_step_lengths(o, &v, &error);
    if (ok && o->epoch_file) {
        v.epoch = g_array_new(FALSE, FALSE, sizeof(int64_t));
        v.epoch_from = o->epoch_file;
        ok = rv_seqpoint_lengths_read(o->epoch_file, v.epoch, &error);
    } else if (ok) {
        v.epoch = g_array_ref(v.step_lengths);
    }
    ok = ok && project(graph, o, &v, &error);
    if (ok && o->as_json) print_json(&v);
    else if (ok) print_table(&v);
    int status = ok ? RV_EXIT_OK : rv_cli_fail(error);
    for (guint i = 0; i < v.time_count; i++) g_free(v.times[i].step_ns);
    rv_seqpoints_clear(&v.points);
    if (v.epoch) g_array_unref(v.epoch);
    g_array_unref(v.step_lengths);
    g_string_free(v.lengths_from, TRUE);
    g_free(v.optimized);
    rv_graph_free(graph);
    return status;
}

int rv_cmd_seqpoint(int argc, char **argv)
{
    seqpoint_options o = { NULL, NULL, 0, 0.5, NULL, FALSE };
    GOptionEntry entries[] = {
        { "lengths", 0, 0, G_OPTION_ARG_FILENAME, &o.lengths_file,
          "the input length of each traced step, in order (default: read from the trace's shapes)", "FILE" },
        { "epoch", 0, 0, G_OPTION_ARG_FILENAME, &o.epoch_file,
          "the input length of every iteration of the epoch to project (default: the traced steps)", "FILE" },
        { "points", 0, 0, G_OPTION_ARG_INT, &o.points, "representative iterations (bins) to pick; 0: the fewest within "
          "--tolerance (default 0)", "K" },
        { "tolerance", 0, 0, G_OPTION_ARG_DOUBLE, &o.tolerance_percent,
          "with --points 0: how close the projection of the recorded steps must come, in percent (default 0.5)", "PCT" },
        { "opt", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o.specs,
          "also project the epoch after an optimization, applied in the order given", "NAME[:k=v,...]" },
        { "json", 0, 0, G_OPTION_ARG_NONE, &o.as_json, "print JSON (schema in docs/commands.md)", NULL },
        { NULL }
    };
    GOptionContext *context = g_option_context_new("TRACE|GRAPH - pick representative iterations and project the epoch");
    g_option_context_add_main_entries(context, entries, NULL);
    g_option_context_set_description(context,
        "SeqPoint (Pati et al.): a sequence model's iterations differ by input length. The epoch's lengths\n"
        "are split into bins by exact 1-D k-means; each bin's representative is the traced step nearest\n"
        "its mean length, and the epoch is projected as the sum of each bin's iterations times its\n"
        "representative's time, from the recorded, replayed and (--opt) predicted step times, against\n"
        "the same sum over every iteration.\n"
        "Length files hold whole numbers separated by white space or commas; '#' starts a comment.\n"
        "Examples:\n"
        "  reverie seqpoint trace.json.gz\n"
        "  reverie seqpoint trace.json.gz --lengths steps.txt --epoch epoch.txt --points 8\n"
        "  reverie seqpoint trace.json.gz --opt hardware:gpu=H100-SXM --json\n");
    int status = RV_EXIT_OK;
    if (!rv_cli_parse(context, &argc, &argv, &status)) goto out;
    if (argc != 2) { status = rv_cli_usage("seqpoint", "give one trace or graph"); goto out; }
    if (o.points < 0 || o.points > RV_SEQPOINT_MAX_POINTS) {
        char *message = g_strdup_printf("--points %d: give 0 (the fewest within --tolerance) to %d", o.points,
                                        RV_SEQPOINT_MAX_POINTS);
        status = rv_cli_usage("seqpoint", message);
        g_free(message);
        goto out;
    }
    if (!(o.tolerance_percent >= 0 && o.tolerance_percent <= 100)) {
        status = rv_cli_usage("seqpoint", "--tolerance: give a percentage from 0 to 100");
        goto out;
    }
    status = run(argv[1], &o);
out:
    g_free(o.lengths_file);
    g_free(o.epoch_file);
    g_strfreev(o.specs);
    g_option_context_free(context);
    return status;
}
