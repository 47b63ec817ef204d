// Drives `gatedlm serve` with the official OpenAI JavaScript client (npm openai, pinned by
// tests/serve/test_openai_client.py, which starts the server and runs this):
//   node openai_chat.mjs PACKAGE_DIR BASE_URL
// A chat, the same chat streamed (its chunks must reassemble to the same text: same seed),
// a stop string, and an error the client must raise as its BadRequestError. Prints one
// "ok"/"FAIL" line per check; exits 1 on a failure.
import { pathToFileURL } from "node:url";
import path from "node:path";

const [packageDir, baseURL] = process.argv.slice(2);
const { default: OpenAI, BadRequestError } = await import(pathToFileURL(path.join(packageDir, "index.mjs")).href);
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 60000 });

let failures = 0;
function check(cond, what) {
  console.log((cond ? "ok    " : "FAIL  ") + what);
  if (!cond) failures++;
}

const request = {
  model: "gatedlm",
  messages: [{ role: "system", content: "Be terse." }, { role: "user", content: "Hi there" }],
  seed: 5, temperature: 0.8, max_completion_tokens: 12,
  chat_template_kwargs: { enable_thinking: false },  // extra fields pass through the client
};

const reply = await client.chat.completions.create(request);
const text = reply.choices[0].message.content;
check(reply.object === "chat.completion" && reply.choices[0].message.role === "assistant" && typeof text === "string",
      "openai client: chat.completions.create");
check(reply.usage.completion_tokens > 0 && reply.usage.total_tokens === reply.usage.prompt_tokens + reply.usage.completion_tokens,
      "openai client: usage");

let streamed = "", reason = null, chunks = 0;
for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) {
  chunks++;
  streamed += chunk.choices[0]?.delta?.content ?? "";
  reason = chunk.choices[0]?.finish_reason ?? reason;
}
check(chunks > 1 && streamed === text && reason === reply.choices[0].finish_reason,
      `openai client: streamed chat reassembles to the same text (${chunks} chunks)`);

// The first ASCII character that had not appeared before: a stop string there cuts the text.
const cut = [...text].findIndex((c, i) => i > 0 && c.charCodeAt(0) < 128 && ![...text].slice(0, i).includes(c));
if (cut > 0) {
  const chars = [...text];
  const stopped = await client.chat.completions.create({ ...request, stop: [chars[cut]] });
  check(stopped.choices[0].message.content === chars.slice(0, cut).join("") && stopped.choices[0].finish_reason === "stop",
        `openai client: stop ${JSON.stringify(chars[cut])}`);
} else {
  console.log("ok    openai client: stop (skipped: no fresh ASCII character in the text)");
}

try {
  await client.chat.completions.create({ ...request, n: 2 });
  check(false, "openai client: n=2 is refused");
} catch (e) {
  check(e instanceof BadRequestError && e.status === 400 && e.param === "n",
        `openai client: n=2 raises BadRequestError (${e.status} ${e.message})`);
}
process.exit(failures ? 1 : 0);
