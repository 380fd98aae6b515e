"""image_resolve_urls against a local HTTP server: the reference's examples (content type without
parameters, 404 left alone, byte cap, roles, one download per URL), the SSRF guard applied
through the rule, and the response phase."""

from __future__ import annotations

import base64

import pytest
from aiohttp import web

from gateway import fetch
from gateway.urp import ImageNode, MediaSource, Request, Response, TextNode, ToolResultNode
from transforms.base import TransformContext
from transforms.engine import CompiledRule, run_request_async, run_response_async
from transforms.registry import registry

TYPE_ID = "image_resolve_urls"
BODY = b"\x89PNG\r\n\x1a\n" + bytes(range(12))  # 20 bytes


@pytest.fixture
async def server():
    hits: list[str] = []

    async def handler(request):
        hits.append(request.path)
        if request.path == "/a.png":
            return web.Response(body=BODY, headers={"Content-Type": "image/png; charset=x"})
        if request.path == "/plain.jpg":
            resp = web.Response(body=BODY)
            resp.headers.popall("Content-Type", None)
            return resp
        return web.Response(status=404)

    app = web.Application()
    app.router.add_get("/{name}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    yield {"url": f"http://127.0.0.1:{port}", "port": port, "hits": hits}
    await runner.cleanup()


@pytest.fixture(autouse=True)
async def allow_loopback(monkeypatch):
    monkeypatch.setattr(fetch, "_process_allow", True)
    yield
    await fetch.fetcher().close()


def ctx():
    return TransformContext(logical_model="m", client_protocol="chat_completion")


def image(url, role="user", detail=None):
    return ImageNode(
        role=role, id="img1", source=MediaSource(kind="url", url=url, detail=detail), extra={"k": 1}
    )


async def run_req(config, nodes, c=None):
    rule = CompiledRule(1, "provider", "request", None, registry()[TYPE_ID](config))
    await run_request_async([rule], Request(model="m", input=nodes), c or ctx())
    return nodes


async def test_example_1_resolves_to_base64_with_bare_content_type(server):
    node = image(f"{server['url']}/a.png", detail="high")
    await run_req({}, [node])
    assert node.source.kind == "base64" and node.source.media_type == "image/png"
    assert base64.b64decode(node.source.data) == BODY
    assert node.source.detail is None and node.id == "img1" and node.role == "user" and node.extra == {"k": 1}


async def test_missing_content_type_guessed_from_extension(server):
    node = image(f"{server['url']}/plain.jpg")
    await run_req({}, [node])
    assert node.source.media_type in ("image/jpeg", "application/octet-stream")  # aiohttp may add a default


async def test_example_2_404_leaves_the_node(server):
    node = image(f"{server['url']}/missing.png")
    c = ctx()
    await run_req({}, [node], c)
    assert node.source.kind == "url" and node.source.url.endswith("/missing.png")
    assert any("status" in n for n in c.shared["notes"])


async def test_example_3_byte_cap_and_roles(server):
    node = image(f"{server['url']}/a.png")
    await run_req({"max_bytes": 10}, [node])
    assert node.source.kind == "url"
    user = image(f"{server['url']}/a.png")
    assistant = image(f"{server['url']}/a.png", role="assistant")
    await run_req({"roles": ["assistant"]}, [user, assistant])
    assert user.source.kind == "url" and assistant.source.kind == "base64"
    none = image(f"{server['url']}/a.png")
    await run_req({"roles": []}, [none])
    assert none.source.kind == "url"


async def test_concurrent_once_per_url_and_tool_results_untouched(server):
    nodes = [
        image(f"{server['url']}/a.png"),
        image(f"{server['url']}/a.png"),
        TextNode(content="x"),
        ToolResultNode(call_id="c", content=[image(f"{server['url']}/a.png")]),
        image("data:image/png;base64,QUJD"),
    ]
    await run_req({}, nodes)
    assert nodes[0].source.kind == nodes[1].source.kind == "base64"
    assert nodes[3].content[0].source.kind == "url"
    assert nodes[4].source.url == "data:image/png;base64,QUJD"
    assert server["hits"] == ["/a.png"]


async def test_example_4_terminal_replay_downloads_once(server):
    """Within one attempt (request and response phase share ctx.shared) a URL is fetched once."""
    c = ctx()
    url = f"{server['url']}/a.png"
    rule = CompiledRule(1, "provider", "response", None, registry()[TYPE_ID]({}))
    first = Response(id="r", model="m", output=[image(url, role="assistant")])
    again = Response(id="r", model="m", output=[image(url, role="assistant")])
    await run_response_async([rule], first, c)
    await run_response_async([rule], again, c)
    assert first.output[0].source.kind == again.output[0].source.kind == "base64"
    assert server["hits"] == ["/a.png"]


async def test_guard_refuses_loopback_through_the_rule(server, monkeypatch):
    monkeypatch.setattr(fetch, "_process_allow", False)
    monkeypatch.setattr(fetch, "_setting_allow_private", False)
    nodes = [
        image(f"http://localhost:{server['port']}/a.png"),
        image(f"http://2130706433:{server['port']}/a.png"),
    ]
    c = ctx()
    await run_req({}, nodes, c)
    assert [n.source.kind for n in nodes] == ["url", "url"]
    assert server["hits"] == []
    assert sum("address_refused" in n for n in c.shared["notes"]) == 2


def test_sync_entry_works_without_a_loop():
    """Worked examples and other sync callers: the sync method runs its own short loop (here
    against a closed port: the call returns and leaves the node)."""
    node = image("http://127.0.0.1:9/none.png")
    registry()[TYPE_ID]({"timeout_seconds": 2}).apply_request(Request(model="m", input=[node]), ctx())
    assert node.source.kind == "url"


def test_metadata():
    cls = registry()[TYPE_ID]
    assert cls.phases == ("request", "response") and cls.scopes == ("provider", "api_key")
    assert cls({}).config == {
        "timeout_seconds": 30,
        "max_bytes": 20971520,
        "roles": ["system", "developer", "user", "assistant"],
    }
    assert cls.validate_config({"timeout_seconds": 0})
    assert cls({}).needs_whole_response(ctx())
