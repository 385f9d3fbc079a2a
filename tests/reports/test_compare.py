"""`compare`: rollout, judged and consensus files built from real ProcessBench records, with the
agreement matrix and each source's numbers checked against plain computations on the same data."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from prm_annotate.cli import app
from testing.labelled_fixtures import reference_metric, write_jsonl

runner = CliRunner()


def run(*args: str) -> dict:
    result = runner.invoke(app, ["compare", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_agreement_and_metrics(labelled):
    records, built, files = labelled
    out = run(str(files["rollouts"]), str(files["judged"]), str(files["consensus"]), "--gold", str(files["gold"]))
    src = out["sources"]
    assert {name: s["field"] for name, s in src.items()} == {
        "rollouts": "mc.first_error", "judged": "judge.first_error", "consensus": "first_error"}

    columns = {
        "gold": {r["id"]: r["label"] for r in records},
        "rollouts": {r["id"]: r["mc"]["first_error"] for r in built["rollouts"]},
        "judged": {r["id"]: r["judge"]["first_error"] for r in built["judged"]},
        "consensus": {r["id"]: r["first_error"] for r in built["consensus"]},
    }
    for a, col_a in columns.items():
        for b, col_b in columns.items():
            shared = [i for i in col_a if col_a[i] is not None and col_b.get(i) is not None]
            cell = out["agreement"][a][b]
            assert cell["shared"] == len(shared)
            assert cell["agree"] == pytest.approx(100 * sum(col_a[i] == col_b[i] for i in shared) / len(shared))
    # by construction the consensus agrees with both its sources wherever it labels
    assert out["agreement"]["consensus"]["rollouts"]["agree"] == 100.0
    assert out["agreement"]["consensus"]["judged"]["agree"] == 100.0
    assert out["agreement"]["rollouts"]["judged"]["agree"] < 100.0

    n = len(records)
    cons = src["consensus"]
    assert cons["labelled"] == len(built["consensus"]) < n
    assert cons["coverage"] == pytest.approx(100 * len(built["consensus"]) / n)
    kept_gold = [r for r in records if r["id"] in columns["consensus"]]
    expected_kept, expected_kept_avg = reference_metric(kept_gold, columns["consensus"])
    for split, (acc1, acc2, f1, count) in expected_kept.items():
        m = cons["kept"]["splits"][split]
        assert (m["error_acc"], m["correct_acc"], m["n"]) == (pytest.approx(acc1), pytest.approx(acc2), count)
    assert cons["kept"]["average_f1"] == pytest.approx(expected_kept_avg)
    _, expected_all_avg = reference_metric(records, columns["consensus"])
    assert cons["all"]["average_f1"] == pytest.approx(expected_all_avg)
    assert cons["all"]["missing_predictions"] == n - len(built["consensus"])

    judged = src["judged"]
    unparsed = sum(v is None for v in columns["judged"].values())
    assert judged["labelled"] == n - unparsed and judged["records"] == n
    _, judged_all = reference_metric(records, columns["judged"])
    assert judged["all"]["average_f1"] == pytest.approx(judged_all)

    # precision of the consensus' kept step labels, against gold step labels (steps after the gold
    # first error have no gold label and are not compared)
    matched = compared = 0
    gold_by_id = {r["id"]: r for r in records}
    for rec in built["consensus"]:
        g = gold_by_id[rec["id"]]
        gold_labels = [True] * len(g["steps"]) if g["label"] == -1 else [True] * g["label"] + [False]
        for ours, theirs in zip(rec["labels"], gold_labels):
            compared += 1
            matched += ours == theirs
    assert cons["step_labels_compared"] == compared
    assert cons["step_label_precision"] == pytest.approx(100 * matched / compared)


def test_field_override_and_table(labelled, tmp_path):
    records, built, files = labelled
    # a merged file with both mc and judge: which first error to use must be named
    merged = [{**r, "judge": j["judge"]} for r, j in zip(built["rollouts"], built["judged"])]
    path = write_jsonl(tmp_path / "merged.jsonl", merged)
    ambiguous = runner.invoke(app, ["compare", str(path), "--gold", str(files["gold"])])
    assert ambiguous.exit_code == 2 and "both mc.first_error and judge.first_error" in ambiguous.stderr
    out = run(str(path), "--gold", str(files["gold"]), "--field", f"{path}=judge.first_error")
    assert out["sources"]["merged"]["field"] == "judge.first_error"
    assert out["agreement"]["merged"]["gold"] == run(str(files["judged"]), "--gold", str(files["gold"]))["agreement"]["judged"]["gold"]

    table = runner.invoke(app, ["compare", str(files["rollouts"]), str(files["consensus"]), "--gold", str(files["gold"])])
    assert table.exit_code == 0 and "Agreement" in table.stdout and "consensus" in table.stdout


def test_bad_usage(labelled, tmp_path):
    _, _, files = labelled
    r = runner.invoke(app, ["compare", str(files["rollouts"]), "--gold", str(files["gold"]), "--field", "other.jsonl=x"])
    assert r.exit_code == 2 and "not compared" in r.stderr
    r = runner.invoke(app, ["compare", str(files["rollouts"]), "--gold", str(files["gold"]), "--field", "nofield"])
    assert r.exit_code == 2 and "FILE=dotted.path" in r.stderr
    odd = write_jsonl(tmp_path / "odd.jsonl", [{"id": "gsm8k-0", "x": 1}])
    r = runner.invoke(app, ["compare", str(odd), "--gold", str(files["gold"])])
    assert r.exit_code == 2 and f"{odd}:1:" in r.stderr


def test_ids_outside_the_gold_nulls_and_split_field_against_plain_dicts(tmp_path):
    """The columns by gold position (evaluation/label_sets.py) against the plain computation over dicts
    of ids: two sources that share ids the gold lacks, null predictions, records of their own, and a
    split read from the prediction where the gold record has none."""
    import random

    rng = random.Random(59)
    gold = [{"id": f"g-{i}", "steps": ["s"] * 4, "label": rng.choice([-1, 0, 1, 2, 3]),
             **({"meta": {"src": rng.choice("ab")}} if i % 3 else {})} for i in range(120)]
    outside = [f"x-{i}" for i in range(40)]

    def source(ids: list[str]) -> list[dict]:
        return [{"id": rid, "steps": ["s"] * 4, "meta": {"src": rng.choice("abc")},
                 "first_error": rng.choice([None, -1, 0, 1, 2, 3])} for rid in ids]

    ids = [g["id"] for g in gold]
    a = source(rng.sample(ids, 90) + outside[:30])
    b = source(rng.sample(ids, 70) + outside[10:])
    rng.shuffle(a)
    rng.shuffle(b)
    files = [write_jsonl(tmp_path / f"{n}.jsonl", rows) for n, rows in (("a", a), ("b", b))]
    out = run(*map(str, files), "--gold", str(write_jsonl(tmp_path / "gold.jsonl", gold)), "--split-field", "meta.src")

    columns = {"gold": {g["id"]: g["label"] for g in gold}, "a": {r["id"]: r["first_error"] for r in a},
               "b": {r["id"]: r["first_error"] for r in b}}
    for x, col_x in columns.items():
        for y, col_y in columns.items():
            shared = [i for i in col_x if col_x[i] is not None and col_y.get(i) is not None]
            assert out["agreement"][x][y] == {
                "shared": len(shared),
                "agree": 100.0 * sum(col_x[i] == col_y[i] for i in shared) / len(shared) if shared else None}
    # ids outside the gold are compared between the sources: more shared than on gold ids alone
    on_gold = sum(1 for i in columns["gold"] if columns["a"].get(i) is not None and columns["b"].get(i) is not None)
    assert out["agreement"]["a"]["b"]["shared"] > on_gold
    for name, rows in (("a", a), ("b", b)):
        got = out["sources"][name]
        by_id = {r["id"]: r for r in rows}
        assert got["records"] == len(rows)
        assert got["not_in_gold"] == sum(r["id"] not in columns["gold"] for r in rows)
        assert got["labelled"] == sum(r["first_error"] is not None for r in rows if r["id"] in columns["gold"])
        split_of = {g["id"]: g["meta"]["src"] if "meta" in g else by_id[g["id"]]["meta"]["src"] if g["id"] in by_id
                    else "unknown" for g in gold}
        counts: dict[str, int] = {}
        for rid in split_of:
            counts[split_of[rid]] = counts.get(split_of[rid], 0) + 1
        assert {s: m["n"] for s, m in got["all"]["splits"].items()} == counts
        assert got["all"]["missing_predictions"] == sum(rid not in by_id for rid in columns["gold"])
        # step labels from first errors, on the steps both sides label
        matched = compared = 0
        for g in gold:
            p = by_id.get(g["id"], {}).get("first_error")
            if p is not None:
                for ours, theirs in zip(_labels(p, 4), _labels(g["label"], 4)):
                    compared += 1
                    matched += ours == theirs
        assert got["step_labels_compared"] == compared
        assert got["step_label_precision"] == pytest.approx(100 * matched / compared)


def _labels(first_error: int, n: int) -> list[bool]:
    return [True] * n if first_error == -1 else [True] * first_error + [False]


@pytest.mark.parametrize("where", ["gold", "source"])
def test_a_repeated_id_before_a_bad_line_is_the_error_said(tmp_path, where):
    """Ids are kept as keys and a repeat found from them; a repeat met before another bad line is
    still the error said, naming both places, as when every id was held."""
    gold = [{"id": f"g-{i}", "label": -1} for i in range(5)]
    source = [{"id": "g-1", "first_error": 0}, {"id": "x-1", "first_error": 0}, {"id": "x-2", "first_error": 1},
              {"id": "g-2", "first_error": 0}]
    if where == "gold":
        gold += [gold[3], {"id": "g-9", "label": "bad"}]
        repeat = "gold.jsonl:6: duplicate id 'g-3' (first seen at line 4)"
    else:  # a repeat of an id outside the gold, then a bad value
        source += [{"id": "x-1", "first_error": 2}, {"id": "g-4", "first_error": "bad"}]
        repeat = "p.jsonl:5: duplicate id 'x-1' (first seen at line 2)"
    args = [str(write_jsonl(tmp_path / "p.jsonl", source)), "--gold", str(write_jsonl(tmp_path / "gold.jsonl", gold))]
    for command in ("compare", "evaluate"):
        result = runner.invoke(app, [command, *args])
        assert result.exit_code == 2 and result.stderr.strip().endswith(repeat), result.output
