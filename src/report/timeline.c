/*
 * timeline.c - write replays as Chrome trace JSON in Kineto's vocabulary
 * (see timeline.h for what the file holds).
 *
 * Each event is built as a small jansson object and dumped at once through
 * one writer (plain FILE or gzip), so memory stays flat however large the
 * graph.  Ids are made unique across the runs of one file: a run's flow ids
 * and correlation ids are offset by run << 40 (the first run keeps the
 * trace's own correlation ids).
 */
#include "reverie/timeline.h"
#include "reverie/error.h"
#include "reverie/escape.h"
#include "reverie/output.h"
#include "reverie/report.h"
#include <errno.h>
#include <stdlib.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#define RUN_ID_SHIFT 40
#define INSERTED_CORRELATION ((int64_t)1 << 39)  /* + task id: calls and GPU tasks a plugin made */
#define EDGE_FLOW ((int64_t)1 << 38)             /* + edge index */
#define CRITICAL_FLOW ((int64_t)1 << 37)         /* + link number */

typedef struct {
    rv_output *output;     /* the one writer (output.h): atomic, bounded, never an input */
    FILE *file;            /* its stream */
    z_stream *gz;          /* a .gz name: deflated into the stream */
    gboolean failed;
    gboolean first_event;
} writer;

/* Deflate buffer into the stream (flush: Z_NO_FLUSH, or Z_FINISH at the end). */
static gboolean deflate_into(writer *out, const char *buffer, size_t size, int flush)
{
    unsigned char chunk[1 << 16];
    out->gz->next_in = (unsigned char *)buffer;
    out->gz->avail_in = (uInt)size;
    int status;
    do {
        out->gz->next_out = chunk;
        out->gz->avail_out = sizeof chunk;
        status = deflate(out->gz, flush);
        if (status == Z_STREAM_ERROR) return FALSE;
        size_t produced = sizeof chunk - out->gz->avail_out;
        if (produced > 0 && fwrite(chunk, 1, produced, out->file) != produced) return FALSE;
    } while (out->gz->avail_out == 0 || (flush == Z_FINISH && status != Z_STREAM_END));
    return TRUE;
}

static int write_bytes(const char *buffer, size_t size, void *data)
{
    writer *out = data;
    if (out->failed || size == 0) return out->failed ? -1 : 0;
    /* a JSON text is far below 4 GiB per call: jansson writes in pieces */
    if (out->gz) out->failed = size > G_MAXUINT32 || !deflate_into(out, buffer, size, Z_NO_FLUSH);
    else out->failed = fwrite(buffer, 1, size, out->file) != size;
    return out->failed ? -1 : 0;
}

static void write_text(writer *out, const char *text)
{
    write_bytes(text, strlen(text), out);
}

/* Dump one event (taking the reference), comma-separated from the last. */
static void emit(writer *out, json_t *event)
{
    if (!out->first_event) write_text(out, ",\n");
    out->first_event = FALSE;
    if (json_dump_callback(event, write_bytes, out, JSON_COMPACT | JSON_REAL_PRECISION(15)) != 0) out->failed = TRUE;
    json_decref(event);
}

/* Everything one run's events need. */
typedef struct {
    const rv_timeline_run *run;
    const rv_graph *graph;
    const rv_sim_result *sim;
    int64_t pid;
    int64_t id_offset;
    int64_t from_ns, to_ns;    /* the steps' span: tasks wholly outside it are left out */
    uint64_t left_out;
    guint8 *critical;          /* per task, or NULL */
    int64_t *external_id;      /* per task: its cpu_op event's id, or -1 */
    rv_bounded_strings names;  /* the texts as written (strings.h) */
} run_context;

/* Names are copied into every event: bounded (strings.h), so that one long
 * name cannot multiply the file's size, and valid UTF-8, which JSON needs. */
static const char *text_of(const run_context *c, int32_t id) { return rv_bounded_strings_get(&c->names, id); }
static const rv_task *task_at(const rv_graph *graph, int32_t id) { return &g_array_index(graph->tasks, rv_task, id); }
static double us(int64_t ns) { return ns / 1e3; }

static int64_t tid_of(int32_t resource) { return (int64_t)resource + 1; }

static json_t *metadata(const char *name, int64_t pid, int64_t tid, json_t *args)
{
    return json_pack("{s:s,s:s,s:I,s:I,s:o}", "name", name, "ph", "M", "pid", (json_int_t)pid, "tid", (json_int_t)tid,
                     "args", args);
}

static void emit_tracks(writer *out, const run_context *c, guint run_index)
{
    const rv_graph *graph = c->graph;
    char *source = NULL;
    char *process = g_strdup_printf("%s rank %" G_GINT64_FORMAT " (reverie replay of %s)", c->run->label,
                                    MAX(graph->rank, 0), rv_bounded_name(graph->source, &source));
    g_free(source);
    emit(out, metadata("process_name", c->pid, 0, json_pack("{s:s}", "name", process)));
    emit(out, metadata("process_sort_index", c->pid, 0, json_pack("{s:i}", "sort_index", (int)run_index)));
    emit(out, metadata("process_labels", c->pid, 0, json_pack("{s:s}", "labels", c->run->label)));
    g_free(process);
    for (guint r = 0; r < graph->resources->len; r++) {
        const rv_resource *resource = &g_array_index(graph->resources, rv_resource, r);
        emit(out, metadata("thread_name", c->pid, tid_of((int32_t)r),
                           json_pack("{s:s}", "name", text_of(c, resource->name))));
        emit(out, metadata("thread_sort_index", c->pid, tid_of((int32_t)r),
                           json_pack("{s:i}", "sort_index", (int)(resource->kind * 10000 + r))));
    }
}

static const char *category_of(const rv_task *task)
{
    switch (task->kind) {
    case RV_TASK_KERNEL: case RV_TASK_COMM: return "kernel";
    case RV_TASK_MEMCPY: return "gpu_memcpy";
    case RV_TASK_MEMSET: return "gpu_memset";
    case RV_TASK_DATALOAD: return "user_annotation";
    default: return "cuda_runtime";
    }
}

/* The correlation id a task carries in this file, or -1. */
static int64_t correlation_of(const run_context *c, int32_t id)
{
    const rv_task *task = task_at(c->graph, id);
    if (task->correlation >= 0) return c->id_offset + task->correlation;
    if (task->flags & RV_TASK_FLAG_INSERTED) return c->id_offset + INSERTED_CORRELATION + id;
    return -1;
}

static json_t *complete_event(const char *category, const char *name, int64_t pid, int64_t tid, int64_t begin,
                              int64_t end, json_t *args)
{
    return json_pack("{s:s,s:s,s:s,s:I,s:I,s:f,s:f,s:o}", "ph", "X", "cat", category, "name", name, "pid",
                     (json_int_t)pid, "tid", (json_int_t)tid, "ts", us(begin), "dur", us(end - begin), "args", args);
}

static void add_tags(json_t *args, const run_context *c, const rv_task *task)
{
    const rv_graph *graph = c->graph;
    json_object_set_new(args, "layer", json_string(text_of(c, task->layer)));
    json_object_set_new(args, "phase", json_string(rv_phase_name(task->phase)));
    json_object_set_new(args, "step", json_string(task->step >= 0 && (guint)task->step < graph->steps->len
                                                      ? text_of(c, g_array_index(graph->steps, rv_step, task->step).name)
                                                      : ""));
}

/* args.change and the other run's duration, when a plugin touched the task. */
static void mark_change(const run_context *c, int32_t id, json_t *event)
{
    const rv_task *task = task_at(c->graph, id);
    json_t *args = json_object_get(event, "args");
    const char *change = NULL;
    const rv_graph *other = c->run->other;
    if (task->flags & RV_TASK_FLAG_INSERTED) {
        change = "inserted";
    } else if (other && id < rv_graph_task_count(other)) {
        const rv_task *then = task_at(other, id);
        if (then->flags & RV_TASK_FLAG_REMOVED) change = "removed";
        else if (then->duration_ns != task->duration_ns || then->host_overhead_ns != task->host_overhead_ns) {
            change = "changed";
            char *key = g_strdup_printf("%s_dur_us", c->run->other_label ? c->run->other_label : "other");
            json_object_set_new(args, key, json_real(us(then->duration_ns)));
            g_free(key);
        }
    }
    if (change == NULL) return;
    json_object_set_new(args, "change", json_string(change));
    /* chrome://tracing colours by cname; Perfetto shows args.change */
    json_object_set_new(event, "cname", json_string(strcmp(change, "inserted") == 0 ? "good"
                                                    : strcmp(change, "removed") == 0 ? "terrible" : "yellow"));
}

static void emit_task(writer *out, const run_context *c, int32_t id)
{
    const rv_graph *graph = c->graph;
    const rv_task *task = task_at(graph, id);
    const rv_resource *resource = &g_array_index(graph->resources, rv_resource, task->resource);
    json_t *args = json_object();
    int64_t correlation = correlation_of(c, id);
    if (correlation >= 0) json_object_set_new(args, "correlation", json_integer(correlation));
    if (c->external_id[id] >= 0) json_object_set_new(args, "External id", json_integer(c->external_id[id]));
    if (task->flags & RV_TASK_FLAG_GPU) {
        json_object_set_new(args, "device", json_integer(resource->process));
        json_object_set_new(args, "stream", json_integer(resource->thread));
    }
    if (task->bytes > 0) json_object_set_new(args, "bytes", json_integer(task->bytes));
    if (task->host_overhead_ns > 0) json_object_set_new(args, "host_overhead_us", json_real(us(task->host_overhead_ns)));
    add_tags(args, c, task);
    json_object_set_new(args, "kind", json_string(rv_task_kind_name(task->kind)));
    json_object_set_new(args, "reverie_task", json_integer(id));
    if (c->critical && c->critical[id]) json_object_set_new(args, "critical", json_integer(1));
    json_t *event = complete_event(category_of(task), text_of(c, task->name), c->pid, tid_of(task->resource),
                                   c->sim->start_ns[id], c->sim->end_ns[id], args);
    mark_change(c, id, event);
    emit(out, event);
}

/* The operators of one CPU thread: consecutive calls of one operator with
 * no idle time between them become one cpu_op over their host overheads
 * and runs.  Step markers and idle time end an operator. */
static void emit_thread_ops(writer *out, run_context *c, GArray *order, int64_t *next_op_id)
{
    const rv_graph *graph = c->graph;
    int32_t first = -1, last = -1;
    for (guint k = 0; k <= order->len; k++) {
        int32_t id = k < order->len ? g_array_index(order, int32_t, k) : -1;
        const rv_task *task = id >= 0 ? task_at(graph, id) : NULL;
        gboolean joins = task && last >= 0 && task->kind == RV_TASK_CPU && task->op == task_at(graph, last)->op &&
                         rv_busy_from(graph, c->sim, id) == c->sim->end_ns[last];
        if (joins) {
            c->external_id[id] = *next_op_id;
            last = id;
            continue;
        }
        if (first >= 0) {
            const rv_task *head = task_at(graph, first);
            json_t *args = json_pack("{s:I}", "External id", (json_int_t)*next_op_id);
            add_tags(args, c, head);
            emit(out, complete_event("cpu_op", text_of(c, head->op), c->pid, tid_of(head->resource),
                                     rv_busy_from(graph, c->sim, first), c->sim->end_ns[last], args));
            (*next_op_id)++;
        }
        first = last = -1;
        if (task && task->kind == RV_TASK_CPU && task->op != 0) {
            first = last = id;
            c->external_id[id] = *next_op_id;
        }
    }
}

static void emit_ops(writer *out, run_context *c)
{
    GPtrArray *by_resource = rv_tasks_by_resource(c->graph, c->sim);
    int64_t next_op_id = c->id_offset + 1;
    for (guint r = 0; r < by_resource->len; r++)
        if (g_array_index(c->graph->resources, rv_resource, r).kind == RV_RES_CPU_THREAD)
            emit_thread_ops(out, c, g_ptr_array_index(by_resource, r), &next_op_id);
    g_ptr_array_unref(by_resource);
    /* a GPU task belongs to its launch call's operator */
    const rv_edge *edges = (const rv_edge *)c->graph->edges->data;
    for (guint e = 0; e < c->graph->edges->len; e++)
        if (edges[e].kind == RV_EDGE_LAUNCH && c->external_id[edges[e].to] < 0)
            c->external_id[edges[e].to] = c->external_id[edges[e].from];
}

static void emit_steps(writer *out, const run_context *c)
{
    const rv_graph *graph = c->graph;
    for (guint s = 0; s < graph->steps->len; s++) {
        const rv_step *step = &g_array_index(graph->steps, rv_step, s);
        int64_t begin = c->sim->start_ns[step->begin_marker], end = c->sim->end_ns[step->end_marker];
        if (begin < 0 || end < begin) continue;
        json_t *args = json_pack("{s:s}", "step", text_of(c, step->name));
        emit(out, complete_event("user_annotation", text_of(c, step->name), c->pid,
                                 tid_of(task_at(graph, step->begin_marker)->resource), begin, end, args));
    }
}

static void emit_flow(writer *out, const run_context *c, const char *category, int64_t id, int32_t from, int32_t to)
{
    const rv_task *source = task_at(c->graph, from), *target = task_at(c->graph, to);
    emit(out, json_pack("{s:s,s:I,s:I,s:I,s:f,s:s,s:s}", "ph", "s", "id", (json_int_t)id, "pid", (json_int_t)c->pid,
                        "tid", (json_int_t)tid_of(source->resource), "ts", us(c->sim->start_ns[from]), "cat", category,
                        "name", category));
    emit(out, json_pack("{s:s,s:I,s:I,s:I,s:f,s:s,s:s,s:s}", "ph", "f", "id", (json_int_t)id, "pid", (json_int_t)c->pid,
                        "tid", (json_int_t)tid_of(target->resource), "ts", us(c->sim->start_ns[to]), "cat", category,
                        "name", category, "bp", "e"));
}

static gboolean in_span(const run_context *c, int32_t id)
{
    int64_t start = c->sim->start_ns[id], end = c->sim->end_ns[id];
    return start >= 0 && start <= c->to_ns && (end > c->from_ns || start >= c->from_ns);
}

static gboolean shown(const run_context *c, int32_t id)
{
    return in_span(c, id) && !(task_at(c->graph, id)->flags & RV_TASK_FLAG_REMOVED) &&
           task_at(c->graph, id)->kind != RV_TASK_MARKER;
}

/* The steps' span on the run's timeline (a graph without steps: all of it). */
static void find_span(run_context *c)
{
    GArray *windows = rv_step_windows(c->graph, c->sim);
    c->from_ns = G_MININT64;
    c->to_ns = G_MAXINT64;
    if (windows->len > 0 && c->graph->steps->len > 0) {
        c->from_ns = g_array_index(windows, rv_window, 0).begin_ns;
        c->to_ns = g_array_index(windows, rv_window, windows->len - 1).end_ns;
    }
    g_array_unref(windows);
}

/* Launches as Kineto's ac2g flows; every other dependency between two
 * tracks under its edge kind's name. */
static void emit_edge_flows(writer *out, const run_context *c)
{
    const rv_edge *edges = (const rv_edge *)c->graph->edges->data;
    for (guint e = 0; e < c->graph->edges->len; e++) {
        const rv_edge *edge = &edges[e];
        if (!shown(c, edge->from) || !shown(c, edge->to)) continue;
        if (task_at(c->graph, edge->from)->resource == task_at(c->graph, edge->to)->resource) continue;
        if (edge->kind == RV_EDGE_LAUNCH && correlation_of(c, edge->to) >= 0)
            emit_flow(out, c, "ac2g", correlation_of(c, edge->to), edge->from, edge->to);
        else if (edge->kind != RV_EDGE_THREAD && edge->kind != RV_EDGE_STREAM)
            emit_flow(out, c, rv_edge_kind_name(edge->kind), c->id_offset + EDGE_FLOW + e, edge->from, edge->to);
    }
}

static void emit_critical_flows(writer *out, const run_context *c)
{
    if (c->run->critical == NULL) return;
    int64_t number = 0;
    for (guint s = 0; s < c->run->critical->steps->len; s++) {
        GArray *links = g_array_index(c->run->critical->steps, rv_step_path, s).links;
        for (guint i = 1; i < links->len; i++) {
            int32_t from = g_array_index(links, rv_path_link, i - 1).task, to = g_array_index(links, rv_path_link, i).task;
            if (shown(c, from) && shown(c, to) && task_at(c->graph, from)->resource != task_at(c->graph, to)->resource)
                emit_flow(out, c, "critical_path", c->id_offset + CRITICAL_FLOW + number++, from, to);
        }
    }
}

static json_t *emit_run(writer *out, const rv_timeline_run *run, guint index)
{
    int32_t n = rv_graph_task_count(run->graph);
    run_context c = { run, run->graph, run->sim, (int64_t)index + 1, (int64_t)index << RUN_ID_SHIFT, 0, 0, 0, NULL, NULL,
                      { NULL, NULL, 0 } };
    find_span(&c);
    rv_bounded_strings_init(&c.names, run->graph->strings);
    c.critical = run->critical ? rv_critical_path_members(run->critical, n) : NULL;
    c.external_id = g_new(int64_t, n);
    for (int32_t t = 0; t < n; t++) c.external_id[t] = -1;
    emit_tracks(out, &c, index);
    emit_ops(out, &c);
    emit_steps(out, &c);
    uint64_t written = 0;
    for (int32_t t = 0; t < n && !out->failed; t++) {
        const rv_task *task = task_at(c.graph, t);
        if (c.sim->start_ns[t] < 0 || (task->flags & RV_TASK_FLAG_REMOVED) || task->kind == RV_TASK_MARKER) continue;
        if (shown(&c, t)) {
            emit_task(out, &c, t);
            written++;
        } else {
            c.left_out++;
        }
    }
    emit_edge_flows(out, &c);
    emit_critical_flows(out, &c);
    g_free(c.critical);
    g_free(c.external_id);
    rv_bounded_strings_clear(&c.names);
    return json_pack("{s:s,s:I,s:I,s:I,s:f,s:f}", "label", run->label, "pid", (json_int_t)c.pid, "tasks",
                     (json_int_t)written, "tasks_outside_steps", (json_int_t)c.left_out, "steps_begin_us",
                     c.from_ns == G_MININT64 ? 0.0 : us(c.from_ns), "steps_end_us",
                     c.to_ns == G_MAXINT64 ? 0.0 : us(c.to_ns));
}

/* The top-level fields a Kineto trace has, before traceEvents. */
static void write_header(writer *out, const rv_graph *graph)
{
    json_t *devices = json_array();
    char *scratch = NULL;
    for (guint i = 0; i < graph->device_names->len; i++) {
        const char *name = rv_bounded_name(g_ptr_array_index(graph->device_names, i), &scratch);
        json_array_append_new(devices, json_pack("{s:i,s:s}", "id", (int)i, "name", name));
        g_free(scratch);
    }
    /* first, so that reverie refuses the file as input at its first key */
    json_t *head = json_pack("{s:s,s:i,s:s,s:s,s:o}", "reverie_timeline", REVERIE_VERSION, "schemaVersion", 1,
                             "displayTimeUnit", "ns", "traceName", rv_bounded_name(graph->source, &scratch),
                             "deviceProperties", devices);
    g_free(scratch);
    if (graph->rank >= 0)
        json_object_set_new(head, "distributedInfo",
                            json_pack("{s:I,s:I,s:s}", "rank", (json_int_t)graph->rank, "world_size",
                                      (json_int_t)MAX(graph->world_size, 1), "backend",
                                      graph->backend ? graph->backend : ""));
    char *text = json_dumps(head, JSON_COMPACT);
    text[strlen(text) - 1] = '\0'; /* leave the object open for traceEvents */
    write_text(out, text);
    write_text(out, ",\"traceEvents\":[\n");
    free(text);
    json_decref(head);
}

static gboolean open_writer(writer *out, const char *path, GError **error)
{
    memset(out, 0, sizeof *out);
    out->first_event = TRUE;
    out->output = rv_output_open(path, RV_OUTPUT_REPLACE, error);
    if (out->output == NULL) return FALSE;
    out->file = rv_output_stream(out->output);
    if (!g_str_has_suffix(path, ".gz")) return TRUE;
    out->gz = g_new0(z_stream, 1);
    /* 15 + 16: a gzip header and trailer, as gzip(1) writes */
    if (deflateInit2(out->gz, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK) return TRUE;
    g_set_error(error, RV_ERROR, RV_ERROR_INTERNAL, "%s: cannot start gzip compression", path);
    g_clear_pointer(&out->gz, g_free);
    rv_output_abort(out->output);
    return FALSE;
}

static gboolean close_writer(writer *out, const char *path, GError **error)
{
    if (out->gz) {
        if (!out->failed && !deflate_into(out, "", 0, Z_FINISH)) out->failed = TRUE;
        deflateEnd(out->gz);
        g_free(out->gz);
    }
    /* a failed write of the stream is named by the writer, with its cause */
    if (!out->failed || ferror(out->file)) return rv_output_commit(out->output, error);
    rv_output_abort(out->output);
    g_set_error(error, RV_ERROR, RV_ERROR_INTERNAL, "%s: the timeline could not be encoded", path);
    return FALSE;
}

gboolean rv_timeline_write(const char *path, const rv_timeline_run *runs, guint count, GError **error)
{
    writer out;
    if (count == 0 || !open_writer(&out, path, error)) return count == 0;
    write_header(&out, runs[0].graph);
    json_t *summary = json_array();
    for (guint i = 0; i < count && !out.failed; i++) json_array_append_new(summary, emit_run(&out, &runs[i], i));
    /* what reverie left out, after the events (key order is free in JSON) */
    write_text(&out, "\n],\"reverie\":");
    json_dump_callback(summary, write_bytes, &out, JSON_COMPACT);
    json_decref(summary);
    write_text(&out, "}\n");
    return close_writer(&out, path, error);
}
