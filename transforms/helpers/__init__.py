"""Logic shared by several built-in transforms (the transforms themselves live in ``builtin``)."""
