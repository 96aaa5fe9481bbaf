"""A run's checkpoint, or a GGUF file, as a Hugging Face checkpoint directory (`launch.export`).

    export_checkpoint(workdir, out_dir, step=None)   checkpoint `step` of an RL run, with its tokenizer
    export_gguf(path, out_dir)                       a GGUF file, its weights dequantised
    export_adapters(workdir, out_dir, step=None)     a LoRA run's adapters alone, in PEFT's layout
    export_tokenizer(workdir or tokenizer, out_dir)  the tokenizer files alone
    restore_params(workdir, step, model_config)      the parameters of one step, onto this host

The orchestration that reads what `arena_jax.train` writes (a run's policy spec and checkpoints:
`train.policy_io`, `train.checkpoint`) or loads a policy (`policy_io.load_policy`), then hands the parameters,
the model config and the tokenizer to the pure conversion: `arena_jax.models.hf.export` (the weights, config.json)
and `arena_jax.models.hf.tokenizer_files`. It sits above train, beside eval, which reads a run the same way: so
models never imports train (the order of the layers: `arena_jax.LAYERS`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib

import jax
from flax import nnx

from arena_jax.errors import ConfigError, MissingFileError
from arena_jax.gguf_file import open_gguf
from arena_jax import pretrained
from arena_jax.models.config import ModelConfig
from arena_jax.models.hf import export as hf_export
from arena_jax.models.hf import gguf, tokenizer_files
from arena_jax.models.transformer import abstract_model
from arena_jax.train import checkpoint, policy_io


def export_tokenizer(source, out_dir: str | os.PathLike, *, add_bos: bool | None = None, **options) -> list[str]:
  """`models.hf.tokenizer_files.export_tokenizer` (the same arguments: `options` are `chat_template` and
  `model_max_length`) of a tokenizer, or of the tokenizer an RL run directory records, with its prompt convention
  (`policy_io.load_run_policy`: `add_bos` None = the run's); returns the names written."""
  if isinstance(source, (str, os.PathLike)):
    _, source, recorded = policy_io.load_run_policy(source)
    add_bos = recorded if add_bos is None else add_bos
  return tokenizer_files.export_tokenizer(source, out_dir, add_bos=add_bos, **options)


def restore_params(workdir: str | os.PathLike, step: int, model_config: ModelConfig) -> dict:
  """The parameters of checkpoint `step` of a run (a LoRA run's merged weights), alone (not the optimizer state),
  as NumPy arrays on this host (`Checkpointer.restore_params(host=True)`: verified as the trainer verifies a
  restore, the step's manifest, then finite values).

  Raises:
    checkpoint.CheckpointError: the step is damaged or does not restore.
  """
  abstract = nnx.to_pure_dict(nnx.state(abstract_model(model_config)))
  target = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), abstract)
  # A LoRA run's adapters come back merged onto its base (`policy_io.restore_run_params`).
  return policy_io.restore_run_params(pathlib.Path(workdir).absolute(), step, model_config, target=target, host=True)


def export_checkpoint(
  workdir: str | os.PathLike,
  out_dir: str | os.PathLike,
  *,
  step: int | None = None,
  architecture: str | None = None,
  dtype: str = "float32",
  max_shard_bytes: int = hf_export.MAX_SHARD_BYTES,
) -> hf_export.Exported:
  """Exports checkpoint `step` (default: the latest finalised one) of an RL run directory as a HF checkpoint
  with its tokenizer (`models.hf.export.export_params`, `models.hf.tokenizer_files.export_tokenizer`): only
  the parameters are read, onto this host.

  The architecture is `architecture`, else the one of the HF checkpoint the run started from
  (`models.hf.export.source_checkpoint`), else `default_architecture`; a run from a HF checkpoint also keeps
  that checkpoint's special token ids and generation_config.json.

  Raises:
    MissingFileError: `workdir` is not a run directory, has no checkpoint, or not the step.
    checkpoint.CheckpointError: the step is damaged.
    models.hf.export.InexpressibleError: the architecture cannot express the run's model config.
  """
  workdir = pathlib.Path(workdir).expanduser().absolute()
  if not workdir.is_dir():
    raise MissingFileError(f"{workdir}: no such run directory")
  model_config, tokenizer, add_bos = policy_io.load_run_policy(workdir)
  step = checkpoint.resolve_step(workdir, step)
  source = hf_export.source_checkpoint(tokenizer)
  if source is not None and source[0].resolve() == pathlib.Path(out_dir).expanduser().resolve():
    raise hf_export.ExportError(f"{out_dir} is the HF checkpoint the run started from: export to another directory")
  architecture = architecture or (source[2] if source else hf_export.default_architecture(model_config))
  hf_export.check_expressible(model_config, architecture)  # before the checkpoint is read
  params = restore_params(workdir, step, model_config)
  token_ids, generation_config = tokenizer_files.special_token_ids(tokenizer), None
  if source is not None:  # the checkpoint's own ids (a list of EOS ids, a null pad) and generation settings
    directory, decoder, _ = source
    token_ids.update({k: decoder[k] for k in token_ids if k in decoder})
    if (directory / "generation_config.json").is_file():
      generation_config = json.loads((directory / "generation_config.json").read_text(encoding="utf-8"))
  exported = hf_export.export_params(
    params,
    model_config,
    out_dir,
    architecture=architecture,
    dtype=dtype,
    special_token_ids=token_ids,
    generation_config=generation_config,
    max_shard_bytes=max_shard_bytes,
  )
  names = tokenizer_files.export_tokenizer(
    tokenizer, exported.out_dir, add_bos=add_bos, model_max_length=model_config.max_position_embeddings
  )
  return dataclasses.replace(exported, files=exported.files + tuple(names), step=step)


def export_adapters(
  workdir: str | os.PathLike, out_dir: str | os.PathLike, *, step: int | None = None, architecture: str | None = None
) -> hf_export.Exported:
  """Exports the adapters of checkpoint `step` (default: the latest) of a LoRA run in PEFT's layout
  (`models.lora.export_peft_adapters`: adapter_model.safetensors, adapter_config.json), for
  `PeftModel.from_pretrained(base, out_dir)` on the base the run trained (`base_model_name_or_path`: its recorded
  path; a GGUF base loads in transformers as `launch.export --gguf` writes it). Only the adapters are read.

  Raises:
    MissingFileError: `workdir` is not a run directory, has no checkpoint, or not the step.
    ConfigError: the run is not a LoRA run (`model.lora.rank` = 0).
  """
  from arena_jax.models import lora as lora_lib  # pylint: disable=g-import-not-at-top

  workdir = pathlib.Path(workdir).expanduser().absolute()
  if not workdir.is_dir():
    raise MissingFileError(f"{workdir}: no such run directory")
  model_config, tokenizer, _ = policy_io.load_run_policy(workdir)
  lora = policy_io.read_lora_spec(workdir)
  if lora is None:
    raise ConfigError(f"{workdir} is a full-parameter run (no {policy_io.LORA_FILE}): it has no adapters to export")
  spec, base = lora
  step = checkpoint.resolve_step(workdir, step)
  source = hf_export.source_checkpoint(tokenizer)
  architecture = architecture or (source[2] if source else hf_export.default_architecture(model_config))
  ckpt = checkpoint.Checkpointer(str(workdir / "checkpoints"))
  try:
    adapters = ckpt.restore_params(step, None, host=True)
  finally:
    ckpt.close()
  files = lora_lib.export_peft_adapters(
    adapters, spec, model_config, out_dir, architecture=architecture, base_model=base.get("path", "")
  )
  out = pathlib.Path(out_dir).expanduser().absolute()
  return hf_export.Exported(out_dir=out, architecture=architecture, dtype="float32", files=tuple(files), step=step)


def export_gguf(path: str | os.PathLike, out_dir: str | os.PathLike, *, dtype: str = "float32") -> hf_export.Exported:
  """A GGUF file as a HF checkpoint directory that transformers loads: its weights dequantised (`models.hf.gguf`)
  and stored in `dtype`, config.json of its family (Llama, Qwen2, Qwen3), generation_config.json with its special
  token ids, and its tokenizer and chat template as tokenizer.json and tokenizer_config.json.

  Raises:
    gguf_file.GGUFError / MissingFileError: the file cannot be read (`models.hf.gguf.read_gguf`).
  """
  path = pretrained.resolve(path)
  policy = policy_io.load_policy(path, weight_dtype="float32")
  return export_policy(
    nnx.to_pure_dict(nnx.state(policy.model, nnx.Param)),
    policy.config,
    policy.tokenizer,
    out_dir,
    architecture=source_architecture(path),
    dtype=dtype,
  )


def source_architecture(path: str | os.PathLike) -> str | None:
  """The HF architecture of a policy source: a GGUF file's family, a HF directory's config.json `architectures[0]`;
  None for anything else (a policy directory: `default_architecture` of its config)."""
  path = pathlib.Path(pretrained.resolve(path))
  if path.is_file():
    return gguf.architecture_of(open_gguf(path)).architecture
  config_json = path / "config.json"
  if config_json.is_file():
    return (json.loads(config_json.read_text(encoding="utf-8")).get("architectures") or [None])[0]
  return None


def export_policy(
  params,
  model_config: ModelConfig,
  tokenizer,
  out_dir: str | os.PathLike,
  *,
  architecture: str | None = None,
  dtype: str = "float32",
  chat_template: str | None = None,
) -> hf_export.Exported:
  """Parameters in memory (`models.pure_params`), with their config and tokenizer, as a HF checkpoint directory
  that transformers loads (`export_gguf`'s layout); `chat_template` for a tokenizer without one
  (`tokenizer_files.export_tokenizer`)."""
  exported = hf_export.export_params(
    jax.device_get(params),
    model_config,
    out_dir,
    architecture=architecture,
    dtype=dtype,
    special_token_ids=tokenizer_files.special_token_ids(tokenizer),
  )
  names = tokenizer_files.export_tokenizer(
    tokenizer, exported.out_dir, chat_template=chat_template, model_max_length=model_config.max_position_embeddings
  )
  return dataclasses.replace(exported, files=exported.files + tuple(names))


__all__ = [
  "export_adapters",
  "export_checkpoint",
  "export_gguf",
  "export_policy",
  "export_tokenizer",
  "restore_params",
  "source_architecture",
]
