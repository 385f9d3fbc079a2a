"""Labels beyond the first error on the thinking world: every source against the truth.

    flock /tmp/prm-engine.lock python -m lab.world.recovery --traces 240 -k 8 --out /tmp/recovery-run

Responses: `--traces` generated thinking traces (`trace_for("recovery", i, seed)`: the world's
problems, the generator's mix of slips corrected at once or later, wrong corrections, uncaught
slips; steps are the paragraphs, so the truth's indices are the steps'). The truth
(`trace_truth.read_trace(...).recovery()`) is the gold.

Sources, each through the pipeline's own commands:
- MC: `rollout` with the shipped thinker, exhaustive K, `--recovery-rule soft-drop` (`mc.recovery`;
  `mc.first_error` is hard MC's, the paper's);
- judge: `judge` with the shipped world judge and its `processbench` prompt (the paper's protocol:
  a first error only); read as a recovery it is one uncaught slip at its first error;
- judge, recovery protocol: `judge --protocol recovery` (the `slips` prompt, strict reader) with
  the world's recovery critic (`--critic`, default lab/world/models/critic), greedy; its
  `judge.recovery` as it is, null where the reader refused its answer;
- the truth as a perfect judge's recovery reading (what the recovery rule keeps when the judge
  is right: the upper bound);
- consensus under `--rule paper` and `--rule recovery` (with each judge reading).

Every source is scored against the truth on slips, corrections, ends-right and step labels
(recovery.report.agreement), and each consensus rule's kept records: how many, how many hold a
corrected slip, and how true their step labels are (the share of kept step labels equal to the
truth's: the paper's rule's labels are its cut ones, read against the truth's recovery labels).
The soft-drop rule's drop is swept over the same rollouts (0.125-0.5) beside the run's own.
Writes `results.json` and prints it; files already written are reused (a rerun reads them).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from prm_annotate.judging import reason_kind
from prm_annotate.recovery.labels import Recovery, Slip
from prm_annotate.records import step_labels
from prm_annotate.recovery.report import agreement, counts
from prm_annotate.recovery.rules import SoftDrop
from prm_annotate.world import JUDGE_DIR, THINKER_DIR, WORLD_JUDGE_PROMPT, WORLD_SYSTEM_PROMPT
from prm_annotate.world.thinking import CLOSE_JOIN, trace_for
from prm_annotate.world.trace_truth import read_trace

# The recovery protocol's judge: lab/world/train.py's `critic`, trained on traces of its own split.
CRITIC_DIR = Path(__file__).resolve().parent / "models" / "critic"
CLI = [sys.executable, "-m", "prm_annotate"]


def responses(n: int, seed: int) -> tuple[list[dict], dict[str, object]]:
    """Response records of `n` generated traces, and their truths by id."""
    records, truths = [], {}
    for i in range(n):
        problem, t = trace_for("recovery", i, seed)
        truth = read_trace(problem, t.text)
        rid = f"recovery-{i}"
        joins = ["\n\n"] * (len(t.thought) - 1) + [CLOSE_JOIN] + ["\n\n"] * (len(t.answer) - 1)
        records.append({"id": rid, "problem": problem["problem"], "answer": problem["answer"], "steps": t.steps,
                        "thought_steps": len(t.thought), "thought_finished": True, "step_joins": joins,
                        "final_answer": truth.answer, "correct": truth.final_correct})
        truths[rid] = truth
    return records, truths


def run(*args: str) -> None:
    done = subprocess.run([*CLI, *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args[:2])} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    print(done.stderr.strip().splitlines()[-1], file=sys.stderr, flush=True)


def read(path: Path) -> dict[str, dict]:
    return {r["id"]: r for r in map(json.loads, path.read_text().splitlines())}


def write(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def first_error_reading(first_error: int | None) -> dict | None:
    """The paper's first error read as a recovery: one uncaught slip (null when unparsed)."""
    if first_error is None:
        return None
    return Recovery(() if first_error == -1 else (Slip(first_error, None),)).to_json()


def kept_stats(path: Path, truths: dict, paper: bool) -> dict:
    kept = read(path) if path.exists() else {}
    alike = total = corrected = 0
    for rid, rec in kept.items():
        truth = truths[rid].recovery()
        n = len(rec["steps"])
        true = truth.step_labels(rec["steps_total"])[:n]
        labels = step_labels(rec["first_error"], n) if paper else rec["labels"]
        alike += sum(a == b for a, b in zip(labels, true))
        total += len(labels)
        corrected += bool(truth.corrected)
    return {"kept": len(kept), "kept_with_corrected_slip": corrected, "step_labels": total,
            "step_labels_true": 100.0 * alike / total if total else None}


def _share(hits: list[bool]) -> float | None:
    """The percentage of hits, None when nothing was read."""
    return 100.0 * sum(hits) / len(hits) if hits else None


def unread(records: dict[str, dict]) -> dict:
    """How many judged records have no recovery reading, and why (the reader's first reason,
    its kind as the judge stage tallies it: `reason_kind`), so a poor reading shows as refusals, not as labels."""
    why: dict[str, int] = {}
    for r in records.values():
        if r["judge"].get("recovery") is None:
            errors = [e for e in r["judge"].get("parse_errors") or [] if e]
            reason = (errors[0] if errors else r["judge"].get("recovery_problem") or "no reading")
            key = reason_kind(reason)[:60]
            why[key] = why.get(key, 0) + 1
    return {"judged": len(records), "unread": sum(why.values()), "reasons": dict(sorted(why.items(), key=lambda x: -x[1]))}


def measure(out: Path, n: int, k: int, seed: int, drop: float, critic: Path = CRITIC_DIR) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    records, truths = responses(n, seed)
    src = write(out / "responses.jsonl", records)
    rollouts, judged = out / "rollouts.jsonl", out / "judged.jsonl"
    if not rollouts.exists():
        run("rollout", str(src), "-o", str(rollouts), "--model", str(THINKER_DIR), "--strategy", "exhaustive",
            "-k", str(k), "--label", "soft", "--recovery-rule", "soft-drop", "--recovery-drop", str(drop),
            "--system-prompt", WORLD_SYSTEM_PROMPT, "--max-tokens", "512", "--temperature", "0.7", "--quiet")
    if not judged.exists():
        run("judge", str(src), "-o", str(judged), "--model", str(JUDGE_DIR), "--prompt", WORLD_JUDGE_PROMPT,
            "--votes", "1", "--temperature", "0", "--quiet")
    critiqued = out / "judged-recovery-protocol.jsonl"
    if not critiqued.exists():
        run("judge", str(src), "-o", str(critiqued), "--model", str(critic), "--protocol", "recovery",
            "--votes", "1", "--temperature", "0", "--max-tokens", "1024", "--quiet")
    mc, jd, cr = read(rollouts), read(judged), read(critiqued)
    # The judge's readings: its paper verdict as a recovery, the recovery protocol's own reading,
    # and the truth as a perfect recovery judge. name -> (file tag, judged records, reading).
    readings = {
        "judge (paper protocol)": ("judge", jd, {rid: first_error_reading(r["judge"]["first_error"])
                                                 for rid, r in jd.items()}),
        "judge, recovery protocol": ("critic", cr, {rid: r["judge"]["recovery"] for rid, r in cr.items()}),
        "truth as the judge": ("truth", jd, {rid: truths[rid].recovery().to_json() for rid in jd}),
    }
    gold = {rid: (t.recovery(), len(records[i]["steps"])) for i, (rid, t) in enumerate(truths.items())}
    n_steps = {rid: len(r["steps"]) for rid, r in mc.items()}
    sources = {"MC soft-drop": {rid: (Recovery.from_json(r["mc"]["recovery"], n_steps[rid]), n_steps[rid])
                                for rid, r in mc.items()},
               "MC hard (paper)": {rid: (Recovery.from_json(first_error_reading(r["mc"]["first_error"]), n_steps[rid]),
                                         n_steps[rid]) for rid, r in mc.items()}}
    for name, (_, _, reading) in readings.items():
        sources[name] = {rid: (None if v is None else Recovery.from_json(v, n_steps[rid]), n_steps[rid])
                         for rid, v in reading.items()}
    result: dict = {"traces": n, "k": k, "drop": drop, "seed": seed, "truth": counts(gold.values()),
                    "final_correct": sum(t.final_correct for t in truths.values()),
                    "sources": {name: agreement(r, gold) for name, r in sources.items()}, "consensus": {},
                    "recovery_protocol_unread": unread(cr), "critic": str(critic)}
    # Final correctness: hard MC's last step (the response's own graded answer) and the judge's -1.
    result["final_correct_read"] = {
        "MC (last step's score)": 100.0 * sum((r["mc"]["scores"][-1] > 0) == truths[rid].final_correct
                                              for rid, r in mc.items()) / len(mc),
        "judge (no error = right)": 100.0 * sum((r["judge"]["first_error"] == -1) == truths[rid].final_correct
                                                for rid, r in jd.items() if r["judge"]["first_error"] is not None)
        / max(1, sum(r["judge"]["first_error"] is not None for r in jd.values())),
        "judge, recovery protocol (every slip corrected = right)": _share(
            [(not Recovery.from_json(r["judge"]["recovery"], len(r["steps"])).uncaught) == truths[rid].final_correct
             for rid, r in cr.items() if r["judge"]["recovery"] is not None])}
    # The rule's drop, swept over the same rollouts (the run's own --drop is the one chosen beforehand).
    result["soft_drop_sweep"] = {
        str(d): agreement({rid: (SoftDrop(d).read(r["mc"]["scores"], r["mc"]["threshold"]), n_steps[rid])
                           for rid, r in mc.items()}, gold) for d in (0.125, 0.25, 0.375, 0.5)}
    for name, (tag, judged_by, reading) in readings.items():
        judged_with = write(out / f"judged-{tag}.jsonl",
                            [{**r, "judge": {**r["judge"], "recovery": reading[rid]}} for rid, r in judged_by.items()])
        for rule in ("paper", "recovery"):
            if rule == "paper" and tag != "judge":
                continue  # the paper's rule reads the paper protocol's first errors: its row is the world judge's
            path = out / f"consensus-{rule}-{tag}.jsonl"
            if not path.exists():
                run("consensus", str(rollouts), str(judged_with), "-o", str(path), "--rule", rule, "--quiet")
            label = f"{rule} rule" + ("" if rule == "paper" else f", {name}")
            result["consensus"][label] = kept_stats(path, truths, paper=rule == "paper")
            if rule == "recovery":  # corrected traces this rule keeps that the paper's rule drops
                paper_ids = set(read(out / "consensus-paper-judge.jsonl"))
                result["consensus"][label]["corrected_dropped_by_paper"] = sum(
                    1 for rid in read(path) if rid not in paper_ids and truths[rid].recovery().corrected)
    (out / "results.json").write_text(json.dumps(result, indent=2))
    return result


def _pct(v) -> str:
    return "—" if v is None else f"{v:.1f}"


def tables(result: dict) -> str:
    """The results as the markdown tables of docs/recovery.md."""
    cols = ("slip_precision", "slip_recall", "slip_f1", "correction_precision", "correction_recall",
            "ends_right_agreement", "step_label_agreement", "exact")
    t = result["truth"]
    u = result["recovery_protocol_unread"]
    lines = [f"Truth: {t['traces']} traces, {t.get('with a corrected slip', 0)} with a corrected slip, "
             f"{t.get('with an uncaught slip', 0)} with an uncaught one, {t.get('without a slip', 0)} without a slip; "
             f"{t.get('slips', 0)} slips, {t.get('corrected', 0)} corrected; {result['final_correct']} answer right. "
             "Final correctness read right: " + ", ".join(f"{k} {_pct(v)}%" for k, v in result["final_correct_read"].items())
             + f". Judge, recovery protocol: {u['unread']} of {u['judged']} answers unread ("
             + ", ".join(f"{k}: {v}" for k, v in u["reasons"].items()) + ").", ""]
    lines += ["| source | traces | unread | slip P | slip R | slip F1 | correction P | correction R | ends right | "
             "step labels | exact |", "|---|" + "---:|" * 10]
    rows = {**result["sources"], **{f"MC soft-drop {d}": r for d, r in result["soft_drop_sweep"].items()
                                    if float(d) != result["drop"]}}
    for name, row in rows.items():
        lines.append(f"| {name} | {row['traces']} | {row.get('unparsed', 0)} | " + " | ".join(_pct(row[c]) for c in cols) + " |")
    lines += ["", "| consensus | kept | kept with a corrected slip | of them dropped by the paper's rule | "
              "step labels | true |", "|---|---:|---:|---:|---:|---:|"]
    for name, row in result["consensus"].items():
        lines.append(f"| {name} | {row['kept']} | {row['kept_with_corrected_slip']} | "
                     f"{row.get('corrected_dropped_by_paper', '—')} | {row['step_labels']} | "
                     f"{_pct(row['step_labels_true'])} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Labels beyond the first error on the thinking world.")
    parser.add_argument("--traces", type=int, default=240)
    parser.add_argument("-k", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--drop", type=float, default=0.25)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--critic", type=Path, default=CRITIC_DIR,
                        help="the judge asked under --protocol recovery (default: %(default)s)")
    args = parser.parse_args(argv)
    result = measure(args.out, args.traces, args.k, args.seed, args.drop, args.critic)
    print(json.dumps(result, indent=2))
    print(tables(result))


if __name__ == "__main__":
    main()
