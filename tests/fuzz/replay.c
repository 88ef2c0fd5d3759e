/*
 * replay.c - run a libFuzzer harness over files, without libFuzzer: the
 * regression inputs of tests/fuzz/regressions/ (and other seeds) replayed
 * by `meson test` in every build, the sanitizer build included.
 *
 * usage: replay-HARNESS FILE|FOLDER...  (a folder: every file in it whose
 * name starts with one of the comma-separated prefixes in
 * REVERIE_REPLAY_PREFIX, or every file when it is not set)
 * The harness aborts on a broken promise; this exits 1 if a file is missing.
 */
#include <glib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

static int replay_file(const char *path)
{
    gchar *data = NULL;
    gsize length = 0;
    if (!g_file_get_contents(path, &data, &length, NULL)) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        return 1;
    }
    LLVMFuzzerTestOneInput((const uint8_t *)data, length);
    g_free(data);
    return 0;
}

static gboolean wanted(const char *name, char **prefixes)
{
    if (prefixes == NULL) return TRUE;
    for (char **prefix = prefixes; *prefix; prefix++)
        if (g_str_has_prefix(name, *prefix)) return TRUE;
    return FALSE;
}

static int replay_folder(const char *folder, char **prefixes, int *count)
{
    GDir *dir = g_dir_open(folder, 0, NULL);
    if (dir == NULL) return 0; /* an optional folder */
    const char *name;
    int failed = 0;
    while ((name = g_dir_read_name(dir)) != NULL) {
        if (!wanted(name, prefixes)) continue;
        char *path = g_build_filename(folder, name, NULL);
        if (g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
            failed |= replay_file(path);
            (*count)++;
        }
        g_free(path);
    }
    g_dir_close(dir);
    return failed;
}

int main(int argc, char **argv)
{
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    const char *prefix = g_getenv("REVERIE_REPLAY_PREFIX");
    char **prefixes = prefix ? g_strsplit(prefix, ",", -1) : NULL;
    int failed = 0, count = 0;
    for (int i = 1; i < argc; i++) {
        if (g_file_test(argv[i], G_FILE_TEST_IS_DIR)) {
            failed |= replay_folder(argv[i], prefixes, &count);
        } else {
            failed |= replay_file(argv[i]);
            count++;
        }
    }
    printf("replayed %d inputs\n", count);
    g_strfreev(prefixes);
    return failed;
}
