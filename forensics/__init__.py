"""kvforensics: find out whose KV-cache data crossed to which customer, and prove it."""

__version__ = "0.1.0"
