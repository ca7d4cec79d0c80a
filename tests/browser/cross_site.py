"""Another site: a page on its own port that auto-submits a form to the console, as a
page an operator happens to open while logged in would."""

from __future__ import annotations

import contextlib
import html
import threading
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.services import free_port


def attack_page(action: str, fields: Mapping[str, str]) -> bytes:
    inputs = "".join(
        f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
        for k, v in fields.items()
    )
    return (
        "<!doctype html><html><body>"
        f'<form method="post" action="{html.escape(action)}">{inputs}</form>'
        "<script>document.forms[0].submit()</script></body></html>"
    ).encode()


@contextlib.contextmanager
def serving_page(host: str, action: str, fields: Mapping[str, str]) -> Iterator[str]:
    """Serve the attack page on `host` (localhost: another site than 127.0.0.1; the same
    host on another port: the same site, another origin); yield its URL."""
    body = attack_page(action, fields)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    port = free_port()
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{port}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
