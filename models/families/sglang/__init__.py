"""The SGLang family's specification: radix prefix caches over token-slot allocators."""
