/*
 * paths.c - reverie's own files, found beside the running library
 * (paths.h): dladdr() names the object that holds this code.
 */
#define _GNU_SOURCE
#include "reverie/paths.h"
#include <dlfcn.h>

char *rv_library_folder(void)
{
    Dl_info info;
    if (dladdr((const void *)rv_library_folder, &info) == 0 || info.dli_fname == NULL) return NULL;
    char *real = g_canonicalize_filename(info.dli_fname, NULL);
    char *folder = g_path_get_dirname(real);
    g_free(real);
    return folder;
}

char *rv_build_tree_path(const char *name)
{
    char *folder = rv_library_folder();
    if (folder == NULL) return NULL;
    char *marker = g_build_filename(folder, "meson-private", NULL);
    char *path = g_file_test(marker, G_FILE_TEST_IS_DIR) ? g_build_filename(folder, name, NULL) : NULL;
    g_free(marker);
    g_free(folder);
    if (path != NULL && !g_file_test(path, G_FILE_TEST_EXISTS)) g_clear_pointer(&path, g_free);
    return path;
}

char *rv_beside_library_path(const char *name)
{
    char *folder = rv_library_folder();
    if (folder == NULL) return NULL;
    char *path = name ? g_build_filename(folder, "reverie", name, NULL) : g_build_filename(folder, "reverie", NULL);
    g_free(folder);
    if (!g_file_test(path, G_FILE_TEST_EXISTS)) g_clear_pointer(&path, g_free);
    return path;
}
