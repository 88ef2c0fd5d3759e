/*
 * error.c - the reverie error domain and its mapping to exit statuses.
 */
#include "reverie/error.h"

G_DEFINE_QUARK(reverie-error-quark, rv_error)

int rv_error_exit_status(const GError *error)
{
    if (error == NULL)
        return RV_EXIT_OK;
    /* GLib's option errors are bad usage; any other domain (a file, a
     * conversion) is about the input: exit 2.  Plugin failures arrive as
     * RV_ERROR_PLUGIN whatever domain the plugin used (plugin.c). */
    if (error->domain == G_OPTION_ERROR)
        return RV_EXIT_USAGE;
    if (error->domain != RV_ERROR)
        return RV_EXIT_INPUT;
    switch (error->code) {
    case RV_ERROR_USAGE: return RV_EXIT_USAGE;
    case RV_ERROR_PLUGIN: return RV_EXIT_PLUGIN;
    default: return RV_EXIT_INPUT;
    }
}
