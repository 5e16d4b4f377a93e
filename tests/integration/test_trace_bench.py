"""`tokentop bench --trace` against the simulator: one level per `--trace-speed`, each replaying the trace
from its start, in the results; and a trace flag that cannot be used is one line, exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.support.engine_helpers import bench, read_jsonl

pytestmark = pytest.mark.timeout(120)


def test_bench_sweeps_the_trace_at_each_speed(tmp_path: Path) -> None:
    trace = tmp_path / "AzureLLMInferenceTrace_conv.csv"
    rows = [
        f"2023-11-16 18:15:{10 + i // 10:02d}.{(i % 10) * 1000000:07d},{20 + i % 7},{3 + i % 4}"
        for i in range(30)
    ]
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(rows) + "\n")
    out, log = tmp_path / "r.json", tmp_path / "requests.jsonl"
    r = bench("--sim-profile", "flat", "--sim-time-scale", "10", "--trace", str(trace),
              "--trace-speed", "1,2", "--requests", "20", "--output", str(out), "--requests-log", str(log),
              "--plot", str(tmp_path / "p.svg"), "--vllm-results", str(tmp_path / "vllm"),
              "--quiet")  # fmt: skip
    assert r.returncode == 0, r.stderr
    results = json.loads(out.read_text())
    assert [(lv["mode"], lv["trace_speed"]) for lv in results["levels"]] == [("trace", 1.0), ("trace", 2.0)]
    assert "x1" in r.stdout and "x2" in r.stdout
    # sends against their schedule are shown apart from TTFT, as the results keep them
    (lag_line,) = [line for line in r.stdout.splitlines() if line.startswith("send vs schedule")]
    assert "x1 p50" in lag_line and "x2 p50" in lag_line
    assert all("p99_sched_lag_ms" in lv for lv in results["levels"])
    # the exports take a trace level too: the plot's axis is the speed-up, vLLM's rate the one achieved
    assert "speed-up" in (tmp_path / "p.svg").read_text()
    vllm = [json.loads(p.read_text()) for p in sorted((tmp_path / "vllm").glob("*.json"))]
    assert len(vllm) == 2 and all(v["request_rate"] == pytest.approx(v["request_throughput"]) for v in vllm)
    records = read_jsonl(log)
    for level, speed in ((1, 1.0), (2, 2.0)):
        mine = sorted((x for x in records if x["level"] == level), key=lambda x: x["scheduled_ns"])
        # each level starts the trace over: its requests' lengths are the trace's from its first row; those
        # still streaming when the level had its 20 are cancelled with part of their answer (seen at -n 6)
        want = [(20 + i % 7, 3 + i % 4) for i in range(len(mine))]
        for x, w in zip(mine, want, strict=True):
            got = (x["input_tokens"], x["output_tokens"])
            if x["status"] == "ok":
                assert got == w, x
            else:
                assert x["status"] == "cancelled" and got[0] == w[0] and got[1] <= w[1], x
        assert sum(x["status"] == "ok" for x in mine) >= 20
        gaps = np.diff([x["scheduled_ns"] for x in mine]) / 1e6
        assert np.allclose(gaps, 100.0 / speed, atol=0.01)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--trace-speed", "2"], "the --trace-* flags need --trace PATH"),
        (["--trace", "{bad}"], "{bad}:1: input_length is negative: -3"),
        (["--trace", "{bad}", "--rate", "4"], "not with --rate or --concurrency"),
        (["--trace", "{none}"], "{none}: no such file"),
    ],
)
def test_an_unusable_trace_is_one_line_and_exit_2(tmp_path: Path, args: list[str], says: str) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 0, "input_length": -3, "output_length": 2}\n')
    paths = {"bad": str(bad), "none": str(tmp_path / "none.jsonl")}
    r = bench(*[a.format(**paths) for a in args], timeout_s=30)
    assert r.returncode == 2, r.stderr
    assert says.format(**paths) in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_trace_shorter_than_the_goal_ends_its_level_when_it_is_over(tmp_path: Path) -> None:
    """3 requests against the default goal of 100: the level ends once all 3 have, not never."""
    trace = tmp_path / "t.jsonl"
    trace.write_text(
        "".join(f'{{"timestamp": {t}, "input_length": 20, "output_length": 3}}\n' for t in (0, 50, 100))
    )
    out = tmp_path / "r.json"
    r = bench("--sim-profile", "flat", "--sim-time-scale", "10", "--trace", str(trace), "--output", str(out),
              "--quiet", timeout_s=60)  # fmt: skip
    assert r.returncode == 0, r.stderr
    (level,) = json.loads(out.read_text())["levels"]
    assert level["level_completed"] == 3


def test_bench_says_it_is_sizing_prompts_while_the_isl_probe_runs(tmp_path: Path) -> None:
    # the probe's prompts (up to 1,024 tokens for a trace) go before the first send: on a slow server tens
    # of seconds in which the progress line must not stay silent
    trace = tmp_path / "AzureLLMInferenceTrace_conv.csv"
    rows = [f"2023-11-16 18:15:10.{i * 1000000:07d},{20 + i},3" for i in range(4)]
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(rows) + "\n")
    args = ("--sim-profile", "flat", "--sim-time-scale", "10", "--trace", str(trace), "--requests", "4")
    r = bench(*args)
    assert r.returncode == 0, r.stderr
    said = [line for line in r.stderr.splitlines() if "sizing prompts to the server's token count" in line]
    assert said and said[0].endswith("0:00"), r.stderr
    assert r.stderr.index("model sim-") < r.stderr.index(said[0]) < r.stderr.index("[1/1]")
    r = bench(*args, "--no-isl-probe")
    assert r.returncode == 0 and "sizing prompts" not in r.stderr, r.stderr
