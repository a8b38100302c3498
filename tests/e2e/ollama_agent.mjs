// A one-turn agent on ollama-js (npm `ollama`) through the proxy's Ollama front: it offers a
// `run_command` tool, runs each call it receives with bash in the current directory, sends
// the outputs back and prints the last answer, as one JSON line
// {"calls": [{name, arguments}], "answer": "..."} for tests/e2e/test_reasks.py to read.
// Usage: node ollama_agent.mjs HOST MODEL STREAM (STREAM: "true" streams each chat)
import { execFileSync } from "node:child_process";
import { Ollama } from "ollama";

const [host, model, streamed] = process.argv.slice(2);
const ollama = new Ollama({ host });
const tools = [{
  type: "function",
  function: {
    name: "run_command",
    description: "Run a shell command in the working directory",
    parameters: {
      type: "object",
      properties: { command: { type: "string", description: "The command line" } },
      required: ["command"],
      additionalProperties: false,
    },
  },
}];

async function chat(messages) {
  if (streamed !== "true") return (await ollama.chat({ model, messages, tools })).message;
  const message = { role: "assistant", content: "", tool_calls: [] };
  for await (const part of await ollama.chat({ model, messages, tools, stream: true })) {
    message.content += part.message.content ?? "";
    message.tool_calls.push(...(part.message.tool_calls ?? []));
  }
  return message;
}

const messages = [{ role: "user", content: "Run the command this task needs, then report." }];
const calls = [];
let message = await chat(messages);
while (message.tool_calls?.length) {
  messages.push(message);
  for (const call of message.tool_calls) {
    calls.push({ name: call.function.name, arguments: call.function.arguments });
    const output = execFileSync("bash", ["-c", call.function.arguments.command ?? ""],
      { encoding: "utf8" });
    messages.push({ role: "tool", tool_name: call.function.name, content: output });
  }
  message = await chat(messages);
}
console.log(JSON.stringify({ calls, answer: message.content }));
