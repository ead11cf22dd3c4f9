#!/usr/bin/env python3
"""Writes the committed seed inputs in fuzz/seeds/<target>/ (small, hand-made; no external data).

Run from anywhere: python3 fuzz/make_seeds.py. Real captures, templates and conversations are
added to the working corpus at run time by fuzz/run.sh when ../shared exists; they are never
committed.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


class U64(int):
    """An int always written as msgpack uint 64 (0xcf), as vLLM writes block hashes."""


def mp(v):
    """A minimal msgpack encoder (enough for event batches)."""
    if isinstance(v, U64):
        return b"\xcf" + struct.pack(">Q", v)
    if v is None:
        return b"\xc0"
    if v is True:
        return b"\xc3"
    if v is False:
        return b"\xc2"
    if isinstance(v, int):
        if 0 <= v < 0x80:
            return bytes([v])
        if -32 <= v < 0:
            return struct.pack("b", v)
        if 0 <= v < 1 << 8:
            return b"\xcc" + struct.pack(">B", v)
        if 0 <= v < 1 << 16:
            return b"\xcd" + struct.pack(">H", v)
        if 0 <= v < 1 << 32:
            return b"\xce" + struct.pack(">I", v)
        if 0 <= v < 1 << 64:
            return b"\xcf" + struct.pack(">Q", v)
        return b"\xd3" + struct.pack(">q", v)
    if isinstance(v, float):
        return b"\xcb" + struct.pack(">d", v)
    if isinstance(v, str):
        b = v.encode()
        return (bytes([0xA0 | len(b)]) if len(b) < 32 else b"\xd9" + bytes([len(b)])) + b
    if isinstance(v, bytes):
        return b"\xc4" + bytes([len(v)]) + v
    if isinstance(v, (list, tuple)):
        head = bytes([0x90 | len(v)]) if len(v) < 16 else b"\xdc" + struct.pack(">H", len(v))
        return head + b"".join(mp(x) for x in v)
    if isinstance(v, dict):
        assert len(v) < 16
        return bytes([0x80 | len(v)]) + b"".join(mp(k) + mp(x) for k, x in v.items())
    raise TypeError(v)


def frame(topic, seq, payload):
    t = topic.encode()
    return struct.pack(">I", len(t)) + t + struct.pack(">Q", seq) + struct.pack(">I", len(payload)) + payload


def write(target, name, data):
    d = os.path.join(HERE, "seeds", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


toks = list(range(1, 33))
# vLLM array layout: [tag, block_hashes, parent, token_ids, block_size, lora_id, medium, ...]
stored = ["BlockStored", [1111, 2222], None, toks, 16, None, "GPU"]
stored_child = ["BlockStored", [3333], 2222, list(range(33, 49)), 16, None, "GPU", None, None, 0]
# As vLLM writes them (hashes as uint 64, every field): the decoder's fast path takes these.
h = [U64(0x9DA8B2180B280F96 + i) for i in range(8)]
v_stored = ["BlockStored", h[:2], None, toks, 16, None, "GPU", None, None, 0, "full_attention"]
v_stored2 = ["BlockStored", h[2:4], h[1], list(range(100, 132)), 16, None, "GPU", None, None, 0, "full_attention"]
v_stored3 = ["BlockStored", h[4:5], h[3], list(range(70000, 70016)), 16, None, "GPU", None, None, 0, "full_attention"]
v_removed = ["BlockRemoved", h[:2], "GPU", 0]
v_map = {"type": "BlockStored", "block_hashes": h[5:6], "parent_block_hash": None, "token_ids": toks[:16],
         "block_size": 16, "lora_id": None, "medium": "GPU"}
stored_bytes = ["BlockStored", [b"\x01" * 32], b"\x02" * 32, toks[:16], 16, 7, None, "lora-a", [["img", 3]]]
removed = ["BlockRemoved", [1111], "GPU"]
cleared = ["AllBlocksCleared"]
stored_map = {"type": "BlockStored", "block_hashes": [-5, 9], "parent_block_hash": None,
              "token_ids": toks, "block_size": 16, "lora_id": None}
sglang_stored = ["BlockStored", [42], None, toks[:16], 16, None, None, None, None, None, None, None, None, None, None, "salt"]

batches = {
    "array3": [1767225600.25, [stored, stored_child], 0],
    "array2-int-ts": [1767225600, [removed, cleared]],
    "map": {"ts": 1.5, "events": [stored_map, removed], "data_parallel_rank": None},
    "bytes-hashes": [2.0, [stored_bytes], 1, "extra"],
    "sglang": {"ts": 3.0, "events": [sglang_stored], "attn_dp_rank": 2},
    "empty": [0.0, []],
    "vllm-fast": [1767225600.5, [v_stored, v_stored2, v_stored3, v_removed], None],
    "vllm-fast-map": [1767225601.0, [v_map, v_removed, ["AllBlocksCleared"]], 0],
}
payloads = {k: mp(v) for k, v in batches.items()}
for k, p in payloads.items():
    write("decode_events", k + ".msgpack", p)

# Captures: raw concatenated msgpack, and frames (u32 topic len, topic, u64 seq, u32 len, payload).
raw = b"".join(payloads[k] for k in ["array3", "array2-int-ts", "map", "vllm-fast"])
frames = (frame("kv@pod-a@model-x", 0, payloads["array3"])
          + frame("kv@pod-a@model-x", 1, payloads["array2-int-ts"])
          + frame("kv@pod-b@model-x", 0, payloads["map"])
          + frame("pod-c", 7, payloads["bytes-hashes"])
          + frame("kv@pod-a@model-x", 2, payloads["vllm-fast"])
          + frame("kv@pod-a@model-x", 3, payloads["vllm-fast-map"]))
bad = frame("kv@pod-a@m", 0, payloads["array3"]) + frame("kv@pod-a@m", 1, b"\x93\xc1") + frame("kv@pod-a@m", 2, payloads["empty"])
for target in ["frames_reader", "replay_bytes"]:
    write(target, "raw.msgpack", raw)
    write(target, "capture.frames", frames)
    write(target, "bad-payload.frames", bad)
    write(target, "truncated.frames", frames[:-5])

# Conversations: the project's own fixtures plus a few edge cases.
fx = os.path.join(ROOT, "fixtures", "conversations")
for name in sorted(os.listdir(fx)):
    if not os.path.isfile(os.path.join(fx, name)):
        continue
    with open(os.path.join(fx, name), "rb") as f:
        write("conversation_json", name, f.read())
write("conversation_json", "tools-now.json",
      '{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,'
      '"tool_calls":[{"type":"function","function":{"name":"f","arguments":{"a":1}}}]},'
      '{"role":"tool","content":"1"}],"tools":[{"type":"function","function":{"name":"f"}}],'
      '"documents":[{"title":"t","text":"x"}],"now":"2026-01-15T10:00:00"}')
write("conversation_json", "generated.json",
      '\ufeff{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a",'
      '"generated":"a","generated_ids":[1,2,4294967295]}],"now_per_prompt":["2026-01-15 10:00"]}')

# Templates: `template \0 conversation-json`.
with open(os.path.join(fx, "tool-loop.json"), "rb") as f:
    conv = f.read()
ft = os.path.join(ROOT, "fixtures", "templates")
for name in sorted(os.listdir(ft)):
    with open(os.path.join(ft, name), "rb") as f:
        write("template_render", name, f.read() + b"\0" + conv)
write("template_render", "chatml.jinja",
      "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] | trim "
      "+ '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
write("template_render", "methods.jinja",
      "{%- set ns = namespace(sys='') -%}{%- for m in messages -%}{%- if m.role == 'system' -%}"
      "{%- set ns.sys = m.content.strip().split('\\n')|join(' ') -%}{%- elif m.content is string "
      "and m.content.startswith('W') -%}{{ m.content|tojson(indent=2) }}{%- else -%}"
      "{{ bos_token ~ m.role|upper ~ (m.content or '')[:10]|replace('a','b') ~ eos_token }}"
      "{%- endif -%}{%- endfor -%}{{ ns.sys }}{{ tools|tojson if tools else '' }}"
      "{{ strftime_now('%Y-%m-%d') }}{% for k, v in {'a': 1}.items() %}{{ k }}{{ v }}{% endfor %}"
      "{{ messages|length }}{{ messages[-1].content|indent(4) }}{% generation %}x{% endgeneration %}")

# Hostile templates (each ended in an abort, a stack overflow or gigabytes before the bounds
# of guard.rs, namespace.rs and bounded.rs): deep expressions, namespaces holding themselves,
# wide format specs and padding.
hostile = {
    "deep-plus.jinja": "{{ " + "1+" * 5000 + "1 }}",
    "deep-neg.jinja": "{{ " + "-" * 5000 + "1 }}",
    "deep-attr.jinja": "{{ messages" + ".a" * 3000 + " }}",
    "deep-filter.jinja": "{{ 1" + "|abs" * 2000 + " }}",
    "deep-else.jinja": "{{ " + "1 if x else " * 1000 + "1 }}",
    "deep-concat.jinja": "{{ " + "'a' ~ " * 2000 + "1 }}",
    "deep-for.jinja": "{% for x in [[[[[[x]]]]]] %}" * 100 + "{% endfor %}" * 100,
    "ns-self.jinja": "{% set ns = namespace(a=1) %}{% set ns.a = ns %}{{ ns }}{{ ns|string }}"
                     "{{ ns|pprint }}{{ ns ~ '' }}{{ '{}'.format(ns) }}{{ ns == ns }}{{ ns|tojson }}",
    "ns-list.jinja": "{% set ns = namespace(a=1) %}{% set ns.a = [ns, {'k': ns}] %}{{ ns }}{{ ns.a }}"
                     "{{ ns.a|unique|list|length }}{{ ns.a|sort|length }}{{ ns.a|tojson }}",
    "ns-views.jinja": "{% set ns = namespace(a=1) %}{% set ns.b = ns.items() %}{{ ns|list }}{{ ns|length }}"
                      "{% for k in ns %}{% endfor %}{% set ns.c = ns|items %}",
    "ns-deep.jinja": "{% set ns = namespace(x=1) %}{% for i in range(2000) %}{% set ns.x = [ns.x] %}"
                     "{% endfor %}{{ ns.x }}",
    "set-deep.jinja": "{% set x = 1 %}" + "{% set x = [[[[[[[[[[x]]]]]]]]]] %}" * 100 + "{{ x }}",
    "macro-deep.jinja": "{% macro m(x, n) %}{% if n %}{{ m(x|batch(1)|batch(1)|batch(1), n - 1) }}"
                        "{% else %}{{ x|tojson }}{% endif %}{% endmacro %}{{ m([1], 90) }}",
    "wide-format.jinja": "{{ '{:>999999999}'.format('x') }}{{ '{:0999999999d}'.format(1) }}"
                         "{{ '{:.2147483647f}'.format(1.0) }}{{ '%0999999999d'|format(1) }}",
    "padding.jinja": "{{ 'x'.center(10**10) }}{{ 'x'.ljust(10**10) }}{{ 'x'.rjust(10**10) }}"
                     "{{ 'x'.zfill(10**10) }}{{ 'x'.center(20, '*') }}",
    "repeat-display.jinja": "{% set s = 'x' * 100000 %}{% set l = [s] * 100000 %}{{ (l ~ '')|length }}"
                            "{{ l|string|length }}{{ l|join|length }}{{ l|tojson|length }}",
}
for name, text in hostile.items():
    write("template_render", name, text.encode() + b"\0" + conv)

# Methods and format specs: `call, shape, receiver \0 args` (see fuzz/src/lib.rs, CALLS).
CALLS = [".center", ".ljust", ".rjust", ".zfill", ".format", ".replace", ".join", "|format",
         "|replace", "|join", "|indent", "|tojson", "|string", "|pprint", "|trim", "|center",
         "|batch", "|slice", "|wordwrap", "|truncate", " ~ ", " * ", " + "]


def method(name, call, shape, *fields):
    data = bytes([CALLS.index(call), shape]) + b"\0".join(f.encode() for f in fields)
    write("template_methods", name, data)


method("center-huge", ".center", 1, "sx", "i10000000000")
method("center-fill", ".center", 2, "sx", "i20", "s*")
method("ljust", ".ljust", 2, "sab", "i7", "s.")
method("rjust-negative", ".rjust", 1, "sab", "i-3")
method("zfill-huge", ".zfill", 1, "s-5", "i999999999")
method("format-width", ".format", 1, "s{:>999999999}", "sx")
method("format-zeros", ".format", 1, "s{:0999999999d}", "i1")
method("format-precision", ".format", 1, "s{:.2147483647f}", "f1.0")
method("format-ok", ".format", 3, "s{:>6}|{:06.2f}|{:,}|{0!r}", "sa", "f3.14159", "i1234567")
method("format-repeat", ".format", 1, "s" + "{0}" * 200, "s" + "y" * 400)
method("printf-width", "|format", 1, "s%0999999999d", "i1")
method("printf-ok", "|format", 2, "s%-8s|%5.2f", "sab", "f2.5")
method("replace-empty", ".replace", 2, "s" + "a" * 300, "s", "s" + "b" * 300)
method("replace-filter", "|replace", 3, "sabcabc", "sb", "sxyz", "i1")
method("join-method", ".join", 1, "s, ", "la,b,c")
method("join-non-str", ".join", 1, "s,", "da=1,b=2")
method("join-filter", "|join", 1, "la,b,c", "s--")
method("indent-huge", "|indent", 1, "sa\nb", "i1000000000")
method("tojson-indent", "|tojson", 1 | 4 | (1 << 3), "dk=v,l=w", "i100000")
method("concat-list", " ~ ", 1, "la,b,c", "sx")
method("repeat", " * ", 1, "sxy", "i100000000")
method("twice-center", ".center", 1 | 0x80, "sx", "i300")

# Prepared tokenizer bodies (after the 32-byte header the harness adds): sha256, where the
# vocabulary and merges start in tokenizer.json (in the harness's SOURCE_JSON, whose vocabulary
# and merges are empty: 18 and 30; or E64 for no merges), rest JSON, vocab size, ids, blob, starts, lengths, vocab table, merge table (each
# slot's key, then its value). The vocabulary table is at most half full and the merge table at
# most three quarters, or the loader refuses them.
def u64(v):
    return struct.pack("<Q", v)


def by(b):
    return u64(len(b)) + b


def u32s(vs):
    return b"".join(struct.pack("<I", v) for v in vs)


E32 = 0xFFFFFFFF
E64 = 0xFFFFFFFFFFFFFFFF
rest = b'{"model":{"type":"BPE","unk_token":null,"byte_fallback":false},"added_tokens":[{"id":2,"content":"<s>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}],"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true},"decoder":{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true}}'
blob = b"ab<s>"
SPANS = u64(18) + u64(30)
body = (by(b"0" * 64) + SPANS + by(rest) + u64(3) + u64(3) + by(blob)
        + u32s([0, 1, 2]) + u32s([1, 1, 3])
        + u64(8) + u32s([0, 1, E32, 2, E32, E32, E32, E32])
        + u64(2) + u64(0) + u64(2) + u64(E64) + u64(0))
write("prepared_tokenizer", "tiny.body", body)
write("prepared_tokenizer", "no-merges.body",
      by(b"") + u64(18) + u64(E64) + by(b'{"model":{}}') + u64(0) + u64(0) + by(b"") + u64(1) + u32s([E32]) + u64(1) + u64(E64) + u64(0))

# seeds/prepared_tokenizer/tiny-plain.body is not made here: it is the prepared form of the
# project fixture fixtures/models/tiny-plain/tokenizer.json without its 32-byte header, made with
#   KVAUDIT_TOKENIZER_CACHE=/tmp/c kvaudit keys -m fixtures/models/tiny-plain --model-name x \
#       -c fixtures/conversations/tool-loop.json --offline
#   python3 -c "import sys; sys.stdout.buffer.write(open(sys.argv[1],'rb').read()[32:])" /tmp/c/*.kvtok \
#       > fuzz/seeds/prepared_tokenizer/tiny-plain.body
# and then this script points its offsets (after the 8 + 64 bytes of its SHA-256) at the
# harness's empty vocabulary and merges, so that it loads with its real tables.
plain = os.path.join(HERE, "seeds", "prepared_tokenizer", "tiny-plain.body")
with open(plain, "rb") as f:
    data = f.read()
assert data[:8] == u64(64), "tiny-plain.body does not start with a SHA-256"
write("prepared_tokenizer", "tiny-plain.body", data[:72] + SPANS + data[88:])


# zmtp_frames: a mode byte (fuzz/src/lib.rs: bit 0 clear = a valid greeting is put first; the
# other bits pick small limits), then what a ZMTP peer sends.
def zframe(data, more=False, command=False):
    flags = (1 if more else 0) | (4 if command else 0)
    if len(data) > 255:
        return bytes([flags | 2]) + struct.pack(">Q", len(data)) + data
    return bytes([flags, len(data)]) + data


def zready(socket_type):
    body = b"\x05READY" + b"\x0bSocket-Type" + struct.pack(">I", len(socket_type)) + socket_type
    return zframe(body, command=True)


def zmessage(*frames):
    return b"".join(zframe(f, more=i + 1 < len(frames)) for i, f in enumerate(frames))


GREETING = b"\xff" + b"\x00" * 7 + b"\x01\x7f\x03\x01" + b"NULL" + b"\x00" * 16 + b"\x00" * 32
assert len(GREETING) == 64
# Mode 0xe4: limits 64 KiB message, 64 frames, 64 KiB command; the greeting is put first.
BIG = bytes([0xe4])
batch = mp([1.5, [{"type": "AllBlocksCleared"}]])
write("zmtp_frames", "publisher.bin",
      BIG + zready(b"PUB") + zmessage(b"kv@pod@m", struct.pack(">Q", 7), batch) * 2)
write("zmtp_frames", "replay-reply.bin",
      BIG + zready(b"ROUTER") + zmessage(b"", b"kv@pod@m", struct.pack(">Q", 8), b"\x90" * 300)
      + zmessage(b"", b"", b"\xff" * 8, b""))
write("zmtp_frames", "ping-and-claim.bin",
      BIG + zready(b"PUB") + zframe(b"\x04PING\x00\x0actx", command=True)
      + b"\x02" + struct.pack(">Q", 1 << 40) + b"\xab" * 16)
write("zmtp_frames", "empty-frames.bin", BIG + zready(b"PUB") + b"\x01\x00" * 100 + b"\x00\x00")
# Mode 0x19 (bit 0 set): the greeting is in the data; limits 16-byte messages, 3 frames,
# 0-byte commands.
write("zmtp_frames", "own-greeting-small-limits.bin",
      bytes([0x19]) + GREETING + zmessage(b"0123456789", b"abcdef") + zmessage(b"x" * 17))

# Parquet: the fixture chats in the three layouts and codecs the corpus reads (written with
# pyarrow, as tests/make_parquet.py writes them), a file cut short, and a bare footer.
try:
    import io
    import json as _json
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError:
    print("pyarrow is not installed: the parquet_rows seeds are left as they are")
else:
    rows = [{"messages": [{"role": "user", "content": "hi"},
                          {"role": "assistant", "content": "Hello!"},
                          {"role": "user", "content": "How are you?"}]},
            {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": None},
                          {"role": "tool", "content": "42"}]}]
    wildchat = [{"conversation": [dict(m, timestamp=None, toxic=False) for m in r["messages"]],
                 "model": "gpt-4"} for r in rows]
    sharegpt = [{"conversations": [{"from": m["role"], "value": m["content"] or ""}
                                   for m in r["messages"]]} for r in rows]
    for name, table_rows in [("openai", rows), ("wildchat", wildchat), ("sharegpt", sharegpt)]:
        for codec in ["snappy", "zstd", "gzip"]:
            out = io.BytesIO()
            pq.write_table(pa.Table.from_pylist(table_rows), out, compression=codec,
                           row_group_size=1)
            data = out.getvalue()
            write("parquet_rows", f"{name}-{codec}.parquet", data)
    write("parquet_rows", "cut.parquet", data[: len(data) // 2])
    write("parquet_rows", "footer-only.parquet", b"PAR1" + struct.pack("<I", 0) + b"PAR1")

# GGUF: a small byte-level BPE vocabulary with merges, token types, a template and special
# token ids, as llama.cpp's converter writes one (little-endian, version 3, no tensors).
def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gkv(key, ty, payload):
    return gstr(key) + struct.pack("<I", ty) + payload


def garr(ty, items):
    if ty == 8:
        body = b"".join(gstr(i) for i in items)
    else:
        body = b"".join(struct.pack("<i", i) for i in items)
    return struct.pack("<IQ", ty, len(items)) + body


gtokens = [chr(c) for c in range(33, 127)] + ["he", "ll", "hello", "<|im_start|>", "<|im_end|>"]
gkvs = [
    gkv("general.architecture", 8, gstr("qwen3")),
    gkv("tokenizer.ggml.model", 8, gstr("gpt2")),
    gkv("tokenizer.ggml.pre", 8, gstr("qwen2")),
    gkv("tokenizer.ggml.tokens", 9, garr(8, gtokens)),
    gkv("tokenizer.ggml.token_type", 9, garr(5, [1] * (len(gtokens) - 2) + [3, 3])),
    gkv("tokenizer.ggml.merges", 9, garr(8, ["h e", "l l"])),
    gkv("tokenizer.ggml.eos_token_id", 4, struct.pack("<I", len(gtokens) - 1)),
    gkv("tokenizer.ggml.add_bos_token", 7, b"\x00"),
    gkv("tokenizer.chat_template", 8,
        gstr("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}")),
]
gguf = b"GGUF" + struct.pack("<IQQ", 3, 0, len(gkvs)) + b"".join(gkvs)
write("gguf_metadata", "tiny.gguf", gguf)
write("gguf_metadata", "cut.gguf", gguf[: len(gguf) // 2])
write("gguf_metadata", "llama-spm.gguf", b"GGUF" + struct.pack("<IQQ", 3, 0, 1)
      + gkv("tokenizer.ggml.model", 8, gstr("llama")))
