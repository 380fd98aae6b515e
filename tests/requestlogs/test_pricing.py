"""Prices: the cost formula (hand-computed), the price field through the config file (exact
decimals, canonical strings, exact error paths), and prices in the proxy's snapshot."""

from __future__ import annotations

from decimal import Decimal as D

import pytest

from gateway.configfile import ConfigError, dump, load, parse_text
from gateway.live_config import build_snapshot
from gateway.proxy.pricing import Tokens, cost_nano, estimate_tokens
from gateway.proxy.snapshot import ModelPrice
from providers.models import ChannelModel, Provider


def test_cost_by_category_with_both_multipliers():
    price = ModelPrice(
        input=D("3"),
        output=D("15"),
        cache_read=D("0.30"),
        cache_write=D("3.75"),
        reasoning=D("20"),
        multiplier=D("1.5"),
    )
    tokens = Tokens(input=1000, output=500, cache_read=200, cache_write=100, reasoning=50)
    # uncached 700*3 + 200*0.30 + 100*3.75 + 450*15 + 50*20 = 2100+60+375+6750+1000 = 10285 USD/M
    # * 1.5 = 15427.5 -> /10^6 USD = 0.0154275 USD = 15 427 500 nano-USD
    assert cost_nano(tokens, price) == 15_427_500


def test_missing_cache_and_reasoning_prices_fall_back_to_input_and_output():
    price = ModelPrice(input=D("2"), output=D("8"))
    tokens = Tokens(input=100, output=10, cache_read=40, reasoning=5)
    assert cost_nano(tokens, price) == (100 * 2 + 10 * 8) * 1000  # every token at the plain price


def test_rounding_is_half_up_to_a_nano_dollar_and_never_a_float():
    price = ModelPrice(
        input=D("0.0005"), output=D("0")
    )  # 0.0005 USD per million tokens = 0.5 nano-USD a token
    assert cost_nano(Tokens(input=1), price) == 1  # 0.5 nano rounds up
    assert cost_nano(Tokens(input=1), ModelPrice(input=D("0.0004"))) == 0
    big = Tokens(input=10**12, output=10**12)
    assert cost_nano(big, ModelPrice(input=D("0.000000000001"), output=D("999999999.999999999999"))) == int(
        D(10**12) * (D("0.000000000001") + D("999999999.999999999999")) * 1000
    )


def test_estimate_is_four_characters_a_token():
    assert (
        estimate_tokens(0) == 0
        and estimate_tokens(1) == 1
        and estimate_tokens(8) == 2
        and estimate_tokens(9) == 3
    )


CONFIG = """
providers:
  - name: acme
    multiplier: "1.25"
    channels:
      - name: main
        protocol: chat_completion
        base_url: http://127.0.0.1:9/v1
        api_key: sk-up
        models:
          - {model: m1, multiplier: "2", price: {input: "3.00", output: "15.00", cache_read: "0.30", cache_write: "3.75"}}
          - {model: m2, price: {input: 1, output: 0.5}}
          - m3
"""


@pytest.mark.django_db
def test_prices_load_from_the_config_file_and_reach_the_snapshot():
    load(parse_text(CONFIG))
    m1 = ChannelModel.objects.get(model="m1")
    assert m1.price == {"input": "3.00", "output": "15.00", "cache_read": "0.30", "cache_write": "3.75"}
    assert ChannelModel.objects.get(model="m2").price == {"input": "1", "output": "0.5"}
    assert ChannelModel.objects.get(model="m3").price is None
    assert Provider.objects.get(name="acme").multiplier == D("1.25")
    snap = build_snapshot()
    ch = snap.providers[0].channels[0]
    assert ch.prices["m1"] == ModelPrice(
        input=D("3.00"), output=D("15.00"), cache_read=D("0.30"), cache_write=D("3.75"), multiplier=D("2.5")
    )
    assert "m3" not in ch.prices
    out = dump()
    models = out["providers"][0]["channels"][0]["models"]
    assert models[0]["price"]["cache_write"] == "3.75" and out["providers"][0]["multiplier"] == "1.25"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("price", "message"),
    [
        ('{input: "-1"}', "price.input: must be a non-negative decimal"),
        ('{input: "1e3"}', "price.input: must be a non-negative decimal"),
        ('{inptu: "1"}', "Unknown price keys: inptu"),
        ("{output: true}", "price.output: must be a decimal string"),
        ('"3.00"', "must be a mapping"),
    ],
)
def test_bad_prices_name_the_path_and_write_nothing(price, message):
    text = CONFIG.replace('{input: "3.00", output: "15.00", cache_read: "0.30", cache_write: "3.75"}', price)
    with pytest.raises(ConfigError) as info:
        load(parse_text(text))
    assert "providers[0].channels[0].models[0].price" in str(info.value)
    assert message in str(info.value)
    assert not Provider.objects.exists()


@pytest.mark.django_db
def test_prices_through_the_rest_api(django_user_model):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(
        django_user_model.objects.create_user("ops", password="pw-12345678", is_staff=True)
    )
    body = {
        "name": "rest-acme",
        "multiplier": "0.5",
        "channels": [
            {
                "name": "c",
                "protocol": "chat_completion",
                "base_url": "http://127.0.0.1:9/v1",
                "api_key": "sk-up",
                "models": [{"model": "m", "price": {"input": "2.50", "output": "10"}}],
            }
        ],
    }
    resp = client.post("/api/providers/", body, format="json")
    assert resp.status_code == 201, resp.data
    assert resp.data["channels"][0]["models"][0]["price"] == {"input": "2.50", "output": "10"}
    assert D(resp.data["multiplier"]) == D("0.5")
    body["name"] = "rest-bad"
    body["channels"][0]["models"][0]["price"] = {"input": "cheap"}
    resp = client.post("/api/providers/", body, format="json")
    assert resp.status_code == 400 and "price" in str(resp.data)
