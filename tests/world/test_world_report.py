"""`prm-annotate world report` end to end on a very small world, through the real engines.

One real process (the policy's engine for sample and rollout, then the judge's), then every number
the report gives is recomputed here from the files it wrote, without `compare`: the truth from the
problems and the responses, each source's ProcessBench metric, the consensus ids and kept-label
precision, the tokens. The printed table is rendered from the same report and must show them.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from prm_annotate.engines.quiet import QUIET_ENV
from prm_annotate.world.truth import true_first_error
from testing.heavy import ENGINE_START_TIMEOUT
from testing.jsonl_files import group_alive
from testing.jsonl_files import read_jsonl as read

CLI = [sys.executable, "-m", "prm_annotate"]
TIMEOUT = ENGINE_START_TIMEOUT + 120


def processbench(truth: dict[str, int], preds: dict[str, int | None]) -> dict[str, float | None]:
    """Error acc, correct acc, F1 (percent), written out independently of prm_annotate.evaluation.evaluate."""
    err = [rid for rid, t in truth.items() if t != -1]
    ok = [rid for rid, t in truth.items() if t == -1]
    error_acc = 100.0 * sum(preds.get(r) == truth[r] for r in err) / len(err) if err else None
    correct_acc = 100.0 * sum(preds.get(r) == -1 for r in ok) / len(ok) if ok else None
    if error_acc is None or correct_acc is None:
        f1 = None
    else:
        f1 = 2 * error_acc * correct_acc / (error_acc + correct_acc) if error_acc + correct_acc else 0.0
    return {"error_acc": error_acc, "correct_acc": correct_acc, "f1": f1}


def close(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and abs(a - b) < 1e-9)


@dataclass
class WorldRun:
    workdir: Path
    out: str


@pytest.fixture(scope="module")
def world_run(tmp_path_factory) -> WorldRun:
    """One `world report` run, shared by the tests of this file (its files, its printed JSON)."""
    workdir = tmp_path_factory.mktemp("world-report") / "world"
    workdir.mkdir()
    # A stale file of an earlier report must not leak into this one (stages resume from disk).
    (workdir / "consensus.jsonl").write_bytes(orjson.dumps({"id": "stale/0"}) + b"\n")
    cmd = [*CLI, "world", "report", "--problems", "6", "-n", "2", "-k", "2", "--seed", "1",
           "--workdir", str(workdir), "--json"]
    # As a user's shell would start it: an in-process engine of an earlier test sets
    # VLLM_LOGGING_LEVEL in this process, and the report leaves a variable the user set alone.
    env = {k: v for k, v in os.environ.items() if k not in QUIET_ENV}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env=env)
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    assert proc.returncode == 0, err[-4000:]
    assert group_alive(proc.pid) == [], "the report left engine processes running"
    # The pipeline's own lines only: the stages' summaries and consensus's table, no library's
    # warning, log line or progress bar (--verbose shows those).
    ours = re.compile(r"^(sample|rollout|judge|consensus|report): |^ *MC vs judge: first error *$|^[┏┃┡│├└]")
    assert [line for line in err.splitlines() if line.strip() and not ours.match(line)] == []
    return WorldRun(workdir, out)


# The tests of this file take the one run: they go to one worker.
@pytest.mark.engine
@pytest.mark.xdist_group("world-report")
def test_world_report_numbers_match_the_files(world_run, capsys):
    workdir, out = world_run.workdir, world_run.out
    report = orjson.loads(out)

    problems = {p["id"]: p for p in read(workdir / "problems.jsonl")}
    responses = read(workdir / "responses.jsonl")
    rollouts = {r["id"]: r for r in read(workdir / "rollouts.jsonl")}
    judged = {r["id"]: r for r in read(workdir / "judged.jsonl")}
    consensus = {r["id"]: r for r in read(workdir / "consensus.jsonl")}
    gold = {g["id"]: g for g in read(workdir / "gold.jsonl")}
    assert len(problems) == 6 and len(responses) == 12 == report["responses"]
    ids = {r["id"] for r in responses}
    assert set(rollouts) == set(judged) == set(gold) == ids

    # The truth, recomputed from the problems and the sampled steps.
    truth = {r["id"]: true_first_error(problems[r["problem_id"]], r["steps"]) for r in responses}
    assert {rid: g["label"] for rid, g in gold.items()} == truth
    assert report["truth"]["with_error"] == sum(t != -1 for t in truth.values())

    # Consensus = exactly the ids where MC and the judge name the same first error.
    agree = {rid for rid in ids if rollouts[rid]["mc"]["first_error"] == judged[rid]["judge"]["first_error"]}
    assert set(consensus) == agree
    assert report["consensus_kept"] == len(agree)
    assert close(report["consensus_kept_percent"], 100.0 * len(agree) / 12)

    # Each source's metric on the responses it labels.
    preds = {
        "MC": {rid: r["mc"]["first_error"] for rid, r in rollouts.items()},
        "judge": {rid: r["judge"]["first_error"] for rid, r in judged.items()},
        "consensus": {rid: r["first_error"] for rid, r in consensus.items()},
    }
    for name, p in preds.items():
        labelled = {rid: t for rid, t in truth.items() if p.get(rid) is not None}
        mine = processbench(labelled, p)
        theirs = report["compare"]["sources"][name]["kept"]["overall"]
        for key in ("error_acc", "correct_acc", "f1"):
            assert close(mine[key], theirs[key]), (name, key, mine, theirs)
        assert report["compare"]["sources"][name]["labelled"] == len(labelled)

    # Kept step labels of consensus against the truth's step labels (none after the first error).
    matched = compared = 0
    for rid, rec in consensus.items():
        t, n = truth[rid], len(rollouts[rid]["steps"])
        want = [True] * n if t == -1 else [True] * t + [False]
        assert len(rec["labels"]) == len(rec["steps"])
        for ours, theirs in zip(rec["labels"], want):
            compared += 1
            matched += ours == theirs
    source = report["compare"]["sources"]["consensus"]
    assert source["step_labels_compared"] == compared
    assert close(source["step_label_precision"], 100.0 * matched / compared if compared else None)

    # Tokens: summed from the records, and equal to what the engine counted for the stage.
    tokens = report["tokens"]
    assert tokens["sample"] == sum(r["generator"]["generated_tokens"] for r in responses) > 0
    assert tokens["rollout"] == sum(r["mc"]["generated_tokens"] for r in rollouts.values()) > 0
    assert tokens["judge"] == sum(r["judge"]["generated_tokens"] for r in judged.values()) > 0
    for stage, name in (("sample", "responses"), ("rollout", "rollouts"), ("judge", "judged")):
        manifest = orjson.loads((workdir / f"{name}.manifest.json").read_bytes())
        assert manifest["runs"][-1]["stats"]["generated_tokens"] == tokens[stage]
    assert set(report["seconds"]) >= {"sample", "rollout", "judge", "consensus"}

    # The bill per stage: the manifests' (no speculation: the decode is the records' tokens).
    billed = {row["stage"]: row for row in report["bill"]["world"]["stages"]}
    for stage, name in (("sample", "responses"), ("rollout", "rollouts"), ("judge", "judged")):
        bill = orjson.loads((workdir / f"{name}.manifest.json").read_bytes())["runs"][-1]["bill"]
        assert billed[stage]["prefill_tokens"] == bill["prefill_tokens"]
        assert billed[stage]["decode_tokens"] == tokens[stage]
    paper = {row["stage"]: row for row in report["bill"]["paper"]["stages"]}
    assert paper["judge"]["params"] == 72_000_000_000 and close(
        paper["judge"]["compute"], (billed["judge"]["prefill_tokens"] + tokens["judge"]) * 72.0)
    # `plan` before the run, from the responses file: every guaranteed figure holds what the run
    # billed, the counts of exhaustive rollouts and of the judge's votes exactly.
    for stage, figures in report["plan"].items():
        for name, f in figures.items():
            assert f["low"] <= f["measured"] <= f["high"] * (1 + 1e-9), (stage, name, f)
        for name in ("requests", "completions", "prompt_tokens"):
            assert figures[name]["low"] == figures[name]["measured"] == figures[name]["high"], (stage, name)

    # The printed table shows these numbers.
    from prm_annotate.world.report import print_report

    print_report(report)
    table = capsys.readouterr().out
    for name, p in preds.items():
        labelled = {rid: t for rid, t in truth.items() if p.get(rid) is not None}
        row = next(line for line in table.splitlines() if line.strip("│┃ ").startswith(name))
        assert f"{len(labelled)}/12" in row
        f1 = processbench(labelled, p)["f1"]
        assert (f"{f1:.1f}" if f1 is not None else "—") in row
    assert f"{tokens['rollout']:,}" in table
    assert all(f"{billed[stage]['prefill_tokens']:,}" in table for stage in billed)
    top = max(report["bill"]["paper"]["stages"], key=lambda r: r["compute"])["stage"]
    assert f"{top} dominates" in table
    assert report["html"] == str(workdir / "report.html") and (workdir / "report.html").stat().st_size > 0


# ---------------------------------------------------------------- the HTML report in a real browser

HOSTILE = "</script><img src=x onerror=alert(1)>"
SCRIPT = "<script>alert(1)</script>"
MUSTACHE = "{{ 7*7 }} {{ }}"
ROLES = {"responses": "responses", "rollouts": "rollouts", "judged": "judged", "consensus": "consensus"}


def _pct(x):
    return "—" if x is None else f"{x:.1f}%"


def _hostile_copy(workdir: Path, into: Path) -> tuple[str, str]:
    """The world's files copied with model text that is markup: step 0 of one disagreement holds
    HOSTILE (also its judge output and a kept completion), step 0 of another response SCRIPT and MUSTACHE.
    First errors and step counts are untouched, so stats and compare see the same figures."""
    into.mkdir()
    rollouts = read(workdir / "rollouts.jsonl")
    judged = {r["id"]: r for r in read(workdir / "judged.jsonl")}
    disagree = [r["id"] for r in rollouts if r["mc"]["first_error"] != judged[r["id"]]["judge"]["first_error"]]
    assert disagree, "the world run has no disagreement to test with"
    a, b = disagree[0], (disagree[1:] + [r["id"] for r in rollouts if r["id"] not in disagree])[0]
    for name in (*ROLES.values(), "gold"):
        records = read(workdir / f"{name}.jsonl")
        for r in records:
            if r["id"] in (a, b):
                r["steps"][0] = HOSTILE if r["id"] == a else f"{SCRIPT} {MUSTACHE}"
                if r["id"] == a and "judge" in r:
                    r["judge"]["outputs"][0] = HOSTILE + r["judge"]["outputs"][0]
                if r["id"] == a and "mc" in r:
                    r["mc"]["kept_completions"][0][0]["text"] = HOSTILE
        (into / f"{name}.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
        manifest = workdir / f"{name}.manifest.json"
        if manifest.exists():
            (into / manifest.name).write_bytes(manifest.read_bytes())
    return a, b


@pytest.mark.engine
@pytest.mark.xdist_group("world-report")
def test_report_in_chromium_shows_the_stats_and_compare_figures_and_model_text_as_text(world_run, tmp_path):
    from prm_annotate.reports.compare import compare_sources, load_sources
    from prm_annotate.evaluation.labels import confusion_row
    from prm_annotate.evaluation.label_sets import read_gold
    from prm_annotate.reports.stats import file_stats
    from testing.browser import chromium_page, skip_without_browser

    skip_without_browser()
    files = tmp_path / "files"
    hostile, scripted = _hostile_copy(world_run.workdir, files)
    paths = [str(files / f"{n}.jsonl") for n in ROLES.values()]
    html = tmp_path / "report.html"
    run = subprocess.run([*CLI, "report", *paths, "--gold", str(files / "gold.jsonl"), "-o", str(html)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    size = html.stat().st_size
    n = len(read(files / "responses.jsonl"))
    assert run.stderr.strip() == f"report: wrote {html}, {n} responses, {size / 1e3:.1f} kB."
    page_bytes = html.read_bytes()
    assert HOSTILE.encode() not in page_bytes and SCRIPT.encode() not in page_bytes  # escaped in the JSON

    stats = [file_stats(p) for p in paths]
    gold = read_gold([(str(files / "gold.jsonl"), None)])
    compared = compare_sources(load_sources(paths[1:], {}, gold), gold)
    name_of = {"rollouts": "MC", "judged": "judge", "consensus": "consensus", "gold": "gold"}
    rollouts = {r["id"]: r for r in read(files / "rollouts.jsonl")}
    judged = {r["id"]: r for r in read(files / "judged.jsonl")}

    with chromium_page() as page:
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        page.goto(html.as_uri())
        page.wait_for_selector("body[data-ready='1']", timeout=30_000)
        title = page.title()

        def fig(name: str) -> str:
            return page.locator(f"[data-fig='{name}']").first.inner_text().strip()

        # The overview's figures are stats' and compare's on the same files.
        assert fig("responses") == str(stats[0]["records"]) == str(n)
        for i, s in enumerate(stats):
            assert fig(f"file-{i}-records") == str(s["records"])
            mean = s.get("mc_scores", {}).get("mean")
            assert fig(f"file-{i}-mc-mean") == ("—" if mean is None else str(int(mean)) if float(mean).is_integer()
                                                 else f"{mean:.4f}")
            assert fig(f"file-{i}-tokens") == str(sum(s.get("tokens", {}).values()))
            failures = s.get("judge", {}).get("parse_failures")
            assert fig(f"file-{i}-parse-failures") == ("—" if failures is None else str(failures))
        for a, row in compared["agreement"].items():
            for b, c in row.items():
                assert fig(f"agree-{name_of[a]}-{name_of[b]}") == f"{_pct(c['agree'])} ({c['shared']})", (a, b)
        assert fig("tile-agree") == _pct(compared["agreement"]["rollouts"]["judged"]["agree"])
        kept = compared["sources"]["consensus"]["labelled"]
        assert fig("kept") == str(kept) and fig("kept-share") == _pct(100.0 * kept / n)
        rows = Counter(confusion_row(r["mc"]["first_error"], judged[rid]["judge"]["first_error"])
                       for rid, r in rollouts.items())
        for reason in ("same", "judge earlier", "judge later", "one says no error", "judge unparsed"):
            assert fig(f"aside-{reason}") == str(rows[reason])
        pairs = Counter((r["mc"]["first_error"], judged[rid]["judge"]["first_error"]) for rid, r in rollouts.items())
        for (m, j), n in pairs.items():
            assert fig(f"matrix-{m}-{j}") == str(n)

        # A disagreement opens to its steps, MC scores, kept completions and the judge's output.
        page.select_option("#f-row", "disagree")
        first = page.locator(".resp").first
        rid = first.get_attribute("data-id")
        assert rollouts[rid]["mc"]["first_error"] != judged[rid]["judge"]["first_error"]
        first.locator(".head").click()
        steps = first.locator(".step")
        want = rollouts[rid]
        assert steps.count() == len(want["steps"])
        for i, text in enumerate(want["steps"]):
            step = steps.nth(i)
            assert step.locator(".stext").first.text_content() == text
            score = want["mc"]["scores"][i]
            shown = step.locator("[data-role='mc-score']").inner_text().strip()
            assert shown == (f"MC {score:.3f}" if not float(score).is_integer() else f"MC {int(score)}")
            kept_texts = [c["text"] for c in want["mc"]["kept_completions"][i] or []]
            completions = step.locator("[data-role='completion']")
            assert [completions.nth(n).text_content() for n in range(completions.count())] == kept_texts
        assert len(want["mc"]["kept_completions"][0]) > 0  # the rollouts kept texts (world: 2 per step)
        first.locator("[data-role='judge-output'] summary").first.click()
        assert first.locator("[data-role='judge-output'] .pre").first.text_content() == judged[rid]["judge"]["outputs"][0]
        verdicts = [steps.nth(i).locator("[data-role='judge-verdict']").inner_text() for i in range(steps.count())]
        assert verdicts[judged[rid]["judge"]["first_error"]] == "judge: first error"
        page.screenshot(path=str(tmp_path / "report.png"), full_page=False)

        # Model text that is markup shows as text: no tag made of it, no script run, no dialog.
        page.select_option("#f-row", "any")
        for bad, want_text in ((hostile, HOSTILE), (scripted, f"{SCRIPT} {MUSTACHE}")):
            item = page.locator(f".resp[data-id='{bad}']")
            if item.locator(".detail").count() == 0:  # an item opened before stays open across filters
                item.locator(".head").click()
            assert item.locator(".step").first.locator(".stext").first.text_content() == want_text
        hostile_item = page.locator(f".resp[data-id='{hostile}']")
        hostile_item.locator("[data-role='judge-output'] summary").first.click()
        assert hostile_item.locator("[data-role='judge-output'] .pre").first.text_content().startswith(HOSTILE)
        assert hostile_item.locator("[data-role='completion']").first.text_content() == HOSTILE
        assert page.locator("img").count() == 0 and page.locator("script").count() == 2
        page.wait_for_timeout(300)  # an onerror handler would have fired by now
        assert dialogs == [] and page.title() == title == "prm-annotate report"
        assert [u for u in requests if not u.startswith("file://")] == []


@pytest.mark.engine
@pytest.mark.xdist_group("world-report")
def test_hf_export_of_the_world_loads_by_its_card_and_names_every_setting(world_run, tmp_path):
    import shutil

    from datasets import disable_progress_bars, load_dataset, load_from_disk

    from prm_annotate.io.manifest import source_runs

    disable_progress_bars()
    consensus = world_run.workdir / "consensus.jsonl"
    out = tmp_path / "ds"
    run = subprocess.run([*CLI, "export", str(consensus), "-o", str(out), "--format", "hf", "--test-split", "0.3"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    saved = load_from_disk(str(out))
    # The folder as the Hub would serve it: read by the card's configs. A cache of this test's own:
    # `datasets` found a folder of the same name and layout exported earlier in its shared cache.
    loaded = load_dataset(str(out), cache_dir=str(tmp_path / "cache"))
    assert set(loaded) == set(saved) == {"train", "test"}
    for split in saved:
        assert loaded[split].to_list() == saved[split].to_list() and len(saved[split]) > 0
    card = (out / "README.md").read_text()
    # The card drives the reading: the same folder under a card whose configs swap the splits is read swapped.
    swapped = tmp_path / "swapped"
    shutil.copytree(out, swapped)
    (swapped / "README.md").write_text(card.replace("path: train/", "path: TRAIN/").replace(
        "path: test/", "path: train/").replace("path: TRAIN/", "path: test/"))
    other = load_dataset(str(swapped), cache_dir=str(tmp_path / "cache-swapped"))
    assert other["train"].to_list() == saved["test"].to_list() and other["test"].to_list() == saved["train"].to_list()

    # Every model, prompt and setting of every run the manifests hold, named in the card.
    runs = [run for _, run in source_runs(str(consensus)) if run is not None]
    assert {r["stage"] for r in runs} == {"sample", "rollout", "judge", "consensus"}

    def leaves(obj, prefix=""):
        for k, v in obj.items():
            if isinstance(v, dict) and v:
                yield from leaves(v, f"{prefix}{k}.")
            else:
                yield f"{prefix}{k}", v

    for r in runs:
        for key, value in leaves(r["settings"]):
            plain = isinstance(value, str) and value.isprintable() and value.strip() == value and value
            text = value if plain else str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
                else json.dumps(value, separators=(",", ":"), ensure_ascii=False)
            assert f"{key}={text}" in card, (r["stage"], key, value)
    for model in ("models/policy", "models/judge"):
        assert model in card
    # The rule, the counts by reason and the cost.
    stats = next(r for r in runs if r["stage"] == "consensus")["stats"]
    assert "equals the judge's" in card
    row = next(line for line in card.splitlines() if line.startswith(f"| `{consensus}` |"))
    cells = [c.strip() for c in row.strip("|").split("|")][1:]
    assert cells[:6] == [str(stats.get(k, 0)) for k in ("joined", "same", "judge earlier", "judge later",
                                                         "one says no error", "judge unparsed")]
    rollout = next(r for r in runs if r["stage"] == "rollout")
    cost = next(line for line in card.splitlines() if line.startswith("| rollout |"))
    assert f"| {rollout['stats']['generated_tokens']} |" in cost and f"| {rollout['seconds']} |" in cost


@pytest.mark.engine
@pytest.mark.xdist_group("world-report")
def test_the_world_exports_card_is_the_hubs(world_run, tmp_path):
    """The world demo's `export --format hf --license`: the YAML header as huggingface_hub reads it."""
    from huggingface_hub import DatasetCard

    out = tmp_path / "ds"
    run = subprocess.run([*CLI, "export", str(world_run.workdir / "consensus.jsonl"), "-o", str(out), "--format", "hf",
                          "--license", "apache-2.0"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    card = DatasetCard.load(out / "README.md")
    assert (card.data.license, card.data.task_categories) == ("apache-2.0", ["token-classification"])
    assert "https://arxiv.org/abs/2501.07301" in card.text and "@article{zhang2025lessons" in card.text
    assert "PRMTrainer" in card.text and "load_dataset(" in card.text
