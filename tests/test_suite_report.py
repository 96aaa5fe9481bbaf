"""The suite's merged report (tests/suite_report.py): passes run one after the other or side by side."""

from tests import suite_report


def _record(started, ended, peak, seconds):
  return dict(
    file_seconds=seconds,
    compiles=[{"programs": 1, "seconds": 0.5}],
    peak=peak,
    wall=ended - started,
    started=started,
    ended=ended,
  )


def _line(lines, prefix):
  return next(line for line in lines if line.startswith(prefix))


def test_passes_one_after_the_other_take_the_largest_peak_and_the_summed_wall():
  lines = suite_report.merged_lines([_record(0, 100, 3 * 2**30, {"a": 10.0}), _record(100, 150, 2 * 2**30, {"a": 5.0})])
  assert _line(lines, "peak memory").endswith(": 3.0 GiB")
  assert _line(lines, "wall") == "wall: 150 s"
  assert "15.0 s" in _line(lines, "  ") and lines[0].startswith("the 10 slowest files, of 15 worker-seconds")


def test_passes_side_by_side_add_their_peaks_and_span_their_wall():
  records = [_record(0, 100, 3 * 2**30, {"a": 10.0}), _record(5, 60, 2 * 2**30, {"b": 50.0})]
  assert suite_report.overlap(records) and not suite_report.overlap(records[:1])
  lines = suite_report.merged_lines(records)
  assert _line(lines, "peak memory").endswith(": 5.0 GiB")
  assert _line(lines, "wall") == "wall: 100 s"
  assert _line(lines, "XLA backend").startswith("XLA backend compiles in the suite's 2 test process(es): 2 programs")
