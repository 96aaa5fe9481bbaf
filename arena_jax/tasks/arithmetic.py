"""Synthetic multi-step arithmetic: the in-distribution task of the embedded default.

A problem is a random expression tree with `min_ops..max_ops` operations on operands in
`[min_operand, max_operand]`, each operation drawn from those whose result stays an integer in
`[0, max_value]` (so every step of the solution is a small non-negative integer). It is printed with
minimal parentheses, e.g. `(7 + 5) * 3 - 4`; its canonical solution computes the operations in
post-order, one per step, and ends with `Answer: N`:

    Question: Compute (7 + 5) * 3 - 4.
    Solution:
    7 + 5 = 12.

    12 * 3 = 36.

    36 - 4 = 32.

    Answer: 32

Generation is deterministic given (seed, split); splits are disjoint by a hash of the normalised
expression (operands of + and * sorted), see `base.in_test_split`.
"""

from __future__ import annotations

import random
import types
from typing import Iterator

from arena_jax.tasks import expressions as ex
from arena_jax.tasks import solutions
from arena_jax.tasks.base import DataError, Example, stable_hash, unique_problems

NAME = "arithmetic"


def _allowed(op: str, a, b, max_value: int) -> bool:
  if op == "/" and b == 0:
    return False
  v = ex.apply_op(op, a, b)
  return v.denominator == 1 and 0 <= v <= max_value


def _random_tree(rng: random.Random, num_ops: int, cfg) -> ex.Expr | None:
  if num_ops == 0:
    return ex.leaf(rng.randint(cfg.min_operand, cfg.max_operand))
  k = rng.randint(0, num_ops - 1)
  left = _random_tree(rng, k, cfg)
  right = _random_tree(rng, num_ops - 1 - k, cfg)
  if left is None or right is None:
    return None
  ops = [op for op in cfg.operators if _allowed(op, left.value, right.value, cfg.max_value)]
  if not ops:
    return None
  return ex.binary(rng.choice(ops), left, right)


def random_problem(rng: random.Random, cfg) -> ex.Expr:
  """A random expression tree satisfying the config's constraints."""
  num_ops = rng.randint(cfg.min_ops, cfg.max_ops)
  for _ in range(1000):
    tree = _random_tree(rng, num_ops, cfg)
    if tree is not None:
      return tree
  raise ValueError(f"no {num_ops}-operation problem fits max_value={cfg.max_value}; raise it")


def make_example(tree: ex.Expr, key: str | None = None, name: str = NAME) -> Example:
  expression = ex.render(tree)
  return Example(
    uid=f"{name}-{stable_hash(key or ex.canonical_key(tree))}",
    question=f"Compute {expression}.",
    answer=ex.format_number(tree.value),
    solution=solutions.canonical_solution(tree),
    expression=expression,
  )


def problem_tree(example: Example) -> ex.Expr:
  """The tree an arithmetic example was generated from."""
  return ex.parse(example.expression)


def generate(cfg, split: str, seed: int = 0) -> Iterator[Example]:
  """The `split` examples of an arithmetic config (`default_config().arithmetic`), in order."""
  rng = random.Random(f"arena_jax/{NAME}/{seed}/{split}")
  count = cfg.num_train if split == "train" else cfg.num_test
  for key, tree in unique_problems(
    lambda: random_problem(rng, cfg), ex.canonical_key, count, split, cfg.test_fraction, f"tasks.{NAME}"
  ):
    yield make_example(tree, key)


# ─────────────────────── the shifted split: arithmetic outside the training distribution ───────────────────────

SHIFT_NAME = "arithmetic_shift"


def shifted_ranges(train_cfg, shift_cfg) -> dict:
  """The generator settings of the shifted problems: the training ranges (`tasks.arithmetic`) widened by
  the shift's `extra_*` and its own operators."""
  return dict(
    min_ops=train_cfg.min_ops,
    max_ops=train_cfg.max_ops + shift_cfg.extra_ops,
    min_operand=train_cfg.min_operand,
    max_operand=train_cfg.max_operand + shift_cfg.extra_operand,
    max_value=train_cfg.max_value + shift_cfg.extra_value,
    operators=shift_cfg.operators,
  )


def outside(tree: ex.Expr, train_cfg) -> bool:
  """Whether no training problem of `train_cfg` could be `tree`: it uses an operator the training problems
  lack, an operand or a value beyond their ranges, or more operations than they have."""
  ops = list(ex.operations(tree))
  return (
    any(n.op not in train_cfg.operators for n in ops)
    or len(ops) > train_cfg.max_ops
    or any(not train_cfg.min_operand <= leaf.value <= train_cfg.max_operand for leaf in ex.leaves(tree))
    or any(n.value > train_cfg.max_value for n in ops)
  )


def generate_shift(train_cfg, shift_cfg, split: str, seed: int = 0) -> Iterator[Example]:
  """The shifted problems (test split only): drawn from `shifted_ranges`, kept when `outside` the training
  distribution, each once."""
  if split != "test":
    return
  rng = random.Random(f"arena_jax/{SHIFT_NAME}/{seed}")
  ranges = types.SimpleNamespace(**shifted_ranges(train_cfg, shift_cfg))
  seen: set[str] = set()
  for _ in range(200 * shift_cfg.num_test + 10_000):
    if len(seen) == shift_cfg.num_test:
      return
    tree = random_problem(rng, ranges)
    key = ex.canonical_key(tree)
    if key not in seen and outside(tree, train_cfg):
      seen.add(key)
      yield make_example(tree, key, SHIFT_NAME)
  raise DataError(
    f"tasks.{SHIFT_NAME}: found only {len(seen)} of num_test={shift_cfg.num_test} problems outside "
    f"tasks.arithmetic's ranges; give operators one that tasks.arithmetic.operators lacks, or raise "
    f"an extra_* field"
  )
