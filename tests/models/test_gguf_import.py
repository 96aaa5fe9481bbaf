"""GGUF import (`arena_jax.gguf_file`, `models.hf.gguf`) on files written here by llama.cpp's own writer: each
tensor type dequantised, the config read from the metadata, Llama's q/k rows un-permuted, and parity with
transformers' GGUF loader (its reference) on Llama, Qwen2 and Qwen3 files; bad files refused in one line that
names the file, before anything is built or written."""

import json

import jax.numpy as jnp
import numpy as np
import pytest

from arena_jax import gguf_file, models
from arena_jax.errors import MissingFileError, UserError
from arena_jax.train import policy_io
from tests.models.gguf_fixtures import write_gguf

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")

# Quantised rows must be whole blocks: 32 values for the legacy quants, 256 for the K-quants.
LEGACY = models.ModelConfig(
  vocab_size=97, d_model=64, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=16, mlp_dim=96, rms_norm_eps=1e-5
)
K_SHAPE = LEGACY.replace(d_model=256, mlp_dim=256, num_heads=4, head_dim=64)


def checkpoint(config, architecture, seed=0):
  """(HF config.json dict, {HF name: float32 array}) of a random checkpoint made by transformers."""
  from tests.models.conftest import random_init  # pylint: disable=g-import-not-at-top

  hf_config = getattr(transformers, architecture.replace("ForCausalLM", "Config"))(
    **models.config_to_hf(config, architecture)
  )
  torch.manual_seed(seed)
  model = random_init(getattr(transformers, architecture)(hf_config).eval())
  weights = {k: v.numpy() for k, v in model.state_dict().items()}
  if config.tie_embeddings:
    weights.pop("lm_head.weight", None)
  return hf_config.to_dict(), weights


def transformers_logits(path, tokens):
  import os  # pylint: disable=g-import-not-at-top

  transformers.logging.set_verbosity_error()
  model = transformers.AutoModelForCausalLM.from_pretrained(
    os.path.dirname(path), gguf_file=os.path.basename(path), dtype=torch.float32
  ).eval()
  with torch.no_grad():
    return model(torch.from_numpy(tokens)).logits.numpy()


def tolerance(logits: np.ndarray, d_model: int) -> float:
  """float32 round-off of two float32 forward passes of the same weights: a few ulps of the logit scale per
  summed term, over the √(d) terms of a dot product's error growth, with a factor of 64 for the depth."""
  return 64 * np.finfo(np.float32).eps * np.sqrt(d_model) * float(np.abs(logits).max())


@pytest.mark.parametrize(
  "architecture, arch, kind, config",
  [
    ("LlamaForCausalLM", "llama", "F32", LEGACY),
    ("LlamaForCausalLM", "llama", "F16", LEGACY.replace(tie_embeddings=True)),
    ("LlamaForCausalLM", "llama", "Q8_0", LEGACY),
    ("LlamaForCausalLM", "llama", "Q4_1", LEGACY.replace(tie_embeddings=True)),
    ("LlamaForCausalLM", "llama", "Q6_K", K_SHAPE),
    ("LlamaForCausalLM", "llama", "Q4_K", K_SHAPE.replace(tie_embeddings=True)),
    ("Qwen2ForCausalLM", "qwen2", "Q8_0", LEGACY.replace(qkv_bias=True, rope_theta=1e6)),
    # transformers' GGUF loader leaves Qwen3's head_dim at its config's default (128): the reference needs it.
    ("Qwen3ForCausalLM", "qwen3", "F32", LEGACY.replace(qk_norm=True, head_dim=128, rope_theta=1e6)),
  ],
)
def test_parity_with_transformers_gguf_loader(tmp_path, architecture, arch, kind, config):
  hf, weights = checkpoint(config, architecture)
  path = write_gguf(tmp_path / f"{arch}-{kind}.gguf", weights, hf, arch=arch, kind=kind)
  model = models.load_hf(path)
  # The config comes from the metadata alone (GGUF stores the norm's epsilon as a float32).
  assert model.config == config.replace(
    max_position_embeddings=model.config.max_position_embeddings, rms_norm_eps=float(np.float32(config.rms_norm_eps))
  )
  tokens = np.random.default_rng(1).integers(0, config.vocab_size, (2, 24))
  ref = transformers_logits(path, tokens)
  ours = np.asarray(model(jnp.asarray(tokens, jnp.int32)))
  assert np.abs(ours - ref).max() <= tolerance(ref, config.d_model), np.abs(ours - ref).max()
  assert (ours.argmax(-1) == ref.argmax(-1)).mean() >= 0.99


def test_llama_q_and_k_rows_are_put_back_in_rotate_half_order(tmp_path):
  """Without the un-permutation the F32 file's q/k would differ from the HF weights it was written from."""
  hf, weights = checkpoint(LEGACY, "LlamaForCausalLM")
  path = write_gguf(tmp_path / "m.gguf", weights, hf)
  _, tensors = models.hf.gguf.read_gguf(path)
  for name in ("model.layers.1.self_attn.q_proj.weight", "model.layers.1.self_attn.k_proj.weight"):
    np.testing.assert_array_equal(np.asarray(tensors[name]), weights[name])
  raw = gguf_file.open_gguf(path).tensor("blk.1.attn_q.weight")
  assert not np.array_equal(raw, weights["model.layers.1.self_attn.q_proj.weight"])


# Error of a block quant, relative to its block's largest |value|: half a step of its grid (the grid of Q8_0 has
# 127 steps from 0 to the largest value, Q5 15 or 31, Q4 7 or 15), with room for the float16 scale's rounding.
BLOCK_ERROR = {"Q8_0": 1 / 127, "Q5_0": 1 / 15, "Q5_1": 1 / 31, "Q4_0": 1 / 7, "Q4_1": 1 / 15}
FLOAT_ERROR = {"F16": 2**-11, "BF16": 2**-8}


@pytest.mark.parametrize("kind", sorted(BLOCK_ERROR) + sorted(FLOAT_ERROR))
def test_each_quantisation_type_dequantises_in_row_major_order(tmp_path, kind):
  rng = np.random.default_rng(0)
  x = rng.normal(size=(6, 128)).astype(np.float32)
  writer = gguf.GGUFWriter(str(tmp_path / "t.gguf"), "llama")
  q = gguf.GGMLQuantizationType[kind]
  writer.add_tensor("w", gguf.quants.quantize(x, q), raw_dtype=q)
  writer.write_header_to_file()
  writer.write_kv_data_to_file()
  writer.write_tensors_to_file()
  writer.close()
  f = gguf_file.open_gguf(tmp_path / "t.gguf")
  assert f.tensor_shape("w") == (6, 128) and f.tensor_type("w") == kind
  y = f.tensor("w")
  assert y.shape == (6, 128) and y.dtype == np.float32
  if kind in FLOAT_ERROR:
    assert np.abs(y - x).max() <= FLOAT_ERROR[kind] * np.abs(x).max()
  else:
    block_max = np.abs(x.reshape(6, 4, 32)).max(-1, keepdims=True)
    err = np.abs(y - x).reshape(6, 4, 32)
    assert (err <= BLOCK_ERROR[kind] * 1.01 * block_max).all(), float((err / block_max).max())


def test_every_supported_type_dequantises():
  """`SUPPORTED_TYPES` is exactly what this `gguf` dequantises: one zero block of each."""
  for kind in gguf_file.SUPPORTED_TYPES:
    q = gguf.GGMLQuantizationType[kind]
    block, size = gguf.GGML_QUANT_SIZES[q]
    raw = np.zeros((1, size), np.uint8)
    if kind in ("F32", "F16", "BF16", "F64"):
      continue
    assert gguf.quants.dequantize(raw, q).shape == (1, block), kind


# ─────────────────────────────────────── bad files ───────────────────────────────────────


@pytest.fixture(scope="module")
def good_file(tmp_path_factory):
  hf, weights = checkpoint(LEGACY, "LlamaForCausalLM")
  path = tmp_path_factory.mktemp("gguf") / "good.gguf"
  return write_gguf(path, weights, hf, kind="Q8_0"), hf, weights


def refused(path, match, kind=UserError):
  """`load_policy(path)` raises `kind`, one line, naming the file and matching `match`."""
  with pytest.raises(kind) as info:
    policy_io.load_policy(path)
  message = str(info.value)
  assert "\n" not in message and str(path) in message, message
  assert match in message, message
  return message


def test_a_truncated_file_is_refused(good_file, tmp_path):
  data = open(good_file[0], "rb").read()
  for cut in (len(data) - 1000, 200, 20):
    bad = tmp_path / f"cut{cut}.gguf"
    bad.write_bytes(data[:cut])
    refused(bad, "cut short")


def test_a_file_that_is_not_gguf_is_refused(tmp_path):
  bad = tmp_path / "model.gguf"
  bad.write_bytes(b"PK\x03\x04" + b"\0" * 64)
  refused(bad, "not a GGUF file")


def test_an_unsupported_version_is_refused(good_file, tmp_path):
  data = bytearray(open(good_file[0], "rb").read())
  data[4:8] = (99).to_bytes(4, "little")
  bad = tmp_path / "v99.gguf"
  bad.write_bytes(bytes(data))
  assert "versions 2, 3" in refused(bad, "GGUF version 99")


def test_an_unsupported_tensor_type_is_refused(good_file, tmp_path):
  _, hf, weights = good_file
  path = write_gguf(tmp_path / "ints.gguf", {"model.norm.weight": weights["model.norm.weight"]}, hf)
  writer = gguf.GGUFWriter(str(tmp_path / "i32.gguf"), "llama")
  writer.add_tensor("token_embd.weight", np.zeros((4, 8), np.int32))
  writer.write_header_to_file()
  writer.write_kv_data_to_file()
  writer.write_tensors_to_file()
  writer.close()
  del path
  message = refused(tmp_path / "i32.gguf", "of type I32, which is not supported")
  assert "Q4_K" in message  # the supported types are named


def test_an_unsupported_architecture_is_refused(good_file, tmp_path):
  _, hf, weights = good_file
  path = write_gguf(tmp_path / "falcon.gguf", weights, hf, arch="falcon", permute_qk=False)
  message = refused(path, "GGUF architecture 'falcon' is not supported")
  assert "llama" in message and "qwen3" in message


def test_a_missing_path_is_refused(tmp_path):
  refused(tmp_path / "nothing.gguf", "no such GGUF file", MissingFileError)


def test_launch_eval_refuses_a_bad_gguf_in_one_line_and_writes_nothing(tmp_path, python_m):
  """As a user types it: one line on stderr naming the file, no traceback, no output directory."""
  bad = tmp_path / "model.gguf"
  bad.write_bytes(b"GGML" + b"\0" * 64)
  out = tmp_path / "eval_out"
  proc = python_m("launch.eval", f"--hf_path={bad}", f"--out_dir={out}")
  assert proc.returncode != 0
  assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
  last = proc.stderr.strip().splitlines()[-1]
  assert str(bad) in last and "not a GGUF file" in last, proc.stderr[-2000:]
  assert not out.exists()


def test_config_json_from_metadata(good_file):
  """The config.json fields a family reads, from the metadata: tied when no output.weight is stored."""
  path, hf, _ = good_file
  ours, _ = models.hf.gguf.read_gguf(path)
  for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads"):
    assert ours[key] == hf[key], key
  assert ours["intermediate_size"] == hf["intermediate_size"] and ours["tie_word_embeddings"] is False
  json.dumps(ours)  # a plain config.json
