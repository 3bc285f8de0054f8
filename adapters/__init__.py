"""One package per protocol or runtime: codec, front routes and backend client together."""
