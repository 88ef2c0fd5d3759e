/* store.c - placeholder until the .rvg format lands. */
#include "reverie/store.h"
#include "reverie/error.h"

gboolean rv_store_is_graph_file(const char *path) { (void)path; return FALSE; }
gboolean rv_store_save(const rv_graph *graph, const char *path, GError **error)
{
    (void)graph;
    g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "%s: saving graphs is not implemented yet", path);
    return FALSE;
}
rv_graph *rv_store_load(const char *path, GError **error)
{
    g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: loading graphs is not implemented yet", path);
    return NULL;
}
