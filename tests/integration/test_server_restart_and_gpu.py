"""A server restart and the GPU beside the server, against stand-ins written here (Prometheus text on
127.0.0.1, port 0) and the simulator: a restart is counted (a badge), not a gap or a spike; the GPU figures
per level are what the DCGM stand-in and the simulator served."""

from __future__ import annotations

import asyncio
import http.server
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.support.sim_client import call, chat_body
from tui.app.widgets.server_pane import reset_badge, server_content
from tui.engine.server_metrics import ServerMetricsPoller
from tui.engine.server_metrics.gpu_source import NVML_MISSING, DcgmSource, dcgm_url, gpu_source_for
from tui.sim.launch import SimServer

Bodies = dict[str, Callable[[], str]]


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        bodies: Bodies = self.server.bodies  # type: ignore[attr-defined]
        make = bodies.get(self.path)
        body = make().encode() if make is not None else b"not here"
        self.send_response(200 if make is not None else 404)
        self.send_header("content-type", "text/plain; version=0.0.4")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def stand_in(bodies: Bodies) -> Iterator[str]:
    """A server on 127.0.0.1 port 0 answering each path with its body maker; yields its base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.bodies = bodies  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def vllm_text(tokens: float, ttft_count: float) -> str:
    return (
        "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 2\n"
        "# TYPE vllm:generation_tokens_total counter\n"
        f"vllm:generation_tokens_total {tokens}\n"
        "# TYPE vllm:time_to_first_token_seconds histogram\n"
        f'vllm:time_to_first_token_seconds_bucket{{le="0.1"}} {ttft_count}\n'
        f'vllm:time_to_first_token_seconds_bucket{{le="+Inf"}} {ttft_count}\n'
        f"vllm:time_to_first_token_seconds_sum {ttft_count * 0.05}\n"
        f"vllm:time_to_first_token_seconds_count {ttft_count}\n"
    )


def test_a_counter_reset_is_a_restart_badge_not_a_spike() -> None:
    """Counters at 100, 200, 300, then the server restarts (50), then 150: the restart is counted and shown
    on the pane's border; no rate is negative or larger than the true 100 per scrape."""
    values = iter([100.0, 200.0, 300.0, 50.0, 150.0])
    current = {"tokens": 0.0}
    with stand_in({"/metrics": lambda: vllm_text(current["tokens"], current["tokens"] / 10)}) as url:
        poller = ServerMetricsPoller(url + "/v1", interval_s=1.0, window_s=60.0)
        with httpx.Client() as client:
            for value in values:
                current["tokens"] = value
                assert poller.scrape_once(client)
    view = poller.latest()
    assert view.resets == 1 and view.reset_t_ns == view.readings[3].t_ns
    gaps_s = [(b.t_ns - a.t_ns) / 1e9 for a, b in zip(view.readings, view.readings[1:], strict=False)]
    rates = [v for _, v in view.history("generation_tok_s")]
    assert len(rates) == 4 and all(r >= 0 for r in rates)
    assert rates[2] * gaps_s[2] == pytest.approx(50.0)  # the restart step counts from zero: no spike
    assert max(r * g for r, g in zip(rates, gaps_s, strict=True)) == pytest.approx(100.0)
    badge = reset_badge(view)
    assert badge is not None and badge.startswith("⟲ restarted")
    level = view.level_summary(view.readings[0].t_ns, view.readings[-1].t_ns)
    assert level["restarts"] == 1
    assert level["ttft_ms"]["count"] == pytest.approx(10 + 10 + 5 + 10)  # 10/scrape, 5 after the restart


DCGM = {
    "DCGM_FI_DEV_GPU_UTIL": (93.0, 40.0),
    "DCGM_FI_PROF_SM_ACTIVE": (0.12, 0.7),
    "DCGM_FI_PROF_DRAM_ACTIVE": (0.95, 0.3),
    "DCGM_FI_DEV_FB_USED": (70_000.0, 70_000.0),
    "DCGM_FI_DEV_FB_FREE": (11_559.0, 11_559.0),
    "DCGM_FI_DEV_POWER_USAGE": (450.0, 300.0),
}
"""Per field: GPU 0's value, GPU 1's."""


def dcgm_text(scale: float) -> str:
    lines = []
    for name, per_gpu in DCGM.items():
        lines.append(f"# TYPE {name} gauge")
        lines += [
            f'{name}{{gpu="{i}",UUID="GPU-{i}",device="nvidia{i}",modelName="H100"}} {v * scale}'
            for i, v in enumerate(per_gpu)
        ]
    return "\n".join(lines) + "\n"


def test_per_level_gpu_figures_are_what_the_dcgm_stand_in_served() -> None:
    """Three scrapes at one load, three at another: over each level's window the GPU figures are the
    values served then, per GPU and for both (shares averaged, memory and power summed)."""
    scale = {"now": 1.0}
    with (
        stand_in({"/metrics": lambda: vllm_text(100.0, 10.0)}) as server,
        stand_in({"/metrics": lambda: dcgm_text(scale["now"])}) as exporter,
    ):
        poller = ServerMetricsPoller(server + "/v1", gpu=DcgmSource(exporter))
        with httpx.Client() as client:
            for s in (1.0, 1.0, 1.0, 0.5, 0.5, 0.5):
                scale["now"] = s
                assert poller.scrape_once(client)
    view = poller.latest()
    r = view.readings
    first = view.level_summary(r[0].t_ns, r[2].t_ns)["gpu"]
    second = view.level_summary(r[3].t_ns, r[5].t_ns)["gpu"]
    assert first["gpus"] == 2 and set(first["per_gpu"]) == {"0", "1"}
    for summary, s in ((first, 1.0), (second, 0.5)):
        assert summary["per_gpu"]["0"]["gpu_util_mean"] == pytest.approx(0.93 * s)
        assert summary["per_gpu"]["1"]["dram_active_mean"] == pytest.approx(0.3 * s)
        assert summary["gpu_util_mean"] == pytest.approx((0.93 + 0.40) / 2 * s)
        assert summary["dram_active_mean"] == pytest.approx((0.95 + 0.3) / 2 * s)
        assert summary["sm_active_mean"] == pytest.approx((0.12 + 0.7) / 2 * s)
        assert summary["fb_used_mib_mean"] == pytest.approx(140_000 * s)
        assert summary["power_w_mean"] == pytest.approx(750.0 * s)
    text = server_content(view, None).plain
    assert "GPU×2 33% SM 20% DRAM 31% FB 86% 375W" in text  # the latest scrape, at half


def test_a_dcgm_exporter_that_is_not_there_is_said_once_and_the_server_goes_on() -> None:
    notices: list[str] = []
    with stand_in({"/metrics": lambda: vllm_text(1.0, 1.0)}) as server:
        poller = ServerMetricsPoller(server + "/v1", gpu=DcgmSource(server + "/nothing", notices.append))
        with httpx.Client() as client:
            assert poller.scrape_once(client) and poller.scrape_once(client)
    assert len(notices) == 1 and "GPU metrics" in notices[0] and "404" in notices[0]
    assert poller.latest().level_summary(0, time.perf_counter_ns())["gpu"] is None
    assert dcgm_url("http://gpu-host") == "http://gpu-host:9400/metrics"
    assert dcgm_url("http://gpu-host:9500/x") == "http://gpu-host:9500/x"


def test_nvml_absent_is_one_line_saying_how_to_get_it() -> None:
    try:
        import pynvml  # type: ignore[import-not-found, unused-ignore]  # noqa: F401
    except ImportError:
        with pytest.raises(ValueError, match=re.escape(NVML_MISSING)):
            gpu_source_for("nvml")
    else:
        pytest.skip("pynvml is installed here: the absent path cannot be taken")
    with pytest.raises(ValueError, match="DCGM exporter's URL"):
        gpu_source_for("gpu-host:9400")


def _served(bodies: list[tuple[int, str]], name: str) -> list[tuple[int, float]]:
    """(t_ns, GPU 0's value of ``name``) of each served body, parsed here by hand."""
    out = []
    for t_ns, text in bodies:
        for line in text.splitlines():
            if line.startswith(name + "{") and 'gpu="0"' in line:
                out.append((t_ns, float(line.rpartition(" ")[2])))
    return out


def _hold_mean(points: list[tuple[int, float]], t_from: int, t_to: int) -> float:
    area = 0.0
    for (t, v), nxt in zip(points, [*points[1:], (t_to, 0.0)], strict=True):
        lo, hi = max(t, t_from), min(nxt[0], t_to)
        if hi > lo:
            area += v * (hi - lo)
    return area / (t_to - t_from)


async def test_the_simulators_gpu_per_level_is_what_it_served_decode_then_prefill(tmp_path: Path) -> None:
    """small-gpu: a decode-heavy level (short prompts, long answers) is memory-bound (DRAM > SM) and a
    prefill-heavy one (long prompts, one token) compute-bound (SM > DRAM), as the profile's roofline says;
    per level the scraped figures are the time-average of what the simulator served."""
    served: list[tuple[int, str]] = []

    class Recording(httpx.HTTPTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            sent = time.perf_counter_ns()
            response = super().handle_request(request)
            response.read()
            served.append(((sent + time.perf_counter_ns()) // 2, response.text))
            return response

    with SimServer("small-gpu", time_scale=1) as sim:
        poller = ServerMetricsPoller(sim.url, interval_s=0.1, window_s=1.0, transport=Recording())
        windows = []
        with poller:
            for words, osl in ((10, 400), (1500, 1)):
                stop = time.monotonic() + 2.6

                async def user(words: int = words, osl: int = osl, stop: float = stop) -> None:
                    while time.monotonic() < stop:
                        assert (
                            await call(sim.port, "POST", "/v1/chat/completions", chat_body(osl, words=words))
                        ).status

                load = [asyncio.ensure_future(user()) for _ in range(8)]
                await asyncio.sleep(1.3)  # the DCGM window (1 s) fills with this level's steps
                t_from = time.perf_counter_ns()
                await asyncio.sleep(1.0)
                windows.append((t_from, time.perf_counter_ns()))
                for task in load:  # the sim drops a request whose client went away
                    task.cancel()
                await asyncio.gather(*load, return_exceptions=True)
        view = poller.latest()
    decode, prefill = (view.level_summary(a, b)["gpu"] for a, b in windows)
    assert decode["dram_active_mean"] > decode["sm_active_mean"]
    assert prefill["sm_active_mean"] > prefill["dram_active_mean"]
    for summary, (a, b) in zip((decode, prefill), windows, strict=True):
        for signal, name in (
            ("dram_active", "DCGM_FI_PROF_DRAM_ACTIVE"),
            ("sm_active", "DCGM_FI_PROF_SM_ACTIVE"),
        ):
            truth = _hold_mean(_served(served, name), a, b)
            # within what the two stamps of each scrape differ by (the transport's and the poller's)
            assert summary["per_gpu"]["0"][f"{signal}_mean"] == pytest.approx(truth, abs=1e-3)


def test_nvml_readings_become_the_same_gauges_as_dcgms() -> None:
    """Without a GPU here, NVML's calls are answered by a stand-in with NVML's shapes (utilisation in %,
    memory in bytes, power in mW): the figures come out in the DCGM signals' units, per GPU and for all."""
    from types import SimpleNamespace

    from tui.engine.server_metrics.gpu_source import NvmlSource

    nvml = SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlDeviceGetCount=lambda: 2,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetUtilizationRates=lambda h: SimpleNamespace(gpu=90 - 20 * h, memory=80),
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(used=70 * 2**30, free=10 * 2**30),
        nvmlDeviceGetPowerUsage=lambda h: 400_000,
    )
    with httpx.Client() as client:
        gauges = NvmlSource(nvml).read(client)
    assert gauges["gpu_util@0"] == 0.9 and gauges["gpu_util@1"] == 0.7
    assert gauges["gpu_util"] == pytest.approx(0.8) and gauges["dram_active"] == pytest.approx(0.8)
    assert gauges["fb_used_mib"] == 2 * 70 * 1024 and gauges["power_w"] == 800.0
    assert "sm_active" not in gauges  # NVML has no SM-active figure


def test_a_server_that_goes_away_is_scraped_at_pace_its_restart_seen_and_no_proxy_blamed() -> None:
    """The server answers, then refuses (it was killed), then answers again from zero. Backing off
    (doubling up to 5 s) let the new process's counters climb past the old ones before the next scrape, so
    the restart went unseen; and the notice asked whether a proxy was in the way."""
    state = {"up": True, "tokens": 1000.0, "attempts": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        state["attempts"] += 1
        if not state["up"]:
            raise httpx.ConnectError("connection refused", request=request)
        state["tokens"] += 10.0
        return httpx.Response(200, text=vllm_text(state["tokens"], state["tokens"] / 10))

    notices: list[str] = []
    poller = ServerMetricsPoller(
        "http://127.0.0.1:9/v1", interval_s=0.05, max_backoff_s=5.0, transport=httpx.MockTransport(handler),
        on_notice=notices.append,
    )  # fmt: skip
    deadline = time.monotonic() + 10
    with poller:
        while poller.latest().scrapes < 3:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        state["up"] = False
        while poller.latest().failures < 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        down_from, attempts_from = time.monotonic(), state["attempts"]
        time.sleep(1.0)  # the outage itself (bounded)
        attempts = state["attempts"] - attempts_from
        state["up"], state["tokens"] = True, 0.0  # a new process: its counters start again
        while poller.latest().status != "ok":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        back_s = time.monotonic() - down_from - 1.0
    view = poller.latest()
    # at the scrape pace (20 a second) while gone; doubling from 0.1 s: 0.1 + 0.2 + 0.4 = 3 in that second
    assert attempts >= 8, attempts
    assert back_s < 0.5, back_s
    assert view.resets == 1
    gone = [n for n in notices if "stopped answering" in n]
    assert len(gone) == 1 and not any("proxy" in n for n in notices), notices


def test_a_new_process_start_time_is_a_restart_though_the_counters_climbed_past_the_old_ones() -> None:
    """A long outage with the poller backed off: the new process's counters may pass the old ones before
    the first scrape after it; ``process_start_time_seconds`` (vLLM serves it) still tells."""
    current = {"tokens": 100.0, "started": 1000.0}

    def body() -> str:
        start = f"# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds {current['started']}\n"
        return vllm_text(current["tokens"], current["tokens"] / 10) + start

    with stand_in({"/metrics": body}) as url:
        poller = ServerMetricsPoller(url + "/v1", interval_s=1.0, window_s=60.0)
        with httpx.Client() as client:
            for tokens, started in ((100.0, 1000.0), (200.0, 1000.0), (500.0, 1060.0), (600.0, 1060.0)):
                current["tokens"], current["started"] = tokens, started
                assert poller.scrape_once(client)
    view = poller.latest()
    assert view.resets == 1 and view.reset_t_ns == view.readings[2].t_ns
