/* export_graph.c - placeholder. */
#include "cli.h"
int rv_cmd_export_graph(int argc, char **argv)
{
    (void)argc; (void)argv;
    return rv_cli_usage("export_graph", "not implemented yet");
}
