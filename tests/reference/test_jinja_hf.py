#!/usr/bin/python3
"""gatedlm's chat templates (src/chat) against Hugging Face's JavaScript Jinja, npm
@huggingface/jinja (what transformers.js renders chat templates with).

The cases: three chat templates written here with the constructs of the real Qwen3, Qwen3.5 /
Qwen3.6 and Qwen3-Next templates (system prompts, tools as tojson lines, tool calls with
arguments as a dict or a string, tool responses grouped in one user turn, <think> reasoning
from reasoning_content or split out of the content, enable_thinking, a namespace() carrying
the last user query out of a reversed loop, loop.previtem / nextitem, a render_content macro
over text parts, |items with unpacking, raise_exception), each over several conversations;
and many small templates, one or two constructs each (filters, tests, methods, operators,
loops, macros, whitespace control). Every case must render to the same text with gatedlm
(tests/chat/jinja_render.cpp) and the peer, and every error case must fail in both.

The peer differs from Python's Jinja (which transformers uses, and whose meaning gatedlm
follows) in a few places that the cases here avoid: it prints True, None and lists the
JavaScript way (true, "", ["a"]), its strip('x') ignores the characters given, its % rounds
toward zero, it has no chained comparisons, tuples, `is float` or tests with arguments. The
unit tests (tests/unit/chat/) pin gatedlm's behaviour there. When Python's jinja2 is installed
(Debian python3-jinja2), the chat cases are also rendered with it, configured as transformers
configures it, and must match too, and so must a few chat cases where the peer differs
(arguments that are booleans, null or floats printed with |string).

@huggingface/jinja (no dependencies) is fetched once with `npm pack` into
~/.cache/gatedlm/jinja ($GATEDLM_CACHE) and run with node. Exit status 77 (ctest: skipped),
with the reason, when npm, node or the registry is unavailable.

Usage: /usr/bin/python3 tests/reference/test_jinja_hf.py --probe build/tests/jinja_render
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from engine_harness import work_directory  # noqa: E402
from npm_package import npm_package  # noqa: E402

SKIP = 77
PACKAGE = "@huggingface/jinja@0.5.11"


def fetch():
    """The package directory, or (None, reason)."""
    return npm_package(PACKAGE, "jinja", marker=os.path.join("dist", "index.js"))


# Qwen3's structure: tools as JSON lines in the system turn, the last real user query found by
# a reversed loop into a namespace, <think> kept only after it, reasoning taken from
# reasoning_content or split out of the content, tool calls as JSON, tool responses grouped.
QWEN3_STYLE = r"""{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\n\n' }}
    {%- endif %}
    {{- "# Tools\n\nYou may call these functions; their signatures:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nReply with a call as <tool_call>\n{\"name\": <name>, \"arguments\": <json>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set content = message.content %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is defined and message.reasoning_content is not none %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- elif '</think>' in message.content %}
            {%- set content = message.content.split('</think>')[-1].lstrip('\n') %}
            {%- set reasoning_content = message.content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}
                    {{- '\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %}
"""

# Qwen3.5's: content through a macro (strings, or lists of text and image parts counted in a
# namespace), checks that raise, XML-style tool calls whose arguments come from |items.
QWEN35_STYLE = r"""{%- set image_count = namespace(value=0) %}
{%- macro render_content(content, do_vision_count, is_system_content=false) %}
    {%- if content is string %}
        {{- content }}
    {%- elif content is iterable and content is not mapping %}
        {%- for item in content %}
            {%- if 'image' in item or 'image_url' in item or item.type == 'image' %}
                {%- if is_system_content %}
                    {{- raise_exception('A system message cannot hold images.') }}
                {%- endif %}
                {%- if do_vision_count %}
                    {%- set image_count.value = image_count.value + 1 %}
                {%- endif %}
                {{- 'Picture ' ~ image_count.value ~ ': <|vision_start|><|image_pad|><|vision_end|>' }}
            {%- elif 'text' in item %}
                {{- item.text }}
            {%- else %}
                {{- raise_exception('Unknown item in the content.') }}
            {%- endif %}
        {%- endfor %}
    {%- elif content is none or content is undefined %}
        {{- '' }}
    {%- else %}
        {{- raise_exception('Unexpected content type.') }}
    {%- endif %}
{%- endmacro %}
{%- if not messages %}
    {{- raise_exception('No messages given.') }}
{%- endif %}
{%- if tools and tools is iterable and tools is not mapping %}
    {{- '<|im_start|>system\n' }}
    {{- "# Tools\n\nYou can use these functions:\n\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nCall one as:\n<tool_call>\n<function=name>\n<parameter=p>\nvalue\n</parameter>\n</function>\n</tool_call>" }}
    {%- if messages[0].role == 'system' %}
        {%- set content = render_content(messages[0].content, false, true)|trim %}
        {%- if content %}
            {{- '\n\n' + content }}
        {%- endif %}
    {%- endif %}
    {{- '<|im_end|>\n' }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {%- set content = render_content(messages[0].content, false, true)|trim %}
        {{- '<|im_start|>system\n' + content + '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" %}
        {%- set content = render_content(message.content, false)|trim %}
        {%- if not(content.startswith('<tool_response>') and content.endswith('</tool_response>')) %}
            {%- set ns.multi_step_tool = false %}
            {%- set ns.last_query_index = index %}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if ns.multi_step_tool %}
    {{- raise_exception('No user query in the messages.') }}
{%- endif %}
{%- for message in messages %}
    {%- set content = render_content(message.content, true)|trim %}
    {%- if message.role == "system" %}
        {%- if not loop.first %}
            {{- raise_exception('The system message must come first.') }}
        {%- endif %}
    {%- elif message.role == "user" %}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
        {%- set reasoning_content = reasoning_content|trim %}
        {%- if loop.index0 > ns.last_query_index %}
            {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content + '\n</think>\n\n' + content }}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
        {%- if message.tool_calls and message.tool_calls is iterable and message.tool_calls is not mapping %}
            {%- for tool_call in message.tool_calls %}
                {%- if tool_call.function is defined %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {%- if loop.first %}
                    {%- if content|trim %}
                        {{- '\n\n<tool_call>\n<function=' + tool_call.name + '>\n' }}
                    {%- else %}
                        {{- '<tool_call>\n<function=' + tool_call.name + '>\n' }}
                    {%- endif %}
                {%- else %}
                    {{- '\n<tool_call>\n<function=' + tool_call.name + '>\n' }}
                {%- endif %}
                {%- if tool_call.arguments is defined %}
                    {%- for args_name, args_value in tool_call.arguments|items %}
                        {{- '<parameter=' + args_name + '>\n' }}
                        {%- set args_value = args_value | tojson | safe if args_value is mapping or (args_value is sequence and args_value is not string) else args_value | string %}
                        {{- args_value }}
                        {{- '\n</parameter>\n' }}
                    {%- endfor %}
                {%- endif %}
                {{- '</function>\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.previtem and loop.previtem.role != "tool" %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- content }}
        {{- '\n</tool_response>' }}
        {%- if not loop.last and loop.nextitem.role != "tool" %}
            {{- '<|im_end|>\n' }}
        {%- elif loop.last %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- else %}
        {{- raise_exception('Unexpected role: ' ~ message.role) }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- else %}
        {{- '<think>\n' }}
    {%- endif %}
{%- endif %}
"""

# Qwen3-Next (instruct): no reasoning; a macro for one tool call, tool responses grouped with
# loop.previtem / nextitem, a default system prompt when there is none but tools.
QWEN3_NEXT_STYLE = r"""{%- macro tool_call_json(call) -%}
{{- '{"name": "' ~ call.name ~ '", "arguments": ' -}}
{{- call.arguments if call.arguments is string else call.arguments | tojson -}}
{{- '}' -}}
{%- endmacro -%}
{%- if messages[0].role == 'system' %}
    {%- set system_message = messages[0].content %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- if tools is not none and tools|length > 0 %}
    {{- '<|im_start|>system\n' ~ (system_message if system_message is defined else 'You are a helpful assistant.') }}
    {{- '\n\n# Tools\n<tools>' }}
    {%- for tool in tools %}
        {{- '\n' ~ tool|tojson }}
    {%- endfor %}
    {{- '\n</tools><|im_end|>\n' }}
{%- elif system_message is defined %}
    {{- '<|im_start|>system\n' ~ system_message ~ '<|im_end|>\n' }}
{%- endif %}
{%- for message in loop_messages %}
    {%- if message.role == 'user' %}
        {{- '<|im_start|>user\n' ~ message.content ~ '<|im_end|>\n' }}
    {%- elif message.role == 'assistant' %}
        {{- '<|im_start|>assistant' }}
        {%- if message.content %}
            {{- '\n' ~ message.content|trim }}
        {%- endif %}
        {%- for call in message.tool_calls|default([]) %}
            {{- '\n<tool_call>\n' ~ tool_call_json(call.function if call.function is defined else call) ~ '\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == 'tool' %}
        {%- if loop.first or loop.previtem.role != 'tool' %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' ~ message.content ~ '\n</tool_response>' }}
        {%- if loop.last or loop.nextitem.role != 'tool' %}{{- '<|im_end|>\n' }}{%- endif %}
    {%- endif %}
{%- endfor %}
{{- '<|im_start|>assistant\n' if add_generation_prompt }}
"""

TEMPLATES = {"qwen3": QWEN3_STYLE, "qwen35": QWEN35_STYLE, "qwen3_next": QWEN3_NEXT_STYLE}

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city — today, in °C",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "Name of the city"},
        "days": {"type": "integer", "minimum": 1}}, "required": ["city"]}}}
SEARCH_TOOL = {"type": "function", "function": {"name": "search", "parameters": {
    "type": "object", "properties": {"query": {"type": "string"}, "sites": {"type": "array"}}}}}


def conversations():
    """(name, chat, the templates that render it: None for all)."""
    tool_turns = [
        {"role": "user", "content": "Weather in Paris and Köln?"},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}},
            {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "K\u00f6ln"}}}]},
        {"role": "tool", "content": "{\"temp\": 18}"},
        {"role": "tool", "content": "{\"temp\": 15}"},
        {"role": "assistant", "content": "Paris 18, Köln 15."}]
    multi_step = [
        {"role": "system", "content": "Use the tools."},
        {"role": "user", "content": "Find the latest release notes."},
        {"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": "search", "arguments": {"query": "release notes", "sites": ["a.org", "b.org"]}}}]},
        {"role": "tool", "content": "one hit"},
        {"role": "assistant", "content": "<think>\nRefine.\n</think>\n\nSearching again.", "tool_calls": [
            {"function": {"name": "search", "arguments": {"query": "notes 2.0", "sites": {"only": "a.org"}}}}]},
        {"role": "tool", "content": "two hits"}]
    reasoning = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "<think>\nAdd them.\n</think>\n\n4"},
        {"role": "user", "content": "And 3+3?"},
        {"role": "assistant", "content": "6", "reasoning_content": "\nAdd again.\n"},
        {"role": "user", "content": "Thanks!"}]
    # Arguments as a JSON string: Qwen3's and Qwen3-Next's templates print them as they are
    # (Qwen3.5's wants a dict, and fails in every implementation).
    string_arguments = [{"role": "user", "content": "Weather?"},
                        {"role": "assistant", "content": "", "tool_calls": [
                            {"function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]}]
    return [
        ("one_user_turn", {"messages": [{"role": "user", "content": "Hello!"}], "add_generation_prompt": True}, None),
        ("reasoning_turns", {"messages": reasoning, "add_generation_prompt": True}, None),
        ("thinking_off", {"messages": reasoning, "add_generation_prompt": True, "kwargs": {"enable_thinking": False}}, None),
        ("thinking_on", {"messages": reasoning[:3], "add_generation_prompt": False, "kwargs": {"enable_thinking": True}}, None),
        ("tool_calls", {"messages": tool_turns, "tools": [WEATHER_TOOL], "add_generation_prompt": False}, None),
        ("tools_system", {"messages": [{"role": "system", "content": "Be kind."}] + tool_turns[:4],
                          "tools": [WEATHER_TOOL, SEARCH_TOOL], "add_generation_prompt": True}, None),
        ("multi_step_tools", {"messages": multi_step, "tools": [SEARCH_TOOL], "add_generation_prompt": True}, None),
        ("unicode", {"messages": [{"role": "user", "content": "日本語で答えて 😀 \"quoted\" \\ back"}],
                     "tools": [WEATHER_TOOL], "add_generation_prompt": True, "bos_token": "<s>"}, None),
        ("string_arguments", {"messages": string_arguments, "add_generation_prompt": True}, {"qwen3", "qwen3_next"}),
    ]


def qwen35_only():
    """Chats only the Qwen3.5-style template reads: content as parts, and its checks."""
    parts = [{"type": "text", "text": "Look at "}, {"type": "image", "image": "x.png"}, {"type": "text", "text": " and "},
             {"image_url": {"url": "y.png"}}]
    return [  # (name, chat, whether the template must raise)
        ("content_parts", {"messages": [{"role": "system", "content": [{"type": "text", "text": "Describe images."}]},
                                        {"role": "user", "content": parts}], "add_generation_prompt": True}, False),
        ("system_not_first", {"messages": [{"role": "user", "content": "hi"}, {"role": "system", "content": "late"}]}, True),
        ("no_user_query", {"messages": [{"role": "system", "content": "s"}, {"role": "assistant", "content": "a"}]}, True),
        ("image_in_system", {"messages": [{"role": "system", "content": [{"type": "image"}]},
                                          {"role": "user", "content": "hi"}]}, True),
        ("bad_role", {"messages": [{"role": "user", "content": "hi"}, {"role": "robot", "content": "beep"}]}, True),
    ]


def python_only_chats():
    """Where the peer prints values the JavaScript way: arguments printed with |string."""
    args = {"flag": True, "nothing": None, "ratio": 0.5, "count": 3, "name": "x"}
    return [("scalar_arguments", {"messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": args}}]},
        {"role": "tool", "content": "done"}], "add_generation_prompt": True})]


# Small templates, one or two constructs each, with the context they render with.
CONTEXT = {"s": "  Hello World  ", "n": 7, "l": [3, 1, 2], "words": ["b", "a", "c"], "d": {"b": 2, "a": 1},
           "users": [{"name": "ann", "age": 30, "admin": True}, {"name": "bob", "age": 25, "admin": False}],
           "e": "", "nothing": None, "t": "line1\nline2\n\nline4", "u": "héllo wörld",
           "msgs": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
EXPRESSIONS = [
    # text, filters and methods
    "{{ s|trim }}|{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|",
    "{{ s|upper }}{{ s|lower }}{{ 'hello world'|title }}{{ 'hello'|capitalize }}{{ 'abc'.upper() }}{{ 'ABC'.lower() }}",
    "{{ 'hello'.replace('l', 'L') }}|{{ 'hello'|replace('l', 'L') }}|{{ 'aaa'.replace('a', 'b', 2) }}",
    "{{ 'a,b,,c'.split(',')|join('/') }}|{{ 'a b  c'.split()|join('/') }}|{{ 'a,b,c'.split(',', 1)|join('/') }}",
    "{{ 'x</think>\n\nanswer'.split('</think>')[-1].lstrip('\n') }}|{{ '\nplan\n'.strip('\n') }}",
    "{{ 'T' if 'hello'.startswith('he') }}{{ 'T' if 'hello'.endswith('lo') }}{{ 'T' if 'hello'.startswith(('x', 'h')) }}",
    "{{ t|indent(2) }}|{{ t|indent(2, true) }}|{{ t|indent(4, blank=true) }}",
    "{{ u|length }}|{{ u|upper|length }}|{{ u[1] }}|{{ u[1:4] }}|{{ u[::-1] }}",
    "{{ '42'|int + 1 }}|{{ '3.5'|float }}|{{ 3.7|int }}|{{ 'abc'|int }}|{{ -3|abs }}|{{ n|string }}|{{ 2.5|abs }}",
    "{{ x|default('dflt') }}|{{ e|default('dflt') }}|{{ e|default('dflt', true) }}|{{ n|default(0) }}",
    "{{ s|safe|trim }}|{{ e|length }}|{{ d|length }}|{{ l|length }}",
    # lists and dicts
    "{{ l|sort|join(',') }}|{{ l|sort(reverse=true)|join(',') }}|{{ words|sort|join(',') }}|{{ l|reverse|join(',') }}",
    "{{ l|first }}{{ l|last }}{{ l[0] }}{{ l[-1] }}{{ l[1:]|join }}{{ l[:-1]|join }}{{ l[::-1]|join }}{{ l[::2]|join }}",
    "{{ users|map(attribute='name')|join(', ') }}",
    "{{ users|selectattr('admin')|map(attribute='name')|join }}|{{ users|rejectattr('admin')|map(attribute='name')|join }}",
    "{{ users|selectattr('name', 'equalto', 'bob')|map(attribute='age')|first }}",
    "{{ users|sort(attribute='age')|map(attribute='name')|join(' ') }}|{{ users|sort(attribute='name', reverse=true)|first|tojson }}",
    "{% for k, v in d|items %}{{ k }}={{ v }};{% endfor %}{% for k, v in d.items() %}{{ k }}{{ v }}{% endfor %}",
    "{{ d.keys()|join }}{{ d.values()|join }}{{ d.get('a') }}{{ d.get('z', 'def') }}{{ 'N' if d.get('z') is none }}",
    "{{ [1, 2, 1, 3]|unique|join }}|{{ ['x', 'y', 'x']|unique|join }}|{{ d|dictsort|first|first }}",
    "{% for k in d %}{{ k }}{% endfor %}|{{ d['a'] }}{{ d.a }}|{{ msgs[1].content }}{{ msgs[-1]['role'] }}",
    # JSON
    "{{ users|tojson }}",
    "{{ users|tojson(indent=2) }}",
    "{{ u|tojson }}|{{ u|tojson(ensure_ascii=true) }}|{{ '😀'|tojson(ensure_ascii=true) }}",
    "{{ d|tojson(sort_keys=true) }}|{{ {'k': [1, {'j': none}], 'b': true}|tojson }}|{{ 'q\"b\\\\c\\n\\t'|tojson }}",
    "{{ [[], {}, [1, [2]]]|tojson(indent=4) }}|{{ msgs|tojson(separators=[',', ':']) }}",
    # operators
    "{{ 1 + 2 }}|{{ 7 // 2 }}|{{ 7 % 3 }}|{{ 2 ** 10 }}|{{ 7 / 2 }}|{{ 3 * 4 }}|{{ 10 - 3 - 2 }}|{{ 2 ** -1 }}|{{ 4 / 2 }}",
    "{{ 'a' ~ 1 ~ 'b' }}|{{ 'ab' + 'cd' }}|{{ ([1] + [2])|join }}|{{ (1 + 2) * 3 }}|{{ -n }}|{{ - 2 + 5 }}",
    "{{ 'T' if n > 5 and n < 10 }}{{ 'F' if not n }}{{ 'T' if n == 7 }}{{ 'T' if n != 8 }}{{ 'T' if 1 in l }}{{ 'T' if 5 not in l }}",
    "{{ 'T' if 'ell' in 'hello' }}{{ 'T' if 'a' in d }}{{ 'T' if 'z' not in d }}{{ 'T' if n >= 7 and n <= 7 }}",
    "{{ 'yes' if n > 5 else 'no' }}|{{ 'x' if false }}|{{ 'a' if n < 0 else 'b' if n < 5 else 'c' }}",
    "{{ n or 'x' }}|{{ e or 'empty' }}|{{ n and 'both' }}|{{ (e and 'no') ~ '.' }}",
    # tests
    "{% for v in [n, 'x', l, d, nothing, x, true] %}{{ 'D' if v is defined else 'U' }}{{ 'N' if v is none }}"
    "{{ 'S' if v is string }}{{ 'M' if v is mapping }}{{ 'I' if v is integer }}{{ 'B' if v is boolean }};{% endfor %}",
    "{{ 'O' if n is odd }}{{ 'E' if 8 is even }}{{ 'T' if true is true }}{{ 'F' if false is false }}{{ 'n' if n is not none }}",
    "{{ 'L' if 'abc' is lower }}{{ 'U' if 'ABC' is upper }}{{ 'S' if l is sequence }}{{ 'I' if l is iterable }}",
    # statements
    "{% for x in l %}{{ loop.index }}:{{ x }}{% if not loop.last %},{% endif %}{% endfor %}",
    "{% for x in l %}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.length }}{{ 'F' if loop.first }}{% endfor %}",
    "{% for m in users %}{{ loop.previtem.name if loop.previtem else '-' }}>{{ m.name }}>{{ loop.nextitem.name if loop.nextitem else '-' }} {% endfor %}",
    "{% for x in l if x > 1 %}{{ loop.index }}/{{ loop.length }}:{{ x }} {% endfor %}",
    "{% for x in [] %}A{% else %}empty{% endfor %}|{% for x in l %}{% else %}never{% endfor %}",
    "{% for x in l %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}",
    "{% for i in range(3) %}{{ i }}{% endfor %}{% for i in range(1, 10, 3) %}{{ i }}{% endfor %}{% for i in range(5, 0, -2) %}{{ i }}{% endfor %}",
    "{% set ns = namespace(n=0, names='') %}{% for u in users %}{% set ns.n = ns.n + u.age %}{% set ns.names = ns.names ~ u.name %}{% endfor %}{{ ns.n }}{{ ns.names }}",
    "{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}",
    "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c = [1, 2] %}{{ c|join }}",
    "{% set x %}block {{ n }}{% endset %}[{{ x }}]",
    "{% macro greet(name, greeting='Hi') %}{{ greeting }}, {{ name }}!{% endmacro %}{{ greet('Ann') }} {{ greet('Bob', 'Yo') }} {{ greet(name='Cy', greeting='Hey') }}",
    "{% macro f(x) %}{% if x > 0 %}{{ x }}{{ f(x - 1) }}{% endif %}{% endmacro %}{{ f(5) }}|{% macro g() %}  pad  {% endmacro %}[{{ g()|trim }}]",
    "{% macro m() %}{{ varargs|length }}{{ kwargs|length }}{% endmacro %}{{ m(1, 2, k=3) }}",
    "{% filter upper %}hello {{ n }}{% endfilter %}",
    "{{ namespace(x=1).x }}{{ namespace(x=1, y='b').y }}",
    "{{ strftime_now('%Y')|length }}",
    # whitespace control
    "{% for m in msgs %}\n  {% if m.role == 'user' %}\n    U: {{ m.content }}\n  {% else %}\n    A: {{ m.content }}\n  {% endif %}\n{% endfor %}\n",
    "a\n  {% if true %}\n  b\n  {% endif %}\nc\n",
    "  {{ n }}  \n{% if true %}x{% endif %}  \n  y",
    "line\n    {# comment #}\nnext{#- tight -#}   end",
    "{%- for m in msgs -%}\n   [{{ m.role }}]\n{%- endfor %}\n\n",
    "{{- ' a ' -}}  \n  {{- ' b ' }}|x  {%- if true %}y{% endif %}",
    "{% if true %}\n{% generation %}\ngen{% endgeneration %}\n{% endif %}",
    "{{ {'a': {'b': 1}}['a']['b'] }}|{{ 'a' 'b' }}|{{ \"it's\" }}|{{ 'say \"hi\"' }}|{{ 'tab\\there' }}",
]
ERRORS = ["{% endfor %}", "{% if x %}never closed", "{{ 1 + }}", "{{ x | nosuchfilter }}", "{{ nosuchfunction() }}",
          "{{ raise_exception('the template says no') }}", "{% for x in 5 %}{% endfor %}", "{{ 'unterminated }}",
          "{% for x in l %}{% endif %}", "{{ a.b( }}", "{% bogus %}", "{{ nothing + 1 }}"]


def cases():
    """(peer cases: rendered by gatedlm and the peer, python-only chat cases)."""
    peer, python_only = [], []
    for template_name, source in TEMPLATES.items():
        for chat_name, chat, templates in conversations():
            if templates is None or template_name in templates:
                peer.append({"name": f"{template_name}/{chat_name}", "template": source, "chat": chat})
    for chat_name, chat, must_fail in qwen35_only():
        peer.append({"name": f"qwen35/{chat_name}", "template": QWEN35_STYLE, "chat": chat, "must_fail": must_fail})
    for i, source in enumerate(EXPRESSIONS):
        peer.append({"name": f"expression_{i}", "template": source, "context": CONTEXT})
    for i, source in enumerate(ERRORS):
        peer.append({"name": f"error_{i}", "template": source, "context": CONTEXT, "must_fail": True})
    for chat_name, chat in python_only_chats():
        python_only.append({"name": f"qwen35/{chat_name}", "template": QWEN35_STYLE, "chat": chat})
    return peer, python_only


def python_jinja():
    """A render function with Python's jinja2 as transformers configures it, or None."""
    try:
        import jinja2.ext
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        return None

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception

    def render(case):
        chat = case["chat"]
        variables = {"messages": chat["messages"], "tools": chat.get("tools"), "documents": None,
                     "add_generation_prompt": chat.get("add_generation_prompt", False),
                     "bos_token": chat.get("bos_token", ""), "eos_token": chat.get("eos_token", ""), **chat.get("kwargs", {})}
        try:
            return {"output": env.from_string(case["template"]).render(**variables)}
        except Exception as e:  # noqa: BLE001 (any error of the template is a result here)
            return {"error": f"{type(e).__name__}: {e}"}
    return render


def run_renderers(probe, package, cases_list, work):
    path = os.path.join(work, "cases.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(cases_list, f, ensure_ascii=False)
    ours_path, peer_path = os.path.join(work, "gatedlm.json"), os.path.join(work, "peer.json")
    start = time.time()
    subprocess.run([probe, path, ours_path], check=True, timeout=120)
    ours_s = time.time() - start
    subprocess.run(["node", os.path.join(HERE, "jinja_render.mjs"), package, path, peer_path], check=True, timeout=120)
    with open(ours_path, encoding="utf-8") as f:
        ours = json.load(f)
    with open(peer_path, encoding="utf-8") as f:
        peer = json.load(f)
    return ours, peer, ours_s


def mismatch(case, ours, theirs, who):
    """A line describing how two results differ, or None when they agree."""
    if case.get("must_fail"):
        if "error" in ours and "error" in theirs:
            return None
        return f"{case['name']}: must fail in both; gatedlm: {ours}, {who}: {theirs}"
    if "error" in ours or "error" in theirs or ours["output"] != theirs["output"]:
        return f"{case['name']}:\n  gatedlm: {json.dumps(ours, ensure_ascii=False)[:600]}\n  {who}: {json.dumps(theirs, ensure_ascii=False)[:600]}"
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--probe", required=True, help="tests/chat/jinja_render, built")
    ap.add_argument("--workdir")
    args = ap.parse_args(argv)
    package, why = fetch()
    if package is None:
        print(f"SKIP: {why}")
        return SKIP
    peer_cases, python_cases = cases()
    work, tmp = work_directory(args.workdir, "gatedlm_jinja_")
    failures = []
    try:
        ours, peer, ours_s = run_renderers(os.path.abspath(args.probe), package, peer_cases + python_cases, work)
        n = len(peer_cases)
        for case, o, p in zip(peer_cases, ours[:n], peer[:n]):
            failures.append(mismatch(case, o, p, "@huggingface/jinja"))
        chats = [i for i, c in enumerate(peer_cases) if "chat" in c]
        print(f"{len(peer_cases)} cases against {PACKAGE} ({len(chats)} chats, "
              f"{sum(1 for c in peer_cases if c.get('must_fail'))} that must fail); gatedlm rendered all in {ours_s:.2f} s")
        render_python = python_jinja()
        if render_python is None:
            print("Python's jinja2 is not installed: the chats are not compared with it")
        else:
            for i in chats + list(range(n, n + len(python_cases))):
                case = (peer_cases + python_cases)[i]
                failures.append(mismatch(case, ours[i], render_python(case), "jinja2"))
            print(f"{len(chats) + len(python_cases)} chats against Python's jinja2 as transformers configures it")
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    failures = [f for f in failures if f]
    for f in failures:
        print("MISMATCH " + f)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
