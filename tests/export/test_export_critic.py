"""`export --format critic`: the judge's critiques as chat SFT rows. Real ProcessBench responses go
through the real judge stage (a scripted engine writes four critiques per response, some agreeing
with the gold first error, some not, one unparsable) and the real consensus stage; the rows are
checked against the prompts the engine actually received and against a plain restatement of
which critiques agree, and rendered by a real chat template through TRL's own SFT preparation."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from prm_annotate.cli import app
from prm_annotate.pipeline.runner import RunOptions, run_and_close
from prm_annotate.io.prompt_files import PROMPTS_DIR
from prm_annotate.stages.seeds import derive_seed
from prm_annotate.stages.consensus import run_consensus
from prm_annotate.stages.judge import JudgeStage
from testing.jsonl_files import read_jsonl, write_jsonl
from testing.labelled_fixtures import mc_of, response_of
from testing.paths import REPO
from testing.processbench_files import hf_split
from testing.scripted_engine import ScriptedEngine

runner = CliRunner()
POLICY_TOKENIZER = REPO / "prm_annotate" / "world" / "models" / "policy"  # a real tokenizer with a ChatML template
VOTES = 4


def other_index(label: int, n_steps: int) -> int:
    if label == -1:
        return 0
    return label + 1 if label + 1 < n_steps else -1


def planned_verdicts(i: int, label: int, n_steps: int) -> list[int | None]:
    """What the four critiques of response i conclude (None: no parsable verdict). The majority is
    the gold label except on every fifth response, where it is another index."""
    other = other_index(label, n_steps)
    if i % 5 == 3:
        return [other, other, label, None]
    if i % 5 == 4:
        return [label, other, label, label]
    return [label, None, other, label]


def paper_critique(intro: str, k: int, n_steps: int) -> str:
    """The paper's Appendix C format: one analysis per paragraph up to the first wrong one, then
    a bare Correct/Incorrect conclusion."""
    analysed = n_steps if k == -1 else k + 1
    analyses = "\n".join(f"<analysis_{j}>\n{intro if j == 1 else ''}Paragraph {j} checked.\n</analysis_{j}>"
                          for j in range(1, analysed + 1))
    return f"{analyses}\n<conclusion>\n{'Correct' if k == -1 else 'Incorrect'}\n</conclusion>"


CRITIQUE_TEXT = {  # how each answer style states a verdict (0-based first error in, the style's text out)
    "processbench": lambda intro, k, n_steps: f"{intro}\n\nThe earliest error is in \\boxed{{{k}}}.",
    "paper": paper_critique,
}


@pytest.fixture(scope="module", params=["processbench", "paper"])
def pipeline(request, tmp_path_factory) -> dict:
    """responses -> judge (scripted engine, 4 votes) -> judged; rollouts whose MC first error is
    the gold label but on every seventh; consensus of the two."""
    style = request.param
    tmp = tmp_path_factory.mktemp(f"critic-{style}")
    records = [r for split in ("gsm8k", "math") for r in hf_split(split)[::3]]
    plan = {r["id"]: planned_verdicts(i, r["label"], len(r["steps"])) for i, r in enumerate(records)}
    n_steps = {r["id"]: len(r["steps"]) for r in records}

    # Which response and vote a request is, by its seed (the scheduler renames request keys).
    vote_of = {derive_seed("judge", r["id"], v, 0): (r["id"], v) for r in records for v in range(VOTES)}

    def script(request) -> str:
        rid, vote = vote_of[request.sampling.seed]
        verdict = plan[rid][vote]
        intro = f"Critique {vote} of {rid}: I read every paragraph in turn."
        if verdict is None:
            return f"{intro}\n\nI cannot tell which paragraph is wrong."
        return CRITIQUE_TEXT[style](intro, verdict, n_steps[rid])

    responses = write_jsonl(tmp / "responses.jsonl", [response_of(r) for r in records])
    engine = ScriptedEngine(script)
    run_and_close(JudgeStage(engine, prompt=style, votes=VOTES), RunOptions(str(responses), str(tmp / "judged.jsonl"),
                                                                             quiet=True))
    rollouts = [{**response_of(r), "mc": mc_of(other_index(r["label"], len(r["steps"])) if i % 7 == 6 else r["label"],
                                               len(r["steps"]))} for i, r in enumerate(records)]
    write_jsonl(tmp / "rollouts.jsonl", rollouts)
    run_consensus(str(tmp / "rollouts.jsonl"), str(tmp / "judged.jsonl"), str(tmp / "consensus.jsonl"), quiet=True)
    seen = {vote_of[r.sampling.seed]: r.messages for r in engine.requests}
    return {"style": style, "tmp": tmp, "records": records, "plan": plan, "seen": seen,
            "judged": tmp / "judged.jsonl", "consensus": tmp / "consensus.jsonl"}


def export(p: dict, out: Path, *extra: str):
    return runner.invoke(app, ["export", str(p["consensus"]), "--format", "critic", "--judged", str(p["judged"]),
                               "-o", str(out), *extra])


def expected_rows(p: dict, keep_all: bool) -> list[tuple[str, int, int, bool]]:
    """(id, vote, verdict, agrees) of every critique that should be a row, restated from the plan:
    consensus kept a response when the MC first error (the gold label, but on every seventh) is the
    judge's majority; a row is a parsed critique whose verdict is that first error (or any parsed one)."""
    out = []
    for i, r in enumerate(p["records"]):
        mc = other_index(r["label"], len(r["steps"])) if i % 7 == 6 else r["label"]
        verdicts = p["plan"][r["id"]]
        parsed = [v for v in verdicts if v is not None]
        if parsed.count(mc) * 2 <= len(parsed):
            continue  # MC's first error is not the judge's majority (this plan has no ties): consensus dropped it
        out += [(r["id"], v, verdict, verdict == mc) for v, verdict in enumerate(verdicts)
                if verdict is not None and (keep_all or verdict == mc)]
    return out


def paragraphs(steps: list[str], start: int) -> str:
    """ProcessBench's run_eval.py prepare_input_boxed tagging, numbered from `start`."""
    tagged = ""
    for sdx, step in enumerate(steps, start):
        tagged += f"<paragraph_{sdx}>\n{step}\n</paragraph_{sdx}>\n\n"
    return tagged.strip()


def test_rows_are_the_agreeing_critiques_with_the_prompt_the_judge_saw(pipeline, tmp_path):
    p = pipeline
    consensus = read_jsonl(p["consensus"])
    assert any(len(c["steps"]) < c["steps_total"] for c in consensus)  # truncated records are in the test
    assert len(consensus) < len(p["records"])  # and consensus dropped some
    result = export(p, tmp_path / "critic.jsonl")
    assert result.exit_code == 0, result.output
    rows = read_jsonl(tmp_path / "critic.jsonl")
    assert [(r["id"], r["vote"], r["verdict"], r["agrees"]) for r in rows] == expected_rows(p, keep_all=False)
    judged = {j["id"]: j for j in read_jsonl(p["judged"])}
    template = (PROMPTS_DIR / f"judge_{p['style']}.txt").read_text()
    start = 0 if p["style"] == "processbench" else 1
    by_id = {r["id"]: r for r in p["records"]}
    for row in rows:
        user, assistant = row["messages"]
        # exactly what the engine was sent for this vote, over the response's full steps
        assert [user] == list(p["seen"][row["id"], row["vote"]])
        gold = by_id[row["id"]]
        assert user == {"role": "user", "content": template.replace("{problem}", gold["problem"].strip())
                        .replace("{paragraphs}", paragraphs(gold["steps"], start))}
        assert assistant == {"role": "assistant", "content": judged[row["id"]]["judge"]["outputs"][row["vote"]]}
        assert (row["first_error"], row["judge_prompt"], row["judge_model"]) == (
            next(c["first_error"] for c in consensus if c["id"] == row["id"]), p["style"], "scripted")
    n_unparsed = sum(v is None for c in consensus for v in c["judge"]["votes"])
    assert f"{len(rows)} critic rows from {len(consensus)} records" in result.stderr
    assert f"{n_unparsed} critiques without a parsed verdict" in result.stderr


def test_votes_all_keeps_the_others_as_negatives(pipeline, tmp_path):
    p = pipeline
    result = export(p, tmp_path / "all.jsonl", "--votes", "all")
    assert result.exit_code == 0, result.output
    rows = read_jsonl(tmp_path / "all.jsonl")
    assert [(r["id"], r["vote"], r["verdict"], r["agrees"]) for r in rows] == expected_rows(p, keep_all=True)
    negatives = [r for r in rows if not r["agrees"]]
    assert negatives and all(r["verdict"] != r["first_error"] for r in negatives)


def test_the_chat_template_renders_every_row(pipeline, tmp_path):
    """With --tokenizer every row renders; TRL's SFT preparation takes the rows as they are and
    renders the ChatML the template says, the critique as the assistant turn."""
    from transformers import AutoTokenizer
    from trl.data_utils import apply_chat_template, is_conversational

    p = pipeline
    result = export(p, tmp_path / "critic.parquet", "--tokenizer", str(POLICY_TOKENIZER))
    assert result.exit_code == 0, result.output
    import pyarrow.parquet as pq

    rows = pq.read_table(tmp_path / "critic.parquet").to_pylist()
    assert rows and [(r["id"], r["vote"]) for r in rows] == [(i, v) for i, v, _, _ in expected_rows(p, False)]
    tok = AutoTokenizer.from_pretrained(POLICY_TOKENIZER)
    for row in rows:
        user, critique = (m["content"] for m in row["messages"])
        assert is_conversational(row)
        assert apply_chat_template(row, tok)["text"] == f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n{critique}"


def test_a_template_that_cannot_render_a_row_is_exit_2_naming_it(pipeline, tmp_path):
    from transformers import AutoTokenizer

    p = pipeline
    tok = AutoTokenizer.from_pretrained(POLICY_TOKENIZER)
    tok.chat_template = "{% for m in messages %}{% if m['role'] == 'user' %}{{ m['content'] }}{% endif %}{% endfor %}"
    tok.save_pretrained(tmp_path / "drops-assistant")
    out = tmp_path / "critic.jsonl"
    result = export(p, out, "--tokenizer", str(tmp_path / "drops-assistant"))
    first = read_jsonl(p["consensus"])[0]["id"]
    assert result.exit_code == 2 and not out.exists()
    assert f"{p['consensus']}:1: {first}, critique 0: the chat template changes the assistant turn" in result.stderr
    tok.chat_template = None
    tok.save_pretrained(tmp_path / "no-template")
    (tmp_path / "no-template" / "chat_template.jinja").unlink(missing_ok=True)
    result = export(p, out, "--tokenizer", str(tmp_path / "no-template"))
    assert result.exit_code == 2 and "has no chat template" in result.stderr


def test_hf_output_is_a_dataset_with_a_card(pipeline, tmp_path):
    from datasets import load_from_disk

    p = pipeline
    result = runner.invoke(app, ["export", str(p["consensus"]), "--format", "critic-hf", "--judged", str(p["judged"]),
                                 "-o", str(tmp_path / "ds")])
    assert result.exit_code == 0, result.output
    assert export(p, tmp_path / "critic.jsonl").exit_code == 0
    assert load_from_disk(str(tmp_path / "ds"))["train"].to_list() == read_jsonl(tmp_path / "critic.jsonl")
    card = (tmp_path / "ds" / "README.md").read_text()
    assert "**judge**" in card and "**consensus**" in card and "`messages`" in card


def test_bad_inputs_are_exit_2_naming_the_row(pipeline, tmp_path):
    p = pipeline
    out = tmp_path / "critic.jsonl"
    consensus = read_jsonl(p["consensus"])
    no_judged = runner.invoke(app, ["export", str(p["consensus"]), "--format", "critic", "-o", str(out)])
    assert no_judged.exit_code == 2 and "needs --judged" in no_judged.stderr
    for args, message in ((["--format", "trl", "--votes", "all"], "--votes goes with --format critic or critic-hf"),
                          (["--format", "trl", "--judged", str(p["judged"])], "--judged goes with --format critic"),
                          (["--format", "critic", "--judged", str(p["judged"]), "--votes", "most"], "--votes most: choose"),
                          (["--format", "critic", "--judged", str(p["judged"]), "--soft"], "critiques with a verdict")):
        result = runner.invoke(app, ["export", str(p["consensus"]), "-o", str(out), *args])
        assert result.exit_code == 2 and message in result.stderr, (args, result.stderr)
    # the judged file must be the one consensus was made from: a record missing, or judged again
    judged = read_jsonl(p["judged"])
    write_jsonl(tmp_path / "fewer.jsonl", [j for j in judged if j["id"] != consensus[1]["id"]])
    result = runner.invoke(app, ["export", str(p["consensus"]), "--format", "critic", "--judged",
                                 str(tmp_path / "fewer.jsonl"), "-o", str(out)])
    assert result.exit_code == 2 and f"{p['consensus']}:2: {consensus[1]['id']}: not in" in result.stderr
    rejudged = [{**j, "judge": {**j["judge"], "outputs": [o + " (again)" for o in j["judge"]["outputs"]]}} for j in judged]
    write_jsonl(tmp_path / "rejudged.jsonl", rejudged)
    result = runner.invoke(app, ["export", str(p["consensus"]), "--format", "critic", "--judged",
                                 str(tmp_path / "rejudged.jsonl"), "-o", str(out)])
    assert result.exit_code == 2 and "judge block is not the one in" in result.stderr
    # the input must be consensus records
    result = runner.invoke(app, ["export", str(p["judged"]), "--format", "critic", "--judged", str(p["judged"]),
                                 "-o", str(out)])
    assert result.exit_code == 2 and "not a consensus record" in result.stderr
    assert not out.exists()


def test_a_changed_or_missing_prompt_file_is_exit_2_naming_the_row(tmp_path):
    """The judge ran with a prompt file of one's own; after it changes (or goes), the prompt text
    cannot be the judge's, and the export says so for the first row instead of writing other text."""
    record = response_of(hf_split("gsm8k")[0])
    prompt = tmp_path / "my_judge.txt"
    shutil.copy(PROMPTS_DIR / "judge_processbench.txt", prompt)
    prompt.write_text("---\nstyle: processbench\n---\n" + prompt.read_text())
    write_jsonl(tmp_path / "responses.jsonl", [record])
    label = hf_split("gsm8k")[0]["label"]
    stage = JudgeStage(ScriptedEngine(lambda r: f"\\boxed{{{label}}}"), prompt=str(prompt), votes=2)
    run_and_close(stage, RunOptions(str(tmp_path / "responses.jsonl"), str(tmp_path / "judged.jsonl"), quiet=True))
    write_jsonl(tmp_path / "rollouts.jsonl", [{**record, "mc": mc_of(label, len(record["steps"]))}])
    run_consensus(str(tmp_path / "rollouts.jsonl"), str(tmp_path / "judged.jsonl"), str(tmp_path / "c.jsonl"), quiet=True)
    args = ["export", str(tmp_path / "c.jsonl"), "--format", "critic", "--judged", str(tmp_path / "judged.jsonl"),
            "-o", str(tmp_path / "critic.jsonl")]
    assert runner.invoke(app, args).exit_code == 0 and len(read_jsonl(tmp_path / "critic.jsonl")) == 2
    prompt.write_text(prompt.read_text().replace("paragraph by paragraph", "step by step"))
    changed = runner.invoke(app, args)
    assert changed.exit_code == 2 and f"c.jsonl:1: {record['id']}: judge prompt {prompt}: its sha256" in changed.stderr
    prompt.unlink()
    missing = runner.invoke(app, args)
    assert missing.exit_code == 2 and f"c.jsonl:1: {record['id']}: judge prompt: {prompt}: no such prompt file" in missing.stderr
    assert json.loads((tmp_path / "critic.jsonl").read_text().splitlines()[0])["agrees"] is True  # the old output stays
