/*
 * output.h - the one writer every file reverie makes goes through: saved
 * graphs, timelines, plots, exported graphs, reports sent to a file.
 *
 * Its promises, which users running reverie unattended rely on:
 *   - an input of the run is never a target.  Every file the run reads is
 *     remembered by device and inode (rv_output_note_input; the input layer
 *     and the graph store do it themselves), and a target is compared with
 *     them as a file, after following symbolic links: the trace itself, a
 *     hard link or a symbolic link to it, a rank inside a folder, the file
 *     standard input was redirected from.  Refused with RV_ERROR_USAGE,
 *     when opened and again just before the file is replaced (a table a
 *     plugin reads is noted only once it is read);
 *   - a file is replaced atomically: the bytes go to a temporary file in
 *     the target's folder (unnamed where the file system allows O_TMPFILE,
 *     so that not even SIGKILL leaves one behind), which is flushed to disk
 *     and renamed over the target only when complete.  A full disk, a size
 *     limit, an error of the code filling it or a signal leave the old file
 *     as it was and no temporary behind (rv_output_remove_temporaries is
 *     for signal handlers).  REVERIE_NAMED_TEMPORARIES=1 in the environment
 *     always uses a named temporary (".NAME.reverie-XXXXXX");
 *   - every byte is checked: a failed write, flush, sync or rename is an
 *     RV_ERROR_INPUT error naming the file and the cause;
 *   - an output has a size bound, like an input (rv_output_set_max_bytes):
 *     a name copied into every event cannot fill the disk.
 * Devices and FIFOs (/dev/null, a pipe to another program) cannot be
 * replaced and are written in place; "-" is standard output.
 */
#ifndef REVERIE_OUTPUT_H
#define REVERIE_OUTPUT_H

#include <glib.h>
#include <stdint.h>
#include <stdio.h>

G_BEGIN_DECLS

/* The default bound on one output: 16 GiB.  The largest input is 4 GiB of
 * JSON (--max-bytes); a timeline of it, baseline and prediction side by
 * side with their operators and dependency arrows, is about three times
 * the trace (docs/hostile-input.md has the measurement). */
#define RV_OUTPUT_DEFAULT_MAX_BYTES ((uint64_t)16 << 30)

typedef enum {
    RV_OUTPUT_REPLACE = 1 << 0,  /* an existing regular file may be replaced (--force) */
} rv_output_flags;

/* Remember an input of this run, so that no output replaces it: a path
 * (symbolic links followed; a folder: each file in it), or an open file
 * descriptor (standard input).  Only regular files are remembered: a pipe
 * or a device cannot be destroyed by writing it.  Thread-safe. */
void rv_output_note_input(const char *path);
void rv_output_note_input_fd(int fd);
/* Is what fd is open on (standard output, say) an input of the run? */
gboolean rv_output_fd_is_input(int fd);
/* Forget every input (for tests and long-lived embedders). */
void rv_output_forget_inputs(void);

/* The bound on one output in bytes (0: none); thread-safe. */
void rv_output_set_max_bytes(uint64_t bytes);
uint64_t rv_output_max_bytes(void);

/* Check a target before any slow work.  RV_ERROR_USAGE when it is an
 * input of the run, a directory, a symbolic link to nothing, an empty name
 * or (without RV_OUTPUT_REPLACE) an existing regular file. */
gboolean rv_output_check(const char *path, rv_output_flags flags, GError **error);

typedef struct rv_output rv_output;

/* Start writing path (rv_output_check first).  The stream it gives is
 * fully buffered and counts what goes through it against the size bound. */
rv_output *rv_output_open(const char *path, rv_output_flags flags, GError **error);
FILE *rv_output_stream(rv_output *out);
/* The path as given, for messages. */
const char *rv_output_path(const rv_output *out);
/* Flush, sync and put the file in place; either way `out` is freed.  On
 * failure the target is as it was before rv_output_open; a target that
 * became an input since (rv_output_note_input) is refused, RV_ERROR_USAGE. */
gboolean rv_output_commit(rv_output *out, GError **error);
/* Give up: the temporary is removed, the target untouched; frees `out`. */
void rv_output_abort(rv_output *out);

/* Fills an output; FALSE with *error, or with the stream's error flag set. */
typedef gboolean (*rv_output_fill_fn)(FILE *file, gpointer data, GError **error);
/* open, fill, commit (abort on any failure).  A write error of the stream
 * says more than the filler's own message, so it wins. */
gboolean rv_output_write(const char *path, rv_output_flags flags, rv_output_fill_fn fill, gpointer data,
                         GError **error);

/* Remove the named temporaries of every output still open.  Only unlink():
 * safe in a signal handler, which should then re-raise the signal. */
void rv_output_remove_temporaries(void);
/* In a forked child: the temporaries open so far are the parent's to
 * finish or remove, not this process's (its signal handler leaves them). */
void rv_output_disown_temporaries(void);

G_END_DECLS

#endif
