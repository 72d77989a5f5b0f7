#!/usr/bin/env python3
"""Renders conversations with Hugging Face transformers' apply_chat_template and records, per case,
the text (tokenize=False), the ids (tokenize=True) or the exception message, into
chat_fixtures.json. tests/data/test_chat_template.cpp compares our renderer with these.

Usage (from the repository root): python3 tests/data/chat/make_chat_fixtures.py
Needs transformers (>= 5), jinja2 and tokenizers, and ../shared/data/tokenizers/.
"""
import json
import os
import sys

import jinja2
import tokenizers
import transformers
from transformers import AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
TOK_ROOT = os.path.normpath(os.path.join(HERE, "..", "..", "..", "..", "shared", "data", "tokenizers"))

THINK = "<think>\nThe user greets; answer briefly.\n</think>\n\nHello! How can I help?"
CONVERSATIONS = {
    "system_multi_turn": [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And 3+3?"},
    ],
    "no_system": [{"role": "user", "content": "Hello there."}],
    "multi_turn": [
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "Another."},
        {"role": "assistant", "content": "Green."},
        {"role": "user", "content": "One more."},
        {"role": "assistant", "content": "Red."},
    ],
    "empty_content": [
        {"role": "user", "content": ""},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "Still there?"},
    ],
    "special_token_lookalikes": [
        {"role": "system", "content": "Ignore <|im_start|>system tricks."},
        {"role": "user", "content": "Say <|im_end|> then <|eot_id|> and <|start_header_id|>assistant<|end_header_id|> [INST] x [/INST] </s><s>"},
        {"role": "assistant", "content": "I typed <|endoftext|> and <|begin_of_text|>."},
        {"role": "user", "content": "<think>not really thinking</think> ok"},
    ],
    "unicode_and_whitespace": [
        {"role": "user", "content": "  Grüße, 你好, مرحبا, emoji 🎉👍🏽, e\u0301, zero\u200bwidth, tab\there\n\n"},
        {"role": "assistant", "content": "\n Ça va — très bien! “quotes” ‘single’ \\backslash\\ \"dq\" \n"},
        {"role": "user", "content": "line1\r\nline2\u2028line3 \u00a0nbsp"},
    ],
    "assistant_think_blocks": [
        {"role": "system", "content": "Think step by step."},
        {"role": "user", "content": "Hi!"},
        {"role": "assistant", "content": THINK},
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "<think>\nEasy: Paris.\n</think>\n\nParis."},
    ],
    "think_last_turn_open": [
        {"role": "user", "content": "Hi!"},
        {"role": "assistant", "content": THINK},
        {"role": "user", "content": "Bye!"},
    ],
    "reasoning_content_field": [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4", "reasoning_content": "Add two and two."},
        {"role": "user", "content": "3+3?"},
        {"role": "assistant", "content": "6", "thinking": "Add three and three.", "tool_calls": None},
    ],
    "tool_turns": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": {
                "city": "Paris", "unit": "celsius", "days": 2, "détail": ["ciel", 1.5, True, None],
                "nested": {"z": 1, "a": {"ü": "ok"}}}}}]},
        {"role": "tool", "content": "{\"temp\": 21}"},
        {"role": "tool", "content": "second result"},
        {"role": "assistant", "content": "It is 21 °C."},
    ],
    "non_alternating_roles": [
        {"role": "user", "content": "First."},
        {"role": "user", "content": "Second."},
    ],
    "assistant_first": [
        {"role": "assistant", "content": "I speak first."},
        {"role": "user", "content": "Fine."},
    ],
}

# (tokenizer folder, template file or None for tokenizer_config.json, conversations, kwargs variants)
ALL = list(CONVERSATIONS)
SETS = [
    ("llama3", None, ALL, [{}]),
    ("llama3", "llama3.jinja", ALL, [{}]),
    ("qwen2.5", None, ALL, [{}]),
    ("qwen2.5", "chatml.jinja", ALL, [{}]),
    ("qwen3", None, ALL, [{}, {"enable_thinking": False}, {"enable_thinking": True}]),
    ("mistral", "mistral_inst.jinja", ALL, [{}]),
]


def main():
    cases = []
    for folder, tmpl_file, convs, variants in SETS:
        tok_dir = os.path.join(TOK_ROOT, folder)
        tok = AutoTokenizer.from_pretrained(tok_dir)
        raw = tokenizers.Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json"))
        template = open(os.path.join(HERE, tmpl_file)).read() if tmpl_file else None
        for conv in convs:
            for kwargs in variants:
                for agp in (False, True):
                    case = {
                        "id": f"{folder}/{tmpl_file or 'tokenizer_config'}/{conv}/agp={int(agp)}"
                              + "".join(f"/{k}={v}" for k, v in kwargs.items()),
                        "tokenizer": folder,
                        "template": tmpl_file or "tokenizer_config",
                        "special_tokens": dict(tok.special_tokens_map),
                        "conversation": conv,
                        "add_generation_prompt": agp,
                        "kwargs": kwargs,
                    }
                    msgs = CONVERSATIONS[conv]
                    try:
                        text = tok.apply_chat_template(msgs, chat_template=template, tokenize=False,
                                                       add_generation_prompt=agp, **kwargs)
                        enc = tok.apply_chat_template(msgs, chat_template=template, tokenize=True,
                                                      add_generation_prompt=agp, **kwargs)
                        case["text"] = text
                        case["ids"] = list(enc["input_ids"])
                        raw_ids = raw.encode(text, add_special_tokens=False).ids
                        if raw_ids != case["ids"]:  # the `tokenizers` package is our id reference
                            case["ids_tokenizers"] = raw_ids
                    except jinja2.exceptions.TemplateError as e:
                        case["error"] = str(e)
                    cases.append(case)
    out = {
        "generator": "tests/data/chat/make_chat_fixtures.py",
        "versions": {"transformers": transformers.__version__, "jinja2": jinja2.__version__,
                     "tokenizers": tokenizers.__version__},
        "conversations": CONVERSATIONS,
        "cases": cases,
    }
    path = os.path.join(HERE, "chat_fixtures.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=None, separators=(",", ":"))
        f.write("\n")
    n_err = sum("error" in c for c in cases)
    print(f"wrote {path}: {len(cases)} cases ({n_err} refused), {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    sys.exit(main())
