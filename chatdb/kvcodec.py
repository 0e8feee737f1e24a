"""Compression of KV bytes: zstd, after splitting fp16 values into byte planes.

The high bytes of fp16 numbers (sign, exponent) repeat far more than the low
ones; grouping each byte position together lets zstd see that (ratio 1.09 ->
1.18 on SmolLM2's KV, DESIGN.md). A CRC32 of the raw bytes catches corruption.
"""

import zlib

import numpy as np
import zstandard

LEVEL = 3


class CorruptKV(Exception):
    """Stored KV bytes that do not decode to what was stored."""


def encode(raw, plane_width: int = 2) -> tuple[str, bytes, str]:
    """Return (codec, compressed bytes, checksum) for `raw`."""
    view = memoryview(raw).cast("B")
    checksum = checksum_of(view)
    if plane_width > 1 and len(view) % plane_width == 0:
        planes = np.frombuffer(view, np.uint8).reshape(-1, plane_width).T.tobytes()
        return f"zstd+planes{plane_width}", _compressor().compress(planes), checksum
    return "zstd", _compressor().compress(view), checksum


def decode(codec: str, blob: bytes, raw_size: int, checksum: str) -> memoryview:
    """The raw bytes back (a read-only buffer), or CorruptKV."""
    width = _plane_width(codec)
    try:
        data = zstandard.ZstdDecompressor().decompress(blob, max_output_size=raw_size)
    except zstandard.ZstdError as exc:
        raise CorruptKV(f"undecodable KV data ({exc})") from None
    if len(data) != raw_size:
        raise CorruptKV(f"KV data is {len(data)} bytes, expected {raw_size}")
    if width > 1:
        if raw_size % width:
            raise CorruptKV(f"KV data of {raw_size} bytes cannot hold {width} byte planes")
        data = _interleave(np.frombuffer(data, np.uint8).reshape(width, -1))
    if checksum_of(data) != checksum:
        raise CorruptKV("KV checksum mismatch")
    return memoryview(data)


def _interleave(planes: np.ndarray) -> np.ndarray:
    """Byte planes back into values: one contiguous read per plane (3x faster than .T)."""
    out = np.empty((planes.shape[1], planes.shape[0]), np.uint8)
    for i, plane in enumerate(planes):
        out[:, i] = plane
    return out.reshape(-1)


def _plane_width(codec: str) -> int:
    """1 for plain zstd, the plane width for zstd+planesN; CorruptKV for anything else."""
    if codec == "zstd":
        return 1
    width = codec.removeprefix("zstd+planes")
    if codec.startswith("zstd+planes") and width.isdigit() and int(width) > 1:
        return int(width)
    raise CorruptKV(f"unknown KV codec {codec!r}")


def checksum_of(data) -> str:
    return f"crc32:{zlib.crc32(data):08x}"


def _compressor() -> zstandard.ZstdCompressor:
    return zstandard.ZstdCompressor(level=LEVEL, write_content_size=True)
