"""JSON read exactly: every integer keeps its value (orjson reads one past 64 bits as a
float). Not a repair: the turn's request parsing reads clients' JSON with it too."""

from __future__ import annotations

import json
import math
from typing import Any

import orjson

from ..base import bulk_decode

# The integers orjson reads as integers and writes: int64 and uint64. It reads a longer one as
# a float (changing its value) and refuses to write one; such an integer is carried as an
# orjson.Fragment holding its literal, which orjson writes as it was written.
ORJSON_INTS = range(-(1 << 63), 1 << 64)
# Digits to "0", anything else (non-ASCII bytes included) to " ": a run of 19 digits, the
# shortest integer orjson may read as a float, is then one substring search away.
_DIGIT_RUNS = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))
_LONG_RUN = b"0" * 19
# Every this many characters of a long text are sampled first: 19 digits in a row hold two
# multiples of 9, so the sample of a text with such a run holds two digits in a row.
_SAMPLE_STEP = 9
_SAMPLED_FROM = 4_096


def exact_int(value: int) -> Any:
    """`value`, or (past 64 bits) a Fragment that orjson writes as its exact literal."""
    return value if value in ORJSON_INTS else orjson.Fragment(str(value))


def _int_literal(literal: str) -> Any:
    """A JSON integer literal read exactly (the `parse_int` of the stdlib decoder)."""
    if len(literal) < 19:
        return int(literal)
    if len(literal) <= 21 and int(literal) in ORJSON_INTS:
        return int(literal)
    return orjson.Fragment(literal)


def _digit_classes(text: str) -> bytes:
    """`text` with each ASCII digit as "0" and anything else as one or more spaces."""
    return text.encode("utf-8", "surrogatepass").translate(_DIGIT_RUNS)


def has_long_digit_run(text: str) -> bool:
    """Whether `text` holds 19 digits in a row (at C speed: translate, then search). A long
    text holds none when no digit occurs, which a one-character search per digit tells sooner,
    or when its every ninth character shows no two digits in a row (a ninth of the work)."""
    if len(text) > _SAMPLED_FROM and (not any(digit in text for digit in "0123456789")
                                      or b"00" not in _digit_classes(text[::_SAMPLE_STEP])):
        return False
    return _LONG_RUN in _digit_classes(text)


def loads(text: str) -> Any:
    """`orjson.loads(text)`, except that an integer past 64 bits keeps its exact value (see
    exact_int) instead of becoming a float: such text is read again by the stdlib decoder,
    which orjson has just shown accepts it the same way. Raises orjson.JSONDecodeError."""
    try:
        value = bulk_decode.loads(text)
    except orjson.JSONDecodeError as error:  # an integer past 308 digits is "infinity" to it
        number = error.pos < len(text) and (text[error.pos].isdigit() or text[error.pos] == "-")
        if not (number and error.msg.startswith("number is infinity")):
            raise
    else:
        if not has_long_digit_run(text):
            return value
    try:
        return _EXACT_DECODER.decode(text)
    except (ValueError, RecursionError):
        raise orjson.JSONDecodeError("not readable exactly", text, 0) from None



def _refuse_constant(name: str) -> Any:
    raise ValueError(name)


def _finite_float(literal: str) -> float:
    number = float(literal)
    if not math.isfinite(number):
        raise ValueError(literal)
    return number


# The stdlib decoder reading JSON as orjson does, but every integer exactly (see loads).
_EXACT_DECODER = json.JSONDecoder(parse_int=_int_literal, parse_float=_finite_float,
                                  parse_constant=_refuse_constant)


def _loads_lenient(text: str) -> Any:
    """`text` decoded with raw control characters allowed in strings (the stdlib decoder, not
    strict), and nothing else orjson refuses: NaN and infinities are refused, an integer past
    64 bits kept exact, a lone surrogate refused (found by writing the value back)."""
    exact = has_long_digit_run(text)
    decoder = json.JSONDecoder(strict=False, parse_constant=_refuse_constant,
                               parse_float=_finite_float if "e" in text or "E" in text else float,
                               parse_int=_int_literal if exact else int)
    try:
        value = decoder.decode(text)
        orjson.dumps(value)
    except (ValueError, TypeError, RecursionError):  # JSONEncodeError is a TypeError
        raise orjson.JSONDecodeError("not JSON", text, 0) from None
    return value


