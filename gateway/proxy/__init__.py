"""The ASGI proxy app serving /v1/*: decode -> route -> chains -> encode -> upstream -> back.

Core package: imports neither the ORM nor the apps (``tests/test_layering.py``). The project
layer (``gateway.wiring``) injects the configuration source, the authenticator and the
recorders. Modules, in the order a request walks them:

- ``app``: ``ProxyApp`` (ASGI entry, lifespan, auth, /v1/models, /healthz, disconnect watch)
- ``config``: ``ProxyConfig`` (the knobs) and the ``Authenticator`` signature
- ``serve``: decode and serve: ``serve`` (entry, recorder, error answer) and ``decode_call``
- ``call``: ``Runtime`` (per worker) and ``Call`` (per request, shared by its attempts)
- ``failover``: the routing loop: retries, failover, attempt budget, breaker feedback
- ``attempt``: one upstream attempt (per-attempt request, request rules, encoding)
- ``chain``: the chain engine (``TransformContext``, ``CompiledRule``, ``StreamChain``)
- ``whole``: the whole-response path (whole client, and synthesised streams)
- ``stream``: the streaming path and its ``StreamPump``
- ``recorder``: the ``Recorder`` hooks, ``NullRecorder``, fan-out and ``RecorderSet``
- ``errors``: client error shapes, failure classification, sanitising upstream error text
  (the exception types themselves are ``gateway.errors``)
- ``routing``: key redirects and allow-list, provider waterfall, weighted channel order
- ``breaker``: passive circuit breaker per channel, optionally shared through Redis
- ``snapshot``: the in-process configuration snapshot, its ``ConfigSource`` and live reload
- ``upstream``: the shared aiohttp client and URL join
- ``exchange``: per-request state, headers, JSON and SSE writing, keep-alives
- ``count_tokens``: ``POST /v1/messages/count_tokens``
- ``globs``: model glob matching
- ``prepare``: per-attempt, cross-protocol clean-up of the decoded request before encoding
"""
