from __future__ import annotations

import signal
import sys
import threading
from typing import Annotated

import typer

from prm_annotate.cli.app import StepSepOpt, app, handled
from prm_annotate.cli.option_groups import option_groups
from prm_annotate.engines import EngineConfig
from prm_annotate.prm.scorers import PRM_ENGINE
from prm_annotate.reward.scoring import AGGREGATES, DEFAULT_AGGREGATE

_S = "Server"  # help panel


@app.command("reward-server")
@option_groups
def reward_server(
    host: Annotated[str, typer.Option("--host", rich_help_panel=_S, help="Address to bind (127.0.0.1: this machine only).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, rich_help_panel=_S, help="Port (0: a free one, printed at start).")] = 8008,
    aggregate: Annotated[str, typer.Option("--aggregate", rich_help_panel=_S, help=f"A response's reward from its step rewards: {', '.join(AGGREGATES)} (a request may name another).")] = DEFAULT_AGGREGATE,
    key_env: Annotated[str, typer.Option("--key-env", rich_help_panel=_S, help="Environment variable whose value, when set, every request must bear as `Authorization: Bearer` (OpenRLHF sends none).")] = "PRM_REWARD_KEY",
    max_batch: Annotated[int, typer.Option("--max-batch", min=1, rich_help_panel=_S, help="Most responses in one request (and in one engine call).")] = 1024,
    max_request_mb: Annotated[float, typer.Option("--max-request-mb", min=0.001, rich_help_panel=_S, help="Largest request body, in MiB.")] = 16.0,
    max_clients: Annotated[int, typer.Option("--max-clients", min=1, rich_help_panel=_S, help="Requests handled at once; more are answered 503 with Retry-After.")] = 64,
    client_timeout: Annotated[float, typer.Option("--client-timeout", min=0.1, rich_help_panel=_S, help="Seconds a client may take to send its request.")] = 60.0,
    fallback_reward: Annotated[float, typer.Option("--fallback-reward", rich_help_panel=_S, help="Reward of a response the PRM cannot read (no steps, too long, the step tag in it); the answer's `errors` says why.")] = 0.0,
    step_sep: StepSepOpt = "\\n\\n",
    *,
    engine: Annotated[EngineConfig, PRM_ENGINE],
) -> None:
    """Serve a PRM as an RL reward: OpenRLHF's remote reward model (POST /get_reward, for
    --remote_rm_url) and this server's own form (POST /score, what reward.verl.compute_score sends):
    per-step rewards and their aggregate (min, product, last), as `score` computes them."""
    from prm_annotate.engines import exit_process
    from prm_annotate.errors import UsageError
    from prm_annotate.prm.checkpoint import locate
    from prm_annotate.prm.scorers import scorer_for
    from prm_annotate.reward.protocols import TextRules
    from prm_annotate.reward.scoring import RewardScorer
    from prm_annotate.reward.server import RewardServer, ServerConfig
    from prm_annotate.steps import decode_sep

    with handled():
        if aggregate not in AGGREGATES:
            raise UsageError(f"--aggregate {aggregate}: choose from {', '.join(AGGREGATES)}")
        config, model = engine, engine.model
        checkpoint = locate(model)
        kind = scorer_for(checkpoint, served=config.base_url is not None)
        server_config = ServerConfig(host=host, port=port, aggregate=aggregate, key_env=key_env,
                                     max_request_bytes=int(max_request_mb * 2**20), max_batch=max_batch,
                                     max_clients=max_clients, request_timeout=client_timeout,
                                     fallback_reward=fallback_reward, rules=TextRules(decode_sep(step_sep)))
    try:
        scorer = RewardScorer(kind.start(checkpoint, config))
    except Exception as exc:
        print(f"prm-annotate: error: cannot start the PRM {model}: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    try:
        try:
            server = RewardServer(scorer, server_config)
        except OSError as exc:
            print(f"prm-annotate: error: cannot listen on {host}:{port}: {exc}", file=sys.stderr)
            scorer.close()
            exit_process(2)
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, lambda *_: stop.set())
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
        keyed = " (bearer key required)" if server.key else ""
        print(f"prm-annotate reward-server: {model} ({kind.name}) on {server.url}{keyed}; "
              f"POST /get_reward (OpenRLHF), POST /score, GET /health; aggregate {aggregate}", file=sys.stderr,
              flush=True)
        while not stop.wait(0.5):
            pass
        server.shutdown()
        server.server_close()
    finally:
        scorer.close()
    exit_process(0)
