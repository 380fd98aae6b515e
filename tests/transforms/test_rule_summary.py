"""The one-line summary that heads each rule of a chain in the admin (``str(rule)``)."""

from transforms.models import TransformRule


def test_each_rule_in_a_chain_has_a_one_line_summary():
    rule = TransformRule(
        transform="prompt_inject_system",
        phase="request",
        models=["gpt-4*"],
        enabled=False,
        config={"content": "Answer in French.", "position": "prepend"},
        scope="global",
    )
    line = str(rule)
    assert line.startswith("[off] Prompt") and "request" in line and "gpt-4*" in line
    assert "content=Answer in French." in line and "position" not in line  # defaults are left out
    long = TransformRule(
        transform="prompt_inject_system", phase="request", scope="global", config={"content": "x" * 500}
    )
    assert len(str(long)) <= 90 and "all models" in str(long)
    assert "broken" in str(TransformRule(transform="no_such_transform", phase="request", scope="global"))
