"""The snapshot report: the page (report.html) and the funnel as Markdown.

`data` computes what the page shows, `charts` draws it, `markup` holds the HTML building blocks,
`page` assembles report.html, `markdown` writes the funnel for the console and Prefect.
"""

from pipeline.publish.report.data import SampleDigest, snapshot_history
from pipeline.publish.report.markdown import funnel_markdown
from pipeline.publish.report.page import render_report

__all__ = ["SampleDigest", "funnel_markdown", "render_report", "snapshot_history"]
