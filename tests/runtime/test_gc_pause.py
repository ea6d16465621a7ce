"""``common.gc_pause.gc_paused``: the collector is off inside, and back on after,
whatever happens inside; an inner pause leaves it to the outer one. Report builds and
screenplay parses run under it."""

from __future__ import annotations

import gc

import pytest

from common.gc_pause import gc_paused
from reports.tables import build_report


def test_paused_inside_and_restored_after_an_error():
    assert gc.isenabled()
    with pytest.raises(RuntimeError), gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner pause did not turn it back on
        raise RuntimeError("inside")
    assert gc.isenabled()


def test_a_collector_switched_off_before_stays_off():
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.django_db
def test_a_report_build_leaves_the_collector_on():
    report = build_report("dyntom", seed=0)
    assert report.benchmark == "dyntom"
    assert gc.isenabled()
