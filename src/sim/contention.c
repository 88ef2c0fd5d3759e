/*
 * contention.c - the defaults and the checks of the contention rule
 * (contention.h); the replay itself is in sim.c.
 */
#include "reverie/contention.h"
#include "reverie/error.h"
#include <math.h>

rv_contention rv_contention_default(void)
{
    rv_contention contention = { TRUE, RV_CONTENTION_COMM_SLOWDOWN, RV_CONTENTION_COMPUTE_SLOWDOWN };
    return contention;
}

gboolean rv_contention_check(double comm_slowdown, double compute_slowdown, GError **error)
{
    if (isfinite(comm_slowdown) && isfinite(compute_slowdown) && comm_slowdown >= 1.0 && comm_slowdown <= 100.0 &&
        compute_slowdown >= 1.0 && compute_slowdown <= 100.0)
        return TRUE;
    g_set_error(error, RV_ERROR, RV_ERROR_USAGE,
                "contention slowdowns must lie in [1, 100] (1: no slowdown), got comm %g and compute %g",
                comm_slowdown, compute_slowdown);
    return FALSE;
}
