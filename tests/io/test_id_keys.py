"""`IdIndex`: ids kept as 12-byte digests, found again by position; ids sharing a key told apart by
the check, a repeat found."""
from __future__ import annotations

from prm_annotate.io.id_keys import IdIndex, id_key


def test_positions_found_again_and_absent_ids_not():
    index = IdIndex()
    ids = [f"p{i}/{i % 8}" for i in range(20000)]
    assert [index.add(rid) for rid in ids] == list(range(len(ids)))
    assert all(index.find(rid) == i for i, rid in enumerate(ids))
    assert index.find("p1/2") == -1 and index.find("") == -1
    assert not index.duplicated()
    index.add("p7/7")  # added after a search: the sorted keys are made again
    assert index.duplicated() and index.find("p7/7") == 7


def test_ids_sharing_a_key_are_told_apart_by_the_check():
    index = IdIndex()
    index.keys.extend([5, 9, 5, 5])
    index.checks.extend([1, 1, 2, 3])
    assert (index.find_key(5, 2), index.find_key(5, 3), index.find_key(5, 1), index.find_key(5, 4)) == (2, 3, 0, -1)
    assert not index.duplicated()
    index.keys.append(5)
    index.checks.append(2)
    assert index.duplicated() and index.find_key(5, 2) == 2  # the first position of a repeat


def test_key_is_the_same_in_every_process():
    # blake2b, not Python's hash() (salted per process): this value in every run and on every machine
    assert id_key("gsm8k-0") == (14048407786210889094, 2589609781)
