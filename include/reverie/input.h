/*
 * input.h - one input file, opened the way a trace or a saved graph is read:
 * a path, or "-" for standard input; a regular file, a pipe, a FIFO or a
 * character device.
 *
 * Why this exists: a pipe cannot be read twice, yet the command line must
 * look at the first bytes to tell a saved graph from a trace, and the
 * importer must see those same bytes.  An rv_input keeps what was peeked
 * and hands it out again before reading on, so nothing is lost.  It also
 * owns the policies that keep unattended runs from hanging: a FIFO is
 * opened without blocking, and reading anything that is not a regular file
 * fails after a time without data (a FIFO with no writer, a stalled pipe).
 *
 * Errors are RV_ERROR_INPUT lines that start with rv_input_name(): the path
 * as given, or "<stdin>".
 */
#ifndef REVERIE_INPUT_H
#define REVERIE_INPUT_H

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

/* How long a pipe or FIFO may stay silent, when the caller gives 0. */
#define RV_INPUT_DEFAULT_TIMEOUT_MS 60000

typedef struct rv_input rv_input;

/*
 * Open path ("-": standard input).  timeout_ms: how long a read from a
 * pipe, FIFO, socket or device may wait for data (0: the default above,
 * < 0: forever); regular files never wait.  Refuses directories, block
 * devices, sockets given by path and terminals with a line saying what the
 * path really is.
 */
rv_input *rv_input_open(const char *path, int timeout_ms, GError **error);
void rv_input_close(rv_input *input);

/* The name used in messages: the path as given, or "<stdin>". */
const char *rv_input_name(const rv_input *input);
/* TRUE for a regular file, which can be read again by path. */
gboolean rv_input_is_regular(const rv_input *input);
/* The size of a regular file in bytes, or -1 for anything else. */
int64_t rv_input_size(const rv_input *input);
/* Device and inode of what was opened, to compare with an output path. */
void rv_input_identity(const rv_input *input, uint64_t *device, uint64_t *inode);

/*
 * Look at the first `want` bytes without consuming them: *data points at
 * what is available (fewer bytes only at the end of the input) until the
 * next call on the input.  Returns the number of bytes, or -1 with error.
 */
gssize rv_input_peek(rv_input *input, gsize want, const guint8 **data, GError **error);

/* Read up to size bytes (peeked bytes first).  0: end of input; -1: error. */
gssize rv_input_read(rv_input *input, void *buffer, gsize size, GError **error);

/* Bytes handed out by rv_input_read so far (the offset of the next byte). */
uint64_t rv_input_offset(const rv_input *input);

/*
 * The whole rest of the input, at most max_bytes of it: a longer input is
 * an error naming the limit.  For saved graphs, which are loaded whole.
 */
GBytes *rv_input_read_all(rv_input *input, uint64_t max_bytes, GError **error);

/*
 * What the first bytes of a file say it is, when it is plainly not JSON
 * text: "a gzip file", "a ZIP archive", "UTF-16 text", "NUL bytes (binary
 * data)", "an HTML page", ... or NULL when they could start a JSON trace.
 * For messages ("this is not a trace: it is a ZIP archive").
 */
const char *rv_describe_content(const guint8 *data, gsize length);

G_END_DECLS

#endif
