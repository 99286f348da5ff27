"""The snapshot report: the page (report.html) and the funnel as Markdown.

`data` computes what the page shows, `charts` draws it, `markup` holds the HTML building blocks,
`page` assembles report.html, `markdown` writes the funnel for the console and Prefect.
"""
