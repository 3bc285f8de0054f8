"""TypeScript tools: a pool of Node.js sidecars speaking JSON-RPC over stdio."""
