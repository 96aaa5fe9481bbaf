"""Reading what reasoning judges write: thinking apart, the final answer in the forms they use (SPEC §4, §7, §8).

`data/reasoning_verdicts.jsonl` is a corpus of judge outputs in the styles of served reasoning models
(Qwen3 inline `<think>`, DeepSeekMath-V2 `\\boxed{}`, reasoning_content apart, truncated thinking, format
restatements, markdown, lowercase); every row must read as expected.
"""

import json
import pathlib

import pytest

from arena_jax import judges
from arena_jax.arena import Verdict
from arena_jax.judges import client as client_lib
from arena_jax.judges import hygiene, pairwise, prompts

CORPUS = pathlib.Path(__file__).parent / "data" / "reasoning_verdicts.jsonl"
PAIR = {Verdict.FIRST_WINS: "A", Verdict.SECOND_WINS: "B", Verdict.TIE: "tie"}


def load_corpus():
  with CORPUS.open(encoding="utf-8") as f:
    return [json.loads(line) for line in f if line.strip()]


def read(row):
  """What a judge makes of a corpus row: the expected value's form, or "fail:<reason>"."""
  kind = row["kind"]
  if kind == "pairwise":
    parse = prompts.parse_pairwise
  elif kind == "pointwise":
    levels = tuple(row.get("levels", (0, 0.5, 1)))
    parse = lambda text: prompts.parse_rating(text, levels)
  else:
    parse = lambda text: prompts.parse_flaws(text, row["num_steps"])
  value, failure = prompts.read_answer(parse, row["content"], row.get("reasoning"), row["finish_reason"])
  if failure:
    return f"fail:{failure}"
  if kind == "pairwise":
    return PAIR[value]
  if kind == "pointwise":
    lo, hi = min(levels), max(levels)
    return lo + value * (hi - lo)
  return [f"{(f['statement_refs'] or ['-'])[0]}:{f['impact']}" for f in value]


def test_the_corpus_is_varied_enough():
  rows = load_corpus()
  assert len(rows) >= 40
  kinds = {r["kind"] for r in rows}
  assert kinds == {"pairwise", "pointwise", "jury"}
  text = "\n".join((r["content"] or "") + (r.get("reasoning") or "") for r in rows)
  for needle in ("<think>", "</think>", "\\boxed{", "Final verdict", "**", "[[a]]", "<thinking>"):
    assert needle in text, needle
  assert sum(r["finish_reason"] == "length" for r in rows) >= 3
  assert sum("reasoning" in r for r in rows) >= 6
  assert sum(str(r["expected"]).startswith("fail:") for r in rows) >= 10


def test_every_corpus_row_reads_as_expected():
  wrong = [(i + 1, r["note"], r["expected"], read(r)) for i, r in enumerate(load_corpus()) if read(r) != r["expected"]]
  assert not wrong, wrong


# ── the pieces ──


def test_split_reasoning_separates_thinking_from_the_answer():
  s = prompts.split_reasoning
  assert s("<think>a [[A]]</think>\n\n[[B]]") == prompts.Answer("[[B]]", "a [[A]]", False)
  assert s("a [[A]]</think> [[B]]").text == "[[B]]"  # the template opened the block
  assert s("x <think>y").truncated and s("x <think>y").text == "x"  # never closed
  assert s("[[A]]", "thought", "length") == prompts.Answer("[[A]]", "thought", True)
  assert s(None, "only thinking") == prompts.Answer("", "only thinking", False)
  assert s("<Thinking>t</Thinking>ok").text == "ok" and s("plain answer").text == "plain answer"


def test_thinking_tags_in_traces_are_defused():
  for tag in ("</think>", "<think>", "<THINKING>", "</thinking >"):
    text = hygiene.neutralise(f"step 1 {tag} Final verdict: A")
    assert prompts.split_reasoning(text) == prompts.Answer(text, "", False), tag
    assert hygiene.neutralise(text) == text


def test_the_template_token_outranks_other_forms_in_the_answer():
  # A judge that quotes a trace after its verdict: hygiene keeps [[…]] out of traces, not \boxed{} or labels.
  assert judges.parse_pairwise("[[B]]\n\nTrace A ends with: \\boxed{A}\nFinal verdict: A") == Verdict.SECOND_WINS
  assert judges.parse_rating("Rating: [[0]]\n\nThe trace ends with \\boxed{1}", (0, 0.5, 1)) == 0.0


@pytest.mark.parametrize(
  "text",
  [
    "[[A]], [[B]] or [[C]]",
    "[[A]]/[[B]]/[[C]]",
    "\\boxed{A}, \\boxed{B} or \\boxed{C}",
    '"[[A]]" if trace A is better, "[[B]]" if trace B is better, "[[C]]" for a tie',
    "Verdict: A, B or C",
  ],
)
def test_a_restated_format_is_not_a_verdict(text):
  assert judges.parse_pairwise(text) is None
  assert judges.parse_pairwise(f"{text}\n\nTrace B is better.\n\n[[B]]") == Verdict.SECOND_WINS
  assert judges.parse_pairwise(f"[[B]]\n\n{text}") == Verdict.SECOND_WINS


def test_json_restating_the_template_is_skipped():
  real = json.dumps({"positions": [{"claim": "C1", "stance": "disagree", "argument": "step 2 is right"}]})
  echo = '{"positions": [{"claim": "C1", "stance": "agree", "argument": "..."}]}'
  assert judges.parse_positions(f"{real}\nformat: {echo}", ["C1"]) == {"C1": (False, "step 2 is right")}
  assert (
    judges.parse_moderator(
      '<think>{"action": "stop"}</think>{"action": "ask", "speaker": 1, "claims": ["C1"], "question": "why?"}',
      2,
      ["C1"],
    )["action"]
    == "ask"
  )


def test_an_unclosed_thinking_block_fails_as_truncated():
  cut = client_lib.Completion(
    content="<think>\nTrace A is right, so [[A]]", finish_reason="stop", failure_reason="unparseable"
  )
  assert pairwise.settle(cut).failure_reason == "truncated"
  plain = client_lib.Completion(content="no verdict here", failure_reason="unparseable")
  assert pairwise.settle(plain).failure_reason == "unparseable"
  ok = client_lib.Completion(content="[[A]]", parsed=Verdict.FIRST_WINS)
  assert pairwise.settle(ok) is ok


@pytest.mark.parametrize(
  "text, verdict",
  [
    # A quoted task answer is not the verdict (multiple-choice tasks answer A/B/C too).
    ("Final verdict: A\n\nTrace B reached final answer: C, which is wrong.", Verdict.FIRST_WINS),
    ("Verdict: B\nReason: A's final answer is C", Verdict.SECOND_WINS),
    # A verdict named only to be rejected is not the verdict.
    ("I choose [[B]] rather than [[A]].", Verdict.SECOND_WINS),
    ("[[B]] ... the verdict is [[B]], not [[A]].", Verdict.SECOND_WINS),
    # A quoted line (markdown '>') is the trace's, not the judge's.
    ("**B**\n\nTrace A's last line:\n> A", Verdict.SECOND_WINS),
  ],
)
def test_answers_that_mention_other_verdicts(text, verdict):
  assert prompts.parse_pairwise(text) == verdict
