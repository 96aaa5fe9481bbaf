"""The safetensors reader: memory-mapped arrays, tensor by tensor, without torch.

A .safetensors file is a u64 header length, a JSON header (each tensor's dtype, shape and byte offsets) and
the data. Each tensor is a view into one `np.memmap` of the data (bfloat16 and float8 through ml_dtypes), so
a checkpoint larger than RAM is read only as its tensors are placed. The header is checked against its file
before any view is made (`_check_header`), and the files an index names must lie inside the checkpoint's
directory (`confined_file`).
"""

from __future__ import annotations

import json
import os
import pathlib
import struct

import ml_dtypes
import numpy as np

from arena_jax.models.hf.checks import InvalidCheckpointError, UnsupportedCheckpointError, is_int

MAX_HEADER_BYTES = 100 << 20  # the safetensors format's own limit on the JSON header
_ST_DTYPES = {
  "F64": np.float64,
  "F32": np.float32,
  "F16": np.float16,
  "BF16": ml_dtypes.bfloat16,
  "I64": np.int64,
  "I32": np.int32,
  "I16": np.int16,
  "I8": np.int8,
  "U8": np.uint8,
  "BOOL": np.bool_,
  "F8_E4M3": ml_dtypes.float8_e4m3fn,
  "F8_E5M2": ml_dtypes.float8_e5m2,
}


def confined_file(directory: pathlib.Path, name, where: str) -> pathlib.Path:
  """`directory / name` for a weight file named by the checkpoint itself (its index), refused when the
  name could reach outside the directory (absolute, `..`, not a .safetensors file). Symlinks inside
  are followed as they are (a Hugging Face cache links its snapshot files to blobs beside them)."""
  if not isinstance(name, str) or not name:
    raise InvalidCheckpointError(f"{where}: a weight file name must be a non-empty string, got {name!r:.60}")
  parts = pathlib.PurePosixPath(name.replace("\\", "/")).parts
  if os.path.isabs(name) or name.startswith(("/", "\\")) or ".." in parts or not name.endswith(".safetensors"):
    raise InvalidCheckpointError(
      f"{where}: weight file {name!r} is outside the checkpoint directory {directory} "
      "(or not a .safetensors file); the index may name only files inside it"
    )
  return directory / name


def _check_header(path: pathlib.Path, header, data_len: int) -> None:
  """The safetensors header against its file: sizes, offsets inside the data, shape × dtype = bytes."""
  if not isinstance(header, dict):
    raise InvalidCheckpointError(f"{path}: the safetensors header is not a JSON object")
  for name, info in header.items():
    if name == "__metadata__":
      continue
    where = f"{path}: tensor {name!r}"
    if not isinstance(info, dict):
      raise InvalidCheckpointError(f"{where}: header entry is not an object")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not (isinstance(shape, list) and all(is_int(d) and d >= 0 for d in shape)):
      raise InvalidCheckpointError(f"{where}: shape must be a list of integers ≥ 0, got {shape!r:.60}")
    if not (
      isinstance(offsets, list)
      and len(offsets) == 2
      and all(is_int(o) for o in offsets)
      and 0 <= offsets[0] <= offsets[1] <= data_len
    ):
      raise InvalidCheckpointError(
        f"{where}: data_offsets {offsets!r:.60} are not inside the file's {data_len} "
        "bytes of data (a truncated or damaged file)"
      )
    if dtype in _ST_DTYPES:
      size = int(np.prod(shape, dtype=np.int64)) * np.dtype(_ST_DTYPES[dtype]).itemsize
      if offsets[1] - offsets[0] != size:
        raise InvalidCheckpointError(
          f"{where}: {offsets[1] - offsets[0]} bytes for shape {shape} of {dtype} ({size} bytes)"
        )


def read_safetensors(path: str | os.PathLike) -> dict[str, np.ndarray]:
  """Memory-mapped arrays of one .safetensors file (format: u64 header size, JSON header, data)."""
  path = pathlib.Path(path)
  size = os.path.getsize(path)
  with open(path, "rb") as f:
    if size < 8:
      raise InvalidCheckpointError(f"{path}: {size} bytes, too short for a safetensors file")
    (n,) = struct.unpack("<Q", f.read(8))
    if n > min(size - 8, MAX_HEADER_BYTES):
      raise InvalidCheckpointError(
        f"{path}: header length {n} exceeds the file's {size - 8} bytes after the length "
        f"(or the format's {MAX_HEADER_BYTES}): a truncated or damaged file"
      )
    try:
      header = json.loads(f.read(n))
    except (ValueError, RecursionError) as e:
      raise InvalidCheckpointError(f"{path}: the safetensors header is not valid JSON ({e!r:.120})") from None
  _check_header(path, header, size - 8 - n)
  data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
  out = {}
  for name, info in header.items():
    if name == "__metadata__":
      continue
    if info["dtype"] not in _ST_DTYPES:
      raise UnsupportedCheckpointError(f"{path.name}: tensor {name} has unsupported dtype {info['dtype']}")
    start, end = info["data_offsets"]
    out[name] = data[start:end].view(_ST_DTYPES[info["dtype"]]).reshape(info["shape"])
  return out


def read_weights(path: pathlib.Path) -> dict[str, np.ndarray]:
  """Every tensor of a checkpoint directory: the files of model.safetensors.index.json, else
  model.safetensors, else every *.safetensors file."""
  index = path / "model.safetensors.index.json"
  if index.exists():
    try:
      weight_map = json.loads(index.read_text())["weight_map"]
      names = set(weight_map.values())
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
      raise InvalidCheckpointError(f"{index}: not an index with a weight_map object ({e!r:.120})") from None
    files = sorted(str(confined_file(path, name, str(index)).relative_to(path)) for name in names)
  elif (path / "model.safetensors").exists():
    files = ["model.safetensors"]
  else:
    files = sorted(p.name for p in path.glob("*.safetensors"))
  if not files:
    raise FileNotFoundError(f"no safetensors weights in {path} (expected model.safetensors or an index)")
  weights: dict[str, np.ndarray] = {}
  for name in files:
    weights.update(read_safetensors(path / name))
  return weights
