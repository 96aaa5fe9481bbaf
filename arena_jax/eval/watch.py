"""Checkpoint-driven evaluation: one checkpoint, or every new checkpoint of a run exactly once.

A run directory written by the RL trainer holds `checkpoints/<step>/` (orbax, finalised atomically),
`model_config.json` and the policy's tokenizer (`policy.json` names it and the prompt convention;
`arena_jax.train.policy_io.write_policy_spec` / `load_run_policy`).
`evaluate_step` scores one checkpoint on the configured benchmarks (`benchmarks.resolve`: named entries of
`config.suite`, each a task with its file, samples, k and token budget, or task names on the run's own test
splits) with each benchmark's evaluator (`evaluators.EVALUATORS`; default: greedy accuracy, mean pass ratio@n,
unbiased pass@k, response length). Only the parameters are restored, placed on `config.mesh` or the run's
own mesh when there are devices for it; eval.md holds, per checkpoint, the paper's Table 1 layout: one row
per benchmark and their average (`table1_markdown`).

`watch` polls the run for checkpoints and evaluates each step once. What has been evaluated is read
back from the results file itself (`eval.jsonl` in the output directory), so a restarted watcher
skips finished steps and a step interrupted mid-evaluation is simply evaluated again: nothing is
written for a step until all its benchmarks are done. A step whose checkpoint fails verification
(`checkpoint.CheckpointError`: damaged or missing files, non-finite values) is logged and skipped.
"""

from __future__ import annotations

import json
import os
import time
from typing import Callable

from absl import logging
import jax
import ml_collections
import numpy as np

from arena_jax import config_schema as cs
from arena_jax import fileio
from arena_jax import parallel
from arena_jax import tasks
from arena_jax.config_schema import field
from arena_jax.eval import benchmarks
from arena_jax.tasks import config as tasks_config
from arena_jax.train import checkpoint
from arena_jax.train import policy_io

RESULTS_FILE = "eval.jsonl"
TABLE_FILE = "eval.md"
SAMPLES_FILE = "samples.jsonl"


def _unchecked(default, valid: str, meaning: str) -> cs.Field:
  return field(default, meaning, valid=valid, checked=False)


# What `launch/eval.py` evaluates, declared once (default, valid values, meaning; docs/configuration.md).
# Nothing checks these up front: a bad value fails when the evaluation reaches it.
EVAL = cs.Section(
  dict(
    benchmarks=_unchecked(
      ("arithmetic", "arithmetic_shift"),
      "names of suite entries or tasks",
      "Benchmarks per checkpoint, in table order: a `suite` entry, or a task scored on the run's own test split: "
      "arithmetic (in distribution), arithmetic_shift (out of distribution: arithmetic no training problem "
      "could be), countdown (a different task, far out of distribution), jsonl / choice / code (their "
      "`tasks.<task>.test_path`).",
    ),
    suite=field(
      None,
      valid="{name: entry} or None",
      checked=False,
      placeholder=object,
      meaning="Named benchmarks (`arena_jax.eval.benchmarks`): each `dict(task=…, path=…, num_samples=…, ks=…, "
      "max_new_tokens=…, …)`, unset fields taking the values below; None = none. Whole suites: "
      "configs/eval/samples.py, configs/eval/paper.py (`launch.eval --suite=…`).",
    ),
    data_root=_unchecked("", "path or ''", "Directory that relative `suite` paths are read under."),
    ks=_unchecked((), "ints ≤ num_samples", "The k of pass@k; () = 1, 2, 4, … n. An entry's `ks` replaces it."),
    num_examples=_unchecked(200, "int ≥ 0", "Problems per benchmark (the first ones of the test split); 0 = all."),
    num_samples=_unchecked(
      16, "int ≥ 0", "n: mean pass ratio@n (the paper's pass ratio@16) and pass@k for k ≤ n; 0 = greedy only."
    ),
    temperature=_unchecked(1.0, "> 0", "Temperature of the n samples."),
    greedy=_unchecked(True, "bool", "Also decode each problem greedily (greedy accuracy)."),
    max_new_tokens=_unchecked(96, "int ≥ 1", "Completion budget; a truncated completion is scored as it is."),
    batch_size=_unchecked(64, "int ≥ 1", "Prompts per sampler call."),
    seed=_unchecked(0, "int", "Sampling key (folded with the benchmark index)."),
    samples_per_benchmark=_unchecked(
      4,
      "int ≥ 0",
      "Completions kept per benchmark and checkpoint (the greedy one "
      "and the first sampled one of the first problems) in `<out_dir>/samples.jsonl` "
      "and TensorBoard text: what the policy wrote. 0 = none.",
    ),
    mesh=_unchecked(
      (),
      "() or (data, fsdp, tensor)",
      "The sampling mesh; () = the run's own (its checkpoint records it) when the devices present fit it, "
      "else every device present.",
    ),
    tasks=tasks_config.TASKS.but(documented_apart=True),
  )
)


def default_config() -> ml_collections.ConfigDict:
  """What `launch/eval.py` evaluates (embed as `config.eval`, or pass on its own): every default of `EVAL`."""
  return EVAL.defaults()


# ───────────────────────────────────────── one checkpoint ─────────────────────────────────────────


def load_params(workdir: str, step: int, model_config=None, mesh=None, rules=None):
  """The parameters of checkpoint `step` of a run, and only those (the optimizer state is never read): placed
  on `mesh` by their logical axes (`rules`) when given, so that each device reads only its shards."""
  target = None
  if mesh is not None:
    target = parallel.abstract_params(model_config, mesh, rules or parallel.LOGICAL_AXIS_RULES)
  # A LoRA run's adapters come back merged onto its base (`policy_io.restore_run_params`).
  return policy_io.restore_run_params(workdir, step, model_config, target=target)


def eval_mesh(workdir: str, step: int, config):
  """(mesh, rules) that checkpoint `step` is evaluated on: `config.mesh` when set, else the run's own sampling
  mesh as its checkpoint records it (`parallel.mesh_for_eval`); (None, None) on a single device."""
  if jax.device_count() == 1 and not tuple(config.get("mesh", ())):
    return None, None
  ckpt = checkpoint.Checkpointer(os.path.join(workdir, "checkpoints"))
  try:
    recorded = ckpt.read_meta(step).get("config")
  finally:
    ckpt.close()
  return parallel.mesh_for_eval(recorded, shape=tuple(config.get("mesh", ())))


def evaluate_params(
  params,
  model_config,
  tokenizer,
  config,
  *,
  add_bos: bool = True,
  progress: bool = True,
  mesh=None,
  rules=None,
  keep_details: bool = False,
) -> dict:
  """{benchmark: metrics} for parameters of `model_config`, one evaluator per benchmark (`benchmarks.resolve`),
  sampling on `mesh` (with logical-axis `rules`) when given.

  With `config.samples_per_benchmark` > 0, each benchmark's metrics also carry a few completions under
  `SAMPLES` (a list of dicts, not a metric: `pop_samples` takes them out). With `keep_details`, they carry the
  evaluator's per-problem details under `DETAILS` (rewards [E, n], completions; `pop_details` takes them out):
  what paired comparisons over problems need.
  """
  from arena_jax.eval import evaluators  # pylint: disable=g-import-not-at-top  (the evaluators import this room)

  out = {}
  keep = int(config.get("samples_per_benchmark", 0))
  policy = evaluators.EvalPolicy(params, model_config, tokenizer, add_bos, mesh, rules)
  for k, bench in enumerate(benchmarks.resolve(config)):
    tasks_cfg = bench.tasks_config(config.tasks)
    evaluator = evaluators.EVALUATORS.get_or_raise(bench.type, field=f"config.suite.{bench.name}.type")
    with tasks.get_task(bench.task, tasks_cfg) as task:
      examples = tasks.load_split(tasks_cfg, bench.task, "test")
      count = len(examples) if not bench.num_examples else min(bench.num_examples, len(examples))
      examples = [examples[i] for i in range(count)]
      metrics = evaluator(bench, config, progress=progress).run(
        policy, task, examples, jax.random.fold_in(jax.random.key(config.seed), k)
      )
      details = metrics.pop("_details", None)
      if keep > 0 and details is not None:
        metrics[SAMPLES] = _samples(task, tokenizer, examples, details, keep, bench.num_samples)
      if keep_details and details is not None:
        metrics[DETAILS] = {**details, "examples": examples}
    out[bench.name] = metrics
  return out


SAMPLES = "samples"
DETAILS = "details"


def _samples(task, tokenizer, examples, details: dict, keep: int, n: int) -> list[dict]:
  """The greedy completion and the first sampled one of the first problems, `keep` rows in all, each with the
  prompt as the policy was given it (`Task.prompt_texts`: through the chat template with prompt_format = chat)."""
  rows = []
  shown = task.prompt_texts(examples[:keep], tokenizer)
  for i in range(len(examples)):
    for kind, texts, rewards, row in (
      ("greedy", "greedy_completions", "greedy_rewards", i),
      ("sampled", "completions", "rewards", i * max(n, 1)),
    ):
      if len(rows) < keep and texts in details:
        rows.append(
          {
            "problem": i,
            "kind": kind,
            "prompt": shown[i],
            "completion": details[texts][row],
            "verifier": float(np.ravel(details[rewards])[row]),
          }
        )
  return rows


def pop_samples(results: dict) -> dict:
  """Takes the completions out of `evaluate_params` results: {benchmark: [rows]} (results keep only metrics)."""
  return {bench: metrics.pop(SAMPLES) for bench, metrics in results.items() if SAMPLES in metrics}


def pop_details(results: dict) -> dict:
  """Takes the per-problem details out of `evaluate_params(..., keep_details=True)` results: {benchmark: details}."""
  return {bench: metrics.pop(DETAILS) for bench, metrics in results.items() if DETAILS in metrics}


def run_config(workdir: str, config) -> ml_collections.ConfigDict:
  """`config` with the run's own task settings (`policy_io.load_run_tasks`): the evaluator scores the
  problems the run trained on — their difficulty and held-out split — not the library defaults.

  A `config.tasks` field set explicitly (different from its default) overrides the run's value, except
  where that would change the trained task's problems (its section and the generation `seed`): a
  mismatch there raises ValueError naming both values, since the scores would not be the run's. Another test
  file of the trained task (`tasks.<task>.test_path`, and how its bad rows are treated) is allowed: it is
  another benchmark, not other training problems (a `suite` entry's `path` is the same without a flag).
  A run directory without recorded task settings keeps `config.tasks` as given, with a warning.
  """
  recorded = policy_io.load_run_tasks(workdir)
  if recorded is None:
    logging.warning(
      "%s records no task settings (written before they were saved): evaluating with config.tasks as given", workdir
    )
    return config
  given, default = _flat(config.tasks.to_dict()), _flat(tasks_config.TASKS.defaults().to_dict())
  ran = _flat(recorded)
  # Fields a run recorded win; fields it predates (a task or setting added since) keep the given value.
  # A field recorded as a section where the config holds a leaf (a None placeholder such as
  # chat_template_kwargs) or the reverse is the run's: the given spelling of it goes.
  merged = {k: v for k, v in given.items() if not any(_nested(k, r) or _nested(r, k) for r in ran)}
  merged.update(ran)
  trained = recorded.get("train_task", "")
  clashes = []
  for k in sorted(given):
    if k in ran and given[k] != default.get(k) and _norm(given[k]) != _norm(ran[k]):
      if k == "seed" or (k.startswith(f"{trained}.") and k.split(".", 1)[1] not in _OTHER_TEST_FILES):
        clashes.append(f"config.tasks.{k}={given[k]!r} but the run trained with {ran[k]!r}")
      merged[k] = given[k]
  if clashes:
    raise ValueError(
      f"the evaluation's settings of the trained task {trained!r} differ from the run's (drop "
      "these flags to use the run's): " + "; ".join(clashes)
    )
  out = config.copy_and_resolve_references()
  with out.unlocked():
    out.tasks = ml_collections.ConfigDict(_unflat(merged))
  return out


# Fields of a trained file-backed task that choose what it is evaluated on, not what it trained on.
_OTHER_TEST_FILES = ("test_path", "on_bad_row")


def _unflat(flat: dict) -> dict:
  out: dict = {}
  for key, v in flat.items():
    *parents, leaf = key.split(".")
    node = out
    for p in parents:
      node = node.setdefault(p, {})
    node[leaf] = v
  return out


def _nested(key: str, parent: str) -> bool:
  return key.startswith(parent + ".")


def _flat(d: dict, prefix: str = "") -> dict:
  out = {}
  for k, v in d.items():
    if isinstance(v, dict) and v:  # an empty section stays a leaf, so it survives the round trip
      out.update(_flat(v, f"{prefix}{k}."))
    else:
      out[f"{prefix}{k}"] = v
  return out


def _norm(v):
  return list(v) if isinstance(v, (list, tuple)) else v  # JSON turns tuples into lists


def evaluate_step(workdir: str, step: int, config, *, keep_details: bool = False) -> dict:
  """{benchmark: metrics} of checkpoint `step` of a run (its policy spec: `policy_io.load_run_policy`), on
  the run's own task settings (`run_config`), its parameters alone restored onto `eval_mesh`."""
  model_config, tokenizer, add_bos = policy_io.load_run_policy(workdir)
  mesh, rules = eval_mesh(workdir, step, config)
  params = load_params(workdir, step, model_config, mesh, rules)
  return evaluate_params(
    params,
    model_config,
    tokenizer,
    run_config(workdir, config),
    add_bos=add_bos,
    mesh=mesh,
    rules=rules,
    keep_details=keep_details,
  )


def with_suite(config, suite: ml_collections.ConfigDict, *, keep=()) -> ml_collections.ConfigDict:
  """`config` with a suite config's fields (`configs/eval/*.py`: suite, benchmarks, data_root, budgets), but
  those named in `keep` (set on the command line) left as they are."""
  out = config.copy_and_resolve_references()
  with out.unlocked():
    for key, value in suite.items():
      if key not in out:
        raise ValueError(f"the suite config sets {key!r}, which the evaluation config does not have")
      if key not in keep:
        out[key] = value
  return out


def record_step(out_dir: str, step: int, results: dict, meta: dict, *, tensorboard: bool = True, **extra) -> dict:
  """`record` of one checkpoint evaluated on request (`launch.eval --step`, `--hf_path`): an earlier row of the
  same step in `out_dir` is replaced, not added to."""
  os.makedirs(out_dir, exist_ok=True)
  path = os.path.join(out_dir, RESULTS_FILE)
  if os.path.exists(path):
    fileio.write_jsonl(path, [r for r in read_results(out_dir) if r["step"] != step])
  board = Board(out_dir, tensorboard)
  try:
    return record(out_dir, step, results, meta, board, **extra)
  finally:
    board.close()


def evaluate_hf(hf_path: str, config, *, out_dir: str, mesh=None, rules=None, tensorboard: bool = True) -> dict:
  """Scores a Hugging Face checkpoint itself (the before-RL baseline of Table 1) on `config`'s benchmarks and
  records it as step 0 of `out_dir` (replacing an earlier step-0 row there); returns the row."""
  policy = policy_io.load_policy(hf_path, mesh=mesh, **({"rules": rules} if rules else {}))
  results = evaluate_params(
    policy.model, policy.config, policy.tokenizer, config, add_bos=policy.add_bos, mesh=mesh, rules=rules
  )
  return record_step(
    out_dir, 0, results, benchmark_meta(config), tensorboard=tensorboard, checkpoint=os.path.abspath(hf_path)
  )


# ───────────────────────────────────────────── watching ─────────────────────────────────────────────


def evaluated_steps(out_dir: str) -> set[int]:
  """Steps with a result row (a row torn by a crash mid-write does not count: that step is evaluated again)."""
  return {int(r["step"]) for r in read_results(out_dir)}


def _append(out_dir: str, row: dict) -> None:
  path = os.path.join(out_dir, RESULTS_FILE)
  torn = False
  if os.path.exists(path) and os.path.getsize(path):
    with open(path, "rb") as f:
      f.seek(-1, os.SEEK_END)
      torn = f.read(1) != b"\n"  # a crash mid-write left a partial row: start a new line
  with open(path, "a", encoding="utf-8") as f:
    f.write(("\n" if torn else "") + json.dumps(row) + "\n")
    f.flush()
    os.fsync(f.fileno())


def _write_samples(out_dir: str, step: int, samples: dict) -> None:
  """Appends a step's completions to `<out_dir>/samples.jsonl` (rows of an earlier, interrupted
  evaluation of the same step are dropped first, so a re-evaluated step appears once)."""
  path = os.path.join(out_dir, SAMPLES_FILE)
  if not samples and not os.path.exists(path):
    return
  kept = [r for r in fileio.read_jsonl(path, strict=False) if r.get("step") != step]
  kept += [{"step": step, "benchmark": bench, **r} for bench, rows in samples.items() for r in rows]
  fileio.write_jsonl(path, kept)


def samples_markdown(rows: list[dict]) -> str:
  """Completions as markdown (prompt and completion as a code block under a one-line header)."""
  return "\n\n".join(
    f"**problem {r['problem']}, {r['kind']}, verifier {r['verifier']:g}**\n\n    "
    + (r["prompt"] + r["completion"]).replace("\n", "\n    ")
    for r in rows
  )


def read_results(out_dir: str) -> list[dict]:
  """The result rows of `out_dir`, by step (a row torn by a crash mid-write is skipped)."""
  rows = [r for r in fileio.read_jsonl(os.path.join(out_dir, RESULTS_FILE), strict=False) if "step" in r]
  return sorted(rows, key=lambda r: r["step"])


def markdown_table(rows: list[dict], keys=("greedy_accuracy", "mean_pass_ratio", "mean_response_length")) -> str:
  benches = sorted({b for r in rows for b in r["results"]})
  head = ["step"] + [f"{b} {k}" for b in benches for k in keys]
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for r in rows:
    cells = [str(r["step"])] + [_fmt(r["results"].get(b, {}).get(k)) for b in benches for k in keys]
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines) + "\n"


def benchmark_meta(config) -> dict:
  """{benchmark: {"task", "path", "n", "ks"}} of an evaluation config: what each row of Table 1 measured."""
  if config is None:
    return {}
  return {
    b.name: {"task": b.task, "path": b.path, "n": b.num_samples, "ks": list(b.ks or ())}
    for b in benchmarks.resolve(config)
  }


def average(results: dict, key: str = "mean_pass_ratio") -> float | None:
  """The mean of `key` over the benchmarks that report it (Table 1's average row), None when none does."""
  values = [m[key] for m in results.values() if isinstance(m.get(key), (int, float))]
  return float(np.mean(values)) if values else None


def table1_markdown(row: dict) -> str:
  """One checkpoint's results in the paper's Table 1 layout: a row per benchmark (its task, problems, n, mean
  pass ratio@n, the pass@k its entry asked for, greedy accuracy, mean response length), then their average."""
  results, meta = row["results"], row.get("benchmarks", {})
  ks = sorted({k for m in meta.values() for k in m.get("ks", ()) if k > 1})
  head = ["benchmark", "task", "problems", "n", "pass ratio@n"] + [f"pass@{k}" for k in ks]
  head += ["greedy", "mean length"]
  lines = [f"### step {row['step']}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for bench, m in results.items():
    info = meta.get(bench, {})
    problems = m.get("num_examples")
    cells = [bench, info.get("task", "–"), _fmt(None if problems is None else int(problems)), _fmt(info.get("n"))]
    cells += [_fmt(m.get("mean_pass_ratio"))] + [_fmt(m.get(f"pass@{k}")) for k in ks]
    length = m.get("mean_response_length")
    cells += [_fmt(m.get("greedy_accuracy")), "–" if length is None else f"{length:.1f}"]
    lines.append("| " + " | ".join(cells) + " |")
  avg = {key: average(results, key) for key in ["mean_pass_ratio"] + [f"pass@{k}" for k in ks] + ["greedy_accuracy"]}
  cells = ["**average**", "", "", "", _fmt(avg["mean_pass_ratio"])] + [_fmt(avg[f"pass@{k}"]) for k in ks]
  lines.append("| " + " | ".join(cells + [_fmt(avg["greedy_accuracy"]), ""]) + " |")
  return "\n".join(lines) + "\n"


def eval_markdown(rows: list[dict]) -> str:
  """eval.md: the summary across checkpoints, then each checkpoint's Table 1 (newest first)."""
  parts = ["## Across checkpoints", "", markdown_table(rows), "## Per checkpoint (Table 1 layout)", ""]
  parts += [table1_markdown(r) for r in reversed(rows)]
  return "\n".join(parts)


def _fmt(v):
  return "–" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))


class Board:
  """TensorBoard of an evaluation (`<out_dir>/tensorboard`), opened on the first row it is given."""

  def __init__(self, out_dir: str, enabled: bool = True):
    self.out_dir, self.enabled, self._writer = out_dir, enabled, None

  def write(self, row: dict, samples: dict) -> None:
    if not self.enabled:
      return
    if self._writer is None:
      from tensorboardX import SummaryWriter  # pylint: disable=g-import-not-at-top

      self._writer = SummaryWriter(os.path.join(self.out_dir, "tensorboard"))
    step, results = row["step"], row["results"]
    for bench, metrics in results.items():
      for k, v in metrics.items():
        if isinstance(v, (int, float)) and np.isfinite(v):
          self._writer.add_scalar(f"eval/{bench}/{k}", v, step)
    if average(results) is not None:
      self._writer.add_scalar("eval/average/mean_pass_ratio", average(results), step)
    for bench, rows in samples.items():
      self._writer.add_text(f"eval/{bench}/samples", samples_markdown(rows), step)

  def close(self) -> None:
    if self._writer is not None:
      self._writer.close()


def record(out_dir: str, step: int, results: dict, meta: dict, board: Board | None = None, **extra) -> dict:
  """Writes one evaluated checkpoint: its completions (samples.jsonl), its result row (eval.jsonl), eval.md
  and (with a `board`) TensorBoard; returns the row."""
  samples = pop_samples(results)
  _write_samples(out_dir, step, samples)  # before the result row: a crash between them re-evaluates the step
  row = {"step": step, "results": results, "benchmarks": meta, **extra, "time": time.time()}
  _append(out_dir, row)
  if board is not None:
    board.write(row, samples)
  fileio.atomic_write(os.path.join(out_dir, TABLE_FILE), eval_markdown(read_results(out_dir)))
  return row


def watch(
  workdir: str,
  config,
  *,
  out_dir: str | None = None,
  poll_s: float = 10.0,
  stop_after_step: int | None = None,
  timeout_s: float | None = None,
  follow: bool | None = None,
  evaluate_fn: Callable[[str, int, object], dict] = evaluate_step,
  tensorboard: bool = True,
) -> list[dict]:
  """Evaluates every new checkpoint of `workdir` once; returns the rows written by this call.

  `follow` (`launch.eval --watch`; default: on when a stop condition is given) keeps polling every
  `poll_s` seconds for new checkpoints until a step ≥ `stop_after_step` has been evaluated, or `timeout_s`
  passed without a new one, or, with neither, until stopped: Ctrl-C (or SIGTERM in `launch.eval`) ends
  the watch cleanly, keeping every row written. Without `follow`: one pass over the unevaluated checkpoints.
  """
  if follow is None:
    follow = stop_after_step is not None or timeout_s is not None
  out_dir = out_dir or os.path.join(workdir, "eval")
  os.makedirs(out_dir, exist_ok=True)
  done = evaluated_steps(out_dir)
  written, last_progress = [], time.monotonic()
  meta = benchmark_meta(config)  # what each benchmark is, for Table 1 (a bad entry fails here, before any work)
  skipped: set[int] = set()  # steps whose checkpoint failed verification (checkpoint.CheckpointError)
  board = Board(out_dir, tensorboard)
  try:
    while True:  # one pass, then (following) a poll
      todo = [s for s in checkpoint.checkpoint_steps(workdir) if s not in done and s not in skipped]
      for step in todo:
        try:
          results = evaluate_fn(workdir, step, config)
        except checkpoint.CheckpointError as e:
          # A damaged step (or one the trainer's `keep` deleted mid-read) must not end the watch: it is
          # logged and skipped for the rest of this call; a restarted watcher tries it again.
          logging.warning("skipping checkpoint step %d: %s", step, e)
          skipped.add(step)
          continue
        row = record(out_dir, step, results, meta, board)
        done.add(step)
        written.append(row)
        last_progress = time.monotonic()
      if not follow or (stop_after_step is not None and any(s >= stop_after_step for s in done | skipped)):
        break
      if timeout_s is not None and time.monotonic() - last_progress > timeout_s:
        break
      time.sleep(poll_s)
  except KeyboardInterrupt:
    if not follow:
      raise
    logging.warning("watch stopped by an interrupt after %d new checkpoint(s)", len(written))
  finally:
    board.close()
  return written
