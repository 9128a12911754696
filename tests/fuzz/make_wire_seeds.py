#!/usr/bin/env python3
"""make_wire_seeds.py - writes the seed streams of fuzz_store_wire into corpus/fuzz_store_wire/.

Each seed is one client's byte stream in the store's wire format (hccl/src/bootstrap/wire.h):
a 16-byte header (u16 magic 0x4843, u8 version 1, u8 op, u32 key_len, u64 arg, big-endian),
the key, and for SET the value. Valid sessions with and without the fuzz target's job token,
and the refusals the server must give. Run it again after a change to the format.
"""
import os
import struct

SET, GET, ADD, HELLO = 1, 2, 3, 4
TOKEN = b"fuzz-token"  # the token fuzz_store_wire.c gives its server


def req(op, key, arg=0, value=b"", magic=0x4843, version=1, key_len=None):
    kl = len(key) if key_len is None else key_len
    return struct.pack(">HBBIQ", magic, version, op, kl, arg) + key + value


def set_(key, value):
    return req(SET, key, len(value), value)


seeds = {
    "session": req(HELLO, TOKEN) + set_(b"rank/0", b"addr 127.0.0.1:4000") + req(ADD, b"n", 1)
    + req(ADD, b"n", (1 << 64) - 2) + req(GET, b"rank/0") + req(GET, b"n"),
    "no_token": set_(b"k", b"v") + req(GET, b"k") + req(ADD, b"k", 1) + set_(b"e", b""),
    "add_text": set_(b"c", b"-9223372036854775808") + req(ADD, b"c", (1 << 64) - 1)
    + set_(b"d", b"007") + req(ADD, b"d", 3) + req(GET, b"d"),
    "held_get": req(GET, b"not-yet") + req(GET, b"after"),
    "wrong_token": req(HELLO, b"another-job") + req(GET, b"k"),
    "bad_magic": b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    "bad_version": req(GET, b"k", version=2),
    "bad_op": req(9, b"k"),
    "key_empty": req(GET, b"", key_len=0),
    "key_huge": req(GET, b"k", key_len=0xFFFFFFFF),
    "key_limit": req(SET, b"K" * 1024, 1, b"x") + req(GET, b"K" * 1024),
    "token_long": req(HELLO, b"t" * 129),
    "value_huge": req(SET, b"big", 64 * 1024 * 1024 + 1),
    "value_partial": req(SET, b"big", 64 * 1024 * 1024, b"first bytes only"),
    "truncated": req(SET, b"key", 10, b"val")[:20],
}

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "fuzz_store_wire")
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
print(f"{len(seeds)} seeds in {out}")
