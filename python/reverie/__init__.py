"""reverie: what-if performance simulation of deep-learning training.

Load a PyTorch profiler trace (or a saved graph, or a folder of ranks)
once, then ask it questions; the graph stays loaded between calls::

    import reverie
    g = reverie.load("traces/hta_resnet50_v100.json.gz")
    base = g.simulate()                     # the replay, step by step
    r = g.whatif("amp")                     # or a list: ["ddp:world=16", "fused-adam"]
    r.speedup, r.baseline_ms, r.predicted_ms, r.steps
    r.to_dict()                             # exactly `reverie whatif ... --json`
    rows = g.sweep(opts=["ddp:world=16"], vary={"ddp.bandwidth": ["10Gbps", "100Gbps"]})
    reverie.plugins(); r.breakdown(); r.critical_path(); r.timeline("t.json")

Every answer is the document the command line prints with --json (its
schema is in docs/commands.md), built by the same library code.  Errors
raise reverie.UsageError, reverie.InputError or reverie.PluginError, all
subclasses of reverie.Error, with the command line's one-line message.
Long calls release the GIL.  The worked example is docs/python.md.
"""

import json
import os

from . import _core
from ._core import Error, InputError, PluginError, UsageError
from ._version import __version__

__all__ = ["load", "plugins", "Graph", "Result", "Error", "UsageError", "InputError", "PluginError",
           "__version__"]


def _specs(opts):
    """A list of 'NAME[:k=v,...]' strings from one string or a sequence."""
    if opts is None:
        return []
    if isinstance(opts, str):
        return [opts]
    specs = list(opts)
    for spec in specs:
        if not isinstance(spec, str):
            raise TypeError(f"an optimization is a 'NAME[:k=v,...]' string, not {type(spec).__name__}")
    return specs


def load(path, *more, max_bytes=None, max_events=None, read_timeout=None):
    """Load a trace (.json, .json.gz), a saved graph (.rvg), or the ranks of
    one job: a folder of their traces or graphs, or several paths.

    max_bytes, max_events and read_timeout (seconds; 0 waits forever) are
    the command line's --max-bytes, --max-events and --read-timeout.
    Raises InputError for a file that is not a trace or graph."""
    paths = [os.fspath(path)] + [os.fspath(p) for p in more]
    timeout_ms = 0 if read_timeout is None else (-1 if read_timeout == 0 else max(1, int(read_timeout * 1000)))
    core = _core.load(paths, max_bytes=max_bytes or 0, max_events=max_events or 0, read_timeout_ms=timeout_ms)
    return Graph(core)


def plugins(name=None):
    """The optimizations reverie can find, as `reverie plugins --json` lists
    them: a list of {"name", "summary", "params": [{"name", "type",
    "default", "unit", "help", "choices"}...]}; with a name, that one's
    entry.  Raises UsageError for an unknown name."""
    found, _skipped = _core.plugins(name)
    entries = [json.loads(text) for text in found]
    return entries[0] if name is not None else entries


class Graph:
    """A loaded trace, saved graph or job of several ranks (reverie.load).

    It is never changed: what-ifs transform copies, so one Graph answers
    any number of questions, from several threads if you like."""

    def __init__(self, core):
        self._core = core

    source = property(lambda self: self._core.source, doc="the input's path (or folder of ranks)")
    tasks = property(lambda self: self._core.tasks, doc="live tasks (CPU calls, kernels, copies...)")
    edges = property(lambda self: self._core.edges, doc="dependency edges")
    ranks = property(lambda self: self._core.ranks, doc="ranks of the job (1 for a single trace)")
    notes = property(lambda self: self._core.notes,
                     doc="what the timing model had to assume about each input (the command line's notes)")

    def __repr__(self):
        return f"<reverie.Graph {self.source!r}: {self.tasks} tasks, {self.ranks} rank(s)>"

    def simulate(self, explain=0):
        """Replay the graph by the timing rules: `reverie simulate --json`
        (with explain=N, `--explain N`: where the unexplained time sits)."""
        text, launch_queue_ignored = self._core.simulate(explain=explain)
        notes = ["the launch-queue rule would have deadlocked this graph: replayed without it"] \
            if launch_queue_ignored else []
        return Result(self, "simulate", [], json.loads(text), notes)

    def whatif(self, opts):
        """Predict the step times after optimizations, applied in order:
        one 'NAME[:k=v,...]' string or a list (`reverie whatif --opt ...
        --json`).  Raises UsageError for an unknown optimization or
        parameter, PluginError when one fails or finds nothing to act on."""
        specs = _specs(opts)
        text, notes = self._core.whatif(specs)
        return Result(self, "whatif", specs, json.loads(text), notes)

    def sweep(self, opts=None, vary=None, jobs=0, steps=False):
        """Many what-ifs: every combination of the values in `vary`
        ({"NAME.PARAM": [values...]} or {"NAME.PARAM": "lo..hi/N"}), each
        after the fixed `opts`.  One dict per variant, in order, as
        `reverie sweep --json` prints them (variant, opts, params,
        predicted_us, baseline_us, speedup, the peaks, steps with
        steps=True, and error: None, or the message of a variant that
        failed).  jobs: variants run in parallel (0: one per core)."""
        if not vary:
            raise UsageError("nothing to sweep: give vary={'NAME.PARAM': [values...]}")
        axes = []
        for name, values in vary.items():
            if isinstance(values, str):
                text = values
            else:
                text = ",".join(str(value) for value in values)
            axes.append(f"{name}={text}")
        rows = self._core.sweep(_specs(opts), axes, int(jobs), bool(steps))
        return [json.loads(row) for row in rows]

    def save(self, path):
        """Save the graph (.rvg) so that later loads skip the trace's JSON.
        Written as the command line writes (a temporary beside the target,
        renamed over it once complete); never over a file this process
        has read (UsageError)."""
        self._core.save(os.fspath(path))


class Result:
    """One replay (Graph.simulate) or prediction (Graph.whatif).

    to_dict() is the command line's --json document; the properties read
    it.  Times are milliseconds here, microseconds (_us) in the document."""

    def __init__(self, graph, kind, specs, document, notes):
        self.graph = graph
        self.kind = kind
        self.opts = list(specs)
        self._document = document
        self.notes = list(notes)

    def __repr__(self):
        if self.kind == "whatif":
            return (f"<reverie.Result whatif {self.opts}: {self.baseline_ms:.3f} ms -> {self.predicted_ms:.3f} ms, "
                    f"{self.speedup:.3f}x>")
        return f"<reverie.Result simulate: {self.predicted_ms:.3f} ms simulated, {self.recorded_ms:.3f} ms recorded>"

    def to_dict(self):
        """The document `reverie simulate --json` or `reverie whatif --json` prints (a copy)."""
        return json.loads(json.dumps(self._document))

    @property
    def steps(self):
        """Each step, as in to_dict()["steps"]: name, recorded_us, and
        simulated_us (simulate) or baseline_us and predicted_us (whatif)."""
        return [dict(step) for step in self._document["steps"]]

    @property
    def recorded_ms(self):
        """The recorded time of all steps."""
        return self._document["recorded_us"] / 1e3

    @property
    def baseline_ms(self):
        """The replay of the graph as it is, all steps."""
        key = "baseline_us" if self.kind == "whatif" else "simulated_us"
        return self._document[key] / 1e3

    @property
    def predicted_ms(self):
        """The prediction after the optimizations (simulate: the replay), all steps."""
        key = "predicted_us" if self.kind == "whatif" else "simulated_us"
        return self._document[key] / 1e3

    @property
    def speedup(self):
        """baseline / predicted (1.0 for a replay)."""
        return self._document["speedup"] if self.kind == "whatif" else 1.0

    def breakdown(self):
        """Where each step's time went, for the recording, the replay and
        (a what-if) the prediction: `reverie breakdown [--opt ...] --json`."""
        return json.loads(self.graph._core.report("breakdown", self.opts))

    def critical_path(self):
        """The chain of tasks that decides each step's end:
        `reverie critical-path [--opt ...] --json`."""
        return json.loads(self.graph._core.report("critical-path", self.opts))

    def timeline(self, path):
        """Write the replay (and a what-if's prediction beside it) as Chrome
        trace JSON for ui.perfetto.dev, as --timeline does (.gz compresses).
        Written as save() writes."""
        self.graph._core.timeline(self.opts, os.fspath(path))

    def to_dataframe(self):
        """The steps as a pandas DataFrame (needs pandas)."""
        try:
            import pandas
        except ImportError as error:
            raise ImportError("to_dataframe() needs pandas (apt-get install python3-pandas, "
                              "or pip install pandas); steps gives the same rows as dicts") from error
        return pandas.DataFrame(self.steps)
