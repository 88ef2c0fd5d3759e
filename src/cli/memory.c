/*
 * memory.c - `reverie memory`: what a step holds in GPU memory at its peak
 * (memory.h): the estimate from shapes, broken down into weights,
 * gradients, optimizer state, activations and workspace per phase; the
 * peak the trace's [memory] events recorded, per step and device; and with
 * --gpu NAME whether it fits in that GPU's memory.  With --opt the estimate
 * is of the graph the optimizations made (what they did to tensors,
 * memory.h); the recorded figures stay the trace's.
 */
#include "cli.h"
#include "reverie/gpus.h"
#include "reverie/memory.h"
#include "reverie/units.h"
#include <jansson.h>
#include <string.h>

typedef struct {
    const rv_graph *graph;
    gboolean estimated, recorded;
    rv_memory_estimate estimate;
    GError *estimate_error;          /* why there is no estimate */
    int64_t allocated, reserved;     /* recorded peak */
    int32_t device, rank_index;
    const rv_gpu *gpu;               /* --gpu, or NULL */
    char *optimized;                 /* the --opt specs joined, or NULL: the estimate is of the optimized job */
} memory_view;

static const char *step_name(const rv_graph *graph, int32_t step)
{
    return step >= 0 ? rv_strings_get(graph->strings, g_array_index(graph->steps, rv_step, step).name) : NULL;
}

/* The figure --gpu compares: the recorded peak where there is one (it is
 * what the job needed), else the estimate.  A trace with [memory] events
 * but neither totals nor shapes has no absolute figure: --gpu then says so. */
static int64_t fit_bytes(const memory_view *v, const char **from)
{
    gboolean recorded = v->recorded && v->optimized == NULL; /* the recording is of the job before --opt */
    *from = recorded ? "recorded" : "estimate";
    return recorded ? v->allocated : v->estimate.peak;
}

/* A library message without its "SOURCE: " prefix, which the report has
 * already printed. */
static const char *without_source(const rv_graph *graph, const char *message)
{
    gsize length = strlen(graph->source);
    if (strncmp(message, graph->source, length) == 0 && strncmp(message + length, ": ", 2) == 0)
        return message + length + 2;
    return message;
}


static void print_estimate(const memory_view *v)
{
    const rv_memory_estimate *e = &v->estimate;
    const char *step = step_name(v->graph, e->step);
    if (v->optimized) printf("after %s: ", v->optimized);
    printf("estimate from shapes (%s, %s%s, %d-byte usual dtype, %u operator calls with Input Dims, %u without",
           e->training ? "training" : "inference: no backward phase, so only the input is kept",
           step ? "step " : "whole trace", step ? rv_cli_shown(step) : "", e->element_bytes, e->shaped_ops, e->unshaped_ops);
    if (e->training)
        printf(", optimizer %s", e->optimizer_factor > 0 ? e->optimizer : "not named: no state counted");
    printf("), MiB:\n");
    printf("  %-10s %10s %10s %10s %12s %10s %10s\n", "phase", "weights", "gradients", "optimizer", "activations",
           "workspace", "total");
    for (int p = 0; p < RV_PHASE_COUNT; p++) {
        if (e->phase_peak[p] == 0) continue;
        printf("  %-10s", rv_phase_name((rv_phase)p));
        for (int c = 0; c < RV_MEM_CATEGORY_COUNT; c++) printf(" %*.1f", c == RV_MEM_ACTIVATIONS ? 12 : 10, rv_cli_mib(e->bytes[p][c]));
        printf(" %10.1f\n", rv_cli_mib(e->phase_peak[p]));
    }
    printf("  peak %.1f MiB in %s", rv_cli_mib(e->peak), rv_phase_name((rv_phase)e->peak_phase));
    if (e->stages > 0) printf(" on pipeline stage %d of %d (the busiest GPU; the table is its)", e->stage, e->stages);
    if (e->offloaded > 0) printf(" (%.1f MiB of activations offloaded)", rv_cli_mib(e->offloaded));
    if (e->recomputed > 0) printf(" (%.1f MiB of activations recomputed in backward)", rv_cli_mib(e->recomputed));
    if (e->offloaded_states > 0) printf(" (%.1f MiB of model states off the GPU)", rv_cli_mib(e->offloaded_states));
    printf("\n");
}

/* What a step allocates above its start: the estimate's activations and
 * workspace at its peak (weights, state and, in PyTorch before 2.0,
 * gradients persist across steps), for traces whose events have no totals. */
static int64_t estimated_above_start(const rv_memory_estimate *e)
{
    return e->bytes[e->peak_phase][RV_MEM_ACTIVATIONS] + e->bytes[e->peak_phase][RV_MEM_WORKSPACE];
}

static int64_t recorded_above_start(const rv_graph *graph)
{
    int64_t most = 0;
    for (guint i = 0; i < graph->memory->len; i++) {
        const rv_memory_record *r = &g_array_index(graph->memory, rv_memory_record, i);
        if (r->step >= 0) most = MAX(most, r->peak_above_start);
    }
    return most;
}

static void print_mib_or_dash(int64_t bytes, int width)
{
    if (bytes < 0) printf(" %*s", width, "-");
    else printf(" %*.1f", width, rv_cli_mib(bytes));
}

static void print_recorded(const memory_view *v)
{
    if (v->optimized) printf("(the trace's, before the optimizations) ");
    if (v->recorded) {
        printf("recorded ([memory] events): peak %.1f MiB allocated, %.1f MiB reserved (device %d", rv_cli_mib(v->allocated),
               rv_cli_mib(v->reserved), v->device);
        if (v->graph->ranks->len > 1)
            printf(", rank %" G_GINT64_FORMAT, g_array_index(v->graph->ranks, rv_rank, v->rank_index).rank);
        printf(")\n");
    } else {
        printf("recorded ([memory] events without totals, an older profiler): only what each step allocated "
               "above its start\n");
    }
    printf("  %-20s %6s %8s %16s %15s %15s %15s\n", "step", "device", "events", "allocated before", "above start",
           "peak allocated", "peak reserved");
    for (guint i = 0; i < v->graph->memory->len; i++) {
        const rv_memory_record *r = &g_array_index(v->graph->memory, rv_memory_record, i);
        const char *step = step_name(v->graph, r->step);
        printf("  %-20s %6d %8" G_GINT64_FORMAT, step ? rv_cli_shown(step) : "(outside steps)", r->device, r->events);
        print_mib_or_dash(r->allocated_before, 16);
        print_mib_or_dash(r->peak_above_start, 15);
        print_mib_or_dash(r->peak_allocated, 15);
        print_mib_or_dash(r->peak_reserved, 15);
        printf("\n");
    }
    if (v->optimized) return; /* the recording is of another job than the estimate */
    if (v->estimated && v->recorded)
        printf("estimate vs recorded peak: %+.1f%%\n", 100.0 * ((double)v->estimate.peak / (double)v->allocated - 1.0));
    else if (v->estimated && recorded_above_start(v->graph) > 0)
        printf("estimate of a step's own allocations (activations + workspace at the peak) vs recorded above start: "
               "%+.1f%%\n", 100.0 * ((double)estimated_above_start(&v->estimate) / (double)recorded_above_start(v->graph) - 1.0));
}

static void print_fit(const memory_view *v)
{
    if (!v->recorded && !v->estimated) {
        printf("%s: cannot say whether it fits: the events have no totals and the trace no shapes\n", v->gpu->id);
        return;
    }
    const char *from;
    int64_t need = fit_bytes(v, &from);
    printf("%s: %.1f GiB of memory; the %s peak %.1f GiB %s (%.1f%%)\n", v->gpu->id, v->gpu->memory_bytes / 1073741824.0,
           from, (double)need / 1073741824.0, (double)need <= v->gpu->memory_bytes ? "fits" : "does not fit",
           100.0 * (double)need / v->gpu->memory_bytes);
}

static json_t *json_estimate(const memory_view *v)
{
    const rv_memory_estimate *e = &v->estimate;
    json_t *phases = json_object();
    for (int p = 0; p < RV_PHASE_COUNT; p++) {
        if (e->phase_peak[p] == 0) continue;
        json_t *row = json_object();
        for (int c = 0; c < RV_MEM_CATEGORY_COUNT; c++)
            json_object_set_new(row, rv_memory_category_name((rv_memory_category)c), json_integer(e->bytes[p][c]));
        json_object_set_new(row, "total", json_integer(e->phase_peak[p]));
        json_object_set_new(phases, rv_phase_name((rv_phase)p), row);
    }
    const char *step = step_name(v->graph, e->step);
    json_t *root = json_pack("{s:b, s:o, s:i, s:o, s:i, s:o, s:I, s:s, s:I, s:i, s:i}", "training", e->training, "step",
                     step ? json_string(step) : json_null(), "element_bytes", e->element_bytes, "optimizer",
                     e->optimizer[0] ? json_string(e->optimizer) : json_null(), "optimizer_factor", e->optimizer_factor,
                     "phases", phases, "peak_bytes", (json_int_t)e->peak, "peak_phase",
                     rv_phase_name((rv_phase)e->peak_phase), "offloaded_bytes", (json_int_t)e->offloaded, "shaped_ops",
                     (int)e->shaped_ops, "unshaped_ops", (int)e->unshaped_ops);
    json_object_set_new(root, "recomputed_bytes", json_integer(e->recomputed));
    json_object_set_new(root, "offloaded_states_bytes", json_integer(e->offloaded_states));
    json_object_set_new(root, "pipeline_stage", e->stages > 0 ? json_integer(e->stage) : json_null());
    json_object_set_new(root, "pipeline_stages", json_integer(e->stages));
    return root;
}

static json_t *json_recorded(const memory_view *v)
{
    json_t *steps = json_array();
    for (guint i = 0; i < v->graph->memory->len; i++) {
        const rv_memory_record *r = &g_array_index(v->graph->memory, rv_memory_record, i);
        const char *step = step_name(v->graph, r->step);
        json_array_append_new(steps, json_pack("{s:o, s:i, s:i, s:I, s:I, s:I, s:I, s:I}", "step",
                                               step ? json_string(step) : json_null(), "device", r->device,
                                               "rank_index", r->rank_index, "events", (json_int_t)r->events,
                                               "peak_above_start_bytes", (json_int_t)r->peak_above_start,
                                               "allocated_before_bytes", (json_int_t)r->allocated_before,
                                               "peak_allocated_bytes", (json_int_t)r->peak_allocated,
                                               "peak_reserved_bytes", (json_int_t)r->peak_reserved));
    }
    json_t *root = json_pack("{s:o}", "steps", steps);
    json_object_set_new(root, "peak_allocated_bytes", v->recorded ? json_integer(v->allocated) : json_null());
    json_object_set_new(root, "peak_reserved_bytes", v->recorded ? json_integer(v->reserved) : json_null());
    json_object_set_new(root, "device", v->recorded ? json_integer(v->device) : json_null());
    json_object_set_new(root, "rank_index", v->recorded ? json_integer(v->rank_index) : json_null());
    json_object_set_new(root, "peak_above_start_bytes", json_integer(recorded_above_start(v->graph)));
    return root;
}

static json_t *json_view(const memory_view *v)
{
    json_t *root = json_pack("{s:s}", "source", v->graph->source);
    json_object_set_new(root, "optimizations", v->optimized ? json_string(v->optimized) : json_null());
    json_object_set_new(root, "estimate", v->estimated ? json_estimate(v) : json_null());
    if (!v->estimated)
        json_object_set_new(root, "estimate_missing", json_string(without_source(v->graph, v->estimate_error->message)));
    gboolean any = v->graph->memory->len > 0;
    json_object_set_new(root, "recorded", any ? json_recorded(v) : json_null());
    json_object_set_new(root, "estimate_error", v->estimated && v->recorded && !v->optimized
                                                    ? json_real((double)v->estimate.peak / (double)v->allocated - 1.0)
                                                    : json_null());
    int64_t above = any ? recorded_above_start(v->graph) : 0;
    json_object_set_new(root, "above_start_error",
                        v->estimated && above > 0 && !v->optimized
                            ? json_real((double)estimated_above_start(&v->estimate) / (double)above - 1.0) : json_null());
    if (v->gpu && !v->recorded && !v->estimated) {
        json_object_set_new(root, "gpu", json_pack("{s:s, s:I, s:n, s:n, s:n}", "id", v->gpu->id, "memory_bytes",
                                                   (json_int_t)v->gpu->memory_bytes, "peak_bytes", "peak_from", "fits"));
    } else if (v->gpu) {
        const char *from;
        int64_t need = fit_bytes(v, &from);
        json_object_set_new(root, "gpu", json_pack("{s:s, s:I, s:I, s:s, s:b}", "id", v->gpu->id, "memory_bytes",
                                                   (json_int_t)v->gpu->memory_bytes, "peak_bytes", (json_int_t)need,
                                                   "peak_from", from, "fits", (double)need <= v->gpu->memory_bytes));
    }
    return root;
}

/* Apply --opt's optimizations to the graph (a policy they return is
 * dropped: it orders tasks, it makes no tensor). */
static gboolean optimize(rv_graph *graph, GPtrArray *opts, char **specs, memory_view *v, GError **error)
{
    if (opts->len == 0) return TRUE;
    rv_plugin_output policy = { 0 };
    gboolean ok = rv_cli_apply_opts(graph, opts, FALSE, &policy, error);
    rv_opts_policy_clear(&policy);
    if (ok) v->optimized = g_strjoinv(", ", specs);
    return ok;
}

static int report(const char *path, const char *gpu_name, char **specs, gboolean as_json, gboolean as_csv)
{
    GError *error = NULL;
    rv_gpu_catalogue *catalogue = NULL;
    memory_view v = { 0 };
    GHashTable *plugins = rv_plugin_table_new();
    GPtrArray *opts = rv_opts_prepare(plugins, specs, &error);
    gboolean ok = opts != NULL;
    if (ok && gpu_name != NULL) {
        catalogue = rv_gpu_catalogue_load_default(&error);
        ok = catalogue != NULL && (v.gpu = rv_gpu_find(catalogue, gpu_name, &error)) != NULL;
    }
    rv_graph *graph = ok ? rv_cli_load(path, &error) : NULL;
    if (graph == NULL || !optimize(graph, opts, specs, &v, &error)) {
        rv_graph_free(graph);
        rv_gpu_catalogue_free(catalogue);
        if (opts) g_ptr_array_unref(opts);
        g_hash_table_destroy(plugins);
        return rv_cli_fail(error);
    }
    v.graph = graph;
    v.estimated = rv_memory_estimate_graph(graph, &v.estimate, &v.estimate_error);
    if (v.estimated && v.estimate.peak <= 0) {
        /* shaped calls, but none in a phase the model reads: 0 MiB (and
         * "-100%" against the recording) would be a wrong answer */
        v.estimated = FALSE;
        g_set_error(&v.estimate_error, RV_ERROR, RV_ERROR_INPUT, "%s: the shaped calls give no tensor in a forward, "
                    "backward or optimizer phase", graph->source);
    }
    v.recorded = rv_memory_recorded_peak(graph, &v.allocated, &v.reserved, &v.device, &v.rank_index);
    int status = RV_EXIT_OK;
    if (!v.estimated && graph->memory->len == 0) {
        g_set_error(&error, RV_ERROR, RV_ERROR_INPUT,
                    "%s: nothing to measure memory from: no [memory] events (record with profile_memory=True) "
                    "and no Input Dims (record_shapes=True)", rv_cli_shown(graph->source));
        status = rv_cli_fail(error);
    } else if (as_json) {
        rv_cli_print_json(json_view(&v));
    } else if (as_csv) {
        rv_cli_print_json_as_csv(json_view(&v));
    } else {
        printf("%s\n", rv_cli_shown(graph->source));
        if (v.estimated) print_estimate(&v);
        else printf("estimate from shapes: none (%s)\n", without_source(graph, v.estimate_error->message));
        if (graph->memory->len > 0) print_recorded(&v);
        else printf("recorded: none (no [memory] events: record with profile_memory=True)\n");
        if (v.gpu) print_fit(&v);
    }
    g_clear_error(&v.estimate_error);
    g_free(v.optimized);
    rv_graph_free(graph);
    rv_gpu_catalogue_free(catalogue);
    g_ptr_array_unref(opts);
    g_hash_table_destroy(plugins); /* after the opts, which hold the plugins' parameter tables */
    return status;
}

int rv_cmd_memory(int argc, char **argv)
{
    gboolean as_json = FALSE, as_csv = FALSE;
    char *gpu = NULL;
    char **specs = NULL;
    GOptionEntry entries[] = {
        { "gpu", 0, 0, G_OPTION_ARG_STRING, &gpu, "say whether the peak fits in this catalogue GPU's memory", "NAME" },
        { "opt", 0, 0, G_OPTION_ARG_STRING_ARRAY, &specs,
          "estimate the job after this optimization (as whatif --opt; repeatable, applied in order)", "NAME[:k=v,...]" },
        { "json", 0, 0, G_OPTION_ARG_NONE, &as_json, "print JSON (schema in docs/commands.md)", NULL },
        { "csv", 0, 0, G_OPTION_ARG_NONE, &as_csv, "print what --json holds as CSV rows of field,value", NULL },
        { NULL }
    };
    GOptionContext *context = g_option_context_new("TRACE|GRAPH - a step's GPU memory at its peak");
    rv_cli_add_entries(context, entries);
    g_option_context_set_description(context,
        "The estimate from shapes (record_shapes=True): weights, gradients, optimizer state,\n"
        "activations kept for backward and the largest operator's workspace, per phase at its\n"
        "peak; the peak the trace's [memory] events recorded (profile_memory=True), per step and\n"
        "device; and with --gpu whether the peak (recorded if there is one) fits.\n"
        "With --opt the estimate is of the optimized job (checkpoint, batch-size, amp,\n"
        "precision, vdnn, gist... say what they do to tensors) and --gpu compares it.\n\n"
        "Examples:\n  reverie memory traces/pairs/gpu_h100_vs_mi300x_timesformer/h100.json.gz\n"
        "  reverie memory traces/hta_transformer_ddp_v100_rank1.2steps.json.gz --gpu V100-SXM2\n"
        "  reverie memory traces/kineto_legacy_resnet50_v100.2steps.json.gz --gpu T4 --json\n"
        "  reverie memory traces/kineto_legacy_resnet50_v100.2steps.json.gz --opt checkpoint:segments=4\n"
        "  reverie whatif traces/kineto_legacy_resnet50_v100.2steps.json.gz --opt vdnn   (the peak with offloading)\n");
    int status = RV_EXIT_OK;
    if (!rv_cli_parse(context, &argc, &argv, &status)) goto out;
    if (argc != 2) { status = rv_cli_usage("memory", "give exactly one trace or graph"); goto out; }
    if (as_json && as_csv) { status = rv_cli_usage("memory", "give --json or --csv, not both"); goto out; }
    status = report(argv[1], gpu, specs, as_json, as_csv);
out:
    g_free(gpu);
    g_strfreev(specs);
    g_option_context_free(context);
    return status;
}
