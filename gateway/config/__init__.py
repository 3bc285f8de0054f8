"""Loading and validating the gateway's YAML configuration."""

from gateway.config.loader import SCHEMA_PATH, GatewayConfig, load_config, parse_config

__all__ = ["SCHEMA_PATH", "GatewayConfig", "load_config", "parse_config"]
