"""``batchrl bench``: named suites of training runs (configs x environments x seeds) that
resume where they stopped, run several at once, and write their table with published
references (``batchrl.bench.suites``, ``batchrl.bench.runs``, ``batchrl.bench.report``)."""
