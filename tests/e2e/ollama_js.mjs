// ollama-js (npm `ollama`) through the proxy's Ollama front: what a JavaScript client
// (Open WebUI's and Zed's shapes, Continue's Ollama provider) does, each step's result
// printed as one JSON line for tests/e2e/test_ollama_clients.py to read.
// Usage: node ollama_js.mjs HOST MODEL
import { Ollama } from "ollama";

const [host, model] = process.argv.slice(2);
const ollama = new Ollama({ host });
const say = (step, value) => console.log(JSON.stringify({ step, value }));
const weather = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Current weather for a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};
const ask = [{ role: "user", content: "Weather in Paris?" }];

say("list", (await ollama.list()).models.map((m) => m.model));
say("show", (await ollama.show({ model })).model_info);
const whole = await ollama.chat({ model, messages: ask, tools: [weather], stream: false });
say("chat", whole.message);
const parts = [];
for await (const part of await ollama.chat({ model, messages: ask, tools: [weather], stream: true })) {
  parts.push(part);
}
say("stream", {
  content: parts.map((p) => p.message.content).join(""),
  calls: parts.flatMap((p) => p.message.tool_calls ?? []).map((c) => c.function),
  done: parts.map((p) => p.done),
  done_reason: parts.at(-1).done_reason,
});
const back = [...ask, whole.message,
  { role: "tool", tool_name: "get_weather", content: '{"sky": "clear"}' }];
say("result", (await ollama.chat({ model, messages: back, tools: [weather], stream: false })).message);
say("think", (await ollama.chat({ model, messages: ask, think: true, stream: false })).message);
say("format", (await ollama.chat({
  model, messages: ask, stream: false,
  format: { type: "object", properties: { sky: { type: "string" } } },
})).message);
say("pulled", (await ollama.pull({ model, stream: false })).status);
try {
  await ollama.pull({ model: "llama3", stream: false });
  say("pull", null);
} catch (error) {
  say("pull", { error: error.message, status: error.status_code });
}
