"""A deterministic mock of the four upstream LLM protocols, for tests, demos and benchmarks.

It is a plain ASGI app (``create_app()``) that needs no Django at request time, and it writes
every wire body by hand: it must stay an independent peer of our codecs, so that a bug in a codec
cannot be mirrored by the mock and go unnoticed. Serve it with
``python manage.py mockupstream --host 127.0.0.1 --port 9100``.

Behaviour (see ``behaviour.py``): echoes the last user text, calls tools when asked, answers tool
results, emits reasoning when asked. Fault injection (``faults.py``) by ``x-mock-*`` headers or a
``/fault/<k>=<v>[,<k>=<v>]`` path prefix. Introspection under ``/_mock/`` (``app.py``).
"""

from gateway.mock_upstream.app import MockUpstreamApp, create_app

__all__ = ["MockUpstreamApp", "create_app"]
