"""Where the repository and the test data are, for tests and benchmarks wherever they sit."""
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TEST_DATA = REPO / "tests" / "data"  # sources: tests/data/SOURCES.md
