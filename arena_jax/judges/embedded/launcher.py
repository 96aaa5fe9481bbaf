"""Starting the embedded judge from Python: in a child process, or on the running event loop.

    with judges.EmbeddedJudgeServer(latency_ms=100) as server:      # a child process, free loopback port
      client = judges.JudgeClient([server.url], model=server.model)

    async with judges.serve_in_process(noise=0.5) as url:            # this event loop (notebooks, tests)
      ...

Both take a `server_config()` and keyword overrides of its knobs, checked before anything starts. The
child process is not a second command line: it runs `serve_child` through `python -c` with the knobs
as JSON, and prints the server's ready line, from which the handle reads the URL. The command line
for a judge server of one's own is `python -m launch.serve_judge`.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from typing import AsyncIterator

import ml_collections

from arena_jax.judges import config as config_lib
from arena_jax.judges.embedded import server

# What the child process runs: argv[1] = the knobs as JSON, argv[2] = the pid of its parent.
_CHILD = (
  "import sys; from arena_jax.judges.embedded import launcher; launcher.serve_child(sys.argv[1], int(sys.argv[2]))"
)


def merged_config(config: ml_collections.ConfigDict | dict | None, overrides: dict) -> ml_collections.ConfigDict:
  """`server_config()` updated by `config` (a server ConfigDict or dict) and keyword overrides, validated."""
  cfg = config_lib.server_config()
  if config is not None:
    cfg.update(config.to_dict() if hasattr(config, "to_dict") else dict(config))
  for key, value in overrides.items():
    if key not in cfg:
      raise ValueError(f"unknown judge server knob {key!r}; knobs: {sorted(cfg.keys())}")
    cfg[key] = value
  return config_lib.validate_server_config(cfg)


def serve_child(knobs_json: str, parent_pid: int) -> None:
  """The child process of `EmbeddedJudgeServer`: serves the knobs (JSON of a server config) until it is
  stopped or process `parent_pid` ends."""
  knobs = {k: tuple(v) if isinstance(v, list) else v for k, v in json.loads(knobs_json).items()}  # JSON has no tuples
  server.run_server(merged_config(None, knobs), parent_pid=parent_pid)


@contextlib.asynccontextmanager
async def serve_in_process(config: ml_collections.ConfigDict | None = None, **overrides) -> AsyncIterator[str]:
  """The embedded judge on the running event loop (no child process: notebooks, tests); yields its URL.

  Same knobs as `EmbeddedJudgeServer`. Handlers still running at exit (injected hangs) are cancelled.
  """
  runner, url = await server.start(merged_config(config, overrides), shutdown_timeout=0.1)
  try:
    yield url
  finally:
    await runner.cleanup()


class EmbeddedJudgeServer:
  """Starts the embedded judge in a child process on a free loopback port; `stop()` ends it.

      with judges.EmbeddedJudgeServer(latency_ms=100) as server:
        client = judges.JudgeClient([server.url], model=server.model)

  `config` is a `server_config()` (e.g. `judge.server`); keyword arguments override its knobs.
  """

  def __init__(self, config: ml_collections.ConfigDict | None = None, *, startup_timeout_s: float = 60.0, **overrides):
    self.config = merged_config(config, overrides)
    self.startup_timeout_s = startup_timeout_s
    self.url: str | None = None
    self._proc: subprocess.Popen | None = None
    self._stderr = None
    self._lines: queue.Queue | None = None
    self._launched_at = 0.0

  @property
  def model(self) -> str:
    return self.config.model

  @property
  def base_url(self) -> str:
    """The OpenAI-style base URL (`…/v1`)."""
    return f"{self.url}/v1"

  def launch(self) -> None:
    """Starts the child process without waiting for it (its imports overlap the caller's set-up work);
    `wait_ready()` returns its URL. `start()` does both."""
    if self._proc is not None:
      return
    self._stderr = tempfile.TemporaryFile(mode="w+b")
    knobs = json.dumps(self.config.to_dict())
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    # Our pid: the child stops by itself if this process dies without stopping it (SIGKILL).
    self._proc = subprocess.Popen(
      [sys.executable, "-c", _CHILD, knobs, str(os.getpid())],
      stdout=subprocess.PIPE,
      stderr=self._stderr,
      stdin=subprocess.DEVNULL,
      env=env,
    )
    self._lines = queue.Queue()
    self._launched_at = time.monotonic()

    def pump(stream, lines):  # keeps the pipe drained for the whole life of the child
      for raw in iter(stream.readline, b""):
        lines.put(raw.decode("utf-8", "replace"))
      lines.put(None)

    threading.Thread(target=pump, args=(self._proc.stdout, self._lines), daemon=True).start()

  def wait_ready(self) -> str:
    """The URL of the launched child once it serves (`startup_timeout_s` from `launch()`)."""
    if self.url is not None:
      return self.url
    if self._proc is None:
      raise RuntimeError("the embedded judge server was not launched: call start() or launch() first")
    deadline = self._launched_at + self.startup_timeout_s
    while True:
      try:
        line = self._lines.get(timeout=max(deadline - time.monotonic(), 0.01))
      except queue.Empty:
        line = None
      m = server.READY_PATTERN.search(line or "")
      if m:
        self.url = m.group(1)
        return self.url
      if line is None or time.monotonic() > deadline:
        if self._proc.poll() is None:
          self._proc.kill()
        self._proc.wait()
        why = self._read_stderr()[-2000:]  # before stop(), which closes the file that holds the reason
        self.stop()
        raise RuntimeError(f"the embedded judge server did not start: {why}")

  def start(self) -> str:
    self.launch()
    return self.wait_ready()

  def _read_stderr(self) -> str:
    if self._stderr is None:
      return ""
    try:
      self._stderr.seek(0)
      return self._stderr.read().decode("utf-8", "replace")
    except (OSError, ValueError):
      return ""

  def stop(self) -> None:
    proc, self._proc = self._proc, None
    if proc is not None and proc.poll() is None:
      proc.terminate()
      try:
        proc.wait(timeout=10)
      except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc is not None and proc.stdout is not None:
      proc.stdout.close()
    if self._stderr is not None:
      self._stderr.close()
      self._stderr = None

  def __enter__(self) -> "EmbeddedJudgeServer":
    self.start()
    return self

  def __exit__(self, *exc) -> None:
    self.stop()

  def __del__(self):
    try:
      self.stop()
    except Exception:  # pylint: disable=broad-except  (interpreter shutdown)
      pass
