/*
 * launches.c - how each kernel was launched (graph.h's rv_launch), from
 * its event's grid, block, registers and shared memory.
 *
 * One unit differs between runtimes: CUDA and HIP's hipLaunchKernel and
 * hipModuleLaunchKernel take the grid in blocks, but ROCm's
 * hipExtModuleLaunchKernel (hipBLASLt and Tensile GEMMs) takes the global
 * work size in work-items, and roctracer records it as given.  Such a grid
 * is divided by the block here, so that every graph holds blocks.  The
 * launch call is known once launch edges exist (build.c runs this after
 * them).
 */
#include "build.h"
#include <string.h>

/* Launch calls whose grid argument counts work-items (HIP's documentation of
 * hipExtModuleLaunchKernel: "globalWorkSizeX ... in work-items"). */
static gboolean grid_in_work_items(const builder *b, int32_t launch)
{
    if (launch < 0) return FALSE;
    const char *name = rv_strings_get(b->graph->strings, rv_graph_task(b->graph, launch)->name);
    return strstr(name, "hipExtModuleLaunchKernel") != NULL;
}

void rv_build_launches(builder *b)
{
    int32_t count = rv_graph_task_count(b->graph);
    for (int32_t id = 0; id < count; id++) {
        const rv_event *event = builder_event(b, id);
        if (event == NULL || event->kind != RV_EV_KERNEL || event->launch_blocks == 0) continue;
        rv_launch launch = { event->launch_blocks, event->launch_threads, event->launch_registers,
                             event->launch_shared_bytes };
        if (grid_in_work_items(b, g_array_index(b->task_launch, int32_t, id)))
            launch.blocks = (launch.blocks + launch.threads - 1) / launch.threads;
        if ((guint)id >= b->graph->launches->len) g_array_set_size(b->graph->launches, (guint)id + 1);
        g_array_index(b->graph->launches, rv_launch, id) = launch;
    }
}
