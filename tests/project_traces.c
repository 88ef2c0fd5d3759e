/*
 * project_traces.c - locate the shipped traces; skip when one is missing
 * (see project_traces.h).
 */
#include "project_traces.h"
#include <stdio.h>
#include <stdlib.h>

char *project_trace_path(const char *name)
{
    const char *folder = g_getenv("REVERIE_TRACES");
    return g_build_filename(folder ? folder : "traces", name, NULL);
}

void require_project_traces(const char *const *names)
{
    for (const char *const *name = names; *name != NULL; name++) {
        char *path = project_trace_path(*name);
        gboolean present = g_file_test(path, G_FILE_TEST_IS_REGULAR);
        if (!present) {
            fprintf(stderr, "SKIP: %s is missing (set REVERIE_TRACES, or run through meson test)\n", path);
            g_free(path);
            exit(77);
        }
        g_free(path);
    }
}
