"""Ahead-of-time compiles of real-size programs for TPU topologies on a CPU host (docs/tpu.md:
what this machine cannot run is checked by compiling it for the target and reading per-device memory).

  tpu_devices("v5p:2x2x2")   compile-only devices from libtpu's topology description (no TPU, no hosts;
                             the only function in arena_jax that loads libtpu)
  lower_train_step           the RL update the trainer runs (`arena_jax.train.sharding.train_step_fn`)
  lower_sampler              the sampler's prefill and decode (`Sampler.lower`)
  memory_report              per-device memory of a compiled program
  program_cost, roofline     per-device flops and bytes of a compiled program (`cost_analysis()`) and the
                             roofline lower bound on its time from the chip's peak FLOP/s and HBM bandwidth
  aot_compile                all of it for a run config (configs/real_*.py); `launch/aot_compile.py`
  compile_many               several (config, topology) runs of launch/aot_compile.py in parallel processes

A room above `arena_jax.train` and `arena_jax.sampling`: it lowers their programs on abstract inputs
and nothing imports it back. docs/tpu.md "Ahead-of-time compiles" shows the reports.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import hashlib
import importlib.metadata
import json
import math
import os
import re
import subprocess
import sys
import time
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import ml_collections
from jax.sharding import Mesh

from arena_jax import fileio
from arena_jax import parallel
from arena_jax import rl
from arena_jax.models.attention import resolve_attention
from arena_jax.models.config import ModelConfig, get_model_config, sampling_config, with_precision
from arena_jax.models.sharding import LOGICAL_AXIS_RULES
from arena_jax.sampling import RandomSampling, Sampler, cache_chunking
from arena_jax.train import packing
from arena_jax.train import sharding as train_sharding
from arena_jax.train import step as step_lib

GiB = 1 << 30


# ─────────────────────────────────────── TPU topologies ───────────────────────────────────────


@dataclasses.dataclass(frozen=True)
class TpuChip:
  """One TPU generation: HBM per JAX device, libtpu's chip config (megacore: one device per chip), and the
  chip's published peak dense bf16 FLOP/s and HBM bandwidth (bytes/s) for the roofline (docs/tpu.md cites
  the Cloud TPU pages they come from)."""

  hbm_bytes: int
  chip_config: str | None = None
  accelerator_prefix: str = ""
  peak_flops: float = 0.0
  hbm_bandwidth: float = 0.0


TPU_CHIPS: dict[str, TpuChip] = {
  "v4": TpuChip(32 * GiB, "megacore", "v4", peak_flops=275e12, hbm_bandwidth=1200e9),
  "v5p": TpuChip(95 * GiB, "megacore", "v5p", peak_flops=459e12, hbm_bandwidth=2765e9),
  "v5e": TpuChip(16 * GiB, None, "v5litepod", peak_flops=197e12, hbm_bandwidth=819e9),
  "v6e": TpuChip(32 * GiB, None, "v6e", peak_flops=918e12, hbm_bandwidth=1640e9),
}


def parse_topology(name: str) -> tuple[str, tuple[int, ...]]:
  """ "v5p:2x2x2" → ("v5p", (2, 2, 2)); raises ValueError naming the accepted forms."""
  chip, _, dims = name.partition(":")
  try:
    shape = tuple(int(d) for d in dims.split("x"))
  except ValueError:
    shape = ()
  if chip not in TPU_CHIPS or not shape or min(shape) < 1:
    raise ValueError(
      f"TPU topology {name!r}: use '<chip>:<A>x<B>[x<C>]' with chip in {sorted(TPU_CHIPS)}, "
      "e.g. v5p:2x2x2, v5e:4x4, v4:2x2x2"
    )
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
  # libtpu takes a machine-wide lock file by default; `compile_many` runs several compiling processes.
  os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
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
  return MemoryReport(
    arguments=int(m.argument_size_in_bytes),
    outputs=int(m.output_size_in_bytes),
    aliased=int(m.alias_size_in_bytes),
    temporaries=int(m.temp_size_in_bytes),
    code=int(m.generated_code_size_in_bytes),
    hbm=int(hbm_bytes),
  )


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
  columns = ("args", "outputs", "aliased", "temps", "code", "total", "HBM")
  head = f"{'program':52s} " + " ".join(f"{c:>8s}" for c in columns) + "  fits"
  lines = [f"per-device memory on {topology} (GiB)", head]
  for name, m in reports:
    if m.error:
      lines.append(f"{name:52s} {'':8s} {'':8s} {'':8s} {g(m.temporaries)} {'':8s} {'':8s} {g(m.hbm)}  NO: {m.error}")
      continue
    lines.append(
      f"{name:52s} {g(m.arguments)} {g(m.outputs)} {g(m.aliased)} {g(m.temporaries)} {g(m.code)} "
      f"{g(m.total)} {g(m.hbm)}  {'yes' if m.fits else 'NO'}"
    )
  return "\n".join(lines)


# ─────────────────────────────────── speed of a compiled program: the roofline ───────────────────────────────────

# The published figure the decode rows are printed beside (a reference point, docs/tpu.md): JetStream serving
# Llama-3-8B on a v5e-8 (bf16, batch 128, 1024 input / 1024 output tokens), total throughput of the 8 chips.
ANCHOR = dict(text="JetStream, Llama-3-8B on v5e-8 (bf16, batch 128, 1024 in / 1024 out)", tokens_per_s=8249.0, chips=8)


@dataclasses.dataclass(frozen=True)
class Roofline:
  """Lower bounds on a program's time on one chip: all its flops at the peak FLOP/s (`compute_s`), all its
  HBM bytes at the peak bandwidth (`memory_s`); it takes at least the larger."""

  compute_s: float
  memory_s: float

  @property
  def seconds(self) -> float:
    return max(self.compute_s, self.memory_s)

  @property
  def bound(self) -> str:
    return "compute" if self.compute_s >= self.memory_s else "memory"


def roofline(flops: float, bytes_accessed: float, peak_flops: float, hbm_bandwidth: float) -> Roofline:
  """The roofline of `flops` and `bytes_accessed` on a chip of `peak_flops` FLOP/s and `hbm_bandwidth` bytes/s:
  time ≥ max(flops / peak, bytes / bandwidth). Pure arithmetic, no compiler."""
  if peak_flops <= 0 or hbm_bandwidth <= 0:
    raise ValueError(f"peak_flops and hbm_bandwidth must be positive, got {peak_flops} and {hbm_bandwidth}")
  if flops < 0 or bytes_accessed < 0:
    raise ValueError(f"flops and bytes must be ≥ 0, got {flops} and {bytes_accessed}")
  return Roofline(flops / peak_flops, bytes_accessed / hbm_bandwidth)


def tokens_per_chip_second(tokens: float, seconds: float, chips: int) -> float:
  """Throughput per chip of a slice of `chips` chips that processes `tokens` in `seconds`."""
  if seconds <= 0 or chips < 1:
    raise ValueError(f"seconds must be > 0 and chips ≥ 1, got {seconds} and {chips}")
  return tokens / seconds / chips


@dataclasses.dataclass(frozen=True)
class ProgramCost:
  """Per-device work of one unit of a program (a prefill, one decode step, one train step).

  `flops` and `bytes_accessed` come from `Compiled.cost_analysis()` times `scale`: on a sharded program
  the analysis is per device, and it counts the body of a while loop once, whatever its trip count
  (docs/tpu.md), so the caller scales the once-counted body to the unit. `tokens` is what the whole slice
  processes in the unit; `loops` counts the while loops of the compiled program (what `scale` stands for).
  """

  unit: str
  flops: float
  bytes_accessed: float
  tokens: int
  loops: int = 0

  def roofline(self, chip: TpuChip) -> Roofline:
    return roofline(self.flops, self.bytes_accessed, chip.peak_flops, chip.hbm_bandwidth)


def program_cost(compiled, *, unit: str, tokens: int, scale: float = 1.0) -> ProgramCost:
  """The `ProgramCost` of a `jax.stages.Compiled`: its cost analysis × `scale` (see `ProgramCost`)."""
  analysis = compiled.cost_analysis()
  if isinstance(analysis, (list, tuple)):  # older jax: one dict per HLO module
    analysis = analysis[0]
  loops = compiled.as_text().count(" while(")
  return ProgramCost(
    unit,
    float(analysis.get("flops", 0.0)) * scale,
    float(analysis.get("bytes accessed", 0.0)) * scale,
    int(tokens),
    loops,
  )


def format_roofline(topology: str, costs: Sequence[tuple[str, ProgramCost | None]]) -> str:
  """The roofline table `launch/aot_compile.py` prints: per device and unit, the flops and bytes, the two
  bounds, which one binds, and the tokens/s per chip it allows; then the published anchor."""
  chip_name, shape = parse_topology(topology)
  chip, chips = TPU_CHIPS[chip_name], math.prod(shape)
  lines = [
    f"roofline lower bound on {topology} (per chip: {chip.peak_flops / 1e12:.0f} TFLOP/s bf16, "
    f"{chip.hbm_bandwidth / 1e9:.0f} GB/s HBM; per device and unit)",
    f"{'program':8s} {'unit':12s} {'loops':>5s} {'TFLOP':>9s} {'GB':>9s} {'compute ms':>11s} {'memory ms':>10s} "
    f"{'bound':>8s} {'roofline ms':>12s} {'tok/s/chip':>11s}",
  ]
  for name, c in costs:
    if c is None:
      lines.append(f"{name:8s} (no executable: does not fit)")
      continue
    r = c.roofline(chip)
    lines.append(
      f"{name:8s} {c.unit:12s} {c.loops:5d} {c.flops / 1e12:9.3f} {c.bytes_accessed / 1e9:9.3f} "
      f"{r.compute_s * 1e3:11.3f} {r.memory_s * 1e3:10.3f} {r.bound:>8s} {r.seconds * 1e3:12.3f} "
      f"{tokens_per_chip_second(c.tokens, r.seconds, chips):11,.0f}"
    )
  per_chip = ANCHOR["tokens_per_s"] / ANCHOR["chips"]
  lines.append(
    f"published anchor: {ANCHOR['text']}: {ANCHOR['tokens_per_s']:,.0f} tok/s = {per_chip:,.0f} tok/s "
    "per chip, measured (a roofline is an upper bound on tokens/s)"
  )
  return "\n".join(lines)


# ─────────────────────────────────────── the programs ───────────────────────────────────────


def lower_train_step(
  model_config: ModelConfig,
  optimizer,
  loss_config,
  mesh: Mesh,
  *,
  rows: int,
  prompt_len: int,
  new_tokens: int,
  micro_batches: int,
  temperature: float = 1.0,
  use_reference: bool = False,
  rules: Sequence[tuple[str, Any]] = LOGICAL_AXIS_RULES,
  mode=None,
  group_size: int = 1,
  minibatches: int = 1,
  std_ddof: int = 0,
  pack_tokens: int = 0,
  packed_rows: int | None = None,
  lora=None,
):
  """`jax.stages.Lowered` of the RL update (`train_step_fn`) for R = `rows` rows of P + N tokens.

  With `lora` (a `models.LoraSpec`): the LoRA update, whose state holds the adapters and their moments and whose
  frozen base (its `ref_params`) is laid out like the model's weights.

  With a reward `mode` (an `rl.RewardMode`): the trainer's program, which also routes and computes the
  advantages of the step's R·minibatches / G groups of G (`StepRewards`) inside the jit.

  With `pack_tokens` L > 0: the packed update (`rollout.pack_tokens`, `train.packing`), its forward passes on
  `packed_rows` rows of L tokens in K = micro_batches × batch shards blocks. Default: the bucket of rows that
  holds as many tokens as the R padded rows (what full-length rows fill when L is a multiple of P + N).
  """
  train_sharding.check_train_batch(rows, micro_batches, mesh, rules)
  sh = train_sharding.train_shardings(model_config, optimizer, mesh, rules, packed=pack_tokens > 0, lora=lora)
  packed = {}
  if pack_tokens:
    blocks = micro_batches * parallel.batch_shards(mesh, rules)
    if packed_rows is None:
      per_block = -(-rows * (prompt_len + new_tokens) // (blocks * pack_tokens))
      packed_rows = blocks * packing.row_bucket(per_block, cap=rows // blocks)
    packed = dict(pack_tokens=pack_tokens, packed_rows=packed_rows, blocks=blocks)
  fn = train_sharding.train_step_fn(
    model_config,
    optimizer,
    loss_config,
    mesh,
    temperature=temperature,
    micro_batches=micro_batches,
    use_reference=use_reference,
    rules=rules,
    mode=mode,
    std_ddof=std_ddof,
    shardings=sh,
    packed=pack_tokens > 0,
    lora=lora,
  )
  if lora is not None:  # the frozen base, always an input (and the KL reference)
    ref = parallel.abstract_params(model_config, sh.base)
  else:
    ref = parallel.abstract_params(model_config, sh.state.params) if use_reference else None
  args = [
    train_sharding.abstract_train_state(model_config, optimizer, sh, lora=lora),
    train_sharding.abstract_rollout(rows, prompt_len, new_tokens, sh, **packed),
    ref,
  ]
  if mode is not None:
    groups, sds = rows * minibatches // group_size, jax.ShapeDtypeStruct
    rep = sh.replicated
    args += [
      step_lib.StepRewards(
        sds((groups, group_size), jnp.float32, sharding=rep),
        sds((groups, group_size), jnp.float32, sharding=rep),
        sds((groups,), jnp.bool_, sharding=rep),
        sds((groups, group_size), jnp.float32, sharding=rep),
      ),
      sds((), jnp.int32, sharding=rep),
    ]
  return fn.lower(*args)


def lower_sampler(sampler: Sampler, num_prompts: int, prompt_len: int):
  """(prefill, decode) `jax.stages.Lowered` of a meshed `Sampler`'s two programs for B = `num_prompts`
  prompts of bucket P = `prompt_len` (the programs `Sampler.__call__` runs; `Sampler.lower`)."""
  if sampler.mesh is None:
    raise ValueError("lower_sampler needs a Sampler with a mesh (the devices it compiles for)")
  return sampler.lower(num_prompts, prompt_len)


@dataclasses.dataclass(frozen=True)
class ProgramReport:
  """What `aot_compile` reports of one program: its per-device memory and, when it compiled, its cost;
  `cached`: read from the report cache instead of compiled (`compile_or_cached`)."""

  name: str
  memory: MemoryReport
  cost: ProgramCost | None
  cached: bool = False


def _libtpu_version() -> str:
  try:
    return importlib.metadata.version("libtpu")
  except importlib.metadata.PackageNotFoundError:
    return "none"


def report_key(lowered_text: str, topology: str) -> str:
  """What a compiled program's memory and cost analysis depend on: the lowered program, the target and the
  compiler (jax and libtpu versions, XLA and libtpu flags)."""
  parts = [
    lowered_text,
    topology,
    jax.__version__,
    _libtpu_version(),
    os.environ.get("XLA_FLAGS", ""),
    os.environ.get("LIBTPU_INIT_ARGS", ""),
  ]
  return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def compile_or_cached(
  name: str,
  lowered,
  topology: str,
  hbm: int,
  *,
  unit: str,
  tokens: int,
  scale: float = 1.0,
  cache_dir: str | None = None,
) -> ProgramReport:
  """Compiles `lowered` for its memory and cost (`program_cost` with `unit`, `tokens`, `scale`), unless
  `cache_dir` holds the analyses of the same program for the same target and compiler (`report_key`): a
  rerun of `make aot` with unchanged code recompiles nothing. XLA's refusal to fit (RESOURCE_EXHAUSTED)
  is a report too."""
  path = None
  if cache_dir:
    path = os.path.join(cache_dir, report_key(lowered.as_text(), topology) + ".json")
    if os.path.exists(path):
      with open(path) as f:
        d = json.load(f)
      raw = d["cost"]
      cost = (
        ProgramCost(unit, raw["flops"] * scale, raw["bytes_accessed"] * scale, tokens, raw["loops"]) if raw else None
      )
      return ProgramReport(name, MemoryReport(**d["memory"]), cost, cached=True)
  try:
    compiled = lowered.compile()
    report = ProgramReport(name, memory_report(compiled, hbm), program_cost(compiled, unit=unit, tokens=tokens))
  except jax.errors.JaxRuntimeError as e:  # XLA refuses a program that cannot fit: report how far off
    if "RESOURCE_EXHAUSTED" not in str(e):
      raise
    report = ProgramReport(name, _oom_report(str(e), hbm), None)
  if path:  # the unscaled analyses: the unit and its scale may change without a recompile
    os.makedirs(cache_dir, exist_ok=True)
    data = {
      "memory": dataclasses.asdict(report.memory),
      "cost": dataclasses.asdict(report.cost) if report.cost else None,
    }
    fileio.atomic_write(path, json.dumps(data, indent=1))
  if report.cost is not None and scale != 1.0:
    c = report.cost
    report = dataclasses.replace(
      report, cost=dataclasses.replace(c, flops=c.flops * scale, bytes_accessed=c.bytes_accessed * scale)
    )
  return report


def aot_compile(
  config: ml_collections.ConfigDict,
  topology: str,
  programs: Sequence[str] = ("train", "prefill", "decode"),
  log=print,
  cache_dir: str | None = None,
) -> list[ProgramReport]:
  """Compiles a real-size run config's programs for a TPU `topology` on this host: per-device memory and cost.

  `config` is a run config (configs/real_*.py) with `aot.model` (a named `ModelConfig`) and
  `aot.prompt_len` (the prompt bucket P). Programs: "train" = the RL update on prompts_per_step ×
  group_size / minibatches rows of P + max_new_tokens tokens, with the config's `model.remat`;
  "prefill" / "decode" = the sampler's programs for prompts_per_step prompts × group_size samples of
  max_new_tokens tokens. The costs' units: the train step (its micro-batch loop's body × micro_batches), the
  prefill, one decode step (the decode program has one while loop per cache chunk, each of one step: its
  cost ÷ the number of loops); docs/tpu.md states what that leaves out. `cache_dir`: see `compile_or_cached`.
  """
  unknown = set(programs) - {"train", "prefill", "decode"}
  if unknown:
    raise ValueError(f"unknown programs {sorted(unknown)}; choose from train, prefill, decode")
  chip, _ = parse_topology(topology)
  devices = tpu_devices(topology)
  mesh, sample_mesh = parallel.make_meshes(config.mesh, devices)
  rules = parallel.axis_rules(config.mesh.rules)
  # The run's precision: float32 masters (`model.weight_dtype`) under the compute dtype (`model.dtype`), the
  # sampler decoding a compute-dtype copy (`models.sampling_config`), as `train.Trainer` builds them.
  model_config = with_precision(
    get_model_config(config.aot.model), weight_dtype=config.model.weight_dtype, dtype=config.model.dtype
  )
  r, o, p = config.rollout, config.optim, config.aot.prompt_len
  hbm = TPU_CHIPS[chip].hbm_bytes
  log(
    f"{topology}: {len(devices)} devices on {len({d.process_index for d in devices})} hosts; "
    f"train mesh {dict(mesh.shape)}, sampler mesh {dict(sample_mesh.shape)}; {config.aot.model} "
    f"({model_config.num_params() / 1e9:.2f} B params, {model_config.param_dtype} masters, {model_config.dtype} "
    f"compute{', ' + config.model.quantization + ' matmuls' if config.model.quantization else ''}); "
    f"remat {config.model.remat}; attention {resolve_attention(config.model.attention, 'tpu')} "
    "(train step and prefill; decode steps attend to the cache in XLA)"
  )
  lowered = []  # (name, lower, unit, tokens, scale)
  if "train" in programs:
    rows = r.prompts_per_step * r.group_size // o.minibatches
    optimizer = step_lib.make_optimizer(o)
    lora = step_lib.lora_spec(config.model.lora)
    lowered.append(
      (
        f"train   {rows}×{p + r.max_new_tokens} tok{' packed' if r.pack_tokens else ''}, "
        f"{o.micro_batches} micro-batches" + (f", LoRA r={lora.rank}" if lora else ""),
        lambda: lower_train_step(
          model_config.replace(
            remat=config.model.remat, quantization=config.model.quantization, attention=config.model.attention
          ),
          optimizer,
          config.loss,
          mesh,
          rows=rows,
          prompt_len=p,
          new_tokens=r.max_new_tokens,
          micro_batches=o.micro_batches,
          temperature=r.temperature,
          use_reference=config.loss.kl_coef > 0,
          rules=rules,
          mode=rl.get_mode(config.reward.mode),
          group_size=r.group_size,
          minibatches=o.minibatches,
          std_ddof=config.reward.std_ddof,
          pack_tokens=r.pack_tokens,
          lora=lora,
        ),
        "train step",
        rows * (p + r.max_new_tokens),
        float(o.micro_batches),
      )
    )
  if "prefill" in programs or "decode" in programs:
    sampler = Sampler(
      config=sampling_config(model_config).replace(attention=config.model.attention),
      max_new_tokens=r.max_new_tokens,
      num_samples=r.group_size,
      method=RandomSampling(temperature=r.temperature, top_k=r.top_k or None, top_p=r.top_p),
      stop_tokens=(2,),
      pad_id=0,
      mesh=sample_mesh,
      rules=rules,
    )
    both = {}
    # One sampler call: `rollout.sample_batch` prompts when the step's rollout is split into several calls.
    prompts = r.sample_batch or r.prompts_per_step

    def sampler_program(name):
      if not both:
        both["prefill"], both["decode"] = lower_sampler(sampler, prompts, p)
      return both[name]

    shape = f"{prompts}×{r.group_size} × ({p} + {r.max_new_tokens}) tok"
    _, loops = cache_chunking(r.max_new_tokens, sampler.cache_chunk)
    units = {
      "prefill": ("prefill", prompts * p, 1.0),
      "decode": ("decode step", prompts * r.group_size, 1.0 / loops),
    }
    for name in ("prefill", "decode"):
      if name in programs:
        lowered.append((f"{name:8s}{shape}", functools.partial(sampler_program, name), *units[name]))
  reports = []
  for name, lower, unit, tokens, scale in lowered:
    t0 = time.perf_counter()
    report = compile_or_cached(name, lower(), topology, hbm, unit=unit, tokens=tokens, scale=scale, cache_dir=cache_dir)
    reports.append(report)
    how = "found in the cache" if report.cached else "compiled"
    log(
      f"  {how} {name.split()[0]} in {time.perf_counter() - t0:.0f} s"
      + (f": {report.memory.error}" if report.memory.error else "")
    )
  return reports


def compile_many(runs: Sequence[str], jobs: int, extra_args: Sequence[str] = (), log=print) -> bool:
  """Runs `python -m launch.aot_compile --config=<run>` for each of `runs` (e.g.
  "configs/real_qwen3_8b.py:v5e:4x4"), `jobs` at a time in separate processes (each compile is mostly one
  thread of XLA), and prints each one's output whole, in the order of `runs`. True when every run fits."""

  def one(run):
    t0 = time.perf_counter()
    proc = subprocess.run(
      [sys.executable, "-m", "launch.aot_compile", f"--config={run}", *extra_args],
      capture_output=True,
      text=True,
      check=False,
    )
    return proc, time.perf_counter() - t0

  ok = True
  with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as pool:
    for run, (proc, seconds) in zip(runs, pool.map(one, runs)):
      log(f"$ launch.aot_compile --config={run}   ({seconds:.0f} s)\n{proc.stdout.rstrip()}")
      if proc.returncode:
        ok = False
        # The error is near the end of stderr (after libtpu's warnings, before absl's hints).
        log("\n".join(proc.stderr.strip().splitlines()[-3:]) or f"exit {proc.returncode}")
  return ok
