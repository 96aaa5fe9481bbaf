"""GGUF files (llama.cpp's format: one file with the metadata, the tokenizer and the quantised tensors), read
with llama.cpp's own reader, the `gguf` package (imported on use).

    f = open_gguf("SmolLM2-135M-Instruct.Q4_1.gguf")
    f.metadata["llama.block_count"]            # 30: every key-value pair, as Python values
    f.tensor_names()                           # token_embd.weight, blk.0.attn_q.weight, …
    f.tensor("blk.0.attn_q.weight")            # float32 [576, 576], dequantised, row-major [out, in]

This module knows the file format only: what a GGUF architecture means (its config and its tensors' names)
is `arena_jax.models.hf.gguf`'s, and its tokenizer `arena_jax.tokenizer`'s.

Every check runs where the file enters, before anything is built from it: a path that does not exist, a file
that is not GGUF (its magic), a version this reader does not read, a file cut short (a tensor or the header
past its end) and a tensor of a quantisation type that `gguf` cannot dequantise each raise `GGUFError`, one
line that names the file and what is wrong.
"""

from __future__ import annotations

import os
import pathlib
import struct
from typing import Any

import numpy as np

from arena_jax.errors import MissingFileError, UserError

MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)  # what gguf's GGUFReader reads (version 1 files predate 2023-08 and are gone)
# The tensor types `gguf.quants.dequantize` turns into float32 (gguf 0.19; tests/test_gguf_file.py dequantises a
# block of each): plain floats, the legacy block quants, the K-quants, the i-quants and the ternary ones.
SUPPORTED_TYPES = (
  "F32",
  "F16",
  "BF16",
  "F64",
  "Q8_0",
  "Q4_0",
  "Q4_1",
  "Q5_0",
  "Q5_1",
  "Q2_K",
  "Q3_K",
  "Q4_K",
  "Q5_K",
  "Q6_K",
  "IQ2_XXS",
  "IQ2_XS",
  "IQ2_S",
  "IQ3_XXS",
  "IQ3_S",
  "IQ1_S",
  "IQ1_M",
  "IQ4_NL",
  "IQ4_XS",
  "TQ1_0",
  "TQ2_0",
  "MXFP4",
)


class GGUFError(UserError, ValueError):
  """A GGUF file that cannot be read: not GGUF, an unread version, cut short, an unsupported tensor type, an
  unsupported architecture or a missing field. The message names the file."""


def is_gguf(path: str | os.PathLike) -> bool:
  """Whether `path` names a GGUF file (by its suffix: a directory or another file is not one)."""
  return pathlib.Path(path).suffix.lower() == ".gguf"


def _check_header(path: pathlib.Path) -> None:
  if not path.exists():
    raise MissingFileError(f"{path}: no such GGUF file")
  if not path.is_file():
    raise GGUFError(f"{path}: not a file (a GGUF model is one .gguf file)")
  with open(path, "rb") as f:
    head = f.read(8)
  if len(head) < 8:
    raise GGUFError(f"{path}: {len(head)} bytes, too short to be GGUF (cut short?)")
  if head[:4] != MAGIC:
    raise GGUFError(f"{path}: not a GGUF file (it starts with {head[:4]!r}, a GGUF file with {MAGIC!r})")
  (version,) = struct.unpack("<I", head[4:8])
  if version not in SUPPORTED_VERSIONS:
    raise GGUFError(
      f"{path}: GGUF version {version}; this reader reads versions {', '.join(map(str, SUPPORTED_VERSIONS))}"
    )


class GGUFFile:
  """An open GGUF file (memory-mapped: a tensor is read and dequantised when asked for)."""

  def __init__(self, path: pathlib.Path, reader):
    self.path = path
    self._reader = reader
    self._tensors = {t.name: t for t in reader.tensors}
    self.metadata: dict[str, Any] = {}
    for key, field in reader.fields.items():
      if key.startswith("GGUF."):  # the header's own fields (version, counts), not metadata
        continue
      try:
        self.metadata[key] = field.contents()
      except (ValueError, IndexError, UnicodeDecodeError) as e:
        raise GGUFError(f"{path}: metadata key {key!r} cannot be read ({e!r:.120})") from None

  def tensor_names(self) -> list[str]:
    return list(self._tensors)

  def tensor_type(self, name: str) -> str:
    return self._tensors[name].tensor_type.name

  def tensor_shape(self, name: str) -> tuple[int, ...]:
    """The shape in numpy's (row-major) order, e.g. [out, in] for a projection: GGUF stores ggml's order,
    fastest dimension first."""
    return tuple(int(d) for d in reversed(self._tensors[name].shape.tolist()))

  def tensor(self, name: str, dtype=np.float32) -> np.ndarray:
    """The tensor `name` dequantised to float32 (then cast to `dtype`), in row-major order."""
    t = self._tensors[name]
    from gguf import quants  # pylint: disable=g-import-not-at-top  (the reader's dequantisers)

    kind = t.tensor_type.name
    if kind not in SUPPORTED_TYPES:
      raise GGUFError(
        f"{self.path}: tensor {name!r} is of type {kind}, which is not supported; supported are "
        f"{', '.join(SUPPORTED_TYPES)}"
      )
    if kind in ("F32", "F16", "F64"):
      values = np.asarray(t.data)
    else:
      values = quants.dequantize(np.asarray(t.data), t.tensor_type)
    values = values.reshape(self.tensor_shape(name))
    return np.asarray(values, dtype=dtype)

  def unsupported_types(self) -> dict[str, str]:
    """{tensor name: type} of the tensors this reader cannot dequantise."""
    return {n: t.tensor_type.name for n, t in self._tensors.items() if t.tensor_type.name not in SUPPORTED_TYPES}


def open_gguf(path: str | os.PathLike) -> GGUFFile:
  """Opens and checks a GGUF file: its magic, its version, that every tensor lies inside the file, and that
  every tensor's type can be dequantised.

  Raises:
    MissingFileError: `path` does not exist.
    GGUFError: anything else wrong with the file, in one line that names it.
  """
  path = pathlib.Path(path).expanduser()
  _check_header(path)
  import gguf  # pylint: disable=g-import-not-at-top  (llama.cpp's reader, imported on use)

  size = path.stat().st_size
  try:
    reader = gguf.GGUFReader(path, "r")
  except (ValueError, IndexError, KeyError, struct.error, OverflowError, MemoryError, UnicodeDecodeError) as e:
    raise GGUFError(
      f"{path}: cut short or corrupt: its header cannot be read ({type(e).__name__}: {e!s:.100})"
    ) from None
  for t in reader.tensors:
    end = int(t.data_offset) + int(t.n_bytes)
    if end > size or t.data.size * t.data.itemsize != int(t.n_bytes):
      raise GGUFError(f"{path}: cut short: tensor {t.name!r} ends at byte {end:,} but the file has {size:,} bytes")
  f = GGUFFile(path, reader)
  bad = f.unsupported_types()
  if bad:
    name, kind = next(iter(bad.items()))
    raise GGUFError(
      f"{path}: tensor {name!r} is of type {kind}, which is not supported ({len(bad)} tensor(s) of unsupported "
      f"types); supported are {', '.join(SUPPORTED_TYPES)}"
    )
  return f
