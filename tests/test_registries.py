"""Every named kind the project owns is one `Registry` in one style, and every table of names in the
docs is its registry's (testing/registries.py finds both)."""
from __future__ import annotations

import ast
import re

import pytest

from prm_annotate.errors import UsageError
from prm_annotate.registry import NAME, Registry
from testing.paths import REPO
from testing.registries import PACKAGE, doc_tables, load, registry_names, stale

# Every named kind, by where its registry lives. A new kind of thing chosen by name is a new
# registry: add it here, and a table of its names (docs/names.md, `python -m testing.registries`).
KINDS = {
    "prm_annotate.io.inputs.INPUT_FORMATS",
    "prm_annotate.segmenting.SEGMENTERS",
    "prm_annotate.io.prompt_files.SYSTEM_PROMPTS",
    "prm_annotate.strategies.STRATEGIES",
    "prm_annotate.strategies.zero_rules.ZERO_RULES",
    "prm_annotate.recovery.rules.RECOVERY_RULES",
    "prm_annotate.judging.prompts.JUDGE_PROMPTS",
    "prm_annotate.judging.JUDGE_STYLES",
    "prm_annotate.judging.JUDGE_PROTOCOLS",
    "prm_annotate.judging.cascade.CONFIDENCES",
    "prm_annotate.stages.consensus.CONSENSUS_RULES",
    "prm_annotate.export.formats.EXPORT_FORMATS",
    "prm_annotate.prm.data.READERS",
    "prm_annotate.prm.train.PRM_HEADS",
    "prm_annotate.prm.likelihood.LIKELIHOOD_HEADS",
    "prm_annotate.prm.scorers.SCORERS",
    "prm_annotate.evaluation.benchmarks.BENCHMARKS",
    "prm_annotate.reports.aggregates.AGGREGATES",
    "prm_annotate.pipeline.executors.EXECUTORS",
}


def test_the_source_has_exactly_the_listed_registries():
    assert set(registry_names()) == KINDS


@pytest.mark.parametrize("dotted", sorted(KINDS))
def test_each_registry_is_in_the_one_style(dotted):
    """Each entry: a name (lower case, words joined by -), the key it is listed under; a summary of
    one line; its settings as a mapping. The help lists every name; an unknown name is exit 2
    listing them; the doc it points to exists."""
    registry = load(dotted)
    assert isinstance(registry, Registry) and len(registry) >= 1
    assert registry.flag and registry.purpose and (REPO / registry.doc).is_file(), registry.doc
    for name, kind in registry.items():
        assert NAME.fullmatch(name) and kind.name == name, name
        summary = registry.summary_of(name)
        assert summary and "\n" not in summary and len(summary) <= 120 and not summary.endswith("."), (name, summary)
        assert isinstance(registry.settings_of(name), dict), name
    help_text = registry.help()
    assert all(name in help_text for name in registry.choices()), help_text
    with pytest.raises(UsageError) as refused:
        registry.named("no-such-kind")
    assert registry.flag in str(refused.value) and all(name in str(refused.value) for name in registry)


def test_no_plain_dict_of_named_kinds_is_left():
    """A dict built as `{k.name: k for k in (...)}` at a module's top is a registry written the old way."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
            if isinstance(value, ast.DictComp) and isinstance(value.key, ast.Attribute) and value.key.attr == "name":
                found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert found == []


def test_every_registry_has_a_table_and_every_table_is_its_registry():
    tabled = {dotted for _, _, dotted, _ in doc_tables()}
    assert tabled == KINDS  # docs/names.md has them all; a hand table is checked too
    assert stale() == []


def test_the_table_check_sees_a_missing_kind_and_a_stale_summary(tmp_path):
    segmenters = load("prm_annotate.segmenting.SEGMENTERS")
    rows = "\n".join(f"| `{name}` | ... |" for name in list(segmenters)[:-1])
    doc = tmp_path / "doc.md"
    doc.write_text(f"<!-- names: prm_annotate.segmenting.SEGMENTERS -->\n| name | what |\n|---|---|\n{rows}\n\n"
                   f"<!-- table: prm_annotate.strategies.STRATEGIES -->\n"
                   f"{load('prm_annotate.strategies.STRATEGIES').table().replace('bisection', 'bisecting')}\n"
                   "<!-- /table -->\n")
    found = stale([doc])
    assert len(found) == 2 and list(segmenters)[-1] in found[0] and "stale" in found[1]


def test_a_renamed_name_is_still_taken_with_a_note(capsys, monkeypatch):
    aggregates = load("prm_annotate.reports.aggregates.AGGREGATES")
    monkeypatch.setattr(aggregates, "_noted", set())  # as in a fresh process (another test may have said it)
    assert aggregates.named("product") is aggregates["prod"] and aggregates.named("product") is aggregates["prod"]
    err = capsys.readouterr().err
    assert err.count("--aggregate product is now called prod") == 1  # said once


def test_one_name_per_aggregate_for_the_reward_and_bon():
    from prm_annotate.reports import bon
    from prm_annotate.reward import protocols

    aggregates = load("prm_annotate.reports.aggregates.AGGREGATES")
    assert set(bon.BON_AGGREGATES) <= set(aggregates)
    assert protocols._aggregate({"aggregate": "product"}) == "prod"
    with pytest.raises(protocols.BadRequest, match="min, prod, last, recovered"):
        protocols._aggregate({"aggregate": "mean"})  # bon's only
    assert not re.search(r"\bAGGREGATIONS\b", (PACKAGE / "reports" / "bon.py").read_text())
