from __future__ import annotations

import signal
import sys
import threading
from typing import Annotated

import typer

from prm_annotate.cli.app import PANEL_TRAIN, app, handled
from prm_annotate.cli.option_groups import option_groups
from prm_annotate.engines import EngineConfig
from prm_annotate.prm.scorers import PRM_ENGINE
from prm_annotate.reward.server import ServerConfig


@app.command("reward-server", rich_help_panel=PANEL_TRAIN)
@option_groups
def reward_server(*, server_config: ServerConfig, engine: Annotated[EngineConfig, PRM_ENGINE]) -> None:
    """Serve a PRM as an RL reward: OpenRLHF's remote reward model (POST /get_reward, for
    --remote_rm_url) and this server's own form (POST /score, what reward.verl.compute_score sends):
    per-step rewards and their aggregate (--aggregate), as `score` computes them."""
    from prm_annotate.engines import exit_process
    from prm_annotate.prm.checkpoint import locate
    from prm_annotate.prm.scorers import scorer_for
    from prm_annotate.reward.scoring import RewardScorer
    from prm_annotate.reward.server import RewardServer

    host, port, aggregate = server_config.host, server_config.port, server_config.aggregate
    with handled():
        config, model = engine, engine.model
        checkpoint = locate(model)
        kind = scorer_for(checkpoint, served=config.base_url is not None)
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
