"""A libzmq forwarder for tests/watch_live.rs, so that one pod's KV events reach every
subscriber: the pod's publisher connects to an XSUB bound on loopback; the XPUB beside it is
bound on loopback for subscribers that connect (watch in mirror mode, `kvaudit capture`) and
connects out to a subscriber that binds (watch in proxy mode, `--bind`).

    python fanout.py XSUB_PORT:XPUB_PORT:BOUND_SUBSCRIBER_PORT ...

Prints "ready" once every socket is bound; runs until killed.
"""
import sys
import threading

import zmq


def main():
    ctx = zmq.Context()
    for spec in sys.argv[1:]:
        xsub_port, xpub_port, bound = (int(p) for p in spec.split(":"))
        xsub = ctx.socket(zmq.XSUB)
        xsub.bind(f"tcp://127.0.0.1:{xsub_port}")
        xpub = ctx.socket(zmq.XPUB)
        xpub.bind(f"tcp://127.0.0.1:{xpub_port}")
        xpub.connect(f"tcp://127.0.0.1:{bound}")
        threading.Thread(target=zmq.proxy, args=(xsub, xpub), daemon=True).start()
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
