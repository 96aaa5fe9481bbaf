"""Judge prompts (templates as files) and the parsers of judge answers (SPEC §4, §7, §8).

Each template's renderer sits beside the parser of its answer, so that a prompt and what reads the judge's
reply to it change together; what the jury does with parsed flaws (`jury.group_flaws`) is the jury's.

Templates live in `judges/templates/<name>.txt` so that users can swap in their judge's own prompt
(`config.template_dir`: a directory whose `<name>.txt` files override the built-in ones). A template
is plain text with `{field}` placeholders; only the template's own field names are substituted, in a
single pass, so braces elsewhere (JSON examples) need no escaping and a value that contains
`{trace_b}` is never expanded. Values go in verbatim: callers pass them through `hygiene.sanitize`.

The built-in templates delimit every field with `[The Start of X]` … `[The End of X]` lines (the
MT-bench / FastChat judge convention), which `hygiene` neutralises inside traces, so a section can
be found again unambiguously (`parse_sections`, used by the embedded server).

  name           fields                                                       the judge answers
  pairwise       problem, reference, trace_a, trace_b                         … [[A]] | [[B]] | [[C]]
  pointwise      problem, reference, trace, (rubric)                          … Rating: [[level]]
  juror          problem, reference, marked_trace, final_answer               … {"flaws": [...]}
  consolidation  juror fields + verdicts                                      … {"flaws": [... "jurors"]}
  moderator      state, transcript, (num_jurors, quorum)                      … {"action": "ask"|"stop", ...}
  debate         juror fields + claims, question                              … {"positions": [...]}
  synthesis      state, transcript, (num_jurors, quorum)                      … {"flaws": [... "jurors"]}

Parsers read only a judge's final answer: `split_reasoning` removes the thinking of reasoning judges
(`<think>` blocks; `reasoning_content` never reaches a parser), and the verdict parsers accept the forms
such judges write (`[[A]]`, `\\boxed{A}`, `Final verdict: A`, `**A**`) while ignoring restatements of the
format. They return None for an answer that cannot be parsed (the client then retries, capped, and a
final failure is reported as such — never as a tie); `read_answer` also names the failure ("truncated"
when the thinking never ended).
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import json
import os
import re
from typing import Any, Callable, Sequence

from arena_jax.arena.outcomes import Verdict
from arena_jax.judges import hygiene
from arena_jax.tasks import IMPACTS, thinking

TEMPLATE_DIR = os.path.join(os.path.dirname(__file__), "templates")

# Required fields, then optional ones (a user's template may leave those out).
FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
  "pairwise": (("problem", "reference", "trace_a", "trace_b"), ()),
  "pointwise": (("problem", "reference", "trace"), ("rubric",)),
  # The letter and logprobs verdict formats (`judges.formats`): one letter (A / B) or one word (Yes / No).
  "pairwise_letter": (("problem", "reference", "trace_a", "trace_b"), ()),
  "pointwise_letter": (("problem", "reference", "trace"), ()),
  "juror": (("problem", "marked_trace"), ("reference", "final_answer")),
  "consolidation": (("problem", "marked_trace", "verdicts"), ("reference", "final_answer")),
  "moderator": (("state",), ("transcript", "num_jurors", "quorum")),
  "debate": (("problem", "marked_trace", "claims"), ("reference", "final_answer", "question")),
  "synthesis": (("state",), ("transcript", "num_jurors", "quorum")),
}
TEMPLATE_NAMES = tuple(FIELDS)
NOT_GIVEN = "(not given)"

_SECTION_START = re.compile(r"^\[The Start of ([^\]\n]+)\][ \t]*\n", re.MULTILINE)
_SECTION_END = re.compile(r"^\[The End of ([^\]\n]+)\][ \t]*$", re.MULTILINE)


class Templates:
  """The judge templates (`TEMPLATE_NAMES`), built-in or overridden from a directory (see module docstring)."""

  def __init__(self, template_dir: str = ""):
    self.template_dir = template_dir
    self.texts: dict[str, str] = {}
    self.sources: dict[str, str] = {}
    for name in TEMPLATE_NAMES:
      path = os.path.join(TEMPLATE_DIR, f"{name}.txt")
      if template_dir:
        custom = os.path.join(os.path.expanduser(template_dir), f"{name}.txt")
        if os.path.isfile(custom):
          path = custom
      with open(path, encoding="utf-8") as f:
        text = f.read()
      required, optional = FIELDS[name]
      missing = [k for k in required if "{" + k + "}" not in text]
      if missing:
        raise ValueError(
          f"judge template {path!r} lacks the field(s) {missing}; the {name!r} template "
          f"needs {list(required)} (optional: {list(optional)})"
        )
      self.texts[name] = text
      self.sources[name] = path
    self._patterns = {name: re.compile(r"\{(" + "|".join(sum(FIELDS[name], ())) + r")\}") for name in TEMPLATE_NAMES}
    self.delimiters = self._find_delimiters()

  def _find_delimiters(self) -> tuple[str, ...]:
    """The lines just before and after each placeholder line: what a forged trace would imitate.

    Only those that `hygiene.neutralise` does not already defuse are kept (none for the built-ins).
    """
    found = []
    for name, text in self.texts.items():
      lines = [ln.strip() for ln in text.splitlines()]
      for i, line in enumerate(lines):
        if self._patterns[name].fullmatch(line):
          for j in (i - 1, i + 1):
            if 0 <= j < len(lines) and lines[j] and not self._patterns[name].search(lines[j]) and len(lines[j]) <= 80:
              found.append(lines[j])
    return tuple(sorted(d for d in set(found) if hygiene.neutralise(d) == d))

  def render(self, name: str, **fields: Any) -> str:
    """The template `name` with its fields filled in (missing optional fields read "(not given)")."""
    required, optional = FIELDS[name]
    missing = [k for k in required if k not in fields]
    if missing:
      raise ValueError(f"render({name!r}) needs the field(s) {missing}")
    values = {k: str(fields.get(k, NOT_GIVEN)) for k in required + optional}
    return self._patterns[name].sub(lambda m: values[m.group(1)], self.texts[name])

  def messages(self, name: str, **fields: Any) -> list[dict]:
    """The chat messages of one request: the rendered template as the user turn."""
    return [{"role": "user", "content": self.render(name, **fields)}]


@functools.lru_cache(maxsize=8)
def load_templates(template_dir: str = "") -> Templates:
  """`Templates(template_dir)`, loaded once per directory."""
  return Templates(template_dir)


def parse_sections(text: str) -> dict[str, str]:
  """{name: body} of the `[The Start of name]` … `[The End of name]` sections (first occurrence wins).

  Linear in the text (start and end lines are found in one pass each, then paired), so a prompt full
  of unmatched markers costs no more than any other.
  """
  text = text or ""
  ends: dict[str, list[int]] = {}
  for m in _SECTION_END.finditer(text):
    ends.setdefault(m.group(1), []).append(m.start())
  out: dict[str, str] = {}
  for m in _SECTION_START.finditer(text):
    name = m.group(1)
    if name.strip() in out or name not in ends:
      continue
    positions = ends[name]
    k = bisect.bisect_left(positions, m.end())
    if k == len(positions):
      continue
    body = text[m.end() : positions[k]]
    out[name.strip()] = body[:-1] if body.endswith("\n") else body
  return out


# ─────────────────────────────────────────── rubric ───────────────────────────────────────────


def rubric_text(levels: Sequence[float]) -> str:
  """The rubric section for `levels` (lowest = wrong, highest = flawless), one `- [[level]]` line each."""
  levels = sorted(float(v) for v in levels)
  fmt = lambda v: f"{v:g}"
  lines = []
  for k, v in enumerate(levels):
    if k == 0:
      what = "the final answer is wrong or missing"
    elif k == len(levels) - 1:
      what = "the final answer is right and every step is valid, relevant and shown"
    elif len(levels) == 3:
      what = "the final answer is right, but some step is wrong, irrelevant or not shown"
    else:
      what = f"partially sound (level {k} of {len(levels) - 1}: the higher, the fewer and lighter the flaws)"
    lines.append(f"- [[{fmt(v)}]]: {what}")
  return "\n".join(lines)


# ──────────────────────────────────── thinking and the final answer ────────────────────────────────────
#
# The paper's judges (DeepSeekMath-V2, Qwen3) think at length before they answer. Served with a reasoning
# parser, the thinking arrives apart (`reasoning_content`) and the client never hands it to a parser; served
# without one, it is inline in the content, `<think>…</think>`, or — when the chat template opens the block
# in the prompt (DeepSeek-R1, Qwen3) — everything before a lone `</think>`. A thinking judge weighs both
# verdicts, drafts JSON and restates the format, so every parser reads only what `split_reasoning` leaves:
# the final answer.

_THINK_TAG = re.compile(r"<(/?)(?:think|thinking)\s*>", re.IGNORECASE)


@dataclasses.dataclass(frozen=True)
class Answer:
  """A judge's completion split into its thinking and its final answer (`split_reasoning`).

  text: the content outside every thinking block — the only place a verdict is read from.
  reasoning: the thinking: `reasoning_content` as the server returned it, then any inline blocks.
  truncated: the thinking never ended (an unclosed `<think>`), or the answer was cut at max_tokens
    (`finish_reason == "length"`): a failure, never a guess at what the judge would have said.
  """

  text: str
  reasoning: str = ""
  truncated: bool = False


def split_reasoning(content: str | None, reasoning: str | None = None, finish_reason: str | None = None) -> Answer:
  """Separates a completion's thinking from its final answer (see `Answer`); linear in the content.

  `<think>` and `<thinking>` blocks (nested ones included) are thinking; a closing tag with no opening
  one makes everything before it thinking; an opening tag that is never closed makes everything after it
  thinking and the answer truncated. Trace hygiene defuses these tags inside traces, so a judge that
  quotes a trace cannot open or close a block by doing so.
  """
  split = thinking.split_thinking(content, tags=_THINK_TAG)
  thought = [t for t in (reasoning, split.thinking) if t and t.strip()]
  return Answer(split.visible, "\n\n".join(t.strip() for t in thought), split.unclosed or finish_reason == "length")


def read_answer(
  parse: Callable[[str], Any], content: str | None, reasoning: str | None = None, finish_reason: str | None = None
) -> tuple[Any, str | None]:
  """(value, None), or (None, "truncated" | "unparseable"): what the judges make of one completion.

  `parse` is one of the parsers below; it sees the content only, never `reasoning`. Truncated — cut at
  max_tokens or thinking never closed — is decided before any parse (SPEC §4: a failure, dropped and
  counted, never a tie). The client and `pairwise.settle` apply the same rules to live answers.
  """
  if split_reasoning(content, reasoning, finish_reason).truncated:
    return None, "truncated"
  try:
    value = parse(content or "")
  except (ValueError, TypeError, KeyError):
    value = None
  return (value, None) if value is not None else (None, "unparseable")


def _final_text(text: str | None) -> str | None:
  """The final answer of `text`, None when its thinking never ended (nothing to read)."""
  answer = split_reasoning(text)
  return None if answer.truncated else answer.text


# ─────────────────────────────────────────── verdicts ───────────────────────────────────────────
#
# Forms read, in two tiers. First the template's own `[[…]]` (MT-bench [[A]] / [[B]] / [[C]], a `[[tie]]`,
# arena-hard's [[A>B]], [[A>>B]], [[A=B]]; adjacent brackets only): trace hygiene keeps these out of
# traces, so a judge that quotes a trace after its verdict cannot be steered by it. Only without one, the
# forms reasoning judges write by habit: `\boxed{A}` (DeepSeekMath-V2), `Final verdict: A` / `Verdict: B`
# (markup around it tolerated), and a line that is the verdict alone (`**A**`). Within a tier the last
# real verdict wins; not verdicts: options listed together ("[[A]], [[B]] or [[C]]"), conditionals
# ("[[A]]" if trace A is better, "[[C]]" for a tie), examples ("e.g. Rating: [[0.5]]") and a list of
# definitions ("- [[0]]: wrong", "- [[1]]: right").

_PAIR_TOKEN = r"A\s*>>?\s*B|B\s*>>?\s*A|A\s*=\s*B|B\s*=\s*A|(?:a\s+)?tie|draw|A|B|C"
_NUMBER_TOKEN = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)"
_VERDICT = re.compile(r"\[\[\s*(" + _PAIR_TOKEN + r")\s*\]\]", re.IGNORECASE)
_RATING = re.compile(r"\[\[\s*(" + _NUMBER_TOKEN + r")\s*\]\]")
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{((?:[^{}]|\{(?:[^{}]|\{[^{}]*\})*\})*)\}")
_LATEX_WRAP = re.compile(
  r"\\(?:text|textbf|textrm|textsf|texttt|textit|mathrm|mathbf|mathsf|mbox|operatorname)"
  r"\s*\{([^{}]*)\}"
)
_FRAC = re.compile(r"\\[dt]?frac\s*\{\s*(\d+)\s*\}\s*\{\s*(\d+)\s*\}")
_MARKUP = r"[ \t*_`]*"
# A label, a separator (":", "is", a dash; "**Final Verdict:**" and "verdict is:" too), then the verdict.
_SEPARATOR = r"(?:" + _MARKUP + r"(?:\bis\b|[:：=–—-]))+" + _MARKUP
_WHO = r"(?:(?:trace|solution|response|option)[ \t]+)?"
_LABELED_VERDICT = re.compile(
  r"\b(?:final[ \t]+verdict|verdict|final[ \t]+decision|decision|final[ \t]+judg(?:e)?ment|judg(?:e)?ment"
  r"|winner|better[ \t]+trace)" + _SEPARATOR + _WHO + r"(" + _PAIR_TOKEN + r")(?![\w>=])"
  r"(?![ \t]*(?:,|/|\bor\b|\band\b)" + _MARKUP + _WHO + r"(?:[abc]|tie)\b)"  # "A, B or C": options, not a verdict
  r"(?=" + _MARKUP + r"(?:$|[.!;,:)]|\s+(?:is[ \t]+(?:the[ \t]+)?(?:better|superior|stronger|preferred)|wins|"
  r"because|since|\()))",
  re.IGNORECASE | re.MULTILINE,
)
_LINE_VERDICT = re.compile(
  r"^[ \t#*_`]*" + _WHO + r"(" + _PAIR_TOKEN + r")" + _MARKUP + r"[.!]?" + _MARKUP + r"$", re.IGNORECASE | re.MULTILINE
)
_LABELED_RATING = re.compile(
  r"\b(?:final[ \t]+)?(?:rating|score|grade)" + _SEPARATOR + r"(" + _NUMBER_TOKEN + r")(?![\w/]|\.\d)", re.IGNORECASE
)
_LIST_GAP = re.compile(r"(?:[ \t\"'`*_,;/|()]|\bor\b|\band\b)*", re.IGNORECASE)
_CONDITIONAL = re.compile(
  r"[ \t\"'`*_)\]]*(?:if|when|whenever|means|for[ \t]+(?:a[ \t]+)?(?:tie|draw)|→|->|⇒)(?!\w)", re.IGNORECASE
)
_DEFINITION = re.compile(r"[ \t\"'`*_)\]]*(?:[:：]|[ \t][-–—])[ \t]*\w")
_EXAMPLE = re.compile(
  r"(?:e\.g\.|i\.e\.|for[ \t]+example|for[ \t]+instance|such[ \t]+as)[\s,:\"'`(]*"
  r"(?:(?:rating|score|verdict)[ \t]*:[ \t]*)?[\"'`(]*$",
  re.IGNORECASE,
)
# "…, not [[A]]", "rather than [[A]]": the verdict named to be rejected.
_NEGATED = re.compile(r"(?:\bnot|\brather[ \t]+than|\binstead[ \t]+of|\bover)[ \t\"'`*_(]*$", re.IGNORECASE)
_MAX_LIST_GAP = 40


@dataclasses.dataclass(frozen=True)
class _Hit:
  start: int
  end: int
  value: Any


def _last_verdict(hits: list[_Hit], text: str) -> Any:
  """The last real verdict among `hits` (one tier's), without restatements of the format; None if none."""
  hits = sorted(hits, key=lambda h: (h.start, -h.end))
  unique: list[_Hit] = []
  for h in hits:
    if not unique or h.start >= unique[-1].end:  # one verdict read by two forms counts once
      unique.append(h)
  kept = [
    h
    for h in unique
    if not _CONDITIONAL.match(text, h.end, h.end + 40)
    and not _EXAMPLE.search(text, max(0, h.start - 40), h.start)
    and not _NEGATED.search(text, max(0, h.start - 20), h.start)
  ]
  runs: list[list[_Hit]] = []
  for h in kept:
    gap = (runs[-1][-1].end, h.start) if runs else None
    if gap and gap[1] - gap[0] <= _MAX_LIST_GAP and _LIST_GAP.fullmatch(text, *gap):
      runs[-1].append(h)
    else:
      runs.append([h])
  kept = [h for run in runs if len({x.value for x in run}) == 1 for h in run]
  definitions = [h for h in kept if _DEFINITION.match(text, h.end, h.end + 40)]
  if len({h.value for h in definitions}) > 1:
    kept = [h for h in kept if h not in definitions]
  return kept[-1].value if kept else None


def _first_tier(text: str, *tiers: list[_Hit]) -> Any:
  """The last real verdict of the first tier that has one (the template's form before the loose ones)."""
  for hits in tiers:
    value = _last_verdict([h for h in hits if h.value is not None], text)
    if value is not None:
      return value
  return None


def _pair_verdict(token: str) -> Verdict | None:
  t = re.sub(r"\s+", "", token).upper()
  if t in ("A", "A>B", "A>>B"):
    return Verdict.FIRST_WINS
  if t in ("B", "B>A", "B>>A"):
    return Verdict.SECOND_WINS
  if t in ("C", "TIE", "ATIE", "DRAW", "A=B", "B=A"):
    return Verdict.TIE
  return None


def _unboxed(inner: str) -> str:
  """The content of a `\\boxed{…}` without its LaTeX text wrappers and markup: `\\text{Trace A}` → "Trace A"."""
  for _ in range(3):
    inner = _LATEX_WRAP.sub(r"\1", inner)
  inner = re.sub(r"[${}*`]|\\[,;!: ]", " ", inner).strip()
  return re.sub(r"^\[\[\s*|\s*\]\]$", "", inner)


def _boxed_verdict(inner: str) -> Verdict | None:
  m = re.fullmatch(_WHO + r"(" + _PAIR_TOKEN + r")[ .]*", _unboxed(inner), re.IGNORECASE)
  return _pair_verdict(m.group(1)) if m else None


def _boxed_number(inner: str) -> float | None:
  inner = _FRAC.sub(r"\1/\2", inner)
  m = re.fullmatch(r"(" + _NUMBER_TOKEN + r")(?:\s*/\s*(\d+))?[ .]*", _unboxed(inner))
  if not m:
    return None
  if m.group(2) is None:
    return float(m.group(1))
  return float(m.group(1)) / float(m.group(2)) if float(m.group(2)) else None


def parse_pairwise(text: str | None) -> Verdict | None:
  """The verdict in *presentation* order (A = the trace shown first) of a judge's final answer (SPEC §4).

  The thinking is never read (`split_reasoning`); an answer whose thinking never ended, or with no
  verdict, is None — unparseable, never a tie. Forms and tiers: the comment above.
  """
  text = _final_text(text)
  if not text:
    return None
  brackets = [_Hit(m.start(), m.end(), _pair_verdict(m.group(1))) for m in _VERDICT.finditer(text)]
  loose = [_Hit(m.start(), m.end(), _boxed_verdict(m.group(1))) for m in _BOXED.finditer(text)]
  loose += [_Hit(m.start(1), m.end(1), _pair_verdict(m.group(1))) for m in _LABELED_VERDICT.finditer(text)]
  loose += [_Hit(m.start(), m.end(), _pair_verdict(m.group(1))) for m in _LINE_VERDICT.finditer(text)]
  return _first_tier(text, brackets, loose)


def parse_rating(text: str | None, levels: Sequence[float]) -> float | None:
  """The rubric level of a judge's final answer, normalised to [0, 1] over `levels` (SPEC §7).

  `Rating: [[0.5]]` (the template's form) first; else `\\boxed{0.5}` (also `\\frac{1}{2}`) or
  `Rating: 0.5` / `Score: 0.5`. None when there is none, when the last one is not a level, or when the
  thinking never ended.
  """
  text = _final_text(text)
  if not text:
    return None
  brackets = [_Hit(m.start(), m.end(), float(m.group(1))) for m in _RATING.finditer(text)]
  loose = [_Hit(m.start(), m.end(), _boxed_number(m.group(1))) for m in _BOXED.finditer(text)]
  loose += [_Hit(m.start(1), m.end(1), float(m.group(1))) for m in _LABELED_RATING.finditer(text)]
  value = _first_tier(text, brackets, loose)
  if value is None:
    return None
  lo, hi = min(levels), max(levels)
  if not any(abs(value - float(v)) <= 1e-9 for v in levels):
    return None
  return (value - lo) / (hi - lo)


# ───────────────────────────────────────────── JSON ─────────────────────────────────────────────

_STEP_REF = re.compile(r"\s*\[?\s*STEP\s*[-_ ]?\s*(\d+)\s*\]?\s*", re.IGNORECASE)
_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_MAX_JSON_STARTS = 400  # `{` positions tried from the end; bounds the cost of a pathological answer
_PLACEHOLDER = re.compile(r"\s*(?:\.\.\.|…)\s*|STEP-[a-z]|[a-z]+(?:\s*\|\s*[a-z]+)+", re.IGNORECASE)
_PLACEHOLDER_KEYS = ("what_went_wrong", "impact", "argument", "question", "stance", "statement_refs")


def _is_format_echo(obj: dict) -> bool:
  """Whether `obj` restates a template's example (`"what_went_wrong": "..."`, `"STEP-k"`,
  `"neutral|minor|major|fatal"`) rather than answering."""
  stack = [obj]
  while stack:
    item = stack.pop()
    if isinstance(item, dict):
      for k, v in item.items():
        if k in _PLACEHOLDER_KEYS and isinstance(v, str) and _PLACEHOLDER.fullmatch(v):
          return True
        if (
          k == "statement_refs"
          and isinstance(v, list)
          and any(isinstance(r, str) and _PLACEHOLDER.fullmatch(r) for r in v)
        ):
          return True
        if isinstance(v, (dict, list)):
          stack.append(v)
    elif isinstance(item, list):
      stack.extend(x for x in item if isinstance(x, (dict, list)))
  return False


def extract_json(text: str | None, key: str) -> dict | None:
  """The last JSON object in `text` that has `key` (fenced ```json blocks first) and is not a restatement
  of the template's example (`_is_format_echo`); None if there is none. `text` is read as it is: the
  parsers pass only the final answer (`split_reasoning`)."""
  text = text or ""
  for block in reversed(_FENCE.findall(text)):
    try:
      obj = json.loads(block)
    except ValueError:
      continue
    if isinstance(obj, dict) and key in obj and not _is_format_echo(obj):
      return obj
  decoder = json.JSONDecoder()
  starts = [m.start() for m in re.finditer(r"\{", text)][-_MAX_JSON_STARTS:]
  for start in reversed(starts):
    try:
      obj, _ = decoder.raw_decode(text, start)
    except ValueError:
      continue
    if isinstance(obj, dict) and key in obj and not _is_format_echo(obj):
      return obj
  return None


def step_ref_index(ref: Any, num_steps: int | None) -> int | None:
  """0-based step index of a reference "STEP-3" / "[STEP-3]" / 3 (1-based); None if invalid."""
  if isinstance(ref, bool):
    return None
  if isinstance(ref, int):
    k = ref
  else:
    m = _STEP_REF.fullmatch(str(ref))
    if not m:
      return None
    k = int(m.group(1))
  if k < 1 or (num_steps is not None and k > num_steps):
    return None
  return k - 1


def severity(impact: str) -> int:
  """The rank of a flaw's impact in `IMPACTS` (neutral 0 … fatal 3); −1 for anything else."""
  return IMPACTS.index(impact) if impact in IMPACTS else -1


def normalise_flaw(flaw: Any, num_steps: int | None, *, num_jurors: int | None = None) -> dict | None:
  """A flaw in the SPEC §8 schema, cleaned; None when it is unusable.

  Unusable: not an object, no description, an impact outside `IMPACTS`, references that all point
  outside the trace, or a self-rated specificity below 4 (SPEC §8: keep only ≥ 4). Optional
  consensus metadata `jurors` (1-based numbers) is kept when valid.
  """
  if not isinstance(flaw, dict):
    return None
  what = str(flaw.get("what_went_wrong") or flaw.get("what") or "").strip()
  impact = str(flaw.get("impact", "")).strip().lower()
  if not what or impact not in IMPACTS:
    return None
  spec = flaw.get("specificity")
  if spec is not None:
    try:
      if float(spec) < 4:
        return None
    except (TypeError, ValueError):
      return None
  refs = flaw.get("statement_refs", [])
  if isinstance(refs, (str, int)):
    refs = [refs]
  if not isinstance(refs, list):
    return None
  steps = sorted({i for i in (step_ref_index(r, num_steps) for r in refs) if i is not None})
  if refs and not steps:
    return None
  out = {
    "what_went_wrong": what,
    "statement_refs": [f"STEP-{i + 1}" for i in steps],
    "impact": impact,
    "evidence": str(flaw.get("evidence") or ""),
  }
  jurors = flaw.get("jurors")
  if isinstance(jurors, list):
    valid = sorted(
      {
        int(j)
        for j in jurors
        if isinstance(j, int) and not isinstance(j, bool) and j >= 1 and (num_jurors is None or j <= num_jurors)
      }
    )
    out["jurors"] = valid
  return out


def parse_flaws(text: str | None, num_steps: int | None = None, *, num_jurors: int | None = None) -> list[dict] | None:
  """The flaws of a juror / consolidator / synthesis answer (`{"flaws": [...]}`, SPEC §8); None if no such JSON.

  The JSON is the last one of the final answer, after the thinking (`split_reasoning`: drafts in the
  thinking are never read) and not a restatement of the template's example. Entries that are unusable
  (see `normalise_flaw`) are dropped; `{"flaws": []}` is a valid "no flaw".
  """
  obj = extract_json(_final_text(text), "flaws")
  if obj is None or not isinstance(obj["flaws"], list):
    return None
  flaws = [normalise_flaw(f, num_steps, num_jurors=num_jurors) for f in obj["flaws"]]
  return [f for f in flaws if f is not None]


def parse_positions(text: str | None, claim_ids: Sequence[str]) -> dict[str, tuple[bool, str]] | None:
  """{claim id: (agrees, argument)} from a debate answer; None without a usable `positions` list."""
  obj = extract_json(_final_text(text), "positions")
  if obj is None or not isinstance(obj["positions"], list):
    return None
  wanted = set(claim_ids)
  out = {}
  for p in obj["positions"]:
    if not isinstance(p, dict):
      continue
    claim, stance = str(p.get("claim", "")).strip(), str(p.get("stance", "")).strip().lower()
    if claim in wanted and stance in ("agree", "disagree"):
      out[claim] = (stance == "agree", str(p.get("argument") or ""))
  return out or None


def parse_moderator(text: str | None, num_jurors: int, claim_ids: Sequence[str]) -> dict | None:
  """{"action": "stop"} or {"action": "ask", "speaker": 0-based, "claims": [...], "question": str}; None if invalid."""
  obj = extract_json(_final_text(text), "action")
  if obj is None:
    return None
  action = str(obj["action"]).strip().lower()
  if action == "stop":
    return {"action": "stop"}
  if action != "ask":
    return None
  speaker = obj.get("speaker")
  if isinstance(speaker, str) and speaker.strip().isdigit():
    speaker = int(speaker.strip())
  if isinstance(speaker, bool) or not isinstance(speaker, int) or not 1 <= speaker <= num_jurors:
    return None
  claims = obj.get("claims", [])
  claims = [str(c).strip() for c in (claims if isinstance(claims, list) else [claims])]
  claims = [c for c in dict.fromkeys(claims) if c in set(claim_ids)]
  if not claims:
    return None
  return {"action": "ask", "speaker": speaker - 1, "claims": claims, "question": str(obj.get("question") or "")}
