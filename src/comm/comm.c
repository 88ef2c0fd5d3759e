/*
** comm.c — alpha-beta cost model for collectives, collective names, and
** recognition of NCCL/RCCL kernel names.  See include/reverie/comm.h.
*/
#include "reverie/comm.h"

#include <limits.h>
#include <math.h>
#include <string.h>

G_DEFINE_QUARK(rv-comm-error-quark, rv_comm_error)

/* 2^63 as a double; the first value that does not fit in int64_t. */
#define INT64_LIMIT 9223372036854775808.0

/* ---- links ------------------------------------------------------------- */

rv_link rv_link_make(double bandwidth_Bps, int64_t latency_ns,
                     double efficiency)
{
  rv_link link = { bandwidth_Bps, latency_ns, efficiency };
  return link;
}

/* Efficiency with the "0 means 1.0" convention applied. */
static double link_efficiency(const rv_link *link)
{
  return link->efficiency == 0.0 ? 1.0 : link->efficiency;
}

double rv_link_effective_bandwidth(const rv_link *link)
{
  return link->bandwidth_Bps * link_efficiency(link);
}

static gboolean link_is_valid(const rv_link *link)
{
  if (!link)
    return FALSE;
  double e = link_efficiency(link);
  return isfinite(link->bandwidth_Bps) && link->bandwidth_Bps > 0.0
    && link->latency_ns >= 0 && e > 0.0 && e <= 1.0;
}

gboolean rv_link_check(const rv_link *link, GError **error)
{
  if (!link) {
    g_set_error(error, RV_COMM_ERROR, RV_COMM_ERROR_INVALID_LINK,
                "no link given");
    return FALSE;
  }
  if (!isfinite(link->bandwidth_Bps) || link->bandwidth_Bps <= 0.0) {
    g_set_error(error, RV_COMM_ERROR, RV_COMM_ERROR_INVALID_LINK,
                "link bandwidth %g B/s must be finite and greater than zero",
                link->bandwidth_Bps);
    return FALSE;
  }
  if (link->latency_ns < 0) {
    g_set_error(error, RV_COMM_ERROR, RV_COMM_ERROR_INVALID_LINK,
                "link latency %" G_GINT64_FORMAT " ns must not be negative",
                link->latency_ns);
    return FALSE;
  }
  double e = link_efficiency(link);
  if (!(e > 0.0 && e <= 1.0)) {
    g_set_error(error, RV_COMM_ERROR, RV_COMM_ERROR_INVALID_LINK,
                "link efficiency %g must be in (0, 1]", link->efficiency);
    return FALSE;
  }
  return TRUE;
}

/* ---- cost model -------------------------------------------------------- */

/* ceil(log2(p)) for p >= 1, by counting doublings to stay exact. */
static int ceil_log2(int p)
{
  int steps = 0;
  for (int64_t reach = 1; reach < p; reach *= 2)
    steps++;
  return steps;
}

/* Rounds a non-negative time to int64 ns, saturating. */
static int64_t round_ns(double ns)
{
  double rounded = round(ns);
  return rounded >= INT64_LIMIT ? INT64_MAX : (int64_t)rounded;
}

static int64_t add_saturating(int64_t a, int64_t b)
{
  return a > INT64_MAX - b ? INT64_MAX : a + b;
}

/* The shape of one single-link collective: how many latency-bound steps it
** takes and what fraction num/den of S crosses each rank's link. */
typedef struct {
  double steps;
  double num;
  double den;
} coll_shape;

static gboolean collective_shape(rv_collective c, int p, coll_shape *shape)
{
  double pm1 = (double)p - 1.0;
  switch (c) {
  case RV_COLL_ALLREDUCE_RING:
    *shape = (coll_shape){ 2.0 * pm1, 2.0 * pm1, p };
    return TRUE;
  case RV_COLL_ALLREDUCE_TREE:
    *shape = (coll_shape){ 2.0 * ceil_log2(p), 2.0, 1.0 };
    return TRUE;
  case RV_COLL_REDUCE_SCATTER:
  case RV_COLL_ALL_GATHER:
  case RV_COLL_ALL_TO_ALL:
    *shape = (coll_shape){ pm1, pm1, p };
    return TRUE;
  case RV_COLL_BROADCAST:
    *shape = (coll_shape){ pm1, 1.0, 1.0 };
    return TRUE;
  case RV_COLL_ALLREDUCE_HIER:
    break;
  }
  return FALSE;
}

/* Time in ns (unrounded) of a single-link collective on a possibly
** fractional byte count, or -1 if c is not a single-link collective.
** The bandwidth term is evaluated as (num*S*1e9)/(den*B*e) so that round
** inputs give exact results. */
static double single_link_ns(rv_collective c, double bytes, int ranks,
                             const rv_link *link)
{
  coll_shape shape;
  if (!collective_shape(c, ranks, &shape))
    return -1.0;
  if (ranks == 1)
    return 0.0;
  double latency = shape.steps * (double)link->latency_ns;
  double transfer = (shape.num * bytes * 1e9)
    / (shape.den * rv_link_effective_bandwidth(link));
  return latency + transfer;
}

int64_t rv_collective_time_ns(rv_collective c, int64_t bytes, int ranks,
                              const rv_link *link)
{
  if (bytes < 0 || ranks < 1 || !link_is_valid(link))
    return -1;
  double ns = single_link_ns(c, (double)bytes, ranks, link);
  return ns < 0.0 ? -1 : round_ns(ns);
}

int64_t rv_hierarchical_allreduce_ns(int64_t bytes, int nodes,
                                     int gpus_per_node, const rv_link *intra,
                                     const rv_link *inter)
{
  if (bytes < 0 || nodes < 1 || gpus_per_node < 1
      || !link_is_valid(intra) || !link_is_valid(inter))
    return -1;
  double S = (double)bytes;
  int64_t scatter = round_ns(single_link_ns(RV_COLL_REDUCE_SCATTER, S,
                                            gpus_per_node, intra));
  /* After the reduce-scatter each GPU owns S/g bytes, which it all-reduces
  ** with the GPUs of the same local rank on the other nodes. */
  int64_t across = round_ns(single_link_ns(RV_COLL_ALLREDUCE_RING,
                                           S / gpus_per_node, nodes, inter));
  int64_t gather = round_ns(single_link_ns(RV_COLL_ALL_GATHER, S,
                                           gpus_per_node, intra));
  return add_saturating(add_saturating(scatter, across), gather);
}

/* The link a flat collective spanning nodes sees: every step waits for
** its slowest hop, so the worse bandwidth and latency of the two. */
static rv_link bottleneck_link(const rv_link *a, const rv_link *b)
{
  double bw = MIN(rv_link_effective_bandwidth(a),
                  rv_link_effective_bandwidth(b));
  return rv_link_make(bw, MAX(a->latency_ns, b->latency_ns), 1.0);
}

int64_t rv_cluster_collective_ns(rv_collective c, int64_t bytes,
                                 const rv_cluster *cluster)
{
  if (!cluster || cluster->nodes < 1 || cluster->gpus_per_node < 1
      || cluster->nodes > INT_MAX / cluster->gpus_per_node
      || !link_is_valid(&cluster->intra) || !link_is_valid(&cluster->inter))
    return -1;
  if (c == RV_COLL_ALLREDUCE_HIER)
    return rv_hierarchical_allreduce_ns(bytes, cluster->nodes,
                                        cluster->gpus_per_node,
                                        &cluster->intra, &cluster->inter);
  int ranks = cluster->nodes * cluster->gpus_per_node;
  if (cluster->nodes == 1)
    return rv_collective_time_ns(c, bytes, ranks, &cluster->intra);
  rv_link slowest = bottleneck_link(&cluster->intra, &cluster->inter);
  return rv_collective_time_ns(c, bytes, ranks, &slowest);
}

rv_cluster rv_cluster_for_ranks(int ranks, int gpus_per_node,
                                const rv_link *intra, const rv_link *inter)
{
  rv_cluster cluster = { 1, 1, *intra, *inter };
  if (ranks < 1 || gpus_per_node < 1)
    return cluster;
  cluster.gpus_per_node = MIN(ranks, gpus_per_node);
  cluster.nodes = (ranks + cluster.gpus_per_node - 1) / cluster.gpus_per_node;
  return cluster;
}

/* ---- re-costing --------------------------------------------------------- */

/* The payload for which the model on `cluster` takes `ns`: the model is
** affine in S (latency + S * per-byte), so two points give it. */
static int64_t payload_for(rv_collective c, int64_t ns,
                           const rv_cluster *cluster)
{
  static const int64_t probe = (int64_t)1 << 30;
  int64_t base = rv_cluster_collective_ns(c, 0, cluster);
  int64_t at_probe = rv_cluster_collective_ns(c, probe, cluster);
  if (base < 0 || at_probe <= base || ns <= base)
    return 0;
  double per_byte = (double)(at_probe - base) / (double)probe;
  double bytes = (double)(ns - base) / per_byte;
  return bytes >= 9.0e15 ? (int64_t)9.0e15 : (int64_t)llround(bytes);
}

int64_t rv_collective_recost_ns(rv_collective c, rv_collective wanted_c, int64_t bytes,
                                int64_t divisor, int64_t recorded_ns,
                                const rv_cluster *recorded,
                                const rv_cluster *wanted,
                                int64_t *bytes_used)
{
  if (recorded_ns < 0 || !recorded || !wanted || divisor < 1)
    return -1;
  int64_t payload = bytes > 0 ? bytes : payload_for(c, recorded_ns, recorded);
  if (bytes_used)
    *bytes_used = payload;
  int64_t before = rv_cluster_collective_ns(c, payload, recorded);
  int64_t after = rv_cluster_collective_ns(wanted_c, payload / divisor, wanted);
  if (before < 0 || after < 0)
    return -1;
  if (before == 0)
    return after == 0 ? recorded_ns : add_saturating(recorded_ns, after);
  double ns = (double)recorded_ns * ((double)after / (double)before);
  return round_ns(ns);
}

/* ---- names ------------------------------------------------------------- */

static const char *const collective_names[RV_COLL_COUNT] = {
  [RV_COLL_ALLREDUCE_RING] = "allreduce_ring",
  [RV_COLL_ALLREDUCE_TREE] = "allreduce_tree",
  [RV_COLL_ALLREDUCE_HIER] = "allreduce_hier",
  [RV_COLL_REDUCE_SCATTER] = "reduce_scatter",
  [RV_COLL_ALL_GATHER] = "all_gather",
  [RV_COLL_ALL_TO_ALL] = "all_to_all",
  [RV_COLL_BROADCAST] = "broadcast",
};

/* Spellings after normalisation (lower case, no '-', '_' or spaces). */
static const struct {
  const char *spelling;
  rv_collective collective;
} collective_aliases[] = {
  { "allreducering", RV_COLL_ALLREDUCE_RING },
  { "ringallreduce", RV_COLL_ALLREDUCE_RING },
  { "allreduce", RV_COLL_ALLREDUCE_RING },
  { "allreducetree", RV_COLL_ALLREDUCE_TREE },
  { "treeallreduce", RV_COLL_ALLREDUCE_TREE },
  { "allreducehier", RV_COLL_ALLREDUCE_HIER },
  { "allreducehierarchical", RV_COLL_ALLREDUCE_HIER },
  { "hierallreduce", RV_COLL_ALLREDUCE_HIER },
  { "hierarchicalallreduce", RV_COLL_ALLREDUCE_HIER },
  { "reducescatter", RV_COLL_REDUCE_SCATTER },
  { "allgather", RV_COLL_ALL_GATHER },
  { "alltoall", RV_COLL_ALL_TO_ALL },
  { "sendrecv", RV_COLL_ALL_TO_ALL },
  { "broadcast", RV_COLL_BROADCAST },
};

const char *rv_collective_name(rv_collective c)
{
  return (unsigned)c < RV_COLL_COUNT ? collective_names[c] : NULL;
}

static char *normalise_name(const char *name)
{
  GString *out = g_string_new(NULL);
  for (const char *s = name; *s; s++)
    if (*s != '-' && *s != '_' && *s != ' ')
      g_string_append_c(out, g_ascii_tolower(*s));
  return g_string_free(out, FALSE);
}

gboolean rv_collective_from_name(const char *name, rv_collective *out,
                                 GError **error)
{
  char *key = normalise_name(name ? name : "");
  gboolean found = FALSE;
  for (size_t i = 0; i < G_N_ELEMENTS(collective_aliases) && !found; i++) {
    if (strcmp(key, collective_aliases[i].spelling) == 0) {
      *out = collective_aliases[i].collective;
      found = TRUE;
    }
  }
  g_free(key);
  if (!found)
    g_set_error(error, RV_COMM_ERROR, RV_COMM_ERROR_UNKNOWN_COLLECTIVE,
                "\"%s\": unknown collective (expected allreduce_ring, "
                "allreduce_tree, allreduce_hier, reduce_scatter, all_gather, "
                "all_to_all or broadcast)", name ? name : "");
  return found;
}

/* ---- kernel names ------------------------------------------------------ */

/* Operation names as NCCL spells them in kernel symbols.  ReduceScatter
** precedes anything starting with "Reduce", and plain Reduce (to one
** root) is deliberately absent because the model has no cost for it. */
static const struct {
  const char *op;
  rv_collective collective;
} kernel_ops[] = {
  { "AllReduce", RV_COLL_ALLREDUCE_RING },
  { "AllGather", RV_COLL_ALL_GATHER },
  { "ReduceScatter", RV_COLL_REDUCE_SCATTER },
  { "Broadcast", RV_COLL_BROADCAST },
  { "SendRecv", RV_COLL_ALL_TO_ALL },
  { "AllToAll", RV_COLL_ALL_TO_ALL },
};

static const char *skip_word(const char *s, const char *word)
{
  size_t n = strlen(word);
  return strncmp(s, word, n) == 0 ? s + n : s;
}

/* Does the algorithm part of a symbol, [from, to), mention a tree? */
static gboolean mentions_tree(const char *from, const char *to)
{
  for (const char *s = from; s + 4 <= to; s++)
    if (g_ascii_strncasecmp(s, "tree", 4) == 0)
      return TRUE;
  return FALSE;
}

/* Collective named right after a "nccl"/"rccl" at s, or -1. */
static int collective_after_prefix(const char *s, const char *end)
{
  s = skip_word(skip_word(skip_word(s + 4, "Dev"), "Kernel"), "_");
  for (size_t i = 0; i < G_N_ELEMENTS(kernel_ops); i++) {
    const char *rest = skip_word(s, kernel_ops[i].op);
    if (rest == s)
      continue;
    if (kernel_ops[i].collective == RV_COLL_ALLREDUCE_RING
        && mentions_tree(rest, end))
      return RV_COLL_ALLREDUCE_TREE;
    return kernel_ops[i].collective;
  }
  return -1;
}

int rv_collective_from_kernel_name(const char *kernel_name)
{
  if (!kernel_name)
    return -1;
  /* Only the symbol matters, not the parameter list after '('. */
  const char *end = strchr(kernel_name, '(');
  if (!end)
    end = kernel_name + strlen(kernel_name);
  for (const char *s = kernel_name; s + 4 <= end; s++) {
    if (strncmp(s, "nccl", 4) != 0 && strncmp(s, "rccl", 4) != 0)
      continue;
    int c = collective_after_prefix(s, end);
    if (c >= 0)
      return c;
  }
  return -1;
}
