"""Reference numbers for `diff-turns --remedies`: a conversation's transitions rendered by
transformers' apply_chat_template with and without a remedy kwarg, tokenized, aligned.

Usage: remedies_reference.py MODEL_DIR CONVERSATION.json BLOCKS KWARGS_JSON
Prints JSON: {"transitions": [{"from_prompt", "held_tokens", "next_prompt_tokens",
"common_prefix_tokens", "uncached": [{"block_size", "tokens"}]}]}.

The reply layout is the think-tight one (`<think>{reasoning}</think>{content}`, GLM-4.7): the
generation prompt's `<think>` opener is not generated again (DESIGN.md section 2).
"""

import json
import sys

from transformers import AutoTokenizer


def lcp(a, b):
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def main():
    model, conv_path, blocks, kwargs = sys.argv[1:5]
    blocks = [int(b) for b in blocks.split(",")]
    kwargs = json.loads(kwargs)
    with open(conv_path, encoding="utf-8") as fh:
        messages = json.load(fh)["messages"]
    tok = AutoTokenizer.from_pretrained(model)

    def prompt(history):
        text = tok.apply_chat_template(history, tokenize=False, add_generation_prompt=True, **kwargs)
        return text, tok(text, add_special_tokens=False)["input_ids"]

    prompts = []
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        text, ids = prompt(messages[:i])
        full = "<think>" + m.get("reasoning_content", "") + "</think>" + m["content"]
        if text.endswith("<think>"):
            full = full[len("<think>"):]
        prompts.append((ids, tok(full, add_special_tokens=False)["input_ids"]))
    _, last = prompt(messages)
    out = []
    for k, (ids, generated) in enumerate(prompts):
        held = ids + generated
        nxt = prompts[k + 1][0] if k + 1 < len(prompts) else last
        n = lcp(held, nxt)
        out.append({
            "from_prompt": k + 1,
            "held_tokens": len(held),
            "next_prompt_tokens": len(nxt),
            "common_prefix_tokens": n,
            "uncached": [
                {"block_size": b, "tokens": len(nxt) - min(min(n, len(held)) // b * b, len(nxt))}
                for b in blocks
            ],
        })
    json.dump({"transitions": out}, sys.stdout)


if __name__ == "__main__":
    main()
