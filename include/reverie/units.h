/*
** units.h — parsing and formatting of quantities with units.
**
** Plugin parameters arrive as text ("25GB/s", "5us", "25MiB").  These
** routines turn such text into the project's canonical representations
** and back into human-readable text for reports:
**
**   durations   int64_t nanoseconds
**   sizes       int64_t bytes
**   bandwidths  double bytes per second
**
** Parsing is strict: the whole string must be a non-negative decimal
** number followed by a known unit (optionally separated by whitespace).
** Hexadecimal, "nan", "inf", trailing junk and overflow are rejected with
** a GError in the RV_UNITS_ERROR domain whose message quotes the offending
** text and says what was expected.  Parsing never depends on the locale.
*/
#ifndef REVERIE_UNITS_H
#define REVERIE_UNITS_H

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

/* What kind of quantity a parameter holds; see rv_parse_quantity(). */
typedef enum {
  RV_UNIT_NONE,      /* plain number, no unit               */
  RV_UNIT_TIME,      /* duration, canonical unit ns          */
  RV_UNIT_BYTES,     /* size, canonical unit bytes           */
  RV_UNIT_BANDWIDTH  /* rate, canonical unit bytes/second    */
} rv_unit_kind;

#define RV_UNITS_ERROR (rv_units_error_quark())
GQuark rv_units_error_quark(void);

typedef enum {
  RV_UNITS_ERROR_EMPTY,    /* NULL, empty or all-whitespace text          */
  RV_UNITS_ERROR_SYNTAX,   /* not a decimal number                        */
  RV_UNITS_ERROR_UNIT,     /* missing, unknown or misplaced unit          */
  RV_UNITS_ERROR_RANGE     /* negative, zero bandwidth, overflow, fraction */
} rv_units_error;

/* A finite decimal number such as "1.5", "3", "-2", "1e-3".  Accepts
** surrounding whitespace; rejects trailing junk, hex, nan and inf. */
gboolean rv_parse_number(const char *text, double *out, GError **error);

/* A duration: a number followed by ns, us (or µs), ms or s.  The unit is
** mandatory because a bare number is ambiguous.  Rounded to the nearest
** nanosecond. */
gboolean rv_parse_duration_ns(const char *text, int64_t *out_ns,
                              GError **error);

/* A size: B, KB/kB, MB, GB, TB, PB (powers of 1000) or KiB, MiB, GiB,
** TiB, PiB (powers of 1024).  A bare number means bytes and must then be
** whole, as must a value in B; larger units round to the nearest byte. */
gboolean rv_parse_bytes(const char *text, int64_t *out_bytes, GError **error);

/* A bandwidth in bytes per second.  Byte units: B/s, KB/s, MB/s, GB/s,
** TB/s, KiB/s, MiB/s, GiB/s, TiB/s (also written Bps, GBps, ...).  Bit
** units (divided by 8): bps, Kbps, Mbps, Gbps, Tbps, b/s, Kb/s, Mb/s,
** Gb/s, Tb/s, bit/s, Gbit/s, ...  A unit is mandatory and the result must
** be greater than zero. */
gboolean rv_parse_bandwidth(const char *text, double *out_bytes_per_s,
                            GError **error);

/* Parses according to kind and stores the canonical value as a double
** (ns, bytes, bytes/s, or the plain number). */
gboolean rv_parse_quantity(rv_unit_kind kind, const char *text, double *out,
                           GError **error);

/* Human-readable name of a kind: "number", "duration", "size",
** "bandwidth". */
const char *rv_unit_kind_name(rv_unit_kind kind);

/* Report formatting; each returns a newly allocated string (g_free).
**   rv_format_duration:  "512 ns", "87.0 us", "1.234 ms", "2.500 s"
**   rv_format_bytes:     "512 B", "1.50 KiB", "25.00 MiB" (powers of 1024)
**   rv_format_bandwidth: "512 B/s", "12.50 GB/s" (powers of 1000, as
**                        vendors quote link speeds) */
char *rv_format_duration(int64_t ns);
char *rv_format_bytes(int64_t bytes);
char *rv_format_bandwidth(double bytes_per_s);

G_END_DECLS

#endif /* REVERIE_UNITS_H */
