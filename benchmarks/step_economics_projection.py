"""The arithmetic of benchmarks.step_economics on a run's measured figures (nothing here measures or trains): the
target ratios (TARGETS), the CPU-scaled projection and the 8B projection, both "projected, not measured". Apart from
the measurement so that the projection model is read, changed and tested on its own
(tests/test_step_economics_projection.py).

**The CPU-scaled projection** (JSON `projection`). On this CPU the update dominates a step, unlike the
paper's regime where generation does. So besides the measured figures it prints a PROJECTION, labelled as
such: the same measured components with one generation batch costing k × RLVR's measured sampling time, k
chosen so that generation is `target_gen_fraction` of a DAPO step (which generates more batches), the
judge's latency kept at `latency_fraction` of the (projected) RLVR step, and the judge's remaining work
after generation hidden behind the next step's generation (async lag 1) as far as that lasts:

    wall' = k·b·sample₁ + verify + update + bt_fit + max(0, judge_after_gen · s − k·b·sample₁)

with sample₁ RLVR's sampling time of one batch, b the mode's generation batches per step, k the
sampling scale and s = RLVR's projected / measured wall. It is arithmetic on measured figures, not a
measurement, and conservative for group_done / speculative (their judging would start earlier inside a
longer generation; only the measured time after generation is used). It models the lock-step loop, so
async rows get none (`-` in the table, None in the JSON); the 8B projection covers them.

**The 8B projection** (JSON `projection_8b`, "projected, not measured"): Table 2's question — wall-clock
and generations per step against DAPO — for the paper's 8B policy on a TPU slice, ministral3_8b on
v5p:2x2x2 with 16k new tokens (8 chips), from the AOT roofline of docs/tpu.md ("The long-trace slices",
`launch.aot_compile --config=configs/real_ministral3_8b.py:v5p:2x2x2:16k`): train step 8,271 tok/s per chip,
decode step 1,139 tok/s per chip (the module constants TPU_*). The measured generations per step keep
their ratio to the batch, the sampling and the update are recomputed at 8B, the host work (verify, BT fit)
stays as measured and the judge's wait scales with the step:

    n' = generations · R / (prompts · G)                     R = 512 rollouts per step (64 prompts × G 8)
    sample' = n' · T / (decode tok/s/chip · chips)           T = --project_tokens new tokens per generation
    update' = R · (P + T) / (train tok/s/chip · chips)       P = 1024 prompt tokens; every mode trains R rows
    judge_wait' = judge_wait · s₈                            s₈ = RLVR's 8B wall / RLVR's measured wall
    lock-step: wall' = sample' + update' + verify + bt_fit + judge_wait'
    async:     wall' = max(sample', update') + verify + bt_fit + judge_wait'   (sampler and trainer overlap)

`wall_vs_dapo` and `generations_vs_dapo` are against lock-step `rlvr_dapo` (DAPO as the paper runs it);
`*_same_loop` against the DAPO row of the same loop (`rlvr_dapo_async` for async rows). Printed next to the
paper's reference: −27…−41% wall-clock per step (0.59–0.73× DAPO), ~0.5× generations. A roofline is an
upper bound on throughput (no collectives, no host, every row decoded to the longest), so the seconds are
lower bounds and the ratios are what to read; the prefill (≈ 0.06% of the decode at 8,192 new tokens) is
left out, and the generations ratio is the small policy's (DAPO's refills depend on how often a group is all
right or all wrong).
"""

from __future__ import annotations

# A row of the asynchronous loop is named `<mode row>_async`: it is projected as one, and paired with DAPO's async row.
ASYNC_SUFFIX = "_async"

# The targets for the async rows: (JSON key, bound, what it is).
TARGETS = (
  ("arena_live_async_vs_lockstep", 0.85, "wall(arena_live_async) / wall(arena_live)"),
  ("arena_live_async_vs_rlvr_async", 1.0, "wall(arena_live_async) / wall(rlvr_async)"),
  ("arena_live_vs_dapo_generations", 0.6, "generations(arena_live_async) / generations(rlvr_dapo_async)"),
)

# ── The 8B projection's constants: ministral3_8b on v5p:2x2x2 with 16k new tokens ──
# From docs/tpu.md, "The long-trace slices (`configs/pod.py` `LONG_SLICES`)": the output of
# `launch.aot_compile --config=configs/real_ministral3_8b.py:v5p:2x2x2:16k` (that page's programs; the
# summary table's row "v5p:2x2x2, 16k | ministral3_8b | ... | 8,271, compute-bound").
TPU_SLICE = "ministral3_8b on v5p:2x2x2, 16k new tokens"
TPU_CHIPS = 8  # "v5p:2x2x2: 8 devices on 2 hosts"
# roofline row "train    train step ... compute ... 8,271": the packed update, 512×17408 tok, remat full, splash
TPU_TRAIN_TOK_S_CHIP = 8271.0
# roofline row "decode   decode step ... memory ... 1,139": one sampler call of 16×8 rows × (1024 + 16384) tok
TPU_DECODE_TOK_S_CHIP = 1139.0
# configs/pod.py: rollout prompts_per_step=64 × group_size=8 rows trained per step
TPU_ROLLOUTS_PER_STEP = 512
# the prompt bucket of the real configs (the "1024 + 16384" of the same rows)
TPU_PROMPT_TOKENS = 1024
PAPER_REFERENCE = "−27…−41% wall-clock per step, ~0.5× generations"
PAPER_WALL_VS_DAPO = (0.59, 0.73)
PAPER_GENERATIONS_VS_DAPO = 0.5


def is_async(name: str) -> bool:
  return name.endswith(ASYNC_SUFFIX)


def project(m: dict, per_batch: float, k: float, s: float) -> float:
  """The CPU-scaled projected wall per step of a lock-step row (see module docstring)."""
  sample = k * per_batch * m["batches"]
  return sample + m["verify_s"] + m["update_s"] + m["bt_fit_s"] + max(0.0, m["judge_after_gen_s"] * s - sample)


def cpu_projection(results: dict, target_gen_fraction: float) -> tuple[float, float, dict]:
  """The CPU-scaled projection of `results` (which needs `rlvr`; module docstring): the sampling scale k, the
  judge's latency scale s and {row: projected wall per step, None for an async row}."""
  rlvr, dapo = results["rlvr"], results.get("rlvr_dapo")
  # One generation batch costs RLVR's measured sampling time (the steadiest estimate on a shared machine) × k, k
  # chosen so that generation is target_gen_fraction of a DAPO step.
  ref = dapo or rlvr
  per_batch = rlvr["sample_s"] / rlvr["batches"]
  rest = ref["wall_s"] - ref["sample_s"]
  # (≥ 1: where generation already dominates, nothing is projected)
  k = max(1.0, target_gen_fraction * rest / ((1 - target_gen_fraction) * per_batch * ref["batches"]))
  s = project(rlvr, per_batch, k, 1.0) / rlvr["wall_s"]
  return k, s, {name: None if is_async(name) else project(m, per_batch, k, s) for name, m in results.items()}


def project_8b(
  m: dict,
  *,
  asynchronous: bool,
  judge_scale: float,
  measured_rollouts: int,
  new_tokens: int = 8192,
  prompt_tokens: int = TPU_PROMPT_TOKENS,
  rollouts_per_step: int = TPU_ROLLOUTS_PER_STEP,
  decode_tok_s_chip: float = TPU_DECODE_TOK_S_CHIP,
  train_tok_s_chip: float = TPU_TRAIN_TOK_S_CHIP,
  chips: int = TPU_CHIPS,
) -> dict:
  """One mode's step at 8B (module docstring): `m` holds its measured `generations` per step and
  `verify_s`, `bt_fit_s`, `judge_wait_s` (missing ones count 0); `measured_rollouts` = prompts × G of the
  measured run. Returns seconds per step (sample_s, update_s, host_s, judge_wait_s, wall_s) and generations."""
  generations = m.get("generations", 0.0) * rollouts_per_step / measured_rollouts
  sample = generations * new_tokens / (decode_tok_s_chip * chips)
  update = rollouts_per_step * (prompt_tokens + new_tokens) / (train_tok_s_chip * chips)
  host = m.get("verify_s", 0.0) + m.get("bt_fit_s", 0.0)
  judge_wait = m.get("judge_wait_s", 0.0) * judge_scale
  model = max(sample, update) if asynchronous else sample + update
  return {
    "generations": generations,
    "sample_s": sample,
    "update_s": update,
    "host_s": host,
    "judge_wait_s": judge_wait,
    "wall_s": model + host + judge_wait,
  }


def ratio(a, b):
  """a / b; None where either is missing or b is 0."""
  return None if a is None or b is None or not b else a / b


def projection_8b(results: dict, *, measured_rollouts: int, new_tokens: int = 8192, **constants) -> dict:
  """`project_8b` for every row of `results` (which needs `rlvr`: the judge's latency scales with its step),
  with each row's ratios to lock-step `rlvr_dapo` (`*_vs_dapo`) and to the same loop's DAPO row
  (`*_vs_dapo_same_loop`), None where that row is missing. Unrounded."""
  kw = dict(measured_rollouts=measured_rollouts, new_tokens=new_tokens, **constants)
  rlvr = results["rlvr"]
  rlvr_8b = project_8b(rlvr, asynchronous=False, judge_scale=0.0, **kw)["wall_s"]
  judge_scale = rlvr_8b / rlvr["wall_s"]
  modes = {
    name: project_8b(m, asynchronous=is_async(name), judge_scale=judge_scale, **kw) for name, m in results.items()
  }
  for name, p in modes.items():
    dapo = modes.get("rlvr_dapo")
    same = modes.get("rlvr_dapo" + ASYNC_SUFFIX) if is_async(name) else dapo
    p["wall_vs_dapo"] = ratio(p["wall_s"], dapo and dapo["wall_s"])
    p["generations_vs_dapo"] = ratio(p["generations"], dapo and dapo["generations"])
    p["wall_vs_dapo_same_loop"] = ratio(p["wall_s"], same and same["wall_s"])
    p["generations_vs_dapo_same_loop"] = ratio(p["generations"], same and same["generations"])
  return {"judge_scale": judge_scale, "modes": modes}


def target_figures(wall: dict, generations: dict) -> dict:
  """The three async target figures (TARGETS) from walls and generations per step by row name; None where
  a row is missing."""
  return {
    "arena_live_async_vs_lockstep": ratio(wall.get("arena_live_async"), wall.get("arena_live")),
    "arena_live_async_vs_rlvr_async": ratio(wall.get("arena_live_async"), wall.get("rlvr_async")),
    "arena_live_vs_dapo_generations": ratio(generations.get("arena_live_async"), generations.get("rlvr_dapo_async")),
  }


def verdict(value, bound: float) -> str:
  """met / missed / n/a, on the value as the JSON holds it (4 decimals)."""
  return "n/a" if value is None else ("met" if round(value, 4) <= bound else "missed")
