"""The chain engine, re-exported from the core (``gateway.proxy.chain``): the proxy runs rules
without importing this app, and admin code and plug-ins keep importing from here."""

from gateway.proxy.chain import (
    CompiledRule,
    ExecutedRule,
    RuleTransform,
    StreamChain,
    TransformContext,
    needs_whole_response,
    run_request,
    run_request_async,
    run_response,
    run_response_async,
    select,
    wrap_stream_encoder,
)

__all__ = [
    "CompiledRule",
    "ExecutedRule",
    "RuleTransform",
    "StreamChain",
    "TransformContext",
    "needs_whole_response",
    "run_request",
    "run_request_async",
    "run_response",
    "run_response_async",
    "select",
    "wrap_stream_encoder",
]
