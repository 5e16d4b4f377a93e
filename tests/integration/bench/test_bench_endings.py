"""How `tokentop bench` ends when it is told to or cannot go on: signals, a closed stdout, unwritable outputs,
a run in which nothing completed. Subprocess runs against the simulator or a misbehaving local server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from tests.support.engine_helpers import bench, bench_process_argv, logged_lines
from tests.support.fault_server import FaultServer

pytestmark = pytest.mark.timeout(90)
CHILDREN_GONE_S = 10.0


def _env() -> dict[str, str]:
    return dict(os.environ, OPENAI_API_KEY="")


def _wait_for(cond: object, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if callable(cond) and cond():
            return True
        time.sleep(0.05)
    return False


def _children(pid: int) -> list[psutil.Process]:
    try:
        found: list[psutil.Process] = psutil.Process(pid).children(recursive=True)
        return found
    except psutil.NoSuchProcess:
        return []


def _assert_gone(children: list[psutil.Process]) -> None:
    _, alive = psutil.wait_procs(children, timeout=CHILDREN_GONE_S)
    assert not alive, [p.cmdline() for p in alive]


def _sim_bench(out: Path, log: Path, *extra: str) -> list[str]:
    return bench_process_argv(
        "--sim-profile",
        "flat",
        "--sim-time-scale",
        "4",
        "--concurrency",
        "2",
        "--duration",
        "60",
        "--osl",
        "64",
        "--output",
        str(out),
        "--requests-log",
        str(log),
        *extra,
    )


def _four_requests_bench(out: Path, *extra: str) -> list[str]:
    """A bench of four short requests against the built-in simulator, results to ``out``."""
    return bench_process_argv("--sim-profile", "flat", "--sim-time-scale", "4", "--concurrency", "2",
                              "--requests", "4", "--osl", "8", "--output", str(out), *extra)  # fmt: skip


@pytest.mark.parametrize(
    ("sig", "status", "to_group"),
    [(signal.SIGTERM, 143, False), (signal.SIGHUP, 129, False), (signal.SIGTERM, 143, True)],
    ids=["SIGTERM", "SIGHUP", "SIGTERM-to-the-group"],
)
def test_sigterm_and_sighup_end_like_ctrl_c(
    tmp_path: Path, sig: signal.Signals, status: int, to_group: bool
) -> None:
    """In-flight requests are recorded as cancelled, the table and results are written, the status is
    128 + the signal, and neither the simulator nor the engine worker outlives bench. Sent to the whole
    process group (as `timeout` does), the worker and the simulator are not killed under the face: the
    face stops them, so nothing is "killed" and the streams in flight are still cancelled, not lost."""
    out, log = tmp_path / "results.json", tmp_path / "requests.jsonl"
    proc = subprocess.Popen(_sim_bench(out, log), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(), start_new_session=to_group)  # fmt: skip
    try:
        assert _wait_for(lambda: logged_lines(log) >= 4, 30)
        children = _children(proc.pid)
        assert len(children) >= 2  # the simulator and one engine worker (plus multiprocessing's helper)
        if to_group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == status, stderr
    assert f"terminated by {sig.name}" in stderr and "Traceback" not in stderr
    assert "killed by" not in stderr and "lost" not in stderr
    assert "c=2" in stdout
    res = json.loads(out.read_text())
    assert res["totals"]["completed"] >= 4
    records = [json.loads(line) for line in log.read_text().splitlines()]
    cancelled = [r for r in records if r["status"] == "cancelled"]
    assert cancelled  # the two in flight when the signal came, cancelled by their worker, not lost with it
    assert {r["error_class"] for r in cancelled} == {"cancelled"}, cancelled[0]
    _assert_gone(children)


def test_closed_stdout_pipe_ends_cleanly(tmp_path: Path) -> None:
    """`tokentop bench ... | head -0`: the reader is gone before the table is printed; the results are still
    written, no traceback, exit 0, and no child is left behind."""
    out, log = tmp_path / "results.json", tmp_path / "requests.jsonl"
    args = _four_requests_bench(out, "--requests-log", str(log))
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # like `| head -0`
    children: list[psutil.Process] = []
    try:
        _wait_for(lambda: len(_children(proc.pid)) >= 2, 10)
        children = _children(proc.pid)
        stderr = proc.stderr.read().decode()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert json.loads(out.read_text())["totals"]["completed"] >= 4
    _assert_gone(children)


def test_unwritable_outputs_fail_in_one_line_before_any_load(tmp_path: Path) -> None:
    with FaultServer(500) as server:
        for flag, path in (
            ("--output", tmp_path / "missing" / "r.json"),
            ("--output", tmp_path),  # a directory
            ("--requests-log", tmp_path),
            ("--requests-log", Path("/proc/version")),  # exists, cannot be written even by root
        ):
            r = bench("--url", server.url, flag, str(path), "--requests", "2", timeout_s=30)
            assert r.returncode == 2, (flag, path, r.stderr)
            assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"tokentop: error: {flag}"), r.stderr
            assert r.stdout == ""
        assert server.hits == 0  # nothing was sent


def test_full_disk_under_the_requests_log_still_writes_the_results(tmp_path: Path) -> None:
    """/dev/full takes the open and fails every write with ENOSPC, like a full disk: one line, exit 1, and
    the results (on a healthy disk) written whole."""
    out = tmp_path / "results.json"
    r = bench("--sim-profile", "flat", "--sim-time-scale", "4", "--concurrency", "2", "--requests", "4",
              "--osl", "8", "--output", str(out), "--requests-log", "/dev/full", "--quiet")  # fmt: skip
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("tokentop: error:")]
    assert len(errors) == 1 and "requests log" in errors[0] and "No space left" in errors[0], r.stderr
    assert json.loads(out.read_text())["tool"] == "tokentop"


def test_full_disk_under_the_results_keeps_the_log_and_says_so(tmp_path: Path) -> None:
    """The results on a 16 KiB tmpfs that is already full: one line, exit 1, the requests log complete, and
    an earlier results file there is not corrupted (the write is atomic)."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(mnt)],
                             capture_output=True, check=False)  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        out = mnt / "results.json"
        out.write_text('{"earlier": true}\n')
        fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            with pytest.raises(OSError):
                for _ in range(64):  # 256 KiB: more than the mount holds
                    os.write(fd, b"\0" * 4096)
        finally:
            os.close(fd)
        log = tmp_path / "requests.jsonl"
        r = bench("--sim-profile", "flat", "--sim-time-scale", "4", "--concurrency", "2", "--requests", "4",
                  "--osl", "8", "--output", str(out), "--requests-log", str(log), "--quiet")  # fmt: skip
        assert r.returncode == 1, r.stderr
        assert "Traceback" not in r.stderr
        errors = [line for line in r.stderr.splitlines() if line.startswith("tokentop: error:")]
        assert len(errors) == 1 and "No space left" in errors[0], r.stderr
        assert "c=2" in r.stdout  # the table still printed
        assert out.read_text() == '{"earlier": true}\n'
        assert sum(json.loads(x)["status"] == "ok" for x in log.read_text().splitlines()) >= 4
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_a_run_in_which_nothing_completed_says_why_and_exits_1(tmp_path: Path) -> None:
    with FaultServer(500) as server:
        r = bench("--url", server.url, "--concurrency", "2", "--duration", "2", "--quiet")
    assert r.returncode == 1, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("tokentop: error: no request completed: ") and "http_5xx" in last, r.stderr


def test_kill_9_leaves_no_engine_worker_and_a_valid_log(tmp_path: Path) -> None:
    """SIGKILL cannot be handled: the workers notice their command pipe close and exit on their own, and
    the requests log holds only whole JSON lines. (A --url run: the demo simulator is the simulator's own
    business, see the report.)"""
    from tui.sim.launch import SimServer

    log = tmp_path / "requests.jsonl"
    with SimServer("flat", time_scale=4.0) as sim:
        args = bench_process_argv(
            "--url",
            sim.url,
            "--concurrency",
            "4",
            "--workers",
            "2",
            "--duration",
            "60",
            "--osl",
            "32",
            "--requests-log",
            str(log),
            "--quiet",
        )
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env())
        try:
            assert _wait_for(lambda: logged_lines(log) >= 8, 30)
            children = _children(proc.pid)
            assert len(children) >= 2
            proc.kill()
            proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        _assert_gone(children)
    for line in log.read_text().splitlines():
        json.loads(line)


def test_a_closed_stderr_pipe_does_not_end_the_run_badly(tmp_path: Path) -> None:
    """`tokentop bench ... 2>&1 | head -2`: the progress lines' reader goes away mid-run; the run still ends
    with its results written and exit 0."""
    out = tmp_path / "results.json"
    args = _four_requests_bench(out)
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=_env())
    assert proc.stdout is not None
    proc.stdout.readline()  # the first progress line, then the reader leaves
    proc.stdout.close()
    try:
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    assert json.loads(out.read_text())["totals"]["completed"] >= 4
