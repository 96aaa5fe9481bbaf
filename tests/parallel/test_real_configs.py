"""configs/real_*.py: every topology line validates, its meshes cover the slice and its micro-batches split
over the batch shards (what launch/aot_compile.py then compiles, `make aot`)."""

import importlib.util
import math
import os

import pytest

from arena_jax import aot, parallel
from arena_jax.models.sharding import LOGICAL_AXIS_RULES
from arena_jax.train.config import validate_config
from configs import pod

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FILES = ("real_ministral3_8b.py", "real_qwen3_8b.py")


def load(name):
  spec = importlib.util.spec_from_file_location(name[:-3], os.path.join(ROOT, "configs", name))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


@pytest.mark.parametrize("name", FILES)
def test_every_topology_line_is_consistent(name, tmp_path):
  module = load(name)
  data = tmp_path / "math.jsonl"
  data.write_text('{"question": "1 + 1?", "answer": "2"}\n' * 4)
  batch_axes = dict(LOGICAL_AXIS_RULES)["batch"]
  for topology in module.SLICES:
    c = module.get_config(topology)
    c.tasks.jsonl.train_path = c.tasks.jsonl.test_path = str(data)  # the placeholders name files of the TPU VM
    validate_config(c, check_devices=False)  # the slice's devices are checked just below
    # A long-trace line ("v5p:2x2x2:16k", `pod.LONG_SLICES`) compiles for its topology at its budget.
    topology, budget = pod.split_slice(topology)
    assert c.mesh.distributed and c.judge.urls and c.init.hf_path and c.aot.topology == topology
    assert c.rollout.max_new_tokens == budget
    assert c.rollout.pack_tokens >= c.aot.prompt_len + budget  # a full-length sequence fits a packed row
    chip, dims = aot.parse_topology(topology)
    devices = math.prod(dims)
    shape = dict(zip(parallel.MESH_AXES, parallel.mesh_shape(c.mesh.data, c.mesh.fsdp, c.mesh.tensor, devices)))
    if c.mesh.sample:
      parallel.mesh_shape(*c.mesh.sample, devices)
    rows = c.rollout.prompts_per_step * c.rollout.group_size // c.optim.minibatches
    shards = math.prod(shape[a] for a in batch_axes)
    assert rows % c.optim.micro_batches == 0 and (rows // c.optim.micro_batches) % shards == 0, topology
    assert chip in aot.TPU_CHIPS


def test_unknown_topology_says_which_exist():
  with pytest.raises(ValueError, match="v5p:2x2x2"):
    load(FILES[0]).get_config("v5e:2x2")
