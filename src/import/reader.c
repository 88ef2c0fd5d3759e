/*
 * reader.c - stream a Chrome-trace JSON file into rv_events, in parallel.
 *
 * Memory stays near the size of the events, not of the JSON: the file is
 * read (and gunzipped by zlib, which also reads plain files) in 1 MiB blocks.
 * A small scanner walks the top-level object and, inside "traceEvents",
 * finds where each event's JSON text begins and ends without building a
 * tree.  Events are copied into batches of a few MiB; a GThreadPool parses
 * each batch with jansson, one small tree per event, and converts it
 * (event.c).  Batches are joined in file order at the end, so the result is
 * the same whatever the thread count.
 *
 * Invariant: at most max_in_flight batches exist unparsed at a time, which
 * bounds the memory spent on JSON text.
 */
#include "import.h"
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#define READ_BLOCK (1u << 20)
#define BATCH_BYTES (2u << 20)
#define PROGRESS_EVERY (8u << 20)

typedef struct {
    GByteArray *text;        /* the events' JSON, back to back */
    GArray *spans;           /* event_span */
    GArray *events;          /* rv_event, filled by the worker */
    uint32_t first_index;
    rv_trace_stats stats;
    GError *error;
} batch;

typedef struct {
    guint32 offset, length;
    guint64 file_offset;
} event_span;

typedef struct {
    const char *path;
    gzFile file;
    char *buffer;            /* bytes [0, length) loaded; [position, length) unread */
    gsize capacity, length, position;
    guint64 base;            /* file offset of buffer[0] (uncompressed) */
    gboolean eof;
    uint32_t event_index;
    guint64 next_progress;
    GThreadPool *pool;
    GPtrArray *batches;
    batch *current;
    GMutex lock;
    GCond done_cond;
    int in_flight, max_in_flight;
    rv_trace *trace;
    const rv_import_options *options;
    gboolean saw_events_array;
} reader;

/* ---- input ---------------------------------------------------------- */

/* zlib's message, without the "PATH: " it puts in front of it. */
static const char *gz_message(const reader *r, int *code)
{
    const char *message = gzerror(r->file, code);
    gsize length = strlen(r->path);
    if (strncmp(message, r->path, length) == 0 && message[length] == ':' && message[length + 1] == ' ')
        message += length + 2;
    return message;
}

static gboolean fill(reader *r, GError **error)
{
    if (r->eof)
        return TRUE;
    if (r->position > 0 && r->position >= r->length / 2) {
        memmove(r->buffer, r->buffer + r->position, r->length - r->position);
        r->base += r->position;
        r->length -= r->position;
        r->position = 0;
    }
    if (r->capacity - r->length < READ_BLOCK) {
        r->capacity = MAX(r->capacity * 2, r->length + READ_BLOCK);
        r->buffer = g_realloc(r->buffer, r->capacity);
    }
    int got = gzread(r->file, r->buffer + r->length, READ_BLOCK);
    if (got < 0) {
        int code = 0;
        const char *message = gz_message(r, &code);
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                    "%s: cannot decompress after byte %" G_GUINT64_FORMAT ": %s",
                    r->path, r->base + r->length, code == Z_ERRNO ? g_strerror(errno) : message);
        return FALSE;
    }
    if (got == 0) {
        int code = 0;
        const char *message = gz_message(r, &code);
        if (code != Z_OK && code != Z_STREAM_END) {
            g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                        "%s: truncated or corrupt gzip data after %" G_GUINT64_FORMAT
                        " uncompressed bytes: %s", r->path, r->base + r->length, message);
            return FALSE;
        }
        r->eof = TRUE;
    }
    r->length += (gsize)got;
    r->trace->stats.bytes_uncompressed = r->base + r->length;
    return TRUE;
}

static gboolean is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/* The next non-space byte, or '\0' at end of input. */
static gboolean peek(reader *r, char *out, GError **error)
{
    for (;;) {
        while (r->position < r->length && is_space(r->buffer[r->position]))
            r->position++;
        if (r->position < r->length) {
            *out = r->buffer[r->position];
            return TRUE;
        }
        if (r->eof) {
            *out = '\0';
            return TRUE;
        }
        if (!fill(r, error))
            return FALSE;
    }
}

static guint64 here(const reader *r) { return r->base + r->position; }

static gboolean syntax_error(reader *r, const char *what, GError **error)
{
    char found[16];
    if (r->position < r->length) {
        unsigned char c = (unsigned char)r->buffer[r->position];
        g_snprintf(found, sizeof found, g_ascii_isprint(c) ? "'%c'" : "byte 0x%02x", c);
    } else {
        g_strlcpy(found, "end of file", sizeof found);
    }
    g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                "%s: byte %" G_GUINT64_FORMAT " (after event #%u): expected %s, found %s",
                r->path, here(r), r->event_index, what, found);
    return FALSE;
}

/*
 * Find the end of the JSON value starting at r->position, reading more as
 * needed.  Only structure is checked here (strings, brackets); jansson
 * checks the rest when it parses the value.
 */
static gboolean scan_value(reader *r, gsize *end, GError **error)
{
    for (;;) {
        const char *text = r->buffer;
        gsize i = r->position, length = r->length;
        int depth = 0;
        gboolean in_string = FALSE, escaped = FALSE;
        char first = text[i];
        if (first != '{' && first != '[' && first != '"') {
            while (i < length && !is_space(text[i]) && text[i] != ',' && text[i] != ']' &&
                   text[i] != '}')
                i++;
            if (i < length || r->eof) {
                *end = i;
                return i > r->position ? TRUE : syntax_error(r, "a JSON value", error);
            }
        } else {
            for (; i < length; i++) {
                char c = text[i];
                if (in_string) {
                    if (escaped) escaped = FALSE;
                    else if (c == '\\') escaped = TRUE;
                    else if (c == '"') {
                        in_string = FALSE;
                        if (depth == 0) { *end = i + 1; return TRUE; }
                    }
                } else if (c == '"') {
                    in_string = TRUE;
                } else if (c == '{' || c == '[') {
                    depth++;
                } else if (c == '}' || c == ']') {
                    if (--depth == 0) { *end = i + 1; return TRUE; }
                    if (depth < 0) break;
                }
            }
            if (r->eof || depth < 0) {
                gsize at = r->position;
                r->position = length;
                g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                            "%s: unexpected end of file at byte %" G_GUINT64_FORMAT
                            ": the value starting at byte %" G_GUINT64_FORMAT
                            " (event #%u) is incomplete - is the file truncated?",
                            r->path, r->base + length, r->base + at, r->event_index);
                return FALSE;
            }
        }
        if (!fill(r, error))
            return FALSE;
    }
}

/* ---- per-thread arena for jansson ----------------------------------- */

/*
 * Each event is a small tree that lives for microseconds.  Workers point
 * jansson's allocator at a thread-local bump arena and reset it after each
 * event, which removes most malloc/free traffic from the import.  Outside a
 * worker (arena inactive) and for blocks larger than the arena, the
 * functions fall back to malloc/free; free() tells the two apart by address.
 */
#define ARENA_BYTES (256u * 1024u)

typedef struct {
    char *base;
    gsize used;
    gboolean active;
} arena;

static __thread arena thread_arena;
/* Owns each thread's arena block so that GLib frees it when the thread ends. */
static GPrivate arena_memory = G_PRIVATE_INIT(g_free);

static void *arena_malloc(size_t size)
{
    arena *a = &thread_arena;
    size = (size + 15) & ~(size_t)15;
    if (a->active && a->used + size <= ARENA_BYTES) {
        void *block = a->base + a->used;
        a->used += size;
        return block;
    }
    return malloc(size);
}

static void arena_free(void *block)
{
    arena *a = &thread_arena;
    if (block == NULL) return;
    if (a->base != NULL && (char *)block >= a->base && (char *)block < a->base + ARENA_BYTES) return;
    free(block);
}

static void arena_begin(void)
{
    if (thread_arena.base == NULL) {
        thread_arena.base = g_malloc(ARENA_BYTES);
        g_private_set(&arena_memory, thread_arena.base);
    }
    thread_arena.used = 0;
    thread_arena.active = TRUE;
}

static void arena_end(void)
{
    thread_arena.active = FALSE;
    thread_arena.used = 0;
}

static void install_arena_allocator(void)
{
    static gsize installed = 0;
    if (g_once_init_enter(&installed)) {
        json_set_alloc_funcs(arena_malloc, arena_free);
        g_once_init_leave(&installed, 1);
    }
}

/* ---- parallel parsing ---------------------------------------------- */

static batch *batch_new(uint32_t first_index)
{
    batch *b = g_new0(batch, 1);
    b->text = g_byte_array_sized_new(BATCH_BYTES + 4096);
    b->spans = g_array_new(FALSE, FALSE, sizeof(event_span));
    b->first_index = first_index;
    return b;
}

static void batch_free(batch *b)
{
    if (b->text) g_byte_array_unref(b->text);
    if (b->spans) g_array_unref(b->spans);
    if (b->events) g_array_unref(b->events);
    g_clear_error(&b->error);
    g_free(b);
}

static void count_outcome(rv_trace_stats *stats, event_outcome outcome)
{
    switch (outcome) {
    case EVENT_KEPT: stats->events_used++; break;
    case EVENT_NO_PHASE: stats->skipped_no_ph++; break;
    case EVENT_NO_DURATION: stats->skipped_no_duration++; break;
    case EVENT_IGNORED_CATEGORY: stats->ignored_category++; break;
    case EVENT_IGNORED_PHASE: stats->ignored_phase++; break;
    case EVENT_GPU_ANNOTATION: stats->gpu_annotations++; break;
    }
}

static void parse_batch(batch *b, reader *r)
{
    b->events = g_array_sized_new(FALSE, FALSE, sizeof(rv_event), b->spans->len);
    event_context ctx = { r->path, r->trace->strings, 0, 0, &b->error, NULL, 0 };
    arena_begin();
    for (guint i = 0; i < b->spans->len && b->error == NULL; i++) {
        const event_span *span = &g_array_index(b->spans, event_span, i);
        json_error_t json_error;
        ctx.file_index = b->first_index + i;
        ctx.byte_offset = span->file_offset;
        ctx.text = (const char *)b->text->data + span->offset;
        ctx.text_length = span->length;
        thread_arena.used = 0;
        /* Any value, so that a number or string in place of an event gets
         * event.c's "expected an object" rather than a parser message. */
        json_t *object = json_loadb(ctx.text, span->length, JSON_DECODE_ANY, &json_error);
        if (object == NULL) {
            g_set_error(&b->error, RV_ERROR, RV_ERROR_INPUT,
                        "%s: event #%u (byte %" G_GUINT64_FORMAT "): invalid JSON: %s",
                        r->path, ctx.file_index, span->file_offset + (guint64)json_error.position,
                        json_error.text);
            break;
        }
        rv_event event;
        event_outcome outcome;
        if (rv_import_convert_event(&ctx, object, &event, &outcome)) {
            b->stats.events_total++;
            count_outcome(&b->stats, outcome);
            if (outcome == EVENT_KEPT)
                g_array_append_val(b->events, event);
        }
        json_decref(object);
    }
    arena_end();
    g_byte_array_unref(b->text);
    b->text = NULL;
}

static void worker(gpointer data, gpointer user_data)
{
    reader *r = user_data;
    parse_batch(data, r);
    g_mutex_lock(&r->lock);
    r->in_flight--;
    g_cond_signal(&r->done_cond);
    g_mutex_unlock(&r->lock);
}

static void submit_batch(reader *r)
{
    batch *b = r->current;
    r->current = NULL;
    if (b == NULL || b->spans->len == 0) {
        if (b) batch_free(b);
        return;
    }
    g_ptr_array_add(r->batches, b);
    if (r->pool == NULL) {
        parse_batch(b, r);
        return;
    }
    g_mutex_lock(&r->lock);
    while (r->in_flight >= r->max_in_flight)
        g_cond_wait(&r->done_cond, &r->lock);
    r->in_flight++;
    g_mutex_unlock(&r->lock);
    g_thread_pool_push(r->pool, b, NULL);
}

static void add_event_text(reader *r, gsize end)
{
    if (r->current == NULL)
        r->current = batch_new(r->event_index);
    batch *b = r->current;
    event_span span = { b->text->len, (guint32)(end - r->position), here(r) };
    g_byte_array_append(b->text, (const guint8 *)r->buffer + r->position, span.length);
    g_array_append_val(b->spans, span);
    r->position = end;
    r->event_index++;
    if (b->text->len >= BATCH_BYTES)
        submit_batch(r);
    if (r->options && r->options->progress && here(r) >= r->next_progress) {
        r->next_progress = here(r) + PROGRESS_EVERY;
        r->options->progress(here(r), r->event_index, r->options->progress_data);
    }
}

/* ---- structure ------------------------------------------------------ */

static gboolean expect(reader *r, char wanted, const char *what, GError **error)
{
    char c;
    if (!peek(r, &c, error)) return FALSE;
    if (c != wanted) return syntax_error(r, what, error);
    r->position++;
    return TRUE;
}

/* The elements of an array of events; r->position is just past '['. */
static gboolean read_event_array(reader *r, GError **error)
{
    char c;
    r->saw_events_array = TRUE;
    if (!peek(r, &c, error)) return FALSE;
    if (c == ']') { r->position++; return TRUE; }
    for (;;) {
        gsize end;
        if (!peek(r, &c, error)) return FALSE;
        if (c == '\0') return syntax_error(r, "an event", error);
        if (!scan_value(r, &end, error)) return FALSE;
        add_event_text(r, end);
        if (!peek(r, &c, error)) return FALSE;
        if (c == ',') { r->position++; continue; }
        if (c == ']') { r->position++; return TRUE; }
        return syntax_error(r, "',' or ']' between events", error);
    }
}

/* A whole top-level value, parsed with jansson (metadata, small). */
static json_t *read_small_value(reader *r, GError **error)
{
    gsize end;
    if (!scan_value(r, &end, error)) return NULL;
    json_error_t json_error;
    json_t *value = json_loadb(r->buffer + r->position, end - r->position, 0, &json_error);
    if (value == NULL)
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: byte %" G_GUINT64_FORMAT ": invalid JSON: %s",
                    r->path, here(r) + (guint64)json_error.position, json_error.text);
    r->position = end;
    return value;
}

static void read_device_properties(rv_trace *trace, json_t *value)
{
    size_t i;
    json_t *device;
    if (!json_is_array(value)) return;
    json_array_foreach(value, i, device) {
        json_t *name = json_object_get(device, "name");
        g_ptr_array_add(trace->device_names,
                        g_strdup(json_is_string(name) ? json_string_value(name) : "?"));
    }
}

static void read_distributed_info(rv_trace *trace, json_t *value)
{
    if (!json_is_object(value)) return;
    json_t *rank = json_object_get(value, "rank");
    json_t *world = json_object_get(value, "world_size");
    json_t *backend = json_object_get(value, "backend");
    if (json_is_integer(rank)) trace->rank = json_integer_value(rank);
    if (json_is_integer(world)) trace->world_size = json_integer_value(world);
    if (json_is_string(backend)) trace->backend = g_strdup(json_string_value(backend));
}

static gboolean read_member(reader *r, const char *key, GError **error)
{
    char c;
    if (!peek(r, &c, error)) return FALSE;
    if (c == '\0') return syntax_error(r, "a value", error);
    if (strcmp(key, "traceEvents") == 0) {
        if (c != '[') return syntax_error(r, "an array for \"traceEvents\"", error);
        r->position++;
        return read_event_array(r, error);
    }
    if (strcmp(key, "deviceProperties") == 0 || strcmp(key, "distributedInfo") == 0) {
        json_t *value = read_small_value(r, error);
        if (value == NULL) return FALSE;
        if (key[0] == 'd' && key[1] == 'e') read_device_properties(r->trace, value);
        else read_distributed_info(r->trace, value);
        json_decref(value);
        return TRUE;
    }
    gsize end;
    if (!scan_value(r, &end, error)) return FALSE;
    r->position = end;
    return TRUE;
}

static gboolean read_key(reader *r, char **key, GError **error)
{
    gsize end;
    if (!scan_value(r, &end, error)) return FALSE;
    json_error_t json_error;
    json_t *value = json_loadb(r->buffer + r->position, end - r->position, JSON_DECODE_ANY,
                               &json_error);
    if (!json_is_string(value)) {
        json_decref(value);
        return syntax_error(r, "a string key", error);
    }
    *key = g_strdup(json_string_value(value));
    json_decref(value);
    r->position = end;
    return TRUE;
}

static gboolean read_root_object(reader *r, GError **error)
{
    char c;
    r->position++;
    if (!peek(r, &c, error)) return FALSE;
    if (c == '}') { r->position++; return TRUE; }
    for (;;) {
        char *key = NULL;
        if (!peek(r, &c, error)) return FALSE;
        if (c != '"') return syntax_error(r, "a key", error);
        if (!read_key(r, &key, error)) return FALSE;
        gboolean ok = expect(r, ':', "':'", error) && read_member(r, key, error);
        g_free(key);
        if (!ok) return FALSE;
        if (!peek(r, &c, error)) return FALSE;
        if (c == ',') { r->position++; continue; }
        if (c == '}') { r->position++; return TRUE; }
        return syntax_error(r, "',' or '}'", error);
    }
}

static gboolean read_document(reader *r, GError **error)
{
    char c;
    if (!peek(r, &c, error)) return FALSE;
    if (c == '\0') {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: byte %" G_GUINT64_FORMAT ": the file is empty",
                    r->path, here(r));
        return FALSE;
    }
    if (c == '[') {
        r->position++;
        if (!read_event_array(r, error)) return FALSE;
    } else if (c == '{') {
        if (!read_root_object(r, error)) return FALSE;
    } else {
        return syntax_error(r, "a JSON trace ('{' or '[') - this is not a Chrome trace", error);
    }
    if (!peek(r, &c, error)) return FALSE;
    if (c != '\0') return syntax_error(r, "end of file after the trace", error);
    return TRUE;
}

/* ---- joining -------------------------------------------------------- */

static void add_stats(rv_trace_stats *total, const rv_trace_stats *part)
{
    total->events_total += part->events_total;
    total->events_used += part->events_used;
    total->skipped_no_duration += part->skipped_no_duration;
    total->skipped_no_ph += part->skipped_no_ph;
    total->ignored_category += part->ignored_category;
    total->ignored_phase += part->ignored_phase;
    total->gpu_annotations += part->gpu_annotations;
}

static gboolean join_batches(reader *r, GError **error)
{
    guint64 total = 0;
    for (guint i = 0; i < r->batches->len; i++) {
        batch *b = g_ptr_array_index(r->batches, i);
        if (b->error != NULL) {
            g_propagate_error(error, b->error);
            b->error = NULL;
            return FALSE;
        }
        total += b->events->len;
    }
    GArray *events = g_array_sized_new(FALSE, FALSE, sizeof(rv_event), (guint)total);
    for (guint i = 0; i < r->batches->len; i++) {
        batch *b = g_ptr_array_index(r->batches, i);
        g_array_append_vals(events, b->events->data, b->events->len);
        add_stats(&r->trace->stats, &b->stats);
        g_array_unref(b->events);
        b->events = NULL;
    }
    g_array_unref(r->trace->events);
    r->trace->events = events;
    return TRUE;
}

static gboolean open_input(reader *r, GError **error)
{
    struct stat info;
    if (stat(r->path, &info) != 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: %s", r->path, g_strerror(errno));
        return FALSE;
    }
    if (S_ISDIR(info.st_mode)) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                    "%s: is a directory; give a trace file (for several ranks, list each file)",
                    r->path);
        return FALSE;
    }
    r->file = gzopen(r->path, "rb");
    if (r->file == NULL) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: %s", r->path, g_strerror(errno));
        return FALSE;
    }
    gzbuffer(r->file, 256 * 1024);
    return TRUE;
}

gboolean rv_import_stream(rv_trace *trace, const rv_import_options *options, GError **error)
{
    reader r = { 0 };
    install_arena_allocator();
    r.path = trace->source;
    r.trace = trace;
    r.options = options;
    r.batches = g_ptr_array_new_with_free_func((GDestroyNotify)batch_free);
    g_mutex_init(&r.lock);
    g_cond_init(&r.done_cond);
    int threads = options && options->threads > 0 ? options->threads : (int)g_get_num_processors();
    if (threads > 1) {
        r.pool = g_thread_pool_new(worker, &r, threads, TRUE, NULL);
        r.max_in_flight = threads * 2;
    }
    gboolean ok = open_input(&r, error) && read_document(&r, error);
    if (ok) submit_batch(&r);
    else if (r.current) { batch_free(r.current); r.current = NULL; }
    if (r.pool) g_thread_pool_free(r.pool, FALSE, TRUE);
    if (ok && !r.saw_events_array) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                    "%s: byte %" G_GUINT64_FORMAT " (end of file): no \"traceEvents\" array - "
                    "this JSON is not a PyTorch profiler trace", r.path, here(&r));
        ok = FALSE;
    }
    ok = ok && join_batches(&r, error);
    if (r.file) gzclose(r.file);
    g_free(r.buffer);
    g_ptr_array_free(r.batches, TRUE);
    g_mutex_clear(&r.lock);
    g_cond_clear(&r.done_cond);
    return ok;
}
