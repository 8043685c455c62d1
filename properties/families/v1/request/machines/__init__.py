"""The v1 request level's generator: the pytest modules ``prefixcache check`` runs."""
