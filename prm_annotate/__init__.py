"""prm-annotate: step-level training data for Process Reward Models."""
__version__ = "0.1.0"
