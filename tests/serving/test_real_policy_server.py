"""The policy server on the real model (SmolLM2-135M-Instruct, the GGUF of `make real-model`): served from its GGUF,
answering the official `openai` client, and judging a small Arena-Live job for this project's own judge client (issue
44: the policy as a judge)."""

import pytest

from arena_jax import serving
from arena_jax.train import read_metrics, read_transcripts, train
from tests.train.conftest import smoke_config

openai = pytest.importorskip("openai", reason="the `serve` extra: pip install -e '.[serve]'")


@pytest.mark.heavy  # the real model's compiles; the policy it judges is the tiny smoke one (light on memory)
def test_the_real_model_serves_chats_and_judges_an_arena_live_job(
  real_gguf, one_real_model_run, data_dir, coin_verifier, tmp_path
):
  del real_gguf
  policy = serving.load_served_policy("pretrained:smollm2-135m-instruct", name="smollm2")
  assert policy.has_chat_template and policy.context == 8192
  with serving.PolicyServer(policy) as server:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=600)
    r = client.chat.completions.create(
      model="smollm2",
      messages=[{"role": "user", "content": "What is the capital of France?"}],
      max_tokens=16,
      temperature=0,
    )
    assert "Paris" in r.choices[0].message.content  # the real model's own answer, through its own chat template

    # The served model as the judge of a small Arena-Live run (the smoke policy: a random tiny one, so that this
    # test holds one real model in memory, not two), read by its log-probs of A and B (a server that ignores
    # `logprobs`, as `transformers serve` does, is refused at start-up: `judges.check_logprobs`).
    c = smoke_config("arena_live", data_dir)
    c.num_steps = 2
    c.judge.urls = (server.url,)
    c.judge.model = "smollm2"
    c.judge.verdict_format = "logprobs"
    c.judge.debias = "both"
    c.judge.transcripts = 1.0
    summary = train(c, str(tmp_path))
    assert summary["steps"] == 2
    batches = server.engine.stats["batch_sizes"]

  assert sum(r.get("judge/groups", 0) for r in read_metrics(str(tmp_path))) >= 1
  calls = list(read_transcripts(str(tmp_path)))
  answered = [r for r in calls if r["failure_reason"] is None]
  assert answered, [(r["failure_reason"], r["failure_detail"]) for r in calls]
  # Soft verdicts from the served log-probs: a probability of the first trace, not only 0 / ½ / 1.
  assert any(r["top_logprobs"] for r in answered)
  # The judge's concurrent requests were batched into shared sampler calls.
  assert max(int(k) for k in batches) >= 2, batches
