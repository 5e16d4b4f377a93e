"""The client is the limit when it cannot send or read on time, not merely when its loop lags: an open loop's
sends behind their schedule, a closed loop's users not all in flight, each named in the verdict's line and
saved. Pure judgement over synthetic health windows and sends (`tui.engine.aggregate.saturation`)."""

from __future__ import annotations

from array import array

import numpy as np
import pytest

from tui.engine.aggregate.advice import client_limit, evidence_words
from tui.engine.aggregate.saturation import LevelLoad, Saturation, send_shortfall
from tui.engine.aggregate.store import Store
from tui.engine.config import LoadTarget
from tui.engine.records import RequestRecord
from tui.engine.results.build import LevelExtras, level_of
from tui.engine.results.codec import encode
from tui.engine.wire import Batch, Health

S = 1_000_000_000
MS = 1_000_000


WINDOW = (2 * S, 7 * S)
"""A level's 5 s window; its schedule runs from 0 to 10 s."""


def _shortfall(due_ns: np.ndarray, lag_ms: np.ndarray, rate: float, constant: bool = True) -> float | None:
    """`send_shortfall` over the sends made inside `WINDOW` (sent = due + lag), as a level view picks them."""
    sent_ns = due_ns + (lag_ms * MS).astype(np.int64)
    inside = (sent_ns >= WINDOW[0]) & (sent_ns < WINDOW[1])
    return send_shortfall(sent_ns[inside], lag_ms[inside], WINDOW, int(inside.sum()), rate, constant=constant)


def _poisson(rate: float, seed: int) -> np.ndarray:
    """A Poisson schedule over 10 s."""
    gaps = np.random.default_rng(seed).exponential(1 / rate, int(rate * 12))
    due = np.cumsum(gaps)
    return (due[due < 10] * S).astype(np.int64)


def test_sends_on_their_schedule_fall_behind_by_nothing() -> None:
    """Jitter, one stall caught up, or every send late alike: the load the server sees is the schedule's;
    and a Poisson schedule's draw (250 due in the window, give or take 16) is not read as a shortfall."""
    constant = np.arange(250, dtype=np.int64) * 40 * MS  # 25 req/s
    for due_ns, rate, is_constant in ((constant, 25.0, True), (_poisson(50.0, 3), 50.0, False)):
        jitter = np.random.default_rng(1).uniform(0.05, 3.0, due_ns.size)
        stalled = jitter.copy()
        stalled[(due_ns > 3 * S) & (due_ns < 3.2 * S)] += 200.0  # a 200 ms stall, then the sends go at once
        for lag in (jitter, stalled, jitter + 500.0):
            shortfall = _shortfall(due_ns, lag, rate, is_constant)
            assert shortfall is not None and shortfall < 0.01, shortfall
    assert send_shortfall(constant[:7], np.ones(7), WINDOW, 7, 25.0, constant=True) is None  # too few to say


def test_sends_made_at_four_fifths_of_the_schedule_are_a_fifth_behind() -> None:
    due_ns = np.arange(250, dtype=np.int64) * 40 * MS  # due at 25 req/s, sent at 20
    lag_ms = (np.arange(250) * 50 * MS - due_ns) / MS
    assert _shortfall(due_ns, lag_ms, 25.0) == pytest.approx(0.2, abs=0.01)
    # Poisson's (and a trace's) by the lag's growth: the median of the last sends' lags is a few sends old
    assert _shortfall(due_ns, lag_ms, 25.0, constant=False) == pytest.approx(0.2, abs=0.015)


def test_a_client_that_slowed_late_in_the_window_is_read_by_the_sends_it_did_not_make() -> None:
    """As measured (`bench --rate 50,600 --arrival constant`, a busy machine): on time for the window's
    first 3 s, then sending at 60 % of the schedule: 420 of 500 sent, 16 % short. The lag's growth between
    the window's halves read 4 %: most of it came after the second half's median send. A Poisson schedule
    is read by the lag's growth from the window's first sends to its last (its count is 500 +- 22)."""
    for due_ns, rate, constant in ((np.arange(1000, dtype=np.int64) * 10 * MS, 100.0, True),
                                   (_poisson(100.0, 5), 100.0, False)):  # fmt: skip
        due_s = due_ns / S
        sent_s = np.where(due_s < 5, due_s, 5 + (due_s - 5) / 0.6)  # from 5 s (3 s into the window): 60 %
        lag_ms = (sent_s - due_s) * 1e3
        sent_ns = (sent_s * S).astype(np.int64)
        inside = (sent_ns >= WINDOW[0]) & (sent_ns < WINDOW[1])
        truth = 1 - inside.sum() / (rate * 5)  # the draw's own count where it is Poisson
        if not constant:
            truth = 1 - inside.sum() / np.sum((due_ns >= WINDOW[0]) & (due_ns < WINDOW[1]))
        assert truth == pytest.approx(0.16, abs=0.02)
        assert _shortfall(due_ns, lag_ms, rate, constant) == pytest.approx(
            truth, abs=0.005 if constant else 0.02
        )


def test_sends_that_overtake_each_other_are_read_by_their_count() -> None:
    """As measured (`--arrival poisson --rate 600`, a busy machine opening connections): each send goes to
    an arrival already due but not in their order, so the lag of the last sends is no backlog's: 2/3 of
    3,000 due were sent and the lags' growth reads far less; the count less three of its deviations
    (3 x 55 of 3,000) reads most of it."""
    rng = np.random.default_rng(7)
    due_ns = _poisson(600.0, 11)
    sends_ns = np.sort(rng.uniform(0, 10, 4000) * S).astype(np.int64)
    waiting: list[int] = []
    pairs = []
    k = 0
    for t in sends_ns:  # each send takes a random one of the arrivals due by then
        while k < due_ns.size and due_ns[k] <= t:
            waiting.append(int(due_ns[k]))
            k += 1
        if waiting:
            pairs.append((int(t), waiting.pop(int(rng.integers(len(waiting))))))
    sent, due = (np.array(x, dtype=np.int64) for x in zip(*pairs, strict=True))
    inside = (sent >= WINDOW[0]) & (sent < WINDOW[1])
    truth = 1 - inside.sum() / np.sum((due_ns >= WINDOW[0]) & (due_ns < WINDOW[1]))
    assert truth == pytest.approx(1 / 3, abs=0.03)
    lag = (sent - due)[inside] / MS
    got = send_shortfall(sent[inside], lag, WINDOW, int(inside.sum()), 600.0)
    assert got is not None and truth - 0.08 < got <= truth + 0.01


def _windows(*per_worker: list[Health]) -> Saturation:
    """Each worker's health windows, 2 s apart from t = 2 s."""
    sat = Saturation(0, workers=len(per_worker), lag_threshold_ms=2.0, cpu_threshold=0.6)
    for worker, readings in enumerate(per_worker):
        for i, health in enumerate(readings, start=1):
            sat.window(worker, health, 2 * i * S)
    return sat


def _health(in_flight: float | None, mean_lag_ms: float = 0.1, cpu: float = 0.05) -> Health:
    return Health(0.5, cpu, 0, None, mean_lag_ms, in_flight)


def test_users_not_all_in_flight_make_a_closed_loop_the_clients() -> None:
    """8 users, 6 in flight on average: the server saw a quarter less load than asked, at 5 % of a core
    and no loop lag to speak of. 7.8 of 8 is within 5 %; with failures in the window users back off, so the
    shortfall is not judged (``users`` None)."""
    short = _windows([_health(6.0)] * 3)
    judged = short.level_client((3.0, 7.0), 650.0, LevelLoad(users=8))
    assert judged is not None and judged.limited_by == ("in_flight",) and judged.in_flight == 6.0
    assert judged.cause == "machine"  # little CPU: more workers would not help
    assert short.level_client((3.0, 7.0), 650.0, LevelLoad(users=None)).cause is None  # type: ignore[union-attr]
    full = _windows([_health(7.8)] * 3).level_client((3.0, 7.0), 650.0, LevelLoad(users=8))
    assert full is not None and full.cause is None and full.limited_by == ()
    # two workers: each one's median, summed (3.9 + 3.9 of 8 is full; 3.9 + 3.0 is not)
    two = _windows([_health(3.9)] * 3, [_health(3.9)] * 3).level_client((3.0, 7.0), 650.0, LevelLoad(users=8))
    assert two is not None and two.in_flight == pytest.approx(7.8) and two.cause is None
    one_short = _windows([_health(3.9)] * 3, [_health(3.0)] * 3)
    assert one_short.level_client((3.0, 7.0), 650.0, LevelLoad(users=8)).limited_by == ("in_flight",)  # type: ignore[union-attr]
    # a window only partly inside (it began in the pause before the level) is not judged by
    assert short.level_client((3.0, 5.0), 650.0, LevelLoad(users=8)).in_flight is None  # type: ignore[union-attr]
    # an older session's windows carry no in-flight: not judged, never read as zero
    old = _windows([_health(None)] * 3).level_client((3.0, 7.0), 650.0, LevelLoad(users=8))
    assert old is not None and old.in_flight is None and old.cause is None


def test_an_open_loops_load_is_cut_by_late_sends_not_by_a_lagging_loop() -> None:
    """Answers read 4 ms late on 50 ms ones (8 %): a closed loop's slots stand idle that long, so it is the
    client's; an uncapped open loop's arrivals keep their schedule, so it is not, until its sends fall
    behind it by 5 % or more."""
    sat = _windows([_health(None, mean_lag_ms=4.0)] * 3)
    closed = sat.level_client((3.0, 7.0), 50.0)
    assert closed is not None and closed.limited_by == ("loop_lag",)
    on_time = sat.level_client((3.0, 7.0), 50.0, LevelLoad(send_shortfall=0.01, on_schedule=True))
    assert on_time is not None and on_time.cause is None
    behind = sat.level_client((3.0, 7.0), 50.0, LevelLoad(send_shortfall=0.2, on_schedule=True))
    assert behind is not None and behind.limited_by == ("send_lag",)
    busy = _windows([_health(None, cpu=0.9)] * 3).level_client((3.0, 7.0), 50.0, LevelLoad(on_schedule=True))
    assert busy is not None and busy.limited_by == ("cpu",) and busy.cause == "cpu"  # CPU-bound in any loop


def test_the_verdicts_line_names_its_evidence_and_keeps_the_fix_last() -> None:
    line = client_limit("8 users", 1, "machine", ["6.0 of 8 users in flight on average"])
    assert line.startswith("client is the limit at 8 users: ")
    assert "(6.0 of 8 users in flight on average)" in line and line.rsplit("; ", 1)[1].startswith("more")
    assert evidence_words(None) == []


def _rate_batch(t_ns: int, first_id: int, n: int, due_ms: float, sent_ms: float) -> Batch:
    """``n`` open-loop requests of level 1 due every ``due_ms``, sent every ``sent_ms`` (from 0), each 100 ms
    long with 10 chunks, ending by ``t_ns``."""
    records = []
    for k in range(first_id, first_id + n):
        sent = int(k * sent_ms * MS)
        chunks = array("q", [sent + 10 * MS * (i + 1) for i in range(10)])
        records.append(
            RequestRecord(
                request_id=k + 1,
                worker=0,
                seq=k,
                level_id=1,
                sent_ns=sent,
                scheduled_ns=int(k * due_ms * MS),
                first_byte_ns=chunks[0],
                first_content_ns=chunks[0],
                end_ns=chunks[-1],
                chunk_ns=chunks,
                input_tokens=10,
                input_source="usage",
                output_tokens=10,
                output_source="usage",
            )
        )
    return Batch(0, t_ns, 1, records=records, health_window=_health(None), health=_health(None))


def _rate_level_after(sent_ms: float, cap: int | None, dropped: int = 0) -> Store:
    """A 25 req/s open loop whose requests were sent every ``sent_ms`` over 10 s, its health windows quiet;
    ``dropped`` arrivals a second held off by the back-off."""
    st = Store(0, workers=1, heavy_interval_s=0.0)
    st.begin_level(1, LoadTarget(mode="rate", rate=25.0, arrival="constant", max_concurrency=cap), 0)
    sent_per_s = round(1000 / sent_ms)
    for second in range(10):
        batch = _rate_batch((second + 1) * S, second * sent_per_s, sent_per_s, 40.0, sent_ms)
        st.ingest(batch._replace(dropped=dropped))
    st.end_level(10 * S)
    return st


def test_an_open_level_sent_behind_its_schedule_is_the_clients_and_says_so() -> None:
    """Due at 25 req/s, sent at 20 with the workers quiet: the level is the client's by its sends, the
    notice says how far behind, and the results save the sign and the figure. With a cap the same lag
    is the slots' wait, the server's doing: not judged; so are sends the back-off dropped on purpose."""
    st = _rate_level_after(50.0, cap=None)
    meta = dict(
        base_url="u", model="m", endpoint="chat", demo=False, load=LoadTarget(), level_id=1, fatal=None
    )
    st.refresh_views(11 * S, force=True)
    (level,) = st.snapshot(11 * S, **meta).levels
    assert level.send_shortfall == pytest.approx(0.2, abs=0.02)
    assert level.client_limited and level.client_evidence is not None
    assert level.client_evidence.limited_by == ("send_lag",)
    (notice,) = [n for n in st.notices_with((level,)) if n.startswith("client is the limit at 25 req/s")]
    assert "sends 20% behind their schedule" in notice
    saved = encode(level_of(level, LevelExtras(), LoadTarget(mode="rate", rate=25.0), None))
    assert saved["client"]["limited_by"] == ["send_lag"] and saved["client"][
        "send_shortfall"
    ] == pytest.approx(0.2, abs=0.02)
    on_time = _rate_level_after(40.0, cap=None)
    on_time.refresh_views(11 * S, force=True)
    (quiet,) = on_time.snapshot(11 * S, **meta).levels
    assert quiet.send_shortfall is not None and quiet.send_shortfall < 0.01 and not quiet.client_limited
    assert "limited_by" not in encode(level_of(quiet, LevelExtras(), LoadTarget(), None))["client"]
    capped = _rate_level_after(50.0, cap=4)
    capped.refresh_views(11 * S, force=True)
    (held,) = capped.snapshot(11 * S, **meta).levels
    assert held.send_shortfall is None and not held.client_limited
    backed_off = _rate_level_after(50.0, cap=None, dropped=5)
    backed_off.refresh_views(11 * S, force=True)
    (dropped,) = backed_off.snapshot(11 * S, **meta).levels
    assert dropped.send_shortfall == pytest.approx(0.2, abs=0.02) and not dropped.client_limited


def test_the_in_flight_meter_averages_over_time_not_over_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """2 in flight for 3 s then 1 for 1 s reads 1.75, however many changes came between; each take starts
    the next window."""
    from tui.engine.load import health

    now = [0]
    monkeypatch.setattr("tui.engine.load.health.time.perf_counter_ns", lambda: now[0])
    meter = health.InFlightMeter()
    for t_s, count in ((0, 1), (0, 2), (3, 1)):
        now[0] = t_s * S
        meter.set(count)
    now[0] = 4 * S
    assert meter.take_window_mean() == pytest.approx(1.75)
    now[0] = 6 * S
    assert meter.take_window_mean() == pytest.approx(1.0)
    assert meter.take_window_mean() is None  # no time passed


def test_a_level_that_ended_before_any_health_window_is_judged_once_one_comes() -> None:
    """A short first level (a busy machine's worker sent its first window late) is not frozen unjudged: the
    first window that covers it gives it its timing bound, which then stays."""
    meta = dict(
        base_url="u", model="m", endpoint="chat", demo=False, load=LoadTarget(), level_id=1, fatal=None
    )
    st = Store(0, workers=1, heavy_interval_s=0.0)
    st.begin_level(1, LoadTarget(concurrency=2), 0)
    st.begin_level(2, LoadTarget(concurrency=4), 3 * S)
    st.refresh_views(3 * S, force=True)
    assert st.snapshot(3 * S, **meta).levels[0].client_lag_ms is None  # no window yet
    st.ingest(Batch(0, 4 * S, 2, health_window=Health(7.0, 0.05, 0, None, 0.1, 2.0)))
    st.refresh_views(4 * S, force=True)
    assert st.snapshot(4 * S, **meta).levels[0].client_lag_ms == 7.0
    st.ingest(Batch(0, 6 * S, 2, health_window=Health(1.0, 0.05, 0, None, 0.1, 4.0)))
    st.refresh_views(6 * S, force=True)
    assert st.snapshot(6 * S, **meta).levels[0].client_lag_ms == 7.0  # fixed once judged


def test_an_ended_levels_judgement_does_not_hang_on_when_snapshots_were_taken() -> None:
    """A session records the views' refreshes, not the snapshots: the live app, which took one just after a
    level ended, and its replay, which took none until later, fix the same judgement (fixed at a snapshot, a
    window that straddled the end counted in the replay only: a * mark the live app had not shown)."""
    meta = dict(
        base_url="u", model="m", endpoint="chat", demo=False, load=LoadTarget(), level_id=2, fatal=None
    )
    shown = []
    for snapshot_at_the_end in (True, False):
        st = Store(0, workers=1, heavy_interval_s=0.0)
        st.begin_level(1, LoadTarget(concurrency=2), 0)
        st.ingest(Batch(0, 2 * S, 2, health_window=Health(1.0, 0.05, 0, None, 0.1, 2.0)))
        st.begin_level(2, LoadTarget(concurrency=4), 3 * S)
        st.refresh_views(3 * S, force=True)
        if snapshot_at_the_end:
            st.snapshot(3 * S, **meta)
        # 2-3.8 s: its middle is in level 1, it arrived after the level ended and its views were published
        st.ingest(Batch(0, int(3.8 * S), 2, health_window=Health(9.0, 0.05, 0, None, 0.1, 4.0)))
        st.refresh_views(4 * S)
        shown.append(st.snapshot(4 * S, **meta).levels[0].client_lag_ms)
    assert shown == [1.0, 1.0]
