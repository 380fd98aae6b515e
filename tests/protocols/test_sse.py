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
