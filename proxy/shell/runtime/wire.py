"""The response every view hands the WSGI server: Flask's, its head given in one pass.

Werkzeug's `get_wsgi_response` copies the response's headers into a new `Headers` (each one
through `add`, which checks the value again), looks through them for Location and
Content-Location, then lists them: some twenty Python calls a response for headers already
checked when they were set. Here, when there is neither Location nor Content-Location (which
Werkzeug rewrites) and the status is one whose headers it leaves alone (not 1xx, 204 or
304), the list is the headers' own, copied once, with the Content-Length Werkzeug would add
(tests/shell/runtime/test_wire.py compares the two); else Werkzeug's own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flask import Response as FlaskResponse

if TYPE_CHECKING:
    from collections.abc import Iterable

    from _typeshed.wsgi import WSGIEnvironment


class Response(FlaskResponse):
    """Flask's response, with `get_wsgi_response` in one pass where it can be."""

    def get_wsgi_response(self, environ: WSGIEnvironment
                          ) -> tuple[Iterable[bytes], str, list[tuple[str, str]]]:
        status = self.status_code
        if status < 200 or status in (204, 304):
            return super().get_wsgi_response(environ)
        headers = self.headers.to_wsgi_list()
        length = None
        for name, value in headers:
            lower = name.lower()
            if lower == "content-length":
                length = value
            elif lower == "location" or lower == "content-location":
                return super().get_wsgi_response(environ)
        if length is None and self.automatically_set_content_length and self.is_sequence:
            headers.append(("Content-Length", str(sum(len(x) for x in self.iter_encoded()))))
        return self.get_app_iter(environ), self.status, headers
