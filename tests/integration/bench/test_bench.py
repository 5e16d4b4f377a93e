"""`tokentop bench` end to end, as a subprocess: sweeps, results JSON, timeouts, bad targets, secrets."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.engine_helpers import bench, bench_process_argv, logged_lines
from tui.sim.launch import SimServer

pytestmark = pytest.mark.timeout(90)
SECRET = "sk-bench-secret-5c0ffee42"
VLLM_KEYS = [
    "duration",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
] + [
    f"{s}_{m}_ms"
    for m in ("ttft", "tpot", "itl", "e2el")
    for s in ("mean", "median", "std", "p50", "p90", "p95", "p99")
]


# A core to itself (`heavy`, `onecore`), though it costs only 2.6 s of CPU in its 16 s: the client's
# turnaround between two requests of a user must stay at a few ms (see below). It passed 8 runs of 8 with one
# more core kept busy, and beside the other one-core tests (CI runs two at a time); beside a test that loads
# both cores it failed 1 run in 3, and in the timing pass beside the Ray cluster's start (and a busy core)
# the client read saturated, so no knee was taken.
@pytest.mark.heavy
@pytest.mark.onecore
def test_sweep_over_the_simulator_finds_the_knee(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    log = tmp_path / "requests.jsonl"
    # tiny-cpu: 4 slots, so throughput stops growing at 4 users. The client's own turnaround between two
    # requests of a user (a few ms, real time) leaves a slot idle at 4 users and not at 8, where a request
    # waits: it must stay well under the 5 % knee tolerance, so requests last ~0.5 s (time scale 4, 32
    # tokens). At time scale 10 and 16 tokens (~0.1 s) 8 users read >5 % above 4 in a clean-clone CI run.
    r = bench(
        "--sim-profile",
        "tiny-cpu",
        "--sim-time-scale",
        "4",
        "--concurrency",
        "2,4,8",
        "--requests",
        "12",
        "--isl",
        "32",
        "--osl",
        "32",
        "--output",
        str(out),
        "--requests-log",
        str(log),
        "--vllm-results",
        str(tmp_path / "vllm"),
        "--csv",
        str(tmp_path / "levels.csv"),
    )
    assert r.returncode == 0, r.stderr
    assert "knee: 4 users" in r.stdout
    assert r.stdout.count("\n") >= 6  # header, rule, 3 rows, footnote, knee
    res = json.loads(out.read_text())
    assert res["tool"] == "tokentop" and res["target"]["endpoint"] == "chat"
    assert res["target"]["model"] == "sim-gemma-3-270m"
    assert set(res["definitions"]) >= {"ttft", "tpot", "itl", "e2el", "itl_e2e", "knee", "steady_window"}
    assert [lv["concurrency"] for lv in res["levels"]] == [2, 4, 8]
    for lv in res["levels"]:
        missing = [k for k in VLLM_KEYS if k not in lv]
        assert not missing, missing
        assert lv["completed"] >= 12 and lv["failed"] == 0 and lv["steady"]
        assert lv["total_output_tokens"] == 32 * lv["completed"]
        assert lv["tokens_per_chunk"] == pytest.approx(1.0)
        assert lv["mean_itl_e2e_ms"] > lv["mean_tpot_ms"] > 0
    assert res["saturation"]["knee"]["value"] == 4
    tps = [lv["output_throughput"] for lv in res["levels"]]
    assert tps[0] < tps[1] and tps[2] < 1.05 * tps[1]
    assert res["client"]["workers"] == 1 and "max_cpu_share" in res["client"]
    lines = log.read_text().splitlines()
    assert len(lines) >= 36 and all(json.loads(x)["status"] == "ok" for x in lines)
    # the exports: one vLLM-shaped file per level with that level's figures, the table as CSV
    vllm = sorted((json.loads(p.read_text()) for p in (tmp_path / "vllm").glob("*.json")),
                  key=lambda v: v["tokentop_level_id"])  # fmt: skip
    assert [v["max_concurrency"] for v in vllm] == [2, 4, 8]
    for v, lv in zip(vllm, res["levels"], strict=True):
        assert v["request_rate"] == "inf" and v["model_id"] == "sim-gemma-3-270m"
        assert all(v[k] == lv[k] for k in VLLM_KEYS)
    rows = (tmp_path / "levels.csv").read_text().splitlines()
    assert len(rows) == 4 and rows[0].startswith("level_id,mode,concurrency,duration,")


def test_stalled_stream_fails_by_timeout_and_key_stays_secret(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    log = tmp_path / "requests.jsonl"
    with SimServer("flat", time_scale=4.0, faults={"stall": 0.5}, seed=3) as sim:
        t0 = time.monotonic()
        r = bench(
            "--url",
            sim.url,
            "--api-key",
            SECRET,
            "--concurrency",
            "2",
            "--requests",
            "6",
            "--timeout",
            "0.5",
            "--osl",
            "16",
            "--output",
            str(out),
            "--requests-log",
            str(log),
        )
        elapsed = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    assert elapsed < 30
    res = json.loads(out.read_text())
    errors = res["totals"]["errors"]
    assert errors.get("stall", 0) + errors.get("timeout", 0) >= 1, errors
    stalled = [json.loads(x) for x in log.read_text().splitlines() if json.loads(x)["status"] == "error"]
    for rec in stalled:
        assert rec["error_class"] in ("stall", "timeout")
        assert 0.4 < (rec["end_ns"] - rec["sent_ns"]) / 1e9 < 2.0  # gave up after ~--timeout, not hung
    for text in (r.stdout, r.stderr, out.read_text(), log.read_text()):
        assert SECRET not in text


def test_unreachable_url_is_one_line_and_exit_1() -> None:
    r = bench("--url", "http://127.0.0.1:9", "--api-key", SECRET, "--requests", "1")
    assert r.returncode == 1
    # not a terminal: the probe is announced once, then the one error line
    assert r.stderr.startswith("probing http://127.0.0.1:9/v1/models…\n")
    r.stderr = r.stderr.split("\n", 1)[1]
    assert r.stderr == "tokentop: error: cannot connect to http://127.0.0.1:9/v1: connection refused\n"
    assert r.stdout == ""


def test_bad_flags_exit_2() -> None:
    r = bench("--url", "http://127.0.0.1:9", "--concurrency", "2", "--max-concurrency", "3")
    assert r.returncode == 2 and r.stderr.startswith("tokentop: error: --max-concurrency")
    r = bench("--url", "ftp://x")
    assert r.returncode == 2 and "http://" in r.stderr


def test_ctrl_c_writes_what_was_measured_and_exits_130(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    log = tmp_path / "requests.jsonl"
    proc = subprocess.Popen(
        bench_process_argv(
            "--sim-profile",
            "flat",
            "--sim-time-scale",
            "4",
            "--concurrency",
            "2",
            "--duration",
            "60",
            "--osl",
            "16",
            "--output",
            str(out),
            "--requests-log",
            str(log),
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, OPENAI_API_KEY=""),
        # Ctrl-C as a terminal delivers it: a suite started in the background (`cmd &` in a script) hands
        # its children SIGINT ignored, which Python keeps, and the bench would rightly not hear it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 30  # bounded wait for a few finished requests
        while time.monotonic() < deadline and proc.poll() is None:
            if logged_lines(log) >= 6:
                break
            time.sleep(0.05)
        assert logged_lines(log) >= 6
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr
    assert "c=2" in stdout  # the table of what was measured
    res = json.loads(out.read_text())
    assert res["levels"][0]["concurrency"] == 2 and res["totals"]["completed"] >= 6
    assert res["interrupted"] is True and res["interrupted_by"] == "SIGINT"


# all at once: under 0.25 s (set against the 0.475 s of 25 ms steps; it read over 0.1 s once on a busy box)
@pytest.mark.parametrize(("stagger_ms", "spread"), [("25", (0.4, 1.0)), ("0", (0.0, 0.25))])
def test_user_stagger_spreads_the_first_requests(
    tmp_path: Path, stagger_ms: str, spread: tuple[float, float]
) -> None:
    """20 users whose requests outlast the stagger: the first requests start 25 ms apart (19 steps: 0.475 s),
    or all at once with 0."""
    log = tmp_path / "requests.jsonl"
    r = bench("--concurrency", "20", "--requests", "20", "--osl", "128", "--user-stagger-ms", stagger_ms,
              "--requests-log", str(log), "--quiet")  # fmt: skip
    assert r.returncode == 0, r.stderr
    sent = sorted(json.loads(line)["sent_ns"] for line in log.read_text().splitlines())[:20]
    lo, hi = spread
    assert lo <= (sent[-1] - sent[0]) / 1e9 < hi


def test_results_of_a_real_run_read_back_typed(tmp_path: Path) -> None:
    """Round trip: a short bench run over the simulator writes results; `read_results` gives back the same
    numbers, typed, and the same counts as the table printed at the end."""
    from tui.bench.progress import load_label
    from tui.engine.results.files import read_results

    out = tmp_path / "results.json"
    # 8 requests a level, not 4: a level judged steady at 5 can lose one after it ends, when the median E2E
    # that places its window's start moves (a known edge of the window rule; see the session note)
    r = bench("--sim-profile", "flat", "--sim-time-scale", "4", "--concurrency", "1,2", "--requests", "8",
              "--osl", "8", "--isl", "16", "--slo-ttft-ms", "5000", "--output", str(out),
              "--quiet")  # fmt: skip
    assert r.returncode == 0, r.stderr
    raw = json.loads(out.read_text())
    res = read_results(out)
    assert (res.tool, res.version, res.started_at) == ("tokentop", raw["version"], raw["started_at"])
    assert (res.target.url, res.target.model, res.target.endpoint) == (
        raw["target"]["url"],
        "sim-flat",
        "chat",
    )
    assert (res.config.isl, res.config.osl, res.config.workers, res.config.slo_ttft_ms) == (16, 8, 1, 5000.0)
    assert (res.totals.completed, res.totals.failed, res.fatal) == (raw["totals"]["completed"], 0, None)
    rows = [line.split() for line in r.stdout.splitlines() if line.startswith("c=")]
    assert [lv.value for lv in res.levels] == [1.0, 2.0] and len(rows) == 2
    # the SLO column says what the results say, and so does the capacity at it under the table
    for lv_raw, row in zip(raw["levels"], rows, strict=True):
        slo = lv_raw["slo"]
        low, high = slo["attainment_low"] * 100, slo["attainment_high"] * 100
        assert row[7:9] == [f"{slo['attainment']:.0%}", f"({low:.0f}-{high:.0f})"], row
    capable = [lv for lv in raw["levels"] if lv["slo"]["attainment_low"] >= 0.95]
    capacity = (
        f"capacity at SLO: {load_label('concurrency', capable[-1]['concurrency'])}, "
        f"{capable[-1]['slo']['output_goodput']:,.0f} tok/s"
        if capable
        else "capacity at SLO: none of the levels"
    )
    assert capacity in r.stdout
    for lv, lv_raw, row in zip(res.levels, raw["levels"], rows, strict=True):
        assert (lv.level_id, lv.mode, lv.steady) == (lv_raw["level_id"], "concurrency", True)
        assert [str(lv.completed), str(lv.failed)] == row[1:3]
        assert lv.completed >= 5 and lv.total_output_tokens == 8 * lv.completed
        assert (lv.duration, lv.output_throughput, lv.request_throughput, lv.total_token_throughput) == (
            lv_raw["duration"], lv_raw["output_throughput"], lv_raw["request_throughput"],
            lv_raw["total_token_throughput"],
        )  # fmt: skip
        assert lv.request_goodput == lv_raw["request_goodput"]
        for metric, key in (("ttft", "ttft"), ("tpot", "tpot"), ("itl", "itl"), ("e2el", "e2el"),
                            ("itl_e2e", "itl_e2e")):  # fmt: skip
            stats = getattr(lv, metric)
            for stat in ("mean", "median", "std", "p50", "p90", "p95", "p99", "min", "max"):
                assert getattr(stats, stat) == lv_raw[f"{stat}_{key}_ms"], (metric, stat)
            # ITL is per chunk as read: chunks that came in one read are 0 ms apart, and on a busy machine
            # (load 12 on two cores) more than half of them did (p50 0.0); the tail is never 0
            low = 0.0 if metric == "itl" else 1e-9
            assert low <= stats.p50 <= stats.p99 and stats.p99 > 0, (metric, stats.p50, stats.p99)
        assert lv.tokens_per_chunk == pytest.approx(1.0) and lv.errors == {}
        # vLLM's peaks, as vLLM counts them: a request counts in every second it touches, so short requests
        # one after another all count in their second (at least the users, at most the window's requests);
        # the busiest second holds at least the window's mean output rate
        peak = lv.max_concurrent_requests
        assert peak is not None and lv.value <= peak <= lv.completed
        assert lv.max_output_tokens_per_s is None or lv.max_output_tokens_per_s >= 0.5 * (
            lv.output_throughput or 0
        )
