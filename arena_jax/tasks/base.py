"""The record every task shares, and the one error type bad data raises.

An `Example` is what a task stores (TFDS), what the prompt iterator yields and what verifiers and
judges receive. The schema is the same for every task so one TFDS feature spec, one iterator and one
judge prompt serve them all; task-specific fields are empty where they do not apply.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json

from arena_jax.errors import UserError


class DataError(UserError, ValueError):
  """Bad task data (a JSONL row, a field, an empty split, an encoding): raised before training starts."""


@dataclasses.dataclass(frozen=True)
class Example:
  """One problem.

  Attributes:
    uid: stable id, unique within a split (built-in tasks: a hash of the normalised problem).
    question: the problem statement, as it is put into the prompt template.
    answer: the reference final answer (what the judge is given, SPEC §4).
    solution: a canonical worked solution in the step format of `steps.py` ("" when unknown).
    expression: arithmetic: the problem expression; countdown: one reference solution expression.
    numbers: countdown: the numbers that may be used (each at most once); () elsewhere.
    extras: a JSON object as text, for what one kind of task needs and the others do not: a choice
      question's options, a code problem's tests, a row's `kind`, the extra keys of a user's row. The schema
      stays the same for every task (one TFDS feature, one iterator): a new task adds keys here, not fields.
  """

  uid: str
  question: str
  answer: str
  solution: str = ""
  expression: str = ""
  numbers: tuple[int, ...] = ()
  extras: str = ""

  @functools.cached_property
  def meta(self) -> dict:
    """`extras` parsed ({} when empty); read it, do not change it (the example is frozen)."""
    return json.loads(self.extras) if self.extras else {}


def dump_extras(extras: dict) -> str:
  """The `Example.extras` text of a dict: sorted keys, so that equal extras are equal text (and hash equal)."""
  return json.dumps(extras, sort_keys=True, ensure_ascii=False) if extras else ""


def stable_hash(text: str, length: int = 12) -> str:
  """A hex digest that is the same on every machine and Python run (unlike `hash`)."""
  return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def in_test_split(key: str, test_fraction: float) -> bool:
  """Hash-bucket assignment of a normalised problem to the test split.

  A problem's split depends only on its normalised form, never on the seed or the split sizes, so
  train and test are disjoint by construction, across seeds too, and growing one split never moves a
  problem into the other.
  """
  bucket = int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:8], 16) % 1_000_000
  return bucket < round(test_fraction * 1_000_000)


SPLITS = ("train", "test")


def unique_problems(draw, key, count: int, split: str, test_fraction: float, field: str):
  """Yields `count` distinct problems of `split` as (normalised key, problem).

  `draw()` returns a random problem (deterministic given its own seeded RNG); `key(problem)` its
  normalised form. A problem is kept if it hashes into `split` (see `in_test_split`) and was not
  kept before. Raises DataError, naming the config `field`, when the problem space is too small.
  """
  if split not in SPLITS:
    raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
  want_test = split == "test"
  share = test_fraction if want_test else 1.0 - test_fraction
  # Far more draws than a healthy problem space needs; hitting it means duplicates dominate.
  budget = int(20 * count / share) + 10_000
  seen: set[str] = set()
  for _ in range(budget):
    if len(seen) == count:
      return
    problem = draw()
    k = key(problem)
    if k in seen or in_test_split(k, test_fraction) != want_test:
      continue
    seen.add(k)
    yield k, problem
  if len(seen) < count:
    raise DataError(
      f"{field}: found only {len(seen)} distinct {split} problems of the {count} asked for; widen the "
      f"number or operand ranges, or lower {field}.num_{split}"
    )
