"""The labelled files the reports' tests read too."""
from tests.reports.conftest import labelled  # noqa: F401
