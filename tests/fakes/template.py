"""The fake model's chat template: renders a chat into a prompt the way a ChatML (Qwen) template
does, so the fakes' template endpoints (vLLM `/tokenize` with `messages`, llama.cpp
`/apply-template` and `/props`) show what a real server shows: the tools' call wrapper in the
system turn and the generation prompt, which opens `<think>` when the template does.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import orjson


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


@dataclass(frozen=True)
class ChatTemplate:
    """A ChatML template with a call wrapper (`call_open`/`call_close`) and, when
    `opens_thinking`, a generation prompt that ends inside `<think>`."""

    opens_thinking: bool = False
    call_open: str = "<tool_call>"
    call_close: str = "</tool_call>"

    @property
    def generation_prompt(self) -> str:
        """What the template appends for the assistant's turn."""
        return "<|im_start|>assistant\n" + ("<think>\n" if self.opens_thinking else "")

    @property
    def source(self) -> str:
        """The template as a server shows it (Jinja), with its markers in it."""
        think = "<think>\\n" if self.opens_thinking else ""
        return (
            "{%- if tools %}<|im_start|>system\n# Tools\n<tools>{% for tool in tools %}"
            "{{ tool | tojson }}{% endfor %}</tools>\nFor each function call, return a json "
            f"object within {self.call_open}{self.call_close} XML tags<|im_end|>\n"
            "{%- endif %}{%- for message in messages %}<|im_start|>{{ message.role }}\n"
            "{{ message.content }}<|im_end|>\n{%- endfor %}"
            "{%- if add_generation_prompt %}<|im_start|>assistant\\n"
            f"{think}{{%- endif %}}"
        )

    def render(self, messages: list[Any], tools: list[Any] | None = None,
               add_generation_prompt: bool = True) -> str:
        """The prompt for `messages` (and `tools`), as the template renders it."""
        parts: list[str] = []
        if tools:
            listed = "\n".join(orjson.dumps(tool).decode() for tool in tools)
            parts.append("<|im_start|>system\n# Tools\n<tools>\n" + listed + "\n</tools>\n"
                         "For each function call, return a json object with function name "
                         f"and arguments within {self.call_open}{self.call_close} XML tags:\n"
                         f'{self.call_open}\n{{"name": <function-name>, "arguments": '
                         f"<args-json-object>}}\n{self.call_close}<|im_end|>\n")
        for message in messages:
            if not isinstance(message, dict):
                continue
            body = _text(message.get("content"))
            for call in message.get("tool_calls") or ():
                function = call.get("function") or {}
                body += (f"\n{self.call_open}\n" + orjson.dumps(
                    {"name": function.get("name"),
                     "arguments": function.get("arguments")}).decode() + f"\n{self.call_close}")
            parts.append(f"<|im_start|>{message.get('role')}\n{body}<|im_end|>\n")
        if add_generation_prompt:
            parts.append(self.generation_prompt)
        return "".join(parts)

    def pieces(self, prompt: str, count: int) -> list[str]:
        """`prompt` cut into `count` token strings (at least as many as the generation prompt
        has), the generation prompt's special tokens and words kept whole at the end."""
        tail: list[str] = []
        if prompt.endswith(self.generation_prompt):
            tail = ["<|im_start|>", "assistant", "\n"] + (
                ["<think>", "\n"] if self.opens_thinking else [])
            prompt = prompt[:-len(self.generation_prompt)]
        room = min(max(1, count - len(tail)), max(1, len(prompt)))
        size, longer = divmod(len(prompt), room)
        cuts = [i * size + min(i, longer) for i in range(room + 1)]
        return [prompt[a:b] for a, b in itertools.pairwise(cuts)] + tail
