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
import hashlib
import json
import os
import re
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


# ---- templates-extra: 246 more real templates, each on the tokenizer its README pairs it with ----

# The second set of texts every extra template is also run with: markup characters (which
# MarkupSafe escapes), quotes, several lines, non-ASCII and trailing spaces, where the first set
# is plain English prose.
EXTRA_TEXTS = {
    "system": "You answer in <b>short</b> lines & cite \"sources\".\nNever use 'markdown'.",
    "q1": "Größe von 東京? Compare <a> & <b>, \"quoted\" and 'single'.",
    "a1": "Tokyo's area is 2,194 km² — see <ref id=\"1\"/> & the census.\nSecond line.  ",
    "r1": "They ask about Tokyo; mention <ref> tags & units.",
    "followup_short": "Danke!",
    "followup_oneline": "And Ōsaka? Use <b>bold</b> if needed.",
    "followup_threeline": "Line one: a < b\nLine two: c > d\nLine three: \"e\" & 'f'",
    "a2": "Ōsaka covers 225 km² <small>(city proper)</small>.",
    "r2": "Ōsaka: city proper area, mark it <small>.",
    "a_long": ("Tokyo's 23 special wards & the Tama area together cover about 2,194 km²; <note> the "
               "metropolis also includes the Izu and Ogasawara islands. 東京都 is a prefecture, not "
               "a single city, so figures differ: \"Tokyo\" may mean the wards (627 km²) or the "
               "whole metropolis. For comparisons use the same definition on both sides & say "
               "which one you used, e.g. 'wards only' or 'metropolis'.\n\nDone."),
    "followup_17": "Could you also compare that with Ōsaka's and Nagoya's areas, using <table> markup?",
    "followup_53": ("Thanks. I'm writing a short report (about 300 words) on Japanese cities & their "
                    "administrative borders. Which definitions should I use for Tokyo, Ōsaka and "
                    "Yokohama so the numbers are comparable, and how do I cite \"official\" figures "
                    "when sources disagree by more than 5%?"),
    "tool_q": "What's the weather in Zürich & Genève right now? Reply in <b>bold</b>.",
    "tool_r": "They want weather for Zürich; call get_weather with city=\"Zürich\".",
    "tool_result": "{\"city\": \"Zürich\", \"temperature_c\": 11.5, \"condition\": \"<rain> & wind\"}",
    "tool_answer": "It is 11.5 °C with rain & wind in Zürich.",
    "q18": "In one paragraph: what's the difference between <div> & <span> in \"HTML\"?",
    "a1_trailing_newline": "Tokyo's area is 2,194 km² — see <ref id=\"1\"/> & the census.\n",
}

FORMAT_MARKERS = ["<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|return|>", "<|call|>", "<|user|>",
                  "<|observation|>", "<\uff5cend\u2581of\u2581sentence\uff5c>", "[e~[", "</s>"]


def extra_templates(shared):
    """(path under templates-extra, tokenizer directory, special-token kwargs) per README row."""
    out, folder = [], None
    with open(os.path.join(shared, "templates-extra", "README.md"), encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("## "):
                folder = line[3:].strip().rstrip("/")
                continue
            if not line.startswith("| ") or ".jinja |" not in line:
                continue
            cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            name, tokenizer = cells[0], cells[4]
            kwargs = {}
            m = re.fullmatch(r"(\S+)(?: \((.*)\))?", tokenizer)
            if m.group(2):
                for part in m.group(2).split(", "):
                    k, v = part.split("=", 1)
                    kwargs[k] = v
            out.append((f"{folder}/{name}", m.group(1), kwargs))
    return out


def extra_reply_format(template):
    """The family's reply layout read from the template's markers (what kvaudit assumes for a
    --template without --reply-format): harmony channels, a think opener followed by a newline,
    a tight think opener, a template that only splits at </think>, or plain."""
    if "<|channel|>" in template:
        return "harmony"
    if "<think>" not in template:
        return "think_nl" if "</think>" in template else "plain"
    if re.search(r"<think>(?:['\"]\s*[~+]\s*['\"])?(?:\\n|\n)", template):
        return "think_nl"
    return "think_tight"


class _TemplateOnTokenizer:
    """A tokenizer whose apply_chat_template uses another template and special-token kwargs,
    and which keeps the ids of every text it encodes."""

    def __init__(self, tok, template, special):
        self.tok, self.template, self.special = tok, template, special
        self.encoded = []

    def apply_chat_template(self, msgs, **kw):
        return self.tok.apply_chat_template(msgs, chat_template=self.template, **{**self.special, **kw})

    def __call__(self, text, **kw):
        out = self.tok(text, **kw)
        self.encoded.append(out["input_ids"])
        return out


def ids_digest(ids):
    """First 16 hex digits of SHA-256 over the ids written as decimal numbers joined by ','."""
    return hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest()[:16]


def add_id_digests(result, encoded):
    """Digests of H and N per transition, so a case whose counts match but whose tokens differ
    is caught. run_variant encodes the prompt and the reply of every replied turn, then every
    next prompt; the successful variant's encodings are the last ones."""
    transitions = result["transitions"]
    n = len(transitions)
    calls = encoded[len(encoded) - 3 * n:]
    for k, t in enumerate(transitions):
        held, nxt = calls[2 * k] + calls[2 * k + 1], calls[2 * n + k]
        assert len(held) == t["held_tokens"] and len(nxt) == t["next_prompt_tokens"], "encodings out of step"
        t["held_digest"], t["next_digest"] = ids_digest(held), ids_digest(nxt)


def extra_template_cases(shared, spec):
    toks, out = {}, []
    for path, tok_dir, special in extra_templates(shared):
        with open(os.path.join(shared, "templates-extra", path), encoding="utf-8", newline="") as fh:
            template = fh.read()
        if tok_dir not in toks:
            toks[tok_dir] = AutoTokenizer.from_pretrained(os.path.join(shared, "models", tok_dir))
        tok = toks[tok_dir]
        eos = special.get("eos_token", tok.eos_token)
        # The template as Jinja2 reads it (line breaks normalised) decides the markers.
        read = template.replace("\r\n", "\n").replace("\r", "\n")
        fmt = extra_reply_format(read)
        stops = [s for s in [eos] + [m for m in FORMAT_MARKERS if m in read and m != eos] if s]
        wrapped = _TemplateOnTokenizer(tok, template, special)
        for set_name, texts in (("texts", spec["texts"]), ("extra_texts", EXTRA_TEXTS)):
            run_spec = dict(spec, texts=texts)
            for sc in spec["scenarios"]:
                if not applicable(read, sc):
                    continue
                entry = {"template": path, "tokenizer": tok_dir, "special_kwargs": special,
                         "texts": set_name, "scenario": sc["id"], "reply_format": fmt}
                wrapped.encoded = []
                try:
                    result = run_scenario(wrapped, run_spec, sc, fmt, stops)
                    add_id_digests(result, wrapped.encoded)
                    entry.update(result)
                except Exception as e:
                    entry["error"] = f"{type(e).__name__}: {e}"
                    entry.update(getattr(e, "conversation", {}))
                out.append(entry)
    return out


# ---- kvaudit's own fixture templates (Jinja2 behaviours the real sets rarely exercise) ----

FIXTURE_TEMPLATES = ["crlf.jinja", "markup.jinja", "pystrings.jinja", "pyformat.jinja"]


def fixture_template_cases(spec):
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures", "templates")
    out = []
    for name in FIXTURE_TEMPLATES:
        # newline="": the CR LF and lone CR of the file must reach Jinja2 as they are.
        with open(os.path.join(root, name), encoding="utf-8", newline="") as fh:
            template = fh.read()
        for c in shapes(spec):
            set_now(FIXED_NOW)
            entry = {"template": name, **c, "now": FIXED_NOW, "special_tokens": TEMPLATE_SPECIAL_TOKENS}
            try:
                entry["text"] = render(template, c["messages"], c["tools"], c["documents"], c["add_generation_prompt"], c["kwargs"], TEMPLATE_SPECIAL_TOKENS)
            except Exception as e:
                entry["error"] = f"{type(e).__name__}: {e}"
            out.append(entry)
    return out


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
        "extra_templates": extra_template_cases(args.shared, spec),
        "fixture_templates": fixture_template_cases(spec),
    }
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(result, fh, ensure_ascii=False)
    print(f"reference: transformers {transformers.__version__}: {len(result['models'])} model renders, "
          f"{len(result['templates'])} template renders, {len(result['scenarios'])} scenario runs, "
          f"{len(result['extra_templates'])} extra-template scenario runs", file=sys.stderr)


if __name__ == "__main__":
    main()
