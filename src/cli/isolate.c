/*
 * isolate.c - optimization plugins run where they cannot take the run down:
 * in a forked child process (`--isolate`; every variant of a sweep unless
 * `--no-isolate`).
 *
 * A plugin is foreign code in reverie's address space: one that crashes,
 * never returns or calls exit() would end reverie with it (exit() even with
 * status 0 and no output).  A child process gets the loaded graph for free
 * (fork shares it copy-on-write) and its death is only news to the parent:
 *
 *   - a whole command (whatif, validate, breakdown, ... with --isolate):
 *     the parent forks right after parsing its options and only supervises;
 *     the child runs the command and, once its output is flushed, reports
 *     its exit status ('D').  The child cannot send back the rewritten
 *     graph instead: a plugin may leave a scheduling policy and data that
 *     live in its own memory, which no file format carries, so the child
 *     replays and reports as well;
 *   - a sweep: -j worker processes forked once the input is loaded.  The
 *     parent sends each idle worker a variant (on a pipe of its own); the
 *     worker copies the graph into its scratch graph, applies the
 *     variant's plugins, replays and sends back the row's numbers ('R').
 *     A worker that dies costs the one variant it was running (an error
 *     row) and is replaced by a fresh fork of the parent, so no plugin can
 *     take another variant with it.  (A fork per variant would also
 *     start each variant from a pristine process, but costs a fork, the
 *     copy-on-write faults and an exit per variant: several times the
 *     variant itself on a 100k-task graph.)
 *
 * Before each plugin's apply() the child says so ('A', the plugin's name)
 * and after it ('a'), so that a death is blamed on the right plugin and
 * phase.  The parent turns a signal, an exit without a result and a child
 * that runs past --time-limit (killed with SIGKILL) into one error line or
 * one error row, exit status 3.  Notes a child would print ('N') are
 * printed by the parent, each text once, so a sweep's thousands of
 * children do not repeat them.
 *
 * Messages are frames on a pipe: one type byte, a 32-bit length, the bytes.
 * The parent forks only from its main thread, and flushes every stdio
 * stream first, so that no child writes a buffered byte twice.
 */
#define _GNU_SOURCE
#include "isolate.h"
#include "cli.h"
#include "reverie/output.h"
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

enum { MSG_APPLY = 'A', MSG_APPLIED = 'a', MSG_RESULT = 'R', MSG_DONE = 'D', MSG_NOTE = 'N' };

struct rv_cli_child {
    pid_t pid;
    int fd;                  /* read end of its pipe; -1 at its end */
    int requests;            /* a worker's: write end of the pipe its requests come on; else -1 */
    gboolean busy;           /* a worker given a request and not done with it */
    GByteArray *buffer;      /* bytes received, not yet parsed */
    gint64 limit_from_us;    /* when its time limit started; 0: not yet */
    char *applying;          /* the plugin inside apply(), or NULL */
    char *last_plugin;       /* the last plugin it started */
    GBytes *result;
    int done_status;         /* from 'D'; -1 before */
    gboolean reaped;
    int wait_status;
    gboolean timed_out;
    gint64 stopped_us;       /* when it was asked to stop (SIGTERM) */
};

static int channel = -1;            /* in a child: the write end */
static volatile pid_t supervised;   /* in a supervising parent: its child */
static GHashTable *notes_printed;   /* in a parent: note texts already shown */

/* ---- the child's side ------------------------------------------------------- */

static void send_frame(char type, const void *data, gsize length)
{
    if (channel < 0) return;
    guint8 header[5] = { (guint8)type };
    guint32 size = (guint32)MIN(length, G_MAXUINT32);
    memcpy(header + 1, &size, 4);
    const guint8 *parts[2] = { header, data };
    gsize lengths[2] = { sizeof header, size };
    for (int p = 0; p < 2; p++)
        for (gsize done = 0; done < lengths[p];) {
            ssize_t n = write(channel, parts[p] + done, lengths[p] - done);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return; /* the parent is gone: nobody to tell */
            done += (gsize)n;
        }
}

gboolean rv_cli_isolated(void) { return channel >= 0; }

/* The child's watch on rv_plugin_apply (plugin.h), wherever the command
 * applies its plugins (the library's what-if, the command's own loops). */
static void watch_apply(const char *plugin, gboolean entering)
{
    if (entering)
        send_frame(MSG_APPLY, plugin, strlen(plugin));
    else
        send_frame(MSG_APPLIED, NULL, 0);
}

gboolean rv_cli_isolation_note(const char *line)
{
    if (channel < 0) return FALSE;
    send_frame(MSG_NOTE, line, strlen(line));
    return TRUE;
}

void rv_cli_isolation_result(const void *data, gsize length)
{
    send_frame(MSG_RESULT, data, length);
}

void rv_cli_isolation_done(int status)
{
    guint8 code = (guint8)status;
    send_frame(MSG_DONE, &code, 1);
}

/* ---- the parent's side: one child ---------------------------------------------- */

static void print_note_once(const char *text, gsize length)
{
    if (notes_printed == NULL) notes_printed = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    char *line = g_strndup(text, length);
    if (!g_hash_table_add(notes_printed, line)) return;
    fprintf(stderr, "%s\n", line);
}

static void take_frame(rv_cli_child *child, guint8 type, const guint8 *data, guint32 length)
{
    switch (type) {
    case MSG_APPLY:
        g_free(child->applying);
        g_free(child->last_plugin);
        child->applying = g_strndup((const char *)data, length);
        child->last_plugin = g_strdup(child->applying);
        if (child->limit_from_us == 0) child->limit_from_us = g_get_monotonic_time();
        break;
    case MSG_APPLIED:
        g_clear_pointer(&child->applying, g_free);
        break;
    case MSG_RESULT:
        if (child->result == NULL) child->result = g_bytes_new(data, length);
        break;
    case MSG_DONE:
        if (length == 1) child->done_status = data[0];
        break;
    case MSG_NOTE:
        print_note_once((const char *)data, length);
        break;
    default:
        break;
    }
}

static void parse_frames(rv_cli_child *child)
{
    gsize at = 0;
    while (child->buffer->len - at >= 5) {
        guint32 length;
        memcpy(&length, child->buffer->data + at + 1, 4);
        if (child->buffer->len - at - 5 < length) break;
        take_frame(child, child->buffer->data[at], child->buffer->data + at + 5, length);
        at += 5 + (gsize)length;
    }
    g_byte_array_remove_range(child->buffer, 0, (guint)at);
}

/* Read what the child sent; at the end of its pipe, reap it. */
static void read_child(rv_cli_child *child)
{
    guint8 chunk[65536];
    ssize_t n = read(child->fd, chunk, sizeof chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n > 0) {
        g_byte_array_append(child->buffer, chunk, (guint)n);
        parse_frames(child);
        return;
    }
    close(child->fd);
    child->fd = -1;
    while (waitpid(child->pid, &child->wait_status, 0) < 0 && errno == EINTR) {}
    child->reaped = TRUE;
}

/* Past its time limit: SIGTERM first, so that its handler removes the
 * temporaries of files it was writing; SIGKILL a second later. */
#define STOP_GRACE_US 1000000

static void stop_child(rv_cli_child *child)
{
    if (!child->timed_out) {
        child->timed_out = TRUE;
        child->stopped_us = g_get_monotonic_time();
        kill(child->pid, SIGTERM);
    } else {
        kill(child->pid, SIGKILL);
    }
}

/* Milliseconds until the child's time limit (or, once stopped, until it
 * is killed); -1: no limit running. */
static int time_left_ms(const rv_cli_child *child, double limit_s)
{
    if (limit_s <= 0 || child->limit_from_us == 0) return -1;
    double left = child->timed_out ? (STOP_GRACE_US - (g_get_monotonic_time() - child->stopped_us)) / 1e3
                                   : limit_s * 1e3 - (g_get_monotonic_time() - child->limit_from_us) / 1e3;
    return left <= 0 ? 0 : (int)MIN(left + 1, (double)G_MAXINT);
}

void rv_cli_children_wait(GPtrArray *children, int timeout_ms, double limit_s)
{
    struct pollfd *polls = g_new0(struct pollfd, MAX(children->len, 1));
    rv_cli_child **polled = g_new0(rv_cli_child *, MAX(children->len, 1));
    nfds_t count = 0;
    int wait_ms = timeout_ms;
    for (guint i = 0; i < children->len; i++) {
        rv_cli_child *child = g_ptr_array_index(children, i);
        if (child->fd < 0) continue;
        int left = time_left_ms(child, limit_s);
        if (left == 0) stop_child(child);
        else if (left > 0) wait_ms = wait_ms < 0 ? left : MIN(wait_ms, left);
        polls[count] = (struct pollfd){ child->fd, POLLIN, 0 };
        polled[count++] = child;
    }
    if (count > 0 && poll(polls, count, wait_ms) > 0)
        for (nfds_t i = 0; i < count; i++)
            if (polls[i].revents) read_child(polled[i]);
    g_free(polls);
    g_free(polled);
}

gboolean rv_cli_child_finished(const rv_cli_child *child) { return child->reaped; }
gboolean rv_cli_child_busy(const rv_cli_child *child) { return child->busy; }

GBytes *rv_cli_child_take_result(rv_cli_child *child)
{
    GBytes *result = child->result;
    if (result == NULL) return NULL;
    child->result = NULL;
    child->busy = FALSE;
    child->limit_from_us = 0; /* the limit runs per request */
    return result;
}

void rv_cli_child_free(rv_cli_child *child)
{
    if (child == NULL) return;
    if (!child->reaped) {
        kill(child->pid, SIGKILL);
        while (waitpid(child->pid, NULL, 0) < 0 && errno == EINTR) {}
    }
    if (child->fd >= 0) close(child->fd);
    if (child->requests >= 0) close(child->requests);
    g_byte_array_unref(child->buffer);
    g_free(child->applying);
    g_free(child->last_plugin);
    if (child->result) g_bytes_unref(child->result);
    g_free(child);
}

/* A child process, started: in the child `serve(data, requests)` runs (a
 * worker, when `requests` is wanted) and the process ends with _exit
 * (never exit(): the parent's atexit handlers are not the child's to run);
 * without `serve` the child returns NULL to go on with the command.  NULL
 * in the parent with errno set when fork fails. */
static rv_cli_child *start(void (*serve)(gpointer, int), gpointer data, gboolean worker)
{
    int ends[2], requests[2] = { -1, -1 };
    pid_t parent = getpid();
    fflush(NULL);
    if (pipe2(ends, O_CLOEXEC) != 0) return NULL;
    if (worker && pipe2(requests, O_CLOEXEC) != 0) {
        close(ends[0]);
        close(ends[1]);
        return NULL;
    }
    pid_t pid = fork();
    if (pid < 0) {
        int saved = errno;
        close(ends[0]);
        close(ends[1]);
        if (worker) {
            close(requests[0]);
            close(requests[1]);
        }
        errno = saved;
        return NULL;
    }
    if (pid == 0) {
        /* a child outlives no parent: killed by a signal the child did not
         * get (kill PID, not the group), the run is over */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(RV_EXIT_INPUT);
        close(ends[0]);
        if (worker) close(requests[1]);
        channel = ends[1];
        rv_plugin_watch_apply(watch_apply);
        g_clear_pointer(&notes_printed, g_hash_table_destroy);
        rv_output_disown_temporaries();
        if (serve != NULL) {
            serve(data, requests[0]);
            _exit(0);
        }
        return NULL; /* a supervised command goes on in the child */
    }
    close(ends[1]);
    if (worker) close(requests[0]);
    rv_cli_child *child = g_new0(rv_cli_child, 1);
    child->pid = pid;
    child->fd = ends[0];
    child->requests = worker ? requests[1] : -1;
    child->buffer = g_byte_array_new();
    child->done_status = -1;
    return child;
}

rv_cli_child *rv_cli_worker_start(void (*serve)(gpointer data, int requests), gpointer data, GError **error)
{
    rv_cli_child *child = start(serve, data, TRUE);
    if (child == NULL)
        g_set_error(error, RV_ERROR, RV_ERROR_INTERNAL, "cannot start an isolated process: %s", g_strerror(errno));
    return child;
}

gboolean rv_cli_child_request(rv_cli_child *child, const void *request, gsize length)
{
    g_clear_pointer(&child->applying, g_free);
    g_clear_pointer(&child->last_plugin, g_free);
    child->busy = TRUE;
    child->limit_from_us = g_get_monotonic_time();
    const guint8 *bytes = request;
    for (gsize done = 0; done < length;) {
        ssize_t n = write(child->requests, bytes + done, length - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return FALSE; /* it died: its end says how */
        done += (gsize)n;
    }
    return TRUE;
}

gboolean rv_cli_read_request(int requests, void *request, gsize length)
{
    guint8 *bytes = request;
    for (gsize done = 0; done < length;) {
        ssize_t n = read(requests, bytes + done, length - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return FALSE; /* the parent closed it: no more work */
        done += (gsize)n;
    }
    return TRUE;
}

/* ---- what went wrong, in words ------------------------------------------------ */

char *rv_cli_child_failure(const rv_cli_child *child, double limit_s)
{
    const char *plugin = child->applying ? child->applying : child->last_plugin;
    char *who = plugin ? g_strdup_printf("%s: ", plugin) : g_strdup("");
    const char *where = child->applying ? "in apply()" : plugin ? "after its apply() (in its priority hook, or in the replay)"
                                                                : "before any plugin ran";
    char *text;
    if (child->timed_out)
        text = g_strdup_printf("%sdid not finish within %g s (--time-limit), stopped %s", who, limit_s, where);
    else if (WIFSIGNALED(child->wait_status))
        text = g_strdup_printf("%scrashed %s (signal %d, %s)", who, where, WTERMSIG(child->wait_status),
                               g_strsignal(WTERMSIG(child->wait_status)));
    else if (WIFEXITED(child->wait_status))
        text = g_strdup_printf("%scalled exit(%d) %s, which would have ended reverie", who,
                               WEXITSTATUS(child->wait_status), where);
    else
        text = g_strdup_printf("%sthe isolated process ended %s without a result", who, where);
    g_free(who);
    return text;
}

/* ---- a whole command, supervised ----------------------------------------------- */

void rv_cli_isolation_forward(int signal_number)
{
    if (supervised > 0) kill(supervised, signal_number);
}

int rv_cli_supervise(double limit_s, gboolean *in_child)
{
    *in_child = FALSE;
    rv_cli_child *child = start(NULL, NULL, FALSE);
    if (child == NULL && channel >= 0) {
        *in_child = TRUE;
        return RV_EXIT_OK;
    }
    if (child == NULL) {
        fprintf(stderr, "reverie: cannot start an isolated process (--isolate): %s\n", g_strerror(errno));
        return RV_EXIT_INPUT;
    }
    supervised = child->pid;
    GPtrArray *one = g_ptr_array_new();
    g_ptr_array_add(one, child);
    while (!child->reaped) rv_cli_children_wait(one, -1, limit_s);
    g_ptr_array_unref(one);
    supervised = 0;
    int status;
    if (!child->timed_out && child->done_status >= 0 && WIFEXITED(child->wait_status)) {
        status = child->done_status;
    } else {
        char *failure = rv_cli_child_failure(child, limit_s);
        char *shown = g_strdup(rv_cli_shown(failure));
        fprintf(stderr, "reverie: %s; nothing was written\n", shown);
        g_free(shown);
        g_free(failure);
        /* a crash before any plugin ran is reverie's own */
        status = child->last_plugin || child->timed_out ? RV_EXIT_PLUGIN : RV_EXIT_INPUT;
    }
    rv_cli_child_free(child);
    return status;
}
