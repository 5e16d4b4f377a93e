"""One window's server histograms as saved figures: bucket-honest quantiles, and TTFT in its parts.

A histogram's mean over a window is exact (its `_sum` and `_count` deltas); a quantile is only known to lie
in one bucket, so each is saved with that bucket's edges and what it can claim (`window.quantile_estimate`):
a number only where the bucket is narrow, else a bound or a range, never a midpoint.

TTFT in parts: the server's own whole (`ttft_s`) is split into the time a request waited for a slot
(`queue_s`), its prefill (`prefill_s`) and what is left of the server's whole (tokenising, scheduling, the
first step); the client's TTFT minus the server's whole is the network, HTTP, proxies and the client
(`with_client`). Parts are means: means of parts add up to the mean of the whole, quantiles do not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tui.engine.server_metrics.parse import Buckets
from tui.engine.server_metrics.window import EXACT, Estimate, quantile_estimate

QUANTILES = (0.5, 0.9, 0.99)
SOURCE = "estimate from buckets"
"""What a quantile from a server histogram is, said beside every one saved."""
PART_SIGNALS = (("queue_ms", "queue_s"), ("prefill_ms", "prefill_s"))
"""The parts of the server's TTFT, in the order a request meets them."""
EXTRA_SIGNALS = (("decode_ms", "decode_s"), ("inference_ms", "inference_s"))
"""Figures beside the parts: first token to last (decode), admission to last (inference)."""


def estimates(buckets: Buckets | None) -> dict[str, Estimate]:
    """Each quantile of `QUANTILES` as an `Estimate`, by `p50`, `p90`, `p99` (empty: no observation)."""
    out: dict[str, Estimate] = {}
    if buckets is not None and buckets.count > 0:
        for q in QUANTILES:
            est = quantile_estimate(q, buckets)
            if est is not None:
                out[f"p{round(q * 100)}"] = est
    return out


def estimate_record(est: Estimate) -> dict[str, Any]:
    """How an estimate is saved: what it claims and its bucket's edges (`high` null for the +Inf bucket)."""
    return {"kind": est.kind, "low": est.low, "high": est.high if est.high != float("inf") else None}


def histogram_record(buckets: Buckets | None, scale: float = 1e3) -> dict[str, Any]:
    """A window's histogram as saved: `count`, the exact `mean`, each `pNN` as a number only when its bucket
    is narrow (None otherwise), and `buckets` giving every quantile's edges and kind; ``scale`` turns the
    server's seconds into ms."""
    record: dict[str, Any] = {f"p{round(q * 100)}": None for q in QUANTILES}
    record["count"] = buckets.count if buckets is not None else 0.0
    if buckets is None or buckets.count <= 0:
        return record
    record["mean"] = buckets.sum / buckets.count * scale
    found = {name: est.scaled(scale) for name, est in estimates(buckets).items()}
    for name, est in found.items():
        record[name] = est.value if est.kind == EXACT else None
    record["buckets"] = {name: estimate_record(est) for name, est in found.items()}
    record["source"] = SOURCE
    return record


def _mean_ms(buckets: Buckets | None) -> float | None:
    if buckets is None or buckets.count <= 0:
        return None
    return buckets.sum / buckets.count * 1e3


def ttft_parts(hists: Mapping[str, Buckets | None]) -> dict[str, Any] | None:
    """The server's TTFT in parts over one window, from each histogram's increase there (by signal):
    means in ms (`server_ttft_ms`, `queue_ms`, `prefill_ms`, `server_other_ms` = whole - queue - prefill),
    each part's quantiles as `histogram_record` saves them, and `missing`: the parts this server does not
    export. None when the server exports no part at all."""
    wanted = [("server_ttft_ms", "ttft_s"), *PART_SIGNALS]
    if not any(signal in hists for _, signal in wanted):
        return None
    out: dict[str, Any] = {"source": "means from the server's _sum/_count deltas"}
    for key, signal in (*wanted, *EXTRA_SIGNALS):
        out[key] = _mean_ms(hists.get(signal))
    ttft = hists.get("ttft_s")
    out["count"] = ttft.count if ttft is not None else None
    whole, queue, prefill = out["server_ttft_ms"], out["queue_ms"], out["prefill_ms"]
    out["server_other_ms"] = (
        whole - queue - prefill if whole is not None and queue is not None and prefill is not None else None
    )
    out["quantiles"] = {key: histogram_record(hists.get(signal)) for key, signal in wanted}
    out["missing"] = [key for key, signal in (*wanted, *EXTRA_SIGNALS) if signal not in hists]
    return out


def with_client(parts: Mapping[str, Any] | None, client_ttft_ms: float | None) -> dict[str, Any] | None:
    """``parts`` with the client's mean TTFT over the same window and the rest of it: `network_client_ms`,
    the client's TTFT minus the server's whole (or minus queue + prefill when the server has no whole)."""
    if parts is None:
        return None
    out = dict(parts)
    out["client_ttft_ms"] = client_ttft_ms
    server = parts.get("server_ttft_ms")
    if server is None and parts.get("queue_ms") is not None and parts.get("prefill_ms") is not None:
        server = parts["queue_ms"] + parts["prefill_ms"]
    out["network_client_ms"] = (
        client_ttft_ms - server if client_ttft_ms is not None and server is not None else None
    )
    return out
