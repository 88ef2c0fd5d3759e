/* import.c - placeholder. */
#include "cli.h"
int rv_cmd_import(int argc, char **argv)
{
    (void)argc; (void)argv;
    return rv_cli_usage("import", "not implemented yet");
}
