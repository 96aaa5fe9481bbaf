"""A reasoning policy's thinking block, apart from its visible answer (SPEC §9: the judge reads the policy's
concise visible reasoning; the verifier reads the final answer after the thinking).

Reasoning models write their thinking in a block before the visible answer: `<think>…</think>` (Qwen3,
DeepSeek-R1), `[THINK]…[/THINK]` (Magistral, Ministral-3 reasoning) or `<thinking>…</thinking>`. When the
chat template opens the block in the prompt (Qwen3 with thinking on), the completion starts inside it and
only its closing tag appears: everything before a lone closing tag is thinking. A completion cut at the
token budget while thinking has an opening tag that is never closed: it has no visible answer
(`Thinking.unclosed`), which the verifier scores 0 and the trainer counts (`gen/unclosed_thinking`).

    split_thinking(text)          Thinking(visible, thinking, unclosed)
    trace_view(text, view)        what a judge is shown: "visible" (default), "full" or "summary_only"
"""

from __future__ import annotations

import dataclasses
import re

# Opening or closing tags of a thinking block; the second character is "/" for a closing one.
POLICY_THINK_TAGS = re.compile(r"<(/?)(?:think|thinking)\s*>|\[(/?)THINK\]", re.IGNORECASE)
TRACE_VIEWS = ("visible", "full", "summary_only")
# What a judge is shown for a completion that ended inside its thinking: no visible answer at all.
NO_VISIBLE_ANSWER = "(no visible answer: the response ended inside its thinking block)"
_PARAGRAPH = re.compile(r"\n[ \t]*\n\s*")


@dataclasses.dataclass(frozen=True)
class Thinking:
  """A completion split into its visible part and its thinking (`split_thinking`).

  visible: the text outside every thinking block, stripped.
  thinking: the blocks' contents, joined by blank lines.
  unclosed: a thinking block was opened and never closed (generation stopped while thinking).
  """

  visible: str
  thinking: str = ""
  unclosed: bool = False


def split_thinking(text: str | None, *, tags: re.Pattern = POLICY_THINK_TAGS) -> Thinking:
  """Separates the thinking blocks of `text` from the rest; linear in its length.

  Blocks may nest; a closing tag with no opening one makes everything before it thinking; an opening tag
  that is never closed makes everything after it thinking (`unclosed`). `tags` is a compiled pattern
  whose matches are the opening and closing tags (a closing tag's second character is "/").
  """
  text = text or ""
  visible: list[str] = []
  thought: list[str] = []
  depth, start = 0, 0
  for m in tags.finditer(text):
    if m.group(0)[1] != "/":
      if depth == 0:
        visible.append(text[start : m.start()])
        start = m.end()
      depth += 1
    elif depth:
      depth -= 1
      if depth == 0:
        thought.append(text[start : m.start()])
        start = m.end()
    else:
      thought.append("".join(visible) + text[start : m.start()])
      visible, start = [], m.end()
  (thought if depth else visible).append(text[start:])
  return Thinking("".join(visible).strip(), "\n\n".join(t.strip() for t in thought if t.strip()), bool(depth))


def trace_view(text: str, view: str = "visible") -> str:
  """What a judge is shown of a policy completion (`judge.trace_view`).

  "visible": the thinking removed, the policy's concise visible reasoning and answer (SPEC §9);
  "full": the completion as generated, thinking included; "summary_only": the last paragraph of the
  visible part (the conclusion that states the answer). A completion that ended inside its thinking
  shows `NO_VISIBLE_ANSWER` in the visible views.
  """
  if view == "full":
    return text
  if view not in TRACE_VIEWS:
    raise ValueError(f"trace view must be one of {TRACE_VIEWS}, got {view!r}")
  split = split_thinking(text)
  if not split.visible:
    return NO_VISIBLE_ANSWER if split.unclosed else ""
  if view == "summary_only":
    return [p for p in _PARAGRAPH.split(split.visible) if p.strip()][-1].strip()
  return split.visible
