"""The tournament inspector: a run's judge transcripts as static, self-contained HTML (SPEC §3–§6).

`write_report(workdir)` (behind `python -m launch.inspect`) writes, from `metrics.jsonl` and the judge
transcripts (`arena_jax.train.transcripts`), with the jinja2 templates of `templates/`:

  index.html           the run page: training curves, routed fraction, judge calls and failures by reason
                       over steps (inline SVG), and a link to every step with transcripts;
  step-<step>.html     a step page: the router's decision for every group; a card per routed group with
                       its problem and reference answer, its trajectories side by side with the process
                       checker's step marks (invalid / irrelevant steps highlighted) and verifier result,
                       the tournament as a matrix (soft outcome of row vs column) and one row per match
                       (order shown, verdict, the judge's answer and reasoning on expand), the fitted
                       Bradley–Terry strengths with their Laplace standard errors, the win rates, and the
                       rewards and advantages the policy was trained with; filters: judge failures only,
                       upsets (the judge preferred a trace the process checker rates worse in every
                       respect: `_dominated`), BT / win-rate disagreement (Kendall τ below
                       `DISAGREEMENT_TAU`).

Nothing is fetched: styles and the few lines of script are inline, so a page opens from disk, and
`render_step` returns one page's HTML for a notebook cell. The inputs are read crash-safely, so a report
of a run that is still training shows the steps written so far (a step whose rewards are not yet logged
shows its tournaments without them). Text from the policy and the judge is escaped (autoescape).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
from typing import Iterable, Sequence

import jinja2
import numpy as np

from arena_jax import arena
from arena_jax import tasks
from arena_jax.errors import UserError
from arena_jax.train import metrics as metrics_lib
from arena_jax.train import policy_io
from arena_jax.train import transcripts as tr

TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")
DISAGREEMENT_TAU = 0.5  # BT and win-rate rankings with a Kendall τ below this are flagged
CURVES = (
  ("accuracy", "accuracy"),
  ("reward/verifier", "verifier reward"),
  ("loss", "loss"),
  ("groups/routed", "routed fraction"),
  ("judge/calls", "judge calls"),
  ("judge/failures", "judge failures"),
  # The effective judged signal: how much of each update the judge actually steers.
  ("judge/signal_rows", "judged rows with Â ≠ 0"),
  ("judge/grad_share", "judged share of Σ|Â|"),
  ("judge/distinct_per_group", "distinct traces / routed group"),
)
# Below this mean share of Σ|Â| over the run's judged steps, the run page says the judge is doing next to nothing.
IDLE_JUDGE_SHARE = 0.05


class InspectError(UserError):
  """The workdir has nothing to inspect (no metrics log, no transcripts, or not the step asked for)."""


def _env() -> jinja2.Environment:
  env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
  )
  env.filters["num"] = _num
  return env


def _num(v, digits: int = 3) -> str:
  if v is None:
    return "–"
  if isinstance(v, bool):
    return "yes" if v else "no"
  if isinstance(v, int):
    return str(v)
  if isinstance(v, float) and not math.isfinite(v):
    return str(v)
  return f"{v:.{digits}g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.2e}"


def step_file(step: int) -> str:
  return f"step-{int(step):06d}.html"


# ─────────────────────────────────────────── the run page ───────────────────────────────────────────


def _chart(title: str, xs: Sequence[float], series: dict[str, Sequence[float | None]], w=320, h=120) -> dict:
  """An inline-SVG line chart: polyline points scaled into a w × h box, with the y range."""
  values = [v for ys in series.values() for v in ys if v is not None and math.isfinite(v)]
  if not xs or not values:
    return {"title": title, "lines": [], "w": w, "h": h, "lo": None, "hi": None, "x0": None, "x1": None}
  lo, hi = min(values), max(values)
  span, xspan = (hi - lo) or 1.0, (max(xs) - min(xs)) or 1.0
  lines = []
  for k, (name, ys) in enumerate(series.items()):
    pts = [
      (4 + (w - 8) * (x - min(xs)) / xspan, h - 4 - (h - 8) * (y - lo) / span)
      for x, y in zip(xs, ys)
      if y is not None and math.isfinite(y)
    ]
    lines.append(
      {"name": name, "color": _COLORS[k % len(_COLORS)], "points": " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)}
    )
  return {"title": title, "lines": lines, "w": w, "h": h, "lo": lo, "hi": hi, "x0": min(xs), "x1": max(xs)}


_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")


def run_context(workdir: str, steps_with_pages: Iterable[int] = ()) -> dict:
  rows = metrics_lib.read_metrics(workdir)
  if not rows:
    raise InspectError(
      f"{os.path.join(workdir, 'metrics.jsonl')} has no rows yet: nothing to inspect (is --workdir the run directory?)"
    )
  xs = [r["step"] for r in rows]
  charts = [_chart(label, xs, {label: [_float(r.get(key)) for r in rows]}) for key, label in CURVES]
  reasons = sorted({k for r in rows for k in r if k.startswith("judge/failed/")})
  if reasons:
    charts.append(
      _chart("judge failures by reason", xs, {k.split("/", 2)[2]: [_float(r.get(k, 0)) for r in rows] for k in reasons})
    )
  pages = set(steps_with_pages)
  table = [
    {
      "step": r["step"],
      "accuracy": r.get("accuracy"),
      "routed": r.get("groups/routed"),
      "calls": r.get("judge/calls"),
      "failures": r.get("judge/failures"),
      "signal": r.get("judge/signal_rows"),
      "share": r.get("judge/grad_share"),
      "distinct": r.get("judge/distinct_per_group"),
      "reasons": {k.split("/", 2)[2]: r[k] for k in reasons if r.get(k)},
      "page": step_file(r["step"]) if r["step"] in pages else None,
    }
    for r in rows
  ]
  return {
    "workdir": os.path.abspath(workdir),
    "idle_judge": _idle_judge(rows),
    "charts": charts,
    "steps": table,
    "num_steps": len(rows),
    "pages": len(pages),
  }


def _idle_judge(rows) -> str | None:
  """A warning when the run called a judge yet its verdicts steer almost none of the updates."""
  judged = [r for r in rows if r.get("judge/calls") and isinstance(r.get("judge/grad_share"), (int, float))]
  if not judged:
    return None
  share = float(np.mean([r["judge/grad_share"] for r in judged]))
  if share >= IDLE_JUDGE_SHARE:
    return None
  signal = float(np.mean([r.get("judge/signal_rows", 0.0) for r in judged]))
  return (
    f"The judge steers {share:.1%} of the updates' Σ|Â| on the {len(judged)} steps it was called "
    f"({signal:.1%} of rows get a non-zero advantage from it): its verdicts barely reach the policy."
  )


def _float(v) -> float | None:
  return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


# ─────────────────────────────────────────── a step page ───────────────────────────────────────────


def _task(workdir: str, name: str | None):
  """The run's task, for its process checker (which reads only the recorded example); None if unknown."""
  name = name or (policy_io.load_run_tasks(workdir) or {}).get("train_task")
  try:
    return tasks.get_task(name) if name else None
  except ValueError:
    return None


def _process(task, example: dict | None, trace: str) -> dict:
  """The process checker's verdict on one trace: its steps with marks, and a comparable score."""
  if task is None or not task.has_process_checker or not example:
    return {"steps": [{"text": trace, "mark": "", "note": ""}], "score": None, "summary": "no process checker"}
  try:
    ex = tasks.Example(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in example.items()})
    report = task.check_process(ex, trace)
  except (ValueError, TypeError, ArithmeticError, RecursionError):
    return {
      "steps": [{"text": trace, "mark": "", "note": ""}],
      "score": None,
      "summary": "the checker could not read it",
    }
  steps = [
    {
      "text": s.text,
      "mark": "invalid" if not s.valid else ("irrelevant" if not s.relevant else "valid"),
      "note": s.note,
    }
    for s in report.steps
  ] or [{"text": trace, "mark": "", "note": ""}]
  summary = (
    f"{report.num_steps} steps, {report.num_invalid} invalid, {report.num_irrelevant} irrelevant, "
    f"answer {report.answer or 'none'} ({'right' if report.answer_correct else 'wrong'})"
  )
  # Each component: higher is better (`_dominated` compares them).
  score = (int(report.answer_correct), -report.num_invalid, -report.num_irrelevant - report.num_skipped)
  return {"steps": steps, "score": score, "summary": summary}


def _dominated(a: tuple, b: tuple) -> bool:
  """Whether the process checker rates trace `a` worse than `b` outright: no better in any respect (right
  answer, invalid steps, irrelevant or skipped ones) and worse in one. Traces that trade one flaw for
  another are not ordered: the judge's weighing of them is no upset."""
  return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


def _strengths(matches: list[dict], g: int) -> tuple[list, list, list]:
  """(θ, standard errors, win rates) from the successful matches: the BT fit (λ = DEFAULT_L2) and its
  Laplace standard errors, sqrt(diag(H⁻¹)) at the optimum."""
  ok = [m for m in matches if m["outcome"] is not None]
  if not ok:
    return [None] * g, [None] * g, [None] * g
  f = np.asarray([m["i"] for m in ok])
  s = np.asarray([m["j"] for m in ok])
  o = np.asarray([m["outcome"] for m in ok], float)
  theta = arena.fit_bradley_terry_host(f, s, o, None, g, l2=arena.DEFAULT_L2)
  w = arena.bradley_terry.win_matrix(f, s, o, np.ones_like(o), g, xp=np)
  _, _, hess = arena.bradley_terry.dense_eval(theta, w, arena.DEFAULT_L2, xp=np)
  se = np.sqrt(np.clip(np.diag(np.linalg.inv(hess)), 0, None))
  score = np.bincount(f, o, g) + np.bincount(s, 1.0 - o, g)
  games = np.bincount(f, minlength=g) + np.bincount(s, minlength=g)
  rate = [float(score[k] / games[k]) if games[k] else None for k in range(g)]
  return theta.tolist(), se.tolist(), rate


def kendall_tau(a: Sequence[float | None], b: Sequence[float | None]) -> float | None:
  """Kendall's τ-b over the members with both values; None when either ranking is all ties (nothing to
  disagree on) or fewer than two members have both."""
  pairs = [(x, y) for x, y in zip(a, b) if x is not None and y is not None]
  num = tied_a = tied_b = total = 0
  for (x1, y1), (x2, y2) in itertools.combinations(pairs, 2):
    sa, sb = np.sign(x1 - x2), np.sign(y1 - y2)
    num += sa * sb
    tied_a += sa == 0
    tied_b += sb == 0
    total += 1
  if not total or tied_a == total or tied_b == total:
    return None
  return float(num / math.sqrt((total - tied_a) * (total - tied_b)))


def _group_card(group: dict, decision: dict | None, task) -> dict:
  g = len(group["traces"])
  members = []
  for m, trace in enumerate(group["traces"]):
    members.append({"index": m, "process": _process(task, group.get("example"), trace)})
  if decision:
    for m in members:
      for key in ("verifier", "judge", "reward", "advantage"):
        m[key] = decision[key][m["index"]]
  card = {
    "group": group["group"],
    "problem": group["problem"],
    "reference": group["reference"],
    "form": group["form"],
    "topology": group.get("topology"),
    "members": members,
    "decision": decision,
    "failures": 0,
    "upsets": 0,
    "tau": None,
    "matches": [],
    "matrix": None,
  }
  # A member whose trace is identical to an earlier one's shares that member's tournament node
  # (`reward.dedupe_traces`): the representative played for it, so it shows the node's strength.
  copy_of = group.get("copy_of") or list(range(g))
  for m in members:
    if copy_of[m["index"]] != m["index"]:
      m["copy_of"] = copy_of[m["index"]]
  if group["form"] == "pairwise":
    theta, se, rate = _strengths(group["matches"], g)
    for m in members:
      k = m["index"]
      node = copy_of[k]
      m.update(
        theta=theta[node],
        se=se[node],
        win_rate=rate[node],
        rank=None if group.get("native_ranking") is None else group["native_ranking"][k],
      )
    card["tau"] = kendall_tau(theta, rate)  # over the nodes: a copy has no win rate of its own
    matrix = [[None] * g for _ in range(g)]
    for n, match in enumerate(group["matches"]):
      i, j = match["i"], match["j"]
      first, second = members[i]["process"]["score"], members[j]["process"]["score"]
      upset = False
      if match["verdict"] in ("first", "second") and first is not None and second is not None:
        winner, loser = (first, second) if match["verdict"] == "first" else (second, first)
        upset = _dominated(winner, loser)
      card["upsets"] += upset
      card["failures"] += match["failure_reason"] is not None
      if match["outcome"] is not None:
        matrix[i][j], matrix[j][i] = match["outcome"], 1.0 - match["outcome"]
      card["matches"].append({**match, "number": n + 1, "upset": upset})
    card["matrix"] = matrix
  else:
    for s in group["scores"]:
      card["failures"] += s["failure_reason"] is not None
      members[s["member"]]["score"] = s["score"]
      card["matches"].append(
        {
          "number": s["member"] + 1,
          "i": s["member"],
          "j": None,
          "verdict": s["score"],
          "outcome": s["score"],
          "failure_reason": s["failure_reason"],
          "failure_detail": s["failure_detail"],
          "calls": s["calls"],
          "upset": False,
        }
      )
  card["disagreement"] = card["tau"] is not None and card["tau"] < DISAGREEMENT_TAU
  return card


def _by_step(rows: Iterable[dict]) -> dict[int, dict]:
  """{step: {"groups": [group rows], "step": the step row or None}} (a later row of a group replaces one
  written before it)."""
  out: dict[int, dict] = {}
  for r in rows:
    entry = out.setdefault(r.get("step"), {"groups": {}, "step": None})
    if r.get("kind") == "group":
      entry["groups"][r["group"]] = r
    elif r.get("kind") == "step":
      entry["step"] = r
  return {s: {"groups": list(e["groups"].values()), "step": e["step"]} for s, e in out.items()}


def step_context(workdir: str, step: int, groups: Sequence[int] | None = None, *, loaded: dict | None = None) -> dict:
  """The data of a step page; `loaded` = `_by_step` of every row (read once for many pages)."""
  entry = (loaded if loaded is not None else _by_step(tr.read_rows(workdir, step=step))).get(step)
  entry = entry or {"groups": [], "step": None}
  judged = [g for g in entry["groups"] if groups is None or g["group"] in groups]
  row = entry["step"]
  if not judged and row is None:
    raise InspectError(
      f"no transcripts of step {step} in {tr.transcripts_dir(workdir)} (judge.transcripts = 0, "
      "a step that judged nothing, or not written yet)"
    )
  decisions = {d["group"]: d for d in row["groups"]} if row else {}
  task = _task(workdir, row["task"] if row else None)
  cards = [_group_card(g, decisions.get(g["group"]), task) for g in sorted(judged, key=lambda x: x["group"])]
  router = [d for d in (row["groups"] if row else []) if groups is None or d["group"] in groups]
  return {
    "step": step,
    "row": row,
    "cards": cards,
    "router": router,
    "has_checker": bool(task and task.has_process_checker),
    "tau_threshold": DISAGREEMENT_TAU,
    "workdir": os.path.abspath(workdir),
    "counts": {
      "groups": len(cards),
      "failures": sum(c["failures"] > 0 for c in cards),
      "upsets": sum(c["upsets"] > 0 for c in cards),
      "disagreement": sum(c["disagreement"] for c in cards),
    },
  }


# ─────────────────────────────────────────── writing ───────────────────────────────────────────


def render_run(workdir: str, steps_with_pages: Iterable[int] = ()) -> str:
  return _env().get_template("run.html.j2").render(**run_context(workdir, steps_with_pages))


def render_step(
  workdir: str, step: int, groups: Sequence[int] | None = None, *, run_link: bool = True, loaded: dict | None = None
) -> str:
  """One step page's HTML (what a notebook shows with `IPython.display.HTML`)."""
  return (
    _env().get_template("step.html.j2").render(run_link=run_link, **step_context(workdir, step, groups, loaded=loaded))
  )


@dataclasses.dataclass
class Report:
  """What `write_report` wrote: the run page and the step pages by step."""

  directory: str
  run_page: str
  step_pages: dict[int, str]


def write_report(
  workdir: str, output: str | None = None, *, steps: Sequence[int] | None = None, groups: Sequence[int] | None = None
) -> Report:
  """Writes the run page and the step pages (of `steps`, default every step with transcripts; only the
  groups `groups` when given) to `output` (default <workdir>/inspect)."""
  if not os.path.isdir(workdir):
    raise InspectError(f"--workdir {workdir!r} is not a directory")
  output = output or os.path.join(workdir, "inspect")
  loaded = _by_step(tr.read_rows(workdir))  # read once: every page comes from it
  available = sorted(s for s in loaded if isinstance(s, int))
  if steps is not None:
    missing = [s for s in steps if s not in available]
    if missing:
      raise InspectError(
        f"no transcripts of step(s) {missing} in {tr.transcripts_dir(workdir)}; steps with "
        f"transcripts: {_ranges(available) or 'none'}"
      )
  chosen = available if steps is None else list(steps)
  os.makedirs(output, exist_ok=True)
  pages = {}
  for s in chosen:
    pages[s] = os.path.join(output, step_file(s))
    _write(pages[s], render_step(workdir, s, groups, loaded=loaded))
  run_page = os.path.join(output, "index.html")
  _write(run_page, render_run(workdir, pages))
  return Report(output, run_page, pages)


def _write(path: str, text: str) -> None:
  from arena_jax import fileio  # pylint: disable=g-import-not-at-top

  fileio.atomic_write(path, text)


def _ranges(steps: Sequence[int]) -> str:
  out = []
  for _, run in itertools.groupby(enumerate(steps), lambda p: p[1] - p[0]):
    run = [s for _, s in run]
    out.append(str(run[0]) if len(run) == 1 else f"{run[0]}–{run[-1]}")
  return ", ".join(out)


def parse_ints(text: str | None, what: str) -> list[int] | None:
  """`--step` / `--groups`: "3", "1,4,7" or "2-5"; None when empty."""
  if not text:
    return None
  out = []
  for part in str(text).split(","):
    part = part.strip()
    try:
      if "-" in part[1:]:
        a, b = part.split("-", 1)
        out += list(range(int(a), int(b) + 1))
      elif part:
        out.append(int(part))
    except ValueError:
      raise InspectError(f"--{what}: {part!r} is not a number or a range a-b") from None
  return out
