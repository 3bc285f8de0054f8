"""OAuth 2.1: the gateway as a protected resource to its clients (tokens of trusted issuers, RFC 9728
metadata, 401/403 challenges) and as a client of its upstreams."""
