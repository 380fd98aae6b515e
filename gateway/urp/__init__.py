"""The typed internal representation every transform works on. Knows nothing of HTTP or the ORM."""

from copy import deepcopy

from .events import (
    Event,
    NodeDelta,
    NodeDone,
    NodeStart,
    ProviderControl,
    ResponseDone,
    ResponseStart,
    StreamError,
)
from .nodes import (
    INTERNAL_PREFIX,
    ROLES,
    AudioNode,
    EnvelopeExtraNode,
    FileNode,
    ImageNode,
    MediaSource,
    Node,
    ProviderItemNode,
    ReasoningNode,
    RefusalNode,
    TextNode,
    ToolCallNode,
    ToolResultNode,
    accept_extra,
    wire_extra,
)
from .request import ReasoningConfig, Request, Response, ResponseFormat, ToolDef, Usage


def clone(obj):
    """A deep copy of a URP object. The proxy does not use it per attempt: re-decoding the
    client's bytes gives an independent copy more cheaply (see ``gateway.proxy.call.Call``)."""
    return deepcopy(obj)


__all__ = [
    "INTERNAL_PREFIX",
    "ROLES",
    "AudioNode",
    "EnvelopeExtraNode",
    "Event",
    "FileNode",
    "ImageNode",
    "MediaSource",
    "Node",
    "NodeDelta",
    "NodeDone",
    "NodeStart",
    "ProviderControl",
    "ProviderItemNode",
    "ReasoningConfig",
    "ReasoningNode",
    "RefusalNode",
    "Request",
    "Response",
    "ResponseDone",
    "ResponseFormat",
    "ResponseStart",
    "StreamError",
    "TextNode",
    "ToolCallNode",
    "ToolDef",
    "ToolResultNode",
    "Usage",
    "accept_extra",
    "clone",
    "wire_extra",
]
