"""Writes step-by-step solutions from a problem tree, canonical or with controlled departures.

The canonical solution of a tree computes its operations in post-order, one equation per step,
and ends with `Answer: N` (layout in `steps.py`). The demonstrations of `demonstrations.py` are the
same writer with edits: a different result written for one operation (a slip, and where the error
is later "fixed", compensating errors), operations folded into their parent's step (skipped steps),
extra steps inserted (redundant steps), or no steps at all (a bare answer).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Collection, Mapping, Sequence

from arena_jax.tasks import expressions as ex
from arena_jax.tasks import steps as steps_lib


def write_steps(
  root: ex.Expr,
  *,
  written: Mapping[ex.Expr, Fraction] | None = None,
  inline: Collection[ex.Expr] = (),
  extra: Sequence[tuple[int, str]] = (),
  bare: bool = False,
) -> tuple[list[str], dict[ex.Expr, Fraction]]:
  """The steps of a solution and the value it writes for every operation.

  Args:
    root: the problem tree (arithmetic: the expression; countdown: a reference solution).
    written: operation → the result written for it instead of the one computed from its operands
      as written (which are themselves the results written earlier, so an edit propagates).
    inline: operations not given a step of their own: their parent's step shows them in parentheses.
    extra: (after, text) pairs: a step `text` inserted after the `after`-th written step (0-based).
    bare: only the final answer.

  Returns:
    (steps, shown): the step texts, the last one `Answer: N`, and operation → written value.
  """
  written = written or {}
  shown: dict[ex.Expr, Fraction] = {}

  def operand_text(child: ex.Expr):
    if child.is_leaf or child in inline:
      return None  # `render` prints the number, or the folded operation in parentheses
    return ex.format_number(shown[child])

  lines = []
  for node in ex.operations(root):
    args = [c.value if c.is_leaf else shown[c] for c in node.children]
    shown[node] = written.get(node, ex.apply_op(node.op, *args))
    if node not in inline:
      lines.append(f"{ex.render(node, operand_text)} = {ex.format_number(shown[node])}.")
  for after, text in sorted(extra, key=lambda e: e[0], reverse=True):
    lines.insert(after + 1, text)
  final = shown[root] if not root.is_leaf else root.value
  answer = f"Answer: {ex.format_number(final)}"
  return ([answer] if bare else lines + [answer]), shown


def canonical_solution(root: ex.Expr) -> str:
  """The canonical worked solution of a problem tree."""
  return steps_lib.join_steps(write_steps(root)[0])
