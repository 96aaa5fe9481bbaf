"""Test-wide JAX set-up, before JAX starts: CPU backend, `$ARENA_JAX_TEST_DEVICES` fake CPU devices (default 8,
what the mesh tests need), and a persistent compilation cache that the xdist workers share so a program compiled
once is reused across test files.

The devices: a trainer's default mesh fills every device (fsdp = −1), and on 2 cores a run sharded 8 ways compiles
and runs about twice as slowly as on one device (test_modes + test_resume, cold: 135 s on 8, 75 s on 1). So
`make test` runs the suite in two processes: the tests marked `mesh` with 8 devices, the rest with 1. A plain
`pytest` runs everything on 8; a mesh test in a process with fewer devices is skipped and says so.

The caches live outside the clone, in `$ARENA_JAX_TEST_CACHE` (default `~/.cache/arena_jax/tests`), as pip's
wheels do: a second clone on the same machine reuses them. Both are keyed by what they are a function of
(XLA's key: the program, the jax version and flags; the testbed's SFT policy: `tests.cache.source_key`), so a
change recompiles or retrains. `make clean-test-cache` empties them."""

import json
import os
import time

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# The suite's two workers keep both cores busy, so an OpenMP thread (torch, in the parity tests and in every
# `transformers serve` child) that spins at a barrier waits for a core the other worker holds: the real-model judge
# test took 461 s so against 94–101 s with a passive wait (arena_jax.judges.transformers_server.server_env).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
MESH_DEVICES = 8  # what the tests marked `mesh` need
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
  _devices = int(os.environ.get("ARENA_JAX_TEST_DEVICES", MESH_DEVICES))
  os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={_devices}"
  ).strip()

from tests import cache  # noqa: E402

# The suite's programs are small and many: compiled for speed of compiling (`cache.FAST_COMPILE_FLAGS`: XLA's -O0,
# the older CPU emitters, LLVM's cheap passes), they compile in less than half the time and still run in
# milliseconds (a child that computes for minutes takes `cache.optimized_env()`). Results agree to float32
# round-off, as between any two compilers (a 3-step smoke run at -O0: one metric 1 ulp apart, the rest bit-equal).
os.environ["XLA_FLAGS"] = cache.add_fast_compile_flags(os.environ["XLA_FLAGS"])

import jax  # noqa: E402  (after the environment is set)

# The tokenizers that random-init runs train on the task corpus, shared by the workers and their subprocesses.
os.environ.setdefault(cache.TOKENIZER_ENV, str(cache.tokenizer_dir()))

_CACHE = cache.jax_dir()
jax.config.update("jax_compilation_cache_dir", str(_CACHE))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)

from tests import suite_report  # noqa: E402

suite_report.count_compiles()


# ── the order of the tests: longest first ──
# xdist (`--dist worksteal`) splits the collection between the two workers in order, and a worker that runs out takes
# half of the other's remainder; a long test left for last ends the run on one worker while the other idles. The
# controller records each file's time in the cache at the end of a run, and the next run starts with the longest;
# before any record, the tests marked heavy (or slow) go first.
# One record per device count: `make test`'s two processes run different tests of a file.
_DURATIONS = cache.root() / f"file_durations_{jax.device_count()}dev.json"
_file_seconds: dict[str, float] = {}


def _file(nodeid: str) -> str:
  return nodeid.split("::")[0]


def pytest_collection_modifyitems(config, items):
  if jax.device_count() < MESH_DEVICES:
    skip = pytest.mark.skip(
      reason=f"needs {MESH_DEVICES} (fake) devices, this process has {jax.device_count()} "
      f"(ARENA_JAX_TEST_DEVICES; make test runs the mesh tests with {MESH_DEVICES})"
    )
    for item in items:
      if item.get_closest_marker("mesh"):
        item.add_marker(skip)
  try:
    recorded = json.loads(_DURATIONS.read_text(encoding="utf-8"))
  except (OSError, ValueError):
    recorded = {}
  rank: dict[str, int] = {}
  for item in items:
    rank[_file(item.nodeid)] = min(rank.get(_file(item.nodeid), 2), _rank(item))
  # Every worker sorts the same collection by the same record, so they agree on the order (xdist checks it).
  items.sort(key=lambda item: (-float(recorded.get(_file(item.nodeid), 0.0)), rank[_file(item.nodeid)]))


def _rank(item) -> int:
  """Without a record: 0, a test allowed past the suite-wide timeout (the testbed's SFT training); 1, a test
  marked slow or heavy; 2, the rest."""
  timeout = item.get_closest_marker("timeout")
  if timeout is not None and timeout.args and timeout.args[0] > 900:
    return 0
  return 1 if item.get_closest_marker("slow") or item.get_closest_marker("heavy") else 2


def pytest_runtest_logreport(report):
  _file_seconds[_file(report.nodeid)] = _file_seconds.get(_file(report.nodeid), 0.0) + report.duration


# ── the run's report: the slowest files, the compiles, the peak memory (tests/suite_report.py) ──
_worker_compiles: list[dict] = []
_started = time.monotonic()
_peak = suite_report.PeakMemory()


def pytest_configure(config):
  if not hasattr(config, "workerinput"):
    _peak.start()


def pytest_testnodedown(node, error):
  del error
  _worker_compiles.append(getattr(node, "workeroutput", {}).get("arena_compiles", {}))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
  del exitstatus
  if hasattr(config, "workerinput") or config.option.collectonly:
    return
  compiles = _worker_compiles or [suite_report.compiles]  # -n 0: the tests ran in this process
  peak, wall = _peak.stop(), time.monotonic() - _started
  terminalreporter.section("where the time went (tests/suite_report.py)")
  for line in suite_report.summary_lines(_file_seconds, compiles, peak, wall):
    terminalreporter.write_line(line)
  record = suite_report.record_path(cache.root(), f"{jax.device_count()}dev")
  try:
    suite_report.write_record(record, _file_seconds, compiles, peak, wall)
  except OSError:
    pass  # a read-only cache: only `make test`'s merged report is lost


def pytest_sessionfinish(session, exitstatus):
  if hasattr(session.config, "workerinput"):
    session.config.workeroutput["arena_compiles"] = dict(suite_report.compiles)
  if hasattr(session.config, "workerinput") or not _file_seconds:
    return  # a worker: the controller, which sees every report, writes the record
  try:
    recorded = json.loads(_DURATIONS.read_text(encoding="utf-8"))
  except (OSError, ValueError):
    recorded = {}
  recorded.update({f: round(t, 1) for f, t in _file_seconds.items()})
  try:
    _DURATIONS.parent.mkdir(parents=True, exist_ok=True)
    # Atomic: the workers of a run starting meanwhile must all read the same record (or xdist stops them).
    tmp = _DURATIONS.with_name(f"{_DURATIONS.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(recorded, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, _DURATIONS)
  except OSError:
    pass  # a read-only cache only loses the ordering


# ── launch commands, as a user types them ──


@pytest.fixture(scope="session")
def launch_server():
  """One server per worker of `python -m` children that imported JAX and the package once (tests/forkserver.py): a
  command's imports cost about 3 s of CPU, most of what a test of a launch main's flags and errors spends. The
  children run with JAX_PLATFORMS=cpu unless a request's `env` says otherwise."""
  import pathlib  # pylint: disable=g-import-not-at-top

  from tests.forkserver import LAUNCH_PRELOAD, ForkServer  # pylint: disable=g-import-not-at-top

  root = pathlib.Path(__file__).resolve().parent.parent
  with ForkServer(LAUNCH_PRELOAD, cwd=root, env={**os.environ, "JAX_PLATFORMS": "cpu"}) as server:
    yield server


@pytest.fixture(scope="session")
def python_m(launch_server, tmp_path_factory):
  """`python_m(module, *args, cwd=the clone, env=None, timeout=300)`: `python -m module args…` in a process of its
  own (its argv, cwd, environment and streams), a child of `launch_server`. Returns the CompletedProcess; a command
  still running after `timeout` seconds is killed and fails the test."""
  import itertools  # pylint: disable=g-import-not-at-top
  import pathlib  # pylint: disable=g-import-not-at-top

  root = pathlib.Path(__file__).resolve().parent.parent
  base = tmp_path_factory.mktemp("python_m")
  count = itertools.count()

  def run(module, *args, cwd=root, env=None, timeout=300.0):
    proc = launch_server.run([module, *args], cwd=cwd, workdir=base / str(next(count)), timeout=timeout, env=env)
    if proc.returncode is None:
      pytest.fail(f"python -m {module} {' '.join(args)} did not end within {timeout} s:\n{proc.stderr[-3000:]}")
    return proc

  return run


# ── the real model ──


@pytest.fixture(scope="session")
def real_gguf() -> str:
  """The path of the real model's GGUF (SmolLM2-135M-Instruct, `pretrained.smollm2_gguf`). Without its wheel
  the test is skipped, saying how to install it; on CI (`$CI` set) it fails instead, so a CI that lost the wheel
  does not pass by skipping."""
  from arena_jax.errors import MissingFileError  # pylint: disable=g-import-not-at-top
  from arena_jax import pretrained  # pylint: disable=g-import-not-at-top

  try:
    return pretrained.smollm2_gguf()
  except MissingFileError as e:
    if os.environ.get("CI"):
      pytest.fail(f"{e} (the real model is required on CI)", pytrace=False)
    pytest.skip(str(e))


@pytest.fixture
def one_real_model_run():
  """`cache.real_model_lock` for one test."""
  with cache.real_model_lock():
    yield


# ── one embedded judge server per worker ──
# A trainer whose config names no judge URL launches the embedded judge in a child process (seconds of imports) and
# stops it at the end of the run. In the suite, runs whose server knobs are the same share one server per worker for
# the session instead. Only knobs that draw nothing from the server's random stream qualify: its verdicts are keyed by
# (server seed, request seed, prompt), so a shared server answers each run as a fresh one would; a server with
# latency or injected faults draws from one stream across its requests and stays each run's own.
_STREAM_KNOBS = ("disconnect_rate", "error_rate", "hang_rate", "bad_body_rate", "malformed_rate", "hostile_rate")


def _shareable(server) -> bool:
  return not server.latency_ms and not any(server.get(k) for k in _STREAM_KNOBS)


@pytest.fixture(scope="session", autouse=True)
def shared_judge_servers():
  """`judges.launched_judge_endpoints` for the session: one running server per (knobs, model), stopped at the end."""
  import contextlib  # pylint: disable=g-import-not-at-top

  from arena_jax import judges  # pylint: disable=g-import-not-at-top
  from arena_jax.judges import backends  # pylint: disable=g-import-not-at-top

  launched = backends.launched_judge_endpoints
  servers: dict[str, judges.EmbeddedJudgeServer] = {}

  @contextlib.contextmanager
  def shared(config):
    own = (
      config.urls
      or (config.backend == "jury" and config.jury.jurors)
      or config.get("serve", "embedded") != "embedded"  # a real LLM judge (`transformers serve`) is its own
      or not _shareable(config.server)
    )
    if own:
      with launched(config) as urls:
        yield urls
      return
    key = json.dumps([config.server.to_dict(), config.model], sort_keys=True, default=str)
    if key not in servers:
      servers[key] = judges.EmbeddedJudgeServer(config.server, model=config.model)
      servers[key].launch()
    yield lambda: (servers[key].wait_ready(),)

  with pytest.MonkeyPatch.context() as m:
    m.setattr(backends, "launched_judge_endpoints", shared)
    m.setattr(judges, "launched_judge_endpoints", shared)
    try:
      yield servers
    finally:
      for server in servers.values():
        server.stop()
