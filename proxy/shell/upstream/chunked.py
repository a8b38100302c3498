"""A streamed answer's chunked body read in one pull per wake-up: what the connection's
buffered reader holds (one read of the socket when it holds nothing), its whole chunks taken
at once. http.client's `read1` takes one chunk a call, through four Python calls and two
reads of its buffer (the size line, then the data) and, before the next chunk, a read of the
CRLF ending this one; a token of the streamed mode is one chunk arriving alone, so each
token paid that walk. Anything but plain whole chunks (an extension, a chunk cut by the
buffer's end, the last chunk and its trailer, a malformed size, the end of the connection)
is left to http.client's own `read1`, so that what is read, and every error, stays its."""

from __future__ import annotations

import http.client
import io
import re
from collections.abc import Callable

# A chunk's size line as http.client reads every such line (hex digits, its CRLF): any other
# line (an extension, a sign, a bare LF, spaces) goes to http.client, which reads it its way.
_SIZE = re.compile(rb"([0-9A-Fa-f]{1,16})\r\n")


def chunk_reader(response: http.client.HTTPResponse) -> Callable[[int], bytes]:
    """`response.read1` for its chunked body, not yet begun: at most `size` bytes of the
    data of the whole chunks the buffer holds, else http.client's own `read1`. A response
    whose file is not a buffered reader (one that peeks) is read by `read1` alone."""
    fp, slow = response.fp, response.read1
    if not isinstance(fp, io.BufferedReader) or response.chunk_left is not None:
        return slow
    peek, take, size_at = fp.peek, fp.read, _SIZE.match

    def read(size: int) -> bytes:
        left = response.chunk_left  # None: at a size line; 0: at the CRLF ending a chunk
        if left or response.fp is None:
            return slow(size)
        held = peek(1)  # what the buffer holds; when it holds nothing, one read
        if left == 0:  # http.client read the chunk before: its CRLF tossed as it would be
            if len(held) < 2:
                return slow(size)
            take(2)
            response.chunk_left = None
            held = peek(1)
        at = 0
        pieces = []
        end = len(held)
        while (found := size_at(held, at)) is not None:
            start = found.end()
            stop = start + int(found[1], 16)
            # (the two bytes after the data are tossed unread, as by http.client)
            if stop == start or stop + 2 > end or stop - start > size:
                break  # the last chunk, one cut by the buffer's end, or more than asked
            size -= stop - start
            pieces.append(held[start:stop])
            at = stop + 2
        if not pieces:
            return slow(size)
        take(at)  # the chunks taken: from the buffer, no read of the socket
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    return read
