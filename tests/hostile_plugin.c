/*
 * hostile_plugin.c - plugins that misbehave, one way each, for the tests of
 * the loader and of the graph check after apply() (cli_hostile.sh,
 * test_hardening.c).  tests/meson.build builds this file once per
 * behaviour, selected by HOSTILE_<NAME>:
 *
 *   FAIL_SILENTLY      apply() returns FALSE and sets no error
 *   SUCCEED_WITH_ERROR apply() sets an error and returns TRUE
 *   BAD_EDGE           adds an edge to a task that does not exist
 *   CYCLE              adds an edge that closes a cycle
 *   NEGATIVE_DURATION  sets a duration of -5 ns
 *   HUGE_DURATION      sets a duration of INT64_MAX
 *   BAD_KIND           sets a task kind that does not exist
 *   BAD_RESOURCE       moves a task to a resource that does not exist
 *   WRONG_ABI          declares another plugin ABI version
 *   NOT_A_PLUGIN       exports no descriptor; its constructor creates the
 *                      file named by $REVERIE_HOSTILE_MARKER, so a test can
 *                      tell whether it was loaded
 *   ESCAPES            a correct plugin whose name, summary and notes hold
 *                      terminal escapes
 *   SELF_LOOP          adds an edge from a task to itself
 *   FOREIGN_ERROR      fails with an error of GLib's file domain
 *   CRASH              dies of SIGSEGV
 *   HANG               never returns
 *   EXIT               calls exit(0)
 *   SOMETIMES          for sweeps: with n equal to crash, hang or exit it
 *                      does that (as above), otherwise nothing
 */
#include "reverie/error.h"
#include "reverie/plugin.h"
#include "reverie/transform.h"
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <unistd.h>

#ifdef HOSTILE_NOT_A_PLUGIN

__attribute__((constructor)) static void leave_marker(void)
{
    const char *marker = getenv("REVERIE_HOSTILE_MARKER");
    FILE *file = marker ? fopen(marker, "w") : NULL;
    if (file) fclose(file);
}

int hostile_not_a_plugin(void) { return 0; }

#else

static const rv_param_spec hostile_params[] = {
    { "task", RV_PARAM_INTEGER, "0", NULL, "which task to damage", NULL },
#ifdef HOSTILE_SOMETIMES
    { "n", RV_PARAM_INTEGER, "0", NULL, "the variant", NULL },
    { "crash", RV_PARAM_INTEGER, "-1", NULL, "crash when n is this", NULL },
    { "hang", RV_PARAM_INTEGER, "-1", NULL, "never return when n is this", NULL },
    { "exit", RV_PARAM_INTEGER, "-1", NULL, "call exit(0) when n is this", NULL },
#endif
    { NULL }
};

/* What CRASH, HANG and EXIT do.  The crash is SIGSEGV, as a plugin's bad
 * pointer would give, but raised: a null store is undefined behaviour,
 * which the sanitizer build would report instead of crashing. */
static void crash(void) { raise(SIGSEGV); }
static void hang(void) { for (;;) pause(); }

/* The first edge, whose reverse closes a cycle. */
static const rv_edge *first_edge(const rv_graph *graph)
{
    return graph->edges->len ? &g_array_index(graph->edges, rv_edge, 0) : NULL;
}

static gboolean hostile_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    int64_t chosen = rv_params_integer(params, "task");
    int32_t id = chosen >= 0 && chosen < rv_graph_task_count(graph) ? (int32_t)chosen : 0;
    rv_task *task = rv_graph_task(graph, id);
    (void)task;
    (void)first_edge;
    (void)output;
#if defined(HOSTILE_FAIL_SILENTLY)
    return FALSE;
#elif defined(HOSTILE_SUCCEED_WITH_ERROR)
    g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "something went wrong, but I say it went well");
#elif defined(HOSTILE_BAD_EDGE)
    rv_graph_add_edge(graph, id, rv_graph_task_count(graph) + 5, RV_EDGE_PLUGIN, FALSE);
#elif defined(HOSTILE_CYCLE)
    const rv_edge *edge = first_edge(graph);
    if (edge) rv_transform_add_edge(graph, edge->to, edge->from);
#elif defined(HOSTILE_NEGATIVE_DURATION)
    task->duration_ns = -5;
#elif defined(HOSTILE_HUGE_DURATION)
    task->duration_ns = INT64_MAX;
#elif defined(HOSTILE_BAD_KIND)
    task->kind = 200;
#elif defined(HOSTILE_BAD_RESOURCE)
    task->resource = (int32_t)graph->resources->len + 1000;
#elif defined(HOSTILE_ESCAPES)
    g_string_append(output->notes, "    note with \033]0;pwned\007 a title and \033[2J a clear\n");
#elif defined(HOSTILE_SELF_LOOP)
    rv_graph_add_edge(graph, id, id, RV_EDGE_PLUGIN, FALSE);
#elif defined(HOSTILE_FOREIGN_ERROR)
    g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_NOENT, "rules.json: No such file or directory");
    return FALSE;
#elif defined(HOSTILE_CRASH)
    crash();
#elif defined(HOSTILE_HANG)
    hang();
#elif defined(HOSTILE_EXIT)
    exit(0);
#elif defined(HOSTILE_SOMETIMES)
    int64_t n = rv_params_integer(params, "n");
    if (n == rv_params_integer(params, "crash")) crash();
    if (n == rv_params_integer(params, "hang")) hang();
    if (n == rv_params_integer(params, "exit")) exit(0);
#endif
    (void)crash;
    (void)hang;
    return TRUE;
}

#ifdef HOSTILE_WRONG_ABI
#define HOSTILE_ABI (RV_PLUGIN_ABI_VERSION + 100)
#else
#define HOSTILE_ABI RV_PLUGIN_ABI_VERSION
#endif

#ifdef HOSTILE_ESCAPES
#define HOSTILE_NAME "hostile\033[31m"
#define HOSTILE_SUMMARY "summary\r\nfake line\033]0;title\007"
#else
#define HOSTILE_NAME "hostile"
#define HOSTILE_SUMMARY "a plugin that misbehaves, for tests"
#endif

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    HOSTILE_ABI, HOSTILE_NAME, HOSTILE_SUMMARY, hostile_params, hostile_apply, NULL,
};

#endif
