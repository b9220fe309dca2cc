"""polytri: a pure-Python polyhedral loop optimizer."""
