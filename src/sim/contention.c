/*
 * contention.c - the defaults and the checks of the contention rule, and
 * what a kernel asks of its GPU under the sharing rule (contention.h); the
 * replay itself is in sim.c.
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

rv_kernel_demand rv_kernel_demand_whole(int64_t duration_ns)
{
    rv_kernel_demand demand = { { 1, 1, 1, 1 }, (float)duration_ns, (float)duration_ns };
    return demand;
}

double rv_kernel_demand_share(const rv_kernel_demand *demand, int share, int64_t duration_ns)
{
    if (share < RV_SHARE_OCCUPANCY_COUNT) return CLAMP((double)demand->occupancy[share], 0.0, 1.0);
    double ns = share == RV_SHARE_BANDWIDTH ? demand->bandwidth_ns : demand->compute_ns;
    if (duration_ns <= 0 || !(ns > 0)) return 0;
    return MIN(1.0, ns / (double)duration_ns);
}
