"""The cache of whole event files: chunks of files fetched together, a byte budget, an epoch per eviction."""

from __future__ import annotations

from sdk_ext.trials.read.file_cache import FileCache


def test_files_fetched_together_share_a_chunk_and_are_found_at_their_offsets() -> None:
    cache = FileCache(1000)
    cache.add([("a", b"aaaa"), ("b", b"bb"), ("a", b"AAAA")])  # a key twice: the first copy counts
    chunk, offset, size, number = cache.files["b"]
    assert bytes(chunk[offset : offset + size]) == b"bb" and cache.files["a"][3] == number
    assert cache.chunk(number) == b"aaaabb" and "a" in cache and "c" not in cache and len(cache) == 2


def test_the_least_recently_used_chunk_leaves_first_and_bumps_the_epoch() -> None:
    cache = FileCache(10)
    cache.add([("a", b"1234")])
    cache.add([("b", b"5678")])
    assert cache.epoch == 0
    assert cache.get("a") is not None  # now "b" is the least recently used
    cache.add([("c", b"9999")])
    assert "b" not in cache and "a" in cache and "c" in cache and cache.epoch == 1
    cache.touch(cache.files["a"][3])
    cache.add([("d", b"0000")])
    assert "c" not in cache and "a" in cache and cache.epoch == 2
    cache.clear()
    assert len(cache) == 0 and cache.epoch == 3


def test_a_batch_larger_than_a_quarter_of_the_budget_goes_in_several_chunks_and_nothing_larger_than_the_budget() -> None:
    cache = FileCache(40)
    cache.add([(k, b"x" * 6) for k in "abcdefg"])  # chunks of at most 10 bytes: one file each, the oldest evicted
    assert sorted(cache.files) == ["b", "c", "d", "e", "f", "g"] and cache.epoch == 1
    assert len({cache.files[k][3] for k in cache.files}) == 6
    cache.add([("big", b"y" * 41)])
    assert "big" not in cache


def test_a_chunk_read_elsewhere_is_kept_with_its_files_where_they_were_placed() -> None:
    cache = FileCache(100)
    chunk = memoryview(b"..hello.world").toreadonly()
    cache.add_chunk(chunk, [("h", 2, 5), ("w", 8, 5)])
    entry = cache.get("w")
    assert entry is not None and bytes(entry[0][entry[1] : entry[1] + entry[2]]) == b"world"
    cache.add_chunk(memoryview(b"again"), [("h", 0, 5)])  # already cached: not replaced
    assert cache.files["h"][0] is chunk


def test_a_reserved_chunk_takes_files_later_counts_whole_and_leaves_with_them() -> None:
    cache = FileCache(100)
    arena = memoryview(bytearray(b"x" * 40)).toreadonly()
    number = cache.reserve(arena)
    assert len(cache) == 0 and cache.chunk(number) is arena
    assert cache.place(number, [("a", 0, 4), ("b", 8, 4)])
    assert cache.place(number, [("c", 16, 4), ("a", 30, 4)])  # a key cached already keeps its place
    assert cache.files["a"][1] == 0 and cache.files["c"][3] == number
    cache.add([("d", b"1" * 30)])
    cache.add([("e", b"2" * 31)])  # 40 + 30 + 31 > 100: the least recently used chunk (the arena) leaves
    assert not {"a", "b", "c"} & set(cache.files) and "d" in cache and "e" in cache and cache.epoch == 1
    assert not cache.place(number, [("f", 20, 4)])  # gone: nothing added
    assert "f" not in cache


def test_reserving_never_evicts_the_chunk_just_reserved() -> None:
    cache = FileCache(50)
    cache.add([("a", b"1" * 20)])
    number = cache.reserve(memoryview(b"y" * 40))
    assert cache.chunk(number) is not None and "a" not in cache
