/*
 * select.h - choosing tasks by kind, phase, layer, name, operator, resource
 * or step (DESIGN "Transformations" -> select).
 *
 * One syntax serves the command line (`reverie query`, `export-graph
 * --select`) and the optimization plugins, so a selection a user tried with
 * `reverie query` means exactly the same inside a plugin.
 *
 * A selection is a list of terms separated by spaces; a task must match every
 * term (AND).  A term is KEY OP VALUE[,VALUE...]; the comma list means OR.
 *
 *   OP   =   exact, or a glob when the value has * or ? (case-sensitive)
 *        ~   substring, case-insensitive
 *        !=  and !~ negate the whole comma list
 *
 *   kind=cpu|kernel|memcpy|memset|sync|comm|dataload|marker|gpu
 *                       (gpu: any task on a GPU stream)
 *   phase=forward|backward|optimizer|dataload|other
 *   layer, name, op     the task's layer tag, its own name (kernel or call),
 *                       its innermost operator
 *   resource            the resource's name ("gpu stream 0/7",
 *                       "thread 1102/1262", "net") or kind (cpu_thread,
 *                       gpu_stream, channel)
 *   step=N              index into graph->steps, 0-based
 *   step=A..B           inclusive range; A.. and ..B are open-ended
 *   step=ProfilerStep#12  a step by name (globs allowed)
 *   step=none           tasks outside every step
 *
 * Quotes group words ("layer=nn.Module: conv1"), and a word with no operator
 * continues the previous term's value, so names with spaces work unquoted
 * too.  The empty selection matches every task.  kind, phase and step take
 * = and != only.
 */
#ifndef REVERIE_SELECT_H
#define REVERIE_SELECT_H

#include <glib.h>
#include <stdint.h>
#include "reverie/graph.h"

G_BEGIN_DECLS

typedef struct rv_selection rv_selection;

/* The syntax above in a few lines, for --help texts. */
#define RV_SELECTION_HELP                                                                \
    "SELECT is space-separated terms KEY=VALUE, all of which must match; a comma list\n" \
    "means any of.  = is exact or a glob (* ?), ~ is a case-insensitive substring,\n"    \
    "!= and !~ negate.  Keys:\n"                                                         \
    "  kind=cpu|kernel|memcpy|memset|sync|comm|dataload|marker|gpu\n"                    \
    "  phase=forward|backward|optimizer|dataload|other\n"                                \
    "  layer=, name=, op= (innermost operator), resource= (name or kind)\n"              \
    "  step=N (0-based), step=A..B, step=ProfilerStep#12, step=none\n"                   \
    "Example: kind=kernel phase=backward layer~conv 'name=*gemm*'\n"                     \
    "(quote globs, and terms with !~, from the shell)\n"

/* Parse a selection; NULL with one RV_ERROR_USAGE line naming the bad key or
 * value.  NULL or empty text gives a selection that matches every task. */
rv_selection *rv_selection_parse(const char *text, GError **error);
/* Parse command-line pieces (each may hold several terms) as if joined by spaces. */
rv_selection *rv_selection_parse_argv(char **pieces, int count, GError **error);
void rv_selection_free(rv_selection *sel);

/* The selection in canonical form ("kind=kernel phase=backward"); "" when empty. */
const char *rv_selection_text(const rv_selection *sel);
/* TRUE when the selection has no terms and so matches every task. */
gboolean rv_selection_is_empty(const rv_selection *sel);

/* Does one task match?  Removed tasks are matched like any other; callers
 * that walk the graph should use rv_select, which skips them and is much
 * faster on large graphs (it caches per-name verdicts). */
gboolean rv_selection_matches(const rv_selection *sel, const rv_graph *graph, int32_t task);

/* The ids (int32_t) of the matching tasks that are not removed, in id order.
 * Free with g_array_unref. */
GArray *rv_select(const rv_graph *graph, const rv_selection *sel);

/* rv_selection_parse and rv_select in one: NULL with the parse error set,
 * else the ids (g_array_unref).  A plugin that calls it before it changes
 * the graph may be answered from memory: on a graph that called
 * rv_graph_remember_selections (a sweep's baseline), and on copies of it
 * (rv_graph_copy, rv_graph_assign) before any plugin was applied to them,
 * the ids of a selection text are matched once and remembered (up to 64
 * texts).  The invariant relied on: such a copy's tasks, resources and
 * steps are the remembering graph's until a plugin is applied
 * (graph->applied grows) - nothing but plugins changes a sweep's copies. */
GArray *rv_select_text(const rv_graph *graph, const char *text, GError **error);
/* Remember selections for rv_select_text, from now on: call it on a graph
 * whose copies are only changed by plugins (rv_plugin_apply). */
void rv_graph_remember_selections(rv_graph *graph);

G_END_DECLS

#endif
