/*
 * event.c - one Kineto JSON event (a jansson object) to one rv_event.
 *
 * This is where the two schemas meet.  The modern schema (PyTorch >= 1.10)
 * and the 2021 legacy one differ in category spellings ("kernel"/"Kernel",
 * "cuda_runtime"/"Runtime", "cpu_op"/"Operator"), in the external-id key
 * ("External id"/"external id") and in thread ids (numbers/strings).  After
 * this file nothing downstream knows which schema a trace used.
 *
 * The caller holds no lock; interning is thread-safe.
 */
#include "import.h"
#include "reverie/checked.h"
#include <math.h>
#include <string.h>

typedef struct {
    const char *category;
    int kind;       /* rv_event_kind, or -1 to ignore */
    gboolean legacy;
} category_entry;

static const category_entry categories[] = {
    { "cpu_op", RV_EV_CPU_OP, FALSE },
    { "user_annotation", RV_EV_USER_ANNOTATION, FALSE },
    { "python_function", RV_EV_PYTHON_FUNCTION, FALSE },
    { "cuda_runtime", RV_EV_RUNTIME, FALSE },
    { "cuda_driver", RV_EV_RUNTIME, FALSE },
    { "kernel", RV_EV_KERNEL, FALSE },
    { "gpu_memcpy", RV_EV_MEMCPY, FALSE },
    { "gpu_memset", RV_EV_MEMSET, FALSE },
    { "cuda_sync", RV_EV_CUDA_SYNC, FALSE },
    { "Operator", RV_EV_CPU_OP, TRUE },
    { "Runtime", RV_EV_RUNTIME, TRUE },
    { "Kernel", RV_EV_KERNEL, TRUE },
    { "Memcpy", RV_EV_MEMCPY, TRUE },
    { "Memset", RV_EV_MEMSET, TRUE },
};

/* Kineto's category prefixes for device backends other than CUDA and ROCm
 * (which use "kernel", "gpu_memcpy", "cuda_runtime"...). */
static const char *const unmodelled_backend_prefixes[] = {
    "mtia_", "hpu_", "xpu_", "mlu_", "gcu_", "privateuse1_",
};

static gboolean is_unmodelled_backend(const char *category)
{
    for (gsize i = 0; i < G_N_ELEMENTS(unmodelled_backend_prefixes); i++)
        if (g_str_has_prefix(category, unmodelled_backend_prefixes[i])) return TRUE;
    return FALSE;
}

static const char *json_type_name(const json_t *value)
{
    switch (json_typeof(value)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE: case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

static gboolean field_error(event_context *ctx, const char *field, const char *expected,
                            const json_t *value)
{
    g_set_error(ctx->error, RV_ERROR, RV_ERROR_INPUT,
                "%s: event #%u (byte %" G_GUINT64_FORMAT "): field \"%s\" must be %s, not %s",
                ctx->path, ctx->file_index, ctx->byte_offset, field, expected,
                json_type_name(value));
    return FALSE;
}

/* Microseconds (int or float) to integer nanoseconds without losing the
 * integer part to double rounding at epoch-sized timestamps. */
static int64_t us_to_ns(double us)
{
    double whole = floor(us);
    return (int64_t)whole * 1000 + (int64_t)llround((us - whole) * 1000.0);
}

static gboolean read_time(event_context *ctx, json_t *object, const char *field,
                          gboolean required, int64_t *out_ns, gboolean *present)
{
    json_t *value = json_object_get(object, field);
    *present = value != NULL;
    if (value == NULL) {
        if (required) {
            g_set_error(ctx->error, RV_ERROR, RV_ERROR_INPUT,
                        "%s: event #%u (byte %" G_GUINT64_FORMAT "): missing field \"%s\"",
                        ctx->path, ctx->file_index, ctx->byte_offset, field);
            return FALSE;
        }
        return TRUE;
    }
    if (!json_is_number(value))
        return field_error(ctx, field, "a number of microseconds", value);
    double us = json_number_value(value);
    /* Bounds that keep ts + dur, and the difference of any two times, inside
     * int64 nanoseconds: timestamps within +-4e15 us (epoch microseconds
     * until 2096), durations up to 1e12 us (11 days). */
    if (!isfinite(us) || fabs(us) > (strcmp(field, "dur") == 0 ? 1.0e12 : 4.0e15)) {
        g_set_error(ctx->error, RV_ERROR, RV_ERROR_INPUT,
                    "%s: event #%u (byte %" G_GUINT64_FORMAT "): field \"%s\" is out of range (%g)",
                    ctx->path, ctx->file_index, ctx->byte_offset, field, us);
        return FALSE;
    }
    *out_ns = us_to_ns(us);
    return TRUE;
}

/* An integer argument; absent or null gives -1.  Reals with an integral
 * value are accepted (some exporters write 7.0), and so are numeric strings,
 * decimal or hex: ROCm writes "stream": "0x0".  Args are vendor-defined, so
 * a string that is not a number counts as absent rather than as an error. */
static gboolean read_int(event_context *ctx, json_t *object, const char *field, int64_t *out)
{
    json_t *value = json_object_get(object, field);
    *out = -1;
    if (value == NULL || json_is_null(value))
        return TRUE;
    if (json_is_integer(value)) {
        *out = json_integer_value(value);
        return TRUE;
    }
    if (json_is_real(value) && fabs(json_real_value(value)) < 9.0e18) {
        *out = (int64_t)json_real_value(value);
        return TRUE;
    }
    if (json_is_string(value)) {
        const char *text = json_string_value(value);
        char *end = NULL;
        gint64 number = g_ascii_strtoll(text, &end, 0);
        if (end != text && *end == '\0') *out = number;
        return TRUE;
    }
    return field_error(ctx, field, "an integer", value);
}

/* pid and tid: numbers, numeric strings ("25738"), or labels ("stream 7",
 * "Spans").  Labels become negative ids so they never collide with real ones. */
static gboolean read_id(event_context *ctx, json_t *object, const char *field, int64_t *out)
{
    json_t *value = json_object_get(object, field);
    *out = 0;
    if (value == NULL || json_is_null(value))
        return TRUE;
    if (json_is_integer(value)) {
        *out = json_integer_value(value);
        return TRUE;
    }
    if (json_is_real(value)) {
        if (!(fabs(json_real_value(value)) < 9.0e18))
            return field_error(ctx, field, "an integer id", value);
        *out = (int64_t)json_real_value(value);
        return TRUE;
    }
    if (json_is_string(value)) {
        const char *text = json_string_value(value);
        char *end = NULL;
        gint64 number = g_ascii_strtoll(text, &end, 10);
        if (end != text && *end == '\0') {
            *out = number;
            return TRUE;
        }
        *out = -(int64_t)1000000000 - rv_strings_intern(ctx->strings, text);
        return TRUE;
    }
    return field_error(ctx, field, "a number or a string", value);
}

static int category_kind(const char *category, gboolean *legacy)
{
    for (gsize i = 0; i < G_N_ELEMENTS(categories); i++) {
        if (strcmp(categories[i].category, category) == 0) {
            *legacy = categories[i].legacy;
            return categories[i].kind;
        }
    }
    return -1;
}

static rv_sync_kind sync_kind_of(const char *text)
{
    if (text == NULL) return RV_SYNC_NONE;
    if (strcmp(text, "Stream Sync") == 0) return RV_SYNC_STREAM;
    if (strcmp(text, "Context Sync") == 0) return RV_SYNC_CONTEXT;
    if (strcmp(text, "Event Sync") == 0) return RV_SYNC_EVENT;
    if (strcmp(text, "Stream Wait Event") == 0) return RV_SYNC_STREAM_WAIT_EVENT;
    return RV_SYNC_NONE;
}

/*
 * Intern the text of an array-valued field exactly as written, without
 * white space.  Printing it back with json_dumps cost more than parsing the
 * whole event; jansson has already checked that the value is a valid array.
 */
static int32_t intern_raw_array(event_context *ctx, const char *quoted_key)
{
    const char *text = ctx->text, *end = text + ctx->text_length;
    const char *at = g_strstr_len(text, (gssize)ctx->text_length, quoted_key);
    if (at == NULL) return -1;
    at = memchr(at, '[', (size_t)(end - at));
    if (at == NULL) return -1;
    GString *compact = g_string_sized_new(64);
    int depth = 0;
    gboolean in_string = FALSE, escaped = FALSE;
    for (; at < end; at++) {
        char c = *at;
        if (!in_string && (c == ' ' || c == '\n' || c == '\t' || c == '\r')) continue;
        g_string_append_c(compact, c);
        if (in_string) {
            if (escaped) escaped = FALSE;
            else if (c == '\\') escaped = TRUE;
            else if (c == '"') in_string = FALSE;
        } else if (c == '"') in_string = TRUE;
        else if (c == '[') depth++;
        else if (c == ']' && --depth == 0) break;
    }
    int32_t id = rv_strings_intern(ctx->strings, compact->str);
    g_string_free(compact, TRUE);
    return id;
}

static gboolean out_of_range(event_context *ctx, const char *field, int64_t value, const char *range)
{
    g_set_error(ctx->error, RV_ERROR, RV_ERROR_INPUT,
                "%s: event #%u (byte %" G_GUINT64_FORMAT "): field \"%s\" is out of range (%" G_GINT64_FORMAT
                "; expected %s)", ctx->path, ctx->file_index, ctx->byte_offset, field, value, range);
    return FALSE;
}

/* CUPTI writes "all streams" (a context synchronize) as the unsigned 32-bit
 * 4294967295: that is -1, "unknown", like a missing id.  Other ids are kept
 * whole, in stream and wait_on_stream alike, so that the two still match. */
static gboolean read_stream(event_context *ctx, json_t *args, const char *field, int64_t *out)
{
    int64_t value = -1;
    if (!read_int(ctx, args, field, &value)) return FALSE;
    if (value == (int64_t)G_MAXUINT32) value = -1;
    if (value < -1) return out_of_range(ctx, field, value, "a stream id >= 0");
    *out = value;
    return TRUE;
}

/* The args PyTorch writes about a collective (kineto's ParamCommsUtils
 * keys), kept as one interned JSON text; the graph builder reads it. */
static const char *const comm_keys[] = {
    "Collective name", "Process Group Name", "Process Group Description", "Process Group Ranks", "Group size",
    "Seq", "In msg nelems", "Out msg nelems", "dtype", "Src Rank", "Dst Rank",
};

static int append_to_string(const char *buffer, size_t size, void *data)
{
    g_string_append_len(data, buffer, (gssize)size);
    return 0;
}

int32_t rv_import_intern_json(event_context *ctx, json_t *value, size_t flags)
{
    /* Into a GString: jansson allocates from the reader's arena here, and
     * what json_dumps returned would need the arena's own free. */
    GString *text = g_string_new(NULL);
    int32_t id = -1;
    if (json_dump_callback(value, append_to_string, text, JSON_COMPACT | flags) == 0)
        id = rv_strings_intern(ctx->strings, text->str);
    g_string_free(text, TRUE);
    return id;
}

static gboolean is_comm_operator(const event_context *ctx, const rv_event *event)
{
    if (event->kind != RV_EV_CPU_OP && event->kind != RV_EV_USER_ANNOTATION) return FALSE;
    const char *name = rv_strings_get(ctx->strings, event->name);
    return g_str_has_prefix(name, "c10d::") || strcmp(name, "record_param_comms") == 0;
}

static void read_comm_args(event_context *ctx, json_t *args, rv_event *event)
{
    gboolean operator = is_comm_operator(ctx, event);
    if (event->kind != RV_EV_KERNEL && !operator) return;
    gboolean any = FALSE; /* most kernels carry none: look before allocating */
    for (gsize k = 0; k < G_N_ELEMENTS(comm_keys) && !any; k++) any = json_object_get(args, comm_keys[k]) != NULL;
    if (!any && !operator) return;
    json_t *kept = json_object();
    for (gsize k = 0; k < G_N_ELEMENTS(comm_keys); k++) {
        json_t *value = json_object_get(args, comm_keys[k]);
        if (value != NULL && !json_is_null(value)) json_object_set(kept, comm_keys[k], value);
    }
    json_t *types = json_object_get(args, "Input type"), *dims = json_object_get(args, "Input Dims");
    if (json_object_size(kept) > 0 || operator) {
        /* the oldest traces say only which c10d operator it was, and its shapes */
        if (operator) json_object_set_new(kept, "Operator", json_string(rv_strings_get(ctx->strings, event->name)));
        if (operator && json_is_array(types)) json_object_set(kept, "Input type", types);
        if (operator && json_is_array(dims)) json_object_set(kept, "Input Dims", dims);
        event->comm = rv_import_intern_json(ctx, kept, JSON_SORT_KEYS);
    }
    json_decref(kept);
}

/* The product of a [x, y, z] launch dimension, or 0 when it is not three
 * positive integers or the product leaves 32 bits: launch figures are
 * vendor-written hints, never worth refusing a trace for. */
static uint32_t launch_extent(json_t *dims)
{
    if (!json_is_array(dims) || json_array_size(dims) == 0 || json_array_size(dims) > 3) return 0;
    uint64_t product = 1;
    size_t i;
    json_t *value;
    json_array_foreach(dims, i, value) {
        if (!json_is_integer(value) || json_integer_value(value) <= 0 || json_integer_value(value) > G_MAXUINT32) return 0;
        product *= (uint64_t)json_integer_value(value);
        if (product > G_MAXUINT32) return 0;
    }
    return (uint32_t)product;
}

static uint32_t launch_count(json_t *value)
{
    if (!json_is_integer(value) || json_integer_value(value) < 0 || json_integer_value(value) > G_MAXUINT32) return 0;
    return (uint32_t)json_integer_value(value);
}

/* A kernel's grid, block, registers per thread and shared memory (Kineto's
 * args; CUPTI fills all four, roctracer the grid and block). */
static void read_launch(json_t *args, rv_event *event)
{
    event->launch_blocks = launch_extent(json_object_get(args, "grid"));
    event->launch_threads = launch_extent(json_object_get(args, "block"));
    if (event->launch_blocks == 0 || event->launch_threads == 0) event->launch_blocks = event->launch_threads = 0;
    event->launch_registers = launch_count(json_object_get(args, "registers per thread"));
    event->launch_shared_bytes = launch_count(json_object_get(args, "shared memory"));
}

static gboolean read_args(event_context *ctx, json_t *args, rv_event *event)
{
    int64_t external_id = -1, device = -1, stream = -1;
    if (!read_int(ctx, args, "correlation", &event->correlation)) return FALSE;
    if (!read_int(ctx, args, "External id", &external_id)) return FALSE;
    if (external_id < 0 && !read_int(ctx, args, "external id", &external_id)) return FALSE;
    event->external_id = external_id;
    if (!read_int(ctx, args, "device", &device)) return FALSE;
    if (!read_stream(ctx, args, "stream", &stream)) return FALSE;
    if (!read_int(ctx, args, "bytes", &event->bytes)) return FALSE;
    if (device < -1) return out_of_range(ctx, "device", device, "a device number >= 0");
    if (event->bytes > RV_MAX_BYTES) return out_of_range(ctx, "bytes", event->bytes, "at most 2^53");
    event->device = device;
    event->stream = stream;
    if (event->kind == RV_EV_CUDA_SYNC) {
        json_t *kind = json_object_get(args, "cuda_sync_kind");
        event->sync_kind = sync_kind_of(json_is_string(kind) ? json_string_value(kind) : NULL);
        if (!read_stream(ctx, args, "wait_on_stream", &event->wait_on_stream)) return FALSE;
        if (!read_int(ctx, args, "wait_on_cuda_event_record_corr_id",
                      &event->wait_on_record_correlation)) return FALSE;
    }
    if (event->kind == RV_EV_KERNEL) read_launch(args, event);
    if (event->kind == RV_EV_CPU_OP && json_is_array(json_object_get(args, "Input Dims")))
        event->input_dims = intern_raw_array(ctx, "\"Input Dims\"");
    if (event->kind == RV_EV_CPU_OP)
        event->op_args = rv_import_op_args(ctx, rv_strings_get(ctx->strings, event->name), args);
    read_comm_args(ctx, args, event);
    return TRUE;
}

static void event_init(rv_event *event, const event_context *ctx)
{
    memset(event, 0, sizeof *event);
    event->correlation = event->external_id = event->flow_id = event->bytes = -1;
    event->wait_on_stream = event->wait_on_record_correlation = -1;
    event->input_dims = event->comm = event->op_args = -1;
    event->device = event->stream = -1;
    event->file_index = ctx->file_index;
}

static gboolean read_flow(event_context *ctx, json_t *object, const char *phase,
                          const char *category, rv_event *event, event_outcome *outcome)
{
    gboolean present;
    json_t *id = json_object_get(object, "id");
    event->kind = phase[0] == 's' ? RV_EV_FLOW_START : RV_EV_FLOW_END;
    if (strcmp(category, "fwdbwd") == 0)
        event->flow_category = RV_FLOW_FWDBWD;
    else if (strcmp(category, "ac2g") == 0 || strcmp(category, "async") == 0)
        event->flow_category = RV_FLOW_LAUNCH;
    else
        event->flow_category = RV_FLOW_OTHER;
    if (id == NULL) {
        g_set_error(ctx->error, RV_ERROR, RV_ERROR_INPUT,
                    "%s: event #%u (byte %" G_GUINT64_FORMAT "): flow event has no \"id\"",
                    ctx->path, ctx->file_index, ctx->byte_offset);
        return FALSE;
    }
    if (json_is_integer(id))
        event->flow_id = json_integer_value(id);
    else if (json_is_string(id))
        event->flow_id = rv_strings_intern(ctx->strings, json_string_value(id));
    else
        return field_error(ctx, "id", "an integer or a string", id);
    if (!read_time(ctx, object, "ts", TRUE, &event->ts_ns, &present)) return FALSE;
    if (!read_id(ctx, object, "pid", &event->pid)) return FALSE;
    if (!read_id(ctx, object, "tid", &event->tid)) return FALSE;
    *outcome = EVENT_KEPT;
    return TRUE;
}

static gboolean read_complete(event_context *ctx, json_t *object, const char *category,
                              rv_event *event, event_outcome *outcome)
{
    gboolean legacy = FALSE, has_dur = FALSE, present;
    int kind = category_kind(category, &legacy);
    if (kind < 0) {
        *outcome = strcmp(category, "gpu_user_annotation") == 0 ? EVENT_GPU_ANNOTATION
                   : is_unmodelled_backend(category)           ? EVENT_UNMODELLED_BACKEND
                                                                : EVENT_IGNORED_CATEGORY;
        return TRUE;
    }
    event->kind = (uint8_t)kind;
    event->schema_legacy = (uint8_t)legacy;
    json_t *name = json_object_get(object, "name");
    if (name != NULL && !json_is_string(name))
        return field_error(ctx, "name", "a string", name);
    event->name = rv_strings_intern(ctx->strings, name ? json_string_value(name) : "");
    if (!read_time(ctx, object, "ts", TRUE, &event->ts_ns, &present)) return FALSE;
    if (!read_time(ctx, object, "dur", FALSE, &event->dur_ns, &has_dur)) return FALSE;
    if (!has_dur) {
        *outcome = EVENT_NO_DURATION;
        return TRUE;
    }
    if (event->dur_ns < 0) {
        g_set_error(ctx->error, RV_ERROR, RV_ERROR_INPUT,
                    "%s: event #%u (byte %" G_GUINT64_FORMAT "): negative duration %.3f us",
                    ctx->path, ctx->file_index, ctx->byte_offset, event->dur_ns / 1000.0);
        return FALSE;
    }
    if (!read_id(ctx, object, "pid", &event->pid)) return FALSE;
    if (!read_id(ctx, object, "tid", &event->tid)) return FALSE;
    json_t *args = json_object_get(object, "args");
    if (args != NULL && !json_is_object(args))
        return field_error(ctx, "args", "an object", args);
    if (kind == RV_EV_KERNEL) /* the launch shares the union with cuda_sync's -1s */
        event->launch_blocks = event->launch_threads = event->launch_registers = event->launch_shared_bytes = 0;
    if (args != NULL && !read_args(ctx, args, event))
        return FALSE;
    if (kind == RV_EV_KERNEL || kind == RV_EV_MEMCPY || kind == RV_EV_MEMSET) {
        if (event->device < 0)
            event->device = event->pid >= 0 && event->pid < 4096 ? event->pid : 0;
        /* the legacy schema names the stream only as the tid */
        if (event->stream < 0) event->stream = event->tid;
    }
    *outcome = EVENT_KEPT;
    return TRUE;
}

/* profile_memory=True writes one instant event per allocation and free.
 * Only those on a device are kept: the host's are not GPU memory.  ROCm
 * builds write Device Type 6 (HIP) where CUDA ones write 1. */
static gboolean read_memory(event_context *ctx, json_t *object, rv_event *event, event_outcome *outcome)
{
    gboolean present;
    json_t *args = json_object_get(object, "args");
    if (!json_is_object(args)) return TRUE; /* nothing to count: left as an ignored instant */
    int64_t device_type = -1, device = -1;
    if (!read_int(ctx, args, "Device Type", &device_type)) return FALSE;
    if (!read_int(ctx, args, "Device Id", &device)) return FALSE;
    if (device < 0 && !read_int(ctx, args, "Device", &device)) return FALSE; /* 2021 spelling */
    if (device_type == 0 || device < 0) return TRUE;
    if (device > 4095) return out_of_range(ctx, "Device Id", device, "a device number from 0 to 4095");
    event->kind = RV_EV_MEMORY;
    event->name = rv_strings_intern(ctx->strings, "[memory]");
    event->device = device;
    if (!read_time(ctx, object, "ts", TRUE, &event->ts_ns, &present)) return FALSE;
    if (!read_id(ctx, object, "pid", &event->pid)) return FALSE;
    if (!read_id(ctx, object, "tid", &event->tid)) return FALSE;
    if (!read_int(ctx, args, "Bytes", &event->bytes)) return FALSE;
    if (!read_int(ctx, args, "Total Allocated", &event->total_allocated)) return FALSE;
    if (!read_int(ctx, args, "Total Reserved", &event->total_reserved)) return FALSE;
    if (event->bytes > RV_MAX_BYTES || event->bytes < -RV_MAX_BYTES)
        return out_of_range(ctx, "Bytes", event->bytes, "at most 2^53 either way");
    if (event->total_allocated > RV_MAX_BYTES || event->total_allocated < -1)
        return out_of_range(ctx, "Total Allocated", event->total_allocated, "0 to 2^53");
    if (event->total_reserved > RV_MAX_BYTES || event->total_reserved < -1)
        return out_of_range(ctx, "Total Reserved", event->total_reserved, "0 to 2^53");
    *outcome = EVENT_KEPT;
    return TRUE;
}

gboolean rv_import_convert_event(event_context *ctx, json_t *object, rv_event *event,
                                 event_outcome *outcome)
{
    event_init(event, ctx);
    *outcome = EVENT_IGNORED_PHASE;
    if (!json_is_object(object)) {
        g_set_error(ctx->error, RV_ERROR, RV_ERROR_INPUT,
                    "%s: event #%u (byte %" G_GUINT64_FORMAT "): expected an object, found %s",
                    ctx->path, ctx->file_index, ctx->byte_offset, json_type_name(object));
        return FALSE;
    }
    json_t *phase = json_object_get(object, "ph");
    if (phase == NULL) {
        *outcome = EVENT_NO_PHASE;
        return TRUE;
    }
    if (!json_is_string(phase))
        return field_error(ctx, "ph", "a string", phase);
    json_t *category = json_object_get(object, "cat");
    if (category != NULL && !json_is_string(category))
        return field_error(ctx, "cat", "a string", category);
    const char *ph = json_string_value(phase);
    const char *cat = category ? json_string_value(category) : "";
    if (strcmp(ph, "X") == 0)
        return read_complete(ctx, object, cat, event, outcome);
    if (strcmp(ph, "s") == 0 || strcmp(ph, "f") == 0)
        return read_flow(ctx, object, ph, cat, event, outcome);
    json_t *name = json_object_get(object, "name");
    if (strcmp(ph, "i") == 0 && json_is_string(name) && strcmp(json_string_value(name), "[memory]") == 0)
        return read_memory(ctx, object, event, outcome);
    return TRUE;
}
