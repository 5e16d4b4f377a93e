"""How long the face takes to parse and reduce one `/metrics` scrape (prometheus_client's parser).

    python tests/perf/server_metrics_parse.py

Times the simulator's vLLM-named scrape (tests/unit/fixtures/server_metrics/vllm_sim.txt, ~120 samples) and
the same with 8 data-parallel engines (~1,000 samples, a large real deployment), best of 200 runs each. Not
a pytest test (tests/perf is excluded from the suite).
"""

from __future__ import annotations

import time
from pathlib import Path

from tui.engine.server_metrics.kinds import MAPS, VLLM
from tui.engine.server_metrics.parse import parse_text
from tui.engine.server_metrics.view import read

FIXTURE = Path(__file__).parents[1] / "unit" / "fixtures" / "server_metrics" / "vllm_sim.txt"


def ranks(text: str, n: int) -> str:
    """The scrape as `n` data-parallel engines export it: each sample line once per `engine` label."""
    out = []
    for line in text.splitlines():
        if line.startswith("#"):
            out.append(line)
        else:
            out += [line.replace('model_name="', f'engine="{i}",model_name="') for i in range(n)]
    return "\n".join(out) + "\n"


def unread(n: int) -> str:
    """`n` histograms of 20 buckets the signals never read, as a real vLLM exports (per-request token
    counts, prefill/decode times, HTTP handler latencies)."""
    lines = []
    for h in range(n):
        name = f"vllm:unread_{h}_seconds"
        lines.append(f"# TYPE {name} histogram")
        lines += [f'{name}_bucket{{le="{2**b}",model_name="m"}} {b}' for b in range(19)]
        lines += [f'{name}_bucket{{le="+Inf",model_name="m"}} 19', f'{name}_sum{{model_name="m"}} 1.5']
        lines.append(f'{name}_count{{model_name="m"}} 19')
    return "\n".join(lines) + "\n"


def best_ms(text: str, wanted: frozenset[str] | None, runs: int = 100) -> tuple[float, float]:
    """Best (parse, parse + reduce) times in ms."""
    parse_best = total_best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        families = parse_text(text, wanted)
        t1 = time.perf_counter()
        read(families, 0, VLLM)
        t2 = time.perf_counter()
        parse_best = min(parse_best, t1 - t0)
        total_best = min(total_best, t2 - t0)
    return parse_best * 1e3, total_best * 1e3


def main() -> None:
    base = FIXTURE.read_text()
    wanted = MAPS[VLLM].families()
    cases = (("sim", base), ("sim+20 unread", base + unread(20)), ("8 engines", ranks(base, 8)))
    for label, text in cases:
        samples = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
        for how, keep in (("all", None), ("wanted", wanted)):
            parse_ms, total_ms = best_ms(text, keep)
            print(
                f"{label:>14}: {samples:5d} samples, {len(text):7,d} bytes, parse {how:>6}: "
                f"{parse_ms:7.3f} ms, parse + reduce {total_ms:7.3f} ms"
            )


if __name__ == "__main__":
    main()
