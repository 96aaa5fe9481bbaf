"""Reports on a run: the tournament inspector (`python -m launch.inspect`).

  inspector   `write_report(workdir)`: the run page and the step pages (static, self-contained HTML,
              jinja2 templates in `templates/`) from metrics.jsonl and the judge transcripts;
              `render_step` / `render_run` return one page's HTML (a notebook cell shows it)
"""
from arena_jax.report.inspector import InspectError, Report, kendall_tau, render_run, render_step, write_report
