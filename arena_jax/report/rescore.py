"""Judges compared on a run's stored pairs: re-judge the transcripts with another judge (SPEC §4–§6).

`rescore(workdir, judge_config, urls)` replays every stored pairwise judge call of a run (its judge
transcripts, `arena_jax.train.transcripts`) against another judge — another model, template, margin or
server — in the order the run's judge was shown the pair (trace A first), so both judges answer the same
question, and compares the answers:

  agreement   the share of calls, answered by both, whose canonical verdicts (first / tie / second) match
  kappa       Cohen's κ of those verdicts, κ = (p_o − p_e) / (1 − p_e), with p_o the agreement and
              p_e = Σ_k p_run(k) · p_new(k) the agreement expected by chance from each judge's verdict
              shares (None when both judges gave one category only)
  tau         per judged group, Kendall's τ-b between the two judges' Bradley–Terry strengths (SPEC §6,
              `arena.fit_bradley_terry_host`), both fitted on the matches that both judges decided, over
              the members that played; the mean over the groups where τ is defined
  first_shown_rate   per judge, the share of decisive answers that went to the trace shown first: about
              1/2 for an unbiased judge with the run's random presentation orders (`judge.debias=random`),
              above for a judge that favours position A

Nothing is re-judged twice by design: the rescoring judge is asked once per stored call (with
`debias=both` in the run, both orders were stored and both are replayed). Pointwise (rubric) groups are
skipped and counted. `python -m launch.rescore` is the command line.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
from typing import Iterable, Sequence

import numpy as np

from arena_jax import arena
from arena_jax import judges
from arena_jax.arena import Verdict
from arena_jax.errors import ConfigError, MissingFileError
from arena_jax.report.inspector import kendall_tau
from arena_jax.train import transcripts as tr

VERDICTS = ("first", "tie", "second")
_FROM_SHOWN = {"A": "first", "tie": "tie", "B": "second"}
_SHOWN = {Verdict.FIRST_WINS: "A", Verdict.TIE: "tie", Verdict.SECOND_WINS: "B"}  # with debias=none
_FLIP = {"first": "second", "tie": "tie", "second": "first", None: None}


@dataclasses.dataclass(frozen=True)
class Call:
  """One stored judge call and its replay. Verdicts are canonical (member i = first), None when failed;
  `*_shown` are the answers as the judge saw the order ("A", "B", "tie")."""

  step: int
  group: int
  i: int
  j: int
  call: int
  swapped: bool
  run_shown: str | None
  run_verdict: str | None
  new_shown: str | None = None
  new_verdict: str | None = None
  new_outcome: float | None = None  # the rescoring judge's soft score of member i (SPEC §4)
  new_failure: str | None = None
  new_latency_s: float | None = None  # the rescoring judge's time for this call (with its retries)


@dataclasses.dataclass
class RescoreReport:
  """What `rescore` measured (module docstring); `table()` reads it, `summary()` is its JSON line."""

  workdir: str
  calls: list[Call]
  groups: int
  steps: int
  skipped_pointwise: int
  taus: list[float | None]  # one per pairwise group, None where undefined

  @property
  def compared(self) -> list[Call]:
    return [c for c in self.calls if c.run_verdict is not None and c.new_verdict is not None]

  @property
  def agreement(self) -> float | None:
    both = self.compared
    return sum(c.run_verdict == c.new_verdict for c in both) / len(both) if both else None

  @property
  def kappa(self) -> float | None:
    return cohen_kappa([c.run_verdict for c in self.compared], [c.new_verdict for c in self.compared])

  @property
  def tau(self) -> float | None:
    taus = [t for t in self.taus if t is not None]
    return float(np.mean(taus)) if taus else None

  def counts(self, which: str) -> dict[str, int]:
    verdicts = [getattr(c, f"{which}_verdict") for c in self.calls]
    return {**{k: verdicts.count(k) for k in VERDICTS}, "failed": verdicts.count(None)}

  def first_shown_rate(self, which: str) -> float | None:
    decisive = [getattr(c, f"{which}_shown") for c in self.calls if getattr(c, f"{which}_shown") in ("A", "B")]
    return decisive.count("A") / len(decisive) if decisive else None

  def summary(self) -> dict:
    r = lambda v: None if v is None else round(float(v), 4)
    taus = [t for t in self.taus if t is not None]
    latency = [c.new_latency_s for c in self.calls if c.new_latency_s is not None]
    return {
      "workdir": self.workdir,
      "steps": self.steps,
      "groups": self.groups,
      "calls": len(self.calls),
      "compared": len(self.compared),
      "skipped_pointwise_groups": self.skipped_pointwise,
      "agreement": r(self.agreement),
      "kappa": r(self.kappa),
      "tau_bt_mean": r(self.tau),
      "tau_bt_min": r(min(taus)) if taus else None,
      "tau_groups": len(taus),
      "verdicts": {"run": self.counts("run"), "rescore": self.counts("new")},
      "first_shown_rate": {"run": r(self.first_shown_rate("run")), "rescore": r(self.first_shown_rate("new"))},
      "rescore_failures_by_kind": dict(collections.Counter(c.new_failure for c in self.calls if c.new_failure)),
      "rescore_latency_median_s": r(np.median(latency)) if latency else None,
    }

  def table(self) -> str:
    s, fmt = self.summary(), (lambda v: "–" if v is None else f"{v:.3f}")
    v = s["verdicts"]
    lines = [
      f"rescore of {self.workdir}: {s['calls']} stored judge calls in {s['groups']} groups of {s['steps']} "
      f"step(s), {s['compared']} answered by both judges"
      + (f"; {self.skipped_pointwise} pointwise group(s) skipped" if self.skipped_pointwise else ""),
      f"{'':28s}{'run judge':>12s}{'rescoring':>12s}",
    ]
    for k in (*VERDICTS, "failed"):
      lines.append(f"{'verdict ' + k:28s}{v['run'][k]:>12d}{v['rescore'][k]:>12d}")
    lines.append(
      f"{'first-shown win rate':28s}{fmt(s['first_shown_rate']['run']):>12s}"
      f"{fmt(s['first_shown_rate']['rescore']):>12s}"
    )
    lines.append(
      f"verdict agreement {fmt(s['agreement'])}   Cohen's kappa {fmt(s['kappa'])}   "
      f"BT Kendall tau per group: mean {fmt(s['tau_bt_mean'])}, min {fmt(s['tau_bt_min'])} "
      f"({s['tau_groups']} groups)"
    )
    return "\n".join(lines)


def cohen_kappa(a: Sequence, b: Sequence) -> float | None:
  """Cohen's κ of two raters' labels of the same items (module docstring); None when undefined."""
  if len(a) != len(b):
    raise ValueError(f"cohen_kappa: {len(a)} labels against {len(b)}")
  if not a:
    return None
  labels = sorted(set(a) | set(b), key=str)
  p_o = sum(x == y for x, y in zip(a, b)) / len(a)
  p_e = sum((list(a).count(k) / len(a)) * (list(b).count(k) / len(b)) for k in labels)
  if p_e >= 1.0:
    return None
  return (p_o - p_e) / (1.0 - p_e)


def _stored_calls(groups: Iterable[dict], max_calls: int | None) -> tuple[list[tuple[dict, Call]], dict]:
  """(group row, Call) for every stored pairwise call, and counts of what was read."""
  out, seen, steps, pointwise = [], set(), set(), 0
  for g in groups:
    if g["form"] != "pairwise":
      pointwise += 1
      continue
    seen.add((g["step"], g["group"]))
    steps.add(g["step"])
    for m in g["matches"]:
      i, j = m["i"], m["j"]
      for k, c in enumerate(m["calls"]):
        if max_calls is not None and len(out) >= max_calls:
          return out, {"groups": len(seen), "steps": len(steps), "pointwise": pointwise}
        swapped = c["order_shown"] == [j, i]
        shown = c["verdict_shown"] if c["failure_reason"] is None else None
        run = _FROM_SHOWN.get(shown)
        out.append((g, Call(g["step"], g["group"], i, j, k, swapped, shown, _FLIP[run] if swapped else run)))
  return out, {"groups": len(seen), "steps": len(steps), "pointwise": pointwise}


async def _replay(judge, stored: list[tuple[dict, Call]]) -> list[Call]:
  """Asks `judge` every stored call in the order shown (trace A first), concurrently."""

  async def one(g: dict, c: Call) -> Call:
    a, b = (c.j, c.i) if c.swapped else (c.i, c.j)
    res = await judge.compare(
      g["problem"], g["reference"], g["traces"][a], g["traces"][b], key=("rescore", c.step, c.group, c.i, c.j, c.call)
    )
    latency = res.usage.latency_s
    if not res.ok:
      return dataclasses.replace(c, new_failure=res.failure_reason, new_latency_s=latency)
    shown = _SHOWN[res.verdict]
    verdict = _FROM_SHOWN[shown]
    return dataclasses.replace(
      c,
      new_latency_s=latency,
      new_shown=shown,
      new_verdict=_FLIP[verdict] if c.swapped else verdict,
      new_outcome=1.0 - res.outcome if c.swapped else res.outcome,
    )

  try:
    return list(await asyncio.gather(*(one(g, c) for g, c in stored)))
  finally:
    await judge.close()


def group_taus(
  stored: list[tuple[dict, Call]], calls: list[Call], *, l2: float = arena.DEFAULT_L2
) -> list[float | None]:
  """Kendall τ between the run's and the rescoring judge's BT strengths, per pairwise group (module docstring)."""
  by_group: dict[tuple[int, int], dict] = {}
  for (g, _), c in zip(stored, calls):
    entry = by_group.setdefault((c.step, c.group), {"g": g, "matches": {}})
    entry["matches"].setdefault((c.i, c.j), []).append(c)
  taus = []
  for entry in by_group.values():
    g = entry["g"]
    run_outcome = {(m["i"], m["j"]): m["outcome"] for m in g["matches"]}
    first, second, o_run, o_new = [], [], [], []
    for (i, j), cs in entry["matches"].items():
      new = [c.new_outcome for c in cs]
      if run_outcome.get((i, j)) is None or any(o is None for o in new):
        continue  # a match either judge failed is left out of both fits: the same graph for both
      first.append(i)
      second.append(j)
      o_run.append(run_outcome[(i, j)])
      o_new.append(float(np.mean(new)))
    players = sorted(set(first) | set(second))
    if len(players) < 2:
      taus.append(None)
      continue
    n = len(g["traces"])
    theta_run = arena.fit_bradley_terry_host(first, second, o_run, None, n, l2=l2)
    theta_new = arena.fit_bradley_terry_host(first, second, o_new, None, n, l2=l2)
    taus.append(kendall_tau([theta_run[p] for p in players], [theta_new[p] for p in players]))
  return taus


def rescore(
  workdir: str,
  judge_config,
  urls: Sequence[str] | str | None = None,
  *,
  steps: Iterable[int] | None = None,
  max_calls: int | None = None,
) -> RescoreReport:
  """Re-judges the stored pairwise calls of the run in `workdir` with the judge of `judge_config` at `urls`
  (module docstring); `steps`: only these steps; `max_calls`: only the first that many stored calls."""
  if max_calls is not None and max_calls < 1:
    raise ConfigError(f"max_calls: must be at least 1, got {max_calls}")
  wanted = None if steps is None else set(steps)
  rows = [g for g in tr.read_groups(workdir) if wanted is None or g["step"] in wanted]
  stored, counts = _stored_calls(rows, max_calls)
  if not stored:
    where = "" if wanted is None else f" at step(s) {sorted(wanted)}"
    raise MissingFileError(
      f"{tr.transcripts_dir(workdir)}: no stored pairwise judge calls{where}; rescore "
      "replays a run's judge transcripts (train with judge.transcripts > 0, the default, and a "
      "pairwise reward mode)"
    )
  config = judge_config.copy_and_resolve_references()
  with config.unlocked():
    config.debias = "none"  # the stored order is replayed as it was shown (trace A first)
  judge = judges.make_judge(config, urls)
  if judge.kind != "pairwise":
    raise ConfigError(
      f"judge.backend: rescore compares pairwise verdicts, and {config.backend!r} is a "
      f"{judge.kind} judge; use a pairwise backend"
    )
  calls = asyncio.run(_replay(judge, stored))
  return RescoreReport(
    workdir=str(workdir),
    calls=calls,
    groups=counts["groups"],
    steps=counts["steps"],
    skipped_pointwise=counts["pointwise"],
    taus=group_taus(stored, calls),
  )
