from __future__ import annotations

from typing import Annotated, Optional

import typer

from prm_annotate.cli.app import (AnswerFieldOpt, BatchOpt, FormatOpt, IdFieldOpt, InputArg, LimitOpt, OutputOpt,
                                  ProblemFieldOpt, QuietOpt, ShardOpt, SkipInvalidOpt, StepSepOpt, app, handled,
                                  run_options)
from prm_annotate.cli.executor_options import ExecutorOpt, RayActorsOpt, RayCpusOpt, RayGpusOpt, ray_options
from prm_annotate.cli.engine_options import (ApiKeyEnvOpt, BaseUrlOpt, ConcurrencyOpt, DtypeOpt, EnforceEagerOpt,
                                             GpuMemOpt, KvCacheOpt, MaxAttemptsOpt, MaxModelLenOpt, ModelOpt, RequestTimeoutOpt,
                                             StartTimeoutOpt, TensorParallelOpt, build_config)

SystemPromptOpt = Annotated[Optional[str], typer.Option(
    "--system-prompt", help="System prompt file (default: prompts/sample_system.txt).")]


@app.command()
def sample(
    input: InputArg,
    model: ModelOpt,
    output: OutputOpt = "-",
    n: Annotated[int, typer.Option("-n", "--num-samples", min=1, help="Responses per problem.")] = 8,
    temperature: Annotated[float, typer.Option("--temperature", min=0.0)] = 0.7,
    top_p: Annotated[float, typer.Option("--top-p", min=0.0, max=1.0)] = 1.0,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="Tokens per response.")] = 1024,
    seed: Annotated[int, typer.Option("--seed", help="Run seed; each response's seed derives from it.")] = 0,
    system_prompt: SystemPromptOpt = None,
    step_sep: StepSepOpt = r"\n\n",
    format: FormatOpt = "auto",
    id_field: IdFieldOpt = "id",
    problem_field: ProblemFieldOpt = "problem",
    answer_field: AnswerFieldOpt = "answer",
    limit: LimitOpt = None,
    batch_size: BatchOpt = 16,
    skip_invalid: SkipInvalidOpt = False,
    quiet: QuietOpt = False,
    shard: ShardOpt = None,
    executor: ExecutorOpt = "local",
    ray_actors: RayActorsOpt = 2,
    ray_cpus_per_actor: RayCpusOpt = 1.0,
    ray_gpus_per_actor: RayGpusOpt = None,
    base_url: BaseUrlOpt = None,
    api_key_env: ApiKeyEnvOpt = None,
    concurrency: ConcurrencyOpt = 16,
    request_timeout: RequestTimeoutOpt = 600.0,
    max_attempts: MaxAttemptsOpt = 5,
    dtype: DtypeOpt = "auto",
    max_model_len: MaxModelLenOpt = None,
    enforce_eager: EnforceEagerOpt = None,
    kv_cache_gb: KvCacheOpt = None,
    tensor_parallel_size: TensorParallelOpt = 1,
    gpu_memory_utilization: GpuMemOpt = 0.9,
    start_timeout: StartTimeoutOpt = None,
) -> None:
    """Sample n step-by-step responses per problem; split into steps and grade the final answers."""
    from prm_annotate.cli.model_stage import run_model_stage
    from prm_annotate.prompt_files import load_prompt
    from prm_annotate.stages.sample import SYSTEM_PROMPTS, SampleStage
    from prm_annotate.steps import decode_sep

    with handled():
        opts = run_options(input, output, format=format, id_field=id_field, problem_field=problem_field,
                           answer_field=answer_field, limit=limit, batch_size=batch_size,
                           skip_invalid=skip_invalid, quiet=quiet, shard=shard)
        ray = ray_options(executor, ray_actors, ray_cpus_per_actor, ray_gpus_per_actor)
        config = build_config(model=model, base_url=base_url, api_key_env=api_key_env, concurrency=concurrency,
                              request_timeout=request_timeout, max_attempts=max_attempts, dtype=dtype,
                              max_model_len=max_model_len, enforce_eager=enforce_eager, kv_cache_gb=kv_cache_gb,
                              tensor_parallel_size=tensor_parallel_size, gpu_memory_utilization=gpu_memory_utilization,
                              start_timeout=start_timeout, seed=seed)
        prompt = load_prompt(system_prompt or "default", SYSTEM_PROMPTS)
        sep = decode_sep(step_sep)

    def report_correct(stage, summary) -> None:
        if stage.stats["responses"]:
            typer.echo(f"sample: {stage.stats['correct']} of {stage.stats['responses']} responses correct, "
                       f"{stage.stats['truncated']} cut at --max-tokens", err=True)

    run_model_stage(config, lambda engine: SampleStage(
        engine, n=n, temperature=temperature, top_p=top_p, max_tokens=max_tokens, seed=seed, step_sep=sep,
        system_prompt=prompt, engine_info=config.describe()), opts, report_correct, ray=ray)
