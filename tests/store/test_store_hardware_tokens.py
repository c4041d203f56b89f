"""Custom hardware and API tokens."""

from __future__ import annotations

import hashlib

import pytest
from sqlalchemy import text

from perfmodel.store import Store, StoreError

SPEC = {"id": "my-gpu", "kind": "gpu", "clock_hz": 1.5e9, "levels": [{"name": "DRAM", "capacity_bytes": 8e10}]}


def test_hardware_round_trip(store: Store) -> None:
    row = store.add_hardware("my-gpu", SPEC, None, "a" * 64)
    assert (row.id, row.spec, row.derived_from, row.content_hash) == ("my-gpu", SPEC, None, "a" * 64)
    assert row.created_at.utcoffset() is not None
    variant = store.add_hardware("my-gpu-hbm+50", {**SPEC, "id": "my-gpu-hbm+50"}, "my-gpu", "b" * 64)
    assert store.get_hardware("my-gpu") == row
    assert store.get_hardware("nope") is None
    assert [h.id for h in store.list_hardware()] == ["my-gpu", "my-gpu-hbm+50"]
    assert store.get_hardware("my-gpu-hbm+50") == variant
    assert store.delete_hardware("my-gpu") is True
    assert store.delete_hardware("my-gpu") is False
    assert [h.id for h in store.list_hardware()] == ["my-gpu-hbm+50"]


def test_duplicate_hardware_id_is_a_store_error_and_writes_nothing(store: Store) -> None:
    store.add_hardware("my-gpu", SPEC, None, "a" * 64)
    with pytest.raises(StoreError, match="already exists"):
        store.add_hardware("my-gpu", {"other": True}, "x", "b" * 64)
    assert store.get_hardware("my-gpu") is not None
    assert store.get_hardware("my-gpu").spec == SPEC  # type: ignore[union-attr]
    assert len(store.list_hardware()) == 1


@pytest.mark.parametrize(("hardware_id", "spec", "content_hash"), [
    ("", SPEC, "h"), ("x" * 81, SPEC, "h"), ("ok", [1, 2], "h"), ("ok", {"nan": float("nan")}, "h"),
    ("ok", {"obj": object()}, "h"), ("ok", SPEC, ""),
])
def test_invalid_hardware_is_rejected_before_the_database(store_url: str, hardware_id: str, spec: object,
                                                          content_hash: str) -> None:
    unmigrated = Store(store_url)  # no tables: touching the database would be an OperationalError
    try:
        with pytest.raises(StoreError):
            unmigrated.add_hardware(hardware_id, spec, None, content_hash)  # type: ignore[arg-type]
    finally:
        unmigrated.dispose()


def test_tokens_create_verify_revoke(store: Store) -> None:
    row, plaintext = store.create_token("ci")
    assert plaintext.startswith("pm_") and len(plaintext) >= 40
    assert row.name == "ci" and row.revoked_at is None
    assert store.verify_token(plaintext) == row
    assert store.verify_token(plaintext + "x") is None
    assert store.verify_token("") is None
    with pytest.raises(StoreError, match="already exists"):
        store.create_token("ci")
    other, other_plain = store.create_token("laptop")
    assert other_plain != plaintext
    assert store.revoke_token("ci") is True
    assert store.revoke_token("ci") is False
    assert store.verify_token(plaintext) is None
    assert store.verify_token(other_plain) == other
    again, again_plain = store.create_token("ci")  # the name is free once revoked
    assert store.verify_token(again_plain) == again
    tokens = store.list_tokens()
    assert [t.name for t in tokens] == ["ci", "laptop", "ci"]
    assert tokens[0].revoked_at is not None and tokens[2].revoked_at is None
    assert store.revoke_token("nobody") is False


def test_token_plaintext_is_never_stored(store: Store) -> None:
    plaintexts = [store.create_token(f"t{i}")[1] for i in range(3)]
    with store.engine.connect() as conn:
        rows = [[str(v) for v in r] for r in conn.execute(text("SELECT * FROM api_tokens"))]
    dump = repr(rows)
    assert len(rows) == 3
    for plaintext in plaintexts:
        assert plaintext not in dump and plaintext.removeprefix("pm_") not in dump
        assert hashlib.sha256(plaintext.encode()).hexdigest() in dump


def test_invalid_token_name(store: Store) -> None:
    with pytest.raises(StoreError):
        store.create_token("")
    with pytest.raises(StoreError):
        store.create_token("n" * 101)
    assert store.list_tokens() == []
