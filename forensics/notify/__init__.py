"""Notification exports for both sides of a cross-account exposure, their legal deadlines, the
per-account notices and the Timesketch timeline."""
