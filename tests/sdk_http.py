"""The HTTP client module each official SDK accepts for ``http_client=``.

anthropic 2.x moved from ``httpx`` to ``httpx2`` (same API, new package); openai and older
anthropic majors use ``httpx``. Tests that hand an SDK a ``MockTransport`` client take the module
from here so they run against whichever major is installed.
"""

from __future__ import annotations

import importlib
from types import ModuleType


def httpx_for(sdk: ModuleType) -> ModuleType:
    base = importlib.import_module(f"{sdk.__name__}._base_client")
    return getattr(base, "httpx2", None) or base.httpx
