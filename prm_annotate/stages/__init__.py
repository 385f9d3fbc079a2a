"""The pipeline's stages, one per module: sample, rollout, judge and score use a model (their
work runs on the scheduler, `common.ModelStage`); grade and consensus do not. Each model stage
takes one frozen settings object (`config.SampleConfig`, `RolloutConfig`, `JudgeConfig`), which is
also its command's options and its manifest entry. The runner (prm_annotate.pipeline) reads and
writes their records."""
from prm_annotate.stages.config import JudgeConfig, RolloutConfig, SampleConfig

__all__ = ["JudgeConfig", "RolloutConfig", "SampleConfig"]
