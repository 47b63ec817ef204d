// chat::render_chat: the variables transformers' apply_chat_template gives a template, the
// checks of its input, and a Qwen3-style template (written here) over a conversation with a
// system prompt, tools, a tool call and its response, and thinking turned off.
#include <gtest/gtest.h>

#include <string>

#include "chat/chat_template.h"
#include "jinja_test_helpers.h"

namespace gatedlm::chat {
namespace {

using nlohmann::ordered_json;

const ordered_json kTwoMessages = ordered_json::parse(R"([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])");

std::string render_with(const std::string& source, const ordered_json& messages, const ordered_json& tools,
                        bool add_generation_prompt, const ordered_json& kwargs) {
  return render_chat(JinjaTemplate::parse(source, "chat.jinja"), messages, tools, add_generation_prompt, kwargs, "<s>", "</s>");
}

TEST(ChatTemplate, TheVariablesOfApplyChatTemplate) {
  const std::string probe =
      "{{ messages|length }}|{{ tools }}|{{ documents }}|{{ add_generation_prompt }}|{{ bos_token }}|{{ eos_token }}|"
      "{{ enable_thinking }}";
  EXPECT_EQ(render_with(probe, kTwoMessages, nullptr, true, ordered_json::parse(R"({"enable_thinking": false})")),
            "2|None|None|True|<s>|</s>|False");
  // Keyword arguments may replace the special tokens.
  EXPECT_EQ(render_with("{{ eos_token }}", kTwoMessages, nullptr, false, ordered_json::parse(R"({"eos_token": "<e>"})")), "<e>");
  EXPECT_EQ(render_with("{{ tools|length }}", kTwoMessages, ordered_json::parse("[{}, {}]"), false, nullptr), "2");
}

TEST(ChatTemplate, InputOfTheWrongShapeIsRefused) {
  const auto refused = [](const ordered_json& messages, const ordered_json& tools, const ordered_json& kwargs) {
    try {
      render_with("x", messages, tools, false, kwargs);
    } catch (const TemplateError& e) {
      return e.detail;
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(refused(ordered_json::object(), nullptr, nullptr), "messages must be a list");
  EXPECT_EQ(refused(ordered_json::parse("[1]"), nullptr, nullptr), "each message must be an object");
  EXPECT_EQ(refused(kTwoMessages, ordered_json::object(), nullptr), "tools must be a list (or null for none)");
  EXPECT_EQ(refused(kTwoMessages, nullptr, ordered_json::parse(R"({"messages": []})")),
            "the keyword arguments may not set 'messages'");
  EXPECT_EQ(refused(kTwoMessages, nullptr, ordered_json::array()), "the keyword arguments must be an object");
}

TEST(ChatTemplate, RaiseExceptionMarksTheClientsInputAsAtFault) {
  const std::string source =
      "{%- if messages[0].role != 'user' %}\n  {{- raise_exception('the first message must be from the user') }}\n{%- endif %}ok";
  EXPECT_EQ(render_with(source, kTwoMessages, nullptr, false, nullptr), "ok");
  try {
    render_with(source, ordered_json::parse(R"([{"role": "assistant", "content": "x"}])"), nullptr, false, nullptr);
    FAIL() << "expected a TemplateError";
  } catch (const TemplateError& e) {
    EXPECT_TRUE(e.raised_by_template);
    EXPECT_EQ(e.detail, "the first message must be from the user");
    EXPECT_EQ(std::string(e.what()), "chat template chat.jinja: line 2, column 22: the first message must be from the user");
  }
}

// Qwen3's structure: tools as JSON lines in the system turn, tool calls as JSON, consecutive
// tool responses in one user turn, the empty think block when thinking is off.
const char* const kQwenStyle = R"JINJA({%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}{{- messages[0].content + '\n\n' }}{%- endif %}
    {{- '# Tools\n<tools>' }}
    {%- for tool in tools %}{{- '\n' ~ (tool | tojson) }}{%- endfor %}
    {{- '\n</tools><|im_end|>\n' }}
{%- elif messages[0].role == 'system' %}
    {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}
    {%- elif message.role == 'assistant' %}
        {{- '<|im_start|>assistant\n' + (message.content or '') }}
        {%- for call in message.tool_calls | default([]) %}
            {%- set call = call.function if call.function is defined else call %}
            {{- '\n<tool_call>\n{"name": "' + call.name + '", "arguments": ' }}
            {{- call.arguments if call.arguments is string else call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == 'tool' %}
        {%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}
        {{- '\n<tool_response>\n' + message.content + '\n</tool_response>' }}
        {%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\n' }}{%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and not enable_thinking %}{{- '<think>\n\n</think>\n\n' }}{%- endif %}
{%- endif %}
)JINJA";

TEST(ChatTemplate, AQwenStyleConversationWithToolsRendersExactly) {
  const auto messages = ordered_json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [
      {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "C"}}}]},
    {"role": "tool", "content": "18 degrees"},
    {"role": "tool", "content": "light rain"},
    {"role": "user", "content": "Thanks"}])");
  const auto tools = ordered_json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
  const std::string expected =
      "<|im_start|>system\nBe brief.\n\n# Tools\n<tools>\n"
      R"({"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}})"
      "\n</tools><|im_end|>\n"
      "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
      "<|im_start|>assistant\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"C\"}}\n</tool_call>"
      "<|im_end|>\n"
      "<|im_start|>user\n<tool_response>\n18 degrees\n</tool_response>\n<tool_response>\nlight rain\n</tool_response><|im_end|>\n"
      "<|im_start|>user\nThanks<|im_end|>\n"
      "<|im_start|>assistant\n<think>\n\n</think>\n\n";
  EXPECT_EQ(render_with(kQwenStyle, messages, tools, true, ordered_json::parse(R"({"enable_thinking": false})")), expected);
  // Without tools the system prompt is a turn of its own; without the generation prompt the
  // render ends with the last turn.
  EXPECT_EQ(render_with(kQwenStyle, ordered_json::parse(R"([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])"),
                        nullptr, false, nullptr),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n");
}

}  // namespace
}  // namespace gatedlm::chat
