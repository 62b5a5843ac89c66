#!/usr/bin/env python3
"""Regenerates tests/fixtures/tokenizer/chat_cases.jsonl with Python's jinja2, configured the way
Hugging Face transformers renders chat templates (trim_blocks, lstrip_blocks, loop controls,
an immutable sandbox, its own tojson, raise_exception and strftime_now).

    python3 scripts/tokenizer-fixtures/gen_chat.py      (needs python3-jinja2)

Each output line: {"name", "template" (a file in chat_templates/) or "source" (inline),
"context" (the variables), "now" (seconds since the epoch, what strftime_now formats),
and "output" (the rendering) or "error" (jinja2 raised)}.
"""
import json
import os
from datetime import datetime

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "..", "..", "tests", "fixtures", "tokenizer")
TEMPLATES = os.path.join(FIX, "chat_templates")
NOW = 1736942400  # 2025-01-15 12:00 UTC: the same calendar day in every time zone within +-11h


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def strftime_now(fmt):
        return datetime.fromtimestamp(NOW).strftime(fmt)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def base_context(messages, tools=None, add_generation_prompt=True, **extra):
    ctx = {"messages": messages, "tools": tools, "add_generation_prompt": add_generation_prompt,
           "bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}
    ctx.update(extra)
    return ctx


WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Get the \"current\" weather\nin a city \\ region",
           "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name, e.g. Zürich"},
                                                            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                                                            "days": {"type": "integer", "minimum": 1, "maximum": 14.5}},
                          "required": ["city"]}}}
SEARCH = {"type": "function", "function": {"name": "search", "description": "Search the web", "parameters": {"type": "object", "properties": {}}}}

SYS = {"role": "system", "content": "You are a helpful assistant.  \n"}
U1 = {"role": "user", "content": "What is the capital of France?"}
A1 = {"role": "assistant", "content": "  Paris is the capital of France.\n\n"}
U2 = {"role": "user", "content": "\n\tAnd of Japan? 日本の首都は？ 🗾\u3000"}
CALL = {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich", "days": 3}}}]}
TOOL_STR = {"role": "tool", "content": "{\"temp\": 21.5, \"sky\": \"clear\"}"}
TOOL_DICT = {"role": "ipython", "content": {"temp": 21.5, "ok": True, "none": None, "list": [1, 2.0, "x"]}}
BUILTIN_CALL = {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "brave_search", "arguments": {"query": "weather in Paris", "lang": "en"}}}]}

conversations = {
    "user_only": [U1],
    "system_user": [SYS, U1],
    "multi_turn": [SYS, U1, A1, U2],
    "no_system_multi": [U1, A1, U2],
    "system_only": [SYS],
    "specials_in_content": [{"role": "user", "content": "Say <|eot_id|> and <|start_header_id|> literally."}],
    "whitespace_content": [{"role": "system", "content": "\n\n  \u00a0spaced\u2003 \n"}, {"role": "user", "content": " \r\n x \x0b"}],
    "quotes_backslashes": [{"role": "user", "content": "He said \"hi\" and 'bye' \\ ok {{ not a tag }} {% nope %}"}],
    "tool_flow": [SYS, {"role": "user", "content": "Weather in Zürich?"}, CALL, TOOL_STR],
    "tool_flow_dict": [{"role": "user", "content": "Weather?"}, CALL, TOOL_DICT, {"role": "assistant", "content": "It is 21.5 degrees."}],
    "custom_role": [{"role": "reviewer", "content": "Looks good."}, U1],
}

cases = []


def add(name, template, ctx, source=None):
    cases.append((name, template, ctx, source))


for tmpl in ["llama3", "llama31", "llama32"]:
    for cname, msgs in conversations.items():
        if tmpl == "llama3" and "tool" in cname:
            continue
        add(f"{tmpl}/{cname}", tmpl, base_context(msgs))
    add(f"{tmpl}/no_generation_prompt", tmpl, base_context([SYS, U1, A1], add_generation_prompt=False))

for tmpl in ["llama31", "llama32"]:
    add(f"{tmpl}/date_string", tmpl, base_context([SYS, U1], date_string="03 Mar 2031"))
    add(f"{tmpl}/tools_in_user_message", tmpl, base_context([SYS, U1, A1, U2], tools=[WEATHER, SEARCH]))
    add(f"{tmpl}/tools_in_system", tmpl, base_context([SYS, U1], tools=[WEATHER], tools_in_user_message=False))
    add(f"{tmpl}/tools_no_user_message", tmpl, base_context([SYS], tools=[WEATHER]))  # raise_exception
    add(f"{tmpl}/tool_call_with_tools", tmpl, base_context([U1, CALL, TOOL_STR], tools=[WEATHER], tools_in_user_message=False))
    add(f"{tmpl}/two_tool_calls", tmpl, base_context([U1, {"role": "assistant", "content": "", "tool_calls": CALL["tool_calls"] * 2}]))
    add(f"{tmpl}/custom_tools", tmpl, base_context([U1, U2], custom_tools=[SEARCH]))
add("llama31/builtin_tools", "llama31", base_context([SYS, {"role": "user", "content": "Search it"}, BUILTIN_CALL, {"role": "ipython", "content": "Sunny."}],
                                                     builtin_tools=["brave_search", "code_interpreter", "wolfram_alpha"]))
add("llama31/builtin_and_custom_tools", "llama31", base_context([U1, CALL], tools=[WEATHER], builtin_tools=["brave_search"]))

# Smaller templates for the language features the interpreter implements.
features = {
    "ws_control": ("a  {{- ' b ' -}}  c\n  {%- if true %}\n    d\n  {% endif -%}\n  e {# comment #}\nf\n    {# lone comment #}\ng", {}),
    "plus_modifiers": ("x\n    {%+ if true +%}\n    y\n  {%- endif %}\nz", {}),
    "trailing_newline": ("line\n", {}),
    "crlf_source": ("a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc", {}),
    "loop_vars": ("{% for x in items %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }}:{{ x }};{% endfor %}", {"items": ["a", "b", "c"]}),
    "loop_else_filter": ("{% for x in items if x > 1 %}{{ x }}{% else %}none{% endfor %}|{% for x in [] %}{{ x }}{% else %}empty{% endfor %}", {"items": [1, 2, 3]}),
    "loop_controls": ("{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    "scoping": ("{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}{% if true %}{% set y = 5 %}{% endif %}{{ y }}", {}),
    "namespace": ("{% set ns = namespace(n=0, s='') %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }} {{ ns.s }}", {}),
    "slicing": ("{{ items[1:] }}{{ items[:-1] }}{{ items[::-1] }}{{ items[::2] }}{{ 'héllo'[1:3] }}{{ 'abc'[-1] }}{{ items[10] }}", {"items": [1, 2, 3, 4]}),
    "arith": ("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1 + 2.5 }} {{ 3 * 'ab' }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1.0 }} {{ 1e-7 }}", {}),
    "compare_logic": ("{{ 1 < 2 }} {{ 'a' in 'cat' }} {{ 3 not in [1, 2] }} {{ not none }} {{ none or 'x' }} {{ 0 and 1 }} {{ 'k' in {'k': 1} }} {{ [1, 2] == [1, 2] }} {{ 1 == 1.0 }}", {}),
    "conditional_expr": ("{{ 'yes' if flag else 'no' }}|{{ 'y' if not flag }}|{{ x if x is defined else 'undef' }}", {"flag": False}),
    "str_values": ("{{ none }} {{ true }} {{ [1, 'a', none, true, 1.5] }} {{ {'a': 'b', 'c': [1]} }} {{ undefined_var }}|{{ \"it's\" }}", {}),
    "filters_text": ("{{ '  hi \\n' | trim }}|{{ 'Hello World' | lower }}|{{ 'hello world' | upper }}|{{ 'hello WORLD' | capitalize }}|{{ 'hello big world' | title }}|{{ 'a-b-c' | replace('-', '+') }}|{{ 'x' | default('d') }}|{{ nope | default('d') }}|{{ '' | default('e', true) }}", {}),
    "filters_list": ("{{ items | length }} {{ items | join(', ') }} {{ items | first }} {{ items | last }} {{ items | reverse | list }} {{ items | sort }} {{ items | unique | list }} {{ items | sum }} {{ items | min }} {{ items | max }} {{ items | select('odd') | list }} {{ items | reject('equalto', 3) | list }}", {"items": [3, 1, 2, 3]}),
    "filters_map_attr": ("{{ users | map(attribute='name') | join(',') }} {{ users | selectattr('admin') | map(attribute='name') | list }} {{ users | rejectattr('admin') | list | length }}", {"users": [{"name": "ann", "admin": True}, {"name": "bob", "admin": False}]}),
    "filters_dict": ("{% for k, v in d | items %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}{{ d | dictsort }}", {"d": {"b": 1, "a": [2]}}),
    "tojson": ("{{ obj | tojson }}\n{{ obj | tojson(indent=2) }}\n{{ 'é\"\\\\\\n\\u0001' | tojson }}\n{{ [] | tojson(indent=4) }}{{ {} | tojson }}", {"obj": {"z": 1, "a": [1.5, None, True, "x"], "n": {"deep": {"er": []}}, "f": 1e-05, "big": 12345678901234}}),
    "tests": ("{{ x is defined }} {{ y is undefined }} {{ none is none }} {{ 'a' is string }} {{ 1 is number }} {{ {} is mapping }} {{ 'ab' is iterable }} {{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 'a' is eq 'a' }} {{ x is not none }} {{ [1] is sequence }} {{ 2 is integer }} {{ 2.0 is float }} {{ true is boolean }}", {"x": 1}),
    "methods": ("{{ ' a b '.strip() }}|{{ 'xxhixx'.strip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'abc'.startswith('ab') }}|{{ 'abc'.endswith('bc') }}|{{ 'Hi'.upper() }}|{{ '-'.join(['a', 'b']) }}|{{ d.get('k') }}|{{ d.get('z', 'dflt') }}|{{ d.items() | list }}|{{ d.keys() | list }}|{{ d.values() | list }}|{{ 'aXbX'.replace('X', '') }}", {"d": {"k": "v"}}),
    "string_escapes": ("{{ 'tab\\there' }}|{{ \"nl\\nq\\\"\" }}|{{ 'uni\\u00e9\\x41' }}|{{ 'a' 'b' }}", {}),
    "unicode_len": ("{{ s | length }} {{ s[0] }} {{ s | reverse }} {{ s | upper }}", {"s": "日本語abc"}),
    "raise": ("{{ raise_exception('boom') }}", {}),
    "undefined_attr_error": ("{{ missing.attr }}", {}),
    "indent_filter": ("{{ text | indent(2) }}|{{ text | indent(2, true) }}", {"text": "a\nb\n\nc"}),
    "nested_loops": ("{% for row in m %}{% for c in row %}{{ loop.index }}{{ c }}{% endfor %}/{{ loop.index }};{% endfor %}", {"m": [["a", "b"], ["c"]]}),
    "tuple_unpack": ("{% for a, b in pairs %}{{ a }}{{ b }} {% endfor %}{% set x, y = 1, 2 %}{{ x + y }}", {"pairs": [[1, "x"], [2, "y"]]}),
    "strftime": ("{{ strftime_now('%Y-%m-%d %d %b %Y %A') }}", {}),
}
for fname, (src, ctx) in features.items():
    add(f"features/{fname}", None, ctx, source=src)

env = make_env()
out_lines = []
for name, tmpl, ctx, source in cases:
    src = source if source is not None else open(os.path.join(TEMPLATES, tmpl + ".jinja"), encoding="utf-8").read()
    rec = {"name": name}
    if source is not None:
        rec["source"] = source
    else:
        rec["template"] = tmpl + ".jinja"
    rec["context"] = ctx
    rec["now"] = NOW
    try:
        rec["output"] = env.from_string(src).render(**ctx)
    except Exception as e:  # noqa: BLE001 - any jinja2 failure is an expected-error case
        rec["error"] = f"{type(e).__name__}: {e}"
    out_lines.append(json.dumps(rec, ensure_ascii=False))

with open(os.path.join(FIX, "chat_cases.jsonl"), "w", encoding="utf-8") as f:
    f.write("\n".join(out_lines) + "\n")
print(f"chat_cases.jsonl: {len(out_lines)} cases ({sum('error' in json.loads(l) for l in out_lines)} expected errors), jinja2 {jinja2.__version__}")
