"""The v1 pool family's generator: the pytest modules ``prefixcache check`` runs."""
