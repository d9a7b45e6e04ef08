"""`krefine bench SUITE --ray [ADDRESS]`: a suite's problems judged on a Ray cluster.

  1) join  the cluster [bench] ray_address names (auto | local | HOST:PORT |
           ray://HOST:PORT), shipping this checkout as the job's working_dir so every
           node runs the driver's code. Ray missing, an address that does not parse or
           does not answer: one line, exit 2.
  2) plan  the device (cuda when the cluster has GPUs), the resource each judge actor
           holds and how many there are, and model actors for a transformers model.
  3) run   problem loops in driver threads: agent/bench/job.py's run_job with the judge
           fleet's pools and the model actors as agent.loop.runner.Services. The driver writes
           every run directory exactly as a single-host bench does, so a driver restarted
           with the same --out resumes the way bench always does. A status line every
           [bench] progress_interval_s: problems done, candidates judged per minute, live
           judges.

Does not judge (agent/bench/ray_judges.py), hold the model (agent/bench/ray_models.py), or find
problems and report results (agent/bench/suite.py).
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import logging
import os
import re
import socket
import subprocess
import sys
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from agent import REPO_ROOT
from agent.config import load_config
from tools.errors import BadInput

INSTALL_HINT = "pip install -e '.[ray]'"
_REACH_TIMEOUT_S = 5.0   # ray.init retries an address that does not answer for minutes


@dataclass(frozen=True)
class Plan:
    device: str                 # "cuda" | "cpu": what every judge runs candidates on
    judge_resource: str         # "GPU", "CPU", or a custom resource
    judges: int
    model_actors: int           # 0 unless the model is loaded by transformers
    model_resource: str         # "GPU" on cuda, else "CPU"
    waiting: int = 0            # judges asked for beyond what the cluster has now (they wait for nodes)


def require_ray(where: str) -> None:
    """BadInput in one line when Ray is not installed."""
    if importlib.util.find_spec("ray") is None:
        raise BadInput("", f"krefine bench: {where} needs Ray, which is not installed: {INSTALL_HINT}")


@contextlib.contextmanager
def joined(address: str, out: Path):
    """Connected to the cluster for the block; the cluster's resources are yielded. A
    caller already connected (a script, the tests) keeps its connection: "auto" or its
    address name that cluster, any other address is refused."""
    import ray
    if ray.is_initialized():
        here = ray.get_runtime_context().gcs_address
        if address not in ("auto", here):
            raise BadInput("", f"krefine bench: this process is connected to the Ray cluster at {here!r}, "
                               f"not {address!r}")
        yield ray.cluster_resources()
        return
    _check_reachable(address)
    excludes = working_dir_excludes(REPO_ROOT, out)
    extra = {"include_dashboard": False} if address == "local" else {}
    try:   # Ray's faults raise; its notices (logging_level) would bury the bench's lines
        ray.init(address=address, runtime_env={"working_dir": str(REPO_ROOT), "excludes": excludes},
                 log_to_driver=False, logging_level=logging.ERROR, **extra)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise BadInput("", f"krefine bench: cannot join the Ray cluster at {address!r}: "
                           f"{' '.join(str(e).split())[:300]}") from None
    try:
        yield ray.cluster_resources()
    finally:
        ray.shutdown()


def working_dir_excludes(root: Path, out: Path) -> list[str]:
    """What the job's working_dir leaves out of the checkout `root`: run directories, the
    results `out` when inside it, what git ignores there (Ray itself reads only
    .gitignore, not .git/info/exclude or git's global excludes), and any virtual
    environment in it (a .venv with torch is GBs; Ray refuses a package over 512 MiB)."""
    excludes = ["runs", "*.sqlite", "**/__pycache__"]   # (Ray leaves .git out itself)
    with contextlib.suppress(ValueError):   # the results may be written inside the checkout
        excludes.append("/" + _escaped(out.resolve().relative_to(root.resolve()).as_posix()) + "/")
    with contextlib.suppress(OSError):
        excludes += ["/" + _escaped(d.name) + "/" for d in sorted(root.iterdir()) if (d / "pyvenv.cfg").is_file()]
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "--others", "--ignored", "--exclude-standard",
                                 "--directory", "-z"], capture_output=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        listed = b""   # not a git checkout, or no git: the patterns above
    excludes += ["/" + _escaped(p) for p in listed.decode(errors="surrogateescape").split("\0") if p]
    return list(dict.fromkeys(excludes))


def _escaped(path: str) -> str:
    """A path as a gitignore pattern that matches it alone."""
    return re.sub(r"([\\*?\[\]!#])", r"\\\1", path)


def _check_reachable(address: str) -> None:
    """A quick TCP connect to the head: ray.init would retry a dead one for minutes."""
    target = _auto_address() if address == "auto" else address
    if target in ("auto", "local"):
        return
    host, _, port = target.removeprefix("ray://").rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=_REACH_TIMEOUT_S).close()
    except OSError as e:
        shown = repr(address) if target == address else \
            f"{address!r} ({target}, from RAY_ADDRESS or the last `ray start`)"
        raise BadInput("", f"krefine bench: no Ray cluster answers at {shown}: "
                           f"{e.strerror or type(e).__name__}") from None


def _auto_address() -> str:
    """What "auto" stands for (RAY_ADDRESS, else the address the last `ray start --head`
    on this machine recorded), or "auto" where Ray has nothing recorded."""
    try:
        from ray._private.services import canonicalize_bootstrap_address
        return canonicalize_bootstrap_address("auto") or "auto"
    except Exception:   # Ray's private helper moved: ray.init resolves "auto" itself, only slower
        return "auto"


def make_plan(resources: dict, config) -> Plan:
    """What runs where, from the cluster's resources and the first setting's config."""
    bench = config.bench
    device = config.run.device or ("cuda" if resources.get("GPU", 0) >= 1 else "cpu")
    resource = bench.judge_resource or ("GPU" if device == "cuda" else "CPU")
    if device == "cuda" and resource != "GPU":
        raise BadInput("", f"krefine bench: [bench] judge_resource = {resource!r} with device cuda: a judge "
                           "on a GPU holds Ray's GPU resource, so that Ray gives it that GPU alone")
    spec = config.model.id
    transformers = spec != "none" and not spec.startswith(("replay:", "openai:"))
    if transformers and "{problem}" in spec:
        raise BadInput("", "krefine bench: --ray loads a transformers model once for the suite; "
                           "{problem} in --model works with replay: files")
    model_actors = bench.model_gpus if transformers else 0
    model_resource = "GPU" if device == "cuda" else "CPU"
    have = int(resources.get(resource, 0))
    free = have - (model_actors if model_resource == resource else 0)
    judges = bench.judges or free
    if judges < 1:
        taken = f", less {model_actors} for the model" if model_resource == resource and model_actors else ""
        raise BadInput("", f"krefine bench: the Ray cluster has {have} {resource}{taken}: no judge can start; "
                           f"add nodes (`ray start --address HEAD:PORT --num-gpus N`, or --resources "
                           f"'{{\"{resource}\": N}}') or set [bench] judge_resource")
    return Plan(device=device, judge_resource=resource, judges=judges, model_actors=model_actors,
                model_resource=model_resource, waiting=max(0, judges - free))


def run_jobs(jobs: list, address: str, config_path: str | None, model: str | None, console) -> dict[Path, str]:
    """agent/bench/workers.py's run_jobs on the cluster: run_dir -> one-line error for jobs that
    could not run."""
    from agent.bench.job import run_job, say_done
    from agent.bench.ray_judges import JudgeFleet, RayJudgePool
    from agent.bench.ray_models import ModelPool
    from agent.loop.runner import Services

    def say(line: str) -> None:
        console.print(line, highlight=False, markup=False)

    config = load_config(config_path, {**jobs[0].setting.overrides, **({"model.id": model} if model else {})})
    out = jobs[0].run_dir.parent.parent
    with joined(address, out) as resources:
        # 1) the plan; each job's config names the cluster's device, not the driver's
        plan = make_plan(resources, config)   # --model is config.model.id
        jobs = [_on_device(j, plan.device) for j in jobs]
        _one_model_config(jobs, config_path, plan)
        say(f"ray: {plan.judges} judge actor(s) on {plan.judge_resource} ({plan.device})"
            + (f", {plan.model_actors} model actor(s)" if plan.model_actors else "")
            + (f"; {plan.waiting} wait for the cluster to grow" if plan.waiting else ""))
        fleet = JudgeFleet.start(plan.judges, device=plan.device, resource=plan.judge_resource,
                                 cache=config.bench.judge_cache, slots=config.eval.test.parallel_compile + 1, say=say)
        models = None
        try:
            # the problem loops load their problems here (on the meta device): torch's lazy
            # modules now, while the actors start
            from tools.judge.warm import warm_imports
            warm_imports("cpu")
            if plan.model_actors:
                models = ModelPool.start(_absolute_path(config.model.id), config.model, plan.model_actors,
                                         resource=plan.model_resource)
                models.load(config.bench.start_timeout_s)
            fleet.wait_ready(config.bench.start_timeout_s)
            services = Services(judges=lambda problem, device, settings, rd: RayJudgePool(fleet, problem, settings, rd),
                                backend=models)
            # 2) problem loops in threads, enough that every judge has candidates waiting
            width = config.bench.problems_in_flight or 2 * plan.judges
            errors: dict[Path, str] = {}
            dead: dict[str, str] = {}   # model servers that refused the connection: not asked again
            with ThreadPoolExecutor(max_workers=width, thread_name_prefix="krefine-problem") as pool:
                running = {pool.submit(run_job, j, config_path, model, progress=False, services=services,
                                       dead=dead): j for j in jobs}
                finished = 0
                try:
                    while running:
                        done, _ = wait(running, timeout=config.bench.progress_interval_s,
                                       return_when=FIRST_COMPLETED)
                        for future in done:
                            job, error = running.pop(future), future.result()
                            finished += 1
                            if error:
                                errors[job.run_dir] = error
                            say_done(console, finished, len(jobs), job, error)
                        say(_status(fleet, finished, len(jobs)))
                except KeyboardInterrupt:
                    # here, not after the pool's exit, which would wait for every problem: every
                    # finished candidate is on disk, stopping now is what a kill does, and the same
                    # command resumes (threads mid-candidate must not write a failed summary)
                    print(f"krefine: interrupted; run the same command again to resume from {out}",
                          file=sys.stderr, flush=True)
                    os._exit(130)
        finally:
            fleet.close()
            if models is not None:
                models.close()
        say(f"ray: {fleet.judged} candidates judged in {fleet.elapsed_min():.1f} min "
            f"({fleet.per_minute():.1f}/min) by {plan.judges} judge(s); {fleet.deaths} judge death(s)")
        return errors


def _status(fleet, finished: int, total: int) -> str:
    return (f"ray: {finished}/{total} problems done · {fleet.per_minute():.1f} candidates/min · "
            f"{fleet.live}/{len(fleet.judges)} judges live")


def _on_device(job, device: str):
    """The job with run.device set: the driver may have no GPU while the cluster has."""
    if job.setting.overrides.get("run.device"):
        return job
    setting = dataclasses.replace(job.setting, overrides={**job.setting.overrides, "run.device": device})
    return dataclasses.replace(job, setting=setting)


def _one_model_config(jobs: list, config_path: str | None, plan: Plan) -> None:
    if not plan.model_actors:
        return
    if len({load_config(config_path, j.setting.overrides).model for j in jobs}) > 1:
        raise BadInput("", "krefine bench: --ray loads a transformers model once for the suite; "
                           "settings that change [model] need one bench each")


def _absolute_path(spec: str) -> str:
    """A local checkpoint directory as an absolute path: model actors run in the job's
    working_dir, not in the driver's cwd."""
    return str(Path(spec).resolve()) if Path(spec).exists() else spec
