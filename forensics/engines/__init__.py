"""The serving engines: their real KV allocators driven in their own virtual environment, and the
page pools the simulator and reconstruction share."""
