"""Widgets, each named by what it shows."""
