"""The padding of a convolution's input copies, written where the copy of the input does not write, and
the sizes and window positions those copies are laid out by (:class:`ConvGeometry`, :func:`window_at`).

A convolution on the CPU reads its input through a copy (:mod:`.torch_ops_conv`): zero-padded for a
depthwise one, the windows copied out (im2col) with a stride, the image in padded rows otherwise.  Each
copy was filled with the padding value whole, then overwritten by the input: MobileNet's first
convolution (3 channels, 224x224, 3x3 windows of stride 2) wrote 1.35 MB of zeros a call before copying
its windows over them, and its zero fills took 3% of the model's samples (perf, one thread, float32).
The statements here write the padding value only on the elements the copy leaves, the complement of the
copy's domain cut into boxes (a guard of conjunctions each, as the scheduler takes them): the rows
above and below the image, then, beside the image's rows, the columns left and right of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .torch_lower import SegmentLowering


@dataclass(frozen=True)
class ConvGeometry:
    """A 2-D convolution's sizes: input, output, window, stride, padding, dilation (height, then width)."""

    h: int
    w: int
    ho: int
    wo: int
    kh: int
    kw: int
    sh: int
    sw: int
    ph: int
    pw: int
    dh: int
    dw: int

    @property
    def strided(self) -> bool:
        return self.sh != 1 or self.sw != 1

    @property
    def row(self) -> int:
        """Width of a row of the padded input copy, and of the grid of computed output pixels (stride 1)."""
        return self.w + 2 * self.pw

    @property
    def rows(self) -> int:
        """Rows of the padded input copy: the padding, and zeros below for the reads of the grid's last
        pixels, computed and never used."""
        last = self.ho * self.row - 1 + self.dh * (self.kh - 1) * self.row + self.dw * (self.kw - 1)
        return max(self.h + 2 * self.ph, last // self.row + 1)

    @property
    def grid(self) -> int:
        """Columns of the grid of computed output pixels."""
        return self.wo if self.strided else self.row

    def window_point(self, ky: str, kx: str, y: str, x: str) -> tuple[str, str]:
        """The input position (row, column) of window point ``(ky, kx)`` of output pixel ``(y, x)``."""
        return window_at(self.sh, y, self.dh, ky, self.ph), window_at(self.sw, x, self.dw, kx, self.pw)


def inside(y: str, x: str, height: object, width: object) -> list[str]:
    """Conditions for the input position ``(y, x)`` to be inside the image (not in the padding)."""
    return [f"{y} >= 0", f"{y} < {height}", f"{x} >= 0", f"{x} < {width}"]


def window_at(stride: int, out: str, dilation: int, k: str, pad: int) -> str:
    """The input position of window point ``k`` of output position ``out``, along one dimension."""
    return f"{stride} * {out} + {dilation} * {k} - {pad}"


def plus_size(size: str, k: int) -> str:
    """The size ``size + k`` (a number where ``size`` is one)."""
    return str(int(size) + k) if str(size).isdigit() else f"{size} + {k}"


def pad_around(ctx: SegmentLowering, name: str, n: str, c: str, h: str, w: str, ph: int, pw: int,
               pad: str = "0") -> None:
    """``pad`` in array ``name`` of shape ``(n, c, h + 2 ph, w + 2 pw)`` outside the image at ``(ph, pw)``:
    ``ph`` rows above and below, ``pw`` columns left and right of each of its ``h`` rows."""
    if ph:
        width = plus_size(w, 2 * pw)
        ctx.emit(name, (n, c, str(ph), width), lambda it, r: pad)
        ctx.emit(name, (n, c, str(ph), width), lambda it, r: pad,
                 index=lambda it: (it[0], it[1], f"{it[2]} + {plus_size(h, ph)}", it[3]))
    if pw:
        ctx.emit(name, (n, c, h, str(pw)), lambda it, r: pad, index=lambda it: (it[0], it[1], f"{it[2]} + {ph}", it[3]))
        ctx.emit(name, (n, c, h, str(pw)), lambda it, r: pad,
                 index=lambda it: (it[0], it[1], f"{it[2]} + {ph}", f"{it[3]} + {plus_size(w, pw)}"))


def pad_windows(ctx: SegmentLowering, name: str, n: str, c: str, geo: ConvGeometry, pad: str = "0") -> None:
    """``pad`` in the windows array ``name`` (``(n, c, kh, kw, ho * wo)``, see :mod:`.torch_ops_conv`) where a
    window point falls outside the image: its row above or below it, else its column left or right of it.
    A box that no window point reaches is not written (the scheduler is handed no empty domain)."""
    y, x = geo.window_point("i2", "i3", "i4", "i5")  # the loops: (n, c, ky, kx, y, x)
    beyond_y = geo.sh * (geo.ho - 1) + geo.dh * (geo.kh - 1) - geo.ph >= geo.h
    beyond_x = geo.sw * (geo.wo - 1) + geo.dw * (geo.kw - 1) - geo.pw >= geo.w
    in_rows = inside(y, x, geo.h, geo.w)[:2]
    boxes = [([f"{y} < 0"], geo.ph > 0), ([f"{y} >= {geo.h}"], beyond_y),
             (in_rows + [f"{x} < 0"], geo.pw > 0), (in_rows + [f"{x} >= {geo.w}"], beyond_x)]
    for guard, reached in boxes:
        if reached:
            ctx.emit(name, (n, c, str(geo.kh), str(geo.kw), str(geo.ho), str(geo.wo)), lambda it, r: pad,
                     guard=guard, index=lambda it: (*it[:4], f"{geo.wo} * {it[4]} + {it[5]}"))


def pad_rows(ctx: SegmentLowering, name: str, n: str, c: str, geo: ConvGeometry, pad: str = "0") -> None:
    """``pad`` in the flattened copy ``name`` (``(n, c, rows * row)``) where the image, copied to
    ``row * (y + ph) + x + pw``, is not: before its first row, between its rows and after its last."""
    row, first = geo.row, geo.row * geo.ph + geo.pw
    after = geo.rows * row - (row * (geo.h - 1) + first + geo.w)
    if first:
        ctx.emit(name, (n, c, str(first)), lambda it, r: pad)
    if geo.h > 1 and row > geo.w:
        ctx.emit(name, (n, c, str(geo.h - 1), str(row - geo.w)), lambda it, r: pad,
                 index=lambda it: (it[0], it[1], f"{row} * {it[2]} + {first + geo.w} + {it[3]}"))
    if after > 0:
        ctx.emit(name, (n, c, str(after)), lambda it, r: pad,
                 index=lambda it: (it[0], it[1], f"{it[2]} + {row * (geo.h - 1) + first + geo.w}"))


__all__ = ["ConvGeometry", "inside", "pad_around", "pad_rows", "pad_windows", "plus_size", "window_at"]
