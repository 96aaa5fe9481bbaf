"""A real LLM judge on this machine: `transformers serve`, started and stopped for the run (`judge.serve`).

    with judges.TransformersJudgeServer("pretrained:smollm2-135m-instruct", name="smollm2") as server:
      client = judges.JudgeClient([server.url], model=server.model)

`transformers serve` is the OpenAI-compatible server that ships with transformers (the `serve` extra: `pip install
-e '.[serve]'`, or `make real`). It serves `/v1/models`, `/v1/chat/completions` and `/v1/completions` for one
model pinned at start, under the name it was given. So that the name is `judge.model` (not a path of this
machine), the model is linked as `<name>` in a directory of its own, and the server runs there.

What it serves (`judge.serve_model`):
  an HF checkpoint directory   as it is;
  a `.gguf` file               converted once with transformers' own GGUF loader into an HF directory, cached
                               beside the test and model caches (`$ARENA_JAX_CACHE`, default
                               `~/.cache/arena_jax/judges`), keyed by the file's path, size and time;
  `pretrained:<name>`          a model that a pinned wheel ships (`arena_jax.pretrained`), as its GGUF.

The server binds 127.0.0.1 at a free port (or `port`, refused at once when in use), and `start()` returns once
`GET /v1/models` lists the model, within `startup_timeout_s` (stated in the error). `stop()` ends its whole
process group (SIGTERM, then SIGKILL); the server also gets SIGTERM when this process dies (Linux's parent-death
signal), so no server outlives its run, whether the run ends, fails, is interrupted or is killed. The model's
context (`max_position_embeddings`) is noted for the judges (`client.note_context`), since `transformers serve`
does not say it.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from arena_jax import pretrained
from arena_jax.errors import ConfigError, MissingFileError, UserError
from arena_jax.judges.client import note_context

INSTALL = "pip install -e '.[serve]' (or: make real)"
# What `transformers serve` needs beyond transformers itself (its `serving` extra, pinned in setup.py's `serve`).
_SERVE_MODULES = ("transformers", "torch", "fastapi", "uvicorn", "openai")

# The one-off GGUF conversion, in a child process (transformers and torch stay out of this one):
# argv[1] = the GGUF, argv[2] = the directory to write.
# transformers will not save a model it loaded from a GGUF (it counts as quantised), so its dequantised weights go
# into a plain model of the same config, which saves as any checkpoint does.
_CONVERT = """
import os, sys
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
folder, name = os.path.split(sys.argv[1])
loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
config = loaded.config
for attr in ("quantization_config", "_pre_quantization_dtype"):
  if hasattr(config, attr):
    delattr(config, attr)
plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
plain.load_state_dict(loaded.state_dict())
plain.save_pretrained(sys.argv[2])
AutoTokenizer.from_pretrained(folder, gguf_file=name).save_pretrained(sys.argv[2])
"""


class JudgeServerError(UserError):
  """A judge server that the run starts could not be started (the message says why, in one line)."""


def cache_root() -> pathlib.Path:
  base = os.environ.get("ARENA_JAX_CACHE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "arena_jax"
  )
  return pathlib.Path(base) / "judges"


def check_installed() -> None:
  """Raises MissingFileError naming the install command when `transformers serve` cannot run here."""
  missing = [m for m in _SERVE_MODULES if importlib.util.find_spec(m) is None]
  if missing:
    raise MissingFileError(f"judge.serve = 'transformers' needs {', '.join(missing)}: run `{INSTALL}`")


def server_env() -> dict[str, str]:
  """The server child's environment. The server shares the machine with the trainer, whose XLA threads keep the
  cores busy: torch's OpenMP threads would spin at every barrier waiting for a core (GNU OpenMP's default). On two
  busy cores two real-model Arena-Live steps against this judge took 461 s so, and 94–101 s with a passive wait
  policy, which sleeps instead. A user's own OMP_WAIT_POLICY wins."""
  env = dict(os.environ, TRANSFORMERS_VERBOSITY="error", TOKENIZERS_PARALLELISM="false")
  env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
  return env


def free_port(host: str = "127.0.0.1") -> int:
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
    s.bind((host, 0))
    return s.getsockname()[1]


def check_port_free(host: str, port: int) -> None:
  """Raises JudgeServerError when `port` on `host` is taken (a server would fail to bind it, minutes later)."""
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
    try:
      s.bind((host, port))
    except OSError as e:
      raise JudgeServerError(
        f"judge.serve_port={port}: {host}:{port} is in use ({e.strerror}); choose another port or 0 (a free one)"
      ) from None


def hf_directory(model: str, *, timeout_s: float = 900.0) -> pathlib.Path:
  """The HF checkpoint directory that serves `model` (module docstring): the directory itself, or a GGUF
  converted once into the cache.

  Raises:
    MissingFileError: no such file or directory; a directory without config.json; the conversion failed.
  """
  path = pathlib.Path(os.fspath(pretrained.resolve(model))).expanduser()
  if path.is_dir():
    if not (path / "config.json").is_file():
      raise MissingFileError(f"judge.serve_model={model!r}: {path} holds no config.json (an HF checkpoint directory)")
    return path
  if not path.is_file():
    raise MissingFileError(f"judge.serve_model={model!r}: no such file or directory: {path}")
  if path.suffix != ".gguf":
    raise MissingFileError(f"judge.serve_model={model!r}: {path} is neither an HF directory nor a .gguf file")
  stat = path.stat()
  key = hashlib.sha256(f"{path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}".encode()).hexdigest()[:16]
  out = cache_root() / "converted" / f"{path.stem}-{key}"
  if (out / "config.json").is_file():
    return out
  check_installed()
  out.parent.mkdir(parents=True, exist_ok=True)
  tmp = tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.")
  try:
    done = subprocess.run(
      [sys.executable, "-c", _CONVERT, str(path), tmp],
      capture_output=True,
      text=True,
      timeout=timeout_s,
      env=dict(os.environ, TRANSFORMERS_VERBOSITY="error"),
    )
    if done.returncode != 0:
      last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
      raise MissingFileError(f"judge.serve_model={model!r}: converting {path.name} to an HF directory failed: {last}")
    with contextlib.suppress(OSError):  # another process may have converted it meanwhile: theirs stays
      os.rename(tmp, out)
  finally:
    shutil.rmtree(tmp, ignore_errors=True)
  return out


def model_context(directory: pathlib.Path) -> int | None:
  """The model's context, `max_position_embeddings` of its config.json (None when absent)."""
  try:
    n = json.loads((directory / "config.json").read_text(encoding="utf-8")).get("max_position_embeddings")
  except (OSError, ValueError):
    return None
  return int(n) if isinstance(n, int) and n > 0 else None


# The server's first process: asks Linux for SIGTERM when its parent (the run) dies (PR_SET_PDEATHSIG, kept across
# exec), then becomes `transformers serve`. A wrapper rather than Popen's preexec_fn, which would fork the
# multithreaded JAX process with Python code to run in the child.
_EXEC_DYING_WITH_PARENT = """
import ctypes, os, signal, sys
try:
  ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
except Exception:
  pass
os.execv(sys.argv[1], sys.argv[1:])
"""


class TransformersJudgeServer:
  """`transformers serve` of one model on a loopback port, for the life of a run (module docstring).

  Attributes:
    model: the served name (what a request's `model` must be: `judge.model`).
    url: the base URL once started.
    context: the model's context in tokens (None when its config does not say).
  """

  def __init__(
    self,
    source: str,
    *,
    name: str,
    host: str = "127.0.0.1",
    port: int = 0,
    startup_timeout_s: float = 600.0,
    extra_args: tuple[str, ...] = (),
  ):
    if not name or "/" in name or name.startswith("."):
      raise ConfigError(f"judge.model={name!r}: the served model's name must be a plain name (no '/')")
    self.source = source
    self.model = name
    self.host = host
    self.port = int(port)
    self.startup_timeout_s = float(startup_timeout_s)
    self.extra_args = tuple(extra_args)  # more `transformers serve` options (e.g. --continuous-batching)
    self.url: str | None = None
    self.context: int | None = None
    self._proc: subprocess.Popen | None = None
    self._workdir: tempfile.TemporaryDirectory | None = None
    self._log = None
    self._launched_at = 0.0
    self._exit: int | None = None  # the server's exit status, once stopped

  # ── start ──

  def launch(self) -> None:
    """Converts the model if needed and starts the server without waiting for it (`wait_ready`)."""
    if self._proc is not None:
      return
    check_installed()
    if self.port:
      check_port_free(self.host, self.port)
    directory = hf_directory(self.source)
    self.context = model_context(directory)
    port = self.port or free_port(self.host)
    self._workdir = tempfile.TemporaryDirectory(prefix="arena_judge_")
    os.symlink(directory.resolve(), os.path.join(self._workdir.name, self.model))
    self._log = tempfile.TemporaryFile(mode="w+b")
    command = [sys.executable, "-c", _EXEC_DYING_WITH_PARENT]
    command += [os.path.join(os.path.dirname(sys.executable), "transformers"), "serve", self.model]
    command += ["--host", self.host, "--port", str(port), "--device", "cpu", "--log-level", "warning"]
    command += list(self.extra_args)
    self._proc = subprocess.Popen(
      command,
      cwd=self._workdir.name,
      stdin=subprocess.DEVNULL,
      stdout=self._log,
      stderr=subprocess.STDOUT,
      env=server_env(),
      start_new_session=True,  # its own process group: stop() ends the server and anything it started
    )
    self.url = f"http://{self.host}:{port}"
    self._launched_at = time.monotonic()

  def wait_ready(self) -> str:
    """The base URL once `GET /v1/models` lists the model; else stops the server and raises JudgeServerError."""
    if self._proc is None:
      raise RuntimeError("the judge server was not launched: call start() or launch() first")
    deadline = self._launched_at + self.startup_timeout_s
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    while True:
      if self._proc.poll() is not None:
        why = self._last_lines()
        self.stop()
        raise JudgeServerError(f"transformers serve exited with status {self._exit}: {why}")
      try:
        with opener.open(f"{self.url}/v1/models", timeout=5) as resp:
          listed = [m.get("id") for m in json.loads(resp.read(1 << 20)).get("data", [])]
        if self.model in listed:
          if self.context:
            note_context(self.url, self.context)
          return self.url
      except (urllib.error.URLError, OSError, ValueError, AttributeError):
        pass
      if time.monotonic() > deadline:
        why = self._last_lines()
        self.stop()
        raise JudgeServerError(
          f"transformers serve of {self.source} did not list {self.model!r} at {self.url}/v1/models within "
          f"{self.startup_timeout_s:g} s (judge.serve_startup_s): {why}"
        )
      time.sleep(0.5)

  def start(self) -> str:
    self.launch()
    return self.wait_ready()

  # ── stop ──

  def stop(self) -> None:
    proc, self._proc = self._proc, None
    if proc is not None:
      if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
          os.killpg(proc.pid, signal.SIGTERM)
        try:
          proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
          with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
          proc.wait()
      self._exit = proc.returncode
    if self._workdir is not None:
      self._workdir.cleanup()
      self._workdir = None

  def _last_lines(self) -> str:
    if self._log is None:
      return "(no output)"
    try:
      self._log.seek(0)
      lines = [ln for ln in self._log.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    except (OSError, ValueError):
      return "(no output)"
    return " | ".join(lines[-3:])[-600:] or "(no output)"

  def __enter__(self) -> "TransformersJudgeServer":
    self.start()
    return self

  def __exit__(self, *exc) -> None:
    self.stop()

  def __del__(self):
    try:
      self.stop()
    except Exception:  # pylint: disable=broad-except  (interpreter shutdown)
      pass
