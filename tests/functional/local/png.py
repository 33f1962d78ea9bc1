"""Decode the PNG files headless Chromium writes (8-bit RGB/RGBA, not interlaced) into numpy, with zlib only."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np


def read_png(path: Path) -> np.ndarray:
    """Pixels as a (height, width, channels) uint8 array."""
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG file")
    pos, chunks, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            chunks.append(body)
        elif kind == b"IEND":
            break
    assert header is not None
    width, height, depth, color, _, _, interlace = header
    channels = {2: 3, 6: 4}.get(color)
    if depth != 8 or channels is None or interlace:
        raise ValueError(f"unsupported PNG (depth {depth}, color type {color}, interlace {interlace})")
    raw = zlib.decompress(b"".join(chunks))
    stride = width * channels
    out = np.zeros((height, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.int32)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = np.frombuffer(raw, dtype=np.uint8, count=stride, offset=y * (stride + 1) + 1).astype(np.int32)
        if kind == 0:
            cur = line
        elif kind == 2:
            cur = (line + prev) & 0xFF
        else:  # Sub (1), Average (3), Paeth (4) depend on the pixel to the left: go pixel by pixel
            cur = np.zeros(stride, dtype=np.int32)
            for x in range(stride):
                left = cur[x - channels] if x >= channels else 0
                up = prev[x]
                if kind == 1:
                    cur[x] = (line[x] + left) & 0xFF
                elif kind == 3:
                    cur[x] = (line[x] + (left + up) // 2) & 0xFF
                else:
                    ul = prev[x - channels] if x >= channels else 0
                    p = left + up - ul
                    pa, pb, pc = abs(p - left), abs(p - up), abs(p - ul)
                    pred = left if pa <= pb and pa <= pc else up if pb <= pc else ul
                    cur[x] = (line[x] + pred) & 0xFF
        out[y] = cur
        prev = cur
    return out.reshape(height, width, channels)
