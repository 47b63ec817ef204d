// gatedlm's chat templates (src/chat) rendering a file of cases, for the comparison with
// Hugging Face's @huggingface/jinja (tests/reference/test_jinja_hf.py, which renders the same
// cases with tests/reference/jinja_render.mjs).
//
//   jinja_render CASES.json OUT.json
//
// CASES.json: [{"name": ..., "template": ..., and either "context": {variables} (rendered
// with JinjaTemplate::render) or "chat": {"messages", "tools", "add_generation_prompt",
// "kwargs", "bos_token", "eos_token"} (rendered with chat::render_chat)}, ...].
// OUT.json: [{"name": ..., "output": text} or {"name": ..., "error": message}, ...], in order.
// Exit status 0 when every case was rendered or refused, 2 for bad arguments or input.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "chat/jinja_template.h"

namespace {

using nlohmann::ordered_json;
namespace chat = gatedlm::chat;

std::string render_case(const ordered_json& c) {
  const auto t = chat::JinjaTemplate::parse(c.at("template").get<std::string>(), c.at("name").get<std::string>());
  if (!c.contains("chat")) return t.render(c.value("context", ordered_json::object()));
  const ordered_json& chat = c.at("chat");
  return chat::render_chat(t, chat.at("messages"), chat.value("tools", ordered_json()),
                           chat.value("add_generation_prompt", false), chat.value("kwargs", ordered_json()),
                           chat.value("bos_token", ""), chat.value("eos_token", ""));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: jinja_render CASES.json OUT.json\n");
    return 2;
  }
  ordered_json cases;
  try {
    std::ifstream in(argv[1]);
    std::stringstream text;
    text << in.rdbuf();
    cases = ordered_json::parse(text.str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "jinja_render: cannot read %s: %s\n", argv[1], e.what());
    return 2;
  }
  ordered_json results = ordered_json::array();
  for (const ordered_json& c : cases) {
    ordered_json r = {{"name", c.value("name", "")}};
    try {
      r["output"] = render_case(c);
    } catch (const gatedlm::Error& e) {
      r["error"] = e.what();
    }
    results.push_back(std::move(r));
  }
  std::ofstream out(argv[2]);
  out << results.dump();
  return out ? 0 : 2;
}
