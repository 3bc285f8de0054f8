"""Toolplex core: canonical model, catalog, dispatch, configuration, app and CLI."""
