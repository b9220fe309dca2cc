"""Dependence analysis and scheduling."""
