/*
 * plugin_harness.c - shared helpers for the plugin test suites (see the header).
 */
#include "plugin_harness.h"
#include "project_traces.h"
#include "reverie/job.h"
#include "reverie/memory.h"
#include "reverie/validate.h"
#include <glib/gstdio.h>
#include <string.h>

char *plugin_path(const char *name)
{
    const char *dir = g_getenv("REVERIE_TEST_PLUGIN_DIR");
    ck_assert_msg(dir != NULL, "REVERIE_TEST_PLUGIN_DIR is not set (run through meson test)");
    char *file = g_strconcat(name, ".so", NULL);
    char *path = g_build_filename(dir, file, NULL);
    g_free(file);
    return path;
}

/* Replay with a policy (NULL: the default), asserting success. */
static void simulate_with(const rv_graph *graph, const rv_policy *policy, rv_sim_result *sim)
{
    GError *error = NULL;
    ck_assert_msg(rv_simulate(graph, policy, sim, &error), "simulate: %s", error ? error->message : "");
}

/* Makespan and the sum of the simulated step times of a replay. */
static void summarize(const rv_graph *graph, const rv_sim_result *sim, int64_t *makespan_ns, int64_t *step_total_ns)
{
    if (makespan_ns) *makespan_ns = sim->makespan_ns;
    if (step_total_ns == NULL) return;
    GArray *steps = rv_step_times(graph, sim);
    int64_t total = 0;
    for (guint s = 0; s < steps->len; s++) total += g_array_index(steps, rv_step_time, s).simulated_ns;
    g_array_unref(steps);
    *step_total_ns = total;
}

/* Load, parse, apply; when `sim` is not NULL, replay into it with the
 * plugin's own priority before the plugin (and the priority function) is
 * unloaded. */
static gboolean run_plugin(rv_graph *graph, const char *name, const char *text, GError **error, rv_sim_result *sim,
                           int64_t **ranks, GString *notes)
{
    char *path = plugin_path(name);
    GError *local = NULL;
    rv_loaded_plugin *plugin = rv_plugin_load(path, &local);
    ck_assert_msg(plugin != NULL, "loading %s: %s", path, local ? local->message : "?");
    g_free(path);
    const rv_plugin *descriptor = rv_plugin_descriptor_of(plugin);
    rv_params *params = rv_params_parse(descriptor, text, &local);
    ck_assert_msg(params != NULL, "%s:%s: %s", name, text, local ? local->message : "?");
    rv_plugin_output output = { .notes = g_string_new(NULL) };
    gboolean ok = rv_plugin_apply(plugin, graph, params, &output, error);
    if (output.notes->len) g_printerr("%s:%s\n%s", name, text, output.notes->str);
    if (notes) g_string_append(notes, output.notes->str);
    if (ok && sim) {
        GError *cycle = NULL;
        ck_assert_msg(rv_graph_check_acyclic(graph, &cycle), "%s made a cycle: %s", name, cycle ? cycle->message : "");
        simulate_with(graph, output.policy.priority ? &output.policy : NULL, sim);
    }
    if (ok && ranks) {
        ck_assert_msg(output.policy.priority != NULL, "%s sets no priority", name);
        *ranks = g_new(int64_t, rv_graph_task_count(graph));
        for (int32_t id = 0; id < rv_graph_task_count(graph); id++)
            (*ranks)[id] = output.policy.priority(graph, id, output.policy.user_data);
    }
    if (output.free_policy_data) output.free_policy_data(output.policy.user_data);
    g_string_free(output.notes, TRUE);
    rv_params_free(params);
    rv_plugin_unload(plugin);
    return ok;
}

/* A host's memory estimate of the graph (memory.h), or NULL where it has none. */
static const rv_memory_estimate *estimate_or_null(const rv_graph *graph, rv_memory_estimate *estimate)
{
    return rv_memory_estimate_graph(graph, estimate, NULL) ? estimate : NULL;
}

/* Load a plugin by name and parse its parameters, asserting both. */
static rv_loaded_plugin *load_with(const char *name, const char *text, rv_params **params)
{
    char *path = plugin_path(name);
    GError *error = NULL;
    rv_loaded_plugin *plugin = rv_plugin_load(path, &error);
    ck_assert_msg(plugin != NULL, "loading %s: %s", path, error ? error->message : "?");
    g_free(path);
    *params = rv_params_parse(rv_plugin_descriptor_of(plugin), text, &error);
    ck_assert_msg(*params != NULL, "%s:%s: %s", name, text, error ? error->message : "?");
    return plugin;
}

char *apply_whatif(rv_graph *graph, const char *name, const char *text, gboolean last, const rv_policy *earlier,
                   rv_sim_result *sim)
{
    rv_params *params;
    rv_loaded_plugin *plugin = load_with(name, text, &params);
    rv_sim_result before = { 0 };
    rv_memory_estimate memory_before, memory_after;
    if (last) simulate_with(graph, NULL, &before);
    rv_plugin_output output = { .notes = g_string_new(NULL), .last = last, .before = last ? &before : NULL,
                                .before_memory = last ? estimate_or_null(graph, &memory_before) : NULL };
    GError *error = NULL;
    ck_assert_msg(rv_plugin_apply(plugin, graph, params, &output, &error), "%s:%s failed: %s", name, text,
                  error ? error->message : "(no error set)");
    rv_sim_result_clear(&before);
    const rv_policy *policy = output.policy.priority ? &output.policy : earlier;
    simulate_with(graph, policy, sim);
    rv_host_replay replay = { policy, sim, last ? estimate_or_null(graph, &memory_after) : NULL };
    rv_plugin_after_replay(plugin, &output, graph, &replay);
    if (output.free_policy_data) output.free_policy_data(output.policy.user_data);
    rv_params_free(params);
    rv_plugin_unload(plugin);
    return g_string_free(output.notes, FALSE);
}

/* A policy unlike any plugin's: among tasks that could start together, the later task first. */
static int64_t later_first(const rv_graph *graph, int32_t task, void *data)
{
    (void)graph; (void)data;
    return -(int64_t)task;
}

/* Apply as a what-if's last optimization; `deferred` must not be in the
 * notes apply() writes, but after after_replay, called with a replay that
 * uses the plugin's policy (host_policy TRUE) or another one, which the
 * plugin must not read.  Returns the notes (g_free). */
static char *notes_after_host_replay(rv_graph *graph, const char *name, const char *text, const char *deferred,
                                     gboolean host_policy)
{
    rv_params *params;
    rv_loaded_plugin *plugin = load_with(name, text, &params);
    rv_sim_result before = { 0 }, sim = { 0 };
    rv_memory_estimate memory_before, memory_after;
    simulate_with(graph, NULL, &before);
    rv_plugin_output output = { .notes = g_string_new(NULL), .last = TRUE, .before = &before,
                                .before_memory = estimate_or_null(graph, &memory_before) };
    GError *error = NULL;
    ck_assert_msg(rv_plugin_apply(plugin, graph, params, &output, &error), "%s:%s: %s", name, text,
                  error ? error->message : "?");
    rv_sim_result_clear(&before);
    ck_assert_msg(output.after_replay != NULL && strstr(output.notes->str, deferred) == NULL,
                  "%s:%s replayed '%s' itself", name, text, deferred);
    rv_policy other = { later_first, NULL };
    const rv_policy *own = output.policy.priority ? &output.policy : NULL;
    const rv_policy *policy = host_policy ? own : &other;
    simulate_with(graph, policy, &sim);
    /* under another policy the plugin must replay itself: doubled times
     * (no replay's) make sure it does not read this one */
    for (int32_t t = 0; !host_policy && t < sim.task_count; t++) {
        sim.start_ns[t] *= 2;
        sim.end_ns[t] *= 2;
    }
    rv_host_replay replay = { policy, &sim, estimate_or_null(graph, &memory_after) };
    rv_plugin_after_replay(plugin, &output, graph, &replay);
    rv_sim_result_clear(&sim);
    if (output.free_policy_data) output.free_policy_data(output.policy.user_data);
    rv_params_free(params);
    rv_plugin_unload(plugin);
    return g_string_free(output.notes, FALSE);
}

void assert_notes_from_host_replays(const rv_graph *graph, const char *name, const char *text, const char *deferred)
{
    rv_graph *alone = rv_graph_copy(graph), *last = rv_graph_copy(graph), *other = rv_graph_copy(graph);
    char *expected = apply_notes(alone, name, text);
    ck_assert_msg(strstr(expected, deferred) != NULL, "%s:%s wrote no '%s'", name, text, deferred);
    char *from_host = notes_after_host_replay(last, name, text, deferred, TRUE);
    char *from_own = notes_after_host_replay(other, name, text, deferred, FALSE);
    ck_assert_str_eq(from_host, expected);
    ck_assert_str_eq(from_own, expected);
    g_free(expected);
    g_free(from_host);
    g_free(from_own);
    rv_graph_free(alone);
    rv_graph_free(last);
    rv_graph_free(other);
}

gboolean apply_plugin(rv_graph *graph, const char *name, const char *text, GError **error)
{
    return run_plugin(graph, name, text, error, NULL, NULL, NULL);
}

void assert_apply_fails(rv_graph *graph, const char *name, const char *text, int code, const char *words)
{
    GError *error = NULL;
    ck_assert_msg(!apply_plugin(graph, name, text, &error), "%s:%s did not fail", name, text);
    ck_assert_msg(g_error_matches(error, RV_ERROR, code), "wrong error: %s", error ? error->message : "none");
    ck_assert_msg(strstr(error->message, words) != NULL, "'%s' lacks '%s'", error->message, words);
    ck_assert_msg(strchr(error->message, '\n') == NULL, "not one line: %s", error->message);
    g_error_free(error);
}

char *apply_notes(rv_graph *graph, const char *name, const char *text)
{
    GError *error = NULL;
    GString *notes = g_string_new(NULL);
    gboolean ok = run_plugin(graph, name, text, &error, NULL, NULL, notes);
    ck_assert_msg(ok, "%s:%s failed: %s", name, text, error ? error->message : "(no error set)");
    return g_string_free(notes, FALSE);
}

void apply_and_replay(rv_graph *graph, const char *name, const char *text, rv_sim_result *sim, int64_t **ranks)
{
    GError *error = NULL;
    gboolean ok = run_plugin(graph, name, text, &error, sim, ranks, NULL);
    ck_assert_msg(ok, "%s:%s failed: %s", name, text, error ? error->message : "(no error set)");
}

void apply_and_simulate(rv_graph *graph, const char *name, const char *text, int64_t *makespan_ns,
                        int64_t *step_total_ns)
{
    rv_sim_result sim = { 0 };
    apply_and_replay(graph, name, text, &sim, NULL);
    summarize(graph, &sim, makespan_ns, step_total_ns);
    rv_sim_result_clear(&sim);
}

void apply_ok(rv_graph *graph, const char *name, const char *text)
{
    GError *error = NULL;
    gboolean ok = apply_plugin(graph, name, text, &error);
    ck_assert_msg(ok, "%s:%s failed: %s", name, text, error ? error->message : "(no error set)");
    GError *cycle = NULL;
    ck_assert_msg(rv_graph_check_acyclic(graph, &cycle), "%s made a cycle: %s", name, cycle ? cycle->message : "");
}

/* A default replay of an untransformed graph, summarized. */
static void replay(const rv_graph *graph, int64_t *makespan_ns, int64_t *step_total_ns)
{
    rv_sim_result sim = { 0 };
    simulate_with(graph, NULL, &sim);
    summarize(graph, &sim, makespan_ns, step_total_ns);
    rv_sim_result_clear(&sim);
}

int64_t makespan(const rv_graph *graph)
{
    int64_t span;
    replay(graph, &span, NULL);
    return span;
}

int64_t step_total(const rv_graph *graph)
{
    int64_t total;
    replay(graph, NULL, &total);
    return total;
}

/* The graph of a shipped trace.  The test program's main() has checked with
 * require_project_traces() that it is there, so a missing file fails. */
rv_graph *load_trace_file(const char *path)
{
    GError *error = NULL;
    rv_trace *trace = rv_trace_load(path, NULL, NULL, &error);
    ck_assert_msg(trace != NULL, "%s: %s", path, error ? error->message : "");
    rv_graph *graph = rv_graph_build(trace, &error);
    ck_assert_msg(graph != NULL, "%s: %s", path, error ? error->message : "");
    rv_trace_free(trace);
    return graph;
}

rv_graph *load_trace(const char *name)
{
    char *path = project_trace_path(name);
    rv_graph *graph = load_trace_file(path);
    g_free(path);
    return graph;
}

GPtrArray *load_dlrm_ranks(void)
{
    GPtrArray *graphs = g_ptr_array_new_with_free_func((GDestroyNotify)rv_graph_free);
    for (int r = 0; r < DLRM_RANKS; r++) {
        char *name = g_strdup_printf("param_dlrm_v100_8ranks/rank%d.json.gz", r);
        g_ptr_array_add(graphs, load_trace(name));
        g_free(name);
    }
    return graphs;
}

rv_graph *join_ranks_ok(GPtrArray *graphs)
{
    GError *error = NULL;
    rv_graph *joint = rv_job_join(graphs, "dlrm", &error);
    ck_assert_msg(joint != NULL, "join: %s", error ? error->message : "");
    ck_assert_msg(rv_graph_validate(joint, &error), "joined graph invalid: %s", error ? error->message : "");
    return joint;
}

/* reverie-gentrace --ranks N: ranks with their own jitter, clocks and
 * entry moments, joined. */
rv_graph *generated_job(int ranks, int steps, const char *skew_us, const char *spread_us)
{
    const char *generator = g_getenv("REVERIE_GENTRACE");
    ck_assert_msg(generator != NULL, "REVERIE_GENTRACE is not set (run through meson test)");
    char *dir = g_dir_make_tmp("rv-alike-XXXXXX", NULL);
    char *folder = g_build_filename(dir, "job", NULL);
    char *rank_text = g_strdup_printf("%d", ranks), *step_text = g_strdup_printf("%d", steps);
    char *argv[] = { (char *)generator, "--ranks", rank_text, "--steps", step_text, "--clock-skew-us", (char *)skew_us,
                     "--entry-spread-us", (char *)spread_us, "-o", folder, NULL };
    int status = -1;
    ck_assert(g_spawn_sync(NULL, argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, NULL, NULL, &status, NULL));
    ck_assert_int_eq(status, 0);
    GPtrArray *graphs = g_ptr_array_new_with_free_func((GDestroyNotify)rv_graph_free);
    for (int r = 0; r < ranks; r++) {
        char *name = g_strdup_printf("rank%d.json.gz", r);
        char *path = g_build_filename(folder, name, NULL);
        g_ptr_array_add(graphs, load_trace_file(path));
        g_unlink(path);
        g_free(path);
        g_free(name);
    }
    rv_graph *joint = join_ranks_ok(graphs);
    g_ptr_array_unref(graphs);
    g_rmdir(folder);
    g_rmdir(dir);
    g_free(folder);
    g_free(dir);
    g_free(rank_text);
    g_free(step_text);
    return joint;
}

rv_graph *load_dlrm_job(void)
{
    GPtrArray *graphs = load_dlrm_ranks();
    rv_graph *joint = join_ranks_ok(graphs);
    g_ptr_array_unref(graphs);
    return joint;
}

/* Predicted step total after one plugin, and the baseline, on a real trace. */
void predict_trace(const char *trace, const char *plugin, const char *text, int64_t *baseline,
                   int64_t *predicted)
{
    rv_graph *graph = load_trace(trace);
    *baseline = step_total(graph);
    apply_and_simulate(graph, plugin, text, NULL, predicted);
    g_printerr("%s %s:%s  %.3f ms -> %.3f ms (%.3fx)\n", trace, plugin, text, *baseline / 1e6, *predicted / 1e6,
               (double)*baseline / (double)*predicted);
    rv_graph_free(graph);
}

/* Neutral parameters: the prediction equals the baseline, to the ns. */
void check_neutral(const char *trace, const char *plugin, const char *text)
{
    int64_t baseline, predicted;
    predict_trace(trace, plugin, text, &baseline, &predicted);
    ck_assert_msg(predicted == baseline, "%s:%s on %s: %" G_GINT64_FORMAT " != %" G_GINT64_FORMAT,
                  plugin, text, trace, predicted, baseline);
}

/* ---- hand-built graphs ---------------------------------------------- */


tiny tiny_new(void)
{
    tiny t;
    t.graph = rv_graph_new(NULL, "hand-built");
    t.cpu = rv_graph_add_resource(t.graph, RV_RES_CPU_THREAD, 1, 1, "thread 1/1");
    t.gpu = rv_graph_add_resource(t.graph, RV_RES_GPU_STREAM, 0, 7, "gpu 0 stream 7");
    return t;
}

int32_t tiny_task(tiny *t, int32_t resource, rv_task_kind kind, const char *name, int64_t duration_ns,
                         rv_phase phase)
{
    rv_task task = { 0 };
    task.duration_ns = duration_ns;
    task.correlation = -1;
    task.resource = resource;
    task.name = rv_strings_intern(t->graph->strings, name);
    task.input_dims = -1;
    task.step = -1;
    task.kind = (uint8_t)kind;
    task.phase = (uint8_t)phase;
    if (resource == t->gpu) task.flags = RV_TASK_FLAG_GPU;
    int32_t id = rv_graph_add_task(t->graph, &task);
    int32_t previous = -1;
    for (int32_t other = id - 1; other >= 0 && previous < 0; other--)
        if (rv_graph_task(t->graph, other)->resource == resource) previous = other;
    if (previous >= 0)
        rv_graph_add_edge(t->graph, previous, id, resource == t->gpu ? RV_EDGE_STREAM : RV_EDGE_THREAD, FALSE);
    return id;
}

void tiny_close_step(tiny *t)
{
    rv_step step = { rv_strings_intern(t->graph->strings, "ProfilerStep#0"), 0, 0, 0,
                     rv_graph_task_count(t->graph) - 1 };
    g_array_append_val(t->graph->steps, step);
}

void tiny_close_one_step(tiny *t)
{
    for (int32_t id = 0; id < rv_graph_task_count(t->graph); id++) rv_graph_task(t->graph, id)->step = 0;
    tiny_close_step(t);
}

/* A launch call on the CPU and its kernel on the stream. */
int32_t tiny_launch(tiny *t, const char *kernel, int64_t launch_ns, int64_t kernel_ns, rv_phase phase,
                           rv_task_kind kind)
{
    int32_t call = tiny_task(t, t->cpu, RV_TASK_CPU, "cudaLaunchKernel", launch_ns, phase);
    int32_t gpu = tiny_task(t, t->gpu, kind, kernel, kernel_ns, phase);
    rv_graph_add_edge(t->graph, call, gpu, RV_EDGE_LAUNCH, FALSE);
    return gpu;
}

guint count_tasks_named(const rv_graph *graph, const char *words)
{
    guint count = 0;
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        count += !(task->flags & RV_TASK_FLAG_REMOVED) && strstr(rv_strings_get(graph->strings, task->name), words) != NULL;
    }
    return count;
}

gboolean has_edge(const rv_graph *graph, int32_t from, int32_t to)
{
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        if (edge->from == from && edge->to == to) return TRUE;
    }
    return FALSE;
}

void tiny_record(rv_graph *graph)
{
    rv_sim_result sim = { 0 };
    GError *error = NULL;
    ck_assert_msg(rv_simulate(graph, NULL, &sim, &error), "simulate: %s", error ? error->message : "");
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++)
        rv_graph_task(graph, id)->recorded_start_ns = sim.start_ns[id];
    rv_sim_result_clear(&sim);
}
