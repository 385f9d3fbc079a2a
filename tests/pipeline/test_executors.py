"""One executor object, made from the executor options in one place (`make_executor`): the local
one runs the stage here around the engine it starts and closes; Ray's is tested in test_ray_executor.py."""
from __future__ import annotations

import importlib.util
import json

import pytest

from prm_annotate.errors import UsageError
from prm_annotate.pipeline.executors import LocalExecutor, make_executor
from prm_annotate.pipeline.runner import RunOptions
from prm_annotate.stages.sample import SampleStage
from testing.scripted_engine import ScriptedEngine
from tests.test_layout import import_graph


def test_the_executor_is_made_by_name_and_an_unknown_one_is_refused():
    assert make_executor("local") == make_executor() == LocalExecutor()
    with pytest.raises(UsageError, match="--executor 'dask': choose from local, ray"):
        make_executor("dask")
    if importlib.util.find_spec("ray") is not None:
        ray = make_executor("ray", actors=3, cpus_per_actor=0.5, gpus_per_actor=0.0)
        assert ray.name == "ray" and (ray.options.actors, ray.options.cpus_per_actor) == (3, 0.5)


def test_the_local_executor_starts_the_engine_runs_the_stage_and_closes_it(tmp_path):
    src, out = tmp_path / "problems.jsonl", tmp_path / "responses.jsonl"
    src.write_text('{"id": "p", "problem": "2 + 3?", "answer": "5"}\n')
    engines = []

    class Closing(ScriptedEngine):
        closed = False

        def close(self) -> None:
            self.closed = True

    def start(config):
        engines.append(Closing(lambda r: "Add.\n\nSo \\boxed{5}", model=config))
        return engines[-1]

    stage, summary = LocalExecutor().run(lambda engine: SampleStage(engine, n=2), "m", RunOptions(
        input=str(src), output=str(out), quiet=True), start)
    assert summary.written == 2 and stage.engine is engines[0] and engines[0].closed
    assert [json.loads(line)["correct"] for line in out.read_text().splitlines()] == [True, True]


def test_only_the_executors_package_reaches_the_ray_executor():
    """The choice of executor is made in one place: no command imports the Ray executor itself."""
    graph, _ = import_graph()
    users = {module for module, imports in graph.items() if "prm_annotate.pipeline.executors.ray_executor" in imports}
    assert users == {"prm_annotate.pipeline.executors"}
