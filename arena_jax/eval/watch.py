"""Checkpoint-driven evaluation: one checkpoint, or every new checkpoint of a run exactly once.

A run directory written by the RL trainer holds `checkpoints/<step>/` (orbax, finalised atomically),
`model_config.json` and the policy's tokenizer (`policy.json` names it and the prompt convention;
`arena_jax.train.policy_io.write_policy_spec` / `load_run_policy`).
`evaluate_step` scores one checkpoint on the configured benchmarks (in distribution: the arithmetic
test split; out of distribution: countdown; optionally a JSONL math file) with `evaluate` (greedy
accuracy, mean pass ratio@n, unbiased pass@k, response length).

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
from arena_jax import tasks
from arena_jax.config_schema import field
from arena_jax.sampling.accuracy import evaluate, flatten_metrics, sampling_options
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
      "task names",
      "Benchmarks per checkpoint: arithmetic "
      "(in distribution), arithmetic_shift (out of distribution: arithmetic no training problem "
      "could be), countdown (a different task, far out of distribution), jsonl "
      "(`tasks.jsonl.test_path`).",
    ),
    num_examples=_unchecked(200, "int ≥ 1", "Problems per benchmark (the first ones of the test split)."),
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
    tasks=tasks_config.TASKS.but(documented_apart=True),
  )
)


def default_config() -> ml_collections.ConfigDict:
  """What `launch/eval.py` evaluates (embed as `config.eval`, or pass on its own): every default of `EVAL`."""
  return EVAL.defaults()


# ───────────────────────────────────────── one checkpoint ─────────────────────────────────────────


def checkpoint_steps(workdir: str) -> list[int]:
  """Finalised checkpoint steps of a run (orbax renames a checkpoint into place when complete)."""
  directory = os.path.join(workdir, "checkpoints")
  if not os.path.isdir(directory):
    return []
  return sorted(int(d) for d in os.listdir(directory) if d.isdigit())


def load_params(workdir: str, step: int):
  """The parameters of checkpoint `step` of a run."""
  ckpt = checkpoint.Checkpointer(os.path.join(workdir, "checkpoints"))
  try:
    state, _ = ckpt.restore(step, None)
  finally:
    ckpt.close()
  return state["params"]


def evaluate_params(params, model_config, tokenizer, config, *, add_bos: bool = True, progress: bool = True) -> dict:
  """{benchmark: evaluate(...) metrics} for parameters of `model_config` (a progress bar per benchmark).

  With `config.samples_per_benchmark` > 0, each benchmark's metrics also carry a few completions under
  `SAMPLES` (a list of dicts, not a metric: `pop_samples` takes them out).
  """
  out = {}
  keep = int(config.get("samples_per_benchmark", 0))
  for k, name in enumerate(config.benchmarks):
    task = tasks.get_task(name, config.tasks)
    examples = tasks.load_split(config.tasks, name, "test")
    examples = [examples[i] for i in range(min(config.num_examples, len(examples)))]
    res = evaluate(
      params,
      tokenizer,
      task,
      examples,
      **sampling_options(config),
      rng=jax.random.fold_in(jax.random.key(config.seed), k),
      greedy=config.greedy,
      add_bos=add_bos,
      config=model_config,
      progress=f"eval {name}" if progress else None,
      return_details=keep > 0,
    )
    out[name] = flatten_metrics(res)
    if keep > 0:
      out[name][SAMPLES] = _samples(task, tokenizer, examples, res, keep, config.num_samples)
  return out


SAMPLES = "samples"


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


def run_config(workdir: str, config) -> ml_collections.ConfigDict:
  """`config` with the run's own task settings (`policy_io.load_run_tasks`): the evaluator scores the
  problems the run trained on — their difficulty and held-out split — not the library defaults.

  A `config.tasks` field set explicitly (different from its default) overrides the run's value, except
  where that would change the trained task's problems (its section and the generation `seed`): a
  mismatch there raises ValueError naming both values, since the scores would not be the run's.
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
      if k == "seed" or k.startswith(f"{trained}."):
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


def evaluate_step(workdir: str, step: int, config) -> dict:
  """{benchmark: metrics} of checkpoint `step` of a run (its policy spec: `policy_io.load_run_policy`), on
  the run's own task settings (`run_config`)."""
  model_config, tokenizer, add_bos = policy_io.load_run_policy(workdir)
  return evaluate_params(
    load_params(workdir, step), model_config, tokenizer, run_config(workdir, config), add_bos=add_bos
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


def _fmt(v):
  return "–" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))


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
  skipped: set[int] = set()  # steps whose checkpoint failed verification (checkpoint.CheckpointError)
  writer = None
  try:
    while True:  # one pass, then (following) a poll
      todo = [s for s in checkpoint_steps(workdir) if s not in done and s not in skipped]
      for step in todo:
        try:
          results = evaluate_fn(workdir, step, config)
        except checkpoint.CheckpointError as e:
          # A damaged step (or one the trainer's `keep` deleted mid-read) must not end the watch: it is
          # logged and skipped for the rest of this call; a restarted watcher tries it again.
          logging.warning("skipping checkpoint step %d: %s", step, e)
          skipped.add(step)
          continue
        samples = pop_samples(results)
        _write_samples(out_dir, step, samples)  # before the result row: a crash between them re-evaluates the step
        row = {"step": step, "results": results, "time": time.time()}
        _append(out_dir, row)
        done.add(step)
        written.append(row)
        last_progress = time.monotonic()
        if tensorboard:
          if writer is None:
            from tensorboardX import SummaryWriter  # pylint: disable=g-import-not-at-top

            writer = SummaryWriter(os.path.join(out_dir, "tensorboard"))
          for bench, metrics in results.items():
            for k, v in metrics.items():
              if isinstance(v, (int, float)) and np.isfinite(v):
                writer.add_scalar(f"eval/{bench}/{k}", v, step)
          for bench, rows in samples.items():
            writer.add_text(f"eval/{bench}/samples", samples_markdown(rows), step)
        fileio.atomic_write(os.path.join(out_dir, TABLE_FILE), markdown_table(read_results(out_dir)))
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
    if writer is not None:
      writer.close()
  return written
