"""LoRA in the trainer (`model.lora`): the state holds the adapters alone (and their moments), checkpoints
hold them (with `checkpoint.save_merged`, the merged weights too), the run resumes, and the run directory's readers
(`policy_io.restore_run_params`: export, evaluation, serving) get the merged policy."""

import json

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from arena_jax import export, models, serving
from arena_jax.models import lora
from arena_jax.sampling import model_from_params
from arena_jax.train import checkpoint, policy_io, read_metrics, train
from tests.train.conftest import smoke_config

pytest.importorskip("qwix")

RANK = 4


@pytest.fixture(scope="module")
def lora_run(data_dir, tmp_path_factory):
  """A 3-step LoRA RLVR smoke run (coin-flip verifier: diverse groups, non-zero advantages), checkpointed at steps
  2 and 3 with merged weights."""
  import zlib  # noqa: PLC0415

  from arena_jax import tasks  # noqa: PLC0415

  workdir = tmp_path_factory.mktemp("lora_run")
  c = smoke_config("rlvr", data_dir)
  c.num_steps = 3
  c.model.lora.rank = RANK
  c.model.lora.alpha = 8.0
  c.checkpoint.every = 2
  c.checkpoint.save_merged = True
  with pytest.MonkeyPatch.context() as m:
    m.setattr(tasks.ArithmeticTask, "verify", lambda self, ex, completion: float(zlib.crc32(completion.encode()) % 2))
    summary = train(c, str(workdir))
  return c, str(workdir), summary


def _state_metadata(workdir: str, step: int) -> dict:
  path = f"{workdir}/checkpoints/{step}/state"
  return ocp.PyTreeCheckpointer().metadata(path).item_metadata.tree


def test_only_the_adapters_train_and_only_they_and_their_moments_are_checkpointed(lora_run):
  c, workdir, summary = lora_run
  assert summary["steps"] == 3
  rows = read_metrics(workdir)
  assert any(r["grad_norm"] > 0 and r["update/changed"] > 0 for r in rows), rows  # the adapters moved

  saved = _state_metadata(workdir, 3)
  params = jax.tree_util.tree_flatten_with_path(saved["params"])[0]
  names = {str(path[-1].key) for path, _ in params}
  assert names and all(n.endswith(("_lora_a", "_lora_b")) for n in names), names
  config, _, _ = policy_io.load_run_policy(workdir)
  spec = lora.LoraSpec(rank=RANK, alpha=8.0)
  count = lora.adapter_count(lora.abstract_adapters(lora.lora_template(config, spec)))
  assert sum(int(np.prod(m.shape)) for _, m in params) == count
  # The optimizer's memory is the adapters' size: AdamW's two moments each, a few scalar counters, nothing of
  # the base's (the tiny model has ≈ 40× more weights than rank-4 adapters).
  moments = [m for m in jax.tree.leaves(saved["opt_state"]) if len(m.shape)]
  assert sum(int(np.prod(m.shape)) for m in moments) == 2 * count
  base_count = sum(x.size for x in jax.tree.leaves(models.pure_params(models.init_model(config, 0))))
  assert count < base_count / 10

  recorded, base = policy_io.read_lora_spec(workdir)
  assert recorded == spec and base == {"random_model": c.init.random_model, "seed": c.seed}


@pytest.mark.slow  # both models' programs
def test_merged_and_adapted_logits_agree_after_training_steps(lora_run):
  _, workdir, _ = lora_run
  config, _, _ = policy_io.load_run_policy(workdir)
  spec, base_record = policy_io.read_lora_spec(workdir)
  ckpt = checkpoint.Checkpointer(f"{workdir}/checkpoints")
  try:
    adapters = ckpt.restore_params(3)
    saved_merged = ckpt.restore_params(3, item=checkpoint.MERGED)
  finally:
    ckpt.close()
  assert any(np.abs(np.asarray(b)).max() > 0 for k, b in _named(adapters) if "_lora_b" in k)
  base = policy_io.lora_base_params(base_record, config)
  merged = lora.merge_adapters(base, adapters, spec)
  tokens = np.random.default_rng(0).integers(3, config.vocab_size, (2, 16)).astype(np.int32)
  template = lora.lora_template(config, spec)
  adapted = np.asarray(template.logits(base, adapters, tokens), np.float64)
  plain = np.asarray(model_from_params(config, merged)(tokens), np.float64)
  untouched = np.asarray(model_from_params(config, base)(tokens), np.float64)
  assert np.abs(adapted - untouched).max() > 0  # the trained adapters changed the model
  # x (W + s A B) against x W + s (x A) B in float32: each matmul sums at most max(d_model, mlp_dim) terms
  # (γ_n ≈ n·2⁻²⁴ relative, worst case), through num_layers blocks, on logits of this scale.
  n = max(config.d_model, config.mlp_dim, config.num_heads * config.head_dim)
  tol = n * 2.0**-24 * config.num_layers * np.abs(adapted).max()
  assert np.abs(plain - adapted).max() <= tol, (np.abs(plain - adapted).max(), tol)
  # The checkpoint's merged weights (`checkpoint.save_merged`) are the trainer's merge of the same adapters, and
  # the readers' merge (`restore_run_params`) is the same program of the same inputs. The trainer merges on its
  # mesh, this process on one device: XLA may split or fuse A·B's r-term sum differently there, so they agree to
  # float32 round-off, W + s·A·B with |error| ≤ (r + 2)·2⁻²⁴·(|W| + s·|A|·|B|) per element.
  bound = _merge_roundoff(base, adapters, spec)
  read = policy_io.restore_run_params(workdir, 3, config)
  for other in (saved_merged, read):
    for (key, a), (_, b), (_, tol) in zip(_named(other), _named(merged), _named(bound)):
      assert np.all(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)) <= tol), key


def _merge_roundoff(base, adapters, spec):
  """Per element of the merged weights: the float32 round-off bound of W + s·(A B) (the comment at its use)."""
  abs_adapters = jax.tree.map(lambda x: np.abs(np.asarray(x, np.float64)), adapters)
  abs_base = jax.tree.map(lambda x: np.abs(np.asarray(x, np.float64)), base)
  magnitude = lora.merge_adapters(abs_base, abs_adapters, spec)  # |W| + s·|A|·|B|, in float64
  return jax.tree.map(lambda m: (spec.rank + 2) * 2.0**-24 * np.asarray(m, np.float64), magnitude)


def _named(tree):
  return [(jax.tree_util.keystr(p), x) for p, x in jax.tree_util.tree_leaves_with_path(tree)]


def test_a_lora_run_resumes_from_its_adapters(lora_run, data_dir, tmp_path):
  import shutil  # noqa: PLC0415

  c, workdir, _ = lora_run
  copy = tmp_path / "run"
  shutil.copytree(workdir, copy, ignore=shutil.ignore_patterns("train.lock"))
  c = c.copy_and_resolve_references()
  c.num_steps, c.resume = 4, True
  summary = train(c, str(copy))
  assert summary["steps"] == 4
  assert [r["step"] for r in read_metrics(str(copy))][-1] == 4


@pytest.mark.slow  # export and PEFT's load (torch)
def test_export_writes_merged_weights_and_peft_adapters(lora_run, tmp_path):
  _, workdir, _ = lora_run
  config, _, _ = policy_io.load_run_policy(workdir)
  merged = policy_io.restore_run_params(workdir, 3, config)
  out = export.export_checkpoint(workdir, tmp_path / "hf", step=3)
  reloaded = models.load_hf(out.out_dir)
  tokens = np.random.default_rng(1).integers(3, config.vocab_size, (2, 12)).astype(np.int32)
  np.testing.assert_array_equal(
    np.asarray(reloaded(tokens)), np.asarray(model_from_params(config, merged)(tokens))
  )  # float32 weights stored as float32: the same model
  adapters = export.export_adapters(workdir, tmp_path / "peft", step=3)
  assert set(adapters.files) == {"adapter_model.safetensors", "adapter_config.json"}
  record = json.loads((adapters.out_dir / "adapter_config.json").read_text())
  assert record["r"] == RANK and record["lora_alpha"] == 8.0 and record["peft_type"] == "LORA"


def test_the_server_and_the_evaluator_load_the_merged_policy(lora_run):
  _, workdir, _ = lora_run
  served = serving.load_served_policy(workdir, step=3)
  config, _, _ = policy_io.load_run_policy(workdir)
  merged = policy_io.restore_run_params(workdir, 3, config)
  for (key, a), (_, b) in zip(_named(served.params), _named(merged)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b).astype(np.asarray(a).dtype), err_msg=key)


def test_export_of_adapters_from_a_full_run_is_refused(rlvr_run, tmp_path):
  workdir, _ = rlvr_run
  with pytest.raises(ValueError, match="full-parameter run .*no adapters to export"):
    export.export_adapters(workdir, tmp_path / "peft")


def test_lora_with_fp8_training_is_refused(data_dir):
  from arena_jax.train import validate_config  # noqa: PLC0415

  c = smoke_config("rlvr", data_dir)
  c.model.lora.rank, c.model.quantization = 8, "fp8"
  with pytest.raises(ValueError, match=r"model\.quantization: 'fp8' with model\.lora\.rank = 8"):
    validate_config(c)
