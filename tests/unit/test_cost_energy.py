"""Cost and energy per level (`tui.engine.aggregate.cost`): the arithmetic, the DCGM energy counter read and
windowed, the simulator's counter, and the figures the results and the CSV carry."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest

from tests.support import frozen
from tests.unit.results_data import frozen_info, frozen_results
from tui.engine.aggregate import cost
from tui.engine.config import EngineOptions
from tui.engine.results.build import ClientSummary, LevelExtras, ServerSummary, build_results
from tui.engine.results.cost import CostAtSlo
from tui.engine.results.csv import levels_csv
from tui.engine.results.files import parse_document, to_json
from tui.engine.results.model import Results
from tui.engine.server_metrics.gpu import energy_record, gpu_gauges
from tui.engine.server_metrics.kinds import VLLM
from tui.engine.server_metrics.parse import parse_text
from tui.engine.server_metrics.view import OK, ServerView, read
from tui.engine.snapshot import SloView
from tui.sim.dcgm import IDLE_W, MAX_W, GpuModel
from tui.sim.perf_model import PROFILES


def test_dollars_per_million_tokens_is_the_price_over_the_rate_in_one_order() -> None:
    assert cost.usd_per_mtok(4.0, 1000.0) == 4.0 / 3600 / 1000.0 * 1e6
    assert cost.usd_per_mtok(4.0, 1000.0) == pytest.approx(1.1111111)
    for rate in (None, 0.0, -1.0, math.nan, math.inf):
        assert cost.usd_per_mtok(4.0, rate) is None
    assert cost.usd_per_mtok(None, 1000.0) is None
    assert cost.input_tokens_per_s(500, 2.5) == 200.0
    assert cost.input_tokens_per_s(500, 0.0) is None and cost.input_tokens_per_s(500, None) is None


def test_joules_per_token_is_the_mean_power_over_the_rate_and_tokens_per_joule_its_inverse() -> None:
    # 1,400 J over 2 s is 700 W; at 350 tok/s that is 2 J a token, half a token a joule
    assert cost.joules_per_token(1400.0, 2.0, 350.0) == 2.0
    assert cost.tokens_per_joule(1400.0, 2.0, 350.0) == 0.5
    assert cost.joules_per_token(None, 2.0, 350.0) is None
    assert cost.joules_per_token(1400.0, 0.0, 350.0) is None
    assert cost.joules_per_token(1400.0, 2.0, math.nan) is None
    assert cost.tokens_per_joule(0.0, 2.0, 350.0) is None  # no power drawn: no figure, not infinity


DCGM_ENERGY = """# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",UUID="GPU-0"} 1500000
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="1",UUID="GPU-1"} 2500500
"""


def test_dcgms_energy_counter_reads_in_joules_per_gpu_and_summed() -> None:
    gauges = gpu_gauges(parse_text(DCGM_ENERGY, frozenset({"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"})))
    assert gauges == {"energy_j@0": 1500.0, "energy_j@1": 2500.5, "energy_j": 4000.5}


def test_a_windows_energy_is_the_counters_increase_between_its_first_and_last_reading() -> None:
    points = [(0, 100.0), (1_000_000_000, 400.0), (3_000_000_000, 1000.0)]
    assert energy_record(points) == {"energy_j": 900.0, "energy_s": 3.0}
    restarted = [(0, 100.0), (1_000_000_000, 400.0), (2_000_000_000, 50.0)]  # back to zero, then 50 J
    assert energy_record(restarted)["energy_j"] == 350.0
    assert energy_record(points[:1]) == {"energy_j": None, "energy_s": None}


def test_the_simulators_energy_counter_is_idle_power_plus_each_ended_steps_busy_share() -> None:
    profile = PROFILES["small-gpu"]
    gpu = GpuModel(profile, time_scale=10.0, start_ns=0)
    second = 1_000_000_000
    assert gpu.energy_j(second) == pytest.approx(IDLE_W * 10.0)  # one wall second at x10: ten of idle
    gpu.step(second + 20_000_000, context_tokens=0, tokens=1)  # planned to end 20 ms later
    assert gpu.energy_j(second) == pytest.approx(IDLE_W * 10.0)  # not yet ended: not yet counted
    memory_s = profile.weights_s / 10.0
    compute_s = profile.compute_s_per_token / 10.0
    busy_s = 0.5 * memory_s + 0.5 * compute_s + 0.2 * max(memory_s, compute_s)
    at = second + 20_000_000
    assert gpu.energy_j(at) == pytest.approx(IDLE_W * 10.2 + (MAX_W - IDLE_W) * busy_s * 10.0)
    text = gpu.render(at, "m")
    served = [ln for ln in text.splitlines() if ln.startswith("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{")]
    assert len(served) == profile.gpus and served[0].endswith(f" {int(gpu.energy_j(at) * 1e3)}")
    assert "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter" in text


def _priced_results(slo_target: float) -> Results:
    """The frozen run with each level's input tokens and SLO attainment (the first two met, 95 % and 80 %
    with lower bounds 0.9 and 0.7; the last none), priced at $3.50 an hour."""
    snap = frozen.snapshot()
    met = [(0.95, 0.9), (0.8, 0.7), (0.5, 0.4), (0.0, 0.0)]
    levels = tuple(
        replace(
            lv,
            input_tokens=1000 * (i + 1),
            window_s=12.5 + i,
            slo=SloView(
                met=1,
                requests=2,
                cut=0,
                attainment=a,
                low=low,
                high=1.0,
                goodput_rps=1.0,
                goodput_tps=lv.output_tps * a if a else math.nan,
            ),
        )
        for i, (lv, (a, low)) in enumerate(zip(snap.levels, met, strict=True))
    )
    options = EngineOptions(slo_ttft_ms=500.0, slo_target=slo_target, cost_per_hour=3.5)
    return frozen_results(info=frozen_info(options=options), snap=replace(snap, levels=levels))


def test_a_levels_prices_are_exactly_the_price_over_its_saved_rates_and_in_the_csv() -> None:
    doc = _priced_results(slo_target=0.75)
    read = parse_document(to_json(doc))  # as a reader of the file sees it
    assert isinstance(read, Results) and read == doc and read.config.cost_per_hour == 3.5
    for lv in read.levels:
        assert lv.output_throughput and lv.duration and lv.slo is not None
        assert lv.usd_per_mtok_output == 3.5 / 3600 / lv.output_throughput * 1e6
        assert lv.usd_per_mtok_input == 3.5 / 3600 / (lv.total_input_tokens / lv.duration) * 1e6
        good = lv.slo.output_goodput
        assert lv.slo.usd_per_mtok_goodput == (None if not good else 3.5 / 3600 / good * 1e6)
    # the capacity at SLO: the highest load whose lower bound met 0.75 is the first level (0.9; 0.7 missed)
    first = read.levels[0]
    assert read.cost_at_slo is not None and first.slo is not None
    assert read.cost_at_slo.level_id == first.level_id and read.cost_at_slo.value == first.value
    assert read.cost_at_slo.usd_per_mtok_goodput == first.slo.usd_per_mtok_goodput
    assert _priced_results(slo_target=0.99).cost_at_slo == CostAtSlo(level_id=None)
    header = levels_csv(read).splitlines()[0].split(",")
    for column in ("usd_per_mtok_output", "usd_per_mtok_input", "slo.usd_per_mtok_goodput"):
        assert column in header


def test_without_a_price_no_cost_key_is_written() -> None:
    doc = to_json(frozen_results())
    assert "cost_at_slo" not in doc and "cost_per_hour" not in doc["config"]
    assert not any("usd_per_mtok_output" in lv for lv in doc["levels"])


def test_a_levels_energy_per_token_is_its_gpus_energy_over_their_seconds_over_its_rate() -> None:
    snap = frozen.snapshot()
    gpu = {"power_w_mean": 690.0, "gpus": 1, "energy_j": 2100.0, "energy_s": 3.0}
    server = ServerSummary(run={}, levels={lv.level_id: {"gpu": dict(gpu)} for lv in snap.levels})
    views = [(lv, LevelExtras()) for lv in snap.levels]
    doc = build_results(frozen_info(), snap, views, ClientSummary(1.0, 0.2, saturated=False), server=server)
    read = parse_document(to_json(doc))
    assert isinstance(read, Results)
    for lv in read.levels:
        assert lv.server is not None and lv.server.gpu is not None and lv.output_throughput
        figures = lv.server.gpu
        assert figures["joules_per_output_token"] == 2100.0 / 3.0 / lv.output_throughput
        assert figures["output_tokens_per_joule"] == lv.output_throughput / (2100.0 / 3.0)
        assert figures["power_w_mean"] == 690.0  # the rest as the server's summary had it


def test_nvmls_total_energy_is_the_same_counter_and_absent_where_the_gpu_has_none() -> None:
    """A stand-in with NVML's shapes (energy in mJ since the driver loaded); a GPU before Volta raises."""
    from types import SimpleNamespace

    import httpx

    from tui.engine.server_metrics.gpu_source import NvmlSource

    def nvml(energy: Any) -> SimpleNamespace:
        return SimpleNamespace(
            nvmlInit=lambda: None,
            nvmlDeviceGetCount=lambda: 2,
            nvmlDeviceGetHandleByIndex=lambda i: i,
            nvmlDeviceGetUtilizationRates=lambda h: SimpleNamespace(gpu=50, memory=50),
            nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(used=2**30, free=2**30),
            nvmlDeviceGetPowerUsage=lambda h: 300_000,
            nvmlDeviceGetTotalEnergyConsumption=energy,
        )

    def not_supported(handle: int) -> int:
        raise RuntimeError("NVMLError_NotSupported")

    with httpx.Client() as client:
        gauges = NvmlSource(nvml(lambda h: 1_000_000 * (h + 1))).read(client)
        old = NvmlSource(nvml(not_supported)).read(client)
    assert (gauges["energy_j@0"], gauges["energy_j@1"], gauges["energy_j"]) == (1000.0, 2000.0, 3000.0)
    assert not any(key.startswith("energy_j") for key in old) and old["power_w"] == 600.0


S = 1_000_000_000
LEVEL_POWER_W = {1: 300.0, 2: 450.0, 3: 700.0}
"""The GPU's draw during each of the frozen run's first three levels (0-10, 10-20, 20-30 s)."""


def energy_view() -> ServerView:
    """A fake DCGM exporter's power gauge and energy counter (mJ), read every 2 s over the frozen run's first
    three levels, the counter rising at each level's own power."""
    readings = []
    energy_mj = 1_000_000.0
    for t in range(0, 31, 2):
        if t:
            energy_mj += LEVEL_POWER_W[(t - 1) // 10 + 1] * 2 * 1e3
        text = (
            "# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n"
            f'DCGM_FI_DEV_POWER_USAGE{{gpu="0"}} {LEVEL_POWER_W[min(t // 10 + 1, 3)]}\n'
            "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"
            f'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{gpu="0"}} {energy_mj}\n'
        )
        readings.append(read(parse_text(text), t * S, VLLM))
    return ServerView(status=OK, url="http://127.0.0.1:9400/metrics", kind=VLLM, readings=tuple(readings))


def test_the_level_tables_joules_per_token_is_the_saved_levels() -> None:
    """The app's J/tok cell, from the table's server figures over each level, is the
    ``joules_per_output_token`` the results save for that level: one reckoning of the same readings."""
    from tui.app.widgets.level_table import joule_cell, level_cells, level_joules, server_means
    from tui.engine.server_metrics.level_figures import level_spans_ns

    snap = frozen.snapshot()
    view = energy_view()
    now = 30 * S
    table = server_means(view, snap.levels, 0, now)
    spans = level_spans_ns(snap.levels, 0, now)
    summaries = {s.level_id: view.level_summary(s.t_from_ns, s.t_to_ns) for s in spans}
    views = [(lv, LevelExtras()) for lv in snap.levels]
    server = ServerSummary(run={}, levels=summaries)
    doc = build_results(frozen_info(), snap, views, ClientSummary(1.0, 0.2, saturated=False), server=server)
    saved = {lv.level_id: (lv.server.gpu or {}) if lv.server else {} for lv in doc.levels}
    for lv in snap.levels[:3]:
        joules = level_joules(lv, table[lv.level_id])
        assert joules is not None and joules == saved[lv.level_id]["joules_per_output_token"]
        assert joules == pytest.approx(LEVEL_POWER_W[lv.level_id] / lv.output_tps, rel=1e-12)
        cells = level_cells(lv, snap.level_id, None, "chunk", table[lv.level_id])
        assert cells["joule"] == f"{joules:.3g}" == joule_cell(lv, table[lv.level_id])
    # no energy counter (a server without a DCGM exporter), or a level too short for a rate: no figure
    assert level_cells(snap.levels[0], 4, None, "chunk", {"running": 2.0})["joule"] == "-"
    assert joule_cell(replace(snap.levels[0], output_tps=math.nan), table[1]) == "-"
