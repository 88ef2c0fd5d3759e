/*
 * trace.c - rv_trace_load: read a trace and decide whether it is one.
 *
 * reader.c does the streaming; this file owns the rv_trace object and the
 * checks that need the whole file: an empty event list, or a file made of
 * flows that point nowhere, is not a trace we can simulate.
 */
#include "import.h"
#include <string.h>

gboolean rv_import_stream(rv_trace *trace, rv_input *input, const rv_import_options *options, GError **error);

static const char *const event_kind_names[RV_EV_KIND_COUNT] = {
    "cpu_op", "user_annotation", "python_function", "runtime", "kernel",
    "memcpy", "memset", "cuda_sync", "flow_start", "flow_end", "memory",
};

const char *rv_event_kind_name(rv_event_kind kind)
{
    return kind < RV_EV_KIND_COUNT ? event_kind_names[kind] : "?";
}

static gboolean has_complete_event(const rv_trace *trace)
{
    for (guint i = 0; i < trace->events->len; i++) {
        const rv_event *event = &g_array_index(trace->events, rv_event, i);
        if (event->kind != RV_EV_FLOW_START && event->kind != RV_EV_FLOW_END && event->kind != RV_EV_MEMORY)
            return TRUE;
    }
    return FALSE;
}

/* Flow ends whose start is missing (or the reverse).  Real traces have some
 * (the profiler drops the start of launches it did not record), so this only
 * decides between "untidy" and "nothing but dangling flows". */
static guint count_unpaired_flows(const rv_trace *trace)
{
    GHashTable *open = g_hash_table_new(g_int64_hash, g_int64_equal);
    guint unpaired = 0;
    for (guint i = 0; i < trace->events->len; i++) {
        rv_event *event = &g_array_index(trace->events, rv_event, i);
        if (event->kind != RV_EV_FLOW_START && event->kind != RV_EV_FLOW_END)
            continue;
        gpointer key = &event->flow_id;
        if (g_hash_table_contains(open, key)) g_hash_table_remove(open, key);
        else g_hash_table_add(open, key);
    }
    unpaired = g_hash_table_size(open);
    g_hash_table_destroy(open);
    return unpaired;
}

static gboolean validate(rv_trace *trace, GError **error)
{
    if (trace->stats.events_total == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                    "%s: byte %" G_GUINT64_FORMAT " (end of file): \"traceEvents\" is empty - "
                    "the profiler recorded nothing", trace->source, trace->stats.bytes_uncompressed);
        return FALSE;
    }
    if (!has_complete_event(trace)) {
        guint unpaired = trace->events->len ? count_unpaired_flows(trace) : 0;
        if (unpaired > 0)
            g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                        "%s: byte %" G_GUINT64_FORMAT " (end of file): no complete (ph \"X\") "
                        "events, and %u flow events without partners - nothing to simulate",
                        trace->source, trace->stats.bytes_uncompressed, unpaired);
        else if (trace->stats.unmodelled_backend > 0)
            g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                        "%s: nothing to simulate: %" G_GUINT64_FORMAT " of its events belong to a device backend "
                        "reverie does not model (" RV_UNMODELLED_BACKENDS "), and none is of a category it models",
                        trace->source, trace->stats.unmodelled_backend);
        else
            g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                        "%s: byte %" G_GUINT64_FORMAT " (end of file): none of the %" G_GUINT64_FORMAT
                        " events is a complete (ph \"X\") event of a known category - nothing to simulate",
                        trace->source, trace->stats.bytes_uncompressed, trace->stats.events_total);
        return FALSE;
    }
    for (guint i = 0; i < trace->events->len; i++) {
        if (g_array_index(trace->events, rv_event, i).schema_legacy) {
            trace->legacy_schema = TRUE;
            break;
        }
    }
    return TRUE;
}

rv_trace *rv_trace_load_input(rv_input *input, rv_strings *strings, const rv_import_options *options,
                              GError **error)
{
    rv_trace *trace = g_new0(rv_trace, 1);
    trace->source = g_strdup(rv_input_name(input));
    trace->strings = strings ? rv_strings_ref(strings) : rv_strings_new();
    trace->events = g_array_new(FALSE, FALSE, sizeof(rv_event));
    trace->device_names = g_ptr_array_new_with_free_func(g_free);
    trace->rank = trace->world_size = -1;
    if (!rv_import_stream(trace, input, options, error) || !validate(trace, error)) {
        rv_trace_free(trace);
        return NULL;
    }
    return trace;
}

rv_trace *rv_trace_load(const char *path, rv_strings *strings, const rv_import_options *options,
                        GError **error)
{
    rv_input *input = rv_input_open(path, options ? options->read_timeout_ms : 0, error);
    if (input == NULL) return NULL;
    rv_trace *trace = rv_trace_load_input(input, strings, options, error);
    rv_input_close(input);
    return trace;
}

void rv_trace_free(rv_trace *trace)
{
    if (trace == NULL) return;
    g_free(trace->source);
    if (trace->strings) rv_strings_free(trace->strings);
    g_array_unref(trace->events);
    g_ptr_array_free(trace->device_names, TRUE);
    g_free(trace->backend);
    g_free(trace);
}
