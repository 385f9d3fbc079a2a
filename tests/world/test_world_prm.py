"""`python -m lab.world.prm` (the lab's `world prm`): the experiment of the paper's claim, end to end on a tiny configuration through the
real report (vLLM) and real trainings, then its parts on their own.

The end-to-end test runs the command once, checks what it measured against the files it wrote
(the truth recomputed from the problems, F1 and Best-of-N recomputed here from the scored files,
the batched scores against transformers one response at a time), then runs it again (every PRM
skipped, the same JSON and table), and a third time in a copy with the report kept, SIGKILLed
after its second PRM and run again: the same results.json as the uninterrupted run but for
wall-clock times. Its results.json, times left out, is compared with the golden file beside this
test (`world_prm_results.golden.json`, written by this test from the code of the commit that added
it, before the experiment moved out of the product): code that moves or restates the experiment
must give the same numbers. `PRM_WORLD_GOLDEN=write` rewrites it, for a change meant to alter the
results (say so in the commit)."""
from __future__ import annotations

import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from lab.world.prm.__main__ import main
from lab.world.prm.labels import SOURCES, Split, problem_of, training_sets
from prm_annotate.world.truth import true_first_error
from testing.heavy import ENGINE_START_TIMEOUT
from testing.jsonl_files import group_alive
from testing.jsonl_files import read_jsonl as read

CLI = [sys.executable, "-m", "lab.world.prm"]
REPO_ROOT = Path(__file__).resolve().parents[2]
TINY = ["--seeds", "2", "--train-problems", "6", "--heldout-problems", "3", "-n", "2", "-k", "2", "--max-steps", "4",
        "--eval-every", "2", "--patience", "3", "--batch-size", "4", "--val-share", "0.34"]
TIMEOUT = ENGINE_START_TIMEOUT + 600
GOLDEN = Path(__file__).with_name("world_prm_results.golden.json")


def run(workdir, *extra, kill_after_files=None):
    """The command in its own process group; with `kill_after_files`, SIGKILLed as soon as that many
    PRM result files exist."""
    proc = subprocess.Popen([*CLI, "--workdir", str(workdir), *TINY, *extra], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        if kill_after_files is not None:
            deadline = time.monotonic() + TIMEOUT
            while len(list((workdir / "prms").glob("*.json"))) < kill_after_files:
                assert proc.poll() is None and time.monotonic() < deadline, "the run ended before the kill"
                time.sleep(0.2)
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=TIMEOUT)
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    assert group_alive(proc.pid) == []
    return proc.returncode, out, err


TIMINGS = {"seconds", "train_seconds", "seconds_to_best", "report_seconds", "read_seconds"}


def measured(value):
    """A result without its wall-clock times, which no two runs share."""
    if isinstance(value, dict):
        return {k: measured(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [measured(v) for v in value]
    return value


def same(a, b, rel=1e-6, near=1e-5):
    """`a` is `b` but for float noise: float32 kernels differ in the last bits between CPUs (AVX2,
    AVX-512: a threshold 0.5194199025 on one, 0.5194199016 on the other; a score range, a
    difference of two scores, 0.1636503 and 0.1636521); a moved result (a rate in percent, a
    threshold, a score) does not hide within a millionth or 1e-5."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], rel, near) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y, rel, near) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return (isinstance(a, (int, float)) and isinstance(b, (int, float))
                and math.isclose(a, b, rel_tol=rel, abs_tol=near))
    return a == b


def check_golden(results):
    """The run's results, times left out, are the golden file's (the same seeds, the same numbers
    but for float noise: `same`)."""
    mine = measured(results)
    if os.environ.get("PRM_WORLD_GOLDEN") == "write":
        GOLDEN.write_bytes(orjson.dumps(mine, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")
    golden = orjson.loads(GOLDEN.read_bytes())
    assert mine.keys() == golden.keys() and mine["settings"] == golden["settings"]
    for key in golden:  # one part at a time, so a failure names the part that moved
        assert same(mine[key], golden[key]), key


def true_labels(problems, row):
    """A training row's labels restated from the checker: true up to the true first error, false at it."""
    steps = row["completions"]
    first = true_first_error(problems[problem_of(row["id"])], steps)
    return [True] * len(steps) if first == -1 else [True] * first + [False]


def first_below(scores, t):
    return next((i for i, s in enumerate(scores) if s < t), -1)


def f1_of(truth, preds):
    err = [r for r, t in truth.items() if t != -1]
    ok = [r for r, t in truth.items() if t == -1]
    e = 100 * sum(preds[r] == truth[r] for r in err) / len(err)
    c = 100 * sum(preds[r] == -1 for r in ok) / len(ok)
    return 2 * e * c / (e + c) if e + c else 0.0


def held_out(workdir):
    """The report's problems, the held-out ones (all but TINY's 6 training problems), their
    responses and the responses' true first errors."""
    report = workdir / "report"
    problems = {p["id"]: p for p in read(report / "problems.jsonl")}
    held = list(problems)[6:]
    responses = [r for r in read(report / "responses.jsonl") if r["problem_id"] in held]
    truth = {r["id"]: true_first_error(problems[r["problem_id"]], r["steps"]) for r in responses}
    return problems, held, responses, truth


def right_over_wrong_of(responses, low):
    """% of the (right, wrong answer) response pairs of one problem that `low` (id: lowest step
    score) orders right, a tie half; None without such a pair."""
    pairs = [(low[a["id"]], low[b["id"]]) for a in responses for b in responses
             if a["problem_id"] == b["problem_id"] and a["correct"] is True and b["correct"] is False]
    wins = sum(1.0 if x > y else 0.5 if x == y else 0.0 for x, y in pairs)
    return 100 * wins / len(pairs) if pairs else None


def check_measurements(workdir, results):
    """What results.json says of each PRM, recomputed here from the files."""
    report = workdir / "report"
    problems, held, responses, truth = held_out(workdir)
    assert results["sizes"]["heldout_responses"] == len(responses) == 6
    for source in SOURCES:
        s = results["sources"][source.name]
        steps = s["train"]["steps"]  # the cap (4) is kept, and said where it was reached
        assert len(steps) == 2 and all(0 < n <= 4 for n in steps) and s["train"]["capped"] == steps.count(4)
        for seed, per_seed in enumerate(s["per_seed"]):
            name = f"{source.key}-seed{seed}"
            scored = {r["id"]: r for r in read(workdir / "prms" / f"{name}.scored.jsonl")}
            assert set(scored) == set(truth)
            t = per_seed["train"]["threshold"]
            preds = {rid: first_below(r["prm"]["scores"], t) for rid, r in scored.items()}
            if not source.final_step:  # it never saw a final step and does not judge one
                assert all(r["prm"]["scores"][-1] == 1.0 for r in scored.values())
            if any(v != -1 for v in truth.values()) and any(v == -1 for v in truth.values()):
                assert abs(per_seed["metrics"]["f1"] - f1_of(truth, preds)) < 1e-9
            # Best-of-2 by min: the first response unless the second's weakest step scores higher
            hits = 0
            for pid in held:
                a, b = [r for r in responses if r["problem_id"] == pid][:2]
                pick = b if min(scored[b["id"]]["prm"]["scores"]) > min(scored[a["id"]]["prm"]["scores"]) else a
                hits += pick["correct"] is True
            assert abs(per_seed["metrics"]["bon"]["accuracy"]["prm-min"]["2"] - 100 * hits / 3) < 1e-9
            # right over wrong: the pairs of one problem with a right and a wrong answer
            expected = right_over_wrong_of(responses, {rid: min(r["prm"]["scores"]) for rid, r in scored.items()})
            if expected is None:
                assert per_seed["metrics"]["right_over_wrong"] is None
            else:
                assert per_seed["metrics"]["right_over_wrong"] == pytest.approx(expected)
            # score range: per problem with two different responses, the spread of their lowest scores
            ranges = sorted(abs(min(scored[a["id"]]["prm"]["scores"]) - min(scored[b["id"]]["prm"]["scores"]))
                            for pid in held for a, b in [[r for r in responses if r["problem_id"] == pid]]
                            if a["steps"] != b["steps"])
            if ranges:
                assert per_seed["metrics"]["score_range"] == pytest.approx(statistics.median(ranges))
            else:
                assert per_seed["metrics"]["score_range"] is None
            # training never saw a held-out problem; the ceiling's labels are the truth's
            for part in ("train", "val"):
                key = "mc" if source.key == "mc-soft" else source.key
                rows = read(workdir / "data" / f"seed{seed}" / f"{key}.{part}.jsonl")
                assert {problem_of(r["id"]) for r in rows}.isdisjoint(held)
                if key == "truth":
                    assert rows and all(r["labels"] == true_labels(problems, r) for r in rows)
            if source.key == "shuffled":  # the truth's first errors, permuted among responses of as many steps
                def labels(key):
                    rows = [r for part in ("train", "val") for r in read(workdir / "data" / f"seed{seed}" / f"{key}.{part}.jsonl")]
                    return sorted((len(responses_steps[r["id"]]), r["labels"].index(False) if False in r["labels"] else -1)
                                  for r in rows)

                responses_steps = {r["id"]: r["steps"] for r in read(report / "responses.jsonl")}
                assert labels("shuffled") == labels("truth")


def check_truth_reference(workdir, results):
    """The truth as a scorer: its own F1 is 100, and right > wrong is its pairs restated."""
    _, _, responses, first = held_out(workdir)
    truth = results["references"]["truth"]
    if any(v != -1 for v in first.values()) and any(v == -1 for v in first.values()):
        assert truth["f1"] == 100.0
    expected = right_over_wrong_of(responses, {rid: 1.0 if f == -1 else 0.0 for rid, f in first.items()})
    if expected is not None:
        assert truth["right_over_wrong"] == pytest.approx(expected)


def check_blind_baselines(workdir, results):
    """A random response of the first N, and a random one of their different texts, restated."""
    _, held, responses, _ = held_out(workdir)
    for n in (1, 2):
        pools = [[r for r in responses if r["problem_id"] == pid][:n] for pid in held]
        texts = [{tuple(r["steps"]): r["correct"] is True for r in pool} for pool in pools]
        base = results["baselines"]
        assert base["random response"][str(n)] == pytest.approx(
            100 * statistics.fmean(sum(r["correct"] is True for r in pool) / len(pool) for pool in pools))
        assert base["random text"][str(n)] == pytest.approx(
            100 * statistics.fmean(sum(t.values()) / len(t) for t in texts))
    assert base["random response"]["1"] == base["random text"]["1"] == pytest.approx(base["pass@N"]["1"])


def check_batched_scores(workdir):
    """The scores in the file (`score`'s scorer, batched) are those of one response at a time."""
    from prm_annotate.prm.checkpoint import locate
    from prm_annotate.prm.likelihood import LikelihoodScorer

    scorer = LikelihoodScorer(locate(str(workdir / "prms" / "consensus-seed0")))
    for r in read(workdir / "prms" / "consensus-seed0.scored.jsonl"):
        (one,) = scorer.step_probabilities([scorer.token_ids(r["problem"], r["steps"])])
        assert len(one) == len(r["steps"]) and max(abs(x - y) for x, y in zip(one, r["prm"]["scores"])) < 1e-5


@pytest.mark.engine
@pytest.mark.slow  # the lab experiment end to end, four times: `make test-slow` (docs/test-durations.md)
def test_world_prm_end_to_end_rerun_and_kill(tmp_path):
    first = tmp_path / "first"
    code, out, err = run(first)
    assert code == 0, err[-4000:]
    results = orjson.loads((first / "results.json").read_bytes())
    assert results["settings"]["seeds"] == [0, 1]
    assert (first / "world-prm.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(list((first / "prms").glob("*.json"))) == 2 * len(SOURCES)
    capped = [source.name for source in SOURCES if results["sources"][source.name]["train"]["capped"]]
    # ("AT THE CAP" may wrap in its cell: the table has a column per measure)
    assert out.count("AT THE") == len(capped) and "consensus - MC (consensus-sized)" in out
    assert f"[{2 * len(SOURCES)}/{2 * len(SOURCES)}]" in err and "world report" in err  # progress on stderr
    sized = results["sources"]["MC (consensus-sized)"]["per_seed"]
    cons = results["sources"]["consensus"]["per_seed"]
    assert [s["train"]["responses"] for s in sized] == [s["train"]["responses"] for s in cons]
    assert {c["pooled"]["reading"] for c in results["comparisons"]} <= {"higher", "lower", "no difference shown"}
    check_measurements(first, results)
    check_blind_baselines(first, results)
    check_truth_reference(first, results)
    check_batched_scores(first)
    check_golden(results)

    # A rerun measures the finished PRMs again from their scored files: a stale metric is replaced.
    stale = first / "prms" / "judge-seed1.json"
    kept = stale.read_bytes()
    stale.write_bytes(orjson.dumps({**orjson.loads(kept), "metrics": {**orjson.loads(kept)["metrics"], "f1": -1.0}}))
    code, again, err = run(first)
    assert code == 0, err[-4000:]
    assert err.count("done before") == 2 * len(SOURCES) and "training" not in err
    rerun = orjson.loads((first / "results.json").read_bytes())
    assert again == out and rerun == results
    assert stale.read_bytes() == kept

    killed = tmp_path / "killed"
    killed.mkdir()
    shutil.copytree(first / "report", killed / "report")
    code, _, _ = run(killed, kill_after_files=2)
    assert code == -signal.SIGKILL
    code, _, err = run(killed)
    assert code == 0, err[-4000:]
    assert err.count("done before") == 2
    assert measured(orjson.loads((killed / "results.json").read_bytes())) == measured(results)


def test_training_sets_split_by_problem_and_size_match(tmp_path):
    def rows(kept):
        return [{"id": f"p{i}/{j}", "prompt": "q", "completions": ["a", "b"], "labels": [True, True],
                 "scores": [1.0, 1.0]} for i in range(40) for j in range(4) if kept(i, j)]

    labelled = {"rollouts": rows(lambda i, j: True), "judged": rows(lambda i, j: (i + j) % 7),
                "consensus": rows(lambda i, j: (i * j) % 3 == 0), "truth": rows(lambda i, j: True),
                "shuffled": rows(lambda i, j: True)}
    split = Split([f"p{i}" for i in range(30)], [f"p{i}" for i in range(30, 40)])
    # every response has 2 steps but the last of each problem, which has 3 (its rows stop before its final step)
    steps = {f"p{i}/{j}": 3 if j == 3 else 2 for i in range(40) for j in range(4)}
    vals = []
    for seed in (0, 1):
        paths = training_sets(labelled, split, 0.2, seed, tmp_path / f"seed{seed}", steps)
        sets = {key: (read(t), read(v)) for key, (t, v) in paths.items()}
        val_problems = {problem_of(r["id"]) for r in sets["mc"][1]}
        vals.append(val_problems)
        assert len(val_problems) == 6
        for key, (train, valid) in sets.items():
            assert {problem_of(r["id"]) for r in train} <= set(split.train) - val_problems
            assert {problem_of(r["id"]) for r in valid} <= val_problems
        assert [len(x) for x in sets["mc-sized"]] == [len(x) for x in sets["consensus"]]
        # no final step: a row that reaches its response's final step loses it (and its label)
        for part in (0, 1):
            whole = {r["id"]: r for r in sets["truth"][part]}
            cut = {r["id"]: r for r in sets["truth-nofinal"][part]}
            assert set(cut) == set(whole)
            for rid, r in cut.items():
                keep = 2 if rid.endswith("/3") else 1
                assert r["completions"] == whole[rid]["completions"][:keep] and r["labels"] == whole[rid]["labels"][:keep]
        assert {r["id"] for r in sets["mc-sized"][0]} <= {r["id"] for r in sets["mc"][0]}
    assert vals[0] != vals[1]  # the seed draws the validation problems
    # the same seed, the same files
    again = training_sets(labelled, split, 0.2, 0, tmp_path / "again", steps)
    assert again["mc-sized"][0].read_bytes() == (tmp_path / "seed0" / "mc-sized.train.jsonl").read_bytes()


def test_judge_verdicts_as_step_scores():
    from lab.world.prm.experiment import judge_scores

    steps = ["a", "b", "c"]
    assert judge_scores({"steps": steps, "judge": {"first_error": -1}}) == [1.0, 1.0, 1.0]
    assert judge_scores({"steps": steps, "judge": {"first_error": 1}}) == [1.0, 0.0, 0.0]
    assert judge_scores({"steps": steps, "judge": {"first_error": None}}) is None


def test_without_matplotlib_it_stops_at_once_with_the_install_line(tmp_path, monkeypatch, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    assert main(["--workdir", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err
    assert "matplotlib" in err and "pip install" in err
    assert not (tmp_path / "w").exists()  # nothing started


def test_a_workdir_of_other_settings_is_refused(tmp_path):
    from prm_annotate.errors import UsageError
    from lab.world.prm.experiment import ExperimentConfig, check_workdir

    check_workdir(ExperimentConfig(workdir=tmp_path))
    check_workdir(ExperimentConfig(workdir=tmp_path, seeds=9))  # more seeds extend a run
    with pytest.raises(UsageError, match="lr"):
        check_workdir(ExperimentConfig(workdir=tmp_path, lr=0.5))


def test_a_base_that_is_not_a_model_is_refused_before_any_work(tmp_path, capsys):
    assert main(["--workdir", str(tmp_path / "w"), "--base", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert "--base" in err and "no such model" in err
    assert not (tmp_path / "w").exists()


def test_a_bad_option_is_refused_with_exit_2(tmp_path):
    run = subprocess.run([*CLI, "--workdir", str(tmp_path / "w"), "--seeds", "0"], capture_output=True, text=True,
                         cwd=REPO_ROOT, timeout=120)
    assert run.returncode == 2 and "--seeds" in run.stderr
    assert not (tmp_path / "w").exists()


def test_a_moved_checkout_keeps_its_runs_and_another_base_is_refused(tmp_path):
    """The repository's models (the package's, and the lab's prm-base) are recorded by name, so the
    same checkout at another path (moved or fresh) has the same settings, and a run started while
    prm-base shipped in the package keeps them; a base model elsewhere is recorded by its path."""
    from prm_annotate.errors import UsageError
    from prm_annotate.world import POLICY_DIR
    from lab.world.prm.experiment import ExperimentConfig, check_workdir
    from prm_annotate.world.report import ReportConfig

    moved = tmp_path / "moved"
    for folder in ("prm_annotate", "lab"):
        shutil.copytree(REPO_ROOT / folder, moved / folder, ignore=shutil.ignore_patterns("__pycache__"))
    code = ("import orjson, prm_annotate; from lab.world.prm.experiment import ExperimentConfig; "
            "from prm_annotate.world.report import ReportConfig; "
            "print(prm_annotate.__file__); print(orjson.dumps([ExperimentConfig().settings(), ReportConfig().settings()]).decode()); "
            "import lab; print(lab.__file__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=moved, check=True,
                         env={**os.environ, "PYTHONPATH": str(moved)}, timeout=120).stdout.splitlines()
    assert out[0].startswith(str(moved)) and out[2].startswith(str(moved))  # the copy ran
    assert orjson.loads(out[1]) == [ExperimentConfig().settings(), ReportConfig().settings()]
    assert ExperimentConfig().settings()["base"] == "shipped:prm-base"

    check_workdir(ExperimentConfig(workdir=tmp_path / "w"))
    other = tmp_path / "policy"  # the same weights, elsewhere: another base as far as a run can tell
    shutil.copytree(POLICY_DIR, other)
    assert ExperimentConfig(base=other).settings()["base"] == str(other.resolve())
    with pytest.raises(UsageError, match="base"):
        check_workdir(ExperimentConfig(workdir=tmp_path / "w", base=other))


def test_score_range_and_blind_baselines_on_known_responses():
    """Two problems: one whose right answer is one text written three times beside two different
    wrong texts, one of copies only."""
    from prm_annotate.reports.bon import Candidate, Problem
    from lab.world.prm.scores import Heldout, blind_baselines, score_range

    right, wrong1, wrong2 = ("2 + 2 = 4.",), ("2 + 2 = 5.",), ("2 + 2 = 3.",)
    texts = {"a0": right, "a1": wrong1, "a2": right, "a3": wrong2, "a4": right, "b0": right, "b1": right}
    problems = [Problem("a", [Candidate(i, [0.5], texts[i] == right, 0) for i in ("a0", "a1", "a2", "a3", "a4")]),
                Problem("b", [Candidate(i, [0.5], True, 0) for i in ("b0", "b1")])]
    held = Heldout(["a", "b"], {}, problems, texts)
    base = blind_baselines(held, [1, 2, 4])
    assert base["random response"] == pytest.approx({"1": 100.0, "2": 75.0, "4": 75.0})  # a: 1, 1/2, 2/4
    assert base["random text"] == pytest.approx({"1": 100.0, "2": 75.0, "4": (100 + 100 / 3) / 2})  # a at 4: 1 of 3
    scores = {"a0": [0.9, 0.4], "a1": [0.3], "a2": [0.6], "a3": [0.8], "a4": [0.5], "b0": [0.1], "b1": [0.9]}
    assert score_range(held, scores) == pytest.approx(0.8 - 0.3)  # b's two copies are one response
    assert score_range(held, {**scores, "a1": None, "a3": None}) is None  # a's scored ones are copies


def test_without_final_steps_drops_what_reaches_the_final_step():
    from lab.world.prm.labels import without_final_steps

    rows = [{"id": "p/0", "completions": ["a", "b", "c"], "labels": [True, True, True], "scores": None},
            {"id": "p/1", "completions": ["a", "b"], "labels": [True, False], "scores": [1.0, 0.0]},
            {"id": "p/2", "completions": ["a", "b", "c"], "labels": [True, True, False], "scores": [1.0, 1.0, 0.0]},
            {"id": "p/3", "completions": ["a"], "labels": [True]}]
    steps = {"p/0": 3, "p/1": 3, "p/2": 3, "p/3": 1}
    assert without_final_steps(rows, steps) == [
        {"id": "p/0", "completions": ["a", "b"], "labels": [True, True], "scores": None},
        rows[1],  # cut at its first error before the final step: as it was
        {"id": "p/2", "completions": ["a", "b"], "labels": [True, True], "scores": [1.0, 1.0]}]
