"""The roofline of launch/aot_compile.py (`arena_jax.aot`): pure arithmetic, and the cost and report cache
of a compiled program, here on the CPU backend (no libtpu)."""

import jax
import jax.numpy as jnp
import pytest

from arena_jax import aot


def test_roofline_is_the_larger_of_the_compute_and_memory_times():
  v5e = aot.TPU_CHIPS["v5e"]
  # 197 TFLOP at 197 TFLOP/s = 1 s; 81.9 GB at 819 GB/s = 0.1 s: compute-bound.
  r = aot.roofline(197e12, 81.9e9, v5e.peak_flops, v5e.hbm_bandwidth)
  assert r.compute_s == pytest.approx(1.0) and r.memory_s == pytest.approx(0.1)
  assert r.seconds == pytest.approx(1.0) and r.bound == "compute"
  # One decode step of an 8B bf16 model on one chip: 16 GB of weights read, 2·8e9·128 flops for 128 rows.
  step = aot.roofline(2 * 8e9 * 128, 16e9, v5e.peak_flops, v5e.hbm_bandwidth)
  assert step.bound == "memory" and step.seconds == pytest.approx(16e9 / 819e9)
  assert aot.tokens_per_chip_second(128, step.seconds, 1) == pytest.approx(128 * 819e9 / 16e9)


def test_tokens_per_chip_divide_the_slice_throughput():
  assert aot.tokens_per_chip_second(8000, 0.5, 8) == pytest.approx(2000)


def test_bad_inputs_are_refused():
  with pytest.raises(ValueError, match="positive"):
    aot.roofline(1.0, 1.0, 0.0, 1.0)
  with pytest.raises(ValueError, match="≥ 0"):
    aot.roofline(-1.0, 1.0, 1.0, 1.0)
  with pytest.raises(ValueError, match="seconds"):
    aot.tokens_per_chip_second(1, 0.0, 1)


def test_every_chip_has_published_peaks():
  for name, chip in aot.TPU_CHIPS.items():
    assert chip.peak_flops > 1e14 and chip.hbm_bandwidth > 5e11, name


def test_the_table_prints_each_program_and_the_anchor():
  cost = aot.ProgramCost("decode step", flops=2e12, bytes_accessed=1.2e9, tokens=512, loops=4)
  text = aot.format_roofline("v5e:4x4", [("decode", cost), ("train", None)])
  r = aot.roofline(2e12, 1.2e9, 197e12, 819e9)
  assert "memory" in text and f"{r.seconds * 1e3:.3f}" in text
  assert f"{512 / r.seconds / 16:,.0f}" in text and "8,249 tok/s" in text and "does not fit" in text


def test_cost_counts_a_loop_body_once_and_the_cache_skips_the_recompile(tmp_path):
  """What `aot_compile` scales by: XLA's cost analysis counts a while loop's body once, whatever its trip
  count (also on TPU: docs/tpu.md). A second report of the same program comes from the cache."""
  n = 64
  x = jax.ShapeDtypeStruct((n, n), jnp.float32)
  one = jax.jit(lambda a, b: a @ b).lower(x, x)
  looped = jax.jit(lambda a, b: jax.lax.fori_loop(0, 8, lambda i, y: y @ b, a)).lower(x, x)
  single = aot.program_cost(one.compile(), unit="step", tokens=1)
  loop = aot.program_cost(looped.compile(), unit="step", tokens=1)
  assert single.flops == pytest.approx(2 * n**3) and single.loops == 0
  assert loop.flops == pytest.approx(single.flops, rel=1e-4) and loop.loops == 1  # (+ the counter)
  first = aot.compile_or_cached(
    "loop", looped, "cpu", 1 << 30, unit="step", tokens=1, scale=8.0, cache_dir=str(tmp_path)
  )
  again = aot.compile_or_cached(
    "loop", looped, "cpu", 1 << 30, unit="step", tokens=1, scale=8.0, cache_dir=str(tmp_path)
  )
  assert not first.cached and again.cached
  assert again.cost == first.cost and again.memory == first.memory
  assert first.cost.flops == pytest.approx(8 * 2 * n**3, rel=1e-4)
  other = aot.compile_or_cached("one", one, "cpu", 1 << 30, unit="step", tokens=1, cache_dir=str(tmp_path))
  assert not other.cached and len(list(tmp_path.iterdir())) == 2


def test_compile_many_reports_each_run_and_a_failure():
  """One process per run, output in order; a run that fails (here: a topology the config has no line for,
  refused before libtpu loads) makes the whole call fail and says why."""
  logged = []
  ok = aot.compile_many(["configs/real_qwen3_8b.py:v5e:2x2"], jobs=2, log=logged.append)
  assert not ok and logged[0].startswith("$ launch.aot_compile --config=configs/real_qwen3_8b.py:v5e:2x2")
  assert "no settings for topology 'v5e:2x2'" in logged[-1]
