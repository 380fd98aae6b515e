"""The request log says whether sticky routing chose the channel: the first turn of a
conversation is routed normally (affinity false), the next turn goes to its bound channel
(affinity true)."""

from __future__ import annotations

from tests.requestlogs.test_e2e_request_logs import client_for, gw, rl_gateway, wait_rows  # noqa: F401
from tests.servers import make_key, make_route


def test_second_turn_row_is_marked_as_chosen_by_affinity(gw, mock_upstream):  # noqa: F811
    make_route("chat_completion", "rl-aff", mock_upstream.base_url("chat_completion"), affinity_mode="sticky")
    key, secret = make_key("rl-aff")
    gw.wait_config()
    client = client_for(gw, secret)
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "open"}]
    client.chat.completions.create(model="rl-aff", messages=messages)
    client.chat.completions.create(
        model="rl-aff",
        messages=[*messages, {"role": "assistant", "content": "a"}, {"role": "user", "content": "more"}],
    )
    rows = wait_rows(2, api_key=key)
    assert [r.affinity for r in rows] == [False, True]
