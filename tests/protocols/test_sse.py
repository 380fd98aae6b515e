from gateway.protocols.sse import SSEParser, frame


def test_parser_handles_split_reads_crlf_and_multiline_data():
    p = SSEParser()
    raw = b'event: a\r\ndata: {"x":\r\ndata: 1}\r\n\r\n: comment\n\ndata: [DONE]\n\n'
    out = []
    for i in range(len(raw)):
        out.extend(p.feed(raw[i : i + 1]))
    out.extend(p.close())
    assert out == [("a", '{"x":\n1}'), (None, "[DONE]")]


def test_close_flushes_unterminated_event():
    p = SSEParser()
    assert list(p.feed(b"data: tail")) == []
    assert list(p.close()) == [(None, "tail")]


def test_frame():
    assert frame({"a": 1}) == b'data: {"a":1}\n\n'
    assert frame({"a": 1}, "x") == b'event: x\ndata: {"a":1}\n\n'


# --- whole-chunk path (issue 20) against byte-at-a-time feeding (always the line-by-line path) ---

_PIECES = [
    b'data: {"a":1}\n\n',
    b'event: content_block_delta\ndata: {"t":"\xc3\xbcn\xc3\xafcode \xe2\x80\x94"}\n\n',
    b"data: [DONE]\n\n",
    b": keep-alive comment\n\n",
    b"data:nospace\n\n",
    b"data: line one\ndata: line two\n\n",
    b"event: ping\n\n",
    b"event: e\ndata: x\nid: 7\n\n",
    b"id: 3\ndata: after id\n\n",
    b"data: \n\n",
    b"event: \ndata: empty name\n\n",
    b"\n\n\n",
    b"data: crlf\r\n\r\n",
    b"data: cr only\r\r",
    b"retry: 10\n\n",
    b"data: bad \xff\xfe utf8\n\n",
    b"event: a:b\ndata: colon in name\n\n",
]


def _reference(raw: bytes) -> list:
    p = SSEParser()
    out = []
    for i in range(len(raw)):
        out.extend(p.feed(raw[i : i + 1]))
    out.extend(p.close())
    return out


def _chunked(raw: bytes, cuts: list[int], max_line: int | None = None) -> list:
    p = SSEParser(max_line)
    out = []
    start = 0
    for cut in [*sorted(cuts), len(raw)]:
        out.extend(p.feed(raw[start:cut]))
        start = cut
    out.extend(p.close())
    return out


def test_whole_chunks_match_line_by_line_parsing():
    import random

    rng = random.Random(20)
    for _ in range(400):
        raw = b"".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 12)))
        if rng.random() < 0.3:
            raw += b"data: unterminated"
        expected = _reference(raw)
        assert _chunked(raw, []) == expected, raw  # all in one read
        cuts = [rng.randint(0, len(raw)) for _ in range(rng.randint(1, 6))]
        assert _chunked(raw, cuts) == expected, (raw, cuts)


def test_whole_chunk_path_still_enforces_the_line_limit():
    import pytest

    from gateway.protocols.sse import SSELineTooLong

    p = SSEParser(max_line=32)
    out = []
    with pytest.raises(SSELineTooLong):
        for item in p.feed(b"data: short\n\ndata: " + b"x" * 40 + b"\n\n"):
            out.append(item)
    assert out == [(None, "short")]
