"""Built-in tools; importing a module registers its tools into ``registry.core.registry``."""
