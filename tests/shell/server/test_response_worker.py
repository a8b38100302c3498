"""`OneSendResponses.handle_request` is gunicorn 27's gevent worker's over its async worker's,
the response class the one change: while gunicorn's two are the ones it was made from, this
passes; when an upgrade changes either, compare it with ours, carry the change over, then
put the new fingerprint here."""

from __future__ import annotations

import hashlib
import inspect

from gunicorn.workers.base_async import AsyncWorker
from gunicorn.workers.ggevent import GeventWorker

from proxy.shell.server.response import can_choose

MADE_FROM = {  # sha256 of each method's source, gunicorn 27.0.1
    "AsyncWorker.handle_request":
        "913e17a9542aa70de504548c11064a2bbaef5bccca1a756f722606c4a493a2c0",
    "GeventWorker.handle_request":
        "46750b15c6e4d4b4062b9320a2365f79db2d0113c680560b108f803ecab75869",
}


def test_gunicorn_s_handle_request_is_the_one_ours_copies():
    found = {name: hashlib.sha256(inspect.getsource(method).encode()).hexdigest()
             for name, method in (("AsyncWorker.handle_request", AsyncWorker.handle_request),
                                  ("GeventWorker.handle_request",
                                   GeventWorker.handle_request))}
    assert found == MADE_FROM
    assert can_choose()
