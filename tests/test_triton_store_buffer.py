"""The Triton printer's held stores (polytri.codegen_triton.store_buffer), on their own: which loads take a
stored value, which stores are printed, dead or dropped, and where."""

from __future__ import annotations

from polytri.codegen_triton.store_buffer import StoreBuffer


def _buffer(private: frozenset[str] = frozenset(), shared: frozenset[str] = frozenset()
            ) -> tuple[StoreBuffer, list[str]]:
    lines: list[str] = []
    return StoreBuffer(lambda depth, text: lines.append("    " * depth + text), private, shared), lines


def test_a_load_of_a_stored_element_under_the_same_mask_takes_the_variable() -> None:
    buf, lines = _buffer()
    buf.store(1, "C", "C + i", "m1", "v1", lanes=True)
    assert buf.load("C", "C + i", "m1", lanes=True) == "v1"
    assert lines == []  # still held: nothing needed memory
    assert buf.load("C", "C + i", "m2", lanes=True) is None  # another mask: from memory, after the store
    assert lines == ["    tl.store(C + i, v1, mask=m1)"]
    assert buf.loaded == {"C"} and buf.stored == {"C"}


def test_a_load_of_another_element_prints_the_arrays_held_stores_only() -> None:
    buf, lines = _buffer()
    buf.store(1, "A", "A + i", "m", "v1", lanes=False)
    buf.store(1, "B", "B + i", "m", "v2", lanes=False)
    assert buf.load("B", "B + j", "m", lanes=False) is None
    assert lines == ["    tl.store(B + i, v2, mask=m)"]
    buf.flush(lanes=False)
    assert lines[-1] == "    tl.store(A + i, v1, mask=m)"


def test_a_store_to_an_array_forgets_its_known_values_and_keeps_the_order_of_its_stores() -> None:
    buf, lines = _buffer()
    buf.store(1, "A", "A + i", "m", "v1", lanes=False)
    buf.store(1, "A", "A + j", "m", "v2", lanes=False)  # may alias A + i: the first is printed first
    assert lines == ["    tl.store(A + i, v1, mask=m)"]
    assert buf.load("A", "A + i", "m", lanes=False) is None  # the second store may have changed it
    assert lines[-1] == "    tl.store(A + j, v2, mask=m)"  # printed before that load
    assert buf.load("A", "A + j", "m", lanes=False) == "v2"  # printed, and still known


def test_an_overwritten_held_store_is_dead() -> None:
    buf, lines = _buffer()
    buf.store(2, "T", "T + i", None, "v1", lanes=False)
    buf.store(2, "T", "T + i", None, "v2", lanes=False)
    buf.flush(lanes=False)
    assert lines == ["        # the store of v1 is dead: v2 overwrites it", "        tl.store(T + i, v2)"]


def test_the_end_of_a_stretch_forgets_the_values() -> None:
    buf, lines = _buffer()
    buf.store(1, "T", "T + i", "m", "v1", lanes=False)
    buf.flush(lanes=False)
    assert buf.load("T", "T + i", "m", lanes=False) is None
    assert lines == ["    tl.store(T + i, v1, mask=m)"]


def test_a_private_temporary_read_only_from_registers_is_dropped_at_the_end() -> None:
    buf, lines = _buffer(private=frozenset({"T", "U"}))
    buf.store(1, "T", "T + i", "m", "v1", lanes=True)
    buf.store(1, "U", "U + i", "m", "v2", lanes=True)
    assert buf.load("T", "T + i", "m", lanes=True) == "v1"
    assert buf.load("U", "U + j", "m", lanes=True) is None  # U is read from memory: its store stays
    buf.flush(lanes=True, final=True)
    assert buf.dropped == {"T"} and buf.stored == {"U"}
    assert lines == ["    tl.store(U + i, v2, mask=m)",
                     "    # the store of v1 is dead: temporary T is read only here, from registers"]


def test_a_store_another_lane_may_read_is_followed_by_a_barrier_on_a_block_of_lanes() -> None:
    buf, lines = _buffer(shared=frozenset({"S"}))
    buf.store(1, "S", "S + i", "m", "v1", lanes=True)
    buf.flush(lanes=True)
    buf.store(1, "S", "S + i", None, "v2", lanes=False)  # one program, scalars: no other lane
    buf.flush(lanes=False)
    assert lines == ["    tl.store(S + i, v1, mask=m)", "    tl.debug_barrier()", "    tl.store(S + i, v2)"]
