"""The SGLang family: a loader of upstream's radix caches and allocators from its wheel."""
