/*
 * output.c - the one writer of every file reverie makes (output.h says
 * what it promises).
 *
 * How a regular file is replaced: the bytes go through a stdio stream of
 * our own (fopencookie) that counts them against the size bound and writes
 * them to a temporary file in the target's folder - an unnamed O_TMPFILE
 * where the file system has it, else ".NAME.reverie-XXXXXX".  On commit
 * the stream is flushed, the file synced, given a name (linkat through
 * /proc/self/fd for an unnamed one) and renamed over the target, and the
 * folder synced.  The temporary is in the target's folder because rename()
 * is atomic only within one file system.
 *
 * Invariants: a named temporary is in `temporaries` from its creation to
 * its rename or removal, so a signal handler can remove it; the slots hold
 * strings that live as long as their output, and are only ever read by the
 * handler.  `inputs` holds (device, inode) of regular files only.
 */
#define _GNU_SOURCE
#include "reverie/output.h"
#include "reverie/error.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    dev_t device;
    ino_t inode;
} file_identity;

static GMutex inputs_lock;
static GArray *inputs;  /* file_identity */
static uint64_t max_bytes = RV_OUTPUT_DEFAULT_MAX_BYTES;

#define TEMPORARY_SLOTS 64
static gpointer temporaries[TEMPORARY_SLOTS];

struct rv_output {
    char *path;          /* as given */
    char *target;        /* the file replaced: path, or where its symbolic link points */
    char *temporary;     /* the named temporary, while it has a name */
    int slot;            /* its slot in `temporaries`, or -1 */
    int fd;
    FILE *stream;
    gboolean direct;     /* standard output, a device or a FIFO: written in place */
    gboolean unnamed;    /* an O_TMPFILE, named only at commit */
    gboolean replace;
    gboolean existed;    /* the target existed when opened */
    uint64_t written;
    int failure;         /* errno of the first failed write */
    gboolean over_limit;
};

/* ---- the inputs of the run ------------------------------------------------ */

static void note_identity(const struct stat *info)
{
    if (!S_ISREG(info->st_mode)) return;
    file_identity id = { info->st_dev, info->st_ino };
    g_mutex_lock(&inputs_lock);
    if (inputs == NULL) inputs = g_array_new(FALSE, FALSE, sizeof(file_identity));
    gboolean known = FALSE;
    for (guint i = 0; i < inputs->len && !known; i++) {
        const file_identity *other = &g_array_index(inputs, file_identity, i);
        known = other->device == id.device && other->inode == id.inode;
    }
    if (!known) g_array_append_val(inputs, id);
    g_mutex_unlock(&inputs_lock);
}

void rv_output_note_input(const char *path)
{
    struct stat info;
    if (path == NULL || stat(path, &info) != 0) return;
    if (!S_ISDIR(info.st_mode)) {
        note_identity(&info);
        return;
    }
    /* a folder of ranks: every file in it may be read */
    GDir *dir = g_dir_open(path, 0, NULL);
    const char *name;
    while (dir != NULL && (name = g_dir_read_name(dir)) != NULL) {
        char *file = g_build_filename(path, name, NULL);
        if (stat(file, &info) == 0) note_identity(&info);
        g_free(file);
    }
    if (dir) g_dir_close(dir);
}

void rv_output_note_input_fd(int fd)
{
    struct stat info;
    if (fstat(fd, &info) == 0) note_identity(&info);
}

void rv_output_forget_inputs(void)
{
    g_mutex_lock(&inputs_lock);
    if (inputs) g_array_set_size(inputs, 0);
    g_mutex_unlock(&inputs_lock);
}

static gboolean is_input(const struct stat *info)
{
    gboolean found = FALSE;
    g_mutex_lock(&inputs_lock);
    for (guint i = 0; inputs && i < inputs->len && !found; i++) {
        const file_identity *id = &g_array_index(inputs, file_identity, i);
        found = id->device == info->st_dev && id->inode == info->st_ino;
    }
    g_mutex_unlock(&inputs_lock);
    return found;
}

gboolean rv_output_fd_is_input(int fd)
{
    struct stat info;
    return fstat(fd, &info) == 0 && S_ISREG(info.st_mode) && is_input(&info);
}

void rv_output_set_max_bytes(uint64_t bytes) { __atomic_store_n(&max_bytes, bytes, __ATOMIC_RELAXED); }
uint64_t rv_output_max_bytes(void) { return __atomic_load_n(&max_bytes, __ATOMIC_RELAXED); }

/* ---- checking a target ------------------------------------------------------ */

#define INPUT_REFUSED "is an input of this run (the input file itself, a link to it, or a rank of its folder); " \
                      "writing it would destroy the input - give another output name"

static gboolean refuse(GError **error, int code, const char *path, const char *what)
{
    g_set_error(error, RV_ERROR, code, "%s: %s", path, what);
    return FALSE;
}

/* Where the bytes of path go: path itself, or the file its symbolic link
 * points to (g_free); NULL with an error for a link to nothing. */
static char *resolve(const char *path, GError **error)
{
    struct stat info;
    if (lstat(path, &info) != 0 || !S_ISLNK(info.st_mode)) return g_strdup(path);
    char *resolved = realpath(path, NULL);
    if (resolved == NULL) {
        refuse(error, RV_ERROR_USAGE, path, "is a symbolic link to nothing; give a real path");
        return NULL;
    }
    char *target = g_strdup(resolved);
    free(resolved);
    return target;
}

/* What stands at the target: FALSE with an error when it may not be
 * written; *exists and *info say what is there. */
static gboolean check_target(const char *path, const char *target, rv_output_flags flags, gboolean *exists,
                             struct stat *info, GError **error)
{
    *exists = stat(target, info) == 0;
    if (!*exists && errno != ENOENT) return refuse(error, RV_ERROR_INPUT, path, g_strerror(errno));
    if (!*exists) {
        /* a new file: its folder must be there (said now, before any slow work) */
        char *folder = g_path_get_dirname(target);
        struct stat folder_info;
        gboolean there = stat(folder, &folder_info) == 0 && S_ISDIR(folder_info.st_mode);
        if (!there)
            g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "cannot write %s: its folder %s does not exist", path, folder);
        g_free(folder);
        return there;
    }
    if (is_input(info)) return refuse(error, RV_ERROR_USAGE, path, INPUT_REFUSED);
    if (S_ISDIR(info->st_mode)) return refuse(error, RV_ERROR_USAGE, path, "is a directory; give a file name");
    if (S_ISREG(info->st_mode) && !(flags & RV_OUTPUT_REPLACE))
        return refuse(error, RV_ERROR_USAGE, path, "already exists; give --force to replace it");
    return TRUE;
}

gboolean rv_output_check(const char *path, rv_output_flags flags, GError **error)
{
    if (path == NULL || *path == '\0') return refuse(error, RV_ERROR_USAGE, "(empty name)", "give an output file name");
    if (strcmp(path, "-") == 0) return TRUE;
    char *target = resolve(path, error);
    if (target == NULL) return FALSE;
    gboolean exists;
    struct stat info;
    gboolean ok = check_target(path, target, flags, &exists, &info, error);
    g_free(target);
    return ok;
}

/* ---- the temporaries ------------------------------------------------------- */

static int claim_slot(char *name)
{
    for (int i = 0; i < TEMPORARY_SLOTS; i++)
        if (g_atomic_pointer_compare_and_exchange(&temporaries[i], NULL, name)) return i;
    return -1;
}

static void release_slot(rv_output *out)
{
    if (out->slot >= 0) g_atomic_pointer_set(&temporaries[out->slot], NULL);
    out->slot = -1;
}

void rv_output_remove_temporaries(void)
{
    for (int i = 0; i < TEMPORARY_SLOTS; i++) {
        const char *name = g_atomic_pointer_get(&temporaries[i]);
        if (name != NULL) unlink(name);
    }
}

void rv_output_disown_temporaries(void)
{
    for (int i = 0; i < TEMPORARY_SLOTS; i++) g_atomic_pointer_set(&temporaries[i], NULL);
}

/* The name a temporary of target takes: ".NAME.reverie-" and six
 * characters, in target's folder (g_free). */
static char *temporary_template(const char *target)
{
    char *folder = g_path_get_dirname(target), *base = g_path_get_basename(target);
    char *name = g_strdup_printf("%s/.%s.reverie-XXXXXX", folder, base);
    g_free(folder);
    g_free(base);
    return name;
}

/* A named temporary: created, and in a slot before anything is written. */
static int open_named(rv_output *out)
{
    char *name = temporary_template(out->target);
    int slot = claim_slot(name);
    if (slot < 0) {
        g_free(name);
        errno = EMFILE;
        return -1;
    }
    /* 0666: open() applies the umask, as for any new file */
    int fd = g_mkstemp_full(name, O_RDWR | O_CLOEXEC, 0666);
    if (fd < 0) {
        int saved = errno;
        g_atomic_pointer_set(&temporaries[slot], NULL);
        g_free(name);
        errno = saved;
        return -1;
    }
    out->temporary = name;
    out->slot = slot;
    return fd;
}

static int open_temporary(rv_output *out)
{
    int fd = -1;
#ifdef O_TMPFILE
    /* needs /proc/self/fd to be given a name at commit; REVERIE_NAMED_TEMPORARIES
     * chooses the named kind (the tests of both kinds, file systems whose
     * O_TMPFILE misbehaves) */
    if (access("/proc/self/fd", X_OK) == 0 && g_getenv("REVERIE_NAMED_TEMPORARIES") == NULL) {
        char *folder = g_path_get_dirname(out->target);
        fd = open(folder, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
        int failure = errno;
        g_free(folder);
        if (fd >= 0) {
            out->unnamed = TRUE;
            return fd;
        }
        /* the folder itself is the problem: say so; else try a named one */
        if (failure == ENOENT || failure == ENOTDIR || failure == EACCES || failure == EROFS || failure == ENOSPC ||
            failure == EDQUOT) {
            errno = failure;
            return -1;
        }
    }
#endif
    return open_named(out);
}

/* ---- the stream --------------------------------------------------------------- */

static ssize_t stream_write(void *cookie, const char *buffer, size_t size)
{
    rv_output *out = cookie;
    if (out->failure) {
        errno = out->failure;
        return -1;
    }
    uint64_t limit = rv_output_max_bytes();
    if (limit > 0 && out->written + size > limit) {
        out->over_limit = TRUE;
        out->failure = errno = EFBIG;
        return -1;
    }
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(out->fd, buffer + done, size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            out->failure = n < 0 ? errno : EIO;
            errno = out->failure;
            return -1;
        }
        done += (size_t)n;
    }
    out->written += size;
    return (ssize_t)size;
}

static int stream_close(void *cookie) { return 0; } /* the fd is the output's */

static gboolean make_stream(rv_output *out)
{
    cookie_io_functions_t functions = { NULL, stream_write, NULL, stream_close };
    out->stream = fopencookie(out, "w", functions);
    if (out->stream == NULL) return FALSE;
    setvbuf(out->stream, NULL, _IOFBF, 1 << 16);
    return TRUE;
}

/* ---- opening ---------------------------------------------------------------- */

static void output_free(rv_output *out)
{
    release_slot(out);
    g_free(out->path);
    g_free(out->target);
    g_free(out->temporary);
    g_free(out);
}

/* The output as messages name it. */
static const char *shown_name(const rv_output *out)
{
    return strcmp(out->path, "-") == 0 ? "standard output" : out->path;
}

static gboolean open_failed(rv_output *out, int code, GError **error)
{
    g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "cannot write %s: %s%s", shown_name(out), g_strerror(code),
                out->existed ? " (the existing file is unchanged)" : "");
    return FALSE;
}

/* A device or a FIFO, written in place; a FIFO without a reader fails at once. */
static int open_direct(const rv_output *out)
{
    if (strcmp(out->path, "-") == 0) {
        fflush(stdout);
        return fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    }
    int fd = open(out->target, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

static gboolean open_target(rv_output *out, rv_output_flags flags, GError **error)
{
    struct stat info;
    gboolean exists = FALSE;
    if (strcmp(out->path, "-") == 0) {
        out->direct = TRUE;
    } else {
        if (!(out->target = resolve(out->path, error))) return FALSE;
        if (!check_target(out->path, out->target, flags, &exists, &info, error)) return FALSE;
        out->direct = exists && !S_ISREG(info.st_mode);
        out->existed = exists && S_ISREG(info.st_mode);
    }
    out->fd = out->direct ? open_direct(out) : open_temporary(out);
    if (out->fd < 0) return open_failed(out, errno, error);
    /* a replaced file keeps its permissions */
    if (out->existed) fchmod(out->fd, info.st_mode & 07777);
    if (!make_stream(out)) return open_failed(out, errno, error);
    return TRUE;
}

rv_output *rv_output_open(const char *path, rv_output_flags flags, GError **error)
{
    if (!rv_output_check(path, flags, error)) return NULL;
    rv_output *out = g_new0(rv_output, 1);
    out->path = g_strdup(path);
    out->slot = -1;
    out->fd = -1;
    out->replace = (flags & RV_OUTPUT_REPLACE) != 0;
    if (open_target(out, flags, error)) return out;
    if (out->fd >= 0) close(out->fd);
    if (out->temporary) unlink(out->temporary);
    output_free(out);
    return NULL;
}

FILE *rv_output_stream(rv_output *out) { return out->stream; }
const char *rv_output_path(const rv_output *out) { return out->path; }

/* ---- committing ------------------------------------------------------------- */

static gboolean write_failed(rv_output *out, int code, GError **error)
{
    const char *unchanged = out->direct ? "" : out->existed ? " (the existing file is unchanged)" : " (nothing was written)";
    if (out->over_limit) {
        char *limit = g_format_size_full(rv_output_max_bytes(), G_FORMAT_SIZE_IEC_UNITS);
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "cannot write %s: it would be larger than the limit on one output, "
                    "%s (--max-output raises it)%s", shown_name(out), limit, unchanged);
        g_free(limit);
    } else {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "cannot write %s: %s%s", shown_name(out), g_strerror(code),
                    unchanged);
    }
    return FALSE;
}

/* Flush and close the stream: errno of the first failure, or 0. */
static int close_stream(rv_output *out)
{
    int failure = fflush(out->stream) != 0 || ferror(out->stream) ? (out->failure ? out->failure : EIO) : 0;
    fclose(out->stream);
    out->stream = NULL;
    return failure;
}

/* A fresh name beside the target for an unnamed temporary, linked to it:
 * the template's Xs made random, again while the name is taken. */
static int name_unnamed(rv_output *out)
{
    static const char letters[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    char *proc = g_strdup_printf("/proc/self/fd/%d", out->fd);
    int failure = EEXIST;
    for (int attempt = 0; attempt < 100 && failure == EEXIST; attempt++) {
        char *name = temporary_template(out->target);
        for (char *x = name + strlen(name) - 6; *x; x++) *x = letters[g_random_int_range(0, sizeof letters - 1)];
        int slot = claim_slot(name);
        failure = linkat(AT_FDCWD, proc, AT_FDCWD, name, AT_SYMLINK_FOLLOW) == 0 ? 0 : errno;
        if (failure == 0) {
            out->temporary = name;
            out->slot = slot;
        } else {
            if (slot >= 0) g_atomic_pointer_set(&temporaries[slot], NULL);
            g_free(name);
        }
    }
    g_free(proc);
    return failure;
}

/* rename(), but without RV_OUTPUT_REPLACE never over a file that appeared
 * since the check (where the file system can refuse that). */
static int rename_over(const rv_output *out)
{
    if (!out->replace && renameat2(AT_FDCWD, out->temporary, AT_FDCWD, out->target, RENAME_NOREPLACE) == 0) return 0;
    if (!out->replace && errno == EEXIST) return EEXIST;
    if (!out->replace && errno != EINVAL && errno != ENOSYS) return errno;
    return rename(out->temporary, out->target) == 0 ? 0 : errno;
}

/* Put the synced temporary in place of the target. */
static int put_in_place(rv_output *out)
{
    if (out->unnamed) {
        int failure = name_unnamed(out);
        if (failure) return failure;
    }
    int failure = rename_over(out);
    if (failure) return failure;
    release_slot(out);
    g_free(out->temporary);
    out->temporary = NULL;
    /* the rename itself is made durable by syncing the folder */
    char *folder = g_path_get_dirname(out->target);
    int dir = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
        fsync(dir);
        close(dir);
    }
    g_free(folder);
    return 0;
}

/* A file read after its output was opened (a table a plugin's parameter
 * names, read while the report is written) is an input too: checked again
 * just before anything replaces the target. */
static gboolean became_input(const rv_output *out)
{
    struct stat info;
    return !out->direct && stat(out->target, &info) == 0 && is_input(&info);
}

gboolean rv_output_commit(rv_output *out, GError **error)
{
    if (became_input(out)) {
        refuse(error, RV_ERROR_USAGE, shown_name(out), INPUT_REFUSED);
        rv_output_abort(out);
        return FALSE;
    }
    int failure = close_stream(out);
    if (failure == 0 && !out->direct && fsync(out->fd) != 0) failure = errno;
    if (failure == 0 && !out->direct) failure = put_in_place(out);
    if (close(out->fd) != 0 && failure == 0 && out->direct && errno != EINTR) failure = errno;
    out->fd = -1;
    if (out->temporary) unlink(out->temporary);
    gboolean ok = failure == 0 || write_failed(out, failure, error);
    output_free(out);
    return ok;
}

void rv_output_abort(rv_output *out)
{
    if (out == NULL) return;
    if (out->stream) {
        __fpurge(out->stream); /* a device or standard output must not get the rest */
        fclose(out->stream);
    }
    if (out->fd >= 0) close(out->fd);
    if (out->temporary) unlink(out->temporary);
    output_free(out);
}

gboolean rv_output_write(const char *path, rv_output_flags flags, rv_output_fill_fn fill, gpointer data,
                         GError **error)
{
    rv_output *out = rv_output_open(path, flags, error);
    if (out == NULL) return FALSE;
    GError *inner = NULL;
    gboolean filled = fill(out->stream, data, &inner);
    if (filled && inner == NULL) return rv_output_commit(out, error);
    /* an I/O error says more than a filler's "could not write" */
    if (out->failure != 0 || ferror(out->stream)) {
        g_clear_error(&inner);
        write_failed(out, out->failure ? out->failure : EIO, error);
    } else if (inner != NULL) {
        g_propagate_error(error, inner);
    } else {
        g_set_error(error, RV_ERROR, RV_ERROR_INTERNAL, "cannot write %s: it failed without saying why", shown_name(out));
    }
    rv_output_abort(out);
    return FALSE;
}
