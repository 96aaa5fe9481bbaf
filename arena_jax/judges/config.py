"""Judge configuration: `default_config()`, `server_config()` and their up-front validation (SPEC §4, §7, §8).

One `ml_collections.ConfigDict` carries everything a judge needs: where it is (OpenAI-compatible
base URLs, or none for the embedded server), how the client talks to it (timeouts, retries,
concurrency, cache), what it is asked (backend, templates, token budget, sampling), how verdicts
become rewards (soft margin m, order debiasing) and, for the embedded server, its simulated
behaviour (noise, position bias, latency, faults, juror errors).

Every field is declared once below (`JUDGE`, and `SERVER` for the embedded server; see
`arena_jax.config_schema`): its default, its valid values and its meaning. `validate_config` checks
every field once, before anything starts, and names the field to change.
"""

from __future__ import annotations

from typing import Callable

import ml_collections

from arena_jax import config_schema as cs
from arena_jax.registry import Registry
from arena_jax.config_schema import field
from arena_jax.judges.client import EXTRA_BODY_CHECK
from arena_jax.judges.client import split_urls
from arena_jax.judges.formats import VERDICT_FORMATS
from arena_jax.judges.tokens import TOKENIZER_CHOICES, check_tokenizer
from arena_jax.tasks import IMPACTS, TRACE_VIEWS

# Judge factories `(config, urls) -> judge` by name; `judges.backends` registers them (`@register_backend`).
BACKENDS: Registry[Callable] = Registry("judge backend")
DEBIAS_MODES = ("none", "random", "both")
SERVERS = ("embedded", "transformers")  # the judge servers a run can start (`backends.launched_judge_endpoints`)
JURY_MODES = ("consolidation", "deliberation", "vote")
LATENCY_DISTS = ("fixed", "exponential", "lognormal")
REPLY_STYLES = ("plain", "reasoning")
# The hostile answers the embedded judge can send (`judges/embedded/hostile.py` serves them); named here, where the
# config checks `server.hostile_kinds`, so that the config does not import the embedded server.
HOSTILE_KINDS = ("wrong_types", "bad_retry_after", "huge", "bomb", "deep")
DEFAULT_MODEL = "arena-judge"


def _rate(meaning: str) -> cs.Field:
  return field(0.0, meaning, cs.number(0, 1))


def _is_http_error_codes(v) -> bool:
  return (
    bool(v)
    and not isinstance(v, str)
    and all(isinstance(x, int) and not isinstance(x, bool) and 400 <= x <= 599 for x in v)
  )


# The embedded judge server (`launch/serve_judge.py --server.<knob>`, `judges.EmbeddedJudgeServer`). Pairwise
# judging: A beats B when its penalty (invalid + irrelevant steps, skipped operations, a wrong answer) is lower.
SERVER = cs.Section(
  dict(
    host=field("127.0.0.1", "Interface to bind; loopback unless deliberately widened.", cs.string(nonempty=True)),
    port=field(0, "TCP port; 0 = any free port (announced on stdout when ready).", cs.integer(0, 65535)),
    model=field(
      DEFAULT_MODEL, "The one model id it serves (`/v1/models`); other ids get 404.", cs.string(nonempty=True)
    ),
    api_key_env=field(
      "", "Name of an environment variable holding the key clients must send; \"\" = open.", cs.string()
    ),
    max_request_bytes=field(4 << 20, "Larger request bodies get HTTP 413.", cs.integer(1024)),
    tokenizer=field(
      "",
      "What counts prompt tokens, for `usage`, `POST /tokenize` and `max_model_len`: \"\" = the estimate "
      "(`hygiene.count_tokens`); a tokenizer path (as `judge.tokenizer`'s) = a request as its chat template "
      "renders it (its contents joined by blank lines without one).",
      cs.Check(
        '"" or a tokenizer path', lambda v: "must be \"\" or a tokenizer path" if v == "server" else check_tokenizer(v)
      ),
    ),
    max_model_len=field(
      0,
      "The context, as vLLM's `--max-model-len`: a request whose prompt tokens + max_tokens exceed it "
      "gets HTTP 400; `/tokenize` reports it. 0 = no limit.",
      cs.integer(0),
    ),
    seed=field(0, "Decorrelates servers; verdict noise is keyed by (seed, request seed, content).", cs.integer(0)),
    noise=field(0.0, "Scale of the logistic noise on the penalty difference, in steps.", cs.number(0)),
    flip_rate=field(
      0.0,
      "Share of decisive pairwise verdicts ([[A]] / [[B]]) between traces of different penalties "
      "that are reversed, so the worse trace wins; drawn, like the noise, from (seed, request seed, "
      "content). With `noise` 0 and no position bias, the judge's verdict accuracy on pairs that "
      "differ in process is 1 − flip_rate (ties stay ties): the knob of the study's judge-quality "
      "ablation (`study.judge_accuracies`, docs/results). Pointwise and juror answers ignore it.",
      cs.number(0, 1),
    ),
    position_bias=field(0.0, "Added in favour of the trace shown first (A), in steps.", cs.number()),
    tie_band=field(0.5, "A |penalty difference| ≤ tie_band is a tie `[[C]]`.", cs.number(0)),
    skip_weight=field(0.5, "Penalty per operation done without being shown.", cs.number(0)),
    answer_weight=field(1.0, "Penalty for a wrong or missing final answer.", cs.number(0)),
    verdict_first=field(False, "State the verdict before the evidence (as some judges do).", cs.boolean()),
    emit_reasoning=field(False, "Also return `reasoning_content`, like a vLLM reasoning parser.", cs.boolean()),
    logprobs=field(
      True,
      "Answer a request's `logprobs` / `top_logprobs` (the letter templates' labels, `judge.verdict_format = "
      "logprobs`), as vLLM, llama.cpp's server and hosted APIs do; False ignores them, as `transformers serve` does.",
      cs.boolean(),
    ),
    # How the answers read (docs/judges.md, "The embedded judge"); the verdicts are the same in both styles.
    style=field(
      "plain",
      "`plain`: one short answer ending in the verdict. `reasoning`: like a served reasoning "
      "LLM (DeepSeekMath-V2, Qwen3) — thinking that weighs both verdicts and restates the format, in "
      "`reasoning_content` or inline in `<think>`, then the verdict as `[[A]]`, `\\boxed{A}`, "
      "`Final verdict: A` or `**A**` (chosen by the request seed); `emit_reasoning` and "
      "`verdict_first` do not apply.",
      cs.one_of(REPLY_STYLES),
    ),
    truncate_rate=field(
      0.02,
      "`reasoning` style: share of answers cut mid-thought with finish_reason `length` "
      "(drawn from the request seed: a retry with the next seed may finish).",
      cs.number(0, 1),
    ),
    # Latency of every answer, the judging included (so 100 ms = 100 ms at any load).
    latency_ms=field(0.0, "Mean time to answer, the judging included.", cs.number(0)),
    latency_dist=field("fixed", "Distribution of the latency.", cs.one_of(LATENCY_DISTS)),
    latency_sigma=field(0.5, "Shape of the lognormal latency.", cs.number(0)),
    # A served LLM's latency: a heavy tail, growth with the tokens read and written, and a bounded
    # number of requests decoded at once (vLLM / SGLang batch slots) so that load shows as queueing.
    latency_p99_ms=field(
      0.0,
      "> 0: the latency is lognormal with median `latency_ms` and this 99th percentile "
      "(`latency_dist` and `latency_sigma` then do not apply); 0 = off.",
      cs.number(0),
      valid="0 or ≥ latency_ms",
    ),
    latency_ms_per_prompt_token=field(0.0, "Added to each answer's latency per prompt token (prefill).", cs.number(0)),
    latency_ms_per_completion_token=field(
      0.0, "Added to each answer's latency per completion token, thinking included (decoding).", cs.number(0)
    ),
    slots=field(
      0,
      "Requests answered at once; more wait in a FIFO queue for a free slot and their latency starts "
      "when they get one (`/stats`: queued, max_queued, queue_wait_s). 0 = unbounded.",
      cs.integer(0),
    ),
    # Fault injection: probabilities per request.
    error_rate=_rate("Share of requests answered with an HTTP error from `error_statuses`."),
    error_statuses=field(
      (500, 503, 429),
      "The injected errors.",
      cs.satisfies("non-empty tuple of 4xx / 5xx codes", _is_http_error_codes, "a non-empty tuple of HTTP error codes"),
    ),
    retry_after_s=field(0.0, "Retry-After sent with 429 / 503; 0 = none.", cs.number(0)),
    hang_rate=_rate("Share of requests that sleep `hang_s` before answering."),
    hang_s=field(30.0, "Length of a hang (clients should time out).", cs.number(0)),
    disconnect_rate=_rate("Share of requests whose connection is dropped without an answer."),
    bad_body_rate=_rate("Share of HTTP 200 answers whose body is not JSON."),
    malformed_rate=_rate("Share of well-formed completions with no parseable verdict."),
    # Hostile answers (`judges/embedded/hostile.py`): what a judge could send to break its client rather than fail.
    hostile_rate=_rate("Share of requests answered with a hostile answer drawn from `hostile_kinds`."),
    hostile_kinds=field(
      HOSTILE_KINDS,
      "The hostile answers: fields of the wrong type, unusable Retry-After, "
      "huge answers, decompression bombs, JSON nested 100,000 deep.",
      cs.satisfies(
        f"non-empty tuple of {HOSTILE_KINDS}",
        lambda v: bool(v) and not isinstance(v, str) and all(k in HOSTILE_KINDS for k in v),
        f"a non-empty tuple of {HOSTILE_KINDS}",
      ),
    ),
    hostile_bytes=field(16 << 20, "Size of a `huge` answer and of a `bomb` once inflated.", cs.integer(1)),
    # Serving: judging runs in a worker pool, off the event loop that answers /health and reads requests.
    workers=field(4, "Threads that judge requests (the event loop only reads, validates and answers).", cs.integer(1)),
    read_timeout_s=field(
      30.0,
      "A request whose body has not arrived within this gets HTTP 408; a connection "
      "without a whole request line and headers (or idle) for this long is closed.",
      cs.number(0, lo_open=True),
    ),
    # Juror mode (Reasoning Jury, SPEC §8): errors per juror, decorrelated by the request seed.
    miss_rate=_rate("Juror mode: probability that a real flaw is not reported."),
    false_alarm_rate=_rate("Juror mode: probability that a clean step is reported as flawed."),
    debate_miss_rate=_rate("Deliberation / consolidation review: a real flaw is not confirmed."),
    debate_false_alarm_rate=_rate("Deliberation / consolidation review: a false claim is confirmed."),
  ),
  title="the embedded judge server (`launch/serve_judge.py --server.<knob>`)",
)

CLIENT = cs.Section(
  dict(
    concurrency=field(64, "In-flight requests per endpoint.", cs.integer(1)),
    deadline_s=field(
      600.0,
      "One judgment's limit, all its attempts, retries and backoff sleeps together, from "
      "its first request (waiting behind other judgments for a free slot is not counted): a slow "
      "judge costs a step at most this. Each attempt's limit is clipped to the time left; a "
      "judgment that runs out fails with reason `deadline`.",
      cs.number(0, lo_open=True),
    ),
    timeout_s=field(
      600.0,
      "Limit of one attempt, the whole request, clipped to what is left of `deadline_s`. As "
      "long as the deadline by default: a reasoning judge may think for minutes, and an attempt cut "
      "short is paid again in full; lower it to retry a hung endpoint elsewhere sooner.",
      cs.number(0, lo_open=True),
    ),
    connect_timeout_s=field(10.0, "Limit of connecting.", cs.number(0, lo_open=True)),
    max_retries=field(
      4,
      "Transport retries of one judgment: connection errors, timeouts, HTTP 408 / 409 / 429 "
      "and 5xx, a 200 that is not a completion.",
      cs.integer(0),
    ),
    max_parse_retries=field(
      2, "Fresh requests (with the next seed) of one judgment when an answer has no parseable verdict.", cs.integer(0)
    ),
    max_truncation_retries=field(
      0,
      "Fresh requests (with the next seed) of one judgment when an answer was cut "
      "at `max_tokens` (reason `truncated`). 0 by default: a judge that thinks past "
      "its budget usually does so again, at the same cost.",
      cs.integer(0),
    ),
    backoff_initial_s=field(
      0.5, "Exponential backoff: initial · 2^k, capped, minus up to `jitter` of it.", cs.number(0)
    ),
    backoff_max_s=field(8.0, "The backoff cap.", cs.number(0), valid="≥ backoff_initial_s"),
    jitter=field(0.25, "Share of a backoff that is randomly taken off.", cs.number(0, 1)),
    max_retry_after_s=field(
      60.0, "A server's Retry-After is honoured up to this; a longer one is a final failure.", cs.number(0)
    ),
    failures_before_cooldown=field(
      3, "Consecutive failures that take an endpoint out of rotation (while another one is healthy) ...", cs.integer(1)
    ),
    cooldown_s=field(5.0, "... for this long.", cs.number(0)),
    startup_check_s=field(
      10.0,
      "Every configured URL must answer `GET /v1/models` with a model list (naming "
      "`model`, when it names any) within this before training starts; 0 = skip the check.",
      cs.number(0),
    ),
    max_response_bytes=field(
      8 << 20,
      "Largest answer read, on the wire and after decompression; a larger one "
      "(or a compressed one that inflates past it) is a failed attempt, `bad_response`. "
      "A reasoning judge's 16k-token answer is ~100 KB.",
      cs.integer(1024),
    ),
    cache_dir=field("", "On-disk answer cache keyed by the request; \"\" = off.", cs.string()),
  ),
  title="how requests are sent",
)

SEVERITY_WEIGHTS = cs.Section(
  dict(
    neutral=field(0.0, "Weight of a neutral flaw in the jury's pointwise score max(0, 1 − Σ weights).", cs.number(0)),
    minor=field(0.1, "Weight of a minor flaw.", cs.number(0)),
    major=field(0.4, "Weight of a major flaw.", cs.number(0)),
    fatal=field(1.0, "Weight of a fatal flaw.", cs.number(0)),
  ),
  exact="impacts",
)
assert tuple(SEVERITY_WEIGHTS.entries) == tuple(IMPACTS), "one weight per impact of arena_jax.tasks.IMPACTS"

JURY = cs.Section(
  dict(
    jurors=field(
      (), "One base URL per juror; () = `urls` (or the embedded server) for each of `num_jurors` jurors.", cs.urls()
    ),
    juror_models=field((), "Model id per juror; () = `model`.", valid="() or one model per juror"),
    num_jurors=field(3, "Jurors when `jurors` is ().", cs.integer(1)),
    mode=field(
      "consolidation",
      "Phase 2: consolidation by one judge, moderated deliberation, or a Phase-1 majority vote (baseline).",
      cs.one_of(JURY_MODES),
    ),
    consolidator=field(
      "",
      "The consolidating / moderating judge; \"\" = the first juror's endpoint.",
      cs.string(),
      valid='"" or an http(s):// URL',
    ),
    max_rounds=field(8, "Deliberation turns (a moderator call and a juror call each).", cs.integer(0)),
    stall_rounds=field(2, "Deliberation stops after this many turns that change no stance.", cs.integer(1)),
    quorum=field(
      0,
      "Agreeing jurors that make a claim consensus; 0 = a strict majority.",
      cs.integer(0),
      valid="int in [0, jurors]",
    ),
    error_min_impact=field(
      "major", "Flaws at least this severe mark a step as an error (ProcessBench scoring).", cs.one_of(IMPACTS)
    ),
    severity_weights=SEVERITY_WEIGHTS,
  ),
  title="the Reasoning Jury (SPEC §8)",
)

JUDGE = cs.Section(
  dict(
    backend=field(
      "pairwise",
      "Judge backend (`judges.BACKENDS`). The trainer uses pairwise for the tournament "
      "modes and the rubric judge (pointwise, or jury when set) for rlaif / adaptive_pointwise.",
      cs.registered(BACKENDS),
    ),
    urls=field(
      (),
      "OpenAI-compatible base URLs (`http://h:8000`, `…/v1` or `…/v1/chat/completions`); load is "
      "spread over them. () = the embedded judge server on a free loopback port, started and stopped by "
      "the run.",
      cs.urls(),
    ),
    model=field(
      DEFAULT_MODEL,
      "The model id sent with every request (vLLM / SGLang: the served model name; with `serve = "
      "transformers`, the name the started server serves `serve_model` under).",
      cs.string(nonempty=True),
    ),
    serve=field(
      "embedded",
      "The judge server the run starts when `urls` is (): `embedded` = the process checker behind HTTP "
      "(`server.*`); `transformers` = `transformers serve` of `serve_model`, a real LLM judge on this machine "
      "(`judges.TransformersJudgeServer`; the `serve` extra). Either is stopped when the run ends.",
      cs.one_of(SERVERS),
    ),
    serve_model=field(
      "",
      "With `serve = transformers`: the judge model, an HF checkpoint directory, a .gguf (converted once, "
      "cached) or `pretrained:<name>` (`arena_jax.pretrained`).",
      cs.string(),
    ),
    serve_port=field(0, "With `serve = transformers`: its port on 127.0.0.1; 0 = a free one.", cs.integer(0, 65535)),
    serve_startup_s=field(
      600.0,
      "With `serve = transformers`: how long the run waits for the server to list the model (loading it on a "
      "CPU takes seconds to minutes).",
      cs.number(1),
    ),
    api_key_env=field(
      "ARENA_JUDGE_API_KEY",
      "Name of the environment variable holding the bearer token; \"\" or unset = no `Authorization` header.",
      cs.string(),
    ),
    seed=field(
      0, "Presentation orders (`debias=random`) and request seeds derive from it and the query's key.", cs.integer(0)
    ),
    margin=field(0.4, "Soft margin m: a win scores 1/2 + m, a tie 1/2, a loss 1/2 − m (SPEC §4).", cs.number(0, 0.5)),
    debias=field(
      "random",
      "Order debiasing (SPEC §4): none, a seeded random order per query, or both orders "
      "judged and averaged (twice the calls).",
      cs.one_of(DEBIAS_MODES),
    ),
    reverse_verdicts=field(
      False,
      "Reverse every pairwise verdict (the first trace's outcome s becomes 1 − s) after it is read, whatever the "
      "judge: an ablation arm, the reversed judge that must move a judged property the other way "
      "(docs/results/real.md).",
      cs.boolean(),
    ),
    verdict_format=field(
      "reasoned",
      "How the judge gives its verdict (`judges.formats`): `reasoned` = explain, then `[[A]]` / `Rating: [[x]]` "
      "(reasoning judges); `letter` = one letter A / B (pointwise: Yes / No) in a few tokens (small judges); "
      "`logprobs` = the same in one token with `top_logprobs`, read as P(A) / (P(A) + P(B)) (a server that "
      "ignores logprobs fails the start-up check). The jury lists flaws: `reasoned` only.",
      cs.one_of(VERDICT_FORMATS),
    ),
    temperature=field(0.0, "Judge sampling temperature, sent with every request.", cs.number(0, 2)),
    max_tokens=field(
      16384,
      "Answer budget, thinking included (servers count reasoning tokens against it). Sized "
      "for reasoning judges, which often think for thousands of tokens before the verdict; a "
      "budget only caps, so a judge that answers briefly costs no more, but the server's context "
      "must hold the prompt plus this (vLLM refuses the request with HTTP 400 otherwise). An "
      "answer cut at it fails with reason `truncated` (`client.max_truncation_retries`).",
      cs.integer(1),
    ),
    extra_body=field(
      None,
      "Added verbatim to every request body, for server options the client does not set "
      "itself, e.g. `{\"chat_template_kwargs\": {\"enable_thinking\": True}}` (vLLM / SGLang, "
      "Qwen3). On the command line a Python dict literal or JSON text, quoted (docs/judges.md). "
      "None = nothing added.",
      cs.optional(EXTRA_BODY_CHECK),
      placeholder=object,
    ),
    trace_view=field(
      "visible",
      "What the judge sees of a reasoning policy's completion (`tasks.trace_view`): "
      "`visible` = its thinking block (`<think>…</think>`, `[THINK]…[/THINK]`) removed, the concise "
      "visible reasoning of SPEC §9; `full` = as generated, thinking included; `summary_only` = the "
      "last paragraph of the visible part. A completion that ended inside its thinking shows a "
      "marker saying it has no visible answer.",
      cs.one_of(TRACE_VIEWS),
    ),
    step_deadline_s=field(
      0.0,
      "Training: how long an update waits for its step's judgment once it needs the "
      "rewards; judgments still running then are cancelled, counted (`judge/matches_late`) and "
      "left out of the fit, and their groups fall back as groups with no judgment do (zero "
      "advantage). 0 = wait for every judgment.",
      cs.number(0),
    ),
    token_budget=field(
      4096,
      "Tokens kept per trace, counted by `tokenizer`; a longer trace keeps its head, an outline of "
      "its middle and its tail, with a marker saying how much was cut.",
      cs.integer(16),
    ),
    tokenizer=field(
      "",
      "What counts the judge's tokens, for `token_budget` and `context_tokens` (`judges.tokens`): \"\" = "
      "an estimate (can undercount a real tokenizer several-fold); a path = the judge's own tokenizer "
      "(a tokenizer.json or its directory, a SentencePiece .model; a request counted as its chat "
      "template renders it); \"server\" = the judge's server counts, vLLM's `POST /tokenize` (cached; its "
      "`max_model_len` is the context when `context_tokens` is 0).",
      cs.Check(TOKENIZER_CHOICES, check_tokenizer),
    ),
    context_tokens=field(
      0,
      "The judge's context (vLLM's max_model_len): traces are cut further until a request's prompt "
      "tokens + `max_tokens` fit it, else the judgment fails (reason `context`) without a call. "
      "0 = the server's max_model_len with `tokenizer` \"server\", else no limit beyond `token_budget`.",
      cs.integer(0),
    ),
    tail_fraction=field(0.25, "Share of the budget kept from the end of a truncated trace.", cs.number(0, 0.9)),
    template_dir=field(
      "",
      "Directory whose `<name>.txt` files replace the built-in templates (docs/judges.md).",
      cs.existing_dir_or_empty(),
    ),
    rubric_levels=field(
      (0.0, 0.5, 1.0),
      "Pointwise rubric levels, normalised to [0, 1] (SPEC §7).",
      cs.satisfies(
        "≥ 2 distinct numbers",
        lambda v: (
          len(v) >= 2
          and len(set(v)) == len(v)
          and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)
        ),
        "≥ 2 distinct numbers",
      ),
    ),
    transcripts=field(
      1.0,
      "Share of judged groups whose every judge call is recorded in `<workdir>/transcripts/` "
      "(gzip JSONL: prompt texts, order shown, answer, reasoning, verdict, failure, latency, tokens, "
      "endpoint; read by `launch.inspect` and `arena_jax.train.read_transcripts`): 0 = off, 1 = all, "
      "in between = that fraction, sampled per group (docs/judges.md, \"Transcripts\").",
      cs.number(0, 1),
    ),
    transcripts_max_mb=field(
      1024,
      "Bound on each host's transcript files (compressed MB): the oldest parts are deleted beyond it.",
      cs.integer(1),
    ),
    client=CLIENT,
    jury=JURY,
    server=SERVER,
  )
)


@CLIENT.rule
def _backoff_cap(c, report):
  """backoff_max_s ≥ backoff_initial_s."""
  if c.backoff_max_s < c.backoff_initial_s:
    report("backoff_max_s", f"must be ≥ backoff_initial_s ({c.backoff_initial_s}), got {c.backoff_max_s!r}")


@SERVER.rule
def _latency_tail(c, report):
  """latency_p99_ms is 0 or ≥ latency_ms (a 99th percentile below the median is no distribution)."""
  if c.latency_p99_ms and c.latency_p99_ms < c.latency_ms:
    report("latency_p99_ms", f"must be 0 (off) or ≥ latency_ms ({c.latency_ms}), got {c.latency_p99_ms!r}")


@JUDGE.rule
def _format_fits_the_backend(c, report):
  """The jury lists flaws in JSON: it needs the reasoned format (the letter formats ask one label)."""
  if c.backend == "jury" and c.verdict_format != "reasoned":
    report(
      "verdict_format",
      f"{c.verdict_format!r} asks for one label, but the jury backend lists flaws: use 'reasoned' with the jury, "
      "or the pairwise / pointwise backend",
    )


@JUDGE.rule
def _served_model_named(c, report):
  """`serve = transformers` serves `serve_model` under `model`, a plain name (it is a directory's name)."""
  if c.serve == "transformers" and not c.urls:
    if not c.serve_model:
      report("serve_model", "is empty: name the judge model (an HF directory, a .gguf or pretrained:<name>)")
    if "/" in c.model or c.model.startswith("."):
      report("model", f"{c.model!r}: the name a started transformers server serves under must be a plain name")


@JURY.rule
def _jury_consistent(c, report):
  """juror_models names one model per juror (or none); a consolidator is a URL; quorum ≤ the number of jurors."""
  if c.juror_models and c.jurors and len(c.juror_models) != len(c.jurors):
    report("juror_models", f"must be () or name one model per juror ({len(c.jurors)}), got {c.juror_models!r}")
  if c.consolidator:
    problem = cs.urls().test((c.consolidator,))
    if problem:
      report("consolidator", problem)
  num = len(c.jurors) or c.num_jurors
  if c.quorum > num:
    report("quorum", f"must be ≤ the number of jurors ({num}), got {c.quorum}")


def server_config() -> ml_collections.ConfigDict:
  """Knobs of the embedded judge server (`launch/serve_judge.py`, `judges.EmbeddedJudgeServer`)."""
  return SERVER.defaults()


def default_config() -> ml_collections.ConfigDict:
  """The judges configuration (embed as `config.judge` of a run config): every declared default."""
  return JUDGE.defaults()


def validate_server_config(s: ml_collections.ConfigDict, prefix: str = "judge.server") -> ml_collections.ConfigDict:
  """Checks the embedded server's knobs (see `SERVER`); raises ValueError naming the field."""
  return SERVER.validate(s, prefix)


def validate_config(config: ml_collections.ConfigDict, prefix: str = "judge") -> ml_collections.ConfigDict:
  """Checks every field once, up front; raises ValueError naming the field and what to change."""
  return JUDGE.validate(config, prefix)


def cli_config(config: ml_collections.ConfigDict, judge_url: str) -> ml_collections.ConfigDict:
  """A judge CLI's `--judge` config with its `--judge_url` flag (comma-separated; empty keeps
  `config.urls`, and no URLs starts the embedded server), validated."""
  if judge_url:
    config.urls = split_urls(judge_url)
  return validate_config(config)
