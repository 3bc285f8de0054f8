"""Loading and validating the gateway's YAML configuration against the settings models."""

from gateway.config.loader import GatewayConfig, load_config, parse_config
from gateway.config.models import GatewaySettings, root_model

__all__ = ["GatewayConfig", "GatewaySettings", "load_config", "parse_config", "root_model"]
