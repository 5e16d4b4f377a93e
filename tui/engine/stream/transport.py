"""The HTTP clients an engine worker streams through, configured on purpose (see STYLE.md rule 6).

The streams go over a bare `asyncio.Protocol` with httptools (`tui.engine.stream.h1`, about a third of the
CPU per chunk of httpx over aiohttp) unless ``TOKENTOP_TRANSPORT`` (or ``transport=``) asks for ``aiohttp``
or ``httpx``, or the target needs a proxy, which only httpx speaks here. The httpx client serves the rest:
httpx as the client API over aiohttp's transport (about 4x less CPU per chunk than httpx's own h11
transport; ``httpx`` picks the stock one for comparison), no connection limit (the pool must never queue
a request: the wait would show up as TTFT), explicit timeouts,
the trust and proxy decision of `tui.engine.network`, and a socket-level "sent" stamp.
"""

from __future__ import annotations

import contextvars
import os
import time
from typing import TYPE_CHECKING, Literal, NamedTuple

import httpx

from tui.engine.config import TargetConfig
from tui.engine.network import proxy_for, transport_context
from tui.engine.records import RequestRecord

if TYPE_CHECKING:
    from tui.engine.stream.protocol_request import ProtocolStreams

TransportName = Literal["protocol", "aiohttp", "httpx"]
TRANSPORTS: tuple[TransportName, ...] = ("protocol", "aiohttp", "httpx")


class StreamTransport(NamedTuple):
    """What carries a worker's streams (``name``), and ``note``: why, when it is not what was asked."""

    name: TransportName
    note: str | None = None


def transport_choice(requested: str | None = None) -> TransportName:
    """``requested`` (or ``$TOKENTOP_TRANSPORT``), defaulting to the protocol path; aiohttp when httpx-aiohttp
    can be imported, else stock httpx."""
    name = (requested or os.environ.get("TOKENTOP_TRANSPORT") or "protocol").strip().lower()
    if name == "httpx":
        return "httpx"
    if name == "protocol":
        try:
            import httptools  # noqa: F401
        except ImportError:
            pass
        else:
            return "protocol"
    try:
        import httpx_aiohttp  # noqa: F401
    except ImportError:
        return "httpx"
    return "aiohttp"


def stream_transport(target: TargetConfig, requested: str | None = None) -> StreamTransport:
    """The path a worker's streams take to ``target``. The protocol path connects straight to the server
    (plain or TLS); through a proxy the streams go over httpx on aiohttp instead, and the note says so."""
    chosen = transport_choice(requested)
    if chosen == "protocol" and proxy_for(target) is not None:
        return StreamTransport(
            transport_choice("aiohttp"), "through a proxy the streams go over httpx (the protocol path: none)"
        )
    return StreamTransport(chosen)


def protocol_streams(target: TargetConfig, url: str, headers: dict[str, str]) -> ProtocolStreams:
    """The protocol path for one worker: its keep-alive pool to ``target`` and the request head."""
    from tui.engine.stream.h1 import ConnectionPool
    from tui.engine.stream.protocol_request import ProtocolStreams

    pool = ConnectionPool(
        url,
        transport_context(target),
        connect_timeout_s=target.connect_timeout_s,
        read_timeout_s=target.timeout_s,
    )
    return ProtocolStreams(pool, url, headers)


def make_client(target: TargetConfig, transport: str | None = None) -> httpx.AsyncClient:
    """An AsyncClient for one engine worker. Must be called inside the running event loop."""
    timeout = httpx.Timeout(
        connect=target.connect_timeout_s,
        read=target.timeout_s,
        write=target.timeout_s,
        pool=target.connect_timeout_s,
    )
    chosen = transport_choice(transport)
    if chosen == "protocol":  # the client for everything but the streams, and for the proxy fallback
        chosen = transport_choice("aiohttp")
    # One trust and proxy decision for both transports, the same the face's probe made (`network`).
    ctx = transport_context(target)
    proxy = proxy_for(target)
    tx: httpx.AsyncBaseTransport
    if chosen == "aiohttp":
        import aiohttp
        from httpx_aiohttp import AiohttpTransport

        def session() -> aiohttp.ClientSession:
            # limit=0: no cap on connections (the transport's own default caps at 100, which would queue).
            connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=15.0, ssl=ctx)
            trace = aiohttp.TraceConfig()
            trace.on_request_headers_sent.append(_on_headers_sent)
            # trust_env stays False here: aiohttp would look the proxy up in a thread per request and read
            # ~/.netrc (whose Basic auth clashes with our Authorization header); the proxy is passed instead.
            return aiohttp.ClientSession(connector=connector, trace_configs=[trace])

        tx = AiohttpTransport(client=session, verify=ctx, proxy=proxy)
    else:
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=None, keepalive_expiry=15.0)
        tx = httpx.AsyncHTTPTransport(verify=ctx, proxy=proxy, limits=limits, retries=0)
    # trust_env=False: the environment was read once above (`proxy_for`, `ssl_context`) for both transports;
    # with a transport given, httpx would not mount the environment's proxies anyway.
    return httpx.AsyncClient(transport=tx, timeout=timeout, trust_env=False)


SENDING: contextvars.ContextVar[RequestRecord | None] = contextvars.ContextVar(
    "tokentop_sending", default=None
)
"""The record whose request this task is sending (read by the aiohttp trace hook below)."""


async def _on_headers_sent(session: object, ctx: object, params: object) -> None:
    """aiohttp trace hook: the request headers just went onto the socket; that is "sent".

    Between httpx's ``send`` and this moment lie 0.2-0.7 ms of client-side Python (httpx dispatch, aiohttp
    request set-up, pool checkout) that the server never sees; stamping here keeps it out of TTFT.
    """
    record = SENDING.get()
    if record is not None:
        record.sent_ns = time.perf_counter_ns()
