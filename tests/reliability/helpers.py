"""Helpers of the reliability tests: judge servers a test can kill, bounds on judge time, the
training subprocess a test can SIGKILL."""

import contextlib
import json
import os
import socket
import subprocess
import sys
import time

import pytest

from arena_jax import judges
from arena_jax.train.metrics import read_metrics
from tests import cache
from tests.train.conftest import smoke_config  # noqa: F401  (re-exported for the test files)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port() -> int:
  """A loopback port that was free a moment ago (servers here must come back on the same one)."""
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


class KillableJudge:
  """An `EmbeddedJudgeServer` child process on a fixed port that a test can SIGKILL and start again."""

  def __init__(self, port: int, **knobs):
    self.port, self.knobs = port, knobs
    self.server = None

  @property
  def url(self) -> str:
    return f"http://127.0.0.1:{self.port}"

  def start(self) -> "KillableJudge":
    self.server = judges.EmbeddedJudgeServer(port=self.port, **self.knobs)
    self.server.start()
    return self

  def kill(self) -> None:
    """SIGKILL, as a crashed or preempted judge host: no shutdown, in-flight requests are cut."""
    proc = self.server._proc  # pylint: disable=protected-access  (the test owns this child)
    proc.kill()
    proc.wait()
    self.server.stop()  # releases the pipes of the dead child

  def stats(self) -> dict:
    import urllib.request  # pylint: disable=g-import-not-at-top

    with urllib.request.urlopen(self.url + "/stats", timeout=10) as r:
      return json.loads(r.read())

  def close(self) -> None:
    if self.server is not None and self.server._proc is not None:  # pylint: disable=protected-access
      self.kill()  # not stop(): SIGTERM would wait for injected hangs to finish


@contextlib.contextmanager
def killable_judge(**knobs):
  judge = KillableJudge(free_port(), **knobs).start()
  try:
    yield judge
  finally:
    judge.close()


def fast_client(config, **client):
  """Judge client settings for tests: short timeouts, near-zero backoff (real values are minutes)."""
  c = config.judge.client
  c.timeout_s, c.connect_timeout_s = 2.0, 1.0
  c.backoff_initial_s, c.backoff_max_s = 0.01, 0.05
  c.startup_check_s = 5.0
  for k, v in client.items():
    c[k] = v
  return config


def worst_case_judge_s(config, stages: int) -> float:
  """An upper bound of one step's wait on the judge when every call runs into its limits.

  A call makes at most (max_parse_retries + 1) answers and (max_retries + 1) attempts of at most
  timeout_s, separated by a backoff or a Retry-After, and ends at its deadline (`client.deadline_s`)
  whatever comes first; the live tournament of G has G − 1 sequential stages (one per arrival after the
  first), and groups run concurrently.
  """
  c = config.judge.client
  wait = max(c.backoff_max_s, config.judge.server.retry_after_s)
  per_call = (c.max_parse_retries + 1) * ((c.max_retries + 1) * c.timeout_s + c.max_retries * wait)
  return stages * min(per_call, c.deadline_s)


def read_rows(workdir) -> list[dict]:
  """metrics.jsonl rows, skipping a last line torn by a SIGKILL mid-write."""
  return read_metrics(str(workdir))


# ───────────────────────── the trainer as a subprocess (launch/train.py) ─────────────────────────


def subprocess_env() -> dict:
  """The test environment plus the shared persistent compilation cache (a cold compile costs ~10 s)."""
  return dict(
    os.environ,
    JAX_PLATFORMS="cpu",
    PYTHONUNBUFFERED="1",
    **cache.jax_env(),
  )


def launch_train(workdir, data_dir, *flags, log=None) -> subprocess.Popen:
  """`python -m launch.train` on the arena_live smoke config (its embedded judge) in `workdir`."""
  cmd = [
    sys.executable,
    "-m",
    "launch.train",
    "--config=configs/arith_arena_live.py:smoke",
    f"--workdir={workdir}",
    f"--config.tasks.data_dir={data_dir}",
    *flags,
  ]
  return subprocess.Popen(
    cmd,
    cwd=ROOT,
    env=subprocess_env(),
    stdout=log or subprocess.DEVNULL,
    stderr=subprocess.STDOUT,
    stdin=subprocess.DEVNULL,
  )


def wait_for_rows(proc: subprocess.Popen, workdir, count: int, limit_s: float = 120.0) -> int:
  """Polls metrics.jsonl until it has `count` rows (returns how many it has), or the process ended."""
  deadline = time.monotonic() + limit_s
  while time.monotonic() < deadline:
    n = len(read_rows(workdir))
    if n >= count or proc.poll() is not None:
      return n
    time.sleep(0.02)
  proc.kill()
  pytest.fail(f"training in {workdir} wrote {len(read_rows(workdir))} metric rows in {limit_s} s, expected {count}")


def send(proc: subprocess.Popen, sig: int) -> None:
  with contextlib.suppress(ProcessLookupError):
    os.kill(proc.pid, sig)


# ───────────────────── an embedded judge on its own thread (for monkeypatched judging) ─────────────────────


@contextlib.contextmanager
def judge_in_thread(**knobs):
  """The embedded judge app on an event loop of its own thread, in this process (so a test can patch its
  judging); yields its URL. Requests from the test thread do not share the server's loop."""
  import asyncio  # pylint: disable=g-import-not-at-top
  import queue  # pylint: disable=g-import-not-at-top
  import threading  # pylint: disable=g-import-not-at-top

  from arena_jax.judges import embedded  # pylint: disable=g-import-not-at-top
  from arena_jax.judges.embedded import server  # pylint: disable=g-import-not-at-top

  ready, loop = queue.Queue(), asyncio.new_event_loop()
  stop = asyncio.Event()

  async def main():
    runner, url = await server.start(embedded.merged_config(None, knobs), shutdown_timeout=0.1)
    ready.put(url)
    try:
      await stop.wait()
    finally:
      await runner.cleanup()

  thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
  thread.start()
  url = ready.get(timeout=30)
  try:
    yield url
  finally:
    loop.call_soon_threadsafe(stop.set)
    thread.join(timeout=30)
    loop.close()


@contextlib.asynccontextmanager
async def serve_routes(*routes):
  """A bare aiohttp app with `routes` (aiohttp `web.get(...)` / `web.post(...)`) on a free loopback port, on
  the running loop; yields its URL (a judge that answers whatever a test makes it answer)."""
  from aiohttp import web  # pylint: disable=g-import-not-at-top

  app = web.Application()
  app.add_routes(routes)
  runner = web.AppRunner(app)
  await runner.setup()
  await web.TCPSite(runner, "127.0.0.1", 0).start()
  host, port = runner.addresses[0][:2]
  try:
    yield f"http://{host}:{port}"
  finally:
    await runner.cleanup()
