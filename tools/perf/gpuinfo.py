"""What GPU a timing ran on and in what state: name, clocks, throttle reasons (pynvml).

Read before and after every timed evaluation so a throttled or down-clocked run is
visible in the verdict. Returns plain dicts; never raises (no NVML -> fewer fields).
`gpu_count`: the GPUs of this machine (the bench's workers, the pre-screen's compile pass).
"""
from __future__ import annotations

_REASONS = {  # nvmlClocksEventReason* bit -> name
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
    0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown", 0x100: "display_clock_setting",
}


def gpu_state(index: int = 0) -> dict:
    """Name, driver, clocks (MHz), temperature (C), power (W), throttle reasons."""
    state: dict = {"index": index}
    try:
        import torch
        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(index)
            state.update(name=props.name, sm_count=props.multi_processor_count,
                         memory_gib=round(props.total_memory / (1 << 30), 1),
                         capability=f"{props.major}.{props.minor}")
    except Exception as e:  # torch without CUDA: still report what NVML knows
        state["torch_error"] = str(e)[:200]
    try:
        import pynvml as nv
        nv.nvmlInit()
        try:
            h = nv.nvmlDeviceGetHandleByIndex(index)
            name = nv.nvmlDeviceGetName(h)
            state["nvml_name"] = name.decode() if isinstance(name, bytes) else name
            drv = nv.nvmlSystemGetDriverVersion()
            state["driver"] = drv.decode() if isinstance(drv, bytes) else drv
            state["sm_clock_mhz"] = nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)
            state["mem_clock_mhz"] = nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)
            state["max_sm_clock_mhz"] = nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM)
            state["temperature_c"] = nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)
            state["power_w"] = round(nv.nvmlDeviceGetPowerUsage(h) / 1000, 1)
            get = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
                nv.nvmlDeviceGetCurrentClocksThrottleReasons
            bits = get(h)
            state["throttle_reasons"] = [n for b, n in _REASONS.items() if bits & b]
        finally:
            nv.nvmlShutdown()
    except Exception as e:  # no NVML here (CPU box, container without the library)
        state["nvml_error"] = str(e)[:200]
    return state


def cuda_healthy(index: int = 0) -> tuple[bool, str]:
    """Run a tiny op on the GPU from the judge's own context and wait for it, while no
    CUDA-graph capture of this process is underway (its device-wide wait would fail and
    break that capture: tools/perf/capture_guard.py)."""
    from tools.perf.capture_guard import gpu_work
    with gpu_work():
        return _probe(index)


def _probe(index: int) -> tuple[bool, str]:
    try:
        import torch
        x = torch.ones(1024, device=f"cuda:{index}")
        ok = float((x + 1).sum().item()) == 2048.0
        torch.cuda.synchronize(index)
        return ok, "" if ok else "wrong result from a health-check kernel"
    except Exception as e:
        return False, f"{type(e).__name__}: {str(e)[:300]}"


def gpu_count() -> int:
    """The GPUs CUDA would number here, from NVML (milliseconds, and no torch import: the
    bench asks before its workers start); torch's count where NVML is absent or a GPU is
    split by MIG (NVML counts the whole GPU)."""
    try:
        import pynvml as nv
        nv.nvmlInit()
        try:
            n = nv.nvmlDeviceGetCount()
            for i in range(n):
                try:
                    if nv.nvmlDeviceGetMigMode(nv.nvmlDeviceGetHandleByIndex(i))[0]:
                        raise LookupError("MIG")
                except nv.NVMLError:
                    pass            # not MIG-capable: a whole GPU
            return n
        finally:
            nv.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no pynvml, an NVML error, a MIG GPU (LookupError): ask torch
        import torch
        return torch.cuda.device_count()
