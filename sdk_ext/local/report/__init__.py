"""The HTML report of a trial and its job: what it shows, read from the trial and job (``data``), drawn as inline SVG
(``svg``, ``xgboost_parts``) and written as one self-contained page (``html``).

May import: sdk_ext.trials, sdk_ext.rules.status, sdk_ext.local.jobs (job state and rule outcomes). Never the CLI.
"""

from sdk_ext.local.report.html import render_html, write_report

__all__ = ["render_html", "write_report"]
