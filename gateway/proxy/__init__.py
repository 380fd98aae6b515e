"""The ASGI proxy app serving /v1/*: decode -> route -> chains -> encode -> upstream -> back."""
