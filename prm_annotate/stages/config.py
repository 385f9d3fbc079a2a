"""One frozen settings object per model stage: the stage's `config`, what its manifest records
(`settings()`), and what its command builds from its options: each field that is an option says
so (`settings.setting`: flags, bounds, one-sentence help; cli/option_groups.py makes the options).

Each holds its sampling as one `Sampling` (engines/sampling.py), `config.sampling`; the judge's is a
`SamplingOverrides` (None where not given: the protocol fills it).

Token budgets: 2,048 per response and per completion, the budget Qwen2.5-Math's own evaluation
gives its Instruct models (the paper's policies; their context is 4,096 tokens), so a completion
has at least the room the response it continues had. A judge verdict gets 8,192, what ProcessBench
gives critics: the paper protocol's analyses of a long solution need it. A thinking policy's
responses and completions, and a reasoning judge's verdicts, get 32,768 when the budget is left at
its default: the thought comes first (docs/pipeline.md, "Thinking traces").
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional

from prm_annotate.engines.sampling import JUDGE_BUDGET, POLICY_BUDGET, Sampling, SamplingOverrides, sampling_fields
from prm_annotate.errors import UsageError
from prm_annotate.thinking.split import reasoning_parsers
from prm_annotate.judging import JUDGE_PROMPTS, JUDGE_PROTOCOLS, JUDGE_STYLES
from prm_annotate.judging.cascade import CONFIDENCES
from prm_annotate.io.prompt_files import DEFAULT_SYSTEM_PROMPT, SYSTEM_PROMPTS
from prm_annotate.segmenting import SEGMENTERS
from prm_annotate.settings import Setting, declare, group, setting
from prm_annotate.steps import DEFAULT_SEP, STEP_SEP
from prm_annotate.strategies import STRATEGIES
from prm_annotate.recovery.rules import RECOVERY_RULES, RecoveryRule, make_recovery_rule
from prm_annotate.strategies.zero_rules import ALL_K, DEFAULT_TOLERANCE, ZERO_RULES, ZeroRule, make_zero_rule

LABELS = ("hard", "soft")
CUT_COMPLETIONS = ("graded", "wrong", "right")
REASONING_MODES = ("auto", "think", "off")


def _speculate_help() -> str:
    named = STRATEGIES.where(lambda s: s.speculates)
    return (f"Probes the strategies that speculate ({named}) may start before a round asks for them (0: off; "
            "default: 256 in process, 0 over HTTP).")


def entry(config: Any) -> dict[str, Any]:
    """The config as a manifest records it: its fields in order, its sampling's in its place."""
    out: dict[str, Any] = {}
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if field.name == "sampling":
            out.update(dataclasses.asdict(value))
        else:
            out[field.name] = value
    return out


def configured(config: Any, settings: dict[str, Any]) -> Any:
    """`config` with `settings` replacing its fields; a field of its sampling may be given by name
    (`configured(SampleConfig(), {"n": 4, "temperature": 0})`)."""
    inner = {k: settings.pop(k) for k in sampling_fields() if k in settings}
    if inner:
        settings["sampling"] = dataclasses.replace(config.sampling, **inner)
    return dataclasses.replace(config, **settings)


# sample's and judge's --reasoning: one meaning (a thinking model's thought told from its answer).
REASONING = Setting(flags=("--reasoning",), show_default="auto", help=(
    "Tell a thinking model's thought from its answer (a judge's, before its verdict is parsed): auto, think, "
    "off, or a vLLM reasoning parser (docs/pipeline.md)."))


def check_reasoning(choice: Optional[str]) -> None:
    """UsageError for a --reasoning that is neither a mode nor a vLLM reasoning parser."""
    if choice not in (None, *REASONING_MODES):
        parsers = reasoning_parsers()
        if choice not in parsers:
            raise UsageError(f"--reasoning {choice}: choose {', '.join(REASONING_MODES)} or a vLLM reasoning "
                             f"parser ({', '.join(parsers) or 'vLLM is not installed'})")


def reasoning_budget(sampling: Sampling) -> Sampling:
    """A thinking policy's sampling: max tokens left at the default rise to the reasoning budget."""
    if sampling.max_tokens == POLICY_BUDGET.answer:
        return dataclasses.replace(sampling, max_tokens=POLICY_BUDGET.thinking)
    return sampling


@dataclass(frozen=True)
class SampleConfig:
    """How `sample` samples.

    Attributes:
        sampling: temperature, top-p, top-k, max tokens per response, and the run seed each
            response's seed derives from.
        step_sep: the separator a response is split into steps at (the segmenters' `sep` unless
            `segment_options` sets it).
        system_prompt: a built-in name (prm_annotate.io.prompt_files.SYSTEM_PROMPTS), a file, or
            "none"; None: the default (Qwen2.5-Math-Instruct's chain-of-thought prompt).
        reasoning: how a thinking policy's thought is told from its answer: "auto" (None: the
            same), "think", "off", or a vLLM reasoning parser (thinking/probe.py). With a thought,
            max tokens left at the policy's budget rise to its thinking one (POLICY_BUDGET).
        segment: how a response is cut into steps (segmenting.SEGMENTERS; docs/pipeline.md).
        segment_options: the segmenter's settings as "KEY=VALUE" texts (its dataclass fields).
        keep_logprobs: keep the sampled tokens' log-probabilities in each record
            (`token_logprobs`), so `segment --segment confidence` can cut it later; the
            confidence segmenter asks for them (and keeps them) without this.
    """

    n: int = setting(8, flags=("-n", "--num-samples"), min=1, help="Responses per problem.")
    sampling: Sampling = group(Sampling(max_tokens=POLICY_BUDGET.answer, seed=0),
                               words={"output": "response", "request": "response"})
    step_sep: str = declare(STEP_SEP, DEFAULT_SEP)
    system_prompt: Optional[str] = setting(None, flags="--system-prompt", show_default=DEFAULT_SYSTEM_PROMPT,
                                           help=SYSTEM_PROMPTS.help)
    reasoning: Optional[str] = declare(REASONING, None)
    segment: str = setting("paragraphs", flags="--segment", help=SEGMENTERS.help)
    segment_options: Optional[list[str]] = setting(None, flags="--segment-option", show_default=False, help=(
        "A setting of the segmenter, KEY=VALUE (repeat it; e.g. budget=256, markers=Wait,Hmm)."))
    keep_logprobs: bool = setting(False, flags="--keep-logprobs/--no-keep-logprobs", help=(
        "Keep the sampled tokens' log-probabilities in each record (for `segment --segment confidence`)."))

    def __post_init__(self) -> None:
        check_reasoning(self.reasoning)

    def segmenter(self) -> Any:
        """The configured segmenter (a `sep` it has defaults to `step_sep`)."""
        from prm_annotate.segmenting import SEGMENTERS, get_segmenter, parse_options

        settings = parse_options(self.segment_options or ())
        if self.segment in SEGMENTERS and "sep" in {f.name for f in dataclasses.fields(SEGMENTERS[self.segment])}:
            settings.setdefault("sep", self.step_sep)
        return get_segmenter(self.segment, settings)


@dataclass(frozen=True)
class RolloutConfig:
    """How `rollout` estimates each step's Monte Carlo score (docs/pipeline.md).

    Attributes:
        label: "hard" or "soft", recorded as `mc.label`; soft needs every step's score (the
            exhaustive strategy). `first_error` is always hard.
        strategy: the rollout strategy (strategies.STRATEGIES).
        judged: with a strategy that checks the judge's verdicts (verify), the judged file of
            these responses; its `judge.first_error` is what MC confirms or refutes.
        zero_rule: when a step sampled in rounds is called 0 (strategies.zero_rules.ZERO_RULES):
            "all-k" (the paper's: all K could not make it a 1) or a sequential rule that stops
            sooner ("beta-binomial"); not for exhaustive.
        sampling: temperature, top-p, top-k, max tokens per completion, and the run seed each
            completion's seed derives from.
        step_sep: the step separator.
        system_prompt: None: the one each response was sampled under (its `generator.system_prompt`).
        force_system_prompt: without it a response sampled under another prompt is refused.
        share_prefixes: seeds come from the prefix, not the response id; with binary/scan,
            prefixes of right solutions are taken as 1 without sampling.
        speculate: with early-stop, binary or scan, start probes ahead of the round that may ask
            for them while fewer than this many requests are in flight; 0: off. None: the
            command's default (256 in process, 0 over HTTP), 0 for the stage.
        keep_completions: with their verdicts, so a reviewer sees what made a step 0.
        recovery_rule: MC's reading of slips and their corrections, written as `mc.recovery`
            (recovery/rules.py: "soft-drop"); None: none written (the default).
        recovery_drop: the soft-drop rule's drop (None: its default, 0.25).
    """

    k: int = setting(8, flags=("-k", "--k"), min=1, help="Completions per step.")
    label: str = setting("hard", flags="--label", help=(
        "hard|soft, recorded as mc.label (soft needs --strategy exhaustive; export takes MC scores as labels "
        "with its own --soft)."))
    strategy: str = setting("exhaustive", flags="--strategy", help=STRATEGIES.help)
    judged: Optional[str] = setting(None, flags="--judged", help=(
        "With --strategy verify: the judge's output on these responses, whose first errors MC checks."))
    threshold: float = setting(0.0, flags="--threshold", min=0.0, max=1.0,
                               help="Hard label = score > threshold (0: any right completion).")
    zero_rule: str = setting("all-k", flags="--zero-rule", help=ZERO_RULES.help)
    zero_tolerance: Optional[float] = setting(None, flags="--zero-tolerance", show_default=str(DEFAULT_TOLERANCE), help=(
        "With --zero-rule beta-binomial: the largest chance, under its prior, that the rest of the K would "
        "have made a step it calls 0 a 1."))
    sampling: Sampling = group(Sampling(max_tokens=POLICY_BUDGET.answer, seed=0),
                               words={"output": "completion", "request": "completion"})
    step_sep: str = declare(STEP_SEP, DEFAULT_SEP)
    system_prompt: Optional[str] = setting(None, flags="--system-prompt", help=(
        "System prompt to continue under (a built-in name, a FILE, or none; default: each response's own)."))
    force_system_prompt: bool = setting(False, flags="--force-system-prompt/--no-force-system-prompt", help=(
        "Continue under --system-prompt even where the responses were sampled under another."))
    cut_completions: str = setting("graded", flags="--cut-completions", help=(
        "What a completion cut at --max-tokens counts as: graded (on its text), wrong or right."))
    share_prefixes: bool = setting(False, flags="--share-prefixes/--no-share-prefixes", help=(
        "Roll out identical step prefixes of one problem's responses once."))
    speculate: Optional[int] = setting(None, flags="--speculate", min=0, show_default=False, help=_speculate_help)
    keep_completions: int = setting(0, flags="--keep-completions", min=0, help=(
        "Keep up to this many completion texts per probed step in mc.kept_completions (0: none)."))
    recovery_rule: Optional[str] = setting(None, flags="--recovery-rule", show_default=False, help=RECOVERY_RULES.help)
    recovery_drop: Optional[float] = setting(None, flags="--recovery-drop", show_default="0.25", help=(
        "With --recovery-rule soft-drop: the drop in the soft score that makes a step a slip (and the rise a correction)."))

    def __post_init__(self) -> None:
        if self.recovery_rule is None and self.recovery_drop is not None:
            raise UsageError("--recovery-drop is read by --recovery-rule only")
        if self.recovery_rule is not None:
            make_recovery_rule(self.recovery_rule, self.recovery_drop)  # an unknown rule is refused here
            if self.strategy != "exhaustive":
                raise UsageError(f"--recovery-rule {self.recovery_rule} reads every step's soft score: it needs "
                                 f"--strategy exhaustive, not {self.strategy}")
        if self.keep_completions < 0:
            raise UsageError("--keep-completions must be 0 or more")
        if self.label not in LABELS:
            raise UsageError(f"--label {self.label}: choose hard or soft")
        if not 0.0 <= self.threshold < 1.0:
            raise UsageError("--threshold must be below 1 (a hard label is score > threshold)")
        if self.cut_completions not in CUT_COMPLETIONS:
            raise UsageError(f"--cut-completions {self.cut_completions}: choose {', '.join(CUT_COMPLETIONS)}")
        if self.force_system_prompt and self.system_prompt is None:
            raise UsageError("--force-system-prompt needs --system-prompt")
        needs_judged = self.strategy in STRATEGIES and STRATEGIES[self.strategy].needs_judged
        if needs_judged and self.judged is None:
            raise UsageError(f"--strategy {self.strategy} checks the judge's verdicts: give them with --judged "
                             "judged.jsonl (the output of `judge` on the same responses)")
        if self.judged is not None and not needs_judged:
            raise UsageError(f"--judged is read by --strategy verify only, not {self.strategy}")
        rule = self.zero_rule_object  # an unknown rule or a bad tolerance is refused here
        if rule != ALL_K and self.strategy in STRATEGIES and not STRATEGIES[self.strategy].takes_zero_rule:
            raise UsageError(f"--zero-rule {rule.name}: --strategy {self.strategy} samples all K at once, so no rule "
                             f"can stop it sooner (use a strategy that samples in rounds: "
                             f"{STRATEGIES.where(lambda s: s.takes_zero_rule)})")

    @property
    def recovery_rule_object(self) -> RecoveryRule | None:
        return None if self.recovery_rule is None else make_recovery_rule(self.recovery_rule, self.recovery_drop)

    @property
    def zero_rule_object(self) -> ZeroRule:
        return make_zero_rule(self.zero_rule, self.zero_tolerance)


@dataclass(frozen=True)
class JudgeConfig:
    """How `judge` asks for verdicts and reads them (docs/pipeline.md). Sampling values left at None
    take the protocol's (`JudgeProtocol.sampling`); a protocol that sets them itself
    (processbench-official) refuses them when given.

    Attributes:
        prompt: a built-in prompt (judging.JUDGE_PROMPTS) or a template file with {problem} and
            {paragraphs}; None: the protocol's own (paper; processbench under processbench-official;
            slips under recovery).
        style: the answer style of a prompt file that declares none (judging.JUDGE_STYLES).
        protocol: how the judge is sampled and read (judging.JUDGE_PROTOCOLS).
        sampling: the sampling given (None where not).
        reasoning: how a reasoning judge's thought is split off before its answer is parsed: "auto"
            (None: the same), "think", "off", or a vLLM reasoning parser (thinking/split.py).
        keep_reasoning: keep each vote's thought in the record (its token count is always kept).
        verdict_logprobs: ask for the sampled tokens' log-probabilities and keep each vote's verdict's
            (`judge.verdict_logprobs`): a first judge's confidence (judging/cascade.py).
        escalate_from: read by judging/cascade.py.
        confidence: how sure the first judge is (judging.cascade.CONFIDENCES); None: prm-margin for
            a PRM, verdict-prob for a critic that kept logprobs, else votes.
    """

    prompt: Optional[str] = setting(None, flags="--prompt", show_default="paper", help=JUDGE_PROMPTS.help)
    style: Optional[str] = setting(None, flags="--style", help=JUDGE_STYLES.help)
    protocol: str = setting("strict", flags="--protocol", help=JUDGE_PROTOCOLS.help)
    votes: int = setting(1, flags="--votes", min=1, help="Verdicts per response, made one first error as --protocol says.")
    # None where not given (the protocol's value); the defaults shown are the strict protocol's.
    sampling: SamplingOverrides = group(SamplingOverrides(), words={"output": "verdict", "request": "vote"}, changes={
        "temperature": {"help": "Softmax temperature; default: 0 with one vote, 0.7 with several."},
        "top_p": {"show_default": "1.0"}, "top_k": {"show_default": "0"},
        "max_tokens": {"show_default": str(JUDGE_BUDGET.answer)}, "seed": {"show_default": "0"}})
    constrained: bool = setting(False, flags="--constrained/--no-constrained",
                                help="Force the verdict's answer (vLLM structured outputs).")
    reasoning: Optional[str] = declare(REASONING, None)
    keep_reasoning: bool = setting(False, flags="--keep-reasoning/--no-keep-reasoning",
                                   help="Keep each vote's thought in judge.reasoning (long).")
    verdict_logprobs: bool = setting(False, flags="--verdict-logprobs/--no-verdict-logprobs", help=(
        "Keep each vote's verdict log-probability in judge.verdict_logprobs (a cascade's first judge's confidence)."))
    escalate_from: Optional[str] = setting(None, flags="--escalate-from", show_default=False, help=(
        "A cascade: the first judge's file (a critic's judge output or a PRM's score output); its verdict stands "
        "where it is sure, the rest is judged by --model (docs/cascade.md)."))
    confidence: Optional[str] = setting(None, flags="--confidence", show_default=False, help=CONFIDENCES.help)
    escalate_below: Optional[float] = setting(None, flags="--escalate-below", show_default=False, help=(
        "With --escalate-from: a response whose first-judge confidence is below this is judged here."))
    budget: Optional[str] = setting(None, flags="--budget", show_default=False, help=(
        "With --escalate-from, instead of --escalate-below: the share to judge here, the least confident first "
        "(e.g. 10%), made a threshold over the whole first file."))

    def __post_init__(self) -> None:
        if self.escalate_from is None and any(
                x is not None for x in (self.confidence, self.escalate_below, self.budget)):
            raise UsageError("--confidence, --escalate-below and --budget are read with --escalate-from only")
        if self.escalate_from is not None and (self.escalate_below is None) == (self.budget is None):
            raise UsageError("--escalate-from needs one of --escalate-below THRESHOLD or --budget SHARE")
        if self.confidence is not None:
            CONFIDENCES.named(self.confidence)
        if self.verdict_logprobs and self.constrained:
            raise UsageError("--verdict-logprobs reads the verdict in the free answer: leave out --constrained")
        JUDGE_PROTOCOLS.named(self.protocol).check(self)
        check_reasoning(self.reasoning)
        if self.constrained and self.reasoning not in (None, "auto", "off"):
            raise UsageError("--constrained stops the free text at the answer lead, which a thought may write: "
                             "leave --reasoning out")

    @property
    def prompt_choice(self) -> str:
        """--prompt, or the protocol's own prompt."""
        return self.prompt or JUDGE_PROTOCOLS[self.protocol].prompt

    @property
    def run_seed(self) -> int:
        """The engine's seed (each request carries its own)."""
        return 0 if self.sampling.seed is None else self.sampling.seed
