"""profiles/*.toml and tools/perf/profiles.py: loading, choosing by GPU name, measured ceilings."""
from __future__ import annotations

import json
import tomllib

import pytest

from tools.perf.profiles import PROFILES_DIR, GpuProfile, load_profiles, measured_profile, profile_for
from tools.settings import SettingsError

# Names as pynvml / torch.cuda.get_device_name report them.
KNOWN_NAMES = {
    "NVIDIA H100 80GB HBM3": "NVIDIA H100 SXM5 80GB",
    "NVIDIA H100 PCIe": "NVIDIA H100 PCIe 80GB",
    "NVIDIA H200": "NVIDIA H200 SXM 141GB",
    "NVIDIA A100-SXM4-40GB": "NVIDIA A100 40GB",
    "NVIDIA A100-PCIE-40GB": "NVIDIA A100 40GB",
    "NVIDIA A100-SXM4-80GB": "NVIDIA A100 80GB",
    "NVIDIA A100 80GB PCIe": "NVIDIA A100 80GB",
    "NVIDIA L40S": "NVIDIA L40S",
    "NVIDIA GeForce RTX 4090": "NVIDIA GeForce RTX 4090",
}


def test_every_bundled_profile_loads_and_validates():
    profiles = load_profiles()
    assert len(profiles) == 7
    assert all(p.validate() is None for p in profiles)


def test_every_profile_file_cites_its_source():
    for path in PROFILES_DIR.glob("*.toml"):
        text = path.read_text()
        assert "# source:" in text, path
        assert tomllib.loads(text)["source"].startswith("datasheet:"), path


@pytest.mark.parametrize("gpu_name,profile_name", sorted(KNOWN_NAMES.items()))
def test_device_name_selects_its_profile(gpu_name, profile_name):
    assert profile_for(gpu_name).name == profile_name


@pytest.mark.parametrize("gpu_name", ["NVIDIA H200 NVL", "NVIDIA A100-SXM4-40GB MIG 1g.5gb",
                                      "NVIDIA L40", "NVIDIA B200", "Tesla T4"])
def test_unlisted_or_partial_gpu_gets_no_datasheet_profile(gpu_name):
    assert profile_for(gpu_name) is None


def test_every_device_name_matches_exactly_one_profile():
    for gpu_name in KNOWN_NAMES:
        assert sum(p.matches(gpu_name) for p in load_profiles()) == 1, gpu_name


def test_name_matching_ignores_case_and_extra_spaces():
    assert profile_for("nvidia  h100 80gb hbm3").name == "NVIDIA H100 SXM5 80GB"


def test_tensor_peaks_are_dense_not_sparse():
    h100 = profile_for("NVIDIA H100 80GB HBM3")
    assert h100.peak_bf16_tflops == pytest.approx(989.4)
    assert h100.peak_fp8_tflops == pytest.approx(2 * h100.peak_bf16_tflops, rel=0.01)


def test_a100_without_fp8_falls_back_to_fp16_peak():
    a100 = profile_for("NVIDIA A100-SXM4-80GB")
    assert a100.peak_fp8_tflops is None
    assert a100.peak_tflops("fp8") == a100.peak_fp16_tflops


def test_profile_missing_a_required_key_is_refused(tmp_path):
    (tmp_path / "bad.toml").write_text('name = "X"\ndram_gbps = 1.0\n')
    with pytest.raises(SettingsError, match="bad.toml.*missing"):
        load_profiles(tmp_path)


def test_profile_with_unknown_key_is_refused(tmp_path):
    src = (PROFILES_DIR / "l40s.toml").read_text() + "\ndram_tbps = 1.0\n"
    (tmp_path / "typo.toml").write_text(src)
    with pytest.raises(SettingsError, match="dram_tbps"):
        load_profiles(tmp_path)


_PROPS = {"name": "NVIDIA Imaginary X1", "sm_count": 100, "l2_mib": 64.0, "smem_per_sm_kib": 228,
          "regs_per_sm": 65536, "max_threads_per_sm": 2048, "compute_capability": "9.0"}
_MEASURED = {"dram_gbps": 2900.0, "peak_bf16_tflops": 700.0, "peak_tf32_tflops": 350.0,
             "peak_fp32_tflops": 50.0}


def test_measured_profile_round_trips_through_its_cache(tmp_path):
    calls = []
    def fake_measure(device):
        calls.append(device)
        return dict(_MEASURED)
    cache = tmp_path / "sub" / "ceilings.json"
    first = measured_profile(0, cache_path=cache, measure=fake_measure, properties=_PROPS)
    second = measured_profile(0, cache_path=cache, measure=fake_measure, properties=_PROPS)
    assert len(calls) == 1
    assert first == second
    assert first.dram_gbps == 2900.0 and first.sm_count == 100 and first.measured


def test_measured_profile_matches_only_its_own_gpu_name(tmp_path):
    p = measured_profile(0, cache_path=tmp_path / "c.json", measure=lambda d: dict(_MEASURED),
                         properties=_PROPS)
    assert p.matches("NVIDIA Imaginary X1") and not p.matches("NVIDIA Imaginary X10")


def test_corrupt_measured_cache_is_remeasured_not_fatal(tmp_path):
    cache = tmp_path / "c.json"
    cache.write_text("{not json")
    p = measured_profile(0, cache_path=cache, measure=lambda d: dict(_MEASURED), properties=_PROPS)
    assert p.peak_bf16_tflops == 700.0
    assert json.loads(cache.read_text())["gpus"]["NVIDIA Imaginary X1"]["dram_gbps"] == 2900.0


def test_measured_cache_keeps_other_gpus(tmp_path):
    cache = tmp_path / "c.json"
    measured_profile(0, cache_path=cache, measure=lambda d: dict(_MEASURED), properties=_PROPS)
    other = {**_PROPS, "name": "NVIDIA Imaginary X2"}
    measured_profile(0, cache_path=cache, measure=lambda d: dict(_MEASURED), properties=other)
    assert set(json.loads(cache.read_text())["gpus"]) == {"NVIDIA Imaginary X1", "NVIDIA Imaginary X2"}


def test_gpu_profile_is_frozen():
    with pytest.raises(Exception):
        profile_for("NVIDIA H200").dram_gbps = 1.0   # type: ignore[misc]
    assert isinstance(profile_for("NVIDIA H200"), GpuProfile)
