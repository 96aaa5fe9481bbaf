"""A checkpoint of an RL run as a Hugging Face checkpoint directory (`arena_jax.export`).

    python -m launch.export --workdir=runs/arena_live --output=hf/arena_live                # the latest step
    python -m launch.export --workdir=runs/arena_live --step=40 --output=hf/step40 --dtype=bfloat16
    vllm serve hf/step40                                                                   # then serve it
    python -m launch.export --gguf=SmolLM2-135M-Instruct.Q4_1.gguf --output=hf/smollm2      # a GGUF, dequantised
    python -m launch.export --gguf=pretrained:smollm2-135m-instruct --output=hf/smollm2     # make real-model's
    python -m launch.export --workdir=runs/lora --adapters --output=hf/lora_adapters         # PEFT's adapters

The directory holds config.json, model.safetensors (sharded with an index above 5 GB), generation_config.json
and the tokenizer (tokenizer.json and tokenizer_config.json: a SentencePiece policy's converted, a HF
checkpoint's copied). Only the parameters of the step are read, onto this host; the architecture is the HF
checkpoint's the run started from, else the plainest family that expresses the model (`--architecture`
chooses another). `--gguf` exports a GGUF file instead (`export.export_gguf`): its weights dequantised into
`--dtype`, its family's config.json, and its tokenizer and chat template as tokenizer.json and
tokenizer_config.json, so that transformers (and vLLM) load it.

A LoRA run (`model.lora.rank` > 0) exports merged weights (its adapters folded into the base it recorded), or with
`--adapters` the adapters alone in PEFT's layout (adapter_config.json, adapter_model.safetensors), which
`PeftModel.from_pretrained(base, dir)` loads onto the HF base.
"""

import os

from absl import flags

from arena_jax import cli
from arena_jax.errors import ConfigError, MissingFileError

_WORKDIR = flags.DEFINE_string("workdir", None, "The RL run directory.")
_GGUF = flags.DEFINE_string(
  "gguf", None, "A .gguf file (or pretrained:<name>, pretrained) to export instead of a run's checkpoint."
)
_OUT = flags.DEFINE_string("output", None, "Where the HF checkpoint directory goes.", required=True)
flags.DEFINE_alias("out_dir", "output")
_STEP = flags.DEFINE_integer("step", None, "The checkpoint step (default: the latest finalised one).")
_DTYPE = flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16", "float16"], "The stored dtype of the weights.")
_ADAPTERS = flags.DEFINE_bool(
  "adapters", False, "A LoRA run: write its adapters alone, in PEFT's layout, instead of merged weights."
)
_ARCH = flags.DEFINE_string(
  "architecture", None, "The HF architecture (e.g. LlamaForCausalLM); default: the run's, else chosen by the config."
)


def _size(n: float) -> str:
  if n < 1000:
    return f"{n:.0f} B"
  for unit in ("KB", "MB", "GB"):
    n /= 1000
    if n < 1000 or unit == "GB":
      return f"{n:.1f} {unit}"


def _check_flags(workdir: str, step: int | None) -> None:
  """A missing run or step, named by its flag, before JAX is imported (seconds)."""
  if not os.path.isdir(workdir):
    raise MissingFileError(f"--workdir={workdir}: no such directory")
  directory = os.path.join(workdir, "checkpoints")
  # Finalised steps only: orbax renames a step's directory to its number when the save is complete.
  steps = sorted(int(d) for d in os.listdir(directory) if d.isdigit()) if os.path.isdir(directory) else []
  if not steps:
    raise MissingFileError(f"--workdir={workdir}: no finalised checkpoint under {directory}")
  if step is not None and step not in steps:
    raise MissingFileError(f"--step={step}: {workdir} has no finalised checkpoint of that step (it has {steps})")


def main(argv):
  del argv
  workdir = _WORKDIR.value
  if bool(workdir) == bool(_GGUF.value):
    raise ConfigError("give one of --workdir (an RL run) and --gguf (a .gguf file)")
  if _GGUF.value:
    path = _GGUF.value
    if path.startswith("pretrained:"):  # a model shipped in a pinned wheel (`make real-model`)
      from arena_jax import pretrained  # pylint: disable=g-import-not-at-top  (JAX: only for this form)

      path = os.fspath(pretrained.resolve(path))
    if not os.path.isfile(path):
      raise MissingFileError(f"--gguf={_GGUF.value}: no such file")
    from arena_jax import export  # pylint: disable=g-import-not-at-top  (JAX: after the flags' checks)

    out = export.export_gguf(path, _OUT.value, dtype=_DTYPE.value)
    _report(f"exported {_GGUF.value} as {out.architecture} ({out.dtype}) to {out.out_dir}:", out)
    return
  _check_flags(workdir, _STEP.value)
  from arena_jax import export  # pylint: disable=g-import-not-at-top  (JAX: after the flags' checks)
  from arena_jax.models.hf.export import InexpressibleError  # pylint: disable=g-import-not-at-top

  try:
    if _ADAPTERS.value:
      out = export.export_adapters(workdir, _OUT.value, step=_STEP.value, architecture=_ARCH.value)
    else:
      out = export.export_checkpoint(
        workdir, _OUT.value, step=_STEP.value, architecture=_ARCH.value, dtype=_DTYPE.value
      )
  except InexpressibleError as e:  # the flag chooses another architecture
    raise ConfigError(f"--architecture={_ARCH.value or '(the default)'}: {e}") from e
  what = "the PEFT adapters" if _ADAPTERS.value else f"{out.architecture} ({out.dtype})"
  _report(f"exported step {out.step} of {workdir} as {what} to {out.out_dir}:", out)


def _report(title: str, out) -> None:
  print(title)
  for name in out.files:
    print(f"  {name:<36} {_size(os.path.getsize(out.out_dir / name)):>10}")
  if "adapter_config.json" in out.files:
    print(f"load it: PeftModel.from_pretrained(base, {str(out.out_dir)!r})")
  else:
    print(f"serve it: vllm serve {out.out_dir}")


if __name__ == "__main__":
  cli.run(main)
