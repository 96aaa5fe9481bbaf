"""The inspector's pages in a real browser: headless Chromium (Debian's `chromium`; `make test-all` installs it
when it can) loads the run page and a step page of a real run, with no console error, the expected
elements, working filters, and a screenshot."""

import os

import pytest

from arena_jax.report import inspector
from arena_jax.train import read_groups, read_metrics
from tests.train import chromium

# The slow tier: it needs Chromium, which `make test-all` installs (the Makefile's `chromium` target) and `make test`
# does not; the pages' HTML is tests/train/test_inspect.py's, in both tiers.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def browser():
  if chromium.find_chromium() is None:
    reason = (
      "no Chromium on PATH: the browser test is skipped (apt-get install -y chromium; `make test-all` does it "
      "when run as root)"
    )
    print(reason)
    pytest.skip(reason)
  with chromium.Browser() as b:
    yield b


def test_the_report_renders_in_chromium(judged_run, browser, tmp_path):
  report = inspector.write_report(judged_run, str(tmp_path / "report"))
  groups = list(read_groups(judged_run))
  run = browser.open("file://" + report.run_page)
  assert run.errors == []
  assert run.evaluate("document.querySelectorAll('tr.step-row').length") == len(read_metrics(judged_run))
  assert run.evaluate("document.querySelectorAll('#charts svg polyline').length") >= len(inspector.CURVES)
  run.screenshot(str(tmp_path / "run.png"))

  step = max(report.step_pages, key=lambda s: sum(g["step"] == s for g in groups))
  mine = [g for g in groups if g["step"] == step]
  page = browser.open("file://" + report.step_pages[step])
  assert page.errors == [], page.errors
  count = lambda selector: page.evaluate(f"document.querySelectorAll({selector!r}).length")
  assert count(".group-card") == len(mine)  # one card per routed group
  assert count("tr.match") == sum(len(g["matches"]) for g in mine)  # one row per match
  assert count(".member") == sum(len(g["traces"]) for g in mine)
  assert (
    page.evaluate("document.getElementById('shown-count').textContent") == f"{len(mine)} of {len(mine)} group(s) shown"
  )
  # The "failures only" filter hides the cards without a failed judgment (the embedded judge fails none here).
  failed = sum(any(m["failure_reason"] for m in g["matches"]) for g in mine)
  page.evaluate("(() => { const b = document.querySelector('input[data-filter=failures]'); b.click(); })()")
  assert count(".group-card:not(.hidden)") == failed
  page.evaluate("document.querySelector('input[data-filter=failures]').click()")
  assert count(".group-card:not(.hidden)") == len(mine)
  # A match's answer opens on click.
  page.evaluate("document.querySelector('tr.match details summary').click()")
  assert page.evaluate("document.querySelector('tr.match details').open") is True
  assert page.errors == []
  shot = page.screenshot(str(tmp_path / "step.png"), full_page=True)
  with open(shot, "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"
  assert os.path.getsize(shot) > 10_000
  print(f"screenshots: {tmp_path / 'run.png'}, {shot}")


def test_the_browser_check_sees_console_errors_and_exceptions(browser, tmp_path):
  """The check above can fail: a page that logs an error and throws is reported."""
  bad = tmp_path / "bad.html"
  bad.write_text("<html><body><script>console.error('boom'); undefinedFunction();</script></body></html>")
  page = browser.open(bad.as_uri())
  assert any("boom" in e for e in page.errors) and any("undefinedFunction" in e for e in page.errors), page.errors
