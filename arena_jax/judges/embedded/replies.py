"""How the simulated judge writes what it decided: the `style` knob (`JudgeLogic.reply`).

`plain`: one short answer that ends in the template's format (`plain`, `plain_reply`). `reasoning`: the
answer of a served reasoning LLM (`reasoned`) — thinking that names verdicts it does not give, drafts
JSON and restates the format, in `reasoning_content` or inline in `<think>`, then the verdict in one of
the forms such models write, a share `truncate_rate` cut mid-thought. The verdicts are the same; only the
cut answers lose theirs (SPEC §4: a failure, dropped). Either style can be `malformed` (an answer with
nothing to parse, as a flaky judge gives) and is cut at the request's max_tokens, as a server cuts it.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, Callable, Sequence

from arena_jax.judges import hygiene

UNKNOWN = "I can only judge prompts written with arena_jax's judge templates."
_TOKEN_PIECE = hygiene.TOKEN_PIECE  # hygiene.count_tokens's tokens


@dataclasses.dataclass(frozen=True)
class Reply:
  """One answer as the server sends it. `reasoning` becomes `message.reasoning_content` (None: absent);
  `content` None is an answer that never came (thinking cut short behind a reasoning parser)."""

  kind: str
  content: str | None
  reasoning: str | None = None
  finish_reason: str = "stop"
  top_logprobs: tuple[tuple[str, float], ...] = ()  # the first token's alternatives, for a `logprobs` request


@dataclasses.dataclass(frozen=True)
class Judgment:
  """What the judge decided and why, before it is written in a style.

  notes: the findings (a plain answer's explanation; the core of a reasoning answer's thinking).
  final: the verdict — pairwise "A" | "B" | "C", pointwise the level, else the JSON object.
  conclusion: one line that states the verdict in words; hidden: the plain style's reasoning_content.
  options: the verdicts it could give (a reasoning answer's thinking weighs one it does not give).
  """

  notes: str
  final: Any
  conclusion: str = ""
  hidden: str = ""
  options: tuple = ()
  p_first: float | None = None  # the letter kinds: the probability of the first label (A, Yes)
  margin: float = 0.0  # pairwise: how much sounder A is than B, as the judge weighs it (> 0: A)


def cut_tokens(text: str, max_tokens: int) -> str:
  """`text` cut after its first `max_tokens` tokens (`hygiene.count_tokens`), as a server cuts at max_tokens."""
  pieces = list(_TOKEN_PIECE.finditer(text))
  return text[: pieces[max_tokens - 1].end()] if 0 < max_tokens <= len(pieces) else text


def malformed_answer(kind: str) -> str:
  """An answer a flaky judge might give: it looks fine but has nothing to parse."""
  if kind in ("juror", "consolidation", "synthesis"):
    return 'After careful review: {"flaws": [{"what_went_wrong": "the step'
  if kind == "debate":
    return 'My position: {"positions": [{"claim": '
  if kind == "moderator":
    return "Let us continue the discussion with the next juror."
  return "Both traces have their merits; it is hard to say which one is better."


# ───────────────────────────────────────── the plain style ─────────────────────────────────────────


def plain(kind: str, j: Judgment, *, verdict_first: bool) -> str:
  """One short answer: the findings, then the verdict in the template's format (`verdict_first`: a
  pairwise verdict before its explanation)."""
  if kind == "pairwise":
    explanation = f"{j.notes}\n{j.conclusion}"
    return f"Verdict: [[{j.final}]]\n\n{explanation}" if verdict_first else f"{explanation}\n\n[[{j.final}]]"
  if kind == "pointwise":
    return f"{j.notes}\n\nRating: [[{j.final:g}]]"
  answer = json.dumps(j.final, ensure_ascii=False)
  if kind == "juror":
    return f"{j.notes}\n\n```json\n{answer}\n```"
  return f"{j.notes}\n\n{answer}" if kind == "consolidation" else answer


def plain_reply(
  kind: str, j: Judgment | None, *, malformed: bool, verdict_first: bool, emit_reasoning: bool, max_tokens: int | None
) -> Reply:
  """The plain style's whole answer (`j` None: the prompt is not one of the project's templates); its
  reasoning_content is the judgment's `hidden` line when `emit_reasoning`, else absent."""
  if j is None:
    content = UNKNOWN
  else:
    content = malformed_answer(kind) if malformed else plain(kind, j, verdict_first=verdict_first)
  reasoning = (j.hidden if j is not None else "") if emit_reasoning else None
  if max_tokens and hygiene.count_tokens(content) > max_tokens:
    return Reply(kind, cut_tokens(content, max_tokens), reasoning, "length")
  return Reply(kind, content, reasoning)


# ───────────────────────────────────────── the reasoning style ─────────────────────────────────────────
# What a thinking judge writes around the verdict: its thinking names a verdict it will not give, drafts
# JSON it then corrects and restates the format; its final answer takes one of the forms reasoning
# models use. Only the final answer carries the verdict (`prompts.split_reasoning`).


def reasoned(
  kind: str, j: Judgment, draw: Callable[[str], float], *, malformed: bool, truncate_rate: float, max_tokens: int | None
) -> Reply:
  """The answer of a served reasoning LLM (`style = "reasoning"`; docs/judges.md).

  Its thinking weighs a verdict it does not give, drafts and restates the format; then comes the final
  answer, in a form drawn by `draw` (a uniform draw in [0, 1) per tag, keyed by the request). The thinking
  arrives in `reasoning_content` (a vLLM / SGLang reasoning parser), inline in `<think>…</think>`, or
  inline after a template-opened block (only `</think>`). At `truncate_rate` the model stops mid-thought,
  as when it runs out of max_tokens.
  """
  thinking = _thinking(kind, j, draw)
  final = malformed_answer(kind) if malformed else _final_answer(kind, j, draw)
  placement = draw("placement")
  # What the model generates; with a reasoning parser or a template-opened block, `<think>` is in the prompt.
  opener = "<think>\n" if 0.5 <= placement < 0.75 else ""
  raw, finish = f"{opener}{thinking}\n</think>\n\n{final}", "stop"
  if draw("truncate") < truncate_rate:
    kept = max(1, int(hygiene.count_tokens(thinking) * (0.2 + 0.6 * draw("cut"))))
    raw, finish = opener + cut_tokens(thinking, kept), "length"
  elif max_tokens and hygiene.count_tokens(raw) > max_tokens:
    raw, finish = cut_tokens(raw, max_tokens), "length"
  if placement < 0.5:  # a reasoning parser splits the thinking off; no answer yet when it never closed
    thought, closed, answer = raw.partition("</think>")
    return Reply(kind, answer.strip() if closed else None, thought.strip(), finish)
  return Reply(kind, raw, None, finish)


_FORMATS = {
  "juror": '{"flaws": [{"what_went_wrong": "...", "statement_refs": ["STEP-k"], "impact": "...", '
  '"evidence": "...", "specificity": 5}]}',
  "consolidation": '{"flaws": [{"what_went_wrong": "...", "statement_refs": ["STEP-k"], "impact": "...", '
  '"evidence": "...", "jurors": [1, 2]}]}',
  "synthesis": '{"flaws": [{"what_went_wrong": "...", "statement_refs": ["STEP-k"], "impact": "...", '
  '"evidence": "...", "jurors": [1, 3]}]}',
  "debate": '{"positions": [{"claim": "C1", "stance": "agree", "argument": "..."}]}',
  "moderator": '{"action": "ask", "speaker": 2, "claims": ["C1", "C3"], "question": "..."} or {"action": "stop"}',
}
_TIE_WORDS = {"A": ("A", "A"), "B": ("B", "B"), "C": ("tie", "Tie")}


def _pick(options: Sequence, u: float):
  return options[min(int(u * len(options)), len(options) - 1)]


def _decoy(j: Judgment, u: float):
  """A verdict the judge weighs in its thinking but does not give."""
  others = [o for o in j.options if o != j.final]
  return _pick(others, u) if others else j.final


def _draft(kind: str, final: dict) -> dict:
  """A first draft of a JSON answer that the thinking then corrects (it differs from the final one)."""
  if kind == "debate":
    flip = {"agree": "disagree", "disagree": "agree"}
    return {
      "positions": [{**p, "stance": flip.get(p.get("stance"), "agree")} for p in final["positions"]]
      or [{"claim": "C1", "stance": "agree", "argument": "at first sight the claim holds"}]
    }
  if kind == "moderator":
    return (
      {"action": "ask", "speaker": 1, "claims": ["C1"], "question": "Is C1 right?"}
      if final.get("action") == "stop"
      else {"action": "stop"}
    )
  if final.get("flaws"):
    return {"flaws": []}
  return {
    "flaws": [
      {
        "what_went_wrong": "the first step looks unjustified",
        "statement_refs": ["STEP-1"],
        "impact": "major",
        "evidence": "",
        "specificity": 4,
      }
    ]
  }


def _thinking(kind: str, j: Judgment, draw: Callable[[str], float]) -> str:
  """The thinking before the final answer (module comment above)."""
  if kind == "pairwise":
    decoy = _decoy(j, draw("decoy"))
    opening = _pick(
      (
        "The verdict goes on the last line as [[A]], [[B]] or [[C]]. Let me check both traces step by step.",
        'Format: "[[A]]" if trace A is better, "[[B]]" if trace B is better, "[[C]]" for a tie. First the steps.',
        "Which is better, A or B, or is it a tie? Let me go through the steps before deciding.",
      ),
      draw("opening"),
    )
    doubt = _pick(
      (
        f"At first glance [[{decoy}]] looked right, but the step check says otherwise.",
        f"Final verdict: {_TIE_WORDS[decoy][0]}? No, not after counting the flawed steps.",
        f"I almost wrote \\boxed{{{decoy}}}, but that ignores what the checks found.",
      ),
      draw("doubt"),
    )
    return "\n\n".join((opening, j.notes, j.hidden, doubt, f"So: {j.conclusion}"))
  if kind == "pointwise":
    levels = ", ".join(f"[[{v:g}]]" for v in j.options)
    doubt = f"Rating: [[{_decoy(j, draw('decoy')):g}]] crossed my mind, but it does not fit what I found."
    return "\n\n".join(
      (
        f"The rubric offers {levels}; the last line must read Rating: [[level]].",
        j.notes,
        doubt,
        f"The level that fits is {j.final:g}.",
      )
    )
  draft = json.dumps(_draft(kind, j.final), ensure_ascii=False)
  return "\n\n".join(
    (
      f"The answer must end with one JSON object: {_FORMATS[kind]}",
      j.notes,
      f"First draft: {draft}",
      "No — let me check that draft against the steps again.",
    )
  )


def _final_answer(kind: str, j: Judgment, draw: Callable[[str], float]) -> str:
  """The final answer after the thinking, in a form drawn from the request seed."""
  form = draw("form")
  if kind == "pairwise":
    word, bold = _TIE_WORDS[j.final]
    verdict = _pick((f"[[{j.final}]]", f"\\boxed{{{j.final}}}", f"Final verdict: {word}", f"**{bold}**"), form)
    restated = "As asked, the verdict is one of [[A]], [[B]] or [[C]].\n\n" if draw("restate") < 0.25 else ""
    return f"{restated}{j.conclusion}\n\n{verdict}"
  if kind == "pointwise":
    return _pick(
      (f"Rating: [[{j.final:g}]]", f"\\boxed{{{j.final:g}}}", f"**Rating:** {j.final:g}", f"Final score: {j.final:g}"),
      form,
    )
  answer = json.dumps(j.final, ensure_ascii=False)
  return f"{j.notes}\n\n```json\n{answer}\n```" if form < 0.5 else answer


def letter_reply(kind: str, j: Judgment, max_tokens: int | None) -> Reply:
  """A letter template's answer (`formats`): the label alone, and its first token's alternatives — the two
  labels with the judgment's probabilities — for a request that asks for logprobs."""
  first, second = j.options
  p = min(max(float(j.p_first), 1e-6), 1 - 1e-6)
  alternatives = ((first, math.log(p)), (second, math.log(1 - p)))
  finish = "length" if max_tokens == 1 else "stop"  # one token asked for, one given: cut there
  return Reply(kind, j.final, None, finish, tuple(sorted(alternatives, key=lambda a: -a[1])))
