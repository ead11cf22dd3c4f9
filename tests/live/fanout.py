"""A libzmq forwarder for tests/watch_live.rs, so that one pod's KV events reach every
subscriber: the pod's publisher connects to an XSUB bound on loopback; an XPUB beside it is
bound on loopback for subscribers that connect (watch in mirror mode, `kvaudit capture`), and a
PUB connects out to a subscriber that binds (watch in proxy mode, `--bind`).

    python fanout.py XSUB_PORT:XPUB_PORT:BOUND_SUBSCRIBER_PORT ...

Prints "ready" once every socket is bound; runs until killed. A line "drop K" on standard
input makes the next message of the K-th pair (from 0) miss the bound subscriber only, a gap
it must recover through the pod's replay endpoint; "dropped K" is printed once the flag is
set, and the message's sequence number on standard error once it is dropped.
"""
import sys
import threading

import zmq


def forward(ctx, xsub_port, xpub_port, bound, flags, index):
    xsub = ctx.socket(zmq.XSUB)
    xsub.bind(f"tcp://127.0.0.1:{xsub_port}")
    # Everything the publisher sends, whoever subscribes downstream.
    xsub.send(b"\x01")
    xpub = ctx.socket(zmq.XPUB)
    xpub.bind(f"tcp://127.0.0.1:{xpub_port}")
    # Subscriptions are not passed upstream (all is taken already): never read, never block.
    xpub.setsockopt(zmq.RCVHWM, 1000)
    out = ctx.socket(zmq.PUB)
    out.connect(f"tcp://127.0.0.1:{bound}")
    ready = threading.Event()

    def run():
        ready.set()
        while True:
            msg = xsub.recv_multipart()
            xpub.send_multipart(msg)
            if flags[index]:
                flags[index] = False
                seq = int.from_bytes(msg[1], "big") if len(msg) > 1 else -1
                print(f"dropped {index} seq {seq}", file=sys.stderr, flush=True)
                continue
            out.send_multipart(msg)

    threading.Thread(target=run, daemon=True).start()
    ready.wait()


def main():
    ctx = zmq.Context()
    flags = [False] * (len(sys.argv) - 1)
    for index, spec in enumerate(sys.argv[1:]):
        xsub_port, xpub_port, bound = (int(p) for p in spec.split(":"))
        forward(ctx, xsub_port, xpub_port, bound, flags, index)
    print("ready", flush=True)
    for line in sys.stdin:
        words = line.split()
        if len(words) == 2 and words[0] == "drop":
            flags[int(words[1])] = True
            print(f"dropped {words[1]}", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
