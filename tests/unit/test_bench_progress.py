"""The bench progress line: a pure function of plain numbers, table-tested; the writer on fake streams."""

from __future__ import annotations

import io
import math

import pytest

from tui.bench.progress import (
    LevelProgress,
    Progress,
    bar,
    goal_text,
    level_eta_s,
    load_label,
    progress_line,
    run_eta_s,
)


def _p(**kw: object) -> LevelProgress:
    base: dict[str, object] = dict(
        index=2, count=4, label="8 users", level_elapsed_s=10.0, run_elapsed_s=30.0, done=12, goal=40,
        unit="requests", phase="steady", finished_level_s=(20.0,), output_tps=1234.0, ttft_p50_ms=120.0,
        itl_p50_ms=12.5, in_flight=8,
    )  # fmt: skip
    base.update(kw)
    return LevelProgress(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("mode", "value", "label"),
    [("concurrency", 1, "1 user"), ("concurrency", 8, "8 users"), ("rate", 2.5, "2.5 req/s")],
)
def test_load_label(mode: str, value: float, label: str) -> None:
    assert load_label(mode, value) == label


@pytest.mark.parametrize(
    ("done", "goal", "unit", "text"),
    [(12, 40, "requests", "12/40 requests"), (7.5, 30, "s", "7.5/30 s"), (30.2, 30, "s", "30.0/30 s"),
     (45, 40, "requests", "45 requests (goal 40)")],
)  # fmt: skip
def test_goal_is_said_in_its_own_units(done: float, goal: float, unit: str, text: str) -> None:
    assert goal_text(done, goal, unit) == text


@pytest.mark.parametrize(
    ("done", "goal", "elapsed_s", "eta"),
    [(0, 40, 5.0, None), (10, 40, 5.0, 15.0), (40, 40, 9.0, 0.0), (50, 40, 9.0, 0.0), (7.5, 30, 7.5, 22.5)],
)
def test_level_eta_from_the_goal_progress_rate(
    done: float, goal: float, elapsed_s: float, eta: float | None
) -> None:
    assert level_eta_s(done, goal, elapsed_s) == eta


def test_run_eta_is_this_level_plus_the_rest_at_the_mean_level_time() -> None:
    # level 2 of 4: 10 s in, 12/40 done -> 10*28/12 s left; mean level time (20 + 10 + 23.3) / 2
    p = _p()
    eta = 10 * 28 / 12
    assert run_eta_s(p) == pytest.approx(eta + 2 * (20 + 10 + eta) / 2)
    assert run_eta_s(_p(done=0)) is None
    assert run_eta_s(_p(index=4, done=40)) == 0.0


def test_run_eta_counts_the_wind_down_after_each_level_at_the_mean_measured() -> None:
    # level 1 took 20 s, then wound down 6 s: this level winds down after its goal too, and so will the
    # two after
    eta = 10 * 28 / 12
    per_level = (20 + 10 + eta) / 2
    with_wind_down = run_eta_s(_p(finished_wind_down_s=(6.0,)))
    assert with_wind_down == pytest.approx(eta + 6 + 2 * (per_level + 6))
    without = run_eta_s(_p())
    assert without is not None and with_wind_down == pytest.approx(without + 3 * 6)
    # the last level at its goal: only its own wind-down is left, at the mean of those measured
    last = _p(index=4, done=40, finished_level_s=(20.0, 20.0, 20.0), finished_wind_down_s=(2.0, 4.0, 6.0))
    assert run_eta_s(last) == pytest.approx(4.0)
    assert run_eta_s(_p(done=0, finished_wind_down_s=(6.0,))) is None  # unknown until this level has counted


@pytest.mark.parametrize(
    ("fraction", "width", "text"),
    [(0.0, 4, "    "), (1.0, 4, "████"), (0.5, 4, "██  "), (1 / 32, 4, "▏   "), (0.3, 10, "███       "),
     (2.0, 3, "███"), (-1.0, 3, "   "), (math.nan, 3, "   "), (0.5, 0, "")],
)  # fmt: skip
def test_bar_fills_by_eighths(fraction: float, width: int, text: str) -> None:
    assert bar(fraction, width) == text and len(bar(fraction, width)) == width


def test_the_plain_line_says_everything() -> None:
    line = progress_line(_p())
    assert line.startswith("[2/4] 8 users ▕")
    assert "12/40 requests 0:10 ETA 0:24" in line
    assert "run 0:30, ~" in line and "left" in line
    assert "steady, 1,234 tok/s, TTFT p50 120 ms, ITL p50 12.5 ms, in flight 8" in line


def test_duration_goal_and_unknown_eta() -> None:
    line = progress_line(_p(unit="s", goal=30, done=7.5, level_elapsed_s=7.5))
    assert "7.5/30 s 0:07 ETA 0:23" in line
    starting = progress_line(_p(done=0, phase="starting", output_tps=math.nan, ttft_p50_ms=math.nan))
    assert "0/40 requests 0:10 ETA -:--" in starting and "run 0:30 ·" in starting and "left" not in starting
    assert "- tok/s, TTFT p50 - ms" in starting


def test_failures_are_said_only_when_there_are_some() -> None:
    assert "failed" not in progress_line(_p())
    assert "steady, 3 failed in the level, " in progress_line(_p(failed=3))  # the level's, not its window's


@pytest.mark.parametrize("width", [20, 40, 60, 80, 100, 120, 200])
def test_the_line_fits_the_terminal(width: int) -> None:
    line = progress_line(_p(), width)
    assert len(line) <= width
    assert line.startswith("[2/4] 8 users")
    if width >= 60:  # the level's own goal and ETA survive; the figures give way first
        assert "12/40 requests" in line and "ETA" in line and "▕" in line
    if width >= 200:
        assert "in flight 8" in line


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_line_is_redrawn_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "61")
    out = _Tty()
    pr = Progress(out, quiet=False)
    pr.show("probing http://x/v1/models…", force=True)
    pr.note("model m at http://x/v1")
    pr.level(_p())
    pr.level(_p(done=13))
    pr.done()
    text = out.getvalue()
    assert text.startswith("\r\x1b[Kprobing http://x/v1/models…\r\x1b[Kmodel m at http://x/v1\n")
    redraws = text.split("\n", 1)[1].split("\r\x1b[K")
    assert redraws[0] == "" and redraws[-1] == ""  # ends with the line cleared
    assert [r[:14] for r in redraws[1:3]] == ["[2/4] 8 users "] * 2
    assert all(len(r) <= 60 for r in redraws) and "\n" not in "".join(redraws)


def test_off_a_terminal_plain_lines_at_most_every_5_s() -> None:
    out = io.StringIO()
    pr = Progress(out, quiet=False)
    pr.show("probing http://x/v1/models…", force=True)
    pr.note("model m at http://x/v1")
    for k in range(5):
        pr.level(_p(done=k), force=k == 0)
    pr.level(_p(done=40), keep=True)
    lines = out.getvalue().splitlines()
    assert lines[:2] == ["probing http://x/v1/models…", "model m at http://x/v1"]
    assert len(lines) == 4 and "0/40 requests" in lines[2] and "40/40 requests" in lines[3]
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()


def test_quiet_writes_nothing() -> None:
    out = _Tty()
    pr = Progress(out, quiet=True)
    pr.show("x", force=True)
    pr.note("y")
    pr.level(_p(), keep=True)
    pr.done()
    assert out.getvalue() == ""
