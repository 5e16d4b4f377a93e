"""A trace file as a stream of requests to replay: read line by line (never loaded whole), checked, sliced,
looped, and dealt out over the workers.

Every worker reads the whole file and keeps every W-th valid request (worker i the i-th, W+i-th, ...), so
the workers together send each request once with no coordination beyond the file itself. A bad line (a
missing or non-numeric field, a negative or zero length, a timestamp before the line before's) is skipped,
never sent: worker 0 says so in one notice naming the file and the first `MAX_LINE_NOTICES` bad lines (the
first one's reason), once it has met that many or the pass ended, and in one more with the count at the end
of the pass if there were more. A trace of millions of lines with bad ones spread through it costs two
lines and no memory beyond the line being read.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import replace

from tui.engine.config import TIME_UNIT_NS, TraceConfig
from tui.engine.traces.azure import AzureReader
from tui.engine.traces.burstgpt import BurstGptReader, OtherModel
from tui.engine.traces.mooncake import MooncakeReader
from tui.engine.traces.protocol import FORMATS, LineReader, TraceError, TraceFormat, TraceRequest

MAX_LINE_NOTICES = 5
"""Bad lines named in the one notice; the rest are counted at the end of the pass."""


def sniff_format(path: str, first_line: str) -> TraceFormat:
    """The format of a trace by its first line (a JSON object: Mooncake; a CSV header: by its columns), else
    by its name."""
    head = first_line.strip().lstrip("\ufeff")
    low = head.lower()
    if head.startswith("{"):
        return "mooncake"
    if "contexttokens" in low:
        return "azure"
    if "request tokens" in low:
        return "burstgpt"
    name = os.path.basename(path).lower()
    for fmt in FORMATS:
        if fmt in name:
            return fmt
    if name.endswith((".jsonl", ".json", ".ndjson")):
        return "mooncake"
    raise TraceError(
        f"{path}: cannot tell the trace's format from its name or first line: give --trace-format"
    )


def line_reader(config: TraceConfig, fmt: TraceFormat, header: str) -> LineReader:
    """The reader for ``fmt``; CSV formats take their columns from ``header``."""
    unit = TIME_UNIT_NS[config.time_unit] if config.time_unit else None
    if fmt == "mooncake":
        return MooncakeReader(unit or TIME_UNIT_NS["ms"])
    if fmt == "azure":
        return AzureReader(header)
    return BurstGptReader(header, config.model, unit or TIME_UNIT_NS["s"])


def _lines(path: str) -> Iterator[tuple[int, str]]:
    """(line number, text) of each non-blank line, read as it goes."""
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed by the with below, opened apart to word the error
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TraceError(f"{path}: is a directory, not a trace file") from None
    except OSError as exc:
        raise TraceError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    with f:
        for number, raw in enumerate(f, 1):
            text = raw.decode("utf-8", errors="replace").strip()
            if text:
                yield number, text


def check_trace(config: TraceConfig) -> TraceConfig:
    """Open the trace on the face's side and read up to its first request: ``config`` with its format
    (sniffed when None) and size filled in. Reads the head only. Raises `TraceError` in one line."""
    lines = _lines(config.path)
    first = next(lines, None)
    if first is None:
        raise TraceError(f"{config.path}: the file is empty")
    fmt = config.format or sniff_format(config.path, first[1])
    if config.block_size < 1:
        raise TraceError(f"--trace-block-size must be at least 1, got {config.block_size}")
    try:
        reader = line_reader(config, fmt, first[1])
    except ValueError as exc:
        raise TraceError(f"{config.path}:{first[0]}: not a {fmt} trace: {exc}") from None
    data = lines if fmt != "mooncake" else _chain(first, lines)
    for number, text in data:
        try:
            _valid(reader.parse(text))
        except OtherModel:
            continue
        except ValueError as exc:
            raise TraceError(f"{config.path}:{number}: {exc}") from None
        break
    else:
        what = f"no requests of model {config.model!r}" if config.model else "no requests"
        raise TraceError(f"{config.path}: {what} in this {fmt} trace")
    return replace(config, format=fmt, size_bytes=os.stat(config.path).st_size)


def _chain(first: tuple[int, str], rest: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    yield first
    yield from rest


def _valid(req: TraceRequest) -> TraceRequest:
    if req.input_tokens < 1:
        raise ValueError("input length is 0: nothing to send")
    if req.output_tokens < 1:
        raise ValueError("output length is 0 (a failed request in the trace): nothing to ask for")
    return req


class TraceFeed:
    """The requests worker ``worker`` of ``workers`` replays, ``at_ns`` from the replay's first request
    (the slice's first), passes of a looped trace one after another."""

    def __init__(
        self,
        config: TraceConfig,
        *,
        worker: int = 0,
        workers: int = 1,
        notice: Callable[[str], None] | None = None,
    ) -> None:
        if config.format is None:
            raise ValueError("TraceFeed needs a checked TraceConfig (its format known)")
        self.config = config
        self.worker = worker
        self.workers = max(1, workers)
        self._notice = notice if worker == 0 else None
        self.bad_lines = 0
        """Lines skipped as invalid in the first pass."""
        self._named: list[tuple[int, str]] = []
        """The first bad lines (number, reason), until said."""
        self.passes = 0
        """Passes over the file begun."""

    def __iter__(self) -> Iterator[TraceRequest]:
        cfg = self.config
        if cfg.size_bytes:
            try:
                size = os.stat(cfg.path).st_size
            except OSError:
                size = -1
            if size != cfg.size_bytes:
                raise TraceError(f"{cfg.path}: changed since it was checked")
        k = 0
        offset_ns = 0
        while True:
            self.passes += 1
            first_ns: int | None = None
            last_ns = 0
            n = 0
            for number, req in self._pass():
                if first_ns is None:
                    first_ns = req.at_ns
                last_ns = req.at_ns
                n += 1
                if k % self.workers == self.worker:
                    yield TraceRequest(req.at_ns - first_ns + offset_ns, req.input_tokens, req.output_tokens,
                                       req.hash_ids, req.session_id, number)  # fmt: skip
                k += 1
            if self.passes == 1:
                self._say_bad()
                if self._notice is not None and self.bad_lines > MAX_LINE_NOTICES:
                    self._notice(f"{cfg.path}: {self.bad_lines} bad lines skipped in all")
            if not cfg.loop or first_ns is None:
                return
            span = last_ns - first_ns
            offset_ns += span + (span // (n - 1) if n > 1 else 1_000_000_000)

    def _pass(self) -> Iterator[tuple[int, TraceRequest]]:
        """One pass: (line, request) for the valid requests in the slice, ``at_ns`` as the file says."""
        cfg = self.config
        assert cfg.format is not None
        reader: LineReader | None = None
        prev_ns: int | None = None
        slice_from: int | None = None
        slice_to: int | None = None
        for number, text in _lines(cfg.path):
            if reader is None:
                reader = line_reader(cfg, cfg.format, text)
                if cfg.format != "mooncake":
                    continue  # the header
            try:
                req = _valid(reader.parse(text))
            except OtherModel:
                continue
            except ValueError as exc:
                self._bad(number, str(exc))
                continue
            if prev_ns is not None and req.at_ns < prev_ns:
                self._bad(number, "timestamp before the previous request's (the trace must be in time order)")
                continue
            prev_ns = req.at_ns
            if slice_from is None:
                slice_from = req.at_ns + round(cfg.start_s * 1e9)
                if cfg.duration_s is not None:
                    slice_to = slice_from + round(cfg.duration_s * 1e9)
            if req.at_ns < slice_from:
                continue
            if slice_to is not None and req.at_ns >= slice_to:
                return
            yield number, req

    def _bad(self, number: int, reason: str) -> None:
        if self.passes > 1:
            return
        self.bad_lines += 1
        if self.bad_lines <= MAX_LINE_NOTICES:
            self._named.append((number, reason))
            if self.bad_lines == MAX_LINE_NOTICES:
                self._say_bad()

    def _say_bad(self) -> None:
        """The one notice naming the first bad lines (the first one's reason), if any are waiting."""
        named, self._named = self._named, []
        if not named or self._notice is None:
            return
        (first, reason), rest = named[0], [n for n, _ in named[1:]]
        also = f"; also line{'s' if len(rest) > 1 else ''} {', '.join(map(str, rest))}" if rest else ""
        more = " (more are counted at the end of the pass)" if len(named) == MAX_LINE_NOTICES else ""
        self._notice(f"{self.config.path}:{first}: {reason}; line skipped, nothing sent for it{also}{more}")
