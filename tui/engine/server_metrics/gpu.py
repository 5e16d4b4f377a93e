"""The GPU beside the server: NVIDIA DCGM exporter names read into gauges, per GPU and for all of them.

A DCGM exporter (`--gpu-metrics URL`, port 9400 by default) or the server's own `/metrics` when it serves
the same names (the simulator does) gives one series per GPU, labelled `gpu="0"`, ... . Each field becomes
a gauge signal of the reading, for all GPUs (`gpu_util`, ...: a mean over GPUs for the shares, a sum for
memory and power) and per GPU (`gpu_util@0`, ...), so the time-weighted means per level and the sparklines
come from the same code as the server's own gauges.

| signal | DCGM field | unit |
| --- | --- | --- |
| `gpu_util` | `DCGM_FI_DEV_GPU_UTIL` | share of time a kernel ran, 0..1 (DCGM says %) |
| `sm_active` | `DCGM_FI_PROF_SM_ACTIVE` | share of cycles an SM had work, 0..1 |
| `dram_active` | `DCGM_FI_PROF_DRAM_ACTIVE` | share of cycles the memory interface was busy, 0..1 |
| `fb_used_mib` | `DCGM_FI_DEV_FB_USED` | framebuffer used, MiB |
| `fb_free_mib` | `DCGM_FI_DEV_FB_FREE` | framebuffer free, MiB |
| `power_w` | `DCGM_FI_DEV_POWER_USAGE` | board power, W |
| `energy_j` | `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION` | a counter: energy since the driver loaded, J (mJ) |

A level's energy (`energy_record`) is the counter's increase between the first and last reading inside its
window, over the seconds between them: their quotient is the GPUs' mean power, exact where a sampled power
gauge is not.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tui.engine.server_metrics.parse import Family
from tui.engine.server_metrics.window import Point, counter_increase

FIELDS: dict[str, tuple[str, float, bool]] = {
    "gpu_util": ("DCGM_FI_DEV_GPU_UTIL", 0.01, False),
    "sm_active": ("DCGM_FI_PROF_SM_ACTIVE", 1.0, False),
    "dram_active": ("DCGM_FI_PROF_DRAM_ACTIVE", 1.0, False),
    "fb_used_mib": ("DCGM_FI_DEV_FB_USED", 1.0, True),
    "fb_free_mib": ("DCGM_FI_DEV_FB_FREE", 1.0, True),
    "power_w": ("DCGM_FI_DEV_POWER_USAGE", 1.0, True),
}
"""Signal -> (DCGM field, scale to our unit, summed over GPUs (else averaged))."""
GPU_SIGNALS = tuple(FIELDS)
ENERGY, ENERGY_FIELD = "energy_j", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
"""The energy counter's signal (J, summed over GPUs) and its DCGM field (mJ)."""
FAMILIES = frozenset([*(name for name, _, _ in FIELDS.values()), ENERGY_FIELD])
"""The family names a scrape must parse for the GPU."""
DEFAULT_PORT = 9400
"""dcgm-exporter's port."""


def gpu_gauges(families: Mapping[str, Family]) -> dict[str, float]:
    """Each DCGM field found, for all GPUs (`signal`) and per GPU (`signal@<gpu>`); empty without any."""
    out: dict[str, float] = {}
    for signal, (name, scale, summed) in FIELDS.items():
        family = families.get(name)
        if family is None:
            continue
        per_gpu: dict[str, float] = {}
        for sample in family.samples:
            if sample.name != name or not math.isfinite(sample.value):
                continue
            gpu = dict(sample.labels).get("gpu", "0")
            per_gpu[gpu] = per_gpu.get(gpu, 0.0) + sample.value * scale
        if not per_gpu:
            continue
        for gpu, value in per_gpu.items():
            out[f"{signal}@{gpu}"] = value
        all_gpus = sum(per_gpu.values())
        out[signal] = all_gpus if summed else all_gpus / len(per_gpu)
    energy = families.get(ENERGY_FIELD)
    per_gpu_j = {
        dict(s.labels).get("gpu", "0"): s.value / 1e3
        for s in (energy.samples if energy is not None else ())
        if s.name.removesuffix("_total") == ENERGY_FIELD and math.isfinite(s.value)  # the parser adds it
    }
    if per_gpu_j:
        out.update({f"{ENERGY}@{gpu}": j for gpu, j in per_gpu_j.items()})
        out[ENERGY] = sum(per_gpu_j.values())
    return out


def energy_record(points: list[Point]) -> dict[str, float | None]:
    """``energy_j``: the energy counter's increase over ``points`` (the readings inside a window, a restart
    counted from zero), and ``energy_s``, the seconds between the first and the last; None with fewer than
    two."""
    if len(points) < 2 or points[-1][0] <= points[0][0]:
        return {"energy_j": None, "energy_s": None}
    return {
        "energy_j": counter_increase([v for _, v in points]),
        "energy_s": (points[-1][0] - points[0][0]) / 1e9,
    }


def gpu_ids(gauges: Mapping[str, float]) -> list[str]:
    """The GPUs a reading's gauges name, in order."""
    ids = {key.partition("@")[2] for key in gauges if "@" in key and key.partition("@")[0] in FIELDS}
    return sorted(ids, key=lambda g: (len(g), g))


def gpu_record(mean: Any, signals: Mapping[str, float]) -> dict[str, Any] | None:
    """One window's GPU figures: ``mean(signal)`` (a gauge's time-weighted mean over the window) for every
    GPU signal in ``signals`` (the latest reading's gauges), for all GPUs and `per_gpu`; None without GPU."""
    if not any(s in signals for s in GPU_SIGNALS):
        return None
    record: dict[str, Any] = {f"{s}_mean": mean(s) if s in signals else None for s in GPU_SIGNALS}
    record["per_gpu"] = {
        gpu: {f"{s}_mean": mean(f"{s}@{gpu}") for s in GPU_SIGNALS if f"{s}@{gpu}" in signals}
        for gpu in gpu_ids(signals)
    }
    record["gpus"] = len(record["per_gpu"])
    return record
