"""Measuring against gold: first errors as step labels and predictions read (`labels`; what
`evaluate` and `compare` hold per id: `label_sets`), the
product's metrics (`metrics`: rates, F1, threshold rules and tuning, AUC), the ProcessBench metric
(`evaluate`), and the benchmarks `evaluate --benchmark` knows (`benchmarks`: PRMBench's metric in
`prmbench`, Hard2Verify's in `hard2verify`, DeltaBench's in `deltabench`). The reports of a labelled
set (stats, HTML, tables, comparisons) are `prm_annotate.reports`'."""
from prm_annotate.evaluation.evaluate import Report, SplitMetrics, evaluate, evaluate_scores
from prm_annotate.evaluation.label_sets import GoldSet, PredictionSet, read_gold, read_predictions
from prm_annotate.evaluation.labels import Gold, Prediction, load_gold, load_prediction_files, load_predictions, read_raw
from prm_annotate.evaluation.metrics import Threshold

__all__ = ["Gold", "GoldSet", "Prediction", "PredictionSet", "Report", "SplitMetrics", "Threshold", "evaluate",
           "evaluate_scores", "load_gold", "load_prediction_files", "load_predictions", "read_gold", "read_predictions",
           "read_raw"]
