"""Helpers for testing programs and compilers: :mod:`.fuzz` holds hypothesis strategies for random affine
programs and the differential check against ``pt.reference`` (it needs ``hypothesis``; importing this
package does not)."""
