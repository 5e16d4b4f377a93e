"""A ``--model`` the server does not serve is refused naming what it serves, not echoed as if confirmed; with
several served and none asked for, bench and the live engine say which they picked (#35 §3)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_engine_handle import ScriptedServerThread
from tests.support.engine_helpers import bench, running_handle
from tests.support.scripted_server import Request, Responder, normal_stream
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig
from tui.engine.host.probe import ProbeError, probe_models
from tui.sim.launch import SimServer
from tui.sim.perf_model import get_profile

pytestmark = pytest.mark.timeout(90)
SIM_MODEL = get_profile("flat").model


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    with SimServer("flat", time_scale=20.0) as server:
        yield server


def test_a_model_the_server_does_not_serve_is_refused_naming_what_it_serves(sim: SimServer) -> None:
    with pytest.raises(ProbeError) as error:
        probe_models(TargetConfig(base_url=sim.url, model="no-such-model", timeout_s=10))
    assert str(error.value) == f"{sim.url} does not serve --model 'no-such-model'; it serves {SIM_MODEL}"
    probed = probe_models(TargetConfig(base_url=sim.url, model=SIM_MODEL, timeout_s=10))
    assert (probed.model, probed.served, probed.note(SIM_MODEL)) == (SIM_MODEL, (SIM_MODEL,), None)


def test_bench_with_a_wrong_model_says_so_instead_of_echoing_it(sim: SimServer) -> None:
    r = bench("--url", sim.url, "--model", "no-such-model", "--requests", "2", "--isl", "8", "--osl", "4",
              "--no-record", "--quiet")  # fmt: skip
    assert r.returncode == 1, r.stderr
    assert f"does not serve --model 'no-such-model'; it serves {SIM_MODEL}" in r.stderr
    assert "model no-such-model at" not in r.stderr


def test_with_several_models_and_no_model_flag_the_pick_is_said() -> None:
    names = [f"m{i}" for i in range(10)]

    async def handler(req: Request, resp: Responder) -> None:
        data = ",".join(f'{{"id":"{n}"}}' for n in names)
        await resp.json(200, f'{{"object":"list","data":[{data}]}}'.encode())

    with ScriptedServerThread(handler) as server:
        probed = probe_models(TargetConfig(base_url=server.url, timeout_s=10))
        with pytest.raises(ProbeError, match=r"it serves m0, m1, .*m7, \.\.\. \(10 in all\)$"):
            probe_models(TargetConfig(base_url=server.url, model="other", timeout_s=10))
    assert probed.model == "m0"
    assert probed.note(None) == (
        "the first of 10 served (m0, m1, m2, m3, m4, m5, m6, m7, ... (10 in all)): --model picks another"
    )
    assert probed.note("m3") is None


def test_the_live_engine_says_which_of_several_models_it_picked(tmp_path: Path) -> None:
    async def handler(req: Request, resp: Responder) -> None:
        if req.path.endswith("/models"):
            await resp.json(200, b'{"object":"list","data":[{"id":"big"},{"id":"small"}]}')
            return
        await resp.head()
        for event in normal_stream(["a", "b"]):
            await resp.send(event)
        await resp.end()

    options = EngineOptions(server_metrics=False)
    with (
        ScriptedServerThread(handler) as server,
        running_handle(server.url, LoadTarget(concurrency=1), tmp_path, options=options) as handle,
    ):
        deadline = time.monotonic() + 20
        while not handle.snapshot().notices and time.monotonic() < deadline:
            time.sleep(0.02)
        snap = handle.snapshot()
    assert snap.model == "big"
    assert "model big: the first of 2 served (big, small): --model picks another" in snap.notices
