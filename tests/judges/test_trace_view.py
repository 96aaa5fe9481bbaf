"""`judge.trace_view`: what the pairwise, pointwise and jury judges are shown of a reasoning policy's
completion (SPEC §9: its concise visible reasoning by default)."""

import asyncio
import json

import pytest

from arena_jax import judges, tasks

from tests.judges.conftest import fast_config

THOUGHT = "secret scratch work 7 * 8 = 54"
TRACE = f"<think>{THOUGHT}</think>\n3 + 4 = 7.\n\nSo 7 * 2 = 14.\n\nAnswer: 14"


class Recording:
  """A client that records the user prompt and answers with a fixed, parseable reply."""

  def __init__(self, reply):
    self.reply, self.prompts = reply, []

  async def chat(self, messages, *, parse, **kw):
    self.prompts.append("\n".join(m["content"] for m in messages))
    return judges.Completion(content=self.reply, parsed=parse(self.reply))

  async def close(self):
    pass


@pytest.mark.parametrize(
  "view, shown, hidden",
  [
    ("visible", ["So 7 * 2 = 14.", "3 + 4 = 7."], [THOUGHT]),
    ("full", [THOUGHT, "So 7 * 2 = 14."], []),
    ("summary_only", ["Answer: 14"], [THOUGHT, "3 + 4 = 7."]),
  ],
)
def test_each_judge_sees_the_configured_view(view, shown, hidden):
  cfg = fast_config()
  cfg.trace_view = view
  pair, rubric = Recording("[[A]]"), Recording("Rating: [[1]]")
  jury_client = Recording(json.dumps({"flaws": []}))

  async def main():
    await judges.PairwiseJudge(pair, cfg).compare("Compute 3 + 4, times 2.", "14", TRACE, "Answer: 14")
    await judges.PointwiseJudge(rubric, cfg).score("Compute 3 + 4, times 2.", "14", TRACE)
    await judges.Jury([jury_client], cfg, mode="vote").audit("Compute 3 + 4, times 2.", TRACE, "14")

  asyncio.run(main())
  for prompt in pair.prompts + rubric.prompts + jury_client.prompts:
    assert all(s in prompt for s in shown), (view, prompt)
    assert not any(s in prompt for s in hidden), (view, prompt)


def test_a_completion_cut_while_thinking_is_shown_as_having_no_answer():
  cfg = fast_config()
  rubric = Recording("Rating: [[0]]")
  asyncio.run(judges.PointwiseJudge(rubric, cfg).score("p", "14", f"<think>{THOUGHT} and so"))
  assert tasks.NO_VISIBLE_ANSWER in rubric.prompts[0] and THOUGHT not in rubric.prompts[0]
