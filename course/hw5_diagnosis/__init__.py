"""Homework package (see README.md)."""
