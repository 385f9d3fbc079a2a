"""Command-line interface. Each command lives in its own module and registers itself on `app` in its
`--help` panel (cli/app.py's PANELS: label; train and score; evaluate; inspect; tools); `--help`
lists the panels in that order and each panel's commands in import order: the pipeline first
(sample, rollout, judge, consensus), as docs/contract.md and README's command list do
(tests/cli/test_cli_input.py and tests/cli/test_help_text.py check them)."""
from prm_annotate.cli.app import app

from prm_annotate.cli import sample  # noqa: E402,F401
from prm_annotate.cli import rollout  # noqa: E402,F401
from prm_annotate.cli import judge  # noqa: E402,F401
from prm_annotate.cli import consensus  # noqa: E402,F401
from prm_annotate.cli import grade  # noqa: E402,F401
from prm_annotate.cli import segment  # noqa: E402,F401
from prm_annotate.cli import export  # noqa: E402,F401
from prm_annotate.cli import train  # noqa: E402,F401
from prm_annotate.cli import score  # noqa: E402,F401
from prm_annotate.cli import reward_server  # noqa: E402,F401
from prm_annotate.cli import evaluate  # noqa: E402,F401
from prm_annotate.cli import compare  # noqa: E402,F401
from prm_annotate.cli import bon  # noqa: E402,F401
from prm_annotate.cli import stats  # noqa: E402,F401
from prm_annotate.cli import report  # noqa: E402,F401
from prm_annotate.cli import plan  # noqa: E402,F401
from prm_annotate.cli import merge  # noqa: E402,F401
from prm_annotate.cli import models  # noqa: E402,F401
from prm_annotate.cli import world  # noqa: E402,F401


def main() -> None:
    app()
