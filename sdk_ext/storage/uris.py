"""Local paths from the locations users write: a plain path, or a ``file://`` URI.

A ``file://`` URI is percent-encoded (``Path.as_uri()`` turns a space into ``%20``), so its path is
decoded here, in one place, for every reader of such locations (custom rule sources, the local
runner's submit directories and channels).
"""

from __future__ import annotations

import os
from urllib.parse import unquote, urlparse


def local_path(location: str) -> str | None:
    """The filesystem path that ``location`` names, or None for another scheme (``s3://``, ``https://``).

    ``file:///a%20b/c.py`` and ``file://localhost/a%20b/c.py`` -> ``/a b/c.py``; a plain path is
    returned as it is (a literal ``%`` in it is no escape).

    Raises:
        ValueError: a ``file://`` URI that names another host (``file://server/share``): not a local file.
    """
    parsed = urlparse(location)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise ValueError(f"{location!r} names host {parsed.netloc!r}; a file:// URI of a local file is "
                             "file:///absolute/path (three slashes)")
        return unquote(parsed.path)
    if parsed.scheme == "" or (len(parsed.scheme) == 1 and os.name == "nt"):  # C:\ on Windows
        return location
    return None


__all__ = ["local_path"]
