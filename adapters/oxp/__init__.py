"""OXP (Open eXecution Protocol, seed 003): the wire codec and the front; the backend reuses the codec."""
