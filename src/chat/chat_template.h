#pragma once
// A conversation rendered into a prompt by a model's chat template, with the variables
// transformers' apply_chat_template gives it: messages, tools (none when there are none),
// documents (none), add_generation_prompt, bos_token, eos_token, and the caller's keyword
// arguments (enable_thinking, ...), which may replace bos_token and eos_token but not the
// others.
//
// The JSON arguments are nlohmann::ordered_json so that a tool's schema keeps its keys in
// the client's order (the model saw tojson write them in that order); a nlohmann::json
// converts to it, in its own (sorted) order.
#include <string>

#include <nlohmann/json.hpp>

#include "chat/jinja_limits.h"
#include "chat/jinja_template.h"

namespace gatedlm::chat {

// messages: a list of objects ({"role": ..., "content": ...}, as the template reads them);
// tools: null or a list; extra_kwargs: null or an object. Throws TemplateError for input of
// the wrong shape, the template's raise_exception (raised_by_template: the client's messages
// are at fault) and any error while rendering.
std::string render_chat(const JinjaTemplate& chat_template, const nlohmann::ordered_json& messages,
                        const nlohmann::ordered_json& tools, bool add_generation_prompt,
                        const nlohmann::ordered_json& extra_kwargs, const std::string& bos_token,
                        const std::string& eos_token, const RenderLimits& limits = {});

}  // namespace gatedlm::chat
