"""Sub-command groups of the CLI. Each module has ``register(app)`` and nothing else public."""
