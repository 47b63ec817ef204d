// A tool call through the official OpenAI JavaScript client (npm openai, pinned by
// tests/serve/test_openai_client.py, which trains a tiny model to answer SPEC's question
// with SPEC's call, serves it and runs this):
//   node openai_tool_call.mjs PACKAGE_DIR BASE_URL SPEC_JSON
// SPEC: {tool, question, call: {name, arguments}, tool_result, prompt_tokens,
// follow_up_prompt_tokens}. Greedy decoding, so every answer is the model's one answer.
// Checks the whole answer's message.tool_calls, the streamed answer reassembled by hand
// from delta.tool_calls and by the client's chat.completions.stream() helper, and a
// follow-up turn carrying the assistant's tool_calls and a role "tool" message. Prints one
// "ok"/"FAIL" line per check; exits 1 on a failure.
import { isDeepStrictEqual } from "node:util";
import { pathToFileURL } from "node:url";
import path from "node:path";

const [packageDir, baseURL, specJson] = process.argv.slice(2);
const spec = JSON.parse(specJson);
const { default: OpenAI } = await import(pathToFileURL(path.join(packageDir, "index.mjs")).href);
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 60000 });

let failures = 0;
function check(cond, what) {
  console.log((cond ? "ok    " : "FAIL  ") + what);
  if (!cond) failures++;
}
// One tool call as the client hands it over: the function's name and its arguments, parsed.
function isTheCall(call) {
  if (!call || call.type !== "function" || typeof call.id !== "string" || !call.id) return false;
  let args;
  try {
    args = JSON.parse(call.function.arguments);
  } catch {
    return false;
  }
  return call.function.name === spec.call.name && isDeepStrictEqual(args, spec.call.arguments);
}
const show = (x) => JSON.stringify(x);

const request = {
  model: "gatedlm",
  messages: [{ role: "user", content: spec.question }],
  tools: [spec.tool],
  temperature: 0, max_completion_tokens: 120,
};

const reply = await client.chat.completions.create(request);
const choice = reply.choices[0], message = choice.message;
check(reply.usage.prompt_tokens === spec.prompt_tokens,
      `openai client: the tool-call prompt is the one the model learnt (${reply.usage.prompt_tokens} tokens)`);
check(message.tool_calls?.length === 1 && isTheCall(message.tool_calls[0]),
      `openai client: message.tool_calls[0] is ${spec.call.name}(${show(spec.call.arguments)}) (${show(message.tool_calls)})`);
// OpenAI: finish_reason "tool_calls" when the model called a tool; content null when it said nothing else.
check(choice.finish_reason === "tool_calls" && message.content === null && message.role === "assistant",
      `openai client: finish_reason "tool_calls", content null (${choice.finish_reason}, ${show(message.content)})`);

// The stream reassembled by hand: tool call deltas merged by index, arguments concatenated.
const calls = [];
let content = "", reason = null, chunks = 0;
for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) {
  chunks++;
  const c = chunk.choices[0];
  if (!c) continue;
  content += c.delta?.content ?? "";
  for (const d of c.delta?.tool_calls ?? []) {
    const call = (calls[d.index] ??= { id: "", type: "", function: { name: "", arguments: "" } });
    if (d.id) call.id = d.id;
    if (d.type) call.type = d.type;
    call.function.name += d.function?.name ?? "";
    call.function.arguments += d.function?.arguments ?? "";
  }
  reason = c.finish_reason ?? reason;
}
check(calls.length === 1 && isTheCall(calls[0]) && content === "" && reason === "tool_calls",
      `openai client: streamed delta.tool_calls reassemble to the same call, finish_reason "tool_calls" (${chunks} chunks: ${show(calls)}, ${reason})`);

// The client's own accumulation: chat.completions.stream() and its final completion.
const helper = client.chat.completions.stream(request);
let argumentsDone = null;
helper.on("tool_calls.function.arguments.done", (e) => { argumentsDone = e; });
const final = await helper.finalChatCompletion();
const fc = final.choices[0];
check(fc.message.tool_calls?.length === 1 && isTheCall(fc.message.tool_calls[0]) && fc.finish_reason === "tool_calls" &&
      argumentsDone?.name === spec.call.name && isDeepStrictEqual(JSON.parse(argumentsDone.arguments), spec.call.arguments),
      `openai client: chat.completions.stream() assembles the same call (${show(fc.message.tool_calls)}, ${fc.finish_reason})`);

// The next turn: the assistant's call as it came back, and the tool's result for its id.
try {
  const followUp = await client.chat.completions.create({
    ...request, max_completion_tokens: 8,
    messages: [...request.messages, message,
               { role: "tool", tool_call_id: message.tool_calls?.[0]?.id, content: spec.tool_result }],
  });
  check(followUp.object === "chat.completion" && followUp.choices[0].message.role === "assistant" &&
        followUp.usage.prompt_tokens === spec.follow_up_prompt_tokens,
        `openai client: a follow-up with the assistant's tool_calls and a role "tool" message is answered (prompt ${followUp.usage.prompt_tokens} tokens)`);
} catch (e) {
  check(false, `openai client: a follow-up with the assistant's tool_calls and a role "tool" message is answered (${e.status} ${e.message})`);
}
process.exit(failures ? 1 : 0);
