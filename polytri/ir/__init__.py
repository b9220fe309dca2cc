"""The polyhedral IR: expression trees, statements, programs, and their text form."""

from .builder import ProgramBuilder, to_program
from .expr import Access, Binary, Call, Cast, Const, Expr, Unary, Var
from .program import Array, Program, Scalar, Statement
from .verify import CHECKS, Check

# ``verify`` itself stays reachable as ``polytri.ir.verify.verify``: exporting the function under that
# name would hide the module ``polytri.ir.verify`` (``bounds_violations``, ``check_bounds``...).
__all__ = ["CHECKS", "Access", "Array", "Binary", "Call", "Cast", "Check", "Const", "Expr", "Program",
           "ProgramBuilder", "Scalar", "Statement", "Unary", "Var", "to_program"]
