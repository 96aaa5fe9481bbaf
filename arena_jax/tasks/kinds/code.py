"""Code (LiveCodeBench-style): its config section and `Task`; programs run only in the sandbox.

A row is `{"question": str, "tests": [{"input": str, "output": str}, …]}` (stdin/stdout), or
`{"question": str, "fn_name": str, "tests": [{"args": [...], "expected": …}, …]}` (call-based: a function, or
a method of `class Solution`). Other keys are kept in `Example.extras["row"]`; a `solution` string, when a row
has one, is what the judge is given as the reference. The reward is 1 iff the completion's last code block
(`code_exec.extract_code`, read after any thinking block) passes every test; each program runs in a sandboxed
subprocess (`sandbox.py`: bubblewrap where the machine has it, resource limits always) from a pool of
`num_workers` at a time. Only a test's input enters the sandbox; outputs are compared outside it. Row kind in
a mixture: `code`.
"""

from __future__ import annotations

from arena_jax import config_schema as cs
from arena_jax.config_schema import field
from arena_jax.tasks import code_exec
from arena_jax.tasks import config as config_lib
from arena_jax.tasks import file_task
from arena_jax.tasks import sandbox
from arena_jax.tasks.base import Example, dump_extras, stable_hash
from arena_jax.tasks.task import register_task

NAME = "code"
ROW_KEYS = ("question", "tests", "fn_name", "solution")
STDIO_INSTRUCTIONS = (
  "Write a complete Python 3 program that reads the input from standard input and writes the answer to standard "
  "output. Give the program in one ```python code block at the end."
)
CALL_INSTRUCTIONS = (
  "Write a Python 3 function `{fn_name}` (or a method of `class Solution`) that returns the answer. Give the code "
  "in one ```python code block at the end."
)

CODE = cs.Section(
  dict(
    **file_task.file_fields("code problems with tests", prompt_template="{question}\n"),
    num_workers=field(2, "Programs run at once (sandboxed subprocesses).", cs.integer(1)),
    cpu_s=field(4.0, "CPU seconds per test (a call-based run: per test, summed).", cs.number(0, lo_open=True)),
    wall_s=field(6.0, "Wall-clock seconds per test; the process group is killed after it.", cs.number(0, lo_open=True)),
    memory_mb=field(512, "Address-space limit of a program, MiB.", cs.integer(16)),
    max_output_mb=field(1, "Output kept per run, MiB (the rest is cut and the run fails).", cs.integer(1)),
  ),
  title="code problems with unit tests (LiveCodeBench-style), run in a sandbox",
)
config_lib.TASKS.rule(file_task.file_rule(NAME))


def _tests(row: dict) -> tuple[list[dict], str | None]:
  if "tests" not in row:
    raise ValueError(f"tests: missing field (fields present: {sorted(row)})")
  tests, fn_name = row["tests"], row.get("fn_name")
  if fn_name is not None and (not isinstance(fn_name, str) or not fn_name.isidentifier()):
    raise ValueError(f"fn_name: must be a Python identifier, got {fn_name!r:.60}")
  if not isinstance(tests, list) or not tests:
    raise ValueError("tests: must be a non-empty list of tests")
  want = ("args", "expected") if fn_name else ("input", "output")
  for i, t in enumerate(tests):
    if not isinstance(t, dict) or set(want) - set(t):
      kind = "call-based (with fn_name)" if fn_name else "stdin/stdout"
      raise ValueError(f"tests[{i}]: a {kind} test is an object with {' and '.join(want)}, got {t!r:.80}")
    if fn_name and not isinstance(t["args"], list):
      raise ValueError(f"tests[{i}].args: must be a list of arguments, got {t['args']!r:.60}")
    if not fn_name and not (isinstance(t["input"], str) and isinstance(t["output"], str)):
      raise ValueError(f"tests[{i}]: input and output must be strings")
  return tests, fn_name


def parse_code_row(row: dict, *, uid: str) -> Example:
  """The Example of one code row (tests and fn_name in `extras`); ValueError("field: problem")."""
  if "question" not in row:
    raise ValueError(f"question: missing field (fields present: {sorted(row)})")
  question = row["question"]
  if not isinstance(question, str) or not question.strip():
    raise ValueError(f"question: must be a non-empty string, got {question!r:.60}")
  tests, fn_name = _tests(row)
  solution = row.get("solution", "")
  if not isinstance(solution, str):
    raise ValueError("solution: must be a string")
  extras = {"tests": tests, **({"fn_name": fn_name} if fn_name else {})}
  rest = {k: v for k, v in row.items() if k not in ROW_KEYS and k != "kind"}
  if rest:
    extras["row"] = rest
  return Example(uid=uid, question=question.strip(), answer="", solution=solution, extras=dump_extras(extras))


@register_task(NAME, CODE)
class CodeTask(file_task.FileTask):
  """Code problems; the reward is passing every unit test in the sandbox (SPEC §1's verifier, for code)."""

  what = "code problems"
  row_kind = "code"
  not_data = file_task.FileTask.not_data + ("num_workers", "cpu_s", "wall_s", "memory_mb", "max_output_mb")

  def __init__(self, config):
    super().__init__(config)
    self._pool = None

  def parse_row(self, row, split, line):
    return parse_code_row(row, uid=f"{NAME}-{split}-{line}-{stable_hash(str(row.get('question', '')), 8)}")

  def prompt(self, example):
    fn_name = example.meta.get("fn_name")
    how = CALL_INSTRUCTIONS.format(fn_name=fn_name) if fn_name else STDIO_INSTRUCTIONS
    return self.task_config.prompt_template.format(question=f"{example.question}\n\n{how}")

  def reference_answer(self, example):
    return example.solution  # "" = none: the judge is told no reference is given

  @property
  def pool(self) -> code_exec.CodePool:
    if self._pool is None:
      c = self.task_config
      limits = sandbox.Limits(
        cpu_s=c.cpu_s, wall_s=c.wall_s, memory_mb=c.memory_mb, max_output_bytes=c.max_output_mb << 20
      )
      self._pool = code_exec.CodePool(num_workers=c.num_workers, limits=limits)
    return self._pool

  def score_batch(self, examples, completions):
    if len(examples) != len(completions):
      raise ValueError(f"{len(examples)} examples but {len(completions)} completions")
    items = [(c, e.meta["tests"], e.meta.get("fn_name")) for e, c in zip(examples, completions)]
    return [
      {"score": float(r.passed), "reason": r.reason, "tests_passed": r.tests_passed, "limit_hit": r.limit_hit}
      for r in self.pool.verify_batch(items)
    ]

  def score(self, example, completion):
    return self.score_batch([example], [completion])[0]

  def verify_batch(self, examples, completions):
    return [s["score"] for s in self.score_batch(examples, completions)]

  def verify(self, example, completion):
    return self.score(example, completion)["score"]

  def close(self):
    if self._pool is not None:
      self._pool.close()
      self._pool = None
