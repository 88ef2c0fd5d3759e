/*
** units.c — strict parsing of quantities with units, and formatting of
** quantities for reports.  See include/reverie/units.h for the contract.
**
** Numbers are scanned by hand before being converted with g_ascii_strtod()
** because strtod() on its own would accept hex floats, "nan", "inf" and
** leading whitespace inside the number, and would depend on the locale.
*/
#include "reverie/units.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

G_DEFINE_QUARK(rv-units-error-quark, rv_units_error)

/* One recognised unit: its spelling and its factor to the canonical unit. */
typedef struct {
  const char *name;
  double scale;
} unit_entry;

/* 2^63 as a double; the first value that does not fit in int64_t. */
#define INT64_LIMIT 9223372036854775808.0

static const unit_entry time_units[] = {
  { "ns", 1.0 },
  { "us", 1e3 },
  { "\xc2\xb5s", 1e3 },  /* MICRO SIGN */
  { "\xce\xbcs", 1e3 },  /* GREEK SMALL LETTER MU */
  { "ms", 1e6 },
  { "s", 1e9 },
};
static const char time_expected[] = "ns, us, ms, s";

static const unit_entry byte_units[] = {
  { "B", 1.0 },
  { "KB", 1e3 }, { "kB", 1e3 }, { "MB", 1e6 }, { "GB", 1e9 },
  { "TB", 1e12 }, { "PB", 1e15 },
  { "KiB", 1024.0 }, { "MiB", 1048576.0 }, { "GiB", 1073741824.0 },
  { "TiB", 1099511627776.0 }, { "PiB", 1125899906842624.0 },
};
static const char bytes_expected[] =
  "B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB";

/* Bandwidth units are a prefix followed by a per-second suffix; listing
** the two halves separately keeps every combination consistent. */
static const unit_entry rate_prefixes[] = {
  { "", 1.0 },
  { "K", 1e3 }, { "k", 1e3 }, { "M", 1e6 }, { "G", 1e9 }, { "T", 1e12 },
  { "Ki", 1024.0 }, { "Mi", 1048576.0 }, { "Gi", 1073741824.0 },
  { "Ti", 1099511627776.0 },
};
static const unit_entry rate_suffixes[] = {
  { "B/s", 1.0 }, { "Bps", 1.0 },                      /* bytes */
  { "b/s", 0.125 }, { "bps", 0.125 }, { "bit/s", 0.125 } /* bits */
};
static const char bandwidth_expected[] =
  "B/s, KB/s, MB/s, GB/s, TB/s, KiB/s, MiB/s, GiB/s, TiB/s, "
  "bps, Kbps, Mbps, Gbps, Tbps, Kb/s, Mb/s, Gb/s, Tb/s";

/* ---- scanning ---------------------------------------------------------- */

static const char *skip_space(const char *s)
{
  while (g_ascii_isspace(*s))
    s++;
  return s;
}

static size_t count_digits(const char *s)
{
  size_t n = 0;
  while (g_ascii_isdigit(s[n]))
    n++;
  return n;
}

/* Length of the longest prefix of s that is a decimal number
** [+-]digits[.digits][e[+-]digits], or 0 if there is none. */
static size_t scan_decimal(const char *s)
{
  size_t i = (*s == '+' || *s == '-') ? 1 : 0;
  size_t int_digits = count_digits(s + i);
  size_t frac_digits = 0;
  i += int_digits;
  if (s[i] == '.') {
    frac_digits = count_digits(s + i + 1);
    if (int_digits + frac_digits > 0)
      i += 1 + frac_digits;
  }
  if (int_digits + frac_digits == 0)
    return 0;
  if (s[i] == 'e' || s[i] == 'E') {
    /* Only an exponent with digits counts; otherwise "e" starts a unit. */
    size_t j = i + 1 + ((s[i + 1] == '+' || s[i + 1] == '-') ? 1 : 0);
    size_t exp_digits = count_digits(s + j);
    if (exp_digits > 0)
      i = j + exp_digits;
  }
  return i;
}

/* Splits text into a finite number and the trimmed unit text after it
** (a newly allocated, possibly empty string).  what names the quantity
** for error messages. */
static gboolean split_quantity(const char *text, const char *what,
                               double *value, char **unit, GError **error)
{
  const char *start = text ? skip_space(text) : "";
  if (*start == '\0') {
    g_set_error(error, RV_UNITS_ERROR, RV_UNITS_ERROR_EMPTY,
                "empty %s (expected a number%s)", what,
                unit ? " followed by a unit" : "");
    return FALSE;
  }
  size_t len = scan_decimal(start);
  if (len == 0) {
    g_set_error(error, RV_UNITS_ERROR, RV_UNITS_ERROR_SYNTAX,
                "\"%s\": not a valid %s (expected a decimal number%s)",
                text, what, unit ? " followed by a unit" : "");
    return FALSE;
  }
  char *digits = g_strndup(start, len);
  double v = g_ascii_strtod(digits, NULL);
  g_free(digits);
  if (!isfinite(v)) {
    g_set_error(error, RV_UNITS_ERROR, RV_UNITS_ERROR_RANGE,
                "\"%s\": %s is too large", text, what);
    return FALSE;
  }
  const char *rest = skip_space(start + len);
  if (unit) {
    *unit = g_strchomp(g_strdup(rest));
  } else if (*rest != '\0') {
    g_set_error(error, RV_UNITS_ERROR, RV_UNITS_ERROR_SYNTAX,
                "\"%s\": unexpected text \"%s\" after the number", text, rest);
    return FALSE;
  }
  *value = v;
  return TRUE;
}

static const unit_entry *find_unit(const unit_entry *table, size_t n,
                                   const char *name)
{
  for (size_t i = 0; i < n; i++)
    if (strcmp(table[i].name, name) == 0)
      return &table[i];
  return NULL;
}

/* Scale of a bandwidth unit such as "Gbps", or 0 if unknown. */
static double rate_scale(const char *name)
{
  for (size_t p = 0; p < G_N_ELEMENTS(rate_prefixes); p++) {
    const char *prefix = rate_prefixes[p].name;
    if (strncmp(name, prefix, strlen(prefix)) != 0)
      continue;
    const unit_entry *suffix = find_unit(rate_suffixes,
                                         G_N_ELEMENTS(rate_suffixes),
                                         name + strlen(prefix));
    if (suffix)
      return rate_prefixes[p].scale * suffix->scale;
  }
  return 0.0;
}

static void set_unit_error(GError **error, const char *text, const char *what,
                           const char *unit, const char *expected)
{
  if (*unit == '\0')
    g_set_error(error, RV_UNITS_ERROR, RV_UNITS_ERROR_UNIT,
                "\"%s\": missing %s unit (expected one of %s)",
                text, what, expected);
  else
    g_set_error(error, RV_UNITS_ERROR, RV_UNITS_ERROR_UNIT,
                "\"%s\": unknown %s unit \"%s\" (expected one of %s)",
                text, what, unit, expected);
}

static gboolean reject_negative(const char *text, const char *what, double v,
                                GError **error)
{
  if (v >= 0.0)
    return TRUE;
  g_set_error(error, RV_UNITS_ERROR, RV_UNITS_ERROR_RANGE,
              "\"%s\": %s must not be negative", text, what);
  return FALSE;
}

/* Rounds a non-negative canonical value to int64, rejecting overflow. */
static gboolean to_int64(const char *text, const char *what, double v,
                         int64_t *out, GError **error)
{
  double rounded = round(v);
  if (rounded >= INT64_LIMIT) {
    g_set_error(error, RV_UNITS_ERROR, RV_UNITS_ERROR_RANGE,
                "\"%s\": %s is too large (at most %" PRId64 ")",
                text, what, INT64_MAX);
    return FALSE;
  }
  *out = (int64_t)rounded;
  return TRUE;
}

/* ---- parsing ----------------------------------------------------------- */

gboolean rv_parse_number(const char *text, double *out, GError **error)
{
  return split_quantity(text, "number", out, NULL, error);
}

gboolean rv_parse_duration_ns(const char *text, int64_t *out_ns,
                              GError **error)
{
  double v;
  char *unit;
  if (!split_quantity(text, "duration", &v, &unit, error))
    return FALSE;
  const unit_entry *u = find_unit(time_units, G_N_ELEMENTS(time_units), unit);
  gboolean ok = FALSE;
  if (!u)
    set_unit_error(error, text, "duration", unit, time_expected);
  else if (reject_negative(text, "duration", v, error))
    ok = to_int64(text, "duration", v * u->scale, out_ns, error);
  g_free(unit);
  return ok;
}

gboolean rv_parse_bytes(const char *text, int64_t *out_bytes, GError **error)
{
  double v;
  char *unit;
  if (!split_quantity(text, "size", &v, &unit, error))
    return FALSE;
  /* A bare number is refused, as durations and bandwidths are:
   * "bucket_cap=25" meant 25 MB to its author, not 25 bytes. */
  const unit_entry *u = find_unit(byte_units, G_N_ELEMENTS(byte_units), unit);
  gboolean ok = FALSE;
  if (!u) {
    set_unit_error(error, text, "size", unit, bytes_expected);
  } else if (!reject_negative(text, "size", v, error)) {
    /* error set */
  } else if (u->scale == 1.0 && v != floor(v)) {
    g_set_error(error, RV_UNITS_ERROR, RV_UNITS_ERROR_RANGE,
                "\"%s\": not a whole number of bytes", text);
  } else {
    ok = to_int64(text, "size", v * u->scale, out_bytes, error);
  }
  g_free(unit);
  return ok;
}

gboolean rv_parse_bandwidth(const char *text, double *out_bytes_per_s,
                            GError **error)
{
  double v;
  char *unit;
  if (!split_quantity(text, "bandwidth", &v, &unit, error))
    return FALSE;
  double scale = rate_scale(unit);
  double rate = v * scale;
  gboolean ok = FALSE;
  if (scale == 0.0) {
    set_unit_error(error, text, "bandwidth", unit, bandwidth_expected);
  } else if (!isfinite(rate)) {
    g_set_error(error, RV_UNITS_ERROR, RV_UNITS_ERROR_RANGE,
                "\"%s\": bandwidth is too large", text);
  } else if (rate <= 0.0) {
    /* A zero bandwidth would make every transfer take forever. */
    g_set_error(error, RV_UNITS_ERROR, RV_UNITS_ERROR_RANGE,
                "\"%s\": bandwidth must be greater than zero", text);
  } else {
    *out_bytes_per_s = rate;
    ok = TRUE;
  }
  g_free(unit);
  return ok;
}

gboolean rv_parse_quantity(rv_unit_kind kind, const char *text, double *out,
                           GError **error)
{
  int64_t whole;
  switch (kind) {
  case RV_UNIT_NONE:
    return rv_parse_number(text, out, error);
  case RV_UNIT_TIME:
    if (!rv_parse_duration_ns(text, &whole, error))
      return FALSE;
    *out = (double)whole;
    return TRUE;
  case RV_UNIT_BYTES:
    if (!rv_parse_bytes(text, &whole, error))
      return FALSE;
    *out = (double)whole;
    return TRUE;
  case RV_UNIT_BANDWIDTH:
    return rv_parse_bandwidth(text, out, error);
  }
  g_set_error(error, RV_UNITS_ERROR, RV_UNITS_ERROR_UNIT,
              "unknown quantity kind %d", (int)kind);
  return FALSE;
}

const char *rv_unit_kind_name(rv_unit_kind kind)
{
  switch (kind) {
  case RV_UNIT_NONE:      return "number";
  case RV_UNIT_TIME:      return "duration";
  case RV_UNIT_BYTES:     return "size";
  case RV_UNIT_BANDWIDTH: return "bandwidth";
  }
  return "unknown";
}

/* ---- formatting -------------------------------------------------------- */

/* A display unit: its name, its size in canonical units, and how many
** decimals to print. */
typedef struct {
  const char *name;
  double scale;
  int decimals;
} display_unit;

static const display_unit duration_display[] = {
  { "us", 1e3, 1 }, { "ms", 1e6, 3 }, { "s", 1e9, 3 },
};
static const display_unit bytes_display[] = {
  { "KiB", 1024.0, 2 }, { "MiB", 1048576.0, 2 },
  { "GiB", 1073741824.0, 2 }, { "TiB", 1099511627776.0, 2 },
  { "PiB", 1125899906842624.0, 2 }, { "EiB", 1152921504606846976.0, 2 },
};
static const display_unit bandwidth_display[] = {
  { "KB/s", 1e3, 2 }, { "MB/s", 1e6, 2 }, { "GB/s", 1e9, 2 },
  { "TB/s", 1e12, 2 }, { "PB/s", 1e15, 2 },
};

/* Formats magnitude (>= step) in the smallest display unit whose printed
** value stays below step, so rounding never shows "1000.0 us". */
static char *format_scaled(const char *sign, double magnitude, double step,
                           const display_unit *units, size_t n)
{
  size_t i = 0;
  for (; i + 1 < n; i++) {
    double factor = pow(10.0, units[i].decimals);
    if (round(magnitude / units[i].scale * factor) / factor < step)
      break;
  }
  char format[8];
  char number[G_ASCII_DTOSTR_BUF_SIZE];
  g_snprintf(format, sizeof format, "%%.%df", units[i].decimals);
  g_ascii_formatd(number, sizeof number, format, magnitude / units[i].scale);
  return g_strdup_printf("%s%s %s", sign, number, units[i].name);
}

char *rv_format_duration(int64_t ns)
{
  if (ns > -1000 && ns < 1000)
    return g_strdup_printf("%" PRId64 " ns", ns);
  return format_scaled(ns < 0 ? "-" : "", fabs((double)ns), 1000.0,
                       duration_display, G_N_ELEMENTS(duration_display));
}

char *rv_format_bytes(int64_t bytes)
{
  if (bytes > -1024 && bytes < 1024)
    return g_strdup_printf("%" PRId64 " B", bytes);
  return format_scaled(bytes < 0 ? "-" : "", fabs((double)bytes), 1024.0,
                       bytes_display, G_N_ELEMENTS(bytes_display));
}

char *rv_format_bandwidth(double bytes_per_s)
{
  if (isnan(bytes_per_s))
    return g_strdup("nan B/s");
  if (isinf(bytes_per_s))
    return g_strdup(bytes_per_s > 0 ? "inf B/s" : "-inf B/s");
  double magnitude = fabs(bytes_per_s);
  const char *sign = bytes_per_s < 0 ? "-" : "";
  if (round(magnitude) < 1000.0)
    return g_strdup_printf("%s%.0f B/s", sign, round(magnitude));
  return format_scaled(sign, magnitude, 1000.0, bandwidth_display,
                       G_N_ELEMENTS(bandwidth_display));
}
