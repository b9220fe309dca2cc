"""The stores of one Triton kernel, held back so that later statements read the values from registers.

A kernel's statements run one after the other inside each program.  Where a statement reads an element
that an earlier one stored, under the same mask, with nothing in between that could have changed it, the
value is still in a variable: the load is not needed (an epilogue reads its product's accumulator, a
reduction's update reads its initialization).  :class:`StoreBuffer` does this as the kernel is printed,
with these rules:

- a store is *held*, not printed, until something needs memory: a load of the same array that does not
  take a held value, another store to the array (elements may alias: stores keep their order), or the
  end of a straight-line stretch of code (:meth:`StoreBuffer.flush` with no array: before and after
  loops and ``if`` blocks, whose variables the code after them cannot use);
- a load whose pointer and mask are those of a held or printed store since the last such end takes the
  stored variable; a store to an array forgets every value known for that array;
- a held store overwritten by a store of the same pointer and mask is *dead*: it is never printed (a
  comment says so);
- at the end of the kernel, a held store to a temporary that only this kernel's statements read, none
  of them from memory, is *dropped*: nothing reads the array.

Pointers and masks are compared as printed text: inside one straight-line stretch, the same text is the
same elements (counters do not change there, and every new mask gets a new name).  This is a peephole on
the printed values, which exist only while printing; the mapping decisions (which loops are ``tl.dot``
products, block reductions, column chunks) are made before printing (:func:`.reduction.sum_plan`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class HeldStore:
    """A store not printed yet."""

    depth: int
    """The indentation of the statement that stored it."""
    array: str
    pointer: str
    mask: str | None
    value: str
    """The variable that holds the value."""


class StoreBuffer:
    """The held stores and known values of one kernel (see the module's docstring).  ``emit(depth, line)``
    prints a line; ``private``: the temporaries that only this kernel's statements read; ``shared``: the
    arrays some statement of the program reads after another writes them (a store to one is followed by a
    barrier in a block of lanes, so that other lanes see it)."""

    def __init__(self, emit: Callable[[int, str], None], private: frozenset[str], shared: frozenset[str]):
        self.emit = emit
        self.private = private
        self.shared = shared
        self.held: list[HeldStore] = []
        self.known: dict[tuple[str, str, str | None], str] = {}
        """(array, pointer, mask) -> the variable holding the value last stored there."""
        self.loaded: set[str] = set()
        """Arrays this kernel loads from memory (not from a value it stored)."""
        self.stored: set[str] = set()
        """Arrays this kernel stores to."""
        self.dropped: set[str] = set()
        """Temporaries whose stores this kernel found unread and dropped."""

    def load(self, array: str, pointer: str, mask: str | None, *, lanes: bool) -> str | None:
        """The variable holding the value at ``pointer`` under ``mask``, if known; else ``None``, after the
        held stores to ``array`` are printed (the caller loads from memory).  ``lanes``: the code runs on a
        block of lanes (see :meth:`flush`)."""
        known = self.known.get((array, pointer, mask))
        if known is not None:
            return known
        self.loaded.add(array)
        self.flush(array, lanes=lanes)
        return None

    def loaded_tile(self, array: str) -> None:
        """A load of ``array`` that never takes a held value (a ``tl.dot`` operand tile); the caller has
        printed the array's held stores (:meth:`flush`)."""
        self.loaded.add(array)

    def store(self, depth: int, array: str, pointer: str, mask: str | None, value: str, *, lanes: bool) -> None:
        """Hold the store of the variable ``value`` at ``pointer`` under ``mask``."""
        same = [h for h in self.held if h.pointer == pointer and h.mask == mask]
        if same:
            self.emit(depth, f"# the store of {same[0].value} is dead: {value} overwrites it")
        self.held = [h for h in self.held if h not in same]
        self.flush(array, lanes=lanes)
        self.known = {k: v for k, v in self.known.items() if k[0] != array}
        self.held.append(HeldStore(depth, array, pointer, mask, value))
        self.known[(array, pointer, mask)] = value

    def flush(self, array: str | None = None, *, lanes: bool, final: bool = False) -> None:
        """Print the held stores (of ``array`` only, if given), in order.  With no ``array``, the known
        values are forgotten too: the end of a straight-line stretch.  ``final``: the end of the kernel,
        where stores to unread private temporaries are dropped.  ``lanes``: after a store to a ``shared``
        array on a block of lanes, a barrier (another lane may read the element next)."""
        keep = []
        for h in self.held:
            if array is not None and h.array != array:
                keep.append(h)
                continue
            if final and h.array in self.private and h.array not in self.loaded:
                self.emit(h.depth, f"# the store of {h.value} is dead: temporary {h.array} is read only here, "
                                   "from registers")
                self.dropped.add(h.array)
                continue
            self.stored.add(h.array)
            self.emit(h.depth, f"tl.store({h.pointer}, {h.value}, mask={h.mask})" if h.mask
                      else f"tl.store({h.pointer}, {h.value})")
            if h.array in self.shared and lanes:
                self.emit(h.depth, "tl.debug_barrier()")
        self.held = keep
        if array is None:
            self.known.clear()
