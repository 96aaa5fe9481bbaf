"""Ahead-of-time compiles of real-size programs for TPU topologies on a CPU host (DESIGN "Scale":
what this machine cannot run is checked by compiling it for the target and reading per-device memory).

  tpu_devices("v5p:2x2x2")   compile-only devices from libtpu's topology description (no TPU, no hosts;
                             the only function in arena_jax that loads libtpu)
  lower_train_step           the RL update the trainer runs (`arena_jax.train.sharding.train_step_fn`)
  lower_sampler              the sampler's prefill and decode (`Sampler.lower`)
  memory_report              per-device memory of a compiled program
  aot_compile                all of it for a run config (configs/real_*.py); `launch/aot_compile.py`

A room above `arena_jax.train` and `arena_jax.sampling`: it lowers their programs on abstract inputs
and nothing imports it back. docs/tpu.md "Ahead-of-time compiles" shows the reports.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
import time
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import ml_collections
from jax.sharding import Mesh

from arena_jax import parallel
from arena_jax import rl
from arena_jax.models.config import ModelConfig, get_model_config
from arena_jax.models.sharding import LOGICAL_AXIS_RULES
from arena_jax.sampling import RandomSampling, Sampler
from arena_jax.train import sharding as train_sharding
from arena_jax.train import step as step_lib

GiB = 1 << 30


# ─────────────────────────────────────── TPU topologies ───────────────────────────────────────


@dataclasses.dataclass(frozen=True)
class TpuChip:
  """One TPU generation: HBM per JAX device and libtpu's chip config (megacore: one device per chip)."""

  hbm_bytes: int
  chip_config: str | None = None
  accelerator_prefix: str = ""


TPU_CHIPS: dict[str, TpuChip] = {
    "v4": TpuChip(32 * GiB, "megacore", "v4"),
    "v5p": TpuChip(95 * GiB, "megacore", "v5p"),
    "v5e": TpuChip(16 * GiB, None, "v5litepod"),
    "v6e": TpuChip(32 * GiB, None, "v6e"),
}


def parse_topology(name: str) -> tuple[str, tuple[int, ...]]:
  """"v5p:2x2x2" → ("v5p", (2, 2, 2)); raises ValueError naming the accepted forms."""
  chip, _, dims = name.partition(":")
  try:
    shape = tuple(int(d) for d in dims.split("x"))
  except ValueError:
    shape = ()
  if chip not in TPU_CHIPS or not shape or min(shape) < 1:
    raise ValueError(f"TPU topology {name!r}: use '<chip>:<A>x<B>[x<C>]' with chip in {sorted(TPU_CHIPS)}, "
                     "e.g. v5p:2x2x2, v5e:4x4, v4:2x2x2")
  return chip, shape


def tpu_devices(topology: str) -> list:
  """Compile-only devices of a TPU slice from libtpu's topology description: no TPU, no hosts needed.

  Loads libtpu (the `tpu` extra); nothing else in arena_jax does. Run with JAX_PLATFORMS=cpu.
  """
  chip, shape = parse_topology(topology)
  spec = TPU_CHIPS[chip]
  # libtpu reads these at load time; on a machine that is not a TPU VM it would otherwise query the
  # GCE metadata server and print warnings. Values only silence the look-up; the topology is `topology`.
  os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
  cores = math.prod(shape) * (2 if spec.chip_config == "megacore" else 1)  # accelerator types count cores
  os.environ.setdefault("TPU_ACCELERATOR_TYPE", f"{spec.accelerator_prefix}-{cores}")
  os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")
  # Imported here, after the environment above: this is what loads libtpu (only in the `tpu` extra's
  # venv), so `import arena_jax.aot` stays cheap and works without it.
  from jax.experimental import topologies  # pylint: disable=g-import-not-at-top

  kwargs = {"chip_config_name": spec.chip_config} if spec.chip_config else {}
  return list(topologies.get_topology_desc(topology, "tpu", **kwargs).devices)


# ─────────────────────────────────────── memory of a compiled program ───────────────────────────────────────


@dataclasses.dataclass(frozen=True)
class MemoryReport:
  """Per-device memory of a compiled program (`Compiled.memory_analysis()`), in bytes.

  total = arguments + outputs − aliased (donated inputs reused as outputs) + temporaries + code.
  """

  arguments: int
  outputs: int
  aliased: int
  temporaries: int
  code: int
  hbm: int
  error: str = ""  # the compiler's refusal (e.g. out of HBM): the program has no executable

  @property
  def total(self) -> int:
    return self.arguments + self.outputs - self.aliased + self.temporaries + self.code

  @property
  def fits(self) -> bool:
    return not self.error and self.total <= self.hbm


def memory_report(compiled, hbm_bytes: int) -> MemoryReport:
  """The `MemoryReport` of a `jax.stages.Compiled` against `hbm_bytes` per device."""
  m = compiled.memory_analysis()
  return MemoryReport(arguments=int(m.argument_size_in_bytes), outputs=int(m.output_size_in_bytes),
                      aliased=int(m.alias_size_in_bytes), temporaries=int(m.temp_size_in_bytes),
                      code=int(m.generated_code_size_in_bytes), hbm=int(hbm_bytes))


def _oom_report(message: str, hbm: int) -> MemoryReport:
  """A `MemoryReport` from XLA's out-of-memory error, e.g. "… the total memory required for HLO
  temporaries (117.69G) exceeds available HBM (95.74G)": the temporaries it names, the rest unknown (0)."""
  units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
  found = re.search(r"required for HLO temporaries \(([\d.]+)([KMGT])", message)
  temps = int(float(found.group(1)) * units[found.group(2)]) if found else 0
  first = message.strip().splitlines()[0]
  return MemoryReport(0, 0, 0, temps, 0, hbm, error=first[:200])


def format_reports(topology: str, reports: Sequence[tuple[str, MemoryReport]]) -> str:
  """The per-device memory table `launch/aot_compile.py` prints (GiB)."""
  g = lambda b: f"{b / GiB:8.2f}"
  head = f"{'program':52s} {'args':>8s} {'outputs':>8s} {'aliased':>8s} {'temps':>8s} {'code':>8s} {'total':>8s} {'HBM':>8s}  fits"
  lines = [f"per-device memory on {topology} (GiB)", head]
  for name, m in reports:
    if m.error:
      lines.append(f"{name:52s} {'':8s} {'':8s} {'':8s} {g(m.temporaries)} {'':8s} {'':8s} {g(m.hbm)}  NO: {m.error}")
      continue
    lines.append(f"{name:52s} {g(m.arguments)} {g(m.outputs)} {g(m.aliased)} {g(m.temporaries)} {g(m.code)} "
                 f"{g(m.total)} {g(m.hbm)}  {'yes' if m.fits else 'NO'}")
  return "\n".join(lines)


# ─────────────────────────────────────── the programs ───────────────────────────────────────


def lower_train_step(model_config: ModelConfig, optimizer, loss_config, mesh: Mesh, *, rows: int, prompt_len: int,
                     new_tokens: int, micro_batches: int, temperature: float = 1.0, use_reference: bool = False,
                     rules: Sequence[tuple[str, Any]] = LOGICAL_AXIS_RULES, mode=None, group_size: int = 1,
                     minibatches: int = 1, std_ddof: int = 0):
  """`jax.stages.Lowered` of the RL update (`train_step_fn`) for R = `rows` rows of P + N tokens.

  With a reward `mode` (an `rl.RewardMode`): the trainer's program, which also routes and computes the
  advantages of the step's R·minibatches / G groups of G (`StepRewards`) inside the jit.
  """
  train_sharding.check_train_batch(rows, micro_batches, mesh, rules)
  sh = train_sharding.train_shardings(model_config, optimizer, mesh, rules)
  fn = train_sharding.train_step_fn(model_config, optimizer, loss_config, mesh, temperature=temperature,
                                    micro_batches=micro_batches, use_reference=use_reference, rules=rules,
                                    mode=mode, std_ddof=std_ddof, shardings=sh)
  ref = parallel.abstract_params(model_config, sh.state.params) if use_reference else None
  args = [train_sharding.abstract_train_state(model_config, optimizer, sh),
          train_sharding.abstract_rollout(rows, prompt_len, new_tokens, sh), ref]
  if mode is not None:
    groups, sds = rows * minibatches // group_size, jax.ShapeDtypeStruct
    rep = sh.replicated
    args += [step_lib.StepRewards(sds((groups, group_size), jnp.float32, sharding=rep),
                                  sds((groups, group_size), jnp.float32, sharding=rep),
                                  sds((groups,), jnp.bool_, sharding=rep),
                                  sds((groups, group_size), jnp.float32, sharding=rep)),
             sds((), jnp.int32, sharding=rep)]
  return fn.lower(*args)


def lower_sampler(sampler: Sampler, num_prompts: int, prompt_len: int):
  """(prefill, decode) `jax.stages.Lowered` of a meshed `Sampler`'s two programs for B = `num_prompts`
  prompts of bucket P = `prompt_len` (the programs `Sampler.__call__` runs; `Sampler.lower`)."""
  if sampler.mesh is None:
    raise ValueError("lower_sampler needs a Sampler with a mesh (the devices it compiles for)")
  return sampler.lower(num_prompts, prompt_len)


def aot_compile(config: ml_collections.ConfigDict, topology: str, programs: Sequence[str] = ("train", "prefill", "decode"),
                log=print) -> list[tuple[str, MemoryReport]]:
  """Compiles a real-size run config's programs for a TPU `topology` on this host; per-device memory.

  `config` is a run config (configs/real_*.py) with `aot.model` (a named `ModelConfig`) and
  `aot.prompt_len` (the prompt bucket P). Programs: "train" = the RL update on prompts_per_step ×
  group_size / minibatches rows of P + max_new_tokens tokens; "prefill" / "decode" = the sampler's
  programs for prompts_per_step prompts × group_size samples of max_new_tokens tokens.
  """
  unknown = set(programs) - {"train", "prefill", "decode"}
  if unknown:
    raise ValueError(f"unknown programs {sorted(unknown)}; choose from train, prefill, decode")
  chip, _ = parse_topology(topology)
  devices = tpu_devices(topology)
  mesh, sample_mesh = parallel.make_meshes(config.mesh, devices)
  rules = parallel.axis_rules(config.mesh.rules)
  model_config = get_model_config(config.aot.model)
  r, o = config.rollout, config.optim
  hbm = TPU_CHIPS[chip].hbm_bytes
  log(f"{topology}: {len(devices)} devices on {len({d.process_index for d in devices})} hosts; "
      f"train mesh {dict(mesh.shape)}, sampler mesh {dict(sample_mesh.shape)}; {config.aot.model} "
      f"({model_config.num_params() / 1e9:.2f} B params, {model_config.param_dtype})")
  lowered = []
  if "train" in programs:
    rows = r.prompts_per_step * r.group_size // o.minibatches
    optimizer = step_lib.make_optimizer(o)
    lowered.append((f"train   {rows}×{config.aot.prompt_len + r.max_new_tokens} tok, {o.micro_batches} micro-batches",
                    lambda: lower_train_step(
                        model_config, optimizer, config.loss, mesh, rows=rows, prompt_len=config.aot.prompt_len,
                        new_tokens=r.max_new_tokens, micro_batches=o.micro_batches, temperature=r.temperature,
                        use_reference=config.loss.kl_coef > 0, rules=rules, mode=rl.get_mode(config.reward.mode),
                        group_size=r.group_size, minibatches=o.minibatches, std_ddof=config.reward.std_ddof)))
  if "prefill" in programs or "decode" in programs:
    sampler = Sampler(config=model_config, max_new_tokens=r.max_new_tokens, num_samples=r.group_size,
                      method=RandomSampling(temperature=r.temperature, top_k=r.top_k or None, top_p=r.top_p),
                      stop_tokens=(2,), pad_id=0, mesh=sample_mesh, rules=rules)
    both = {}

    def sampler_program(name):
      if not both:
        both["prefill"], both["decode"] = lower_sampler(sampler, r.prompts_per_step, config.aot.prompt_len)
      return both[name]

    shape = f"{r.prompts_per_step}×{r.group_size} × ({config.aot.prompt_len} + {r.max_new_tokens}) tok"
    for name in ("prefill", "decode"):
      if name in programs:
        lowered.append((f"{name:8s}{shape}", functools.partial(sampler_program, name)))
  reports = []
  for name, lower in lowered:
    t0 = time.perf_counter()
    try:
      report = memory_report(lower().compile(), hbm)
    except jax.errors.JaxRuntimeError as e:  # XLA refuses a program that cannot fit: report how far off
      if "RESOURCE_EXHAUSTED" not in str(e):
        raise
      report = _oom_report(str(e), hbm)
    reports.append((name, report))
    log(f"  compiled {name.split()[0]} in {time.perf_counter() - t0:.0f} s"
        + (f": {report.error}" if report.error else ""))
  return reports
