#!/usr/bin/env python3
"""Reference renders for kvaudit's `--server` profiles, computed with Hugging Face transformers.

Each profile is written here independently of kvaudit, from ../shared/reference/server-preprocessing.md:
the server's own request validation and message preprocessing (sections 1.2-1.6 for vLLM, 2.2-2.6 for
SGLang), then transformers' apply_chat_template on the result. For every model given and every corpus
file, it renders every prompt a client sends in a conversation (the messages before each assistant
message, and all of them when the conversation ends on a user or tool message), with the generation
prompt, and records the text and a digest of its token ids, or why the server (or the template)
refused the request.

Output: one JSON object per conversation per profile, cached by input hash in --cache so a rerun with the
same inputs only reads. tests/server_profiles.rs renders the same prompts with kvaudit and compares.
"""
import argparse
import copy
import datetime as _dt
import hashlib
import json
import os
import sys

import jinja2
import jinja2.nodes as jn
import orjson
import transformers
from transformers import AutoTokenizer
from transformers.utils import chat_template_utils as ctu

FIXED_NOW = "2026-01-15T10:00:00"
PROFILES = ["transformers", "vllm", "sglang"]


class _FrozenDatetime(_dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return _dt.datetime.fromisoformat(FIXED_NOW)


# transformers' strftime_now calls datetime.now() from this module at render time.
ctu.datetime = _FrozenDatetime


class Rejected(Exception):
    """The server refuses the request before any template runs (an HTTP 400)."""

    def __init__(self, code, detail=""):
        super().__init__(f"{code}: {detail}")
        self.code = code


class Unsupported(Exception):
    """Input kvaudit's profiles do not emulate (media parts need the model's processor)."""


# ---------------------------------------------------------------- template AST helpers

def _parse(template):
    try:
        return ctu._compile_jinja_template(template).environment.parse(template)
    except Exception:
        return None


def _loads(node, name):
    return isinstance(node, jn.Name) and node.ctx == "load" and node.name == name


def _keyed(node, name, key):
    if isinstance(node, jn.Getitem):
        return _loads(node.node, name) and isinstance(node.arg, jn.Const) and node.arg.value == key
    if isinstance(node, jn.Getattr):
        return _loads(node.node, name) and node.attr == key
    return False


def _reaches(node, name, key=None):
    """`name` (or `name.key`), seen through filters, tests and slices."""
    if isinstance(node, jn.Filter):
        return node.node is not None and _reaches(node.node, name, key)
    if isinstance(node, jn.Test):
        return _reaches(node.node, name, key)
    if isinstance(node, jn.Getitem) and isinstance(node.arg, jn.Slice):
        return _reaches(node.node, name, key)
    return _keyed(node, name, key) if key else _loads(node, name)


class _Unclear(Exception):
    """vLLM's detector asserts a plain name here; anything else ends detection with its default."""


def _plain_name(node):
    if not isinstance(node, jn.Name):
        raise _Unclear()
    return node.name


def _message_lists(root):
    names, queue = ["messages"], ["messages"]
    while queue:
        current = queue.pop(0)
        for a in root.find_all(jn.Assign):
            if _reaches(a.node, current):
                lhs = _plain_name(a.target)
                names.append(lhs)
                if lhs != current:
                    queue.append(lhs)
    return names


def _message_vars(root):
    lists = _message_lists(root)
    out = []
    for loop in root.find_all(jn.For):
        if any(_reaches(loop.iter, n) for n in lists):
            out.append(_plain_name(loop.target))
    return out


def _loops_over_content(root):
    msgs = _message_vars(root)
    in_macro, params_of_loop = set(), {}
    for macro in root.find_all(jn.Macro):
        params = [a.name for a in macro.args]
        bound = set()
        for call in root.find_all(jn.Call):
            if not (isinstance(call.node, jn.Name) and call.node.name == macro.name):
                continue
            for i, arg in enumerate(call.args):
                if i < len(params) and any(_reaches(arg, m, "content") for m in msgs):
                    bound.add(params[i])
            for kw in call.kwargs:
                if kw.key in params and any(_reaches(kw.value, m, "content") for m in msgs):
                    bound.add(kw.key)
        for loop in macro.find_all(jn.For):
            in_macro.add(id(loop))
            if bound:
                params_of_loop[id(loop)] = bound
    for loop in root.find_all(jn.For):
        if any(_reaches(loop.iter, m, "content") for m in msgs):
            _plain_name(loop.target)
            return True
        bound = params_of_loop.get(id(loop))
        if isinstance(loop.iter, jn.Name) and bound is not None and loop.iter.name in bound:
            _plain_name(loop.target)
            return True
        if id(loop) not in in_macro and isinstance(loop.iter, jn.Name) and loop.iter.name == "content":
            _plain_name(loop.target)
            return True
    return False


def vllm_content_format(template):
    """Section 1.2: "openai" when a loop iterates a message's content, else "string"."""
    root = _parse(template)
    if root is None:
        return "string"
    try:
        return "openai" if _loops_over_content(root) else "string"
    except _Unclear:
        return "string"


def sglang_content_format(template):
    """Section 2.2: media keywords anywhere, or a loop over message/msg/m .content."""
    if any(k in template for k in ("image", "audio", "video", "vision")):
        return "openai"
    root = _parse(template)
    if root is None:
        return "string"
    for loop in root.find_all(jn.For):
        if any(_reaches(loop.iter, v, "content") for v in ("message", "msg", "m")):
            return "openai"
    return "string"


# ---------------------------------------------------------------- vLLM (section 1)

VLLM_TEXT_FIELDS = {"text": "text", "input_text": "text", "output_text": "text", "refusal": "refusal",
                    "thinking": "thinking"}
VLLM_MEDIA = {"image_url": "image", "input_image": "image", "image_pil": "image", "image_embeds": "image",
              "audio_url": "audio", "input_audio": "audio", "audio_embeds": "audio", "video_url": "video",
              "video_embeds": "video"}
BILLING = "x-anthropic-billing-header"
# Every key of the content-part schemas; other keys of a part are copied onto the normalised part.
VLLM_PART_FIELDS = {"type", "text", "refusal", "thinking", "closed", "uuid", "name", "image_url", "input_image",
                    "image_pil", "image_embeds", "audio_url", "input_audio", "audio_embeds", "video_url",
                    "video_embeds", "data", "file"}


def vllm_tool_call(item):
    """Validation against openai-python's tool-call TypedDict: required keys, declared order."""
    if not isinstance(item, dict):
        raise Rejected("tool_call_not_an_object")
    if not isinstance(item.get("id"), str):
        raise Rejected("tool_call_without_id")
    fn = item.get("function")
    if item.get("type") != "function" or not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise Rejected("tool_call_not_a_function")
    if not isinstance(fn.get("arguments"), str):
        raise Rejected("tool_call_arguments_not_a_string")
    return {"id": item["id"], "function": {"arguments": fn["arguments"], "name": fn["name"]}, "type": "function"}


def vllm_parts(role, content, fmt):
    if content is None:
        parts = []
    elif isinstance(content, str):
        parts = [{"type": "text", "text": content}]
    elif isinstance(content, list):
        parts = content
    else:
        raise Rejected("content_not_text_or_parts")
    if role == "system":
        kept = []
        for p in parts:
            text = p if isinstance(p, str) else (p.get("text") if isinstance(p, dict) and p.get("type") == "text" else None)
            if not (isinstance(text, str) and text.startswith(BILLING)):
                kept.append(p)
                continue
            rest = text.partition("\n")[2]
            if rest:
                kept.append(rest if isinstance(p, str) else dict(p, text=rest))
        parts = kept
    out = []
    for p in parts:
        if isinstance(p, str):
            out.append({"type": "text", "text": p} if fmt == "openai" else p)
            continue
        if not isinstance(p, dict):
            raise Rejected("content_part_not_an_object")
        kind = p.get("type")
        if kind in VLLM_TEXT_FIELDS:
            text = p.get(VLLM_TEXT_FIELDS[kind])
            if text is None:
                if kind in ("text", "refusal"):
                    continue
                raise Rejected("content_part_without_text")
            if fmt == "openai":
                out.append(dict({"type": "text", "text": text}, **{k: v for k, v in p.items() if k not in VLLM_PART_FIELDS}))
            else:
                out.append(text)
        elif kind in VLLM_MEDIA and fmt == "openai":
            out.append(dict({"type": VLLM_MEDIA[kind]}, **{k: v for k, v in p.items() if k not in VLLM_PART_FIELDS}))
        elif kind in VLLM_MEDIA or kind in ("tool_reference", "prompt_embeds"):
            raise Unsupported(f"content part {kind!r}")
        else:
            raise Rejected("content_part_unknown", repr(kind))
    if fmt == "openai":
        return [x for x in out if x]
    return "\n".join(x for x in out if x)


def vllm_message(m, fmt):
    role = m.get("role")
    if not isinstance(role, str):
        raise Rejected("role_not_a_string")
    out = {"role": role, "content": vllm_parts(role, m.get("content"), fmt)}
    if role == "assistant":
        calls = m.get("tool_calls")
        if calls is not None:
            if not isinstance(calls, list):
                raise Rejected("tool_calls_not_a_list")
            out["tool_calls"] = [vllm_tool_call(c) for c in calls]
        reasoning = m.get("reasoning")
        if reasoning is not None:
            if not isinstance(reasoning, str):
                raise Rejected("reasoning_not_a_string")
            out["reasoning"] = reasoning
            out["reasoning_content"] = reasoning
    elif role == "tool":
        if "tool_call_id" in m:
            out["tool_call_id"] = m["tool_call_id"]
        c = out["content"]
        if isinstance(c, list) and not any(isinstance(x, dict) and x.get("type") != "text" for x in c):
            texts = [x.get("text", "") for x in c if isinstance(x, dict) and x.get("type") == "text"]
            out["content"] = "\n".join(texts) if texts else ""
    if isinstance(m.get("name"), str):
        out["name"] = m["name"]
    if isinstance(m.get("task"), str):
        out["task"] = m["task"]
    if role == "developer":
        out["tools"] = m.get("tools")
    return out


def vllm_arguments(call):
    fn = call["function"]
    args = fn.get("arguments")
    if not args:
        fn["arguments"] = {}
        return
    if isinstance(args, dict):
        return
    try:
        parsed = json.loads(args)
    except json.JSONDecodeError:
        parsed = None
    fn["arguments"] = parsed if isinstance(parsed, dict) else {}


LAX_TRUE = {"1", "on", "t", "true", "y", "yes"}
LAX_FALSE = {"0", "off", "f", "false", "n", "no"}


def lax_bool(v):
    """pydantic's lax `bool | None`: None, a bool, 0/1, or a boolean word (any case)."""
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, (int, float)) and v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.lower() in LAX_TRUE | LAX_FALSE:
        return v.lower() in LAX_TRUE
    raise Rejected("tool_field_invalid")


def vllm_tool(t):
    # ChatCompletionToolsParam / FunctionDefinition (vLLM 0.32): only the models' own fields
    # are dumped; strict and defer_loading only when set; a tool-level defer_loading is also
    # copied into a function without one.
    if not isinstance(t, dict) or not isinstance(t.get("function"), dict) or not isinstance(t["function"].get("name"), str):
        raise Rejected("tool_not_a_function")
    if t.get("type", "function") != "function":
        raise Rejected("tool_not_a_function")
    f = t["function"]
    description, parameters = f.get("description"), f.get("parameters")
    if description is not None and not isinstance(description, str):
        raise Rejected("tool_field_invalid")
    if parameters is not None and not isinstance(parameters, dict):
        raise Rejected("tool_field_invalid")
    strict = lax_bool(f.get("strict"))
    tool_defer = lax_bool(t.get("defer_loading"))
    defer = lax_bool(f.get("defer_loading"))
    if defer is None:
        defer = tool_defer
    fn = {"name": f["name"], "description": description, "parameters": parameters}
    if strict is not None:
        fn["strict"] = strict
    if defer is not None:
        fn["defer_loading"] = defer
    out = {"type": "function", "function": fn}
    if tool_defer is not None:
        out["defer_loading"] = tool_defer
    return out


def vllm_request(template, messages, tools, kwargs, server_kwargs):
    fmt = vllm_content_format(template)
    conv = [vllm_message(m if isinstance(m, dict) else {}, fmt) for m in messages]
    for m in conv:
        if m["role"] == "assistant" and isinstance(m.get("tool_calls"), list):
            if not m["tool_calls"]:
                del m["tool_calls"]
                continue
            for c in m["tool_calls"]:
                vllm_arguments(c)
    if any(m["role"] == "developer" for m in conv) and '"developer"' not in template and "'developer'" not in template:
        conv = [dict({k: v for k, v in m.items() if k != "tools"}, role="system") if m["role"] == "developer" else m for m in conv]
        systems, rest, merge = [], [], False
        for i, m in enumerate(conv):
            if m["role"] == "system":
                merge = merge or i > 0 or bool(systems)
                c = m.get("content", "")
                if isinstance(c, list):
                    c = "\n".join(p["text"] if isinstance(p, dict) else p for p in c if isinstance(p, str) or (isinstance(p, dict) and "text" in p))
                if c:
                    systems.append(c)
            else:
                rest.append(m)
        if merge:
            conv = [{"role": "system", "content": "\n\n".join(systems)}] + rest
    for bad in ("chat_template", "tokenize"):
        if bad in kwargs:
            raise Rejected("kwarg_not_allowed", bad)
    merged = dict(server_kwargs)
    tool_list = None if tools is None else [vllm_tool(t) for t in tools]
    if tool_list is not None:
        merged["tools"] = tool_list
    for k, v in kwargs.items():
        if v is None or v == "auto":
            continue
        merged[k] = v
    merged["add_generation_prompt"] = True
    merged["continue_final_message"] = False
    tools_arg = merged.pop("tools", None)
    return conv, tools_arg, merged


# ---------------------------------------------------------------- SGLang (section 2)

SGLANG_ROLES = ("system", "assistant", "tool", "function", "developer", "latest_reminder")


def sglang_part(p):
    if not isinstance(p, dict):
        raise Rejected("content_part_not_an_object")
    kind = p.get("type")
    if kind == "text":
        if not isinstance(p.get("text"), str):
            raise Rejected("content_part_without_text")
        return {"type": "text", "text": p["text"]}
    if kind in ("thinking", "reasoning"):
        if (p.get("thinking") is None) == (p.get("text") is None):
            raise Rejected("content_part_without_text")
        return {"type": kind, "thinking": p.get("thinking"), "text": p.get("text")}
    if kind in ("image_url", "video_url", "audio_url", "input_audio", "tool_reference"):
        raise Unsupported(f"content part {kind!r}")
    raise Rejected("content_part_unknown", repr(kind))


def sglang_tool_call(c):
    if not isinstance(c, dict) or not isinstance(c.get("function"), dict):
        raise Rejected("tool_call_not_a_function")
    if c.get("type", "function") != "function":
        raise Rejected("tool_call_not_a_function")
    fn = c["function"]
    if fn.get("name") is not None and not isinstance(fn.get("name"), str):
        raise Rejected("tool_call_not_a_function")
    args = fn.get("arguments")
    if args is not None and not isinstance(args, (str, dict)):
        raise Rejected("tool_call_arguments_not_a_string")
    ident, index = c.get("id"), c.get("index")
    if ident is not None and not isinstance(ident, str):
        raise Rejected("tool_call_without_id")
    if index is not None and (not isinstance(index, int) or isinstance(index, bool)):
        raise Rejected("tool_call_not_a_function")
    if isinstance(args, str):
        try:
            args = orjson.loads(args)
        except orjson.JSONDecodeError:
            raise Rejected("arguments_invalid_json")
        if not isinstance(args, dict):
            raise Rejected("arguments_not_an_object")
    return {"id": ident, "index": index, "type": "function", "function": {"name": fn.get("name"), "arguments": args}}


def sglang_message(m, fmt):
    role = m.get("role")
    if not isinstance(role, str):
        raise Rejected("role_not_allowed")
    content = m.get("content")
    if content is not None and not isinstance(content, (str, list)):
        raise Rejected("content_not_text_or_parts")
    if role == "user":
        if content is None:
            raise Rejected("user_content_missing")
        d = {"role": "user", "content": content}
    else:
        role = role.lower()
        if role not in SGLANG_ROLES:
            raise Rejected("role_not_allowed")
        calls = m.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            raise Rejected("tool_calls_not_a_list")
        for key in ("tool_call_id", "name", "reasoning_content"):
            if m.get(key) is not None and not isinstance(m.get(key), str):
                raise Rejected(f"{key}_not_a_string")
        d = {"role": role, "content": content, "tool_call_id": m.get("tool_call_id"), "name": m.get("name"),
             "reasoning_content": m.get("reasoning_content"),
             "tool_calls": None if calls is None else [sglang_tool_call(c) for c in calls],
             "tools": None if m.get("tools") is None else [sglang_tool(t) for t in m["tools"]]}
    if isinstance(d["content"], list):
        d["content"] = [sglang_part(p) for p in d["content"]]
        if role != "assistant" and any(p["type"] in ("thinking", "reasoning") for p in d["content"]):
            raise Rejected("thinking_part_outside_assistant")
    if d["content"] is None:
        d["content"] = ""
    if not isinstance(d["content"], list):
        d = {k: v for k, v in d.items() if v is not None}
    elif fmt == "openai":
        parts = [{"type": "text", "text": p["text"]} for p in d["content"] if p["type"] == "text"]
        d = {k: v for k, v in d.items() if v is not None and k != "content"}
        d["content"] = parts
    else:
        texts = [p["text"] for p in d["content"] if p["type"] == "text"]
        d = dict(d, content=" ".join(texts) if texts else "")
        d = {k: v for k, v in d.items() if v is not None}
    if d["role"] == "tool" and isinstance(d.get("content"), list) and all(
            isinstance(p, str) or (isinstance(p, dict) and p.get("type") == "text") for p in d["content"]):
        d["content"] = " ".join(p if isinstance(p, str) else p["text"] for p in d["content"])
    return d


def sglang_tool(t):
    if not isinstance(t, dict) or not isinstance(t.get("function"), dict) or not isinstance(t["function"].get("name"), str):
        raise Rejected("tool_not_a_function")
    f = t["function"]
    if f.get("description") is not None and not isinstance(f["description"], str):
        raise Rejected("tool_not_a_function")
    strict = f.get("strict", False)
    if not isinstance(strict, bool):
        raise Rejected("tool_not_a_function")
    kind = t.get("type", "function")
    if not isinstance(kind, str):
        raise Rejected("tool_not_a_function")
    defer = t.get("defer_loading")
    fn_defer = f.get("defer_loading")
    if fn_defer is None and defer is not None:
        fn_defer = defer
    fn = {"description": f.get("description"), "name": f["name"], "parameters": f.get("parameters"), "strict": strict}
    if fn_defer is not None:
        fn["defer_loading"] = fn_defer
    return {"type": kind, "function": fn, "defer_loading": defer}


def sglang_request(template, messages, tools, kwargs, server_kwargs):
    fmt = sglang_content_format(template)
    conv = [sglang_message(m if isinstance(m, dict) else {}, fmt) for m in messages]
    last = conv[-1] if conv else None
    if last is not None and last["role"] == "assistant" and isinstance(last.get("content"), str):
        conv[-1] = {"role": "user", "content": last["content"]}
    tool_list = [sglang_tool(t) for t in tools] if tools else None
    merged = dict(kwargs)
    for k, v in server_kwargs.items():
        merged.setdefault(k, v)
    merged["add_generation_prompt"] = True
    return conv, tool_list, merged


# ---------------------------------------------------------------- rendering

def prompts_of(messages):
    """Every request a client sends: the history before each assistant message, and the whole
    conversation when it ends on a user or tool message."""
    out = [i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "assistant" and i > 0]
    if messages and messages[-1].get("role") != "assistant":
        out.append(len(messages))
    return out


def render_request(tok, template, profile, messages, tools, kwargs):
    msgs = copy.deepcopy(messages)
    if profile == "transformers":
        conv, tools_arg, kw = msgs, tools, dict(kwargs, add_generation_prompt=True)
    elif profile == "vllm":
        conv, tools_arg, kw = vllm_request(template, msgs, copy.deepcopy(tools), kwargs, {})
    else:
        conv, tools_arg, kw = sglang_request(template, msgs, copy.deepcopy(tools), kwargs, {})
    agp = kw.pop("add_generation_prompt")
    kw.pop("continue_final_message", None)
    try:
        return tok.apply_chat_template(conv, tools=tools_arg, tokenize=False, add_generation_prompt=agp, **kw)
    except Exception:
        if profile != "sglang" or not tools_arg:
            raise
        # SGLang retries once with the bare function dicts (Mistral-style templates).
        return tok.apply_chat_template(conv, tools=[t["function"] for t in tools_arg], tokenize=False,
                                       add_generation_prompt=agp, **kw)


def run_conversation(tok, template, profile, record):
    messages = record["messages"]
    out = {"prompts": []}
    for end in prompts_of(messages):
        try:
            text = render_request(tok, template, profile, messages[:end], record.get("tools"), {})
        except Rejected as e:
            out["fail"] = f"rejected:{e.code}"
            out["detail"] = str(e)
            break
        except Unsupported as e:
            out["fail"] = "unsupported"
            out["detail"] = str(e)
            break
        except Exception as e:
            out["fail"] = "template_error"
            out["detail"] = f"{type(e).__name__}: {e}"
            break
        ids = tok(text, add_special_tokens=False)["input_ids"]
        out["prompts"].append({"end": end, "text": text, "ids_len": len(ids),
                               "ids_sha256": hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest()})
    return out


def sample(lines, per_file):
    if per_file is None or per_file >= len(lines):
        return list(range(len(lines)))
    return sorted({i * len(lines) // per_file for i in range(per_file)})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", required=True, help="comma-separated directories under models/")
    ap.add_argument("--per-file", type=int, default=None, help="conversations per corpus file (default: all)")
    args = ap.parse_args()
    corpus = os.path.join(args.shared, "corpus")
    files = sorted(f for f in os.listdir(corpus) if f.endswith(".jsonl"))
    result = {"transformers": transformers.__version__, "jinja2": jinja2.__version__, "now": FIXED_NOW,
              "per_file": args.per_file, "cases": []}
    for model in args.models.split(","):
        tok = AutoTokenizer.from_pretrained(os.path.join(args.shared, "models", model))
        template = tok.chat_template if isinstance(tok.chat_template, str) else tok.chat_template.get("default")
        formats = {"vllm": vllm_content_format(template), "sglang": sglang_content_format(template)}
        result.setdefault("content_formats", {})[model] = formats
        for name in files:
            with open(os.path.join(corpus, name), encoding="utf-8") as fh:
                lines = fh.read().splitlines()
            for i in sample(lines, args.per_file):
                record = json.loads(lines[i])
                for profile in PROFILES:
                    case = {"model": model, "file": name, "line": i, "profile": profile}
                    case.update(run_conversation(tok, template, profile, record))
                    result["cases"].append(case)
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(result, fh, ensure_ascii=False)
    print(f"server profiles reference: transformers {transformers.__version__}: {len(result['cases'])} conversation renders",
          file=sys.stderr)


if __name__ == "__main__":
    main()
