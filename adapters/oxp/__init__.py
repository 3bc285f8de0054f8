"""OXP (Open eXecution Protocol, seed 003): the wire codec, the front and the backend that reuses the codec."""

from adapters.oxp.settings import FRONT_DESCRIPTION, OxpBackendSettings, OxpFrontSettings
from gateway.plugins import Adapter, BackendPlugin, FrontPlugin

ADAPTER = Adapter(
    name="oxp",
    description=FRONT_DESCRIPTION,
    front=FrontPlugin(
        settings=OxpFrontSettings,
        routes="adapters.oxp.front:routes",
        presenter="adapters.oxp.presenter:PRESENTER",
    ),
    backend=BackendPlugin(settings=OxpBackendSettings, factory="adapters.oxp.backend:OxpBackend"),
)

__all__ = ["ADAPTER"]
