"""The Process Reward Model: its checkpoint and the text it reads (`checkpoint`: `PRMFormat`,
`prm_token_ids`, `locate` for a folder or a hub id in the local cache), training on transformers'
`Trainer` (`train.train(TrainConfig(...))`; `model`, `data`, `trainer`; its eval metrics are evaluation/metrics.py's), and the ways to
score with one (`scorers.SCORERS`: in process through vLLM, behind `vllm serve`, a Math-Shepherd
causal LM). torch and transformers load only with the modules that need them."""
from prm_annotate.prm.checkpoint import ARCHITECTURE, Checkpoint, PRMFormat, locate, prm_token_ids, tag_in_text
from prm_annotate.prm.scorers import SCORERS, Scorer, scorer_for

__all__ = ["ARCHITECTURE", "SCORERS", "Checkpoint", "PRMFormat", "Scorer", "locate", "prm_token_ids", "scorer_for",
           "tag_in_text"]
