"""Cost benchmark for the extraction engine: realistic and pathological 1 MB inputs, each
format's openers among them, read from the formats' specs (`openers`), so a new format is
benched without an edit here.

Run `python -m bench.extraction` (add `--size N` for another size in bytes). `bench.run`'s
extract section calls `measure()` for the same numbers; tests/toolcalls/test_repaired_copy.py
reads `cases()`. Timings are printed, never asserted in tests. (Not shipped: the package and
the single file hold `proxy/` only.)
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Collection, Iterator
from typing import NamedTuple

import orjson

from proxy.toolcalls.engine import extract
from proxy.toolcalls.registry import SPECS
from proxy.toolcalls.types import ToolSchemas
from proxy.turn.closers import FAMILIES as THINKING_FAMILIES

TOOLS: ToolSchemas = {
    "read": {"type": "object", "properties": {"path": {"type": "string"},
                                              "limit": {"type": "integer"}}},
    "write": {"type": "object", "properties": {"path": {"type": "string"},
                                               "text": {"type": "string"}}},
    "get_weather": {"type": "object", "properties": {"city": {"type": "string"}}},
}



def openers() -> tuple[str, ...]:
    """Every opener a format reacts to, read from the formats' specs (none listed here): each
    hold-back opener's samples (after its lead's, when it has one), the markers, the
    structural tag's begin and end for the tool `read`, the wrapper tags open and closed, the
    markers `doctor` looks for; and the thinking tags around them (the turn's table). Nothing
    (`""`) is one too: the suffixes alone."""
    found: dict[str, None] = {"": None}
    for spec in SPECS:
        for opener in spec.openers:
            leads = ("",) if opener.lead is None else ("", *opener.lead.samples)
            found.update(dict.fromkeys(lead + text for lead in leads
                                       for text in opener.pattern.samples))
        found.update(dict.fromkeys(spec.markers))
        found.update(dict.fromkeys(marker for marker, _ in spec.doctor_markers))
        found.update(dict.fromkeys(text for tag in spec.wrapper_tags
                                   for text in (f"<{tag}>", f"</{tag}>")))
        if spec.structural_tag is not None:
            tag = spec.structural_tag
            found.update(dict.fromkeys((tag.trigger, tag.begin_for("read"), tag.end)))
    found.update(dict.fromkeys(tag for pair in THINKING_FAMILIES for tag in pair))
    return tuple(found)


OPENERS = openers()
SUFFIXES = ("", "{", '{"', '{"name":"read","arguments":{', "[", "[{", "\n", "x")


def _repeat(piece: str, size: int) -> str:
    return piece * max(1, size // max(1, len(piece)))


def _realistic(size: int) -> str:
    """A long answer: prose and code with braces, a JSON example, then two real calls."""
    paragraph = ("The function `parse(data)` returns {\"ok\": true} when the input is valid; "
                 "otherwise it raises. See the table below for [details] and edge cases.\n")
    code = "```python\ndef f(x):\n    return {\"a\": [x, {\"b\": x}]}\n```\n"
    body = _repeat(paragraph + code, size - 400)
    call = orjson.dumps({"name": "read", "arguments": {"path": "/etc/hosts"}}).decode()
    return body + f"<tool_call>\n{call}\n</tool_call>\n<tool_call>\n{call}\n</tool_call>"


def _large_calls(size: int) -> Iterator[tuple[str, str]]:
    """One call per format whose argument is a file of about `size` bytes."""
    body = _repeat('def f(x):\n    return {"a": [x, "<tool_call>"]}\n', size)
    args = orjson.dumps({"path": "a.py", "text": body}).decode()
    call = orjson.dumps({"name": "write", "arguments": {"path": "a.py", "text": body}}).decode()
    yield "large_hermes", f"<tool_call>\n{call}\n</tool_call>"
    yield "large_hermes_trailing_comma", f"<tool_call>\n{call[:-2]},}}}}\n</tool_call>"
    yield "large_qwen_xml", ("<tool_call>\n<function=write>\n<parameter=path>\na.py\n</parameter>"
                             f"\n<parameter=text>\n{body}\n</parameter>\n</function>\n</tool_call>")
    yield "large_kimi_k2", ("<|tool_call_begin|>functions.write:0<|tool_call_argument_begin|>"
                            f"{args}<|tool_call_end|>")
    yield "large_harmony", ("<|channel|>commentary to=functions.write <|constrain|>json"
                            f"<|message|>{args}<|call|>")
    yield "large_code_fence", f"Writing it.\n```json\n{call}\n```"
    yield "large_bare_json", call
    yield "large_pythonic", f'[write(path="a.py", text={orjson.dumps(body).decode()})]'
    ns = "]<]minimax[>["
    yield "large_minimax_m3", (f'{ns}<tool_call>\n{ns}<invoke name="write">{ns}<path>a.py'
                               f"{ns}</path>{ns}<text>{body}{ns}</text>{ns}</invoke>\n"
                               f"{ns}</tool_call>")
    yield "large_kimi_k3", ('<|open|>tools<|sep|><|open|>call tool="write" index="1"<|sep|>'
                            '<|open|>argument key="text" type="string"<|sep|>'
                            f"{body}<|close|>argument<|sep|><|close|>call<|sep|>"
                            "<|close|>tools<|sep|>")


def cases(size: int = 1 << 20) -> Iterator[tuple[str, str]]:
    """(label, text) for the realistic response, large calls and every pathological input."""
    yield "realistic", _realistic(size)
    yield from _large_calls(size)
    yield "unbalanced_braces", _repeat("{", size)
    yield "unbalanced_mixed", _repeat('{"a":[', size)
    yield "unterminated_string", '{"a":"' + "x" * size
    yield "deep_brackets", "[" * size
    for opener in OPENERS:
        for suffix in SUFFIXES:
            yield f"{opener!r}+{suffix!r}", _repeat(opener + suffix, size)
    yield "json_lines", _repeat('{"name":"read","arguments":{}}\n', size)
    yield "pythonic_many", "[" + _repeat('read(path="x"), ', size) + "read(path=\"x\")]"
    yield "opener_then_blob", "<tool_call>" + _repeat('{"a": "b"}, ', size)
    yield from _reviewed(size)


def _reviewed(size: int) -> Iterator[tuple[str, str]]:
    """Shapes a review found slow (quadratic, or linear at Python speed), one per finding."""
    yield "trailing_newlines", "Sure, here it is." + "\n" * size
    yield "trailing_space_lines", "Sure." + _repeat(" \n", size)
    yield "call_line_above_blank_lines", ('{"name":"read","arguments":{}}'
                                          + "\n" * size)
    frame = size // 4 - 64  # four Python-literal frames
    yield "single_quoted_lists", ("<tool_call>{'name':'read','arguments':{'path':["
                                  + _repeat("1,", frame) + "]}}</tool_call>\n") * 4
    yield "single_quoted_tuples", ("<tool_call>{'name':'read','arguments':{'path':["
                                   + _repeat("(1,", frame) + "]}}</tool_call>\n") * 4
    yield "python_names_in_frame", ('<tool_call>{"name":"read","arguments":{"path":['
                                    + _repeat("True,", size) + "None]}}</tool_call>")
    yield "raw_control_chars_in_frame", ('<tool_call>{"name":"read","arguments":{"path":"'
                                         + _repeat("x\ty\n", size) + '"}}</tool_call>')
    yield "invalid_escapes_in_frame", ('<tool_call>{"name":"read","arguments":{"path":"'
                                       + _repeat("\\q", size) + '"}}</tool_call>')
    yield "pythonic_long_list", "[read(path=[" + _repeat("1,", size) + "])]"
    row = '{"id": 1, "ok": True, "tags": ["a", "b"], "meta": {"x": None}}, '
    yield "rows_as_valid_json", ('<tool_call>{"name":"read","arguments":{"path":['  # the floor
                                 + _repeat(row, size).replace("True", "true")
                                 .replace("None", "null")[:-2] + "]}}</tool_call>")
    yield "rows_needing_repairs", ('<tool_call>{"name":"read","arguments":{"path":['
                                   + _repeat(row, size) + "]}}</tool_call>")
    yield "single_quoted_rows", ("<tool_call>{'name':'read','arguments':{'path':["
                                 + _repeat(row.replace('"', "'"), size) + "]}}</tool_call>")
    yield "unclosed_rows", ('<tool_call>{"name":"read","arguments":{"path":['
                            + _repeat("[1],", size))
    yield "rows_with_trailing_commas", ('<tool_call>{"name":"read","arguments":{"path":['
                                        + _repeat("[1,],", size) + "]}}</tool_call>")
    code = 'def f(x):\n\treturn {"a": [x, "b\'c"]}  # ]}\n'
    yield "single_quoted_file", ("<tool_call>{'name':'write','arguments':{'path':'a',"
                                 f"'text':{_repeat(code, size)!r}}}}}</tool_call>")


class Timing(NamedTuple):
    """One case's milliseconds over its runs: the median keeps a busy machine's hiccups out;
    the 90th percentile shows the collector's full sweeps, which a large heap makes costly."""

    label: str
    median: float
    p90: float


def measure(size: int = 1 << 20, tools: ToolSchemas | None = None,
            run: Callable[[str, ToolSchemas], object] | None = None, repeat: int = 3,
            only: Collection[str] = ()) -> list[Timing]:
    """The timing of `repeat` runs of `extract(text, tools)` per case (those labelled in
    `only`, when given), slowest median first."""
    chosen = TOOLS if tools is None else tools
    call = run or (lambda text, schemas: extract(text, schemas))
    timings = []
    for label, text in cases(size):
        if only and label not in only:
            continue
        runs = []
        for _ in range(max(1, repeat)):
            started = time.perf_counter()
            call(text, chosen)
            runs.append((time.perf_counter() - started) * 1000)
        p90 = statistics.quantiles(runs, n=10, method="inclusive")[-1] if len(runs) > 1 else runs[0]
        timings.append(Timing(label, statistics.median(runs), p90))
    return sorted(timings, key=lambda timing: -timing.median)


def main() -> None:
    """Print the timings; the slowest cases first."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=1 << 20)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", action="append", default=[], metavar="LABEL",
                        help="measure only this case (repeatable)")
    parser.add_argument("--resident", type=int, default=0, metavar="N",
                        help="keep N small containers alive meanwhile, as a worker's heap does")
    args = parser.parse_args()
    heap = [{"id": [i]} for i in range(args.resident)]
    timings = measure(args.size, repeat=args.repeat, only=args.only)
    if not timings:
        parser.error(f"no case is labelled {' or '.join(args.only)}")
    for label, median, p90 in timings[:args.top]:
        print(f"{median:9.2f} ms  (p90 {p90:7.2f})  {label}")
    print(f"{len(timings)} cases; slowest median {timings[0].median:.2f} ms"
          f" ({len(heap)} containers resident)")


if __name__ == "__main__":
    main()
