"""Countdown: reach a target from given numbers with + − × ÷, the out-of-distribution task.

`min_numbers..max_numbers` numbers in `[min_number, max_number]` are drawn; a random tree over all
of them (each operation drawn from those that keep an integer result in `[1, max_value]`, division
only when exact, no ×1 or ÷1) gives a target in `[min_target, max_target]` that is not itself one of the
numbers. The solution format is the arithmetic one, so a policy trained on arithmetic can be
evaluated here unchanged:

    Question: Use 3, 7, 25, 2 to make 46 with + - * /, each number at most once.
    Solution:
    25 - 3 = 22.

    22 * 2 = 44.

    ...

    Answer: 46

The reward is a valid derivation, not just the number: `Answer: 46` counts only if the steps reach
46 with every equation true and every number used at most once (or if the answer is an expression
over the given numbers that equals the target); see `process.check_countdown`.
The normalised form for de-duplication is (sorted numbers, target).
"""

from __future__ import annotations

import random
from typing import Iterator

from arena_jax.tasks import expressions as ex
from arena_jax.tasks import solutions
from arena_jax.tasks.base import Example, stable_hash, unique_problems

NAME = "countdown"


def _allowed(op: str, a, b, max_value: int) -> bool:
  if op in "*/" and b == 1:
    return False  # a step that changes nothing is not a move
  if op == "/" and (b == 0 or a % b):
    return False
  return 0 < ex.apply_op(op, a, b) <= max_value


def _random_tree(rng: random.Random, values: list[int], cfg) -> ex.Expr | None:
  if len(values) == 1:
    return ex.leaf(values[0])
  k = rng.randint(1, len(values) - 1)
  left = _random_tree(rng, values[:k], cfg)
  right = _random_tree(rng, values[k:], cfg)
  if left is None or right is None:
    return None
  ops = [op for op in cfg.operators if _allowed(op, left.value, right.value, cfg.max_value)]
  return ex.binary(rng.choice(ops), left, right) if ops else None


def random_problem(rng: random.Random, cfg) -> tuple[tuple[int, ...], ex.Expr]:
  """(numbers, a solution tree over all of them) with the target in range."""
  for _ in range(10_000):
    n = rng.randint(cfg.min_numbers, cfg.max_numbers)
    numbers = tuple(rng.randint(cfg.min_number, cfg.max_number) for _ in range(n))
    order = list(numbers)
    rng.shuffle(order)
    tree = _random_tree(rng, order, cfg)
    if tree is None:
      continue
    target = tree.value
    if cfg.min_target <= target <= cfg.max_target and target not in numbers:
      return numbers, tree
  raise ValueError("no countdown problem fits the target range; widen tasks.countdown.min/max_target")


def problem_key(problem) -> str:
  numbers, tree = problem
  return ",".join(map(str, sorted(numbers))) + "->" + ex.format_number(tree.value)


def make_example(numbers, tree: ex.Expr, key: str | None = None) -> Example:
  target = ex.format_number(tree.value)
  return Example(
    uid=f"{NAME}-{stable_hash(key or problem_key((numbers, tree)))}",
    question=f"Use {', '.join(map(str, numbers))} to make {target} with + - * /, each number at most once.",
    answer=target,
    solution=solutions.canonical_solution(tree),
    expression=ex.render(tree),
    numbers=tuple(int(n) for n in numbers),
  )


def problem_tree(example: Example) -> ex.Expr:
  """The reference solution tree of a countdown example."""
  return ex.parse(example.expression)


def generate(cfg, split: str, seed: int = 0) -> Iterator[Example]:
  """The `split` examples of a countdown config (`default_config().countdown`), in order."""
  rng = random.Random(f"arena_jax/{NAME}/{seed}/{split}")
  count = cfg.num_train if split == "train" else cfg.num_test
  for key, (numbers, tree) in unique_problems(
    lambda: random_problem(rng, cfg), problem_key, count, split, cfg.test_fraction, f"tasks.{NAME}"
  ):
    yield make_example(numbers, tree, key)
