"""The spine: one funnel per source kind, incremental bookkeeping and snapshot assembly.

Plain functions, no Prefect: `refresh.refresh` runs a whole corpus refresh in-process;
`flows/` runs the same steps as cached Prefect tasks through a `steps.Runner`.
"""
