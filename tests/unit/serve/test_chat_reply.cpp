// serve::split_chat_reply: reasoning, Qwen3 tool calls and content split out of a chat
// model's text; and serve::parse_chat: a conversation checked and rendered by a template.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "../fuzz/fixed_tokenizer_json.h"
#include "io/tokenizer.h"
#include "serve/chat_reply.h"
#include "serve/chat_request.h"
#include "test_files.h"

namespace gatedlm::serve {
namespace {

using nlohmann::json;

TEST(ChatReply, PlainTextIsLeftAsItIs) {
  const ChatReply r = split_chat_reply(" Hello\n", false, true, "call_x");
  EXPECT_EQ(r.content, " Hello\n");
  EXPECT_FALSE(r.reasoning);
  EXPECT_TRUE(r.tool_calls.empty());
}

TEST(ChatReply, LeadingThinkBlockIsReasoning) {
  const ChatReply r = split_chat_reply("<think>\nLet me see.\n</think>\n\nIt is 4.", false, false, "c");
  ASSERT_TRUE(r.reasoning);
  EXPECT_EQ(*r.reasoning, "Let me see.");
  EXPECT_EQ(r.content, "It is 4.");
}

TEST(ChatReply, LoneCloseAfterAnOpenedThinkInThePrompt) {
  const ChatReply r = split_chat_reply("Pondering.\n</think>\n\nAnswer.", true, false, "c");
  ASSERT_TRUE(r.reasoning);
  EXPECT_EQ(*r.reasoning, "Pondering.");
  EXPECT_EQ(r.content, "Answer.");
  // Without the prompt's <think>, a lone </think> is just text.
  EXPECT_FALSE(split_chat_reply("a</think>b", false, false, "c").reasoning);
  // Cut short before closing: all of it is reasoning.
  const ChatReply cut = split_chat_reply("still thinking", true, false, "c");
  EXPECT_EQ(*cut.reasoning, "still thinking");
  EXPECT_EQ(cut.content, "");
}

TEST(ChatReply, ToolCallsBecomeOpenAIToolCalls) {
  const std::string text =
      "I will look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"now\", \"arguments\": \"{}\"}\n</tool_call>";
  const ChatReply r = split_chat_reply(text, false, true, "call_7");
  EXPECT_EQ(r.content, "I will look.");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0]["id"], "call_7_0");
  EXPECT_EQ(r.tool_calls[0]["type"], "function");
  EXPECT_EQ(r.tool_calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(r.tool_calls[0]["function"]["arguments"].get<std::string>()),
            json({{"city", "Paris"}, {"days", 2}}));
  EXPECT_EQ(r.tool_calls[1]["function"]["arguments"], "{}");
}

TEST(ChatReply, BadToolCallJsonStaysInTheContent) {
  const std::string text = "<tool_call>{not json}</tool_call>";
  const ChatReply r = split_chat_reply(text, false, true, "c");
  EXPECT_TRUE(r.tool_calls.empty());
  EXPECT_EQ(r.content, text);
  // Unclosed: left alone too; and without tools offered nothing is parsed.
  EXPECT_TRUE(split_chat_reply("<tool_call>{\"name\": \"f\"}", false, true, "c").tool_calls.empty());
  EXPECT_TRUE(split_chat_reply("<tool_call>{\"name\": \"f\"}</tool_call>", false, false, "c").tool_calls.empty());
}

TEST(ChatReply, ThinkingThenToolCall) {
  const ChatReply r = split_chat_reply(
      "<think>\nneed data\n</think>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", false, true,
      "c");
  EXPECT_EQ(*r.reasoning, "need data");
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.tool_calls.size(), 1u);
}

// The reply fed in pieces of `piece` bytes, its deltas added up.
ChatReply streamed(const std::string& text, size_t piece, bool thinking_open, bool tools) {
  ChatReplyStream stream(thinking_open, tools, "c");
  ChatReply r;
  auto add = [&](ChatDelta d) {
    r.content += d.content;
    if (!d.reasoning.empty()) r.reasoning = r.reasoning.value_or("") + d.reasoning;
    for (json& c : d.tool_calls) {
      c.erase("index");
      r.tool_calls.push_back(c);
    }
  };
  for (size_t at = 0; at < text.size(); at += piece) add(stream.push(std::string_view(text).substr(at, piece)));
  add(stream.finish());
  if (stream.has_reasoning() && !r.reasoning) r.reasoning = "";
  return r;
}

TEST(ChatReply, StreamedInPiecesAddsUpToTheWholeReply) {
  const std::string call = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>";
  const std::vector<std::string> texts = {
      " Hello\n", "<think>\nLet me see.\n\n more </think>\n\nIt is 4.\n", "  <thin", "<think>",
      "a</think>b", "Answer. " + call + "\n\n and more " + call + "\n", "<tool_call>{bad}</tool_call> x",
      "<tool_call>{\"name\": \"f\"}", "text <tool_ca", "<think>\nneed data\n</think>\n\n" + call,
      "x < y and <t", "  \n  "};
  for (const std::string& text : texts)
    for (bool open : {false, true})
      for (bool tools : {false, true}) {
        const ChatReply whole = split_chat_reply(text, open, tools, "c");
        for (size_t piece : {1, 2, 3, 7}) {
          const ChatReply s = streamed(text, piece, open, tools);
          const std::string what = text + " (piece " + std::to_string(piece) + ", open " + std::to_string(open) +
                                   ", tools " + std::to_string(tools) + ")";
          EXPECT_EQ(s.content, whole.content) << what;
          EXPECT_EQ(s.reasoning, whole.reasoning) << what;
          EXPECT_EQ(s.tool_calls, whole.tool_calls) << what;
        }
      }
}

TEST(ChatReply, PartialTagsAreHeldBackUntilDecided) {
  ChatReplyStream stream(false, true, "c");
  EXPECT_TRUE(stream.push("<thi").empty());
  const ChatDelta d = stream.push("nk>hm</th");
  EXPECT_EQ(d.reasoning, "hm");
  EXPECT_TRUE(stream.push("ink>\n\nOK <tool").content == "OK");
  const ChatDelta call = stream.push("_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>");
  ASSERT_EQ(call.tool_calls.size(), 1u);
  EXPECT_EQ(call.tool_calls[0]["index"], 0);
  EXPECT_EQ(call.tool_calls[0]["function"]["arguments"], "{}");
  EXPECT_TRUE(stream.finish().empty());
}

constexpr const char* kChatML =
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor -%}"
    "{%- if tools %}tools:{{ tools | length }}\n{% endif -%}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% else %}<think>\n{% endif %}"
    "{%- endif %}";

struct ParseChat : ::testing::Test {
  std::unique_ptr<io::Tokenizer> tok = io::byte_tokenizer();
  chat::JinjaTemplate tmpl = chat::JinjaTemplate::parse(kChatML, "test");
  ChatRequest parse(const json& body) {
    return parse_chat(body.dump(), tmpl, chat_tokens(*tok), *tok, tok->vocab_size(), 4096, 1);
  }
  std::string param_of(const json& body) {
    try {
      parse(body);
    } catch (const InvalidRequest& e) {
      return e.param;
    }
    return "(accepted)";
  }
};

TEST_F(ParseChat, RendersPartsNullContentAndKwargs) {
  const json parts = {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}};
  const ChatRequest r = parse({{"messages",
                                {{{"role", "user"}, {"content", parts}}, {{"role", "assistant"}, {"content", nullptr}}}},
                               {"chat_template_kwargs", {{"enable_thinking", false}}},
                               {"max_completion_tokens", 5}});
  EXPECT_EQ(r.prompt_text,
            "<|im_start|>user\nab<|im_end|>\n<|im_start|>assistant\n<|im_end|>\n<|im_start|>assistant\n<think>\n\n"
            "</think>\n\n");
  EXPECT_FALSE(r.thinking_open);
  EXPECT_EQ(r.completion.rules.max_tokens, 5);
  EXPECT_EQ(r.completion.prompt.size(), r.prompt_text.size());  // bytes, no BOS added
  EXPECT_TRUE(parse({{"messages", {{{"role", "user"}, {"content", "x"}}}}}).thinking_open);
}

TEST_F(ParseChat, RefusesBadMessagesNamingTheField) {
  EXPECT_EQ(param_of({{"messages", "hi"}}), "messages");
  EXPECT_EQ(param_of({{"messages", json::array()}}), "messages");
  EXPECT_EQ(param_of({{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}), "messages");
  EXPECT_EQ(param_of({{"messages", {{{"role", "user"}, {"content", 3}}}}}), "messages");
  EXPECT_EQ(param_of({{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}}}), "messages");
  EXPECT_EQ(param_of({{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"n", 2}}), "n");
  EXPECT_EQ(param_of({{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"tools", 1}}), "tools");
  EXPECT_EQ(param_of({{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"chat_template_kwargs", 1}}),
            "chat_template_kwargs");
  EXPECT_EQ(param_of({{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"prompt", "x"}}), "prompt");
  EXPECT_EQ(param_of({{"messages", {{{"role", "user"}, {"content", std::string(5000, 'x')}}}}}), "messages");
}

TEST_F(ParseChat, TemplateRaiseIsAClientError) {
  tmpl = chat::JinjaTemplate::parse("{{ raise_exception('no system role here') }}", "t");
  try {
    parse({{"messages", {{{"role", "user"}, {"content", "x"}}}}});
    FAIL() << "accepted";
  } catch (const InvalidRequest& e) {
    EXPECT_EQ(e.param, "messages");
    EXPECT_NE(std::string(e.what()).find("no system role here"), std::string::npos) << e.what();
  }
}

// A tokenizer.json with ChatML's <|im_end|> as a special token: the chat stops there too;
// bos_token and eos_token are its <|endoftext|>.
TEST(ChatTokens, ImEndStopsAChatWhenTheTokenizerHasIt) {
  testing::TempDir dir("chat_tokens");
  json j = json::parse(fuzz::kFixedTokenizerJson);
  testing::write_file(dir / "plain.json", j.dump());
  j["added_tokens"].push_back({{"id", 266}, {"content", "<|im_end|>"}, {"special", true}, {"single_word", false},
                               {"lstrip", false}, {"rstrip", false}, {"normalized", false}});
  testing::write_file(dir / "chatml.json", j.dump());
  const std::unique_ptr<io::Tokenizer> plain = io::Tokenizer::load((dir / "plain.json").string());
  const std::unique_ptr<io::Tokenizer> chatml = io::Tokenizer::load((dir / "chatml.json").string());
  EXPECT_EQ(chat_tokens(*plain).end_of_turn, "");
  const ChatTokens t = chat_tokens(*chatml);
  EXPECT_EQ(t.end_of_turn, "<|im_end|>");
  EXPECT_EQ(t.eos, "<|endoftext|>");
  EXPECT_EQ(t.bos, "<|endoftext|>");
  const auto tmpl = chat::JinjaTemplate::parse(kChatML, "test");
  const json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"stop", "x"}};
  const ChatRequest r = parse_chat(body.dump(), tmpl, t, *chatml, chatml->vocab_size(), 4096, 1);
  EXPECT_EQ(r.completion.rules.stop, (std::vector<std::string>{"x", "<|im_end|>"}));
  EXPECT_EQ(r.completion.prompt.front(), 265);  // <|im_start|>, one token: the template's text is encoded as is
}

}  // namespace
}  // namespace gatedlm::serve
