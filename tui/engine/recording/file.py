"""The session file: gzip-compressed JSON lines, appended as the run goes and flushed at least once a
second, so a crash or ``kill -9`` loses at most the last second and a reader of a cut file reads every whole
line before the cut.

The first line is the header (``{"session": FORMAT_VERSION, ...}``); each later line is one event,
``{"k": kind, "t": perf_counter_ns, ...}``. A sync flush ends a deflate block, so the bytes on disk always
decompress up to the last flush even without the gzip trailer.
"""

from __future__ import annotations

import contextlib
import errno
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

from tui.engine.recording.crc import crc32_combine
from tui.engine.wire import SessionPiece
from tui.units import elapsed

FORMAT_VERSION = 1
"""Raised when what a session holds changes incompatibly; a reader refuses a newer one."""
FLUSH_EVERY_S = 1.0
SUFFIX = ".tokentop-session.gz"
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03"
"""A gzip member's header (deflate, no name, no time, Unix) before the raw deflate stream: written by hand,
as is the trailer, so blocks its workers deflated can be spliced in (`SessionWriter.write_piece`)."""


class SessionError(ValueError):
    """A file that is not a session this tokentop can read: one line naming the file and what is wrong."""


WHY = {
    errno.ENOSPC: "disk full",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file too large",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ENOENT: "folder removed",
    errno.EIO: "I/O error",
}
"""A failed write's errno in a few words, as the lines that say it use them."""


class SessionWriter:
    """Appends events to a session file; thread-safe (the reader thread, the UI and the scraper write).

    A write that fails (a full disk, a removed folder, a permission) stops the recording for good: `lost`
    says why, when, and up to when the file holds the run; the run goes on."""

    def __init__(self, path: Path, header: dict[str, Any], file: IO[bytes] | None = None) -> None:
        """``file``: where the bytes go instead of a new file at ``path`` (a test's failing disk)."""
        self.path = path
        # closed in close(); "x": a session is never overwritten
        self._file: IO[bytes] | None = open(path, "xb") if file is None else file  # noqa: SIM115
        self._zip = zlib.compressobj(6, zlib.DEFLATED, -15)
        self._crc = 0
        self._size = 0
        """CRC-32 and length of everything written, for the gzip trailer."""
        self._head = GZIP_HEADER
        """Written before the first block (then b"")."""
        self._lock = threading.Lock()
        self._flushed_at = time.monotonic()
        self._last_t = 0
        self._t0_ns = int(header.get("t0_ns", 0))
        self._kept_t: int | None = None
        """The ``t`` of the last event a flush put on disk (None: not even the header)."""
        self.error: str | None = None
        """Why recording stopped (a write failed); the run goes on."""
        self.lost: Lost | None = None
        """What the failed write cost, once one did."""
        self.write({"session": FORMAT_VERSION, **header}, flush=True)

    def write(self, event: dict[str, Any], *, flush: bool = False) -> None:
        """Append one line; flush when asked or when the last flush is a second old. An event's ``t`` is
        kept from going back (threads write in turn), so the file is in time order."""
        with self._lock:
            if self._file is None:
                return
            if "t" in event:
                event["t"] = self._last_t = max(int(event["t"]), self._last_t)
            try:
                line = orjson.dumps(event, option=orjson.OPT_APPEND_NEWLINE | orjson.OPT_SERIALIZE_NUMPY)
            except (OSError, ValueError) as exc:
                self._failed(exc, self._last_t)
                return
            self._append(line, flush)

    def write_raw(self, head: bytes, t_ns: int, tail: bytes) -> None:
        """Append the line ``head``, ``t``, ``tail``: an event already JSON but for its time (``head`` ends
        with ``"t":``), which is kept from going back as `write` keeps it."""
        with self._lock:
            if self._file is None:
                return
            self._last_t = t = max(t_ns, self._last_t)
            self._append(b"%s%d%s" % (head, t, tail), flush=False)

    def write_piece(self, head: bytes, t_ns: int, piece: SessionPiece) -> None:
        """Append the line ``head``, ``t``, then the rest of it as a worker deflated it (`SessionPiece`):
        this stream's own blocks end on a full flush (nothing after refers back across the piece)."""
        with self._lock:
            if self._file is None:
                return
            self._last_t = t = max(t_ns, self._last_t)
            line = b"%s%d" % (head, t)
            self._crc = crc32_combine(zlib.crc32(line, self._crc), piece.crc, piece.size)
            self._size += len(line) + piece.size
            try:
                out = self._zip.compress(line) + self._zip.flush(zlib.Z_FULL_FLUSH) + piece.deflated
            except (OSError, ValueError) as exc:
                self._failed(exc, self._last_t)
                return
            self._out(out, flush=False)

    def _append(self, line: bytes, flush: bool) -> None:
        """Under the lock: compress ``line`` on, and flush when asked or a second after the last flush."""
        self._crc = zlib.crc32(line, self._crc)
        self._size += len(line)
        try:
            out = self._zip.compress(line)
        except (OSError, ValueError) as exc:
            self._failed(exc, self._last_t)
            return
        self._out(out, flush)

    def _out(self, out: bytes, flush: bool) -> None:
        """Under the lock: write ``out``, flushed when asked or a second after the last flush."""
        assert self._file is not None
        if self._head:
            out, self._head = self._head + out, b""
        try:
            now = time.monotonic()
            if flush or now - self._flushed_at >= FLUSH_EVERY_S:
                out += self._zip.flush(zlib.Z_SYNC_FLUSH)
                self._flushed_at = now
                self._file.write(out)
                self._file.flush()
                self._kept_t = self._last_t
            elif out:
                self._file.write(out)
        except (OSError, ValueError) as exc:
            self._failed(exc, self._last_t)

    def flush_if_due(self) -> None:
        """Flush if a second has passed since the last (called by a timer when nothing else writes)."""
        with self._lock:
            if self._file is None or time.monotonic() - self._flushed_at < FLUSH_EVERY_S:
                return
            try:
                self._file.write(self._head + self._zip.flush(zlib.Z_SYNC_FLUSH))
                self._head = b""
                self._file.flush()
                self._flushed_at = time.monotonic()
                self._kept_t = self._last_t
            except (OSError, ValueError) as exc:
                self._failed(exc, max(self._last_t, time.perf_counter_ns()))

    def close(self) -> None:
        """Finish the gzip stream and close. Idempotent."""
        with self._lock:
            if self._file is None:
                return
            try:
                trailer = struct.pack("<II", self._crc, self._size & 0xFFFFFFFF)
                self._file.write(self._head + self._zip.flush(zlib.Z_FINISH) + trailer)
                self._file.flush()
            except (OSError, ValueError) as exc:
                self._failed(exc, max(self._last_t, time.perf_counter_ns()))
            self._close_file()

    def _failed(self, exc: OSError | ValueError, t_ns: int) -> None:
        """Under the lock: the first failed write stops the recording; what it cost is kept in `lost`."""
        errno_ = getattr(exc, "errno", None)
        why = WHY.get(errno_, getattr(exc, "strerror", None) or str(exc)) if errno_ is not None else str(exc)
        self.error = f"cannot write the session {self.path}: {exc}"
        kept = None if self._kept_t is None else max(0.0, (self._kept_t - self._t0_ns) / 1e9)
        self.lost = Lost(self.path, why, max(0.0, (t_ns - self._t0_ns) / 1e9), kept)
        if self._file is not None:
            with contextlib.suppress(OSError, ValueError):
                self._file.close()  # its buffer cannot go out either: dropped with it
            self._file = None

    def _close_file(self) -> None:
        if self._file is None:
            return
        file, self._file = self._file, None
        try:
            file.close()
        except (OSError, ValueError) as exc:  # its last buffered bytes did not make it
            if self.lost is None:
                self._failed(exc, max(self._last_t, time.perf_counter_ns()))


@dataclass(frozen=True)
class Lost:
    """What a failed write cost a session: the run from ``kept_to_s`` on (run seconds) is not in it."""

    path: Path
    why: str
    """In a few words: "disk full", "permission denied", "folder removed"."""
    at_s: float
    """Run seconds when the write failed."""
    kept_to_s: float | None
    """The file holds the run up to here; None: not even its header."""

    def line(self) -> str:
        """Said once, at once: what was lost and from when."""
        kept = (
            "nothing of the run was saved"
            if self.kept_to_s is None
            else f"it holds the run up to {elapsed(self.kept_to_s)}"
        )
        return (
            f"session: cannot write {self.path} ({self.why} at {elapsed(self.at_s)}): the recording stopped, "
            f"{kept}; the run goes on"
        )

    def exit_line(self) -> str:
        """Instead of "session recorded to ..." at the end."""
        return f"session incomplete ({self.why} at {elapsed(self.at_s)}): {self.path}"


def _lines(path: Path) -> Iterator[tuple[bytes, bool]]:
    """(line, whole) for each line of the decompressed file; a cut stream yields what it decompresses."""
    unzip = zlib.decompressobj(31)
    rest = b""
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                data = rest + unzip.decompress(chunk)
                *lines, rest = data.split(b"\n")
                for line in lines:
                    yield line, True
                if unzip.eof:
                    break
    except zlib.error as exc:
        raise SessionError(f"{path}: not a tokentop session (not gzip: {exc})") from None
    if rest:
        yield rest, False


class BatchEvent(dict[str, Any]):
    """A worker batch's event, kept as its JSON line and parsed each time its ``"b"`` is read: the batches
    are nearly all of a session, and parsed whole they took about six times the line's size in memory."""

    __slots__ = ("raw",)

    def __init__(self, raw: bytes, t: int) -> None:
        super().__init__(k="b", t=t)
        self.raw = raw

    def __missing__(self, key: str) -> Any:
        if key != "b":
            raise KeyError(key)
        return orjson.loads(self.raw)["b"]


class Session:
    """A session read whole: its header, its events in order, and whether the file was cut short."""

    def __init__(self, path: Path, header: dict[str, Any], events: list[dict[str, Any]], cut: bool) -> None:
        self.path = path
        self.header = header
        self.events = events
        self.cut = cut
        """The file ends before the run's end (a crash, ``kill -9``): everything before the cut is here."""

    @property
    def start_ns(self) -> int:
        return int(self.header["t0_ns"])

    @property
    def end_ns(self) -> int:
        return int(self.events[-1]["t"]) if self.events else self.start_ns

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("k") == kind]


def session_files(folder: Path) -> list[Path]:
    """The sessions in ``folder`` by their first bytes, whatever their names (``--record run.session``),
    and every file named as a session even when empty or cut before its header (the listing says which),
    sorted by name (the default names sort by date)."""
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.iterdir()):
        try:
            with path.open("rb") as f:
                raw = f.read(4096)
            head = zlib.decompressobj(31).decompress(raw, 16) if raw[:2] == b"\x1f\x8b" else b""
        except (OSError, zlib.error):
            continue
        if head.startswith(b'{"session"') or (path.name.endswith(SUFFIX) and path.is_file()):
            out.append(path)
    return out


def read_header(path: Path) -> dict[str, Any] | None:
    """A session's header alone (its first line), or None for a file that has none to read."""
    try:
        for line, whole in _lines(path):
            obj = orjson.loads(line) if whole else None
            return obj if isinstance(obj, dict) and "session" in obj else None
    except (OSError, SessionError, orjson.JSONDecodeError):
        return None
    return None


def read_session(path: Path) -> Session:
    """Read ``path``; `SessionError` (one line) for a file that is not a session, or one too new."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            magic = f.read(2)
    except OSError as exc:
        raise SessionError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not magic:
        raise SessionError(f"{path}: an empty session (0 bytes: nothing was written, a full disk?)")
    if magic != b"\x1f\x8b":
        if magic[:1] == b"{":
            raise SessionError(f"{path}: a results file, not a session (sessions are *{SUFFIX})")
        raise SessionError(f"{path}: not a tokentop session")
    header: dict[str, Any] | None = None
    events: list[dict[str, Any]] = []
    cut = True
    for line, whole in _lines(path):
        if not whole:
            break  # the half-written line at a cut
        try:
            obj = orjson.loads(line)
            if header is not None and obj.get("k") == "b":
                obj = BatchEvent(bytes(line), int(obj["t"]))
        except orjson.JSONDecodeError:
            raise SessionError(f"{path}: not a tokentop session (a line is not JSON)") from None
        if header is None:
            if not isinstance(obj, dict) or "session" not in obj:
                raise SessionError(f"{path}: not a tokentop session (no session header)")
            version = obj["session"]
            if not isinstance(version, int) or version > FORMAT_VERSION:
                raise SessionError(
                    f"{path}: session format {version} is newer than this tokentop reads "
                    f"({FORMAT_VERSION}); upgrade tokentop"
                )
            header = obj
            continue
        events.append(obj)
        if obj.get("k") == "end":
            cut = False
    if header is None:
        raise SessionError(f"{path}: an empty or cut session (no header)")
    return Session(path, header, events, cut)
