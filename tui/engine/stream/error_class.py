"""What went wrong with a request below HTTP, in one line and one `error_class`
(`tui.engine.records.ERROR_CLASSES`): refused, unresolvable, TLS, timed out, stalled, disconnected.

Both transports under httpx (aiohttp's and httpx's own) raise their own exceptions, mapped loosely into
httpx's; the original exception in the cause chain decides.
"""

from __future__ import annotations

import errno
import os
import socket
import ssl

import httpx

from tui.engine.stream.openai import one_line


def classify_exception(
    exc: BaseException, *, started: bool, chunks: int | None = None
) -> tuple[str, str, bool]:
    """(error class, one-line message, retry-on-a-fresh-connection?) for a transport exception.

    httpx over aiohttp maps aiohttp's exceptions loosely (a refused connection arrives as ConnectTimeout), so
    the original exception in the cause chain decides. ``started``: response headers had arrived;
    ``chunks``: the output chunks read before the failure, when the body was being read.
    """
    chain = _chain(exc)
    names: set[str] = set()
    for e in chain:
        names.update(t.__name__ for t in type(e).__mro__)
    os_err = next((e for e in chain if isinstance(e, OSError) and e.errno), None)
    reason = _os_reason(os_err) if os_err is not None else ""

    dns_err = next((e for e in chain if isinstance(e, socket.gaierror)), None)
    if dns_err is not None:
        # class connect (every rule for an unreachable server applies), the message says which part failed;
        # os.strerror knows nothing of resolver codes: it would read "unknown error -2"
        return "connect", _dns_message(dns_err, _host_of(chain)), False
    # the deepest: aiohttp wraps the ssl module's error in its own subclass of it, without its fields
    ssl_err = next((e for e in reversed(chain) if isinstance(e, ssl.SSLError)), None)
    if ssl_err is not None:
        return "tls", tls_message(ssl_err), False
    if "ClientConnectorError" in names or isinstance(exc, httpx.ConnectError):
        return "connect", f"cannot connect: {reason or _first_line(exc)}", False
    connect_timeout = "ConnectionTimeoutError" in names or isinstance(
        exc, (httpx.ConnectTimeout, httpx.PoolTimeout)
    )
    if connect_timeout and "ServerDisconnectedError" not in names and "ClientOSError" not in names:
        return "connect", "connect timeout", False
    if "SocketTimeoutError" in names or isinstance(exc, httpx.ReadTimeout):
        if started:
            return "stall", "stream stalled: no data within the timeout", False
        return "timeout", "no response within the timeout", False
    if isinstance(exc, httpx.TimeoutException) and "ServerTimeoutError" in names:
        return ("stall" if started else "timeout"), "timed out", False
    disconnected = (
        "ServerDisconnectedError" in names
        or "ClientPayloadError" in names
        or "ClientOSError" in names
        or "ClientConnectionResetError" in names
        or isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError))
        or (os_err is not None and os_err.errno in (errno.ECONNRESET, errno.EPIPE, errno.ECONNABORTED))
    )
    if disconnected:
        detail = _incomplete_body(names, exc) or reason or _first_line(exc)
        if chunks is None:
            return "disconnect", f"connection closed: {detail}", not started
        # tokentop's own words, as for a stall: aiohttp's text ("TransferEncodingError: 400, message='Not
        # enough data to satisfy transfer length header.'") names neither what happened nor when
        plural = "s" if chunks != 1 else ""
        return "disconnect", f"server closed the stream after {chunks} chunk{plural} ({detail})", False
    return "client", f"{type(exc).__name__}: {_first_line(exc)}", False


def _incomplete_body(names: set[str], exc: BaseException) -> str | None:
    """The body ended before its framing said it would: the chunked terminator or the content-length's
    bytes never came (aiohttp: TransferEncodingError, ContentLengthError; httpx: "incomplete chunked read",
    "received N bytes, expected M")."""
    text = " ".join(str(e) for e in _chain(exc))
    if "TransferEncodingError" in names or "incomplete chunked read" in text:
        return "incomplete chunked body"
    if "ContentLengthError" in names or ("expected" in text and "received" in text):
        return "body shorter than its content-length"
    return None


def _chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and len(chain) < 8:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    return chain


def tls_message(err: ssl.SSLError) -> str:
    """One line naming a TLS failure; a certificate that did not verify says how to trust it."""
    if isinstance(err, ssl.SSLCertVerificationError):
        detail = getattr(err, "verify_message", None) or getattr(err, "reason", None) or "unknown reason"
        return f"TLS: certificate verify failed: {detail} (use --ca-cert or --insecure)"
    reason = str(getattr(err, "reason", None) or err or type(err).__name__).replace("_", " ").lower()
    return f"TLS: {reason}"


def _dns_message(err: socket.gaierror, host: str | None) -> str:
    name = host or "the server's host"
    if err.errno in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)):
        return f"cannot resolve host {name}"
    return f"cannot resolve host {name}: {str(err.strerror or err).lower()}"


def _host_of(chain: list[BaseException]) -> str | None:
    """The host a failed request was for: aiohttp's connector errors carry it, httpx's carry the request."""
    for e in chain:
        host = getattr(e, "host", None)
        if isinstance(host, str) and host:
            return host
        if isinstance(e, httpx.RequestError):
            try:
                return e.request.url.host or None
            except RuntimeError:
                continue
    return None


def _os_reason(err: OSError) -> str:
    return os.strerror(err.errno).lower() if err.errno else str(err)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return one_line(text.splitlines()[0] if text else type(exc).__name__, 160)
