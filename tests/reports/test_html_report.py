"""`prm-annotate report` without a browser: the join of the files, the overview's numbers on
hand-made records (counted here by other means), the escaping of model text, bad input.
The page in real Chromium is tested in tests/world/test_world_report.py."""
from __future__ import annotations

import base64
import hashlib
import html
import json
import re

import orjson
import pytest
from typer.testing import CliRunner

from prm_annotate.cli import app
from prm_annotate.reports.compare import agreement
from prm_annotate.reports.html import embed_json, render_page, report_data
from prm_annotate.reports.html.data import position_bin, step_analyses

HOSTILE = "</script><img src=x onerror=alert(1)>"
SCRIPT = "<script>alert(1)</script>"


def write(path, records):
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return str(path)


def mc(scores, fe, strategy="exhaustive"):
    return {"k": 4, "label": "hard", "strategy": strategy, "scores": scores, "first_error": fe, "completions": 8,
            "generated_tokens": 40, "model": "policy"}


def judge(fe, out="<analysis_1>fine</analysis_1>"):
    return {"first_error": fe, "votes": [fe], "parse_failures": int(fe is None), "model": "judge", "prompt": "paper",
            "outputs": [out]}


# (id, steps, MC first error, MC scores, judge first error)
CASES = [
    ("a/0", ["s0", "s1", "s2", "s3"], 2, [1.0, 0.5, 0.0, 0.0], 2),     # agree, error in the middle
    ("a/1", ["s0", "s1", "s2"], -1, [1.0, 1.0, 1.0], -1),              # agree, no error
    ("b/0", ["s0", "s1", "s2"], 2, [1.0, 0.75, 0.0], 0),               # judge earlier; MC at the last step
    ("b/1", ["s0", "s1"], 0, [0.0, None], None),                       # judge unparsed; a step not probed
    ("c/0", ["s0", "s1", "s2", "s3", "s4"], -1, [1.0, 1.0, 1.0, 1.0, 1.0], 3),  # one says no error
    ("c/1", ["s0", "s1", "s2"], 0, [0.0, 0.0, 0.0], 1),                # judge later
]


@pytest.fixture
def files(tmp_path):
    responses, rollouts, judged, consensus = [], [], [], []
    for rid, steps, mfe, scores, jfe in CASES:
        base = {"id": rid, "problem": f"problem {rid[0]}", "problem_id": rid[0], "steps": steps, "answer": "1"}
        responses.append(base)
        rollouts.append({**base, "mc": mc(scores, mfe, "binary" if None in scores else "exhaustive")})
        judged.append({**base, "judge": judge(jfe)})
        if mfe == jfe:
            kept = len(steps) if mfe == -1 else mfe + 1
            consensus.append({**base, "steps": steps[:kept], "labels": [i != mfe for i in range(kept)],
                              "first_error": mfe, "mc": mc(scores, mfe), "judge": judge(jfe), "steps_total": len(steps)})
    return {"responses": write(tmp_path / "responses.jsonl", responses),
            "rollouts": write(tmp_path / "rollouts.jsonl", rollouts),
            "judged": write(tmp_path / "judged.jsonl", judged),
            "consensus": write(tmp_path / "consensus.jsonl", consensus)}


def test_the_overview_counts_every_record_by_its_source(files):
    data = report_data(list(files.values()))
    o = data["overview"]
    assert o["responses"] == 6 and o["kept"] == 2
    assert o["set_aside"]["rows"] == {"same": 2, "judge earlier": 1, "judge later": 1, "one says no error": 1,
                                      "judge unparsed": 1}
    assert o["kept_share"] == pytest.approx(100 * 2 / 6)
    mc_col = {c[0]: c[2] for c in CASES}
    judge_col = {c[0]: c[4] for c in CASES}
    assert o["agreement"]["MC"]["judge"] == agreement({"MC": mc_col, "judge": judge_col})["MC"]["judge"]
    assert o["agreement"]["MC"]["judge"] == {"agree": 40.0, "shared": 5}  # 2 of the 5 with a parsed verdict
    assert o["matrix"]["2"]["0"] == 1 and o["matrix"]["0"]["null"] == 1 and o["matrix"]["-1"]["-1"] == 1
    assert sum(v for row in o["matrix"].values() for v in row.values()) == 6
    # Where first errors fall: MC's are at 2 of 4 (tenth 6), the last of 3, none, 0 of 2, none, 0 of 3.
    assert o["positions"]["MC"] == {**{str(b): 0 for b in range(10)}, "6": 1, "0": 2, "last": 1, "none": 2}
    # Curves skip the response with an unprobed step, and say so.
    assert o["curves"]["not drawn (some steps not probed)"] == {"binary": 1}
    assert o["curves"]["responses"] == {"error": 3, "no error": 2}
    # a/1's steps sit at tenths 0, 5, 9, c/0's at 0, 2, 5, 7, 9; no step, no mean (the curve skips it).
    assert o["curves"]["mean"]["no error"] == [1.0 if b in (0, 2, 5, 7, 9) else None for b in range(10)]
    # The error group at tenth 9: a/0's 0.0, b/0's 0.0, c/1's 0.0; at tenth 0: 1.0, 1.0, 0.0.
    assert o["curves"]["mean"]["error"][9] == 0.0 and o["curves"]["mean"]["error"][0] == round(2 / 3, 4)
    # The figures of each file are stats'.
    from prm_annotate.reports.stats import file_stats

    assert [f["stats"] for f in o["files"]] == [file_stats(p) for p in files.values()]


def test_disagreements_come_first_and_the_sample_is_seeded(files):
    data = report_data(list(files.values()))
    rows = [r["row"] for r in data["responses"]]
    assert rows[:4] == ["judge earlier", "judge unparsed", "one says no error", "judge later"]
    assert rows[4:] == ["same", "same"]
    small = report_data(list(files.values()), max_responses=3, seed=1)
    assert small["sample"] == {"shown": 3, "of": 6, "seed": 1}
    assert small["overview"] == data["overview"]  # the overview is from every record whatever the sample
    again = report_data(list(files.values()), max_responses=3, seed=1)
    assert [r["id"] for r in again["responses"]] == [r["id"] for r in small["responses"]]
    picks = {tuple(r["id"] for r in report_data(list(files.values()), max_responses=3, seed=s)["responses"])
             for s in range(8)}
    assert len(picks) > 1  # the seed chooses


def test_position_bins_and_step_analyses():
    assert position_bin(-1, 5) == "none"
    assert position_bin(4, 5) == "last" and position_bin(0, 1) == "last"
    assert position_bin(0, 5) == "0" and position_bin(2, 5) == "5" and position_bin(3, 5) == "7"
    text = "<analysis_1>ok</analysis_1>\n<analysis_2>wrong: 3+5=9</analysis_2>\n<conclusion>Incorrect</conclusion>"
    assert step_analyses(text, 3) == ["ok", "wrong: 3+5=9", None]
    assert step_analyses("\\boxed{1}", 3) is None


def test_model_text_cannot_leave_the_json_block(tmp_path):
    nasty = [HOSTILE, SCRIPT, "{{ 7*7 }}", "a & b <!-- c", "\u2028\u2029", "</SCRIPT >"]
    embedded = embed_json({"texts": nasty})
    assert not re.search(r"[<>&]", embedded)
    assert json.loads(embedded) == {"texts": nasty}  # \u003c and friends read back as the text
    page = render_page({"overview": {}, "sample": {}, "responses": [{"steps": nasty}]})
    assert page.lower().count("<script") == 2 and page.lower().count("</script") == 2  # the page's own two
    assert "<img" not in page
    # The policy allows the page's own script by its hash, and nothing from the network.
    script = page.split("<script>", 1)[1].split("</script>", 1)[0]
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    policy = html.unescape(page.split('Content-Security-Policy" content="', 1)[1].split('"', 1)[0])
    assert f"script-src 'sha256-{digest}'" in policy and "default-src 'none'" in policy
    assert "innerHTML" not in script and "insertAdjacentHTML" not in script and "document.write" not in script
    assert "http://" not in script.replace("http://www.w3.org/2000/svg", "") and "https://" not in script


def test_the_command_writes_one_file_and_says_so_in_one_sentence(files, tmp_path):
    out = tmp_path / "r" / "report.html"
    result = CliRunner().invoke(app, ["report", *files.values(), "-o", str(out), "--max-responses", "4"])
    assert result.exit_code == 0, result.output
    size = out.stat().st_size
    assert result.output.strip() == f"report: wrote {out}, 6 responses (4 of them browsable), {size / 1e3:.1f} kB."
    data = json.loads(out.read_text().split('id="report-data">', 1)[1].split("</script>", 1)[0])
    assert len(data["responses"]) == 4 and data["overview"]["responses"] == 6


def test_bad_input_names_the_file_and_line(files, tmp_path):
    runner = CliRunner()

    def fails(args, *needles):
        result = runner.invoke(app, ["report", *args, "-o", str(tmp_path / "x.html")])
        assert result.exit_code == 2, result.output
        for needle in needles:
            assert needle in result.output, (needle, result.output)
        assert not (tmp_path / "x.html").exists()

    bad = tmp_path / "bad.jsonl"
    bad.write_text(open(files["rollouts"]).read() + "{not json\n")
    fails([files["responses"], str(bad)], f"{bad}:7", "invalid JSON")
    lines = open(files["rollouts"]).read().splitlines()
    broken = json.loads(lines[1])
    broken["mc"]["scores"] = [1.0]  # one score for three steps
    (tmp_path / "short.jsonl").write_text("\n".join([lines[0], json.dumps(broken), *lines[2:]]) + "\n")
    fails([str(tmp_path / "short.jsonl")], f"{tmp_path / 'short.jsonl'}:2")
    other = json.loads(lines[2])
    other["steps"] = ["x", "y", "z"]
    (tmp_path / "other.jsonl").write_text("\n".join([*lines[:2], json.dumps(other), *lines[3:]]) + "\n")
    fails([files["responses"], str(tmp_path / "other.jsonl")], f"{tmp_path / 'other.jsonl'}:3", "other steps")
    fails([files["rollouts"], files["rollouts"].replace("rollouts", "judged"), files["rollouts"]], "both rollout files")
    same = runner.invoke(app, ["report", files["responses"], "-o", files["responses"]])
    assert same.exit_code == 2 and "the output is the input" in same.output


def test_a_consensus_file_anywhere_in_the_list_is_checked_as_a_prefix_in_the_order_of_the_files(files, tmp_path):
    """The consensus file is read before the others (its prefix check needs its lengths first), but the
    errors come as the list of files gives them: bad input in file order, then a whole file's other
    steps, then the consensus's, each named by its own line."""
    runner = CliRunner()

    def error(*args):
        result = runner.invoke(app, ["report", *args, "-o", str(tmp_path / "x.html")])
        assert result.exit_code == 2 and not (tmp_path / "x.html").exists(), result.output
        return " ".join(result.output.split())

    def changed(path, line, edit):
        rows = [json.loads(x) for x in open(path).read().splitlines()]
        edit(rows[line - 1])
        out = tmp_path / f"{line}-{path.rsplit('/', 1)[1]}"
        out.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return str(out)

    consensus = changed(files["consensus"], 2, lambda r: r["steps"].__setitem__(0, "not s0"))  # a/1: all 3 kept
    for order in ([consensus, files["rollouts"]], [files["rollouts"], consensus]):
        assert f"{consensus}:2: id 'a/1' holds other steps than in {files['rollouts']}" in error(*order)
    # A whole file's other steps come first, wherever the consensus file is.
    judged = changed(files["judged"], 3, lambda r: r["steps"].append("s3"))
    assert f"{judged}:3: id 'b/0' holds other steps than in {files['rollouts']}" in error(
        consensus, files["rollouts"], judged)
    # Consensus steps beyond those of the whole record are no prefix of them.
    shorter = changed(files["responses"], 2, lambda r: r["steps"].pop())  # a/1: 2 steps, its consensus 3
    assert f"{files['consensus']}:2: id 'a/1' holds other steps than in {shorter}" in error(shorter, files["consensus"])
    # Bad input in the consensus file, read first, is still raised after a bad file before it in the list.
    bad = tmp_path / "bad.jsonl"
    bad.write_text(open(files["consensus"]).read() + "{not json\n")
    assert f"{bad}:3" in error(files["rollouts"], str(bad))
    assert f"{bad}:3" in error(str(bad), judged)
    dup = tmp_path / "dup.jsonl"
    dup.write_text(open(files["rollouts"]).read() + open(files["rollouts"]).read().splitlines()[1] + "\n")
    assert f"{dup}:7: duplicate id 'a/1' (first seen at line 2)" in error(files["consensus"], str(dup))
