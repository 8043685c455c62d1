"""The SGLang zoo: broken radix caches and allocators, each a small patch of the bundled
reference, and the search that must catch each with its invariant."""
