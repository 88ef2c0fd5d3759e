/* query.c - placeholder. */
#include "cli.h"
int rv_cmd_query(int argc, char **argv)
{
    (void)argc; (void)argv;
    return rv_cli_usage("query", "not implemented yet");
}
