"""Reports on a run: the tournament inspector (`python -m launch.inspect`), judges compared (`launch.rescore`).

inspector   `write_report(workdir)`: the run page and the step pages (static, self-contained HTML,
            jinja2 templates in `templates/`) from metrics.jsonl and the judge transcripts;
            `render_step` / `render_run` return one page's HTML (a notebook cell shows it)
rescore     `rescore(workdir, judge_config, urls)`: a run's stored pairs re-judged by another judge, and
            how the two agree (verdicts and Cohen's κ, BT Kendall τ per group, position bias;
            `python -m launch.rescore`)
"""

from arena_jax.report.inspector import InspectError, Report, kendall_tau, render_run, render_step, write_report
from arena_jax.report.rescore import RescoreReport, cohen_kappa, rescore
