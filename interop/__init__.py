"""Interop with the evaluation harnesses labs already use (Inspect, lm-evaluation-harness).

Export: any item set (a mapped benchmark, a DynToM subset, a study's items) as a task
the harness runs, each sample's id being our item key (:mod:`.keys`). Import: the
harness's results (Inspect logs, lm-eval ``--log_samples`` files) as imported runs,
through the same checking, scoring and upsert as a predictions file
(:mod:`modeling.runs.prediction_import`), so reports treat them like any other run.
"""
