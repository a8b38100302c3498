"""A stream's body goes to the WSGI server as its generator (`turns.StreamedResponse`), with
no Werkzeug step a frame between: the same bytes, the body closed and the response's close
callbacks run when the server closes it, even unread; a HEAD answer still has no body."""

from __future__ import annotations

from collections.abc import Iterator

from proxy.shell.driver.turns import StreamedResponse


def _served(method: str, frames: list[bytes]) -> tuple[list[bytes], list[str]]:
    seen: list[str] = []

    def body() -> Iterator[bytes]:
        try:
            yield from frames
        finally:
            seen.append("body closed")

    response = StreamedResponse(body(), status=200, content_type="text/event-stream")
    response.call_on_close(lambda: seen.append("callback"))
    app_iter = response({"REQUEST_METHOD": method, "SERVER_NAME": "x", "SERVER_PORT": "80",
                         "wsgi.url_scheme": "http"}, lambda *args: None)
    out = list(app_iter)
    app_iter.close()  # type: ignore[attr-defined]  # as every WSGI server does
    return out, seen


def test_the_frames_go_out_as_they_are_and_the_body_is_closed():
    assert _served("POST", [b"data: a\n\n", b"", b"data: b\n\n"]) == (
        [b"data: a\n\n", b"", b"data: b\n\n"], ["body closed", "callback"])


def test_a_head_answer_has_no_body():
    assert _served("HEAD", [b"data: a\n\n"]) == ([], ["callback"])


def test_a_body_never_read_still_runs_the_close_callbacks():
    response = StreamedResponse(iter([b"x"]), status=200)
    seen: list[str] = []
    response.call_on_close(lambda: seen.append("callback"))
    response({"REQUEST_METHOD": "POST", "SERVER_NAME": "x", "SERVER_PORT": "80",
              "wsgi.url_scheme": "http"}, lambda *args: None).close()  # type: ignore[attr-defined]
    assert seen == ["callback"]
