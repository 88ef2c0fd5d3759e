/*
 * reader.c - stream a Chrome-trace JSON file into rv_events, in parallel.
 *
 * Memory stays near the size of the events, not of the JSON: the input
 * (input.h: a file, a pipe or standard input) is read in 1 MiB blocks and
 * inflated here with zlib when it starts with the gzip magic.  A small
 * scanner walks the top-level object and, inside "traceEvents", finds where
 * each event's JSON text begins and ends without building a tree.  Events
 * are copied into batches of a few MiB; a GThreadPool parses each batch
 * with jansson, one small tree per event, and converts it (event.c).
 * Finished batches are appended to the trace in file order as soon as all
 * earlier ones are, so the result is the same whatever the thread count and
 * the events are never held twice.
 *
 * Invariants:
 *   - at most max_in_flight batches exist unparsed at a time, which bounds
 *     the memory spent on JSON text;
 *   - the scanner looks at each byte of the text once: a value that spans
 *     several blocks is resumed where the last block ended (value_scan), and
 *     a value under a key we ignore is consumed as it is scanned, never
 *     kept, so an ignored value of any size costs linear time and one block
 *     of memory;
 *   - a value that is kept (an event, a key, deviceProperties or
 *     distributedInfo) may not exceed RV_IMPORT_MAX_VALUE_BYTES, the text
 *     may not exceed max_bytes and traceEvents may not hold more than
 *     max_events entries (trace.h).
 */
#include "import.h"
#include "reverie/input.h"
#include <errno.h>
#include <string.h>
#include <zlib.h>

#define READ_BLOCK (1u << 20)
#define RAW_BLOCK (256u << 10)
#define BATCH_BYTES (2u << 20)
#define PROGRESS_EVERY (8u << 20)
#define MAX_KEY_BYTES (64u << 10)

typedef struct {
    GByteArray *text;        /* the events' JSON, back to back */
    GArray *spans;           /* event_span */
    GArray *events;          /* rv_event, filled by the worker */
    uint32_t first_index;
    rv_trace_stats stats;
    GError *error;
    gboolean parsed;         /* set under reader.lock once events is final */
} batch;

typedef struct {
    guint32 offset, length;
    guint64 file_offset;
} event_span;

/* The text of the input: inflated when it is gzip, copied when it is not. */
typedef struct {
    rv_input *input;
    const char *name;
    gboolean gzip;
    z_stream z;
    gboolean z_ready;
    guint8 *raw;             /* compressed bytes; z.next_in points into it */
    gboolean raw_end;        /* the input has no more bytes */
    gboolean done;           /* the last gzip member has ended */
} text_source;

typedef struct {
    const char *path;
    text_source source;
    char *buffer;            /* bytes [0, length) loaded; [position, length) unread */
    gsize capacity, length, position;
    guint64 base;            /* file offset of buffer[0] (uncompressed) */
    gboolean eof;
    uint32_t event_index;
    guint64 next_progress;
    guint64 max_bytes, max_events;
    guint64 scanned;         /* bytes the scanner looked at (trace.h: bytes_scanned) */
    GThreadPool *pool;
    GQueue waiting;          /* batch*, submitted and not yet appended, in file order */
    batch *current;
    GMutex lock;
    GCond done_cond;
    int in_flight, max_in_flight;
    rv_trace *trace;
    const rv_import_options *options;
    gboolean saw_events_array;
} reader;

/* ---- the text: plain or inflated ---------------------------------------- */

static gboolean source_open(text_source *s, rv_input *input, GError **error)
{
    const guint8 *head = NULL;
    s->input = input;
    s->name = rv_input_name(input);
    gssize got = rv_input_peek(input, 2, &head, error);
    if (got < 0) return FALSE;
    s->gzip = got == 2 && head[0] == 0x1f && head[1] == 0x8b;
    if (!s->gzip) return TRUE;
    s->raw = g_malloc(RAW_BLOCK);
    /* 15 + 16: a gzip header and trailer around a 32 KiB-window deflate stream. */
    if (inflateInit2(&s->z, 15 + 16) != Z_OK) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: cannot start decompressing: out of memory", s->name);
        return FALSE;
    }
    s->z_ready = TRUE;
    return TRUE;
}

static void source_close(text_source *s)
{
    if (s->z_ready) inflateEnd(&s->z);
    g_free(s->raw);
}

/* Have at least `want` compressed bytes unread, unless the input ends first. */
static gboolean refill_raw(text_source *s, gsize want, GError **error)
{
    while (s->z.avail_in < want && !s->raw_end) {
        if (s->z.avail_in > 0) memmove(s->raw, s->z.next_in, s->z.avail_in);
        s->z.next_in = s->raw;
        gssize got = rv_input_read(s->input, s->raw + s->z.avail_in, RAW_BLOCK - s->z.avail_in, error);
        if (got < 0) return FALSE;
        if (got == 0) s->raw_end = TRUE;
        s->z.avail_in += (uInt)got;
    }
    return TRUE;
}

static guint64 compressed_offset(const text_source *s) { return rv_input_offset(s->input) - s->z.avail_in; }

static gssize gzip_failed(text_source *s, int status, guint64 text_offset, GError **error)
{
    if (status == Z_MEM_ERROR)
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: out of memory while decompressing at byte %" G_GUINT64_FORMAT,
                    s->name, compressed_offset(s));
    else if (status == Z_BUF_ERROR)
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                    "%s: the gzip data ends early, after %" G_GUINT64_FORMAT " compressed bytes (%" G_GUINT64_FORMAT
                    " bytes of text) - the file is truncated", s->name, compressed_offset(s), text_offset);
    else
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: corrupt gzip data near compressed byte %" G_GUINT64_FORMAT
                    " (after %" G_GUINT64_FORMAT " bytes of text): %s", s->name, compressed_offset(s), text_offset,
                    s->z.msg ? s->z.msg : "invalid data");
    return -1;
}

/* Inflate into out; 0 once the last member has ended.  As gzip's own
 * readers do, members that follow each other are read as one text, and
 * bytes after the last member that do not start another are ignored. */
static gssize gzip_read(text_source *s, char *out, gsize size, guint64 text_offset, GError **error)
{
    s->z.next_out = (Bytef *)out;
    s->z.avail_out = (uInt)size;
    while (s->z.avail_out == size && !s->done) {
        if (s->z.avail_in == 0 && !refill_raw(s, 1, error)) return -1;
        int status = inflate(&s->z, Z_NO_FLUSH);
        if (status == Z_STREAM_END) {
            if (!refill_raw(s, 2, error)) return -1;
            if (s->z.avail_in >= 2 && s->z.next_in[0] == 0x1f && s->z.next_in[1] == 0x8b) inflateReset(&s->z);
            else s->done = TRUE;
        } else if ((status == Z_BUF_ERROR && s->z.avail_in == 0 && s->raw_end) ||
                   (status != Z_OK && status != Z_BUF_ERROR)) {
            return gzip_failed(s, status, text_offset + (size - s->z.avail_out), error);
        }
    }
    return (gssize)(size - s->z.avail_out);
}

static gssize source_read(text_source *s, char *out, gsize size, guint64 text_offset, GError **error)
{
    return s->gzip ? gzip_read(s, out, size, text_offset, error) : rv_input_read(s->input, out, size, error);
}

/* ---- the buffer ---------------------------------------------------------- */

static gboolean over_limit(reader *r, GError **error)
{
    g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                "%s: more than %" G_GUINT64_FORMAT " bytes of JSON%s (after event #%u) - the limit; --max-bytes "
                "raises it", r->path, r->max_bytes, r->source.gzip ? " after decompression" : "", r->event_index);
    return FALSE;
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
        gsize capacity = MAX(r->capacity * 2, r->length + READ_BLOCK);
        char *grown = g_try_realloc(r->buffer, capacity);
        if (grown == NULL) {
            g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: out of memory at byte %" G_GUINT64_FORMAT
                        " (could not grow the read buffer to %" G_GSIZE_FORMAT " bytes)", r->path,
                        r->base + r->length, capacity);
            return FALSE;
        }
        r->buffer = grown;
        r->capacity = capacity;
    }
    gssize got = source_read(&r->source, r->buffer + r->length, READ_BLOCK, r->base + r->length, error);
    if (got < 0) {
        return FALSE;
    }
    if (got == 0) r->eof = TRUE;
    r->length += (gsize)got;
    r->trace->stats.bytes_uncompressed = r->base + r->length;
    if (r->base + r->length > r->max_bytes) return over_limit(r, error);
    return TRUE;
}

static gboolean is_space(int c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/* The next non-space byte, or -1 at end of input. */
static gboolean next_char(reader *r, int *out, GError **error)
{
    for (;;) {
        gsize from = r->position;
        while (r->position < r->length && is_space(r->buffer[r->position]))
            r->position++;
        r->scanned += r->position - from;
        if (r->position < r->length) {
            *out = (unsigned char)r->buffer[r->position];
            return TRUE;
        }
        if (r->eof) {
            *out = -1;
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

/* The UTF-8 byte order mark some editors and Windows tools write first. */
static gboolean skip_byte_order_mark(reader *r, GError **error)
{
    while (r->length < 3 && !r->eof)
        if (!fill(r, error)) return FALSE;
    if (r->length >= 3 && memcmp(r->buffer, "\xef\xbb\xbf", 3) == 0) r->position = 3;
    return TRUE;
}

/* ---- scanning values ----------------------------------------------------- */

/* Where the scan of one JSON value stands; it survives refills, so a value
 * spanning many blocks is scanned once.  Only structure is checked here
 * (strings, brackets); jansson checks the rest of the values it parses. */
typedef struct {
    gboolean scalar;         /* a number or a literal: ends before a delimiter */
    gboolean in_string, escaped;
    guint64 depth;
} value_scan;

enum { SCAN_DONE, SCAN_MORE };

static void scan_begin(value_scan *s, char first)
{
    s->scalar = first != '{' && first != '[' && first != '"';
    s->in_string = s->escaped = FALSE;
    s->depth = 0;
}

/* Advance *at through text[*at, length); SCAN_DONE with *at just past the
 * value's end, or SCAN_MORE with *at == length. */
static int scan_step(value_scan *s, const char *text, gsize *at, gsize length)
{
    gsize i = *at;
    if (s->scalar) {
        while (i < length && !is_space(text[i]) && text[i] != ',' && text[i] != ']' && text[i] != '}') i++;
        *at = i;
        return i < length ? SCAN_DONE : SCAN_MORE;
    }
    for (; i < length; i++) {
        char c = text[i];
        if (s->in_string) {
            if (s->escaped) s->escaped = FALSE;
            else if (c == '\\') s->escaped = TRUE;
            else if (c == '"') {
                s->in_string = FALSE;
                if (s->depth == 0) { *at = i + 1; return SCAN_DONE; }
            }
        } else if (c == '"') {
            s->in_string = TRUE;
        } else if (c == '{' || c == '[') {
            s->depth++;
        } else if ((c == '}' || c == ']') && s->depth > 0 && --s->depth == 0) {
            *at = i + 1;
            return SCAN_DONE;
        }
    }
    *at = i;
    return SCAN_MORE;
}

static gboolean truncated_value(reader *r, guint64 start, GError **error)
{
    g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                "%s: unexpected end of file at byte %" G_GUINT64_FORMAT
                ": the value starting at byte %" G_GUINT64_FORMAT
                " (event #%u) is incomplete - is the file truncated?",
                r->path, r->base + r->length, start, r->event_index);
    return FALSE;
}

/*
 * Find the end of the JSON value starting at r->position and keep all of
 * it in the buffer: *end is its end, r->position still its start.  `what`
 * names the value for the message when it is longer than limit bytes
 * (NULL: the event being read).
 */
static gboolean too_long(reader *r, gsize limit, const char *what, GError **error)
{
    char *event = what ? NULL : g_strdup_printf("event #%u", r->event_index);
    g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: byte %" G_GUINT64_FORMAT ": %s is longer than %"
                G_GSIZE_FORMAT " KiB - no profiler writes one this large; the file is damaged or not a trace",
                r->path, here(r), what ? what : event, limit >> 10);
    g_free(event);
    return FALSE;
}

static gboolean scan_kept(reader *r, gsize limit, const char *what, gsize *end, GError **error)
{
    value_scan s;
    scan_begin(&s, r->buffer[r->position]);
    gsize offset = 0; /* from r->position, which fill() may move */
    for (;;) {
        gsize at = r->position + offset;
        int result = scan_step(&s, r->buffer, &at, r->length);
        r->scanned += at - (r->position + offset);
        offset = at - r->position;
        if (offset > limit) return too_long(r, limit, what, error);
        if (result == SCAN_DONE || (r->eof && s.scalar)) {
            *end = at;
            return offset > 0 ? TRUE : syntax_error(r, "a JSON value", error);
        }
        if (r->eof) {
            guint64 start = here(r);
            r->position = r->length;
            return truncated_value(r, start, error);
        }
        if (!fill(r, error)) return FALSE;
    }
}

/* Consume the JSON value starting at r->position without keeping it:
 * each block is dropped once scanned, so any size costs one block. */
static gboolean skip_value(reader *r, GError **error)
{
    value_scan s;
    scan_begin(&s, r->buffer[r->position]);
    guint64 start = here(r);
    for (;;) {
        gsize at = r->position;
        int result = scan_step(&s, r->buffer, &at, r->length);
        r->scanned += at - r->position;
        r->position = at;
        if (result == SCAN_DONE || (r->eof && s.scalar))
            return here(r) > start ? TRUE : syntax_error(r, "a JSON value", error);
        if (r->eof) return truncated_value(r, start, error);
        if (!fill(r, error)) return FALSE;
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

static void batch_free(gpointer data)
{
    batch *b = data;
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
    case EVENT_UNMODELLED_BACKEND: stats->ignored_category++; stats->unmodelled_backend++; break;
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
    batch *b = data;
    parse_batch(b, r);
    g_mutex_lock(&r->lock);
    b->parsed = TRUE;
    r->in_flight--;
    g_cond_broadcast(&r->done_cond);
    g_mutex_unlock(&r->lock);
}

static void add_stats(rv_trace_stats *total, const rv_trace_stats *part)
{
    total->events_total += part->events_total;
    total->events_used += part->events_used;
    total->skipped_no_duration += part->skipped_no_duration;
    total->skipped_no_ph += part->skipped_no_ph;
    total->ignored_category += part->ignored_category;
    total->ignored_phase += part->ignored_phase;
    total->gpu_annotations += part->gpu_annotations;
    total->unmodelled_backend += part->unmodelled_backend;
}

/* Append the parsed batches at the head of the queue to the trace, in file
 * order; with wait, also wait for those still being parsed.  The first
 * batch that failed ends it with that batch's error. */
static gboolean append_parsed(reader *r, gboolean wait, GError **error)
{
    for (;;) {
        g_mutex_lock(&r->lock);
        batch *b = g_queue_peek_head(&r->waiting);
        while (b != NULL && wait && !b->parsed) g_cond_wait(&r->done_cond, &r->lock);
        gboolean ready = b != NULL && b->parsed;
        if (ready) g_queue_pop_head(&r->waiting);
        g_mutex_unlock(&r->lock);
        if (!ready) return TRUE;
        if (b->error != NULL) {
            g_propagate_error(error, b->error);
            b->error = NULL;
            batch_free(b);
            return FALSE;
        }
        g_array_append_vals(r->trace->events, b->events->data, b->events->len);
        add_stats(&r->trace->stats, &b->stats);
        batch_free(b);
    }
}

static gboolean submit_batch(reader *r, GError **error)
{
    batch *b = r->current;
    r->current = NULL;
    if (b == NULL || b->spans->len == 0) {
        if (b) batch_free(b);
        return TRUE;
    }
    g_mutex_lock(&r->lock);
    g_queue_push_tail(&r->waiting, b);
    g_mutex_unlock(&r->lock);
    if (r->pool == NULL) {
        parse_batch(b, r);
        b->parsed = TRUE;
    } else {
        g_mutex_lock(&r->lock);
        while (r->in_flight >= r->max_in_flight)
            g_cond_wait(&r->done_cond, &r->lock);
        r->in_flight++;
        g_mutex_unlock(&r->lock);
        g_thread_pool_push(r->pool, b, NULL);
    }
    return append_parsed(r, FALSE, error);
}

static gboolean add_event_text(reader *r, gsize end, GError **error)
{
    if (r->event_index >= r->max_events) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                    "%s: byte %" G_GUINT64_FORMAT ": more than %" G_GUINT64_FORMAT " events in \"traceEvents\" - "
                    "the limit; --max-events raises it", r->path, here(r), r->max_events);
        return FALSE;
    }
    if (r->current == NULL)
        r->current = batch_new(r->event_index);
    batch *b = r->current;
    event_span span = { b->text->len, (guint32)(end - r->position), here(r) };
    g_byte_array_append(b->text, (const guint8 *)r->buffer + r->position, span.length);
    g_array_append_val(b->spans, span);
    r->position = end;
    r->event_index++;
    if (b->text->len >= BATCH_BYTES && !submit_batch(r, error))
        return FALSE;
    if (r->options && r->options->progress && here(r) >= r->next_progress) {
        r->next_progress = here(r) + PROGRESS_EVERY;
        r->options->progress(here(r), r->event_index, r->options->progress_data);
    }
    return TRUE;
}

/* ---- structure ------------------------------------------------------ */

static gboolean expect(reader *r, char wanted, const char *what, GError **error)
{
    int c;
    if (!next_char(r, &c, error)) return FALSE;
    if (c != wanted) return syntax_error(r, what, error);
    r->position++;
    return TRUE;
}

/* The elements of an array of events; r->position is just past '['. */
static gboolean read_event_array(reader *r, GError **error)
{
    int c;
    r->saw_events_array = TRUE;
    if (!next_char(r, &c, error)) return FALSE;
    if (c == ']') { r->position++; return TRUE; }
    for (;;) {
        gsize end;
        if (!next_char(r, &c, error)) return FALSE;
        if (c < 0) return syntax_error(r, "an event", error);
        if (!scan_kept(r, RV_IMPORT_MAX_VALUE_BYTES, NULL, &end, error)) return FALSE;
        if (!add_event_text(r, end, error)) return FALSE;
        if (!next_char(r, &c, error)) return FALSE;
        if (c == ',') { r->position++; continue; }
        if (c == ']') { r->position++; return TRUE; }
        return syntax_error(r, "',' or ']' between events", error);
    }
}

/* A whole top-level value, parsed with jansson (metadata, small). */
static json_t *read_small_value(reader *r, const char *key, GError **error)
{
    gsize end;
    char *what = g_strdup_printf("the value of \"%s\"", key);
    gboolean scanned = scan_kept(r, RV_IMPORT_MAX_VALUE_BYTES, what, &end, error);
    g_free(what);
    if (!scanned) return NULL;
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

/* rank and world_size feed divisions and int casts in the plugins: a value
 * no job can have is refused rather than cut. */
static gboolean read_rank_field(reader *r, json_t *object, const char *field, guint64 at, int64_t *out,
                                GError **error)
{
    json_t *value = json_object_get(object, field);
    if (!json_is_integer(value)) return TRUE;
    json_int_t number = json_integer_value(value);
    if (number < 0 || number > (1 << 24)) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: byte %" G_GUINT64_FORMAT ": distributedInfo.%s = %"
                    JSON_INTEGER_FORMAT " is out of range (0 to %d)", r->path, at, field, number, 1 << 24);
        return FALSE;
    }
    *out = number;
    return TRUE;
}

static gboolean read_distributed_info(reader *r, json_t *value, guint64 at, GError **error)
{
    rv_trace *trace = r->trace;
    if (!json_is_object(value)) return TRUE;
    json_t *backend = json_object_get(value, "backend");
    /* A file may repeat the key; the last one wins, as in jansson. */
    if (json_is_string(backend)) {
        g_free(trace->backend);
        trace->backend = g_strdup(json_string_value(backend));
    }
    return read_rank_field(r, value, "rank", at, &trace->rank, error) &&
           read_rank_field(r, value, "world_size", at, &trace->world_size, error);
}

static gboolean read_metadata(reader *r, const char *key, GError **error)
{
    guint64 at = here(r);
    json_t *value = read_small_value(r, key, error);
    if (value == NULL) return FALSE;
    gboolean ok = TRUE;
    if (strcmp(key, "deviceProperties") == 0) read_device_properties(r->trace, value);
    else ok = read_distributed_info(r, value, at, error);
    json_decref(value);
    return ok;
}

static gboolean read_member(reader *r, const char *key, GError **error)
{
    int c;
    if (!next_char(r, &c, error)) return FALSE;
    if (c < 0) return syntax_error(r, "a value", error);
    if (strcmp(key, "traceEvents") == 0) {
        if (c != '[') return syntax_error(r, "an array for \"traceEvents\"", error);
        r->position++;
        return read_event_array(r, error);
    }
    if (strcmp(key, "deviceProperties") == 0 || strcmp(key, "distributedInfo") == 0)
        return read_metadata(r, key, error);
    if (strcmp(key, "reverie_timeline") == 0 || strcmp(key, "reverie") == 0) {
        /* timeline.h marks its files so (older ones at the end): a replay
         * read back as a recording would be replayed against itself */
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: byte %" G_GUINT64_FORMAT ": this is a timeline reverie "
                    "wrote (--timeline), not a profiler trace: give the trace or saved graph it was made from",
                    r->path, here(r));
        return FALSE;
    }
    return skip_value(r, error);
}

static gboolean read_key(reader *r, char **key, GError **error)
{
    gsize end;
    if (!scan_kept(r, MAX_KEY_BYTES, "a key", &end, error)) return FALSE;
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
    int c;
    r->position++;
    if (!next_char(r, &c, error)) return FALSE;
    if (c == '}') { r->position++; return TRUE; }
    for (;;) {
        char *key = NULL;
        if (!next_char(r, &c, error)) return FALSE;
        if (c != '"') return syntax_error(r, "a key", error);
        if (!read_key(r, &key, error)) return FALSE;
        gboolean ok = expect(r, ':', "':'", error) && read_member(r, key, error);
        g_free(key);
        if (!ok) return FALSE;
        if (!next_char(r, &c, error)) return FALSE;
        if (c == ',') { r->position++; continue; }
        if (c == '}') { r->position++; return TRUE; }
        return syntax_error(r, "',' or '}'", error);
    }
}

/* The first byte is not '{' or '[': say what the file is, if we can tell. */
static gboolean not_a_trace(reader *r, GError **error)
{
    const char *what = rv_describe_content((const guint8 *)r->buffer + r->position, r->length - r->position);
    if (what == NULL) return syntax_error(r, "a JSON trace ('{' or '[') - this is not a Chrome trace", error);
    g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: byte %" G_GUINT64_FORMAT ": this is not a Chrome trace: %s%s",
                r->path, here(r), r->source.gzip ? "after decompression, " : "", what);
    return FALSE;
}

static gboolean read_document(reader *r, GError **error)
{
    int c;
    if (!skip_byte_order_mark(r, error) || !next_char(r, &c, error)) return FALSE;
    if (c < 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: byte %" G_GUINT64_FORMAT ": the file is empty%s",
                    r->path, here(r), here(r) > 0 ? " (nothing but white space)" : "");
        return FALSE;
    }
    if (c == '[') {
        r->position++;
        if (!read_event_array(r, error)) return FALSE;
    } else if (c == '{') {
        if (!read_root_object(r, error)) return FALSE;
    } else {
        /* Sniff at least a tar header's worth, so "what is it" can be told. */
        while (r->length - r->position < 512 && !r->eof)
            if (!fill(r, error)) return FALSE;
        return not_a_trace(r, error);
    }
    if (!next_char(r, &c, error)) return FALSE;
    if (c >= 0) return syntax_error(r, "end of file after the trace", error);
    return TRUE;
}

/* ---- the whole read -------------------------------------------------- */

static void reader_init(reader *r, rv_trace *trace, rv_input *input, const rv_import_options *options)
{
    install_arena_allocator();
    r->path = rv_input_name(input);
    r->trace = trace;
    r->options = options;
    r->max_bytes = options && options->max_bytes ? options->max_bytes : RV_IMPORT_DEFAULT_MAX_BYTES;
    r->max_events = options && options->max_events ? options->max_events : RV_IMPORT_DEFAULT_MAX_EVENTS;
    /* file_index is 32 bits wide */
    r->max_events = MIN(r->max_events, (guint64)G_MAXUINT32);
    g_queue_init(&r->waiting);
    g_mutex_init(&r->lock);
    g_cond_init(&r->done_cond);
    int threads = options && options->threads > 0 ? options->threads : (int)g_get_num_processors();
    if (threads > 1) {
        GError *pool_error = NULL;
        r->pool = g_thread_pool_new(worker, r, threads, TRUE, &pool_error);
        /* No threads to be had (a tight limit on processes or memory): parse here. */
        if (r->pool == NULL) g_clear_error(&pool_error);
        r->max_in_flight = threads * 2;
    }
}

static void reader_clear(reader *r)
{
    if (r->pool) g_thread_pool_free(r->pool, FALSE, TRUE);
    if (r->current) batch_free(r->current);
    g_queue_clear_full(&r->waiting, batch_free);
    source_close(&r->source);
    g_free(r->buffer);
    g_mutex_clear(&r->lock);
    g_cond_clear(&r->done_cond);
}

gboolean rv_import_stream(rv_trace *trace, rv_input *input, const rv_import_options *options, GError **error)
{
    reader r = { 0 };
    reader_init(&r, trace, input, options);
    GError *scan_error = NULL, *batch_error = NULL;
    gboolean ok = source_open(&r.source, input, &scan_error) && read_document(&r, &scan_error) &&
                  submit_batch(&r, &scan_error);
    /* Let every batch finish: one of them may hold an error earlier in the
     * file than the scanner's, and that is the one to report. */
    if (r.pool) {
        g_thread_pool_free(r.pool, FALSE, TRUE);
        r.pool = NULL;
    }
    if (!append_parsed(&r, TRUE, &batch_error)) {
        g_clear_error(&scan_error);
        g_propagate_error(error, batch_error);
        ok = FALSE;
    } else if (!ok) {
        g_propagate_error(error, scan_error);
    } else if (!r.saw_events_array) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                    "%s: byte %" G_GUINT64_FORMAT " (end of file): no \"traceEvents\" array - "
                    "this JSON is not a PyTorch profiler trace", r.path, here(&r));
        ok = FALSE;
    }
    trace->bytes_scanned = r.scanned;
    reader_clear(&r);
    return ok;
}
