"""The built-in toolkits that `config/gateway.yaml` serves."""
