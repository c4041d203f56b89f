"""Compare two traces or two sets of stored runs: what got slower, is it real, did the model expect it.

``sides`` turns a parsed trace (or stored runs) into groups of repeated calls keyed by (name, op, shape);
``stats`` tests each group's change (Mann-Whitney U, a paired Wilcoxon test where the calls pair up, a
bootstrap CI of the ratio of medians); ``diff`` joins the two sides with the model's prediction on each
side's device; ``report`` prints the table, Markdown and JUnit XML the CI gate shows.
"""

from perfmodel.compare.diff import CompareError, GroupDiff, TraceDiff, diff_sides
from perfmodel.compare.sides import Side, side_from_parsed, side_from_runs

__all__ = ["CompareError", "GroupDiff", "Side", "TraceDiff", "diff_sides", "side_from_parsed", "side_from_runs"]
