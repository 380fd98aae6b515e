"""``${NAME}`` and ``${NAME:-default}`` in configuration files, replaced from the environment
before parsing, so a file under version control can name secrets and ports it does not hold
(``api_key: ${OPENAI_API_KEY}``, ``base_url: http://127.0.0.1:${MOCK_PORT:-9100}/v1``).

``$${`` writes a literal ``${``. A name that is not set and has no default is an error with its
line number; nothing is loaded. This is the one place outside settings that reads the
environment, because the operator's file asks it to.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

_REF = re.compile(r"\$(\$)?\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def substitute(text: str, env: Mapping[str, str] | None = None) -> tuple[str, list[str]]:
    """The text with every reference replaced, and one error line per unset name."""
    env = os.environ if env is None else env
    errors: list[str] = []

    def replace(match: re.Match[str]) -> str:
        escaped, name, default = match.groups()
        if escaped:
            return match.group(0)[1:]
        if name in env:
            return env[name]
        if default is not None:
            return default
        line = text.count("\n", 0, match.start()) + 1
        errors.append(
            f"(file): line {line}: environment variable {name} is not set (write ${{{name}:-default}} "
            "to give a default)"
        )
        return ""

    return _REF.sub(replace, text), errors
