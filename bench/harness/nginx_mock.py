"""The non-stream upstream: nginx answering each protocol's endpoint with a fixed JSON body.

One nginx worker process with keep-alive and no logging: it answers in a few microseconds, so it
is never the bottleneck and the gateway's figures are the gateway's own. POST bodies are
accepted and discarded (``return`` never reads them into a handler).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from .payloads import CANNED, dumps
from .procs import wait_port
from .tools import nginx_binary


def _quoted(body: bytes) -> str:
    text = body.decode()
    # nginx interpolates variables in ``return`` text and ends the string at an unescaped quote.
    assert "$" not in text and "'" not in text and "\\" not in text, "canned body needs escaping"
    return "'" + text + "'"


def write_config(workdir: Path, port: int) -> Path:
    tmp = workdir / "nginx-tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    tmp.chmod(0o777)
    locations = "\n".join(
        f"        location = {path} {{ default_type application/json; return 200 {_quoted(dumps(body))}; }}"
        for path, body in CANNED.items()
    )
    conf = workdir / "nginx.conf"
    conf.write_text(f"""
daemon off;
worker_processes 1;
pid {workdir / "nginx.pid"};
error_log {workdir / "nginx-error.log"} warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    client_max_body_size 20m;
    client_body_buffer_size 1m;
    keepalive_requests 10000000;
    keepalive_timeout 300s;
    server_tokens off;
    server {{
        listen 127.0.0.1:{port} backlog=4096;
{locations}
        location / {{ default_type application/json; return 404 '{{"error":{{"message":"no such path"}}}}'; }}
    }}
}}
""")
    return conf


def start(workdir: Path, port: int) -> subprocess.Popen:
    conf = write_config(workdir, port)
    proc = subprocess.Popen(
        [nginx_binary(), "-c", str(conf), "-p", str(workdir)],
        stdout=subprocess.DEVNULL,
        stderr=(workdir / "nginx-stderr.log").open("wb"),
    )
    wait_port(port, proc, "nginx")
    return proc
