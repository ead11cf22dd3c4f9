#!/usr/bin/env python3
"""The work of `kvaudit corpus --model DIR FILE` done with transformers, as a user would
write it: for every conversation of a JSONL file (one `{"messages": [...]}` per line) and
every transition k -> k+1 (an assistant reply followed by another request), render prompt k
and prompt k+1 with apply_chat_template(add_generation_prompt=True), encode them and the
reply, and take the common prefix of (prompt k + reply) and prompt k+1 and the uncached
tokens at B=16 and 64. Single process. The reply is the assistant message's content as sent
(kvaudit derives the generated text per template family; the cost is the same).

    python3 benches/corpus_reference.py MODEL_DIR FILE.jsonl
"""
import json
import sys

from transformers import AutoTokenizer


def main():
    model, path = sys.argv[1], sys.argv[2]
    tok = AutoTokenizer.from_pretrained(model)
    conversations = transitions = uncached16 = uncached64 = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            messages = json.loads(line)["messages"]
            conversations += 1
            # The requests: every prefix that ends before an assistant reply, and the whole
            # history after the last reply when a request follows it.
            ends = [i for i, m in enumerate(messages) if m["role"] == "assistant" and i > 0]
            for a, i in enumerate(ends):
                nxt_end = ends[a + 1] if a + 1 < len(ends) else len(messages)
                if nxt_end <= i + 1:
                    continue
                p = tok.apply_chat_template(messages[:i], tokenize=False, add_generation_prompt=True)
                n = tok.apply_chat_template(messages[:nxt_end], tokenize=False, add_generation_prompt=True)
                held = tok(p, add_special_tokens=False)["input_ids"] + tok(
                    messages[i]["content"] or "", add_special_tokens=False
                )["input_ids"]
                nxt = tok(n, add_special_tokens=False)["input_ids"]
                lcp = 0
                for x, y in zip(held, nxt):
                    if x != y:
                        break
                    lcp += 1
                reused = min(lcp, len(held))
                uncached16 += len(nxt) - reused // 16 * 16
                uncached64 += len(nxt) - reused // 64 * 64
                transitions += 1
    print(json.dumps({"conversations": conversations, "transitions": transitions,
                      "uncached_16": uncached16, "uncached_64": uncached64}))


if __name__ == "__main__":
    main()
