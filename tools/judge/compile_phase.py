"""Step 3) compile, in a fresh worker: set-up, import, ModelNew, and each kernel's JIT.

Covers the worker's set-up (its lock-down; a worker that cannot start is the
evaluator's fault), the offer of a judge-owned CUDA IPC buffer for outputs (before any
candidate code runs; else the pipe), importing the candidate and building ModelNew, on
cuda compiling the forward's kernels without launching them (on several threads:
tools/sandbox/warmpool.py), and step 5) on cpu:
every kernel the interpreter ran compiled for sm_90 in a second, clean worker (GPU-only
compile errors, registers, spills). Runs outside the exclusive GPU hold.
"""
from __future__ import annotations

import functools
import secrets
import time

from tools.errors import EvaluatorError
from tools.judge import ground_truth
from tools.judge.record import Evaluation, died, error_diag
from tools.sandbox import isolation
from tools.verdict import Status


def compile_phase(evaluation, worker, seeds, candidate_name) -> tuple[Status | None, list]:
    """Set-up, import, ModelNew, and (cuda) every kernel JIT-compiled without running."""
    s = evaluation.settings
    evaluation.say("compile: fresh sandboxed worker, import the candidate, build ModelNew")
    t = time.monotonic()
    try:
        try:
            hello, _ = worker.request({
                "op": "setup", "device": "cpu" if evaluation.device == "cpu" else "cuda",
                "max_file_mib": s.test.max_file_mib,
                "address_space_gib": s.test.cpu_memory_gib if evaluation.device == "cpu" else 0,
                "gpu_cross_compile": s.test.gpu_cross_compile,
                "lean": evaluation.judge.lean, "activity_probe": ground_truth.probing(evaluation)}, s.test.compile_timeout_s)
        except (isolation.WorkerTimeout, isolation.WorkerDied) as e:
            # no candidate code has run yet: this is the evaluator's failure
            tail = worker.output().get("stderr", "")[-400:]
            raise EvaluatorError(f"the worker could not start ({e}): {tail}") from None
        if not hello.get("ok"):
            raise EvaluatorError(f"worker set-up failed: {hello.get('message')}")
        evaluation.checks["sandbox"] = hello.get("enforced", {})
        evaluation.checks["worker_pid"] = hello.get("pid")
        ground_truth.begin(evaluation, hello.get("activity"))   # CUPTI, probed before any candidate code
        first_ref = evaluation.judge.reference(seeds[0])
        _offer_staging(evaluation, worker, first_ref)   # before any candidate code runs
        try:
            loaded, _ = worker.request({"op": "load", "problem": str(evaluation.problem.path),
                                        "candidate": candidate_name,
                                        "init_seed": s.test.init_seed,
                                        "module_mode": s.test.module_mode}, s.test.compile_timeout_s)
        except isolation.WorkerTimeout as e:
            evaluation.diag("timeout", f"importing and constructing ModelNew took too long: {e}")
            return Status.TIMEOUT, first_ref
        except isolation.WorkerDied:
            return died(evaluation, worker, "import"), first_ref
        if not loaded.get("ok"):
            error_diag(evaluation, loaded)
            return (Status.COMPILE_ERROR if loaded.get("phase") in ("import", "construct") or
                    loaded.get("kind") == "triton_compile" else Status.RUNTIME_ERROR), first_ref
        if evaluation.device == "cuda":
            status = _warm(evaluation, worker)
            if status is not None:
                return status, first_ref
    finally:
        evaluation.phase_s["compile"] = time.monotonic() - t
    return None, first_ref


def _warm(evaluation, worker) -> Status | None:
    """JIT-compile the forward's kernels without launching them (Triton's warmup path),
    outside the exclusive hold on the GPU. A Triton compile error is the verdict; any
    other failure here is left for the trials to find and report."""
    try:
        reply, _ = worker.request({"op": "warm", "seed": secrets.randbelow(2**31 - 1),
                                   "threads": warm_threads()},
                                  evaluation.settings.test.compile_timeout_s)
    except isolation.WorkerTimeout as e:
        evaluation.diag("timeout", f"compiling the forward's kernels took too long: {e}")
        return Status.TIMEOUT
    except isolation.WorkerDied:
        return died(evaluation, worker, "kernel compilation")
    evaluation.checks["warm"] = {"compiled": reply.get("compiled", 0), "threads": reply.get("threads", 1),
                                 "s": reply.get("s")}
    if not reply.get("ok") and reply.get("kind") == "triton_compile":
        error_diag(evaluation, reply)
        return Status.COMPILE_ERROR
    if not reply.get("ok"):
        evaluation.checks["warm"]["left_to_trials"] = f"{reply.get('error_type')}: {str(reply.get('message'))[:200]}"
    return None


@functools.cache
def warm_threads() -> int:
    """Threads for a warm request's compiles (tools/sandbox/warmpool.py): this host's cores
    shared by its GPUs, at most 8; counted once per judge process (NVML's GPU count)."""
    from tools.judge.precompile import MAX_JOBS, compile_jobs
    return compile_jobs(MAX_JOBS)


def _offer_staging(evaluation: Evaluation, worker, ref: list) -> None:
    """On cuda, give the worker a judge-owned CUDA IPC buffer for its outputs (two
    calls' worth: a trial's repeated call) when IPC works here and memory allows;
    otherwise outputs come through the pipe. checks["output_transfer"] says which."""
    if evaluation.device != "cuda":
        evaluation.checks["output_transfer"] = "pipe"
        return
    if evaluation.settings.test.output_transfer == "pipe":
        evaluation.checks["output_transfer"] = "pipe (output_transfer = \"pipe\")"
        return
    import torch
    from tools.sandbox import cudaipc
    need = cudaipc.span([r.numel() * r.element_size() for r in ref] * 2)
    free, _ = torch.cuda.mem_get_info(evaluation.gpu_index)
    if need == 0 or 3 * need > free:  # the buffer, the judge's copies, room for the worker
        evaluation.checks["output_transfer"] = (f"pipe (a {need >> 20} MiB staging buffer would leave too "
                                         f"little of the {free >> 20} MiB free)" if need else "pipe")
        return
    try:
        evaluation.staging = cudaipc.Staging(need, evaluation.gpu_index)
        head = evaluation.staging.tensor[:512]
        head.copy_(torch.arange(512, device=head.device).remainder(256).to(torch.uint8))
        torch.cuda.synchronize(evaluation.gpu_index)
    except cudaipc.IpcError as e:
        evaluation.checks["output_transfer"] = f"pipe (CUDA IPC unavailable: {str(e)[:200]})"
        return   # the buffer, if any, is freed after the worker is gone
    try:
        reply, _ = worker.request({"op": "staging", "handle": evaluation.staging.handle.hex(), "nbytes": need},
                                  evaluation.settings.test.run_timeout_s)
    except (isolation.WorkerTimeout, isolation.WorkerDied) as e:  # no candidate code has run yet
        raise EvaluatorError(f"the worker failed while mapping the CUDA IPC buffer ({e}); "
                             "set [eval] output_transfer = \"pipe\" to avoid IPC") from None
    back = evaluation.staging.tensor[256:512].tolist()
    if reply.get("ok") and reply.get("probe") == list(range(256)) and back == list(range(255, -1, -1)):
        evaluation.checks["output_transfer"] = "cuda_ipc"
        evaluation.staged = evaluation.staging.tensor
        return
    # not used, but freed only after the worker is gone (it may have mapped it)
    evaluation.checks["output_transfer"] = ("pipe (CUDA IPC probe failed: "
                                     f"{reply.get('message') or 'pattern mismatch'}"[:200] + ")")


def gpu_compile(evaluation, worker) -> Status | None:
    """Compile every kernel the interpreter ran for sm_90, in a second, clean worker."""
    try:
        reply, _ = worker.request({"op": "specs"}, evaluation.settings.test.run_timeout_s)
    except (isolation.WorkerTimeout, isolation.WorkerDied) as e:
        evaluation.diag("gpu_compile", f"could not collect the launched kernels: {e}")
        return None
    kernels = compile_specs(evaluation, reply.get("specs", []))
    for k in kernels:
        evaluation.kernels.append(k)
        if k.get("timeout"):
            evaluation.diag("timeout", k["message"])
            return Status.TIMEOUT
        if not k.get("ok"):
            what = f"kernel {k['name']} runs in the interpreter but does not compile for sm_90: " if k.get("name") else ""
            evaluation.diag("triton_compile", what + k.get("message", "")[:600], k.get("line"), k.get("source_line"))
            return Status.COMPILE_ERROR
        if k.get("spills"):
            evaluation.flag("register_spills")
    return None


def compile_specs(evaluation, specs: list[dict]) -> list[dict]:
    """sm_90 compile results for `specs`, from a fresh worker that never ran the
    interpreter (it leaves triton.language patched); [] when that worker could not be set
    up (the evaluator's fault). Once candidate code runs there, its failures fail the
    check: a file that imports only under Triton's interpreter, a build that hangs or a
    process that dies would otherwise leave the interpreter's Python unchecked."""
    if not specs:
        return []
    s = evaluation.settings.test
    w = isolation.start_worker(evaluation.src, device="compile", max_output_bytes=s.max_output_kib << 10,
                               forkserver=evaluation.judge.forkserver("compile"))
    try:
        try:
            w.request({"op": "setup", "device": "compile", "max_file_mib": s.max_file_mib,
                       "address_space_gib": s.cpu_memory_gib}, s.compile_timeout_s)
        except (isolation.WorkerTimeout, isolation.WorkerDied) as e:
            evaluation.checks["gpu_compile_error"] = str(e)
            return []
        try:
            reply, _ = w.request({"op": "compile", "candidate": "candidate.py", "specs": specs,
                                  "arch": 90}, s.compile_timeout_s)
        except isolation.WorkerTimeout:
            return [{"ok": False, "timeout": True, "message": "importing the file and building its launched kernels "
                     f"for sm_90 in a clean process did not finish in {s.compile_timeout_s:.0f} s"}]
        except isolation.WorkerDied as e:
            return [{"ok": False, "message": f"the clean process building the launched kernels for sm_90 died: {e}"}]
    finally:
        w.close()
    if not reply.get("ok"):
        what = ("the file does not import in a clean process without Triton's interpreter, as on a GPU"
                if reply.get("phase") == "import" else "the clean process building the launched kernels for sm_90 failed")
        return [{"ok": False, "line": reply.get("line"), "source_line": reply.get("source_line"),
                 "message": f"{what}: {reply.get('error_type', '')}: {reply.get('message', '')[:500]}"}]
    return reply.get("kernels", [])
