"""Inputs checked where they enter: a JSONL file or an HF checkpoint that is malformed
gives one error naming the file, the line or tensor, and the field — never a bare ValueError,
RecursionError, ZeroDivisionError, MemoryError, nor data that loads and silently means something else."""

import json
import os
import struct

import numpy as np
import pytest

from arena_jax import fileio, models, tasks
from arena_jax.errors import UserError

# ───────────────────────────────────────────── JSONL ─────────────────────────────────────────────


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_jsonl_rejects_non_finite_numbers(literal, tmp_path):
  """Python's JSON reader takes these; two NaN answers would then be the text "NaN" and score as equal."""
  path = tmp_path / "d.jsonl"
  path.write_text(
    f'{{"question": "1 + 1?", "answer": 2}}\n{{"question": "0 / 0?", "answer": {literal}}}\n', encoding="utf-8"
  )
  with pytest.raises(tasks.DataError, match=rf"d\.jsonl:2: answer: non-finite number {literal}"):
    tasks.load_jsonl(str(path))


def test_every_malformed_row_is_reported_as_path_line_field_problem(tmp_path):
  path = tmp_path / "d.jsonl"
  rows = [
    '{"question": "ok?", "answer": 1}',  # 1 fine
    '{"question": "deep?", "answer": ' + "[" * 100_000 + "]" * 100_000 + "}",  # 2 RecursionError before
    '{"question": "big?", "answer": ' + "9" * 5000 + "}",  # 3 ValueError (int digits) before
    '{"question": "sur\\ud800rogate?", "answer": 1}',  # 4 UnicodeEncodeError later, before
    '{"question": "nan?", "answer": 1, "weight": NaN}',  # 5 a NaN in a field the task does not use
    '{"question": "missing answer?"}',  # 6
    '{"question": "also ok?", "answer": "x"}',  # 7 fine
  ]
  path.write_text("\n".join(rows) + "\n", encoding="utf-8")
  with pytest.raises(tasks.DataError) as info:
    tasks.load_jsonl(str(path))
  message = str(info.value)
  assert f"{path}: 5 malformed rows" in message, message
  for line, needle in [
    (2, "malformed JSON (nested too deeply)"),
    (3, "malformed JSON"),
    (4, "question: unpaired surrogate '\\ud800'"),
    (5, "weight: non-finite number NaN"),
    (6, "answer: missing field"),
  ]:
    assert f"{path}:{line}: {needle}" in message, (line, message)
  assert f"{path}:1:" not in message and f"{path}:7:" not in message


def test_strict_input_files_report_every_bad_row(tmp_path):
  """`fileio.read_jsonl(strict=True)` (judge_pairs / judge_traces inputs) lists each bad line."""
  path = tmp_path / "pairs.jsonl"
  path.write_bytes(
    b'{"problem": "p", "trace_a": "a", "trace_b": "b"}\n'
    + b'{"problem": "p", "trace_a": "a", "trace_b": NaN}\n'
    + b'[' * 50_000
    + b'\n'
    + b'{"problem": "\xff", "trace_a": "a", "trace_b": "b"}\n'
    + b'{"problem": "p", "trace_a": "a"}\n'
  )
  with pytest.raises(UserError) as info:
    fileio.read_jsonl(path, strict=True, required=[("problem",), ("trace_a",), ("trace_b",)])
  message = str(info.value)
  assert isinstance(info.value, ValueError) and f"{path}: 4 malformed rows" in message, message
  for line, needle in [
    (2, "trace_b: non-finite number NaN"),
    (3, "malformed JSON"),
    (4, "not valid UTF-8"),
    (5, "trace_b: the row needs this field"),
  ]:
    assert f"{path}:{line}: {needle}" in message, (line, message)


# ─────────────────────────────────────── HF checkpoints ───────────────────────────────────────

# q_proj is [N·H, D] = [32, 16]: its transpose has the same number of elements, so a reshape accepts it.
CONFIG = models.ModelConfig(
  vocab_size=32, d_model=16, num_layers=1, num_heads=2, num_kv_heads=1, head_dim=16, mlp_dim=24, rms_norm_eps=1e-5
)


def write_safetensors(path, tensors: dict) -> None:
  """A minimal safetensors writer (u64 header length, JSON header, data), float32 only."""
  header, blobs, offset = {}, [], 0
  for name, a in tensors.items():
    data = np.ascontiguousarray(a, np.float32).tobytes()
    header[name] = {"dtype": "F32", "shape": list(np.shape(a)), "data_offsets": [offset, offset + len(data)]}
    blobs.append(data)
    offset += len(data)
  raw = json.dumps(header).encode()
  with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))


def _weights():
  """Random weights of CONFIG by HF name and [out, in] shape (one layer, untied, no biases)."""
  v, d, f, q, kv = 32, 16, 24, 2 * 16, 1 * 16
  p = "model.layers.0."
  shapes = {
    "model.embed_tokens.weight": (v, d),
    "model.norm.weight": (d,),
    "lm_head.weight": (v, d),
    p + "self_attn.q_proj.weight": (q, d),
    p + "self_attn.k_proj.weight": (kv, d),
    p + "self_attn.v_proj.weight": (kv, d),
    p + "self_attn.o_proj.weight": (d, q),
    p + "mlp.gate_proj.weight": (f, d),
    p + "mlp.up_proj.weight": (f, d),
    p + "mlp.down_proj.weight": (d, f),
    p + "input_layernorm.weight": (d,),
    p + "post_attention_layernorm.weight": (d,),
  }
  rng = np.random.default_rng(0)
  return {n: rng.normal(0, 0.25, shape).astype(np.float32) for n, shape in shapes.items()}


@pytest.fixture
def hf_dir(tmp_path):
  """make(config_edits=None, weights=None) → a tiny Llama checkpoint directory."""

  def make(edits=None, weights=None):
    path = tmp_path / "ckpt"
    path.mkdir(exist_ok=True)
    hf = dict(models.config_to_hf(CONFIG, "LlamaForCausalLM"), architectures=["LlamaForCausalLM"])
    hf.update(edits or {})
    (path / "config.json").write_text(json.dumps(hf), encoding="utf-8")
    write_safetensors(path / "model.safetensors", _weights() if weights is None else weights)
    return path

  return make


def test_a_well_formed_checkpoint_loads(hf_dir):
  model = models.load_hf(hf_dir())
  assert model.config.num_heads == 2 and model.config.head_dim == 16


@pytest.mark.parametrize(
  "field, value, needle",
  [
    ("num_attention_heads", 0, "num_attention_heads: must be an integer ≥ 1, got 0"),
    ("num_attention_heads", "2", "num_attention_heads: must be an integer ≥ 1, got '2'"),
    ("hidden_size", 16.5, "hidden_size: must be an integer ≥ 1, got 16.5"),
    ("rms_norm_eps", "1e-5", "rms_norm_eps: must be a finite number > 0"),
    ("tie_word_embeddings", "false", "tie_word_embeddings: must be true or false"),
    ("num_key_value_heads", 3, "num_key_value_heads: 3 does not divide num_attention_heads=2"),
    ("head_dim", None, "hidden_size: 16 is not a multiple of num_attention_heads=3"),
  ],
)
def test_config_types_and_values_are_checked(field, value, needle, hf_dir):
  edits = {field: value}
  if field == "head_dim":
    edits.update(num_attention_heads=3, num_key_value_heads=1)
  path = hf_dir(edits)
  with pytest.raises(UserError, match="config.json: .*" + needle.replace("(", r"\(").replace(")", r"\)")):
    models.load_hf(path)


def test_a_transposed_projection_is_refused_by_name(hf_dir):
  w = _weights()
  w["model.layers.0.self_attn.q_proj.weight"] = w["model.layers.0.self_attn.q_proj.weight"].T  # [16, 32]
  with pytest.raises(
    UserError,
    match=r"tensor 'model.layers.0.self_attn.q_proj.weight' has shape \(16, 32\), "
    r"the config needs \(32, 16\)",
  ):
    models.load_hf(hf_dir(weights=w))


def test_non_finite_weights_are_refused(hf_dir):
  w = _weights()
  w["model.layers.0.mlp.down_proj.weight"][3, 5] = np.inf
  with pytest.raises(UserError, match=r"tensor 'model.layers.0.mlp.down_proj.weight' holds NaN or infinite"):
    models.load_hf(hf_dir(weights=w))


@pytest.mark.parametrize("name", ["../outside.safetensors", "ABS"])
def test_weight_paths_stay_inside_the_checkpoint_directory(name, hf_dir, tmp_path):
  path = hf_dir()
  outside = tmp_path / "outside.safetensors"
  os.replace(path / "model.safetensors", outside)
  name = str(outside) if name == "ABS" else name
  (path / "model.safetensors.index.json").write_text(
    json.dumps({"weight_map": {k: name for k in _weights()}}), encoding="utf-8"
  )
  with pytest.raises(UserError, match=r"weight file .* is outside the checkpoint directory"):
    models.load_hf(path)


def test_an_absurd_header_length_is_a_clear_error(hf_dir):
  path = hf_dir()
  with open(path / "model.safetensors", "r+b") as f:
    f.write(struct.pack("<Q", 1 << 60))
  with pytest.raises(UserError, match=r"model.safetensors: header length 1152921504606846976 exceeds the file"):
    models.load_hf(path)


def test_a_truncated_weight_file_names_the_tensor(hf_dir):
  path = hf_dir()
  size = os.path.getsize(path / "model.safetensors")
  os.truncate(path / "model.safetensors", size - 100)
  with pytest.raises(UserError, match=r"model.safetensors: tensor '\S+': data_offsets \[\d+, \d+\] are not inside"):
    models.load_hf(path)
