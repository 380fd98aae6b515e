"""Model globs: ``*`` any run, ``?`` one character, everything else literal; case-sensitive and
anchored to the whole name. Core code (routing, the chain engine); ``transforms.globs`` re-exports it. Linear-time two-pointer matching (no regex, no fnmatch, whose
``[...]`` classes and platform case rules are wrong here)."""

from __future__ import annotations


def glob_match(pattern: str, name: str) -> bool:
    if pattern == "*" or pattern == name:  # the common rule globs, answered without the loop
        return True
    if "*" not in pattern and "?" not in pattern:  # a literal that is not the name
        return False
    p = n = 0
    star = -1
    mark = 0
    plen, nlen = len(pattern), len(name)
    while n < nlen:
        if p < plen and (pattern[p] == "?" or pattern[p] == name[n]) and pattern[p] != "*":
            p += 1
            n += 1
        elif p < plen and pattern[p] == "*":
            star = p
            mark = n
            p += 1
        elif star != -1:
            p = star + 1
            mark += 1
            n = mark
        else:
            return False
    while p < plen and pattern[p] == "*":
        p += 1
    return p == plen


def any_glob(patterns: list[str] | tuple[str, ...] | None, name: str) -> bool:
    """None means every model; an empty list matches nothing."""
    if patterns is None:
        return True
    return any(glob_match(p, name) for p in patterns)
