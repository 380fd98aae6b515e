"""Built-in transforms, one module each; adding a module registers it."""
