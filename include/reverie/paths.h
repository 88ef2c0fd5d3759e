/*
 * paths.h - where reverie finds its own files (plugins, the GPU catalogue,
 * metaflow's rules) relative to the library that is running.
 *
 * Why from the library and not the program: the Python package runs
 * inside python3, whose path says nothing about reverie, and a wheel puts
 * the library, its plugins and its data in a folder of its own.  Wherever
 * libreverie is, its files are beside it:
 *   - a meson build folder (it holds meson-private/): optimizations/ and
 *     data/ in that folder;
 *   - an install, or a wheel: reverie/ in the library's folder (the
 *     plugins; a wheel keeps the data there too).  An installed library
 *     keeps its data in $datadir/reverie, compiled in (gpus.c).
 * An installed library never searches the folder it was built in.
 */
#ifndef REVERIE_PATHS_H
#define REVERIE_PATHS_H

#include <glib.h>

G_BEGIN_DECLS

/* The folder of the running libreverie (g_free), or NULL if unknown. */
char *rv_library_folder(void);

/* `name` in the build folder the running libreverie was built in, when it
 * runs from one (g_free); else NULL. */
char *rv_build_tree_path(const char *name);

/* reverie/`name` (name NULL: the folder reverie/ itself) beside the
 * running libreverie, if it exists (g_free); else NULL. */
char *rv_beside_library_path(const char *name);

G_END_DECLS

#endif
