"""Reading labels and reporting on them: first errors as step labels (`labels`), the product's
metrics (`metrics`: rates, F1, threshold rules and tuning, AUC), the ProcessBench metric (`evaluate`), label sources side by side (`compare`), summaries of any record file
(`stats`), Best-of-N with a PRM's scores (`bon`), and the rich tables they print (`tables`)."""
from prm_annotate.reports.evaluate import Report, SplitMetrics, evaluate, evaluate_scores
from prm_annotate.reports.labels import (Gold, Prediction, load_gold, load_gold_files, load_prediction_files,
                                         load_predictions, read_raw)
from prm_annotate.reports.metrics import Threshold

__all__ = ["Gold", "Prediction", "Report", "SplitMetrics", "Threshold", "evaluate", "evaluate_scores", "load_gold",
           "load_gold_files", "load_prediction_files", "load_predictions", "read_raw"]
