"""Sessions recorded by bench against the simulator: a kill -9 leaves one that replays up to its last
second, `tokentop sessions` lists them, `compare` orders two servers of different speed beyond noise and
finds a run within noise of itself, and the exports hold the recorded requests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import made_once
from tests.support.engine_helpers import bench, tokentop
from tui.engine.host.playback_engine import PlaybackEngine
from tui.engine.recording.file import SessionError, read_session
from tui.engine.recording.plain_json import Decoder
from tui.engine.results.files import to_json
from tui.engine.sessions.compare import comparison
from tui.engine.sessions.schedule import read_schedule
from tui.engine.traces.mooncake import MooncakeReader
from tui.sim.launch import SimServer

pytestmark = pytest.mark.timeout(180)
RUN = ("--isl", "16", "--osl", "32", "--workers", "1", "--quiet")


@pytest.fixture(scope="module")
def fast() -> Iterator[SimServer]:
    with SimServer("small-gpu", time_scale=4.0) as server:
        yield server


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two bench runs, one per server (a fast and a slow profile, side by side), each recorded with its
    results written too; made once per test run and read by every process that draws one of these tests."""
    folder = made_once(tmp_path_factory, "sessions", _record_both)
    return {name: folder / f"{name}.tokentop-session.gz" for name in ("fast", "slow")}


def _record_both(folder: Path) -> None:
    env = dict(os.environ, OPENAI_API_KEY="", OPENAI_BASE_URL="")
    with SimServer("small-gpu", time_scale=4.0) as fast, SimServer("large-model", time_scale=4.0) as slow:
        runs = {}
        for name, sim in (("fast", fast), ("slow", slow)):
            cmd = [sys.executable, "-m", "tui", "bench", "--url", sim.url, "--concurrency", "2,4",
                   "--duration", "4", "--record", str(folder / f"{name}.tokentop-session.gz"),
                   "--label", name, "--output", str(folder / f"{name}.json"), *RUN]  # fmt: skip
            runs[name] = subprocess.Popen(
                cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
            )
        for name, proc in runs.items():
            _, err = proc.communicate(timeout=90)
            assert proc.returncode == 0, f"{name}: {err}"


def test_bench_names_its_session_and_the_session_holds_its_results(tmp_path: Path, fast: SimServer) -> None:
    done = bench("--url", fast.url, "--concurrency", "2", "--duration", "2", "--label", "named",
                 "--isl", "16", "--osl", "8")  # fmt: skip
    assert done.returncode == 0, done.stderr
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("session recorded to ")]
    path = Path(line.removeprefix("session recorded to "))
    assert path.parent == Path(os.environ["XDG_STATE_HOME"]) / "tokentop" / "sessions"
    assert path.name.endswith("-named.tokentop-session.gz")
    session = read_session(path)
    (results,) = session.of_kind("results")
    assert not session.cut and results["doc"]["levels"][0]["completed"] > 0
    # the replay rebuilds exactly the results the run wrote
    replayed = json.loads(json.dumps(to_json(PlaybackEngine(session).run_to_end().results())))
    assert replayed["levels"] == results["doc"]["levels"]
    none = bench(
        "--url", fast.url, "--concurrency", "1", "--requests", "2", "--no-record", "--isl", "8", "--osl", "4"
    )
    assert none.returncode == 0 and "session recorded" not in none.stderr


def test_kill_9_mid_run_leaves_a_session_that_replays_up_to_its_last_second(
    tmp_path: Path, fast: SimServer
) -> None:
    path = tmp_path / "killed.tokentop-session.gz"
    env = dict(os.environ, OPENAI_API_KEY="", OPENAI_BASE_URL="")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui", "bench", "--url", fast.url, "--concurrency", "3", "--duration", "60",
         "--record", str(path), *RUN],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:  # until the session holds 3 s of finished requests
            assert time.monotonic() < deadline and proc.poll() is None, "no session grew"
            try:
                session = read_session(path)
            except SessionError:
                session = None
            if session is not None and session.of_kind("b"):
                span = session.end_ns - session.start_ns
                decoder = Decoder(session.header["schema"])
                finished = sum(len(decoder._build("Batch", e["b"]).records) for e in session.of_kind("b"))
                if span > 3e9 and finished > 0:
                    break
            time.sleep(0.2)
        time.sleep(1.0)
        killed_at = time.perf_counter_ns()  # the same clock the session stamps (CLOCK_MONOTONIC)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    session = read_session(path)
    assert session.cut and not session.of_kind("results")
    assert session.end_ns >= killed_at - 1.0e9, (killed_at - session.end_ns) / 1e9
    results = to_json(PlaybackEngine(session).run_to_end().results(interrupted="cut short"))
    (level,) = results["levels"]
    assert level["level_completed"] > 0 and level["concurrency"] == 3


def test_sessions_lists_each_with_its_label_model_and_levels(recorded: dict[str, Path]) -> None:
    done = tokentop("sessions", "--dir", str(recorded["fast"].parent))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[:4] == ["date", "label", "url", "model"]
    fast_row = next(x for x in lines if " fast " in x)
    assert "sim-" in fast_row and fast_row.rstrip().endswith("2u,4u")
    assert any(str(recorded["slow"]) in x for x in lines)


def test_compare_orders_a_faster_server_beyond_noise(recorded: dict[str, Path]) -> None:
    data = comparison([recorded["slow"], recorded["fast"]])
    (pair,) = data["pairs"]
    assert [lv["load"] for lv in pair["levels"]] == [("concurrency", 2.0), ("concurrency", 4.0)]
    for level in pair["levels"]:
        verdicts = {d.metric: d for d in level["differences"]}
        assert verdicts["output tok/s"].verdict == "better" and verdicts["output tok/s"].percent > 0
        for metric in ("TPOT p50 ms", "ITL p50 ms"):
            assert verdicts[metric].verdict == "better" and verdicts[metric].percent < 0, metric
    (warning,) = data["warnings"]  # the two profiles serve different models: compared, with a warning
    assert warning.startswith("model differs: slow.tokentop-session.gz has 'sim-")


def test_a_run_compared_with_itself_is_within_noise_everywhere(recorded: dict[str, Path]) -> None:
    data = comparison([recorded["fast"], recorded["fast"]])
    assert data["warnings"] == []
    for level in data["pairs"][0]["levels"]:
        for d in level["differences"]:
            assert d.verdict in ("within noise", "unjudged"), d
            assert d.percent in (0.0, None), d
        # the rates and p50s; a p99 is judged only between repeated runs
        assert sum(d.verdict == "within noise" for d in level["differences"]) == 5


def test_compare_reads_results_files_and_says_their_differences_are_unjudged(
    recorded: dict[str, Path], tmp_path: Path
) -> None:
    folder = recorded["fast"].parent
    done = tokentop("compare", str(folder / "slow.json"), str(recorded["fast"]), "--markdown", "--plot",
                    str(tmp_path / "c.svg"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "| output tok/s |" in done.stdout and "unjudged" in done.stdout
    assert "warning: model differs" in done.stderr
    assert done.stdout.count("### ") == 2
    svg = (tmp_path / "c.svg").read_text()
    assert svg.count("<polyline") == 2
    pair = [str(folder / "slow.json"), str(recorded["fast"])]
    text = tokentop("compare", *pair).stdout
    chart = text[text.index("output tok/s by load") :].splitlines()
    assert len(chart) == 1 + 2 * 2  # a line per run per load
    slow_bar, fast_bar = chart[1].split()[1], chart[2].split()[0]
    assert set(slow_bar) == {"#"} and set(fast_bar) == {"="} and len(fast_bar) > len(slow_bar)
    twice = [str(recorded["fast"])] * 2
    as_json = tokentop("compare", *twice, "--json")
    assert json.loads(as_json.stdout)["pairs"][0]["levels"][0]["differences"][0]["verdict"] == "within noise"


def test_a_results_file_given_where_a_session_is_needed_is_one_line(recorded: dict[str, Path]) -> None:
    results = recorded["fast"].parent / "fast.json"
    done = tokentop("replay", str(results))
    assert done.returncode == 1
    assert done.stderr == f"tokentop: error: {results}: a results file, not a session (sessions are " \
                          f"*.tokentop-session.gz)\n"  # fmt: skip


def test_the_mooncake_export_holds_each_request_at_its_time(
    recorded: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "trace.jsonl"
    done = tokentop("export", str(recorded["fast"]), "--to", "mooncake", "--out", str(out))
    assert done.returncode == 0, done.stderr
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    session = read_session(recorded["fast"])
    replay = PlaybackEngine(session)
    records = sorted(
        (r for e in session.of_kind("b") for r in replay.config.decoder._build("Batch", e["b"]).records
         if r.status == "ok"),
        key=lambda r: r.sent_ns,
    )  # fmt: skip
    assert len(rows) == len(records) > 20
    assert rows[0]["timestamp"] == 0
    assert [r["timestamp"] for r in rows] == [(x.sent_ns - records[0].sent_ns) // 1_000_000 for x in records]
    assert [r["input_length"] for r in rows] == [x.input_tokens for x in records]
    assert [r["output_length"] for r in rows] == [x.output_tokens for x in records]
    assert all(len(r["hash_ids"]) == 1 for r in rows)  # 16-token prompts: one block each, none shared
    # the results exports take a session too: its results rebuilt by replaying it
    appended = tmp_path / "levels.jsonl"
    vllm_args = ["export", str(recorded["fast"]), "--to", "vllm", "--append", "--out", str(appended)]
    vllm = tokentop(*vllm_args)
    assert vllm.returncode == 0, vllm.stderr
    levels = [json.loads(x) for x in appended.read_text().splitlines()]
    written = json.loads((recorded["fast"].parent / "fast.json").read_text())["levels"]
    assert [lv["max_concurrency"] for lv in levels] == [2, 4]
    assert [lv["output_throughput"] for lv in levels] == [lv["output_throughput"] for lv in written]
    results_file = recorded["fast"].parent / "fast.json"
    no_trace = tokentop("export", str(results_file), "--to", "mooncake")
    assert no_trace.returncode == 1 and "needs a session" in no_trace.stderr


def test_schedule_runs_a_sessions_levels_again_for_their_recorded_times(
    recorded: dict[str, Path], fast: SimServer, tmp_path: Path
) -> None:
    again = tmp_path / "again.tokentop-session.gz"
    done = bench("--url", fast.url, "--schedule", str(recorded["fast"]), "--record", str(again), *RUN)
    assert done.returncode == 0, done.stderr
    first, second = read_schedule(recorded["fast"]), read_schedule(again)
    assert [lv.target for lv in second.levels] == [lv.target for lv in first.levels]
    for a, b in zip(first.levels, second.levels, strict=True):
        assert abs(b.duration_s - a.duration_s) <= 0.05 * a.duration_s, (a, b)
    mixed = bench("--url", fast.url, "--schedule", str(recorded["fast"]), "--concurrency", "3", *RUN)
    assert mixed.returncode == 2 and "leave out --concurrency" in mixed.stderr
    results = recorded["fast"].parent / "fast.json"
    wrong = bench("--url", fast.url, "--schedule", str(results), *RUN)
    assert wrong.returncode == 2
    assert wrong.stderr.strip() == f"tokentop: error: --schedule: {results}: a results file, not a session " \
                                   "(sessions are *.tokentop-session.gz)"  # fmt: skip


def test_a_sessions_mooncake_trace_replays_in_tokentops_trace_replay(
    recorded: dict[str, Path], fast: SimServer, tmp_path: Path
) -> None:
    """The exported trace reads back with the recorded lengths and times, and `bench --trace` sends its
    requests with those lengths at those relative times."""
    trace = tmp_path / "trace.jsonl"
    assert tokentop("export", str(recorded["fast"]), "--to", "mooncake", "--out", str(trace)).returncode == 0
    reader = MooncakeReader()
    lines = [reader.parse(line) for line in trace.read_text().splitlines()]
    wanted = lines[:12]
    session = read_session(recorded["fast"])
    decoder = Decoder(session.header["schema"])
    recorded_ok = sorted((r for e in session.of_kind("b") for r in decoder._build("Batch", e["b"]).records
                          if r.status == "ok"), key=lambda r: r.sent_ns)  # fmt: skip
    assert [(w.input_tokens, w.output_tokens) for w in wanted] == [
        (r.input_tokens, r.output_tokens) for r in recorded_ok[:12]
    ]
    replayed = tmp_path / "replayed.tokentop-session.gz"
    done = bench("--url", fast.url, "--trace", str(trace), "--requests", "12", "--record", str(replayed),
                 "--quiet")  # fmt: skip
    assert done.returncode == 0, done.stderr
    again = read_session(replayed)
    decoder = Decoder(again.header["schema"])
    # in the trace's order, which is the replay's schedule (two workers' sends can cross on a busy machine);
    # the trace keeps whole ms, so two requests sent within one ms share a time (all workers share one
    # anchor, so only those can swap): they are ordered by their lengths on both sides (in CI two pairs
    # came back swapped)
    sent = sorted((r for e in again.of_kind("b") for r in decoder._build("Batch", e["b"]).records),
                  key=lambda r: (r.scheduled_ns, r.input_tokens, r.output_tokens))[:12]  # fmt: skip
    scheduled = sorted(lines, key=lambda w: (w.at_ns, w.input_tokens, w.output_tokens))[:12]
    assert [(r.input_tokens, r.output_tokens) for r in sent] == [
        (w.input_tokens, w.output_tokens) for w in scheduled
    ]
    for r, w in zip(sent, scheduled, strict=True):  # the same relative times, to the ms the trace keeps
        assert abs((r.scheduled_ns - sent[0].scheduled_ns) - (w.at_ns - scheduled[0].at_ns)) < 1_000_000
    # and sent on them (loosely: how late a send may be is the trace replay's timing test)
    lateness_ms = sorted((r.sent_ns - r.scheduled_ns) / 1e6 for r in sent)
    assert lateness_ms[0] >= 0 and lateness_ms[len(sent) // 2] < 60, lateness_ms
