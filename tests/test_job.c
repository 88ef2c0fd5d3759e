/*
 * test_job.c - several ranks of one job in one graph (job.h): the joint
 * replay of the 8 DLRM ranks the project ships, collectives matched by
 * each rule, the clocks, bad input, and the distributed what-ifs
 * (straggler, world-size, network, ddp) on a joint graph.
 *
 * The DLRM limit is the issue's: a mean per-step error of at most 5% on
 * every rank.  Two replays that leave out part of the model are measured
 * beside it - each rank alone with its collectives' waits taken out (the
 * rules without the other ranks), and every rank starting together (the
 * rules without the ranks' entry into the recorded window) - and must be
 * worse, so that the limit is not met by something the join does not do.
 */
#include "plugin_harness.h"
#include "reverie/comm.h"
#include "reverie/job.h"
#include "reverie/report.h"
#include "reverie/store.h"
#include "reverie/validate.h"
#include <check.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Per rank index, the mean per-step error of a replay of the graph. */
static double *rank_errors(const rv_graph *graph)
{
    rv_sim_result sim = { 0 };
    GError *error = NULL;
    ck_assert_msg(rv_simulate(graph, NULL, &sim, &error), "simulate: %s", error ? error->message : "");
    GPtrArray *by_rank = rv_step_times_by_rank(graph, &sim);
    double *errors = g_new0(double, by_rank->len);
    for (guint r = 0; r < by_rank->len; r++) {
        const GArray *steps = g_ptr_array_index(by_rank, r);
        for (guint s = 0; s < steps->len; s++) {
            const rv_step_time *step = &g_array_index(steps, rv_step_time, s);
            errors[r] += rv_relative_error(step->recorded_ns, step->simulated_ns) / steps->len;
        }
    }
    g_ptr_array_unref(by_rank);
    rv_sim_result_clear(&sim);
    return errors;
}

static double largest(const double *values, guint count)
{
    double most = 0;
    for (guint i = 0; i < count; i++) most = MAX(most, values[i]);
    return most;
}

static void print_errors(const char *label, const double *errors)
{
    g_printerr("%-40s", label);
    for (int r = 0; r < DLRM_RANKS; r++) g_printerr(" %6.2f%%", 100 * errors[r]);
    g_printerr("\n");
}

/* ---- the DLRM job ------------------------------------------------------------ */

START_TEST(dlrm_joint_replay_within_limits)
{
    GPtrArray *graphs = load_dlrm_ranks();
    rv_graph *joint = join_ranks_ok(graphs);
    ck_assert_uint_eq(joint->ranks->len, DLRM_RANKS);
    double *errors = rank_errors(joint);
    print_errors("joint replay, per-rank mean error", errors);
    for (int r = 0; r < DLRM_RANKS; r++)
        ck_assert_msg(errors[r] <= 0.05, "rank %d: mean step error %.2f%% > 5%%", r, 100 * errors[r]);
    /* the joint graph's recorded steps are each rank's own */
    GPtrArray *by_rank = rv_step_times_by_rank(joint, NULL);
    for (int r = 0; r < DLRM_RANKS; r++) {
        GArray *alone = rv_step_times(g_ptr_array_index(graphs, r), NULL);
        const GArray *joined = g_ptr_array_index(by_rank, r);
        ck_assert_uint_eq(alone->len, joined->len);
        for (guint s = 0; s < alone->len; s++)
            ck_assert_int_eq(g_array_index(alone, rv_step_time, s).recorded_ns,
                             g_array_index(joined, rv_step_time, s).recorded_ns);
        g_array_unref(alone);
    }
    g_ptr_array_unref(by_rank);
    g_free(errors);
    rv_graph_free(joint);
    g_ptr_array_unref(graphs);
}
END_TEST

/* Each rank alone by the rules: its collectives' transfers start when it
 * arrives (the meeting points removed).  The other ranks explain most of
 * the time, so this must be off where the joint replay is not. */
START_TEST(dlrm_alone_by_the_rules_is_worse)
{
    rv_graph *joint = load_dlrm_job();
    for (int32_t t = 0; t < rv_graph_task_count(joint); t++) {
        rv_task *task = rv_graph_task(joint, t);
        if ((task->flags & RV_TASK_FLAG_RENDEZVOUS) && !(task->flags & RV_TASK_FLAG_GPU))
            task->flags |= RV_TASK_FLAG_REMOVED;
    }
    double *errors = rank_errors(joint);
    print_errors("each rank alone, waits taken out", errors);
    ck_assert_msg(largest(errors, DLRM_RANKS) > 0.05, "alone by the rules: worst %.2f%%", 100 * largest(errors, DLRM_RANKS));
    g_free(errors);
    rv_graph_free(joint);
}
END_TEST

/* Every rank starting together (their entry into the recorded window
 * dropped): the ranks that started early lose their wait for the late. */
START_TEST(dlrm_starting_together_is_worse)
{
    rv_graph *joint = load_dlrm_job();
    guint markers = 0;
    for (int32_t t = 0; t < rv_graph_task_count(joint); t++) {
        rv_task *task = rv_graph_task(joint, t);
        if (task->kind == RV_TASK_MARKER && strcmp(rv_strings_get(joint->strings, task->name),
                                                   "rank enters the recorded window") == 0) {
            task->host_overhead_ns = 0;
            markers++;
        }
    }
    ck_assert_uint_ge(markers, DLRM_RANKS);
    double *errors = rank_errors(joint);
    print_errors("all ranks starting together", errors);
    ck_assert_msg(largest(errors, DLRM_RANKS) > 0.05, "starting together: worst %.2f%%", 100 * largest(errors, DLRM_RANKS));
    g_free(errors);
    rv_graph_free(joint);
}
END_TEST

START_TEST(dlrm_collectives_matched_by_order)
{
    rv_graph *joint = load_dlrm_job();
    guint matched = 0, expert = 0, data = 0;
    for (guint c = 0; c < joint->collectives->len; c++) {
        const rv_collective_info *info = &g_array_index(joint->collectives, rv_collective_info, c);
        ck_assert_int_eq(info->matched_by, RV_MATCH_ORDER);
        ck_assert_int_eq(info->participants, DLRM_RANKS);
        ck_assert(info->rendezvous >= 0);
        matched++;
        expert += info->parallelism == RV_PARALLEL_EXPERT;
        data += info->parallelism == RV_PARALLEL_DATA;
    }
    /* 5 all-to-alls (SendRecv) and 3 all-reduces per rank */
    ck_assert_uint_eq(matched, 8);
    ck_assert_uint_eq(expert, 5);
    ck_assert_uint_eq(data, 3);
    /* one host: the clocks agree to a few microseconds */
    for (guint r = 1; r < joint->ranks->len; r++) {
        const rv_rank *rank = &g_array_index(joint->ranks, rv_rank, r);
        ck_assert_int_eq(rank->offset_samples, 8);
        ck_assert_msg(llabs(rank->clock_offset_ns) < 10000, "rank %u offset %" G_GINT64_FORMAT, r, rank->clock_offset_ns);
    }
    rv_graph_free(joint);
}
END_TEST

/* A host clock 5 ms ahead on one rank is found and taken out: the replay
 * does not move. */
START_TEST(dlrm_clock_offset_found)
{
    GPtrArray *graphs = load_dlrm_ranks();
    rv_graph *reference = join_ranks_ok(graphs);
    rv_graph *skewed = g_ptr_array_index(graphs, 5);
    for (int32_t t = 0; t < rv_graph_task_count(skewed); t++) rv_graph_task(skewed, t)->recorded_start_ns += 5000000;
    for (guint s = 0; s < skewed->steps->len; s++) {
        g_array_index(skewed->steps, rv_step, s).recorded_begin_ns += 5000000;
        g_array_index(skewed->steps, rv_step, s).recorded_end_ns += 5000000;
    }
    rv_graph *joint = join_ranks_ok(graphs);
    const rv_rank *rank = &g_array_index(joint->ranks, rv_rank, 5);
    ck_assert_msg(llabs(rank->clock_offset_ns - 5000000) < 10000, "offset %" G_GINT64_FORMAT, rank->clock_offset_ns);
    int64_t a = step_total(reference), b = step_total(joint);
    ck_assert_msg(llabs(a - b) < 20000, "skewed clock moved the replay: %" G_GINT64_FORMAT " vs %" G_GINT64_FORMAT, a, b);
    rv_graph_free(joint);
    rv_graph_free(reference);
    g_ptr_array_unref(graphs);
}
END_TEST

START_TEST(dlrm_saved_and_loaded)
{
    rv_graph *joint = load_dlrm_job();
    char *dir = g_dir_make_tmp("rv-job-XXXXXX", NULL);
    char *path = g_build_filename(dir, "job.rvg", NULL);
    GError *error = NULL;
    ck_assert_msg(rv_store_save(joint, path, &error), "%s", error ? error->message : "");
    rv_graph *loaded = rv_store_load(path, &error);
    ck_assert_msg(loaded != NULL, "%s", error ? error->message : "");
    ck_assert_uint_eq(loaded->ranks->len, DLRM_RANKS);
    ck_assert_uint_eq(loaded->collectives->len, joint->collectives->len);
    ck_assert_int_eq(step_total(loaded), step_total(joint));
    rv_graph_free(loaded);
    g_unlink(path);
    g_rmdir(dir);
    g_free(path);
    g_free(dir);
    rv_graph_free(joint);
}
END_TEST

/* Ranks meet only in a collective's rendezvous: an edge from one rank's
 * task to another's is refused, by the check a plugin's graph goes
 * through, with both tasks named. */
START_TEST(an_edge_across_ranks_is_refused)
{
    rv_graph *job = load_dlrm_job();
    int32_t first[2] = { -1, -1 };
    for (int32_t id = 0; id < rv_graph_task_count(job) && (first[0] < 0 || first[1] < 0); id++) {
        const rv_task *task = rv_graph_task(job, id);
        int32_t rank = rv_task_rank_index(job, task);
        if (rank >= 0 && rank < 2 && first[rank] < 0 && task->collective <= 0 && !(task->flags & RV_TASK_FLAG_GPU))
            first[rank] = id;
    }
    ck_assert(first[0] >= 0 && first[1] >= 0);
    GError *error = NULL;
    ck_assert(rv_graph_validate(job, &error));
    rv_graph_add_edge(job, first[0], first[1], RV_EDGE_PLUGIN, FALSE);
    ck_assert(!rv_graph_validate(job, &error));
    ck_assert_msg(strstr(error->message, "ranks meet only in a collective's rendezvous") != NULL, "%s", error->message);
    g_error_free(error);
    rv_graph_free(job);
}
END_TEST

/* The join that frees its inputs as it copies them (an import's) builds
 * the same job as the one that keeps them, and leaves no input behind. */
START_TEST(dlrm_join_freeing_its_inputs)
{
    GPtrArray *graphs = load_dlrm_ranks();
    rv_graph *kept = join_ranks_ok(graphs);
    GError *error = NULL;
    rv_graph *freed = rv_job_join_freeing(graphs, "dlrm", &error);
    ck_assert_msg(freed != NULL, "%s", error ? error->message : "");
    for (guint i = 0; i < graphs->len; i++) ck_assert_ptr_null(g_ptr_array_index(graphs, i));
    ck_assert_int_eq(rv_graph_task_count(freed), rv_graph_task_count(kept));
    ck_assert_uint_eq(freed->edges->len, kept->edges->len);
    for (int32_t t = 0; t < rv_graph_task_count(kept); t++) {
        const rv_task *a = rv_graph_task(kept, t), *b = rv_graph_task(freed, t);
        ck_assert(a->duration_ns == b->duration_ns && a->host_overhead_ns == b->host_overhead_ns &&
                  a->recorded_start_ns == b->recorded_start_ns && a->resource == b->resource && a->kind == b->kind &&
                  a->flags == b->flags && a->collective == b->collective);
        ck_assert_str_eq(rv_strings_get(kept->strings, a->name), rv_strings_get(freed->strings, b->name));
    }
    for (guint e = 0; e < kept->edges->len; e++) {
        const rv_edge *a = &g_array_index(kept->edges, rv_edge, e), *b = &g_array_index(freed->edges, rv_edge, e);
        ck_assert(a->from == b->from && a->to == b->to && a->kind == b->kind && a->from_start == b->from_start);
    }
    ck_assert_int_eq(step_total(freed), step_total(kept));
    rv_graph_free(kept);
    rv_graph_free(freed);
    g_ptr_array_unref(graphs); /* its slots are NULL: nothing freed twice */
}
END_TEST

static void expect_join_error(GPtrArray *graphs, const char *want)
{
    GError *error = NULL;
    rv_graph *joint = rv_job_join(graphs, "job", &error);
    ck_assert_msg(joint == NULL, "joined, expected \"%s\"", want);
    ck_assert(error != NULL && error->domain == RV_ERROR && error->code == RV_ERROR_INPUT);
    ck_assert_msg(strstr(error->message, want) != NULL, "message \"%s\" lacks \"%s\"", error->message, want);
    ck_assert_msg(strchr(error->message, '\n') == NULL, "not one line: %s", error->message);
    g_error_free(error);
}

/* ---- a synthetic job (the project's generator): sequence numbers, clocks ---- */

/* reverie-gentrace --ranks: a 4-rank job whose all-reduces are rendezvous,
 * its hosts' clocks 2.5 ms apart, its collectives named by process group
 * and sequence number as PyTorch 2 writes them. */
START_TEST(generated_job_matched_by_sequence)
{
    rv_graph *joint = generated_job(4, 3, "2500", "3000");
    ck_assert_uint_gt(joint->collectives->len, 0);
    for (guint c = 0; c < joint->collectives->len; c++) {
        const rv_collective_info *info = &g_array_index(joint->collectives, rv_collective_info, c);
        ck_assert_int_eq(info->matched_by, RV_MATCH_SEQUENCE);
        ck_assert_int_eq(info->participants, 4);
        ck_assert_int_gt(info->bytes, 0);
    }
    for (guint r = 1; r < 4; r++) {
        int64_t offset = g_array_index(joint->ranks, rv_rank, r).clock_offset_ns;
        ck_assert_msg(llabs(offset - (int64_t)r * 2500000) < 10000, "rank %u: offset %" G_GINT64_FORMAT, r, offset);
    }
    double *errors = rank_errors(joint);
    g_printerr("generated 4-rank job, per-rank mean error  %.2f%% %.2f%% %.2f%% %.2f%%\n", 100 * errors[0],
               100 * errors[1], 100 * errors[2], 100 * errors[3]);
    for (int r = 0; r < 4; r++) ck_assert_msg(errors[r] <= 0.05, "rank %d: %.2f%%", r, 100 * errors[r]);
    g_free(errors);
    rv_graph_free(joint);
}
END_TEST

/* ---- point-to-point: sends and receives paired per pair of ranks ------------- */

/* Rank `rank` of a 2-rank pipeline: a send to (or receive from) the other
 * rank, twice, on one stream, each launched by one call. */
static rv_graph *pipeline_rank(int rank)
{
    tiny t = tiny_new();
    t.graph->rank = rank;
    t.graph->world_size = 2;
    rv_rank entry = { rank, 2, 0, rv_strings_intern(t.graph->strings, rank ? "stage1.json" : "stage0.json"), 0 };
    g_array_append_val(t.graph->ranks, entry);
    for (int k = 0; k < 2; k++) {
        int32_t kernel = tiny_launch(&t, "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)", US(5),
                                     US(rank == 0 ? 50 : 10), RV_PHASE_FORWARD, RV_TASK_COMM);
        rv_collective_info info = { 1 << 20, -1, rv_strings_intern(t.graph->strings, "3"), 2, 1 - rank, -1, 1,
                                    RV_COLL_BROADCAST, RV_PARALLEL_PIPELINE, RV_MATCH_NONE, 0 };
        rv_graph_task(t.graph, kernel)->collective = rv_graph_add_collective(t.graph, &info);
    }
    tiny_close_step(&t);
    return t.graph;
}

/* A pipeline rank renumbered (its peer stays rank 1 or 0). */
static rv_graph *renumbered(rv_graph *graph, int rank)
{
    g_array_index(graph->ranks, rv_rank, 0).rank = rank;
    graph->rank = rank;
    graph->world_size = -1;
    return graph;
}

START_TEST(point_to_point_paired_by_peer)
{
    GPtrArray *graphs = g_ptr_array_new_with_free_func((GDestroyNotify)rv_graph_free);
    g_ptr_array_add(graphs, pipeline_rank(0));
    g_ptr_array_add(graphs, pipeline_rank(1));
    rv_graph *joint = join_ranks_ok(graphs);
    ck_assert_uint_eq(joint->collectives->len, 2);
    for (guint c = 0; c < 2; c++) {
        const rv_collective_info *info = &g_array_index(joint->collectives, rv_collective_info, c);
        ck_assert_int_eq(info->matched_by, RV_MATCH_PEER);
        ck_assert_int_eq(info->participants, 2);
    }
    /* the receiver (rank 1) waits for the sender's longer kernels: its transfers start after rank 0's arrivals */
    rv_graph_free(joint);
    g_ptr_array_unref(graphs);
    /* ranks 5 and 6 send to rank 1, whose trace is not given */
    graphs = g_ptr_array_new_with_free_func((GDestroyNotify)rv_graph_free);
    g_ptr_array_add(graphs, renumbered(pipeline_rank(0), 5));
    g_ptr_array_add(graphs, renumbered(pipeline_rank(0), 6));
    expect_join_error(graphs, "rank 5 (hand-built) sends to or receives from rank 1, whose trace is not given");
    g_ptr_array_unref(graphs);
}
END_TEST

/* ---- bad input ----------------------------------------------------------------- */


START_TEST(duplicate_rank_refused)
{
    GPtrArray *graphs = load_dlrm_ranks();
    g_ptr_array_add(graphs, load_trace("param_dlrm_v100_8ranks/rank3.json.gz"));
    expect_join_error(graphs, "rank 3 is given twice");
    g_ptr_array_unref(graphs);
}
END_TEST

START_TEST(missing_rank_refused)
{
    GPtrArray *graphs = load_dlrm_ranks();
    g_ptr_array_remove_index(graphs, 6);
    expect_join_error(graphs, "1 of 8 ranks are missing (rank 6;");
    g_ptr_array_unref(graphs);
}
END_TEST

START_TEST(different_jobs_refused)
{
    GPtrArray *graphs = g_ptr_array_new_with_free_func((GDestroyNotify)rv_graph_free);
    g_ptr_array_add(graphs, load_trace("param_dlrm_v100_8ranks/rank0.json.gz"));
    g_ptr_array_add(graphs, load_trace("hta_transformer_ddp_v100_rank1.2steps.json.gz"));
    expect_join_error(graphs, "ranks from different jobs");
    g_ptr_array_unref(graphs);
}
END_TEST

/* One rank with a collective fewer, or another operation at one place. */
START_TEST(mismatched_collectives_refused)
{
    GPtrArray *graphs = load_dlrm_ranks();
    rv_graph *rank3 = g_ptr_array_index(graphs, 3);
    int32_t last = -1;
    for (int32_t t = 0; t < rv_graph_task_count(rank3); t++)
        if (rv_graph_task(rank3, t)->kind == RV_TASK_COMM) last = t;
    ck_assert(last >= 0);
    rv_collective_info *info = rv_task_collective(rank3, rv_graph_task(rank3, last));
    uint8_t op = info->op;
    info->op = op == RV_COLL_ALL_TO_ALL ? RV_COLL_ALLREDUCE_RING : RV_COLL_ALL_TO_ALL;
    expect_join_error(graphs, "collectives do not line up: collective 8 on \"stream 84\"");
    info->op = op;
    rv_graph_task(rank3, last)->flags |= RV_TASK_FLAG_REMOVED;
    expect_join_error(graphs, "has 8 collectives on \"stream 84\" but rank 3");
    g_ptr_array_unref(graphs);
}
END_TEST

/* ---- what-ifs on the joint graph -------------------------------------------------- */

/* The job's step: the slowest rank's. */
static int64_t job_step(const rv_graph *graph, rv_sim_result *keep)
{
    rv_sim_result sim = { 0 };
    GError *error = NULL;
    ck_assert_msg(rv_simulate(graph, NULL, &sim, &error), "simulate: %s", error ? error->message : "");
    GPtrArray *by_rank = rv_step_times_by_rank(graph, &sim);
    GArray *job = rv_job_step_times(by_rank);
    int64_t total = 0;
    for (guint s = 0; s < job->len; s++) total += g_array_index(job, rv_step_time, s).simulated_ns;
    g_array_unref(job);
    g_ptr_array_unref(by_rank);
    if (keep) *keep = sim;
    else rv_sim_result_clear(&sim);
    return total;
}

START_TEST(straggler_slows_the_job_and_is_waited_for)
{
    rv_graph *joint = load_dlrm_job();
    int64_t base = job_step(joint, NULL);
    apply_ok(joint, "straggler", "rank=3,factor=2");
    rv_sim_result sim;
    int64_t slow = job_step(joint, &sim);
    g_printerr("straggler rank 3 x2: job step %.3f -> %.3f ms\n", base / 1e6, slow / 1e6);
    ck_assert_msg(slow > base * 1.1, "straggler: %" G_GINT64_FORMAT " vs %" G_GINT64_FORMAT, slow, base);
    GArray *waits = rv_rank_waits(joint, &sim);
    for (guint r = 0; r < waits->len; r++) {
        if (r == 3) continue;
        const rv_rank_wait *wait = &g_array_index(waits, rv_rank_wait, r);
        for (guint other = 0; other < waits->len; other++)
            ck_assert_msg(wait->waited_for_ns[3] >= wait->waited_for_ns[other],
                          "rank %u waited more for rank %u than for the straggler", r, other);
        ck_assert_int_gt(wait->waited_for_ns[3], 1000000);
    }
    rv_rank_waits_free(waits);
    rv_sim_result_clear(&sim);
    rv_graph_free(joint);
}
END_TEST

START_TEST(straggler_refuses_a_rank_not_there)
{
    rv_graph *joint = load_dlrm_job();
    GError *error = NULL;
    ck_assert(!apply_plugin(joint, "straggler", "rank=8", &error));
    ck_assert(error && strstr(error->message, "the graph holds ranks 0, 1, 2") != NULL);
    g_error_free(error);
    rv_graph_free(joint);
}
END_TEST

/* The job's step grows with the world's collectives; the recorded world is the baseline. */
START_TEST(world_size_grows_with_the_collectives)
{
    rv_graph *joint = load_dlrm_job();
    int64_t base = job_step(joint, NULL), previous = base;
    const int worlds[] = { 8, 16, 64, 128 };
    for (gsize i = 0; i < G_N_ELEMENTS(worlds); i++) {
        rv_graph *copy = rv_graph_copy(joint);
        char *text = g_strdup_printf("world=%d", worlds[i]);
        apply_ok(copy, "world-size", text);
        int64_t step = job_step(copy, NULL);
        g_printerr("world-size %3d: job step %.3f ms\n", worlds[i], step / 1e6);
        if (worlds[i] == 8) ck_assert_int_eq(step, base);
        ck_assert_msg(step >= previous, "world %d: %" G_GINT64_FORMAT " < %" G_GINT64_FORMAT, worlds[i], step, previous);
        ck_assert_int_eq(copy->world_size, worlds[i]);
        previous = step;
        g_free(text);
        rv_graph_free(copy);
    }
    ck_assert_msg(previous > base, "128 ranks no slower than 8");
    rv_graph_free(joint);
}
END_TEST

/* network on the joint graph: the transfers, not the rendezvous. */
START_TEST(network_recosts_transfers_only)
{
    rv_graph *joint = load_dlrm_job();
    int64_t base = job_step(joint, NULL);
    rv_graph *copy = rv_graph_copy(joint);
    apply_ok(copy, "network", "bandwidth_factor=1,added_latency=0us");
    ck_assert_int_eq(job_step(copy, NULL), base);
    rv_graph_free(copy);
    apply_ok(joint, "network", "bandwidth_factor=0.01");
    for (int32_t t = 0; t < rv_graph_task_count(joint); t++)
        if (rv_graph_task(joint, t)->flags & RV_TASK_FLAG_RENDEZVOUS) ck_assert_int_eq(rv_graph_task(joint, t)->duration_ns, 0);
    ck_assert_int_gt(job_step(joint, NULL), base);
    rv_graph_free(joint);
}
END_TEST

/* ---- ddp --------------------------------------------------------------------------- */

/* A free network costs nothing: the all-reduces make a stream wait, not the host. */
START_TEST(ddp_free_network_never_slower)
{
    const char *traces[] = { "kineto_legacy_resnet50_v100.2steps.json.gz", "small_ddp.json.gz" };
    for (gsize i = 0; i < G_N_ELEMENTS(traces); i++) {
        int64_t base, predicted;
        predict_trace(traces[i], "ddp", "world=16,bandwidth=100Tbps,latency=0us,intra_bandwidth=100Tbps,intra_latency=0us",
                      &base, &predicted);
        g_printerr("ddp free network on %s: %.3f -> %.3f ms\n", traces[i], base / 1e6, predicted / 1e6);
        ck_assert_msg(predicted <= base, "%s: %" G_GINT64_FORMAT " > %" G_GINT64_FORMAT, traces[i], predicted, base);
    }
}
END_TEST

/* A trace that holds its all-reduces: the bandwidth is honoured. */
START_TEST(ddp_bandwidth_honoured_on_recorded_allreduces)
{
    const char *trace = "hta_transformer_ddp_v100_rank1.2steps.json.gz";
    int64_t base, slow, fast;
    predict_trace(trace, "ddp", "world=16,bandwidth=25Gbps", &base, &slow);
    predict_trace(trace, "ddp", "world=16,bandwidth=400Gbps", &base, &fast);
    g_printerr("ddp world 16 on %s: 25 Gbps %.3f ms, 400 Gbps %.3f ms\n", trace, slow / 1e6, fast / 1e6);
    ck_assert_msg(slow > fast && fast >= base, "25 Gbps %" G_GINT64_FORMAT ", 400 Gbps %" G_GINT64_FORMAT, slow, fast);
    check_neutral(trace, "ddp", "world=2");
}
END_TEST

/* fused-adam then ddp (issue 11's abort), and ddp on the joint graph. */
START_TEST(ddp_after_fused_adam_and_on_a_job)
{
    rv_graph *graph = load_trace("kineto_legacy_resnet50_v100.2steps.json.gz");
    apply_ok(graph, "fused-adam", "");
    apply_ok(graph, "ddp", "world=16");
    rv_graph_free(graph);
    rv_graph *joint = load_dlrm_job();
    int64_t base = job_step(joint, NULL);
    apply_ok(joint, "ddp", "world=64");
    ck_assert_int_ge(job_step(joint, NULL), base);
    rv_graph_free(joint);
}
END_TEST

int main(void)
{
    static const char *const traces[] = {
        DLRM_RANK_TRACES,
        "hta_transformer_ddp_v100_rank1.2steps.json.gz", "kineto_legacy_resnet50_v100.2steps.json.gz",
        "small_ddp.json.gz", NULL,
    };
    require_project_traces(traces);
    Suite *suite = suite_create("job");
    TCase *dlrm = tcase_create("dlrm");
    tcase_set_timeout(dlrm, 300);
    tcase_add_test(dlrm, dlrm_joint_replay_within_limits);
    tcase_add_test(dlrm, dlrm_alone_by_the_rules_is_worse);
    tcase_add_test(dlrm, dlrm_starting_together_is_worse);
    tcase_add_test(dlrm, dlrm_collectives_matched_by_order);
    tcase_add_test(dlrm, dlrm_clock_offset_found);
    tcase_add_test(dlrm, dlrm_saved_and_loaded);
    tcase_add_test(dlrm, dlrm_join_freeing_its_inputs);
    suite_add_tcase(suite, dlrm);
    TCase *matching = tcase_create("matching");
    tcase_set_timeout(matching, 300);
    tcase_add_test(matching, generated_job_matched_by_sequence);
    tcase_add_test(matching, point_to_point_paired_by_peer);
    suite_add_tcase(suite, matching);
    TCase *bad = tcase_create("bad input");
    tcase_set_timeout(bad, 300);
    tcase_add_test(bad, duplicate_rank_refused);
    tcase_add_test(bad, missing_rank_refused);
    tcase_add_test(bad, different_jobs_refused);
    tcase_add_test(bad, mismatched_collectives_refused);
    tcase_add_test(bad, an_edge_across_ranks_is_refused);
    suite_add_tcase(suite, bad);
    TCase *whatif = tcase_create("what-ifs");
    tcase_set_timeout(whatif, 300);
    tcase_add_test(whatif, straggler_slows_the_job_and_is_waited_for);
    tcase_add_test(whatif, straggler_refuses_a_rank_not_there);
    tcase_add_test(whatif, world_size_grows_with_the_collectives);
    tcase_add_test(whatif, network_recosts_transfers_only);
    tcase_add_test(whatif, ddp_free_network_never_slower);
    tcase_add_test(whatif, ddp_bandwidth_honoured_on_recorded_allreduces);
    tcase_add_test(whatif, ddp_after_fused_adam_and_on_a_job);
    suite_add_tcase(suite, whatif);
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
