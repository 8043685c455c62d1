"""Unit tests of the bundled v1 block pool (``prefixcache.v1``)."""
