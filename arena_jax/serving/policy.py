"""The policy a server serves: any policy this project can load, as one `ServedPolicy`.

    load_served_policy("runs/demo_arena_live")            an RL run directory: its latest checkpoint
    load_served_policy("runs/demo_arena_live", step=40)   … or a given one
    load_served_policy("exported/")                       a `launch.export` output or any HF directory
    load_served_policy("runs/sft_demo")                   a policy directory (`train.save_policy`)
    load_served_policy("model.gguf") / ("pretrained:smollm2-135m-instruct")

The chat template is the checkpoint's own (its tokenizer's: tokenizer_config.json, or a GGUF's metadata); a policy
without one (the embedded SentencePiece policies) serves `/v1/completions` only.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from typing import Any

from arena_jax import pretrained
from arena_jax.errors import ConfigError
from arena_jax.models import ModelConfig, sampling_config
from arena_jax.sampling import Sampler
from arena_jax.train import checkpoint as checkpoint_lib
from arena_jax.train import policy_io


@dataclasses.dataclass(frozen=True)
class ServedPolicy:
  """A loaded policy and what the server says about it.

  Attributes:
    name: the model name the server lists and requests must give (`/v1/models`).
    config: the sampler's model config (weights in the compute dtype).
    params: the pure parameter dict, placed for the sampler.
    tokenizer: `encode` / `decode` / `apply_chat_template` (`arena_jax.tokenizer`).
    add_bos: the prompt convention of `/v1/completions` text prompts (a chat template writes its own).
    context: the most prompt + completion tokens a request may use.
    source: what was loaded (a path; with `step` for a run directory).
    step: the checkpoint step of a run directory, else None.
  """

  name: str
  config: ModelConfig
  params: Any
  tokenizer: Any
  add_bos: bool
  context: int
  source: str
  step: int | None = None

  @property
  def stop_tokens(self) -> tuple[int, ...]:
    """The tokens that end a completion: the tokenizer's EOS (an instruct checkpoint's end of turn)."""
    return (int(self.tokenizer.eos_id),)

  @property
  def pad_id(self) -> int:
    return int(self.tokenizer.pad_id if self.tokenizer.pad_id is not None else self.tokenizer.eos_id)

  @property
  def has_chat_template(self) -> bool:
    return bool(getattr(self.tokenizer, "chat_template", None))


def _is_run_dir(path: pathlib.Path) -> bool:
  return (path / policy_io.POLICY_SPEC).exists() and (path / "checkpoints").is_dir()


def load_served_policy(
  source: str | os.PathLike, *, step: int | None = None, name: str = "", context: int = 0
) -> ServedPolicy:
  """Loads `source` (module docstring) for serving.

  Args:
    source: an RL run directory, a policy directory, an HF directory, a `.gguf` file or `pretrained:<name>`.
    step: a run directory's checkpoint (None: its latest); refused for anything else.
    name: the served model name (default: the directory's or file's name, or the pretrained name).
    context: the most prompt + completion tokens (0: the checkpoint's `max_position_embeddings`).

  Raises:
    MissingFileError: `source` is none of these, or the run has no such checkpoint (named).
    ConfigError: `step` for something other than a run directory.
  """
  raw = os.fspath(source)
  path = pathlib.Path(pretrained.resolve(raw)).expanduser().absolute()
  default_name = raw.split(":", 1)[1] if raw.startswith("pretrained:") else path.stem if path.is_file() else path.name
  if path.is_dir() and _is_run_dir(path):
    config, tokenizer, add_bos = policy_io.load_run_policy(path)
    step = checkpoint_lib.resolve_step(path, step)
    params = policy_io.restore_run_params(path, step, config)  # a LoRA run's: merged onto its base
    source_text = f"{path} (step {step})"
  else:
    if step is not None:
      raise ConfigError(
        f"step = {step} is for an RL run directory; {path} is not one (it has no {policy_io.POLICY_SPEC})"
      )
    loaded = policy_io.load_policy(path)
    config, tokenizer, add_bos, params = loaded.config, loaded.tokenizer, loaded.add_bos, loaded.model
    source_text = str(path)
  config = sampling_config(config)
  # The sampler's layout (weights cast to the compute dtype once, here).
  params = Sampler(config=config, max_new_tokens=1).shard_params(params)
  return ServedPolicy(
    name=name or default_name,
    config=config,
    params=params,
    tokenizer=tokenizer,
    add_bos=bool(add_bos),
    context=int(context or config.max_position_embeddings),
    source=source_text,
    step=step,
  )
