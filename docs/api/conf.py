"""Sphinx configuration of polytri's API reference, generated from the docstrings (``make docs``)."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE / "_ext")]  # the package as checked out; the local extension

project = "polytri"
author = "the polytri authors"
extensions = ["sphinx.ext.autodoc", "polytri_options"]
root_doc = "index"
exclude_patterns = ["_build"]
html_theme = "alabaster"
html_title = "polytri API reference"
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
autodoc_preserve_defaults = True
add_module_names = False
