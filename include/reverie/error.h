/*
 * error.h - the error domain every reverie stage reports through.
 *
 * Library code never prints and never exits: it fills a GError from this
 * domain and returns FALSE (or NULL).  The command line maps the error code
 * to the process exit status documented in DESIGN.md, so the code chosen here
 * decides what a script sees.
 */
#ifndef REVERIE_ERROR_H
#define REVERIE_ERROR_H

#include <glib.h>

G_BEGIN_DECLS

#define RV_ERROR (rv_error_quark())
GQuark rv_error_quark(void);

typedef enum {
    RV_ERROR_USAGE = 1,   /* bad command line: exit 1 */
    RV_ERROR_INPUT = 2,   /* the input file is not something we can read: exit 2 */
    RV_ERROR_PLUGIN = 3,  /* an optimization plugin failed or found nothing: exit 3 */
    RV_ERROR_INTERNAL = 4 /* a bug or an exhausted resource: exit 2 as well */
} rv_error_code;

/* Process exit statuses (DESIGN.md, "Command line"). */
enum { RV_EXIT_OK = 0, RV_EXIT_USAGE = 1, RV_EXIT_INPUT = 2, RV_EXIT_PLUGIN = 3 };

/* The exit status a command should end with for this error. */
int rv_error_exit_status(const GError *error);

G_END_DECLS

#endif
