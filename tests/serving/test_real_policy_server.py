"""The policy server on the real model (SmolLM2-135M-Instruct, the GGUF of `make real-model`): served from its GGUF,
answering the official `openai` client, and judging a small Arena-Live job for this project's own judge client (issue
44: the policy as a judge)."""

import pytest

import configs
from arena_jax import serving
from arena_jax.train import read_metrics, read_transcripts, train

openai = pytest.importorskip("openai", reason="the `serve` extra: pip install -e '.[serve]'")


# Minutes: one RL step of the real model whose judged groups a 135M judge reads at ~500 prompt tokens a call on 2
# cores (each new batch shape compiles first).
@pytest.mark.slow
def test_the_real_model_serves_chats_and_judges_an_arena_live_job(real_gguf, tmp_path):
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

    # The same model as the judge of a small Arena-Live run of itself, read by its log-probs of A and B (a server
    # that ignores `logprobs`, as `transformers serve` does, is refused at start-up: `judges.check_logprobs`).
    c = configs.get_config("configs/real_smollm2.py", "smoke,llm_judge")
    c.num_steps = 1
    c.rollout.max_new_tokens = 24  # short answers: most groups end all wrong, reward-non-diverse, and are judged
    c.judge.urls = (server.url,)
    c.judge.model = "smollm2"
    c.judge.verdict_format = "logprobs"
    c.judge.transcripts = 1.0
    summary = train(c, str(tmp_path))
    assert summary["steps"] == 1
    batches = server.engine.stats["batch_sizes"]

  assert sum(r.get("judge/groups", 0) for r in read_metrics(str(tmp_path))) >= 1
  calls = list(read_transcripts(str(tmp_path)))
  answered = [r for r in calls if r["failure_reason"] is None]
  assert answered, [(r["failure_reason"], r["failure_detail"]) for r in calls]
  # Soft verdicts from the served log-probs: a probability of the first trace, not only 0 / ½ / 1.
  assert any(r["top_logprobs"] for r in answered)
  # The judge's concurrent requests were batched into shared sampler calls.
  assert max(int(k) for k in batches) >= 2, batches
