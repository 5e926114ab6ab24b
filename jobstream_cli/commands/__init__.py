"""The command groups: consumer commands over HTTP, operator commands through the layer."""
