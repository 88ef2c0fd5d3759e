/*
 * input.c - open and read one input: a path or standard input, a regular
 * file or a stream (see include/reverie/input.h).
 *
 * Invariants: `pending` holds bytes read from the descriptor but not yet
 * handed out, from pending_at on; rv_input_read serves them before reading
 * the descriptor again, so peeking never loses data.  A stream (anything
 * but a regular file) is only read after poll() says it is readable, so a
 * read never blocks past the timeout; a FIFO is opened with O_NONBLOCK
 * because open() itself would otherwise wait for a writer.
 */
#include "reverie/input.h"
#include "reverie/error.h"
#include "reverie/output.h"
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct rv_input {
    char *name;
    int fd;
    gboolean owns_fd;
    struct stat info;
    int timeout_ms;          /* < 0: wait forever */
    GByteArray *pending;
    gsize pending_at;
    uint64_t offset;
    gboolean at_end;
};

static gboolean input_error(GError **error, const char *name, const char *what)
{
    g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: %s", name, what);
    return FALSE;
}

/* Refuse what cannot hold a trace, saying what it is. */
static gboolean check_kind(const char *name, const struct stat *info, GError **error)
{
    if (S_ISDIR(info->st_mode))
        return input_error(error, name, "is a directory; give a trace file (simulate, whatif, info, import and validate take a folder of ranks)");
    if (S_ISBLK(info->st_mode)) return input_error(error, name, "is a block device (a disk), not a file");
    if (S_ISSOCK(info->st_mode)) return input_error(error, name, "is a socket; pipe its data into reverie instead");
    return TRUE;
}

static int open_path(const char *path, struct stat *info, GError **error)
{
    if (stat(path, info) != 0) {
        input_error(error, path, g_strerror(errno));
        return -1;
    }
    if (!check_kind(path, info, error)) return -1;
    int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY;
    if (S_ISFIFO(info->st_mode)) flags |= O_NONBLOCK; /* open() would wait for a writer */
    int fd = open(path, flags);
    if (fd < 0) input_error(error, path, g_strerror(errno));
    return fd;
}

rv_input *rv_input_open(const char *path, int timeout_ms, GError **error)
{
    gboolean from_stdin = strcmp(path, "-") == 0;
    const char *name = from_stdin ? "<stdin>" : path;
    struct stat info;
    int fd = from_stdin ? STDIN_FILENO : open_path(path, &info, error);
    if (fd < 0) return NULL;
    gboolean ok = TRUE;
    if (fstat(fd, &info) != 0) ok = input_error(error, name, g_strerror(errno));
    else if (!check_kind(name, &info, error)) ok = FALSE;
    else if (isatty(fd))
        ok = input_error(error, name, "is a terminal; pipe a trace into it (zcat trace.json.gz | reverie simulate -)");
    if (!ok) {
        if (!from_stdin) close(fd);
        return NULL;
    }
    /* no output of this run may replace what it reads (output.h) */
    rv_output_note_input_fd(fd);
    rv_input *input = g_new0(rv_input, 1);
    input->name = g_strdup(name);
    input->fd = fd;
    input->owns_fd = !from_stdin;
    input->info = info;
    input->timeout_ms = timeout_ms == 0 ? RV_INPUT_DEFAULT_TIMEOUT_MS : timeout_ms;
    input->pending = g_byte_array_new();
    return input;
}

void rv_input_close(rv_input *input)
{
    if (input == NULL) return;
    if (input->owns_fd) close(input->fd);
    g_byte_array_unref(input->pending);
    g_free(input->name);
    g_free(input);
}

const char *rv_input_name(const rv_input *input) { return input->name; }
gboolean rv_input_is_regular(const rv_input *input) { return S_ISREG(input->info.st_mode); }
int64_t rv_input_size(const rv_input *input) { return rv_input_is_regular(input) ? (int64_t)input->info.st_size : -1; }
uint64_t rv_input_offset(const rv_input *input) { return input->offset; }

void rv_input_identity(const rv_input *input, uint64_t *device, uint64_t *inode)
{
    *device = (uint64_t)input->info.st_dev;
    *inode = (uint64_t)input->info.st_ino;
}

static const char *stream_kind(const rv_input *input)
{
    if (S_ISFIFO(input->info.st_mode)) return input->owns_fd ? "FIFO" : "pipe";
    if (S_ISCHR(input->info.st_mode)) return "device";
    return "stream";
}

/* Wait until a stream has data (or its end); regular files never wait. */
static gboolean wait_readable(rv_input *input, GError **error)
{
    if (rv_input_is_regular(input)) return TRUE;
    struct pollfd poller = { input->fd, POLLIN, 0 };
    for (;;) {
        int ready = poll(&poller, 1, input->timeout_ms);
        if (ready > 0) return TRUE;
        if (ready < 0 && errno == EINTR) continue;
        if (ready < 0) return input_error(error, input->name, g_strerror(errno));
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                    "%s: no data for %g s after byte %" G_GUINT64_FORMAT " - the %s has no writer, or it "
                    "stopped writing (--read-timeout to wait longer)", input->name, input->timeout_ms / 1000.0,
                    input->offset + (input->pending->len - input->pending_at), stream_kind(input));
        return FALSE;
    }
}

/* One read(2) of the descriptor: bytes read, 0 at the end, -1 on error. */
static gssize read_descriptor(rv_input *input, void *buffer, gsize size, GError **error)
{
    if (input->at_end) return 0;
    for (;;) {
        if (!wait_readable(input, error)) return -1;
        gssize got = read(input->fd, buffer, size);
        if (got > 0) return got;
        if (got == 0) {
            input->at_end = TRUE;
            return 0;
        }
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: cannot read after byte %" G_GUINT64_FORMAT ": %s",
                    input->name, input->offset, g_strerror(errno));
        return -1;
    }
}

gssize rv_input_peek(rv_input *input, gsize want, const guint8 **data, GError **error)
{
    if (input->pending_at > 0) {
        g_byte_array_remove_range(input->pending, 0, (guint)input->pending_at);
        input->pending_at = 0;
    }
    while (input->pending->len < want) {
        gsize missing = want - input->pending->len;
        guint8 *chunk = g_malloc(missing);
        gssize got = read_descriptor(input, chunk, missing, error);
        if (got > 0) g_byte_array_append(input->pending, chunk, (guint)got);
        g_free(chunk);
        if (got < 0) return -1;
        if (got == 0) break;
    }
    *data = input->pending->data;
    return (gssize)MIN(want, (gsize)input->pending->len);
}

gssize rv_input_read(rv_input *input, void *buffer, gsize size, GError **error)
{
    gsize available = input->pending->len - input->pending_at;
    gssize got;
    if (available > 0) {
        got = (gssize)MIN(available, size);
        memcpy(buffer, input->pending->data + input->pending_at, (gsize)got);
        input->pending_at += (gsize)got;
    } else {
        got = read_descriptor(input, buffer, size, error);
    }
    if (got > 0) input->offset += (uint64_t)got;
    return got;
}

GBytes *rv_input_read_all(rv_input *input, uint64_t max_bytes, GError **error)
{
    enum { CHUNK = 1 << 20 };
    /* A GByteArray counts in guint: 4 GiB is as much as it can hold. */
    uint64_t limit = MIN(max_bytes, (uint64_t)(G_MAXUINT - CHUNK));
    GByteArray *all = g_byte_array_new();
    for (;;) {
        guint had = all->len;
        if ((uint64_t)had > limit) {
            g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: larger than the limit of %" G_GUINT64_FORMAT
                        " bytes (--max-bytes to raise it)", input->name, limit);
            g_byte_array_unref(all);
            return NULL;
        }
        g_byte_array_set_size(all, had + CHUNK);
        gssize got = rv_input_read(input, all->data + had, CHUNK, error);
        g_byte_array_set_size(all, had + (got > 0 ? (guint)got : 0));
        if (got < 0) {
            g_byte_array_unref(all);
            return NULL;
        }
        if (got == 0) return g_byte_array_free_to_bytes(all);
    }
}

/* ---- what a file is ------------------------------------------------------ */

typedef struct {
    const char *magic;
    gsize length;
    gsize offset;
    const char *description;
} signature;

static const signature signatures[] = {
    { "\x1f\x8b", 2, 0, "it is a gzip file" },
    { "RVGRAPH\0", 8, 0, "it is a reverie saved graph" },
    { "PK\x03\x04", 4, 0, "it is a ZIP archive (unzip it first)" },
    { "BZh", 3, 0, "it is a bzip2 file (decompress it first)" },
    { "\xfd" "7zXZ\0", 6, 0, "it is an xz file (decompress it first)" },
    { "\x28\xb5\x2f\xfd", 4, 0, "it is a zstd file (decompress it first)" },
    { "7z\xbc\xaf\x27\x1c", 6, 0, "it is a 7-Zip archive (extract it first)" },
    { "\x7f" "ELF", 4, 0, "it is an ELF executable or library" },
    { "%PDF", 4, 0, "it is a PDF document" },
    { "\x89PNG", 4, 0, "it is a PNG image" },
    { "SQLite format 3", 16, 0, "it is an SQLite database (export the trace as JSON)" },
    { "\xff\xfe", 2, 0, "it is UTF-16 text (convert it to UTF-8)" },
    { "\xfe\xff", 2, 0, "it is UTF-16 text (convert it to UTF-8)" },
    { "ustar", 5, 257, "it is a tar archive (extract it first)" },
};

static gboolean starts_with_tag(const guint8 *data, gsize length, const char *tag)
{
    gsize at = 0, tag_length = strlen(tag);
    while (at < length && g_ascii_isspace(data[at])) at++;
    return length - at >= tag_length && g_ascii_strncasecmp((const char *)data + at, tag, tag_length) == 0;
}

const char *rv_describe_content(const guint8 *data, gsize length)
{
    for (gsize i = 0; i < G_N_ELEMENTS(signatures); i++) {
        const signature *s = &signatures[i];
        if (length >= s->offset + s->length && memcmp(data + s->offset, s->magic, s->length) == 0)
            return s->description;
    }
    if (length > 0 && data[0] == 0) return "it starts with NUL bytes (binary data, not text)";
    if (starts_with_tag(data, length, "<!doctype html") || starts_with_tag(data, length, "<html"))
        return "it looks like an HTML page (a failed download?)";
    if (starts_with_tag(data, length, "<?xml")) return "it is an XML document";
    return NULL;
}
