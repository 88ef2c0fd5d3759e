/*
 * report.h - per-step times, recorded and simulated, by DESIGN's step rule.
 *
 * A step ends at the later of its ProfilerStep annotation's end and the end
 * of the last GPU task launched inside the annotation.  A step's time runs
 * from the previous step's end (the first step: from its own start).  The
 * same rule is applied to recorded times (to match tracestat.py) and to
 * simulated times (the annotation's ends are the step's marker tasks).
 */
#ifndef REVERIE_REPORT_H
#define REVERIE_REPORT_H

#include <glib.h>
#include <stdint.h>
#include "reverie/graph.h"
#include "reverie/sim.h"

G_BEGIN_DECLS

typedef struct {
    const char *name;
    int64_t recorded_ns;
    int64_t simulated_ns;
} rv_step_time;

/* One entry per step of the graph.  Free with g_array_unref. */
GArray *rv_step_times(const rv_graph *graph, const rv_sim_result *sim);

/* |simulated - recorded| / recorded, or 0 when recorded is 0. */
double rv_relative_error(int64_t recorded_ns, int64_t simulated_ns);

G_END_DECLS

#endif
