"""The compilation pipeline's contracts: the :class:`Target` interface every code generator implements, and
the typed option classes with their one validator."""

from .options import CpuOptions, GpuOptions, option_docs, option_table, parse_options
from .target import Target, get_target, register_target, target_names

__all__ = ["CpuOptions", "GpuOptions", "Target", "get_target", "option_docs", "option_table", "parse_options",
           "register_target", "target_names"]
