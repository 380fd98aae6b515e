"""A capture says per attempt whether sticky routing chose the channel (and a short key hash,
never the conversation itself)."""

import orjson

from captures.dump import build
from captures.record import AttemptRecord, CaptureRecord


def test_dump_carries_the_affinity_of_each_attempt():
    rec = CaptureRecord(
        request_id="r1",
        created_at=0.0,
        api_key_id=1,
        api_key_name="k",
        client_protocol="messages",
        stream=False,
        logical_model="m",
    )
    rec.attempts.append(
        AttemptRecord(
            provider="p",
            channel="a",
            upstream_protocol="messages",
            logical_model="m",
            upstream_model="m",
            started_at=0.0,
            affinity={"hit": True, "key": "0123456789ab"},
        )
    )
    rec.attempts.append(
        AttemptRecord(
            provider="p",
            channel="b",
            upstream_protocol="messages",
            logical_model="m",
            upstream_model="m",
            started_at=0.0,
        )
    )
    data, _ = build(rec)
    attempts = orjson.loads(data)["attempts"]
    assert attempts[0]["affinity"] == {"hit": True, "key": "0123456789ab"}
    assert attempts[1]["affinity"] is None
