#!/usr/bin/env python3
"""Write JSON rows (one per line) as a Parquet file with pyarrow, as Hugging Face datasets ship
them: the row's keys as columns (an OpenAI `messages` list of structs, WildChat's
`conversation` with its per-message fields, ShareGPT's `conversations` of from/value).

    python3 tests/make_parquet.py IN.jsonl OUT.parquet [--codec snappy|zstd|gzip|none]
        [--row-group-rows N] [--wildchat | --sharegpt] [--jsonl-out SAME.jsonl]

--sharegpt rewrites them into ShareGPT's (`conversations` of from/value: human, gpt, system,
observation). --jsonl-out writes the table's rows back as JSON lines, as `datasets` hands them to Python
(a struct field a message lacks is there as null): the same rows as the Parquet file.

--wildchat rewrites OpenAI rows into WildChat's layout first: `conversation` instead of
`messages`, each message with WildChat's extra fields (timestamp, language, toxic, redacted,
turn_identifier), and row fields (conversation_hash, model, turn) beside it.
"""
import argparse
import hashlib
import json

import pyarrow as pa
import pyarrow.parquet as pq


def wildchat(row, index):
    messages = row["messages"] if isinstance(row, dict) else row
    conversation = []
    for turn, m in enumerate(messages):
        conversation.append({
            "content": m.get("content") or "",
            "role": m["role"],
            "timestamp": None if m["role"] == "user" else f"2024-05-0{turn % 9 + 1}T10:00:00",
            "language": "English",
            "toxic": False,
            "redacted": False,
            "turn_identifier": index * 100 + turn,
        })
    text = json.dumps(conversation, sort_keys=True).encode()
    return {
        "conversation_hash": hashlib.md5(text).hexdigest(),
        "model": "gpt-4-0314",
        "conversation": conversation,
        "turn": sum(1 for m in conversation if m["role"] == "user"),
    }


def sharegpt(row):
    messages = row["messages"] if isinstance(row, dict) else row
    speaker = {"user": "human", "assistant": "gpt", "system": "system", "tool": "observation"}
    return {
        "id": row.get("id") if isinstance(row, dict) else None,
        "conversations": [{"from": speaker.get(m["role"], m["role"]), "value": m.get("content") or ""}
                          for m in messages],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--codec", default="snappy", choices=["snappy", "zstd", "gzip", "none"])
    ap.add_argument("--row-group-rows", type=int, default=64)
    ap.add_argument("--wildchat", action="store_true")
    ap.add_argument("--sharegpt", action="store_true")
    ap.add_argument("--jsonl-out")
    args = ap.parse_args()
    rows = []
    with open(args.input, encoding="utf-8") as f:
        for line in f:
            # A table holds rows, not lines: a line that is not JSON has no place in one, and
            # a bare list of messages becomes a `messages` column.
            try:
                row = json.loads(line)
            except ValueError:
                continue
            rows.append({"messages": row} if isinstance(row, list) else row)
    if args.wildchat:
        rows = [wildchat(r, i) for i, r in enumerate(rows)]
    if args.sharegpt:
        rows = [sharegpt(r) for r in rows]
    table = pa.Table.from_pylist(rows)
    pq.write_table(table, args.output, compression=args.codec,
                   row_group_size=args.row_group_rows)
    if args.jsonl_out:
        with open(args.jsonl_out, "w", encoding="utf-8") as f:
            for row in pq.read_table(args.output).to_pylist():
                f.write(json.dumps(row, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
