"""Loads kvaudit's HTML report in headless Chromium and fails on what a reader would see as
broken: a console error, a chart with no bar drawn, or a blank screenshot.

Usage: html_check.py CHROMIUM REPORT.html SHOT.png
"""
import re
import struct
import subprocess
import sys
import tempfile
import zlib

FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--enable-logging=stderr", "--v=0",
]


def run(chromium, *args):
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [chromium, *FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True, text=True, timeout=120,
        )


def pixels(path):
    """RGB(A) rows of a PNG (8-bit, non-interlaced, as Chromium writes), defiltered."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8, depth
            channels = {2: 3, 6: 4}[colour]
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, channels, rows


def main():
    chromium, report, shot = sys.argv[1:4]
    url = "file://" + report
    dom = run(chromium, "--dump-dom", url)
    if dom.returncode != 0:
        sys.exit(f"chromium --dump-dom failed ({dom.returncode}): {dom.stderr[-2000:]}")
    errors = [l for l in dom.stderr.splitlines() if "CONSOLE" in l and ("ERROR" in l or "Uncaught" in l)]
    if errors:
        sys.exit("console errors:\n" + "\n".join(errors))
    svgs = re.findall(r"<svg\b.*?</svg>", dom.stdout, re.S)
    if not svgs:
        sys.exit("no chart in the rendered page")
    for svg in svgs:
        label = re.search(r'aria-label="([^"]*)"', svg)
        widths = [int(w) for w in re.findall(r'<rect class="bar"[^>]*width="(\d+)"', svg)]
        if not any(w > 0 for w in widths):
            sys.exit(f"empty chart: {label.group(1) if label else svg[:80]}")
    shot_run = run(chromium, f"--screenshot={shot}", "--window-size=1280,2000", "--hide-scrollbars", url)
    if shot_run.returncode != 0:
        sys.exit(f"chromium --screenshot failed: {shot_run.stderr[-2000:]}")
    width, height, channels, rows = pixels(shot)
    colours = set()
    for row in rows[:: max(1, height // 200)]:
        for x in range(0, width * channels, channels * max(1, width // 200)):
            colours.add(row[x:x + 3])
    if len(colours) < 4:
        sys.exit(f"the screenshot is blank ({len(colours)} colours)")
    print(f"ok: {len(svgs)} charts, screenshot {width}x{height}, {len(colours)} colours sampled")


main()
