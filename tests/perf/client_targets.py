"""Every client-performance target, measured on this machine: figure, target, PASS/FAIL.

    /work/venv/bin/python tests/perf/client_targets.py                      # all sections, 3-minute soak
    /work/venv/bin/python tests/perf/client_targets.py --only parse,startup # some sections
    /work/venv/bin/python tests/perf/client_targets.py --only memory --memory-minutes 30

Sections (``--only``, comma-separated; the noise floor is always measured first):

- ``parse``: SSE decode + orjson + accumulate, several chunks per read, one process (>= 150k chunks/s).
- ``itl``: the live app in tmux (``tokentop --url ... --concurrency 200``, one engine process) against the
  paced server (`tui.sim.paced`, 50 tok/s per stream, every write stamped), the requests log joined with the
  truth log: client-added ITL error p50 within 0.1 ms and p99 <= 3 ms, beside the bare-loop noise floor
  measured at the same time in its own process. The same run gives the ``app`` figures (frames/s >= 4, own
  work per frame < 5 ms, from ``TOKENTOP_FRAME_STATS``) and checks that the results JSON's saturation flag
  agrees with the worker's measured CPU and loop lag.
- ``workers``: `tui.calibrate`'s search with 1 and with 2 workers (headless): ratio of accurate stream
  counts (target >= 1.7x on a machine with the cores for it).
- ``memory``: the live app in tmux at ~10k chunks/s for ``--memory-minutes``; resident memory of the app and
  its engine worker sampled every 5 s; growth after warm-up < 50 MB. Samples go to ``--out-dir``/memory.jsonl
  as they are taken.
- ``startup``: ``tokentop --help`` < 0.5 s (median of 5); first frame of the app < 1.5 s (tmux, polled).
- ``ttft``: TTFT bias at ``--ttft-streams`` (400) closed-loop streams on one worker: ``tokentop bench``
  against the paced server, each request's TTFT minus the server's (first token written minus request read,
  from the truth log), median and p99, once per ``--ttft-transports`` (``TOKENTOP_TRANSPORT``) and once from
  ``--ttft-before DIR`` (another checkout's ``tui``, its default path), one after another in this run.

Everything runs on 127.0.0.1; every wait has a deadline. Not a pytest test (tests/perf is excluded).
The machine's other load matters: each figure is printed with the noise floor measured beside it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import psutil  # noqa: E402

from tui.calibrate.accuracy import ErrorStats, join_files, read_jsonl  # noqa: E402
from tui.calibrate.floor import FloorProbe, noise_floor  # noqa: E402
from tui.sim.paced import FIRST_TOKEN_S, paced_server  # noqa: E402

SECTIONS = ("parse", "itl", "workers", "memory", "startup", "ttft")
PY = sys.executable


# --- reporting ----------------------------------------------------------------------------------


@dataclass
class Row:
    target: str
    measured: str
    ok: bool | None
    """None: informational (no pass/fail)."""
    note: str = ""


class Report:
    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.data: dict[str, Any] = {}

    def add(self, target: str, measured: str, ok: bool | None, note: str = "") -> None:
        row = Row(target, measured, ok, note)
        self.rows.append(row)
        verdict = "info" if ok is None else "PASS" if ok else "FAIL"
        print(f"  {verdict:<5} {target:<46} {measured}{'  (' + note + ')' if note else ''}", flush=True)

    def table(self) -> str:
        lines = ["| target | measured | result |", "|---|---|---|"]
        for r in self.rows:
            verdict = "info" if r.ok is None else "PASS" if r.ok else "FAIL"
            note = f" ({r.note})" if r.note else ""
            lines.append(f"| {r.target} | {r.measured}{note} | {verdict} |")
        return "\n".join(lines)


# --- helpers --------------------------------------------------------------------------------------


class Tmux:
    """The live app in a detached tmux session on a private tmux server (socket ``-L``), so nobody else's
    tmux is touched."""

    def __init__(
        self, command: list[str], *, width: int = 140, height: int = 45, env: dict[str, str] | None = None
    ):
        self.socket = f"tokentop-perf-{os.getpid()}"
        self.session = "perf"
        envs = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
        self.shell = f"exec env {envs} {shlex.join(command)}"
        self.width, self.height = width, height
        self.started_at = 0.0

    def _tmux(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=check, timeout=10
        )

    def start(self) -> float:
        self.started_at = time.perf_counter()
        self._tmux(
            "new-session", "-d", "-s", self.session, "-x", str(self.width), "-y", str(self.height), self.shell
        )
        return self.started_at

    def pid(self) -> int:
        out = self._tmux("list-panes", "-t", self.session, "-F", "#{pane_pid}").stdout
        return int(out.split()[0])

    def capture(self) -> str:
        result = self._tmux("capture-pane", "-p", "-t", self.session, check=False)
        return result.stdout if result.returncode == 0 else ""

    def alive(self) -> bool:
        return self._tmux("has-session", "-t", self.session, check=False).returncode == 0

    def wait_for(self, text: str, timeout_s: float) -> float | None:
        """Poll the screen until ``text`` shows; seconds since start(), or None at the deadline."""
        deadline = time.perf_counter() + timeout_s
        while time.perf_counter() < deadline:
            if text in self.capture():
                return time.perf_counter() - self.started_at
            if not self.alive():
                return None
            time.sleep(0.01)
        return None

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", self.session, *keys, check=False)

    def quit(self, timeout_s: float = 30.0) -> bool:
        """Press q and wait for the app to exit (it writes its files on the way out)."""
        self.keys("q")
        deadline = time.perf_counter() + timeout_s
        while time.perf_counter() < deadline:
            if not self.alive():
                return True
            time.sleep(0.1)
        return False

    def kill(self) -> None:
        self._tmux("kill-server", check=False)
        socket = Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}" / self.socket
        socket.unlink(missing_ok=True)


@contextlib.contextmanager
def live_app(args: list[str], env: dict[str, str] | None = None) -> Iterator[Tmux]:
    app = Tmux([PY, "-m", "tui", *args], env=env)
    app.start()
    try:
        yield app
    finally:
        if app.alive():
            app.quit(20.0)
        app.kill()


def process_rss_mb(pid: int) -> tuple[float, float]:
    """(RSS of the process, RSS of its descendants) in MB."""
    proc = psutil.Process(pid)
    own = proc.memory_info().rss
    kids = 0
    for child in proc.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            kids += child.memory_info().rss
    return own / 2**20, kids / 2**20


def ms(x: float) -> str:
    return f"{x:.2f} ms"


# --- sections -------------------------------------------------------------------------------------


def section_parse(report: Report, ns: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT / "tests" / "perf"))
    from parse_throughput import make_reads, run

    reads = make_reads(200_000, 4)
    best = min(run(reads, 200) for _ in range(5))
    rate = 200_000 / best
    report.data["parse_chunks_per_s"] = rate
    report.add(
        "parse throughput >= 150k chunks/s (4 per read)",
        f"{rate:,.0f} chunks/s ({1e6 / rate:.2f} us/chunk)",
        rate >= 150_000,
        f"{rate / 150_000:.1f}x the target",
    )


def _join(truth: Path, requests: Path, window: tuple[int, int]) -> ErrorStats:
    return join_files(truth, requests, window_ns=window).summary()


def section_itl(report: Report, ns: argparse.Namespace, out: Path) -> None:
    streams, rate = ns.streams, 50.0
    truth, requests = out / "itl-truth.jsonl", out / "itl-requests.jsonl"
    results, frames = out / "itl-results.json", out / "itl-frames.json"
    for p in (truth, requests, results, frames):
        p.unlink(missing_ok=True)
    warm_s, window_s = ns.itl_warmup, ns.itl_seconds
    if ns.itl_load == "rate":
        # Open loop at streams / request duration: about `streams` in flight, starts spread at random.
        duration_s = FIRST_TOKEN_S + 0.5 / rate + 128 / rate
        load = ["--rate", f"{streams / duration_s:.2f}"]
    else:
        # Closed loop, all users started at once: with identical requests on a perfectly steady server they
        # start and end together for as long as the run lasts (the herd case).
        load = ["--concurrency", str(streams)]
    print(
        f"  tokentop {' '.join(load)} (about {streams} streams in flight, 128 tokens each at {rate:g} tok/s)"
    )
    with paced_server(rate, truth) as server:
        args = [
            "--url",
            server.url,
            *load,
            "--osl",
            "128",
            "--isl",
            "16",
            "--requests-log",
            str(requests),
            "--output",
            str(results),
        ]
        with live_app(args, env={"TOKENTOP_FRAME_STATS": str(frames)}) as app:
            if app.wait_for("quit", 15.0) is None:
                report.add("ITL error with the app in tmux", "the app did not start", False)
                return
            # the probe process starts now, so its own start-up is not in the window it measures
            probe = FloorProbe(window_s, start_at=time.perf_counter() + warm_s)
            time.sleep(warm_s)  # the run itself: streams start, settle, and spread out
            pid = app.pid()
            proc = psutil.Process(pid)
            workers = [c for c in proc.children(recursive=True) if "spawn_main" in " ".join(c.cmdline())]
            cpu0 = {p.pid: sum(p.cpu_times()[:2]) for p in [proc, *workers]}
            lo, t0 = time.perf_counter_ns(), time.perf_counter()
            time.sleep(window_s)
            hi, t1 = time.perf_counter_ns(), time.perf_counter()
            cpu = {p.pid: (sum(p.cpu_times()[:2]) - cpu0[p.pid]) / (t1 - t0) for p in [proc, *workers]}
            floor = probe.result() or noise_floor(0.5)
            screen = app.capture()
            app.quit(30.0)
    err = _join(truth, requests, (lo, hi))
    res = json.loads(results.read_text()) if results.exists() else {}
    fst = json.loads(frames.read_text()) if frames.exists() else {}
    client = res.get("client", {})
    worker_cpu = max((v for k, v in cpu.items() if k != pid), default=float("nan"))
    report.data["itl"] = {
        "errors": err.__dict__,
        "floor": floor.__dict__,
        "frames": fst,
        "client": client,
        "app_cpu": cpu.get(pid),
        "worker_cpu": worker_cpu,
    }
    print(f"  noise floor during the window (own process): {floor.line()}")
    print(
        f"  {err.chunks:,} chunk gaps from {err.requests} requests ({err.unmatched} unmatched) "
        f"in {window_s:g} s; app CPU {cpu.get(pid, 0):.0%}, worker CPU {worker_cpu:.0%}"
    )
    floor_note = (
        f"floor p99 {floor.p99_ms:.2f} ms; ratio {err.p99_abs_ms / max(floor.p99_ms, 1e-9):.1f}x floor"
    )
    report.add(
        f"ITL error p50 within 0.1 ms ({streams} streams, app)",
        f"{err.p50_ms:+.3f} ms",
        abs(err.p50_ms) <= 0.1,
        f"floor p50 {floor.p50_ms:.2f} ms",
    )
    report.add(
        f"ITL error p99 <= 3 ms ({streams} streams, app)",
        ms(err.p99_abs_ms),
        err.p99_abs_ms <= 3.0,
        floor_note,
    )
    if fst:
        report.add(
            "app frames/s >= 4 under that load", f"{fst.get('fps', 0):.1f} fps", fst.get("fps", 0) >= 4
        )
        # the ticks of the measured window (the app keeps the last minute, start-up included)
        ends, works = fst.get("tick_end_ns", []), fst.get("tick_work_ns", [])
        ticks = [w / 1e6 for t, w in zip(ends, works, strict=True) if lo <= t <= hi]
        if ticks:
            p50, p99 = (float(x) for x in np.percentile(ticks, [50, 99]))
            span = f"{len(ticks)} ticks of the window"
        else:
            p50, p99 = fst.get("work_p50_ms", float("nan")), fst.get("work_p99_ms", float("nan"))
            span = f"last {fst.get('ticks', 0)} ticks"
        report.data["itl"]["app_work_ms"] = {"p50": p50, "p99": p99, "max": max(ticks, default=float("nan"))}
        report.add(
            "app own work per frame < 5 ms",
            f"p50 {p50:.2f}, p99 {p99:.2f} ms",
            p99 < 5.0,
            f"{span}, max {max(ticks, default=float('nan')):.1f} ms; draw incl. Textual p50 "
            f"{fst.get('frame_p50_ms', float('nan')):.1f} ms",
        )
    else:
        report.add("app frames/s and work per frame", "no frame stats written", False)
    if client:
        over = client.get("max_cpu_share", 0) > client.get("cpu_threshold", 0.6) or client.get(
            "max_loop_lag_p99_ms", 0
        ) > client.get("lag_threshold_ms", 2.0)
        # saturated means sustained: it needs raw maxima over a threshold, but a momentary peak alone won't do
        report.add(
            "results.json client.saturated consistent",
            f"saturated={client.get('saturated')} (max lag p99 "
            f"{client.get('max_loop_lag_p99_ms', 0):.1f} ms, max CPU {client.get('max_cpu_share', 0):.0%}; "
            f"flagged over {client.get('saturated_spans_s', [])} s of the run)",
            over or not client.get("saturated"),
        )
    if "saturated" in screen:
        print("  the app's status line showed the saturation warning at the end of the window")


def section_workers(report: Report, ns: argparse.Namespace, out: Path) -> None:
    from tui.calibrate.command import HEADER, _row
    from tui.calibrate.stream_search import LevelResult, measure_level, search

    budget = 3.0
    found: dict[int, int] = {}
    for workers in (1, 2):
        print(f"  calibrate, {workers} worker(s), 50 tok/s, p99 budget {budget:g} ms")
        print("  " + HEADER)

        def measure(n: int, w: int = workers) -> LevelResult:
            return measure_level(
                n, token_rate=50.0, seconds=ns.workers_seconds, workers=w, workdir=out / "cal"
            )

        best, _ = search(
            measure, ns.max_streams, budget, on_level=lambda r: print("  " + _row(r, budget), flush=True)
        )
        found[workers] = best
    ratio = found[2] / found[1] if found[1] else float("nan")
    report.data["workers"] = {"one": found[1], "two": found[2], "ratio": ratio, "cpus": os.cpu_count()}
    report.add(
        "--workers 2 vs 1: accurate streams >= 1.7x",
        f"{found[1]} -> {found[2]} streams = {ratio:.2f}x",
        ratio >= 1.7,
        f"{os.cpu_count()} CPUs shared with the server and the face",
    )


def section_memory(report: Report, ns: argparse.Namespace, out: Path) -> None:
    minutes = ns.memory_minutes
    samples_path = out / "memory.jsonl"
    requests = out / "memory-requests.jsonl"
    results = out / "memory-results.json"
    for p in (samples_path, requests, results):
        p.unlink(missing_ok=True)
    warm_s = min(180.0, minutes * 60 / 3)
    total_s = minutes * 60
    samples: list[tuple[float, float, float]] = []
    with paced_server(50.0) as server:
        args = [
            "--url",
            server.url,
            "--concurrency",
            str(ns.streams),
            "--osl",
            "128",
            "--isl",
            "16",
            "--requests-log",
            str(requests),
            "--output",
            str(results),
        ]
        with live_app(args) as app, open(samples_path, "w") as log:
            if app.wait_for("quit", 15.0) is None:
                report.add("memory soak", "the app did not start", False)
                return
            pid = app.pid()
            t0 = time.perf_counter()
            while (t := time.perf_counter() - t0) < total_s and app.alive():
                with contextlib.suppress(psutil.Error):
                    own, kids = process_rss_mb(pid)
                    samples.append((t, own, kids))
                    log.write(
                        json.dumps(
                            {"t_s": round(t, 1), "app_mb": round(own, 2), "workers_mb": round(kids, 2)}
                        )
                        + "\n"
                    )
                    log.flush()
                time.sleep(min(5.0, max(0.0, total_s - (time.perf_counter() - t0))))
            elapsed = time.perf_counter() - t0
            app.quit(60.0)
    chunks, lines = _count_chunks(requests)
    at_s = np.array([s[0] for s in samples])
    total = np.array([s[1] + s[2] for s in samples])
    after = at_s >= warm_s
    if after.sum() < 2:
        report.add("memory soak", "too few samples", False)
        return
    base = float(total[after][0])
    final = float(total[after][-1])
    peak = float(total[after].max())
    slope = float(np.polyfit(at_s[after], total[after], 1)[0]) * 600  # MB per 10 min
    growth = max(final, peak) - base
    report.data["memory"] = {
        "minutes": minutes,
        "warm_s": warm_s,
        "base_mb": base,
        "final_mb": final,
        "peak_mb": peak,
        "growth_mb": growth,
        "slope_mb_per_10min": slope,
        "chunks_per_s": chunks / elapsed,
        "requests": lines,
    }
    app_mb = samples[-1][1]
    workers_mb = samples[-1][2]
    report.add(
        f"{minutes:g}-min run at ~10k chunks/s: RSS growth < 50 MB",
        f"{base:.0f} -> {final:.0f} MB (peak {peak:.0f}), growth {growth:+.1f} MB, {slope:+.2f} MB/10 min",
        growth < 50.0,
        f"app {app_mb:.0f} MB + engine {workers_mb:.0f} MB at the end; {chunks / elapsed:,.0f} chunks/s; "
        f"warm-up {warm_s:.0f} s",
    )


def _count_chunks(requests: Path) -> tuple[int, int]:
    """(chunks, requests) in a requests log."""
    import orjson

    chunks = lines = 0
    with open(requests, "rb") as f:
        for line in f:
            lines += 1
            with contextlib.suppress(orjson.JSONDecodeError):
                chunks += len(orjson.loads(line).get("chunk_ns") or [])
    return chunks, lines


def section_startup(report: Report, ns: argparse.Namespace, out: Path) -> None:
    times = []
    for _ in range(5):
        t = time.perf_counter()
        subprocess.run([PY, "-m", "tui", "--help"], capture_output=True, check=True, timeout=30)
        times.append(time.perf_counter() - t)
    med = statistics.median(times)
    tokentop = shutil.which("tokentop") or str(Path(PY).with_name("tokentop"))
    report.add(
        "tokentop --help < 0.5 s",
        f"median {med:.3f} s (best {min(times):.3f}, of 5)",
        med < 0.5,
        "python -m tui --help",
    )
    if Path(tokentop).exists():
        times2 = []
        for _ in range(5):
            t = time.perf_counter()
            subprocess.run([tokentop, "--help"], capture_output=True, check=True, timeout=30)
            times2.append(time.perf_counter() - t)
        report.add(
            "tokentop --help < 0.5 s (console script)",
            f"median {statistics.median(times2):.3f} s",
            statistics.median(times2) < 0.5,
        )
    firsts = []
    with paced_server(50.0) as server:
        for _ in range(3):
            with live_app(["--url", server.url, "--concurrency", "1"]) as app:
                first = app.wait_for("quit", 10.0)
                if first is not None:
                    firsts.append(first)
    if not firsts:
        report.add("first frame < 1.5 s", "the app did not draw within 10 s", False)
        return
    med = statistics.median(firsts)
    report.data["startup"] = {"help_s": times, "first_frame_s": firsts}
    report.add(
        "first frame of the app < 1.5 s",
        f"median {med:.2f} s (of {len(firsts)}: " + ", ".join(f"{x:.2f}" for x in firsts) + ")",
        med < 1.5,
        "process start to the footer drawn, tmux",
    )


# --- main -------------------------------------------------------------------------------------------


def _ttft_bias(
    out: Path, label: str, env: dict[str, str], ns: argparse.Namespace, tree: Path = ROOT
) -> dict[str, float]:
    """One bench run at ``--ttft-streams`` on one worker: client TTFT minus true TTFT per request (ms)."""
    truth, requests = out / f"ttft-{label}-truth.jsonl", out / f"ttft-{label}-requests.jsonl"
    for p in (truth, requests):
        p.unlink(missing_ok=True)
    with paced_server(50.0, truth) as server:
        cmd = [
            sys.executable, "-m", "tui", "bench", "--url", server.url, "--model", "sim-paced",
            "--concurrency", str(ns.ttft_streams), "--duration", str(ns.ttft_seconds), "--workers", "1",
            "--isl", "16", "--osl", "100", "--no-isl-probe", "--no-server-metrics", "--quiet",
            "--requests-log", str(requests), "--output", str(out / f"ttft-{label}.json"),
        ]  # fmt: skip
        # cwd: `python -m` puts it first on sys.path, ahead of PYTHONPATH
        subprocess.run(
            cmd, env=env, cwd=tree, capture_output=True, text=True, timeout=ns.ttft_seconds * 4 + 120
        )
    server_ttft: dict[str, int] = {}
    for rec in read_jsonl(truth):
        if rec.get("first_token_ns") and rec.get("arrival_ns"):
            server_ttft[str(rec["client_request_id"])] = rec["first_token_ns"] - rec["arrival_ns"]
    bias = [
        (rec["first_content_ns"] - rec["sent_ns"] - server_ttft[str(rec["client_request_id"])]) / 1e6
        for rec in read_jsonl(requests)
        if rec.get("status") == "ok"
        and rec.get("first_content_ns")
        and str(rec.get("client_request_id")) in server_ttft
    ]
    try:
        client = json.loads((out / f"ttft-{label}.json").read_text())["client"]
    except (OSError, ValueError, KeyError):
        client = {}
    health = {"cpu_share": client.get("max_cpu_share", float("nan")),
              "lag_p99_ms": client.get("max_loop_lag_p99_ms", float("nan"))}  # fmt: skip
    if not bias:
        return {"requests": 0, "p50_ms": float("nan"), "p99_ms": float("nan"), **health}
    arr = np.asarray(bias)
    return {
        "requests": len(bias),
        "p50_ms": float(np.median(arr)),
        "p99_ms": float(np.percentile(arr, 99)),
        **health,
    }


def section_ttft(report: Report, ns: argparse.Namespace, out: Path) -> None:
    runs: list[tuple[str, dict[str, str], Path]] = []
    if ns.ttft_before is not None:
        before = ns.ttft_before.resolve()
        runs.append(("before", {**os.environ, "PYTHONPATH": str(before), "TOKENTOP_TRANSPORT": ""}, before))
    for transport in (t for t in ns.ttft_transports.split(",") if t):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENTOP_TRANSPORT": transport}
        runs.append((transport, env, ROOT))
    results: dict[str, dict[str, float]] = {}
    for label, env, tree in runs:
        r = results[label] = _ttft_bias(out, label, env, ns, tree)
        print(
            f"  {label:<10} {r['requests']:>6} requests  TTFT bias p50 {r['p50_ms']:+8.2f} ms  "
            f"p99 {r['p99_ms']:+8.2f} ms  worker CPU {r['cpu_share']:.0%}, lag p99 {r['lag_p99_ms']:.0f} ms",
            flush=True,
        )
    report.data["ttft"] = results
    base = results.get("before") or results.get("aiohttp")
    new = results.get("protocol")
    if base and new:
        report.add(
            f"TTFT bias at {ns.ttft_streams} streams, 1 worker: < half of before",
            f"p50 {base['p50_ms']:+.1f} -> {new['p50_ms']:+.1f} ms",
            abs(new["p50_ms"]) < abs(base["p50_ms"]) / 2,
            "same run, one after another",
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"sections: {','.join(SECTIONS)}")
    ap.add_argument("--streams", type=int, default=200, help="streams per engine process (itl, memory)")
    ap.add_argument(
        "--itl-load",
        choices=["rate", "concurrency"],
        default="rate",
        help="itl: open loop at streams/duration (default) or --concurrency streams started at once",
    )
    ap.add_argument("--itl-warmup", type=float, default=20.0, metavar="S")
    ap.add_argument("--itl-seconds", type=float, default=20.0, metavar="S")
    ap.add_argument("--workers-seconds", type=float, default=5.0, metavar="S", help="per calibrate level")
    ap.add_argument("--max-streams", type=int, default=800, help="workers: the search's ceiling")
    ap.add_argument("--memory-minutes", type=float, default=3.0)
    ap.add_argument(
        "--out-dir", type=Path, help="keep logs and results here (default: a temporary directory)"
    )
    ap.add_argument("--json", type=Path, help="write every figure here")
    ap.add_argument("--ttft-streams", type=int, default=400)
    ap.add_argument("--ttft-seconds", type=float, default=20.0, metavar="S")
    ap.add_argument("--ttft-transports", default="protocol,aiohttp", help="ttft: TOKENTOP_TRANSPORT values")
    ap.add_argument("--ttft-before", type=Path, help="ttft: also run this checkout's tui (its default path)")
    ns = ap.parse_args()
    only = [s for s in ns.only.split(",") if s]
    unknown = set(only) - set(SECTIONS)
    if unknown:
        print(
            f"client_targets: unknown section(s) {', '.join(sorted(unknown))}; "
            f"choose from {', '.join(SECTIONS)}"
        )
        return 2
    if {"itl", "memory", "startup"} & set(only) and shutil.which("tmux") is None:
        print("client_targets: tmux is needed for the itl, memory and startup sections")
        return 2
    tmp = None
    if ns.out_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="tokentop-perf-")
        out = Path(tmp.name)
    else:
        out = ns.out_dir
        out.mkdir(parents=True, exist_ok=True)
    report = Report()
    load = os.getloadavg()
    print(
        f"tokentop client targets: {os.cpu_count()} CPUs, python {sys.version.split()[0]}, "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    floor = noise_floor(3.0)
    report.data["floor"] = floor.__dict__
    print(f"noise floor (idle): {floor.line()}")
    report.add(
        "noise floor (bare loop, 10 ms sleeps)", f"p50 {floor.p50_ms:.2f}, p99 {floor.p99_ms:.2f} ms", None
    )
    try:
        for name in SECTIONS:
            if name not in only:
                continue
            print(f"\n[{name}]", flush=True)
            if name == "parse":
                section_parse(report, ns)
            elif name == "itl":
                section_itl(report, ns, out)
            elif name == "workers":
                section_workers(report, ns, out)
            elif name == "memory":
                section_memory(report, ns, out)
            elif name == "startup":
                section_startup(report, ns, out)
            elif name == "ttft":
                section_ttft(report, ns, out)
    finally:
        print("\n" + report.table())
        if ns.json is not None:
            ns.json.write_text(json.dumps(report.data, indent=2, default=str) + "\n")
        if tmp is not None:
            tmp.cleanup()
    return 0 if all(r.ok is not False for r in report.rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
