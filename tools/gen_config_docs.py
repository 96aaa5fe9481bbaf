"""Renders docs/configuration.md from the config declarations, and the judge-cost tables of docs/judges.md.

    python -m tools.gen_config_docs           # rewrite both files
    python -m tools.gen_config_docs --check   # exit 1 if either is stale or a config field is not declared

Every field is declared once, with its default, its valid values and its meaning
(`arena_jax.config_schema`): the RL run in `arena_jax.train.config.RUN`, which embeds the tasks
(`arena_jax.tasks.config.TASKS`) and the judge (`arena_jax.judges.config.JUDGE`, with its `SERVER`), the SFT
config in `arena_jax.train.sft.SFT`, the evaluation in `arena_jax.eval.watch.EVAL`. This tool only renders
them. The values shown are read from the configs themselves (`base_config()`, every RL config file in
configs/, `sft.default_config()` and configs/sft.py, `watch.default_config()`); a field that a config has and
no declaration has, or a declared field that no config has, is an error: the page cannot drift from the
code. tests/docs/test_config_docs.py regenerates both files and compares them with the committed ones.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import difflib
import importlib
import os
import pathlib
import sys
from typing import Any, Iterator, Sequence

import ml_collections

from arena_jax import arena, rl
from arena_jax import config_schema as cs
from arena_jax import distill
from arena_jax.eval import watch
from arena_jax.judges import config as judges_config
from arena_jax.tasks import config as tasks_config
from arena_jax.train import config as train_config
from arena_jax.train import sft
import configs

ROOT = pathlib.Path(__file__).resolve().parent.parent
CONFIG_DOC = ROOT / "docs" / "configuration.md"
JUDGES_DOC = ROOT / "docs" / "judges.md"
fmt = cs.fmt


class DocsError(ValueError):
  pass


# ───────────────────────────────────── loading the configs ─────────────────────────────────────


def load_config_file(path: pathlib.Path, arg: str | None = None) -> ml_collections.ConfigDict:
  """What `--config=path:arg` loads: the file's `get_config(arg)`."""
  return configs.get_config(path, arg)


def config_args(path: pathlib.Path) -> list[str | None]:
  """The arguments a config file accepts: none, "smoke" if it has it, and its `SLICES` (topologies)."""
  module = importlib.import_module(f"configs.{pathlib.Path(path).stem}")
  args: list[str | None] = [None]
  slices = list(getattr(module, "SLICES", {}))
  args += slices[1:]  # the first topology is the default (None)
  if not slices:
    try:
      module.get_config("smoke")
      args.append("smoke")
    except ValueError:
      pass
  return args


def rl_config_files() -> list[pathlib.Path]:
  """The RL run config files (configs/common.py and configs/pod.py hold presets, not configs)."""
  return sorted(
    p
    for p in (ROOT / "configs").glob("*.py")
    if p.name not in ("sft.py", "common.py", "pod.py", "distill_judge.py") and not p.name.startswith("_")
  )


@contextlib.contextmanager
def _default_environment() -> Iterator[None]:
  """Defaults as a fresh shell sees them: ARENA_JAX_DATA_DIR unset (it replaces `tasks.data_dir`)."""
  saved = os.environ.pop("ARENA_JAX_DATA_DIR", None)
  try:
    yield
  finally:
    if saved is not None:
      os.environ["ARENA_JAX_DATA_DIR"] = saved


def flatten(config: ml_collections.ConfigDict, prefix: str = "") -> dict[str, Any]:
  """{dotted path: value} of every leaf; a placeholder (`placeholder(int)`) is None."""
  out = {}
  for key, value in config.items():
    if isinstance(value, ml_collections.ConfigDict):
      out.update(flatten(value, f"{prefix}{key}."))
    else:
      out[f"{prefix}{key}"] = value
  return out


def _own(values: dict[str, Any], *skip: str) -> dict[str, Any]:
  return {k: v for k, v in values.items() if not k.startswith(skip)}


def _under(values: dict[str, Any], prefix: str) -> dict[str, Any]:
  return {k[len(prefix) :]: v for k, v in values.items() if k.startswith(prefix)}


# ───────────────────────────────────── rendering ─────────────────────────────────────


@dataclasses.dataclass
class Chapter:
  """One config's reference: its declaration and the values of a config built from it."""

  section: cs.Section
  values: dict[str, Any]  # flattened config of this section (without the sections documented apart)
  what: str  # names the config and where it is declared, in errors
  prefix: str = ""  # shown before every path (e.g. "judge.")


def check_declared(ch: Chapter, errors: list[str], extra: dict[str, Any] | None = None) -> None:
  """Appends to `errors` what keeps the declarations from describing exactly the fields of the config."""
  declared = ch.section.fields()
  present = {**ch.values, **(extra or {})}
  missing = [p for p in present if p not in declared]
  if missing:
    errors.append(f"{ch.what}: no description for {missing} — declare them (arena_jax.config_schema.field)")
  optional = {p for p, e in ch.section.walk() if isinstance(e, cs.Section) and e.optional}
  stale = [p for p in declared if p not in present and not any(p.startswith(o + ".") for o in optional)]
  if stale:
    errors.append(f"{ch.what}: declared but in no config: {stale} — remove the declarations")


def _groups(section: cs.Section, values: dict[str, Any]) -> Iterator[tuple[str, str, list[str]]]:
  """(name, title, paths) of the section's own fields (name "") and of each sub-section not documented
  apart, with the paths present in `values`."""
  own = [name for name, e in section.entries.items() if not isinstance(e, cs.Section)]
  yield "", "", [p for p in own if p in values]
  for name, entry in section.entries.items():
    if isinstance(entry, cs.Section) and not entry.documented_apart:
      yield name, entry.title, [p for p in entry.fields(f"{name}.") if p in values]


def render(ch: Chapter, intro: str = "", *, level: str = "###", default_header: str = "default") -> list[str]:
  lines = [intro, ""] if intro else []
  declared = ch.section.fields()
  for name, title, paths in _groups(ch.section, ch.values):
    if not paths:
      continue
    if name:
      lines += [f"{level} `{ch.prefix}{name}`" + (f" — {title}" if title else ""), ""]
    lines += cs.table(((f"{ch.prefix}{p}", ch.values[p], declared[p]) for p in paths), default_header)
    lines.append("")
  rules = cs.rule_docs(ch.section)
  if rules:
    lines += ["Checks that relate several fields:", ""]
    lines += [f"- `{name}`: {doc}" for name, doc in rules]
    lines.append("")
  return lines


def _diff(base: dict, other: dict) -> dict[str, Any]:
  """Fields of `other` whose value differs from `base` (or that `base` lacks)."""
  missing = object()
  return {k: v for k, v in other.items() if base.get(k, missing) != v}


def _changes(d: dict[str, Any]) -> str:
  return "<br>".join(f"`{k}` = {fmt(v)}" for k, v in d.items()) or "(nothing)"


def generate_configuration() -> str:
  """The text of docs/configuration.md (raises DocsError when a config and its declaration disagree)."""
  with _default_environment():
    run = flatten(train_config.base_config())
    files = {(p, arg): flatten(load_config_file(p, arg)) for p in rl_config_files() for arg in config_args(p)}
    sft_defaults = flatten(sft.default_config())
    sft_path = ROOT / "configs" / "sft.py"
    sft_demo, sft_smoke = flatten(load_config_file(sft_path)), flatten(load_config_file(sft_path, "smoke"))
    evaluation = flatten(watch.default_config())
    distillation = flatten(distill.default_config())

  extras: dict[str, Any] = {}  # fields the RL config files add to base_config() (first file's value)
  for values in files.values():
    for k, v in values.items():
      if k not in run and k not in extras:
        extras[k] = v
  run_ch = Chapter(train_config.RUN, _own(run, "tasks.", "judge."), "run config (arena_jax/train/config.py RUN)")
  tasks_ch = Chapter(
    tasks_config.TASKS, _under(run, "tasks."), "config.tasks (arena_jax/tasks/config.py TASKS)", "tasks."
  )
  judge_ch = Chapter(
    judges_config.JUDGE, _under(run, "judge."), "config.judge (arena_jax/judges/config.py JUDGE)", "judge."
  )
  sft_ch = Chapter(sft.SFT, _own(sft_defaults, "tasks."), "SFT config (arena_jax/train/sft.py SFT)")
  eval_ch = Chapter(watch.EVAL, _own(evaluation, "tasks."), "eval config (arena_jax/eval/watch.py EVAL)")
  distill_ch = Chapter(
    distill.DISTILL, _own(distillation, "tasks.", "teacher."), "distillation config (arena_jax/distill/run.py DISTILL)"
  )
  errors: list[str] = []
  check_declared(run_ch, errors, extra=_own(extras, "tasks.", "judge."))
  for ch in (tasks_ch, judge_ch, sft_ch, eval_ch, distill_ch):
    check_declared(ch, errors)
  if errors:
    raise DocsError("\n".join(errors))

  out = [
    "# Configuration",
    "",
    "<!-- Generated by `python -m tools.gen_config_docs` from the config declarations; do not edit by hand. "
    "tests/docs/test_config_docs.py fails when this page and the code disagree. -->",
    "",
    "Configs are Python files returning an `ml_collections.ConfigDict` (`get_config(arg)`). On the "
    "command line every field is a flag: `--config=configs/arith_arena_live.py:smoke "
    "--config.rollout.group_size=16 --config.judge.urls='(\"http://judge:8000/v1\",)'`. Every field is declared "
    "once, with its default, its valid values and its meaning (`arena_jax.config_schema`); this page, the "
    "defaults and the check every config passes once, up front, before anything is built, all come from that "
    "declaration. An error names the field and what to change. A **valid** range is what that check enforces "
    "(numbers must also be finite); † marks a range that is not checked up front (a bad value fails later). "
    "Defaults are the values in a fresh shell (`ARENA_JAX_DATA_DIR` unset).",
    "",
    "| config | declared in | built by | used by |",
    "|---|---|---|---|",
    "| [RL run](#rl-run) | `arena_jax.train.config.RUN` | `arena_jax.train.config.base_config()`; "
    "configs/arith_*.py, configs/real_*.py | `python -m launch.train`, `arena_jax.train.train(config, workdir)` |",
    "| [tasks](#tasks-configtasks) | `arena_jax.tasks.config.TASKS` | `arena_jax.tasks.default_config()` (the RL, "
    "SFT and eval configs embed it as `tasks`) | datasets, verifiers, SFT demonstrations |",
    "| [judge](#judge-configjudge) | `arena_jax.judges.config.JUDGE` | `arena_jax.judges.default_config()` (the RL "
    "config's `judge`) | the trainer, `launch/judge_pairs.py`, `launch/jury.py`; `server` also "
    "`launch/serve_judge.py` |",
    "| [SFT](#sft-configssftpy) | `arena_jax.train.sft.SFT` | `arena_jax.train.sft.default_config()`; configs/sft.py "
    "| `python -m launch.sft`, `arena_jax.train.train_sft` |",
    "| [evaluation](#evaluation-launchevalpy) | `arena_jax.eval.watch.EVAL` | "
    "`arena_jax.eval.watch.default_config()` | `python -m launch.eval` (`--config.<field>`) |",
    "",
    "## RL run",
    "",
  ]
  out += render(
    run_ch,
    "`config.tasks` and `config.judge` are documented in their own sections below. "
    "configs/arith_arena_live.py sets every field, with why it has its value.",
  )
  if extras:
    out += [
      "### Fields of the real-model configs",
      "",
      "`base_config()` does not have these; the files that set them do (the value shown is the first such file's).",
      "",
    ]
    out += render(
      Chapter(train_config.RUN.but(rules=[]), _own(extras, "tasks.", "judge."), run_ch.what),
      level="####",
      default_header="value",
    )

  out += [
    "### What each config file changes",
    "",
    "Every RL config file is compared with `base_config()`; these are the fields it changes. A row `file:arg` "
    "lists what the argument changes relative to the same file without it.",
    "",
  ]
  out += _file_changes(run, files)

  out += ["## Tasks (`config.tasks`)", ""]
  out += render(tasks_ch)
  out += [
    "## Judge (`config.judge`)",
    "",
    "How to serve a real judge, the templates, debiasing and costs: [judges.md](judges.md).",
    "",
  ]
  out += render(judge_ch)
  out += ["## SFT (`configs/sft.py`)", ""]
  out += render(
    sft_ch,
    "Its `tasks` is `arena_jax.tasks.demo_config()` (see [Tasks](#tasks-configtasks); the "
    "RL run must use the same one).",
  )
  demo = _diff(sft_defaults, sft_demo)
  out += [
    (
      "`configs/sft.py` is these defaults"
      if not demo
      else "`configs/sft.py` changes: " + _changes(demo).replace("<br>", ", ")
    )
    + "; `configs/sft.py:smoke` changes: "
    + _changes(_diff(sft_demo, sft_smoke)).replace("<br>", ", ")
    + ".",
    "",
  ]
  out += ["## Evaluation (`launch/eval.py`)", ""]
  out += render(
    eval_ch,
    "Its `tasks` is `arena_jax.tasks.default_config()`: set it to the run's own (for the "
    "demo policy, `tasks.demo_config()`: `--config.tasks.arithmetic.max_operand=15 "
    "--config.tasks.arithmetic.max_value=100`).",
  )
  out += ["## Distilling a judge (`launch/distill_judge.py`)", ""]
  out += render(
    distill_ch,
    "Its `teacher` is a judge config (the `judge` section above: the embedded process checker by default) and its "
    "`tasks` the tasks section (the traces' task when they are sampled from a policy). `configs/distill_judge.py` "
    "(what `make real-judge` runs) sets the real model's: SmolLM2-135M-Instruct's own traces on the real run's task.",
  )
  return "\n".join(out).rstrip() + "\n"


def _file_changes(run: dict, files: dict) -> list[str]:
  """What each RL config file (and argument) changes: a file relative to `base_config()`, a file with an
  argument relative to the same file without it. Changes that every `arith_*` file shares (with or
  without the same argument) are listed once, above the table."""
  plain = {p: v for (p, arg), v in files.items() if arg is None}
  rows: dict[tuple, dict] = {}
  for (path, arg), values in files.items():
    rows[(path, arg)] = _diff(run, values) if arg is None else _diff(plain[path], values)
  lines = []
  shared: dict[str | None, dict] = {}
  for arg in dict.fromkeys(a for _, a in files):
    group = [key for key in rows if key[1] == arg and key[0].name.startswith("arith_")]
    if len(group) < 2:
      continue
    first, *others = [rows[key] for key in group]
    shared[arg] = {k: v for k, v in first.items() if all(k in d and d[k] == v for d in others)}
    what = "Every `configs/arith_*.py`" + (
      f" with `:{arg}`" if arg else " (the testbed of configs/arith_arena_live.py)"
    )
    relative = " (relative to the same file without it)" if arg else ""
    lines += [f"{what} changes{relative}: {_changes(shared[arg]).replace('<br>', ', ')}.", ""]
  lines += ["| file | other changes |", "|---|---|"]
  for (path, arg), d in rows.items():
    if path.name.startswith("arith_") and arg in shared:
      d = {k: v for k, v in d.items() if k not in shared[arg]}
      if arg is not None and not d:
        continue
    name = f"configs/{path.name}" + (f":{arg}" if arg else "")
    lines.append(f"| `{name}` | {_changes(d)} |")
  return lines + [""]


# ───────────────────────────────────── judge costs (docs/judges.md) ─────────────────────────────────────

BEGIN = "<!-- BEGIN GENERATED: judge costs (python -m tools.gen_config_docs) -->"
END = "<!-- END GENERATED: judge costs -->"
SIZES = (4, 8, 16)


def generate_judge_costs() -> str:
  """The generated block of docs/judges.md: judge calls per group by topology and by reward mode."""

  def calls(name, g):
    return arena.expected_calls(name, g, **({"anchor": 0} if arena.SCHEDULERS[name].needs_anchor else {}))

  missing = [name for name, cls in arena.SCHEDULERS.items() if not cls.calls_formula]
  if missing:
    raise DocsError(f"schedulers without a calls_formula (arena/tournaments/): {missing}")

  lines = [
    BEGIN,
    "",
    "Judge calls per judged group with no failures (`arena.expected_calls(name, G)`; anchored "
    "topologies as the trainer runs them, with the group's greedy sample as anchor). `debias=both` doubles "
    "every figure.",
    "",
    "| topology | calls per group | " + " | ".join(f"G = {g}" for g in SIZES) + " |",
    "|---|---|" + "---|" * len(SIZES),
  ]
  for name in sorted(arena.SCHEDULERS, key=lambda n: calls(n, 16)):
    lines.append(
      f"| `{name}` | {arena.SCHEDULERS[name].calls_formula} | " + " | ".join(str(calls(name, g)) for g in SIZES) + " |"
    )
  lines += [
    "",
    "Per reward mode (SPEC §7), per optimizer step of B groups with a fraction ρ of non-diverse groups "
    "(`groups/routed` in the metrics):",
    "",
    "| mode | groups judged | calls per judged group | G = 8, B = 16, ρ = 1/2 |",
    "|---|---|---|---|",
  ]
  for name in sorted(rl.REWARD_MODES):
    mode = rl.REWARD_MODES[name]
    if not mode.uses_judge:
      lines.append(f"| `{name}` | none | 0 | 0 |")
      continue
    judged = "all B" if mode.judge_groups == "all" else "the non-diverse ρB"
    if mode.judge_form == "pairwise":
      per, formula = calls(mode.topology, 8), f"`{mode.topology}`: {arena.SCHEDULERS[mode.topology].calls_formula}"
    else:
      per, formula = 8, "G (one rubric score per trajectory)"
    groups = 16 if mode.judge_groups == "all" else 8
    lines.append(f"| `{name}` | {judged} | {formula} | {per * groups} |")
  lines += ["", END]
  return "\n".join(lines)


def splice(text: str, block: str) -> str:
  if BEGIN not in text or END not in text:
    raise DocsError(f"{JUDGES_DOC} lacks the generated-block markers {BEGIN!r} … {END!r}")
  head, rest = text.split(BEGIN, 1)
  _, tail = rest.split(END, 1)
  return head + block + tail


# ───────────────────────────────────── entry point ─────────────────────────────────────


def expected_files() -> dict[pathlib.Path, str]:
  """{path: the text it should have}."""
  judges_text = JUDGES_DOC.read_text(encoding="utf-8")
  return {CONFIG_DOC: generate_configuration(), JUDGES_DOC: splice(judges_text, generate_judge_costs())}


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--check", action="store_true", help="exit 1 if a generated file is stale; write nothing")
  args = parser.parse_args(argv)
  try:
    files = expected_files()
  except DocsError as e:
    print(f"error: {e}", file=sys.stderr)
    return 1
  stale = []
  for path, text in files.items():
    current = path.read_text(encoding="utf-8") if path.exists() else ""
    if current == text:
      continue
    stale.append(path)
    if args.check:
      diff = difflib.unified_diff(current.splitlines(), text.splitlines(), str(path), "generated", lineterm="", n=1)
      print("\n".join(list(diff)[:60]), file=sys.stderr)
    else:
      path.write_text(text, encoding="utf-8")
      print(f"wrote {path.relative_to(ROOT)}")
  if args.check and stale:
    print(f"stale: {[str(p.relative_to(ROOT)) for p in stale]}; run `python -m tools.gen_config_docs`", file=sys.stderr)
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
