"""The paced calibration server on the simulator's HTTP/1.1 (`tui.sim.http`), over raw sockets on 127.0.0.1:
``Connection: close`` is honoured, a malformed request gets its 400, a client gone mid-stream is logged."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

import orjson

from tui.sim.paced import paced_server


def _connect(url: str) -> socket.socket:
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=5.0)
    sock.settimeout(5.0)
    return sock


def _read_to_close(sock: socket.socket) -> bytes:
    out = b""
    for _ in range(1000):  # bounded: the server closes after one small response
        data = sock.recv(65536)
        if not data:
            return out
        out += data
    raise AssertionError("the server kept the connection open")


def test_the_paced_server_speaks_the_simulators_http(tmp_path: Path) -> None:
    truth = tmp_path / "truth.jsonl"
    with paced_server(5.0, truth) as server:
        url = server.start().url
        with _connect(url) as sock:
            sock.sendall(b"GET /v1/models HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            reply = _read_to_close(sock)
        assert reply.startswith(b"HTTP/1.1 200") and b"sim-paced" in reply and b"connection: close" in reply
        with _connect(url) as sock:
            sock.sendall(b"GARBAGE\r\n\r\n")
            assert _read_to_close(sock).startswith(b"HTTP/1.1 400")
        body = orjson.dumps({"model": "sim-paced", "stream": True, "max_tokens": 1000, "prompt": "hi"})
        with _connect(url) as sock:
            head = b"POST /v1/completions HTTP/1.1\r\nhost: x\r\nx-tokentop-request-id: r1\r\n"
            sock.sendall(head + b"content-length: %d\r\n\r\n" % len(body) + body)
            first = sock.recv(65536)
            assert first.startswith(b"HTTP/1.1 200") and b"text/event-stream" in first
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline and not (truth.exists() and truth.read_bytes().strip()):
            time.sleep(0.05)
    (record,) = [orjson.loads(line) for line in truth.read_bytes().splitlines()]
    assert (record["client_request_id"], record["status"]) == ("r1", "disconnected")
