"""Mesh from config, rules, multi-host helpers (single process, 8 fake devices), orbax on a mesh, and the
AOT path (lower → compile → memory report) on the CPU backend; `import arena_jax.parallel` stays light and
knows nothing about training, `import arena_jax.aot` never loads libtpu."""

import json
import subprocess
import sys

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec

from arena_jax import aot, models, parallel, rl, sampling
from arena_jax.train import sharding as train_sharding
from arena_jax.train import step as step_lib
from arena_jax.train.checkpoint import Checkpointer
from tests.parallel.conftest import (
  CONFIG,
  NEEDS_8,
  global_array,
  local_groups,
  local_rows,
  loss_config,
  optim_config,
  process_rows,
)

pytestmark = NEEDS_8


@pytest.mark.parametrize(
  "sizes, want", [((1, -1, 1), (1, 8, 1)), ((2, 2, 2), (2, 2, 2)), ((-1, 1, 8), (1, 1, 8)), ((2, -1, 2), (2, 2, 2))]
)
def test_mesh_shape_fills_one_axis(sizes, want):
  assert parallel.mesh_shape(*sizes, num_devices=8) == want
  mesh = parallel.make_mesh(parallel.mesh_config(*sizes))
  assert tuple(mesh.shape.values()) == want and mesh.axis_names == ("data", "fsdp", "tensor")


def test_sampler_mesh_defaults_to_the_train_mesh():
  train, sample = parallel.make_meshes(parallel.mesh_config(1, 2, 4))
  assert sample is train
  train, sample = parallel.make_meshes(parallel.mesh_config(1, 2, 4, sample=(1, -1, 8)))
  assert dict(train.shape) == {"data": 1, "fsdp": 2, "tensor": 4} and dict(sample.shape)["tensor"] == 8
  assert set(sample.devices.flat) == set(train.devices.flat)


@pytest.mark.parametrize(
  "sizes, match",
  [
    ((-1, -1, 1), "at most one"),
    ((3, -1, 1), "not a multiple"),
    ((2, 2, 1), "must equal the 8 devices"),
    ((0, 8, 1), "must be ≥ 1"),
  ],
)
def test_bad_mesh_says_what_to_change(sizes, match):
  with pytest.raises(ValueError, match=match):
    parallel.mesh_shape(*sizes, num_devices=8)


def test_rules_cover_params_optimizer_state_activations_and_cache():
  rules = dict(parallel.axis_rules((("embed", None), ("length", ["tensor"]))))
  assert rules["embed"] is None and rules["length"] == ("tensor",) and rules["batch"] == ("data", "fsdp")
  mesh = parallel.make_mesh(parallel.mesh_config(1, 2, 4))
  sh = train_sharding.train_shardings(CONFIG, step_lib.make_optimizer(optim_config()), mesh)
  assert sh.state.params["embedding"].spec == PartitionSpec("tensor", "fsdp")
  assert sh.state.params["layers"][1]["mlp"]["down_proj"].spec == PartitionSpec("tensor", "fsdp")
  adam = sh.state.opt_state[1][0]
  assert adam.nu["embedding"] == sh.state.params["embedding"] and adam.count.spec == PartitionSpec()
  # Activations: rows over the batch axes present (data has size 1 here); each micro-batch is split
  # over them, not the micro-batch axis.
  assert sh.rollout.tokens.spec == PartitionSpec("fsdp", None)
  assert sh.micro_batches.tokens.spec == PartitionSpec(None, "fsdp", None)
  # KV cache: rows over the batch axes, KV heads over tensor.
  kv = sampling.Sampler(config=CONFIG, max_new_tokens=8, mesh=mesh)._state_shardings.cache.k[0][0]  # pylint: disable=protected-access
  assert kv.spec == PartitionSpec("fsdp", "tensor", None, None)


def test_host_helpers_single_process():
  mesh = parallel.make_mesh(parallel.mesh_config(2, 2, 2))
  rows = NamedSharding(mesh, PartitionSpec(("data", "fsdp")))
  np.testing.assert_array_equal(process_rows(rows, 16), np.arange(16))
  x = global_array(np.arange(32).reshape(16, 2), rows, 16)
  assert x.sharding == rows
  idx, local = local_rows(x)
  np.testing.assert_array_equal(idx, np.arange(16))
  np.testing.assert_array_equal(local, np.arange(32).reshape(16, 2))
  np.testing.assert_array_equal(local_groups(rows, 16, group_size=4), np.arange(4))
  # Rows split over the batch axes, columns over tensor (like the KV cache's heads): whole rows back.
  y = jax.device_put(np.arange(64).reshape(16, 4), NamedSharding(mesh, PartitionSpec(("data", "fsdp"), "tensor")))
  np.testing.assert_array_equal(local_rows(y)[1], np.arange(64).reshape(16, 4))
  assert parallel.is_main_process() and not parallel.initialize(False)
  assert parallel.process_batch_size(64, process_count=4) == 16
  with pytest.raises(ValueError, match="multiple of the 3 processes"):
    parallel.process_batch_size(64, process_count=3)
  assert parallel.host_block(64, 2, 4) == slice(32, 48) and parallel.host_block(8) == slice(0, 8)
  np.testing.assert_array_equal(parallel.gather(x), np.arange(32).reshape(16, 2))
  sums = parallel.host_sum({"calls": 3})
  assert int(sums["calls"]) == 3


def test_each_host_gets_its_own_judges():
  urls = ("http://j0", "http://j1", "http://j2", "http://j3")
  parts = [parallel.host_judge_urls(urls, p, 2) for p in range(2)]
  assert parts == [("http://j0", "http://j2"), ("http://j1", "http://j3")]
  # Fewer servers than hosts: everyone uses all, starting from a different one.
  assert parallel.host_judge_urls(urls[:2], 3, 4) == ("http://j1", "http://j0")


def test_checkpoint_restores_onto_another_mesh(tmp_path):
  """Orbax writes a sharded state (each process its shards) and restores it resharded."""
  optimizer = step_lib.make_optimizer(optim_config())
  params = models.pure_params(models.init_model(CONFIG, seed=3))
  mesh_a = parallel.make_mesh(parallel.mesh_config(2, 2, 2))
  sh_a = train_sharding.train_shardings(CONFIG, optimizer, mesh_a)
  state = train_sharding.init_train_state(params, optimizer, sh_a)
  ckpt = Checkpointer(str(tmp_path / "ckpt"), keep=1)
  ckpt.save(1, state, {"step": 1})
  mesh_b = parallel.make_mesh(parallel.mesh_config(1, 1, 8))
  sh_b = train_sharding.train_shardings(CONFIG, optimizer, mesh_b)
  restored, meta = ckpt.restore(1, train_sharding.abstract_train_state(CONFIG, optimizer, sh_b))
  ckpt.close()
  assert meta == {"step": 1}
  q = restored.params["layers"][0]["attn"]["q_proj"]
  assert q.sharding == sh_b.state.params["layers"][0]["attn"]["q_proj"]
  for got, want in zip(jax.tree.leaves(restored), jax.tree.leaves(state)):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.slow  # an AOT compile of the real-size step's program
def test_aot_lower_compile_and_memory_report_on_cpu():
  """The AOT path of launch/aot_compile.py, on the CPU backend's 8 devices instead of a TPU topology."""
  mesh = parallel.make_mesh(parallel.mesh_config(1, 2, 4))
  optimizer = step_lib.make_optimizer(optim_config())
  # The trainer's program: routing and advantages of the step's 2 × 8 rows (4 groups of 4) inside the jit.
  lowered = aot.lower_train_step(
    CONFIG,
    optimizer,
    loss_config(0.0),
    mesh,
    rows=8,
    prompt_len=8,
    new_tokens=8,
    micro_batches=2,
    mode=rl.get_mode("arena_live"),
    group_size=4,
    minibatches=2,
  )
  assert len(lowered.args_info[0]) == 5  # state, rollout, ref params, StepRewards, minibatch index
  report = aot.memory_report(lowered.compile(), hbm_bytes=1 << 30)
  state = train_sharding.abstract_train_state(CONFIG, optimizer)
  state_bytes = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(state))
  # The donated state is reused for the new one: per device, ~1/8 of it is an argument and aliased.
  assert report.aliased >= state_bytes / 8 * 0.9 and report.arguments >= report.aliased
  assert (
    report.fits
    and report.total == report.arguments + report.outputs - report.aliased + report.temporaries + report.code
  )
  sampler = sampling.Sampler(config=CONFIG, max_new_tokens=8, num_samples=2, mesh=mesh)
  prefill, decode = aot.lower_sampler(sampler, num_prompts=4, prompt_len=16)
  assert aot.memory_report(prefill.compile(), 1 << 30).fits
  # Without a mesh the sampler lowers too (its programs on the default device); the AOT path wants one.
  plain = sampling.Sampler(config=CONFIG, max_new_tokens=8, num_samples=2)
  assert all(isinstance(p, jax.stages.Lowered) for p in plain.lower(num_prompts=3, prompt_len=16))
  with pytest.raises(ValueError, match="mesh"):
    aot.lower_sampler(plain, num_prompts=3, prompt_len=16)
  with pytest.raises(ValueError, match="multiple of the mesh's 2 batch shards"):
    sampler.lower(num_prompts=3, prompt_len=16)
  text = aot.format_reports("cpu:8", [("train", report)])
  assert "fits" in text and "yes" in text


def test_out_of_memory_error_becomes_a_report():
  msg = (
    "RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total memory required for HLO temporaries "
    "(117.69G) exceeds available HBM (95.74G)."
  )
  report = aot._oom_report(msg, 95 << 30)  # pylint: disable=protected-access
  assert not report.fits and abs(report.temporaries / (1 << 30) - 117.69) < 0.01
  assert "NO" in aot.format_reports("v5p:2x2x2", [("train", report)])


def test_topology_names():
  assert aot.parse_topology("v5p:2x2x2") == ("v5p", (2, 2, 2))
  assert aot.parse_topology("v5e:4x4") == ("v5e", (4, 4))
  for bad in ("v5p", "v9:2x2", "v5e:4xq"):
    with pytest.raises(ValueError, match="topology"):
      aot.parse_topology(bad)


@pytest.mark.parametrize(
  "module, banned",
  [
    ("arena_jax.parallel", ("libtpu", "torch", "tensorflow", "arena_jax.train", "arena_jax.eval", "arena_jax.aot")),
    ("arena_jax.aot", ("libtpu", "torch", "tensorflow")),
  ],
)
def test_import_never_loads_libtpu(module, banned):
  """Importing the mesh module loads no heavy optional stack and nothing of training; the AOT module loads
  libtpu only when `tpu_devices` is called."""
  code = f"import sys, json; import {module}; print(json.dumps(sorted(m for m in {banned!r} if m in sys.modules)))"
  proc = subprocess.run(
    [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"JAX_PLATFORMS": "cpu", "PATH": ""}
  )
  assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


def test_bf16_update_keeps_the_state_dtypes():
  """The donated state is reused only if the update returns the dtypes it got (bf16 moments stay bf16)."""
  config = CONFIG.replace(param_dtype="bfloat16", dtype="bfloat16")
  optimizer = step_lib.make_optimizer(optim_config())
  update = step_lib.make_update_fn(
    config, optimizer, loss_config(0.0), temperature=1.0, micro_batches=2, use_reference=False, jit=False
  )
  state = train_sharding.abstract_train_state(config, optimizer)
  new_state, _ = jax.eval_shape(update, state, train_sharding.abstract_rollout(8, 8, 8), None)
  dtypes = lambda tree: [x.dtype for x in jax.tree.leaves(tree)]
  assert dtypes(new_state) == dtypes(state) and "bfloat16" in map(str, dtypes(state.opt_state))
