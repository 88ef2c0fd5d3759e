/*
 * test_output.c - the one output writer (include/reverie/output.h): inputs
 * refused as targets whatever the path says, atomic replacement, the old
 * file kept on every failure with no temporary left, the size bound, and
 * the escape.h bound on names copied per event.
 */
#include "reverie/error.h"
#include "reverie/escape.h"
#include "reverie/output.h"
#include <check.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *folder;

static void setup(void)
{
    folder = g_dir_make_tmp("reverie-test-output-XXXXXX", NULL);
    ck_assert_ptr_nonnull(folder);
    rv_output_forget_inputs();
    rv_output_set_max_bytes(RV_OUTPUT_DEFAULT_MAX_BYTES);
}

static void teardown(void)
{
    GDir *dir = g_dir_open(folder, 0, NULL);
    const char *name;
    while ((name = g_dir_read_name(dir)) != NULL) {
        char *path = g_build_filename(folder, name, NULL);
        g_unlink(path);
        g_free(path);
    }
    g_dir_close(dir);
    g_rmdir(folder);
    g_free(folder);
}

static char *in_folder(const char *name) { return g_build_filename(folder, name, NULL); }

static void write_text(const char *path, const char *text)
{
    ck_assert(g_file_set_contents(path, text, -1, NULL));
}

static char *read_text(const char *path)
{
    char *text = NULL;
    ck_assert(g_file_get_contents(path, &text, NULL, NULL));
    return text;
}

/* How many entries the folder holds: a temporary left behind shows here. */
static guint entries(void)
{
    guint count = 0;
    GDir *dir = g_dir_open(folder, 0, NULL);
    while (g_dir_read_name(dir) != NULL) count++;
    g_dir_close(dir);
    return count;
}

static gboolean fill_hello(FILE *file, gpointer data, GError **error)
{
    return fputs(data ? data : "hello\n", file) >= 0;
}

static gboolean fill_then_fail(FILE *file, gpointer data, GError **error)
{
    fputs("half a file", file);
    g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "the filler gave up");
    return FALSE;
}

START_TEST(inputs_are_refused_through_links_and_folders)
{
    char *trace = in_folder("trace.json"), *hard = in_folder("hard.json"), *soft = in_folder("soft.json");
    char *ranks = in_folder("ranks");
    write_text(trace, "the input\n");
    ck_assert_int_eq(link(trace, hard), 0);
    ck_assert_int_eq(symlink(trace, soft), 0);
    rv_output_note_input(trace);
    const char *targets[] = { trace, hard, soft };
    for (gsize i = 0; i < G_N_ELEMENTS(targets); i++) {
        GError *error = NULL;
        ck_assert(!rv_output_check(targets[i], RV_OUTPUT_REPLACE, &error));
        ck_assert_int_eq(error->code, RV_ERROR_USAGE);
        ck_assert(strstr(error->message, "is an input of this run") != NULL);
        g_clear_error(&error);
        ck_assert(!rv_output_write(targets[i], RV_OUTPUT_REPLACE, fill_hello, NULL, &error));
        g_clear_error(&error);
    }
    char *text = read_text(trace);
    ck_assert_str_eq(text, "the input\n");
    g_free(text);
    /* a folder of ranks: each file in it is an input */
    ck_assert_int_eq(g_mkdir(ranks, 0700), 0);
    char *rank = g_build_filename(ranks, "rank1.json", NULL);
    write_text(rank, "rank 1\n");
    rv_output_note_input(ranks);
    GError *error = NULL;
    ck_assert(!rv_output_check(rank, RV_OUTPUT_REPLACE, &error));
    g_clear_error(&error);
    g_unlink(rank);
    g_rmdir(ranks);
    g_free(rank);
    g_free(trace);
    g_free(hard);
    g_free(soft);
    g_free(ranks);
}
END_TEST

/* A file the run reads after the output was opened (a plugin's table) is
 * still never replaced. */
START_TEST(an_input_read_while_writing_is_kept)
{
    char *table = in_folder("table.json");
    write_text(table, "the table\n");
    rv_output *out = rv_output_open(table, RV_OUTPUT_REPLACE, NULL);
    ck_assert_ptr_nonnull(out);
    fputs("a report\n", rv_output_stream(out));
    rv_output_note_input(table);
    GError *error = NULL;
    ck_assert(!rv_output_commit(out, &error));
    ck_assert_int_eq(error->code, RV_ERROR_USAGE);
    ck_assert_ptr_nonnull(strstr(error->message, "is an input of this run"));
    g_error_free(error);
    char *text = read_text(table);
    ck_assert_str_eq(text, "the table\n");
    ck_assert_uint_eq(entries(), 1);
    g_free(text);
    g_free(table);
}
END_TEST

START_TEST(an_existing_file_needs_replace)
{
    char *path = in_folder("old.txt");
    write_text(path, "old\n");
    GError *error = NULL;
    ck_assert(!rv_output_write(path, 0, fill_hello, NULL, &error));
    ck_assert(strstr(error->message, "already exists") != NULL);
    g_clear_error(&error);
    ck_assert(rv_output_write(path, RV_OUTPUT_REPLACE, fill_hello, NULL, &error));
    char *text = read_text(path);
    ck_assert_str_eq(text, "hello\n");
    ck_assert_uint_eq(entries(), 1);
    g_free(text);
    g_free(path);
}
END_TEST

START_TEST(a_failed_fill_keeps_the_old_file)
{
    char *path = in_folder("kept.txt");
    write_text(path, "old\n");
    ck_assert_int_eq(chmod(path, 0640), 0);
    GError *error = NULL;
    ck_assert(!rv_output_write(path, RV_OUTPUT_REPLACE, fill_then_fail, NULL, &error));
    ck_assert_str_eq(error->message, "the filler gave up");
    g_clear_error(&error);
    char *text = read_text(path);
    ck_assert_str_eq(text, "old\n");
    ck_assert_uint_eq(entries(), 1);
    /* a replacement keeps the old file's permissions */
    ck_assert(rv_output_write(path, RV_OUTPUT_REPLACE, fill_hello, NULL, &error));
    struct stat info;
    ck_assert_int_eq(stat(path, &info), 0);
    ck_assert_int_eq(info.st_mode & 0777, 0640);
    g_free(text);
    g_free(path);
}
END_TEST

START_TEST(named_temporaries_too)
{
    g_setenv("REVERIE_NAMED_TEMPORARIES", "1", TRUE);
    char *path = in_folder("named.txt");
    write_text(path, "old\n");
    GError *error = NULL;
    rv_output *out = rv_output_open(path, RV_OUTPUT_REPLACE, &error);
    ck_assert_ptr_nonnull(out);
    fputs("new\n", rv_output_stream(out));
    fflush(rv_output_stream(out));
    ck_assert_uint_eq(entries(), 2); /* the old file and its named temporary */
    rv_output_remove_temporaries();  /* what a signal handler does */
    ck_assert_uint_eq(entries(), 1);
    rv_output_abort(out);
    char *text = read_text(path);
    ck_assert_str_eq(text, "old\n");
    ck_assert(rv_output_write(path, RV_OUTPUT_REPLACE, fill_hello, NULL, &error));
    ck_assert_uint_eq(entries(), 1);
    g_unsetenv("REVERIE_NAMED_TEMPORARIES");
    g_free(text);
    g_free(path);
}
END_TEST

START_TEST(outputs_are_bounded)
{
    char *path = in_folder("bounded.txt");
    write_text(path, "old\n");
    rv_output_set_max_bytes(4);
    GError *error = NULL;
    ck_assert(!rv_output_write(path, RV_OUTPUT_REPLACE, fill_hello, NULL, &error));
    ck_assert(strstr(error->message, "larger than the limit on one output") != NULL);
    ck_assert(strstr(error->message, "the existing file is unchanged") != NULL);
    g_clear_error(&error);
    char *text = read_text(path);
    ck_assert_str_eq(text, "old\n");
    ck_assert_uint_eq(entries(), 1);
    g_free(text);
    g_free(path);
}
END_TEST

START_TEST(a_missing_folder_is_said_before_any_work)
{
    char *path = g_build_filename(folder, "no", "such", "file.txt", NULL);
    GError *error = NULL;
    ck_assert(!rv_output_check(path, 0, &error));
    ck_assert(strstr(error->message, "does not exist") != NULL);
    g_clear_error(&error);
    g_free(path);
}
END_TEST

START_TEST(full_device)
{
    GError *error = NULL;
    ck_assert(!rv_output_write("/dev/full", 0, fill_hello, NULL, &error));
    ck_assert(strstr(error->message, "No space left on device") != NULL);
    g_clear_error(&error);
    ck_assert(rv_output_write("/dev/null", 0, fill_hello, NULL, &error));
}
END_TEST

START_TEST(names_copied_per_event_are_bounded)
{
    char *scratch = NULL;
    ck_assert_str_eq(rv_bounded_name("aten::mm", &scratch), "aten::mm");
    ck_assert_ptr_null(scratch);
    GString *long_name = g_string_new(NULL);
    for (int i = 0; i < 3 * RV_NAME_BOUND; i++) g_string_append(long_name, i % 2 ? "\xc3\xa9" : "x"); /* x and é */
    const char *bounded = rv_bounded_name(long_name->str, &scratch);
    ck_assert(strlen(bounded) < RV_NAME_BOUND + 64);
    ck_assert(g_utf8_validate(bounded, -1, NULL));
    char *said = g_strdup_printf("[... %" G_GSIZE_FORMAT " bytes in all]", long_name->len);
    ck_assert(strstr(bounded, said) != NULL);
    g_free(said);
    g_free(scratch);
    ck_assert_str_eq(rv_bounded_name("bad \xff byte", &scratch), "bad \\xff byte");
    g_free(scratch);
    g_string_free(long_name, TRUE);
}
END_TEST

static Suite *output_suite(void)
{
    Suite *suite = suite_create("output");
    TCase *tc = tcase_create("writer");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, inputs_are_refused_through_links_and_folders);
    tcase_add_test(tc, an_input_read_while_writing_is_kept);
    tcase_add_test(tc, an_existing_file_needs_replace);
    tcase_add_test(tc, a_failed_fill_keeps_the_old_file);
    tcase_add_test(tc, named_temporaries_too);
    tcase_add_test(tc, outputs_are_bounded);
    tcase_add_test(tc, a_missing_folder_is_said_before_any_work);
    tcase_add_test(tc, full_device);
    tcase_add_test(tc, names_copied_per_event_are_bounded);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void)
{
    SRunner *runner = srunner_create(output_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? 0 : 1;
}
