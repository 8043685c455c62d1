"""The vLLM v1 family's specification: the BlockPool operation vocabulary and its model."""
