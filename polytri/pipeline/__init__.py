"""The compilation pipeline's contracts: the :class:`Target` interface every code generator implements, the
typed option classes with their one validator, and the stage hooks."""

from .options import CpuOptions, GpuOptions, option_docs, option_table, parse_options
from .stages import (
           StageEvent,
           StageStart,
           add_stage_hook,
           add_stage_watcher,
           remove_stage_hook,
           remove_stage_watcher,
)
from .target import Target, get_target, register_target, target_names

__all__ = ["CpuOptions", "GpuOptions", "StageEvent", "StageStart", "Target", "add_stage_hook", "add_stage_watcher",
           "get_target", "option_docs", "option_table", "parse_options", "register_target", "remove_stage_hook",
           "remove_stage_watcher", "target_names"]
