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
    GPtrArray *paths = accuracy_trace_paths(traces_dir);
    for (guint i = 0; i < paths->len; i++)
        accuracy_measure_trace(&report, traces_dir, g_ptr_array_index(paths, i));
    accuracy_measure_pairs(&report, traces_dir, reverie);
    accuracy_measure_jobs(&report, traces_dir, reverie);
    int status = accuracy_report_finish(&report, output, docs);
    g_ptr_array_unref(paths);
    accuracy_report_clear(&report);
    return status;
}
