"""The score's suite: the tool turns `doctor --score` asks, versioned, each stating what a
right answer is (the calls it holds: a tool and the arguments its prompt fixes; none: a
right answer calls nothing). Data only; `request` is the body a plain OpenAI client sends.

Change a turn, add or remove one, and `VERSION` goes up: two reports compare only on the
same version. docs/score.md lists the turns (a test keeps the list equal to `SUITE`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .tools import CATALOGUE, TOOLS

VERSION = "1"


@dataclass(frozen=True)
class Expected:
    """One call a right answer holds: the tool, and the arguments the prompt fixes (each
    must come as given; the others need only fit the schema)."""

    tool: str
    fixed: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SuiteTurn:
    """One turn of the suite: its id, what it tries, the conversation, the tools offered
    (by name), the `tool_choice` sent (None: none, the API's default), whether thinking is
    switched on, and the calls a right answer holds (empty: no call)."""

    id: str
    about: str
    messages: tuple[Mapping[str, Any], ...]
    tools: tuple[str, ...]
    calls: tuple[Expected, ...] = ()
    tool_choice: Any = None
    thinking: bool = False

    @property
    def prompt(self) -> str:
        """The turn's first user message (unique in the suite: it names the turn)."""
        return next(str(m["content"]) for m in self.messages if m["role"] == "user")

    @property
    def demanded(self) -> bool:
        """The request demands a call (`required` or a named function)."""
        return self.tool_choice == "required" or isinstance(self.tool_choice, dict)

    def request(self, model: str, max_tokens: int, stream: bool) -> dict[str, Any]:
        """The chat completion a plain OpenAI client sends for this turn."""
        body: dict[str, Any] = {"model": model, "messages": [dict(m) for m in self.messages],
                                "tools": [TOOLS[name] for name in self.tools],
                                "max_tokens": max_tokens, "temperature": 0, "stream": stream}
        if self.tool_choice is not None:
            body["tool_choice"] = self.tool_choice
        if self.thinking:
            body["chat_template_kwargs"] = {"enable_thinking": True}
        return body


def _user(text: str) -> tuple[Mapping[str, Any], ...]:
    return ({"role": "user", "content": text},)


def _named(tool: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": tool}}


def _called(call_id: str, tool: str, arguments: str) -> Mapping[str, Any]:
    """An assistant message holding one call (a turn's history)."""
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function",
         "function": {"name": tool, "arguments": arguments}}]}


def _result(call_id: str, content: str) -> Mapping[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


_WEATHER = ("get_weather",)
_HOME = ("toggle_light", "set_thermostat", "set_volume", "lock_door")
_CODE = ("read_file", "write_file", "run_command", "replace_in_file", "list_files")
_CODE_TEXT = 'def greet(name):\n    print(f"Hello, {name}!")\n    return "C:\\\\temp"\n'
_JSON_VALUE = '{"theme": "dark", "sizes": [12, 14], "path": "C:\\\\data"}'
_SYSTEM = {"role": "system", "content": "You are a home assistant. Use the tools to act; "
                                        "answer briefly."}

SUITE: tuple[SuiteTurn, ...] = (
    # -- one call, required arguments
    SuiteTurn("weather-city", "one call, one required string",
              _user("What is the weather in Paris right now? Use the get_weather tool."),
              _WEATHER, (Expected("get_weather", {"city": "Paris"}),)),
    SuiteTurn("weather-enum", "an enum value the prompt names",
              _user("Get the weather in Oslo in fahrenheit, please."),
              _WEATHER, (Expected("get_weather", {"city": "Oslo", "unit": "fahrenheit"}),)),
    SuiteTurn("time-zone", "a string with a slash",
              _user("What time is it in the America/New_York time zone?"),
              ("get_time", "get_weather"), (Expected("get_time",
                                                     {"timezone": "America/New_York"}),)),
    SuiteTurn("clock-no-arguments", "a tool that takes no arguments",
              _user("Check the current UTC time with the clock tool."),
              ("get_clock", "get_weather"), (Expected("get_clock"),)),
    SuiteTurn("search-optional", "an optional argument left to the model",
              _user("Search the web for 'vLLM tool calling'."),
              ("search_web",), (Expected("search_web", {"query": "vLLM tool calling"}),)),
    SuiteTurn("system-prompt", "a system prompt before the request",
              (_SYSTEM, {"role": "user", "content": "Turn on the light in the kitchen."}),
              _HOME, (Expected("toggle_light", {"room": "kitchen", "on": True}),)),
    # -- integers, numbers, booleans, enums
    SuiteTurn("timer-integer", "an integer",
              _user("Set a timer for 25 minutes."),
              ("set_timer",), (Expected("set_timer", {"minutes": 25}),)),
    SuiteTurn("thermostat-enum-integer", "an enum and an integer, a closed object",
              _user("Set the thermostat to heat at 21 degrees."),
              _HOME, (Expected("set_thermostat", {"mode": "heat", "temperature": 21}),)),
    SuiteTurn("light-false", "a boolean false",
              _user("Switch off the light in the bedroom."),
              _HOME, (Expected("toggle_light", {"room": "bedroom", "on": False}),)),
    SuiteTurn("volume-zero", "the integer 0",
              _user("Mute the speaker: set the volume level to 0."),
              _HOME, (Expected("set_volume", {"level": 0}),)),
    SuiteTurn("currency-number", "a decimal number and patterned strings",
              _user("Convert 12.5 EUR to USD."),
              ("convert_currency",), (Expected("convert_currency", {
                  "amount": 12.5, "from_currency": "EUR", "to_currency": "USD"}),)),
    SuiteTurn("units-enum", "two enums and a number",
              _user("How many kilometres is 3 miles? Use the converter."),
              ("convert_units",), (Expected("convert_units", {
                  "value": 3, "from_unit": "mi", "to_unit": "km"}),)),
    # -- nested objects and arrays
    SuiteTurn("event-nested", "a nested object and an array of strings",
              _user("Create a calendar event titled 'Team sync' on 2026-03-14 at 09:30 with "
                    "ana@example.com and bo@example.com."),
              ("create_event",), (Expected("create_event", {
                  "title": "Team sync", "when": {"date": "2026-03-14", "time": "09:30"},
                  "attendees": ["ana@example.com", "bo@example.com"]}),)),
    SuiteTurn("cart-objects", "an array of objects",
              _user("Add 2 of SKU A-100 and 1 of SKU B-7 to my cart."),
              ("add_to_cart",), (Expected("add_to_cart", {"items": [
                  {"sku": "A-100", "quantity": 2}, {"sku": "B-7", "quantity": 1}]}),)),
    SuiteTurn("order-deep", "objects three levels deep, a boolean",
              _user("Order for Ana Lima, shipping to 5 Rua Augusta, Lisboa, postcode "
                    "1100-048, express delivery."),
              ("create_order",), (Expected("create_order", {
                  "customer": {"name": "Ana Lima", "address": {
                      "street": "5 Rua Augusta", "city": "Lisboa", "postcode": "1100-048"}},
                  "express": True}),)),
    SuiteTurn("photo-tags", "an array of unique strings",
              _user("Tag photo IMG_2041 with beach, sunset and family."),
              ("tag_photo",), (Expected("tag_photo", {
                  "photo_id": "IMG_2041", "tags": ["beach", "sunset", "family"]}),)),
    # -- strings that are hard to write: code, paths, JSON, regexes, shell
    SuiteTurn("code-string", "a long string: code with quotes, newlines, backslashes",
              _user("Write this exact content to greet.py:\n" + _CODE_TEXT),
              _CODE, (Expected("write_file", {"path": "greet.py", "content": _CODE_TEXT}),)),
    SuiteTurn("windows-path", "a Windows path with backslashes and a space",
              _user("Read the file C:\\Users\\Ana\\Documents\\report 2024.txt"),
              _CODE, (Expected("read_file", {
                  "path": "C:\\Users\\Ana\\Documents\\report 2024.txt"}),)),
    SuiteTurn("regex-backslashes", "a regular expression with backslashes",
              _user("In src/app.py replace every match of the regex \\d+\\.\\d+ with "
                    "VERSION."),
              _CODE, (Expected("replace_in_file", {
                  "path": "src/app.py", "pattern": "\\d+\\.\\d+", "replacement": "VERSION"}),)),
    SuiteTurn("shell-pipe", "a shell command with a pipe and quotes",
              _user("Run this command: grep -rn \"TODO\" src | wc -l"),
              _CODE, (Expected("run_command", {"command": "grep -rn \"TODO\" src | wc -l"}),)),
    SuiteTurn("json-in-string", "a string holding JSON",
              _user("Save the setting 'editor' with this exact value: " + _JSON_VALUE),
              ("save_setting",), (Expected("save_setting",
                                           {"key": "editor", "value": _JSON_VALUE}),)),
    # -- non-ASCII
    SuiteTurn("non-ascii-message", "accents, a dash and CJK in a string",
              _user("Send Zoë the message: Grüße aus München — 東京で会いましょう"),
              ("send_message",), (Expected("send_message", {
                  "to": "Zoë", "text": "Grüße aus München — 東京で会いましょう"}),)),
    SuiteTurn("emoji-status", "an emoji in a string",
              _user("Set my status to: On holiday 🏖️ back Monday"),
              ("set_status",), (Expected("set_status", {"text": "On holiday 🏖️ back Monday"}),)),
    SuiteTurn("french-prompt", "a prompt in another language",
              _user("Quel temps fait-il à Genève en ce moment ?"),
              _WEATHER, (Expected("get_weather", {"city": "Genève"}),)),
    # -- several calls in one answer
    SuiteTurn("two-cities", "two calls of one tool",
              _user("What is the weather in Paris and in Tokyo? Check both at once."),
              _WEATHER, (Expected("get_weather", {"city": "Paris"}),
                         Expected("get_weather", {"city": "Tokyo"}))),
    SuiteTurn("two-tools", "two calls of two tools",
              _user("Tell me the time in Asia/Tokyo and the weather in Tokyo; call both "
                    "tools at once."),
              ("get_time", "get_weather"), (Expected("get_time", {"timezone": "Asia/Tokyo"}),
                                            Expected("get_weather", {"city": "Tokyo"}))),
    SuiteTurn("three-cities", "three calls in one answer",
              _user("Get the weather for Rome, Madrid and Vienna, all three at once."),
              _WEATHER, (Expected("get_weather", {"city": "Rome"}),
                         Expected("get_weather", {"city": "Madrid"}),
                         Expected("get_weather", {"city": "Vienna"}))),
    # -- answers that must not call
    SuiteTurn("no-call-arithmetic", "a question the model answers itself",
              _user("What is 17 times 3? Answer directly, without any tool."),
              ("calculate", "get_weather"), ()),
    SuiteTurn("no-call-thanks", "a closing remark",
              _user("Thanks, that is all I needed!"), _WEATHER, ()),
    SuiteTurn("no-call-describe", "a question about a tool, not a use of it",
              _user("In one sentence: what does the get_weather tool do? Do not call it."),
              _WEATHER, ()),
    SuiteTurn("no-call-example", "an example call asked for as text",
              _user("Show me, as a JSON code block, what a call to get_weather for Paris "
                    "would look like. Do not actually call it."),
              _WEATHER, ()),
    SuiteTurn("no-call-choice-none", "tool_choice none",
              _user("What is the weather in Lima? Just say you cannot check."),
              _WEATHER, (), tool_choice="none"),
    # -- tool_choice required and named
    SuiteTurn("required-weather", "tool_choice required",
              _user("Lima weather, please."), _WEATHER,
              (Expected("get_weather", {"city": "Lima"}),), tool_choice="required"),
    SuiteTurn("required-of-two", "tool_choice required, one of two tools fits",
              _user("I need the current time in Europe/Berlin."),
              ("get_time", "get_weather"),
              (Expected("get_time", {"timezone": "Europe/Berlin"}),), tool_choice="required"),
    SuiteTurn("named-weather", "a named tool_choice",
              _user("How is it outside in Cairo?"), _WEATHER,
              (Expected("get_weather", {"city": "Cairo"}),), tool_choice=_named("get_weather")),
    SuiteTurn("named-of-several", "a named tool_choice among several tools",
              _user("Find something about rust borrow checker errors."),
              ("search_web", "read_file", "run_command"),
              (Expected("search_web"),), tool_choice=_named("search_web")),
    # -- after a tool result
    SuiteTurn("after-result-answer", "a tool result in; the answer is text",
              (*_user("What is the weather in Paris?"),
               _called("call_w1", "get_weather", '{"city": "Paris"}'),
               _result("call_w1", '{"temperature_c": 18, "sky": "sunny"}')),
              _WEATHER, ()),
    SuiteTurn("after-result-next-call", "a tool result in; the next call follows",
              (*_user("Read config.txt, then save the value it gives for mode as the setting "
                     "'mode'."),
               _called("call_r1", "read_file", '{"path": "config.txt"}'),
               _result("call_r1", "mode = fast\nlevel = 3\n")),
              ("read_file", "save_setting"),
              (Expected("save_setting", {"key": "mode", "value": "fast"}),)),
    SuiteTurn("after-result-chain", "a tool result in; a call of another tool",
              (*_user("Get the time in Asia/Tokyo, then set a reminder 'call Ken' for 18:00."),
               _called("call_t1", "get_time", '{"timezone": "Asia/Tokyo"}'),
               _result("call_t1", '{"time": "14:05"}')),
              ("get_time", "create_reminder"),
              (Expected("create_reminder", {"text": "call Ken", "at": "18:00"}),)),
    # -- thinking switched on
    SuiteTurn("thinking-call", "thinking on, then a call",
              _user("Think it over, then get the weather in Berlin."), _WEATHER,
              (Expected("get_weather", {"city": "Berlin"}),), thinking=True),
    SuiteTurn("thinking-no-call", "thinking on, no call",
              _user("Think briefly: is 91 a prime number? Answer yes or no, no tool."),
              ("calculate",), (), thinking=True),
    SuiteTurn("thinking-two-calls", "thinking on, two calls",
              _user("Think first, then switch on the kitchen light and set the volume to 4."),
              _HOME, (Expected("toggle_light", {"room": "kitchen", "on": True}),
                      Expected("set_volume", {"level": 4})), thinking=True),
    # -- many tools offered, one fits
    SuiteTurn("many-tools-units", "38 tools offered, one fits",
              _user("Convert 10 km to miles."), CATALOGUE,
              (Expected("convert_units", {"value": 10, "from_unit": "km", "to_unit": "mi"}),)),
    SuiteTurn("many-tools-stock", "38 tools offered, one fits",
              _user("What is NVDA trading at?"), CATALOGUE,
              (Expected("get_stock_price", {"symbol": "NVDA"}),)),
    SuiteTurn("many-tools-parcel", "38 tools offered, one fits",
              _user("Where is my parcel 1Z999AA10123456784?"), CATALOGUE,
              (Expected("check_package", {"tracking_number": "1Z999AA10123456784"}),)),
    SuiteTurn("many-tools-no-call", "38 tools offered, none fits",
              _user("Write a haiku about autumn. No tools needed."), CATALOGUE, ()),
)

BY_PROMPT: dict[str, SuiteTurn] = {turn.prompt: turn for turn in SUITE}
assert len(BY_PROMPT) == len(SUITE), "each turn's first user message names it"
assert len({turn.id for turn in SUITE}) == len(SUITE)
