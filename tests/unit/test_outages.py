"""Outages as spans (`tui.engine.aggregate.outages`): when one opens and closes, what it takes out of a
level's rates, and the results file's ``outages`` read back (and absent from older files)."""

from __future__ import annotations

import math
from dataclasses import replace

import orjson
import pytest

from tui.engine.aggregate.outages import Outages, without_outages
from tui.engine.records import RequestRecord
from tui.engine.results.codec import encode
from tui.engine.results.files import parse_document
from tui.engine.results.model import Outage as SavedOutage
from tui.engine.snapshot import LevelView, Outage, SloView, Stats

S = 1_000_000_000
T0 = 5 * S


def rec(end_s: float, error: str | None = None, status: int | None = None, rid: int = 1) -> RequestRecord:
    end = T0 + int(end_s * S)
    return RequestRecord(
        request_id=rid, worker=0, seq=rid, level_id=1, sent_ns=end - S // 10, end_ns=end,
        first_byte_ns=None if error else end - S // 20, status="error" if error else "ok",
        error_class=error, http_status=status,
    )  # fmt: skip


def test_refusals_for_over_a_second_after_a_success_open_an_outage_from_the_first_and_a_success_ends_it() -> (
    None
):
    o = Outages(T0)
    assert o.see(rec(1.0)) is None
    assert o.see(rec(10.0, "disconnect")) is None
    assert o.see(rec(10.5, "connect")) is None  # a moment: not yet an outage
    said = o.see(rec(11.2, "connect"))
    assert said == "the server stopped answering at 00:10 (connect)" and o.down
    assert o.see(rec(15.0, "connect")) is None  # said once
    back = o.see(rec(20.3))
    assert back == "the server is back at 00:20 (down 10.2 s)" and not o.down
    assert o.views() == (Outage(start_s=10.0, end_s=20.25, cause="connect"),)


def test_no_outage_before_the_server_ever_answered_nor_from_other_failures_nor_a_blip() -> None:
    o = Outages(T0)
    for t in (0.0, 1.0, 2.0, 3.0):  # a server still starting: the fatal check's case, not an outage
        assert o.see(rec(t, "connect")) is None
    o.see(rec(4.0))
    for t in (5.0, 6.0, 7.0):
        assert o.see(rec(t, "timeout")) is None  # slow, not gone
    assert o.see(rec(8.0, "connect")) is None
    o.see(rec(8.5))  # back within the moment: nothing to say
    assert o.see(rec(9.6, "connect")) is None
    assert not o.spans


def test_a_proxy_answering_502_or_503_to_all_is_an_outage_too() -> None:
    o = Outages(T0)
    o.see(rec(1.0))
    o.see(rec(2.0, "http_5xx", 503))
    assert o.see(rec(3.5, "http_5xx", 502)) == "the server stopped answering at 00:02 (HTTP 502)"
    o2 = Outages(T0)
    o2.see(rec(1.0))
    o2.see(rec(2.0, "http_5xx", 500))
    assert o2.see(rec(3.5, "http_5xx", 500)) is None  # a server error, but it is answering


def _view(**kw: object) -> LevelView:
    base: dict[str, object] = dict(
        level_id=1, mode="concurrency", value=4, started_s=0.0, ended_s=30.0, steady_from_s=2.0,
        steady=True, completed=100, failed=20, output_tps=1000.0, request_per_s=10.0, per_request_tps=50.0,
        ttft=Stats(), tpot=Stats(), itl_chunk=Stats(), itl_e2e=Stats(), e2el=Stats(), tokens_per_chunk=1.0,
        sched_lag=Stats(), window_s=30.0, window_from_s=0.0, window_to_s=30.0, total_tps=2000.0,
    )  # fmt: skip
    base.update(kw)
    return LevelView(**base)  # type: ignore[arg-type]


def test_a_level_that_held_an_outage_is_not_steady_and_its_rates_are_over_the_time_the_server_was_up() -> (
    None
):
    slo = SloView(met=90, requests=120, cut=0, attainment=0.75, low=0.67, high=0.82, goodput_rps=3.0,
                  goodput_tps=300.0)  # fmt: skip
    view = without_outages(_view(goodput_per_s=3.0, slo=slo), (Outage(10.0, 20.0, "connect"),), now_s=40.0)
    assert not view.steady and view.down_s == pytest.approx(10.0)
    assert view.output_tps == pytest.approx(1500.0) and view.request_per_s == pytest.approx(15.0)
    assert view.total_tps == pytest.approx(3000.0)
    # goodput over the same up-time as the throughput, in both places it is kept; the share unchanged
    assert view.goodput_per_s == pytest.approx(4.5) and view.slo is not None
    assert view.slo.goodput_rps == pytest.approx(4.5) and view.slo.goodput_tps == pytest.approx(450.0)
    assert (view.slo.attainment, view.slo.low, view.slo.requests) == (0.75, 0.67, 120)
    still_down = without_outages(_view(), (Outage(25.0, None, "connect"),), now_s=28.0)
    assert still_down.down_s == pytest.approx(3.0)  # an open outage runs to now
    outside = without_outages(_view(), (Outage(31.0, 33.0, "connect"),), now_s=40.0)
    assert outside.steady and outside.down_s == 0.0  # another level's outage
    whole = without_outages(_view(), (Outage(-1.0, 31.0, "connect"),), now_s=40.0)
    assert math.isnan(whole.output_tps)  # never up: no rate, not an infinite one


def test_the_results_outages_read_back_and_an_older_file_without_them_reads_as_none() -> None:
    from dataclasses import replace

    from tests.support import frozen
    from tests.unit.results_data import frozen_results

    snap = frozen.snapshot()
    spans = (Outage(10.0, 20.0, "connect"), Outage(30.0, None, "HTTP 503"))
    levels = (replace(snap.levels[0], down_s=10.0, steady=False), *snap.levels[1:])
    doc = encode(frozen_results(snap=replace(snap, outages=spans, levels=levels)))
    assert doc["outages"][1] == {"start_s": 30.0, "end_s": None, "cause": "HTTP 503"}
    res = parse_document(orjson.loads(orjson.dumps(doc)))
    assert res.outages == (SavedOutage(start_s=10.0, end_s=20.0, cause="connect"),  # type: ignore[union-attr]
                           SavedOutage(start_s=30.0, end_s=None, cause="HTTP 503"))  # fmt: skip
    assert res.levels[0].server_down_s == 10.0 and not res.levels[0].steady  # type: ignore[union-attr]
    doc.pop("outages")
    doc["levels"][0].pop("server_down_s")
    assert "server_down_s" not in doc["levels"][1]  # written only after an outage
    old = parse_document(doc)
    assert old.outages == () and old.levels[0].server_down_s == 0.0  # type: ignore[union-attr]


def test_a_stream_answered_then_cut_shows_the_server_was_up() -> None:
    """Found against vLLM on a busy machine: no answer had ended when it was stopped, so its streams cut
    mid-answer were the first records, then 665 refusals, and no outage was seen. A 2xx head counts."""
    o = Outages(T0)
    cut = replace(rec(10.0, "disconnect"), first_byte_ns=T0 + 2 * S, http_status=200)
    assert o.see(cut) is None
    assert o.see(rec(10.5, "connect")) is None
    assert o.see(rec(11.2, "connect")) == "the server stopped answering at 00:10 (connect)"
    never = Outages(T0)  # refused and 503s (no 2xx head) prove nothing: a server still starting
    for t in (0.0, 1.0, 2.0):
        assert never.see(replace(rec(t, "http_5xx", 503), first_byte_ns=T0)) is None
        assert never.see(rec(t + 0.5, "connect")) is None
    assert not never.spans


def test_an_answer_begun_after_the_outage_closes_it_though_it_never_ended() -> None:
    """Found against vLLM on a busy machine: after the restart no answer ended before the run was stopped,
    and the outage was saved as never closed. A stream whose 2xx head came after the outage began (here
    cancelled by the stop) says the server is back, at that head; one answered before it proves nothing."""
    o = Outages(T0)
    o.see(rec(1.0))
    o.see(rec(10.0, "connect"))
    assert o.see(rec(11.2, "connect")) is not None and o.down
    early = replace(rec(12.0, "disconnect"), first_byte_ns=T0 + 9 * S, http_status=200)  # head before it
    assert o.see(early) is None and o.down
    cut = replace(rec(30.0, "cancelled"), status="cancelled", first_byte_ns=T0 + 21 * S, http_status=200)
    assert o.see(cut) == "the server is back at 00:21 (down 11.0 s)" and not o.down
    assert o.views() == (Outage(start_s=10.0, end_s=21.0, cause="connect"),)
