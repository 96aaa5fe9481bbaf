"""Training that moves a real policy: float32 master weights under bfloat16 compute, the stop on
an update that rounds away, and float32 masters against a float32 run's update.

The paper trains at a constant lr of 4e-7 (SPEC §9). A bfloat16 weight has 8 significant bits: an AdamW step
of ≈ lr on |w| ≈ 0.02-0.1 is 2⁻¹⁵ … 2⁻¹⁸ of the weight, far below half its spacing (2⁻⁹ … 2⁻⁸), so it rounds
away. float32 masters keep 24 bits.
"""

import json
import zlib

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from arena_jax import models, tasks
from arena_jax.train import Checkpointer, read_metrics, train
from arena_jax.train import step as step_lib
import configs
from arena_jax.train.config import base_config
from arena_jax.train.step import NoOpUpdateError
from tests.train.conftest import smoke_config
from tests.train.test_real_smoke import PROBLEMS, ROOT, TINY, _init, _tokenizer

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def _coin(self, examples, completions):
  """Groups of a random policy's texts get diverse rewards (a hash of the text), hence non-zero advantages."""
  return [float(zlib.crc32(c.encode()) % 2) for c in completions]


def _bf16_qwen3(path):
  """A tiny Qwen3 checkpoint stored in bfloat16, embeddings tied (as Qwen3-0.6B's): every weight element,
  the embedding rows included, then gets a gradient through the output projection."""
  config = TINY.replace(qk_norm=True, rope_theta=1e6, tie_embeddings=True)
  hf = transformers.Qwen3Config(**models.config_to_hf(config, "Qwen3ForCausalLM"), eos_token_id=1)
  _init(transformers.Qwen3ForCausalLM(hf)).to(torch.bfloat16).save_pretrained(path)
  _tokenizer(
    path,
    ["<|endoftext|>", "<|im_end|>", "<|im_start|>", "<think>", "</think>"],
    {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
  )
  (path / "chat_template.jinja").write_text((ROOT / "tests/data/chat_templates/qwen3.jinja").read_text())
  assert json.loads((path / "config.json").read_text()).get("dtype", "bfloat16") == "bfloat16"


def _real_smoke(tmp_path, monkeypatch):
  checkpoint, data = tmp_path / "checkpoint", tmp_path / "data"
  checkpoint.mkdir()
  data.mkdir()
  _bf16_qwen3(checkpoint)
  for split, rows in (("train", PROBLEMS[:12]), ("test", PROBLEMS[12:])):
    (data / f"{split}.jsonl").write_text("".join(json.dumps({"question": q, "answer": a}) + "\n" for q, a in rows))
  monkeypatch.setattr(tasks.JsonlTask, "verify_batch", _coin)
  c = configs.get_config("real_qwen3_8b", "smoke")
  assert c.optim.lr == 4e-7 and c.model.weight_dtype == "float32" and c.model.dtype == "bfloat16"
  c.init.hf_path = str(checkpoint)
  c.tasks.jsonl.train_path, c.tasks.jsonl.test_path = str(data / "train.jsonl"), str(data / "test.jsonl")
  c.tasks.data_dir = str(tmp_path / "tfds")
  c.optim.warmup_steps = 0  # the first update runs at the paper's lr
  c.num_steps, c.checkpoint.every = 1, 1
  return c, checkpoint


@pytest.mark.slow  # the real config's smoke path on a mesh
@pytest.mark.mesh
@pytest.mark.heavy  # ≈ 1 min: the real config's smoke path (HF import, chat template, 4 × 2 mesh, embedded judge)
def test_a_bf16_checkpoint_at_the_papers_lr_moves_its_float32_masters(tmp_path, monkeypatch):
  c, checkpoint = _real_smoke(tmp_path, monkeypatch)
  workdir = tmp_path / "run"
  train(c, str(workdir))
  (row,) = read_metrics(str(workdir))
  assert row["adv/nonzero_fraction"] > 0 and row["grad_norm"] > 0
  # One update at lr 4e-7 changes ≥ 99% of the masters' elements (a bf16 master: about 0.5%).
  assert row["update/changed"] >= 0.99, row
  assert row["update/changed"] == pytest.approx(row["update/moved"], abs=1e-3)
  # The checkpoint holds float32 masters: the bf16 weights upcast, each moved by an AdamW step of ≈ lr.
  ckpt = Checkpointer(str(workdir / "checkpoints"))
  try:
    state, _ = ckpt.restore(1, None)
  finally:
    ckpt.close()
  before = models.pure_params(models.load_hf(checkpoint, param_dtype="float32"))
  after = state["params"]
  flat_before, flat_after = jax.tree.leaves(before), jax.tree.leaves(after)
  assert {str(x.dtype) for x in flat_after} == {"float32"}
  changed = sum(int(np.sum(np.asarray(a) != np.asarray(b))) for a, b in zip(flat_before, flat_after))
  assert changed / sum(x.size for x in flat_before) >= 0.99
  # Adam's first step is lr · g / (|g| + ε): at most lr, plus the float32 rounding of w + step (half a spacing).
  for a, b in zip(flat_before, flat_after):
    a, b = np.asarray(a), np.asarray(b)
    assert np.all(np.abs(b - a) <= c.optim.lr + np.spacing(np.abs(a)) / 2 * 1.0001)
  mu = jax.tree.leaves(state["opt_state"])
  assert all(str(np.asarray(x).dtype) in ("float32", "int32") for x in mu)  # float32 moments


@pytest.mark.slow  # runs of their own dtype
def test_bfloat16_masters_at_a_small_lr_stop_at_the_first_update(data_dir, coin_verifier, tmp_path):
  """An explicit weight_dtype=bfloat16 with the paper's lr: the first update at the peak lr rounds away,
  and the run stops with one line naming optim.lr and model.weight_dtype and the shortfall."""
  c = smoke_config("rlvr", data_dir)
  c.model.weight_dtype, c.optim.lr, c.optim.warmup_steps = "bfloat16", 4e-7, 1
  c.num_steps, c.checkpoint.every = 4, 1
  with pytest.raises(NoOpUpdateError) as e:
    train(c, str(tmp_path))
  msg = str(e.value)
  assert "step 2:" in msg  # the warm-up step (lr 0) is not judged; the first step at 4e-7 is
  assert "optim.lr=4e-07" in msg and "model.weight_dtype=bfloat16" in msg and "× below" in msg
  assert "\n" not in msg
  # What was done before is kept: step 1's checkpoint and metrics.
  assert [r["step"] for r in read_metrics(str(tmp_path))] == [1]
  # The same run with float32 masters (the default) trains: its step 2 (the first at the peak lr) moves them.
  c.model.weight_dtype, c.num_steps, c.checkpoint.every = "float32", 2, 2
  train(c, str(tmp_path / "f32"))
  rows = read_metrics(str(tmp_path / "f32"))
  assert len(rows) == 2 and rows[1]["update/changed"] > 0.9


def _rollout(config, rows=8, p=6, n=10, seed=0):
  rng = np.random.default_rng(seed)
  lengths = rng.integers(3, n + 1, rows)
  return step_lib.rows_to_rollout(
    rng.integers(3, config.vocab_size, (rows, p)),
    np.full(rows, p),
    rng.integers(3, config.vocab_size, (rows, n)),
    lengths,
    -rng.uniform(0.5, 3.0, (rows, n)),
    rng.normal(size=rows),
    np.zeros(rows, bool),
  )


@pytest.mark.parametrize("compute", ["bfloat16", "float32"])
def test_float32_masters_under_bf16_compute_match_a_float32_update(compute):
  """One update (plain SGD, so the update is −lr · g and compares linearly) of float32 masters computing in
  `compute`, against the same update computed in float32 throughout.

  The tolerance follows from bf16: each matmul rounds its two operands and its output to 8 significant bits
  (relative error ≤ 2⁻⁹ each), and a gradient passes through ≤ 2 · (3 matmuls per sublayer) · layers + 2
  of them forward and back; errors of independent roundings add in norm, so the relative error of the whole
  update stays below √(3 · stages) · 2⁻⁹ · 4 (a factor 4 of headroom for correlated roundings). float32 compute
  must agree to float32 round-off (the same program)."""
  base = models.tiny_config()
  masters = models.with_precision(base, weight_dtype="float32", dtype=compute)
  params = models.pure_params(models.init_model(base, seed=3))
  loss_cfg = base_config().loss
  lr = 1e-2
  opt = optax.sgd(lr)

  def one_update(config):
    fn = step_lib.make_update_fn(config, opt, loss_cfg, temperature=1.0, micro_batches=2, use_reference=False)
    state = step_lib.init_state(jax.tree.map(jnp.array, params), opt)
    new, metrics = fn(state, _rollout(base), None)
    return new, metrics

  ref, ref_m = one_update(base)
  got, got_m = one_update(masters)
  assert {str(x.dtype) for x in jax.tree.leaves(got.params)} == {"float32"}
  du_ref = [
    np.asarray(a, np.float64) - np.asarray(p) for a, p in zip(jax.tree.leaves(ref.params), jax.tree.leaves(params))
  ]
  du_got = [
    np.asarray(a, np.float64) - np.asarray(p) for a, p in zip(jax.tree.leaves(got.params), jax.tree.leaves(params))
  ]
  err = np.sqrt(sum(np.sum((a - b) ** 2) for a, b in zip(du_ref, du_got)))
  rel = err / np.sqrt(sum(np.sum(a**2) for a in du_ref))
  if compute == "float32":
    assert rel < 1e-5  # float32 round-off of the update's own arithmetic (w + u − w)
  else:
    stages = 2 * 3 * 2 * base.num_layers + 2
    bound = np.sqrt(3 * stages) * 2.0**-9 * 4
    assert 1e-4 < rel < bound, (rel, bound)  # bf16 did compute (rel > 0), within its round-off
  assert got_m["update/changed"] > 0.99 and ref_m["update/changed"] > 0.99
  assert got_m["loss"] == pytest.approx(ref_m["loss"], rel=2.0**-6)


def test_the_sampler_decodes_a_compute_dtype_copy():
  """`Sampler.shard_params` casts float32 masters to the sampler config's dtype (bf16) once per call."""
  from arena_jax.sampling import Sampler  # pylint: disable=g-import-not-at-top

  masters = models.with_precision(models.tiny_config(), weight_dtype="float32", dtype="bfloat16")
  params = models.pure_params(models.init_model(masters))
  sampler = Sampler(config=models.sampling_config(masters), max_new_tokens=4)
  copy = sampler.shard_params(params)
  assert {str(x.dtype) for x in jax.tree.leaves(copy)} == {"bfloat16"}
  assert {str(x.dtype) for x in jax.tree.leaves(params)} == {"float32"}  # the masters stay
  np.testing.assert_array_equal(
    np.asarray(copy["embedding"], np.float32), np.asarray(params["embedding"].astype(jnp.bfloat16), np.float32)
  )
  out = sampler(copy, [[3, 4, 5]], jax.random.key(0))
  assert out.tokens.shape == (1, 4)
