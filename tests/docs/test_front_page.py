"""The front page stays a front page, and the figures keep their provenance.

README.md fits 180 lines, has its sections in the order a reader needs them (what it is, the loop, the two commands,
the three paths, bring your own, results, rooms, docs, limits) and names no commit hash, no tracker issue and no
"missed" target. The code names no tracker issue either: a clone cannot open one, so a comment says what and why and
cites SPEC §N (docs/spec.md). Every page of docs/results/ starts with what it measures and the one command that
reproduces it, and gives each run one provenance line (date, commit, machine). The links of the README and of the
results pages resolve, anchors included, and the `make` targets and `python -m` modules the README and docs/usage.md
name exist. That the README's commands still parse and run is tests/test_launch_commands.py's.

Text only: no subprocess, no JAX.
"""

import importlib.util
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
USAGE = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")
RESULTS = sorted((ROOT / "docs" / "results").glob("*.md"))
MAX_README_LINES = 180

# A commit named by its hash: 7 to 40 hexadecimal characters with a letter and a digit among them.
COMMIT = re.compile(r"(?<![\w/.-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w/-])")
ISSUE = re.compile(r"\bissues? #?\d+", re.IGNORECASE)
MISSED = re.compile(r"\bmissed\b", re.IGNORECASE)
# Where the issue rule holds: the code and every doc.
CODE = ("arena_jax", "launch", "configs", "benchmarks", "experiments", "tools", "docs")
TEXT_SUFFIXES = {".py", ".md", ".txt", ".html", ".jinja", ".sh", ".toml", ".cfg"}
# The sections, in order, and what each must hold.
SECTIONS = (
  "## The loop",
  "## Quick start",
  "## Three paths",
  "### A laptop with a real model",
  "### One GPU or Colab",
  "### A TPU slice",
  "## Bring your own",
  "### Your judge",
  "### Your data",
  "### Your model",
  "## Results",
  "## The rooms",
  "## Docs",
  "## Limits",
)
LINK = re.compile(r"\]\(([^)\s]+)\)")
COMMAND = re.compile(
  r"`[^`\n]*\b(?:make [\w-]+|python -m [\w.]+)[^`\n]*`|^(?: {4}|\t)(?:make |python -m )", re.MULTILINE
)
PROVENANCE = re.compile(
  r"^Runs?: \d{4}-\d{2}-\d{2}\b.*\bcommits? [0-9a-f]{7,40}\b.*\b(?:VM|machine|host)\b", re.MULTILINE
)


def _headings(text):
  return [line for line in text.splitlines() if re.match(r"#{2,3} ", line)]


def _section(text, heading):
  """From `heading` (a prefix of its line) to the next heading of its level or above."""
  start = text.index(f"\n{heading}")
  body = text.index("\n", start + 1)
  nxt = re.search(rf"^#{{2,{len(heading.split()[0])}}} ", text[body:], re.MULTILINE)
  return text[start : body + nxt.start() if nxt else None]


def _slug(heading):
  """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
  return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_readme_fits_a_front_page():
  lines = README.count("\n") + (not README.endswith("\n"))
  assert lines <= MAX_README_LINES, f"README.md has {lines} lines; the front page holds {MAX_README_LINES}"


def test_readme_sections_come_in_order():
  headings = _headings(README)
  found = [next((k for k, h in enumerate(headings) if h.startswith(s)), None) for s in SECTIONS]
  missing = [s for s, k in zip(SECTIONS, found) if k is None]
  assert not missing, f"README.md lacks the sections {missing}; it has {headings}"
  assert found == sorted(found), f"README.md's sections are out of order: {headings}"
  # What it is, before the first section: one paragraph a researcher reads first.
  intro = README[: README.index("\n## ")]
  assert "Reasoning Arena" in intro and "Bradley–Terry" in intro and "CISPO" in intro
  # The paths a reader came for are among the first headings, a screenful of them.
  for s in ("### One GPU or Colab", "### A TPU slice", "### Your judge", "## Results"):
    assert found[SECTIONS.index(s)] < 12, f"{s} is heading {found[SECTIONS.index(s)] + 1} of README.md"


def test_readme_sections_hold_what_they_promise():
  loop = _section(README, "## The loop")
  assert "```mermaid" in loop
  for step in ("sampler", "verifier", "router", "tournament", "Bradley–Terry", "CISPO"):
    assert step in loop, step
  quick = _section(README, "## Quick start")
  assert "make demo" in quick and "make test" in quick and quick.count("minutes") >= 2
  for heading, needs in (
    ("### A laptop with a real model", ("make real", "judge")),
    ("### One GPU or Colab", ("notebooks/quickstart.ipynb", "lora", "launch.serve", "docs/device.md")),
    ("### A TPU slice", ("docs/tpu.md", "vllm", "8b")),
    ("### Your judge", ("judge.urls", "verdict_format", "docs/judges.md")),
    ("### Your data", ("jsonl", "parquet", "docs/evaluation.md")),
    ("### Your model", ("hf_path", "gguf")),
  ):
    text = _section(README, heading).lower()
    for need in needs:
      assert need.lower() in text, f"README.md {heading}: no {need!r}"
  rows = [line for line in _section(README, "## Results").splitlines() if line.startswith("| ")][1:]
  assert 1 <= len(rows) <= 8, f"the results table has {len(rows)} rows; it holds at most 8"
  for row in rows:
    assert "](docs/results/" in row, f"a results row links no page of docs/results/: {row}"
  limits = [line for line in _section(README, "## Limits").splitlines() if line.startswith("- ")]
  assert 1 <= len(limits) <= 8, f"Limits has {len(limits)} bullets; it holds at most 8"
  bullets = _section(README, "## Limits").split("\n- ")[1:]
  for bullet in bullets:
    assert "](" in bullet, f"a limit links no page: {bullet}"


def test_readme_names_no_commit_issue_or_missed_target():
  assert not COMMIT.findall(README), f"README.md names commits: {COMMIT.findall(README)}"
  assert not ISSUE.findall(README), f"README.md names tracker issues: {ISSUE.findall(README)}"
  assert not MISSED.findall(README), "README.md reports a missed target: say the figure and what it is"


def _text_files(folder):
  for path in sorted((ROOT / folder).rglob("*")):
    rel = path.relative_to(ROOT)
    if path.is_file() and path.suffix in TEXT_SUFFIXES and not any(p.startswith((".", "__")) for p in rel.parts[:-1]):
      yield rel.as_posix(), path.read_text(encoding="utf-8", errors="replace")


def test_code_and_docs_name_no_tracker_issue():
  found = [
    f"{rel}:{text.count(chr(10), 0, m.start()) + 1}: {m.group()}"
    for folder in CODE
    for rel, text in _text_files(folder)
    for m in ISSUE.finditer(text)
  ]
  assert not found, "these cite a tracker issue a clone cannot open; say what and why instead:\n" + "\n".join(found)


def test_docs_outside_results_name_no_commit():
  """A commit hash belongs to a figure's provenance line in docs/results/, once."""
  found = [
    f"{path.name}: {m.group()}"
    for path in sorted((ROOT / "docs").glob("*.md"))
    for m in COMMIT.finditer(path.read_text(encoding="utf-8"))
  ]
  assert not found, f"docs outside docs/results/ name commits: {found}"


@pytest.mark.parametrize("page", RESULTS, ids=lambda p: p.name)
def test_results_page_starts_with_its_command_and_keeps_its_provenance(page):
  text = page.read_text(encoding="utf-8")
  lines = text.splitlines()
  assert lines and lines[0].startswith("# "), f"{page.name} starts with no title"
  head = "\n".join(lines[:15])
  assert COMMAND.search(head), f"{page.name}: no reproducing command (`make …` or `python -m …`) in its first 15 lines"
  assert PROVENANCE.search(text), f"{page.name}: no provenance line such as 'Run: <date>, commit <hash>, 2-core CPU VM'"
  assert not MISSED.findall(text), f"{page.name} reports a missed target: say the figure and the bound plainly"


def _links(path):
  text = path.read_text(encoding="utf-8")
  text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)  # code blocks hold no links
  for target in LINK.findall(text):
    if re.match(r"[a-z]+:", target):  # http(s), mailto: not checked here
      continue
    file, _, anchor = target.partition("#")
    yield target, (path.parent / file).resolve() if file else path, anchor


@pytest.mark.parametrize("page", [ROOT / "README.md", ROOT / "docs" / "benchmarks.md", *RESULTS], ids=lambda p: p.name)
def test_links_resolve(page):
  for target, path, anchor in _links(page):
    assert path.exists(), f"{page.name} links to {target}, which does not exist"
    if anchor and path.suffix == ".md":
      slugs = {_slug(h) for h in re.findall(r"^#+ (.+)$", path.read_text(encoding="utf-8"), re.MULTILINE)}
      assert anchor in slugs, f"{page.name} links to {target}, which has no such heading"


def test_named_make_targets_and_modules_exist():
  makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
  targets = set(re.findall(r"^([\w-]+):", makefile, re.MULTILINE))
  for name, text in (("README.md", README), ("docs/usage.md", USAGE)):
    for target in set(re.findall(r"(?:`|^)make ([a-z][\w-]*)", text, re.MULTILINE)):
      assert target in targets, f"{name} names `make {target}`, which the Makefile does not have"
    for module in set(re.findall(r"python -m ((?:launch|benchmarks|tools|experiments)\.\w+)", text)):
      assert importlib.util.find_spec(module) is not None, f"{name} runs `python -m {module}`, which does not exist"
