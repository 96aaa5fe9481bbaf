"""Judge prompts (templates as files) and the parsers of judge answers (SPEC §4, §7, §8).

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

Parsers return None for an answer that cannot be parsed (the client then retries, capped, and a
final failure is reported as such — never as a tie).
"""
from __future__ import annotations

import bisect
import functools
import json
import os
import re
from typing import Any, Sequence

from arena_jax.arena.outcomes import Verdict
from arena_jax.judges import hygiene
from arena_jax.tasks import IMPACTS

TEMPLATE_DIR = os.path.join(os.path.dirname(__file__), "templates")

# Required fields, then optional ones (a user's template may leave those out).
FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "pairwise": (("problem", "reference", "trace_a", "trace_b"), ()),
    "pointwise": (("problem", "reference", "trace"), ("rubric",)),
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
  """The seven judge templates, built-in or overridden from a directory (see module docstring)."""

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
        raise ValueError(f"judge template {path!r} lacks the field(s) {missing}; the {name!r} template "
                         f"needs {list(required)} (optional: {list(optional)})")
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
    body = text[m.end():positions[k]]
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


# ─────────────────────────────────────────── parsers ───────────────────────────────────────────

# [[A]] / [[B]] / [[C]] (MT-bench), also arena-hard's [[A>B]], [[A>>B]], [[B>A]], [[A=B]]; adjacent brackets only.
_VERDICT = re.compile(r"\[\[\s*(A\s*>>?\s*B|B\s*>>?\s*A|A\s*=\s*B|B\s*=\s*A|A|B|C)\s*\]\]")
_RATING = re.compile(r"\[\[\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+))\s*\]\]")
_STEP_REF = re.compile(r"\s*\[?\s*STEP\s*[-_ ]?\s*(\d+)\s*\]?\s*", re.IGNORECASE)
_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_MAX_JSON_STARTS = 400  # `{` positions tried from the end; bounds the cost of a pathological answer


def parse_pairwise(text: str | None) -> Verdict | None:
  """The verdict in *presentation* order (A = the trace shown first); the last verdict token wins."""
  matches = _VERDICT.findall(text or "")
  if not matches:
    return None
  token = re.sub(r"\s+", "", matches[-1])
  if token in ("A", "A>B", "A>>B"):
    return Verdict.FIRST_WINS
  if token in ("B", "B>A", "B>>A"):
    return Verdict.SECOND_WINS
  return Verdict.TIE


def parse_rating(text: str | None, levels: Sequence[float]) -> float | None:
  """The last `[[level]]` of a pointwise answer, normalised to [0, 1] over `levels`; None if not a level."""
  matches = _RATING.findall(text or "")
  if not matches:
    return None
  value = float(matches[-1])
  lo, hi = min(levels), max(levels)
  if not any(abs(value - float(v)) <= 1e-9 for v in levels):
    return None
  return (value - lo) / (hi - lo)


def extract_json(text: str | None, key: str) -> dict | None:
  """The last JSON object in `text` that has `key` (fenced ```json blocks first); None if there is none."""
  text = text or ""
  for block in reversed(_FENCE.findall(text)):
    try:
      obj = json.loads(block)
    except ValueError:
      continue
    if isinstance(obj, dict) and key in obj:
      return obj
  decoder = json.JSONDecoder()
  starts = [m.start() for m in re.finditer(r"\{", text)][-_MAX_JSON_STARTS:]
  for start in reversed(starts):
    try:
      obj, _ = decoder.raw_decode(text, start)
    except ValueError:
      continue
    if isinstance(obj, dict) and key in obj:
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
  out = {"what_went_wrong": what, "statement_refs": [f"STEP-{i + 1}" for i in steps], "impact": impact,
         "evidence": str(flaw.get("evidence") or "")}
  jurors = flaw.get("jurors")
  if isinstance(jurors, list):
    valid = sorted({int(j) for j in jurors if isinstance(j, int) and not isinstance(j, bool) and j >= 1
                    and (num_jurors is None or j <= num_jurors)})
    out["jurors"] = valid
  return out


def parse_flaws(text: str | None, num_steps: int | None = None, *, num_jurors: int | None = None) -> list[dict] | None:
  """The flaws of a juror / consolidator / synthesis answer (`{"flaws": [...]}`); None if no such JSON.

  Entries that are unusable (see `normalise_flaw`) are dropped; `{"flaws": []}` is a valid "no flaw".
  """
  obj = extract_json(text, "flaws")
  if obj is None or not isinstance(obj["flaws"], list):
    return None
  flaws = [normalise_flaw(f, num_steps, num_jurors=num_jurors) for f in obj["flaws"]]
  return [f for f in flaws if f is not None]


def parse_positions(text: str | None, claim_ids: Sequence[str]) -> dict[str, tuple[bool, str]] | None:
  """{claim id: (agrees, argument)} from a debate answer; None without a usable `positions` list."""
  obj = extract_json(text, "positions")
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
  obj = extract_json(text, "action")
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
