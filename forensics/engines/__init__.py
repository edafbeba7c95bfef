"""The serving engines' real KV allocators, driven in their own virtual environment."""
