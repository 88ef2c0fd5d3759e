/*
 * tiny_trace.c - small hand-made Kineto traces for the Check suites
 * (see tiny_trace.h).
 */
#include "tiny_trace.h"
#include "reverie/explain.h"

#include <check.h>
#include <glib/gstdio.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

struct tt_trace {
    double base_us;
    GString *events;  /* comma-separated event objects */
};

tt_trace *tt_new(double base_us)
{
    tt_trace *trace = g_new0(tt_trace, 1);
    trace->base_us = base_us;
    trace->events = g_string_new(NULL);
    return trace;
}

void tt_free(tt_trace *trace)
{
    if (trace == NULL) return;
    g_string_free(trace->events, TRUE);
    g_free(trace);
}

double tt_base(const tt_trace *trace) { return trace->base_us; }

void tt_event(tt_trace *trace, const char *format, ...)
{
    va_list args;
    if (trace->events->len > 0) g_string_append(trace->events, ",\n  ");
    va_start(args, format);
    g_string_append_vprintf(trace->events, format, args);
    va_end(args);
}

/* args.correlation and "External id" (the same number, as the profiler writes). */
static char *link_args(int corr)
{
    return corr >= 0 ? g_strdup_printf("\"External id\": %d, \"correlation\": %d", corr, corr)
                     : g_strdup("\"External id\": 0");
}

void tt_runtime(tt_trace *trace, int tid, const char *name, double ts, double dur, int corr)
{
    char *args = link_args(corr);
    tt_event(trace,
             "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"%s\", \"pid\": %d, \"tid\": %d, "
             "\"ts\": %.3f, \"dur\": %.3f, \"args\": {%s, \"cbid\": 211}}",
             name, TT_PID, tid, trace->base_us + ts, dur, args);
    g_free(args);
}

static void gpu_event(tt_trace *trace, const char *category, int stream, const char *name, double ts,
                      double dur, int corr, int64_t bytes)
{
    char *args = link_args(corr);
    char extra[64] = "";
    if (bytes >= 0) g_snprintf(extra, sizeof extra, ", \"bytes\": %" G_GINT64_FORMAT, bytes);
    tt_event(trace,
             "{\"ph\": \"X\", \"cat\": \"%s\", \"name\": \"%s\", \"pid\": 0, \"tid\": %d, "
             "\"ts\": %.3f, \"dur\": %.3f, \"args\": {%s, \"device\": 0, \"context\": 1, "
             "\"stream\": %d%s}}",
             category, name, stream, trace->base_us + ts, dur, args, stream, extra);
    g_free(args);
}

void tt_kernel(tt_trace *trace, int stream, const char *name, double ts, double dur, int corr)
{
    gpu_event(trace, "kernel", stream, name, ts, dur, corr, -1);
}

void tt_memcpy(tt_trace *trace, int stream, const char *name, double ts, double dur, int corr,
               int64_t bytes)
{
    gpu_event(trace, "gpu_memcpy", stream, name, ts, dur, corr, bytes);
}

static void cpu_scope(tt_trace *trace, const char *category, int tid, const char *name, double ts,
                      double dur)
{
    tt_event(trace,
             "{\"ph\": \"X\", \"cat\": \"%s\", \"name\": \"%s\", \"pid\": %d, \"tid\": %d, "
             "\"ts\": %.3f, \"dur\": %.3f, \"args\": {}}",
             category, name, TT_PID, tid, trace->base_us + ts, dur);
}

void tt_cpu_op(tt_trace *trace, int tid, const char *name, double ts, double dur)
{
    cpu_scope(trace, "cpu_op", tid, name, ts, dur);
}

void tt_annotation(tt_trace *trace, int tid, const char *name, double ts, double dur)
{
    cpu_scope(trace, "user_annotation", tid, name, ts, dur);
}

void tt_python(tt_trace *trace, int tid, const char *name, double ts, double dur)
{
    cpu_scope(trace, "python_function", tid, name, ts, dur);
}

void tt_cuda_sync(tt_trace *trace, const char *kind, int stream, double ts, double dur, int corr,
                  int wait_on_stream, int wait_record_corr)
{
    GString *args = g_string_new(NULL);
    g_string_append_printf(args, "\"External id\": %d, \"cuda_sync_kind\": \"%s\", ", corr, kind);
    if (wait_on_stream >= 0) g_string_append_printf(args, "\"wait_on_stream\": %d, ", wait_on_stream);
    if (wait_record_corr >= 0)
        g_string_append_printf(args, "\"wait_on_cuda_event_record_corr_id\": %d, ", wait_record_corr);
    g_string_append_printf(args, "\"stream\": %d, \"correlation\": %d, \"device\": 0, \"context\": 1",
                           stream, corr);
    tt_event(trace,
             "{\"ph\": \"X\", \"cat\": \"cuda_sync\", \"name\": \"%s\", \"pid\": 0, \"tid\": %d, "
             "\"ts\": %.3f, \"dur\": %.3f, \"args\": {%s}}",
             kind, stream, trace->base_us + ts, dur, args->str);
    g_string_free(args, TRUE);
}

void tt_flow(tt_trace *trace, int tid, double call_ts, int stream, double gpu_ts, int corr)
{
    tt_event(trace,
             "{\"ph\": \"s\", \"id\": %d, \"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"cat\": \"ac2g\", "
             "\"name\": \"ac2g\"}",
             corr, TT_PID, tid, trace->base_us + call_ts);
    tt_event(trace,
             "{\"ph\": \"f\", \"id\": %d, \"pid\": 0, \"tid\": %d, \"ts\": %.3f, \"cat\": \"ac2g\", "
             "\"name\": \"ac2g\", \"bp\": \"e\"}",
             corr, stream, trace->base_us + gpu_ts);
}

char *tt_text(const tt_trace *trace)
{
    return g_strdup_printf("{\n \"schemaVersion\": 1,\n"
                           " \"deviceProperties\": [{\"id\": 0, \"name\": \"Tiny GPU\"}],\n"
                           " \"traceEvents\": [\n  %s\n ],\n"
                           " \"traceName\": \"tiny\"\n}\n",
                           trace->events->str);
}

char *tt_write_temp(const void *data, gsize length, const char *suffix)
{
    GError *error = NULL;
    char *path = NULL;
    char *template = g_strdup_printf("reverie-test-XXXXXX%s", suffix ? suffix : ".json");
    int fd = g_file_open_tmp(template, &path, &error);
    g_free(template);
    ck_assert_msg(fd >= 0, "cannot make a temporary file: %s", error ? error->message : "?");
    const char *bytes = data;
    gsize done = 0;
    while (done < length) {
        ssize_t wrote = write(fd, bytes + done, length - done);
        ck_assert_msg(wrote > 0, "cannot write %s", path);
        done += (gsize)wrote;
    }
    close(fd);
    return path;
}

rv_trace *tt_load(tt_trace *trace)
{
    char *text = tt_text(trace);
    char *path = tt_write_temp(text, strlen(text), ".json");
    GError *error = NULL;
    rv_import_options options = { .threads = 1 };
    rv_trace *loaded = rv_trace_load(path, NULL, &options, &error);
    ck_assert_msg(loaded != NULL, "tiny trace did not load: %s\n%s", error ? error->message : "?", text);
    g_unlink(path);
    g_free(path);
    g_free(text);
    return loaded;
}

rv_graph *tt_build(tt_trace *trace)
{
    rv_trace *loaded = tt_load(trace);
    GError *error = NULL;
    rv_graph *graph = rv_graph_build(loaded, &error);
    ck_assert_msg(graph != NULL, "tiny trace did not build: %s", error ? error->message : "?");
    rv_trace_free(loaded);
    return graph;
}

int32_t tt_find_opt(rv_graph *graph, const char *name, rv_task_kind kind)
{
    int32_t found = -1;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task(graph, id);
        if (task->kind != kind || (task->flags & RV_TASK_FLAG_REMOVED)) continue;
        if (strcmp(rv_strings_get(graph->strings, task->name), name) != 0) continue;
        ck_assert_msg(found < 0, "more than one %s task named \"%s\" (%d and %d)",
                      rv_task_kind_name(kind), name, found, id);
        found = id;
    }
    return found;
}

int32_t tt_find(rv_graph *graph, const char *name, rv_task_kind kind)
{
    int32_t found = tt_find_opt(graph, name, kind);
    ck_assert_msg(found >= 0, "no %s task named \"%s\"", rv_task_kind_name(kind), name);
    return found;
}

int tt_edge_count(const rv_graph *graph, int32_t from, int32_t to, int kind)
{
    int count = 0;
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        if (edge->from == from && edge->to == to && (kind < 0 || edge->kind == kind)) count++;
    }
    return count;
}

gboolean tt_has_edge(const rv_graph *graph, int32_t from, int32_t to, rv_edge_kind kind)
{
    return tt_edge_count(graph, from, to, (int)kind) > 0;
}

gboolean tt_edge_from_start(const rv_graph *graph, int32_t from, int32_t to, rv_edge_kind kind)
{
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        if (edge->from == from && edge->to == to && edge->kind == kind) return edge->from_start != 0;
    }
    return FALSE;
}

int tt_kind_count(const rv_graph *graph, rv_edge_kind kind)
{
    int count = 0;
    for (guint e = 0; e < graph->edges->len; e++)
        if (g_array_index(graph->edges, rv_edge, e).kind == kind) count++;
    return count;
}

char *tt_describe_edges(const rv_graph *graph)
{
    GString *text = g_string_new(NULL);
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        const rv_task *from = &g_array_index(graph->tasks, rv_task, edge->from);
        const rv_task *to = &g_array_index(graph->tasks, rv_task, edge->to);
        g_string_append_printf(text, "  %d %s \"%s\" -> %d %s \"%s\": %s%s\n", edge->from,
                               rv_task_kind_name(from->kind), rv_strings_get(graph->strings, from->name),
                               edge->to, rv_task_kind_name(to->kind), rv_strings_get(graph->strings, to->name),
                               rv_edge_kind_name(edge->kind), edge->from_start ? " (from start)" : "");
    }
    return g_string_free(text, FALSE);
}

void tt_simulate(const rv_graph *graph, rv_sim_result *result)
{
    GError *error = NULL;
    memset(result, 0, sizeof *result);
    ck_assert_msg(rv_simulate(graph, NULL, result, &error), "replay failed: %s",
                  error ? error->message : "?");
}

void tt_assert_replay_exact(const rv_graph *graph)
{
    rv_explanation *explanation = rv_explain(graph, 1);
    ck_assert_msg(explanation->total_ns == 0 && explanation->early_tasks == 0,
                  "the rules do not explain the recording: %.3f us unexplained, %" G_GUINT64_FORMAT
                  " tasks early (%.3f us)%s%s", explanation->total_ns / 1e3, explanation->early_tasks,
                  explanation->early_ns / 1e3, explanation->top->len ? ", the most in " : "",
                  explanation->top->len ? rv_strings_get(graph->strings, g_array_index(graph->tasks, rv_task,
                      g_array_index(explanation->top, rv_unexplained_task, 0).task).name) : "");
    rv_explanation_free(explanation);
    rv_sim_result result;
    tt_simulate(graph, &result);
    int64_t origin = G_MAXINT64;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if (!(task->flags & RV_TASK_FLAG_REMOVED)) origin = MIN(origin, task->recorded_start_ns);
    }
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if (task->flags & RV_TASK_FLAG_REMOVED) continue;
        ck_assert_msg(result.start_ns[id] == task->recorded_start_ns - origin,
                      "task %d %s \"%s\" replays at %" G_GINT64_FORMAT " ns, recorded at %" G_GINT64_FORMAT
                      " ns", id, rv_task_kind_name(task->kind), rv_strings_get(graph->strings, task->name),
                      result.start_ns[id], task->recorded_start_ns - origin);
    }
    GArray *steps = rv_step_times(graph, &result);
    ck_assert_uint_gt(steps->len, 0);
    for (guint s = 0; s < steps->len; s++) {
        const rv_step_time *step = &g_array_index(steps, rv_step_time, s);
        ck_assert_msg(step->recorded_ns == step->simulated_ns,
                      "step %s: recorded %" G_GINT64_FORMAT " ns, simulated %" G_GINT64_FORMAT " ns",
                      step->name, step->recorded_ns, step->simulated_ns);
    }
    g_array_unref(steps);
    rv_sim_result_clear(&result);
}
