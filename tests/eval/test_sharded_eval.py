"""Evaluating a checkpoint sharded: `Checkpointer.restore_params` reads the parameters alone (the
optimizer state is never deserialized), verified, onto a mesh of the fake CPU devices (tests/conftest.py);
`parallel.mesh_for_eval` makes the sampling mesh of the run's recorded config on the devices present; and
`evaluate` on that mesh gives the tokens it gives on one device."""

import shutil

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
import tensorstore as ts
from jax.sharding import SingleDeviceSharding

from arena_jax import models, parallel
from arena_jax.sampling import accuracy
from arena_jax.tasks import Example
from arena_jax.tokenizer import SentencePieceTokenizer
from arena_jax.train import step as step_lib
from arena_jax.train.checkpoint import CheckpointError, Checkpointer, write_manifest

# Divisible where the rules split on the meshes below: vocab, heads, KV heads, MLP over tensor ≤ 2, embed
# over fsdp ≤ 4.
CONFIG = models.ModelConfig(
  vocab_size=64, d_model=32, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=8, mlp_dim=48, init_std=1.0
)
# The run's recorded mesh: trained on (1, −1, 2), sampled on (2, −1, 2); embed dims replicated.
RUN_MESH = parallel.mesh_config(1, -1, 2, sample=(2, -1, 2), rules=(("embed", None),))
NEEDS_8 = pytest.mark.mesh  # 8 (fake) devices (tests/conftest.py)


def optim_config():
  return ml_collections.ConfigDict(
    dict(lr=1e-4, warmup_steps=0, b1=0.9, b2=0.99, eps=1e-8, weight_decay=0.01, max_grad_norm=1.0)
  )


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
  """(checkpoint directory, saved params, saved state) of a one-step run whose moments hold random
  values (as after training: zeros would compress to nothing), its meta recording the run's config."""
  params = models.pure_params(models.init_model(CONFIG, seed=0))
  state = step_lib.init_state(params, step_lib.make_optimizer(optim_config()))
  rng = np.random.default_rng(0)
  leaves, tree = jax.tree.flatten(state.opt_state)
  moments = [jnp.asarray(rng.normal(size=x.shape).astype(x.dtype)) if x.ndim else x for x in leaves]
  state = state._replace(opt_state=jax.tree.unflatten(tree, moments))
  directory = str(tmp_path_factory.mktemp("ckpt"))
  ckpt = Checkpointer(directory)
  run_config = ml_collections.ConfigDict({"mesh": RUN_MESH, "seed": 0})
  ckpt.save(1, state, {"step": 1, "config": run_config.to_json_best_effort()})
  ckpt.close()
  return directory, params, state


def assert_tree_equal(got, want):
  assert jax.tree.structure(got) == jax.tree.structure(want)
  for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    assert g.dtype == w.dtype
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def overwrite_moments(step_dir: str, *, headers: bool = False) -> list[bytes]:
  """Overwrites the optimizer state's chunks inside the step's OCDBT database (TensorStore writes a new
  version of it) with bytes no chunk decodes from; with `headers`, their `.zarray` headers too (the array
  no longer opens). Returns the keys overwritten."""
  kv = ts.KvStore.open({"driver": "ocdbt", "base": f"file://{step_dir}/state/"}).result()
  keys = [k for k in kv.list().result() if k.startswith(b"opt_state.") and (headers or not k.endswith(b".zarray"))]
  for key in keys:
    kv.write(key, b"damaged").result()
  return keys


def test_restore_params_returns_the_saved_params_alone(saved):
  directory, params, state = saved
  ckpt = Checkpointer(directory)
  got = ckpt.restore_params(1)
  # The model's pure dict (layer indices as ints, although orbax stores them as "0"), on the default
  # device: no step, no optimizer state.
  assert_tree_equal(got, params)
  assert all(x.sharding == SingleDeviceSharding(jax.local_devices()[0]) for x in jax.tree.leaves(got))
  full, _ = ckpt.restore(1, None)
  assert set(full) == {"step", "params", "opt_state"}
  # A target in another dtype is cast while reading (float32 masters into a bfloat16 copy).
  half = ckpt.restore_params(1, parallel.abstract_params(CONFIG.replace(param_dtype="bfloat16")))
  assert_tree_equal(half, jax.tree.map(lambda x: x.astype(jnp.bfloat16), params))
  # Another model's target is refused, not filled in (a partial restore would keep its missing leaves).
  with pytest.raises(CheckpointError, match=r"has no parameter \['layers'\]\[2\].* the target is not the run's"):
    ckpt.restore_params(1, parallel.abstract_params(CONFIG.replace(num_layers=3)))
  with pytest.raises(CheckpointError, match="checkpoint step 7 .* do not restore"):
    ckpt.restore_params(7)
  ckpt.close()


# The full restore that fails on the moments leaves TensorStore callbacks behind its closed event loop.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_restore_params_never_reads_the_optimizer_state(saved, tmp_path):
  directory, params, _ = saved
  shutil.copytree(directory, tmp_path / "ckpt")
  ckpt = Checkpointer(str(tmp_path / "ckpt"))
  step_dir = ckpt.step_dir(1)
  keys = overwrite_moments(step_dir)
  assert {b"opt_state.1.0.mu.embedding/0.0", b"opt_state.1.0.nu.lm_head/0.0"} <= set(keys)
  # The manifest still guards the files: the damage is named before anything is read.
  with pytest.raises(CheckpointError, match="checkpoint step 1 .* is damaged"):
    ckpt.restore_params(1)
  write_manifest(step_dir)  # the files now match their manifest: what follows is about what is read
  with pytest.raises(CheckpointError, match="checkpoint step 1 .* does not restore"):
    ckpt.restore(1, None)  # the full state reads the moments and fails on them
  assert_tree_equal(ckpt.restore_params(1), params)
  # With a target not even the moments' headers are opened.
  overwrite_moments(step_dir, headers=True)
  write_manifest(step_dir)
  assert_tree_equal(ckpt.restore_params(1, parallel.abstract_params(CONFIG)), params)
  ckpt.close()


def test_restore_params_rejects_non_finite_values(tmp_path):
  params = models.pure_params(models.init_model(CONFIG, seed=0))
  params["lm_head"] = params["lm_head"].at[0, 0].set(jnp.nan)
  ckpt = Checkpointer(str(tmp_path / "ckpt"))
  ckpt.save(1, step_lib.init_state(params, step_lib.make_optimizer(optim_config())), {"step": 1})
  with pytest.raises(CheckpointError, match=r"non-finite values in 1 arrays \(\['lm_head'\]\)"):
    ckpt.restore_params(1)
  ckpt.close()


@NEEDS_8
def test_mesh_for_eval_uses_the_recorded_mesh_when_it_fits(caplog):
  devices = jax.devices()
  mesh, rules = parallel.mesh_for_eval(RUN_MESH.to_json_best_effort(), devices)
  assert dict(mesh.shape) == {"data": 2, "fsdp": 2, "tensor": 2} and dict(rules)["embed"] is None
  # A whole run config (as the checkpoint's meta records it) reads the same; −1 fills the devices present.
  run = ml_collections.ConfigDict({"mesh": RUN_MESH})
  assert dict(parallel.mesh_for_eval(run, devices[:4])[0].shape) == {"data": 2, "fsdp": 1, "tensor": 2}
  # No sampling shape recorded: the train shape.
  train_only = dict(RUN_MESH.to_dict(), sample=())
  assert dict(parallel.mesh_for_eval(train_only, devices[:4])[0].shape) == {"data": 1, "fsdp": 2, "tensor": 2}
  assert caplog.text == ""
  # Devices that do not fit it: fsdp over all of them, with a warning naming the record and both numbers.
  mesh, _ = parallel.mesh_for_eval(run, devices[:3])
  assert dict(mesh.shape) == {"data": 1, "fsdp": 3, "tensor": 1} and len(mesh.devices.flat) == 3
  assert "config.mesh.sample = (2, -1, 2) needs a multiple of 4 devices, 3 are present" in caplog.text
  mesh, _ = parallel.mesh_for_eval(parallel.mesh_config(2, 2, 2), devices[:4])
  assert dict(mesh.shape) == {"data": 1, "fsdp": 4, "tensor": 1}
  assert "config.mesh = (2, 2, 2) needs 8 devices, 4 are present" in caplog.text
  # No record: the defaults (fsdp over every device).
  assert dict(parallel.mesh_for_eval(None, devices[:2])[0].shape) == {"data": 1, "fsdp": 2, "tensor": 1}
  # An explicit shape wins, and must fit.
  assert dict(parallel.mesh_for_eval(run, devices, shape=(1, 8, 1))[0].shape)["fsdp"] == 8
  with pytest.raises(ValueError, match=r"config.mesh = \(2, 2, 2\) does not fit the 4 devices present"):
    parallel.mesh_for_eval(run, devices[:4], shape=(2, 2, 2))


@NEEDS_8
def test_restore_params_onto_a_mesh(saved):
  directory, params, _ = saved
  ckpt = Checkpointer(directory)
  mesh, rules = parallel.mesh_for_eval(ckpt.read_meta(1)["config"], jax.devices()[:4])
  assert dict(mesh.shape) == {"data": 2, "fsdp": 1, "tensor": 2}
  got = ckpt.restore_params(1, parallel.abstract_params(CONFIG, mesh, rules))
  ckpt.close()
  assert_tree_equal(got, params)
  want = parallel.param_shardings(CONFIG, mesh, rules)
  for x, sharding in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    assert x.sharding == sharding
  q = got["layers"][0]["attn"]["q_proj"]  # [embed, heads, head_dim]: heads over tensor, embed replicated
  assert q.sharding.spec == jax.sharding.PartitionSpec(None, "tensor", None)
  assert {s.data.shape for s in q.addressable_shards} == {(32, 2, 8)} and len(q.sharding.device_set) == 4


class ParityTask:
  """A stub task: a completion is correct iff it has an even number of characters."""

  chat = False

  def prompt_texts(self, examples, tokenizer):
    return [e.question for e in examples]

  def verify_batch(self, examples, completions):
    return [float(len(c) % 2 == 0) for c in completions]


@pytest.mark.slow  # a whole evaluation on both meshes
@NEEDS_8
def test_evaluate_on_a_mesh_matches_one_device(saved):
  directory, _, _ = saved
  tokenizer = SentencePieceTokenizer.train(["Compute 1 + 2.\nAnswer: 3", "Compute 4 * 5.\nAnswer: 20"] * 8, 48)
  examples = [Example(uid=str(i), question=f"Compute {i} + {i}.", answer=str(2 * i)) for i in range(10)]
  ckpt = Checkpointer(directory)
  mesh, rules = parallel.mesh_for_eval(ckpt.read_meta(1)["config"])  # (2, 2, 2): 4 batch shards
  on_mesh = ckpt.restore_params(1, parallel.abstract_params(CONFIG, mesh, rules))
  single = ckpt.restore_params(1)
  ckpt.close()
  assert accuracy.round_batch_size(3, mesh, rules) == 4 and accuracy.round_batch_size(3) == 3
  kw = dict(config=CONFIG, num_samples=2, temperature=1.0, max_new_tokens=10, rng=jax.random.key(3))
  kw.update(return_details=True, process=False)
  task = ParityTask()
  # batch_size 3 is rounded up to 4 on the mesh: other batches, the same greedy completions (key-free).
  sharded = accuracy.evaluate(on_mesh, tokenizer, task, examples, batch_size=3, mesh=mesh, rules=rules, **kw)
  plain = accuracy.evaluate(single, tokenizer, task, examples, batch_size=3, **kw)
  assert sharded["greedy_completions"] == plain["greedy_completions"]
  # Sampled rows depend on the key and their place in their batch: with the batches of the mesh run,
  # one device samples the same completions.
  plain4 = accuracy.evaluate(single, tokenizer, task, examples, batch_size=4, **kw)
  assert sharded["completions"] == plain4["completions"]
  np.testing.assert_array_equal(sharded["rewards"], plain4["rewards"])
  assert len(set(sharded["completions"])) > 1  # not a degenerate policy
