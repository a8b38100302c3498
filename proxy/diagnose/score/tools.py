"""The tools the score's suite offers (chat functions, by name): a few with demanding schemas
(nested objects, arrays of objects, enums, integers, closed objects) and a catalogue of 30+
for the turns that offer many where one fits. Data only; `suite` picks from it."""

from __future__ import annotations

from typing import Any


def _tool(name: str, description: str, properties: dict[str, Any],
          required: tuple[str, ...] = (), closed: bool = False) -> dict[str, Any]:
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = list(required)
    if closed:
        parameters["additionalProperties"] = False
    return {"type": "function",
            "function": {"name": name, "description": description, "parameters": parameters}}


_STR = {"type": "string"}
_INT = {"type": "integer"}

TOOLS: dict[str, dict[str, Any]] = {tool["function"]["name"]: tool for tool in (
    _tool("get_weather", "Get the current weather for a city.",
          {"city": {"type": "string", "description": "City name, e.g. Paris"},
           "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, ("city",)),
    _tool("get_time", "Get the current time in an IANA time zone.",
          {"timezone": {"type": "string", "description": "e.g. Europe/Paris"}}, ("timezone",)),
    _tool("get_clock", "Get the current UTC time. Takes no arguments.", {}),
    _tool("search_web", "Search the web.",
          {"query": _STR, "max_results": {"type": "integer", "minimum": 1, "maximum": 20}},
          ("query",)),
    _tool("set_timer", "Start a countdown timer.",
          {"minutes": {"type": "integer", "minimum": 1, "maximum": 600},
           "label": _STR}, ("minutes",)),
    _tool("set_thermostat", "Set the thermostat.",
          {"mode": {"type": "string", "enum": ["heat", "cool", "auto", "off"]},
           "temperature": {"type": "integer", "minimum": 10, "maximum": 30}},
          ("mode", "temperature"), closed=True),
    _tool("toggle_light", "Switch a room's light on or off.",
          {"room": _STR, "on": {"type": "boolean"}}, ("room", "on")),
    _tool("convert_currency", "Convert an amount of money.",
          {"amount": {"type": "number"}, "from_currency": {"type": "string", "pattern":
                                                           "^[A-Z]{3}$"},
           "to_currency": {"type": "string", "pattern": "^[A-Z]{3}$"}},
          ("amount", "from_currency", "to_currency")),
    _tool("create_event", "Create a calendar event.",
          {"title": _STR,
           "when": {"type": "object", "properties": {"date": _STR, "time": _STR},
                    "required": ["date", "time"], "additionalProperties": False},
           "attendees": {"type": "array", "items": _STR}},
          ("title", "when", "attendees")),
    _tool("add_to_cart", "Add products to the shopping cart.",
          {"items": {"type": "array", "minItems": 1, "items": {
              "type": "object", "properties": {"sku": _STR, "quantity": {
                  "type": "integer", "minimum": 1}},
              "required": ["sku", "quantity"], "additionalProperties": False}}},
          ("items",)),
    _tool("create_order", "Place an order for a customer.",
          {"customer": {"type": "object", "properties": {
              "name": _STR, "address": {"type": "object", "properties": {
                  "street": _STR, "city": _STR, "postcode": _STR},
                  "required": ["street", "city", "postcode"]}},
              "required": ["name", "address"]},
           "express": {"type": "boolean"}}, ("customer", "express")),
    _tool("tag_photo", "Set a photo's tags.",
          {"photo_id": _STR, "tags": {"type": "array", "items": _STR, "uniqueItems": True}},
          ("photo_id", "tags")),
    _tool("write_file", "Write a text file (the whole content).",
          {"path": _STR, "content": _STR}, ("path", "content")),
    _tool("read_file", "Read a text file.", {"path": _STR}, ("path",)),
    _tool("run_command", "Run a shell command and return its output.",
          {"command": _STR, "timeout_seconds": _INT}, ("command",)),
    _tool("replace_in_file", "Replace every match of a regular expression in a file.",
          {"path": _STR, "pattern": _STR, "replacement": _STR},
          ("path", "pattern", "replacement")),
    _tool("save_setting", "Store a setting's value (any text, JSON included).",
          {"key": _STR, "value": _STR}, ("key", "value")),
    _tool("send_message", "Send a chat message to a contact.",
          {"to": _STR, "text": _STR}, ("to", "text")),
    _tool("set_status", "Set the user's status line.", {"text": _STR}, ("text",)),
    _tool("create_reminder", "Create a reminder.",
          {"text": _STR, "at": {"type": "string", "description": "HH:MM, 24-hour"}},
          ("text", "at")),
    _tool("set_volume", "Set the speaker volume.",
          {"level": {"type": "integer", "minimum": 0, "maximum": 10}}, ("level",)),
    _tool("convert_units", "Convert a value between units of length.",
          {"value": {"type": "number"},
           "from_unit": {"type": "string", "enum": ["mi", "km", "m", "ft"]},
           "to_unit": {"type": "string", "enum": ["mi", "km", "m", "ft"]}},
          ("value", "from_unit", "to_unit")),
    _tool("get_stock_price", "Get the latest price of a stock.",
          {"symbol": {"type": "string", "description": "Ticker, e.g. AAPL"}}, ("symbol",)),
    _tool("translate_text", "Translate a text.",
          {"text": _STR, "target_language": _STR}, ("text", "target_language")),
    _tool("book_flight", "Book a flight.",
          {"origin": _STR, "destination": _STR, "date": _STR}, ("origin", "destination", "date")),
    _tool("find_restaurant", "Find restaurants nearby.",
          {"cuisine": _STR, "city": _STR}, ("city",)),
    _tool("play_music", "Play music.", {"artist": _STR, "song": _STR}, ()),
    _tool("send_email", "Send an email.",
          {"to": _STR, "subject": _STR, "body": _STR}, ("to", "subject", "body")),
    _tool("list_files", "List the files in a directory.", {"directory": _STR}, ("directory",)),
    _tool("delete_file", "Delete a file.", {"path": _STR}, ("path",)),
    _tool("git_commit", "Commit the staged changes.", {"message": _STR}, ("message",)),
    _tool("create_issue", "Open an issue in the tracker.",
          {"title": _STR, "labels": {"type": "array", "items": _STR}}, ("title",)),
    _tool("get_news", "Get the latest headlines.", {"topic": _STR}, ()),
    _tool("calculate", "Evaluate an arithmetic expression.", {"expression": _STR},
          ("expression",)),
    _tool("get_exchange_rate", "Get an exchange rate.",
          {"base": _STR, "quote": _STR}, ("base", "quote")),
    _tool("lock_door", "Lock or unlock a door.",
          {"door": _STR, "locked": {"type": "boolean"}}, ("door", "locked")),
    _tool("order_taxi", "Order a taxi.", {"pickup": _STR, "dropoff": _STR}, ("pickup",)),
    _tool("check_package", "Track a parcel.", {"tracking_number": _STR}, ("tracking_number",)),
)}

# The many-tools turns' offer: every tool above (38), in this order.
CATALOGUE: tuple[str, ...] = tuple(TOOLS)
