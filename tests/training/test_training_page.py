"""The training-layouts page (/models/training) over HTTP: the ranked table, the counts, bad fields on the page."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tests.web.conftest import H100, make_app


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with TestClient(make_app(tmp_path_factory.mktemp("training-web"))) as c:
        yield c


def test_the_page_ranks_fitting_layouts(client: TestClient) -> None:
    r = client.get(f"/models/training?model=llama-3-8b&hardware={H100}&devices=16&global_batch=64&seq_len=4096"
                   "&precision=bf16")
    assert r.status_code == 200, r.text
    counts = re.search(r'id="training-counts">(.*?)</p>', r.text, re.S)
    assert counts is not None and "layouts costed" in counts.group(1) and "fit" in counts.group(1)
    table = re.search(r'id="training-table">(.*?)</table>', r.text, re.S)
    assert table is not None and table.group(1).count("<tr>") == 1 + 10  # the header and ten layouts


def test_a_bad_field_is_a_message_and_the_models_page_links_here(client: TestClient) -> None:
    r = client.get(f"/models/training?model=llama-3-8b&hardware={H100}&devices=zero&global_batch=64&seq_len=4096"
                   "&precision=bf16")
    assert r.status_code == 422 and "devices: expected a whole number" in r.text
    page = client.get(f"/models?model=llama-3-8b&hardware={H100}")
    assert 'href="/models/training"' in page.text
