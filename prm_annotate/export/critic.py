"""`--format critic` (JSONL or Parquet) and `critic-hf` (a DatasetDict with a card): the judge's
critiques as chat SFT data for a generative verifier.

A generative verifier writes a step-by-step critique and then a verdict; it is trained on
critiques whose verdicts agree with step labels. The judge stage keeps every critique
(`judge.outputs`; `judge.votes[i]` is the verdict parsed from `outputs[i]`, null when it did not
parse), and consensus keeps the responses where MC and the judge agree on the first error. So for
each consensus record there is one row per critique whose verdict is the consensus first error
(`--votes agreeing`, the default), or per parsed critique (`--votes all`: the others are negatives,
marked by `verdict` and `agrees`). An unparsed critique is never a row. On a cascaded file
(`judge --escalate-from`), only the second judge's critiques are rows: a record the first judge
decided (`judge.cascade.decided_by` first) gives none, so a critic never trains on its own.

The user turn is the exact text the judge saw: the prompt named in `judge.prompt` (its sha256 must
be `judge.prompt_sha256`) rendered by `render_judge_prompt`, as the judge stage renders it, over
the response's full steps. Consensus keeps the steps up to the first error only (`steps_total`
says how many there were), and nothing else in the record holds the rest, so the full steps come
from the judged file the consensus was made from (`--judged`): its record must hold the same
steps and the very judge block the consensus record carries (the same critiques of the same
response). The judge stage sends no system message, so a row has none.

Row fields avoid TRL's reserved names (`prompt`, `completion`, `label`, ...): TRL's SFT dataset
preparation refuses a `messages` row that has any of them.
"""
from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from pydantic import ValidationError

from prm_annotate.errors import InputError, UsageError
from prm_annotate.export.examples import ExportSummary
from prm_annotate.export.formats import ExportFormat, ExportOptions, Provenance
from prm_annotate.export.hf import Split, card_footer, card_header, source_run_lines, spool_dir, write_hf
from prm_annotate.export.writing import Spool
from prm_annotate.judging import JudgePrompt, load_judge_prompt, render_judge_prompt
from prm_annotate.judging.cascade import FIRST
from prm_annotate.records import Consensus, Judged, describe_validation_error
from prm_annotate.evaluation.labels import read_raw
from prm_annotate.io.inputs import is_json_array
from prm_annotate.io.jsonl import is_stream, iter_jsonl_at, line_at, open_input

CONSUMER = "a chat SFT trainer (messages: user = the judge prompt, assistant = the critique)"
UNPARSED = "critiques without a parsed verdict"  # never a row
FIRST_DECIDED = "responses a cascade's first judge decided (only the second judge's critiques train)"
DISAGREEING = "critiques whose verdict is not the consensus first error (kept by --votes all)"


@dataclass
class Source:
    """A consensus record and what its judged record adds: the full steps the judge saw."""
    where: str
    record: Consensus
    judge: dict[str, Any]  # the record's judge block, as written
    steps: list[str] | None = None  # the judged record's steps (None: not in the judged file)
    problem: str | None = None
    judged_judge: dict[str, Any] | None = None


def _consensus(path: str, where: str, obj: dict[str, Any]) -> Consensus:
    if "labels" not in obj or not isinstance(obj.get("judge"), dict):
        raise InputError(path, where, "not a consensus record: the critic export reads `consensus` output "
                                      "(and, with --judged, the judged file it was made from)")
    try:
        return Consensus.model_validate(obj)
    except ValidationError as exc:
        raise InputError(path, where, describe_validation_error(exc)) from None


def consensus_ids(path: str, name: str, summary: ExportSummary) -> dict[str, Any]:
    """A first pass over the consensus file (`name` in messages): every record validated, its id
    kept (None: the value the judged file's offset takes), nothing else."""
    seen: dict[str, Any] = {}
    for where, obj in read_raw(path):
        summary.read += 1
        rid = _consensus(name, where, obj).id
        if rid in seen:  # named by reading the file again (rare): the first pass holds no places
            first = next(w for w, o in read_raw(path) if o.get("id") == rid)
            raise InputError(name, where, f"duplicate id {rid!r} (first seen at {first})")
        seen[rid] = None
    return seen


class WantedJudged:
    """Where each wanted judged record is: its byte offset in a JSONL file (read again when its
    rows are made), or, for a JSON array (held whole by its reader anyway), the record."""

    def __init__(self, path: str, wanted: dict[str, Any]):
        self.path = path
        self.at = wanted  # id -> offset, or record for an array
        array = is_json_array(path)
        rows = ((w, None, o) for w, o in read_raw(path)) if array else iter_jsonl_at(path)
        for where, offset, obj in rows:
            rid = obj.get("id")
            if rid not in wanted:
                continue
            if wanted[rid] is not None:  # named by reading the file again (rare): no places are held
                first = next(w for w, o in read_raw(path) if o.get("id") == rid)
                raise InputError(path, where, f"duplicate id {rid!r} (first seen at {first})")
            try:
                Judged.model_validate(obj)
            except ValidationError as exc:
                raise InputError(path, where, describe_validation_error(exc)) from None
            wanted[rid] = obj if array else offset
        self._fh = None if array else open(path, "rb")

    def fill(self, source: Source) -> None:
        """Fill a source from its judged record, if the file has one."""
        at = self.at.get(source.record.id)
        if at is None:
            return
        obj = at if self._fh is None else line_at(self._fh, self.path, at)
        try:
            rec = Judged.model_validate(obj)
        except ValidationError as exc:  # the file changed since it was indexed
            raise InputError(self.path, f"byte {at}", describe_validation_error(exc)) from None
        source.steps, source.problem, source.judged_judge = rec.steps, rec.problem, obj["judge"]

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()


def mismatch(source: Source, judged_path: str) -> str | None:
    """Why the judged record is not the one this consensus record was made from, if it is not."""
    rec = source.record
    if source.steps is None:
        return f"not in {judged_path} (--judged must be the judged file the consensus was made from)"
    if source.steps[: len(rec.steps)] != rec.steps:
        return f"{judged_path} holds other steps for it: not the same response"
    total = getattr(rec, "steps_total", None)
    if total is not None and total != len(source.steps):
        return f"steps_total is {total} but {judged_path} holds {len(source.steps)} steps"
    if source.judged_judge != source.judge:
        return f"its judge block is not the one in {judged_path} (another judge run?)"
    outputs, votes = source.judge.get("outputs"), source.judge.get("votes")
    if not isinstance(outputs, list) or not all(isinstance(o, str) for o in outputs):
        return "judge.outputs (the critiques) is missing or not a list of texts"
    if len(outputs) != len(votes):  # type: ignore[arg-type]
        return f"judge.outputs has {len(outputs)} critiques for {len(votes)} votes"  # type: ignore[arg-type]
    return None


class Prompts:
    """The judge prompts the records name, each loaded once and checked against its recorded sha256."""

    def __init__(self) -> None:
        self.loaded: dict[tuple[str, str | None], JudgePrompt | str] = {}

    def get(self, judge: dict[str, Any]) -> JudgePrompt | str:
        """The prompt, or why it is not the one the judge ran with."""
        name, style, sha = judge.get("prompt"), judge.get("style"), judge.get("prompt_sha256")
        if not isinstance(sha, str):
            return "no judge.prompt_sha256: nothing tells that the prompt file is the one the judge saw"
        key = (name, style)
        if key not in self.loaded:
            try:
                self.loaded[key] = load_judge_prompt(name, style)
            except UsageError as exc:
                self.loaded[key] = f"judge prompt: {exc}"
        prompt = self.loaded[key]
        if isinstance(prompt, JudgePrompt) and prompt.file.sha256 != sha:
            return (f"judge prompt {name}: its sha256 is {prompt.file.sha256[:12]}…, the judge ran with "
                    f"{sha[:12]}… (the file changed since)")
        return prompt


def source_rows(source: Source, prompt: JudgePrompt, votes: str, skipped: Counter) -> list[dict[str, Any]]:
    """The rows of one consensus record: one per kept critique, in vote order."""
    user = render_judge_prompt(prompt.file.text, source.problem or "", source.steps or [],
                               start=prompt.style.first_paragraph)
    first_error = source.record.first_error
    rows = []
    for i, (verdict, critique) in enumerate(zip(source.judge["votes"], source.judge["outputs"])):
        if verdict is None:
            skipped[UNPARSED] += 1
            continue
        agrees = verdict == first_error
        if not agrees and votes != "all":
            skipped[DISAGREEING] += 1
            continue
        rows.append({"id": source.record.id, "vote": i,
                     "messages": [{"role": "user", "content": user}, {"role": "assistant", "content": critique}],
                     "first_error": first_error, "verdict": verdict, "agrees": agrees,
                     "judge_prompt": source.judge["prompt"], "judge_model": source.judge.get("model")})
    return rows


def render_problem(tokenizer: Any, row: dict[str, Any]) -> str | None:
    """Why the tokenizer's chat template does not render the row as it stands, if it does not."""
    try:
        text = tokenizer.apply_chat_template(row["messages"], tokenize=False)
    except Exception as exc:  # a template raises whatever its Jinja code raises
        return f"the chat template does not render it ({type(exc).__name__}: {exc})"
    for message in row["messages"]:
        # Templates may trim a turn; one that changes it otherwise trains on another text.
        if message["content"].strip() not in text:
            return f"the chat template changes the {message['role']} turn (it is not in the rendered text)"
    return None


@dataclass(frozen=True)
class Critic(ExportFormat):
    def own_rows(self, path: str, opts: ExportOptions, tokenizer: Any,
                 summary: ExportSummary) -> Iterator[dict[str, Any]]:
        for option, given in (("--keep-scores", opts.keep_scores), ("--step-sep", opts.step_sep is not None)):
            if given:
                raise UsageError(f"{option}: the {self.name} format writes critiques, it has no step scores or separator")
        if opts.judged is None:
            raise UsageError(f"--format {self.name} needs --judged JUDGED, the judged file the consensus was made from: "
                             "consensus keeps the steps up to the first error only, and the judge saw them all")
        if tokenizer is not None and not getattr(tokenizer, "chat_template", None):
            raise UsageError(f"--tokenizer has no chat template; --format {self.name} checks that it renders each row")
        # The consensus file is read twice (its ids, then its rows): a stream is kept in a file first.
        copy = None
        if is_stream(path):
            fd, copy = tempfile.mkstemp(prefix=".export-input.", suffix=".tmp")
            with os.fdopen(fd, "wb") as fh:
                shutil.copyfileobj(open_input(path), fh)
        try:
            wanted = consensus_ids(copy or path, path, summary)
            index = WantedJudged(opts.judged, wanted)
        except BaseException:
            if copy:
                os.unlink(copy)
            raise
        return self._rows(copy or path, path, opts, tokenizer, summary, index, copy)

    def _rows(self, read: str, path: str, opts: ExportOptions, tokenizer: Any, summary: ExportSummary,
              index: WantedJudged, copy: str | None) -> Iterator[dict[str, Any]]:
        prompts = Prompts()
        try:
            for where, obj in read_raw(read):
                rec = _consensus(path, where, obj)
                source = Source(where, rec, obj["judge"])
                index.fill(source)
                rid = rec.id
                if (source.judge.get("cascade") or {}).get("decided_by") == FIRST:
                    summary.skipped[FIRST_DECIDED] += 1
                    continue
                prompt = mismatch(source, opts.judged) or prompts.get(source.judge)
                if isinstance(prompt, str):
                    raise InputError(path, source.where, f"{rid}: {prompt}")
                kept = source_rows(source, prompt, opts.votes or "agreeing", summary.skipped)
                for row in kept if tokenizer is not None else ():
                    why = render_problem(tokenizer, row)
                    if why is not None:
                        raise InputError(path, source.where, f"{rid}, critique {row['vote']}: {why}")
                yield from kept
        finally:
            index.close()
            if copy:
                os.unlink(copy)


class CriticCounts:
    """What the critic card says of its rows, counted as they are written."""

    def __init__(self) -> None:
        self.rows = self.responses = self.agreeing = 0
        self.prompts: set[str] = set()
        self._last: str | None = None

    def add(self, row: dict[str, Any]) -> None:
        self.rows += 1
        self.responses += row["id"] != self._last  # a response's rows are together, and its id unique
        self._last = row["id"]
        self.agreeing += row["agrees"]
        self.prompts.add(str(row["judge_prompt"]))


def critic_card(counts: CriticCounts, source: Provenance, license: str | None = None) -> str:
    from prm_annotate import __version__

    rows, agreeing = counts.rows, counts.agreeing
    header = card_header(license=license, task="text-generation", rows=rows,
                         tags=["generative-verifier", "process-reward-model", "prm-annotate"])
    lines = [*header,
             "# Judge critiques for training a generative verifier", "",
             f"Made by prm-annotate {__version__} from `{source.input}` ({source.read} consensus records read, "
             f"{rows} rows):", "", f"    {shlex.join(source.argv)}", "",
             "## Rows", "", "| rows | responses | critiques agreeing with the consensus | others (negatives) | judge prompts |",
             "|---:|---:|---:|---:|---|",
             f"| {rows} | {counts.responses} | {agreeing} | {rows - agreeing} | {', '.join(sorted(counts.prompts))} |", "",
             *source_run_lines(source.input),
             "## Row schema", "",
             "`messages`: the judge prompt as the user turn (the exact text the judge saw) and one critique as the "
             "assistant turn; `id` (the response), `vote` (which critique), `first_error` (the consensus first error), "
             "`verdict` (the critique's parsed verdict), `agrees` (verdict == first_error), `judge_prompt`, "
             "`judge_model`.", "",
             "## Use", "", "Any chat SFT trainer reads `messages`; keep `agrees` rows for SFT.", "", "```python",
             "from datasets import load_from_disk", "ds = load_from_disk(\"<this directory>\")[\"train\"]",
             "sft = ds.filter(lambda r: r[\"agrees\"])", "```", "", *card_footer(license)]
    return "\n".join(lines)


@dataclass(frozen=True)
class CriticHF(Critic):
    def write(self, rows: Iterable[dict[str, Any]], output: str, opts: ExportOptions,
              finish: Callable[[int], Provenance]) -> None:
        if output == "-":
            raise UsageError(f"--format {self.name} writes a directory: give it with -o DIR")
        counts = CriticCounts()
        with Spool(spool_dir(output)) as spool:
            for row in rows:
                spool.add(row)
                counts.add(row)
            spool.close()
            source = finish(spool.count)
            write_hf(spool, {"train": Split(None)}, output, lambda: critic_card(counts, source, opts.license))

_SOFT = "--soft: critic rows are critiques with a verdict, not step labels"
FORMAT = Critic("critic", summary="the judge's critiques as chat rows for a critic's SFT", consumer=CONSUMER,
                critiques=True, hard_only=_SOFT)
HF_FORMAT = CriticHF("critic-hf", summary="the critic rows as a Hugging Face dataset directory", consumer=CONSUMER,
                     critiques=True, hard_only=_SOFT, directory=True, card=True)
