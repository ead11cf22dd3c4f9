#!/usr/bin/env python3
"""A libzmq (pyzmq) publisher in vLLM's layout for kvaudit's capture tests.

Binds an XPUB (tcp://127.0.0.1, ephemeral port) and a ROUTER replay socket, prints both ports,
waits for a subscription, then sends the frames of a `.frames` file as 3-frame messages
[topic, seq (8 bytes BE), payload], leaving out message --skip. The ROUTER answers replay
requests [id, "", start_seq] like vLLM >= 0.26: [id, "", topic, seq, payload] per buffered
message with seq >= start, then [id, "", "", ff*8, ""].

With --wait-line, it sends only once a line comes on standard input (after the subscription).

With --heartbeat-ms N, libzmq pings the subscriber every N ms and drops it when nothing comes
back within 3N (a subscriber must answer PING with PONG); the publisher waits 10N after the
subscription before sending, counts the subscriptions it sees (one per connection, so more
than one means the subscriber was dropped and reconnected), prints "subscriptions K" after
sending, and exits without serving replays.
"""
import argparse
import struct
import sys
import time

import zmq


def frames(path):
    data = open(path, "rb").read()
    at = 0
    while at < len(data):
        (tl,) = struct.unpack_from(">I", data, at)
        topic = data[at + 4 : at + 4 + tl]
        seq = data[at + 4 + tl : at + 12 + tl]
        (pl,) = struct.unpack_from(">I", data, at + 12 + tl)
        payload = data[at + 16 + tl : at + 16 + tl + pl]
        at += 16 + tl + pl
        yield topic, seq, payload


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--skip", type=int, default=-1)
    ap.add_argument("--heartbeat-ms", type=int, default=0)
    ap.add_argument("--wait-line", action="store_true")
    args = ap.parse_args()
    msgs = list(frames(args.file))
    ctx = zmq.Context()
    pub = ctx.socket(zmq.XPUB)
    hb = args.heartbeat_ms
    if hb:
        pub.setsockopt(zmq.HEARTBEAT_IVL, hb)
        pub.setsockopt(zmq.HEARTBEAT_TIMEOUT, 3 * hb)
        # Every subscription is passed up, also one repeated by a reconnected subscriber.
        pub.setsockopt(zmq.XPUB_VERBOSE, 1)
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    router = ctx.socket(zmq.ROUTER)
    rport = router.bind_to_random_port("tcp://127.0.0.1")
    print(port, rport, flush=True)
    pub.recv()  # the subscription
    subscriptions = 1
    if hb:
        deadline = time.time() + 10 * hb / 1000
        while time.time() < deadline:
            if pub.poll(10) and pub.recv()[:1] == b"\x01":
                subscriptions += 1
    time.sleep(0.05)
    if args.wait_line:
        sys.stdin.readline()
    for i, m in enumerate(msgs):
        if i != args.skip:
            pub.send_multipart(list(m))
        time.sleep(0.002)
    if hb:
        time.sleep(0.2)
        print("subscriptions", subscriptions, flush=True)
        return
    deadline = time.time() + 10
    while time.time() < deadline:
        if router.poll(100):
            ident, _, start = router.recv_multipart()
            (start,) = struct.unpack(">Q", start)
            for topic, seq, payload in msgs:
                if struct.unpack(">Q", seq)[0] >= start:
                    router.send_multipart([ident, b"", topic, seq, payload])
            router.send_multipart([ident, b"", b"", b"\xff" * 8, b""])


if __name__ == "__main__":
    main()
