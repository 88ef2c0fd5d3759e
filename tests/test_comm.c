/*
** test_comm.c — Check tests for the alpha-beta collective cost model
** (src/comm/comm.c), collective and NCCL kernel names, and the link
** presets (src/comm/presets.c).  Every expected time is worked out by hand
** in the comment beside it.
*/
#include "reverie/comm.h"
#include "reverie/units.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define US INT64_C(1000)
#define MS INT64_C(1000000)

/* The reference link of the hand calculations: B = 10 GB/s, alpha = 5 us,
** and S = 100 MB, so S/B = 1e8 / 1e10 s = 10 ms. */
static const rv_link ref_link = { 10e9, 5000, 1.0 };
static const int64_t S = 100000000;

/* ---- single-link formulas ---- */

START_TEST(ring_allreduce)
{
  /* p=4: 2*3*5us + 2*(3/4)*10ms = 30 us + 15 ms = 15.030 ms */
  ck_assert_int_eq(rv_collective_time_ns(RV_COLL_ALLREDUCE_RING, S, 4,
                                         &ref_link), 15 * MS + 30 * US);
  /* p=2: 2*1*5us + 2*(1/2)*10ms = 10 us + 10 ms */
  ck_assert_int_eq(rv_collective_time_ns(RV_COLL_ALLREDUCE_RING, S, 2,
                                         &ref_link), 10 * MS + 10 * US);
  /* p=8: 2*7*5us + 2*(7/8)*10ms = 70 us + 17.5 ms */
  ck_assert_int_eq(rv_collective_time_ns(RV_COLL_ALLREDUCE_RING, S, 8,
                                         &ref_link), 17500 * US + 70 * US);
}
END_TEST

START_TEST(reduce_scatter_all_gather_all_to_all)
{
  /* p=4: 3*5us + (3/4)*10ms = 15 us + 7.5 ms = 7.515 ms, for all three */
  const rv_collective same_cost[] = {
    RV_COLL_REDUCE_SCATTER, RV_COLL_ALL_GATHER, RV_COLL_ALL_TO_ALL
  };
  for (size_t i = 0; i < G_N_ELEMENTS(same_cost); i++)
    ck_assert_int_eq(rv_collective_time_ns(same_cost[i], S, 4, &ref_link),
                     7515 * US);
  /* Ring all-reduce = reduce-scatter + all-gather. */
  ck_assert_int_eq(rv_collective_time_ns(RV_COLL_ALLREDUCE_RING, S, 4,
                                         &ref_link), 2 * 7515 * US);
}
END_TEST

START_TEST(broadcast)
{
  /* p=4: 3*5us + 10ms = 10.015 ms */
  ck_assert_int_eq(rv_collective_time_ns(RV_COLL_BROADCAST, S, 4, &ref_link),
                   10015 * US);
  /* p=16: 15*5us + 10ms = 10.075 ms (the bandwidth term does not grow) */
  ck_assert_int_eq(rv_collective_time_ns(RV_COLL_BROADCAST, S, 16,
                                         &ref_link), 10075 * US);
}
END_TEST

START_TEST(tree_allreduce)
{
  /* p=2: ceil(log2 2)=1: 2*1*5us + 2*10ms = 20.010 ms */
  ck_assert_int_eq(rv_collective_time_ns(RV_COLL_ALLREDUCE_TREE, S, 2,
                                         &ref_link), 20010 * US);
  /* p=4: ceil(log2 4)=2: 2*2*5us + 2*10ms = 20.020 ms */
  ck_assert_int_eq(rv_collective_time_ns(RV_COLL_ALLREDUCE_TREE, S, 4,
                                         &ref_link), 20020 * US);
  /* p=5: ceil(log2 5)=3: 2*3*5us + 20ms = 20.030 ms, same as p=8 */
  ck_assert_int_eq(rv_collective_time_ns(RV_COLL_ALLREDUCE_TREE, S, 5,
                                         &ref_link), 20030 * US);
  ck_assert_int_eq(rv_collective_time_ns(RV_COLL_ALLREDUCE_TREE, S, 8,
                                         &ref_link), 20030 * US);
  /* p=1024: ceil(log2)=10: 2*10*5us + 20ms = 20.100 ms */
  ck_assert_int_eq(rv_collective_time_ns(RV_COLL_ALLREDUCE_TREE, S, 1024,
                                         &ref_link), 20100 * US);
  /* p=1025: 11 steps: 110 us + 20 ms */
  ck_assert_int_eq(rv_collective_time_ns(RV_COLL_ALLREDUCE_TREE, S, 1025,
                                         &ref_link), 20110 * US);
}
END_TEST

START_TEST(one_rank_costs_nothing)
{
  for (int c = 0; c < RV_COLL_COUNT; c++) {
    if (c == RV_COLL_ALLREDUCE_HIER)
      continue;
    ck_assert_int_eq(rv_collective_time_ns(c, S, 1, &ref_link), 0);
  }
  ck_assert_int_eq(rv_hierarchical_allreduce_ns(S, 1, 1, &ref_link,
                                                &ref_link), 0);
}
END_TEST

START_TEST(zero_bytes_costs_latency_only)
{
  /* p=4 ring all-reduce of 0 bytes: 2*3*5us = 30 us */
  ck_assert_int_eq(rv_collective_time_ns(RV_COLL_ALLREDUCE_RING, 0, 4,
                                         &ref_link), 30 * US);
}
END_TEST

START_TEST(efficiency_divides_bandwidth)
{
  rv_link half = ref_link;
  half.efficiency = 0.5;
  /* p=4 ring all-reduce at e=0.5: 30 us + 2*(3/4)*(1e8/5e9 s = 20 ms)
  ** = 30 us + 30 ms: the bandwidth term doubles, the latency does not. */
  ck_assert_int_eq(rv_collective_time_ns(RV_COLL_ALLREDUCE_RING, S, 4, &half),
                   30 * MS + 30 * US);
  for (int c = 0; c < RV_COLL_COUNT; c++) {
    if (c == RV_COLL_ALLREDUCE_HIER)
      continue;
    int64_t latency = rv_collective_time_ns(c, 0, 4, &ref_link);
    int64_t full_time = rv_collective_time_ns(c, S, 4, &ref_link);
    int64_t half_time = rv_collective_time_ns(c, S, 4, &half);
    ck_assert_int_eq(half_time - latency, 2 * (full_time - latency));
  }
  ck_assert_double_eq(rv_link_effective_bandwidth(&half), 5e9);
}
END_TEST

START_TEST(zero_efficiency_means_one)
{
  rv_link unset = { .bandwidth_Bps = 10e9, .latency_ns = 5000 };
  ck_assert_int_eq(rv_collective_time_ns(RV_COLL_ALLREDUCE_RING, S, 4,
                                         &unset), 15 * MS + 30 * US);
  ck_assert(rv_link_check(&unset, NULL));
}
END_TEST

START_TEST(rounds_to_nearest_ns)
{
  rv_link slow = { 3.0, 0, 1.0 };
  /* Broadcast p=2 of 1 byte at 3 B/s: 1/3 s = 333333333.33 ns */
  ck_assert_int_eq(rv_collective_time_ns(RV_COLL_BROADCAST, 1, 2, &slow),
                   333333333);
  /* 2 bytes: 666666666.67 ns rounds up */
  ck_assert_int_eq(rv_collective_time_ns(RV_COLL_BROADCAST, 2, 2, &slow),
                   666666667);
}
END_TEST

START_TEST(saturates_instead_of_overflowing)
{
  rv_link slow = { 1.0, 0, 1.0 };
  /* INT64_MAX bytes at 1 B/s is ~9.2e27 ns, far beyond int64. */
  ck_assert_int_eq(rv_collective_time_ns(RV_COLL_BROADCAST, INT64_MAX, 2,
                                         &slow), INT64_MAX);
  ck_assert_int_eq(rv_hierarchical_allreduce_ns(INT64_MAX, 2, 2, &slow,
                                                &slow), INT64_MAX);
  /* Exactly 2^63 ns, one past INT64_MAX: 2^62 bytes at 0.5 GB/s is
  ** 2^62 * 1e9 / 5e8 = 2^63 ns. */
  rv_link half_gb = { 5e8, 0, 1.0 };
  ck_assert_int_eq(rv_collective_time_ns(RV_COLL_BROADCAST, INT64_C(1) << 62,
                                         2, &half_gb), INT64_MAX);
}
END_TEST

START_TEST(invalid_arguments_give_minus_one)
{
  rv_link bad;
  ck_assert_int_eq(rv_collective_time_ns(RV_COLL_BROADCAST, -1, 4, &ref_link),
                   -1);
  ck_assert_int_eq(rv_collective_time_ns(RV_COLL_BROADCAST, S, 0, &ref_link),
                   -1);
  ck_assert_int_eq(rv_collective_time_ns(RV_COLL_BROADCAST, S, 4, NULL), -1);
  ck_assert_int_eq(rv_collective_time_ns((rv_collective)99, S, 4, &ref_link),
                   -1);
  /* HIER needs two link classes. */
  ck_assert_int_eq(rv_collective_time_ns(RV_COLL_ALLREDUCE_HIER, S, 4,
                                         &ref_link), -1);
  bad = ref_link; bad.bandwidth_Bps = 0.0;
  ck_assert_int_eq(rv_collective_time_ns(RV_COLL_BROADCAST, S, 4, &bad), -1);
  bad = ref_link; bad.bandwidth_Bps = NAN;
  ck_assert_int_eq(rv_collective_time_ns(RV_COLL_BROADCAST, S, 4, &bad), -1);
  bad = ref_link; bad.latency_ns = -1;
  ck_assert_int_eq(rv_collective_time_ns(RV_COLL_BROADCAST, S, 4, &bad), -1);
  bad = ref_link; bad.efficiency = 1.5;
  ck_assert_int_eq(rv_collective_time_ns(RV_COLL_BROADCAST, S, 4, &bad), -1);
  bad = ref_link; bad.efficiency = -0.5;
  ck_assert_int_eq(rv_hierarchical_allreduce_ns(S, 2, 2, &ref_link, &bad),
                   -1);
  ck_assert_int_eq(rv_hierarchical_allreduce_ns(S, 0, 2, &ref_link,
                                                &ref_link), -1);
  ck_assert_int_eq(rv_hierarchical_allreduce_ns(S, 2, 0, &ref_link,
                                                &ref_link), -1);
}
END_TEST

START_TEST(link_check_messages)
{
  GError *error = NULL;
  rv_link bad = ref_link;
  ck_assert(rv_link_check(&ref_link, NULL));
  bad.bandwidth_Bps = -1.0;
  ck_assert(!rv_link_check(&bad, &error));
  ck_assert_int_eq(error->code, RV_COMM_ERROR_INVALID_LINK);
  ck_assert_ptr_nonnull(strstr(error->message, "bandwidth"));
  g_clear_error(&error);
  bad = ref_link; bad.latency_ns = -5;
  ck_assert(!rv_link_check(&bad, &error));
  ck_assert_ptr_nonnull(strstr(error->message, "latency -5 ns"));
  g_clear_error(&error);
  bad = ref_link; bad.efficiency = 2.0;
  ck_assert(!rv_link_check(&bad, &error));
  ck_assert_ptr_nonnull(strstr(error->message, "efficiency 2 must be in"));
  g_clear_error(&error);
  ck_assert(!rv_link_check(NULL, &error));
  g_clear_error(&error);
  rv_link made = rv_link_make(1e9, 100, 0.66);
  ck_assert_double_eq(made.bandwidth_Bps, 1e9);
  ck_assert_int_eq(made.latency_ns, 100);
  ck_assert_double_eq(made.efficiency, 0.66);
}
END_TEST

/* ---- hierarchical and cluster ---- */

/* intra: 100 GB/s, 2 us (S/B = 1e8/1e11 s = 1 ms); inter: the ref link. */
static const rv_link intra_link = { 100e9, 2000, 1.0 };

START_TEST(hierarchical_allreduce)
{
  /* n=2 nodes x g=4 GPUs, S = 100 MB:
  **   intra reduce-scatter, g=4:  3*2us + (3/4)*1ms      = 0.756 ms
  **   inter ring all-reduce of S/4 = 25 MB over n=2:
  **                               2*1*5us + 2*(1/2)*2.5ms = 2.510 ms
  **   intra all-gather, g=4:      3*2us + (3/4)*1ms      = 0.756 ms
  **   total                                              = 4.022 ms */
  ck_assert_int_eq(rv_hierarchical_allreduce_ns(S, 2, 4, &intra_link,
                                                &ref_link), 4022 * US);
}
END_TEST

START_TEST(hierarchical_one_node_is_intra_only)
{
  /* gpus_per_node = p = 8, nodes = 1: reduce-scatter + all-gather on the
  ** intra link: 2 * (7*2us + (7/8)*1ms) = 2 * 0.889 ms = 1.778 ms */
  int64_t rs = rv_collective_time_ns(RV_COLL_REDUCE_SCATTER, S, 8,
                                     &intra_link);
  int64_t ag = rv_collective_time_ns(RV_COLL_ALL_GATHER, S, 8, &intra_link);
  ck_assert_int_eq(rs, 889 * US);
  ck_assert_int_eq(rv_hierarchical_allreduce_ns(S, 1, 8, &intra_link,
                                                &ref_link), rs + ag);
  ck_assert_int_eq(rs + ag, 1778 * US);
}
END_TEST

START_TEST(hierarchical_one_gpu_per_node_is_inter_ring)
{
  /* g=1: the intra phases vanish and it is a ring all-reduce over n=4 on
  ** the inter link: 15.030 ms as in ring_allreduce. */
  ck_assert_int_eq(rv_hierarchical_allreduce_ns(S, 4, 1, &intra_link,
                                                &ref_link),
                   15 * MS + 30 * US);
}
END_TEST

START_TEST(hierarchical_inter_efficiency)
{
  rv_link derated = ref_link;
  derated.efficiency = 0.5;
  /* Only the inter bandwidth term doubles: 2*(1/2)*(25e6/5e9 s = 5 ms)
  ** = 5 ms instead of 2.5 ms, so 4.022 ms + 2.5 ms = 6.522 ms. */
  ck_assert_int_eq(rv_hierarchical_allreduce_ns(S, 2, 4, &intra_link,
                                                &derated), 6522 * US);
}
END_TEST

START_TEST(cluster_collectives)
{
  rv_cluster one_node = { 1, 8, intra_link, ref_link };
  rv_cluster two_nodes = { 2, 4, intra_link, ref_link };
  /* One node: ring all-reduce over 8 on intra: 2*7*2us + 2*(7/8)*1ms =
  ** 28 us + 1.75 ms = 1.778 ms */
  ck_assert_int_eq(rv_cluster_collective_ns(RV_COLL_ALLREDUCE_RING, S,
                                            &one_node), 1778 * US);
  /* Two nodes, flat ring over 8 limited by the inter link (10 GB/s, 5 us):
  ** 2*7*5us + 2*(7/8)*10ms = 70 us + 17.5 ms = 17.570 ms */
  ck_assert_int_eq(rv_cluster_collective_ns(RV_COLL_ALLREDUCE_RING, S,
                                            &two_nodes), 17570 * US);
  /* The bottleneck takes the worse of each: a fast-but-far inter link
  ** (200 GB/s, 5 us) pairs with intra's 100 GB/s.  All-gather over 8:
  ** 7*5us + (7/8)*1ms = 35 us + 0.875 ms = 0.910 ms */
  rv_cluster mixed = { 2, 4, intra_link, { 200e9, 5000, 1.0 } };
  ck_assert_int_eq(rv_cluster_collective_ns(RV_COLL_ALL_GATHER, S, &mixed),
                   910 * US);
  /* HIER goes to the hierarchical model: 4.022 ms as above */
  ck_assert_int_eq(rv_cluster_collective_ns(RV_COLL_ALLREDUCE_HIER, S,
                                            &two_nodes), 4022 * US);
  rv_cluster empty = { 0, 4, intra_link, ref_link };
  ck_assert_int_eq(rv_cluster_collective_ns(RV_COLL_ALLREDUCE_RING, S,
                                            &empty), -1);
  rv_cluster huge = { 1 << 20, 1 << 20, intra_link, ref_link };
  ck_assert_int_eq(rv_cluster_collective_ns(RV_COLL_ALLREDUCE_RING, S,
                                            &huge), -1);
  ck_assert_int_eq(rv_cluster_collective_ns(RV_COLL_ALLREDUCE_RING, S,
                                            NULL), -1);
}
END_TEST

/* ---- names ---- */

START_TEST(names_round_trip)
{
  for (int c = 0; c < RV_COLL_COUNT; c++) {
    rv_collective parsed;
    const char *name = rv_collective_name(c);
    ck_assert_ptr_nonnull(name);
    ck_assert(rv_collective_from_name(name, &parsed, NULL));
    ck_assert_int_eq(parsed, c);
  }
  ck_assert_ptr_null(rv_collective_name((rv_collective)RV_COLL_COUNT));
  ck_assert_ptr_null(rv_collective_name((rv_collective)-1));
}
END_TEST

START_TEST(name_aliases)
{
  static const struct {
    const char *name;
    rv_collective want;
  } cases[] = {
    { "allreduce", RV_COLL_ALLREDUCE_RING },
    { "All-Reduce", RV_COLL_ALLREDUCE_RING },
    { "ring_allreduce", RV_COLL_ALLREDUCE_RING },
    { "tree-allreduce", RV_COLL_ALLREDUCE_TREE },
    { "hierarchical_allreduce", RV_COLL_ALLREDUCE_HIER },
    { "allreduce_hierarchical", RV_COLL_ALLREDUCE_HIER },
    { "ReduceScatter", RV_COLL_REDUCE_SCATTER },
    { "all gather", RV_COLL_ALL_GATHER },
    { "AllToAll", RV_COLL_ALL_TO_ALL },
    { "sendrecv", RV_COLL_ALL_TO_ALL },
    { "BROADCAST", RV_COLL_BROADCAST },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    rv_collective parsed;
    ck_assert_msg(rv_collective_from_name(cases[i].name, &parsed, NULL),
                  "%s", cases[i].name);
    ck_assert_int_eq(parsed, cases[i].want);
  }
}
END_TEST

START_TEST(unknown_name)
{
  GError *error = NULL;
  rv_collective parsed = RV_COLL_BROADCAST;
  ck_assert(!rv_collective_from_name("allreduce_butterfly", &parsed, &error));
  ck_assert_int_eq(parsed, RV_COLL_BROADCAST);
  ck_assert(error->domain == RV_COMM_ERROR);
  ck_assert_int_eq(error->code, RV_COMM_ERROR_UNKNOWN_COLLECTIVE);
  ck_assert_ptr_nonnull(strstr(error->message,
                               "\"allreduce_butterfly\": unknown collective "
                               "(expected allreduce_ring"));
  g_clear_error(&error);
  ck_assert(!rv_collective_from_name(NULL, &parsed, &error));
  g_clear_error(&error);
  ck_assert(!rv_collective_from_name("", &parsed, NULL));
}
END_TEST

/* ---- NCCL kernel names ---- */

START_TEST(kernel_names)
{
  static const struct {
    const char *kernel;
    int want;
  } cases[] = {
    /* NCCL 2.7-2.18 */
    { "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)",
      RV_COLL_ALLREDUCE_RING },
    { "ncclKernel_AllReduce_TREE_LL128_Sum_half(ncclWorkElem)",
      RV_COLL_ALLREDUCE_TREE },
    { "void ncclKernel_AllReduce_RING_SIMPLE_Sum_float(ncclWorkElem)",
      RV_COLL_ALLREDUCE_RING },
    { "ncclKernel_ReduceScatter_RING_SIMPLE_Sum_half(ncclWorkElem)",
      RV_COLL_REDUCE_SCATTER },
    { "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)",
      RV_COLL_ALL_GATHER },
    { "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)",
      RV_COLL_ALL_TO_ALL },
    { "ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclWorkElem)",
      RV_COLL_BROADCAST },
    /* NCCL 2.19+ */
    { "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, "
      "ncclWork*)", RV_COLL_ALLREDUCE_RING },
    { "ncclDevKernel_AllReduce_Sum_bf16_TREE_LL(ncclDevComm*, unsigned long, "
      "ncclWork*)", RV_COLL_ALLREDUCE_TREE },
    { "ncclDevKernel_AllReduce_Sum_f32_NVLS_TREE_SIMPLE",
      RV_COLL_ALLREDUCE_TREE },
    { "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, "
      "ncclWork*)", RV_COLL_ALL_GATHER },
    { "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevComm*, unsigned "
      "long, ncclWork*)", RV_COLL_REDUCE_SCATTER },
    { "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)",
      RV_COLL_ALL_TO_ALL },
    { "ncclDevKernel_Broadcast_RING_LL(ncclDevComm*, unsigned long, "
      "ncclWork*)", RV_COLL_BROADCAST },
    /* NCCL 2.4-2.6, the era of the Daydream traces */
    { "ncclAllReduceRingLLKernel_sum_f32(CollectiveArgs)",
      RV_COLL_ALLREDUCE_RING },
    { "ncclAllReduceTreeLLKernel_sum_f32(CollectiveArgs)",
      RV_COLL_ALLREDUCE_TREE },
    { "ncclBroadcastRingLLKernel_copy_i8(CollectiveArgs)",
      RV_COLL_BROADCAST },
    /* RCCL */
    { "rcclKernel_AllGather_RING_LL", RV_COLL_ALL_GATHER },
    /* "Tree" in the parameter list says nothing about the algorithm. */
    { "ncclKernel_AllReduce_RING_LL_Sum_float(TreeArgs)",
      RV_COLL_ALLREDUCE_RING },
    /* Not collectives the model knows. */
    { "ncclDevKernel_Generic(ncclDevComm*, unsigned long, ncclWork*)", -1 },
    { "ncclKernel_Reduce_RING_LL_Sum_float(ncclWorkElem)", -1 },
    { "volta_sgemm_128x64_nn", -1 },
    { "void at::native::vectorized_elementwise_kernel<4, "
      "at::native::FillFunctor<float> >(int, ...)", -1 },
    { "nccl", -1 },
    { "", -1 },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++)
    ck_assert_msg(rv_collective_from_kernel_name(cases[i].kernel)
                  == cases[i].want, "%s: got %d, want %d", cases[i].kernel,
                  rv_collective_from_kernel_name(cases[i].kernel),
                  cases[i].want);
  ck_assert_int_eq(rv_collective_from_kernel_name(NULL), -1);
}
END_TEST

/* ---- presets ---- */

/* Expected per-direction bandwidths: PCIe x16 = GT/s * 16 * 128/130 / 8,
** NVLink = datasheet total / 2, IB and Ethernet = Gb/s / 8. */
START_TEST(preset_bandwidths)
{
  static const struct {
    const char *name;
    double bandwidth;
  } cases[] = {
    { "pcie3", 15.7538e9 }, { "pcie4", 31.5077e9 }, { "pcie5", 63.0154e9 },
    { "nvlink-v100", 150e9 }, { "nvlink-a100", 300e9 },
    { "nvlink-h100", 450e9 },
    { "ib-edr", 12.5e9 }, { "ib-hdr", 25e9 }, { "ib-ndr", 50e9 },
    { "eth-10g", 1.25e9 }, { "eth-25g", 3.125e9 }, { "eth-100g", 12.5e9 },
  };
  size_t count = 0;
  rv_link_presets(&count);
  ck_assert_uint_eq(count, G_N_ELEMENTS(cases));
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    const rv_link_preset *p = rv_link_preset_find(cases[i].name);
    ck_assert_msg(p != NULL, "%s missing", cases[i].name);
    ck_assert_double_eq_tol(p->bandwidth_Bps, cases[i].bandwidth, 1e5);
  }
}
END_TEST

START_TEST(preset_table_is_well_formed)
{
  size_t count = 0;
  const rv_link_preset *all = rv_link_presets(&count);
  for (size_t i = 0; i < count; i++) {
    const rv_link_preset *p = &all[i];
    ck_assert(p->name && *p->name);
    ck_assert(p->description && *p->description);
    ck_assert(p->source && *p->source);
    /* Latencies are not measurements, and the source must say so. */
    ck_assert_ptr_nonnull(strstr(p->source, "typical"));
    ck_assert_int_gt(p->latency_ns, 0);
    ck_assert_ptr_eq(rv_link_preset_find(p->name), p);
    rv_link link = rv_link_from_preset(p, 0.66);
    ck_assert(rv_link_check(&link, NULL));
    ck_assert_double_eq(link.efficiency, 0.66);
    for (size_t j = 0; j < i; j++)
      ck_assert_str_ne(all[j].name, p->name);
  }
  ck_assert_ptr_null(rv_link_preset_find("nvlink-b200"));
  ck_assert_ptr_null(rv_link_preset_find(NULL));
  ck_assert_ptr_nonnull(rv_link_presets(NULL));
}
END_TEST

START_TEST(preset_lookup_error_lists_names)
{
  GError *error = NULL;
  ck_assert_ptr_null(rv_link_preset_lookup("pcie6", &error));
  ck_assert_int_eq(error->code, RV_COMM_ERROR_UNKNOWN_LINK);
  ck_assert_ptr_nonnull(strstr(error->message,
                               "\"pcie6\": unknown link preset (expected "
                               "one of pcie3, pcie4"));
  ck_assert_ptr_nonnull(strstr(error->message, "eth-100g)"));
  g_clear_error(&error);
  ck_assert_ptr_eq(rv_link_preset_lookup("ib-hdr", &error),
                   rv_link_preset_find("ib-hdr"));
  ck_assert_ptr_null(error);
}
END_TEST

START_TEST(presets_agree_with_unit_parser)
{
  /* The figures a user would type give the same link as the preset. */
  double rate;
  ck_assert(rv_parse_bandwidth("200Gbps", &rate, NULL));
  ck_assert_double_eq(rv_link_preset_find("ib-hdr")->bandwidth_Bps, rate);
  ck_assert(rv_parse_bandwidth("300GB/s", &rate, NULL));
  ck_assert_double_eq(rv_link_preset_find("nvlink-a100")->bandwidth_Bps,
                      rate);
}
END_TEST

static Suite *comm_suite(void)
{
  Suite *s = suite_create("comm");
  TCase *model = tcase_create("model");
  tcase_add_test(model, ring_allreduce);
  tcase_add_test(model, reduce_scatter_all_gather_all_to_all);
  tcase_add_test(model, broadcast);
  tcase_add_test(model, tree_allreduce);
  tcase_add_test(model, one_rank_costs_nothing);
  tcase_add_test(model, zero_bytes_costs_latency_only);
  tcase_add_test(model, efficiency_divides_bandwidth);
  tcase_add_test(model, zero_efficiency_means_one);
  tcase_add_test(model, rounds_to_nearest_ns);
  tcase_add_test(model, saturates_instead_of_overflowing);
  tcase_add_test(model, invalid_arguments_give_minus_one);
  tcase_add_test(model, link_check_messages);
  suite_add_tcase(s, model);
  TCase *hier = tcase_create("hierarchical");
  tcase_add_test(hier, hierarchical_allreduce);
  tcase_add_test(hier, hierarchical_one_node_is_intra_only);
  tcase_add_test(hier, hierarchical_one_gpu_per_node_is_inter_ring);
  tcase_add_test(hier, hierarchical_inter_efficiency);
  tcase_add_test(hier, cluster_collectives);
  suite_add_tcase(s, hier);
  TCase *names = tcase_create("names");
  tcase_add_test(names, names_round_trip);
  tcase_add_test(names, name_aliases);
  tcase_add_test(names, unknown_name);
  tcase_add_test(names, kernel_names);
  suite_add_tcase(s, names);
  TCase *presets = tcase_create("presets");
  tcase_add_test(presets, preset_bandwidths);
  tcase_add_test(presets, preset_table_is_well_formed);
  tcase_add_test(presets, preset_lookup_error_lists_names);
  tcase_add_test(presets, presets_agree_with_unit_parser);
  suite_add_tcase(s, presets);
  return s;
}

int main(void)
{
  SRunner *runner = srunner_create(comm_suite());
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
