#!/usr/bin/env python3
"""Reference renders for kvaudit's conformance tests, computed with Hugging Face transformers.

For every chat template in ../shared (model directories and the template collection) and a set
of conversation shapes, this records what transformers' apply_chat_template renders (text, and
token ids for model directories) or the error it raises. For every model directory and every
scenario of reference/scenarios.json it also records the turn alignment (held tokens, next
prompt, common prefix, uncached per block size), derived with the scenario rules.

The Rust test (tests/conformance.rs) renders the same inputs with kvaudit and compares.
"""
import argparse
import datetime as _dt
import json
import os
import sys

import transformers
from transformers import AutoTokenizer
from transformers.utils import chat_template_utils as ctu

FIXED_NOW = "2026-01-15T10:00:00"


class _Clock:
    now = _dt.datetime.fromisoformat(FIXED_NOW)


class _FrozenDatetime(_dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return _Clock.now


# transformers' strftime_now calls datetime.now() from this module at render time.
ctu.datetime = _FrozenDatetime


def set_now(text):
    _Clock.now = _dt.datetime.fromisoformat(text)


# Special tokens given to templates that come without a tokenizer.
TEMPLATE_SPECIAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}

TOOLS = None  # filled from scenarios.json


def shapes(spec):
    """Conversation shapes every template is rendered with."""
    t = spec["texts"]
    call = spec["tool_call"]
    tools = spec["tools"]
    user = lambda c: {"role": "user", "content": c}
    asst = lambda c: {"role": "assistant", "content": c}
    system = {"role": "system", "content": t["system"]}

    def tool_msgs(content, args):
        return [
            {"role": "user", "content": t["tool_q"]},
            {
                "role": "assistant",
                "content": content,
                "tool_calls": [
                    {
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["name"], "arguments": args},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call["id"], "name": call["name"], "content": t["tool_result"]},
        ]

    out = []
    add = lambda name, msgs, agp=True, tools=None, kwargs=None, documents=None: out.append(
        {"shape": name, "messages": msgs, "add_generation_prompt": agp, "tools": tools,
         "kwargs": kwargs or {}, "documents": documents}
    )
    add("single_turn", [user(t["q1"])])
    add("single_turn_no_gen", [user(t["q1"])], agp=False)
    add("system", [system, user(t["q1"])])
    add("multi_turn", [user(t["q1"]), asst(t["a1"]), user(t["followup_oneline"])])
    add("multi_turn_system", [system, user(t["q1"]), asst(t["a1"]), user(t["followup_oneline"]), asst(t["a2"]), user(t["followup_short"])])
    add("multi_turn_no_gen", [user(t["q1"]), asst(t["a1"])], agp=False)
    add("reasoning_content", [user(t["q1"]), dict(asst(t["a1"]), reasoning_content=t["r1"]), user(t["followup_short"])])
    add("reasoning_in_content", [user(t["q1"]), asst("<think>\n" + t["r1"] + "\n</think>\n\n" + t["a1"]), user(t["followup_short"])])
    add("thinking_off", [user(t["q1"]), asst(t["a1"]), user(t["followup_short"])], kwargs={"enable_thinking": False, "thinking": False})
    add("thinking_on", [user(t["q1"]), asst(t["a1"]), user(t["followup_short"])], kwargs={"enable_thinking": True, "thinking": True})
    add("empty_content", [user(""), asst(""), user(t["followup_short"])])
    add("unicode", [user("Größe? 東京の天気 — 😀 \"quotes\" <tag> & 'apos'\ttab"), asst("Ça va: ✓ — ünïcödé 🚀"), user("¿Y mañana?")])
    add("trailing_newline", [user(t["q1"]), asst(t["a1_trailing_newline"]), user(t["followup_short"])])
    add("tools_declared", [user(t["tool_q"])], tools=tools)
    add("tool_loop_obj", tool_msgs("", call["arguments"]), tools=tools)
    add("tool_loop_str", tool_msgs(None, json.dumps(call["arguments"])), tools=tools)
    add("tool_loop_obj_reasoning", [dict(m, reasoning_content=t["tool_r"]) if m["role"] == "assistant" else m for m in tool_msgs("", call["arguments"])], tools=tools)
    add("documents", [user(t["q1"])], documents=[{"title": "Threads", "text": t["a1"]}])
    return out


def render(template, msgs, tools, documents, agp, kwargs, special):
    text, _ = ctu.render_jinja_template(
        conversations=[msgs], tools=tools, documents=documents, chat_template=template,
        add_generation_prompt=agp, **{**special, **kwargs},
    )
    return text[0]


def model_dirs(shared):
    root = os.path.join(shared, "models")
    return sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))


def template_cases(shared, spec):
    cases = []
    for shape in shapes(spec):
        cases.append(shape)
    root = os.path.join(shared, "templates")
    out = []
    for name in sorted(f for f in os.listdir(root) if f.endswith(".jinja")):
        with open(os.path.join(root, name), encoding="utf-8") as fh:
            template = fh.read()
        for c in cases:
            set_now(FIXED_NOW)
            entry = {"template": name, **c, "now": FIXED_NOW, "special_tokens": TEMPLATE_SPECIAL_TOKENS}
            try:
                entry["text"] = render(template, c["messages"], c["tools"], c["documents"], c["add_generation_prompt"], c["kwargs"], TEMPLATE_SPECIAL_TOKENS)
            except Exception as e:  # the reference refused: kvaudit must refuse too
                entry["error"] = f"{type(e).__name__}: {e}"
            out.append(entry)
    return out


def model_cases(shared, spec):
    out = []
    for d in model_dirs(shared):
        tok = AutoTokenizer.from_pretrained(os.path.join(shared, "models", d))
        for c in shapes(spec):
            set_now(FIXED_NOW)
            entry = {"model": d, **c, "now": FIXED_NOW}
            try:
                text = tok.apply_chat_template(
                    c["messages"], tools=c["tools"], documents=c["documents"], tokenize=False,
                    add_generation_prompt=c["add_generation_prompt"], **c["kwargs"])
                entry["text"] = text
                entry["ids"] = tok(text, add_special_tokens=False)["input_ids"]
            except Exception as e:
                entry["error"] = f"{type(e).__name__}: {e}"
            out.append(entry)
    return out


# ---- scenarios: turn alignment with the scenario rules ----

def fill(fmt, spec, reasoning, content):
    return spec["reply_formats"][fmt].replace("{reasoning}", reasoning).replace("{content}", content)


def lcp(a, b):
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def text_lcp(a, b):
    return lcp(a, b)


def applicable(template, scenario):
    req = scenario.get("requires", [])
    if "tools" in req and "tools" not in template:
        return False
    if "thinking_switch" in req and "enable_thinking" not in template and "thinking" not in template.replace("<think>", "").replace("</think>", ""):
        return False
    if "reasoning" in req and "reasoning_content" not in template and "thinking" not in template:
        return False
    if "clear_thinking" in req and "clear_thinking" not in template:
        return False
    return True


def scenario_cases(shared, spec):
    t = spec["texts"]
    call = spec["tool_call"]
    out = []
    for d in model_dirs(shared):
        tok = AutoTokenizer.from_pretrained(os.path.join(shared, "models", d))
        template = tok.chat_template if isinstance(tok.chat_template, str) else tok.chat_template.get("default")
        profile = spec["profiles"][d]
        fmt = profile["reply_format"]
        stops = profile["stop"]
        for sc in spec["scenarios"]:
            if not applicable(template, sc):
                continue
            entry = {"model": d, "scenario": sc["id"]}
            try:
                entry.update(run_scenario(tok, spec, sc, fmt, stops))
            except Exception as e:
                entry["error"] = f"{type(e).__name__}: {e}"
                entry.update(getattr(e, "conversation", {}))
            out.append(entry)
    return out


def run_scenario(tok, spec, sc, fmt, stops):
    t = spec["texts"]
    call = spec["tool_call"]
    mode = sc.get("history_mode", "content")
    kwargs = sc.get("kwargs", {})
    tools = spec["tools"] if sc.get("tool_scenario") else None
    clocks = sc.get("now_per_turn")
    clock = lambda i: clocks[min(i, len(clocks) - 1)] if clocks else FIXED_NOW

    def apply(msgs, agp, i):
        set_now(clock(i))
        return tok.apply_chat_template(msgs, tools=tools, tokenize=False, add_generation_prompt=agp, **kwargs)

    # Try the tool-call message shapes in the reference order: "" before None, object before string.
    variants = [("", call["arguments"]), (None, call["arguments"]), ("", json.dumps(call["arguments"])), (None, json.dumps(call["arguments"]))] if sc.get("tool_scenario") else [None]
    last_err, trace = None, {}
    for variant in variants:
        trace = {}
        try:
            return run_variant(tok, spec, sc, fmt, stops, mode, kwargs, tools, apply, variant, trace)
        except Exception as e:
            last_err = e
    # The conversation that made transformers raise, so kvaudit can be checked to refuse it too.
    last_err.conversation = {"messages": trace.get("client", []), "resend": mode, "kwargs": kwargs, "tools": tools,
                              "now_per_prompt": sc.get("now_per_turn") or [FIXED_NOW]}
    raise last_err


def run_variant(tok, spec, sc, fmt, stops, mode, kwargs, tools, apply, variant, trace):
    t = spec["texts"]
    call = spec["tool_call"]
    client = []  # messages as kvaudit receives them (before the resend mode is applied)
    trace["client"] = client
    history = []  # messages as the client sends them back
    if sc.get("system"):
        client.append({"role": "system", "content": t["system"]})
        history.append({"role": "system", "content": t["system"]})
    prompts, held = [], []
    for i, turn in enumerate(sc["turns"]):
        if "user" in turn:
            m = {"role": "user", "content": t[turn["user"]]}
        elif "tool_result" in turn:
            m = {"role": "tool", "tool_call_id": call["id"], "name": call["name"], "content": t[turn["tool_result"]]}
        client.append(m)
        history.append(m)
        is_last = i == len(sc["turns"]) - 1
        gp = apply(history, True, i)
        prompts.append(gp)
        if is_last:
            break
        reasoning = t[turn["reasoning"]] if turn.get("reasoning") else ""
        thinking_off = fmt != "plain" and gp.rstrip().endswith("</think>")
        emitted = fmt != "plain" and not thinking_off
        if turn.get("tool_call"):
            content, args = variant
            msg = {"role": "assistant", "content": content,
                   "tool_calls": [{"id": call["id"], "type": "function", "function": {"name": call["name"], "arguments": args}}]}
            client_msg = dict(msg, reasoning_content=reasoning) if reasoning else dict(msg)
            sent = dict(msg)
            if mode == "reasoning_field" and emitted and reasoning:
                sent["reasoning_content"] = reasoning
                sent["thinking"] = reasoning
            rendered = apply(history + [sent], False, i)
            common = text_lcp(gp, rendered)
            tail = rendered[common:]
            cuts = [tail.find(s) for s in stops if s and tail.find(s) >= 0]
            if cuts:
                tail = tail[: min(cuts)]
            opener = next((o for o in ("<think>\n", "<think>") if gp.endswith(o)), None)
            if opener and not tail.startswith(opener) and fmt != "plain":
                part = fill(fmt, spec, reasoning, "")
                part = part[len(opener):] if part.startswith(opener) else part
                generated = part + tail
            elif opener:
                generated = tail[len(opener):] if tail.startswith(opener) else tail
            else:
                generated = tail
        else:
            content = t[turn["content"]]
            client_msg = {"role": "assistant", "content": content}
            if reasoning:
                client_msg["reasoning_content"] = reasoning
            if fmt == "plain" or thinking_off:
                generated = content
            else:
                full = fill(fmt, spec, reasoning, content)
                generated = full
                for o in ("<think>\n", "<think>"):
                    if gp.endswith(o):
                        if full.startswith(o):
                            generated = full[len(o):]
                        break
            sent = {"role": "assistant", "content": content}
            if mode == "raw":
                sent["content"] = generated
            elif mode == "reasoning_field" and emitted and reasoning:
                sent["reasoning_content"] = reasoning
                sent["thinking"] = reasoning
        held.append(tok(gp, add_special_tokens=False)["input_ids"] + tok(generated, add_special_tokens=False)["input_ids"])
        client.append(client_msg)
        history.append(sent)
    transitions = []
    for k in range(len(prompts) - 1):
        H = held[k]
        N = tok(prompts[k + 1], add_special_tokens=False)["input_ids"]
        L = lcp(H, N)
        transitions.append({
            "held_tokens": len(H), "next_prompt_tokens": len(N), "common_prefix_tokens": L,
            "rewrite_position": L if L < len(H) else None,
            "uncached": {str(b): len(N) - (min(L, len(H)) // b) * b for b in spec["block_sizes"]},
        })
    return {
        "messages": client, "resend": mode, "kwargs": kwargs, "tools": tools,
        "now_per_prompt": sc.get("now_per_turn") or [FIXED_NOW], "transitions": transitions,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    with open(os.path.join(args.shared, "reference", "scenarios.json"), encoding="utf-8") as fh:
        spec = json.load(fh)
    result = {
        "transformers": transformers.__version__,
        "models": model_cases(args.shared, spec),
        "templates": template_cases(args.shared, spec),
        "scenarios": scenario_cases(args.shared, spec),
    }
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(result, fh, ensure_ascii=False)
    print(f"reference: transformers {transformers.__version__}: {len(result['models'])} model renders, "
          f"{len(result['templates'])} template renders, {len(result['scenarios'])} scenario runs", file=sys.stderr)


if __name__ == "__main__":
    main()
