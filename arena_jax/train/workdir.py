"""One run per work directory: an exclusive lock for the trainer's life, and a resume that refuses to
mix incompatible runs in one log (docs/architecture.md, "Crashes and damaged checkpoints").

The lock is `fcntl.flock` on `<workdir>/train.lock`: the kernel releases it when the process ends,
however it ends (SIGKILL, OOM, a crash), so a stale lock never blocks a resume. The file records who
holds it (pid, host, start time) for the message a second trainer gets. Only the main process of a
multi-host run takes it (all hosts share the workdir by design); flock on network filesystems is only
as reliable as the filesystem's lock support.
"""

from __future__ import annotations

import datetime
import fcntl
import json
import os
import socket

from arena_jax.errors import WorkdirError

LOCK_FILE = "train.lock"

# What a resume may not change silently: the run's mode, task, model and batch shape. Names are config
# paths; `resume_allow_changes` lists the ones a user changes on purpose.
GUARDED_FIELDS = (
  "reward.mode",
  "tasks.train_task",
  "init.policy_dir",
  "init.hf_path",
  "init.random_model",
  "rollout.group_size",
  "rollout.prompts_per_step",
  "rollout.max_new_tokens",
  # A LoRA run's checkpoints are its adapters: another rank or target set does not restore, another alpha is
  # another policy.
  "model.lora.rank",
  "model.lora.alpha",
  "model.lora.targets",
)


class WorkdirLock:
  """`with WorkdirLock(workdir):` holds the workdir's exclusive lock, or raises WorkdirError at once."""

  def __init__(self, workdir: str):
    self.path = os.path.join(os.path.abspath(workdir), LOCK_FILE)
    self._fd: int | None = None

  def acquire(self) -> "WorkdirLock":
    os.makedirs(os.path.dirname(self.path), exist_ok=True)
    fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
      holder = _read_holder(fd)
      os.close(fd)
      raise WorkdirError(
        f"another trainer{holder} is running in {os.path.dirname(self.path)} (it holds {self.path}): two runs "
        "in one workdir would interleave their metrics and checkpoints. Wait for it to end or stop it, or "
        "choose a new --workdir"
      ) from None
    os.ftruncate(fd, 0)
    os.write(
      fd,
      json.dumps(
        {
          "pid": os.getpid(),
          "host": socket.gethostname(),
          "since": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
      ).encode(),
    )
    self._fd = fd
    return self

  def release(self) -> None:
    if self._fd is not None:
      fcntl.flock(self._fd, fcntl.LOCK_UN)
      os.close(self._fd)
      self._fd = None

  def __enter__(self):
    return self.acquire()

  def __exit__(self, *exc):
    self.release()


def _read_holder(fd: int) -> str:
  try:
    info = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
    return f" (pid {info['pid']} on {info['host']}, since {info['since']})"
  except (OSError, ValueError, KeyError, TypeError):
    return ""


def _get(tree: dict, path: str):
  node = tree
  for key in path.split("."):
    if not isinstance(node, dict) or key not in node:
      return _MISSING
    node = node[key]
  return node


_MISSING = object()


def _norm(v):
  return [_norm(x) for x in v] if isinstance(v, (list, tuple)) else v  # JSON turns tuples into lists


def check_resume_config(saved, config, where: str) -> None:
  """Raises WorkdirError when `config` changes a `GUARDED_FIELDS` entry of the run's saved config (its
  checkpoint's `meta["config"]`, a JSON string or dict) that `config.resume_allow_changes` does not name.
  Fields the saved config lacks (older checkpoints) are not compared."""
  if isinstance(saved, str):
    try:
      saved = json.loads(saved)
    except ValueError:
      return  # a config that was not JSON-serialisable: nothing to compare
  if not isinstance(saved, dict):
    return
  new = json.loads(config.to_json_best_effort())
  allowed = set(config.get("resume_allow_changes", ()) or ())
  changes = []
  for name in GUARDED_FIELDS:
    old, now = _get(saved, name), _get(new, name)
    if name in allowed or old is _MISSING or now is _MISSING or _norm(old) == _norm(now):
      continue
    changes.append(f"{name}: {old!r} → {now!r}")
  if changes:
    names = ", ".join(f'"{c.split(":")[0]}"' for c in changes)
    raise WorkdirError(
      f"--config.resume=True would change what the run in {where} trains ({'; '.join(changes)}): its log "
      "and checkpoints would mix two incompatible runs. Resume with the saved values, choose a new --workdir, "
      f"or allow the change with --config.resume_allow_changes='({names},)'"
    )
