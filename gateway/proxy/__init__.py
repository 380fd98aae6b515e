"""The ASGI proxy app serving /v1/*: decode -> route -> chains -> encode -> upstream -> back.

- ``app``: ``ProxyApp`` (ASGI entry, lifespan, auth, /v1/models, /healthz, disconnect watch)
- ``generate``: the generation pipeline (routing loop, four response paths, stream pump)
- ``attempt``: one upstream attempt (per-attempt request, chains, encoding) and its failure type
- ``routing``: key redirects and allow-list, provider waterfall, weighted channel order
- ``breaker``: passive circuit breaker per channel, optionally shared through Redis
- ``snapshot``: the in-process configuration snapshot and its live-reload thread
- ``upstream``: the shared aiohttp client and URL join
- ``exchange``: per-request state, headers, JSON and SSE writing, keep-alives
- ``errors``: client error shapes and sanitising upstream error text
- ``capture``: filling capture records when capture is on
- ``prepare``: per-attempt, cross-protocol clean-up of the decoded request before encoding
"""
