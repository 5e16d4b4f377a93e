"""Where the GPU figures come from when the server does not serve them: a DCGM exporter or NVML.

`--gpu-metrics URL` scrapes an NVIDIA DCGM exporter's `/metrics` (port 9400 when the URL names none) with
each scrape of the server, on the poller's thread and client. `--gpu-metrics nvml` reads the GPUs of this
host through NVML (`nvidia-ml-py`, the optional extra `tokentop[nvml]`): only useful when tokentop runs on
the server's own host. NVML has no SM-active figure (that needs DCGM's profiling counters), and its memory
utilisation (share of time memory was read or written) stands in for DRAM active. Its total energy (mJ
since the driver loaded, Volta and later) is DCGM's energy counter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import httpx

from tui.engine.server_metrics.gpu import DEFAULT_PORT, ENERGY, FAMILIES, gpu_gauges
from tui.engine.server_metrics.parse import NotPrometheusError, parse_text

NVML = "nvml"
NVML_MISSING = "--gpu-metrics nvml needs NVML: pip install 'tokentop[nvml]' (nvidia-ml-py)"


class GpuSource(Protocol):
    """Reads the GPU gauges (`gpu.gpu_gauges`' keys) once per scrape; empty when it could not."""

    def read(self, client: httpx.Client) -> dict[str, float]: ...


def dcgm_url(url: str) -> str:
    """`http://host` -> `http://host:9400/metrics`; a URL with a port or a path keeps them."""
    parts = urlsplit(url)
    netloc = parts.netloc if parts.port is not None else f"{parts.netloc}:{DEFAULT_PORT}"
    path = parts.path if parts.path not in ("", "/") else "/metrics"
    return urlunsplit((parts.scheme, netloc, path, "", ""))


class DcgmSource:
    """A DCGM exporter's `/metrics`, on a client of its own (the server's API key is not the exporter's to
    see); a failure is said once and skipped."""

    def __init__(
        self, url: str, on_notice: Callable[[str], None] | None = None, timeout_s: float = 2.0
    ) -> None:
        self.url = dcgm_url(url)
        self._on_notice = on_notice
        self._noticed = False
        self._client: httpx.Client | None = None
        self._timeout_s = timeout_s

    def read(self, client: httpx.Client) -> dict[str, float]:
        """One scrape of the exporter (``client``, the server's, is not used)."""
        if self._client is None:
            self._client = httpx.Client(timeout=self._timeout_s)
        try:
            response = self._client.get(self.url)
            if response.status_code != 200:
                raise NotPrometheusError(f"answered {response.status_code}")
            found = gpu_gauges(parse_text(response.text, FAMILIES))
            if not found:
                raise NotPrometheusError("no DCGM_FI_* fields in it")
            return found
        except (httpx.HTTPError, NotPrometheusError) as exc:
            self._notice(f"GPU metrics: GET {self.url}: {exc or type(exc).__name__}; the run goes on without")
            return {}

    def _notice(self, message: str) -> None:
        if not self._noticed and self._on_notice is not None:
            self._noticed = True
            self._on_notice(message)


class NvmlSource:
    """This host's GPUs through NVML; construct it with `nvml_source` (which checks the import)."""

    def __init__(self, nvml: Any) -> None:
        self._nvml = nvml
        nvml.nvmlInit()
        self._handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]

    def read(self, client: httpx.Client) -> dict[str, float]:
        nvml = self._nvml
        out: dict[str, float] = {}
        for i, handle in enumerate(self._handles):
            util = nvml.nvmlDeviceGetUtilizationRates(handle)
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            out[f"gpu_util@{i}"] = util.gpu / 100
            out[f"dram_active@{i}"] = util.memory / 100
            out[f"fb_used_mib@{i}"] = memory.used / 2**20
            out[f"fb_free_mib@{i}"] = memory.free / 2**20
            out[f"power_w@{i}"] = nvml.nvmlDeviceGetPowerUsage(handle) / 1e3
            energy = self._energy_j(handle)
            if energy is not None:
                out[f"{ENERGY}@{i}"] = energy
        n = len(self._handles)
        if n:
            for signal, summed in (
                ("gpu_util", False),
                ("dram_active", False),
                ("fb_used_mib", True),
                ("fb_free_mib", True),
                ("power_w", True),
            ):
                total = sum(out[f"{signal}@{i}"] for i in range(n))
                out[signal] = total if summed else total / n
            if all(f"{ENERGY}@{i}" in out for i in range(n)):
                out[ENERGY] = sum(out[f"{ENERGY}@{i}"] for i in range(n))
        return out

    def _energy_j(self, handle: Any) -> float | None:
        """The GPU's total energy in J, or None where NVML has none (a GPU before Volta)."""
        try:
            return float(self._nvml.nvmlDeviceGetTotalEnergyConsumption(handle)) / 1e3
        except Exception:  # NVMLError_NotSupported, or a stand-in without it
            return None


def nvml_source() -> NvmlSource:
    """NVML on this host; ValueError with the one line saying how to get it when `pynvml` is absent."""
    try:
        import pynvml  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        raise ValueError(NVML_MISSING) from None
    try:
        return NvmlSource(pynvml)
    except Exception as exc:  # NVMLError: no driver, no GPU
        raise ValueError(f"--gpu-metrics nvml: NVML did not start ({exc})") from None


def gpu_source_for(spec: str, on_notice: Callable[[str], None] | None = None) -> GpuSource:
    """The source a `--gpu-metrics` value names: `nvml`, or the URL of a DCGM exporter."""
    if spec == NVML:
        return nvml_source()
    if not spec.startswith(("http://", "https://")):
        raise ValueError(f"--gpu-metrics takes a DCGM exporter's URL (http://...) or 'nvml', got {spec!r}")
    return DcgmSource(spec, on_notice)
