"""Compression of KV bytes: zstd, after splitting fp16 values into byte planes.

The high bytes of fp16 numbers (sign, exponent) repeat far more than the low
ones; grouping each byte position together lets zstd see that (at level 3,
SmolLM2-135M's KV compressed 1.09x as it is and 1.18x split into planes).

Integrity: each zstd frame carries a checksum of its content (XXH64, which
zstd checks while it decompresses, at a fraction of a CRC's cost), and the
checksum column repeats it, so a frame swapped for another is caught too.
It also holds a CRC32 of the codec and raw size, which say how to lay the
bytes out: a codec changed from planes2 to planes3 would otherwise restore
wrong state silently. Older segments carry the frame checksum alone, or a
CRC32 of the raw bytes.
"""

import zlib

import numpy as np
import zstandard

LEVEL = 3
FRAME_CHECKSUM = "zstd-xxh64:"
FRAME_AND_HEADER = "zstd-xxh64+crc32:"   # frame checksum, ":", CRC32 of codec and raw size
CRC32 = "crc32:"


class CorruptKV(Exception):
    """Stored KV bytes that do not decode to what was stored."""


def encode(raw, plane_width: int = 2) -> tuple[str, bytes, str]:
    """Return (codec, compressed bytes, checksum) for `raw`."""
    view = memoryview(raw).cast("B")
    codec = "zstd"
    if plane_width > 1 and len(view) % plane_width == 0:
        view = np.frombuffer(view, np.uint8).reshape(-1, plane_width).T.tobytes()
        codec = f"zstd+planes{plane_width}"
    blob = _compressor().compress(view)
    return codec, blob, f"{FRAME_AND_HEADER}{blob[-4:].hex()}:{_header_crc(codec, len(view))}"


def decode_planes(codec: str, blob: bytes, raw_size: int, checksum: str) -> np.ndarray:
    """The checked byte planes, shape (width, raw_size // width); width 1 is the raw bytes.

    CorruptKV if anything does not match what was stored.
    """
    if checksum.startswith(FRAME_AND_HEADER):
        frame, _, header = checksum[len(FRAME_AND_HEADER):].partition(":")
        if header != _header_crc(codec, raw_size):
            raise CorruptKV(f"KV codec {codec!r} or size {raw_size} does not match its checksum")
        checksum = FRAME_CHECKSUM + frame
    width = _plane_width(codec)
    frame_checked = checksum.startswith(FRAME_CHECKSUM)
    if frame_checked and not _frame_checksum_matches(blob, checksum):
        raise CorruptKV("KV checksum mismatch")
    if not (frame_checked or checksum.startswith(CRC32)):
        raise CorruptKV(f"unknown KV checksum {checksum!r}")
    try:
        data = zstandard.ZstdDecompressor().decompress(blob, max_output_size=raw_size)
    except zstandard.ZstdError as exc:
        raise CorruptKV(f"undecodable KV data ({exc})") from None
    if len(data) != raw_size:
        raise CorruptKV(f"KV data is {len(data)} bytes, expected {raw_size}")
    if raw_size % width:
        raise CorruptKV(f"KV data of {raw_size} bytes cannot hold {width} byte planes")
    planes = np.frombuffer(data, np.uint8).reshape(width, -1)
    if frame_checked:
        return planes
    raw = interleave(planes)
    if f"{CRC32}{zlib.crc32(raw):08x}" != checksum:
        raise CorruptKV("KV checksum mismatch")
    return raw.reshape(1, -1)


def decode(codec: str, blob: bytes, raw_size: int, checksum: str) -> memoryview:
    """The raw bytes back (a read-only buffer), or CorruptKV."""
    planes = decode_planes(codec, blob, raw_size, checksum)
    return memoryview(planes[0] if len(planes) == 1 else interleave(planes))


def interleave(planes: np.ndarray) -> np.ndarray:
    """Byte planes back into values: one contiguous read per plane (3x faster than .T)."""
    out = np.empty((planes.shape[1], planes.shape[0]), np.uint8)
    for i, plane in enumerate(planes):
        out[:, i] = plane
    return out.reshape(-1)


def _frame_checksum_matches(blob: bytes, checksum: str) -> bool:
    try:
        has = zstandard.get_frame_parameters(blob).has_checksum
    except zstandard.ZstdError:
        return False
    return has and blob[-4:].hex() == checksum[len(FRAME_CHECKSUM):]


def _header_crc(codec: str, raw_size: int) -> str:
    return f"{zlib.crc32(f'{codec}:{raw_size}'.encode()):08x}"


def _plane_width(codec: str) -> int:
    """1 for plain zstd, the plane width for zstd+planesN; CorruptKV for anything else."""
    if codec == "zstd":
        return 1
    width = codec.removeprefix("zstd+planes")
    if codec.startswith("zstd+planes") and width.isdigit() and int(width) > 1:
        return int(width)
    raise CorruptKV(f"unknown KV codec {codec!r}")


def _compressor() -> zstandard.ZstdCompressor:
    return zstandard.ZstdCompressor(level=LEVEL, write_content_size=True, write_checksum=True)
