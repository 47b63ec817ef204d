#include "chat/chat_template.h"

#include <string_view>

#include "chat/jinja_error.h"
#include "chat/jinja_json.h"

namespace gatedlm::chat {

namespace {

// The names apply_chat_template passes itself: keyword arguments cannot replace them (in
// Python, render(messages=..., **kwargs) with kwargs["messages"] is a TypeError).
constexpr std::string_view kReserved[] = {"messages", "tools", "documents", "add_generation_prompt"};

void check_shapes(const JinjaTemplate& t, const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                  const nlohmann::ordered_json& extra_kwargs) {
  const auto refuse = [&](const std::string& why) { throw TemplateError(t.origin(), 0, 0, why, false); };
  if (!messages.is_array()) refuse("messages must be a list");
  for (const auto& m : messages)
    if (!m.is_object()) refuse("each message must be an object");
  if (!tools.is_null() && !tools.is_array()) refuse("tools must be a list (or null for none)");
  if (!extra_kwargs.is_null() && !extra_kwargs.is_object()) refuse("the keyword arguments must be an object");
  for (std::string_view name : kReserved)
    if (extra_kwargs.is_object() && extra_kwargs.contains(std::string(name)))
      refuse(cat("the keyword arguments may not set '", name, "'"));
}

}  // namespace

std::string render_chat(const JinjaTemplate& chat_template, const nlohmann::ordered_json& messages,
                        const nlohmann::ordered_json& tools, bool add_generation_prompt,
                        const nlohmann::ordered_json& extra_kwargs, const std::string& bos_token,
                        const std::string& eos_token, const RenderLimits& limits) {
  check_shapes(chat_template, messages, tools, extra_kwargs);
  Object context;
  try {
    context.set("messages", value_from_json(messages));
    context.set("tools", value_from_json(tools));
    context.set("documents", Value::none());
    context.set("add_generation_prompt", Value::boolean(add_generation_prompt));
    context.set("bos_token", Value::string(bos_token));
    context.set("eos_token", Value::string(eos_token));
    if (extra_kwargs.is_object())
      for (auto it = extra_kwargs.begin(); it != extra_kwargs.end(); ++it) context.set(it.key(), value_from_json(it.value()));
  } catch (const EvalError& e) {
    throw TemplateError(chat_template.origin(), 0, 0, e.what(), false);
  }
  return chat_template.render_values(context, limits);
}

}  // namespace gatedlm::chat
