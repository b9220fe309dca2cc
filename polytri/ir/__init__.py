"""The polyhedral IR: expression trees, statements, programs, and their text form."""

from .builder import ProgramBuilder, to_program
from .expr import Access, Binary, Call, Cast, Const, Expr, Unary, Var
from .program import Array, Program, Scalar, Statement

__all__ = ["Access", "Array", "Binary", "Call", "Cast", "Const", "Expr", "Program", "ProgramBuilder",
           "Scalar", "Statement", "Unary", "Var", "to_program"]
