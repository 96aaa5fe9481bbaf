"""The RL run configuration: `base_config()` (what configs/*.py start from) and `validate_config`.

Every field is checked once, up front, before anything is built or compiled; an error names the
field and says what to change (STYLE §2).
"""
from __future__ import annotations

import math

import ml_collections

from arena_jax import arena
from arena_jax import parallel
from arena_jax.rl import cispo
from arena_jax.rl.modes import REWARD_MODES, get_mode


def base_config() -> ml_collections.ConfigDict:
  """The arithmetic testbed with `arena_live` rewards; configs/*.py override what they change."""
  from arena_jax import judges, tasks  # pylint: disable=g-import-not-at-top

  c = ml_collections.ConfigDict()
  c.seed = 0                            # sampling, judge presentation orders, random init
  c.data_seed = 0                       # the order of the training prompts
  c.tasks = tasks.default_config()      # the task trained on is tasks.train_task (arena_jax/tasks/config.py)
  c.num_steps = 80                      # optimizer steps

  # Where the policy comes from: an SFT / saved policy dir, a local HF checkpoint, or (tests only)
  # a randomly initialised named model with a tokenizer trained on the task corpus.
  c.init = ml_collections.ConfigDict(dict(policy_dir="", hf_path="", random_model="", tokenizer_vocab=512))

  c.rollout = ml_collections.ConfigDict(dict(
      prompts_per_step=16,              # B groups per optimizer step
      group_size=8,                     # G samples per prompt
      max_new_tokens=96,
      temperature=1.0, top_k=0, top_p=1.0,
  ))

  c.reward = ml_collections.ConfigDict(dict(
      mode="arena_live",                # rlvr | rlaif | arenarl | adaptive_pointwise | arena | arena_live
      topology="",                      # "" = the mode's own (SPEC §7); any of arena.SCHEDULERS
      dynamic_sampling=False,           # DAPO refill (rlvr only)
      max_gen_batches=8,                # dynamic sampling: generation batches per step before a clear error
      bt_l2=arena.DEFAULT_L2,
      bt_solver=arena.DEFAULT_SOLVER,
      async_lag=1,                      # 1: judge step t while step t+1 generates; 0: wait
      std_ddof=0,
  ))
  c.judge = judges.default_config()     # urls () = the embedded judge server on a free loopback port

  c.loss = ml_collections.ConfigDict(dict(
      eps_low=1.0, eps_high=4.0,        # ρ̂ = clip(ρ, 1 − eps_low, 1 + eps_high) (SPEC §2)
      aggregation="token_mean", mask_truncated=False, kl_coef=0.0,
  ))
  c.optim = ml_collections.ConfigDict(dict(
      lr=1e-4, warmup_steps=5, b1=0.9, b2=0.99, eps=1e-8, weight_decay=0.0, max_grad_norm=1.0,
      micro_batches=1,                  # exact gradient accumulation inside one update
      minibatches=1,                    # optimizer updates per RL step (later ones are off-policy: IS weights)
  ))
  # Devices: (data, fsdp, tensor), −1 fills; default = FSDP over every local device (arena_jax/parallel.py).
  c.mesh = parallel.mesh_config()
  c.checkpoint = ml_collections.ConfigDict(dict(every=20, keep=3))
  c.resume = False
  c.log = ml_collections.ConfigDict(dict(progress=True, tensorboard=True, plot=True))
  return c


def load_config_file(path: str, arg: str | None = None) -> ml_collections.ConfigDict:
  """`get_config(arg)` of a config file (what `--config=path:arg` does), for code outside absl mains."""
  import importlib.util  # pylint: disable=g-import-not-at-top
  import pathlib  # pylint: disable=g-import-not-at-top

  spec = importlib.util.spec_from_file_location(f"_config_{pathlib.Path(path).stem}", path)
  if spec is None or not pathlib.Path(path).is_file():
    raise FileNotFoundError(f"no config file at {path!r}")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config(arg)


DEFAULT_POLICY_DIR = "runs/sft_demo"  # where `make demo`'s SFT warm start writes its policy


def mode_config(mode: str, arg: str | None = None, **reward) -> ml_collections.ConfigDict:
  """`base_config()` with `reward.mode = mode` (and `reward` overrides), starting from the SFT policy.

  `arg` (the config file's argument, e.g. `--config=configs/arith_rlvr.py:smoke`):
    None / ""   the arithmetic testbed from `make demo`'s SFT policy
    "smoke"     tiny shapes and a random policy: seconds on a CPU, for tests
  """
  from arena_jax import tasks  # pylint: disable=g-import-not-at-top

  c = base_config()
  c.reward.mode = mode
  for k, v in reward.items():
    c.reward[k] = v
  c.init.policy_dir = DEFAULT_POLICY_DIR
  c.tasks = tasks.demo_config()  # the SFT policy's tasks: its difficulty and its held-out split
  if arg == "smoke":
    smoke(c)
  elif arg:
    raise ValueError(f"unknown config argument {arg!r}; use none or 'smoke'")
  return c


# TPU slice → train mesh (data, fsdp, tensor; −1 = fill), sampler mesh (() = the same), micro-batches of
# the 512-row update of `pod_config`. Each line is checked by launch/aot_compile.py (`make aot`; docs/tpu.md).
POD_SLICES = {
    # 8 chips × 95 GiB (v5p-16, 2 hosts): FSDP over 2, heads over the 4 chips of a host; 4 rows per micro-batch.
    "v5p:2x2x2": dict(mesh=(1, -1, 4), sample=(), micro_batches=128),
    # 64 chips × 16 GiB (v5litepod-64, 16 hosts): training splits heads 16 ways (a v5e holds the activations
    # of one 3072-token row only with 2 heads per chip); sampling splits the 8 KV heads 8 ways.
    "v5e:8x8": dict(mesh=(1, -1, 16), sample=(1, -1, 8), micro_batches=128),
    # 8 chips × 32 GiB (v4-16, 2 hosts): heads over all 8 chips, one row per micro-batch.
    "v4:2x2x2": dict(mesh=(1, 1, 8), sample=(), micro_batches=512),
}


def pod_config(topology: str | None, *, model: str, hf_path: str, source: str,
               slices: dict = POD_SLICES) -> ml_collections.ConfigDict:
  """Reasoning Arena-Live at the paper's scale (SPEC §9) on the TPU slice `topology` (a key of `slices`).

  Shared by configs/real_*.py, which differ only in the policy: `model` (the named `ModelConfig` that
  launch/aot_compile.py compiles) and `hf_path` (its checkpoint). 64 prompts × G = 8 samples of up to
  2048 new tokens per step, prompts padded to 1024 tokens. Paths and URLs are placeholders of the shape
  of the real ones, overridden on the command line. `source` names the config file in errors.
  """
  topology = topology or "v5p:2x2x2"
  if topology not in slices:
    raise ValueError(f"{source}: no settings for topology {topology!r}; use one of {sorted(slices)} "
                     "(or add a line to its SLICES and check it with launch/aot_compile.py)")
  slice_ = slices[topology]
  c = base_config()
  c.reward.mode = "arena_live"

  # The HF checkpoint on the workers' local disk (or a gcsfuse mount); every host reads it.
  c.init.hf_path = hf_path
  c.tasks.train_task = "jsonl"
  c.tasks.eval_tasks = ("jsonl",)
  c.tasks.jsonl.train_path = "/mnt/disks/data/stem_rl_train.jsonl"
  c.tasks.jsonl.test_path = "/mnt/disks/data/aime_2025.jsonl"
  c.tasks.jsonl.num_workers = 16

  # The judge: DeepSeekMath-V2 (SPEC §9) behind vLLM or SGLang, one URL per server (docs/tpu.md).
  c.judge.urls = ("http://judge-0:8000/v1", "http://judge-1:8000/v1")
  c.judge.model = "deepseek-ai/DeepSeek-Math-V2"
  c.judge.token_budget = 16_384       # traces are long: keep 16k tokens of each (with a marker)
  c.judge.max_tokens = 8192
  c.judge.client.concurrency = 128

  c.rollout.update(dict(prompts_per_step=64, group_size=8, max_new_tokens=2048, temperature=1.0))
  c.optim.update(dict(lr=4e-7, warmup_steps=10, micro_batches=slice_["micro_batches"], minibatches=1))  # SPEC §9
  c.num_steps = 500
  c.checkpoint.every = 25
  c.mesh = parallel.mesh_config(*slice_["mesh"], sample=slice_["sample"], distributed=True)
  # What launch/aot_compile.py compiles: the named model of the checkpoint and the prompt bucket.
  c.aot = ml_collections.ConfigDict(dict(model=model, topology=topology, prompt_len=1024))
  return c


def smoke(c: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """Shrinks a config to seconds on a CPU: random tiny policy, 2 steps of 4 groups × 4 samples."""
  c.init.policy_dir = ""
  c.init.random_model = "tiny"
  c.init.tokenizer_vocab = 256
  c.num_steps = 2
  c.rollout.prompts_per_step = 4
  c.rollout.group_size = 4
  c.rollout.max_new_tokens = 16
  c.checkpoint.every = 2
  c.log.progress = False
  c.log.tensorboard = False
  c.log.plot = False
  c.tasks.arithmetic.num_train = 256
  c.tasks.arithmetic.num_test = 32
  return c


def _fail(field: str, message: str):
  raise ValueError(f"config.{field}: {message}")


def validate_config(c: ml_collections.ConfigDict, *, check_devices: bool = True) -> None:
  """Raises ValueError naming the first bad field (see module docstring).

  `check_devices=False` skips the mesh-versus-local-devices check: for configs written for another
  machine (a TPU slice checked on a laptop; `launch/aot_compile.py` checks against the target topology).
  """
  from arena_jax import judges, tasks  # pylint: disable=g-import-not-at-top

  tasks.validate_config(c.tasks, prefix="config.tasks")
  if c.num_steps < 1:
    _fail("num_steps", f"must be ≥ 1, got {c.num_steps}")
  sources = [bool(c.init.policy_dir), bool(c.init.hf_path), bool(c.init.random_model)]
  if sum(sources) != 1:
    _fail("init", "set exactly one of init.policy_dir (an SFT policy), init.hf_path (a local HF checkpoint) "
          f"or init.random_model (tests); got policy_dir={c.init.policy_dir!r}, hf_path={c.init.hf_path!r}, "
          f"random_model={c.init.random_model!r}")
  r = c.rollout
  if r.group_size < 2:
    _fail("rollout.group_size", f"a group needs ≥ 2 samples to have a variance (SPEC §1), got {r.group_size}")
  for name in ("prompts_per_step", "max_new_tokens"):
    if r[name] < 1:
      _fail(f"rollout.{name}", f"must be ≥ 1, got {r[name]}")
  if not r.temperature > 0:
    _fail("rollout.temperature", f"must be > 0 for RL sampling, got {r.temperature}")
  if not 0 < r.top_p <= 1:
    _fail("rollout.top_p", f"must be in (0, 1], got {r.top_p}")

  w = c.reward
  if w.mode not in REWARD_MODES:
    _fail("reward.mode", f"unknown mode {w.mode!r}; choose one of {sorted(REWARD_MODES)}")
  mode = get_mode(w.mode)
  if w.topology and w.topology not in arena.SCHEDULERS:
    _fail("reward.topology", f"unknown topology {w.topology!r}; choose one of {sorted(arena.SCHEDULERS)}")
  if w.topology and mode.judge_form != "pairwise":
    _fail("reward.topology", f"mode {w.mode!r} has no tournament; leave topology empty")
  if w.dynamic_sampling and w.mode != "rlvr":
    _fail("reward.dynamic_sampling", f"DAPO refill is the rlvr baseline's; mode {w.mode!r} keeps every group")
  if w.max_gen_batches < 1:
    _fail("reward.max_gen_batches", f"must be ≥ 1, got {w.max_gen_batches}")
  if w.bt_solver not in arena.SOLVERS:
    _fail("reward.bt_solver", f"unknown solver {w.bt_solver!r}; choose one of {sorted(arena.SOLVERS)}")
  if not w.bt_l2 > 0:
    _fail("reward.bt_l2", f"must be > 0 (SPEC §6), got {w.bt_l2}")
  if w.async_lag not in (0, 1):
    _fail("reward.async_lag", f"must be 0 or 1, got {w.async_lag}")
  if mode.uses_judge:
    judges.validate_config(c.judge, prefix="config.judge")
    if mode.judge_form == "pairwise" and c.judge.backend != "pairwise":
      _fail("judge.backend", f"mode {w.mode!r} compares pairs: use backend 'pairwise', got {c.judge.backend!r}")

  lc = c.loss
  if lc.aggregation not in cispo.AGGREGATIONS:
    _fail("loss.aggregation", f"choose one of {cispo.AGGREGATIONS}, got {lc.aggregation!r}")
  if not 0 <= lc.eps_low <= 1:
    _fail("loss.eps_low", f"must be in [0, 1] (the IS floor is 1 − eps_low), got {lc.eps_low}")
  if lc.eps_high < 0:
    _fail("loss.eps_high", f"must be ≥ 0, got {lc.eps_high}")
  if lc.kl_coef < 0:
    _fail("loss.kl_coef", f"must be ≥ 0, got {lc.kl_coef}")

  o = c.optim
  if not o.lr > 0:
    _fail("optim.lr", f"must be > 0, got {o.lr}")
  rows = r.prompts_per_step * r.group_size
  for name in ("micro_batches", "minibatches"):
    if o[name] < 1:
      _fail(f"optim.{name}", f"must be ≥ 1, got {o[name]}")
  if rows % (o.minibatches * o.micro_batches):
    _fail("optim.micro_batches", f"prompts_per_step × group_size = {rows} rows must split into minibatches × "
          f"micro_batches = {o.minibatches} × {o.micro_batches} equal parts")
  for name in ("every", "keep"):
    if c.checkpoint[name] < 1:
      _fail(f"checkpoint.{name}", f"must be ≥ 1, got {c.checkpoint[name]}")
  _validate_remaining(c)
  # The mesh against the devices this process sees (parallel.py's errors name config.mesh.*), and the
  # update's rows against the mesh's batch shards: both before anything is built or compiled.
  if not check_devices:
    return
  parallel.process_batch_size(r.prompts_per_step)  # every host draws the same number of prompts
  train_mesh, _ = parallel.make_meshes(c.mesh)
  parallel.check_train_batch(rows // o.minibatches, o.micro_batches, train_mesh, parallel.axis_rules(c.mesh.rules))


def _validate_remaining(c: ml_collections.ConfigDict) -> None:
  """The fields the checks above leave out, so that every field is checked up front (issue #10 §3):
  a typo such as b2=9.99 or top_k=-1 fails here, not as a NaN or a shape error minutes into a run."""
  for name in ("seed", "data_seed"):
    if name in c and (isinstance(c[name], bool) or not isinstance(c[name], int) or c[name] < 0):
      _fail(name, f"must be an integer ≥ 0, got {c[name]!r}")
  # inf / nan pass one-sided checks such as `lr > 0`; no float of the run config means them.
  for section in ("rollout", "reward", "loss", "optim"):
    for name, value in c[section].items():
      if isinstance(value, float) and not math.isfinite(value):
        _fail(f"{section}.{name}", f"must be a finite number, got {value}")
  if c.init.random_model:
    from arena_jax.models.config import MODEL_CONFIGS  # pylint: disable=g-import-not-at-top

    if c.init.random_model not in MODEL_CONFIGS:
      _fail("init.random_model", f"unknown model {c.init.random_model!r}; choose one of {sorted(MODEL_CONFIGS)}")
    if c.init.tokenizer_vocab < 16:
      _fail("init.tokenizer_vocab", f"must be ≥ 16 (PAD, EOS, BOS, UNK and the digits), got {c.init.tokenizer_vocab}")
  if c.rollout.top_k < 0:
    _fail("rollout.top_k", f"must be ≥ 0 (0 = no top-k), got {c.rollout.top_k}")
  if not 0 <= c.reward.std_ddof < c.rollout.group_size:
    _fail("reward.std_ddof", f"must be in [0, group_size) = [0, {c.rollout.group_size}), got {c.reward.std_ddof}")
  o = c.optim
  if o.warmup_steps < 0:
    _fail("optim.warmup_steps", f"must be ≥ 0, got {o.warmup_steps}")
  for name in ("b1", "b2"):
    if not 0 <= o[name] < 1:
      _fail(f"optim.{name}", f"Adam's decay rate must be in [0, 1), got {o[name]}")
  if not o.eps > 0:
    _fail("optim.eps", f"must be > 0, got {o.eps}")
  if not o.weight_decay >= 0:
    _fail("optim.weight_decay", f"must be ≥ 0, got {o.weight_decay}")
  if not o.max_grad_norm >= 0:
    _fail("optim.max_grad_norm", f"must be ≥ 0 (0 = no clipping), got {o.max_grad_norm}")
  flags = {"resume": c.resume, "loss.mask_truncated": c.loss.mask_truncated, "log.progress": c.log.progress,
           "log.tensorboard": c.log.tensorboard, "log.plot": c.log.plot}
  for name, value in flags.items():
    if not isinstance(value, bool):
      _fail(name, f"must be True or False, got {value!r}")
