"""The vLLM CPU KV offload family: loader of upstream's ``CPUOffloadingManager`` (and 0.11.0's
``LRUOffloadingManager``), the tier behind the GPU prefix cache."""
