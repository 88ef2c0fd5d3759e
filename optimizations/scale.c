/*
 * scale.c - the smallest optimization: Daydream's shrink/scale primitive on
 * any selection.  "What if these tasks took factor times as long?"
 *
 *   reverie whatif trace.json.gz --opt 'scale:select=kind=kernel phase=backward,factor=0.5'
 *   reverie whatif trace.json.gz --opt 'scale:select=kind=cpu,factor=0.5'   (a 2x faster host)
 *
 * A CPU call carries the host time before it (Python, framework dispatch:
 * graph.h's host overhead); `part` says whether that scales with the call.
 * By default it does, so "CPU 2x faster" halves all the host's work.
 *
 * It is also the template for writing a plugin: declare a parameter table,
 * implement apply() with the transform API, export rv_plugin_descriptor.
 */
#include "reverie/plugin.h"
#include "reverie/error.h"
#include "reverie/select.h"
#include "reverie/transform.h"
#include "reverie/validate.h"

static const rv_param_spec scale_params[] = {
    { "select", RV_PARAM_STRING, "kind=gpu", NULL, "which tasks (selection syntax of 'reverie query')", NULL },
    { "factor", RV_PARAM_NUMBER, "1", "x", "multiply their durations by this", NULL },
    { "part", RV_PARAM_CHOICE, "all", NULL,
      "what scales: the task and the host time before it (all), or only one", "all|duration|overhead" },
    { NULL }
};

static gboolean scale_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    double factor = rv_params_number(params, "factor");
    /* before any change: a sweep matches each selection once (select.h) */
    GArray *tasks = rv_select_text(graph, rv_params_string(params, "select"), error);
    if (tasks == NULL) return FALSE;
    if (tasks->len == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "the selection '%s' matches no task",
                    rv_params_string(params, "select"));
        g_array_unref(tasks);
        return FALSE;
    }
    /* A factor that would push a duration past the limits is the user's
     * mistake (exit 1), not a graph to simulate. */
    char *cause = g_strdup_printf("factor=%s", rv_params_string(params, "factor"));
    gboolean ok = rv_tasks_check_scale(graph, tasks, factor, cause, error);
    g_free(cause);
    if (ok) {
        const char *part = rv_params_string(params, "part");
        if (g_strcmp0(part, "all") == 0) rv_transform_scale_with_overhead(graph, tasks, factor);
        else if (g_strcmp0(part, "duration") == 0) rv_transform_scale(graph, tasks, factor);
        else rv_transform_scale_host_overhead(graph, tasks, factor);
        g_string_append_printf(output->notes, "    scaled %u tasks by %g (%s)\n", tasks->len, factor,
                               g_strcmp0(part, "all") == 0 ? "duration and host overhead" : part);
    }
    g_array_unref(tasks);
    return ok;
}

/* The composition law (compose.h): durations of any selection times a factor, and nothing else. */
static const rv_plugin_effects scale_effects = {
    .reads = 0,
    .reads_time = 0,
    .scales = RV_ASPECT_TASKS,
    .reprices = 0,
    .rewrites = 0,
    .order = RV_ORDER(RV_STAGE_ADJUST, 10),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "scale", "scale the duration of any selection of tasks (Daydream's shrink)",
    scale_params, scale_apply, &scale_effects,
};
