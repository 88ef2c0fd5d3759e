"""The Python package against the command line: every answer must be the
document `reverie ... --json` prints for the same question, and every
error the same one line, as the matching exception.

Run by `meson test -C build` (suite python) with PYTHONPATH at the build
folder's python/, REVERIE_BIN the command line and REVERIE_SOURCE the
source tree."""

import json
import os
import subprocess
import threading

import pytest

import reverie

SOURCE = os.environ.get("REVERIE_SOURCE", os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("REVERIE_BIN", os.path.join(SOURCE, "build", "reverie"))
RESNET = os.path.join(SOURCE, "traces", "hta_resnet50_v100.json.gz")
DDP = os.path.join(SOURCE, "traces", "hta_transformer_ddp_v100_rank1.2steps.json.gz")
RANKS = os.path.join(SOURCE, "traces", "param_dlrm_v100_8ranks")
BAD = os.path.join(SOURCE, "tests", "data", "bad")


def cli(*args, check=True):
    """The command line's stdout parsed as JSON (or the completed process)."""
    done = subprocess.run([BIN, *args], capture_output=True, text=True)
    if not check:
        return done
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def cli_lines(*args):
    done = subprocess.run([BIN, *args], capture_output=True, text=True)
    return [json.loads(line) for line in done.stdout.splitlines()]


def cli_error(*args):
    """The command line's one error line without its 'reverie: ' prefix, and its exit status."""
    done = cli(*args, check=False)
    lines = [line for line in done.stderr.splitlines() if not line.startswith("reverie: note:")]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("reverie: ")
    return lines[0][len("reverie: "):], done.returncode


@pytest.fixture(scope="module")
def resnet():
    return reverie.load(RESNET)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """The ResNet trace saved by the command line, which reads it 20 times
    faster than the trace: the command line's side of the comparisons.  A
    saved graph answers exactly as its trace does (cli_store checks it)."""
    path = str(tmp_path_factory.mktemp("saved") / "resnet.rvg")
    subprocess.run([BIN, "import", RESNET, "-o", path], check=True, capture_output=True)
    return path


@pytest.fixture(scope="module")
def job():
    return reverie.load(RANKS)


# ---- load ---------------------------------------------------------------------------

def test_load_a_trace(resnet, saved):
    info = cli("info", saved, "--json")
    assert resnet.source == RESNET
    assert resnet.tasks == info["tasks"]
    assert resnet.ranks == 1
    assert "reverie.Graph" in repr(resnet)


def test_load_a_saved_graph_answers_as_the_trace(resnet, tmp_path):
    saved = tmp_path / "resnet.rvg"
    resnet.save(saved)
    assert not [name for name in os.listdir(tmp_path) if name != "resnet.rvg"], "a temporary file was left"
    again = reverie.load(saved)
    assert again.tasks == resnet.tasks
    assert again.whatif("amp").to_dict()["predicted_us"] == resnet.whatif("amp").to_dict()["predicted_us"]


def test_save_refuses_to_replace_the_input(saved):
    graph = reverie.load(saved)
    with open(saved, "rb") as file:
        before = file.read()
    with pytest.raises(reverie.UsageError, match="is an input"):
        graph.save(saved)
    with pytest.raises(reverie.UsageError, match="is an input"):
        graph.simulate().timeline(saved)
    with open(saved, "rb") as file:
        assert file.read() == before


# ---- simulate -------------------------------------------------------------------------

def test_simulate_is_the_command_lines_json(resnet, saved):
    result = resnet.simulate()
    assert result.to_dict() == cli("simulate", saved, "--json")
    assert result.kind == "simulate"
    assert result.speedup == 1.0
    assert result.predicted_ms == pytest.approx(sum(s["simulated_us"] for s in result.steps) / 1e3)
    assert len(result.steps) == len(cli("simulate", saved, "--json")["steps"])


def test_simulate_explain(resnet, saved):
    assert resnet.simulate(explain=3).to_dict() == cli("simulate", saved, "--json", "--explain", "3")
    with pytest.raises(reverie.UsageError):
        resnet.simulate(explain=-1)


# ---- whatif ---------------------------------------------------------------------------

def test_whatif_amp_matches_the_command_line(resnet, saved):
    expected = cli("whatif", saved, "--opt", "amp", "--json")
    result = resnet.whatif("amp")
    assert result.to_dict() == expected
    assert result.speedup == pytest.approx(expected["speedup"], rel=1e-3)
    assert result.baseline_ms == expected["baseline_us"] / 1e3
    assert result.predicted_ms == expected["predicted_us"] / 1e3
    assert [s["predicted_us"] for s in result.steps] == [s["predicted_us"] for s in expected["steps"]]
    assert result.speedup > 1.5, "mixed precision on a V100 ResNet-50 should pay"


def test_whatif_a_list_applies_in_order(resnet, saved):
    specs = ["amp", "fused-adam"]
    expected = cli("whatif", saved, "--opt", specs[0], "--opt", specs[1], "--json")
    result = resnet.whatif(specs)
    assert result.to_dict() == expected
    assert [o["name"] for o in result.to_dict()["optimizations"]] == specs


def test_the_graph_stays_as_loaded(resnet):
    first = resnet.simulate().to_dict()
    resnet.whatif("scale:select=kind=kernel,factor=0.5")
    assert resnet.simulate().to_dict() == first


def test_breakdown_and_critical_path(resnet, saved):
    result = resnet.whatif("amp")
    assert result.breakdown() == cli("breakdown", saved, "--opt", "amp", "--json")
    assert result.critical_path() == cli("critical-path", saved, "--opt", "amp", "--json")
    runs = [run["run"] for run in resnet.simulate().breakdown()["runs"]]
    assert runs == ["recorded", "baseline"]


def test_timeline_is_written_whole(resnet, tmp_path):
    path = tmp_path / "amp.json"
    resnet.whatif("amp").timeline(path)
    timeline = json.loads(path.read_text())
    runs = {event["args"]["name"] for event in timeline["traceEvents"]
            if event.get("ph") == "M" and event.get("name") == "process_name"}
    assert any("baseline" in name for name in runs) and any("predicted" in name for name in runs)
    assert os.listdir(tmp_path) == ["amp.json"]


def test_concurrent_whatifs_agree(resnet):
    """Long calls release the GIL and a Graph is only read: threads give the
    answers one thread gives."""
    expected = resnet.whatif("amp").to_dict()
    results = [None] * 4

    def run(i):
        results[i] = resnet.whatif("amp").to_dict()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [expected] * 4


def test_to_dataframe(resnet):
    pandas = pytest.importorskip("pandas")
    frame = resnet.whatif("amp").to_dataframe()
    assert isinstance(frame, pandas.DataFrame)
    assert list(frame["predicted_us"]) == [s["predicted_us"] for s in resnet.whatif("amp").steps]


# ---- sweep ----------------------------------------------------------------------------

def test_sweep_rows_are_the_command_lines(resnet, saved):
    rows = resnet.sweep(opts=["scale:select=kind=kernel"], vary={"scale.factor": [0.5, 1.0]})
    expected = cli_lines("sweep", saved, "--opt", "scale:select=kind=kernel", "--vary", "scale.factor=0.5,1.0",
                         "--jsonl")
    for row in expected:  # the command line names the file it was given, the package the graph's source
        assert row["source"] == saved
        row["source"] = resnet.source
    assert rows == expected
    assert rows[0]["speedup"] > 1.5 and rows[1]["speedup"] == pytest.approx(1.0)


def test_sweep_of_a_data_parallel_job_with_steps():
    graph = reverie.load(DDP)
    rows = graph.sweep(opts=["ddp:world=16"], vary={"ddp.bandwidth": "10Gbps..100Gbps/3"}, steps=True, jobs=2)
    expected = cli_lines("sweep", DDP, "--opt", "ddp:world=16", "--vary", "ddp.bandwidth=10Gbps..100Gbps/3",
                         "--jsonl", "--steps")
    assert rows == expected
    assert [row["variant"] for row in rows] == [0, 1, 2]
    assert rows[0]["predicted_us"] >= rows[2]["predicted_us"], "a faster network is never slower"


def test_a_sweep_too_large_to_hold_is_refused(resnet):
    with pytest.raises(reverie.UsageError, match="reverie sweep"):
        resnet.sweep(vary={"scale.factor": "0.5..1/1001", "network.bandwidth_factor": "0.1..10/1000"})


def test_a_failed_variant_is_a_row_with_its_error(resnet):
    rows = resnet.sweep(vary={"scale.factor": [0.5, -1]})
    assert rows[0]["error"] is None
    assert "factor" in rows[1]["error"] and "predicted_us" not in rows[1]


# ---- errors ---------------------------------------------------------------------------

def test_unknown_optimization_is_a_usage_error_with_the_cli_message(resnet, saved):
    message, status = cli_error("whatif", saved, "--opt", "fused_adam")
    assert status == 1
    with pytest.raises(reverie.UsageError) as raised:
        resnet.whatif("fused_adam")
    assert str(raised.value) == message
    assert isinstance(raised.value, reverie.Error) and isinstance(raised.value, ValueError)


def test_bad_parameter_is_a_usage_error(resnet, saved):
    message, _ = cli_error("whatif", saved, "--opt", "amp:nonsense=1")
    with pytest.raises(reverie.UsageError) as raised:
        resnet.whatif("amp:nonsense=1")
    assert str(raised.value) == message


def test_a_plugin_that_finds_nothing_is_a_plugin_error(resnet, saved):
    message, status = cli_error("whatif", saved, "--opt", "scale:select=name=zzz_no_such_kernel")
    assert status == 3
    with pytest.raises(reverie.PluginError) as raised:
        resnet.whatif("scale:select=name=zzz_no_such_kernel")
    assert str(raised.value) == message


@pytest.mark.parametrize("name", ["empty.json", "dur_nan.json", "event_string.json"])
def test_bad_input_is_an_input_error_with_the_cli_message(name):
    path = os.path.join(BAD, name)
    message, status = cli_error("simulate", path)
    assert status == 2
    with pytest.raises(reverie.InputError) as raised:
        reverie.load(path)
    assert str(raised.value) == message


def test_missing_file_and_type_errors(resnet):
    with pytest.raises(reverie.InputError, match="No such file"):
        reverie.load(os.path.join(SOURCE, "no-such-trace.json"))
    with pytest.raises(TypeError):
        resnet.whatif([42])


# ---- several ranks ----------------------------------------------------------------------

def test_a_folder_of_ranks_replays_as_one_job(job):
    assert job.ranks == 8
    document = job.simulate().to_dict()
    assert document == cli("simulate", RANKS, "--json")
    assert len(document["ranks"]) == 8


def test_a_whatif_on_a_job(job):
    spec = "straggler:rank=3,factor=1.5"
    result = job.whatif(spec)
    assert result.to_dict() == cli("whatif", RANKS, "--opt", spec, "--json")
    assert result.speedup < 1.0, "a slower rank slows the job"


def test_ranks_given_as_files():
    files = sorted(os.path.join(RANKS, name) for name in os.listdir(RANKS))[:2]
    with pytest.raises(reverie.InputError) as raised:
        reverie.load(*files)
    message, _ = cli_error("simulate", *files)
    assert str(raised.value) == message


# ---- plugins ----------------------------------------------------------------------------

def test_plugins_are_the_command_lines():
    assert reverie.plugins() == cli("plugins", "--json")
    ddp = reverie.plugins("ddp")
    assert ddp["name"] == "ddp" and any(p["name"] == "bandwidth" for p in ddp["params"])
    with pytest.raises(reverie.UsageError):
        reverie.plugins("no-such-plugin")


def test_version():
    assert reverie.__version__ in subprocess.run([BIN, "--version"], capture_output=True, text=True).stdout


# ---- the worked example of docs/python.md ----------------------------------------------

def test_the_python_page_examples_run_as_shown(tmp_path, monkeypatch):
    """docs/python.md's ```python blocks, run with doctest from a folder
    that holds the traces and a build/ for the timeline."""
    import doctest
    import re
    os.symlink(os.path.join(SOURCE, "traces"), tmp_path / "traces")
    (tmp_path / "build").mkdir()
    monkeypatch.chdir(tmp_path)
    page = os.path.join(SOURCE, "docs", "python.md")
    blocks = re.findall(r"^```python\n(.*?)^```", open(page, encoding="utf-8").read(), re.M | re.S)
    test = doctest.DocTestParser().get_doctest("\n".join(blocks), {}, "docs/python.md", page, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    failed, attempted = runner.summarize(verbose=False)
    assert attempted > 10 and failed == 0, f"{failed} of {attempted} examples of docs/python.md disagree (see above)"
    assert (tmp_path / "build" / "amp-timeline.json").stat().st_size > 0


def test_long_calls_release_the_gil():
    """While a trace loads in one thread, another keeps running Python: the
    longest pause of its loop is a small part of the load (holding the GIL,
    the load would pause it for all of its duration)."""
    import time
    done = threading.Event()
    loaded = []

    def load():
        loaded.append(reverie.load(RESNET))
        done.set()

    thread = threading.Thread(target=load)
    started = last = time.monotonic()
    longest = 0.0
    thread.start()
    while not done.is_set():
        now = time.monotonic()
        longest = max(longest, now - last)
        last = now
    thread.join()
    took = time.monotonic() - started
    assert loaded and loaded[0].tasks > 0
    assert longest < 0.5 * took, f"the other thread paused {longest:.3f} s of the load's {took:.3f} s"
