"""The vLLM v1 family: loader of upstream's ``BlockPool``, target selection, adapter, machine."""
