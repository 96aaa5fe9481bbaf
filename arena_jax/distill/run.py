"""`launch.distill_judge`: from a policy's traces to a served student judge, in one call (SPEC §10).

    report = distill(config, out_dir)

1. Groups (`config.source`): an RL run directory's judged groups, a groups JSONL, or `sample.num_prompts` problems
   of `tasks.train_task` sampled fresh from a policy; only non-diverse groups' pairs are kept (`pairs.make_pairs`),
   split by problem into train, validation (early stopping) and test (the reported measures).
2. The teacher (`config.teacher`, any judge config) labels every pair in both orders (`teacher.label_pairs`). The
   labels go to `<out_dir>/labels.jsonl` with the settings that made them: a rerun with the same settings reads
   them instead of asking again.
3. The student (`config.student`) is measured on the test pairs, trained on the verdict token against the soft
   labels with both orders in each batch (`student`), stopped early on the validation pairs, and measured again.
4. Out: the best student as a HF directory (`<out_dir>/export`, the exported chat template included), the report
   (`report.json`, `report.md`) and the commands that serve it.
"""

from __future__ import annotations

import json
import os
import pathlib
import time
from typing import Callable

import jax
import ml_collections
import numpy as np

from arena_jax import config_schema as cs
from arena_jax.config_schema import field
from arena_jax.distill import measure
from arena_jax.distill import pairs as pairs_lib
from arena_jax.distill import student as student_lib
from arena_jax.distill import teacher as teacher_lib
from arena_jax.errors import MissingFileError, UserError
from arena_jax.judges import config as judge_config_lib
from arena_jax.tasks import config as tasks_config_lib

LABELS_FILE = "labels.jsonl"
REPORT_FILE = "report.json"
EXPORT_DIR = "export"


class TooFewPairsError(UserError, ValueError):
  """Fewer decisive training pairs than `min_decisive` (the counts are in the message)."""


def _f(default, valid: str, meaning: str) -> cs.Field:
  return field(default, meaning, valid=valid, checked=False)


DISTILL = cs.Section(
  dict(
    source=_f(
      "",
      "path",
      "Where the traces come from: an RL run directory (its judged groups: `judge.transcripts`), a groups JSONL "
      '({"problem", "reference", "traces", "rewards"} per line), or a policy to sample from (a policy or HF '
      "directory, a `.gguf`, `pretrained:<name>`).",
    ),
    sample=cs.Section(
      dict(
        num_prompts=_f(64, "int ≥ 1", "Problems of `tasks.train_task`'s train split sampled (a policy source)."),
        group_size=_f(8, "int ≥ 2", "Traces per problem: G."),
        max_new_tokens=_f(128, "int ≥ 1", "Completion budget of each trace."),
        temperature=_f(0.7, "> 0", "Sampling temperature."),
        batch_size=_f(8, "int ≥ 1", "Prompts per sampler call."),
        seed=_f(0, "int", "Sampling key."),
      ),
      title="sampling the traces from a policy source",
    ),
    pairs_per_group=_f(6, "int ≥ 1", "Pairs drawn from each non-diverse group."),
    valid_fraction=_f(0.15, "[0, 1)", "Share of problems whose pairs stop training early (validation)."),
    test_fraction=_f(0.25, "(0, 1)", "Share of problems whose pairs are measured (held out from training)."),
    seed=_f(0, "int", "Pairs drawn, problems split, batches shuffled."),
    min_decisive=_f(16, "int ≥ 1", "Fewest decisive training pairs (the teacher preferred one trace) to train."),
    teacher=judge_config_lib.JUDGE.but(documented_apart=True),
    student=cs.Section(
      dict(
        source=_f("pretrained:smollm2-135m-instruct", "path", "The student: any policy the project loads."),
        prompt_format=_f(
          "auto", "auto | chat | plain", "chat: its chat template; plain: none; auto: chat if it has one."
        ),
        lora_rank=_f(0, "int ≥ 0", "LoRA rank of the adapters trained; 0 = every weight."),
        lora_alpha=_f(32.0, "> 0", "LoRA α (the adapters' scale is α / r)."),
        lora_targets=_f(r".*(attn|mlp)", "regex", "Modules that get adapters."),
        remat=_f(
          "minimal",
          "none | dots_saveable | minimal | full",
          "Rematerialisation of each block in the "
          "backward pass (`ModelConfig.remat`): minimal recomputes the attention, whose scores grow with T².",
        ),
        max_tokens=_f(768, "int ≥ 16", "Longest prompt trained or measured; longer pairs are left out (counted)."),
        max_trace_chars=_f(1200, "int ≥ 0", "Each trace's view cut to this many characters; 0 = whole."),
      ),
      title="the student judge",
    ),
    train=cs.Section(
      dict(
        lr=_f(3e-5, "> 0", "Peak learning rate (AdamW, warmup then cosine)."),
        weight_decay=_f(0.0, "≥ 0", "AdamW weight decay."),
        warmup_steps=_f(10, "int ≥ 0", "Linear warmup."),
        max_steps=_f(200, "int ≥ 1", "Most optimizer steps."),
        batch_pairs=_f(4, "int ≥ 1", "Pairs per step (each in both orders: 2 × rows)."),
        eval_every=_f(25, "int ≥ 1", "Steps between validation measures."),
        patience=_f(3, "int ≥ 1", "Validation measures without a better student before stopping."),
        average=_f(
          0.0,
          "0 ≤ x < 1",
          "Decay of the weights' exponential moving average that is validated and kept (SPEC §10); 0 = the trained "
          "weights themselves.",
        ),
        max_minutes=_f(
          30.0,
          "> 0",
          "Training time limit, its last validation included: it validates and stops when one more step and a "
          "validation would not fit (the best student so far is kept).",
        ),
        include_ties=_f(True, "bool", "Also train on the teacher's ties (target 1/2 in both orders)."),
      ),
      title="training the student",
    ),
    export_dtype=_f("float32", "float32 | bfloat16", "The exported weights' dtype."),
    tasks=tasks_config_lib.TASKS.but(documented_apart=True),
  )
)


def default_config() -> ml_collections.ConfigDict:
  """What `launch.distill_judge` runs: every default of `DISTILL`."""
  return DISTILL.defaults()


def validate(config) -> None:
  """Checks the fields that nothing else checks before work starts; raises ConfigError naming the first bad one."""
  from arena_jax.errors import ConfigError  # pylint: disable=g-import-not-at-top

  def need(ok: bool, name: str, what: str):
    if not ok:
      raise ConfigError(f"config.{name}={config_value(name)!r}: {what}")

  def config_value(name):
    value = config
    for part in name.split("."):
      value = value[part]
    return value

  need(bool(config.source), "source", "give an RL run directory, a groups .jsonl or a policy to sample from")
  for name in ("sample.num_prompts", "sample.max_new_tokens", "sample.batch_size", "pairs_per_group", "min_decisive"):
    need(config_value(name) >= 1, name, "must be ≥ 1")
  need(config.sample.group_size >= 2, "sample.group_size", "must be ≥ 2 (a pair needs two traces)")
  need(config.sample.temperature > 0, "sample.temperature", "must be > 0")
  need(0 < config.test_fraction < 1, "test_fraction", "must be in (0, 1)")
  need(0 <= config.valid_fraction < 1 - config.test_fraction, "valid_fraction", "must be in [0, 1 − test_fraction)")
  need(
    config.student.prompt_format in student_lib.PROMPT_FORMATS,
    "student.prompt_format",
    f"must be one of {student_lib.PROMPT_FORMATS}",
  )
  need(config.student.lora_rank >= 0, "student.lora_rank", "must be ≥ 0 (0 = every weight)")
  need(config.student.max_tokens >= 16, "student.max_tokens", "must be ≥ 16")
  for name in ("train.max_steps", "train.batch_pairs", "train.eval_every", "train.patience"):
    need(config_value(name) >= 1, name, "must be ≥ 1")
  need(config.train.lr > 0, "train.lr", "must be > 0")
  need(config.train.max_minutes > 0, "train.max_minutes", "must be > 0")
  need(0.0 <= config.train.average < 1.0, "train.average", "must be in [0, 1)")
  need(config.export_dtype in ("float32", "bfloat16"), "export_dtype", "must be float32 or bfloat16")
  judge_config_lib.validate_config(config.teacher, "teacher")


# ───────────────────────────────────────────────── steps ─────────────────────────────────────────────────


def load_groups(config, log: Callable[[str], None]) -> list[pairs_lib.Group]:
  """The groups of `config.source` (module docstring)."""
  source = str(config.source or "")
  if not source:
    raise MissingFileError("config.source is empty: give an RL run directory, a groups .jsonl or a policy")
  path = pathlib.Path(source).expanduser()
  if path.is_dir() and ((path / "transcripts").exists() or (path / "metrics.jsonl").exists()):  # an RL run
    return pairs_lib.groups_from_transcripts(path)
  if source.endswith(".jsonl"):
    return pairs_lib.groups_from_jsonl(path)
  from arena_jax.train import policy_io  # pylint: disable=g-import-not-at-top

  s = config.sample
  log(f"sampling {s.group_size} traces for each of {s.num_prompts} problems from {source}")
  policy = policy_io.load_policy(source)
  return pairs_lib.groups_from_policy(
    policy,
    config.tasks,
    num_prompts=s.num_prompts,
    group_size=s.group_size,
    max_new_tokens=s.max_new_tokens,
    temperature=s.temperature,
    batch_size=s.batch_size,
    seed=s.seed,
  )


def _label_settings(config) -> dict:
  """What the labels depend on: a rerun with the same reads `labels.jsonl` instead of asking again."""
  teacher = teacher_lib.teacher_config(config.teacher)
  return json.loads(
    json.dumps(
      {
        "source": config.source,
        "sample": config.sample.to_dict(),
        "tasks": config.tasks.to_dict(),
        "pairs_per_group": config.pairs_per_group,
        "seed": config.seed,
        "teacher": {k: v for k, v in teacher.to_dict().items() if k not in ("urls",)},
      },
      default=str,
    )
  )


def labelled_pairs(config, out_dir: pathlib.Path, log) -> tuple[list[teacher_lib.Label], dict, int]:
  """(labels of every pair, the teacher's stats, the number of groups), read from `labels.jsonl` when it holds
  the labels of the same settings."""
  path = out_dir / LABELS_FILE
  settings = _label_settings(config)
  if path.is_file():
    lines = path.read_text(encoding="utf-8").splitlines()
    head = json.loads(lines[0]) if lines else {}
    if head.get("settings") == settings:
      log(f"reading the teacher's labels from {path} (same settings)")
      return [teacher_lib.Label.from_json(json.loads(l)) for l in lines[1:]], head["teacher"], head["groups"]
  groups = load_groups(config, log)
  pairs = pairs_lib.make_pairs(groups, per_group=config.pairs_per_group, seed=config.seed)
  non_diverse = sum(g.non_diverse for g in groups)
  log(f"{len(groups)} groups, {non_diverse} non-diverse: {len(pairs)} pairs to label")
  if not pairs:
    raise TooFewPairsError(
      f"config.source={config.source}: no pair to label ({len(groups)} groups, {non_diverse} non-diverse with two "
      "distinct traces or more)"
    )
  labels, stats = teacher_lib.label_pairs(
    pairs, config.teacher, progress=lambda done, total: log(f"teacher: {done}/{total} pairs")
  )
  head = {"settings": settings, "teacher": stats.to_json(), "groups": len(groups)}
  tmp = path.with_suffix(".tmp")
  with tmp.open("w", encoding="utf-8") as f:
    f.write(json.dumps(head) + "\n")
    for label in labels:
      f.write(json.dumps(label.to_json()) + "\n")
  os.replace(tmp, path)
  return labels, head["teacher"], len(groups)


def _rows(student, labels, config) -> list:
  """Both orders of every pair of `labels` as the student's prompts (`student.pair_rows`), encoded once."""
  s = config.student
  return student_lib.pair_rows(
    student, labels, config.teacher, max_trace_chars=s.max_trace_chars, max_tokens=s.max_tokens
  )


def _measure(student, labels, rows) -> tuple[dict, float]:
  """The measures of `student` on `labels` from their `rows` (both orders), and its pairs per second."""
  p, _, seconds = student_lib.predict(student, rows)
  kept = [labels[r.pair_index] for r in rows[::2]]
  out = measure.judge_measures(kept, p[0::2], p[1::2])
  out["left_out_long"] = len(labels) - len(kept)
  return out, (len(kept) / seconds if seconds > 0 else 0.0)


def train_student(student, train_rows, valid_labels, config, log) -> tuple[object, dict]:
  """The best student on the validation pairs (SPEC §10: single-order agreement, then debiased agreement, then
  Brier score; the weights' moving average when `train.average` > 0) and the training's record."""
  t = config.train
  optimizer = student_lib.make_optimizer(t.lr, t.weight_decay, t.warmup_steps, t.max_steps)
  step = student_lib.step_program(
    student.config, student.template, student.label_ids, int(student.tokenizer.eos_id), optimizer, t.average
  )
  trainable = jax.tree.map(np.array, student.trainable)  # donated by each step: our own copy
  opt_state = optimizer.init(trainable)
  # The student validated and kept is the weights' moving average when train.average > 0: with a few pairs a step,
  # the lean to a position swings from step to step until the learning rate has decayed, so a student cut short is
  # the average (validation position bias at step 64 of 96: 0.009 averaged, 0.092 the last weights).
  average = jax.tree.map(np.array, student.trainable) if t.average > 0 else None

  def kept(trainable, average):
    return average if average is not None else trainable

  frozen = student.base if student.lora is not None else None
  batches = student_lib.pair_batches(train_rows, t.batch_pairs, config.seed)
  best, best_key, best_step, waited, history = None, None, 0, 0, []
  start, steps = time.perf_counter(), 0

  valid_rows = _rows(student, valid_labels, config)

  def validate(current):
    m, _ = _measure(student.with_trainable(current), valid_labels, valid_rows)
    return m

  stopped = "max_steps"
  budget, step_times, valid_s = 60.0 * t.max_minutes, [], None

  def no_room() -> bool:
    """Whether one more step and a validation would pass the time limit: a step's time is the median one (a new
    length bucket compiles); a validation's is the last one, or before any, a forward pass (≈ 1/3 of a step) over
    the validation rows."""
    step_s = float(np.median(step_times)) if step_times else 0.0
    valid_guess = valid_s if valid_s is not None else step_s * len(valid_rows) / (2 * t.batch_pairs) / 3
    return time.perf_counter() - start + step_s + valid_guess > budget

  while steps < t.max_steps:
    batch = next(batches)
    tokens, lengths, targets, weights = student_lib.pad_batch(
      batch, 2 * t.batch_pairs, student_lib.pad_id(student), student.label_ids
    )
    before_step = time.perf_counter()
    trainable, opt_state, average, loss, gnorm = step(
      trainable, opt_state, average, frozen, tokens, lengths, targets, weights, np.int32(steps + 1)
    )
    loss = float(loss)  # waits for the step: its time is the step's, not the next one's
    if steps:  # the first step compiles
      step_times.append(time.perf_counter() - before_step)
    steps += 1
    # The time limit holds for the whole training, its last validation included: stop (and validate) when one
    # more step and a validation would not fit.
    out_of_time = no_room()
    if steps % t.eval_every == 0 or steps == t.max_steps or out_of_time:
      before_valid = time.perf_counter()
      m = validate(kept(trainable, average))
      valid_s = time.perf_counter() - before_valid
      elapsed = time.perf_counter() - start
      # The best student sides with the teacher in each order on its own (a lean to one position costs it), then
      # debiased, then by calibration: validation agreement alone kept a student with position bias 0.18.
      key = (m["single_order_agreement"], m["agreement_vs_teacher"], -m["brier"])
      history.append(
        {
          "step": steps,
          "loss": loss,
          "grad_norm": float(gnorm),
          "seconds": elapsed,
          **{k2: m[k2] for k2 in ("agreement_vs_teacher", "single_order_agreement", "position_bias", "brier")},
        }
      )
      log(
        f"step {steps}: loss {loss:.4f}, validation agreement {m['agreement_vs_teacher']:.3f} "
        f"({m['decisive_pairs']} pairs), each order alone {m['single_order_agreement']:.3f}, position bias "
        f"{m['position_bias']:.3f}, {elapsed:.0f} s"
      )
      if best_key is None or key > best_key:
        best, best_key, best_step, waited = jax.device_get(kept(trainable, average)), key, steps, 0
      else:
        waited += 1
        if waited >= t.patience:
          stopped = "patience"
          break
      # Out of time now, or after this validation no step and validation fit: the student just measured is
      # the last one.
      if out_of_time or no_room():
        stopped = "max_minutes"
        break
  seconds = time.perf_counter() - start
  if best is None:
    best = jax.device_get(kept(trainable, average))
  record = {"steps": steps, "best_step": best_step, "stopped": stopped, "train_s": seconds, "history": history}
  return student.with_trainable(best), record


def export_student(student, out_dir: pathlib.Path, dtype: str) -> pathlib.Path:
  """The student as a HF directory that transformers loads (a plain student with its plain chat template)."""
  from arena_jax import export  # pylint: disable=g-import-not-at-top

  has_template = bool(getattr(student.tokenizer, "chat_template", None))
  exported = export.export_policy(
    student.merged(),
    student.config,
    student.tokenizer,
    out_dir,
    architecture=export.source_architecture(student.source),
    dtype=dtype,
    chat_template=None if has_template else student_lib.PLAIN_CHAT_TEMPLATE,
  )
  return pathlib.Path(exported.out_dir)


def serve_commands(export_dir: pathlib.Path, name: str = "distilled-judge", template_dir: str = "") -> dict:
  """How the exported student is served, and how a run judges with it (with the templates it was trained on)."""
  templates = f" --config.judge.template_dir={template_dir}" if template_dir else ""
  return {
    "transformers_serve": (
      f"python -m launch.train ... --config.judge.serve=transformers --config.judge.serve_model={export_dir} "
      f"--config.judge.model={name} --config.judge.verdict_format=letter --config.judge.debias=both{templates}"
    ),
    "launch_serve": (
      f"python -m launch.serve --policy={export_dir} --name={name} --port=8001   # then: python -m launch.train ... "
      f"--config.judge.urls=http://127.0.0.1:8001 --config.judge.model={name} --config.judge.verdict_format=logprobs"
      f"{templates}"
    ),
  }


def distill(config, out_dir: str | os.PathLike, log: Callable[[str], None] = print) -> dict:
  """Runs the module docstring's four steps; returns the report (also written to `<out_dir>/report.json`).

  Raises:
    TooFewPairsError: fewer than `min_decisive` decisive training pairs (the counts are named).
    teacher.TeacherError, student.StudentError, MissingFileError, InputError: bad input, named.
  """
  validate(config)
  out = pathlib.Path(out_dir)
  out.mkdir(parents=True, exist_ok=True)
  labels, teacher_stats, num_groups = labelled_pairs(config, out, log)
  ok = [l for l in labels if l.outcome is not None]
  if not ok:
    raise teacher_lib.TeacherError(f"{out / LABELS_FILE}: the teacher answered none of its {len(labels)} pairs")
  pairs_ok = [l.pair for l in ok]
  rest, test = pairs_lib.split_by_prompt(pairs_ok, config.test_fraction, seed=config.seed)
  valid_share = config.valid_fraction / max(1e-9, 1.0 - config.test_fraction)
  train, valid = pairs_lib.split_by_prompt(rest, valid_share, seed=config.seed + 1)
  side = {id(p): name for name, ps in (("train", train), ("valid", valid), ("test", test)) for p in ps}
  by = {name: [l for l in ok if side[id(l.pair)] == name] for name in ("train", "valid", "test")}
  decisive_train = sum(l.decisive for l in by["train"])
  if decisive_train < config.min_decisive:
    raise TooFewPairsError(
      f"{decisive_train} decisive training pairs (the teacher preferred one trace), {config.min_decisive} needed "
      f"(config.min_decisive); of {len(labels)} pairs from {num_groups} groups: sample more "
      "(config.sample.num_prompts) or draw more pairs per group (config.pairs_per_group)"
    )
  if not any(l.decisive for l in by["test"]) or not any(l.decisive for l in by["valid"]):
    raise TooFewPairsError(
      f"no decisive pair among the {len(by['test'])} test or {len(by['valid'])} validation pairs: raise "
      "config.test_fraction / config.valid_fraction or sample more problems"
    )
  log(
    f"pairs: {len(by['train'])} train ({decisive_train} decisive), {len(by['valid'])} validation, "
    f"{len(by['test'])} test; teacher failures {dict(teacher_stats['failed'])}"
  )
  s = config.student
  student = student_lib.load_student(
    s.source,
    prompt_format=s.prompt_format,
    lora_rank=s.lora_rank,
    lora_alpha=s.lora_alpha,
    lora_targets=s.lora_targets,
    remat=s.remat,
    seed=config.seed,
  )
  test_rows = _rows(student, by["test"], config)
  before, _ = _measure(student, by["test"], test_rows)
  log(f"before: agreement {before['agreement_vs_teacher']:.3f}, position bias {before['position_bias']:.3f}")
  train_labels = [l for l in by["train"] if l.decisive or config.train.include_ties]
  train_rows = _rows(student, train_labels, config)
  trained, record = train_student(student, train_rows, by["valid"], config, log)
  after, student_pairs_per_s = _measure(trained, by["test"], test_rows)
  log(f"after: agreement {after['agreement_vs_teacher']:.3f}, position bias {after['position_bias']:.3f}")
  export_dir = export_student(trained, out / EXPORT_DIR, config.export_dtype)
  report = {
    "source": str(config.source),
    "teacher": {"backend": config.teacher.backend, "model": config.teacher.model, **teacher_stats},
    "student": {
      "source": s.source,
      "prompt_format": trained.prompt_format,
      "lora_rank": s.lora_rank,
      "pairs_per_s": student_pairs_per_s,
    },
    "groups": num_groups,
    "pairs": {name: len(v) for name, v in by.items()} | {"labelled": len(labels), "failed": len(labels) - len(ok)},
    "train_pairs_decisive": decisive_train,
    "train_rows": len(train_rows),
    "before": before,
    "after": after,
    "training": record,
    "export": str(export_dir),
    "serve": serve_commands(export_dir, template_dir=config.teacher.template_dir),
  }
  (out / REPORT_FILE).write_text(json.dumps(report, indent=1, default=float) + "\n", encoding="utf-8")
  (out / "report.md").write_text(report_markdown(report), encoding="utf-8")
  return report


def report_markdown(report: dict) -> str:
  """A readable report: the student before and after, side by side, on the test pairs."""
  b, a = report["before"], report["after"]
  lines = [
    "# A distilled judge",
    "",
    f"Teacher: {report['teacher']['backend']} judge `{report['teacher']['model']}`; student: "
    f"`{report['student']['source']}` ({report['student']['prompt_format']} prompts, "
    f"{'LoRA r=' + str(report['student']['lora_rank']) if report['student']['lora_rank'] else 'every weight'}).",
    f"Pairs: {report['pairs']}; training: {report['training']['steps']} steps "
    f"(best {report['training']['best_step']}, stopped by {report['training']['stopped']}), "
    f"{report['training']['train_s']:.0f} s.",
    "",
    "| test pairs | before | after |",
    "|---|---|---|",
    f"| agreement with the teacher (decisive, 95% interval) | {b['agreement_vs_teacher']:.3f} "
    f"[{b['agreement_lo95']:.3f}, {b['agreement_hi95']:.3f}] | {a['agreement_vs_teacher']:.3f} "
    f"[{a['agreement_lo95']:.3f}, {a['agreement_hi95']:.3f}] |",
    f"| position bias | {b['position_bias']:.3f} | {a['position_bias']:.3f} |",
    f"| Brier score of the soft outcomes | {b['brier']:.4f} | {a['brier']:.4f} |",
  ]
  for kind in sorted(set(b["per_kind"]) | set(a["per_kind"])):
    kb, ka = b["per_kind"].get(kind), a["per_kind"].get(kind)

    def cell(m):
      return f"{m['agreement']:.3f} [{m['lo95']:.3f}, {m['hi95']:.3f}] of {m['pairs']}" if m else "–"

    lines.append(f"| agreement, flaw kind `{kind}` | {cell(kb)} | {cell(ka)} |")
  lines += [
    "",
    f"Student: {report['student']['pairs_per_s']:.2f} pairs/s (both orders); teacher: "
    f"{report['teacher']['pairs_per_s']:.2f} pairs/s.",
    "",
    "Serve it:",
    "",
    f"    {report['serve']['transformers_serve']}",
    f"    {report['serve']['launch_serve']}",
    "",
  ]
  return "\n".join(lines)


__all__ = [
  "DISTILL",
  "EXPORT_DIR",
  "LABELS_FILE",
  "REPORT_FILE",
  "TooFewPairsError",
  "default_config",
  "distill",
  "export_student",
  "labelled_pairs",
  "load_groups",
  "report_markdown",
  "serve_commands",
  "train_student",
  "validate",
]
