"""A misbehaving OpenAI-compatible server in a thread on 127.0.0.1 port 0, for subprocess tests of bench.

`/v1/models` answers normally (so the start-up probe passes, as with a real server behind a gateway); every
completion request gets the scripted status, headers and body, and is counted with its arrival time, so a
test can bound how hard tokentop hammered it.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType


class FaultServer:
    """Answers every POST with ``status`` (and ``headers``, ``body``); `hits_ns` records each arrival."""

    def __init__(self, status: int, *, headers: dict[str, str] | None = None, body: bytes = b"") -> None:
        self.status = status
        self.headers = headers or {}
        self.body = body or json.dumps({"error": {"message": f"scripted {status}"}}).encode()
        self.hits_ns: list[int] = []
        self.auth_seen: list[str] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                payload = json.dumps({"object": "list", "data": [{"id": "fault-model"}]}).encode()
                self._reply(200, {"content-type": "application/json"}, payload)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                self.rfile.read(length)
                with server._lock:
                    server.hits_ns.append(time.monotonic_ns())
                    server.auth_seen.append(self.headers.get("authorization", ""))
                hdrs = {"content-type": "application/json", **server.headers}
                self._reply(server.status, hdrs, server.body)

            def _reply(self, status: int, headers: dict[str, str], payload: bytes) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05})

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def hits(self) -> int:
        with self._lock:
            return len(self.hits_ns)

    def __enter__(self) -> FaultServer:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5.0)
