"""Multiple-choice (GPQA-style) questions: the row format, a deterministic option shuffle, the prompt, and
the reading of a completion's final letter. Pure Python: no JAX, no TFDS.

A row is `{"question": str, "options": [str, …] (2–10), "answer": 0-based index, letter or the option's
text}`; `normalise_answer` turns its answer into an index and refuses a malformed row.

    normalise_answer(options, answer)          → 0-based index of the correct option (ValueError if malformed)
    shuffle(options, index, seed=, key=)       → (shuffled options, new index of the correct option)
    render_options(options) / prompt_text(q, options)
    extract_letter(completion, options)        → (letter | None, reason)
    score(completion, options, correct_index)  → (1.0 | 0.0, reason)

How a completion's letter is read (`extract_letter`), outside any thinking block only (`thinking.py`; a
completion that ended inside one has no answer):

  * Explicit statements: an answer line (`Answer: C`, `Final answer: (C)`, `**Answer:** C`,
    `Answer: C) 4.2 eV`), a `\\boxed{…}` (`\\boxed{C}`, `\\boxed{\\text{C}}`, `$\\boxed{(C)}$`), or a sentence
    ("the answer is C", "the correct option is (B)"). A statement names a letter, or an option's text
    (matched after normalising case, whitespace, markup and a trailing period: "The answer is 4.2 eV").
    A letter followed by text is read by its letter ("Answer: C) 4.2 eV" is C whatever the text says).
  * The last statement wins: reasoning may revise an earlier one ("Answer: B … on reflection, Answer: C"
    reads C). Its final answer is that statement together with any statement right next to it (only
    whitespace or punctuation between: "\\boxed{B}\\nAnswer: C"); if they name two different letters
    ("Answer: B or C", "B, C", "A/C", "B and D"), there is no answer: "two different final letters".
  * Bare mentions ("option A looks tempting", "(B) is wrong") are never answers, except that when no
    statement is there, a last line that is only a letter ("C", "(C)", "**C**", "C."), a letter and its
    option's text ("C) 4.2 eV"), or only an option's text counts.
  * A letter beyond the options is not a letter (with 4 options, "Answer: E" is no answer). "A" and "I"
    are also English words: "A reasonable guess is…" or "I think…" is prose, not the letter A or I.
    Lowercase letters count only where the statement is just the letter ("answer: c", "\\boxed{d}") or a
    bracketed one ("answer: c) 4.2 eV"); "the answer is a bit unclear" names no letter.
  * A bare letter that is also an option's text ("B" when some option reads "B") is read as the letter:
    the prompt asks for letters. (`normalise_answer` refuses such an ambiguous row answer instead.)
"""

from __future__ import annotations

import hashlib
import numbers
import random
import re

from arena_jax.tasks import thinking
from arena_jax.tasks import verifiers

LETTERS = "ABCDEFGHIJ"
MIN_OPTIONS, MAX_OPTIONS = 2, len(LETTERS)

# Markup a model wraps around an answer or an option's text: bold, italics, inline math, code.
_MARKUP = "*_$` \t"
# How much of a line after "Answer:" or "the answer is" is read: more than any option's text, and a bound on
# the work a degenerate completion (one endless line of "Answer: Answer: …") can cause.
MAX_PAYLOAD = 500
# An answer line: "Answer: C", "Final answer: (C)", "**Answer:** C", "> The correct option: B",
# "So, my final answer: C". At the start of a line or of a sentence ("… so 4.2 eV. Answer: C"), so that
# prose mentioning "the answer: …" mid-sentence is not one.
_ANSWER_LINE = re.compile(
  r"(?im)(?:^|(?<=[.!?})\]]))[ \t>#*_-]*(?:(?:so|thus|therefore|hence)[ \t]*,?[ \t]+)?(?:(?:the|my|our)[ \t]+)?"
  r"(?:(?:final|correct|best)[ \t]+)?(?:answer|choice|option)[ \t*_]*[:：](?=([^\n]{0,%d}))" % MAX_PAYLOAD
)
# "The answer is C", "the correct option is (B)", "my final answer would be D". Only after the/my/our, so
# that "a wrong answer is…" is not read; `[ \t]` keeps a statement on its line.
_ANSWER_IS = re.compile(
  r"(?i)\b(?:the|my|our)[ \t]+(?:(?:final|correct|right|best|only)[ \t]+)?(?:answer|option|choice)[ \t]+"
  r"(?:is|would[ \t]+be|must[ \t]+be|should[ \t]+be)\b[ \t]*:?(?=([^\n]{0,%d}))" % MAX_PAYLOAD
)
_SENTENCE_END = re.compile(r"[.!?;](?=\s|$)")
# LaTeX text wrappers inside a box: \boxed{\text{C}}, \boxed{\textbf{(C)}}, \mathrm{C}.
_TEX_TEXT = re.compile(r"\\(?:text|textbf|textrm|textsf|mathrm|mathbf|mathsf|rm|bf)\s*\{([^{}]*)\}")
_TEX_SPACE = re.compile(r"\\[ ,;:!]|~")
# Hedges and nouns before the letter of a statement: "Answer: I think it is C", "the answer is option (B)".
_LEAD_IN = re.compile(
  r"(?i)^(?:(?:i[ \t]+(?:think|believe|guess)|it[ \t]+is|it's|that[ \t]+is|this[ \t]+is|probably|likely|"
  r"option|choice|letter)\b[ \t:]*)+"
)
# One letter of a statement, with the brackets or bold around it; the letter must end its word ("Cu" is
# not C). All ten letters are matched here, so that "B or E" with 4 options still reads as two letters.
_LETTER = re.compile(r"(?P<open>[(\[])?(?P<bold>[*_]*)(?P<letter>[A-Ja-j])(?![A-Za-z0-9])[*_]*(?P<close>[)\]])?")
_JOIN = re.compile(r"[ \t]*(?:,|/|&|\+|;|\band/or\b|\bor\b|\band\b)[ \t]*", re.IGNORECASE)
# What may follow the letter of a statement: a delimiter ("C) 4.2 eV", "C. …", "C — …", "C, since…").
_DELIMITED = re.compile(r"^[ \t]*(?:[).:,;!?]|[-–—][ \t]|$)")
# "A" and "I" are words too: after them, only a word that an article or a pronoun never precedes.
_AFTER_WORD_LETTER = re.compile(r"(?i)^[ \t]+(?:is|because|since|as|given)\b")
# What may follow an option's text at the start of a payload: "4.2 eV, since…", "**Helium** because…".
_AFTER_TEXT = re.compile(r"[*_$`]*(?:$|[.,;:!?)]|\s+(?:\(|because\b|since\b|as\b|which\b))")
_GAP = re.compile(r"[\s*_$`.,;:!()\[\]>#-]*")
# A last line that is only a letter: "C", "(C)", "**C**", "C.", "$C$", "> C".
_BARE_LETTER = re.compile(r"^[\s>#*_$`]*[(\[]?[*_$`]*([A-J])[*_$`]*[)\]]?[*_$`]*\.?[\s*_$`]*$")
# A last line that is a letter and its option's text: "C) 4.2 eV", "(C) 4.2 eV", "C. 4.2 eV", "C: 4.2 eV".
_LETTER_AND_TEXT = re.compile(r"^[\s>#*_]*(?:\(([A-J])\)|([A-J])[).:])[*_]*[ \t]+(.+)$")


def _norm(text: str) -> str:
  """An option's text or an answer, compared: case, whitespace, surrounding markup and a trailing period."""
  return " ".join(str(text).split()).casefold().lstrip(_MARKUP).rstrip(_MARKUP + ".")


def _check_options(options) -> list[str]:
  """The options as a list, or a ValueError naming `options` (count, type, empty, duplicate)."""
  if isinstance(options, (str, bytes)) or not hasattr(options, "__len__"):
    raise ValueError(f"options must be a list of {MIN_OPTIONS}–{MAX_OPTIONS} strings, got {type(options).__name__}")
  options = list(options)
  if not MIN_OPTIONS <= len(options) <= MAX_OPTIONS:
    raise ValueError(f"options must hold {MIN_OPTIONS}–{MAX_OPTIONS} choices, got {len(options)}")
  seen: dict[str, int] = {}
  for i, option in enumerate(options):
    if not isinstance(option, str):
      raise ValueError(f"options[{i}] must be a string, got {type(option).__name__}")
    key = _norm(option)
    if not key:
      raise ValueError(f"options[{i}] is empty")
    # Normalised as a completion's answer is read: two options that read alike could not be told apart.
    if key in seen:
      raise ValueError(f"options[{i}] {option!r} duplicates options[{seen[key]}] {options[seen[key]]!r}")
    seen[key] = i
  return options


def _text_index(options: list[str], text: str) -> int | None:
  key = _norm(text)
  for i, option in enumerate(options):
    if _norm(option) == key:
      return i
  return None


def normalise_answer(options: list[str], answer: int | str) -> int:
  """The row's answer as a 0-based index into `options`; a ValueError naming the field if malformed.

  `answer` is an int index, a letter ("B", "(B)", "b"), or an option's text (compared as `_norm` does).
  A string that is a single letter and also an option's text, naming two different options, is refused as
  ambiguous; a digit string is an option's text, never an index.
  """
  options = _check_options(options)
  n = len(options)
  if isinstance(answer, bool):
    raise ValueError(f"answer must be an index, a letter or an option's text, got the bool {answer}")
  if isinstance(answer, numbers.Integral):
    if not 0 <= answer < n:
      raise ValueError(f"answer index {answer} is out of range for {n} options (0–{n - 1})")
    return int(answer)
  if not isinstance(answer, str):
    raise ValueError(f"answer must be an index, a letter or an option's text, got {type(answer).__name__}")
  if not answer.strip():
    raise ValueError("answer is an empty string")
  by_text = _text_index(options, answer)
  m = re.fullmatch(r"\s*\(?\s*([A-Ja-j])\s*\)?\s*", answer)
  if m:
    letter = m.group(1).upper()
    by_letter = LETTERS.index(letter)
    if by_letter < n:
      if by_text is not None and by_text != by_letter:
        raise ValueError(
          f"answer {answer!r} is ambiguous: the letter {letter} is options[{by_letter}] but options[{by_text}] "
          f"reads {options[by_text]!r}; give the index instead"
        )
      return by_letter
    if by_text is None:
      raise ValueError(f"answer letter {letter} is out of range for {n} options (A–{LETTERS[n - 1]})")
  if by_text is None:
    raise ValueError(f"answer {answer!r} matches no option's text (nor is it a letter A–{LETTERS[n - 1]})")
  return by_text


def shuffle(options: list[str], answer_index: int, *, seed: int, key: str) -> tuple[list[str], int]:
  """The options in an order fixed by (seed, key), and the new index of the correct option.

  The permutation comes from `random.Random` seeded with the SHA-256 of f"{seed}:{key}" (not `hash()`,
  which differs between Python runs), so every machine and run shuffles a question alike; `key` names the
  question (its id), so that questions sharing their options are still shuffled differently.
  """
  options = _check_options(options)
  if isinstance(answer_index, bool) or not isinstance(answer_index, numbers.Integral):
    raise ValueError(f"answer index must be an int, got {type(answer_index).__name__}")
  if not 0 <= answer_index < len(options):
    raise ValueError(f"answer index {answer_index} is out of range for {len(options)} options")
  digest = hashlib.sha256(f"{seed}:{key}".encode("utf-8")).digest()
  order = list(range(len(options)))
  random.Random(int.from_bytes(digest, "big")).shuffle(order)
  return [options[i] for i in order], order.index(int(answer_index))


def render_options(options: list[str]) -> str:
  """One "A) …" line per option."""
  options = _check_options(options)
  return "\n".join(f"{LETTERS[i]}) {' '.join(option.split())}" for i, option in enumerate(options))


def prompt_text(question: str, options: list[str]) -> str:
  """The question, its lettered options, and how to state the answer (the form `extract_letter` reads first)."""
  options = _check_options(options)
  letters = ", ".join(LETTERS[: len(options) - 1]) + f" or {LETTERS[len(options) - 1]}"
  return (
    f"{question.strip()}\n\n{render_options(options)}\n\n"
    f"Answer with the letter of the correct option ({letters}), as `Answer: X` on the last line."
  )


_boxed_spans = verifiers.boxed_spans  # the math verifier's reading of \boxed{…}: one linear pass


def _unwrap(payload: str) -> str:
  """A statement's payload without LaTeX boxes, text wrappers, math delimiters and bold around it."""
  boxed = _boxed_spans(payload)
  if boxed:
    payload = boxed[-1][2]
  for _ in range(4):  # \\boxed{\\textbf{\\text{C}}}: a few levels, not an unbounded loop on nested junk
    payload = _TEX_TEXT.sub(lambda m: m.group(1), payload)
  return _TEX_SPACE.sub(" ", payload).strip(_MARKUP)


def _letters_of(payload: str, options: list[str]) -> list[str]:
  """The letters a statement's payload names, in order ([] when it names none); a letter beyond the options
  is listed only beside another letter, so that "B or E" is two letters and "E" alone is none."""
  n = len(options)
  payload = _unwrap(payload)
  by_text = _text_index(options, payload)
  if by_text is not None and not re.fullmatch(r"\(?[A-Ja-j]\)?\.?", payload):
    return [LETTERS[by_text]]  # the whole payload is an option's text: "B and D are both true" is one option
  payload = _LEAD_IN.sub("", payload).strip(_MARKUP)
  if not payload:
    return []
  first = _LETTER.match(payload)
  whole = first is not None and not payload[first.end() :].strip(_MARKUP + ".:")
  if whole:  # the payload is only a letter: the letter (the prompt asks for letters), lowercase included
    letter = first.group("letter").upper()
    if LETTERS.index(letter) < n:
      return [letter]
  by_text = _text_index(options, payload)
  if by_text is not None:  # "Answer: probably 4.2 eV"
    return [LETTERS[by_text]]
  if first is not None:
    tokens, end = [first], first.end()
    while (join := _JOIN.match(payload, end)) and (nxt := _LETTER.match(payload, join.end())):
      tokens.append(nxt)
      end = nxt.end()
    tail = payload[end:]
    lower = any(t.group("letter").islower() for t in tokens)
    wrapped = first.group("close") or first.group("bold")
    if not tail.strip(_MARKUP + ".:"):
      letters = [t.group("letter").upper() for t in tokens]
    elif lower and not wrapped:
      letters = []  # "a bit unclear": lowercase letters in prose are words
    elif wrapped or _DELIMITED.match(tail) or _AFTER_WORD_LETTER.match(tail):
      letters = [t.group("letter").upper() for t in tokens]
    elif first.group("letter") not in "AI" and tail[:1] in " \t":  # "C because…"; "A reasonable…" is prose
      letters = [t.group("letter").upper() for t in tokens]
    else:
      letters = []
    distinct = list(dict.fromkeys(letters))
    if len(distinct) > 1:
      return distinct
    if distinct and LETTERS.index(distinct[0]) < n:
      return distinct
  # The payload opens with an option's text and goes on: "4.2 eV, since…"; the longest such option.
  key = _norm(payload)
  best = None
  for i, option in enumerate(options):
    opt = _norm(option)
    if key.startswith(opt) and _AFTER_TEXT.match(key[len(opt) :]):
      if best is None or len(opt) > len(_norm(options[best])):
        best = i
  return [LETTERS[best]] if best is not None else []


def _statements(text: str, options: list[str]) -> list[tuple[int, int, str, list[str]]]:
  """(start, end, kind, letters) of every explicit answer statement that names a letter or an option."""
  found = []
  for m in _ANSWER_LINE.finditer(text):
    found.append((m.start(), m.end(1), "answer line", _letters_of(m.group(1), options)))
  for start, end, content in _boxed_spans(text):
    found.append((start, end, "boxed", _letters_of(content, options)))
  for m in _ANSWER_IS.finditer(text):
    payload = _SENTENCE_END.split(m.group(1), maxsplit=1)[0]
    found.append((m.start(), m.start(1) + len(payload), "answer sentence", _letters_of(payload, options)))
  return sorted((s for s in found if s[3]), key=lambda s: (s[0], s[1]))


def _last_line(text: str, options: list[str]) -> str | None:
  """The letter of a last line that is only a letter, a letter and its option's text, or an option's text."""
  lines = [line for line in text.splitlines() if line.strip()]
  if not lines:
    return None
  line = lines[-1]
  n = len(options)
  m = _BARE_LETTER.match(line) if len(line) <= 40 else None  # (a long line of "*" is no letter: no backtracking)
  if m:
    return m.group(1) if LETTERS.index(m.group(1)) < n else None
  m = _LETTER_AND_TEXT.match(line)
  if m:
    letter = m.group(1) or m.group(2)
    i = LETTERS.index(letter)
    # Only with its own option's text: a last line "D) wrong, as shown" is reasoning about D, not an answer.
    return letter if i < n and _norm(options[i]) == _norm(m.group(3)) else None
  i = _text_index(options, line)
  return LETTERS[i] if i is not None else None


def extract_letter(completion: str, options: list[str]) -> tuple[str | None, str]:
  """The letter of a completion's final answer and how it was read, or (None, why not) (rules: module
  docstring). Reasons: "answer line", "boxed", "answer sentence", "last line"; "ended inside the thinking
  block", "two different final letters: B, C", "no answer"."""
  options = _check_options(options)
  split = thinking.split_thinking(completion)
  if split.unclosed:
    return None, "ended inside the thinking block"
  text = split.visible
  statements = _statements(text, options)
  if not statements:
    letter = _last_line(text, options)
    return (letter, "last line") if letter else (None, "no answer")
  # The final answer: the last statement and those overlapping it or next to it with nothing but
  # punctuation between (a reasoning step in between makes an earlier statement a revised draft).
  group = [statements[-1]]
  group_start = statements[-1][0]
  for start, end, kind, letters in reversed(statements[:-1]):
    if end >= group_start or _GAP.fullmatch(text[end:group_start]):
      group.append((start, end, kind, letters))
      group_start = min(group_start, start)
    else:
      break
  letters = list(dict.fromkeys(letter for s in reversed(group) for letter in s[3]))
  if len(letters) > 1:
    return None, f"two different final letters: {', '.join(letters)}"
  if LETTERS.index(letters[0]) >= len(options):
    return None, "no answer"
  return letters[0], statements[-1][2]


def score(completion: str, options: list[str], correct_index: int) -> tuple[float, str]:
  """1.0 iff the completion's final letter (`extract_letter`) is the correct option's; and why."""
  options = _check_options(options)
  if isinstance(correct_index, bool) or not isinstance(correct_index, numbers.Integral):
    raise ValueError(f"correct index must be an int, got {type(correct_index).__name__}")
  if not 0 <= correct_index < len(options):
    raise ValueError(f"correct index {correct_index} is out of range for {len(options)} options")
  correct = LETTERS[correct_index]
  letter, reason = extract_letter(completion, options)
  if letter is None:
    return 0.0, reason
  if letter == correct:
    return 1.0, f"answered {letter} (correct)"
  return 0.0, f"answered {letter}, correct is {correct}"
