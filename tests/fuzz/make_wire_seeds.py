#!/usr/bin/env python3
"""make_wire_seeds.py - writes the seed streams of the wire-format targets: fuzz_store_wire into
corpus/fuzz_store_wire/ and fuzz_tcp_handshake into corpus/fuzz_tcp_handshake/.

A fuzz_store_wire seed is one client's byte stream in the store's wire format
(hccl/src/bootstrap/wire.h): a 16-byte header (u16 magic 0x4843, u8 version 1, u8 op, u32
key_len, u64 arg, big-endian), the key, and for SET the value. Valid sessions with and without
the fuzz target's job token, and the refusals the server must give.

A fuzz_tcp_handshake seed is one connection to the TCP transport's listener
(hccl/src/transport/tcp/tcp_wire.h, host byte order, little-endian here): a 40-byte hello (u64
magic, u32 version, rank, channel, slot_bytes, u64 comm_id, token_hash) and then the link's
frames, a 32-byte header (u32 type, size, arg, i32 code, 16-byte stamp) and `size` bytes. The
target expects rank 5 of 8 whose ranks 0, 1 and 3 may connect, 64-byte slots and the ids below;
after each DATA it releases as many messages as the stamp's low 4 bits say.

Run it again after a change to either format; files named regress_* are not written here.
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

# ---- fuzz_tcp_handshake ----

TCP_MAGIC = 0x31706374636C6368
COMM_ID, TOKEN_HASH, SLOT = 0x0123456789ABCDEF, 0xFEDCBA9876543210, 64  # fuzz_tcp_handshake.c's
DATA, ACK, ABORT, BYE = 1, 2, 3, 4


def hello(rank, channel, magic=TCP_MAGIC, version=1, slot=SLOT, comm=COMM_ID, token=TOKEN_HASH):
    return struct.pack("<QIIIIQQ", magic, version, rank, channel, slot, comm, token)


def frame(kind, payload=b"", arg=0, code=0, size=None, release=1):
    size = len(payload) if size is None else size
    return struct.pack("<IIIiQQ", kind, size, arg, code, release, 0) + payload


def data(payload, release=1):
    return frame(DATA, payload, release=release)


def abort(reason, origin=1, code=9):
    return frame(ABORT, reason + b"\0", arg=origin, code=code)


ok = hello(0, 0)
tcp_seeds = {
    "session": ok + data(b"abc") + data(b"") + frame(ACK, arg=2) + data(bytes(range(SLOT)))
    + frame(ACK, arg=4) + frame(BYE),
    "p2p_abort": hello(3, 1) + data(b"x" * 8, release=0) + data(b"y" * 8, release=2)
    + abort(b"allreduce on rank 1 stopped: rank 0 closed the connection") + frame(BYE),
    "full_slots": ok + b"".join(data(bytes([i]) * 4, release=0) for i in range(8)) + data(b"9th"),
    "release_then_more": ok + b"".join(data(bytes([i]), release=0) for i in range(7))
    + data(b"7", release=8) + b"".join(data(bytes([i])) for i in range(8)),
    "ack_beyond": ok + data(b"m") + frame(ACK, arg=100),
    "ack_behind": ok + frame(ACK, arg=3) + frame(ACK, arg=2),
    "ack_wrap": ok + frame(ACK, arg=0xFFFFFFFD) + frame(ACK, arg=0xFFFFFFFF),
    "data_oversize": ok + frame(DATA, b"z" * (SLOT + 1)),
    "abort_longest": ok + frame(ABORT, b"r" * 512, arg=2),
    "abort_oversize": ok + frame(ABORT, b"r" * 513, arg=2),
    "abort_empty": ok + frame(ABORT, b"", arg=2),
    "unknown_type": ok + frame(9, b"??"),
    "partial_data": ok + frame(DATA, b"only part", size=40),
    "hello_other_job": hello(0, 0, token=0x5678) + data(b"abc"),
    "hello_other_comm": hello(1, 0, comm=0x1234) + frame(BYE),
    "hello_not_libhccl": b"GET / HTTP/1.0\r\n\r\n".ljust(40, b" "),
    "hello_version": hello(0, 0, version=2),
    "hello_same_server": hello(2, 0),
    "hello_higher_rank": hello(6, 1),
    "hello_channel": hello(1, 2),
    "hello_slots": hello(3, 0, slot=4096),
    "hello_short": hello(0, 0)[:23],
    "hello_swapped": struct.pack(">QIIIIQQ", TCP_MAGIC, 1, 0, 0, SLOT, COMM_ID, TOKEN_HASH),
}

here = os.path.dirname(os.path.abspath(__file__))
for target, written in (("fuzz_store_wire", seeds), ("fuzz_tcp_handshake", tcp_seeds)):
    out = os.path.join(here, "corpus", target)
    os.makedirs(out, exist_ok=True)
    for name, blob in written.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(blob)
    print(f"{len(written)} seeds in {out}")
