"""Pictures of programs and schedules (matplotlib): ``polytri plot`` and these functions.

* :func:`plot_iteration_space`: a 2-D slice of one statement's iteration space, with its dependences,
  the tiles of the schedule outlined and numbered in execution order;
* :func:`plot_dependence_graph`: the statement dependence graph, with the fusion groups of the schedule;
* :func:`plot_program`: both, side by side, saved to a file.

Each draws the schedule its ``schedule`` argument names: ``"compiled"`` is the one ``pt.compile`` chooses
for the cpu target (the default of ``polytri plot``), ``"pluto"`` (the functions' default), ``"auto"``
and ``"original"`` those of the compile option.  The data behind them (:func:`iteration_space`, :func:`dependence_graph`) is computed with isl and can be
inspected or drawn differently.
"""

from .api import plot_dependence_graph, plot_iteration_space, plot_program
from .graph import Edge, GraphData, Group, dependence_graph
from .space import SCHEDULES, Arrow, SpaceData, Tile, compiled_schedule, iteration_space, picture_schedule

__all__ = ["SCHEDULES", "Arrow", "Edge", "GraphData", "Group", "SpaceData", "Tile", "compiled_schedule",
           "dependence_graph", "iteration_space", "picture_schedule", "plot_dependence_graph", "plot_iteration_space",
           "plot_program"]
