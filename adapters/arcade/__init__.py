"""Arcade workers (PyPI `arcade-serve`): the production ancestor of OXP, as an upstream."""

from adapters.arcade.settings import ArcadeBackendSettings
from gateway.plugins import Adapter, BackendPlugin

ADAPTER = Adapter(
    name="arcade",
    description="An Arcade worker's tools (/worker/tools), called with a JWT signed by the worker secret",
    backend=BackendPlugin(settings=ArcadeBackendSettings, factory="adapters.arcade.backend:ArcadeBackend"),
)

__all__ = ["ADAPTER"]
