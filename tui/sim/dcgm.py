"""The simulated GPU's DCGM figures, from the roofline of each engine step (`tui.sim.perf_model.step_time_s`).

Each step's kernel time is the slower of its memory side (weights and KV read at the achieved bandwidth)
and its compute side (tokens x FLOPs at the achieved rate); the fixed and per-sequence costs are host time.
Over the last `WINDOW_S` of wall time, as DCGM averages over its sample period:

- `DCGM_FI_DEV_GPU_UTIL` (%): the share of time a kernel ran;
- `DCGM_FI_PROF_DRAM_ACTIVE`: the share spent moving memory (high while decoding: memory-bound);
- `DCGM_FI_PROF_SM_ACTIVE`: the share spent computing (high in long prefills: compute-bound);
- `DCGM_FI_DEV_FB_USED` / `_FREE` (MiB): constant, as a vLLM that reserved its KV cache at start-up;
- `DCGM_FI_DEV_POWER_USAGE` (W): idle plus a share of the board's range by how busy memory and SMs were;
- `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION` (mJ, a counter from the simulator's start): that power integrated,
  idle for all the time plus each step's share of the range over its own length (at most its span). In
  simulated seconds: under `--time-scale` a level costs the joules per token it would at full time.

Every GPU of a tensor-parallel deployment works on every step, so each reports the same figures.
"""

from __future__ import annotations

from collections import deque

from tui.sim.perf_model import Profile

WINDOW_S = 1.0
"""The averaging period of the served figures (dcgm-exporter's profiling fields average over one too)."""
IDLE_W, MAX_W = 70.0, 700.0
"""An H100 SXM's idle and board power."""
ENERGY_FIELD = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
FB_RESERVED = 0.9
"""The share of the framebuffer a vLLM holds from start-up (`--gpu-memory-utilization`)."""


class GpuModel:
    """The busy time of recent steps, rendered as DCGM's fields for each of the profile's GPUs."""

    def __init__(self, profile: Profile, time_scale: float, start_ns: int) -> None:
        self.profile = profile
        self.time_scale = time_scale
        self._start_ns = start_ns
        self._steps: deque[tuple[int, float, float, float]] = deque()
        """(end_ns, memory_s, compute_s, busy_j) of each step, wall seconds, for the last WINDOW_S (and those
        planned to end later)."""
        self._busy_j = 0.0
        """The energy above idle of every step so far, planned ones included (`energy_j` leaves them out)."""
        self._last_end_ns = start_ns

    def step(self, end_ns: int, context_tokens: int, tokens: int) -> None:
        """One engine step ending at ``end_ns`` (planned), with the context it read and tokens it computed."""
        p = self.profile
        memory_s = (p.weights_s + p.kv_s_per_token * context_tokens) / self.time_scale
        compute_s = p.compute_s_per_token * tokens / self.time_scale
        span_s = max(0.0, (end_ns - self._last_end_ns) / 1e9)
        self._last_end_ns = max(self._last_end_ns, end_ns)
        busy_s = min(0.5 * memory_s + 0.5 * compute_s + 0.2 * max(memory_s, compute_s), span_s)
        busy_j = (MAX_W - IDLE_W) * busy_s * self.time_scale
        self._busy_j += busy_j
        self._steps.append((end_ns, memory_s, compute_s, busy_j))
        self._trim(end_ns)

    def energy_j(self, now_ns: int) -> float:
        """Each GPU's energy since the start, J of simulated time: idle power throughout, and the busy part
        of every step ended by ``now_ns``."""
        self._trim(now_ns)
        planned = sum(j for end, _, _, j in self._steps if end > now_ns)
        idle_s = max(0, now_ns - self._start_ns) / 1e9 * self.time_scale
        return IDLE_W * idle_s + self._busy_j - planned

    def _trim(self, now_ns: int) -> None:
        cutoff = now_ns - int(WINDOW_S * 1e9)
        while self._steps and self._steps[0][0] <= cutoff:
            self._steps.popleft()

    def shares(self, now_ns: int) -> tuple[float, float, float]:
        """(kernel, memory, compute) shares of the last WINDOW_S (less, just after start)."""
        self._trim(now_ns)
        span_s = min(WINDOW_S, max((now_ns - self._start_ns) / 1e9, 1e-3))
        memory = sum(m for end, m, _, _ in self._steps if end <= now_ns)
        compute = sum(c for end, _, c, _ in self._steps if end <= now_ns)
        kernel = sum(max(m, c) for end, m, c, _ in self._steps if end <= now_ns)
        return min(1.0, kernel / span_s), min(1.0, memory / span_s), min(1.0, compute / span_s)

    def render(self, now_ns: int, model: str) -> str:
        """DCGM exporter lines for each GPU (empty for a profile without GPUs)."""
        if self.profile.gpus <= 0:
            return ""
        kernel, memory, compute = self.shares(now_ns)
        fb = self.profile.gpu_fb_mib
        used = round(fb * FB_RESERVED)
        power = IDLE_W + (MAX_W - IDLE_W) * min(1.0, 0.5 * memory + 0.5 * compute + 0.2 * kernel)
        fields = (
            ("DCGM_FI_DEV_GPU_UTIL", round(kernel * 100)),
            ("DCGM_FI_PROF_SM_ACTIVE", round(compute, 6)),
            ("DCGM_FI_PROF_DRAM_ACTIVE", round(memory, 6)),
            ("DCGM_FI_DEV_FB_USED", used),
            ("DCGM_FI_DEV_FB_FREE", fb - used),
            ("DCGM_FI_DEV_POWER_USAGE", round(power, 3)),
        )
        energy_mj = int(self.energy_j(now_ns) * 1e3)
        lines = []
        for name, value in (*fields, (ENERGY_FIELD, energy_mj)):
            lines.append(f"# TYPE {name} {'counter' if name == ENERGY_FIELD else 'gauge'}\n")
            for gpu in range(self.profile.gpus):
                labels = f'gpu="{gpu}",UUID="GPU-sim-{gpu}",device="nvidia{gpu}",modelName="{model}"'
                lines.append(f"{name}{{{labels}}} {value}\n")
        return "".join(lines)
