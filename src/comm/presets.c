/*
** presets.c — built-in link classes for the collective cost model.
**
** Bandwidths are per direction, derived from the cited standard or vendor
** datasheet (datasheets for NVLink quote the bidirectional total, which
** is halved here).  Latencies are typical per-step figures for NCCL-level
** communication, not measurements: NCCL's own tuning model
** (src/graph/tuning.cc, hwLat) charges roughly 0.4-6 us per hop on
** NVLink/PCIe and 1-10 us per network hop depending on protocol, and TCP
** over Ethernet adds tens of microseconds of kernel stack.  Override them
** with measured values when you have them.
*/
#include "reverie/comm.h"

#include <string.h>

/* PCIe data rate per direction of an x16 link: GT/s per lane times 16
** lanes times 128b/130b encoding efficiency, in bytes. */
#define PCIE_X16_BPS(gt_per_s) ((gt_per_s) * 1e9 * 16.0 * 128.0 / 130.0 / 8.0)

/* Link rates quoted in Gb/s (InfiniBand, Ethernet), in bytes. */
#define GBIT_BPS(gbit_per_s) ((gbit_per_s) * 1e9 / 8.0)

#define LATENCY_NOTE " Latency is a typical NCCL-level per-step figure, " \
  "not a measurement."

static const rv_link_preset presets[] = {
  { "pcie3", "PCI Express 3.0 x16",
    PCIE_X16_BPS(8.0), 3000,
    "PCI-SIG PCI Express Base Specification 3.0: 8 GT/s per lane, "
    "128b/130b encoding, x16 = 15.75 GB/s per direction." LATENCY_NOTE },
  { "pcie4", "PCI Express 4.0 x16",
    PCIE_X16_BPS(16.0), 3000,
    "PCI-SIG PCI Express Base Specification 4.0: 16 GT/s per lane, "
    "128b/130b encoding, x16 = 31.5 GB/s per direction." LATENCY_NOTE },
  { "pcie5", "PCI Express 5.0 x16",
    PCIE_X16_BPS(32.0), 3000,
    "PCI-SIG PCI Express Base Specification 5.0: 32 GT/s per lane, "
    "128b/130b encoding, x16 = 63 GB/s per direction." LATENCY_NOTE },
  { "nvlink-v100", "NVLink 2.0 on Tesla V100 SXM2 (6 links)",
    150e9, 2000,
    "NVIDIA Tesla V100 datasheet: NVLink 300 GB/s total bidirectional "
    "(6 links x 25 GB/s per direction) = 150 GB/s per direction."
    LATENCY_NOTE },
  { "nvlink-a100", "NVLink 3.0 on A100 SXM4 (12 links)",
    300e9, 2000,
    "NVIDIA A100 Tensor Core GPU datasheet: NVLink 600 GB/s total "
    "bidirectional (12 links) = 300 GB/s per direction." LATENCY_NOTE },
  { "nvlink-h100", "NVLink 4.0 on H100 SXM5 (18 links)",
    450e9, 2000,
    "NVIDIA H100 Tensor Core GPU datasheet: NVLink 900 GB/s total "
    "bidirectional (18 links) = 450 GB/s per direction." LATENCY_NOTE },
  { "ib-edr", "InfiniBand EDR 4x (100 Gb/s)",
    GBIT_BPS(100.0), 5000,
    "InfiniBand Trade Association roadmap: EDR 4x = 100 Gb/s data rate "
    "= 12.5 GB/s per direction. Raw verbs latency is ~1-2 us; NCCL "
    "per-step cost over the network is higher." LATENCY_NOTE },
  { "ib-hdr", "InfiniBand HDR 4x (200 Gb/s)",
    GBIT_BPS(200.0), 5000,
    "InfiniBand Trade Association roadmap: HDR 4x = 200 Gb/s data rate "
    "= 25 GB/s per direction." LATENCY_NOTE },
  { "ib-ndr", "InfiniBand NDR 4x (400 Gb/s)",
    GBIT_BPS(400.0), 5000,
    "InfiniBand Trade Association roadmap: NDR 4x = 400 Gb/s data rate "
    "= 50 GB/s per direction." LATENCY_NOTE },
  { "eth-10g", "10 Gigabit Ethernet, TCP sockets",
    GBIT_BPS(10.0), 20000,
    "IEEE 802.3 10GBASE: 10 Gb/s = 1.25 GB/s per direction (before "
    "TCP/IP overhead). Latency assumes NCCL's socket transport through "
    "the kernel TCP stack." LATENCY_NOTE },
  { "eth-25g", "25 Gigabit Ethernet, TCP sockets",
    GBIT_BPS(25.0), 20000,
    "IEEE 802.3by 25GBASE: 25 Gb/s = 3.125 GB/s per direction (before "
    "TCP/IP overhead). Latency assumes NCCL's socket transport through "
    "the kernel TCP stack." LATENCY_NOTE },
  { "eth-100g", "100 Gigabit Ethernet, TCP sockets",
    GBIT_BPS(100.0), 20000,
    "IEEE 802.3 100GBASE: 100 Gb/s = 12.5 GB/s per direction (before "
    "TCP/IP overhead). Latency assumes NCCL's socket transport through "
    "the kernel TCP stack; RoCE would be closer to InfiniBand."
    LATENCY_NOTE },
};

const rv_link_preset *rv_link_presets(size_t *count)
{
  if (count)
    *count = G_N_ELEMENTS(presets);
  return presets;
}

const rv_link_preset *rv_link_preset_find(const char *name)
{
  if (!name)
    return NULL;
  for (size_t i = 0; i < G_N_ELEMENTS(presets); i++)
    if (strcmp(presets[i].name, name) == 0)
      return &presets[i];
  return NULL;
}

const rv_link_preset *rv_link_preset_lookup(const char *name, GError **error)
{
  const rv_link_preset *preset = rv_link_preset_find(name);
  if (preset)
    return preset;
  GString *known = g_string_new(NULL);
  for (size_t i = 0; i < G_N_ELEMENTS(presets); i++)
    g_string_append_printf(known, "%s%s", i ? ", " : "", presets[i].name);
  g_set_error(error, RV_COMM_ERROR, RV_COMM_ERROR_UNKNOWN_LINK,
              "\"%s\": unknown link preset (expected one of %s)",
              name ? name : "", known->str);
  g_string_free(known, TRUE);
  return NULL;
}

rv_link rv_link_from_preset(const rv_link_preset *preset, double efficiency)
{
  return rv_link_make(preset->bandwidth_Bps, preset->latency_ns, efficiency);
}
