"""Byte counts as people read them, for messages about sizes and limits."""

UNITS = ("bytes", "KB", "MB", "GB", "TB")


def human_size(size: int, decimals: int = 1) -> str:
    value = float(size)
    for unit in UNITS:
        if value < 1024 or unit == UNITS[-1]:
            return f"{int(value)} {unit}" if unit == "bytes" else f"{value:.{decimals}f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def sizes_apart(size: int, limit: int) -> tuple[str, str]:
    """`size` and `limit` as two strings that differ whenever the numbers do: "The file is
    200.0 MB; the limit is 200.0 MB" told a user nothing (a file 1 KB over the limit)."""
    for decimals in (1, 2, 3):
        shown = human_size(size, decimals), human_size(limit, decimals)
        if shown[0] != shown[1] or size == limit:
            return shown
    return f"{size:,} bytes", f"{limit:,} bytes"
