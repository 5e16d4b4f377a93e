"""Prometheus text exposition -> families of samples, by `prometheus_client`'s own parser.

A kept parser rather than a hand-written one: the text format has escapes, optional timestamps, `# HELP`
and `# TYPE` lines, counters with and without `_total` and histograms spread over three sample names, and
servers differ in which of those they use. The parser normalises counters to one family per name without
`_total` (TGI's `tgi_request_success` and vLLM's `vllm:prompt_tokens_total` alike).

It is not fast: it scans labels character by character, ~20 us per sample measured on this project's
2-core machine (the simulator's 103-sample scrape: ~2 ms; 8 data-parallel engines, 824 samples: ~50 ms;
tests/perf/server_metrics_parse.py). A real vLLM exports many families we never read (per-request token
histograms, HTTP and process metrics), so for a recognised server `parse_text` is given the families the
signals need and hands the parser only their lines (a cheap split per line), keeping the face thread's
share of the GIL small. An unrecognised server is parsed whole.

Values are summed over label sets when read (`total`, `histogram`): data-parallel engines and tensor-parallel
ranks export one series each, and the server's view is their sum.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

Labels = tuple[tuple[str, str], ...]
"""A sample's labels, sorted by name (hashable, comparable)."""


class NotPrometheusError(ValueError):
    """The body is not Prometheus text (an HTML page, a JSON error, or no samples at all)."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One sample line: `name{labels} value`."""

    name: str
    labels: Labels
    value: float


@dataclass(frozen=True, slots=True)
class Family:
    """One metric family: its name (counters without `_total`), its type and its samples."""

    name: str
    kind: str
    """`counter`, `gauge`, `histogram`, `summary`, `unknown`, ... as the parser reports it."""
    samples: tuple[Sample, ...]


@dataclass(frozen=True, slots=True)
class Buckets:
    """A histogram summed over label sets: cumulative counts at each upper edge (`le`), ascending.

    The last edge is `inf` (the +Inf bucket), whose count is the number of observations. A parsed one holds
    its counts in an `array('d')` (a quarter of a tuple of floats: the poller keeps an hour of these) and
    shares its edges with every other scrape of the same layout."""

    edges: tuple[float, ...]
    cumulative: Sequence[float]
    sum: float

    @property
    def count(self) -> float:
        return self.cumulative[-1] if self.cumulative else 0.0


_SUFFIXES = ("_bucket", "_sum", "_count", "_total", "_created")


def base_name(sample: str) -> str:
    """The family a sample name belongs to: without `_bucket`, `_sum`, `_count`, `_total` or `_created`."""
    for suffix in _SUFFIXES:
        if sample.endswith(suffix):
            return sample[: -len(suffix)]
    return sample


def sample_names(text: str) -> set[str]:
    """The metric names on the sample lines, found without parsing (to recognise the server cheaply)."""
    names = set()
    for line in text.splitlines():
        if line and line[0] != "#":
            names.add(line.split("{", 1)[0].split(" ", 1)[0])
    return names


def _only(text: str, wanted: frozenset[str]) -> str:
    """The lines of `text` that belong to the families in `wanted` (comments included)."""
    kept = []
    for line in text.splitlines():
        if not line:
            continue
        if line[0] == "#":
            parts = line.split(None, 3)
            name = parts[2] if len(parts) >= 3 and parts[1] in ("TYPE", "HELP") else ""
        else:
            name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in wanted or base_name(name) in wanted:
            kept.append(line)
    return "\n".join(kept) + "\n"


def parse_text(text: str, wanted: frozenset[str] | None = None) -> dict[str, Family]:
    """Parse an exposition body into families keyed by family name; with `wanted` (family names, counters
    without `_total`), only those families' lines are parsed.

    NotPrometheusError when it does not parse or holds no sample (an empty 200 is no more use than a 404);
    a body whose samples are all outside `wanted` gives an empty dict."""
    families: dict[str, Family] = {}
    if wanted is not None:
        if not sample_names(text):
            raise NotPrometheusError("no samples in the body")
        text = _only(text, wanted)
    try:
        for metric in text_string_to_metric_families(text):
            samples = tuple(
                Sample(s.name, tuple(sorted(s.labels.items())), float(s.value)) for s in metric.samples
            )
            families[metric.name] = Family(metric.name, metric.type, samples)
    except (ValueError, TypeError, IndexError) as exc:
        first = text.lstrip()[:40].splitlines()[0] if text.strip() else ""
        raise NotPrometheusError(f"not Prometheus text ({exc}; starts {first!r})") from None
    if wanted is None and not any(f.samples for f in families.values()):
        raise NotPrometheusError("no samples in the body")
    return families


def family_name(metric: str) -> str:
    """The family a metric name belongs to: counters lose `_total`, as the parser names them."""
    return metric[: -len("_total")] if metric.endswith("_total") else metric


def total(families: Mapping[str, Family], metric: str) -> float | None:
    """A counter's or gauge's value summed over its label sets; None when the server does not export it.

    `metric` as the server documents it (`vllm:prompt_tokens_total`, `tgi_queue_size`, or a histogram's
    `..._sum` / `..._count`). Non-finite samples
    (a NaN gauge before the first observation) are skipped."""
    family = families.get(family_name(metric)) or families.get(metric)
    if family is None and metric.endswith(("_sum", "_count")):
        family = families.get(metric.rpartition("_")[0])  # a histogram's sum or count (TGI's token sums)
    if family is None:
        return None
    wanted = {metric, family.name, family.name + "_total"}
    values = [s.value for s in family.samples if s.name in wanted and math.isfinite(s.value)]
    return sum(values) if values else None


def selector(metric: str) -> tuple[str, Labels]:
    """`name{a="x",b="y"}` -> (`name`, the labels it asks for); a bare name asks for none."""
    name, _, rest = metric.partition("{")
    pairs = [p.split("=", 1) for p in rest.rstrip("}").split(",") if "=" in p]
    return name, tuple(sorted((k.strip(), v.strip().strip('"')) for k, v in pairs))


def histogram(families: Mapping[str, Family], metric: str) -> Buckets | None:
    """A histogram summed over its label sets (all but `le`); None when absent or not a histogram.
    `metric` may select series by label (`name{stage="prefill_forward"}`, see `selector`)."""
    metric, wanted = selector(metric)
    family = families.get(metric)
    if family is None or family.kind not in ("histogram", "gaugehistogram"):
        return None
    by_edge: dict[float, float] = {}
    sum_value = 0.0
    for s in family.samples:
        if wanted and not set(wanted) <= set(s.labels):
            continue
        if s.name.endswith("_bucket"):
            le = dict(s.labels).get("le")
            if le is None:
                continue
            edge = float(le)  # "+Inf" parses to inf
            by_edge[edge] = by_edge.get(edge, 0.0) + s.value
        elif s.name.endswith("_sum"):
            sum_value += s.value
    if not by_edge:
        return None
    edges = _shared_edges(tuple(sorted(by_edge)))
    return Buckets(edges, array("d", [by_edge[e] for e in edges]), sum_value)


_EDGES: dict[tuple[float, ...], tuple[float, ...]] = {}
_EDGES_CAP = 256


def _shared_edges(edges: tuple[float, ...]) -> tuple[float, ...]:
    """One tuple per distinct bucket layout: a server's edges are the same every scrape, and the poller keeps
    an hour of readings, where each histogram's own copy was 0.8 kB of the 7.2 kB a reading held."""
    if len(_EDGES) >= _EDGES_CAP:
        _EDGES.clear()  # many layouts (many servers or relabelled ones): start over rather than grow
    return _EDGES.setdefault(edges, edges)


def label_values(families: Mapping[str, Family], label: str) -> tuple[str, ...]:
    """Every distinct value of `label` across all samples, sorted (e.g. the served `model_name`)."""
    found = {v for f in families.values() for s in f.samples for k, v in s.labels if k == label}
    return tuple(sorted(found))
