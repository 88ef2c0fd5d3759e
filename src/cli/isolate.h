/*
 * isolate.h - plugins in a forked child process (isolate.c says why and
 * how): a whole command supervised (--isolate), or one child per variant
 * of a sweep.
 */
#ifndef REVERIE_CLI_ISOLATE_H
#define REVERIE_CLI_ISOLATE_H

#include <glib.h>

/* The default --time-limit, in seconds: long enough for the optimizations
 * and replays of the largest graphs the benchmarks build (a million tasks
 * take seconds), short enough that a hung plugin does not hold a sweep for
 * long.  0 means no limit. */
#define RV_CLI_DEFAULT_TIME_LIMIT_S 300.0

/* ---- in a child ---- */

/* Is this process an isolated child? */
gboolean rv_cli_isolated(void);
/* Around each plugin's apply() a child tells its parent which plugin a
 * death is blamed on (through rv_plugin_watch_apply, plugin.h). */
/* A note line for stderr, sent to the parent (which prints each text
 * once); FALSE when not isolated (print it yourself). */
gboolean rv_cli_isolation_note(const char *line);
/* A sweep child's result, and a supervised command's exit status (sent
 * once its output is flushed). */
void rv_cli_isolation_result(const void *data, gsize length);
void rv_cli_isolation_done(int status);

/* ---- in the parent ---- */

/* Fork; in the child (*in_child TRUE) return at once so the command goes
 * on; in the parent wait for the child and return the command's exit
 * status, or, when the child died, timed out (limit_s from its first
 * plugin on; 0: none) or exited without finishing, print one line and
 * return 3 (2 when no plugin had started). */
int rv_cli_supervise(double limit_s, gboolean *in_child);
/* Pass a signal on to the supervised child (async-signal-safe). */
void rv_cli_isolation_forward(int signal_number);

typedef struct rv_cli_child rv_cli_child;
/* A worker process: in it serve(data, requests) reads fixed-size requests
 * with rv_cli_read_request until it returns FALSE, and answers each with
 * rv_cli_isolation_result.  NULL with an error when fork fails. */
rv_cli_child *rv_cli_worker_start(void (*serve)(gpointer data, int requests), gpointer data, GError **error);
/* Give a worker a request; its time limit runs from now.  FALSE when it
 * could not be sent (the worker died: its end says why). */
gboolean rv_cli_child_request(rv_cli_child *child, const void *request, gsize length);
/* In a worker: the next request, or FALSE when there is no more work. */
gboolean rv_cli_read_request(int requests, void *request, gsize length);
/* Wait up to timeout_ms (-1: until news) for any running child: read what
 * it sent, reap it at its end, stop one past limit_s (0: none). */
void rv_cli_children_wait(GPtrArray *children, int timeout_ms, double limit_s);
gboolean rv_cli_child_finished(const rv_cli_child *child);
/* Is a worker on a request?  Its answer, once sent (taking it makes the
 * worker idle), or NULL. */
gboolean rv_cli_child_busy(const rv_cli_child *child);
GBytes *rv_cli_child_take_result(rv_cli_child *child);
/* Why a finished child left its request unanswered, in words naming the
 * plugin (g_free). */
char *rv_cli_child_failure(const rv_cli_child *child, double limit_s);
/* Free it; a child still running is killed. */
void rv_cli_child_free(rv_cli_child *child);

#endif
