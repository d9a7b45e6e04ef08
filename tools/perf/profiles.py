"""GPU hardware profiles: the ceilings every roofline figure is measured against.

Covers the frozen `GpuProfile`, loading profiles/*.toml (datasheet figures, one file per
GPU model), choosing one from the device name that pynvml / torch report, and, for a GPU
no file names, `measured_profile`: ceilings measured on the device (a large copy, large
matrix products), cached per GPU name in a JSON file so each GPU is measured once.
Does not decide anything about a candidate: tools/perf/roofline.py and tools/perf/bottleneck.py do.
"""
from __future__ import annotations

import dataclasses
import functools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tools import jsonio
from tools.settings import SettingsError, build

PROFILES_DIR = Path(__file__).resolve().parents[2] / "profiles"
DEFAULT_CACHE = Path.home() / ".cache" / "krefine" / "gpu_ceilings.json"
CACHE_SCHEMA = 1


@dataclass(frozen=True)
class GpuProfile:
    """Peak figures of one GPU model. Tensor FLOP/s are dense (no 2:4 sparsity)."""
    name: str
    dram_gbps: float
    peak_fp32_tflops: float               # CUDA cores, no tensor cores
    peak_bf16_tflops: float
    sm_count: int
    l2_mib: float
    smem_per_sm_kib: int
    regs_per_sm: int = 65536
    max_threads_per_sm: int = 2048
    max_blocks_per_sm: int = 32
    peak_tf32_tflops: float | None = None
    peak_fp16_tflops: float | None = None
    peak_fp8_tflops: float | None = None  # None: no FP8 tensor cores (or not measured)
    compute_capability: str = ""          # "9.0"
    name_patterns: tuple[str, ...] = ()   # regexes, fullmatch, case-insensitive
    source: str = ""                      # "datasheet: ..." or "measured on ..."

    def validate(self) -> str | None:
        for f in ("dram_gbps", "peak_fp32_tflops", "peak_bf16_tflops", "sm_count", "l2_mib"):
            if not getattr(self, f) > 0:
                return f"{f} must be positive"
        for p in self.name_patterns:
            try:
                re.compile(p)
            except re.error as e:
                return f"name_patterns: {p!r} is not a regex ({e})"
        return None

    @property
    def measured(self) -> bool:
        return self.source.startswith("measured")

    def peak_tflops(self, dtype: str) -> float:
        """Peak for a compute dtype ("fp32", "tf32", "bf16", "fp16", "fp8"); a missing
        tensor figure falls back to the next one down so a roofline is always defined."""
        chain = {"fp8": ("peak_fp8_tflops", "peak_fp16_tflops", "peak_bf16_tflops"),
                 "fp16": ("peak_fp16_tflops", "peak_bf16_tflops"),
                 "bf16": ("peak_bf16_tflops",),
                 "tf32": ("peak_tf32_tflops", "peak_fp32_tflops"),
                 "fp32": ("peak_fp32_tflops",),
                 "fp64": ("peak_fp32_tflops",)}.get(dtype)
        if chain is None:
            raise ValueError(f"unknown compute dtype {dtype!r}")
        for f in chain:
            v = getattr(self, f)
            if v:
                return float(v)
        raise AssertionError("peak_bf16_tflops and peak_fp32_tflops are required")

    def matches(self, gpu_name: str) -> bool:
        name = " ".join(gpu_name.split())
        return any(re.fullmatch(p, name, re.IGNORECASE) for p in self.name_patterns)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def load_profiles(directory: str | Path = PROFILES_DIR) -> tuple[GpuProfile, ...]:
    """Every profiles/*.toml, validated; a bad file raises SettingsError naming it."""
    profiles = []
    required = [f.name for f in dataclasses.fields(GpuProfile)
                if f.default is dataclasses.MISSING]
    for path in sorted(Path(directory).glob("*.toml")):
        with open(path, "rb") as f:
            table = tomllib.load(f)
        missing = [k for k in required if k not in table]
        if missing:
            raise SettingsError(f"{path}: missing key(s) {', '.join(missing)}")
        profiles.append(build(GpuProfile, table, str(path)))
    return tuple(profiles)


@functools.lru_cache(maxsize=4)
def _bundled(directory: str) -> tuple[GpuProfile, ...]:
    return load_profiles(directory)


def profile_for(gpu_name: str, profiles: tuple[GpuProfile, ...] | None = None) -> GpuProfile | None:
    """The profile whose name_patterns fullmatch `gpu_name`, or None for an unknown GPU.

    Fullmatch, not substring: "NVIDIA H200 NVL" (a lower-power part) and MIG slices
    ("... MIG 1g.10gb") must not borrow a whole SXM part's ceilings.
    """
    for p in (profiles if profiles is not None else _bundled(str(PROFILES_DIR))):
        if p.matches(gpu_name):
            return p
    return None


# -- unknown GPUs: measured ceilings ----------------------------------------------------

def measure_ceilings(device=0) -> dict:
    """Measure dram_gbps (device copy), fp32 / tf32 / bf16 matmul TFLOP/s on `device`.

    Sizes are far above any L2 (copy of 2 x 512 MiB) and large enough to fill the chip
    (8192^3 bf16). Random data, not zeros: zeros run faster on tensor cores (METHOD.md).
    """
    import torch

    dev = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)

    def median_ms(fn, reps):
        fn()
        torch.cuda.synchronize(dev)
        times = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        return sorted(times)[len(times) // 2]

    def copy_gbps():
        src = torch.empty(512 << 20, dtype=torch.uint8, device=dev).random_()
        dst = torch.empty_like(src)
        return 2 * src.numel() / (median_ms(lambda: dst.copy_(src), 20) * 1e-3) / 1e9  # read + write

    def matmul_tflops(n, dtype, reps, tf32=False):
        a = torch.randn(n, n, device=dev, dtype=dtype)
        b = torch.randn(n, n, device=dev, dtype=dtype)
        saved = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            return 2 * n**3 / (median_ms(lambda: a @ b, reps) * 1e-3) / 1e12
        finally:
            torch.backends.cuda.matmul.allow_tf32 = saved

    out = {"dram_gbps": copy_gbps(),
           "peak_bf16_tflops": matmul_tflops(8192, torch.bfloat16, 10),
           "peak_tf32_tflops": matmul_tflops(8192, torch.float32, 5, tf32=True),
           # plain fp32 runs on the CUDA cores, far slower: a smaller product keeps this short
           "peak_fp32_tflops": matmul_tflops(4096, torch.float32, 5)}
    return out


def measured_profile(device=0, *, cache_path: str | Path = DEFAULT_CACHE,
                     measure: Callable[[object], dict] = measure_ceilings,
                     properties: dict | None = None) -> GpuProfile:
    """Ceilings for a GPU no profiles/*.toml names, measured once and cached per name.

    `properties` (name, sm_count, l2_mib, ...) defaults to torch's device properties;
    `measure(device)` returns the measured peaks. Both are injectable so the cache is
    testable without a GPU. A corrupt or foreign cache file is re-measured, not fatal.
    """
    props = properties if properties is not None else device_properties(device)
    name = props["name"]
    cache_path = Path(cache_path)
    try:
        cache = jsonio.read_json(cache_path)
        if not isinstance(cache, dict) or cache.get("schema") != CACHE_SCHEMA:
            cache = {}
    except (OSError, ValueError):
        cache = {}
    entry = cache.get("gpus", {}).get(name)
    if entry is None:
        entry = {**props, **measure(device)}
        entry["source"] = f"measured on {name} (copy + matmul ceilings)"
        cache = {"schema": CACHE_SCHEMA, "gpus": {**cache.get("gpus", {}), name: entry}}
        jsonio.write_json(cache_path, cache)
    fields = {f.name for f in dataclasses.fields(GpuProfile)}
    table = {k: v for k, v in entry.items() if k in fields and v is not None}
    table["name_patterns"] = [re.escape(name)]
    return build(GpuProfile, table, f"{cache_path} [{name}]")


def device_properties(device=0) -> dict:
    """Name and the occupancy-relevant limits torch reports for `device`."""
    import torch
    p = torch.cuda.get_device_properties(device)
    return {
        "name": p.name,
        "sm_count": p.multi_processor_count,
        "l2_mib": p.L2_cache_size / 2**20,
        "smem_per_sm_kib": getattr(p, "shared_memory_per_multiprocessor", 0) // 1024 or 100,
        "regs_per_sm": getattr(p, "regs_per_multiprocessor", 65536),
        "max_threads_per_sm": getattr(p, "max_threads_per_multi_processor", 2048),
        "compute_capability": f"{p.major}.{p.minor}",
    }


def gpu_profile(device=0, *, profiles_dir: str | Path = PROFILES_DIR,
                cache_path: str | Path = DEFAULT_CACHE) -> GpuProfile:
    """The judge's one call: the datasheet profile for this device, else measured."""
    import torch
    known = profile_for(torch.cuda.get_device_name(device), _bundled(str(profiles_dir)))
    return known if known is not None else measured_profile(device, cache_path=cache_path)
