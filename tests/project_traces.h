/*
 * project_traces.h - the real traces the project ships in traces/, for the
 * test programs.
 *
 * A test program names the traces it reads before it runs anything; if one
 * is missing (a partial checkout) the whole program reports itself skipped
 * with meson's exit code 77, never as passed.
 */
#ifndef REVERIE_TESTS_PROJECT_TRACES_H
#define REVERIE_TESTS_PROJECT_TRACES_H

#include <glib.h>

/* The path of a shipped trace (g_free), relative names as under traces/.
 * The folder is REVERIE_TRACES (set by tests/meson.build). */
char *project_trace_path(const char *name);

/* Exit 77 (skipped), naming the first missing file, unless every listed
 * trace (NULL-terminated) is there. */
void require_project_traces(const char *const *names);

#endif
