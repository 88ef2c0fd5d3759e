/*
 * fuzz_metaflow.c - libFuzzer harness for metaflow's rule files
 * (optimizations/metaflow.c, whose readers are static: the plugin's source
 * is compiled into the harness).  Each input is written to a file and read
 * as a rule file, as `--opt metaflow:rules=FILE` reads it.
 *
 * The harness aborts on any sanitizer report and when a promise breaks:
 *   - a refused file fails with anything but one line of RV_ERROR_USAGE
 *     that names the file (a user must learn which file and what is wrong);
 *   - an accepted file has no rule it can act on.
 * Build and run: tests/fuzz/run_all.sh.
 */
#include "../../optimizations/metaflow.c"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char *rule_file;

static void fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_metaflow: %s: %s\n", what, detail);
    abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    int fd = g_file_open_tmp("fuzz-metaflow-XXXXXX.json", &rule_file, NULL);
    if (fd < 0) fail("no temporary file", "");
    close(fd);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (rule_file == NULL) LLVMFuzzerInitialize(NULL, NULL);
    if (!g_file_set_contents(rule_file, (const char *)data, (gssize)size, NULL)) fail("cannot write", rule_file);
    GError *error = NULL;
    GPtrArray *rules = read_rules(rule_file, rule_file, &error);
    if (rules != NULL) {
        for (guint i = 0; i < rules->len; i++)
            if (((const rule *)g_ptr_array_index(rules, i))->action > ACTION_SCALE) fail("a rule with no action", rule_file);
        g_ptr_array_unref(rules);
    } else if (error == NULL || error->domain != RV_ERROR || error->code != RV_ERROR_USAGE) {
        fail("refused without an RV_ERROR_USAGE error", error ? error->message : "(no error)");
    } else if (strchr(error->message, '\n') != NULL || strstr(error->message, rule_file) == NULL) {
        fail("refused without one line naming the file", error->message);
    }
    g_clear_error(&error);
    return 0;
}
