"""One untrusted Python program run in a sandboxed subprocess, under resource limits (the code task's verifier).

    run_program(source, stdin, limits=Limits(), files=None)   RunResult(returncode, stdout, stderr, ..., limit_hit)
    detect_backend()                                          "bwrap", "unshare" or "rlimits" (env ARENA_JAX_SANDBOX)
    available_backends(), unavailable_reason(backend)          what works here, and why not
    pids_cgroup_available()                                    whether max_processes is a hard limit here

The program is written to `main.py` in a fresh private work dir (`tempfile.mkdtemp`, removed afterwards), which
is its cwd and $HOME; its stdin is the given text, its stdout and stderr are read through pipes with a cap. It
runs on the stdlib only: `python -S` (no site-packages, no .pth files: 15 ms of start-up instead of 80 here)
with an environment of our own (PATH, HOME, PYTHONHASHSEED=0, PYTHONDONTWRITEBYTECODE=1, PYTHONUTF8=1) instead
of `-I`, which would ignore that PYTHONHASHSEED.

Backends (`detect_backend`: the first that works of these, or the one `ARENA_JAX_SANDBOX` names):

  bwrap    bubblewrap (Debian's `bubblewrap`): a root of its own holding read-only binds of /usr, /bin, /lib*,
           /sbin and the interpreter's prefix only (no repo, no /home, no /root, no datasets), a private /proc
           (the run's processes only) and /dev, a private /tmp (a tmpfs of `file_size_mb`), the work dir bound
           read-write at /sandbox, all namespaces unshared (`--unshare-all`: no network but a downed loopback,
           its own pid namespace), every capability dropped, no new privileges, a new session, a cleared
           environment, and `--die-with-parent`.
  unshare  util-linux `unshare --net --pid --fork --kill-child --mount-proc --map-root-user`: no network, its
           own pid namespace and /proc, capabilities only inside its own user namespace; the host's filesystem
           is visible and writable where the user may write.
  rlimits  a plain subprocess with the resource limits only: NO network isolation and NO filesystem isolation
           beyond the private cwd; the program runs as the calling user and sees its processes (it may signal
           them, and read their memory), and as root it may raise its own hard limits or leave its cgroup. A
           reference, and the fallback where neither namespace tool works.

What each limit guarantees (`Limits`), in every backend:

  cpu_s           RLIMIT_CPU, soft cpu_s (SIGXCPU), hard cpu_s + 1 (SIGKILL), per process, in whole seconds
                  (rounded up).
  wall_s          the parent kills the run at wall_s: the process group (SIGKILL), for bwrap and unshare also
                  their pid namespace (its init dies, the kernel kills the rest), and the run's pids cgroup.
  memory_mb       RLIMIT_AS (address space) per process: MemoryError, or a failed allocation.
  file_size_mb    RLIMIT_FSIZE per file written (SIGXFSZ past it); no core dumps (RLIMIT_CORE 0). The number
                  of files in the work dir is bounded only by the wall time.
  max_processes   processes and threads of the program (the sandbox's own are not counted): hard wherever the
                  cgroup v1 `pids` hierarchy is writable (root on most hosts; ARENA_JAX_SANDBOX_CGROUP=0 turns it
                  off): each run gets a child cgroup with pids.max, and everything left in it is killed after
                  the run, a session leader that escaped the process group included. Else RLIMIT_NPROC, set in
                  bwrap and unshare only (in their own user namespace it counts the run's processes; outside,
                  all the user's), which the kernel ignores for uid 0: as root without the cgroup, a fork bomb
                  is bounded only by the wall time.
  max_output_bytes  stdout past it is cut, `output_truncated` set and the run killed (its answer can no longer be
                  right); stderr keeps its last max_output_bytes.

The limits are set inside the sandboxed interpreter by a bootstrap (`resource.setrlimit`, then the program is
compiled and executed as `__main__`), not by `preexec_fn`: `preexec_fn` makes subprocess fork() the parent,
which costs a trainer with a few GB of host memory 100+ ms per program (and is unsafe with threads), where
vfork costs 2 ms. The interpreter's own start-up runs before the limits, the program after them.

After every run the parent verifies that nothing of it is left running: the pids cgroup empty; without one, the
process group gone and no process holding the run's output pipes (found by their inode in /proc and killed: a
process that left its session and closed them, in rlimits without a cgroup, is the one that can stay). It logs
a warning otherwise.
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import logging
import math
import os
import resource
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time

BACKENDS = ("bwrap", "unshare", "rlimits")
_SANDBOX_PROCESSES = {"bwrap": 2, "unshare": 2, "rlimits": 0}  # the backend's own processes around the program
ENV_VAR = "ARENA_JAX_SANDBOX"
CGROUP_ENV_VAR = "ARENA_JAX_SANDBOX_CGROUP"  # 0: no pids cgroup (module docstring: max_processes)
SANDBOX_DIR = "/sandbox"  # the work dir's path inside bwrap
PROGRAM = "main.py"

_log = logging.getLogger(__name__)
_READ_CHUNK = 1 << 16
_DRAIN_S = 1.0  # after the kill, how long the pipes may take to reach EOF
_CGROUP_NAME = "arena_jax_sandbox"


class SandboxError(RuntimeError):
  """The requested backend does not work on this machine, or a run could not be started."""


@dataclasses.dataclass(frozen=True)
class Limits:
  """Resource limits of one run (what each guarantees per backend: the module docstring)."""

  cpu_s: float = 4
  wall_s: float = 6
  memory_mb: int = 512
  file_size_mb: int = 16
  max_processes: int = 64
  max_output_bytes: int = 1 << 20


@dataclasses.dataclass(frozen=True)
class RunResult:
  """What one sandboxed run did.

  returncode: the exit status; -N when a signal N killed it (bwrap's 128 + N is normalised to -N).
  stdout, stderr: decoded as UTF-8 (invalid bytes replaced); stdout at most max_output_bytes, stderr its tail.
  timed_out: the parent killed it at wall_s. cpu_limited: RLIMIT_CPU ended it. memory_limited: best effort, a
  MemoryError (or "Cannot allocate memory") at the end of stderr, or a SIGKILL that no other limit explains.
  output_truncated: stdout passed max_output_bytes. limit_hit: the limit that ended the run, "" when none:
  "output", "wall", "cpu" or "memory" (in that order of precedence).
  """

  returncode: int
  stdout: str
  stderr: str
  timed_out: bool
  cpu_limited: bool
  memory_limited: bool
  output_truncated: bool
  wall_s: float
  backend: str
  limit_hit: str = ""


# ── backends ──


@functools.lru_cache(maxsize=None)
def _interpreter(python: str) -> tuple[str, tuple[str, ...]]:
  """The real interpreter behind `python` (a venv's symlinks resolved) and the prefixes it needs to run."""
  exe = os.path.realpath(python)
  if not os.access(exe, os.X_OK):
    raise SandboxError(f"no interpreter at {python!r}")
  out = subprocess.run(
    [exe, "-S", "-c", "import sys; print(sys.prefix); print(sys.exec_prefix); print(sys.base_prefix)"],
    capture_output=True,
    text=True,
    timeout=60,
    env={"PATH": "/usr/bin:/bin"},
  )
  if out.returncode:
    raise SandboxError(f"{exe} -S does not start: {out.stderr.strip()[-300:]}")
  prefixes = {os.path.realpath(p) for p in out.stdout.split()} | {os.path.dirname(os.path.dirname(exe))}
  return exe, tuple(sorted(prefixes))


def _bwrap_prefix(exe_prefixes: tuple[str, ...], workdir: str, limits: Limits) -> list[str]:
  argv = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
  argv += ["--ro-bind", "/usr", "/usr"]
  for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
    if os.path.islink(top):  # merged /usr: keep the host's symlink
      argv += ["--symlink", os.readlink(top), top]
    elif os.path.isdir(top):
      argv += ["--ro-bind", top, top]
  for f in ("/etc/ld.so.cache", "/etc/localtime"):
    argv += ["--ro-bind-try", f, f]
  for prefix in exe_prefixes:
    if prefix != "/" and prefix != "/usr" and not prefix.startswith("/usr/"):
      argv += ["--ro-bind", prefix, prefix]
  argv += ["--dev", "/dev", "--proc", "/proc", "--size", str(limits.file_size_mb << 20), "--tmpfs", "/tmp"]
  argv += ["--bind", workdir, SANDBOX_DIR, "--chdir", SANDBOX_DIR, "--remount-ro", "/", "--clearenv"]
  for key, value in _env(SANDBOX_DIR).items():
    argv += ["--setenv", key, value]
  return argv + ["--"]


# The shell is the namespace's init (pid 1 ignores signals it has no handler for, RLIMIT_CPU's SIGXCPU among
# them), the program its child (a subshell that execs it). The shell's own stderr, where it reports a child's
# death by a signal ("CPU time limit exceeded"), goes nowhere; the program keeps the real one.
_UNSHARE = ["unshare", "--net", "--pid", "--fork", "--kill-child", "--mount-proc", "--map-root-user", "--"]
_UNSHARE += ["/bin/sh", "-c", 'exec 3>&2 2>/dev/null; (exec 2>&3 3>&-; exec "$@"); exit $?', "sh"]


def _env(home: str) -> dict[str, str]:
  return {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": home,
    "LANG": "C.UTF-8",
    "PYTHONHASHSEED": "0",  # set and dict order of strings the same in every run
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUTF8": "1",
  }


@functools.lru_cache(maxsize=None)
def _probe(backend: str, python: str) -> str:
  """Why `backend` cannot run `python` here, "" when it can: a real run of a tiny program; cached."""
  if backend not in BACKENDS:
    raise ValueError(f"sandbox backend must be one of {BACKENDS} or 'auto', got {backend!r}")
  tool = {"bwrap": "bwrap", "unshare": "unshare"}.get(backend)
  if tool and not shutil.which(tool):
    return f"{tool} is not installed"
  try:
    result = _run(f"print({backend!r})", "", Limits(cpu_s=10, wall_s=30), None, python, backend)
  except (OSError, SandboxError) as e:
    return f"{backend} does not start: {e}"
  if result.returncode or result.stdout.strip() != backend:
    return f"{backend} does not work here: {result.stderr.strip()[-300:] or result.returncode}"
  return ""


def unavailable_reason(backend: str, python: str = sys.executable) -> str:
  """Why `backend` does not work on this machine for `python` ("" when it does); probed once, by a real run."""
  return _probe(backend, python)


def available_backends(python: str = sys.executable) -> tuple[str, ...]:
  """The backends that work on this machine for `python`, strongest first (probed once each)."""
  return tuple(b for b in BACKENDS if not _probe(b, python))


def detect_backend(python: str = sys.executable) -> str:
  """The backend runs use: `$ARENA_JAX_SANDBOX` (auto|bwrap|unshare|rlimits, default auto); auto is the
  strongest that works. Probes are cached, so the choice is made once. Raises SandboxError when the named
  backend does not work here."""
  wanted = os.environ.get(ENV_VAR, "auto").strip().lower() or "auto"
  if wanted == "auto":
    return next(b for b in BACKENDS if not _probe(b, python))  # rlimits always works
  why = _probe(wanted, python)
  if why:
    raise SandboxError(f"{ENV_VAR}={wanted}: {why}")
  return wanted


# ── the pids cgroup ──


@functools.lru_cache(maxsize=None)
def _cgroup_base() -> str | None:
  """A writable cgroup v1 `pids` directory for the runs' child cgroups, or None (probed once; none when
  `$ARENA_JAX_SANDBOX_CGROUP` is 0)."""
  if os.environ.get(CGROUP_ENV_VAR, "1").strip() == "0":
    return None
  try:
    with open("/proc/self/cgroup", encoding="utf-8") as f:
      rel = next(line.split(":", 2)[2].strip() for line in f if "pids" in line.split(":")[1].split(","))
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
      mounts = [line.split() for line in f]
    # mountinfo: id parent dev root mountpoint opts ... - fstype source superopts
    mount = next(m for m in mounts if m[m.index("-") + 1] == "cgroup" and "pids" in m[-1].split(","))
    root, point = mount[3], mount[4]
    inner = os.path.relpath(rel, root) if rel.startswith(root) else rel.lstrip("/")
    base = os.path.normpath(os.path.join(point, inner, _CGROUP_NAME))
    os.makedirs(base, exist_ok=True)
    probe = _cgroup_create(base, 4)
    _cgroup_remove(probe)
    return base
  except (OSError, StopIteration, ValueError, IndexError):
    return None


def pids_cgroup_available() -> bool:
  """Whether runs get a pids cgroup (a hard max_processes, and a sweep of everything they leave)."""
  return _cgroup_base() is not None


def _cgroup_create(base: str, max_pids: int) -> str:
  path = os.path.join(base, f"run-{os.getpid()}-{secrets.token_hex(6)}")
  os.mkdir(path)
  try:
    with open(os.path.join(path, "pids.max"), "w", encoding="ascii") as f:
      f.write(str(max_pids))
  except OSError:
    os.rmdir(path)
    raise
  return path


def _cgroup_pids(path: str) -> list[int]:
  try:
    with open(os.path.join(path, "cgroup.procs"), encoding="ascii") as f:
      return [int(p) for p in f.read().split()]
  except OSError:
    return []


def _cgroup_kill(path: str, deadline_s: float = 2.0) -> bool:
  """Kills everything in the cgroup until it is empty; whether it emptied before the deadline."""
  end = time.monotonic() + deadline_s
  while True:
    pids = _cgroup_pids(path)
    if not pids:
      return True
    if time.monotonic() > end:
      return False
    for pid in pids:
      _kill(pid)
    time.sleep(0.002)


def _cgroup_remove(path: str) -> None:
  for _ in range(50):
    try:
      os.rmdir(path)
      return
    except FileNotFoundError:
      return
    except OSError as e:
      if e.errno != errno.EBUSY:
        break
      time.sleep(0.01)  # exited tasks leave the cgroup a moment after their kill
  _log.warning("sandbox: could not remove cgroup %s", path)


def _kill(pid: int, group: bool = False) -> None:
  try:
    (os.killpg if group else os.kill)(pid, signal.SIGKILL)
  except (ProcessLookupError, PermissionError):
    pass


def _group_alive(pgid: int) -> bool:
  """Whether a live (not zombie) process is left in process group `pgid`: one kill(0), a /proc scan only if so."""
  try:
    os.killpg(pgid, 0)
  except (ProcessLookupError, PermissionError):
    return False
  for name in os.listdir("/proc"):
    if name.isdigit():
      try:
        with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as f:
          fields = f.read().rsplit(")", 1)[1].split()
      except OSError:
        continue
      if int(fields[2]) == pgid and fields[0] != "Z":  # state, ppid, pgrp
        return True
  return False


# ── a run ──

# Runs inside the sandboxed interpreter before the program: the limits, `exit` and `quit` (which `python -S`
# leaves undefined: site.py makes them, and programs call them), then the program as __main__.
_BOOTSTRAP = """\
import builtins as _b, resource as _r, sys as _s
for _k, _v in {limits!r}:
  _r.setrlimit(_k, _v)
_b.exit = _b.quit = _s.exit
_s.argv = [{program!r}]
__file__ = {program!r}
with open(__file__, "rb") as _f:
  _c = compile(_f.read(), __file__, "exec")
del _b, _r, _s, _k, _v, _f
exec(_c)
"""


def _rlimits(limits: Limits, backend: str) -> list[tuple[int, tuple[int, int]]]:
  cpu = max(1, math.ceil(limits.cpu_s))
  out = [
    (resource.RLIMIT_CPU, (cpu, cpu + 1)),
    (resource.RLIMIT_AS, (limits.memory_mb << 20,) * 2),
    (resource.RLIMIT_FSIZE, (limits.file_size_mb << 20,) * 2),
    (resource.RLIMIT_CORE, (0, 0)),
  ]
  # RLIMIT_NPROC counts the user's processes in its user namespace: only bwrap's and unshare's are the run's own.
  if backend != "rlimits":
    out.append((resource.RLIMIT_NPROC, (limits.max_processes,) * 2))
  return out


def _write_files(workdir: str, source: str, files: dict[str, str] | None) -> None:
  for name, text in {**(files or {}), PROGRAM: source}.items():
    norm = os.path.normpath(name)
    if os.path.isabs(norm) or norm.startswith(".."):
      raise ValueError(f"sandbox files must be relative paths inside the work dir, got {name!r}")
    path = os.path.join(workdir, norm)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
      f.write(text)


def _stdin_file(text: str):
  data = text.encode("utf-8")
  fd = os.memfd_create("sandbox-stdin") if hasattr(os, "memfd_create") else None
  f = open(fd, "w+b") if fd is not None else tempfile.TemporaryFile()
  f.write(data)
  f.seek(0)
  return f


def _rmtree(path: str) -> None:
  def retry(fn, p, _):
    # A program may leave a directory it made unreadable; open it up and try again.
    try:
      os.chmod(os.path.dirname(p), 0o700)
      os.chmod(p, 0o700)
      fn(p)
    except OSError:
      pass

  shutil.rmtree(path, onerror=retry)


def run_program(
  source: str,
  stdin: str = "",
  *,
  limits: Limits = Limits(),
  files: dict[str, str] | None = None,
  python: str = sys.executable,
  backend: str | None = None,
) -> RunResult:
  """Runs `source` as a program (`main.py`) in the sandbox with `stdin` as its input.

  files: more files to put in its work dir, {relative path: text} (a harness's module, data).
  python: the interpreter (a venv's is resolved to its real one; the program sees only the stdlib).
  backend: one of BACKENDS; default `detect_backend()`. Raises SandboxError if it does not work here.
  """
  if backend is None:
    backend = detect_backend(python)
  elif unavailable_reason(backend, python):
    raise SandboxError(f"sandbox backend {backend}: {unavailable_reason(backend, python)}")
  return _run(source, stdin, limits, files, python, backend)


def _run(source, stdin, limits, files, python, backend) -> RunResult:
  exe, prefixes = _interpreter(python)
  base = _cgroup_base()
  workdir = tempfile.mkdtemp(prefix="arena_sandbox_")
  cgroup = None
  try:
    _write_files(workdir, source, files)
    if backend == "bwrap":
      prefix = _bwrap_prefix(prefixes, workdir, limits)
    else:
      prefix = _UNSHARE if backend == "unshare" else []
    bootstrap = _BOOTSTRAP.format(limits=_rlimits(limits, backend), program=PROGRAM)
    argv = prefix + [exe, "-S", "-c", bootstrap]
    if base is not None:
      # The sandbox's own processes count too: bwrap and its init, unshare and its shell.
      cgroup = _cgroup_create(base, limits.max_processes + _SANDBOX_PROCESSES[backend])
      # The shell joins the cgroup, then becomes the sandbox: everything the run starts is in it from the start.
      argv = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', os.path.join(cgroup, "cgroup.procs")] + argv
    with _stdin_file(stdin) as stdin_f:
      return _supervise(argv, stdin_f, workdir, limits, backend, cgroup)
  finally:
    if cgroup is not None:
      if not _cgroup_kill(cgroup):
        _log.warning("sandbox: processes of a %s run are still alive in %s", backend, cgroup)
      _cgroup_remove(cgroup)
    _rmtree(workdir)


def _supervise(argv, stdin_f, workdir, limits: Limits, backend: str, cgroup: str | None) -> RunResult:
  start = time.monotonic()
  deadline = start + limits.wall_s
  cap = limits.max_output_bytes
  try:
    proc = subprocess.Popen(
      argv,
      stdin=stdin_f,
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      cwd=workdir,
      env=_env(workdir),
      start_new_session=True,  # its own process group, killed as one
    )
  except OSError as e:
    raise SandboxError(f"could not start the {backend} sandbox: {e}") from e
  out, err = bytearray(), bytearray()
  truncated = timed_out = exited = False
  sel = selectors.DefaultSelector()
  try:
    sel.register(proc.stdout, selectors.EVENT_READ, out)
    sel.register(proc.stderr, selectors.EVENT_READ, err)
    try:
      pidfd = os.pidfd_open(proc.pid)
      sel.register(pidfd, selectors.EVENT_READ, None)
    except (AttributeError, OSError):
      pidfd = None  # no pidfd (old kernel): poll the process between reads
    while not truncated and not exited:
      left = deadline - time.monotonic()
      if left <= 0:
        timed_out = True
        break
      events = sel.select(min(left, 0.05) if pidfd is None else left)
      if pidfd is None and proc.poll() is not None:
        exited = True
      for key, _ in events:
        if key.data is None:
          sel.unregister(key.fileobj)
          exited = True  # what it wrote before exiting is still in the pipes: `_drain` reads it
        elif not _read(key, sel, out, err, cap):
          truncated = True
    # Kill whatever is left before reaping the leader, so that its group id cannot be reused meanwhile: the
    # process group, and with it bwrap or unshare, whose pid namespace then dies with its init.
    _kill(proc.pid, group=True)
    if cgroup is not None:
      _cgroup_kill(cgroup)
    if not _drain(sel, out, err, cap, _DRAIN_S / 5):
      # Something outside the group and the cgroup still holds the output pipes (a process that left its
      # session, where there is no pids cgroup): find the holders by the pipes' inode and kill them.
      _kill_holders({os.fstat(proc.stdout.fileno()).st_ino, os.fstat(proc.stderr.fileno()).st_ino})
      if not _drain(sel, out, err, cap, _DRAIN_S):
        _log.warning("sandbox: processes of a %s run still hold its output pipes", backend)
    returncode = proc.wait()
    if cgroup is None and _group_alive(proc.pid):
      _kill(proc.pid, group=True)
      if _group_alive(proc.pid):
        _log.warning("sandbox: processes of a %s run survive in process group %d", backend, proc.pid)
  finally:
    sel.close()
    if pidfd is not None:
      os.close(pidfd)
    proc.stdout.close()
    proc.stderr.close()
  wall = time.monotonic() - start
  if backend != "rlimits" and 128 < returncode < 128 + 65:
    returncode = 128 - returncode  # bwrap and unshare report a signal N as 128 + N
  truncated = truncated or len(out) > cap
  stdout = bytes(out[:cap]).decode("utf-8", "replace")
  stderr = bytes(err).decode("utf-8", "replace")
  sig = -returncode if returncode < 0 else 0
  cpu_limited = (
    not timed_out
    and not truncated
    and (sig == signal.SIGXCPU or (sig == signal.SIGKILL and wall >= math.ceil(limits.cpu_s) + 0.9))
  )
  tail = stderr[-2000:]
  memory_limited = not (timed_out or truncated or cpu_limited) and (
    "MemoryError" in tail or "Cannot allocate memory" in tail or sig == signal.SIGKILL
  )
  hits = {"output": truncated, "wall": timed_out, "cpu": cpu_limited, "memory": memory_limited}
  limit_hit = next((name for name, hit in hits.items() if hit), "")
  return RunResult(
    returncode, stdout, stderr, timed_out, cpu_limited, memory_limited, truncated, wall, backend, limit_hit
  )


def _read(key, sel: selectors.BaseSelector, out: bytearray, err: bytearray, cap: int) -> bool:
  """Reads one chunk of a pipe into its buffer; False once stdout has passed the cap (the rest is dropped)."""
  chunk = os.read(key.fd, _READ_CHUNK)
  if not chunk:
    sel.unregister(key.fileobj)
  elif key.data is out:
    out += chunk[: cap + 1 - len(out)]
    return len(out) <= cap
  else:
    err += chunk
    del err[: max(0, len(err) - cap)]  # the tail: a traceback comes last
  return True


def _drain(sel: selectors.BaseSelector, out: bytearray, err: bytearray, cap: int, timeout_s: float) -> bool:
  """Reads what the killed run left in its pipes, up to the caps; whether both reached EOF within timeout_s."""
  end = time.monotonic() + timeout_s
  while any(key.data is not None for key in sel.get_map().values()):
    left = end - time.monotonic()
    if left <= 0:
      return False
    for key, _ in sel.select(left):
      if key.data is None:
        sel.unregister(key.fileobj)
      elif key.data is err or len(out) <= cap:
        _read(key, sel, out, err, cap)
      else:
        sel.unregister(key.fileobj)
  return True


def _kill_holders(inodes: set[int]) -> None:
  """Kills every other process that holds a pipe with one of these inodes open (a /proc scan: rare)."""
  links = {f"pipe:[{i}]" for i in inodes}
  for name in os.listdir("/proc"):
    if not name.isdigit() or int(name) == os.getpid():
      continue
    try:
      fds = os.listdir(f"/proc/{name}/fd")
      if any(os.readlink(f"/proc/{name}/fd/{fd}") in links for fd in fds):
        _kill(int(name))
    except OSError:
      continue
