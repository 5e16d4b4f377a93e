"""One window's server histograms as saved figures: bucket-honest quantiles, and TTFT in its parts.

A histogram's mean over a window is exact (its `_sum` and `_count` deltas); a quantile is only known to lie
in one bucket, so each is saved with that bucket's edges and what it can claim (`window.quantile_estimate`):
a number only where the bucket is narrow, else a bound or a range, never a midpoint.

TTFT in parts: the server's own whole (`ttft_s`) is split into the time a request waited for a slot
(`queue_s`), its prefill (`prefill_s`) and what is left of the server's whole (tokenising, scheduling, the
first step); the client's TTFT minus the server's whole is the network, HTTP, proxies and the client
(`with_client`). Parts are means: means of parts add up to the mean of the whole, quantiles do not.

But only over one population. The server's deltas count the requests it observed between two scrapes; the
client's mean is taken over the requests whose first token reached it between the same two scrapes
(``between_ns``), and the two counts must agree (`MATCH_SLACK`). Where they cannot be matched (other traffic
on the server, a reservoir sample, a server that observes queue and prefill at a request's end, not at its
first token) a part is a bound: never below 0, and ``bounds`` says which part and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tui.engine.server_metrics.parse import Buckets
from tui.engine.server_metrics.window import EXACT, Estimate, quantile_estimate

QUANTILES = (0.5, 0.9, 0.99)
MATCH_SLACK = 0.05
"""Two populations are the same when their counts differ by at most this share (and 2 requests): a request
whose first token lands within a network's delay of a scrape can fall on either side of it."""
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


def with_client(
    parts: Mapping[str, Any] | None, client_ttft_ms: float | None, client_count: int | None = None
) -> dict[str, Any] | None:
    """``parts`` with the client's mean TTFT and the rest of it: `network_client_ms`, the client's TTFT minus
    the server's whole (or minus queue + prefill when the server has no whole). ``client_count``: how many
    requests the client's mean is over when it is over those whose first token landed between the parts'
    scrapes (``between_ns``); None when it is over another population (the level's window). Every part is
    0 or more; one that is no measurement of its own (populations not matched, or read below 0) is listed
    in ``bounds`` with the reason (module docstring)."""
    if parts is None:
        return None
    out = dict(parts)
    out.pop("between_ns", None)
    bounds: dict[str, str] = {}
    count = parts.get("count")
    other = parts.get("server_other_ms")
    if other is not None and other < 0:
        bounds["server_other_ms"] = (
            f"read {other:,.1f} ms: queue and prefill were observed for other requests than TTFT between "
            "these scrapes (a server that observes them at a request's end): 0 or more, not measured"
        )
        out["server_other_ms"] = 0.0
    out["client_ttft_ms"] = client_ttft_ms
    server = parts.get("server_ttft_ms")
    if server is None and parts.get("queue_ms") is not None and parts.get("prefill_ms") is not None:
        server = parts["queue_ms"] + parts["prefill_ms"]
    network = client_ttft_ms - server if client_ttft_ms is not None and server is not None else None
    if network is not None:
        if client_count is None:
            bounds["network_client_ms"] = (
                "the client's TTFT is over the level's window, the server's between two scrapes: "
                "different requests"
            )
        elif count is not None and abs(client_count - count) > max(2.0, MATCH_SLACK * count):
            bounds["network_client_ms"] = (
                f"the server counted {count:,.0f} first tokens between the scrapes, the client "
                f"{client_count:,}: other traffic on the server, so not one population"
            )
        if network < 0:
            bounds.setdefault(
                "network_client_ms", f"read {network:,.1f} ms: under what matching the requests resolves"
            )
            network = 0.0
    out["network_client_ms"] = network
    out["client_count"] = client_count
    out["bounds"] = bounds
    return out
