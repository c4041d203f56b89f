"""The dashboard's start-up warm-up (issue 25): it loads what the first page request would (spec library, plotly
chart classes, templates), once per process."""

from __future__ import annotations

import sys
import threading

from perfmodel import specs
from web import warmup


def test_warm_up_fills_the_process_caches() -> None:
    warmup.warm_up()
    assert specs._library.cache_info().currsize >= 1
    assert "plotly.graph_objs._scattergl" in sys.modules and "plotly.graph_objs._waterfall" in sys.modules
    from web.templating import templates

    assert templates.env.cache is not None and any("runs.html" in str(k) for k in templates.env.cache)


def test_start_warm_up_runs_once_per_process() -> None:
    warmup.start_warm_up()
    warmup.start_warm_up()
    threads = [t for t in threading.enumerate() if t.name == "perfmodel-dashboard-warm-up"]
    assert len(threads) <= 1 and warmup._started.is_set()
