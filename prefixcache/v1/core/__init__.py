"""The v1 block pool (``block_pool``) and its block, queue and hashing helpers
(``kv_cache_utils``), named as upstream's ``vllm.v1.core`` modules."""
