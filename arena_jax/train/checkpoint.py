"""Orbax checkpoints of the RL train state plus a JSON record of everything else a resume needs.

A checkpoint at step s holds the state *after* s optimizer steps: params, optimizer state, step
(orbax StandardSave, multi-host aware), and `meta` (JSON): the data iterator's state, the step, the
seed and the config. Orbax writes into a temporary directory and renames it when complete, so a crash
mid-save never leaves a checkpoint that `latest_step` would pick.

Checkpoints defend themselves (docs/architecture.md, "Crashes and damaged checkpoints"): once orbax has
finalised a step, a manifest (`MANIFEST`: every file's size and CRC-32) is written into it, and
`restore` checks it before reading, then checks that every restored floating-point value is finite.
Any failure — a file truncated, missing or altered, a TensorStore error, a NaN — is one
`CheckpointError` naming the step and the reason, never a TensorStore trace. A step without a manifest
(written before manifests existed, or a crash between orbax's rename and the manifest) is restored
with the finiteness check only.

An evaluator needs the parameters alone: `restore_params` reads the `params` subtree of a step (orbax's
partial restore: the optimizer state, twice the parameters' size under Adam, is never deserialized) onto
the devices and shardings its target asks for, with the same checks.

A LoRA run (`model.lora.rank` > 0) checkpoints its adapters as the state's params (with their moments), and with
`checkpoint.save_merged` also the merged weights, as the item `merged`; `policy_io.restore_run_params` turns either
into the policy's weights.
"""

from __future__ import annotations

import json
import os
import zlib

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from etils import epath
from jax.sharding import SingleDeviceSharding

from arena_jax import fileio, parallel
from arena_jax.errors import MissingFileError, UserError

MANIFEST = "arena_manifest.json"
DAMAGED_SUFFIX = ".damaged"
_CHUNK = 1 << 24


MERGED = "merged"  # the checkpoint item of a LoRA run's merged weights (`checkpoint.save_merged`)


class CheckpointError(UserError, ValueError):
  """A checkpoint that does not restore or fails verification (damaged, truncated or missing files,
  non-finite values); the message names the step, its directory and the reason."""


def _is_manifest(rel: str) -> bool:
  # The manifest, and any writer's temporary file of it: another process's is renamed away while this one lists
  # the directory, so recording it would make the manifest name a file that never stays.
  return rel == MANIFEST or fileio.is_temporary_of(rel, MANIFEST)


def _files(step_dir: str) -> list[str]:
  out = []
  for root, _, names in os.walk(step_dir):
    for name in names:
      rel = os.path.relpath(os.path.join(root, name), step_dir)
      if not _is_manifest(rel):
        out.append(rel)
  return sorted(out)


def _crc32(path: str) -> int:
  crc = 0
  with open(path, "rb") as f:
    while chunk := f.read(_CHUNK):
      crc = zlib.crc32(chunk, crc)
  return crc


def write_manifest(step_dir: str) -> None:
  """Records every file of a finalised checkpoint directory: size and CRC-32 (zlib: GB/s, one read)."""
  files = {
    rel: {"size": os.path.getsize(os.path.join(step_dir, rel)), "crc32": _crc32(os.path.join(step_dir, rel))}
    for rel in _files(step_dir)
  }
  fileio.atomic_write(os.path.join(step_dir, MANIFEST), json.dumps({"version": 1, "files": files}, indent=0))


def manifest_problem(step_dir: str) -> str | None:
  """Why `step_dir` does not match its manifest (None: it matches, or it has no manifest)."""
  path = os.path.join(step_dir, MANIFEST)
  if not os.path.exists(path):
    return None
  try:
    with open(path, encoding="utf-8") as f:
      files = json.load(f)["files"]
    expected = {str(k): (int(v["size"]), int(v["crc32"])) for k, v in files.items()}
  except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
    return f"its manifest {MANIFEST} is unreadable ({type(e).__name__}: {e})"
  for rel, (size, crc) in expected.items():
    full = os.path.join(step_dir, rel)
    if not os.path.isfile(full):
      return f"file {rel} is missing"
    actual = os.path.getsize(full)
    if actual != size:
      return f"file {rel} has {actual} bytes, the manifest says {size} (truncated or overwritten)"
    if _crc32(full) != crc:
      return f"file {rel} does not match its checksum (damaged bytes)"
  return None


@jax.jit
def _finite_flags(leaves):
  return jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves])


def non_finite_leaves(tree) -> list[str]:
  """Paths of the floating-point leaves of `tree` holding a NaN or an infinity."""
  named = [
    (jax.tree_util.keystr(p), x)
    for p, x in jax.tree_util.tree_leaves_with_path(tree)
    if hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jnp.inexact)
  ]
  if not named:
    return []
  flags = _finite_flags([x for _, x in named])
  # One replicated bool per leaf: readable on every host.
  flags = np.asarray(flags.addressable_data(0)) if isinstance(flags, jax.Array) else np.asarray(flags)
  return [name for (name, _), ok in zip(named, flags) if not ok]


def _int_keys(tree):
  """Nested dicts with digit-string keys turned back into ints: orbax stores a layer index `0` as the
  key "0", the model's pure dict (`nnx.to_pure_dict`) has it as 0."""
  if not isinstance(tree, dict):
    return tree
  return {(int(k) if isinstance(k, str) and k.isdigit() else k): _int_keys(v) for k, v in tree.items()}


def _on_default_device(tree):
  """`jax.ShapeDtypeStruct`s without a sharding placed on this process's first device (a restore
  target leaf without one would come back as a numpy array)."""
  device = SingleDeviceSharding(jax.local_devices()[0])

  def one(x):
    if getattr(x, "sharding", None) is not None:
      return x
    return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=device)

  return jax.tree.map(one, tree)


def _one_line(e: BaseException, limit: int = 300) -> str:
  text = " ".join(str(e).split()) or type(e).__name__
  return f"{type(e).__name__}: {text[:limit]}{'…' if len(text) > limit else ''}"


def checkpoint_steps(workdir: str | os.PathLike) -> list[int]:
  """The finalised checkpoint steps of a run directory (`<workdir>/checkpoints/<step>`), read off the disk.

  Orbax writes a step into a temporary directory and renames it to the bare step number when the save is
  complete, so a name of digits alone is a finalised step (a crash's leftover is not, nor a step set aside
  with `DAMAGED_SUFFIX`). This is the readers' listing (the evaluator, the export): unlike
  `Checkpointer.all_steps` it opens no orbax manager, which would create the directory of a run that has not
  saved yet.
  """
  directory = os.path.join(workdir, "checkpoints")
  return sorted(int(d) for d in os.listdir(directory) if d.isdigit()) if os.path.isdir(directory) else []


def resolve_step(workdir: str | os.PathLike, step: int | None = None) -> int:
  """`step` if it is a finalised checkpoint of the run, its latest when `step` is None (the readers' choice: the
  export, the policy server); else `MissingFileError` naming the run's checkpoints and the steps it has."""
  steps = checkpoint_steps(workdir)
  where = os.path.join(os.fspath(workdir), "checkpoints")
  if not steps:
    raise MissingFileError(f"{where} holds no finalised checkpoint")
  if step is None:
    return steps[-1]
  if step not in steps:
    raise MissingFileError(f"{where} has no finalised step {step} (it has {steps})")
  return step


class Checkpointer:
  """Keeps the last `keep` checkpoints under `directory`.

  `cleanup_tmp=True` (the trainer's, never a reader's) deletes the temporary directories of saves that
  a crash cut short: they are never read, but one is a full-size copy of the state.
  A reader (the evaluator) must not pass it: it would delete a save the trainer has in progress.
  """

  def __init__(self, directory: str, *, keep: int = 3, cleanup_tmp: bool = False):
    self.directory = os.path.abspath(directory)
    self._manager = ocp.CheckpointManager(
      self.directory,
      options=ocp.CheckpointManagerOptions(max_to_keep=keep, create=True, cleanup_tmp_directories=cleanup_tmp),
    )

  def latest_step(self) -> int | None:
    return self._manager.latest_step()

  def all_steps(self) -> list[int]:
    return sorted(self._manager.all_steps())

  def step_dir(self, step: int) -> str:
    return os.path.join(self.directory, str(step))

  def save(self, step: int, state, meta: dict, *, main: bool | None = None, merged=None) -> None:
    """Saves and waits; then the main process (`main`; by default process 0) writes the step's manifest, and
    every process waits for it, so a restore on any process right after sees the manifest. `merged`: a LoRA run's
    merged weights (`checkpoint.save_merged`), saved beside the state as the item `merged` ({"params": ...}), which
    `restore_params(item="merged")` reads without the base."""
    if main is None:
      main = parallel.is_main_process()
    items = dict(state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta))
    if merged is not None:
      items[MERGED] = ocp.args.StandardSave({"params": merged})
    self._manager.save(step, args=ocp.args.Composite(**items), force=True)
    self._manager.wait_until_finished()
    if main:
      write_manifest(self.step_dir(step))
    parallel.barrier(f"arena_jax checkpoint manifest {step}")

  def verify_files(self, step: int) -> None:
    """Raises CheckpointError when step's files do not match its manifest."""
    problem = manifest_problem(self.step_dir(step))
    if problem:
      raise CheckpointError(f"checkpoint step {step} in {self.directory} is damaged: {problem}")

  def restore(self, step: int, target):
    """(state shaped like `target`, meta dict) of checkpoint `step`, verified (manifest, finite values).

    Raises CheckpointError, with one line saying why, when the step does not restore or fails a check.
    """
    self.verify_files(step)
    try:
      out = self._manager.restore(
        step, args=ocp.args.Composite(state=ocp.args.StandardRestore(target), meta=ocp.args.JsonRestore())
      )
    except Exception as e:  # TensorStore, orbax and JSON errors alike: the step does not restore
      raise CheckpointError(f"checkpoint step {step} in {self.directory} does not restore ({_one_line(e)})") from e
    self._check_finite(step, out["state"])
    return out["state"], out["meta"]

  def has_merged(self, step: int) -> bool:
    """Step `step` holds a LoRA run's merged weights (`save(merged=...)`)."""
    return os.path.isdir(os.path.join(self.step_dir(step), MERGED))

  def restore_params(self, step: int, target=None, *, host: bool = False, item: str = "state"):
    """The parameters of checkpoint `step` alone, verified like `restore` (manifest, finite values).
    `item`: "state" (the trained parameters: a LoRA run's adapters) or "merged" (a LoRA run's merged weights).

    Only the `params` subtree is read (orbax `PyTreeRestore(partial_restore=True)`): the optimizer state
    and the step counter are never deserialized, so an evaluator holds no Adam moments and each device
    reads only its own shards of the parameters.

    Args:
      step: the checkpoint's step.
      target: the parameters' pure dict of `jax.ShapeDtypeStruct`s with the shardings to restore onto
        (e.g. `parallel.abstract_params(model_config, mesh, rules)`); a dtype other than the saved one
        is cast to while reading (float32 masters straight into a bfloat16 sampler copy); a leaf
        without a sharding lands on this process's first device. None: the parameters as saved, on
        that device, shaped like the model's pure dict (layer indices as int keys, where orbax stores
        "0"); their shapes and dtypes come from the arrays' headers, the moments' headers included
        (a few hundred bytes each; their data is never read).
      host: NumPy arrays in this host's memory, never on a device (`launch.export` of an 8B run); the
        target's shardings are then ignored.

    Raises CheckpointError, with one line saying why, when the step does not restore or fails a check.
    The manifest check still reads every file of the step once (a CRC-32 pass, no memory held): the
    OCDBT data files mix parameters and moments, so the parameters' own files cannot be told apart.
    """
    self.verify_files(step)
    path = epath.Path(self.step_dir(step)) / item
    # A checkpointer of its own: the manager's item `state` is bound to StandardCheckpointHandler, whose
    # restore has no partial mode; PyTreeCheckpointHandler reads the same files.
    reader = ocp.PyTreeCheckpointer()
    try:
      if target is None:
        # The handler's own metadata: the checkpointer's logs a failure and returns None instead.
        saved = reader.handler.metadata(path).tree["params"]
        target = jax.tree.map(lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype), _int_keys(dict(saved)))
      if host:
        item = {"params": jax.tree.map(lambda a: np.zeros((), a.dtype), target)}  # the tree; the args give the type
        restore_args = {
          "params": jax.tree.map(lambda a: ocp.RestoreArgs(restore_type=np.ndarray, dtype=a.dtype), target)
        }
      else:
        item = {"params": _on_default_device(target)}
        restore_args = ocp.checkpoint_utils.construct_restore_args(item)
      out = reader.restore(
        path, args=ocp.args.PyTreeRestore(item=item, restore_args=restore_args, partial_restore=True)
      )
    except Exception as e:  # TensorStore, orbax and metadata errors alike: the step does not restore
      raise CheckpointError(
        f"checkpoint step {step} in {self.directory}: its parameters do not restore ({_one_line(e)})"
      ) from e
    finally:
      reader.close()
    # A partial restore hands back the target's own leaf where the checkpoint has none (another model's
    # target, e.g. more layers): a parameter that was not read is an error, never a silent placeholder.
    missing = [
      jax.tree_util.keystr(p)
      for p, x in jax.tree_util.tree_leaves_with_path(out["params"])
      if isinstance(x, jax.ShapeDtypeStruct)
    ]
    if missing:
      raise CheckpointError(
        f"checkpoint step {step} in {self.directory} has no parameter {', '.join(missing[:3])}"
        f"{', …' if len(missing) > 3 else ''} ({len(missing)} of the target's): the target is not the "
        "run's model (restore with the run's model config)"
      )
    self._check_finite(step, out["params"])
    return out["params"]

  def _check_finite(self, step: int, tree) -> None:
    bad = non_finite_leaves(tree)
    if bad:
      raise CheckpointError(
        f"checkpoint step {step} in {self.directory} holds non-finite values in {len(bad)} "
        f"arrays ({', '.join(bad[:3])}{', …' if len(bad) > 3 else ''})"
      )

  def read_meta(self, step: int) -> dict:
    """The JSON record of checkpoint `step` alone (no arrays are read)."""
    try:
      return self._manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"]
    except Exception as e:  # pylint: disable=broad-except
      raise CheckpointError(
        f"checkpoint step {step} in {self.directory}: its meta does not read ({_one_line(e)})"
      ) from e

  def set_aside(self, step: int) -> str:
    """Renames a damaged step to `<step>.damaged[-k]` (kept for inspection, invisible to orbax and to the
    evaluator) so a resumed run can save that step again; returns the new path."""
    src = self.step_dir(step)
    dst, k = src + DAMAGED_SUFFIX, 1
    while os.path.exists(dst):
      k += 1
      dst = f"{src}{DAMAGED_SUFFIX}-{k}"
    os.replace(src, dst)
    self._manager.reload()
    return dst

  def reload(self) -> None:
    self._manager.reload()

  def close(self) -> None:
    self._manager.wait_until_finished()
    self._manager.close()
