"""A policy on disk: tokenizer, model config and parameters in one directory; and what an RL run
directory holds beside its checkpoints so that an evaluator can rebuild the policy.

Layout of a policy directory (what `save_policy` writes and `load_policy` reads):

    tokenizer.model      the SentencePiece model (PAD 0, EOS 1, BOS 2; `arena_jax.tokenizer`)
    model_config.json    every field of the `ModelConfig` (RoPE scaling as a nested object)
    params/              an orbax checkpoint (StandardSave) of the pure parameter dict, as
                         `nnx.to_pure_dict(nnx.state(model, nnx.Param))` lays it out
    meta.json            written last, so its presence marks a complete policy: format version,
                         prompt convention (`add_bos`), and whatever the writer adds (`extra`:
                         the SFT config and summary)

`load_policy` also reads a HF checkpoint directory (config.json + safetensors, tokenizer.json or
tokenizer.model) and a GGUF file (weights, config, tokenizer and chat template in one file), so a run can start
from any of them without a separate code path in the trainer.

An RL run directory (`write_policy_spec` / `load_run_policy`) keeps its parameters in
`checkpoints/<step>/` and beside them `model_config.json`, the tokenizer and `policy.json` (which
tokenizer, and the prompt convention): what `arena_jax.eval.watch` needs to evaluate a checkpoint.

Every file is written through `fileio.atomic_write` (or orbax's own atomic rename), so a crash never
leaves a torn file that a resumed run or an evaluator would then read.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pathlib
from typing import Any, NamedTuple, Sequence

import jax
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx

from arena_jax import fileio
from arena_jax import gguf_file
from arena_jax.errors import MissingFileError
from arena_jax import tokenizer as tokenizer_lib
from arena_jax.tokenizer import SentencePieceTokenizer
from arena_jax import parallel
from arena_jax import tasks as tasks_lib
from arena_jax import pretrained
from arena_jax.models import (
  LOGICAL_AXIS_RULES,
  ModelConfig,
  RopeScaling,
  Transformer,
  abstract_model,
  get_model_config,
  init_model,
  load_hf,
  param_shardings,
  pure_params,
  with_precision,
)

FORMAT_VERSION = 1
TOKENIZER_FILE = "tokenizer.model"
MODEL_CONFIG_FILE = "model_config.json"
PARAMS_DIR = "params"
META_FILE = "meta.json"
POLICY_SPEC = "policy.json"  # in an RL run directory: which tokenizer, and the prompt convention
RUN_TASKS = "tasks.json"  # in an RL run directory: the run's task settings (what its policy was trained on)


class LoadedPolicy(NamedTuple):
  """A loaded policy: the model (parameters placed on device), its config and its tokenizer.

  `meta` is meta.json's content ({} for a HF directory); `add_bos` says whether prompts start
  with BOS, as the policy was trained (see `encode_prompts`).
  """

  config: ModelConfig
  model: Transformer
  tokenizer: Any
  meta: dict = {}

  @property
  def add_bos(self) -> bool:
    return bool(self.meta.get("add_bos", True))

  def encode_prompts(self, texts: Sequence[str]) -> list[list[int]]:
    """Prompt token ids in the policy's convention (the sampler's input)."""
    return self.tokenizer.encode(list(texts), add_bos=self.add_bos)


# ─────────────────────────────────────── model config ⇄ JSON ───────────────────────────────────────


# ModelConfig fields that say how a train step computes, not what the weights are: never stored.
_TRAIN_STEP_FIELDS = ("remat", "quantization", "attention")


def config_to_json(config: ModelConfig) -> str:
  """The architecture and its dtypes: every field but `_TRAIN_STEP_FIELDS`."""
  d = dataclasses.asdict(config)
  for name in _TRAIN_STEP_FIELDS:
    del d[name]
  return json.dumps(d, indent=2, sort_keys=True)


def config_from_json(text: str) -> ModelConfig:
  d = json.loads(text)
  if d.get("rope_scaling") is not None:
    d["rope_scaling"] = RopeScaling(**d["rope_scaling"])
  if d.get("sliding_layers") is not None:
    d["sliding_layers"] = tuple(d["sliding_layers"])
  known = {f.name for f in dataclasses.fields(ModelConfig)}
  unknown = sorted(set(d) - known)
  if unknown:
    raise ValueError(f"{MODEL_CONFIG_FILE} has fields that ModelConfig does not know: {unknown}")
  return ModelConfig(**d)


# ─────────────────────────────────────── save ───────────────────────────────────────


def save_policy(
  path: str | os.PathLike,
  model_or_params,
  model_config: ModelConfig,
  tokenizer,
  *,
  extra: dict | None = None,
  add_bos: bool = True,
) -> pathlib.Path:
  """Writes a policy directory (layout in the module docstring); returns its path.

  Args:
    path: the directory (created; files of an earlier policy there are replaced, others are kept).
    model_or_params: a `Transformer`, its `nnx.State`, or the pure parameter dict.
    model_config: the model's config.
    tokenizer: a `SentencePieceTokenizer` (anything with `save(path)` writing a `.model` file).
    extra: JSON-serialisable entries merged into meta.json.
    add_bos: the prompt convention the policy was trained with.

  meta.json is removed first and written last, so a save that dies half-way never leaves a
  directory that looks complete (the SFT cache trusts meta.json).
  """
  path = pathlib.Path(path).expanduser().absolute()
  tokenizer.check_vocab(model_config.vocab_size)
  path.mkdir(parents=True, exist_ok=True)
  (path / META_FILE).unlink(missing_ok=True)
  tokenizer.save(path / TOKENIZER_FILE)
  fileio.atomic_write(path / MODEL_CONFIG_FILE, config_to_json(model_config))
  params = pure_params(model_or_params)
  with ocp.Checkpointer(ocp.StandardCheckpointHandler()) as ckptr:
    ckptr.save(path / PARAMS_DIR, args=ocp.args.StandardSave(params), force=True)
  meta = {
    "format_version": FORMAT_VERSION,
    "add_bos": bool(add_bos),
    "tokenizer_vocab_size": tokenizer.vocab_size,
    "num_params": int(sum(np.size(x) for x in jax.tree.leaves(params))),
  }
  meta.update(extra or {})
  fileio.atomic_write(path / META_FILE, json.dumps(meta, indent=2, sort_keys=True, default=_json_default))
  return path


def _json_default(x):
  if isinstance(x, (np.generic, np.ndarray)) or hasattr(x, "tolist"):
    return np.asarray(x).tolist()
  if isinstance(x, (tuple, set)):
    return list(x)
  raise TypeError(f"meta.json: cannot serialise {type(x).__name__}")


# ─────────────────────────────────────── load ───────────────────────────────────────


def is_policy_dir(path: str | os.PathLike) -> bool:
  """Whether `path` holds a complete policy written by `save_policy`."""
  path = pathlib.Path(path).expanduser()
  return all((path / f).exists() for f in (META_FILE, MODEL_CONFIG_FILE, TOKENIZER_FILE, PARAMS_DIR))


def read_meta(path: str | os.PathLike) -> dict:
  return json.loads((pathlib.Path(path).expanduser() / META_FILE).read_text())


def check_vocab(tokenizer, model_config: ModelConfig, tokenizer_file, config_file) -> None:
  """Raises ValueError naming both sizes and both files unless every token id has an embedding row."""
  if tokenizer.vocab_size > model_config.vocab_size:
    raise ValueError(
      f"tokenizer vocabulary ({tokenizer.vocab_size} tokens, {tokenizer_file}) exceeds the model's "
      f"vocab_size ({model_config.vocab_size}, {config_file}): token ids ≥ {model_config.vocab_size} "
      "would have no embedding row. Use the tokenizer the policy was trained with, or a model config "
      "with a larger vocab_size."
    )


def load_policy(
  path: str | os.PathLike,
  *,
  mesh: jax.sharding.Mesh | None = None,
  rules: Sequence[tuple[str, Any]] = LOGICAL_AXIS_RULES,
  weight_dtype: str | None = None,
  dtype: str | None = None,
) -> LoadedPolicy:
  """Reads a policy directory written by `save_policy`, a HF checkpoint directory or a `.gguf` file.

  Args:
    path: the directory, or the GGUF file, or `pretrained:<name>` (`pretrained.resolve`).
    mesh: place each parameter with its logical sharding on this mesh (default: the default device).
    rules: logical axis rules for `mesh`.
    weight_dtype: store the parameters in this dtype (a bfloat16 or FP8 checkpoint is upcast tensor by
      tensor on the host, then placed); None = as stored.
    dtype: compute dtype; None or "" = the stored policy's own (`models.with_precision`).

  Raises:
    FileNotFoundError: `path` is neither a complete policy directory nor a HF checkpoint.
    ValueError: the tokenizer has more tokens than the model has embedding rows.
  """
  path = pathlib.Path(pretrained.resolve(path)).expanduser().absolute()  # `pretrained:<name>` → its file
  if gguf_file.is_gguf(path):  # one file: weights, config, tokenizer and chat template (`models.hf.gguf`)
    return _load_hf_policy(path, mesh, rules, weight_dtype, dtype)
  if not is_policy_dir(path):
    if (path / "config.json").exists():
      return _load_hf_policy(path, mesh, rules, weight_dtype, dtype)
    missing = [f for f in (META_FILE, MODEL_CONFIG_FILE, TOKENIZER_FILE, PARAMS_DIR) if not (path / f).exists()]
    hint = (
      " — run `make demo` (or `python -m launch.sft`) first: it writes the SFT policy there"
      if not path.exists() and path.name == "sft_demo"
      else ""
    )
    raise MissingFileError(
      f"{path} is not a policy directory (missing {', '.join(missing)}) nor a HF checkpoint (config.json){hint}"
    )
  meta = read_meta(path)
  if meta.get("format_version", 0) > FORMAT_VERSION:
    raise ValueError(
      f"{path / META_FILE}: format_version {meta['format_version']} is newer than this code reads ({FORMAT_VERSION})"
    )
  config = config_from_json((path / MODEL_CONFIG_FILE).read_text())
  if weight_dtype or dtype:  # orbax casts each array to the target's dtype as it reads it
    config = with_precision(config, weight_dtype=weight_dtype or config.param_dtype, dtype=dtype or "")
  tokenizer = tokenizer_lib.SentencePieceTokenizer.load(path / TOKENIZER_FILE)
  check_vocab(tokenizer, config, path / TOKENIZER_FILE, path / MODEL_CONFIG_FILE)

  graphdef, abstract = nnx.split(abstract_model(config))
  if mesh is not None:
    shardings = param_shardings(abstract, mesh, rules)
  else:
    device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    shardings = jax.tree.map(lambda _: device, nnx.to_pure_dict(abstract))
  target = jax.tree.map(
    lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), nnx.to_pure_dict(abstract), shardings
  )
  with ocp.Checkpointer(ocp.StandardCheckpointHandler()) as ckptr:
    params = ckptr.restore(path / PARAMS_DIR, args=ocp.args.StandardRestore(target))
  nnx.replace_by_pure_dict(abstract, params)
  return LoadedPolicy(config=config, model=nnx.merge(graphdef, abstract), tokenizer=tokenizer, meta=meta)


def _load_hf_policy(path: pathlib.Path, mesh, rules, weight_dtype, dtype) -> LoadedPolicy:
  """A HF checkpoint directory: `models.load_hf` + its tokenizer (tokenizer.json or tokenizer.model); or a GGUF
  file, whose tokenizer and chat template come from its own metadata."""
  model = load_hf(path, mesh=mesh, rules=rules, param_dtype=weight_dtype or None, dtype=dtype or None)
  tokenizer = tokenizer_lib.load_tokenizer(path)
  if gguf_file.is_gguf(path):
    tokenizer_file = config_file = path
  else:
    tokenizer_file = path / ("tokenizer.json" if (path / "tokenizer.json").exists() else "tokenizer.model")
    config_file = path / "config.json"
  check_vocab(tokenizer, model.config, tokenizer_file, config_file)
  # HF chat/base models carry their own BOS convention: a GGUF states it (tokenizer.ggml.add_bos_token), else
  # the tokenizer's bos_id decides.
  add_bos = getattr(tokenizer, "add_bos_default", None)
  return LoadedPolicy(
    config=model.config,
    model=model,
    tokenizer=tokenizer,
    meta={"add_bos": tokenizer.bos_id is not None if add_bos is None else bool(add_bos), "source": "hf"},
  )


# ─────────────────────────────────────── an RL run directory ───────────────────────────────────────


def write_policy_spec(
  workdir: str | os.PathLike, model_config: ModelConfig, tokenizer, *, add_bos: bool = True, tasks_config=None
) -> None:
  """What an evaluator needs besides a run's checkpointed parameters: the model config, the tokenizer
  and (`tasks_config`) the run's task settings, so that it scores the problems the run trained on.

  A SentencePiece tokenizer is copied into `workdir`; a HF tokenizer (no `save`) is named by the
  absolute path of its file. `POLICY_SPEC` is written last.
  """
  workdir = os.fspath(workdir)
  os.makedirs(workdir, exist_ok=True)
  if tasks_config is not None:
    fileio.atomic_write(os.path.join(workdir, RUN_TASKS), tasks_config.to_json(sort_keys=True))
  fileio.atomic_write(os.path.join(workdir, MODEL_CONFIG_FILE), config_to_json(model_config))
  if hasattr(tokenizer, "save"):
    tokenizer.save(os.path.join(workdir, TOKENIZER_FILE))  # atomic too
    tok_file = TOKENIZER_FILE
  else:  # a HF tokenizer: point at its file
    tok_file = os.path.abspath(getattr(tokenizer, "path", ""))
  fileio.atomic_write(os.path.join(workdir, POLICY_SPEC), json.dumps({"tokenizer": tok_file, "add_bos": bool(add_bos)}))


def load_run_tasks(workdir: str | os.PathLike) -> dict | None:
  """The task settings a run was trained with (`write_policy_spec(tasks_config=...)`), or None for a
  run directory written before they were recorded."""
  path = os.path.join(os.fspath(workdir), RUN_TASKS)
  if not os.path.exists(path):
    return None
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def load_run_policy(workdir: str | os.PathLike) -> tuple[ModelConfig, Any, bool]:
  """(model_config, tokenizer, add_bos) of a run directory (see `write_policy_spec`).

  Raises:
    FileNotFoundError: `workdir` has no `POLICY_SPEC` (not a run directory written by the RL trainer).
  """
  workdir = os.fspath(workdir)
  spec_path = os.path.join(workdir, POLICY_SPEC)
  if not os.path.exists(spec_path):
    raise MissingFileError(f"{spec_path} is missing: {workdir} is not a run directory written by the RL trainer")
  with open(spec_path, encoding="utf-8") as f:
    spec = json.load(f)
  with open(os.path.join(workdir, MODEL_CONFIG_FILE), encoding="utf-8") as f:
    config = config_from_json(f.read())
  tok = spec["tokenizer"]
  tokenizer = tokenizer_lib.load_tokenizer(tok if os.path.isabs(tok) else os.path.join(workdir, tok))
  return config, tokenizer, spec.get("add_bos", True)


# ─────────────────────────────────────── the policy an RL run starts from ───────────────────────────────────────


@dataclasses.dataclass
class InitialPolicy:
  """The policy a run starts from: model config, parameters (a pure dict), tokenizer."""

  config: Any
  params: Any
  tokenizer: Any
  add_bos: bool = True


def _tasks_key(tasks: dict) -> str:
  """What the task corpus is a function of: the tasks config (as a dict) and the size and time of every file
  it names."""
  files = []

  def walk(value):
    if isinstance(value, dict):
      for v in value.values():
        walk(v)
    elif isinstance(value, (list, tuple)):
      for v in value:
        walk(v)
    elif isinstance(value, str) and value and os.path.isfile(value):
      st = os.stat(value)
      files.append((value, st.st_size, st.st_mtime_ns))

  walk(tasks)
  return json.dumps([tasks, files], sort_keys=True, default=str)


def _shared_tasks_key(tasks: dict) -> str:
  """`_tasks_key` for a cache shared by processes whose data directories differ (each test worker has its
  own): the directory's path is replaced by the names and sizes of the files in it."""
  tasks = dict(tasks)
  data_dir = tasks.pop("data_dir", "") or ""
  listing = []
  if data_dir and os.path.isdir(data_dir):
    for folder, _, names in sorted(os.walk(data_dir)):
      for name in sorted(names):
        path = os.path.join(folder, name)
        listing.append((os.path.relpath(path, data_dir), os.path.getsize(path)))
  return json.dumps([_tasks_key(tasks), listing])


_CORPUS_TOKENIZERS: dict[tuple[str, int], bytes] = {}
# A directory where trained corpus tokenizers are kept across processes (the test suite points it into its
# cache, whose key covers the code that makes the corpus): unset, each process trains its own.
TOKENIZER_CACHE_ENV = "ARENA_JAX_TOKENIZER_CACHE"


def _corpus_tokenizer(tasks_config, vocab_size: int) -> bytes:
  """The SentencePiece model (bytes) trained on the task corpus of `tasks_config`. The same corpus gives the
  same model, so a process trains it once per corpus (tests start many random-init runs on one), and with
  `$ARENA_JAX_TOKENIZER_CACHE` set, once per corpus for every process that shares the directory."""
  tasks = tasks_config.to_dict()
  key = (_tasks_key(tasks), vocab_size)
  if key in _CORPUS_TOKENIZERS:
    return _CORPUS_TOKENIZERS[key]
  cache_dir = os.environ.get(TOKENIZER_CACHE_ENV)
  cached = None
  if cache_dir:
    digest = hashlib.sha256(f"{_shared_tasks_key(tasks)} {vocab_size}".encode()).hexdigest()[:20]
    cached = pathlib.Path(cache_dir) / f"corpus-{digest}.model"
    if cached.is_file():
      _CORPUS_TOKENIZERS[key] = cached.read_bytes()
      return _CORPUS_TOKENIZERS[key]
  corpus = tasks_lib.corpus(tasks_config, max_examples_per_task=2000)
  _CORPUS_TOKENIZERS[key] = SentencePieceTokenizer.train(corpus, vocab_size=vocab_size).model_proto
  if cached is not None:
    try:
      cached.parent.mkdir(parents=True, exist_ok=True)
      fileio.atomic_write(cached, _CORPUS_TOKENIZERS[key])  # atomic: a reader never sees half a model
    except OSError:
      pass  # a read-only cache costs only the retraining
  return _CORPUS_TOKENIZERS[key]


def initial_policy(config, workdir: str, mesh=None, rules=LOGICAL_AXIS_RULES) -> InitialPolicy:
  """The starting policy of `config.init`: a saved policy (SFT) or HF checkpoint, or (tests) a random
  named model with a tokenizer trained on the task corpus and kept in the workdir.

  Its parameters are the masters: stored in `model.weight_dtype` (a bfloat16 or FP8 checkpoint is upcast
  on load), computing in `model.dtype` (`models.with_precision`), placed on `mesh` when given."""
  init, precision = config.init, dict(weight_dtype=config.model.weight_dtype, dtype=config.model.dtype)
  if init.policy_dir or init.hf_path:
    p = load_policy(init.policy_dir or init.hf_path, mesh=mesh, rules=rules, **precision)
    return InitialPolicy(p.config, pure_params(p.model), p.tokenizer, p.add_bos)
  path = os.path.join(workdir, "tokenizer.model")
  if not os.path.exists(path) and parallel.is_main_process():  # the workdir is shared by every host
    tokenizer = SentencePieceTokenizer(_corpus_tokenizer(config.tasks, init.tokenizer_vocab))
    os.makedirs(workdir, exist_ok=True)
    tokenizer.save(path)
  parallel.barrier("tokenizer")
  tokenizer = SentencePieceTokenizer.load(path)
  model_config = with_precision(
    get_model_config(init.random_model).replace(vocab_size=tokenizer.vocab_size), **precision
  )
  tokenizer.check_vocab(model_config.vocab_size)
  return InitialPolicy(model_config, pure_params(init_model(model_config, seed=config.seed)), tokenizer)


# ─────────────────────────────────────── a LoRA run's weights ───────────────────────────────────────

LORA_FILE = "lora.json"  # in a LoRA run directory: the adapters' spec and the base they are merged onto


def write_lora_spec(workdir: str | os.PathLike, spec, config) -> None:
  """Records what a LoRA run's checkpoints (adapters alone) are merged onto: `spec` (a `models.LoraSpec`) and
  the base, `config.init`'s policy directory or HF checkpoint (its absolute path), or its random model (its seed:
  `init_model` is deterministic)."""
  init = config.init
  if init.policy_dir or init.hf_path:
    base = {"path": str(pathlib.Path(pretrained.resolve(init.policy_dir or init.hf_path)).expanduser().absolute())}
  else:
    base = {"random_model": init.random_model, "seed": int(config.seed)}
  record = {"rank": spec.rank, "alpha": spec.alpha, "targets": spec.targets, "base": base}
  fileio.atomic_write(os.path.join(os.fspath(workdir), LORA_FILE), json.dumps(record, indent=2))


def read_lora_spec(workdir: str | os.PathLike) -> tuple[Any, dict] | None:
  """(`models.LoraSpec`, base record) of a LoRA run directory (`write_lora_spec`), or None for a full one."""
  from arena_jax.models import LoraSpec  # pylint: disable=g-import-not-at-top

  path = os.path.join(os.fspath(workdir), LORA_FILE)
  if not os.path.exists(path):
    return None
  with open(path, encoding="utf-8") as f:
    record = json.load(f)
  return LoraSpec(rank=record["rank"], alpha=record["alpha"], targets=record["targets"]), record["base"]


def lora_base_params(base: dict, model_config: ModelConfig, mesh=None, rules=LOGICAL_AXIS_RULES) -> dict:
  """The frozen base weights a LoRA run recorded (`write_lora_spec`), in `model_config`'s storage dtype.

  Raises:
    MissingFileError: the recorded base checkpoint is gone (named, with what to do).
  """
  if "path" in base:
    if not os.path.exists(base["path"]):
      raise MissingFileError(
        f"{base['path']}: the base this LoRA run's adapters apply to is missing; restore it there, or save merged "
        "weights with checkpoint.save_merged=True"
      )
    loaded = load_policy(base["path"], mesh=mesh, rules=rules, weight_dtype=model_config.param_dtype)
    return pure_params(loaded.model)
  params = pure_params(init_model(model_config, seed=base["seed"]))
  return params if mesh is None else jax.device_put(params, param_shardings(abstract_model(model_config), mesh, rules))


def restore_run_params(
  workdir: str | os.PathLike, step: int, model_config: ModelConfig | None = None, *, target=None, host: bool = False
) -> dict:
  """The policy's weights at checkpoint `step` of a run directory, alone (`Checkpointer.restore_params`, verified).

  A full run: the checkpointed parameters. A LoRA run (`LORA_FILE`): its merged weights when the step saved them
  (`checkpoint.save_merged`), else its adapters merged onto the recorded base (`lora_base_params`,
  `models.merge_adapters`: W + (α/r)·A·B in float32, stored in W's dtype).

  Args:
    target: the parameters' pure dict of `jax.ShapeDtypeStruct`s with shardings (None: as saved, on this
      process's first device); `host`: NumPy arrays on this host (`Checkpointer.restore_params`).
  """
  from arena_jax.models import merge_adapters  # pylint: disable=g-import-not-at-top
  from arena_jax.train import checkpoint  # pylint: disable=g-import-not-at-top

  ckpt = checkpoint.Checkpointer(os.path.join(os.fspath(workdir), "checkpoints"))
  try:
    lora = read_lora_spec(workdir)
    if lora is None:
      return ckpt.restore_params(step, target, host=host)
    if ckpt.has_merged(step):
      return ckpt.restore_params(step, target, host=host, item=checkpoint.MERGED)
    adapters = ckpt.restore_params(step, None, host=host)
  finally:
    ckpt.close()
  spec, base = lora
  model_config = model_config or load_run_policy(workdir)[0]
  merged = jax.jit(merge_adapters, static_argnums=2)(lora_base_params(base, model_config), adapters, spec)
  if host:
    return jax.device_get(merged)
  if target is not None and all(getattr(t, "sharding", None) is not None for t in jax.tree.leaves(target)):
    return jax.device_put(merged, jax.tree.map(lambda t: t.sharding, target))
  return merged
