"""Reasoning Jury step segmentation and the canonical step format (SPEC §8).

SPEC §8 splits a trace into steps at an end of sentence followed by a blank line,
`(?<=[\\.\\!\\?])\\s*\\n\\s*\\n+`, and marks them `[STEP-1]`, `[STEP-2]`, …. The built-in tasks'
canonical format is designed so that this split yields exactly its steps: one equation per
paragraph, each ending with a period, and the final answer as its own last paragraph:

    7 + 5 = 12.

    12 * 3 = 36.

    36 - 4 = 32.

    Answer: 32

The process checker (`process.py`), the judges and the demonstrations all use `split_steps`, so a
step index means the same thing everywhere: step i (0-based) is `[STEP-{i+1}]`.
"""

from __future__ import annotations

import re
from typing import Sequence

STEP_SPLIT = re.compile(r"(?<=[\.\!\?])\s*\n\s*\n+")
_MARK = re.compile(r"^\s*\[STEP-\d+\]\s*")


def split_steps(trace: str) -> list[str]:
  """Splits a trace into steps at `(?<=[.!?])\\s*\\n\\s*\\n+` (SPEC §8); empty pieces are dropped."""
  return [s.strip() for s in STEP_SPLIT.split(trace) if s.strip()]


def step_ref(index: int) -> str:
  """The reference a juror uses for the 0-based step `index` ("STEP-3" for index 2)."""
  return f"STEP-{index + 1}"


def mark_steps(trace_or_steps: str | Sequence[str]) -> str:
  """The step-marked trace a juror sees: "[STEP-1] …\\n\\n[STEP-2] …" (SPEC §8)."""
  steps = split_steps(trace_or_steps) if isinstance(trace_or_steps, str) else list(trace_or_steps)
  return "\n\n".join(f"[{step_ref(i)}] {s}" for i, s in enumerate(steps))


def unmark(step: str) -> str:
  """A step without its leading `[STEP-x]` mark (so a marked trace can be checked as well)."""
  return _MARK.sub("", step)


def join_steps(steps: Sequence[str]) -> str:
  """Writes steps in the canonical layout: one paragraph each, separated by a blank line."""
  return "\n\n".join(steps)
