"""The models page's compiler-advice section (/models?advice=1) over HTTP."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from perfmodel.advice.precision import precision_advice
from perfmodel.advice.source import advice_graph
from perfmodel.units import format_time_s
from tests.web.conftest import H100

QUERY = f"/models?model=gpt2&hardware={H100}&batch=4&prompt_tokens=256&phase=decode"


def test_advice_is_off_unless_asked(client: TestClient) -> None:
    html = client.get(QUERY).text
    assert 'id="advice"' not in html and 'name="advice"' in html


def test_advice_section_shows_each_scheme_and_the_partition_note(client: TestClient) -> None:
    response = client.get(QUERY + "&advice=1")
    assert response.status_code == 200, response.text[:2000]
    html = response.text
    assert 'id="advice"' in html and 'name="advice" value="1" checked' in html
    expected = precision_advice(advice_graph("gpt2", "decode", 4, 256), H100)
    cell = r'<td class="num">'
    rows = re.findall(rf'<tr><th scope="row">([a-z0-9]+ [a-z-]+)</th>{cell}\d+</td>{cell}([^<]+)</td>', html)
    assert {scheme: step for scheme, step in rows} == {
        s: format_time_s(t["graph_time_s"]) for s, t in expected.totals.items()}
    assert 'id="precision-ops-table"' in html  # decode is weight-bound: weight-only schemes gain
    assert 'id="partition-none"' in html  # the bundled H100 spec declares no supported_ops
