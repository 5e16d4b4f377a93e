"""The node agent: what a Ray actor hosts on each node. It starts tokentop's unchanged worker processes as
plain children (their timing loop shares its process with nothing of Ray's) over two pipes each, relays
their messages to the face in one bulk `collect` per call, and forwards commands in the order the face sent
them.

Plain Python (the face wraps it with ``ray.remote``), so it runs and is tested without Ray too. Every
`collect` sends each child a heartbeat; a child hears none for ``dead_after_s`` (the face stopped calling,
or this agent is frozen) and stops by itself (`tui.engine.load.deadman`).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import platform
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path
from urllib.parse import urlsplit

import tui
from tui.engine.load.deadman import DEAD_AFTER_S, HEARTBEAT
from tui.engine.remote.clock import read_boot_id, rebase_message
from tui.engine.wire import Command, WorkerSpec

CLOSED = b""
"""A collected item with no bytes: that worker's data pipe closed (the process ended)."""
PENDING_PER_WORKER = 4
"""Messages held per worker between two collects; beyond, the worker's pipe fills and it coalesces."""


def node_info() -> dict[str, object]:
    """This node as `ray-check` and the face's version check see it."""
    try:
        from importlib.metadata import version

        ray_version = version("ray")
    except Exception:
        ray_version = ""
    return {
        "host": socket.gethostname(),
        "tokentop": tui.__version__,
        "python": platform.python_version(),
        "ray": ray_version,
        "cpus": os.cpu_count() or 1,
        "boot_id": read_boot_id(),
    }


class NodeAgent:
    """One per node. Threaded (several calls at once: one `collect` waits while `send` and `clock` run)."""

    def __init__(self, dead_after_s: float = DEAD_AFTER_S, test_clock_offset_ns: int = 0) -> None:
        """``test_clock_offset_ns``: tests only, this node's clock reads that far ahead of the host's and
        its boot id differs (as another machine's would), in `clock` and in every stamp relayed."""
        self.dead_after_s = dead_after_s
        self.test_offset_ns = test_clock_offset_ns
        self._offset_ns = 0
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        self._cmd: dict[int, Connection] = {}
        self._next_seq: dict[int, int] = {}
        self._held: dict[int, dict[int, bytes]] = {}
        self._send_lock = threading.Lock()
        self._pending: deque[tuple[int, bytes]] = deque()
        self._counts: dict[int, int] = {}
        self._cond = threading.Condition()
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    # --- the face's calls -------------------------------------------------------------------------

    def info(self) -> dict[str, object]:
        info = node_info()
        if self.test_offset_ns:
            info["boot_id"] = f"shifted-{info['boot_id']}"
        return info

    def clock(self) -> int:
        """This node's clock now (what its workers stamp with)."""
        return time.perf_counter_ns() + self.test_offset_ns

    def spawn(self, specs: list[WorkerSpec], files: dict[str, bytes], offset_ns: int) -> list[int]:
        """Start a worker per spec; ``files`` (path on the face -> its bytes) are written here and the
        specs pointed at the copies; ``offset_ns`` (node minus face) is taken off every stamp relayed.
        Returns the children's pids."""
        self._offset_ns = offset_ns
        paths = self._write_files(files)
        pids = []
        for spec in specs:
            pids.append(self._start(_repoint(spec, paths)))
        return pids

    def send(self, worker: int, seq: int, command: Command) -> None:
        """Command number ``seq`` (0, 1, ...) for ``worker``: forwarded in sequence order whatever order the
        calls run in (a threaded actor does not keep submission order)."""
        with self._send_lock:
            held = self._held.setdefault(worker, {})
            held[seq] = pickle.dumps(command, protocol=pickle.HIGHEST_PROTOCOL)
            nxt = self._next_seq.get(worker, 0)
            conn = self._cmd.get(worker)
            while nxt in held:
                raw = held.pop(nxt)
                nxt += 1
                if conn is not None:
                    with contextlib.suppress(OSError):
                        conn.send_bytes(raw)
            self._next_seq[worker] = nxt

    def collect(self, timeout_s: float = 0.2) -> list[tuple[int, bytes]]:
        """Everything the workers sent since the last call (waiting up to ``timeout_s`` for the first):
        (worker, raw message) in arrival order, ``CLOSED`` bytes when a worker's pipe closed. Each call is
        also the face's heartbeat to every worker."""
        self._beat()
        with self._cond:
            self._cond.wait_for(lambda: bool(self._pending), timeout=timeout_s)
            out = list(self._pending)
            self._pending.clear()
            self._counts.clear()
            self._cond.notify_all()
        shift = self._offset_ns - self.test_offset_ns  # node time minus the offset is face time
        return [(i, raw if raw == CLOSED else rebase_message(raw, shift)) for i, raw in out]

    def stop_workers(self, grace_s: float = 5.0) -> None:
        """Close every command pipe (the workers stop at once); end any still running after ``grace_s``."""
        with self._send_lock:
            for conn in self._cmd.values():
                with contextlib.suppress(OSError):
                    conn.close()
            self._cmd.clear()
        deadline = time.monotonic() + grace_s
        for proc in self._procs.values():
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def reaches(self, url: str, timeout_s: float = 3.0) -> str:
        """ "" when this node can open a TCP connection to ``url``'s host and port, else why not (one line).
        A ``localhost`` URL that only the face's machine serves is the classic mistake."""
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            socket.create_connection((host, port), timeout_s).close()
        except OSError as exc:
            return f"cannot connect to {host}:{port}: {exc.strerror or type(exc).__name__}"
        return ""

    def pid(self) -> int:
        return os.getpid()

    def pids(self) -> dict[int, int]:
        return {i: p.pid for i, p in self._procs.items()}

    # --- inside -----------------------------------------------------------------------------------

    def _beat(self) -> None:
        with self._send_lock:
            for conn in self._cmd.values():
                with contextlib.suppress(OSError):
                    conn.send_bytes(HEARTBEAT)

    def _write_files(self, files: dict[str, bytes]) -> dict[str, str]:
        if not files:
            return {}
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="tokentop-node-")
        out = {}
        for n, (path, data) in enumerate(files.items()):
            local = Path(self._tmp.name) / f"{n}-{Path(path).name}"
            local.write_bytes(data)
            out[path] = str(local)
        return out

    def _start(self, spec: WorkerSpec) -> int:
        cmd_r, cmd_w = os.pipe()
        data_r, data_w = os.pipe()
        env = dict(os.environ)
        root = str(Path(tui.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
        code = (
            "from tui.engine.load.worker import worker_fd_main; "
            f"worker_fd_main({cmd_r}, {data_w}, {self.dead_after_s!r})"
        )
        proc = subprocess.Popen(  # the worker: a plain process, no Ray and no multiprocessing parent
            [sys.executable, "-c", code], pass_fds=(cmd_r, data_w), env=env, close_fds=True,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        os.close(cmd_r)
        os.close(data_w)
        cmd = Connection(cmd_w, readable=False)
        cmd.send_bytes(pickle.dumps(spec, protocol=pickle.HIGHEST_PROTOCOL))
        i = spec.index
        with self._send_lock:
            self._procs[i] = proc
            self._cmd[i] = cmd
        threading.Thread(
            target=self._read,
            args=(i, Connection(data_r, writable=False)),
            name=f"tokentop-agent-{i}",
            daemon=True,
        ).start()
        return proc.pid

    def _read(self, i: int, conn: Connection) -> None:
        """Worker i's messages into the pending list, at most `PENDING_PER_WORKER` at a time."""
        while True:
            try:
                raw = conn.recv_bytes()
            except (EOFError, OSError):
                raw = CLOSED
            with self._cond:
                self._cond.wait_for(lambda: self._counts.get(i, 0) < PENDING_PER_WORKER)
                self._pending.append((i, raw))
                self._counts[i] = self._counts.get(i, 0) + 1
                self._cond.notify_all()
            if raw == CLOSED:
                conn.close()
                return


def _repoint(spec: WorkerSpec, paths: dict[str, str]) -> WorkerSpec:
    """The spec with the files the face shipped at their copies on this node."""
    if not paths:
        return spec
    target, workload = spec.target, spec.workload
    if target.ca_cert in paths:
        target = replace(target, ca_cert=paths[target.ca_cert])
    if workload.tokenizer in paths:
        workload = replace(workload, tokenizer=paths[workload.tokenizer])
    if workload.dataset is not None and workload.dataset.path in paths:
        workload = replace(workload, dataset=replace(workload.dataset, path=paths[workload.dataset.path]))
    return replace(spec, target=target, workload=workload)
