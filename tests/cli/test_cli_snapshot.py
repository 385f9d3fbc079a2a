"""Nothing a user's script relies on breaks: every command's options as they were when
tests/data/cli_options.json was written (testing/cli_snapshot.py) are still there, unchanged.

Options may be added. An entry dropped or changed on purpose goes in CHANGED with its reason, and
docs/contract.md ("Changed options") names it, so a user reading the contract learns of it.
"""
from __future__ import annotations

import json
from pathlib import Path

from testing.cli_snapshot import snapshot, walk

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "data" / "cli_options.json"

# "command :: --flag" -> why it was dropped or changed (docs/contract.md says so too).
CHANGED: dict[str, str] = {
    "train :: --base": "its type is TrainConfig's str, not Path: the same text is taken, and read as a path",
    "train :: --output": "its type is TrainConfig's str, not Path: the same text is taken, and read as a path",
    "stats :: argument 0 INPUT": "it takes several files (their bill is shown across them): one file is taken as "
                                 "before",
    "reward-server :: --step-sep": "its default is the separator itself (a blank line), as the stages', not its "
                                   "escaped spelling: the same separator once decoded",
}


def _same(field: str, before: object, now: object) -> bool:
    """A flag or `--no-` spelling may be added to an option (an alias breaks no script); nothing else."""
    if field in ("flags", "secondary") and isinstance(before, list) and isinstance(now, list):
        return set(before) <= set(now)
    return before == now


def differences(before: dict, now: dict, changed: dict[str, str]) -> list[str]:
    """What `now` drops or changes of `before`, each entry not in `changed`; additions (of options,
    or of an option's flags) are fine."""
    found = []
    for key, entry in before.items():
        if key in changed:
            continue
        if key not in now:
            found.append(f"{key}: dropped")
        else:
            fields = sorted(f for f in entry.keys() | now[key].keys() if not _same(f, entry.get(f), now[key].get(f)))
            if not fields:
                continue
            found.append(f"{key}: {', '.join(f'{f} {entry.get(f)!r} -> {now[key].get(f)!r}' for f in fields)}")
    return found


def test_every_option_of_the_snapshot_is_still_there_unchanged():
    before = json.loads(FIXTURE.read_text())
    assert len(before) > 250  # every command, not an empty fixture
    assert differences(before, snapshot(), CHANGED) == []


def test_the_contract_names_every_allowed_change():
    contract = (ROOT / "docs" / "contract.md").read_text()
    missing = [key for key in CHANGED if f"`{key.split(' :: ')[0]} {key.split(' :: ')[1]}`" not in contract]
    assert missing == []


def test_the_check_sees_a_dropped_a_changed_and_an_added_option():
    """Baseline: the same snapshot passes; then a dropped `--no-json`, a changed default and a
    changed environment variable fail, an added option does not, a listed change does not."""
    import typer
    import typer.main

    def app_with(json_flag: str, limit: int, envvar: str | None) -> typer.Typer:
        app = typer.Typer()

        @app.command()
        def cmd(as_json: bool = typer.Option(False, json_flag), limit: int = typer.Option(limit, "--limit"),
                url: str = typer.Option("", "--url", envvar=envvar), new: bool = typer.Option(False, "--new")) -> None:
            pass

        @app.command()
        def other() -> None:
            pass

        return app

    now = walk(typer.main.get_command(app_with("--json/--no-json", 8, "URL")))
    before = {k: v for k, v in now.items() if k != "cmd :: --new"}  # --new: added since
    assert before["cmd :: --json"]["secondary"] == ["--no-json"]
    assert differences(before, now, {}) == []
    now = walk(typer.main.get_command(app_with("--json", 9, None)))
    found = differences(before, now, {})
    assert [f.split(" :: ")[1].split(":")[0] for f in found] == ["--json", "--limit", "--url"]
    assert "secondary ['--no-json'] -> []" in found[0] and "default 8 -> 9" in found[1] and "envvar 'URL' -> None" in found[2]
    assert differences(before, now, {"cmd :: --json": "x", "cmd :: --limit": "y", "cmd :: --url": "z"}) == []
    # A spelling added to an option: -j beside --json, --no-json kept.
    aliased = walk(typer.main.get_command(app_with("--json/--no-json", 8, "URL")))
    aliased["cmd :: --json"] = {**aliased["cmd :: --json"], "flags": ["--json", "-j"]}
    assert differences(before, aliased, {}) == []
