"""The tournament inspector: a run's judge transcripts as static HTML (`arena_jax.report.inspector`).

    python -m launch.inspect --workdir=runs/demo_arena_live                 # run page + every step page
    python -m launch.inspect --workdir=runs/demo_arena_live --step=40 --groups=0,3
    python -m launch.inspect --workdir=... --output=/tmp/report

Writes <output>/index.html (the run page: curves, routed fraction, judge calls and failures by reason,
links to steps) and <output>/step-<step>.html (every routed group: problem, trajectories with the process
checker's step marks, the tournament, the judge's answers, strengths and rewards; filters for failures,
upsets and BT / win-rate disagreement). No server and no network: open index.html from disk. It reads
the run crash-safely, so it works on a workdir that is still being trained; run it again to refresh.
Needs transcripts: `judge.transcripts` > 0 (the default records every judge call).
"""

from absl import flags

from arena_jax import cli
from arena_jax.report import inspector

_WORKDIR = flags.DEFINE_string("workdir", None, "The RL run directory.", required=True)
_STEP = flags.DEFINE_string(
  "step", None, "Only these steps' pages: 40, 10,20 or 10-20 (default: every step with transcripts)."
)
_GROUPS = flags.DEFINE_string("groups", None, "Only these groups (indices in the step's batch): 0,3 or 0-7.")
_OUTPUT = flags.DEFINE_string("output", None, "Output directory (default <workdir>/inspect).")


def main(argv):
  del argv
  report = inspector.write_report(
    _WORKDIR.value,
    _OUTPUT.value,
    steps=inspector.parse_ints(_STEP.value, "step"),
    groups=inspector.parse_ints(_GROUPS.value, "groups"),
  )
  print(f"wrote {report.run_page} and {len(report.step_pages)} step page(s) in {report.directory}")


if __name__ == "__main__":
  cli.run(main)
