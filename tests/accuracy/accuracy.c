/*
 * accuracy.c - the accuracy corpus: every real trace and recorded pair the
 * project ships, measured the way a user would meet them.
 *
 *   accuracy TRACES_DIR REVERIE OUTPUT.md [DOCS.md]
 *
 * For every trace under TRACES_DIR (recursively; *.json.gz):
 *   - replay error per step against the recording (the mean and the worst);
 *   - perturbation invariance: the same trace with every GPU event moved
 *     +10 ms and -5 ms (a clock offset, which the builder must find), and
 *     with 20 ms of GPU idle inserted at 30% and at 70% of the GPU events'
 *     time range (every GPU event after that point moved 20 ms later: time
 *     the rules cannot explain, which must not be replayed).  Each
 *     perturbed copy is built and replayed; a clock shift may move no step
 *     more than 1%, an inserted idle the total less than 5 ms, and a GPU
 *     what-if (every kernel twice as fast) its speedup less than 2%;
 * then every recorded pair's prediction (reverie validate --json, run as
 * a user runs it) and the joint replay of each folder of ranks.
 *
 * It prints one table per part, writes them as Markdown to OUTPUT.md, and
 * exits 1 if a figure passes its limit, or if DOCS.md (docs/accuracy.md)
 * is given and differs from OUTPUT.md: the figures the documentation shows
 * are the suite's.  `ninja -C build accuracy-docs` rewrites docs/accuracy.md.
 *
 * Perturbations are made on the imported events in memory (the importer's
 * own handling of the JSON is tested elsewhere), so each trace is parsed
 * once.
 */
#include "accuracy.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    void (*measure)(guint index, gpointer data);
    gpointer data;
} parallel_work;

static void run_one(gpointer index_plus_one, gpointer work)
{
    const parallel_work *w = work;
    w->measure(GPOINTER_TO_UINT(index_plus_one) - 1, w->data);
}

void accuracy_run_parallel(guint count, void (*measure)(guint index, gpointer data), gpointer data)
{
    parallel_work work = { measure, data };
    GThreadPool *pool = g_thread_pool_new(run_one, &work, (gint)MAX(1u, g_get_num_processors()), TRUE, NULL);
    for (guint i = 0; i < count; i++) g_thread_pool_push(pool, GUINT_TO_POINTER(i + 1), NULL);
    g_thread_pool_free(pool, FALSE, TRUE); /* waits for every call */
}

typedef struct {
    const char *dir;
    GPtrArray *paths;
    trace_row *rows;
} trace_work;

static void measure_trace_at(guint index, gpointer data)
{
    trace_work *work = data;
    work->rows[index] = accuracy_measure_trace(work->dir, g_ptr_array_index(work->paths, index));
}

/* Every trace, on every core; the rows in the paths' order. */
static void measure_traces(accuracy_report *report, const char *dir)
{
    trace_work work = { dir, accuracy_trace_paths(dir), NULL };
    work.rows = g_new0(trace_row, work.paths->len);
    accuracy_run_parallel(work.paths->len, measure_trace_at, &work);
    g_array_append_vals(report->traces, work.rows, work.paths->len);
    g_free(work.rows);
    g_ptr_array_unref(work.paths);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: accuracy TRACES_DIR REVERIE OUTPUT.md [DOCS.md]\n");
        return 2;
    }
    const char *traces_dir = argv[1], *reverie = argv[2], *output = argv[3];
    const char *docs = argc > 4 ? argv[4] : NULL;
    if (!g_file_test(traces_dir, G_FILE_TEST_IS_DIR)) {
        fprintf(stderr, "accuracy: %s: no traces folder (a partial checkout?)\n", traces_dir);
        return 77;
    }
    accuracy_report report;
    accuracy_report_init(&report);
    measure_traces(&report, traces_dir);
    accuracy_measure_pairs(&report, traces_dir, reverie);
    accuracy_measure_jobs(&report, traces_dir, reverie);
    int status = accuracy_report_finish(&report, output, docs);
    accuracy_report_clear(&report);
    return status;
}
