"""The model on a Ray cluster: transformers model actors serving every problem of a bench.

With `krefine bench --ray` and a model loaded by transformers (an HF id or a local
checkpoint), the weights load once per model actor, each on a GPU of its own ([bench]
model_gpus), instead of once per problem; `ModelPool` is the driver's Backend over them
(agent/models/llm.py's interface), handing each call to the least busy actor. A model actor that
dies is restarted by Ray and its call retried there (generation has no side effects).

Does not cover openai:URL and replay:FILE: those backends are cheap and run in the driver,
one per problem, as on one host. Does not build prompts or pick the model (agent/models/llm.py).
"""
from __future__ import annotations

import threading
from typing import Any

from agent.bench.judge_actor import crossing, ray_result
from tools.errors import EvaluatorError


class ModelService:
    """One model actor: agent/models/transformers_backend.py's TransformersBackend, loaded once."""

    def __init__(self, spec: str, model_config):
        from agent.models.transformers_backend import TransformersBackend
        self.backend = TransformersBackend(spec, model_config)   # loaded by load(), or lazily by a restart's first call

    def load(self) -> str:
        with crossing():      # BackendUnavailable reaches the driver as a BadInput: one line, exit 2
            self.backend.load()
        return self.backend.name

    def generate(self, prompt: str, n: int, sampling) -> list:
        with crossing():
            return self.backend.generate(prompt, n, sampling)

    def count_tokens(self, text: str) -> int:
        return self.backend.count_tokens(text)


class ModelPool:
    """A Backend whose calls go to the model actors."""

    def __init__(self, handles: list, spec: str):
        self.handles, self.name = handles, f"ray:transformers:{spec}"
        self._busy = [0] * len(handles)
        self._lock = threading.Lock()

    @classmethod
    def start(cls, spec: str, model_config, n: int, *, resource: str) -> "ModelPool":
        import ray
        need = {"num_gpus": 1, "num_cpus": 0} if resource == "GPU" else {"num_cpus": 1}
        actor = ray.remote(ModelService).options(max_restarts=-1, max_task_retries=3, **need)
        return cls([actor.remote(spec, model_config) for _ in range(n)], spec)

    def load(self, timeout_s: float | None = None) -> None:
        """Every actor's weights now, so a model that cannot load fails before the suite runs."""
        import ray
        refs = [h.load.remote() for h in self.handles]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        if len(ready) < len(refs):
            raise EvaluatorError(f"{len(refs) - len(ready)} of {len(refs)} model actors did not load within "
                                 f"{timeout_s:g} s: does the cluster have a free GPU for each? ([bench] model_gpus)")
        for ref in refs:
            ray_result(ref)

    def generate(self, prompt: str, n: int, sampling) -> list:
        return self._call("generate", prompt, n, sampling)

    def count_tokens(self, text: str) -> int:
        return self._call("count_tokens", text)

    def close(self) -> None:
        import ray
        for h in self.handles:
            ray.kill(h, no_restart=True)

    def _call(self, method: str, *args) -> Any:
        with self._lock:
            i = min(range(len(self.handles)), key=lambda k: self._busy[k])
            self._busy[i] += 1
        try:
            return ray_result(getattr(self.handles[i], method).remote(*args))
        finally:
            with self._lock:
                self._busy[i] -= 1
