"""Fault injection: which faults, at what rate, and the seeded per-request draw.

Rate faults (each request draws one uniform number; kinds are exclusive, so their rates add up to at most 1):

- `error500`: HTTP 500 at once, OpenAI error JSON.
- `error429`: HTTP 429 at once with `Retry-After: 1`.
- `disconnect`: the server closes the connection mid-stream (after a random chunk; a non-streaming request
  gets no response at all).
- `stall`: mid-stream the server stops sending but keeps the connection open until the client gives up.
- `malformed`: one `data:` line that is not valid JSON mid-stream, then the stream carries on normally (a
  non-streaming request gets a truncated JSON body).

And one threshold: `queue503=N` answers 503 to a request that arrives while more than N requests (itself
included) would have to wait for a slot or KV room.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

RATE_KINDS = ("error500", "error429", "disconnect", "stall", "malformed")
MID_STREAM_KINDS = frozenset({"disconnect", "stall", "malformed"})
QUEUE_KIND = "queue503"
ALL_KINDS = (*RATE_KINDS, QUEUE_KIND)


@dataclass(frozen=True)
class FaultConfig:
    """Parsed `--fault` flags."""

    rates: tuple[tuple[str, float], ...] = ()
    """(kind, rate) for the rate kinds with a rate above 0, in RATE_KINDS order."""
    queue503: int | None = None
    """Reject with 503 when more than this many requests would wait; None: never."""

    def draw(self, rng: random.Random) -> str | None:
        """The fault for the next request, or None. Draws nothing (keeps the RNG stream) if no rate is set."""
        if not self.rates:
            return None
        u = rng.random()
        edge = 0.0
        for kind, rate in self.rates:
            edge += rate
            if u < edge:
                return kind
        return None


def parse_fault_specs(specs: Sequence[str]) -> FaultConfig:
    """Parse `KIND=RATE` (rate 0..1) and `queue503=N` items; ValueError with a one-line reason."""
    rates: dict[str, float] = {}
    queue503: int | None = None
    for spec in specs:
        kind, sep, value = spec.partition("=")
        kind = kind.strip()
        if not sep:
            raise ValueError(f"--fault wants KIND=RATE, got {spec!r}")
        if kind == QUEUE_KIND:
            try:
                queue503 = int(value)
            except ValueError:
                raise ValueError(f"--fault queue503=N wants a whole number, got {value!r}") from None
            if queue503 < 0:
                raise ValueError(f"--fault queue503=N wants N >= 0, got {value!r}")
            continue
        if kind not in RATE_KINDS:
            raise ValueError(f"unknown fault kind {kind!r} (choose from: {', '.join(ALL_KINDS)})")
        try:
            rate = float(value)
        except ValueError:
            raise ValueError(f"--fault {kind}=RATE wants a number from 0 to 1, got {value!r}") from None
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"--fault {kind}=RATE wants a number from 0 to 1, got {value!r}")
        rates[kind] = rate
    total = sum(rates.values())
    if total > 1.0 + 1e-9:
        raise ValueError(f"fault rates add up to {total:g}; at most 1 (each request gets at most one fault)")
    ordered = tuple((k, rates[k]) for k in RATE_KINDS if rates.get(k, 0.0) > 0.0)
    return FaultConfig(rates=ordered, queue503=queue503)


def fault_args(faults: Mapping[str, float]) -> list[str]:
    """`--fault` flags for a {kind: rate} mapping (queue503's value is N); validated by the sim itself."""
    args: list[str] = []
    for kind, value in faults.items():
        text = str(int(value)) if kind == QUEUE_KIND and float(value).is_integer() else f"{value:g}"
        args += ["--fault", f"{kind}={text}"]
    return args
