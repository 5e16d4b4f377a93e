"""A level's per-request samples by time block, what compare's noise is drawn from. They are kept from
the records as they come (a live A/B, `tui.engine.ab`) or as a session replays them
(`tui.engine.sessions.compare.session_samples`): one code for both, so both judge alike."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from tui.engine.aggregate.metrics import good_mask
from tui.engine.records import RequestRecord

Blocks = list[npt.NDArray[np.float64]]
Objectives = tuple[float | None, float | None, float | None]
"""An SLO's TTFT, TPOT and E2E objectives in ms (None: not given)."""
BLOCK_S = 1.0
MIN_BLOCKS = 8
MIN_BLOCK_S = 0.25
"""Blocks of `BLOCK_S`, shorter where the window would hold fewer than `MIN_BLOCKS`, never under
`MIN_BLOCK_S` (a request's whole stream should mostly fit one block)."""


def objectives(doc: dict[str, Any]) -> Objectives | None:
    """A results document's SLO objectives (its ``config``), or None without any."""
    config = doc.get("config") or {}
    slo = (config.get("slo_ttft_ms"), config.get("slo_tpot_ms"), config.get("slo_e2e_ms"))
    return None if all(x is None for x in slo) else slo


def block_seconds(window_s: float) -> float:
    """How long a noise block is in a window of ``window_s`` seconds."""
    return max(MIN_BLOCK_S, min(BLOCK_S, window_s / MIN_BLOCKS))


class LevelSamples:
    """One level's successful requests, each as its send, first content, end, token count and chunk
    stamps (ns), kept whole so the blocks can follow a window that moves while the level runs."""

    def __init__(self) -> None:
        self._sent: list[int] = []
        self._first: list[int] = []
        """-1 where no content came."""
        self._end: list[int] = []
        self._tokens: list[int] = []
        self._chunks: list[npt.NDArray[np.int64]] = []
        self.stamps = 0
        """Chunk stamps kept: what the samples cost (8 bytes each)."""

    def add(self, rec: RequestRecord) -> None:
        """A finished request; only a successful one is a sample."""
        if rec.status != "ok":
            return
        chunks = np.frombuffer(rec.chunk_ns, dtype=np.int64) if len(rec.chunk_ns) else np.empty(0, np.int64)
        self._sent.append(rec.sent_ns)
        self._first.append(-1 if rec.first_content_ns is None else rec.first_content_ns)
        self._end.append(rec.end_ns)
        self._tokens.append(rec.output_tokens if rec.output_tokens is not None else len(chunks))
        self._chunks.append(chunks)
        self.stamps += len(chunks)

    def blocks(self, lo_ns: float, hi_ns: float, slo: Objectives | None = None) -> dict[str, Blocks]:
        """The window ``lo_ns``..``hi_ns`` by time block: a request's TTFT and TPOT (ms) in the block it was
        sent in, a gap (ms) in the block its chunk landed in, and each block's token and request rates;
        with ``slo``, each block's goodput: the output tokens/s of the requests that met it, by their end."""
        sent, first, end = (np.asarray(x, np.int64) for x in (self._sent, self._first, self._end))
        tokens = np.asarray(self._tokens, np.int64)
        chunks = np.concatenate(self._chunks) if self._chunks else np.empty(0, np.int64)
        owner = np.repeat(np.arange(len(self._chunks)), [len(c) for c in self._chunks])
        same = owner[1:] == owner[:-1]
        itl, itl_at = (np.diff(chunks) / 1e6)[same], chunks[1:][same]
        sent_in = (sent >= lo_ns) & (sent <= hi_ns) & (first >= 0)
        ttft, ttft_at = (first - sent)[sent_in] / 1e6, sent[sent_in]
        many = sent_in & (tokens > 1)
        tpot = (end - first)[many] / 1e6 / (tokens[many] - 1)
        tpot_at = sent[many]
        width_ns = block_seconds((hi_ns - lo_ns) / 1e9) * 1e9
        edges = lo_ns + width_ns * np.arange(int((hi_ns - lo_ns) // width_ns) + 1)
        per_s = 1e9 / width_ns

        def by_block(values: npt.NDArray[np.float64], at: npt.NDArray[np.int64]) -> Blocks:
            which = np.searchsorted(edges, at, side="right") - 1
            return [np.asarray(values[which == i], float) for i in range(len(edges) - 1)]

        landed = chunks[(chunks >= lo_ns) & (chunks <= hi_ns)]
        ends = end[(end >= lo_ns) & (end <= hi_ns)]
        tok = np.histogram(landed, edges)[0] * per_s if len(edges) > 1 else np.empty(0)
        req = np.histogram(ends, edges)[0] * per_s if len(edges) > 1 else np.empty(0)
        out = {
            "ttft": by_block(ttft, ttft_at),
            "tpot": by_block(tpot, tpot_at),
            "itl": by_block(itl, itl_at),
            "tok_rate": [np.array([x], float) for x in tok],
            "req_rate": [np.array([x], float) for x in req],
        }
        if slo is not None:
            out["good_tok_rate"] = self._goodput(edges, per_s, slo)
        return out

    def _goodput(self, edges: npt.NDArray[np.floating[Any]], per_s: float, slo: Objectives) -> Blocks:
        """Per block, the output tokens/s of the requests that met ``slo`` and ended in it (as
        `tui.engine.aggregate.attainment` counts them: a request without content misses a TTFT objective)."""
        sent, first, end = (np.asarray(x, np.int64) for x in (self._sent, self._first, self._end))
        tokens = np.asarray(self._tokens, np.int64)
        nan = float("nan")
        ttft = np.where(first >= 0, (first - sent) / 1e6, nan)
        tpot = np.where((first >= 0) & (tokens > 1), (end - first) / 1e6 / np.maximum(tokens - 1, 1), nan)
        good = good_mask(ttft, tpot, slo[0], slo[1], (end - sent) / 1e6, slo[2])
        if len(edges) < 2:
            return []
        rate = np.histogram(end[good], edges, weights=tokens[good])[0] * per_s
        return [np.array([x], float) for x in rate]
