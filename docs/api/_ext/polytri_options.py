"""The ``polytri-options`` directive: the options of a class, rendered from its fields and their docstrings.

``.. polytri-options:: polytri.frontend.torch_options.TorchOptions`` inserts the same definition list that
``help(pt.compile)`` shows for the targets (:mod:`polytri.pipeline.option_doc`), so no option is ever
written twice.
"""

from __future__ import annotations

import importlib
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

from polytri.pipeline.option_doc import options_text


def _load(dotted: str) -> type:
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


class OptionsDirective(SphinxDirective):
    """Render the options class named by the argument; ``:title:`` is the sentence above the list."""

    required_arguments = 1
    option_spec = {"title": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        dotted = self.arguments[0]
        cls = _load(dotted)
        text = options_text(cls, self.options.get("title", f"Options ({dotted})"))
        container = nodes.container()
        self.state.nested_parse(StringList(text.splitlines(), source=dotted), self.content_offset, container)
        return container.children


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("polytri-options", OptionsDirective)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
