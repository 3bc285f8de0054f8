"""Arcade workers (PyPI `arcade-serve`): the production ancestor of OXP, as an upstream."""
