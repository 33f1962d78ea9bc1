"""Local paths from file:// URIs are percent-decoded; plain paths are kept as they are."""

from __future__ import annotations

from pathlib import Path

import pytest

from sdk_ext.storage.uris import local_path


def test_a_percent_encoded_file_uri_names_the_path_with_its_spaces(tmp_path: Path) -> None:
    path = tmp_path / "a b" / "rule 100%.py"
    assert local_path(path.as_uri()) == str(path)
    assert local_path("file://localhost/a%20b/c.py") == "/a b/c.py"


def test_plain_paths_are_kept_and_other_schemes_are_not_local() -> None:
    assert local_path("/a b/100%20.py") == "/a b/100%20.py"  # not a URI: no escapes
    assert local_path("rules/my rule.py") == "rules/my rule.py"
    assert local_path("s3://bucket/key.py") is None
    assert local_path("https://example.com/r.py") is None


def test_a_file_uri_of_another_host_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="names host 'server'"):
        local_path("file://server/share/r.py")
