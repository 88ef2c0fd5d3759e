/*
 * output.c - where the commands' output files go, and how they get there.
 *
 * Three promises, for users who run reverie unattended:
 *   - an output never replaces the input it was made from: the two are
 *     compared as files (device and inode, symbolic links followed), not as
 *     strings, so "-o ./in.json" and a hard link are caught too;
 *   - an existing regular file is replaced only with --force;
 *   - a file is replaced atomically: the bytes go to a temporary file beside
 *     it, which is flushed to disk and renamed over the old one only when
 *     complete.  A full disk or a size limit leaves the old file as it was
 *     and no temporary behind, and the message names the file and the cause.
 * Devices and FIFOs (/dev/null, a pipe to another program) cannot be
 * replaced and are written in place; "-" is standard output.
 */
#include "cli.h"
#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static gboolean output_error(GError **error, int code, const char *path, const char *what)
{
    g_set_error(error, RV_ERROR, code, "%s: %s", path, what);
    return FALSE;
}

/* Device and inode of the input ("-": standard input), if it exists. */
static gboolean input_identity(const char *input, struct stat *info)
{
    if (input == NULL) return FALSE;
    return strcmp(input, "-") == 0 ? fstat(STDIN_FILENO, info) == 0 : g_stat(input, info) == 0;
}

/* Where the bytes go when path is a symbolic link: the file it points to. */
static gboolean resolve_target(rv_cli_output *out, GError **error)
{
    char *resolved = realpath(out->path, NULL);
    if (resolved == NULL)
        return output_error(error, RV_ERROR_USAGE, out->path, "is a symbolic link to nothing; give a real path");
    out->target = g_strdup(resolved);
    free(resolved);
    return TRUE;
}

gboolean rv_cli_output_prepare(rv_cli_output *out, const char *path, const char *input, gboolean force,
                               GError **error)
{
    memset(out, 0, sizeof *out);
    out->path = path;
    if (*path == '\0') return output_error(error, RV_ERROR_USAGE, "(empty name)", "give an output file name");
    if (strcmp(path, "-") == 0) {
        out->to_stdout = TRUE;
        return TRUE;
    }
    struct stat link_info, info, input_info;
    if (g_lstat(path, &link_info) != 0) {
        out->target = g_strdup(path); /* a new file; its folder is checked when written */
        return TRUE;
    }
    if (S_ISLNK(link_info.st_mode)) {
        if (!resolve_target(out, error)) return FALSE;
    } else {
        out->target = g_strdup(path);
    }
    if (g_stat(out->target, &info) != 0) return output_error(error, RV_ERROR_INPUT, path, g_strerror(errno));
    if (input_identity(input, &input_info) && input_info.st_dev == info.st_dev && input_info.st_ino == info.st_ino)
        return output_error(error, RV_ERROR_USAGE, path, "is the input file itself; writing it would destroy the "
                            "input - give another output name");
    if (S_ISDIR(info.st_mode)) return output_error(error, RV_ERROR_USAGE, path, "is a directory; give a file name");
    out->direct = !S_ISREG(info.st_mode);
    if (S_ISREG(info.st_mode) && !force)
        return output_error(error, RV_ERROR_USAGE, path, "already exists; give --force to replace it");
    return TRUE;
}

void rv_cli_output_clear(rv_cli_output *out)
{
    g_free(out->target);
    out->target = NULL;
}

static gboolean write_failed(GError **error, const rv_cli_output *out, int code_errno, gboolean replacing)
{
    g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "cannot write %s: %s%s", out->path, g_strerror(code_errno),
                replacing ? " (the existing file is unchanged)" : "");
    return FALSE;
}

/* Let write_fn fill file, then flush it: errno of the first failure, or 0
 * (with *error set when write_fn failed for a reason of its own).  An I/O
 * error says more than a writer's "could not write", so it wins. */
static int fill_file(FILE *file, rv_cli_write_fn write_fn, gpointer data, gboolean sync, GError **error)
{
    errno = 0;
    if (!write_fn(file, data, error)) {
        int failure = errno ? errno : EIO;
        if (ferror(file)) g_clear_error(error);
        return failure;
    }
    if (fflush(file) != 0 || ferror(file)) return errno ? errno : EIO;
    if (sync && fsync(fileno(file)) != 0) return errno;
    return 0;
}

/* A device or a FIFO: written in place; a FIFO without a reader fails at once. */
static gboolean write_direct(const rv_cli_output *out, rv_cli_write_fn write_fn, gpointer data, GError **error)
{
    int fd = out->to_stdout ? STDOUT_FILENO : open(out->target, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return write_failed(error, out, errno, FALSE);
    if (!out->to_stdout) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    FILE *file = out->to_stdout ? stdout : fdopen(fd, "w");
    GError *inner = NULL;
    int failure = fill_file(file, write_fn, data, FALSE, &inner);
    if (!out->to_stdout && fclose(file) != 0 && failure == 0) failure = errno;
    if (inner != NULL) {
        g_propagate_error(error, inner);
        return FALSE;
    }
    return failure == 0 ? TRUE : write_failed(error, out, failure, FALSE);
}

/* The mode a new file gets: 0666 less the umask, as open(2) would give. */
static mode_t new_file_mode(void)
{
    mode_t mask = umask(0);
    umask(mask);
    return 0666 & ~mask;
}

gboolean rv_cli_output_write(const rv_cli_output *out, rv_cli_write_fn write_fn, gpointer data, GError **error)
{
    if (out->to_stdout || out->direct) return write_direct(out, write_fn, data, error);
    gboolean replacing = g_file_test(out->target, G_FILE_TEST_EXISTS);
    char *folder = g_path_get_dirname(out->target), *base = g_path_get_basename(out->target);
    char *temporary = g_strdup_printf("%s/.%s.reverie-XXXXXX", folder, base);
    g_free(folder);
    g_free(base);
    int fd = g_mkstemp_full(temporary, O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
        int failure = errno;
        g_free(temporary);
        return write_failed(error, out, failure, replacing);
    }
    fchmod(fd, new_file_mode());
    FILE *file = fdopen(fd, "w");
    GError *inner = NULL;
    int failure = fill_file(file, write_fn, data, TRUE, &inner);
    if (fclose(file) != 0 && failure == 0) failure = errno;
    if (failure == 0 && inner == NULL && rename(temporary, out->target) != 0) failure = errno;
    if (failure != 0 || inner != NULL) g_unlink(temporary);
    g_free(temporary);
    if (inner != NULL) {
        g_propagate_error(error, inner);
        return FALSE;
    }
    return failure == 0 ? TRUE : write_failed(error, out, failure, replacing);
}
