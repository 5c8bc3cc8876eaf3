#!/usr/bin/env python3
"""Writes golden/chat_jinja_cases.json for the llama3 and qwen3 tokenizers:
conversations that exercise every branch photon's hand-written chat renderers
reproduce (whitespace trimming, tool/ipython messages, earlier assistant
turns with <think> blocks, reasoning_content, system messages after the
first, enable_thinking), rendered from each folder's own chat_template with
Jinja2 set up as transformers' apply_chat_template sets it up
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols,
transformers' tojson, raise_exception, strftime_now; the special tokens of
tokenizer_config.json and tools=None passed as variables). The llama3 file
also holds Llama 3.0's template (Meta-Llama-3-8B-Instruct) and renderings of it.

Run from the repository root (needs python3's jinja2):
  python3 tests/data/tokenizers/make_chat_jinja_cases.py
"""
import json
from datetime import datetime
from pathlib import Path

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = Path(__file__).resolve().parent

LLAMA30_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")


def environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def token_text(v):
    return v["content"] if isinstance(v, dict) else v


def render(template, config, messages, add_generation_prompt, kwargs):
    variables = {k: token_text(config.get(k)) for k in ("bos_token", "eos_token", "pad_token", "unk_token")}
    variables.update(kwargs)
    return environment().from_string(template).render(
        messages=messages, tools=None, documents=None, add_generation_prompt=add_generation_prompt, **variables)


def u(content):
    return {"role": "user", "content": content}


def a(content, **extra):
    return {"role": "assistant", "content": content, **extra}


LLAMA_CASES = [
    ("whitespace_is_trimmed", [{"role": "system", "content": "  Be brief. \n"}, u("\n hi \t"), a(" ok "), u("\x1c\u3000again\u00a0")], True),
    ("tool_and_ipython_messages_as_json_strings",
     [u("weather?"), a("calling"), {"role": "tool", "content": 'He said "hi"\n\t\\ é \u0001 🐱'},
      {"role": "ipython", "content": "{\"temp\": 21}"}], True),
    ("other_roles_and_no_generation_prompt", [u("a"), {"role": "narrator", "content": "b"}, a("c")], False),
    ("system_only", [{"role": "system", "content": "You are photon."}], True),
    ("system_after_first", [u("x"), {"role": "system", "content": "late system"}, u("y")], True),
]
QWEN_CASES = [
    ("earlier_think_blocks_are_dropped",
     [u("2+2?"), a("<think>\nadd them\n</think>\n\n4"), u("and 3+3?")], True, {}),
    ("reasoning_content_field",
     [u("q1"), a("A1", reasoning_content="R1"), u("q2"), a("A2", reasoning_content="\nR2\n")], False, {}),
    ("last_assistant_keeps_its_think_block", [u("q"), a("<think>r</think>final")], False, {}),
    ("tool_responses_grouped_in_one_user_turn",
     [u("weather in Paris and Rome?"), a("<think>need tools</think>calling"), {"role": "tool", "content": "Paris 20C"},
      {"role": "tool", "content": "Rome 25C"}, a("<think>\nsummarize\n</think>\n\nBoth warm.")], True, {}),
    ("tool_response_user_message_is_not_a_query",
     [u("q"), a("<think>t1</think>c1"), u("<tool_response>\nr\n</tool_response>"), a("<think>t2</think>c2")], True, {}),
    ("system_after_first_and_raw_whitespace", [u("\n\nhi\n\n"), {"role": "system", "content": "sys2"}, u(" x ")], True, {}),
    ("enable_thinking_false_multi_turn", [{"role": "system", "content": "S"}, u("a"), a("b"), u("c")], True,
     {"enable_thinking": False}),
    ("nested_think_tags", [u("q"), a("x<think>y<think>z\n</think>\nw</think>\n\nv"), u("again")], True, {}),
    ("assistant_after_last_query_without_reasoning", [u("q"), a("first"), a("second")], True, {}),
]


def main():
    llama_cfg = json.loads((HERE / "llama3/tokenizer_config.json").read_text())
    qwen_cfg = json.loads((HERE / "qwen3/tokenizer_config.json").read_text())
    provenance = ("Rendered by tests/data/tokenizers/make_chat_jinja_cases.py with Jinja2 " + jinja2.__version__ +
                  " configured like transformers' apply_chat_template, from this folder's tokenizer_config.json "
                  "chat_template (and, for llama30_cases, Meta-Llama-3-8B-Instruct's template given in llama30_template).")
    out = {"provenance": provenance, "cases": [], "llama30_template": LLAMA30_TEMPLATE, "llama30_cases": []}
    for name, messages, gen in LLAMA_CASES:
        kwargs = {"date_string": "02 Jan 2025"}
        out["cases"].append({"name": name, "messages": messages, "add_generation_prompt": gen, "kwargs": kwargs,
                             "rendered": render(llama_cfg["chat_template"], llama_cfg, messages, gen, kwargs)})
        out["llama30_cases"].append({"name": name, "messages": messages, "add_generation_prompt": gen,
                                     "rendered": render(LLAMA30_TEMPLATE, llama_cfg, messages, gen, {})})
    (HERE / "llama3/golden/chat_jinja_cases.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    out = {"provenance": provenance, "cases": []}
    for name, messages, gen, kwargs in QWEN_CASES:
        out["cases"].append({"name": name, "messages": messages, "add_generation_prompt": gen, "kwargs": kwargs,
                             "rendered": render(qwen_cfg["chat_template"], qwen_cfg, messages, gen, kwargs)})
    (HERE / "qwen3/golden/chat_jinja_cases.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
