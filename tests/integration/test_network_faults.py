"""The network below HTTP, named: a host that does not resolve, through the start-up probe and a worker's
request, on both transports.

The resolver is replaced in-process for names under ``.invalid`` (RFC 6761: they never resolve), so the test
sends no query at all, not even to the local resolver, and answers in microseconds."""

from __future__ import annotations

import pytest

from tui.engine.config import TargetConfig, WorkloadConfig
from tui.engine.host.probe import ProbeError, probe_server
from tui.engine.records import RequestRecord
from tui.engine.stream.client import RequestSession, run_request
from tui.engine.stream.openai import StreamAccumulator
from tui.engine.stream.transport import TRANSPORTS as ALL_TRANSPORTS
from tui.engine.stream.transport import TransportName, make_client

pytestmark = pytest.mark.timeout(20)
TRANSPORTS: list[TransportName] = list(ALL_TRANSPORTS)
NOWHERE = "http://tokentop-test.invalid:8000/v1"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_worker_names_a_host_that_does_not_resolve(
    no_dns: list[str], transport: TransportName
) -> None:
    target = TargetConfig(base_url=NOWHERE, model="m", timeout_s=5)
    client = make_client(target, transport)
    try:
        session = RequestSession(client, target, WorkloadConfig(isl=8, osl=8), "m", transport=transport)
        rec = await run_request(session, RequestRecord(1, 0, 0, 1, 0), StreamAccumulator())
        await session.aclose()
    finally:
        await client.aclose()
    assert (rec.error_class, rec.error) == ("connect", "cannot resolve host tokentop-test.invalid")
    assert no_dns  # the lookup went through the patched resolver


def test_the_probe_names_a_host_that_does_not_resolve(no_dns: list[str]) -> None:
    with pytest.raises(ProbeError) as info:
        probe_server(TargetConfig(base_url=NOWHERE))
    assert str(info.value) == f"{NOWHERE}: cannot resolve host tokentop-test.invalid"
    assert no_dns
