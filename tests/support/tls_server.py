"""A self-signed certificate made by ``openssl req -x509`` for 127.0.0.1, and an HTTPS scripted server with
it that serves ``/v1/models`` and a short chat stream; `ThreadedTlsServer` runs one for subprocess tests."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.support.scripted_server import Request, Responder, ScriptedServer, ThreadedServer, normal_stream
from tui.engine.config import TargetConfig, WorkloadConfig
from tui.engine.records import RequestRecord
from tui.engine.stream.client import RequestSession, run_request
from tui.engine.stream.openai import StreamAccumulator
from tui.engine.stream.transport import TransportName, make_client

MODELS = b'{"object": "list", "data": [{"id": "tls-model"}]}'
HAVE_OPENSSL = shutil.which("openssl") is not None


@dataclass(frozen=True)
class SelfSigned:
    cert: Path
    """The certificate (PEM): also the CA bundle that trusts it."""
    key: Path


def make_self_signed(directory: Path) -> SelfSigned:
    """A one-day EC certificate for CN and IP SAN 127.0.0.1 (what the client checks the host against)."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    cmd = [
        "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
        "-addext", "subjectAltName=IP:127.0.0.1",
    ]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, timeout=20)
    return SelfSigned(cert, key)


def server_context(pair: SelfSigned) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pair.cert, pair.key)
    return ctx


async def serve(req: Request, resp: Responder) -> None:
    """``GET /v1/models`` lists one model; anything else gets a well-formed three-word stream."""
    if req.method == "GET":
        await resp.json(200, MODELS)
        return
    await resp.head()
    for event in normal_stream(["a", "b", "c"]):
        await resp.send(event)
    await resp.end()


def tls_server(pair: SelfSigned) -> ScriptedServer:
    return ScriptedServer(serve, tls=server_context(pair))


class ThreadedTlsServer(ThreadedServer):
    """`tls_server` on its own event loop in a thread, for a test that runs tokentop in a subprocess."""

    def __init__(self, pair: SelfSigned) -> None:
        super().__init__(tls_server(pair))


async def one_request(target: TargetConfig, transport: TransportName) -> RequestRecord:
    """One streaming request to ``target`` through the engine's own client and session, as a worker sends it
    (model "tls-model"): the record says how the TLS or proxy settings fared."""
    client = make_client(target, transport)
    session = RequestSession(client, target, WorkloadConfig(isl=8, osl=3), "tls-model", transport=transport)
    try:
        return await run_request(session, RequestRecord(1, 0, 0, 1, 0), StreamAccumulator())
    finally:
        await session.aclose()
        await client.aclose()
