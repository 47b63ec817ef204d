// Renders a file of cases with Hugging Face's JavaScript Jinja (npm @huggingface/jinja), the
// independent implementation gatedlm's chat templates (src/chat) are checked against.
//   node jinja_render.mjs PACKAGE_DIR CASES.json OUT.json
// CASES.json and OUT.json as tests/chat/jinja_render.cpp reads and writes them. A "chat" case
// gets the variables transformers' apply_chat_template passes (what chat::render_chat does).
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [pkg, casesPath, outPath] = process.argv.slice(2);
const { Template } = await import(pathToFileURL(join(pkg, "dist", "index.js")).href);

function contextOf(c) {
  if (!c.chat) return c.context ?? {};
  const chat = c.chat;
  return {
    messages: chat.messages,
    tools: chat.tools ?? null,
    documents: null,
    add_generation_prompt: chat.add_generation_prompt ?? false,
    bos_token: chat.bos_token ?? "",
    eos_token: chat.eos_token ?? "",
    ...(chat.kwargs ?? {}),
  };
}

const cases = JSON.parse(readFileSync(casesPath, "utf8"));
const results = cases.map((c) => {
  try {
    return { name: c.name, output: new Template(c.template).render(contextOf(c)) };
  } catch (e) {
    return { name: c.name, error: String(e && e.message ? e.message : e) };
  }
});
writeFileSync(outPath, JSON.stringify(results));
