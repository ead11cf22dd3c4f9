#!/usr/bin/env python3
"""Write a hostile Parquet file: small on disk, asking a reader for far more work or memory.

    python3 tests/make_hostile_parquet.py OUT.parquet SHAPE [N] [SIZE]

Shapes (each a real file pyarrow reads, except where the footer is rewritten):
  repeated-groups N     one zstd row group, its footer listing it N times (every copy points
                        at the same pages)
  dictionary-rows N S   N rows whose `text` is one S-byte string, dictionary-encoded: a few
                        kilobytes that make N*S bytes of rows
  dictionary-list N     one row whose `messages` list holds N messages, each role and content
                        a reference into a two-entry dictionary
  wide-group C S        one row group of C string columns holding one S-byte value each
                        (zstd: compresses to almost nothing)
  many-columns N        N int8 columns
  delta-rows N L        N rows of one L-byte string, DELTA_BYTE_ARRAY-encoded: each value
                        repeats the one before as its prefix, so the page holds a few bytes
                        a value
  tiny-rows G N         G row groups of N one-int rows (zstd: a few hundred kilobytes)
"""
import struct
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def varint(data, at):
    out = shift = 0
    while True:
        b = data[at]
        at += 1
        out |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return out, at


def encode_varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def skip(data, at, ty):
    """Moves past one Thrift compact value of type `ty`."""
    if ty in (1, 2):
        return at
    if ty == 3:
        return at + 1
    if ty in (4, 5, 6):
        return varint(data, at)[1]
    if ty == 7:
        return at + 8
    if ty == 8:
        n, at = varint(data, at)
        return at + n
    if ty in (9, 10):
        head = data[at]
        at += 1
        n = head >> 4
        if n == 15:
            n, at = varint(data, at)
        for _ in range(n):
            at = skip(data, at, head & 0x0F) if head & 0x0F not in (1, 2) else at + 1
        return at
    if ty == 12:
        while True:
            head = data[at]
            at += 1
            if head == 0:
                return at
            if head >> 4 == 0:
                at = varint(data, at)[1]
            at = skip(data, at, head & 0x0F)
    raise ValueError(f"thrift type {ty}")


def repeat_row_groups(path, copies):
    """Rewrites the footer so that its row-group list (FileMetaData field 4) holds its one
    row group `copies` times."""
    data = open(path, "rb").read()
    (footer_len,) = struct.unpack_from("<I", data, len(data) - 8)
    start = len(data) - 8 - footer_len
    footer = data[start:len(data) - 8]
    at, field = 0, 0
    while True:
        head = footer[at]
        field_at = at
        at += 1
        assert head, "no row groups in the footer"
        delta, ty = head >> 4, head & 0x0F
        if delta == 0:
            raise ValueError("long-form field ids are not expected here")
        field += delta
        if field == 4 and ty == 9:
            list_head = footer[at]
            assert list_head >> 4 == 1, "expected one row group"
            first = at + 1
            end = skip(footer, first, 12)
            group = footer[first:end]
            new_list = bytes([0xF0 | 12]) + encode_varint(copies) + group * copies
            footer = footer[:at] + new_list + footer[end:]
            break
        at = skip(footer, at, ty)
    del field_at
    out = data[:start] + footer + struct.pack("<I", len(footer)) + b"PAR1"
    open(path, "wb").write(out)


def main():
    out, shape = sys.argv[1], sys.argv[2]
    args = [int(a) for a in sys.argv[3:]]
    if shape == "repeated-groups":
        rows = [{"messages": [{"role": "user", "content": "x" * 64}]}] * 64
        pq.write_table(pa.Table.from_pylist(rows), out, compression="zstd")
        repeat_row_groups(out, args[0])
    elif shape == "dictionary-rows":
        n, size = args
        text = pa.DictionaryArray.from_arrays(
            pa.array(np.zeros(n, dtype=np.int32)), pa.array(["a" * size])
        )
        pq.write_table(pa.table({"text": text}), out, compression="zstd", row_group_size=n)
    elif shape == "dictionary-list":
        (n,) = args
        role = pa.DictionaryArray.from_arrays(
            pa.array(np.zeros(n, dtype=np.int32)), pa.array(["user", "assistant"])
        )
        content = pa.DictionaryArray.from_arrays(
            pa.array(np.ones(n, dtype=np.int32)), pa.array(["hello", "x" * 300])
        )
        messages = pa.StructArray.from_arrays([role, content], names=["role", "content"])
        lists = pa.ListArray.from_arrays(pa.array([0, n], type=pa.int32()), messages)
        pq.write_table(pa.table({"messages": lists}), out, compression="zstd")
    elif shape == "wide-group":
        cols, size = args
        table = pa.table({f"c{i}": pa.array(["z" * size]) for i in range(cols)})
        pq.write_table(table, out, compression="zstd", use_dictionary=False,
                       data_page_size=1 << 30)
    elif shape == "many-columns":
        (n,) = args
        table = pa.table({f"c{i}": pa.array([1], type=pa.int8()) for i in range(n)})
        pq.write_table(table, out, compression="none")
    elif shape == "delta-rows":
        n, size = args
        table = pa.table({"text": pa.array(["d" * size] * n)})
        pq.write_table(table, out, compression="none", use_dictionary=False,
                       column_encoding={"text": "DELTA_BYTE_ARRAY"})
    elif shape == "tiny-rows":
        groups, n = args
        table = pa.table({"c": pa.array(np.zeros(groups * n, dtype=np.int32))})
        pq.write_table(table, out, compression="zstd", row_group_size=n)
    else:
        sys.exit(f"unknown shape {shape}")


if __name__ == "__main__":
    main()
