/*
 * _core.c - the C extension under the reverie Python package: a loaded
 * graph kept between calls, and the library's answers about it as the
 * JSON text the command line prints with --json (documents.h), which
 * reverie/__init__.py turns into Python objects.
 *
 * Every call that reads a trace, replays or applies optimizations releases
 * the GIL: it touches no Python object while the library works.  A Graph
 * is never changed after it is loaded (what-ifs transform copies), so
 * several threads may use one at once.  Errors become the package's
 * exceptions with the command line's one-line message: RV_ERROR_USAGE
 * UsageError, RV_ERROR_PLUGIN PluginError, the rest InputError, all
 * subclasses of reverie.Error.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <string.h>
#include "reverie/documents.h"
#include "reverie/error.h"
#include "reverie/escape.h"
#include "reverie/load.h"
#include "reverie/optimize.h"
#include "reverie/report.h"
#include "reverie/runs.h"
#include "reverie/store.h"
#include "reverie/sweep_plan.h"
#include "reverie/validate.h"
#include "reverie/whatif.h"

static PyObject *Error, *UsageError, *InputError, *PluginError;

/* ---- errors ------------------------------------------------------------------ */

/* Raise the package's exception for a library error (consumed); NULL. */
static PyObject *raise_error(GError *error)
{
    if (error == NULL) {
        PyErr_SetString(Error, "internal error: a step failed without an error message");
        return NULL;
    }
    int status = rv_error_exit_status(error);
    PyObject *type = status == RV_EXIT_USAGE ? UsageError : status == RV_EXIT_PLUGIN ? PluginError : InputError;
    char *message = rv_escape_text(error->message);
    PyErr_SetString(type, message);
    g_free(message);
    g_error_free(error);
    return NULL;
}

/* ---- arguments ------------------------------------------------------------------ */

/* A NULL-terminated copy of a sequence of str or os.PathLike (g_strfreev),
 * or NULL with a TypeError. */
static char **string_list(PyObject *sequence, const char *what)
{
    PyObject *items = PySequence_Fast(sequence, what);
    if (items == NULL) return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(items);
    char **list = g_new0(char *, count + 1);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *bytes = NULL;
        if (!PyUnicode_FSConverter(PySequence_Fast_GET_ITEM(items, i), &bytes)) {
            g_strfreev(list);
            Py_DECREF(items);
            return NULL;
        }
        list[i] = g_strdup(PyBytes_AS_STRING(bytes));
        Py_DECREF(bytes);
    }
    Py_DECREF(items);
    return list;
}

/* A document's text as a Python str (the text freed), or NULL with MemoryError. */
static PyObject *text_result(char *text)
{
    if (text == NULL) return PyErr_NoMemory();
    PyObject *result = PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "replace");
    free(text);
    return result;
}

/* A GPtrArray of char* as a list of str. */
static PyObject *str_list(const GPtrArray *lines)
{
    PyObject *list = PyList_New(0);
    for (guint i = 0; list && lines && i < lines->len; i++) {
        PyObject *line = PyUnicode_DecodeUTF8(g_ptr_array_index(lines, i), (Py_ssize_t)strlen(g_ptr_array_index(lines, i)),
                                              "replace");
        if (line == NULL || PyList_Append(list, line) < 0) Py_CLEAR(list);
        Py_XDECREF(line);
    }
    return list;
}

/* ---- Graph ---------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    rv_graph *graph;
    PyObject *notes;   /* list of str: what the timing model assumed, per input */
} GraphObject;

static void graph_dealloc(GraphObject *self)
{
    rv_graph_free(self->graph);
    Py_XDECREF(self->notes);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject GraphType;

/* _core.load(paths, max_bytes=0, max_events=0, read_timeout_ms=0): one
 * trace or graph, or several (or a folder) as the ranks of one job. */
static PyObject *core_load(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = { "paths", "max_bytes", "max_events", "read_timeout_ms", NULL };
    PyObject *paths_object;
    unsigned long long max_bytes = 0, max_events = 0;
    int read_timeout_ms = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|KKi", keywords, &paths_object, &max_bytes, &max_events,
                                     &read_timeout_ms))
        return NULL;
    char **paths = string_list(paths_object, "paths must be a list of paths");
    if (paths == NULL) return NULL;
    int count = (int)g_strv_length(paths);
    if (count == 0) {
        g_strfreev(paths);
        PyErr_SetString(UsageError, "give a trace or graph, or several (the ranks of one job)");
        return NULL;
    }
    rv_load_options options = { { 0 }, NULL, NULL, g_ptr_array_new_with_free_func(g_free) };
    options.import.max_bytes = max_bytes;
    options.import.max_events = max_events;
    options.import.read_timeout_ms = read_timeout_ms;
    GError *error = NULL;
    rv_graph *graph;
    Py_BEGIN_ALLOW_THREADS
    graph = rv_load_job(paths, count, &options, &error);
    /* a loaded graph answers many what-ifs, each on a copy: the check after
     * each plugin then looks only around what it changed (validate.h) */
    if (graph != NULL) rv_graph_remember_order(graph);
    Py_END_ALLOW_THREADS
    g_strfreev(paths);
    GraphObject *self = graph ? PyObject_New(GraphObject, &GraphType) : NULL;
    if (self != NULL) {
        self->graph = graph;
        self->notes = str_list(options.notes);
        if (self->notes == NULL) Py_CLEAR(self);
    } else if (graph != NULL) {
        rv_graph_free(graph);
    }
    g_ptr_array_unref(options.notes);
    if (graph == NULL) return raise_error(error);
    return (PyObject *)self;
}

/* The optimizations of one call, parsed: the plugin table holds their code
 * until the call ends. */
typedef struct {
    GHashTable *plugins;
    GPtrArray *opts;
} parsed_opts;

static gboolean parse_opts(PyObject *specs_object, parsed_opts *parsed, GError **error)
{
    parsed->plugins = rv_plugin_table_new();
    parsed->opts = NULL;
    char **specs = string_list(specs_object, "optimizations must be a list of 'NAME[:k=v,...]' strings");
    if (specs == NULL) return FALSE;
    parsed->opts = rv_opts_prepare(parsed->plugins, specs, error);
    g_strfreev(specs);
    return parsed->opts != NULL;
}

static void parsed_opts_clear(parsed_opts *parsed)
{
    if (parsed->opts) g_ptr_array_unref(parsed->opts);
    g_hash_table_destroy(parsed->plugins);
}

/* Raise for a failed parse: a Python error already set, or the library's. */
static PyObject *parse_failed(GError *error)
{
    return PyErr_Occurred() ? NULL : raise_error(error);
}

/* Graph.simulate(explain=0): simulate --json [--explain N]. */
static PyObject *graph_simulate(GraphObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = { "explain", NULL };
    int explain = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|i", keywords, &explain)) return NULL;
    if (explain < 0) {
        PyErr_SetString(UsageError, "explain takes a count of 0 or more");
        return NULL;
    }
    GError *error = NULL;
    char *text = NULL;
    gboolean ok, launch_queue_ignored = FALSE;
    Py_BEGIN_ALLOW_THREADS
    rv_replay replay;
    ok = rv_replay_run(self->graph, NULL, &replay, &error);
    if (ok) {
        rv_explanation *x = rv_explain(self->graph, (guint)explain);
        json_t *document = rv_simulate_document(self->graph, &replay, x, explain > 0);
        text = rv_document_text(document, RV_DOCUMENT_DIGITS);
        json_decref(document);
        rv_explanation_free(x);
        launch_queue_ignored = replay.launch_queue_ignored;
    }
    rv_replay_clear(&replay);
    Py_END_ALLOW_THREADS
    if (!ok) return raise_error(error);
    return Py_BuildValue("(NN)", text_result(text), PyBool_FromLong(launch_queue_ignored));
}

/* What a front end says beside a what-if: optimizations that changed
 * nothing, a replay that dropped the launch-queue rule. */
static GPtrArray *whatif_notes(GPtrArray *opts, const rv_whatif *whatif)
{
    GPtrArray *notes = rv_opts_unchanged(opts);
    if (whatif->baseline.launch_queue_ignored || whatif->predicted.launch_queue_ignored)
        g_ptr_array_add(notes, g_strdup("the launch-queue rule would have deadlocked this graph (its queue order "
                                        "contradicts its edges, e.g. after a plugin's rewrite): replayed without it"));
    return notes;
}

/* One what-if on a copy of the graph: its document (json_decref), and
 * the notes when asked for. */
static json_t *run_whatif(const rv_graph *graph, GPtrArray *opts, GPtrArray **notes, GError **error)
{
    rv_graph *copy = rv_graph_copy(graph);
    rv_whatif whatif;
    json_t *document = NULL;
    if (rv_whatif_run(&whatif, copy, opts, error)) document = rv_whatif_document(copy, opts, &whatif);
    if (notes) *notes = whatif_notes(opts, &whatif);
    rv_whatif_clear(&whatif);
    rv_graph_free(copy);
    return document;
}

/* Graph.whatif(specs): whatif --opt ... --json, and the notes. */
static PyObject *graph_whatif(GraphObject *self, PyObject *args)
{
    PyObject *specs;
    if (!PyArg_ParseTuple(args, "O", &specs)) return NULL;
    GError *error = NULL;
    parsed_opts parsed;
    if (!parse_opts(specs, &parsed, &error)) {
        parsed_opts_clear(&parsed);
        return parse_failed(error);
    }
    if (parsed.opts->len == 0) {
        parsed_opts_clear(&parsed);
        PyErr_SetString(UsageError, "give at least one optimization");
        return NULL;
    }
    char *text = NULL;
    GPtrArray *notes = NULL;
    Py_BEGIN_ALLOW_THREADS
    json_t *document = run_whatif(self->graph, parsed.opts, &notes, &error);
    if (document) text = rv_document_text(document, RV_DOCUMENT_DIGITS);
    if (document && text == NULL) g_set_error(&error, RV_ERROR, RV_ERROR_INTERNAL, "out of memory writing the result");
    json_decref(document);
    Py_END_ALLOW_THREADS
    parsed_opts_clear(&parsed);
    PyObject *note_list = str_list(notes);
    g_ptr_array_unref(notes);
    if (text == NULL) {
        Py_XDECREF(note_list);
        return raise_error(error);
    }
    return Py_BuildValue("(NN)", text_result(text), note_list);
}

/* The runs of the graph (recording, baseline, and with specs the
 * prediction) handed to `report`, which returns a new reference. */
typedef PyObject *(*runs_report_fn)(const rv_runs *runs, void *data, GError **error);

static PyObject *with_runs(GraphObject *self, PyObject *specs, runs_report_fn report, void *data)
{
    GError *error = NULL;
    parsed_opts parsed;
    if (!parse_opts(specs, &parsed, &error)) {
        parsed_opts_clear(&parsed);
        return parse_failed(error);
    }
    rv_runs runs;
    gboolean ok;
    Py_BEGIN_ALLOW_THREADS
    ok = rv_runs_replay(&runs, self->graph, parsed.opts, &error);
    Py_END_ALLOW_THREADS
    PyObject *result = ok ? report(&runs, data, &error) : NULL;
    rv_runs_clear(&runs);
    parsed_opts_clear(&parsed);
    if (!ok || (result == NULL && !PyErr_Occurred())) return raise_error(error);
    return result;
}

/* A report on the runs (documents.h), and the digits --json prints it with. */
typedef struct {
    const char *name;
    json_t *(*build)(const rv_runs *runs);
    int digits;
} runs_report;

static const runs_report runs_reports[] = {
    { "breakdown", rv_breakdown_document, RV_DOCUMENT_DIGITS },
    { "critical-path", rv_critical_path_document, RV_DOCUMENT_TIMESTAMP_DIGITS },
};

static PyObject *report_text(const rv_runs *runs, void *data, GError **error)
{
    const runs_report *kind = data;
    char *text;
    Py_BEGIN_ALLOW_THREADS
    json_t *document = kind->build(runs);
    text = rv_document_text(document, kind->digits);
    json_decref(document);
    Py_END_ALLOW_THREADS
    return text_result(text);
}

/* The replayed runs (not the recording) into a timeline file, as simulate
 * and whatif --timeline write it. */
static PyObject *write_timeline(const rv_runs *runs, void *data, GError **error)
{
    const char *path = data;
    rv_run list[3];
    guint count = rv_runs_list(runs, FALSE, list);
    gboolean ok;
    Py_BEGIN_ALLOW_THREADS
    ok = rv_runs_write_timeline(path, list, count, error);
    Py_END_ALLOW_THREADS
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

/* Graph.report(name, specs): `reverie NAME [--opt ...] --json` for the
 * reports on the runs (breakdown, critical-path). */
static PyObject *graph_report(GraphObject *self, PyObject *args)
{
    const char *name;
    PyObject *specs;
    if (!PyArg_ParseTuple(args, "sO", &name, &specs)) return NULL;
    for (gsize i = 0; i < G_N_ELEMENTS(runs_reports); i++)
        if (strcmp(runs_reports[i].name, name) == 0) return with_runs(self, specs, report_text, (void *)&runs_reports[i]);
    PyErr_Format(PyExc_ValueError, "no report named '%s' (breakdown, critical-path)", name);
    return NULL;
}

/* Graph.timeline(specs, path): the replay, and with specs the prediction
 * beside it, as Chrome trace JSON (.gz compresses). */
static PyObject *graph_timeline(GraphObject *self, PyObject *args)
{
    PyObject *specs, *path_bytes = NULL;
    if (!PyArg_ParseTuple(args, "OO&", &specs, PyUnicode_FSConverter, &path_bytes)) return NULL;
    char *path = g_strdup(PyBytes_AS_STRING(path_bytes));
    Py_DECREF(path_bytes);
    PyObject *result = with_runs(self, specs, write_timeline, path);
    g_free(path);
    return result;
}

/* Graph.save(path): the graph as a saved graph (.rvg). */
static PyObject *graph_save(GraphObject *self, PyObject *args)
{
    PyObject *path_bytes = NULL;
    if (!PyArg_ParseTuple(args, "O&", PyUnicode_FSConverter, &path_bytes)) return NULL;
    GError *error = NULL;
    gboolean ok;
    Py_BEGIN_ALLOW_THREADS
    ok = rv_store_save(self->graph, PyBytes_AS_STRING(path_bytes), &error);
    Py_END_ALLOW_THREADS
    Py_DECREF(path_bytes);
    if (!ok) return raise_error(error);
    Py_RETURN_NONE;
}

/* ---- sweeps --------------------------------------------------------------------- */

/* Rows one call returns, all held in memory at once. */
#define MAX_SWEEP_ROWS ((uint64_t)1000000)

typedef struct {
    const rv_graph *graph;
    const rv_sweep_plan *plan;
    GHashTable *plugins;       /* every plugin of the plan, loaded: read-only here */
    gboolean with_steps;
    char **rows;               /* per variant: its JSON text */
} sweep_run;

/* A variant's row: what `reverie sweep --json` prints for it, read from
 * its what-if document. */
static json_t *sweep_row(const sweep_run *run, uint64_t v, GPtrArray *specs, json_t *document, const GError *error)
{
    json_t *params = json_object(), *opts = json_array();
    for (guint a = 0; a < run->plan->axes->len; a++) {
        const rv_sweep_axis *axis = g_ptr_array_index(run->plan->axes, a);
        char *name = g_strdup_printf("%s.%s", axis->plugin, axis->param);
        json_object_set_new(params, name, rv_json_text(rv_sweep_plan_value(run->plan, v, a)));
        g_free(name);
    }
    for (guint i = 0; i < specs->len; i++) json_array_append_new(opts, rv_json_text(g_ptr_array_index(specs, i)));
    json_t *row = json_pack("{s:I,s:o,s:o,s:o}", "variant", (json_int_t)v, "source", rv_json_text(run->graph->source),
                            "opts", opts, "params", params);
    if (document == NULL) {
        json_object_set_new(row, "error", rv_json_text(error ? error->message : "failed without a message"));
        return row;
    }
    static const char *const copied[] = { "predicted_us", "baseline_us", "speedup", "predicted_peak_bytes",
                                          "baseline_peak_bytes" };
    for (gsize k = 0; k < G_N_ELEMENTS(copied); k++)
        json_object_set(row, copied[k], json_object_get(document, copied[k]));
    if (run->with_steps) {
        json_t *steps = json_array(), *step;
        size_t index;
        json_array_foreach(json_object_get(document, "steps"), index, step)
            json_array_append_new(steps, json_pack("{s:O,s:O,s:O}", "name", json_object_get(step, "name"), "baseline_us",
                                                   json_object_get(step, "baseline_us"), "predicted_us",
                                                   json_object_get(step, "predicted_us")));
        json_object_set_new(row, "steps", steps);
    }
    json_object_set_new(row, "error", json_null());
    return row;
}

static void sweep_variant(gpointer item, gpointer data)
{
    sweep_run *run = data;
    uint64_t v = (uint64_t)GPOINTER_TO_SIZE(item) - 1;
    GError *error = NULL;
    GPtrArray *specs = rv_sweep_plan_specs(run->plan, v);
    g_ptr_array_add(specs, NULL);  /* rv_opts_prepare's list ends so; the plan's plugins are loaded */
    GPtrArray *opts = rv_opts_prepare(run->plugins, (char *const *)specs->pdata, &error);
    g_ptr_array_set_size(specs, specs->len - 1);
    json_t *document = opts ? run_whatif(run->graph, opts, NULL, &error) : NULL;
    json_t *row = sweep_row(run, v, specs, document, error);
    run->rows[v] = json_dumps(row, JSON_COMPACT | JSON_REAL_PRECISION(15));
    json_decref(row);
    json_decref(document);
    g_clear_error(&error);
    if (opts) g_ptr_array_unref(opts);
    g_ptr_array_unref(specs);
}

/* Graph.sweep(opts, varies, jobs, steps): one JSON line per variant, in
 * variant order, as `reverie sweep --json` prints them. */
static PyObject *graph_sweep(GraphObject *self, PyObject *args)
{
    PyObject *opts_object, *varies_object;
    int jobs = 0, with_steps = 0;
    if (!PyArg_ParseTuple(args, "OOip", &opts_object, &varies_object, &jobs, &with_steps)) return NULL;
    char **opts = string_list(opts_object, "opts must be a list of 'NAME[:k=v,...]' strings");
    char **varies = opts ? string_list(varies_object, "vary must give 'NAME.PARAM=LIST' axes") : NULL;
    if (varies == NULL) {
        g_strfreev(opts);
        return NULL;
    }
    GError *error = NULL;
    GHashTable *plugins = rv_plugin_table_new();
    rv_sweep_plan *plan;
    Py_BEGIN_ALLOW_THREADS
    plan = rv_sweep_plan_new(opts, varies, NULL, plugins, &error);
    Py_END_ALLOW_THREADS
    g_strfreev(opts);
    g_strfreev(varies);
    if (plan == NULL) {
        g_hash_table_destroy(plugins);
        return raise_error(error);
    }
    if (plan->count > MAX_SWEEP_ROWS) {
        PyErr_Format(UsageError, "%llu variants: more than a sweep returns at once (%llu); `reverie sweep` writes its "
                     "rows as they come (--shard splits it)", (unsigned long long)plan->count,
                     (unsigned long long)MAX_SWEEP_ROWS);
        rv_sweep_plan_free(plan);
        g_hash_table_destroy(plugins);
        return NULL;
    }
    sweep_run run = { self->graph, plan, plugins, with_steps, g_new0(char *, plan->count) };
    Py_BEGIN_ALLOW_THREADS
    GThreadPool *pool = g_thread_pool_new(sweep_variant, &run, jobs > 0 ? jobs : (int)g_get_num_processors(), TRUE, NULL);
    for (uint64_t v = 0; v < plan->count; v++) g_thread_pool_push(pool, GSIZE_TO_POINTER((gsize)v + 1), NULL);
    g_thread_pool_free(pool, FALSE, TRUE);
    Py_END_ALLOW_THREADS
    PyObject *rows = PyList_New(0);
    for (uint64_t v = 0; v < plan->count; v++) {
        PyObject *row = rows ? text_result(run.rows[v]) : NULL;
        if (row == NULL && run.rows[v] != NULL && rows == NULL) free(run.rows[v]);
        if (rows && (row == NULL || PyList_Append(rows, row) < 0)) Py_CLEAR(rows);
        Py_XDECREF(row);
    }
    g_free(run.rows);
    rv_sweep_plan_free(plan);
    g_hash_table_destroy(plugins);
    return rows;
}

/* ---- what the graph holds ---------------------------------------------------------- */

static PyObject *graph_get_source(GraphObject *self, void *closure) { return PyUnicode_FromString(self->graph->source); }
static PyObject *graph_get_tasks(GraphObject *self, void *closure)
{
    return PyLong_FromLong(rv_graph_live_task_count(self->graph));
}
static PyObject *graph_get_edges(GraphObject *self, void *closure) { return PyLong_FromUnsignedLong(self->graph->edges->len); }
static PyObject *graph_get_ranks(GraphObject *self, void *closure)
{
    return PyLong_FromUnsignedLong(MAX(self->graph->ranks->len, 1));
}
static PyObject *graph_get_steps(GraphObject *self, void *closure) { return PyLong_FromUnsignedLong(self->graph->steps->len); }
static PyObject *graph_get_notes(GraphObject *self, void *closure) { return PySequence_List(self->notes); }

static PyGetSetDef graph_getset[] = {
    { "source", (getter)graph_get_source, NULL, "the input: its path, a folder of ranks, or the first of several", NULL },
    { "tasks", (getter)graph_get_tasks, NULL, "live tasks in the graph", NULL },
    { "edges", (getter)graph_get_edges, NULL, "dependency edges", NULL },
    { "ranks", (getter)graph_get_ranks, NULL, "ranks of the job (1 for one trace)", NULL },
    { "steps", (getter)graph_get_steps, NULL, "ProfilerStep annotations (0: the trace is one step)", NULL },
    { "notes", (getter)graph_get_notes, NULL, "what the timing model had to assume about each input", NULL },
    { NULL }
};

static PyMethodDef graph_methods[] = {
    { "simulate", (PyCFunction)(void (*)(void))graph_simulate, METH_VARARGS | METH_KEYWORDS,
      "simulate(explain=0) -> (json_text, launch_queue_ignored)" },
    { "whatif", (PyCFunction)graph_whatif, METH_VARARGS, "whatif(specs) -> (json_text, notes)" },
    { "report", (PyCFunction)graph_report, METH_VARARGS, "report('breakdown'|'critical-path', specs) -> json_text" },
    { "timeline", (PyCFunction)graph_timeline, METH_VARARGS, "timeline(specs, path)" },
    { "sweep", (PyCFunction)graph_sweep, METH_VARARGS, "sweep(opts, varies, jobs, steps) -> [json_line]" },
    { "save", (PyCFunction)graph_save, METH_VARARGS, "save(path)" },
    { NULL }
};

static PyTypeObject GraphType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "reverie._core.Graph",
    .tp_doc = "a loaded trace, saved graph or job (use reverie.load)",
    .tp_basicsize = sizeof(GraphObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)graph_dealloc,
    .tp_methods = graph_methods,
    .tp_getset = graph_getset,
};

/* ---- plugins --------------------------------------------------------------------- */

/* _core.plugins(name=None) -> ([json_text], [skipped]): every plugin found,
 * or the one named, as `reverie plugins --json` lists them. */
static PyObject *core_plugins(PyObject *module, PyObject *args)
{
    const char *only = NULL;
    if (!PyArg_ParseTuple(args, "|z", &only)) return NULL;
    GPtrArray *skipped = g_ptr_array_new_with_free_func(g_free);
    GPtrArray *plugins = NULL;
    GError *error = NULL;
    Py_BEGIN_ALLOW_THREADS
    if (only == NULL) {
        plugins = rv_plugin_discover(skipped);
    } else {
        rv_loaded_plugin *plugin = rv_plugin_load(only, &error);
        if (plugin) {
            plugins = g_ptr_array_new_with_free_func((GDestroyNotify)rv_plugin_unload);
            g_ptr_array_add(plugins, plugin);
        }
    }
    Py_END_ALLOW_THREADS
    if (plugins == NULL) {
        g_ptr_array_unref(skipped);
        return raise_error(error);
    }
    PyObject *list = PyList_New(0);
    for (guint i = 0; list && i < plugins->len; i++) {
        json_t *document = rv_plugin_document(rv_plugin_descriptor_of(g_ptr_array_index(plugins, i)));
        PyObject *text = text_result(json_dumps(document, JSON_COMPACT));
        json_decref(document);
        if (text == NULL || PyList_Append(list, text) < 0) Py_CLEAR(list);
        Py_XDECREF(text);
    }
    PyObject *skipped_list = list ? str_list(skipped) : NULL;
    g_ptr_array_unref(plugins);
    g_ptr_array_unref(skipped);
    if (skipped_list == NULL) {
        Py_XDECREF(list);
        return NULL;
    }
    return Py_BuildValue("(NN)", list, skipped_list);
}

/* ---- the module ------------------------------------------------------------------ */

static PyMethodDef core_methods[] = {
    { "load", (PyCFunction)(void (*)(void))core_load, METH_VARARGS | METH_KEYWORDS,
      "load(paths, max_bytes=0, max_events=0, read_timeout_ms=0) -> Graph" },
    { "plugins", core_plugins, METH_VARARGS, "plugins(name=None) -> ([json_text], [skipped])" },
    { NULL }
};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "reverie._core",
    .m_doc = "reverie's C extension (use the reverie package)",
    .m_size = -1,
    .m_methods = core_methods,
};

/* A new exception class reverie.NAME, added to the module. */
static PyObject *add_exception(PyObject *module, const char *name, PyObject *bases, const char *doc)
{
    char *qualified = g_strconcat("reverie.", name, NULL);
    PyObject *type = PyErr_NewExceptionWithDoc(qualified, doc, bases, NULL);
    g_free(qualified);
    if (type != NULL && PyModule_AddObjectRef(module, name, type) < 0) Py_CLEAR(type);
    return type;
}

PyMODINIT_FUNC PyInit__core(void)
{
    if (PyType_Ready(&GraphType) < 0) return NULL;
    PyObject *module = PyModule_Create(&core_module);
    if (module == NULL) return NULL;
    if (PyModule_AddObjectRef(module, "Graph", (PyObject *)&GraphType) < 0) goto failed;
    Error = add_exception(module, "Error", NULL, "A reverie error: its message is the command line's one line.");
    if (Error == NULL) goto failed;
    PyObject *usage_bases = PyTuple_Pack(2, Error, PyExc_ValueError);
    UsageError = usage_bases ? add_exception(module, "UsageError", usage_bases,
                                             "Bad usage: an unknown optimization or parameter, a value out of range "
                                             "(the command line's exit status 1).")
                             : NULL;
    Py_XDECREF(usage_bases);
    InputError = add_exception(module, "InputError", Error,
                               "Bad input: a file that is not a trace or graph, or cannot be read (exit status 2).");
    PluginError = add_exception(module, "PluginError", Error,
                                "An optimization plugin failed or found nothing to act on (exit status 3).");
    if (UsageError == NULL || InputError == NULL || PluginError == NULL) goto failed;
    return module;
failed:
    Py_DECREF(module);
    return NULL;
}
