"""Running a stage: the loop every stage shares (`runner`: read and validate, skip finished work,
write crash-safely, summarise, record the manifest), the scheduler that keeps one engine busy
with many records in flight (`scheduler`, its speculation in `speculation`), progress, and where
a stage's records run (`executors`: here, or on Ray).

    summary = run_and_close(stage, RunOptions(input="in.jsonl", output="out.jsonl"))
"""
from prm_annotate.pipeline.runner import (Outcome, RunOptions, RunSummary, Stage, StageBase, preflight, run_and_close,
                                          run_stage)
from prm_annotate.pipeline.scheduler import Job, Round, run_jobs

__all__ = ["Job", "Outcome", "Round", "RunOptions", "RunSummary", "Stage", "StageBase", "preflight", "run_and_close",
           "run_jobs", "run_stage"]
