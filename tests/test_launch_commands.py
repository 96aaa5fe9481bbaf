"""Every launch command runs as its module docstring (and README.md) writes it, typed by a user: in a process of its
own, it either succeeds or ends with one line that names the problem (`error: …`, exit 2), never with a traceback
from its flag and config handling (`python -m launch.eval --hf_path=…` once died at once with a KeyError).

The commands are read from the docstrings of launch/*.py and from README.md (code lines and inline `python -m
launch.…` spans), so a newly documented form is run without an edit here. Each is made to end within seconds (no
training, serving or compiling), with these substitutions:

  documented                                   run here
  a path outside the repository                <tmp>/<k>/missing/<path>: not there, so the run stops at its check
    (runs/…, hf/…, /ckpt/…, /data/…, /tmp/…,   and names it (k: one directory per command). A file of the
    /mnt/…, /models/…, *.jsonl, *.parquet,     repository (configs/…, tests/data/…) is kept, but INPUT_MISSING's
    *.gguf, OTHER_PATHS)                       --input is made missing too
  pretrained:<name>                            <tmp>/<k>/missing/pretrained.gguf (the real model would load)
  --workdir=...                                --workdir=runs/documented (then as above)
  another --flag=..., a lone ...               left out (a placeholder); [--opt=x] → --opt=x; a|b → a
  .venv-tpu/bin/python -m                      this interpreter
  + FAST[module]                               a value the run refuses at validation, for the mains that would
                                               otherwise train, serve or compile for minutes
  launch.eval … --watch                        + --timeout_s=0: one pass over a run that is not there

A failing command's error must name what was planted (a path that is not there, FAST's field), so a documented flag
that its main now rejects fails the test; a partial form (a lone ...) may stop at a problem of its own.

Two documented forms of a module that set the same flags (an override `--config.a.b` counts as `--config.*`) take
the same path through the flag handling: only the first runs. They run a few at a time from one test, which reports
every failure together, each in a process of its own forked from a server that imported JAX and the package once
(tests/forkserver.py): the imports were most of the file's two minutes.
"""

import ast
import concurrent.futures
import importlib.util
import pathlib
import re
import shlex
import subprocess
import sys

from tests.forkserver import ForkServer

ROOT = pathlib.Path(__file__).resolve().parent.parent
LAUNCH = sorted(p.stem for p in (ROOT / "launch").glob("*.py") if p.stem != "__init__")
INLINE = re.compile(r"`(?:\S*/)?python -m (launch\.\w+)([^`]*)`")
LINE = re.compile(r"^\s*(?:\S*/)?python -m (launch\.\w+)(.*)$")
# A path outside the repository's files: the documented runs, checkpoints, data and outputs.
PATHLIKE = re.compile(
  r"(?<![\w.])(?:runs/|hf/|/ckpt/|/data/|/tmp/|/mnt/|/models/)[\w./-]*|(?<![\w./-])[\w-]+\.(?:jsonl|parquet)\b"
  r"|(?<![\w./-])[\w.-]+\.gguf\b"
)
OTHER_PATHS = ("my_templates",)  # bare names PATHLIKE does not see
# Mains whose documented --input is a file of the repository and would then run for real (the embedded judge).
INPUT_MISSING = ("launch.jury",)
# What stops a main that would otherwise train, serve or compile for minutes: a value it refuses at validation, and
# what its error then names.
FAST = {
  "launch.train": ("--config.num_steps=0", "num_steps"),
  "launch.sft": ("--config.num_steps=0", "num_steps"),
  "launch.testbed": ("--config.num_steps=0", "num_steps"),
  "launch.demo": ("--sft_config.num_steps=0", "num_steps"),
  "launch.real": ("--config.rollout.group_size=0", "group_size"),  # --steps would override num_steps
  "launch.real_arms": ("--steps=0", "num_steps"),
  "launch.compare": ("--study.final_fraction=0", "final_fraction"),
  "launch.serve_judge": ("--server.latency_ms=-1", "latency_ms"),
  "launch.serve": ("--max_rows=0", "max_rows"),
  "launch.distill_judge": ("--config.train.max_steps=0", "max_steps"),
  # Without libtpu (the `tpu` extra, not in .venv) each stops at its check, before it compiles anything.
  "launch.aot_compile": ("--programs=none", "--programs") if importlib.util.find_spec("libtpu") else (None, "libtpu"),
}
WORKERS = 3
TIMEOUT_S = 180


def _docstring(module: str) -> str:
  return ast.get_docstring(ast.parse((ROOT / "launch" / f"{module}.py").read_text(encoding="utf-8"))) or ""


def _commands(text: str) -> list[tuple[str, str]]:
  """(module, arguments) of each `python -m launch.<x> …` of `text`, continuation lines joined."""
  out = []
  for line in text.replace("\\\n", " ").splitlines():
    found = INLINE.findall(line)
    if not found and LINE.match(line):
      found = [LINE.match(line).groups()]
    out += found
  return out


def _arguments(args: str) -> list[str]:
  """A documented command's arguments with its placeholders resolved (module docstring); a lone `...` (the form is
  partial: it may fail validation on its own) is kept as the last."""
  out = []
  for a in shlex.split(args, comments=True):
    a = a.strip("[]")
    if a == "--workdir=...":
      out.append("--workdir=runs/documented")
    elif not a.endswith("=...") and a != "...":
      out.append(a.split("|")[0] if re.fullmatch(r"\w+(\|\w+)+", a) else a)  # consolidation|deliberation
  return out + ["..."] * ("..." in args.split())


def _shape(argv: list[str]) -> tuple[str, frozenset]:
  """The module and the flags a command sets, without their values; an override `--x.y.z` as `--x.*`."""
  names = (a[2:].split("=")[0] for a in argv[1:] if a.startswith("--"))  # (a partial form's `...` is not a flag)
  return argv[0], frozenset(n.split(".")[0] + ".*" if "." in n else n for n in names)


def documented() -> list[tuple[str, list[str]]]:
  """(where, [module, *arguments]) of each documented command of a shape not seen before, in docstring order."""
  sources = [(f"launch/{m}.py", _docstring(m)) for m in LAUNCH]
  sources.append(("README.md", (ROOT / "README.md").read_text(encoding="utf-8")))
  seen, out = set(), []
  for where, text in sources:
    for module, args in _commands(text):
      argv = [module, *_arguments(args)]
      if _shape(argv) not in seen:
        seen.add(_shape(argv))
        out.append((where, argv))
  return out


def runnable(argv: list[str], tmp: pathlib.Path) -> list[str]:
  """The arguments (after `python -m`) that run the documented `argv` here, its paths missing under `tmp`."""
  missing = lambda path: str(tmp / "missing" / path.lstrip("/"))  # noqa: E731
  module, out = argv[0], []
  for a in argv[1:]:
    if a == "...":
      continue
    a = PATHLIKE.sub(lambda m: missing(m.group(0)), a)
    # A model of `make real-model` by name (pretrained) would load and run for real: a missing file instead.
    a = re.sub(r"pretrained:[\w.-]+", lambda m: missing("pretrained.gguf"), a)  # noqa: B023
    for name in OTHER_PATHS:
      a = re.sub(rf"(^|=){name}$", lambda m: m.group(1) + missing(name), a)  # noqa: B023
    out.append(a)
  if module in INPUT_MISSING:
    for i, a in enumerate(out):
      if a == "--input":
        out[i + 1] = missing("input.jsonl")
      elif a.startswith("--input="):
        out[i] = "--input=" + missing("input.jsonl")
  if module == "launch.eval" and "--watch" in out:
    out.append("--timeout_s=0")
  if FAST.get(module, (None,))[0]:
    out.append(FAST[module][0])
  return [module, *out]


def _run(server: ForkServer, argv: list[str], tmp: pathlib.Path) -> subprocess.CompletedProcess:
  proc = server.run(argv, cwd=ROOT, workdir=tmp / "process", timeout=TIMEOUT_S)
  if proc.returncode is None:
    proc.stderr += f"\ndid not end within {TIMEOUT_S} s"
  return proc


def _problem(proc: subprocess.CompletedProcess, partial: bool, tmp: pathlib.Path) -> str | None:
  """What is wrong with how a command ended, or None. Its error must name what was planted (a path that is not
  there, FAST's value), not something else that its documented flags got wrong; a partial form's any problem."""
  module = proc.args[2]
  if proc.returncode is None:
    return "it did not end"
  if "Traceback" in proc.stdout + proc.stderr:
    return "a traceback"
  if proc.returncode == 0:
    return f"exit 0: {FAST[module][0]} did not stop it" if FAST.get(module, (None,))[0] else None
  lines = proc.stderr.strip().splitlines()
  last = lines[-1] if lines else ""
  if not last.startswith("error: "):
    return "its last line is not a one-line `error: …`"
  planted = [str(tmp / "missing")] if str(tmp / "missing") in " ".join(proc.args) else []
  planted += [FAST[module][1]] if module in FAST else []
  if planted and not partial and not any(p in last for p in planted):
    return f"its error names none of {planted}"
  return None


def test_every_launch_module_documents_a_command():
  documented_modules = {argv[0] for _, argv in documented()}
  assert documented_modules >= {f"launch.{m}" for m in LAUNCH}, sorted(documented_modules)


def test_documented_launch_commands_end_in_one_line(tmp_path, launch_server):
  forms = documented()
  commands = [(where, runnable(argv, tmp_path / str(k))) for k, (where, argv) in enumerate(forms)]
  with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
    procs = list(pool.map(lambda k: _run(launch_server, commands[k][1], tmp_path / str(k)), range(len(commands))))
  failures = []
  for k, ((where, argv), proc) in enumerate(zip(commands, procs)):
    problem = _problem(proc, "..." in forms[k][1], tmp_path / str(k))
    if problem:
      tail = (proc.stderr or proc.stdout).strip().splitlines()[-6:]
      failures.append(
        f"{where}: python -m {shlex.join(argv)}\n  → {problem} (exit {proc.returncode})\n"
        + "\n".join("    " + line for line in tail)
      )
  assert not failures, f"{len(failures)} of {len(commands)} documented commands:\n" + "\n".join(failures)


def test_a_config_field_is_given_only_when_the_command_line_sets_it():
  """`cli.field_given` (what `launch.eval --hf_path` asks of `--config.tasks.prompt_format`): an override flag exists
  only once given, so the question must not look the flag up."""
  code = (
    "import sys; from absl import flags; from ml_collections import ConfigDict; from arena_jax import cli; "
    "sys.argv[1:] = ['--config.tasks.prompt_format=chat', '--config.a=3']; "
    "cli.config_dict_flag('config', ConfigDict(dict(a=1, tasks=dict(prompt_format='plain', x=2), judge=dict(y=3)))); "
    "flags.FLAGS(sys.argv); "
    "print(sorted(cli.overridden_fields('config')), "
    "[cli.field_given('config', f) for f in ('tasks.prompt_format', 'tasks.x', 'a', 'judge.y', 'tasks')])"
  )
  proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S)
  assert proc.returncode == 0, proc.stderr
  assert proc.stdout.split() == "['a', 'tasks.prompt_format'] [True, False, True, False, False]".split()
